//! The bearer-token gate in front of every MCP route: reads `Authorization: Bearer …` (never
//! a query parameter), verifies the token, enforces the scopes every request needs, and puts
//! the [`Principal`] into the request. Refusals carry RFC 6750 / RFC 9728 challenges:
//! 401 without `error` when no token was sent, 401 `invalid_token`, 400 `invalid_request` for
//! a malformed header, 403 `insufficient_scope` naming the scopes needed, 503 when the
//! issuer's keys cannot be had.

use std::sync::Arc;

use axum::body::Body;
use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, Response, StatusCode, header};
use axum::middleware::Next;

use super::introspection::Introspector;
use super::jwt::JwtVerifier;
use super::metadata::metadata_url;
use super::principal::{Principal, TokenError};
use super::settings::AuthSettings;
use crate::app::AppState;
use crate::protocol::jsonrpc::{RpcError, code};
use crate::transport::headers;

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
    /// The token lacks scopes; the list is everything the request needs.
    InsufficientScope(Vec<String>),
    /// The issuer's keys cannot be fetched right now.
    Unavailable,
}

impl Refusal {
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
    pub async fn authenticate(&self, headers: &axum::http::HeaderMap) -> Result<Principal, Refusal> {
        let principal = self.identify(headers).await?;
        let missing = self.settings.required_scopes.iter().any(|s| !principal.has_scope(s));
        if missing {
            let mut needed: Vec<String> = principal.scopes.iter().cloned().collect();
            needed.extend(self.settings.required_scopes.iter().filter(|s| !principal.has_scope(s)).cloned());
            return Err(Refusal::InsufficientScope(needed));
        }
        Ok(principal)
    }

