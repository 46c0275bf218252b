//! The ways messages reach an upstream: a child process's stdio, Streamable HTTP, or the
//! deprecated 2024-11-05 HTTP+SSE transport.

use http::{HeaderName, HeaderValue};
use serde_json::Value;

/// A request on its way out (and, over HTTP, the reading of its answer).
pub(super) type Sending = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

use super::error::UpstreamError;
use super::http::HttpWire;
use super::legacy_sse::SseWire;
use super::peer::Peer;
use super::stdio::StdioWire;

pub enum Wire {
    Stdio(StdioWire),
    Http(HttpWire),
    /// The deprecated 2024-11-05 HTTP+SSE transport.
    Sse(SseWire),
}

impl Wire {
    /// Whether the upstream is spoken in 2026-07-28 (Streamable HTTP only).
    pub(super) fn is_modern(&self) -> bool {
        matches!(self, Self::Http(w) if w.is_modern())
    }

    /// Sends request `id`; its answer comes back through [`Peer::dispatch`] (or
    /// [`Peer::fail`]). The send runs as part of whoever waits for the answer (no task of its
    /// own): dropping the future stops it and the reading of its answer's stream (which, in
    /// 2026-07-28, is how a request is cancelled). `headers` go with an HTTP request only.
    pub(super) fn send_request(&self, peer: Peer, id: i64, message: Value, headers: Vec<(HeaderName, HeaderValue)>) -> Sending {
        match self {
            Self::Stdio(w) => {
                let lines = w.lines();
                Box::pin(async move {
                    if let Err(e) = StdioWire::write(&lines, &message).await {
                        peer.fail(id, e);
                    }
                })
            }
            Self::Http(w) => {
                let http = w.clone();
                Box::pin(async move {
                    if let Err(e) = http.post(&peer, message, Some(id), headers).await {
                        if e.is_connection_lost() {
                            peer.close(e.to_string());
                        }
                        peer.fail(id, e);
                    }
                })
            }
            Self::Sse(w) => {
                let sse = w.clone();
                Box::pin(async move {
                    if let Err(e) = sse.post(&message).await {
                        if e.is_connection_lost() {
                            peer.close(e.to_string());
                        }
                        peer.fail(id, e);
                    }
                })
            }
        }
    }

    /// Sends a notification or an answer.
    pub(super) async fn send(&self, peer: &Peer, message: Value) -> Result<(), UpstreamError> {
        match self {
            Self::Stdio(w) => StdioWire::write(&w.lines(), &message).await,
            Self::Http(w) => w.post(peer, message, None, Vec::new()).await,
            Self::Sse(w) => w.post(&message).await,
        }
    }

    /// Stops the child, or ends the HTTP session.
    pub(super) fn shutdown(&self) {
        match self {
            Self::Stdio(w) => w.stop(),
            Self::Http(w) => w.end_session(),
            Self::Sse(w) => w.stop(),
        }
    }
}
