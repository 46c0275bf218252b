//! Header names, content negotiation (`Accept` with q-values, `Content-Type`), and the
//! HTTP-level error responses every transport shares.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode, header};
use serde_json::Value;

use crate::protocol::jsonrpc::{self, RequestId, RpcError, code};

pub const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
pub const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
pub const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
pub const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
pub const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");

/// Which response media types the client accepts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Accepts {
    pub json: bool,
    pub sse: bool,
}

/// Parses every `Accept` header: media ranges in any order, with parameters and q-values; a
/// range with `q=0` is refused, wildcards count.
pub fn accepts(headers: &HeaderMap) -> Accepts {
    let mut out = Accepts::default();
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else { continue };
        for range in value.split(',') {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let refused = parts.any(|p| {
                let p = p.trim();
                p.strip_prefix("q=").or_else(|| p.strip_prefix("Q=")).and_then(|q| q.trim().parse::<f32>().ok()).is_some_and(|q| q <= 0.0)
            });
            if refused {
                continue;
            }
            match media.as_str() {
                "*/*" => {
                    out.json = true;
                    out.sse = true;
                }
                "application/*" | "application/json" => out.json = true,
                "text/*" | "text/event-stream" => out.sse = true,
                _ => {}
            }
        }
    }
    out
}

/// Whether the body is declared as JSON (`application/json`, optionally `charset=utf-8`).
pub fn is_json_body(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) else { return false };
    let Ok(mime) = value.parse::<mime::Mime>() else { return false };
    let charset_ok = mime.get_param(mime::CHARSET).is_none_or(|c| c == mime::UTF_8);
    mime.type_() == mime::APPLICATION && mime.subtype() == mime::JSON && charset_ok
}

/// A header as a string, if present and printable.
pub fn get<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// A JSON response.
pub fn json(status: StatusCode, value: &Value) -> Response<Body> {
    json_text(status, value.to_string())
}

/// A JSON response from text that is already serialized.
pub fn json_text(status: StatusCode, json: String) -> Response<Body> {
    let mut res = Response::new(Body::from(json));
    *res.status_mut() = status;
    res.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    res
}

/// An HTTP error carrying a JSON-RPC error body (id omitted unless known, J-06).
pub fn error(status: StatusCode, id: Option<&RequestId>, err: &RpcError) -> Response<Body> {
    json(status, &jsonrpc::error_message(id, err))
}

/// An HTTP error with the transport error code (-32000) and a message.
pub fn transport_error(status: StatusCode, message: impl Into<String>) -> Response<Body> {
    error(status, None, &RpcError::new(code::TRANSPORT, message.into()))
}

/// A refused request, kept small so handlers can pass it around as an `Err` and turn it
/// into a response at the edge.
#[derive(Debug, Clone)]
pub struct Rejection {
    pub status: StatusCode,
    pub code: i32,
    pub message: String,
}

impl Rejection {
    pub fn new(status: StatusCode, code: i32, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into() }
    }

    /// A transport-level refusal (-32000).
    pub fn transport(status: StatusCode, message: impl Into<String>) -> Self {
        Self::new(status, code::TRANSPORT, message)
    }
}

impl axum::response::IntoResponse for Rejection {
    fn into_response(self) -> Response<Body> {
        error(self.status, None, &RpcError::new(self.code, self.message))
    }
}

/// 202 Accepted with no body, for notifications and responses (T-14).
pub fn accepted() -> Response<Body> {
    let mut res = Response::new(Body::empty());
    *res.status_mut() = StatusCode::ACCEPTED;
    res
}

/// 405 with the allowed methods.
pub fn method_not_allowed(allow: &'static str) -> Response<Body> {
    let mut res = transport_error(StatusCode::METHOD_NOT_ALLOWED, format!("Method not allowed; this endpoint accepts {allow}"));
    res.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allow));
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(name: HeaderName, value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, HeaderValue::from_str(value).expect("valid header"));
        h
    }

    #[test]
    fn accept_parsing_handles_order_params_and_q() {
        assert_eq!(accepts(&with(header::ACCEPT, "text/event-stream, application/json")), Accepts { json: true, sse: true });
        assert_eq!(accepts(&with(header::ACCEPT, "application/json;q=0.9 , text/event-stream;q=1")), Accepts { json: true, sse: true });
        assert_eq!(accepts(&with(header::ACCEPT, "application/json, text/event-stream;q=0")), Accepts { json: true, sse: false });
        assert_eq!(accepts(&with(header::ACCEPT, "*/*")), Accepts { json: true, sse: true });
        assert_eq!(accepts(&HeaderMap::new()), Accepts::default());
    }

    #[test]
    fn content_type_must_be_json_utf8() {
        assert!(is_json_body(&with(header::CONTENT_TYPE, "application/json")));
        assert!(is_json_body(&with(header::CONTENT_TYPE, "application/json; charset=UTF-8")));
        assert!(!is_json_body(&with(header::CONTENT_TYPE, "application/json; charset=latin1")));
        assert!(!is_json_body(&with(header::CONTENT_TYPE, "text/plain")));
        assert!(!is_json_body(&HeaderMap::new()));
    }
}
