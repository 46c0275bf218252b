//! The clients' endpoints: metadata, keys, token, revocation, registration. JSON in and out,
//! `Cache-Control: no-store` on everything that carries a token (OA21 §3.2.3).

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde_json::{Value, json};

use super::{Budget, SignIn, pairs};
use crate::authserver::token::{Form, TokenError};

/// `GET /.well-known/oauth-authorization-server` (and `openid-configuration`).
pub async fn metadata(State(app): State<SignIn>) -> Response {
    cacheable(json_response(StatusCode::OK, &app.server.metadata()))
}

/// `GET /oauth/jwks`.
pub async fn jwks(State(app): State<SignIn>) -> Response {
    let doc = serde_json::to_value(app.server.keys().jwks()).unwrap_or(Value::Null);
    cacheable(json_response(StatusCode::OK, &doc))
}

/// `POST /oauth/token`.
pub async fn token(State(app): State<SignIn>, request: Request) -> Response {
    let (params, basic) = match client_form(&app, request, Budget::Token).await {
        Ok(read) => read,
        Err(e) => return oauth_error(&e),
    };
    match app.server.token(&Form { params: &params, basic }).await {
        Ok(body) => json_response(StatusCode::OK, &body),
        Err(e) => oauth_error(&e),
    }
}

/// `POST /oauth/revoke` (RFC 7009).
pub async fn revoke(State(app): State<SignIn>, request: Request) -> Response {
    let (params, basic) = match client_form(&app, request, Budget::Browser).await {
        Ok(read) => read,
        Err(e) => return oauth_error(&e),
    };
    match app.server.revoke(&Form { params: &params, basic }).await {
        Ok(()) => json_response(StatusCode::OK, &json!({})),
        Err(e) => oauth_error(&e),
    }
}

/// A client's form request, within its address's `budget`: the parameters, and the HTTP
/// Basic credentials if it sent them.
async fn client_form(
    app: &SignIn,
    request: Request,
    budget: Budget,
) -> Result<(Vec<(String, String)>, Option<(String, String)>), TokenError> {
    if !app.admit(app.client_ip(request.extensions(), request.headers()), budget) {
        let description = "too many requests; wait a minute".into();
        return Err(TokenError { status: 429, error: "slow_down", description, basic_challenge: false });
    }
    let (headers, body) = read_form(request).await?;
    Ok((pairs(&body), basic_credentials(&headers)?))
}

/// `POST /oauth/register` (RFC 7591).
pub async fn register(State(app): State<SignIn>, request: Request) -> Response {
    let ip = app.client_ip(request.extensions(), request.headers());
    if !app.admit(ip, Budget::Register) {
        return json_response(
            StatusCode::TOO_MANY_REQUESTS,
            &json!({"error": "slow_down", "error_description": "too many registrations from this address"}),
        );
    }
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or(v.strip_prefix("bearer ")))
        .map(str::to_owned);
    if !crate::transport::headers::is_json_body(request.headers()) {
        let body = json!({"error": "invalid_client_metadata", "error_description": "send the client metadata as application/json"});
        return json_response(StatusCode::BAD_REQUEST, &body);
    }
    let Ok(body) = axum::body::to_bytes(request.into_body(), super::MAX_BODY).await else {
        return json_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            &json!({"error": "invalid_client_metadata", "error_description": "the body is too large"}),
        );
    };
    match app.server.clients().register(&body, bearer.as_deref()).await {
        Ok(registered) => json_response(StatusCode::CREATED, &registered),
        Err(e) => {
            let status = match e.error {
                "invalid_token" => StatusCode::UNAUTHORIZED,
                "access_denied" => StatusCode::FORBIDDEN,
                "server_error" => StatusCode::SERVICE_UNAVAILABLE,
                _ => StatusCode::BAD_REQUEST,
            };
            json_response(status, &json!({"error": e.error, "error_description": e.description}))
        }
    }
}

async fn read_form(request: Request) -> Result<(HeaderMap, axum::body::Bytes), TokenError> {
    let (parts, body) = request.into_parts();
    let form_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(';').next().is_some_and(|m| m.trim().eq_ignore_ascii_case("application/x-www-form-urlencoded")));
    if !form_type {
        return Err(TokenError::new("invalid_request", "send the parameters as application/x-www-form-urlencoded"));
    }
    let body =
        axum::body::to_bytes(body, super::MAX_BODY).await.map_err(|_| TokenError::new("invalid_request", "the body is too large"))?;
    Ok((parts.headers, body))
}

/// HTTP Basic client credentials, decoded (RFC 6749 §2.3.1: each part is form-urlencoded
/// inside the base64).
fn basic_credentials(headers: &HeaderMap) -> Result<Option<(String, String)>, TokenError> {
    let Some(value) = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) else { return Ok(None) };
    let bad =
        || TokenError { status: 401, error: "invalid_client", description: "malformed Basic credentials".into(), basic_challenge: true };
    let encoded = value.strip_prefix("Basic ").or(value.strip_prefix("basic ")).ok_or_else(bad)?;
    let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).map_err(|_| bad())?;
    let text = String::from_utf8(decoded).map_err(|_| bad())?;
    let (id, secret) = text.split_once(':').ok_or_else(bad)?;
    let unescape =
        |s: &str| url::form_urlencoded::parse(format!("x={s}").as_bytes()).next().map(|(_, v)| v.into_owned()).unwrap_or_default();
    Ok(Some((unescape(id), unescape(secret))))
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut res = (status, axum::Json(body)).into_response();
    res.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res.headers_mut().insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    res
}

fn cacheable(mut res: Response) -> Response {
    res.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=300"));
    res
}

fn oauth_error(e: &TokenError) -> Response {
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST);
    let mut res = json_response(status, &json!({"error": e.error, "error_description": e.description}));
    if e.basic_challenge {
        res.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"toolgate\""));
    }
    res
}
