//! toolgate's own OAuth 2.1 authorization server for MCP clients (`[authorization_server]`),
//! which signs users in at the organization's OpenID Connect provider. A core service: no HTTP
//! types here; `crate::authserver_http` serves its endpoints and pages.
//!
//! - [`clients`]: who may ask: clients from the settings, Client ID Metadata Documents
//!   (fetched through the SSRF guard), dynamic registration (RFC 7591); redirect URI rules.
//! - [`federation`]: toolgate as the identity provider's relying party (code + PKCE + nonce),
//!   the ID token's checks, the provider presets, and the scope rules.
//! - [`authorize`]: the checks of an authorization request, in the order that never
//!   redirects to an unverified URI.
//! - [`grants`]: transactions, consent, codes, grants, refresh tokens and revocation, in
//!   the database so any replica serves any step.
//! - [`keys`] and [`tokens`]: the signing keys (rotation, JWKS) and the access tokens.

pub mod authorize;
pub mod clients;
pub mod db;
pub mod federation;
pub mod grants;
pub mod keys;
pub mod tokens;

use serde::{Deserialize, Serialize};

/// A user signed in at the identity provider, as toolgate keeps them: the stable key is
/// (`issuer`, `subject`); `email` and `name` are for display and audit only.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Identity {
    /// The ID token's `iss` (for Entra ID multi-tenant, the tenant's own issuer).
    pub issuer: String,
    pub subject: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// The scopes the scope rules grant this user (a client's request narrows them).
    pub scopes: Vec<String>,
}

impl Identity {
    /// The key consent and grants are kept under.
    pub fn user_key(&self) -> String {
        format!("{}|{}", self.issuer, self.subject)
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}
