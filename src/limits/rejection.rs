//! A refused request: which limit refused it and when to retry, with its HTTP status,
//! `Retry-After` and JSON-RPC error (the transport renders it: `transport::refusal`).

use std::fmt;
use std::time::Duration;

use http::header::RETRY_AFTER;
use http::{HeaderName, HeaderValue, StatusCode};
use serde_json::{Value, json};

use crate::protocol::jsonrpc::{self, RequestId, RpcError, code};

/// Which limit refused the request. Its [`Reason::as_str`] is the `data.limit` value clients see.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The client's own request budget (`requests_per_minute`).
    Client,
    /// The client's budget for a tool (the tool's own rate, or the shared tool budget).
    Tool,
    /// The server-wide ceiling across all clients.
    Global,
    /// Too many failed authentication attempts from the client's address.
    AuthFailures,
    /// The shared store of `backend = "redis"` is unreachable and `on_error = "closed"`: not
    /// a quota, so it is answered with 503, not 429.
    BackendUnavailable,
    /// The client holds as many of these open as its cap allows (see [`Caps`](super::Caps)).
    Held(super::Held),
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Client => "client",
            Self::Tool => "tool",
            Self::Global => "global",
            Self::AuthFailures => "auth_failures",
            Self::BackendUnavailable => "backend_unavailable",
            Self::Held(super::Held::Session) => "sessions",
            Self::Held(_) => "streams",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Self::Client => "the per-client request limit",
            Self::Tool => "the per-client limit for this tool",
            Self::Global => "the server-wide request limit",
            Self::AuthFailures => "the limit on failed authentication attempts from this address",
            Self::BackendUnavailable => "the shared rate-limit store is unreachable",
            Self::Held(super::Held::Session) => {
                "this client holds as many open sessions as sessions.max_per_client allows; end one with DELETE or let an idle one expire"
            }
            Self::Held(_) => "this client holds as many open streams of this kind as sse.max_streams_per_client allows; close one first",
        }
    }
}

/// A request refused by a limiter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// How long until the same request would be admitted (exact, from the limiter's clock).
    pub retry_after: Duration,
    pub reason: Reason,
}

impl Rejection {
    /// The HTTP status of a refusal (RFC 6585 §4).
    pub const HTTP_STATUS: StatusCode = StatusCode::TOO_MANY_REQUESTS;

    /// The JSON-RPC error code: -32000, the implementation-defined server error this server
    /// already uses for transport-level refusals (`code::TRANSPORT`, the TS SDK convention).
    /// MCP defines no rate-limit code and a new private code would mean nothing to any client;
    /// clients that care tell rate limiting apart by `data.limit` and `data.retryAfterMs`.
    pub const JSONRPC_CODE: i32 = code::TRANSPORT;

    pub fn new(retry_after: Duration, reason: Reason) -> Self {
        Self { retry_after, reason }
    }

    /// The HTTP status: [`HTTP_STATUS`](Self::HTTP_STATUS) (429) for a limit, 503 when
    /// limits cannot be checked at all ([`Reason::BackendUnavailable`]).
    pub fn status(&self) -> StatusCode {
        match self.reason {
            Reason::BackendUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            _ => Self::HTTP_STATUS,
        }
    }

    /// `Retry-After` in whole seconds, rounded up and at least 1: the header has no fractions,
    /// and 0 would invite an immediate retry that is bound to be refused again.
    pub fn retry_after_secs(&self) -> u64 {
        let secs = self.retry_after.as_secs() + u64::from(self.retry_after.subsec_nanos() > 0);
        secs.max(1)
    }

    /// The wait in milliseconds, rounded up and at least 1 (the precise hint for the body).
    pub fn retry_after_ms(&self) -> u64 {
        let ms = self.retry_after.as_millis() + u128::from(!self.retry_after.subsec_nanos().is_multiple_of(1_000_000));
        u64::try_from(ms).unwrap_or(u64::MAX).max(1)
    }

    /// The `Retry-After` header of the 429.
    pub fn retry_after_header(&self) -> (HeaderName, HeaderValue) {
        (RETRY_AFTER, HeaderValue::from(self.retry_after_secs()))
    }

    /// The JSON-RPC error object: `{"code": -32000, "message": "...", "data": {"retryAfterMs":
    /// ..., "limit": "client" | "tool" | "global" | "auth_failures" | "backend_unavailable" |
    /// "sessions" | "streams"}}`.
    pub fn rpc_error(&self) -> RpcError {
        let message = match self.reason {
            Reason::BackendUnavailable => {
                format!("Service unavailable: {}; retry after {} s", self.reason.describe(), self.retry_after_secs())
            }
            Reason::Held(_) => format!("Too many open: {}; retry after {} s", self.reason.describe(), self.retry_after_secs()),
            _ => format!("Rate limit exceeded: {}; retry after {} s", self.reason.describe(), self.retry_after_secs()),
        };
        RpcError::new(Self::JSONRPC_CODE, message)
            .with_data(json!({ "retryAfterMs": self.retry_after_ms(), "limit": self.reason.as_str() }))
    }

    /// A complete JSON-RPC error response for the refused request (`id` omitted when unknown).
    /// The same value serves as the 429 body and as an event in an already-open SSE stream,
    /// where the HTTP status can no longer change.
    pub fn jsonrpc_message(&self, id: Option<&RequestId>) -> Value {
        jsonrpc::error_message(id, &self.rpc_error())
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rate limited by {} limit for {:?}", self.reason.as_str(), self.retry_after)
    }
}

impl std::error::Error for Rejection {}
