//! How an admission refusal ([`Refused`]) is answered: as the HTTP response of the request that
//! carried the message, or as a JSON-RPC error where the HTTP status is already decided (an item
//! of a batch, a message answered on a 2024-11-05 SSE connection).

use axum::body::Body;
use axum::http::{Response, StatusCode};
use serde_json::{Value, json};

use super::headers;
use super::state::McpState;
use crate::admission::Refused;
use crate::auth::bearer::Refusal;
use crate::limits::Rejection;
use crate::protocol::jsonrpc::{self, RequestId, RpcError, code};

/// The HTTP answer: 403 with the bearer gate's `insufficient_scope` challenge, or the limit's
/// 429 (503) with `Retry-After`.
pub fn http(app: &McpState, refused: &Refused, id: Option<&RequestId>) -> Response<Body> {
    match (refused, &app.auth) {
        (Refused::Scope(refusal), Some(auth)) => super::bearer::challenge(auth, refusal),
        (Refused::Scope(refusal), None) => headers::error(StatusCode::FORBIDDEN, id, &scope_error(refusal)),
        (Refused::Limited(rejection), _) => limited(rejection, id),
    }
}

/// A limit's refusal: its status (429, or 503 when limits cannot be checked), `Retry-After`,
/// and the JSON-RPC error body.
pub fn limited(rejection: &Rejection, id: Option<&RequestId>) -> Response<Body> {
    let mut res = Response::new(Body::from(rejection.jsonrpc_message(id).to_string()));
    *res.status_mut() = rejection.status();
    let (name, value) = rejection.retry_after_header();
    res.headers_mut().insert(name, value);
    res.headers_mut().insert(axum::http::header::CONTENT_TYPE, axum::http::HeaderValue::from_static("application/json"));
    res
}

/// The JSON-RPC error response for the refused message.
pub fn jsonrpc(refused: &Refused, id: Option<&RequestId>) -> Value {
    match refused {
        Refused::Scope(refusal) => jsonrpc::error_message(id, &scope_error(refusal)),
        Refused::Limited(rejection) => rejection.jsonrpc_message(id),
    }
}

/// `scope` is what to ask for (the bearer challenge's hint, capped with the missing scopes
/// first), `missing` what the token lacks; a refusal of another kind says only what it is.
fn scope_error(refusal: &Refusal) -> RpcError {
    let Refusal::InsufficientScope(shortfall) = refusal else {
        return RpcError::new(code::TRANSPORT, format!("Forbidden: the request was refused ({})", refusal.kind()))
            .with_data(json!({ "error": refusal.kind() }));
    };
    RpcError::new(code::TRANSPORT, format!("Forbidden: {}", shortfall.describe())).with_data(json!({
        "error": "insufficient_scope",
        "scope": shortfall.hint(SCOPE_HINT_MAX),
        "missing": shortfall.missing,
    }))
}

/// The longest `scope` hint of an error body (bytes), as the challenge's.
const SCOPE_HINT_MAX: usize = 2048;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_that_is_not_a_scope_refusal_says_what_it_is() {
        let error = scope_error(&Refusal::Invalid("expired".into()));
        let text = serde_json::to_string(&error).expect("serializes");
        assert!(text.contains("Forbidden: the request was refused (invalid_token)"), "{text}");
        assert!(!text.contains("lacks the scopes ;"), "{text}");
    }
}
