//! A JWT's parts as the verifier reads them: the header members it acts on, the issuer read
//! before verification (only to choose the keys), the claims after it, and the library's
//! errors as short fixed descriptions that never quote the token.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;

use super::SIGNATURE_MISMATCH;
use crate::auth::principal::TokenError;

/// The header members this verifier acts on.
pub(super) struct Header {
    pub(super) alg: Algorithm,
    pub(super) kid: Option<String>,
    pub(super) typ: Option<String>,
}

pub(super) fn parse_header(b64: &str) -> Result<Header, TokenError> {
    #[derive(Deserialize)]
    struct Raw {
        alg: Option<String>,
        kid: Option<String>,
        typ: Option<String>,
        crit: Option<serde_json::Value>,
        enc: Option<serde_json::Value>,
    }
    let bytes = URL_SAFE_NO_PAD.decode(b64).map_err(|_| TokenError::invalid("malformed token header"))?;
    let raw: Raw = serde_json::from_slice(&bytes).map_err(|_| TokenError::invalid("malformed token header"))?;
    if raw.enc.is_some() {
        return Err(TokenError::invalid("encrypted tokens (JWE) are not accepted"));
    }
    // RFC 7515 §4.1.11: extensions listed in crit must be understood; this verifier knows none.
    if raw.crit.is_some() {
        return Err(TokenError::invalid("token header has critical extensions"));
    }
    let alg = raw.alg.ok_or_else(|| TokenError::invalid("token header has no alg"))?;
    if alg.eq_ignore_ascii_case("none") {
        return Err(TokenError::invalid("unsigned tokens (alg none) are not accepted"));
    }
    let alg = alg.parse::<Algorithm>().map_err(|_| TokenError::invalid("unsupported signing algorithm"))?;
    Ok(Header { alg, kid: raw.kid, typ: raw.typ })
}

/// Reads `iss` before verification, only to pick the issuer's keys and rules; verification
/// then requires the very same value.
pub(super) fn unverified_issuer(payload_b64: &str) -> Result<String, TokenError> {
    #[derive(Deserialize)]
    struct Raw {
        iss: Option<serde_json::Value>,
    }
    let bytes = URL_SAFE_NO_PAD.decode(payload_b64).map_err(|_| TokenError::invalid("malformed token payload"))?;
    let raw: Raw = serde_json::from_slice(&bytes).map_err(|_| TokenError::invalid("malformed token payload"))?;
    match raw.iss {
        Some(serde_json::Value::String(iss)) => Ok(iss),
        Some(_) => Err(TokenError::invalid("token issuer is not a string")),
        None => Err(TokenError::invalid("token lacks the required claim iss")),
    }
}

/// The claims read after verification. Everything is optional here so that the library's
/// checks, which run next, report precisely what is missing; the rest is checked in
/// [`super::principal_from`].
#[derive(Deserialize)]
pub(super) struct Claims {
    pub(super) iss: Option<String>,
    pub(super) sub: Option<String>,
    pub(super) aud: Option<OneOrMany>,
    pub(super) exp: Option<NumericDate>,
    pub(super) iat: Option<NumericDate>,
    pub(super) client_id: Option<String>,
    pub(super) azp: Option<String>,
    pub(super) scope: Option<OneOrMany>,
    pub(super) scp: Option<OneOrMany>,
    /// The grant of a token of toolgate's own authorization server.
    pub(super) sid: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    /// Each value.
    pub(super) fn values(&self) -> impl Iterator<Item = &str> + Clone {
        let items: &[String] = match self {
            Self::One(one) => std::slice::from_ref(one),
            Self::Many(many) => many,
        };
        items.iter().map(String::as_str)
    }

    /// Scope tokens: strings are space-separated lists (RFC 6749 §3.3).
    pub(super) fn scopes(&self) -> impl Iterator<Item = &str> {
        let items: &[String] = match self {
            Self::One(one) => std::slice::from_ref(one),
            Self::Many(many) => many,
        };
        items.iter().flat_map(|s| s.split(' ')).filter(|s| !s.is_empty())
    }
}

/// A JSON NumericDate: seconds since the epoch, integer or fractional (RFC 7519 §2).
pub(super) struct NumericDate(pub(super) f64);

impl<'de> Deserialize<'de> for NumericDate {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = f64::deserialize(deserializer)?;
        if value.is_finite() && value >= 0.0 { Ok(Self(value)) } else { Err(serde::de::Error::custom("not a NumericDate")) }
    }
}

pub(super) fn decode(token: &str, key: &DecodingKey, validation: &Validation) -> Result<Claims, TokenError> {
    jsonwebtoken::decode::<Claims>(token, key, validation).map(|data| data.claims).map_err(|e| TokenError::Invalid(describe(e.kind())))
}

/// A short, fixed description of a library error: never any part of the token.
pub(super) fn describe(kind: &ErrorKind) -> String {
    let text = match kind {
        ErrorKind::ExpiredSignature => "token has expired",
        ErrorKind::ImmatureSignature => "token is not valid yet (nbf)",
        ErrorKind::InvalidAudience => "token audience does not include this resource",
        ErrorKind::InvalidIssuer => "token issuer mismatch",
        ErrorKind::InvalidSignature => SIGNATURE_MISMATCH,
        ErrorKind::InvalidAlgorithm | ErrorKind::MissingAlgorithm => "signing algorithm does not fit the key",
        ErrorKind::MissingRequiredClaim(claim) => match claim.as_str() {
            "exp" => "token lacks the required claim exp",
            "iss" => "token lacks the required claim iss",
            "aud" => "token lacks the required claim aud",
            "sub" => "token lacks the required claim sub",
            _ => "token lacks a required claim",
        },
        ErrorKind::InvalidClaimFormat(claim) => match claim.as_str() {
            "exp" => "malformed claim exp",
            "nbf" => "malformed claim nbf",
            _ => "malformed claim",
        },
        ErrorKind::InvalidRsaKey(_) | ErrorKind::InvalidEcdsaKey | ErrorKind::InvalidEddsaKey | ErrorKind::InvalidKeyFormat => {
            "the issuer's key cannot verify this token"
        }
        ErrorKind::Json(_) => "malformed token claims",
        ErrorKind::InvalidToken | ErrorKind::Base64(_) | ErrorKind::Utf8(_) => "malformed token",
        _ => "token rejected",
    };
    text.to_owned()
}
