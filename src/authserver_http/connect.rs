//! The vault's browser endpoints (`crate::vault::connect` is the flow): following a connect
//! link, confirming, the upstream's callback, the user's connections page, and the Client ID
//! Metadata Document toolgate serves about itself for each per-user upstream.
//!
//! ```text
//! GET  /oauth/connect/{upstream}?c=…        a connect link (from an elicitation)
//! GET  /oauth/vault/confirm?id=…  POST      the confirmation page and its answer
//! GET  /oauth/vault/callback/{upstream}     the upstream's authorization server's answer
//! GET  /oauth/connections   POST            the user's connections: list, disconnect, connect
//! GET  /oauth/vault/client/{upstream}       toolgate's Client ID Metadata Document there
//! ```

use axum::Json;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::browser::{redirect, set_cookie};
use super::{Budget, SignIn, connect_pages, pages, pairs};
use crate::authserver::flow::PageError;
use crate::vault::connect::ConnectNext;

/// Where a step's answer sends the browser.
pub(super) fn next(app: &SignIn, step: Result<ConnectNext, PageError>) -> Response {
    match step {
        Ok(ConnectNext::Redirect { url, cookie }) => {
            let mut res = redirect(StatusCode::SEE_OTHER, &url);
            if let Some(cookie) = cookie {
                set_cookie(app, &mut res, &cookie);
            }
            res
        }
        Ok(ConnectNext::Confirm { id }) => redirect(StatusCode::SEE_OTHER, &format!("/oauth/vault/confirm?id={id}")),
        Ok(ConnectNext::Manage { id }) => redirect(StatusCode::SEE_OTHER, &format!("/oauth/connections?s={id}")),
        Err(PageError { status: 200, message }) => connect_pages::notice(&message),
        Err(PageError { status, message }) => pages::error(status, &message),
    }
}

fn query(request: &Request) -> Vec<(String, String)> {
    pairs(request.uri().query().unwrap_or_default().as_bytes())
}

fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// The vault, and the request within the browser budget.
macro_rules! vault_or_page {
    ($app:expr, $request:expr) => {{
        if !$app.admit($app.client_ip($request.extensions(), $request.headers()), Budget::Browser) {
            return pages::error(429, "too many requests from this address; wait a minute");
        }
        match &$app.vault {
            Some(vault) => vault.clone(),
            None => return pages::error(404, "per-user connections are not enabled on this server"),
        }
    }};
}

/// `GET /oauth/connect/{upstream}?c=…`.
pub async fn follow(State(app): State<SignIn>, Path(upstream): Path<String>, request: Request) -> Response {
    let vault = vault_or_page!(app, request);
    let params = query(&request);
    let step = vault.follow_link(&upstream, param(&params, "c").unwrap_or_default()).await;
    next(&app, step)
}

/// `GET /oauth/vault/confirm?id=…`.
pub async fn confirm_page(State(app): State<SignIn>, request: Request) -> Response {
    let vault = vault_or_page!(app, request);
    let params = query(&request);
    let cookie = app.cookie(request.headers());
    match vault.confirm_view(param(&params, "id").unwrap_or_default(), cookie.as_deref()).await {
        Ok(view) => connect_pages::confirm(&view),
        Err(PageError { status, message }) => pages::error(status, &message),
    }
}

/// `POST /oauth/vault/confirm` (`id`, `csrf`, `decision`).
pub async fn confirm_answer(State(app): State<SignIn>, request: Request) -> Response {
    let vault = vault_or_page!(app, request);
    let cookie = app.cookie(request.headers());
    let Ok(body) = axum::body::to_bytes(request.into_body(), super::MAX_BODY).await else {
        return pages::error(413, "the form is too large");
    };
    let form = pairs(&body);
    let get = |name: &str| param(&form, name).unwrap_or_default();
    let step = vault.confirm_answer(get("id"), get("csrf"), get("decision") == "approve", cookie.as_deref()).await;
    next(&app, step)
}

/// `GET /oauth/vault/callback/{upstream}`.
pub async fn callback(State(app): State<SignIn>, Path(upstream): Path<String>, request: Request) -> Response {
    let vault = vault_or_page!(app, request);
    let params = query(&request);
    let cookie = app.cookie(request.headers());
    let Some(state) = param(&params, "state") else {
        return pages::error(400, "the answer has no state; start again from your application");
    };
    let done = vault
        .upstream_callback(&upstream, state, param(&params, "code"), param(&params, "error"), param(&params, "iss"), cookie.as_deref())
        .await;
    match done {
        Ok(upstream) => connect_pages::connected(&upstream),
        Err(PageError { status, message }) => pages::error(status, &message),
    }
}

/// `GET /oauth/connections[?s=…]`: the page of a signed-in transaction, or a new sign-in.
pub async fn connections(State(app): State<SignIn>, request: Request) -> Response {
    let vault = vault_or_page!(app, request);
    let params = query(&request);
    let cookie = app.cookie(request.headers());
    if let Some(id) = param(&params, "s") {
        return match vault.manage_view(id, cookie.as_deref(), &app.per_user_upstreams()).await {
            Ok(view) => connect_pages::connections(&view),
            Err(PageError { status, message }) => pages::error(status, &message),
        };
    }
    let step = vault.manage_begin().await;
    next(&app, step)
}

/// `POST /oauth/connections` (`s`, `csrf`, `action`, `target`).
pub async fn connections_action(State(app): State<SignIn>, request: Request) -> Response {
    let vault = vault_or_page!(app, request);
    let cookie = app.cookie(request.headers());
    let Ok(body) = axum::body::to_bytes(request.into_body(), super::MAX_BODY).await else {
        return pages::error(413, "the form is too large");
    };
    let form = pairs(&body);
    let get = |name: &str| param(&form, name).unwrap_or_default();
    let step = vault.manage_action(get("s"), get("csrf"), get("action"), get("target"), cookie.as_deref()).await;
    next(&app, step)
}

/// `GET /oauth/vault/client/{upstream}`: who toolgate is at that upstream's authorization
/// server when it identifies itself by this document (CIMD): a confidential-less web client
/// whose one redirect is the vault's callback.
pub async fn metadata_document(State(app): State<SignIn>, Path(upstream): Path<String>) -> Response {
    let Some(auth) = app.vault.as_ref().and_then(|v| v.authorization(&upstream)).filter(|a| a.settings.client_id.is_none()) else {
        return (StatusCode::NOT_FOUND, Json(json!({ "error": "no such client" }))).into_response();
    };
    let document = json!({
        "client_id": auth.metadata_document_url,
        "client_name": format!("toolgate ({upstream})"),
        "redirect_uris": [auth.redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": "web",
    });
    let mut res = Json(document).into_response();
    res.headers_mut().insert(axum::http::header::CACHE_CONTROL, axum::http::HeaderValue::from_static("max-age=3600"));
    res
}
