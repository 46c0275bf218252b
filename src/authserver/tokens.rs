//! What the authorization server hands out: access tokens (RFC 9068 JWTs signed with the
//! first signing key, `typ: at+jwt`, audience the one resource of the grant) and the opaque
//! secrets (codes, refresh tokens, transaction ids), which are stored only as their SHA-256.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, Header};
use serde::Serialize;
use sha2::{Digest as _, Sha256};

use super::keys::SigningKeys;

/// The JWT `typ` of access tokens (RFC 9068 §2.1); the resource server requires it of
/// toolgate's own tokens, so an ID token or any other JWT signed by the same key is refused.
pub const ACCESS_TOKEN_TYP: &str = "at+jwt";

/// A fresh unguessable value: 256 bits from the OS generator, base64url (43 characters).
pub fn random_secret() -> String {
    let bytes: [u8; 32] = rand::random();
    URL_SAFE_NO_PAD.encode(bytes)
}

/// How a secret is stored and looked up: its SHA-256, hex. A database leak yields no usable
/// code or refresh token.
pub fn hash(secret: &str) -> String {
    let digest = Sha256::digest(secret.as_bytes());
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// S256 (RFC 7636 §4.2): whether `verifier` hashes to `challenge`.
pub fn pkce_matches(verifier: &str, challenge: &str) -> bool {
    let ok_syntax = (43..=128).contains(&verifier.len()) && verifier.bytes().all(pkce_char);
    ok_syntax && URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes())) == challenge
}

/// The characters of a PKCE verifier or challenge (RFC 7636 §4.1).
pub fn pkce_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// What an access token says.
#[derive(Debug, Serialize)]
pub struct AccessClaims<'a> {
    pub iss: &'a str,
    pub sub: &'a str,
    pub aud: &'a str,
    pub client_id: &'a str,
    pub scope: &'a str,
    pub iat: u64,
    pub exp: u64,
    pub jti: String,
    /// The grant it belongs to: the resource server refuses tokens of a revoked grant.
    pub sid: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<&'a str>,
}

/// Signs an access token.
pub fn mint(keys: &SigningKeys, claims: &AccessClaims<'_>) -> Result<String, String> {
    let (signer, kid) = keys.signer();
    let mut header = Header::new(Algorithm::ES256);
    header.typ = Some(ACCESS_TOKEN_TYP.to_owned());
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(&header, claims, signer).map_err(|e| format!("cannot sign an access token: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rfc_7636_example_verifier_matches_its_challenge() {
        assert!(pkce_matches("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk", "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"));
    }

    #[test]
    fn a_verifier_too_short_never_matches() {
        let short = "abc";
        let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(short.as_bytes()));
        assert!(!pkce_matches(short, &challenge));
    }

    #[test]
    fn secrets_are_distinct_and_256_bits() {
        let (a, b) = (random_secret(), random_secret());
        assert_ne!(a, b);
        assert_eq!(a.len(), 43);
    }

    #[test]
    fn a_stored_hash_is_hex_sha256() {
        assert_eq!(hash("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
