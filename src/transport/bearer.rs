//! The bearer-token gate in front of every MCP route: verifies the token
//! ([`Authenticator::authenticate`]), enforces the scopes every request needs, and puts the
//! [`Principal`] into the request. Refusals carry RFC 6750 / RFC 9728 challenges: 401 without
//! `error` when no token was sent, 401 `invalid_token`, 400 `invalid_request` for a malformed
//! header, 403 `insufficient_scope` naming the scopes needed, 503 when the issuer's keys cannot
//! be had. Addresses locked out for failed authentications are refused before any
//! verification work, except for JWTs (see [`Authenticator::verifies_locally`]).
//!
//! A plain tower layer, not `axum::middleware::from_fn`: with auth off, or for a preflight,
//! the request goes straight to the inner service with nothing boxed or cloned; only a request
//! whose token is verified pays for one boxed future (`from_fn` boxed and cloned the inner
//! service on every request, auth or not).

use std::convert::Infallible;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, Response, StatusCode, header};
use futures_util::future::Either;
use tower::{Layer, Service};

use super::client_ip::TrustedProxies;
use super::headers;
use crate::audit::AuditLog;
use crate::auth::bearer::{Authenticator, Refusal};
use crate::auth::scopes::{ScopeShortfall, scope_list};
use crate::limits::Limiter;
use crate::protocol::jsonrpc::{RpcError, code};
use crate::telemetry::throttle::Throttle;
use crate::virtual_servers::VirtualServer;

/// What the gate needs: the verifier (`None` when `auth.mode = "off"`), the failed-auth
/// lockout, the audit log, and whose `X-Forwarded-For` to believe.
#[derive(Clone)]
pub struct BearerGate {
    pub auth: Option<Arc<Authenticator>>,
    pub limiter: Option<Arc<dyn Limiter>>,
    pub audit: Option<Arc<AuditLog>>,
    pub proxies: TrustedProxies,
}

/// The failed-authentication lockout of `ip`, unless the request's token is verified locally
/// (see [`Authenticator::verifies_locally`]): guessing opaque tokens is refused before any
/// verification work. Shared by this gate and the admin gate.
pub fn locked_out(
    limiter: Option<&Arc<dyn Limiter>>,
    auth: &Authenticator,
    ip: Option<IpAddr>,
    headers: &axum::http::HeaderMap,
) -> Option<crate::limits::Rejection> {
    let rejection = limiter?.check_auth_failure_allowed(ip?).err()?;
    (!auth.verifies_locally(headers)).then_some(rejection)
}

impl<S> Layer<S> for BearerGate {
    type Service = Bearer<S>;

    fn layer(&self, inner: S) -> Bearer<S> {
        Bearer { inner, gate: self.clone() }
    }
}

/// The gate around an inner service; see [`BearerGate`] and the module's note.
#[derive(Clone)]
pub struct Bearer<S> {
    inner: S,
    gate: BearerGate,
}

type Boxed = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

impl<S> Service<Request> for Bearer<S>
where
    S: Service<Request, Response = Response<Body>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Either<S::Future, Boxed>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        // Without an authenticator (auth off) every request passes; preflights carry no
        // credentials by design, and CORS answers them.
        let Some(auth) = self.gate.auth.clone() else { return Either::Left(self.inner.call(request)) };
        if request.method() == axum::http::Method::OPTIONS {
            return Either::Left(self.inner.call(request));
        }
        // The service that was polled ready serves this request; its clone serves the next.
        let clone = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, clone);
        Either::Right(Box::pin(require(self.gate.clone(), auth, request, ready)))
    }
}

