//! One upstream: its settings, its live connection (if any), its own stop signal, and the
//! status the admin API and metrics show.

use std::sync::Arc;

use arc_swap::ArcSwapOption;
use parking_lot::Mutex;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::history::{self, History, StateChange};
use super::peer::Peer;
use super::{credentials, http, stdio, users};
use crate::config::ToolSettings;
use crate::config::upstreams::UpstreamSettings;
use crate::tool::bulkhead::Bulkhead;

/// One upstream: its settings, its live connection (if any) and what the admin API shows.
pub struct Link {
    pub name: String,
    pub settings: UpstreamSettings,
    pub(super) peer: ArcSwapOption<Peer>,
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
    pub(super) users: Option<users::Users>,
    /// Token exchange: the HTTP client every caller's connection shares (made at first use).
    callers_client: std::sync::OnceLock<http::HttpClient>,
    /// A stdio upstream's stderr: its last lines for the status, the log's rate.
    pub(super) stderr: Arc<super::stderr::Stderr>,
    /// This upstream's call metrics.
    pub(crate) metrics: crate::metrics::record::UpstreamMetrics,
    /// Stops this upstream's supervisor (removed or replaced through the admin API, or
    /// toolgate shutting down).
    pub(super) stop: CancellationToken,
    /// Asks the supervisor to list again now (an operator decided one of its entries, here or
    /// on another replica): the approved catalog is re-read with the listing.
    pub(super) resync: tokio::sync::Notify,
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
    /// The last error (connecting, listing, or the reason a connection ended), escaped and
    /// capped; kept after a reconnect succeeds, so what went wrong stays visible.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When `last_error` happened (ms since the epoch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error_ms: Option<u64>,
    /// When its tools were last listed (ms since the epoch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_sync_ms: Option<u64>,
    /// Connections made after the first.
    pub reconnects: u64,
    /// Tools it offers that are not served, and why (a bad name or schema, or a name another
    /// upstream or source holds), and what else of it could not be listed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
    /// The tools of `skipped`, each with its reason as a word (`invalid`, `name_taken`,
    /// `not_approved`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped_tools: Vec<SkippedTool>,
    /// What its last listing left out by itself (bad tools, unlisted resources or prompts):
    /// `skipped` is this and the name conflicts of the last publishing.
    #[serde(skip)]
    pub(super) listing_skipped: Vec<String>,
    /// The tools of `listing_skipped` (invalid or not approved).
    #[serde(skip)]
    pub(super) listing_skipped_tools: Vec<SkippedTool>,
    /// Tools of its last listing skipped as invalid (for the metrics).
    #[serde(skip)]
    pub(super) invalid_tools: usize,
    /// `config` (the settings file or environment) or `admin` (stored through the admin API).
    pub source: &'static str,
    /// The stored definition's revision (`admin` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    /// Entries it lists that wait for an operator's approval (`approval`): nothing of a new
    /// one serves, a changed one serves its approved version.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<HeldEntry>,
    /// Why the approved catalog could not be read at its last listing (only entries known
    /// approved serve until it can).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_error: Option<String>,
    /// A stdio upstream's last stderr lines, and how many the log did not get.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr: Option<super::stderr::StderrStatus>,
    /// Its recent state changes: only one upstream's detail shows them, not the list.
    #[serde(skip)]
    pub history: History,
}

/// A tool an upstream lists that is not served, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SkippedTool {
    /// The upstream's own name (`invalid`, `not_approved`) or the name it would be served
    /// under (`name_taken`), escaped and capped.
    pub tool: String,
    /// `invalid` (its name or schemas cannot be served), `name_taken` (another upstream or
    /// source holds the name) or `not_approved` (rejected, too large, or unverifiable).
    pub reason: &'static str,
    /// Why, in a sentence.
    pub detail: String,
}

impl SkippedTool {
    /// The line `skipped` shows for it.
    pub(super) fn line(&self) -> String {
        if self.tool.is_empty() { self.detail.clone() } else { format!("{}: {}", self.tool, self.detail) }
    }
}

