//! Bearer-token verification: reads `Authorization: Bearer …` (never a query parameter),
//! verifies the token, checks the scopes every request and each method needs, and says why a
//! token was refused ([`Refusal`]). The HTTP gate and its RFC 6750 / RFC 9728 challenges are
//! the transport's (`transport::bearer`).

use std::sync::Arc;

use http::header;

use super::introspection::Introspector;
use super::jwt::JwtVerifier;
use super::metadata::metadata_url;
use super::principal::{Principal, TokenError};
use super::scopes::ScopeShortfall;
use super::settings::AuthSettings;

/// Verifies tokens and builds challenges.
pub struct Authenticator {
    settings: AuthSettings,
    verifier: Option<Arc<JwtVerifier>>,
    introspector: Option<Arc<Introspector>>,
    metadata: String,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator").field("metadata", &self.metadata).finish_non_exhaustive()
    }
}

/// Why a request was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No credentials at all (the client should start the OAuth flow).
    Missing,
    /// The `Authorization` header is not a single well-formed bearer credential.
    Malformed(&'static str),
    /// The token is not acceptable here.
    Invalid(String),
    /// The token lacks scopes the request needs.
    InsufficientScope(ScopeShortfall),
    /// The issuer's keys cannot be fetched right now.
    Unavailable,
}

impl Refusal {
    /// The `reason` label of `toolgate_auth_validations_total`: one of a fixed set, from the
    /// fixed descriptions of `auth::jwt` and `auth::introspection` (first match wins).
    pub fn metric_reason(&self) -> &'static str {
        match self {
            Self::Missing => "missing_token",
            Self::Malformed(_) => "malformed_header",
            Self::Invalid(why) => token_rejection_reason(why),
            Self::InsufficientScope(_) => "insufficient_scope",
            Self::Unavailable => "verifier_unavailable",
        }
    }

    /// A short, bounded name for logs and audit records (never the token or its claims).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Missing => "missing",
            Self::Malformed(_) => "malformed",
            Self::Invalid(_) => "invalid_token",
            Self::InsufficientScope(_) => "insufficient_scope",
            Self::Unavailable => "unavailable",
        }
    }
}

impl Authenticator {
    pub fn new(settings: &AuthSettings, verifier: Option<Arc<JwtVerifier>>, introspector: Option<Arc<Introspector>>) -> Self {
        let resource = settings.resource.clone().unwrap_or_default();
        Self { settings: settings.clone(), verifier, introspector, metadata: metadata_url(&resource) }
    }

    /// The JWT verifier, when JWT issuers are configured.
    /// Whether tokens can be verified: every issuer's keys fetched at least once, and the
    /// introspection endpoint (when configured) reached at least once.
    /// Like [`ready`](Self::ready), from what is known without asking the network.
    pub fn ready_now(&self) -> bool {
        self.verifier.as_ref().is_none_or(|v| v.keys_loaded()) && self.introspector.as_ref().is_none_or(|i| i.reached())
    }

    pub async fn ready(&self) -> bool {
        let keys = self.verifier.as_ref().is_none_or(|v| v.keys_loaded());
        let introspection = match &self.introspector {
            Some(i) => i.reachable().await,
            None => true,
        };
        keys && introspection
    }

    pub fn verifier(&self) -> Option<&Arc<JwtVerifier>> {
        self.verifier.as_ref()
    }

    /// The RFC 9728 metadata URL challenges point to.
    /// In dev mode, what most likely went wrong with a token `toolgate dev-token` minted, and
    /// what to do about it; `None` otherwise (a real issuer's tokens are the issuer's business).
    pub fn dev_hint(&self, why: &str) -> Option<String> {
        if self.settings.mode != super::settings::AuthMode::Dev {
            return None;
        }
        let hint = match why {
            "token audience does not include this resource" => {
                "dev-token mints for the resource the settings give (auth.resource, else derived from server.bind): run it with the same --config file and TOOLGATE__ variables as the server".to_owned()
            }
            "signature does not verify" => format!(
                "dev tokens are signed with the key in auth.dev_key_file ({}), relative to the working directory: run dev-token where the server runs, or with the same auth.dev_key_file",
                self.settings.dev_key_file.display()
            ),
            "token has expired" => "mint a new one with `toolgate dev-token` (it lives --ttl-secs, 3600 by default)".to_owned(),
            _ => return None,
        };
        Some(hint)
    }