/// Verifies the request's token and passes it on with its principal, or answers the refusal.
async fn require<S>(app: BearerGate, auth: Arc<Authenticator>, mut request: Request, mut next: S) -> Result<Response<Body>, Infallible>
where
    S: Service<Request, Response = Response<Body>, Error = Infallible>,
{
    let caller = super::extract::caller(&app.proxies, request.extensions(), request.headers());
    let ip = caller.ip;
    // Challenges point at the metadata of the endpoint asked: a virtual server has its own.
    let metadata = caller.server.as_ref().and_then(|s| s.metadata_url()).unwrap_or_else(|| auth.metadata_url().to_owned());
    if let Some(rejection) = locked_out(app.limiter.as_ref(), &auth, ip, request.headers()) {
        tracing::info!(ip = ?ip, "request refused: too many failed authentication attempts");
        crate::metrics::record::rate_limited(rejection.reason.as_str());
        return Ok(super::refusal::limited(&rejection, None));
    }
    // The span records the verdict only: never the token.
    let span = tracing::info_span!("auth", outcome = tracing::field::Empty);
    let verdict = tracing::Instrument::instrument(auth.authenticate(request.headers()), span.clone())
        .await
        .and_then(|principal| for_endpoint(principal, caller.server.as_deref()));
    span.record("outcome", if verdict.is_ok() { "ok" } else { "refused" });
    match verdict {
        Ok(principal) => {
            crate::metrics::record::auth_ok();
            // Verified just now: kept for an upstream's token exchange, and nothing else.
            if let Ok(token) = crate::auth::bearer::bearer_token(request.headers()) {
                let token = crate::principal::BearerToken::new(token);
                request.extensions_mut().insert(token);
            }
            request.extensions_mut().insert(Arc::new(principal));
            next.call(request).await
        }
        Err(refusal) => {
            crate::metrics::record::auth_refused(refusal.metric_reason());
            if let (Some(limiter), Some(ip), Refusal::Invalid(_) | Refusal::Malformed(_)) = (&app.limiter, ip, &refusal) {
                limiter.record_auth_failure(ip);
            }
            if !matches!(refusal, Refusal::Missing) {
                log_refusal(&auth, &refusal, request.uri().path());
            }
            if let (Some(audit), false) = (&app.audit, matches!(refusal, Refusal::Missing | Refusal::Unavailable)) {
                use crate::audit::{AuditRecord, EventKind, Outcome};
                let kind = if matches!(refusal, Refusal::InsufficientScope(_)) { EventKind::AuthzDenied } else { EventKind::AuthFailure };
                // Off the request path: a flood of bad tokens must stay cheap to refuse.
                caller.audit_in_background(audit, AuditRecord::new(kind, Outcome::Denied).with_detail(refusal.kind()));
            }
            let refused = challenge_at(&auth, &refusal, &metadata, caller.server.as_deref());
            Ok(discard_body(request, refused).await)
        }
    }
}

/// The principal if its token was issued for the endpoint asked (RFC 8707: a token for one
/// server is refused at another, the default endpoint included) and holds that server's scopes.
fn for_endpoint(principal: crate::principal::Principal, server: Option<&VirtualServer>) -> Result<crate::principal::Principal, Refusal> {
    let issued_here = match server {
        None => principal.default_audience,
        Some(server) => server.admits(&principal),
    };
    if !issued_here {
        return Err(Refusal::Invalid("token audience does not include this resource".into()));
    }
    if let Some(shortfall) = server.and_then(|s| ScopeShortfall::of(&principal.scopes, &s.settings.scopes)) {
        return Err(Refusal::InsufficientScope(shortfall));
    }
    Ok(principal)
}

/// Refusals logged per cause (the metric's reason) once a minute at most: a client can send
/// bad tokens at will, and `toolgate_auth_validations_total` counts every one.
static REFUSALS: Throttle = Throttle::new(std::time::Duration::from_secs(60));

/// Logs why a request was refused: what the client was told and, in dev mode, the likely
/// cause (a dev token signed with another `auth.dev_key_file`, say).
fn log_refusal(auth: &Authenticator, refusal: &Refusal, path: &str) {
    let Some(not_logged) = REFUSALS.admit(refusal.metric_reason()) else { return };
    let reason = match refusal {
        Refusal::Invalid(why) => match auth.dev_hint(why) {
            Some(hint) => format!("{why}; {hint}"),
            None => why.clone(),
        },
        Refusal::Malformed(why) => (*why).to_owned(),
        // The missing scopes (configuration) and a count: the held ones are the token's claims.
        Refusal::InsufficientScope(shortfall) => shortfall.describe_missing(),
        Refusal::Unavailable => "the issuer's keys cannot be fetched".to_owned(),
        Refusal::Missing => String::new(),
    };
    let held_count = match refusal {
        Refusal::InsufficientScope(shortfall) => Some(shortfall.held.len()),
        _ => None,
    };
    tracing::info!(
        path,
        refusal = refusal.kind(),
        reason,
        held_count,
        not_logged_before = not_logged,
        "request refused by the bearer gate"
    );
}

