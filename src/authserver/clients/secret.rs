//! Client secrets, kept only as their SHA-256 and compared in constant time. A registered
//! client's secret is 256 random bits, so a fast hash is enough (nothing to guess
//! backwards); a configured one is the operator's choice and never leaves memory, nor is its
//! hash ever printed.

use sha2::{Digest, Sha256};

/// The SHA-256 of a client secret. Its `Debug` hides it: a configured secret may be a weak
/// password, and a hash in a log could be guessed back. No `PartialEq`: [`SecretHash::matches`]
/// is the only comparison.
#[derive(Clone)]
pub struct SecretHash([u8; 32]);

impl SecretHash {
    pub fn of(secret: &str) -> Self {
        Self(Sha256::digest(secret.as_bytes()).into())
    }

    /// Lower-case hex, as stored.
    pub fn to_hex(&self) -> String {
        hex(&self.0)
    }

    pub fn from_hex(text: &str) -> Option<Self> {
        if text.len() != 64 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let bytes: Vec<u8> = (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect::<Option<_>>()?;
        bytes.try_into().ok().map(Self)
    }

    /// Equality in time independent of where the two differ.
    pub fn matches(&self, other: &SecretHash) -> bool {
        let diff = self.0.iter().zip(other.0.iter()).fold(0u8, |acc, (a, b)| acc | (a ^ b));
        std::hint::black_box(diff) == 0
    }
}

impl std::fmt::Debug for SecretHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretHash(<redacted>)")
    }
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_hash_reads_back_from_hex_and_hides_in_debug() {
        let hash = SecretHash::of("x");
        assert!(SecretHash::from_hex(&hash.to_hex()).is_some_and(|back| back.matches(&hash)));
        assert!(SecretHash::from_hex("abc").is_none() && SecretHash::from_hex(&"+a".repeat(32)).is_none());
        assert!(!format!("{hash:?}").contains(&hash.to_hex()));
    }
}
