//! The browser's endpoints: authorize, the identity provider's callback, consent. Their
//! answers are redirects (303 after a POST, never 307: AUZ-12) or pages; none is readable
//! from another origin.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::{Budget, SignIn, pages, pairs};
use crate::authserver::authorize::Refused;
use crate::authserver::flow::{Began, Next, PageError};

/// `GET /oauth/authorize`.
pub async fn authorize(State(app): State<SignIn>, request: Request) -> Response {
    let ip = app.client_ip(request.extensions(), request.headers());
    if !app.admit(ip, Budget::Browser) {
        return pages::error(429, "too many sign-in attempts from this address; wait a minute");
    }
    let params = pairs(request.uri().query().unwrap_or_default().as_bytes());
    let headers = request.headers();
    // CON-05: remembered consent only for requests the user started (not a cross-site
    // page); a browser that does not say counts as cross-site.
    let cross_site = !matches!(headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()), Some("none" | "same-origin"));
    let cookie = app.cookie(headers);
    match app.server.begin(&params, cookie.as_deref(), cross_site).await {
        Ok(Began::SignIn { idp_url, cookie }) => {
            let mut res = redirect(StatusCode::FOUND, &idp_url);
            set_cookie(&app, &mut res, &cookie);
            res
        }
        Err(Refused::Page(message)) => pages::error(400, &message),
        Err(Refused::Redirect { redirect_uri, error, description, state, trusted }) => {
            let url = app.server.client_url(&redirect_uri, &[("error", error), ("error_description", &description)], state.as_deref());
            if trusted { redirect(StatusCode::FOUND, &url) } else { pages::refused(&description, &url) }
        }
    }
}

/// `GET /oauth/callback`: the identity provider sends the browser back here.
pub async fn callback(State(app): State<SignIn>, request: Request) -> Response {
    let ip = app.client_ip(request.extensions(), request.headers());
    if !app.admit(ip, Budget::Browser) {
        return pages::error(429, "too many requests from this address; wait a minute");
    }
    let params = pairs(request.uri().query().unwrap_or_default().as_bytes());
    let get = |name: &str| params.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    let Some(state) = get("state") else { return pages::error(400, "the identity provider's answer has no state") };
    let cookie = app.cookie(request.headers());
    if state.starts_with(crate::vault::connect::STATE_PREFIX)
        && let Some(vault) = &app.vault
    {
        // A vault step signed the browser in (the connect page, the connections page).
        let step = vault.signed_in(state, get("code"), get("error"), get("iss"), cookie.as_deref()).await;
        return super::connect::next(&app, step);
    }
    match app.server.callback(state, get("code"), get("error"), get("iss"), cookie.as_deref()).await {
        Ok(Next::Consent { tx }) => redirect(StatusCode::SEE_OTHER, &format!("/oauth/consent?tx={tx}")),
        Ok(Next::Client { url }) => redirect(StatusCode::SEE_OTHER, &url),
        Err(PageError { status, message }) => pages::error(status, &message),
    }
}

/// `GET /oauth/consent?tx=…`.
pub async fn consent_page(State(app): State<SignIn>, request: Request) -> Response {
    if !app.admit(app.client_ip(request.extensions(), request.headers()), Budget::Browser) {
        return pages::error(429, "too many requests from this address; wait a minute");
    }
    let params = pairs(request.uri().query().unwrap_or_default().as_bytes());
    let Some((_, tx)) = params.iter().find(|(k, _)| k == "tx") else { return pages::error(400, "no sign-in named") };
    let cookie = app.cookie(request.headers());
    match app.server.consent_view(tx, cookie.as_deref()).await {
        Ok(view) => pages::consent(&view),
        Err(PageError { status, message }) => pages::error(status, &message),
    }
}

/// `POST /oauth/consent`: the form's answer (`tx`, `csrf`, `decision`).
pub async fn consent_answer(State(app): State<SignIn>, request: Request) -> Response {
    if !app.admit(app.client_ip(request.extensions(), request.headers()), Budget::Browser) {
        return pages::error(429, "too many requests from this address; wait a minute");
    }
    let (parts, body) = request.into_parts();
    let headers: HeaderMap = parts.headers;
    let Ok(body) = axum::body::to_bytes(body, super::MAX_BODY).await else { return pages::error(413, "the form is too large") };
    let form = pairs(&body);
    let get = |name: &str| form.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).unwrap_or_default();
    let cookie = app.cookie(&headers);
    let approve = get("decision") == "approve";
    match app.server.consent_answer(get("tx"), get("csrf"), approve, cookie.as_deref()).await {
        Ok(url) => redirect(StatusCode::SEE_OTHER, &url),
        Err(PageError { status, message }) => pages::error(status, &message),
    }
}

pub(super) fn redirect(status: StatusCode, to: &str) -> Response {
    let Ok(location) = HeaderValue::from_str(to) else { return pages::error(500, "cannot redirect") };
    let mut res = status.into_response();
    res.headers_mut().insert(header::LOCATION, location);
    res.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res.headers_mut().insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    res
}

/// The browser-binding cookie (CON-03): HttpOnly, SameSite=Lax (the identity provider's
/// redirect back is a top-level GET, which Lax allows), `__Host-` and Secure on https, for
/// as long as a transaction lives.
pub(super) fn set_cookie(app: &SignIn, res: &mut Response, value: &str) {
    let secure = if app.server.secure_cookies() { "; Secure" } else { "" };
    let max_age = app.server.settings().transaction_ttl_secs;
    let text = format!("{}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age}{secure}", app.cookie_name());
    if let Ok(v) = HeaderValue::from_str(&text) {
        res.headers_mut().append(header::SET_COOKIE, v);
    }
}
