//! Session ids: 128 random bits from the OS CSPRNG plus a 128-bit HMAC of them under the
//! session secret, hex-encoded (64 visible ASCII characters, S-02/S-03).
//!
//! The MAC lets every replica refuse a forged or mistyped id before touching the shared store,
//! so a flood of random ids costs a hash each, not a database query each. It proves only that
//! a replica sharing the secret minted the id; whether the session still exists is the store's
//! answer.

use hmac::{Hmac, Mac};
use rand::RngCore as _;
use sha2::Sha256;

const RANDOM_BYTES: usize = 16;
const MAC_BYTES: usize = 16;

/// Mints and checks session ids under one secret.
#[derive(Clone)]
pub struct IdSigner {
    key: Vec<u8>,
}

impl std::fmt::Debug for IdSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IdSigner(<secret>)")
    }
}

impl IdSigner {
    /// `secret` is shared by every replica (`sessions.secret`); `None` makes a random
    /// per-process key, which is right for a single node.
    pub fn new(secret: Option<&str>) -> Self {
        let key = match secret {
            Some(s) => s.as_bytes().to_vec(),
            None => {
                let mut k = vec![0u8; 32];
                rand::rng().fill_bytes(&mut k);
                k
            }
        };
        Self { key }
    }

    /// A fresh id.
    pub fn mint(&self) -> String {
        let mut random = [0u8; RANDOM_BYTES];
        // ThreadRng is a ChaCha CSPRNG seeded from the OS.
        rand::rng().fill_bytes(&mut random);
        let mac = self.mac(&random);
        let mut id = String::with_capacity(2 * (RANDOM_BYTES + MAC_BYTES));
        for b in random.iter().chain(&mac[..MAC_BYTES]) {
            id.push_str(&format!("{b:02x}"));
        }
        id
    }

    /// Whether `id` was minted under this secret (constant-time comparison).
    pub fn verify(&self, id: &str) -> bool {
        let Some(bytes) = decode_hex(id) else { return false };
        if bytes.len() != RANDOM_BYTES + MAC_BYTES {
            return false;
        }
        let (random, tag) = bytes.split_at(RANDOM_BYTES);
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes keys of any length");
        mac.update(random);
        mac.verify_truncated_left(tag).is_ok()
    }

    fn mac(&self, random: &[u8]) -> Vec<u8> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes keys of any length");
        mac.update(random);
        mac.finalize().into_bytes().to_vec()
    }
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_ids_verify_under_the_same_secret_only() {
        let a = IdSigner::new(Some("shared secret"));
        let b = IdSigner::new(Some("shared secret"));
        let other = IdSigner::new(Some("another secret"));
        let id = a.mint();
        assert_eq!(id.len(), 64);
        assert!(id.bytes().all(|c| c.is_ascii_hexdigit()));
        assert!(a.verify(&id) && b.verify(&id), "any replica with the secret accepts it");
        assert!(!other.verify(&id));
        let mut forged = id.clone().into_bytes();
        forged[0] = if forged[0] == b'0' { b'1' } else { b'0' };
        assert!(!a.verify(std::str::from_utf8(&forged).expect("ascii")));
        for bad in ["", "xyz", &id[..62], &format!("{id}00")] {
            assert!(!a.verify(bad), "{bad:?}");
        }
        assert_ne!(a.mint(), a.mint());
    }
}
