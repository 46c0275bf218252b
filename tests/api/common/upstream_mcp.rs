//! An upstream MCP server (Streamable HTTP, JSON answers) on loopback that accepts only
//! access tokens its authorization server ([`super::upstream_as::UpstreamAs`]) issued and has
//! not revoked: anything else gets a 401 whose `WWW-Authenticate` points at its RFC 9728
//! protected-resource metadata. One tool, `whoami`, answers with the token's user. It
//! records the `Authorization` header of every request, by JSON-RPC method.

use std::sync::Arc;

use axum::Json;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::upstream_as::UpstreamAs;

#[derive(Clone)]
pub struct UpstreamMcp {
    /// `http://127.0.0.1:<port>/mcp`
    pub url: String,
    /// `(method, Authorization header)` of every POST.
    seen: Arc<Mutex<Vec<(String, String)>>>,
}

impl UpstreamMcp {
    pub async fn start(auth: UpstreamAs) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let origin = format!("http://127.0.0.1:{}", listener.local_addr().expect("addr").port());
        let this = Self { url: format!("{origin}/mcp"), seen: Arc::default() };
        let prm = json!({"resource": this.url, "authorization_servers": [auth.issuer], "bearer_methods_supported": ["header"]});
        let challenge = format!("Bearer resource_metadata=\"{origin}/.well-known/oauth-protected-resource/mcp\"");
        let app = axum::Router::new().route("/.well-known/oauth-protected-resource/mcp", get(move || async move { Json(prm) })).route(
            "/mcp",
            get(|| async { StatusCode::METHOD_NOT_ALLOWED }).delete(|| async { StatusCode::OK }).post({
                let this = this.clone();
                move |headers: HeaderMap, body: String| async move { this.serve(&auth, &challenge, &headers, &body) }
            }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await });
        this
    }

    /// The `Authorization` headers of the requests for `method`, in order.
    pub fn authorizations(&self, method: &str) -> Vec<String> {
        self.seen.lock().iter().filter(|(m, _)| m == method).map(|(_, a)| a.clone()).collect()
    }

    /// Every `Authorization` header received.
    pub fn all_authorizations(&self) -> Vec<String> {
        self.seen.lock().iter().map(|(_, a)| a.clone()).collect()
    }

    fn serve(&self, auth: &UpstreamAs, challenge: &str, headers: &HeaderMap, body: &str) -> Response {
        let message: Value = serde_json::from_str(body).unwrap_or_default();
        let method = message["method"].as_str().unwrap_or_default().to_owned();
        let authorization = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        self.seen.lock().push((method.clone(), authorization.clone()));
        let Some(user) = authorization.strip_prefix("Bearer ").and_then(|t| auth.user_of(t)) else {
            return (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, challenge.to_owned())]).into_response();
        };
        let reply = |result: Value| Json(json!({"jsonrpc": "2.0", "id": message["id"], "result": result}));
        match method.as_str() {
            "initialize" => {
                let result = json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "notes", "version": "1"}});
                ([("mcp-session-id", "notes-session")], reply(result)).into_response()
            }
            "tools/list" => reply(
                json!({"tools": [{"name": "whoami", "description": "Says who the token is for.", "inputSchema": {"type": "object"}}]}),
            )
            .into_response(),
            "tools/call" => reply(json!({"content": [{"type": "text", "text": user}]})).into_response(),
            "ping" => reply(json!({})).into_response(),
            _ => StatusCode::ACCEPTED.into_response(),
        }
    }
}
