//! Who a verified access token speaks for: a leaf every layer may name (sessions are bound to
//! it, limits and audit records key on it) without depending on how tokens are verified.
//!
//! A [`Principal`] is only ever built by the token verifiers of [`crate::auth`] from a token
//! whose signature and claims have been checked, so everything in it can be trusted. It carries
//! no part of the token itself.

use std::collections::BTreeSet;

/// The caller behind a verified access token. Serializable only so a replica can hand a
/// request it authenticated to the replica that holds the session (over the cluster channel).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Principal {
    /// The `iss` claim: exactly one of the configured issuers.
    pub issuer: String,
    /// The `sub` claim: the resource owner (or the client itself for client-credentials
    /// tokens). Never empty and never contains control characters.
    pub subject: String,
    /// The OAuth client the token was issued to: `client_id` (RFC 9068), else `azp` (OIDC).
    pub client_id: Option<String>,
    /// Granted scopes: `scope` (space-separated, RFC 9068), else `scp` (a space-separated
    /// string or an array of strings, as some issuers send it).
    pub scopes: BTreeSet<String>,
    /// The `exp` claim, in seconds since the Unix epoch.
    pub expires_at: u64,
    /// Whether the token's audience names the default endpoint (`auth.resource` or an
    /// issuer's extra audience). A principal handed over by another replica predates the
    /// field only for the default endpoint's transport, hence the default.
    #[serde(default = "yes")]
    pub default_audience: bool,
    /// The virtual servers' audiences the token names (`src/virtual_servers`).
    #[serde(default)]
    pub server_audiences: Vec<String>,
}

fn yes() -> bool {
    true
}

impl Principal {
    /// A stable identity for binding sessions and other per-user state to a caller.
    ///
    /// Subjects are only unique per issuer, so the issuer is part of the key. The separator is
    /// the ASCII unit separator, which neither a configured issuer nor an accepted subject may
    /// contain, so two different principals can never produce the same key.
    pub fn key(&self) -> String {
        let mut key = String::with_capacity(self.issuer.len() + 1 + self.subject.len());
        key.push_str(&self.issuer);
        key.push('\u{1f}');
        key.push_str(&self.subject);
        key
    }

    /// Whether the token grants scope `s` (exact, case-sensitive match as RFC 6749 §3.3 says).
    pub fn has_scope(&self, s: &str) -> bool {
        self.scopes.contains(s)
    }
}

/// The verified bearer token a request carried, kept beside its [`Principal`] for one use only:
/// the `subject_token` of an RFC 8693 token exchange for an upstream MCP server
/// (`upstream::credentials`). It is never sent anywhere else, never logged (its `Debug` is
/// redacted) and never serialized, so it never crosses to another replica or into a task row.
#[derive(Clone, PartialEq, Eq)]
pub struct BearerToken(std::sync::Arc<str>);

impl BearerToken {
    pub fn new(token: &str) -> Self {
        Self(token.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken(<redacted>)")
    }
}