    pub fn metadata_url(&self) -> &str {
        &self.metadata
    }

    /// `auth.required_scopes`, the scope hint of a challenge.
    pub fn required_scopes(&self) -> &[String] {
        &self.settings.required_scopes
    }

    /// Whether the request's token is checked here without asking the network: a JWT, with
    /// JWT issuers configured (keys cached; an unknown `kid` refetches at most once per
    /// `min_refresh_interval`). The failed-authentication lockout lets such tokens through: a
    /// signature cannot be guessed, checking one costs microseconds, and a valid token must
    /// not be refused because a neighbour behind the same address sent bad ones. Opaque
    /// tokens go to the introspection endpoint, which the lockout protects.
    pub fn verifies_locally(&self, headers: &http::HeaderMap) -> bool {
        self.verifier.is_some() && bearer_token(headers).is_ok_and(|t| t.split('.').count() == 3)
    }

    /// JWTs (three base64url parts) go to the JWT verifier, anything else to introspection.
    async fn verify(&self, token: &str) -> Result<Principal, TokenError> {
        let jwt_shaped = token.split('.').count() == 3;
        match (&self.verifier, &self.introspector, jwt_shaped) {
            (Some(jwt), _, true) => jwt.verify(token).await,
            (_, Some(introspector), _) => introspector.verify(token).await,
            (Some(jwt), None, false) => jwt.verify(token).await,
            (None, None, _) => Err(TokenError::Invalid("no token verifier is configured".into())),
        }
    }

    /// Authenticates one MCP request from its headers: a valid token holding
    /// `auth.required_scopes`.
    pub async fn authenticate(&self, headers: &http::HeaderMap) -> Result<Principal, Refusal> {
        let principal = self.identify(headers).await?;
        match ScopeShortfall::of(&principal.scopes, &self.settings.required_scopes) {
            Some(shortfall) => Err(Refusal::InsufficientScope(shortfall)),
            None => Ok(principal),
        }
    }

    /// The principal of a valid bearer token, whatever its scopes (the admin API checks its own).
    pub async fn identify(&self, headers: &http::HeaderMap) -> Result<Principal, Refusal> {
        let token = bearer_token(headers)?;
        self.verify(token).await.map_err(|e| match e {
            TokenError::Invalid(why) => Refusal::Invalid(why),
            TokenError::Unavailable(why) => {
                tracing::warn!(reason = %why, "cannot verify tokens: issuer keys unavailable");
                Refusal::Unavailable
            }
        })
    }

    /// Whether the principal holds the scopes `method` needs (its class's and its own);
    /// otherwise the refusal names what is missing and what the token has.
    pub fn check_method(&self, principal: &Principal, method: &str) -> Result<(), Refusal> {
        match ScopeShortfall::of(&principal.scopes, self.settings.scopes_for_method(method)) {
            Some(shortfall) => Err(Refusal::InsufficientScope(shortfall)),
            None => Ok(()),
        }
    }
}

/// Why a token was invalid, as a metric label; "invalid_token" when no rule matches.
fn token_rejection_reason(why: &str) -> &'static str {
    // Order matters: several descriptions mention the issuer or the algorithm in passing.
    const RULES: [(&str, &str); 18] = [
        ("lacks", "missing_claim"),
        ("expired", "expired"),
        ("not valid yet", "not_yet_valid"),
        ("in the future", "not_yet_valid"),
        ("audience", "wrong_audience"),
        ("not active", "introspection_inactive"),
        ("no signing key", "unknown_key"),
        ("several issuer keys", "unknown_key"),
        ("signature", "bad_signature"),
        ("cannot verify", "bad_signature"),
        ("alg", "bad_algorithm"),
        ("issuer is not a string", "malformed_token"),
        ("issuer", "unknown_issuer"),
        ("subject", "invalid_subject"),
        ("malformed", "malformed_token"),
        ("too large", "malformed_token"),
        ("(JWE)", "malformed_token"),
        ("critical", "malformed_token"),
    ];
    RULES.iter().find(|(needle, _)| why.contains(needle)).map_or("invalid_token", |(_, reason)| reason)
}

