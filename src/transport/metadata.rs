//! `GET /.well-known/oauth-protected-resource[/<mcp path>]`: the RFC 9728 metadata document
//! ([`crate::auth::metadata::document`]), public, cacheable, readable from any origin.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use super::state::McpState;
use crate::auth::metadata::document;

/// `GET /.well-known/oauth-protected-resource[/<mcp path>]`.
pub async fn serve(State(app): State<McpState>) -> Response {
    let own = app.settings.authorization_server.enabled.then_some(app.settings.authorization_server.issuer.as_deref()).flatten();
    let mut res = Json(document(&app.settings.auth, own)).into_response();
    let h = res.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=3600"));
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    res
}
