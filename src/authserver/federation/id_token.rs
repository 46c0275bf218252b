//! The ID token's checks (FED-10, OIDC Core §3.1.3.7). openidconnect verifies the signature
//! with the provider's keys, `aud` (no audience but toolgate's), `exp`, `nonce` and the
//! algorithm; this file sets it up strictly (asymmetric algorithms the provider announces,
//! never `none` or HS*, the configured leeway) and adds what it leaves to the caller: `azp`
//! and `iat`. `iss` is checked by [`super::presets::IssuerPolicy`], which knows the quirks.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use openidconnect::core::{CoreGenderClaim, CoreJweContentEncryptionAlgorithm, CoreJwsSigningAlgorithm};
use openidconnect::{AdditionalClaims, ClaimsVerificationError, IdToken, IdTokenVerifier, Nonce, SignatureVerificationError};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::provider::Discovered;

/// An ID token is not accepted if issued longer ago than this (plus the leeway): it comes
/// straight from the token endpoint, so an old one is a replay.
const MAX_AGE: Duration = Duration::from_secs(3600);

/// Signature algorithms toolgate accepts, if the provider announces them: public keys only,
/// so neither `none` nor a MAC keyed with the client secret can pass.
const ASYMMETRIC: [CoreJwsSigningAlgorithm; 10] = [
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha256,
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha384,
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha512,
    CoreJwsSigningAlgorithm::RsaSsaPssSha256,
    CoreJwsSigningAlgorithm::RsaSsaPssSha384,
    CoreJwsSigningAlgorithm::RsaSsaPssSha512,
    CoreJwsSigningAlgorithm::EcdsaP256Sha256,
    CoreJwsSigningAlgorithm::EcdsaP384Sha384,
    CoreJwsSigningAlgorithm::EcdsaP521Sha512,
    CoreJwsSigningAlgorithm::EdDsa,
];

/// Every claim beyond the standard ones (`tid`, `hd`, `groups`, `realm_access`, …), kept as
/// JSON for the presets and the scope rules.
#[derive(Debug, Deserialize, Serialize)]
pub struct OtherClaims {
    #[serde(flatten)]
    claims: Map<String, Value>,
}
impl AdditionalClaims for OtherClaims {}

type FullIdToken = IdToken<OtherClaims, CoreGenderClaim, CoreJweContentEncryptionAlgorithm, CoreJwsSigningAlgorithm>;

/// Why a token was not accepted.
#[derive(Debug)]
pub enum Failure {
    /// No key in the cached set fits the token: the provider may have rotated its keys.
    UnknownKey,
    Refused(String),
}

/// What a token must be for.
pub struct Expected<'a> {
    pub client_id: &'a str,
    pub nonce: &'a Nonce,
    pub leeway: Duration,
}

/// The verified claims, all of them, as JSON.
pub fn verify(raw: &str, discovered: &Discovered, expected: &Expected<'_>) -> Result<Value, Failure> {
    let token: FullIdToken = raw.parse().map_err(|e| Failure::Refused(format!("the ID token is malformed: {e}")))?;
    let verifier = verifier(discovered, expected);
    let claims = token.claims(&verifier, expected.nonce).map_err(|e| match e {
        ClaimsVerificationError::SignatureVerification(SignatureVerificationError::NoMatchingKey) => Failure::UnknownKey,
        other => Failure::Refused(format!("the ID token failed a check: {}", super::provider::error_chain(&other))),
    })?;
    let claims = serde_json::to_value(claims).map_err(|e| Failure::Refused(format!("the ID token's claims are unusable: {e}")))?;
    check_azp(&claims, expected.client_id)?;
    Ok(claims)
}

fn verifier<'a>(discovered: &Discovered, expected: &Expected<'_>) -> IdTokenVerifier<'a, openidconnect::core::CoreJsonWebKey> {
    let metadata = &discovered.metadata;
    let announced = metadata.id_token_signing_alg_values_supported();
    let algs = ASYMMETRIC.into_iter().filter(|alg| announced.contains(alg));
    let leeway = expected.leeway;
    // A public-client verifier: it has no client secret, so an HS* token cannot verify even
    // if an algorithm list ever let one through.
    IdTokenVerifier::new_public_client(
        openidconnect::ClientId::new(expected.client_id.to_owned()),
        metadata.issuer().clone(),
        metadata.jwks().clone(),
    )
    .set_allowed_algs(algs)
    .require_issuer_match(false)
    // `exp` is compared with this clock: set back by the leeway, a token expired by less passes.
    .set_time_fn(move || (SystemTime::now() - leeway).into())
    .set_issue_time_verifier_fn(move |iat| check_iat(iat.timestamp(), leeway))
}

fn now_secs() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

fn check_iat(iat: i64, leeway: Duration) -> Result<(), String> {
    let (now, leeway) = (now_secs(), i64::try_from(leeway.as_secs()).unwrap_or(0));
    if iat > now + leeway {
        return Err("the ID token is issued in the future".into());
    }
    if iat < now - leeway - MAX_AGE.as_secs() as i64 {
        return Err("the ID token was issued too long ago".into());
    }
    Ok(())
}

/// `azp`, when present, must be toolgate; with several audiences it must be present (OIDC
/// Core §3.1.3.7 steps 4–5, which openidconnect leaves out). Other audiences are already
/// refused as untrusted, so this is a second lock on the same door.
fn check_azp(claims: &Value, client_id: &str) -> Result<(), Failure> {
    let several = claims.get("aud").and_then(Value::as_array).is_some_and(|a| a.len() > 1);
    match claims.get("azp") {
        Some(azp) if azp.as_str() != Some(client_id) => Err(Failure::Refused("the ID token's azp is another client".into())),
        None if several => Err(Failure::Refused("the ID token has several audiences and no azp".into())),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn azp_naming_another_client_is_refused() {
        assert!(check_azp(&json!({"aud": "tg", "azp": "other"}), "tg").is_err());
    }

    #[test]
    fn several_audiences_without_azp_are_refused() {
        assert!(check_azp(&json!({"aud": ["tg", "other"]}), "tg").is_err());
    }

    #[test]
    fn one_audience_needs_no_azp() {
        assert!(check_azp(&json!({"aud": "tg"}), "tg").is_ok());
    }

    #[test]
    fn an_iat_in_the_future_beyond_the_leeway_is_refused() {
        assert!(check_iat(now_secs() + 120, Duration::from_secs(60)).is_err());
    }

    #[test]
    fn an_iat_within_the_leeway_passes() {
        assert!(check_iat(now_secs() + 30, Duration::from_secs(60)).is_ok());
    }

    #[test]
    fn an_old_iat_is_refused() {
        assert!(check_iat(now_secs() - 7200, Duration::ZERO).is_err());
    }
}
