//! Upstream MCP servers as tool sources: toolgate in front of the MCP servers a team already
//! runs. Each `[upstreams.<name>]` gets a supervisor ([`supervise`]) that connects (a child
//! over stdio, or Streamable HTTP), lists the upstream's tools, and serves them here under a
//! prefix ([`catalog`]), through the same execution layer as every other tool (scopes, limits,
//! timeouts, audit), once the approved catalog ([`crate::approval`]) let each entry serve. A
//! call is forwarded as is ([`forward`]); progress, cancellation and the
//! upstream's requests for input are relayed. The upstream's `list_changed` resyncs its tools;
//! a lost connection withdraws them until it is back. Clients hear `list_changed` only when
//! what they see changed.
//!
//! The caller's token is never sent upstream: an HTTP upstream gets only the headers its own
//! settings name.

pub mod catalog;
mod connect;
pub mod credentials;
pub mod db;
pub mod error;
mod events;
mod forward;
mod history;
mod http;
pub mod inbound;
mod legacy_sse;
mod link;
mod modern;
mod names;
mod offerings;
pub mod peer;
mod per_user;
mod stderr;
mod stdio;
pub mod stored;
mod supervise;
mod users;
mod wire;

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::{Mutex, RwLock};
use tokio_util::sync::CancellationToken;

pub use error::UpstreamError;
pub use forward::relay;
pub use inbound::decode;
pub use link::{Link, SkippedTool, UpstreamStatus};
pub use peer::Peer;

use crate::catalog::prompts::RemotePrompts;
use crate::catalog::resources::RemoteResources;
use crate::config::Settings;
use crate::server::McpServer;
use crate::tool::{Origin, Tool};

/// Every upstream (from the settings and from the admin API), and what they contribute.
pub struct Upstreams {
    pub(crate) server: Arc<McpServer>,
    settings: Arc<Settings>,
    links: RwLock<BTreeMap<String, Arc<Link>>>,
    /// Each upstream's current tools and who owns which name; published together as the
    /// `upstream` origin. Its lock also orders publishing against removing an upstream (see
    /// [`Self::is_current`]).
    offered: Mutex<names::Ledger>,
    /// toolgate's shutdown: every supervisor's stop signal is a child of it.
    stop: OnceLock<CancellationToken>,
    /// Serializes reloads of the stored definitions (see `stored.rs`).
    reloading: tokio::sync::Mutex<()>,
    /// The approved catalog every listing passes (`approval`).
    pub(crate) approvals: Arc<crate::approval::Approvals>,
    /// Per-user credentials (`oauth.grant = "user"`), when the vault is configured.
    pub(crate) vault: Option<Arc<crate::vault::Vault>>,
}

impl std::fmt::Debug for Upstreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstreams").field("upstreams", &self.links.read().keys().cloned().collect::<Vec<_>>()).finish()
    }
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

impl Upstreams {
    /// The configured upstreams, checked (a stdio program must resolve and be allowed) but not
    /// yet connected: [`Self::spawn`] starts them.
    pub fn new(
        settings: Arc<Settings>,
        server: Arc<McpServer>,
        approvals: Arc<crate::approval::Approvals>,
        vault: Option<Arc<crate::vault::Vault>>,
    ) -> anyhow::Result<Arc<Self>> {
        let mut links = BTreeMap::new();
        for (name, upstream) in &settings.upstreams {
            let link =
                Link::build(name, upstream, &settings.tools, settings.tools.default_timeout_secs, CancellationToken::new(), vault.as_ref())
                    .map_err(|e| anyhow::anyhow!("invalid setting {e}"))?;
            if let Some((vault, auth)) = link.per_user() {
                vault.register(auth.clone());
            }
            links.insert(name.clone(), Arc::new(link));
        }
        if !links.is_empty() {
            // Resources and prompts may come from an upstream once it connects: offer the methods.
            server.resources.expect_remote();
            server.prompts.expect_remote();
        }
        Ok(Arc::new(Self {
            server,
            settings,
            links: RwLock::new(links),
            offered: Mutex::default(),
            stop: OnceLock::new(),
            reloading: tokio::sync::Mutex::new(()),
            approvals,
            vault,
        }))
    }

    /// The upstreams whose calls run with each user's own account (`oauth.grant = "user"`).
    pub fn per_user(&self) -> Vec<String> {
        use crate::config::upstreams::Grant;
        self.links
            .read()
            .values()
            .filter(|l| l.settings.oauth.as_ref().is_some_and(|o| o.grant == Grant::User))
            .map(|l| l.name.clone())
            .collect()
    }

