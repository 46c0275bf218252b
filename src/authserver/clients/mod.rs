//! Who may ask for tokens. STUB: the interface the rest of the authorization server uses;
//! replaced by the real module (settings clients, metadata documents, registration).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::config::authserver::AuthServerSettings;
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
    pub auth_method: AuthMethod,
    /// Upper bound of its scopes; empty: none beyond the user's.
    pub scopes: Vec<String>,
    pub logo_uri: Option<String>,
    pub client_uri: Option<String>,
    /// Whether it gets refresh tokens (registered `refresh_token` in `grant_types`, or any
    /// client that asks for `offline_access`).
    pub refresh_tokens: bool,
    /// A hash of what the consent page shows and where codes go: a change asks again.
    pub fingerprint: String,
}

impl Client {
    /// Whether `requested` is one of its redirect URIs: exact, except the port of a loopback
    /// `http` URI (RFC 8252 §7.3).
    pub fn redirect_allowed(&self, _requested: &str) -> bool {
        todo!()
    }

    /// Checks a presented secret (constant time); false for public clients.
    pub fn secret_matches(&self, _presented: &str) -> bool {
        todo!()
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
    /// `invalid_redirect_uri`, `invalid_client_metadata`, or `invalid_token` (bad initial
    /// access token, 401).
    pub error: &'static str,
    pub description: String,
}

/// The clients of this authorization server.
pub struct Clients {
    _settings: Arc<AuthServerSettings>,
    _store: Store,
}

impl Clients {
    pub fn new(settings: Arc<AuthServerSettings>, store: Store) -> Result<Self, String> {
        Ok(Self { _settings: settings, _store: store })
    }

    pub async fn resolve(&self, _client_id: &str) -> Result<Arc<Client>, ClientError> {
        todo!()
    }

    /// RFC 7591: registers from a JSON body; `Ok` is the 201 response body.
    pub async fn register(&self, _body: &[u8], _initial_access_token: Option<&str>) -> Result<serde_json::Value, RegistrationError> {
        todo!()
    }

    /// Notes a sign-in by a registered client (unused ones expire).
    pub async fn touch(&self, _client_id: &str) {}

    /// Deletes registrations unused for `registration.unused_secs`.
    pub async fn purge(&self) -> Result<u64, sqlx::Error> {
        Ok(0)
    }
}