/// The token of a single `Authorization: Bearer <token68>` header.
pub fn bearer_token(headers: &http::HeaderMap) -> Result<&str, Refusal> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let Some(value) = values.next() else { return Err(Refusal::Missing) };
    if values.next().is_some() {
        return Err(Refusal::Malformed("send exactly one Authorization header"));
    }
    let value = value.to_str().map_err(|_| Refusal::Malformed("the Authorization header is not visible ASCII"))?;
    let (scheme, token) = value.split_once(' ').ok_or(Refusal::Malformed("expected \"Authorization: Bearer <token>\""))?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(Refusal::Malformed("only the Bearer scheme is accepted"));
    }
    let token = token.trim();
    let body = token.trim_end_matches('=');
    let token68 =
        !body.is_empty() && body.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/'));
    if !token68 {
        return Err(Refusal::Malformed("the bearer token is empty or has characters a token cannot contain"));
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{HeaderMap, HeaderValue};

    fn with(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(header::AUTHORIZATION, HeaderValue::from_str(v).expect("valid header"));
        }
        h
    }

    #[test]
    fn bearer_header_parsing() {
        assert_eq!(bearer_token(&with(&[])), Err(Refusal::Missing));
        assert_eq!(bearer_token(&with(&["Bearer abc.def-ghi_~+/=="])), Ok("abc.def-ghi_~+/=="));
        assert_eq!(bearer_token(&with(&["bearer abc"])), Ok("abc"), "the scheme is case-insensitive");
        for bad in ["Basic dXNlcjpwYXNz", "Bearer", "Bearer ", "Bearer a b", "Bearer ===", "Token abc"] {
            assert!(matches!(bearer_token(&with(&[bad])), Err(Refusal::Malformed(_))), "{bad:?}");
        }
        assert!(matches!(bearer_token(&with(&["Bearer a", "Bearer b"])), Err(Refusal::Malformed(_))));
    }

    #[test]
    fn token_descriptions_map_to_bounded_reasons() {
        let cases = [
            ("token has expired", "expired"),
            ("token is expired", "expired"),
            ("token audience does not include this resource", "wrong_audience"),
            ("token audience does not include this server", "wrong_audience"),
            ("token issuer is not trusted", "unknown_issuer"),
            ("token issuer is not trusted here", "unknown_issuer"),
            ("token issuer mismatch", "unknown_issuer"),
            ("token is not active", "introspection_inactive"),
            ("no signing key of the issuer matches the token's kid and alg", "unknown_key"),
            ("token names no kid and several issuer keys fit", "unknown_key"),
            ("signature does not verify", "bad_signature"),
            ("the issuer's key cannot verify this token", "bad_signature"),
            ("signing algorithm not allowed for this issuer", "bad_algorithm"),
            ("unsigned tokens (alg none) are not accepted", "bad_algorithm"),
            ("token lacks the required claim iss", "missing_claim"),
            ("token lacks the required claim exp", "missing_claim"),
            ("token is not valid yet (nbf)", "not_yet_valid"),
            ("token is issued in the future (iat)", "not_yet_valid"),
            ("malformed token header", "malformed_token"),
            ("malformed token: not a JWS compact serialization", "malformed_token"),
            ("token issuer is not a string", "malformed_token"),
            ("token too large", "malformed_token"),
            ("encrypted tokens (JWE) are not accepted", "malformed_token"),
            ("token header has critical extensions", "malformed_token"),
            ("token subject is empty or has control characters", "invalid_subject"),
            ("token has no usable subject", "invalid_subject"),
            ("signing algorithm does not fit the key", "bad_algorithm"),
            ("token header has no alg", "bad_algorithm"),
            ("token rejected", "invalid_token"),
        ];
        for (why, reason) in cases {
            assert_eq!(token_rejection_reason(why), reason, "{why}");
        }
    }
}
