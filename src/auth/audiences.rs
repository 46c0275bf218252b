//! The audiences of the virtual servers (`src/virtual_servers`), which every token verifier
//! accepts besides its own: a token is verified once, and the [`Principal`] records which of
//! the endpoints its audience names, so the bearer gate can refuse a token issued for one
//! server at another (RFC 8707) without verifying it again.

use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::principal::Principal;

/// See the module docs. Replaced whole when the virtual servers change.
#[derive(Debug, Default)]
pub struct ServerAudiences(ArcSwap<Vec<String>>, ArcSwap<Vec<String>>, ArcSwap<Vec<String>>);

impl ServerAudiences {
    /// Every server's accepted audiences, of those the servers' own resource URIs (which
    /// toolgate's authorization server may issue tokens for), and the scopes they require.
    pub fn set(&self, audiences: Vec<String>, resources: Vec<String>, scopes: Vec<String>) {
        self.0.store(Arc::new(audiences));
        self.1.store(Arc::new(resources));
        self.2.store(Arc::new(scopes));
    }

    /// The scopes the servers require (which the authorization server then knows too).
    pub fn scopes(&self) -> Arc<Vec<String>> {
        self.2.load_full()
    }

    pub fn load(&self) -> Arc<Vec<String>> {
        self.0.load_full()
    }

    pub fn resources(&self) -> Arc<Vec<String>> {
        self.1.load_full()
    }

    /// Records on `principal` which endpoints the token's `aud` names: the default one (any of
    /// `own`, the issuer's accepted audiences) and the virtual servers' audiences among `aud`.
    /// False when it names none of them.
    pub fn classify<'a>(&self, aud: impl Iterator<Item = &'a str> + Clone, own: &[String], principal: &mut Principal) -> bool {
        let servers = self.0.load();
        principal.default_audience = aud.clone().any(|a| own.iter().any(|o| o == a));
        principal.server_audiences = aud.filter(|a| servers.iter().any(|s| s == a)).take(16).map(str::to_owned).collect();
        principal.default_audience || !principal.server_audiences.is_empty()
    }
}
