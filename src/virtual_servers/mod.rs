//! Virtual servers (`[servers.<name>]`, or stored through the admin API): an MCP endpoint per
//! team at its own path, serving the part of the catalog its selectors choose under the names
//! its overrides give, with its own scopes and its own audience. They change what a request is
//! routed to, never how it is admitted: the transport resolves the path to a server once
//! ([`VirtualServers::by_path`]), the bearer gate checks the token was issued for it, and the
//! MCP methods read its [`View`] instead of the whole registry. The default endpoint
//! (`server.mcp_path`) serves everything, as before.

mod select;
pub mod stored;
mod view;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::{ArcSwap, ArcSwapOption};
use parking_lot::Mutex;

pub use select::{Entry, Selection};
pub use view::{View, source_of};

use crate::auth::ServerAudiences;
use crate::config::servers::VirtualServerSettings;
use crate::principal::Principal;
use crate::tool::ToolSet;

const UNSEEN: u64 = 0;
const TELL: u64 = u64::MAX;

/// One virtual server.
#[derive(Debug)]
pub struct VirtualServer {
    pub name: Arc<str>,
    pub settings: VirtualServerSettings,
    tools: Selection,
    resources: Selection,
    prompts: Selection,
    /// Its RFC 8707 resource: the origin of `auth.resource` with this server's path.
    pub resource: Option<String>,
    view: ArcSwapOption<View>,
    building: Mutex<()>,
    /// `toolgate_server_requests_total{server}`, resolved once.
    pub requests: metrics::Counter,
    /// The digest of the view its listeners last heard about: [`UNSEEN`] until a view is built
    /// (the first one is what they saw), [`TELL`] when the server itself changed.
    announced: AtomicU64,
}

impl VirtualServer {
    fn new(name: &str, settings: VirtualServerSettings, origin: Option<&str>, announced: u64) -> Self {
        Self {
            name: name.into(),
            tools: Selection::parse(&settings.tools),
            resources: Selection::parse(&settings.resources),
            prompts: Selection::parse(&settings.prompts),
            resource: origin.map(|o| format!("{o}{}", settings.path)),
            settings,
            view: ArcSwapOption::empty(),
            building: Mutex::new(()),
            announced: AtomicU64::new(announced),
            requests: crate::metrics::record::server_requests(name),
        }
    }

    /// This server's tools as of `registry`'s snapshot: built once per snapshot.
    pub fn view(&self, registry: &Arc<ToolSet>) -> Arc<View> {
        if let Some(v) = self.view.load_full().filter(|v| Arc::ptr_eq(&v.source, registry)) {
            return v;
        }
        let _one = self.building.lock();
        if let Some(v) = self.view.load_full().filter(|v| Arc::ptr_eq(&v.source, registry)) {
            return v;
        }
        let built = Arc::new(view::build(&self.name, &self.settings, &self.tools, registry.clone()));
        // A caller holding an older snapshot gets a view of it, but never replaces a newer one.
        if self.view.load().as_ref().is_some_and(|v| v.source.generation > registry.generation) {
            return built;
        }
        for collision in &built.collisions {
            tracing::warn!(server = %self.name, %collision, "tool not served on a virtual server");
        }
        self.view.store(Some(built.clone()));
        let _ = self.announced.compare_exchange(UNSEEN, built.digest, Ordering::AcqRel, Ordering::Acquire);
        built
    }

    /// Whether this server serves `tool` (by its name at the default endpoint and its source).
    pub fn selects(&self, tool: &crate::tool::RegisteredTool) -> bool {
        let entry = Entry { name: tool.name(), origin: tool.tool.origin().as_str(), upstream: tool.tool.upstream() };
        self.settings.overrides.contains_key(tool.name()) || self.tools.matches(&entry)
    }

    /// Whether this server serves the tool of that name (at the default endpoint) under another.
    pub fn renames(&self, name: &str) -> bool {
        self.settings.overrides.get(name).and_then(|o| o.name.as_deref()).is_some_and(|n| n != name)
    }

    /// The name the default endpoint serves a tool under that this server serves as `served`:
    /// what rate limits and scopes key on. Unknown names are their own.
    pub fn canonical_name(&self, served: &str) -> String {
        if let Some(view) = self.view.load_full()
            && let Some(tool) = view.tools.get(served)
        {
            return tool.canonical_name().to_owned();
        }
        // No view built yet: the overrides say which name a renamed tool has at /mcp.
        let renamed = self.settings.overrides.iter().find(|(_, o)| o.name.as_deref() == Some(served));
        renamed.map_or_else(|| served.to_owned(), |(original, _)| original.clone())
    }

    /// Whether a resource or prompt (by its name and source) is served here.
    pub fn serves_resource(&self, entry: &Entry<'_>) -> bool {
        self.resources.matches(entry)
    }

    pub fn serves_prompt(&self, entry: &Entry<'_>) -> bool {
        self.prompts.matches(entry)
    }

    pub fn has_resources(&self) -> bool {
        !self.resources.is_empty()
    }

    pub fn has_prompts(&self) -> bool {
        !self.prompts.is_empty()
    }

    /// Where its RFC 9728 metadata is (`None` with auth off).
    pub fn metadata_url(&self) -> Option<String> {
        self.resource.as_deref().map(crate::auth::metadata::metadata_url)
    }