    /// The per-user upstreams with `unconnected = "hide"` that the user `principal` has not
    /// connected: their tools are not listed to them. A vault that cannot be read hides them.
    pub async fn hidden_for(&self, principal: &str) -> Vec<String> {
        use crate::config::upstreams::Unconnected;
        let Some(vault) = &self.vault else { return Vec::new() };
        let hiding: Vec<String> = self
            .links
            .read()
            .values()
            .filter(|l| l.oauth.as_ref().is_some_and(|o| o.user.is_some() && o.settings.unconnected == Unconnected::Hide))
            .map(|l| l.name.clone())
            .collect();
        if hiding.is_empty() {
            return hiding;
        }
        let connected = vault.connected_upstreams(principal).await.unwrap_or_default();
        hiding.into_iter().filter(|u| !connected.contains(u)).collect()
    }

    /// Starts one supervisor per upstream; they stop when `stop` is cancelled.
    pub fn spawn(self: &Arc<Self>, stop: CancellationToken) {
        let _ = self.stop.set(stop.clone());
        for link in self.links.read().values() {
            let own = link.stop.clone();
            let parent = stop.clone();
            // The link's own signal follows toolgate's.
            tokio::spawn(async move {
                parent.cancelled().await;
                own.cancel();
            });
            tokio::spawn(supervise::run(link.clone(), self.clone(), link.stop.clone()));
        }
    }

    /// A stop signal for a new upstream: a child of toolgate's shutdown once it runs.
    fn child_stop(&self) -> CancellationToken {
        self.stop.get().map_or_else(CancellationToken::new, CancellationToken::child_token)
    }

    /// Adds `link` (replacing one of its name, which stops) and starts it once toolgate runs.
    /// Its stop signal comes from [`Self::child_stop`].
    fn start(self: &Arc<Self>, link: Link) {
        // Clients that initialize from now on are offered the resource and prompt methods.
        self.server.resources.expect_remote();
        self.server.prompts.expect_remote();
        if let Some((vault, auth)) = link.per_user() {
            vault.register(auth.clone());
        }
        let link = Arc::new(link);
        let old = self.links.write().insert(link.name.clone(), link.clone());
        if let Some(old) = old {
            if old.moves_tokens(&link) {
                self.forget_connections(&old);
            }
            old.stop.cancel();
            if let Some(users) = &old.users {
                users.invalidate_all();
            }
        }
        if self.stop.get().is_some() {
            tokio::spawn(supervise::run(link.clone(), self.clone(), link.stop.clone()));
        }
    }

    /// Stops and removes `name`: its tools, resources and prompts are withdrawn for good.
    fn remove(&self, name: &str) {
        let Some(link) = self.links.write().remove(name) else { return };
        if let Some((vault, _)) = link.per_user() {
            vault.unregister(name);
        }
        self.forget_connections(&link);
        link.stop.cancel();
        if let Some(peer) = link.peer.swap(None) {
            peer.close("the upstream was removed");
        }
        if let Some(users) = &link.users {
            // Each caller's connection closes once no call holds it (the eviction listener).
            users.invalidate_all();
        }
        let mut offered = self.offered.lock();
        self.server.tools.set_withdrawn(name, Vec::new(), String::new());
        self.server.tools.set_held(name, Vec::new());
        self.approvals.forget(name);
        self.server.resources.sync_source(name, None);
        self.server.prompts.sync_source(name, None);
        offered.remove(name);
        self.publish_tools(&mut offered, name);
    }

    /// A per-user upstream removed or pointed elsewhere: its users' tokens were issued for the
    /// old one and go nowhere else (every replica deletes them; the first finds them).
    fn forget_connections(&self, link: &Link) {
        if let Some((vault, _)) = link.per_user() {
            let (vault, name) = (vault.clone(), link.name.clone());
            tokio::spawn(async move { vault.forget_upstream(&name).await });
        }
    }

    pub fn link(&self, name: &str) -> Option<Arc<Link>> {
        self.links.read().get(name).cloned()
    }

    /// Whether `link` is still the one serving its name (not removed or replaced): what a
    /// supervisor publishes counts only then.
    fn is_current(&self, link: &Arc<Link>) -> bool {
        self.links.read().get(&link.name).is_some_and(|l| Arc::ptr_eq(l, link))
    }

    /// The approved catalog (for the admin API's approvals).
    pub fn approvals(&self) -> &Arc<crate::approval::Approvals> {
        &self.approvals
    }

    /// Makes `source`'s supervisor list it again and review the listing against the approved
    /// catalog now (an operator decided one of its entries, on this replica or another).
    pub fn resync(&self, source: &str) {
        if let Some(link) = self.link(source) {
            link.resync.notify_one();
        }
    }

