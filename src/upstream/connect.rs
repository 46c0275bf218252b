//! Opening a connection: start the child or build the HTTP client with the upstream's own
//! credentials, then learn what the upstream is: `server/discover` (2026-07-28) on Streamable
//! HTTP unless `protocol = "legacy"`, else (or when the upstream does not take the probe) the
//! handshake (`initialize`, `notifications/initialized`).

use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};

use super::error::UpstreamError;
use super::http::{Bearer, HttpClient, HttpWire};
use super::legacy_sse::SseWire;
use super::peer::Peer;
use super::wire::Wire;
use crate::config::ToolSettings;
use crate::config::upstreams::{HttpTransport, UpstreamProtocol, UpstreamSettings};
use crate::protocol::ProtocolVersion;

/// What the upstream said about itself.
#[derive(Debug)]
pub struct Handshake {
    pub version: String,
    pub server_info: Option<Value>,
    /// What the upstream says it serves (`tools`, `resources`, `prompts`, …).
    pub capabilities: Value,
}

/// How a connection is opened.
#[derive(Clone, Debug)]
pub struct Open {
    pub bearer: Bearer,
    /// Open the GET stream for what the upstream says unprompted (`list_changed`): the
    /// upstream's main connection does; a caller's own connection does not need it.
    pub listen: bool,
    /// The HTTP client to use (shared by callers' own connections); `None` builds one.
    pub client: Option<HttpClient>,
    /// Where a stdio upstream's stderr goes (the upstream's link keeps it for its status).
    pub stderr: Option<std::sync::Arc<super::stderr::Stderr>>,
}

/// Connects and completes the handshake within `connect_timeout_ms`. A `url` upstream on
/// `transport = "auto"` that refuses the first POST (400, 404, 405) is tried on the 2024-11-05
/// SSE transport, as the spec's backwards-compatibility section describes.
pub async fn connect(
    name: &str,
    settings: &UpstreamSettings,
    tools: &ToolSettings,
    open: Open,
) -> Result<(Peer, Handshake), UpstreamError> {
    let timeout = Duration::from_millis(settings.connect_timeout_ms);
    if settings.stdio.is_some() {
        let sink = open.stderr.clone().unwrap_or_else(|| std::sync::Arc::new(super::stderr::Stderr::new(name)));
        let peer = super::stdio::spawn(name, settings, tools, sink)?;
        return finish(peer, None, UpstreamProtocol::Legacy, timeout, &open).await;
    }
    if settings.transport == HttpTransport::Sse {
        return connect_sse(name, settings, &open, timeout).await;
    }
    let wire = HttpWire::new(settings, credentials(settings)?, open.bearer.clone(), open.client.clone())?;
    let peer = Peer::new(name, Wire::Http(wire.clone()), super::inbound::budget(settings));
    match finish(peer, Some(wire), settings.protocol, timeout, &open).await {
        Err(UpstreamError::Status(400 | 404 | 405)) if settings.transport == HttpTransport::Auto => {
            connect_sse(name, settings, &open, timeout).await
        }
        other => other,
    }
}

async fn connect_sse(name: &str, settings: &UpstreamSettings, open: &Open, timeout: Duration) -> Result<(Peer, Handshake), UpstreamError> {
    let wire = SseWire::new(settings, credentials(settings)?, open.bearer.clone(), open.client.clone())?;
    let peer = Peer::new(name, Wire::Sse(wire.clone()), super::inbound::budget(settings));
    let opening = Opening(Some(peer.clone()));
    wire.open(&peer, timeout).await?;
    opening.disarm();
    finish(peer, None, UpstreamProtocol::Legacy, timeout, open).await
}

/// Closes a connection that never finished opening: its handshake failed, or the future
/// opening it was dropped (the upstream was removed or replaced meanwhile, or a caller's call
/// ended), so no child process or stream outlives the attempt.
struct Opening(Option<Peer>);

