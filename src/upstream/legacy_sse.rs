//! An upstream on the deprecated 2024-11-05 HTTP+SSE transport: one long GET stream whose
//! first event (`endpoint`) names where to POST messages; every answer, notification and
//! request of the upstream comes back on that stream. The endpoint must be on the stream's own
//! origin: an upstream cannot send toolgate's messages (and credentials) elsewhere.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use http::HeaderMap;
use http::header::{ACCEPT, CONTENT_TYPE};
use parking_lot::Mutex;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use url::Url;

use super::error::UpstreamError;
use super::http::{Bearer, HttpClient, authorize, client, is_event_stream, send_error, status_error};
use super::peer::Peer;
use crate::config::upstreams::UpstreamSettings;

#[derive(Clone)]
pub struct SseWire(Arc<Inner>);

struct Inner {
    client: reqwest::Client,
    url: Url,
    headers: HeaderMap,
    bearer: Bearer,
    /// Where messages are POSTed, from the stream's `endpoint` event.
    endpoint: Mutex<Option<Url>>,
    max: usize,
    stop: CancellationToken,
}

impl SseWire {
    /// A wire with `shared` as its client, or one of its own.
    pub fn new(settings: &UpstreamSettings, headers: HeaderMap, bearer: Bearer, shared: Option<HttpClient>) -> Result<Self, UpstreamError> {
        let credentialed = !headers.is_empty() || !matches!(bearer, Bearer::None);
        let (client, url) = match shared {
            Some(shared) => shared,
            None => client(settings, credentialed)?,
        };
        let inner = Inner {
            client,
            url,
            headers,
            bearer,
            endpoint: Mutex::new(None),
            max: settings.max_message_bytes,
            stop: CancellationToken::new(),
        };
        Ok(Self(Arc::new(inner)))
    }

    /// Opens the stream and waits (at most `timeout`) for its `endpoint` event; the rest of the
    /// stream is then read in the background, and its end ends the connection.
    pub(super) async fn open(&self, peer: &Peer, timeout: Duration) -> Result<(), UpstreamError> {
        let request = authorize(self.0.client.get(self.0.url.clone()), &self.0.headers, &self.0.bearer).await?;
        let response = request.header(ACCEPT, "text/event-stream").send().await.map_err(|e| send_error(&e))?;
        if !response.status().is_success() {
            return Err(status_error(&response, false));
        }
        if !is_event_stream(response.headers()) {
            return Err(UpstreamError::Protocol("the SSE endpoint did not answer with an event stream".into()));
        }
        let mut events = Box::pin(super::events::events(response, self.0.max));
        let first = tokio::time::timeout(timeout, events.next()).await.map_err(|_| UpstreamError::Timeout(timeout))?;
        let endpoint = match first {
            Some(Ok(event)) if event.event == "endpoint" => self.0.url.join(event.data.trim()).ok(),
            Some(Err(e)) => return Err(e),
            _ => None,
        };
        let endpoint = endpoint.ok_or_else(|| UpstreamError::Protocol("the stream's first event is not an `endpoint`".into()))?;
        if endpoint.origin() != self.0.url.origin() {
            return Err(UpstreamError::Protocol(format!("the message endpoint {endpoint} is on another origin than the stream")));
        }
        *self.0.endpoint.lock() = Some(endpoint);
        let (peer, stop) = (peer.clone(), self.0.stop.clone());
        tokio::spawn(async move {
            loop {
                let event = tokio::select! {
                    event = events.next() => event,
                    () = stop.cancelled() => return,
                };
                match event {
                    Some(Ok(event)) if event.data.is_empty() => {}
                    Some(Ok(event)) => {
                        if peer.receive(event.data.as_bytes(), None).is_err() {
                            tracing::warn!(upstream = ?peer, "ignored an event that is not JSON-RPC");
                        }
                    }
                    Some(Err(e)) => {
                        // An oversized message: nothing says which request it answered.
                        peer.fail_all(&e);
                        peer.close(format!("the upstream's event stream failed: {e}"));
                        return;
                    }
                    None => {
                        peer.close("the upstream's event stream ended");
                        return;
                    }
                }
            }
        });
        Ok(())
    }

    /// POSTs one message to the endpoint; its answer comes on the stream.
    pub(super) async fn post(&self, message: &Value) -> Result<(), UpstreamError> {
        let endpoint = self.0.endpoint.lock().clone().ok_or_else(|| UpstreamError::Disconnected("the stream is not open".into()))?;
        let body = serde_json::to_vec(message).map_err(|e| UpstreamError::Protocol(e.to_string()))?;
        let request = authorize(self.0.client.post(endpoint), &self.0.headers, &self.0.bearer).await?;
        let response = request.header(CONTENT_TYPE, "application/json").body(body).send().await.map_err(|e| send_error(&e))?;
        if response.status().is_success() { Ok(()) } else { Err(status_error(&response, false)) }
    }

    pub(super) fn stop(&self) {
        self.0.stop.cancel();
    }
}
