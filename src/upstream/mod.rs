//! Upstream MCP servers as tool sources: toolgate in front of the MCP servers a team already
//! runs. Each `[upstreams.<name>]` gets a supervisor ([`supervise`]) that connects (a child
//! over stdio, or Streamable HTTP), lists the upstream's tools, and serves them here under a
//! prefix ([`catalog`]), through the same execution layer as every other tool (scopes, limits,
//! timeouts, audit). A call is forwarded as is ([`forward`]); progress, cancellation and the
//! upstream's requests for input are relayed. The upstream's `list_changed` resyncs its tools;
//! a lost connection withdraws them until it is back. Clients hear `list_changed` only when
//! what they see changed.
//!
//! The caller's token is never sent upstream: an HTTP upstream gets only the headers its own
//! settings name.

pub mod catalog;
mod connect;
pub mod credentials;
pub mod error;
mod events;
mod forward;
mod http;
mod legacy_sse;
mod offerings;
pub mod peer;
mod stdio;
mod supervise;
mod users;
mod wire;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwapOption;
use parking_lot::Mutex;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

pub use error::UpstreamError;
pub use peer::Peer;

use crate::config::Settings;
use crate::config::upstreams::UpstreamSettings;
use crate::server::McpServer;
use crate::tool::bulkhead::Bulkhead;
use crate::tool::{Origin, Tool};

/// Every configured upstream, and the tools they currently contribute.
pub struct Upstreams {
    server: Arc<McpServer>,
    links: BTreeMap<String, Arc<Link>>,
    /// Each upstream's current tools; published together as the `upstream` origin.
    offered: Mutex<BTreeMap<String, Vec<Tool>>>,
}

impl std::fmt::Debug for Upstreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstreams").field("upstreams", &self.links.keys().collect::<Vec<_>>()).finish()
    }
}

/// One upstream: its settings, its live connection (if any) and what the admin API shows.
pub struct Link {
    pub name: String,
    pub settings: UpstreamSettings,
    peer: ArcSwapOption<Peer>,
    /// Calls to this upstream running at once (`concurrency`), with a short queue.
    pub(crate) bulkhead: Bulkhead,
    status: Mutex<UpstreamStatus>,
    /// Default call timeout (`tools.default_timeout_secs`) when the upstream sets none.
    pub(crate) default_timeout: std::time::Duration,
    /// `tools.command` rules for a stdio program.
    pub(crate) tool_settings: crate::config::ToolSettings,
    /// Tokens from the authorization server (`oauth`), when set.
    pub(crate) oauth: Option<Arc<credentials::OAuth>>,
    /// Token exchange: each caller's own connection.
    users: Option<users::Users>,
}

/// An upstream's health as the admin API and metrics show it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct UpstreamStatus {
    pub name: String,
    /// `stdio`, `http` (Streamable HTTP) or `sse` (the 2024-11-05 transport).
    pub transport: &'static str,
    /// `connecting`, `connected` or `disconnected`.
    pub state: &'static str,
    /// Tools served from it now.
    pub tools: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_info: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When its tools were last listed (ms since the epoch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_sync_ms: Option<u64>,
    /// Connections made after the first.
    pub reconnects: u64,
    /// Tools it offers that are not served, and why (a bad name, schema or a name clash).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
}

impl Link {
    /// The live connection, if there is one.
    pub fn peer(&self) -> Option<Arc<Peer>> {
        self.peer.load_full().filter(|p| !p.is_closed())
    }

    /// How the upstream's own connection (tool discovery, and every call unless calls run as
    /// their callers) authenticates.
    fn own_bearer(&self) -> http::Bearer {
        use crate::config::upstreams::{Discovery, Grant};
        match &self.oauth {
            Some(o) if o.settings.grant == Grant::TokenExchange && o.settings.discovery == Discovery::None => http::Bearer::None,
            Some(o) => http::Bearer::Own(o.clone()),
            None => http::Bearer::None,
        }
    }

    pub fn status(&self) -> UpstreamStatus {
        self.status.lock().clone()
    }