/// Most of a refused request's body read so its connection can carry the client's next
/// request (an SDK sends `initialize` without a token, then retries with one on the same
/// connection); and the longest that may take.
const DISCARD_MAX: usize = 64 * 1024;
const DISCARD_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);

/// A refusal sent before the body was read: hyper closes such a connection without saying so,
/// and a client that reuses it fails its next request. So a small body is read and dropped
/// first (the connection stays usable); a bigger or slower one gets `Connection: close`.
pub async fn discard_body(request: Request, mut refused: Response<Body>) -> Response<Body> {
    let headers = request.headers();
    let has_body =
        headers.get(header::CONTENT_LENGTH).is_some_and(|v| v.as_bytes() != b"0") || headers.contains_key(header::TRANSFER_ENCODING);
    if !has_body {
        return refused;
    }
    let drained = tokio::time::timeout(DISCARD_WITHIN, axum::body::to_bytes(request.into_body(), DISCARD_MAX)).await;
    if !matches!(drained, Ok(Ok(_))) {
        refused.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    refused
}

/// The HTTP answer for a refusal: its status, an RFC 6750 challenge pointing to the RFC 9728
/// metadata, and a JSON-RPC error body.
pub fn challenge(auth: &Authenticator, refusal: &Refusal) -> Response<Body> {
    challenge_at(auth, refusal, auth.metadata_url(), None)
}

/// Like [`challenge`], for the endpoint whose metadata is at `metadata` (a virtual server's,
/// whose scopes are asked for besides `auth.required_scopes`).
pub fn challenge_at(auth: &Authenticator, refusal: &Refusal, metadata: &str, server: Option<&VirtualServer>) -> Response<Body> {
    let mut scopes: Vec<&str> = auth.required_scopes().iter().map(String::as_str).collect();
    scopes.extend(server.into_iter().flat_map(|s| s.settings.scopes.iter().map(String::as_str)));
    let scope = scopes.join(" ");
    let (status, challenge, message) = match refusal {
        Refusal::Missing => (
            StatusCode::UNAUTHORIZED,
            format!(r#"Bearer resource_metadata="{}", scope="{scope}""#, metadata),
            "Unauthorized: a bearer token is required".to_owned(),
        ),
        Refusal::Malformed(why) => (
            StatusCode::BAD_REQUEST,
            format!(r#"Bearer error="invalid_request", error_description="{why}", resource_metadata="{}""#, metadata),
            format!("Bad Request: {why}"),
        ),
        Refusal::Invalid(why) => (
            StatusCode::UNAUTHORIZED,
            format!(
                r#"Bearer error="invalid_token", error_description="{}", resource_metadata="{}", scope="{scope}""#,
                quote_safe(why),
                metadata
            ),
            match auth.dev_hint(why) {
                Some(hint) => format!("Unauthorized: the access token is not valid for this server: {why}; {hint}"),
                None => format!("Unauthorized: the access token is not valid for this server: {why}"),
            },
        ),
        Refusal::InsufficientScope(shortfall) => (
            StatusCode::FORBIDDEN,
            format!(
                r#"Bearer error="insufficient_scope", scope="{}", error_description="{}", resource_metadata="{}""#,
                shortfall.hint(CHALLENGE_SCOPE_MAX),
                quote_safe(&format!("the token lacks {}", scope_list(&shortfall.missing, CHALLENGE_SCOPE_MAX))),
                metadata
            ),
            format!("Forbidden: {}", shortfall.describe()),
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

/// `error_description` is a quoted-string: keep it to printable ASCII without quotes.
fn quote_safe(s: &str) -> String {
    s.chars().filter(|c| c.is_ascii_graphic() && *c != '"' && *c != '\\' || *c == ' ').take(200).collect()
}

/// The longest `scope` of a challenge (bytes): a token with many scopes cannot push
/// `WWW-Authenticate` past what proxies accept (~4 KB); the missing scopes are always kept.
const CHALLENGE_SCOPE_MAX: usize = 2048;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_cannot_break_the_challenge() {
        assert_eq!(quote_safe("bad \"aud\" \\ x"), "bad aud  x");
    }
}