impl Opening {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for Opening {
    fn drop(&mut self) {
        if let Some(peer) = self.0.take() {
            peer.close("the connection was abandoned before its handshake completed");
        }
    }
}

/// What the upstream is, on a connected wire; a Streamable HTTP one then names the version on
/// every request and listens for what the upstream says unprompted.
async fn finish(
    peer: Peer,
    http: Option<HttpWire>,
    protocol: UpstreamProtocol,
    timeout: Duration,
    open: &Open,
) -> Result<(Peer, Handshake), UpstreamError> {
    let opening = Opening(Some(peer.clone()));
    match learn(&peer, http.as_ref(), protocol, timeout).await {
        Ok(handshake) => {
            opening.disarm();
            if let Some(wire) = http {
                if !wire.is_modern() {
                    wire.set_version(&handshake.version);
                }
                if open.listen {
                    tokio::spawn(wire.listen(peer.clone()));
                }
            }
            Ok((peer, handshake))
        }
        Err(e) => {
            peer.close(e.to_string());
            drop(opening);
            Err(e)
        }
    }
}

/// `server/discover` first where the protocol allows it, else (or when the upstream does not
/// speak 2026-07-28) `initialize`.
async fn learn(peer: &Peer, http: Option<&HttpWire>, protocol: UpstreamProtocol, timeout: Duration) -> Result<Handshake, UpstreamError> {
    let Some(wire) = http.filter(|_| protocol != UpstreamProtocol::Legacy) else {
        return handshake(peer, timeout).await;
    };
    wire.set_modern(true);
    if let Some(found) = super::modern::discover(peer, timeout).await? {
        return Ok(found);
    }
    wire.set_modern(false);
    if protocol == UpstreamProtocol::Modern {
        return Err(UpstreamError::Protocol(
            "the upstream does not speak protocol 2026-07-28 (server/discover was refused); set upstreams.<name>.protocol = \"auto\""
                .into(),
        ));
    }
    handshake(peer, timeout).await
}

async fn handshake(peer: &Peer, timeout: Duration) -> Result<Handshake, UpstreamError> {
    let params = json!({
        "protocolVersion": ProtocolVersion::LATEST_LEGACY.as_str(),
        // What toolgate can relay to its own clients; a request a client cannot answer gets a
        // clear error back upstream.
        "capabilities": {"elicitation": {}, "sampling": {}, "roots": {}},
        "clientInfo": {"name": "toolgate", "version": env!("CARGO_PKG_VERSION")},
    });
    let result = peer.request("initialize", params, timeout).await?;
    let version = result.get("protocolVersion").and_then(Value::as_str).unwrap_or_default().to_owned();
    let known = ProtocolVersion::ALL.iter().any(|v| v.as_str() == version && v.era() == crate::protocol::Era::Legacy);
    if !known {
        return Err(UpstreamError::Protocol(format!("the upstream offered protocol version {version:?}, which toolgate does not speak")));
    }
    if result.pointer("/capabilities/tools").is_none() {
        tracing::info!(upstream = ?peer, "the upstream declares no tools capability; listing anyway");
    }
    peer.notify("notifications/initialized", json!({})).await?;
    Ok(Handshake {
        version,
        server_info: result.get("serverInfo").cloned(),
        capabilities: result.get("capabilities").cloned().unwrap_or_default(),
    })
}

/// `upstreams.<name>.headers`, read now (a rotated file is picked up on reconnect).
fn credentials(settings: &UpstreamSettings) -> Result<HeaderMap, UpstreamError> {
    let mut headers = HeaderMap::new();
    for (name, source) in &settings.headers {
        let value = source.read().map_err(|e| UpstreamError::Transport(format!("header {name}: {e}")))?;
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|e| UpstreamError::Transport(format!("header {name}: {e}")))?;
        let mut value = HeaderValue::from_str(&format!("{}{value}", source.prefix))
            .map_err(|_| UpstreamError::Transport(format!("header {name}: the value has characters a header cannot carry")))?;
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    Ok(headers)
}
