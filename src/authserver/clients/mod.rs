//! Who may ask for tokens: clients from the settings, Client ID Metadata Documents (an
//! `https` client id, fetched through the SSRF guard and cached), and clients registered
//! dynamically (RFC 7591, in the database so every replica sees them).
//!
//! Files: `redirect` (redirect URI rules), `metadata` (fields every kind shares),
//! `metadata_document` (document URLs and contents), `fetch` (fetching and caching
//! documents), `registration` (RFC 7591), `secret` (secret hashes), `db` (the
//! `oauth_clients` table).
//!
//! Secrets are kept only as their SHA-256 (`secret`).

mod db;
mod fetch;
mod metadata;
mod metadata_document;
pub mod redirect;
mod registration;
mod secret;

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use secret::SecretHash;

use crate::config::authserver::{AuthServerSettings, ClientSettings};
use crate::store::Store;

/// Where a client's description comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientKind {
    /// `[[authorization_server.clients]]`: the operator's own.
    Settings,
    /// Dynamic registration: self-asserted, shown as unverified.
    Registered,
    /// A Client ID Metadata Document at its `https` client id.
    MetadataDocument,
}

/// How a client authenticates at the token endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthMethod {
    None,
    ClientSecretBasic,
    ClientSecretPost,
}

/// A client, resolved.
#[derive(Clone, Debug)]
pub struct Client {
    pub client_id: String,
    pub name: String,
    pub kind: ClientKind,
    pub redirect_uris: Vec<String>,
    /// The registered method; a client with a secret may use either secret method
    /// ([`Client::accepts`]).
    pub auth_method: AuthMethod,
    /// Upper bound of its scopes; empty: none beyond the user's.
    pub scopes: Vec<String>,
    /// `https` to a host that is not a literal private address, or `None`. Never fetched by
    /// toolgate. Kept for metadata documents only (the page shows the document's host beside
    /// it); never for registered clients, whose name and logo anyone can copy.
    pub logo_uri: Option<String>,
    pub client_uri: Option<String>,
    /// Whether it gets refresh tokens (registered `refresh_token` in `grant_types`, or any
    /// client that asks for `offline_access`).
    pub refresh_tokens: bool,
    /// A hash of what the consent page shows and where codes go: a change asks again.
    pub fingerprint: String,
    /// The SHA-256 of its secret; `None` for public clients.
    pub secret_hash: Option<SecretHash>,
}

impl Client {
    /// Whether `requested` is one of its redirect URIs: exact, except the port of a loopback
    /// `http` URI (RFC 8252 §7.3).
    pub fn redirect_allowed(&self, requested: &str) -> bool {
        self.redirect_uris.iter().any(|registered| redirect::matches(registered, requested))
    }

    /// Whether every redirect URI is loopback `http`: any local process could then receive
    /// the code, so the consent page warns (CLR-15).
    pub fn only_loopback_redirects(&self) -> bool {
        self.redirect_uris.iter().all(|uri| redirect::is_loopback(uri))
    }

    /// Checks a presented secret (constant time); false for public clients.
    pub fn secret_matches(&self, presented: &str) -> bool {
        self.secret_hash.as_ref().is_some_and(|hash| hash.matches(&SecretHash::of(presented)))
    }

    /// Whether the token endpoint may accept this way of authenticating: `none` from a public
    /// client only, a secret (basic or post: both prove the same secret) from a confidential
    /// one only.
    pub fn accepts(&self, method: AuthMethod) -> bool {
        (method == AuthMethod::None) == self.secret_hash.is_none()
    }

    /// Sets the fingerprint from what it covers; call after building one.
    pub fn sealed(mut self) -> Self {
        self.fingerprint = self.compute_fingerprint();
        self
    }

    /// SHA-256 (hex) of kind, name, sorted redirect URIs and logo, as JSON so no two
    /// different lists hash alike.
    fn compute_fingerprint(&self) -> String {
        let mut uris: Vec<&str> = self.redirect_uris.iter().map(String::as_str).collect();
        uris.sort_unstable();
        let covered = serde_json::json!([self.kind, self.name, uris, self.logo_uri]);
        secret::hex(&Sha256::digest(covered.to_string().as_bytes()))
    }
}

