//! The authorization server's signing keys: EC P-256 (ES256), from PEM files or secrets,
//! never generated silently. The first key signs; every key is published at the JWKS path and
//! trusted by the resource server, so a rotation is: add the new key second, wait a token
//! lifetime (every replica and every cache now knows it), move it first, and remove the old
//! one after another token lifetime.

use jsonwebtoken::jwk::{Jwk, JwkSet, ThumbprintHash};
use jsonwebtoken::{Algorithm, EncodingKey};
use p256::pkcs8::{DecodePrivateKey, EncodePrivateKey, LineEnding};

use crate::auth::jwks::{PublicKey, parse_jwks};
use crate::config::authserver::AuthServerSettings;

/// The keys, ready for signing and publishing.
pub struct SigningKeys {
    signer: EncodingKey,
    kid: String,
    jwks: JwkSet,
}

impl std::fmt::Debug for SigningKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKeys").field("kid", &self.kid).field("published", &self.jwks.keys.len()).finish_non_exhaustive()
    }
}

impl SigningKeys {
    /// Reads the keys the settings name: the files, else the PEM secrets. The error names
    /// the file or entry.
    pub fn load(settings: &AuthServerSettings) -> Result<Self, String> {
        let mut pems = Vec::new();
        for path in &settings.signing_key_files {
            let text = std::fs::read_to_string(path).map_err(|e| {
                format!(
                    "authorization_server.signing_key_files: cannot read {} ({e}); make a key with `toolgate keygen --out {}`",
                    path.display(),
                    path.display()
                )
            })?;
            pems.push((path.display().to_string(), text));
        }
        if pems.is_empty() {
            for (i, secret) in settings.signing_keys.iter().enumerate() {
                pems.push((format!("authorization_server.signing_keys[{i}]"), secret.expose().to_owned()));
            }
        }
        Self::from_pems(&pems)
    }

    /// `(where, pem)` pairs; the first signs.
    pub fn from_pems(pems: &[(String, String)]) -> Result<Self, String> {
        let mut jwks = JwkSet { keys: Vec::with_capacity(pems.len()) };
        let mut signer = None;
        for (place, pem) in pems {
            let (key, jwk) = parse(pem).map_err(|e| format!("{place}: {e}"))?;
            if jwks.keys.iter().any(|k| k.common.key_id == jwk.common.key_id) {
                return Err(format!("{place}: the same key is listed twice"));
            }
            if signer.is_none() {
                signer = Some((key, jwk.common.key_id.clone().unwrap_or_default()));
            }
            jwks.keys.push(jwk);
        }
        let (signer, kid) = signer.ok_or("no signing key is configured")?;
        Ok(Self { signer, kid, jwks })
    }

    /// The key that signs, and its `kid`.
    pub fn signer(&self) -> (&EncodingKey, &str) {
        (&self.signer, &self.kid)
    }

    /// The public keys as a JWKS document (RFC 7517), for `jwks_uri`.
    pub fn jwks(&self) -> &JwkSet {
        &self.jwks
    }

    /// The public keys as the resource server's verifier holds them.
    pub fn verification_keys(&self, issuer: &str) -> Result<Vec<PublicKey>, String> {
        let body = serde_json::to_vec(&self.jwks).map_err(|e| e.to_string())?;
        parse_jwks(issuer, &body)
    }
}

/// One PEM (PKCS#8 P-256 private key) → its signing key and public JWK (`kid`: the RFC 7638
/// thumbprint, so every replica names the same key alike).
fn parse(pem: &str) -> Result<(EncodingKey, Jwk), String> {
    let secret = p256::SecretKey::from_pkcs8_pem(pem.trim())
        .map_err(|_| "not an EC P-256 private key in PKCS#8 PEM (\"BEGIN PRIVATE KEY\"); make one with `toolgate keygen`".to_owned())?;
    let der = secret.to_pkcs8_der().map_err(|e| e.to_string())?;
    let key = EncodingKey::from_ec_der(der.as_bytes());
    let mut jwk = Jwk::from_encoding_key(&key, Algorithm::ES256).map_err(|e| e.to_string())?;
    let kid = jwk.thumbprint(ThumbprintHash::SHA256);
    jwk.common.key_id = Some(kid);
    jwk.common.public_key_use = Some(jsonwebtoken::jwk::PublicKeyUse::Signature);
    Ok((key, jwk))
}

/// A new P-256 private key as PKCS#8 PEM (`toolgate keygen`).
pub fn generate_pem() -> Result<String, String> {
    loop {
        let bytes: [u8; 32] = rand::random();
        // A random 32-byte string is a valid scalar except with probability ~2^-128.
        if let Ok(secret) = p256::SecretKey::from_slice(&bytes) {
            return secret.to_pkcs8_pem(LineEnding::LF).map(|pem| pem.to_string()).map_err(|e| e.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two() -> (String, String) {
        (generate_pem().expect("pem"), generate_pem().expect("pem"))
    }

    #[test]
    fn every_key_is_published_and_the_first_signs() {
        let (a, b) = two();
        let keys = SigningKeys::from_pems(&[("a".into(), a.clone()), ("b".into(), b)]).expect("keys");
        assert_eq!(keys.jwks().keys.len(), 2);
        let only_a = SigningKeys::from_pems(&[("a".into(), a)]).expect("keys");
        assert_eq!(keys.signer().1, only_a.signer().1, "the kid is the key's thumbprint, whatever else is listed");
    }

    #[test]
    fn a_published_key_verifies_what_the_signer_signs() {
        let (a, _) = two();
        let keys = SigningKeys::from_pems(&[("a".into(), a)]).expect("keys");
        let (signer, kid) = keys.signer();
        let mut header = jsonwebtoken::Header::new(Algorithm::ES256);
        header.kid = Some(kid.to_owned());
        let token = jsonwebtoken::encode(&header, &serde_json::json!({"sub": "x"}), signer).expect("sign");
        let public = keys.verification_keys("https://as.example").expect("public");
        let mut validation = jsonwebtoken::Validation::new(Algorithm::ES256);
        validation.required_spec_claims.clear();
        validation.validate_exp = false;
        jsonwebtoken::decode::<serde_json::Value>(&token, &public[0].key, &validation).expect("verifies");
    }

    #[test]
    fn a_file_that_is_not_a_p256_key_is_named_in_the_error() {
        let err = SigningKeys::from_pems(&[("/etc/k.pem".into(), "-----BEGIN CERTIFICATE-----\n".into())]).expect_err("refused");
        assert!(err.starts_with("/etc/k.pem: not an EC P-256"), "{err}");
    }

    #[test]
    fn the_same_key_twice_is_refused() {
        let (a, _) = two();
        let err = SigningKeys::from_pems(&[("a".into(), a.clone()), ("b".into(), a)]).expect_err("refused");
        assert!(err.contains("listed twice"), "{err}");
    }
}