    fn update(&self, change: impl FnOnce(&mut UpstreamStatus)) {
        change(&mut self.status.lock());
    }
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

impl Upstreams {
    /// The configured upstreams, checked (a stdio program must resolve and be allowed) but not
    /// yet connected: [`Self::spawn`] starts them.
    pub fn new(settings: &Settings, server: Arc<McpServer>) -> anyhow::Result<Arc<Self>> {
        let mut links = BTreeMap::new();
        for (name, upstream) in &settings.upstreams {
            if let Some(stdio) = &upstream.stdio {
                stdio::program(stdio, &settings.tools, name)
                    .map_err(|e| anyhow::anyhow!("invalid setting upstreams.{name}.stdio.program: {e}"))?;
            }
            let transport = if upstream.stdio.is_some() { "stdio" } else { "http" };
            let oauth = match &upstream.oauth {
                Some(o) => Some(Arc::new(credentials::OAuth::new(o).map_err(|e| anyhow::anyhow!("invalid setting upstreams.{name}.{e}"))?)),
                None => None,
            };
            let exchange = upstream.oauth.as_ref().is_some_and(|o| o.grant == crate::config::upstreams::Grant::TokenExchange);
            let status = UpstreamStatus { name: name.clone(), transport, state: "connecting", ..Default::default() };
            let link = Link {
                name: name.clone(),
                settings: upstream.clone(),
                peer: ArcSwapOption::empty(),
                bulkhead: Bulkhead::new(upstream.concurrency, upstream.concurrency.saturating_mul(4)),
                status: Mutex::new(status),
                default_timeout: std::time::Duration::from_secs(settings.tools.default_timeout_secs),
                tool_settings: settings.tools.clone(),
                oauth,
                users: exchange.then(users::cache),
            };
            links.insert(name.clone(), Arc::new(link));
        }
        if !links.is_empty() {
            // Resources and prompts may come from an upstream once it connects: offer the methods.
            server.resources.expect_remote();
            server.prompts.expect_remote();
        }
        Ok(Arc::new(Self { server, links, offered: Mutex::default() }))
    }

    /// Starts one supervisor per upstream; they stop when `stop` is cancelled.
    pub fn spawn(self: &Arc<Self>, stop: CancellationToken) {
        for link in self.links.values() {
            tokio::spawn(supervise::run(link.clone(), self.clone(), stop.clone()));
        }
    }

    /// The first upstream marked `required` that is not connected, if any (for readiness).
    pub fn missing_required(&self) -> Option<&str> {
        self.links.values().find(|l| l.settings.required && l.peer().is_none()).map(|l| l.name.as_str())
    }

    pub fn statuses(&self) -> Vec<UpstreamStatus> {
        self.links.values().map(|l| l.status()).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    /// Withdraws `upstream`'s tools (its connection is lost): clients hear `list_changed`,
    /// and a call to one of them meanwhile is told why.
    fn withdraw(&self, upstream: &str, reason: &str) {
        let names: Vec<String> =
            self.offered.lock().get(upstream).map(|t| t.iter().map(|t| t.name().to_owned()).collect()).unwrap_or_default();
        let snapshot = self.server.tools.snapshot();
        let gone = names.iter().filter_map(|n| snapshot.get(n).filter(|t| t.tool.origin() == Origin::Upstream).cloned()).collect();
        self.server.tools.set_withdrawn(upstream, gone, format!("the upstream MCP server {upstream} is not connected ({reason})"));
        self.offer(upstream, Vec::new());
        if let Some(link) = self.links.get(upstream) {
            offerings::withdraw(link, self);
        }
    }

    /// `upstream` is back: its tools are served again (by [`Self::offer`]), none withdrawn.
    fn restore(&self, upstream: &str, tools: Vec<Tool>) -> Vec<String> {
        self.server.tools.set_withdrawn(upstream, Vec::new(), String::new());
        self.offer(upstream, tools)
    }

    /// Makes `tools` what `upstream` offers and publishes every upstream's tools as one
    /// origin. A name another source already serves is skipped (and reported), never taken.
    fn offer(&self, upstream: &str, tools: Vec<Tool>) -> Vec<String> {
        let mut offered = self.offered.lock();
        offered.insert(upstream.to_owned(), tools);
        let registry = &self.server.tools;
        let mut taken = std::collections::BTreeSet::new();
        let mut skipped = Vec::new();
        let mut all = Vec::new();
        for (name, tools) in offered.iter() {
            for tool in tools {
                let clash = registry.origin_of(tool.name()).filter(|o| *o != Origin::Upstream);
                if let Some(origin) = clash {
                    if name == upstream {
                        skipped.push(format!("{}: the name is taken by a tool from {}", tool.name(), origin.as_str()));
                    }
                } else if !taken.insert(tool.name().to_owned()) {
                    if name == upstream {
                        skipped.push(format!("{}: the name is taken by another upstream's tool", tool.name()));
                    }
                } else {
                    all.push(tool.clone());
                }
            }
        }
        if let Err(e) = registry.sync_origin(Origin::Upstream, all) {
            // Each tool was compiled alone already; only a race with another source gets here.
            tracing::warn!(upstream, error = %e, "upstream tools not published");
            skipped.push(e);
        }
        skipped
    }
}