    /// The principal of a valid bearer token, whatever its scopes (the admin API checks its own).
    pub async fn identify(&self, headers: &axum::http::HeaderMap) -> Result<Principal, Refusal> {
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
    /// otherwise the refusal lists what it has plus what is missing (A-20).
    pub fn check_method(&self, principal: &Principal, method: &str) -> Result<(), Refusal> {
        let missing: Vec<String> = self.settings.scopes_for_method(method).filter(|s| !principal.has_scope(s)).cloned().collect();
        if missing.is_empty() {
            return Ok(());
        }
        let mut needed: Vec<String> = principal.scopes.iter().cloned().collect();
        for s in missing {
            if !needed.contains(&s) {
                needed.push(s);
            }
        }
        Err(Refusal::InsufficientScope(needed))
    }

    /// The HTTP answer for a refusal.
    pub fn refuse(&self, refusal: &Refusal) -> Response<Body> {
        let scope = self.settings.required_scopes.join(" ");
        let (status, challenge, message) = match refusal {
            Refusal::Missing => (
                StatusCode::UNAUTHORIZED,
                format!(r#"Bearer resource_metadata="{}", scope="{scope}""#, self.metadata),
                "Unauthorized: a bearer token is required".to_owned(),
            ),
            Refusal::Malformed(why) => (
                StatusCode::BAD_REQUEST,
                format!(r#"Bearer error="invalid_request", error_description="{why}", resource_metadata="{}""#, self.metadata),
                format!("Bad Request: {why}"),
            ),
            Refusal::Invalid(why) => (
                StatusCode::UNAUTHORIZED,
                format!(
                    r#"Bearer error="invalid_token", error_description="{}", resource_metadata="{}", scope="{scope}""#,
                    quote_safe(why),
                    self.metadata
                ),
                "Unauthorized: the access token is not valid for this server".to_owned(),
            ),
            Refusal::InsufficientScope(needed) => (
                StatusCode::FORBIDDEN,
                format!(r#"Bearer error="insufficient_scope", scope="{}", resource_metadata="{}""#, needed.join(" "), self.metadata),
                format!("Forbidden: this request needs the scopes {}", needed.join(" ")),
            ),
            Refusal::Unavailable => (
                StatusCode::SERVICE_UNAVAILABLE,
                String::new(),
                "Service Unavailable: tokens cannot be verified right now; retry shortly".to_owned(),
            ),
        };
        let mut res = headers::error(status, None, &RpcError::new(code::TRANSPORT, message));
        if let Ok(v) = HeaderValue::from_str(&challenge)
            && !challenge.is_empty()
        {
            res.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        if *refusal == Refusal::Unavailable {
            res.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        }
        res
    }
}

/// `error_description` is a quoted-string: keep it to printable ASCII without quotes.
fn quote_safe(s: &str) -> String {
    s.chars().filter(|c| c.is_ascii_graphic() && *c != '"' && *c != '\\' || *c == ' ').take(200).collect()
}

/// The token of a single `Authorization: Bearer <token68>` header.
fn bearer_token(headers: &axum::http::HeaderMap) -> Result<&str, Refusal> {
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

/// The middleware. Without an authenticator (auth off) every request passes.
pub async fn require(State(app): State<AppState>, mut request: Request, next: Next) -> Response<Body> {
    let Some(auth) = app.auth.clone() else { return next.run(request).await };
    // Preflights carry no credentials by design; CORS answers them.
    if request.method() == axum::http::Method::OPTIONS {
        return next.run(request).await;
    }
    // Brute force is refused before any verification work (per client address).
    let ip = app.client_ip(request.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip()), request.headers());
    if let (Some(limiter), Some(ip)) = (&app.limiter, ip)
        && let Err(rejection) = limiter.check_auth_failure_allowed(ip)
    {
        tracing::info!(%ip, "request refused: too many failed authentication attempts");
        crate::metrics::record::rate_limited(rejection.reason);
        return rejection.http_response(None);
    }
    // The span records the verdict only: never the token.
    let span = tracing::info_span!("auth", outcome = tracing::field::Empty);
    let verdict = tracing::Instrument::instrument(auth.authenticate(request.headers()), span.clone()).await;
    span.record("outcome", if verdict.is_ok() { "ok" } else { "refused" });
    match verdict {
        Ok(principal) => {
            crate::metrics::record::auth_ok();
            request.extensions_mut().insert(Arc::new(principal));
            next.run(request).await
        }
        Err(refusal) => {
            crate::metrics::record::auth_refused(&refusal);
            if let (Some(limiter), Some(ip), Refusal::Invalid(_) | Refusal::Malformed(_)) = (&app.limiter, ip, &refusal) {
                limiter.record_auth_failure(ip);
            }
            if !matches!(refusal, Refusal::Missing) {
                tracing::info!(path = %request.uri().path(), refusal = ?refusal.kind(), "request refused by the bearer gate");
            }
            if let (Some(audit), false) = (&app.audit, matches!(refusal, Refusal::Missing | Refusal::Unavailable)) {
                use crate::audit::{AuditRecord, EventKind, Outcome};
                let kind = if matches!(refusal, Refusal::InsufficientScope(_)) { EventKind::AuthzDenied } else { EventKind::AuthFailure };
                let mut record = AuditRecord::new(kind, Outcome::Denied).with_detail(refusal.kind());
                if let Some(ip) = ip {
                    record = record.with_client_ip(ip);
                }
                if let Some(id) = request.headers().get("x-request-id").and_then(|v| v.to_str().ok()) {
                    record = record.with_request_id(id);
                }
                if let Some(trace) = request.extensions().get::<crate::telemetry::TraceContext>() {
                    record = record.with_trace_id(trace.trace_id_hex().to_string());
                }
                // Off the request path: a flood of bad tokens must stay cheap to refuse.
                let audit = audit.clone();
                tokio::spawn(async move { audit.record(record).await });
            }
            auth.refuse(&refusal)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderMap;

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
    fn descriptions_cannot_break_the_challenge() {
        assert_eq!(quote_safe("bad \"aud\" \\ x"), "bad aud  x");
    }
}