/// An entry held for an operator's approval, as the status shows it.
#[derive(Clone, Debug, Serialize)]
pub struct HeldEntry {
    /// `tool`, `resource`, `template` or `prompt`.
    pub kind: &'static str,
    /// The upstream's own name (a resource's URI).
    pub name: String,
    /// `new` or `changed`.
    pub change: &'static str,
}

impl Link {
    /// The HTTP client callers' own connections share: credentialed (same-origin redirects
    /// only), made once.
    pub(super) fn callers_client(&self) -> Result<http::HttpClient, super::UpstreamError> {
        if let Some(shared) = self.callers_client.get() {
            return Ok(shared.clone());
        }
        let made = http::client(&self.settings, true)?;
        Ok(self.callers_client.get_or_init(|| made).clone())
    }

    /// The live connection, if there is one.
    pub fn peer(&self) -> Option<Arc<Peer>> {
        self.peer.load_full().filter(|p| !p.is_closed())
    }

    /// How the upstream's own connection (tool discovery, and every call unless calls run as
    /// their callers) authenticates.
    pub(super) fn own_bearer(&self) -> http::Bearer {
        use crate::config::upstreams::{Discovery, Grant};
        match &self.oauth {
            Some(o) if o.settings.grant != Grant::ClientCredentials && o.settings.discovery == Discovery::None => http::Bearer::None,
            Some(o) => http::Bearer::Own(o.clone()),
            None => http::Bearer::None,
        }
    }

    /// A per-user upstream's authorization server, with the vault that keeps its users' tokens.
    pub(super) fn per_user(&self) -> Option<&(Arc<crate::vault::Vault>, Arc<crate::vault::UpstreamAuthorization>)> {
        self.oauth.as_ref().and_then(|o| o.user.as_ref())
    }

    /// Whether a replacement of this per-user upstream points its users' tokens elsewhere (its
    /// url, authorization server or resource changed): their connections are then forgotten.
    pub(super) fn moves_tokens(&self, new: &Link) -> bool {
        let key = |l: &Link| {
            let o = l.settings.oauth.as_ref();
            (l.settings.url.clone(), o.and_then(|o| o.authorization_server.clone()), o.and_then(|o| o.resource.clone()))
        };
        self.per_user().is_some() && (new.per_user().is_none() || key(self) != key(new))
    }

    pub fn status(&self) -> UpstreamStatus {
        let mut status = self.status.lock().clone();
        if self.settings.stdio.is_some() {
            status.stderr = Some(self.stderr.status());
        }
        status
    }

    /// Why a call finds no connection: the last error while the state is not `connected`
    /// (that error is what ended it or kept it from connecting), `None` while connecting for
    /// the first time or when connected. Reads only that, under the status lock.
    pub fn disconnected_reason(&self) -> Option<String> {
        self.status.lock().disconnected_reason()
    }

    /// Applies `change` to the status under one lock, so a reader sees all of it or none.
    pub(super) fn update<R>(&self, change: impl FnOnce(&mut UpstreamStatus) -> R) -> R {
        change(&mut self.status.lock())
    }

    /// Moves to `to` (`connecting`, `connected`, `disconnected`), recording the change with
    /// `reason` when the state is a different one.
    pub(super) fn set_state(&self, to: &'static str, reason: Option<&str>) {
        self.update(|s| s.move_to(to, reason));
    }

    /// Records `error` as the last error, with its time.
    pub(super) fn set_error(&self, error: &str) {
        self.update(|s| s.record_error(error));
    }

    /// The connection is gone because of `reason`: no tools, the error and the state
    /// `disconnected`, together.
    pub(super) fn set_disconnected(&self, reason: &str) {
        self.update(|s| {
            s.tools = 0;
            s.record_error(reason);
            s.move_to("disconnected", Some(reason));
        });
    }
}

