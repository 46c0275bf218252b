//! Sealing vault records: XChaCha20-Poly1305 (the `chacha20poly1305` crate) with a random
//! 24-byte nonce per record, so nonces never repeat under one key however many records are
//! sealed, and the record's identity as associated data, so a sealed value copied into another
//! row (another user, another upstream) fails to open instead of serving the wrong account.
//!
//! Keys come from files or environment variables (`[vault] keys`), never from the database:
//! a copy of the database alone opens nothing. The first key seals; every key opens what it
//! sealed (the record stores the key's id), which is how keys rotate.

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

use crate::config::vault::{VaultKeySource, VaultSettings};

const NONCE_LEN: usize = 24;

/// The vault's keys; the first seals.
pub struct Sealer {
    keys: Vec<(String, XChaCha20Poly1305)>,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer").field("key_ids", &self.keys.iter().map(|(id, _)| id).collect::<Vec<_>>()).finish()
    }
}

/// Why a record did not open: never which byte, never the key.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SealError {
    #[error("sealed with the key {0:?}, which [vault] keys no longer lists")]
    UnknownKey(String),
    #[error("the record does not open: it was altered, moved to another row, or sealed with another key of that id")]
    Tampered,
}

impl Sealer {
    /// Reads every key; the error names the setting to fix.
    pub fn load(settings: &VaultSettings) -> Result<Self, String> {
        if settings.keys.is_empty() {
            return Err("[vault] keys is empty: give at least one key (32 random bytes, base64: `openssl rand -base64 32`)".into());
        }
        let keys =
            settings.keys.iter().enumerate().map(|(i, k)| Ok((k.id.clone(), read_key(k).map_err(|e| format!("vault.keys[{i}]: {e}"))?)));
        Ok(Self { keys: keys.collect::<Result<_, String>>()? })
    }

    /// A sealer with the given raw keys (tests and tools).
    pub fn from_keys(keys: &[(&str, [u8; 32])]) -> Self {
        Self { keys: keys.iter().map(|(id, k)| ((*id).to_owned(), XChaCha20Poly1305::new(k.into()))).collect() }
    }

    /// The id of the key that seals.
    pub fn current(&self) -> &str {
        &self.keys[0].0
    }

    /// `plain` sealed with the current key, bound to `aad`: (key id, base64 of nonce and
    /// ciphertext).
    pub fn seal(&self, aad: &str, plain: &[u8]) -> (String, String) {
        let (id, cipher) = &self.keys[0];
        let nonce_bytes: [u8; NONCE_LEN] = rand::random();
        let nonce = XNonce::from_slice(&nonce_bytes);
        // Encryption fails only for plaintexts beyond 256 GiB; records are a few KiB.
        let sealed = cipher.encrypt(nonce, Payload { msg: plain, aad: aad.as_bytes() }).unwrap_or_default();
        let mut out = Vec::with_capacity(NONCE_LEN + sealed.len());
        out.extend_from_slice(&nonce_bytes);
        out.extend_from_slice(&sealed);
        (id.clone(), URL_SAFE_NO_PAD.encode(out))
    }

    /// What `seal` sealed with key `key_id` under `aad`.
    pub fn open(&self, key_id: &str, aad: &str, sealed: &str) -> Result<Vec<u8>, SealError> {
        let (_, cipher) =
            self.keys.iter().find(|(id, _)| id == key_id).ok_or_else(|| SealError::UnknownKey(key_id.chars().take(64).collect()))?;
        let raw = URL_SAFE_NO_PAD.decode(sealed).map_err(|_| SealError::Tampered)?;
        if raw.len() < NONCE_LEN + 16 {
            return Err(SealError::Tampered);
        }
        let (nonce, body) = raw.split_at(NONCE_LEN);
        cipher.decrypt(XNonce::from_slice(nonce), Payload { msg: body, aad: aad.as_bytes() }).map_err(|_| SealError::Tampered)
    }

    /// Whether a record sealed with `key_id` should be sealed again with the current key.
    pub fn is_old(&self, key_id: &str) -> bool {
        key_id != self.current()
    }
}

fn read_key(source: &VaultKeySource) -> Result<XChaCha20Poly1305, String> {
    let text = match (&source.file, &source.env) {
        (Some(path), _) => std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?,
        (None, Some(var)) => std::env::var(var).map_err(|_| format!("the environment variable {var} is not set"))?,
        (None, None) => return Err("give `file` or `env`".into()),
    };
    let text = text.trim();
    let bytes = [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE, &URL_SAFE_NO_PAD]
        .iter()
        .find_map(|engine| engine.decode(text).ok())
        .ok_or("the key is not base64 (make one with `openssl rand -base64 32`)")?;
    let key: [u8; 32] = bytes.try_into().map_err(|b: Vec<u8>| format!("the key is {} bytes; it must be 32", b.len()))?;
    Ok(XChaCha20Poly1305::new(&key.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_opens_with_its_key_and_its_row_only() {
        let sealer = Sealer::from_keys(&[("k1", [7; 32])]);
        let (id, sealed) = sealer.seal("row-a", b"token");
        assert_eq!(sealer.open(&id, "row-a", &sealed).as_deref(), Ok(&b"token"[..]));
        assert_eq!(sealer.open(&id, "row-b", &sealed), Err(SealError::Tampered));
    }

    #[test]
    fn a_flipped_byte_does_not_open() {
        let sealer = Sealer::from_keys(&[("k1", [7; 32])]);
        let (id, sealed) = sealer.seal("row", b"token");
        let mut raw = URL_SAFE_NO_PAD.decode(&sealed).expect("base64");
        raw[30] ^= 1;
        assert_eq!(sealer.open(&id, "row", &URL_SAFE_NO_PAD.encode(raw)), Err(SealError::Tampered));
    }

    #[test]
    fn an_old_key_still_opens_after_rotation() {
        let old = Sealer::from_keys(&[("k1", [1; 32])]);
        let (id, sealed) = old.seal("row", b"token");
        let rotated = Sealer::from_keys(&[("k2", [2; 32]), ("k1", [1; 32])]);
        assert_eq!(rotated.open(&id, "row", &sealed).as_deref(), Ok(&b"token"[..]));
        assert!(rotated.is_old(&id));
        let dropped = Sealer::from_keys(&[("k2", [2; 32])]);
        assert_eq!(dropped.open(&id, "row", &sealed), Err(SealError::UnknownKey("k1".into())));
    }
}