/// Why a client id cannot be used. Shown on an error page (never by redirect).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("unknown client_id")]
    Unknown,
    #[error("the client's metadata document could not be used: {0}")]
    Document(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// A refused registration (RFC 7591 §3.2.2).
#[derive(Debug)]
pub struct RegistrationError {
    /// `invalid_redirect_uri` or `invalid_client_metadata` (400); `invalid_token` (bad initial
    /// access token, 401); `access_denied` (registration is off, 403); `server_error` (the
    /// database failed, 500).
    pub error: &'static str,
    pub description: String,
}

/// The clients of this authorization server.
pub struct Clients {
    settings: Arc<AuthServerSettings>,
    store: Store,
    configured: HashMap<String, Arc<Client>>,
    documents: fetch::Documents,
}

impl Clients {
    /// Checks the configured clients' redirect URIs and reads `metadata_documents.ca_file`;
    /// `Err` names the setting to fix.
    pub fn new(settings: Arc<AuthServerSettings>, store: Store) -> Result<Self, String> {
        let mut configured = HashMap::new();
        for (i, entry) in settings.clients.iter().enumerate() {
            let client = configured_client(entry, &settings.redirect_schemes)
                .map_err(|reason| format!("authorization_server.clients[{i}].redirect_uris: {reason}"))?;
            configured.insert(entry.client_id.clone(), Arc::new(client));
        }
        let documents = fetch::Documents::new(&settings.metadata_documents)?;
        Ok(Self { settings, store, configured, documents })
    }

    pub async fn resolve(&self, client_id: &str) -> Result<Arc<Client>, ClientError> {
        if let Some(client) = self.configured.get(client_id) {
            return Ok(client.clone());
        }
        if metadata_document::is_url_form(client_id) {
            let url = metadata_document::check_url(client_id, &self.settings.metadata_documents).map_err(ClientError::Document)?;
            return self.documents.get(url, &self.settings.redirect_schemes).await.map_err(ClientError::Document);
        }
        if !registration::is_generated_id(client_id) {
            return Err(ClientError::Unknown);
        }
        let stored = db::get(&self.store, client_id).await?.ok_or(ClientError::Unknown)?;
        registration::client(client_id, &stored).map(Arc::new).ok_or(ClientError::Unknown)
    }

    /// RFC 7591: registers from a JSON body; `Ok` is the 201 response body.
    pub async fn register(&self, body: &[u8], initial_access_token: Option<&str>) -> Result<serde_json::Value, RegistrationError> {
        registration::authorize(&self.settings.registration, initial_access_token)?;
        let registered = registration::parse(body, &self.settings)?;
        let issued = registration::issue(registered);
        let now = super::now_ms();
        let metadata = issued.stored_metadata();
        let secret_hash = issued.secret.as_deref().map(|s| SecretHash::of(s).to_hex());
        db::insert(&self.store, &issued.client_id, &metadata, secret_hash.as_deref(), now).await.map_err(|error| {
            tracing::error!(%error, "authorization server: could not store a client registration");
            RegistrationError { error: "server_error", description: "the registration could not be stored".into() }
        })?;
        tracing::info!(client_id = %issued.client_id, client_name = %crate::untrusted::text::escaped(issued.name(), 200), "authorization server: registered a client");
        Ok(issued.response(now))
    }

    /// Notes a sign-in by a registered client (unused ones expire).
    pub async fn touch(&self, client_id: &str) {
        if !registration::is_generated_id(client_id) {
            return;
        }
        if let Err(error) = db::touch(&self.store, client_id, super::now_ms()).await {
            tracing::warn!(%error, "authorization server: could not note a client's use");
        }
    }

    /// Deletes registrations unused for `registration.unused_secs`.
    pub async fn purge(&self) -> Result<u64, sqlx::Error> {
        let unused_ms = i64::try_from(self.settings.registration.unused_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
        db::purge(&self.store, super::now_ms().saturating_sub(unused_ms)).await
    }
}

/// A `[[authorization_server.clients]]` entry; `Err` says which redirect URI is wrong.
fn configured_client(entry: &ClientSettings, schemes: &[String]) -> Result<Client, String> {
    for uri in &entry.redirect_uris {
        redirect::check(uri, schemes)?;
    }
    let secret_hash = entry.client_secret.as_ref().map(|s| SecretHash::of(s.expose()));
    Ok(Client {
        client_id: entry.client_id.clone(),
        name: entry.client_name.clone(),
        kind: ClientKind::Settings,
        redirect_uris: entry.redirect_uris.clone(),
        auth_method: if secret_hash.is_some() { AuthMethod::ClientSecretBasic } else { AuthMethod::None },
        scopes: entry.scopes.clone(),
        logo_uri: None,
        client_uri: None,
        refresh_tokens: true,
        fingerprint: String::new(),
        secret_hash,
    }
    .sealed())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Secret;

    fn entry(secret: Option<&str>) -> ClientSettings {
        ClientSettings {
            client_id: "ops-cli".into(),
            client_name: "Ops CLI".into(),
            redirect_uris: vec!["http://127.0.0.1/cb".into()],
            client_secret: secret.map(|s| Secret::new(s.into())),
            scopes: vec![],
        }
    }

    #[test]
    fn a_configured_client_with_a_secret_is_confidential() {
        let client = configured_client(&entry(Some("hunter2-but-longer")), &[]).expect("valid");
        assert!(client.secret_matches("hunter2-but-longer"));
        assert!(!client.secret_matches("hunter2-but-longeR") && !client.secret_matches(""));
        assert!(
            client.accepts(AuthMethod::ClientSecretPost)
                && client.accepts(AuthMethod::ClientSecretBasic)
                && !client.accepts(AuthMethod::None)
        );
    }

    #[test]
    fn a_configured_client_without_a_secret_is_public() {
        let client = configured_client(&entry(None), &[]).expect("valid");
        assert_eq!(client.auth_method, AuthMethod::None);
        assert!(!client.secret_matches("") && client.accepts(AuthMethod::None) && !client.accepts(AuthMethod::ClientSecretBasic));
    }

    #[test]
    fn a_configured_client_with_a_bad_redirect_uri_is_refused() {
        let mut bad = entry(None);
        bad.redirect_uris = vec!["http://evil.example/cb".into()];
        assert!(configured_client(&bad, &[]).is_err());
    }

    #[test]
    fn the_fingerprint_changes_with_redirect_uris_but_not_their_order() {
        let mut two = entry(None);
        two.redirect_uris.push("https://a.example/cb".into());
        let first = configured_client(&two, &[]).expect("valid").fingerprint;
        two.redirect_uris.reverse();
        assert_eq!(configured_client(&two, &[]).expect("valid").fingerprint, first);
        two.redirect_uris.push("https://b.example/cb".into());
        assert_ne!(configured_client(&two, &[]).expect("valid").fingerprint, first);
    }
}