    /// The audiences a token for this server may carry: its resource, then its own extras.
    pub fn audiences(&self) -> impl Iterator<Item = &str> {
        self.resource.as_deref().into_iter().chain(self.settings.audiences.iter().map(String::as_str))
    }

    /// Whether the token was issued for this server (RFC 8707): a token for another server, or
    /// for the default endpoint, is not.
    pub fn admits(&self, principal: &Principal) -> bool {
        self.audiences().any(|a| principal.server_audiences.iter().any(|p| p == a))
    }
}

/// What a server's path is appended to for its resource: `auth.resource` without the default
/// endpoint's path (`https://gw/prefix/mcp` → `https://gw/prefix`, for a proxy that serves
/// toolgate under a path prefix), else its origin.
fn resource_base(resource: &str, mcp_path: &str) -> String {
    let trimmed = resource.trim_end_matches('/');
    match trimmed.strip_suffix(mcp_path) {
        Some(base) if url::Url::parse(base).is_ok() => base.to_owned(),
        _ => url::Url::parse(resource).map(|u| u.origin().ascii_serialization()).unwrap_or_default(),
    }
}

/// Every virtual server, by name and by path; replaced whole when the settings or the stored
/// definitions change.
#[derive(Debug)]
pub struct VirtualServers {
    current: ArcSwap<BTreeMap<Arc<str>, Arc<VirtualServer>>>,
    /// The settings' own servers, which always win their names.
    configured: BTreeMap<String, VirtualServerSettings>,
    /// The default endpoint's path, which no server may take.
    mcp_path: String,
    /// The stored revision of each server defined through the admin API.
    revisions: Mutex<BTreeMap<String, i64>>,
    /// Serializes reloads of the stored definitions (`stored.rs`).
    reloading: tokio::sync::Mutex<()>,
    /// `auth.resource` without the default endpoint's path (`None` with auth off): each
    /// server's resource is it with the server's path.
    origin: Option<String>,
    audiences: Arc<ServerAudiences>,
}

impl VirtualServers {
    pub fn new(settings: &crate::config::Settings) -> Self {
        let origin = settings.auth.resource.as_deref().map(|r| resource_base(r, &settings.server.mcp_path));
        let me = Self {
            current: ArcSwap::from_pointee(BTreeMap::new()),
            configured: settings.servers.clone(),
            mcp_path: settings.server.mcp_path.clone(),
            revisions: Mutex::default(),
            reloading: tokio::sync::Mutex::new(()),
            origin,
            audiences: Arc::default(),
        };
        me.install(&settings.servers, UNSEEN);
        me
    }

    /// The audiences of every server, which the token verifiers accept besides their own.
    pub fn audiences(&self) -> Arc<ServerAudiences> {
        self.audiences.clone()
    }

    /// Makes `servers` the whole set; a server whose settings did not change keeps its view,
    /// the listeners of one that did are told its list changed at the next change published.
    pub fn replace(&self, servers: &BTreeMap<String, VirtualServerSettings>) {
        self.install(servers, TELL);
    }

    fn install(&self, servers: &BTreeMap<String, VirtualServerSettings>, announced: u64) {
        let old = self.current.load();
        let next: BTreeMap<Arc<str>, Arc<VirtualServer>> = servers
            .iter()
            .map(|(name, settings)| {
                let kept = old.get(name.as_str()).filter(|s| s.settings == *settings).cloned();
                let server =
                    kept.unwrap_or_else(|| Arc::new(VirtualServer::new(name, settings.clone(), self.origin.as_deref(), announced)));
                (server.name.clone(), server)
            })
            .collect();
        self.audiences.set(
            next.values().flat_map(|s| s.audiences().map(str::to_owned)).collect(),
            next.values().filter_map(|s| s.resource.clone()).collect(),
            next.values().flat_map(|s| s.settings.scopes.iter().cloned()).collect(),
        );
        self.current.store(Arc::new(next));
    }

    pub fn get(&self, name: &str) -> Option<Arc<VirtualServer>> {
        self.current.load().get(name).cloned()
    }

    pub fn by_path(&self, path: &str) -> Option<Arc<VirtualServer>> {
        self.current.load().values().find(|s| s.settings.path == path).cloned()
    }

    pub fn all(&self) -> Vec<Arc<VirtualServer>> {
        self.current.load().values().cloned().collect()
    }

    pub fn is_empty(&self) -> bool {
        self.current.load().is_empty()
    }

    /// The servers whose tool list differs from the one their listeners last heard about,
    /// now marked as heard: the fan-out tells exactly their listeners.
    pub fn changed_since_announced(&self, registry: &Arc<ToolSet>) -> Vec<Arc<str>> {
        let mut changed = Vec::new();
        for server in self.current.load().values() {
            let digest = server.view(registry).digest;
            if server.announced.swap(digest, Ordering::AcqRel) != digest {
                changed.push(server.name.clone());
            }
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::resource_base;

    #[test]
    fn a_servers_resource_keeps_the_prefix_the_default_endpoints_has() {
        assert_eq!(resource_base("https://gw.example/mcp", "/mcp"), "https://gw.example");
        assert_eq!(resource_base("https://gw.example/toolgate/mcp", "/mcp"), "https://gw.example/toolgate");
        assert_eq!(resource_base("https://gw.example/other", "/mcp"), "https://gw.example");
    }
}
