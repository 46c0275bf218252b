//! [`AuthServer`]: the authorization server's parts put together (settings, keys, clients,
//! identity provider, database, audit), its metadata document (RFC 8414), and the record
//! every event leaves (audit log, metric, log line).

use std::sync::Arc;

use serde_json::{Value, json};

use super::clients::Clients;
use super::federation::IdentityProvider;
use super::keys::SigningKeys;
use super::revocation::DenyList;
use crate::audit::AuditLog;
use crate::audit::{AuditRecord, EventKind, Outcome};
use crate::config::authserver::{AuthServerSettings, RegistrationMode};
use crate::store::Store;

/// The authorization server. Shared (`Arc`); every method takes `&self`.
pub struct AuthServer {
    pub(super) settings: Arc<AuthServerSettings>,
    /// The issuer identifier, byte for byte as configured.
    pub(super) issuer: String,
    /// The MCP endpoints tokens may be issued for (`resource`), canonical forms.
    pub(super) resources: Vec<String>,
    pub(super) servers: Arc<crate::auth::ServerAudiences>,
    /// Scopes this server knows (`scopes_supported`).
    pub(super) scopes_supported: Vec<String>,
    pub(super) keys: SigningKeys,
    pub(super) clients: Clients,
    pub(super) idp: IdentityProvider,
    pub(super) store: Store,
    pub(super) audit: Option<Arc<AuditLog>>,
    pub(super) deny: Arc<DenyList>,
}

impl std::fmt::Debug for AuthServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthServer").field("issuer", &self.issuer).field("resources", &self.resources).finish_non_exhaustive()
    }
}

/// What [`AuthServer::new`] needs besides the settings.
pub struct Parts {
    pub resources: Vec<String>,
    /// The virtual servers, whose resources tokens may be issued for too.
    pub servers: Arc<crate::auth::ServerAudiences>,
    pub scopes_supported: Vec<String>,
    pub store: Store,
    pub audit: Option<Arc<AuditLog>>,
    pub http: reqwest::Client,
}

impl AuthServer {
    /// Loads the keys and builds the parts; the error names the setting to fix.
    pub fn new(settings: AuthServerSettings, parts: Parts) -> Result<Self, String> {
        let issuer = settings.issuer.clone().ok_or("authorization_server.issuer is required")?;
        let keys = SigningKeys::load(&settings)?;
        let settings = Arc::new(settings);
        let clients = Clients::new(Arc::clone(&settings), parts.store.clone())?;
        let rules = settings.scope_rules.clone();
        let idp = IdentityProvider::new(settings.identity_provider.clone(), rules, format!("{issuer}/oauth/callback"), parts.http)?;
        let deny = Arc::new(DenyList::new(settings.access_token_ttl_secs));
        crate::metrics::record::oauth_started();
        Ok(Self {
            settings,
            issuer,
            resources: parts.resources,
            servers: parts.servers,
            scopes_supported: parts.scopes_supported,
            keys,
            clients,
            idp,
            store: parts.store,
            audit: parts.audit,
            deny,
        })
    }

    /// Every resource a token may be issued for: the default endpoint's, then each virtual
    /// server's (those change with the stored definitions).
    pub(super) fn all_resources(&self) -> Vec<String> {
        self.resources.iter().cloned().chain(self.servers.resources().iter().cloned()).collect()
    }

    /// Every scope it knows: `scopes_supported`, then the virtual servers' own.
    pub(super) fn all_scopes(&self) -> Vec<String> {
        let mut all = self.scopes_supported.clone();
        all.extend(self.servers.scopes().iter().filter(|s| !self.scopes_supported.contains(s)).cloned());
        all
    }

    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    pub fn settings(&self) -> &AuthServerSettings {
        &self.settings
    }

    pub fn keys(&self) -> &SigningKeys {
        &self.keys
    }

    pub fn clients(&self) -> &Clients {
        &self.clients
    }

    /// Revoked grants, for the resource server's token checks.
    pub fn deny_list(&self) -> Arc<DenyList> {
        Arc::clone(&self.deny)
    }

    /// Whether transaction cookies must be `Secure` (an https issuer).
    /// Sends a browser to the identity provider for another purpose than an authorization
    /// request (the vault's connect page, `src/vault/connect.rs`): the provider's URL with
    /// `state`, and what [`Self::sign_in_complete`] needs.
    pub async fn sign_in_begin(
        &self,
        state: &str,
    ) -> Result<(String, super::federation::PendingLogin), super::federation::FederationError> {
        self.idp.begin(state).await
    }

    /// The provider's answer to [`Self::sign_in_begin`]: the user, checked as at sign-in.
    pub async fn sign_in_complete(
        &self,
        pending: &super::federation::PendingLogin,
        code: &str,
        iss: Option<&str>,
    ) -> Result<super::Identity, super::federation::FederationError> {
        self.idp.complete(pending, code, iss).await
    }

    pub fn secure_cookies(&self) -> bool {
        self.issuer.starts_with("https://")
    }

    /// The RFC 8414 metadata document (also served as OpenID discovery).
    pub fn metadata(&self) -> Value {
        let at = |path: &str| format!("{}{path}", self.issuer);
        let mut scopes = self.scopes_supported.clone();
        if !scopes.iter().any(|s| s == "offline_access") {
            scopes.push("offline_access".into());
        }
        let mut doc = json!({
            "issuer": self.issuer,
            "authorization_endpoint": at("/oauth/authorize"),
            "token_endpoint": at("/oauth/token"),
            "revocation_endpoint": at("/oauth/revoke"),
            "jwks_uri": at("/oauth/jwks"),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
            "revocation_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
            "scopes_supported": scopes,
            "authorization_response_iss_parameter_supported": true,
            "client_id_metadata_document_supported": self.settings.metadata_documents.enabled,
            // OpenID discovery readers require these; toolgate issues no ID tokens, but the
            // access tokens are ES256 JWTs.
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["ES256"],
        });
        if self.settings.registration.mode != RegistrationMode::Off {
            doc["registration_endpoint"] = json!(at("/oauth/register"));
        }
        doc
    }

    /// Records an event: an audit record (kind `oauth`), a metric and a log line. `detail`
    /// says what happened; it never holds a token, code or secret.
    pub(super) async fn event(&self, event: &'static str, outcome: Outcome, who: Who<'_>, detail: String) {
        crate::metrics::record::oauth_event(event, outcome.as_str());
        tracing::info!(event, outcome = outcome.as_str(), client_id = who.client_id.unwrap_or(""), subject = who.subject.unwrap_or(""), detail = %detail, "authorization server");
        let Some(audit) = &self.audit else { return };
        let mut record = AuditRecord::new(EventKind::Oauth, outcome).with_detail(format!("{event}: {detail}"));
        record.issuer = who.subject.map(|_| self.issuer.clone());
        record.subject = who.subject.map(str::to_owned);
        record.client_id = who.client_id.map(|c| crate::untrusted::text::clip(c, 512).0.to_owned());
        if let Some(ip) = who.ip {
            record = record.with_client_ip(ip);
        }
        audit.record(record).await;
    }
}

/// Who an event concerns, as far as known.
#[derive(Clone, Copy, Default)]
pub struct Who<'a> {
    pub client_id: Option<&'a str>,
    pub subject: Option<&'a str>,
    pub ip: Option<std::net::IpAddr>,
}
