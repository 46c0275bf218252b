//! The vault of per-user upstream credentials (issue 29; spec §6): an upstream with
//! `oauth.grant = "user"` is called with each user's own account at it, which the user connects
//! once in the browser. A core service: no HTTP types here; `crate::authserver_http::connect`
//! serves its pages.
//!
//! - [`seal`]: records sealed with XChaCha20-Poly1305 under keys from files or secrets.
//! - [`authorization_server`]: the upstream's authorization server, as toolgate's OAuth client
//!   sees it (registration, the grants); `discovery`: where it is and its metadata (the first
//!   one found for an upstream is pinned here, in [`Vault::metadata`]).
//! - [`grants`]: a user's tokens: stored, used, refreshed once across replicas, revoked.
//! - [`connect`]: the connect link an elicitation carries and its browser steps: the same
//!   user signed in at the identity provider, consent, the upstream's authorization;
//!   [`connections_page`]: the user's own page (list, disconnect, connect).
//! - [`db`]: the tables.
//!
//! A user is the MCP token's (`iss`, `sub`); the connect page signs the browser in at the
//! authorization server's identity provider and accepts only the same subject, from that
//! provider or from toolgate's own tokens (which carry the provider's subject).

pub mod authorization_server;
pub mod connect;
pub mod connections_page;
pub mod db;
mod discovery;
pub mod grants;
pub mod seal;

use std::sync::Arc;

use dashmap::DashMap;

use crate::audit::{AuditLog, AuditRecord, EventKind, Outcome};
use crate::authserver::{AuthServer, Identity};
use crate::config::vault::VaultSettings;
use crate::store::Store;
pub use authorization_server::{AsError, ClientIdentity, UpstreamAuthorization};
pub use seal::Sealer;

/// The vault. Shared (`Arc`); every method takes `&self`.
pub struct Vault {
    store: Store,
    sealer: Sealer,
    settings: VaultSettings,
    /// Signs the browser user in on the connect page, and names toolgate's public origin.
    auth_server: Arc<AuthServer>,
    audit: Option<Arc<AuditLog>>,
    /// Each `grant = "user"` upstream's authorization server, by upstream name.
    upstreams: DashMap<String, Arc<UpstreamAuthorization>>,
    /// toolgate's identity at each upstream's server, once known; dropped when the server
    /// rejects it.
    clients: DashMap<String, ClientIdentity>,
}

impl std::fmt::Debug for Vault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vault").field("sealer", &self.sealer).finish_non_exhaustive()
    }
}

/// Why the vault could not serve a call: said to the model without internals.
#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    #[error("the vault cannot be read right now; try again shortly")]
    Storage,
    #[error("the upstream's authorization server is unavailable ({0}); try again shortly")]
    Unavailable(String),
    #[error("the upstream {0:?} does not run calls as each user")]
    NotPerUser(String),
}

impl From<sqlx::Error> for VaultError {
    fn from(e: sqlx::Error) -> Self {
        tracing::error!(error = %e, "vault: database error");
        Self::Storage
    }
}

impl Vault {
    /// Loads the keys; the error names the setting to fix.
    pub fn new(
        settings: &VaultSettings,
        store: Store,
        auth_server: Arc<AuthServer>,
        audit: Option<Arc<AuditLog>>,
    ) -> Result<Arc<Self>, String> {
        let sealer = Sealer::load(settings)?;
        Ok(Arc::new(Self {
            store,
            sealer,
            settings: settings.clone(),
            auth_server,
            audit,
            upstreams: DashMap::new(),
            clients: DashMap::new(),
        }))
    }

    /// toolgate's public origin: the authorization server's issuer.
    pub fn public_origin(&self) -> &str {
        self.auth_server.issuer().trim_end_matches('/')
    }

    pub fn auth_server(&self) -> &Arc<AuthServer> {
        &self.auth_server
    }

    /// Makes (or replaces) an upstream's authorization-server client.
    pub fn register(&self, auth: Arc<UpstreamAuthorization>) {
        self.clients.remove(&auth.upstream);
        self.upstreams.insert(auth.upstream.clone(), auth);
    }