    /// Every upstream lists again (after a lost cluster channel a decision may have been missed).
    pub fn resync_all(&self) {
        for link in self.links.read().values() {
            link.resync.notify_one();
        }
    }

    /// The first upstream marked `required` that is not connected, if any (for readiness).
    pub fn missing_required(&self) -> Option<String> {
        self.links.read().values().find(|l| l.settings.required && l.peer().is_none()).map(|l| l.name.clone())
    }

    /// The names `upstream`'s tools are served under now, sorted.
    pub fn served_by(&self, upstream: &str) -> Vec<String> {
        let offered = self.offered.lock();
        let snapshot = self.server.tools.snapshot();
        let mut names: Vec<String> = offered
            .owned_by(upstream)
            .filter(|name| snapshot.get(name).is_some_and(|r| r.tool.origin() == Origin::Upstream))
            .map(str::to_owned)
            .collect();
        names.sort_unstable();
        names
    }

    pub fn statuses(&self) -> Vec<UpstreamStatus> {
        self.links.read().values().map(|l| l.status()).collect()
    }

    /// Withdraws `link`'s tools, resources and prompts (its connection is lost): clients hear
    /// `list_changed`, and a call to one of its tools meanwhile is told why. Nothing happens
    /// for a link no longer current.
    fn withdraw(&self, link: &Arc<Link>, reason: &str) {
        let upstream = link.name.as_str();
        let mut offered = self.offered.lock();
        if !self.is_current(link) {
            return;
        }
        let snapshot = self.server.tools.snapshot();
        let gone = offered
            .owned_by(upstream)
            .filter_map(|name| snapshot.get(name).filter(|r| r.tool.origin() == Origin::Upstream).cloned())
            .collect();
        self.server.tools.set_withdrawn(upstream, gone, format!("the upstream MCP server {upstream} is not connected ({reason})"));
        self.server.resources.sync_source(upstream, None);
        self.server.prompts.sync_source(upstream, None);
        offered.withdraw(upstream);
        self.publish_tools(&mut offered, upstream);
    }

    /// `link` is (back) up: its tools, resources and prompts are served, none withdrawn (but
    /// a tool whose name another holds, which its status then lists as skipped). Nothing
    /// happens for a link no longer current.
    /// `held` are stand-ins for the tools the approved catalog does not let serve, with why.
    fn restore(
        &self,
        link: &Arc<Link>,
        tools: Vec<Tool>,
        held: Vec<(Tool, String)>,
        resources: Option<RemoteResources>,
        prompts: Option<RemotePrompts>,
    ) {
        let mut offered = self.offered.lock();
        if !self.is_current(link) {
            return;
        }
        self.server.tools.set_withdrawn(&link.name, Vec::new(), String::new());
        self.server.tools.set_held(&link.name, held);
        self.server.resources.sync_source(&link.name, resources);
        self.server.prompts.sync_source(&link.name, prompts);
        offered.list(&link.name, tools);
        self.publish_tools(&mut offered, &link.name);
    }

    /// Publishes every upstream's tools as one origin after `upstream` changed, each name by
    /// its owner (`names.rs`): a name another upstream or source holds is skipped, never
    /// taken. Every connected upstream's status and metrics then count what it serves and
    /// list what it does not, and each new conflict is logged once.
    fn publish_tools(&self, offered: &mut names::Ledger, upstream: &str) {
        let registry = &self.server.tools;
        let elsewhere = |name: &str| registry.origin_of(name).filter(|o| *o != Origin::Upstream);
        let settled = offered.settle(upstream, elsewhere, |served| match registry.sync_origin_leaving(Origin::Upstream, served) {
            Ok((_, taken)) => taken,
            Err(e) => {
                // Each tool was checked alone by `catalog::build` as the registry checks it.
                tracing::error!(upstream, error = %e, "upstream tools not published");
                Vec::new()
            }
        });
        for (name, conflict) in &settled.fresh {
            tracing::warn!(upstream = %name, tool = %conflict.tool, reason = %conflict, "upstream tool not served: its name is held by another");
        }
        let links = self.links.read();
        for (name, (served, conflicts)) in &settled.upstreams {
            let Some(link) = links.get(name) else { continue };
            let taken = conflicts.iter().map(|c| link::SkippedTool { tool: c.tool.clone(), reason: "name_taken", detail: c.why() });
            link.update(|s| {
                s.tools = *served;
                s.skipped = s.listing_skipped.iter().cloned().chain(conflicts.iter().map(ToString::to_string)).collect();
                s.skipped_tools = s.listing_skipped_tools.iter().cloned().chain(taken).collect();
            });
            let invalid = link.status().invalid_tools;
            crate::metrics::record::upstream_tools(name, *served, invalid, conflicts.len());
        }
    }
}
