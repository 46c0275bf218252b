//! `GET /.well-known/oauth-protected-resource[/<mcp path>]`: the RFC 9728 metadata document
//! ([`crate::auth::metadata::document`]), public, cacheable, readable from any origin; and
//! each virtual server's own, at its path.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use super::state::McpState;
use crate::auth::metadata::{document, server_document};

/// `GET /.well-known/oauth-protected-resource[/<mcp path>]`.
pub async fn serve(State(app): State<McpState>) -> Response {
    public(Json(document(&app.settings.auth, own_issuer(&app))).into_response())
}

/// `GET /.well-known/oauth-protected-resource/<virtual server's path>`: that server's own
/// resource and scopes; 404 for a path no server has.
pub async fn serve_server(State(app): State<McpState>, Path(rest): Path<String>) -> Response {
    let path = format!("/{rest}");
    if path == app.settings.server.mcp_path {
        return serve(State(app)).await;
    }
    let Some((server, resource)) = app.server.servers.by_path(&path).and_then(|s| s.resource.clone().map(|r| (s, r))) else {
        return super::headers::transport_error(axum::http::StatusCode::NOT_FOUND, "Not Found: no MCP endpoint has this path");
    };
    public(Json(server_document(&app.settings.auth, own_issuer(&app), &resource, &server.settings.scopes)).into_response())
}

fn own_issuer(app: &McpState) -> Option<&str> {
    app.settings.authorization_server.enabled.then_some(app.settings.authorization_server.issuer.as_deref()).flatten()
}

fn public(mut res: Response) -> Response {
    let h = res.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=3600"));
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    res
}