    /// Forgets an upstream (removed through the admin API).
    pub fn unregister(&self, upstream: &str) {
        self.upstreams.remove(upstream);
        self.clients.remove(upstream);
    }

    /// The upstream's authorization server's metadata. One found through the upstream (no
    /// `oauth.authorization_server`) must be the one first found for it, by any replica:
    /// an upstream that later names another server is refused, so it cannot move its users'
    /// refresh tokens or toolgate's client secret there.
    pub async fn metadata(&self, auth: &UpstreamAuthorization) -> Result<Arc<authorization_server::AsMetadata>, AsError> {
        let metadata = auth.metadata().await?;
        if auth.settings.authorization_server.is_some() {
            return Ok(metadata);
        }
        let pinned = db::issuer_pin(&self.store, &auth.upstream, &metadata.issuer, crate::authserver::now_ms()).await.map_err(|e| {
            tracing::error!(error = %e, "vault: database error");
            AsError::Unavailable("the vault cannot be read".into())
        })?;
        if pinned != metadata.issuer {
            tracing::warn!(upstream = %auth.upstream, "vault: the upstream names another authorization server than the one first found; refused");
            return Err(AsError::Unavailable(format!(
                "the upstream now names another authorization server than the one first found for it ({}); an operator must set oauth.authorization_server",
                crate::untrusted::text::escaped(&pinned, 128)
            )));
        }
        Ok(metadata)
    }

    /// Forgets an upstream that was removed or now points elsewhere: its users' connections,
    /// its pinned authorization server, toolgate's registration there.
    pub async fn forget_upstream(&self, upstream: &str) {
        self.clients.remove(upstream);
        match db::forget_upstream(&self.store, upstream).await {
            Ok(0) => {}
            Ok(n) => {
                self.event(
                    "revoke",
                    Outcome::Ok,
                    upstream,
                    None,
                    &format!("{n} connections forgotten: the upstream was removed or changed"),
                )
                .await
            }
            Err(e) => tracing::error!(error = %e, upstream, "vault: cannot forget a removed upstream's connections"),
        }
    }

    pub fn authorization(&self, upstream: &str) -> Option<Arc<UpstreamAuthorization>> {
        self.upstreams.get(upstream).map(|a| a.clone())
    }

    /// toolgate's identity at an upstream's authorization server: the configured client, a
    /// Client ID Metadata Document (when the server supports them), or a dynamic registration
    /// stored so every replica uses the same one.
    pub async fn client(&self, auth: &UpstreamAuthorization) -> Result<ClientIdentity, AsError> {
        if let Some(known) = self.clients.get(&auth.upstream) {
            return Ok(known.clone());
        }
        let identity = self.resolve_client(auth).await?;
        self.clients.insert(auth.upstream.clone(), identity.clone());
        Ok(identity)
    }