impl UpstreamStatus {
    /// See [`Link::disconnected_reason`].
    fn disconnected_reason(&self) -> Option<String> {
        if self.state == "connected" { None } else { self.last_error.clone() }
    }

    /// See [`Link::set_state`].
    pub(super) fn move_to(&mut self, to: &'static str, reason: Option<&str>) {
        if self.state != to {
            self.history.push(StateChange { at_ms: super::now_ms(), from: self.state, to, reason: reason.map(history::bounded) });
        }
        self.state = to;
    }

    /// See [`Link::set_error`].
    fn record_error(&mut self, error: &str) {
        self.last_error = Some(history::bounded(error));
        self.last_error_ms = Some(super::now_ms());
    }
}

impl Link {
    /// A link for `settings`, checked (a stdio program must resolve and be allowed; OAuth
    /// secrets must be readable) but not connected. `Err` names the setting to change.
    pub fn build(
        name: &str,
        settings: &UpstreamSettings,
        tools: &ToolSettings,
        default_timeout_secs: u64,
        stop: CancellationToken,
        vault: Option<&Arc<crate::vault::Vault>>,
    ) -> Result<Self, String> {
        if let Some(stdio) = &settings.stdio {
            stdio::program(stdio, tools, name).map_err(|e| format!("upstreams.{name}.stdio.program: {e}"))?;
        }
        let user = match (&settings.oauth, &settings.url) {
            (Some(o), Some(url)) if o.grant == crate::config::upstreams::Grant::User => {
                let vault = vault.ok_or_else(|| {
                    format!("upstreams.{name}.oauth.grant: \"user\" needs [vault] keys and [authorization_server] enabled")
                })?;
                let auth = crate::vault::UpstreamAuthorization::new(name, url, settings.allow_private, o, vault.public_origin())
                    .map_err(|e| format!("upstreams.{name}.oauth: {e}"))?;
                // Registered with the vault when the link is installed (`Upstreams`), not here:
                // a definition only checked must not change what the vault uses.
                Some((vault.clone(), Arc::new(auth)))
            }
            _ => None,
        };
        let oauth = match &settings.oauth {
            Some(o) => Some(Arc::new(credentials::OAuth::new(o, user).map_err(|e| format!("upstreams.{name}.{e}"))?)),
            None => None,
        };
        let exchange = settings.oauth.as_ref().is_some_and(|o| o.grant != crate::config::upstreams::Grant::ClientCredentials);
        let transport = if settings.stdio.is_some() { "stdio" } else { "http" };
        let status = UpstreamStatus { name: name.to_owned(), transport, state: "connecting", source: "config", ..Default::default() };
        Ok(Self {
            name: name.to_owned(),
            settings: settings.clone(),
            peer: ArcSwapOption::empty(),
            bulkhead: Bulkhead::new(settings.concurrency, settings.concurrency.saturating_mul(4)),
            status: Mutex::new(status),
            default_timeout: std::time::Duration::from_secs(default_timeout_secs),
            tool_settings: tools.clone(),
            oauth,
            users: exchange.then(users::cache),
            callers_client: std::sync::OnceLock::new(),
            stderr: Arc::new(super::stderr::Stderr::new(name)),
            metrics: crate::metrics::record::UpstreamMetrics::new(name),
            stop,
            resync: tokio::sync::Notify::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_kept_after_a_reconnect_is_no_reason_while_connected() {
        let mut status = UpstreamStatus { state: "connecting", ..Default::default() };
        assert_eq!(status.disconnected_reason(), None);
        status.record_error("connection reset");
        status.move_to("disconnected", Some("connection reset"));
        assert_eq!(status.disconnected_reason().as_deref(), Some("connection reset"));
        status.move_to("connecting", Some("reconnecting after the backoff"));
        assert_eq!(status.disconnected_reason().as_deref(), Some("connection reset"));
        status.move_to("connected", Some("tools listed"));
        assert_eq!(status.disconnected_reason(), None);
        assert_eq!(status.last_error.as_deref(), Some("connection reset"), "kept, with the state saying it is over");
    }
}
