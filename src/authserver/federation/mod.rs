//! toolgate as the identity provider's relying party. STUB: the interface; replaced by the
//! real module.

use serde::{Deserialize, Serialize};

use super::Identity;
use crate::config::authserver::{IdentityProviderSettings, ScopeRule};

/// What must be kept between the redirect to the provider and its callback (server-side, in
/// the transaction): never sent to the browser.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PendingLogin {
    pub issuer: String,
    pub nonce: String,
    pub pkce_verifier: String,
}

#[derive(Debug, thiserror::Error)]
pub enum FederationError {
    /// The provider could not be reached or answered nonsense (503 for the user, logged).
    #[error("the identity provider is unavailable: {0}")]
    Unavailable(String),
    /// The sign-in failed a check (ID token, issuer, nonce, tenant, domain): 403 page.
    #[error("sign-in refused: {0}")]
    Refused(String),
}

pub struct IdentityProvider {
    _settings: IdentityProviderSettings,
}

impl IdentityProvider {
    /// `redirect_uri` is `<issuer>/oauth/callback`; discovery happens on first use and is
    /// cached (refreshed when a key is unknown).
    pub fn new(settings: IdentityProviderSettings, _rules: Vec<ScopeRule>, _redirect_uri: String, _http: reqwest::Client) -> Result<Self, String> {
        Ok(Self { _settings: settings })
    }

    /// The URL to send the browser to, with `state`, and what the callback needs.
    pub async fn begin(&self, _state: &str) -> Result<(String, PendingLogin), FederationError> {
        todo!()
    }

    /// Redeems the provider's code, verifies the ID token, applies the tenant and domain
    /// rules and the scope rules. `iss` is the callback's `iss` parameter (RFC 9207), if any.
    pub async fn complete(&self, _pending: &PendingLogin, _code: &str, _iss: Option<&str>) -> Result<Identity, FederationError> {
        todo!()
    }
}
