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
//! - [`flow`]: the browser's way: transaction bound to the browser, the identity provider's
//!   callback, consent (remembered per user and client).
//! - [`token`]: codes, the token endpoint, refresh rotation with reuse detection;
//!   [`revocation`]: RFC 7009 and the deny list the resource server checks.
//! - [`keys`] and [`tokens`]: the signing keys (rotation, JWKS), access tokens, secrets.
//! - [`db`]: the tables, so any replica serves any step; [`service`]: the parts together,
//!   metadata, and the record every event leaves.

pub mod authorize;
pub mod clients;
pub mod db;
pub mod federation;
pub mod flow;
pub mod keys;
pub mod revocation;
pub mod service;
pub mod token;
pub mod tokens;

pub use service::{AuthServer, Parts};

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