    async fn resolve_client(&self, auth: &UpstreamAuthorization) -> Result<ClientIdentity, AsError> {
        if let Some(client_id) = &auth.settings.client_id {
            let secret = auth.settings.client_secret.as_ref().map(crate::config::upstreams::HeaderSource::read).transpose();
            let secret = secret.map_err(|e| AsError::Unavailable(format!("oauth.client_secret: {e}")))?;
            return Ok(ClientIdentity { client_id: client_id.clone(), secret });
        }
        let metadata = self.metadata(auth).await?;
        if metadata.metadata_documents && auth.metadata_document_url.starts_with("https://") {
            return Ok(ClientIdentity { client_id: auth.metadata_document_url.clone(), secret: None });
        }
        let unavailable = |e: sqlx::Error| {
            tracing::error!(error = %e, "vault: database error");
            AsError::Unavailable("the vault cannot be read".into())
        };
        let aad = |client_id: &str| format!("client\u{1f}{}\u{1f}{}\u{1f}{client_id}", auth.upstream, metadata.issuer);
        if let Some(row) = db::client_get(&self.store, &auth.upstream, &metadata.issuer).await.map_err(unavailable)? {
            return self.open_client(&row, &aad(&row.client_id));
        }
        let name = format!("toolgate at {}", self.public_origin());
        let Some(registered) = auth.register(&metadata, &name).await? else {
            return Err(AsError::Unavailable(
                "the authorization server offers neither Client ID Metadata Documents (over https) nor dynamic registration; set oauth.client_id".into(),
            ));
        };
        let (key_id, sealed) = match &registered.secret {
            Some(secret) => {
                let (k, s) = self.sealer.seal(&aad(&registered.client_id), secret.as_bytes());
                (Some(k), Some(s))
            }
            None => (None, None),
        };
        let row = db::ClientRow { client_id: registered.client_id.clone(), key_id, sealed_secret: sealed };
        db::client_put(&self.store, &auth.upstream, &metadata.issuer, &row, crate::authserver::now_ms()).await.map_err(unavailable)?;
        // Another replica may have registered first: its registration is the one kept.
        match db::client_get(&self.store, &auth.upstream, &metadata.issuer).await.map_err(unavailable)? {
            Some(row) => self.open_client(&row, &aad(&row.client_id)),
            None => Ok(registered),
        }
    }

    /// The server rejected toolgate's client (`invalid_client`): forget a dynamic
    /// registration, so the next use registers again; the users' grants stay.
    pub(crate) async fn client_rejected(&self, auth: &UpstreamAuthorization, issuer: &str) {
        self.clients.remove(&auth.upstream);
        if auth.settings.client_id.is_none()
            && let Err(e) = db::client_forget(&self.store, &auth.upstream, issuer).await
        {
            tracing::warn!(error = %e, "vault: cannot forget a rejected registration");
        }
    }

    fn open_client(&self, row: &db::ClientRow, aad: &str) -> Result<ClientIdentity, AsError> {
        let secret = match (&row.key_id, &row.sealed_secret) {
            (Some(key_id), Some(sealed)) => {
                let plain =
                    self.sealer.open(key_id, aad, sealed).map_err(|e| AsError::Unavailable(format!("toolgate's registration: {e}")))?;
                Some(String::from_utf8(plain).map_err(|_| AsError::Unavailable("toolgate's registration does not open".into()))?)
            }
            _ => None,
        };
        Ok(ClientIdentity { client_id: row.client_id.clone(), secret })
    }

    /// Whether the browser user `identity` is the MCP caller `principal_key` (UEL-05): the
    /// same subject, at the identity provider or in toolgate's own tokens.
    pub fn same_user(&self, principal_key: &str, identity: &Identity) -> bool {
        user_keys(self.auth_server.issuer(), identity).iter().any(|k| k == principal_key)
    }

    /// The record, metric and log line of one event; `subject` is whose connection.
    pub(crate) async fn event(&self, event: &'static str, outcome: Outcome, upstream: &str, principal: Option<&str>, detail: &str) {
        crate::metrics::record::vault_event(upstream, event, outcome.as_str());
        tracing::info!(event, outcome = outcome.as_str(), upstream, detail, "vault");
        let Some(audit) = &self.audit else { return };
        let mut record = AuditRecord::new(EventKind::Connection, outcome).with_detail(format!("{event} {upstream}: {detail}"));
        if let Some((issuer, subject)) = principal.and_then(|p| p.split_once('\u{1f}')) {
            record.issuer = Some(issuer.to_owned());
            record.subject = Some(subject.to_owned());
        }
        audit.record(record).await;
    }
}

/// The keys a signed-in browser user's connections may be under: toolgate's own tokens carry
/// the provider's subject under toolgate's issuer; tokens straight from the provider, its own.
pub fn user_keys(own_issuer: &str, identity: &Identity) -> [String; 2] {
    [format!("{own_issuer}\u{1f}{}", identity.subject), format!("{}\u{1f}{}", identity.issuer, identity.subject)]
}
