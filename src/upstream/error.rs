//! What can go wrong talking to an upstream, worded for the model and the operator: each
//! message says what happened and, where one exists, what to change.

use std::time::Duration;

use serde_json::Value;

#[derive(Clone, Debug, thiserror::Error)]
pub enum UpstreamError {
    /// The upstream answered with a JSON-RPC error.
    #[error("the upstream answered with error {code}: {message}")]
    Rpc { code: i64, message: String },
    #[error("the upstream is not connected: {0}")]
    Disconnected(String),
    #[error("the upstream did not answer within {0:?}")]
    Timeout(Duration),
    /// The upstream could not be reached, or answered HTTP with an error status.
    #[error("{0}")]
    Transport(String),
    /// The authorization server would not exchange the caller's token for the upstream.
    #[error("the authorization server refused to exchange the caller's token for this upstream: {0}")]
    Exchange(String),
    /// The upstream answered one request with an HTTP error status.
    #[error("the upstream answered HTTP {0}")]
    Status(u16),
    /// The upstream refused toolgate's credentials (HTTP 401 or 403).
    #[error("the upstream refused toolgate's credentials (HTTP {status}{challenge}); check upstreams.<name>.headers")]
    Refused { status: u16, challenge: String },
    #[error("the upstream sent a message larger than {0} bytes (upstreams.<name>.max_message_bytes)")]
    TooLarge(usize),
    /// A message within the byte limit that would cost too much decoded.
    #[error("the upstream sent a message that {0} (upstreams.<name>.max_message_values)")]
    TooComplex(String),
    /// The upstream broke the protocol (not JSON, a malformed answer).
    #[error("the upstream broke the protocol: {0}")]
    Protocol(String),
}

impl UpstreamError {
    /// A JSON-RPC `error` member as the upstream sent it.
    pub fn rpc(error: &Value) -> Self {
        let code = error.get("code").and_then(Value::as_i64).unwrap_or(-32603);
        let message = error.get("message").and_then(Value::as_str).unwrap_or("(no message)");
        // The upstream's text reaches the model: keep it to a readable length.
        let message: String = message.chars().take(500).collect();
        Self::Rpc { code, message }
    }

    /// Whether the connection itself is broken (reconnect), rather than one request.
    pub fn is_connection_lost(&self) -> bool {
        matches!(self, Self::Disconnected(_) | Self::Transport(_))
    }
}
