//! The public router called in process (`tower::ServiceExt::oneshot`), without a socket: for
//! the rules of the front door, the bearer gate and the limits, where a connection adds
//! nothing. Each request carries the peer address the accept loop would have put there.

use std::net::SocketAddr;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use http::{Request, Response};
use serde_json::Value;
use toolgate::app::{self, AppState};
use toolgate::config::Settings;
use tower::ServiceExt as _;

use super::ACCEPT_BOTH;

pub const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

/// The application's state and router; nothing listens.
pub struct InProcess {
    pub state: AppState,
    router: Router,
    /// Where the request comes from (as `ConnectInfo`).
    pub peer: SocketAddr,
    _data: tempfile::TempDir,
}

impl InProcess {
    pub async fn start() -> Self {
        Self::with(|_| {}).await
    }

    /// The test settings, adjusted.
    pub async fn with(adjust: impl FnOnce(&mut Settings)) -> Self {
        let data = tempfile::tempdir().expect("data dir");
        let mut settings = super::test_settings(data.path());
        adjust(&mut settings);
        let state = AppState::new(settings).await.expect("state");
        let router = app::router(state.clone());
        Self { state, router, peer: "127.0.0.1:50000".parse().expect("addr"), _data: data }
    }

    /// Sends `request` from [`Self::peer`].
    pub async fn send(&self, mut request: Request<Body>) -> Response<Body> {
        request.extensions_mut().insert(ConnectInfo(self.peer));
        self.router.clone().oneshot(request).await.expect("the router is infallible")
    }

    /// `POST /mcp` with `body`, the headers a loopback client sends, and `extra` (which
    /// replace them by name).
    pub async fn post(&self, body: &str, extra: &[(&str, &str)]) -> Response<Body> {
        let mut request = Request::post("/mcp")
            .header("host", "127.0.0.1")
            .header("content-type", "application/json")
            .header("accept", ACCEPT_BOTH)
            .body(Body::from(body.to_owned()))
            .expect("request");
        for (name, value) in extra {
            let name = http::HeaderName::from_bytes(name.as_bytes()).expect("header name");
            request.headers_mut().insert(name, value.parse().expect("header value"));
        }
        self.send(request).await
    }
}

/// A response header as text ("" when absent).
pub fn header<'a>(res: &'a Response<Body>, name: &str) -> &'a str {
    res.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or_default()
}

/// The response body as JSON (`Null` when it is not).
pub async fn json(res: Response<Body>) -> Value {
    let bytes = axum::body::to_bytes(res.into_body(), usize::MAX).await.expect("body");
    serde_json::from_slice(&bytes).unwrap_or(Value::Null)
}
