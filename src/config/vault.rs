//! `[vault]`: where per-user upstream tokens are kept (`src/vault`). Only needed by upstreams
//! with `oauth.grant = "user"`.
//!
//! ```toml
//! [vault]
//! keys = [
//!     { id = "2026-12", file = "/run/secrets/vault-2026-12" },   # seals new records
//!     { id = "2026-06", file = "/run/secrets/vault-2026-06" },   # still opens older ones
//! ]
//! ```

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Most keys listed at once.
const MAX_KEYS: usize = 16;

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct VaultSettings {
    /// The AEAD keys (XChaCha20-Poly1305): each 32 random bytes, base64, in a file or an
    /// environment variable (`openssl rand -base64 32` makes one). The first seals every new
    /// or refreshed record; every key listed opens. Rotation: put the new key first and
    /// restart (a pass at start-up seals every record again with it, and refreshes use it),
    /// then remove the old key.
    pub keys: Vec<VaultKeySource>,
    /// How long a connect link (an elicitation's URL) may be followed, in seconds. 600.
    pub connect_ttl_secs: u64,
}

impl Default for VaultSettings {
    fn default() -> Self {
        Self { keys: Vec::new(), connect_ttl_secs: 600 }
    }
}

/// One key: its id (stored beside each record it sealed) and where its value is.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct VaultKeySource {
    pub id: String,
    pub file: Option<PathBuf>,
    pub env: Option<String>,
}

impl VaultSettings {
    /// `Err((key, reason))` names the setting to change.
    pub fn validate(&self) -> Result<(), (String, String)> {
        if self.keys.len() > MAX_KEYS {
            return Err(("vault.keys".into(), format!("at most {MAX_KEYS} keys; remove keys no record is sealed with")));
        }
        for (i, key) in self.keys.iter().enumerate() {
            let at = format!("vault.keys[{i}]");
            if key.id.is_empty()
                || key.id.len() > 64
                || !key.id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            {
                return Err((format!("{at}.id"), "1 to 64 characters of A-Z, a-z, 0-9, '-', '_' and '.'".into()));
            }
            if key.file.is_some() == key.env.is_some() {
                return Err((at, "give exactly one of `file` or `env`".into()));
            }
            if self.keys[..i].iter().any(|k| k.id == key.id) {
                return Err((format!("{at}.id"), format!("{:?} is listed twice", key.id)));
            }
        }
        if !(60..=3600).contains(&self.connect_ttl_secs) {
            return Err(("vault.connect_ttl_secs".into(), "must be between 60 and 3600".into()));
        }
        Ok(())
    }
}
