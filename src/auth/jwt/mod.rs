//! Verification of JWT access tokens (RFC 9068 profile, RFC 8725 best practices) from a fixed
//! set of trusted issuers, for toolgate's OAuth 2.1 resource server.
//!
//! Order of work for a token, cheapest and least trusting first:
//! 1. size cap (8 KiB) and the verified-token cache (keyed by the token's SHA-256, so tokens
//!    are never stored), which answers the hot path without signature work;
//! 2. the header: `alg` must be a known signature algorithm (never `none`), `crit` and JWE
//!    headers are refused;
//! 3. the unverified `iss` only *selects* the issuer configuration (keys, algorithms,
//!    audiences); nothing else is read before the signature is checked;
//! 4. `alg` must be allowed for that issuer and fit the key (`kty`/`crv`/JWK `alg`); HMAC
//!    algorithms use only the issuer's configured secret, never a JWKS key, so a token "signed"
//!    with an RSA public key as HMAC secret (algorithm confusion) cannot verify;
//! 5. signature, then claims: `exp`, `iss`, `aud`, `sub` required; `iss` exact; `aud` must
//!    contain the canonical resource URI (RFC 8707) or an extra audience of that issuer;
//!    `nbf` and `iat` honoured with the issuer's leeway.
//!
//! Keys come only from configuration and the issuer's JWKS ([`super::jwks`]): the `jku`,
//! `x5u`, `jwk` and `x5c` header members are never used, since they would let the token name
//! its own key. The `typ` header is not enforced: RFC 9068 asks for `at+jwt`, but most IdPs
//! send `JWT`; what keeps an ID token (audience: the client) out is the audience check.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use sha2::{Digest as _, Sha256};
use tokio_util::sync::CancellationToken;

mod parts;

use self::parts::{Claims, Header, decode, parse_header, unverified_issuer};
use super::jwks::{DEFAULT_MIN_REFRESH_INTERVAL, JwksSource, RefreshOutcome, Selection};
use super::principal::{Principal, TokenError};

/// Tokens longer than this are refused unread: real access tokens are 1–2 KiB, and parsing
/// attacker-sized input is wasted work.
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;
/// Default bound on the verified-token cache.
pub const DEFAULT_TOKEN_CACHE_CAPACITY: u64 = 10_000;
/// Largest accepted `leeway_secs`: more than a few minutes of clock skew is a broken clock,
/// and a large leeway extends every token's life.
pub const MAX_LEEWAY_SECS: u64 = 300;
/// HMAC secrets shorter than the HS256 output are refused (RFC 7518 §3.2).
pub const MIN_HMAC_SECRET_BYTES: usize = 32;

const ASYMMETRIC_DEFAULT: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];
const HMAC_DEFAULT: [Algorithm; 3] = [Algorithm::HS256, Algorithm::HS384, Algorithm::HS512];

pub use crate::config::auth::IssuerSettings;

/// An issuer's settings, checked and ready for use.
struct Issuer {
    issuer: String,
    /// The canonical resource first, then the extra audiences.
    audiences: Vec<String>,
    algorithms: Vec<Algorithm>,
    hmac: Option<DecodingKey>,
    leeway: u64,
    /// `None` when the issuer only uses HMAC.
    jwks: Option<Arc<JwksSource>>,
    /// toolgate's own authorization server: its tokens must be `typ: at+jwt` and belong
    /// to a grant that is not revoked.
    local: Option<Arc<dyn RevokedGrants>>,
}

/// The grants of toolgate's own authorization server that were revoked (its deny list):
/// the verifier refuses their access tokens before they expire.
pub trait RevokedGrants: Send + Sync {
    fn is_revoked(&self, grant_id: &str) -> bool;
}

/// A verified token, remembered until its `exp`.
struct Cached {
    principal: Principal,
    issuer: Arc<Issuer>,
    /// The issuer's key epoch at verification (see [`super::jwks::KeySet::epoch`]); `None`
    /// for tokens verified with the issuer's HMAC secret, which no key refresh affects.
    epoch: Option<u64>,
    /// The grant (`sid`) of a token of toolgate's own authorization server.
    grant: Option<String>,
}

/// Verifies bearer JWTs against the configured issuers. Cheap to share (`Arc`); all methods
/// take `&self`.
pub struct JwtVerifier {
    issuers: HashMap<String, Arc<Issuer>>,
    cache: moka::sync::Cache<[u8; 32], Arc<Cached>>,
    min_refresh_interval: Duration,
    /// The virtual servers' audiences, accepted besides each issuer's own.
    servers: Arc<super::ServerAudiences>,
}

impl std::fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut issuers: Vec<&str> = self.issuers.keys().map(String::as_str).collect();
        issuers.sort_unstable();
        f.debug_struct("JwtVerifier")
            .field("issuers", &issuers)
            .field("cached_tokens", &self.cache.entry_count())
            .field("min_refresh_interval", &self.min_refresh_interval)
            .finish()
    }
}

impl JwtVerifier {
    /// Checks the issuer settings and builds the verifier. No network traffic happens here:
    /// keys are fetched on first use or by [`Self::refresh_all`].
    ///
    /// `resource` is the canonical resource URI tokens must be issued for (`aud`).
    pub fn new(issuers: Vec<IssuerSettings>, resource: String, http: reqwest::Client) -> Result<Self, String> {
        if issuers.is_empty() {
            return Err("no trusted issuer is configured".into());
        }
        Self::build(issuers, resource, http)
    }

    /// Like [`Self::new`], and also trusts toolgate's own authorization server: `issuer`,
    /// its public `keys`, and its deny list. Its tokens go through the same checks as any
    /// issuer's, plus `typ: at+jwt` (RFC 9068 §4), so an ID token or any other JWT the same
    /// key might sign is refused.
    pub fn with_own_issuer(
        issuers: Vec<IssuerSettings>,
        resource: String,
        http: reqwest::Client,
        own: (String, Vec<super::jwks::PublicKey>, Arc<dyn RevokedGrants>),
    ) -> Result<Self, String> {
        let (name, keys, revoked) = own;
        let mut verifier = Self::build(issuers, resource.clone(), http)?;
        if verifier.issuers.contains_key(&name) {
            return Err(format!("issuer {name:?} is toolgate's own authorization server; remove it from auth.issuers"));
        }
        let issuer = Issuer {
            issuer: name.clone(),
            audiences: vec![resource],
            algorithms: vec![Algorithm::ES256],
            hmac: None,
            // Replicas sign and verify with clocks kept by NTP: a few seconds is ample, and a
            // short-lived token should not live 30 s longer.
            leeway: 5,
            jwks: Some(Arc::new(JwksSource::fixed(&name, keys))),
            local: Some(revoked),
        };
        verifier.issuers.insert(name, Arc::new(issuer));
        Ok(verifier)
    }

    /// Both constructors' common part.
    fn build(issuers: Vec<IssuerSettings>, resource: String, http: reqwest::Client) -> Result<Self, String> {
        // Pin the pure-Rust backend explicitly: if another crate in the build enabled
        // jsonwebtoken's aws_lc_rs feature too, the automatic choice would panic at the first
        // verification. Failing to install just means a provider is already in place.
        let _ = jsonwebtoken::crypto::CryptoProvider::install_default(&jsonwebtoken::crypto::rust_crypto::DEFAULT_PROVIDER);
        if resource.trim().is_empty() {
            return Err("the canonical resource URI is empty".into());
        }
        let mut by_name = HashMap::with_capacity(issuers.len());
        for settings in issuers {
            let issuer = build_issuer(settings, &resource, &http)?;
            if by_name.contains_key(&issuer.issuer) {
                return Err(format!("issuer {:?} is configured twice", issuer.issuer));
            }
            by_name.insert(issuer.issuer.clone(), Arc::new(issuer));
        }
        Ok(Self {
            issuers: by_name,
            cache: token_cache(DEFAULT_TOKEN_CACHE_CAPACITY),
            min_refresh_interval: DEFAULT_MIN_REFRESH_INTERVAL,
            servers: Arc::default(),
        })
    }

    /// Accepts the virtual servers' audiences too (see [`super::ServerAudiences`]).
    pub fn with_server_audiences(mut self, servers: Arc<super::ServerAudiences>) -> Self {
        self.servers = servers;
        self
    }

    /// Sets the least time between two fetches of one issuer's keys, whatever triggers them
    /// (default 30 s). Lower it only in tests.
    pub fn with_min_refresh_interval(mut self, interval: Duration) -> Self {
        self.min_refresh_interval = interval;
        self
    }

    /// Sets how many verified tokens are remembered (default 10 000; 0 disables the cache).
    pub fn with_token_cache_capacity(mut self, capacity: u64) -> Self {
        self.cache = token_cache(capacity);
        self
    }

    /// Verifies a bearer token and returns who it speaks for.
    pub async fn verify(&self, token: &str) -> Result<Principal, TokenError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(TokenError::invalid("token too large"));
        }
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(hit) = self.cache.get(&digest) {
            if hit.grant.as_deref().is_some_and(|g| hit.issuer.local.as_ref().is_some_and(|l| l.is_revoked(g))) {
                self.cache.invalidate(&digest);
                return Err(TokenError::invalid("the grant of this token was revoked"));
            }
            if let Some(principal) = still_valid(&hit) {
                return Ok(principal);
            }
            // Expired, or the issuer withdrew a key since: verify from scratch.
            self.cache.invalidate(&digest);
        }
        let (principal, issuer, epoch, grant) = self.verify_uncached(token).await?;
        if principal.expires_at > unix_now() {
            self.cache.insert(digest, Arc::new(Cached { principal: principal.clone(), issuer, epoch, grant }));
        }
        Ok(principal)
    }

    /// Whether every issuer that signs with public keys has had them fetched at least once
    /// (readiness: until then no token of that issuer can be verified).
    pub fn keys_loaded(&self) -> bool {
        self.issuers.values().filter_map(|i| i.jwks.as_ref()).all(|source| !source.current().keys.is_empty())
    }

    /// Fetches every issuer's keys (each at most once per minimum interval). The caller runs
    /// it on an interval; failures are logged and the previous keys stay in use.
    pub async fn refresh_all(&self) {
        let sources = self.issuers.values().filter_map(|i| i.jwks.clone());
        let refreshes = sources.map(|source| {
            let interval = self.min_refresh_interval;
            async move { source.refresh(interval).await }
        });
        // Failures were logged by the source; nothing else to do with the outcomes here.
        let _ = futures_util::future::join_all(refreshes).await;
    }

    /// Runs [`Self::refresh_all`] now and then every `every` (at least one second) until
    /// `stop` is cancelled or the verifier is dropped. Needs a Tokio runtime; without one it
    /// logs an error and does nothing.
    pub fn spawn_refresh(self: &Arc<Self>, every: Duration, stop: CancellationToken) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::error!("no Tokio runtime: issuer keys will only be fetched on demand");
            return;
        };
        // A weak handle: the task must not keep a dropped verifier alive.
        let verifier: Weak<Self> = Arc::downgrade(self);
        let every = every.max(Duration::from_secs(1));
        runtime.spawn(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = stop.cancelled() => break,
                    _ = ticks.tick() => {}
                }
                let Some(verifier) = verifier.upgrade() else { break };
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = verifier.refresh_all() => {}
                }
            }
        });
    }

    async fn verify_uncached(&self, token: &str) -> Result<(Principal, Arc<Issuer>, Option<u64>, Option<String>), TokenError> {
        let mut parts = token.split('.');
        let (Some(header_b64), Some(payload_b64), Some(_signature), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
            return Err(TokenError::invalid("malformed token: not a JWS compact serialization"));
        };
        let header = parse_header(header_b64)?;
        let claimed_issuer = unverified_issuer(payload_b64)?;
        let issuer = self.issuers.get(&claimed_issuer).ok_or_else(|| TokenError::invalid("token issuer is not trusted"))?;
        if !issuer.algorithms.contains(&header.alg) {
            return Err(TokenError::invalid("signing algorithm not allowed for this issuer"));
        }
        if issuer.local.is_some() && header.typ.as_deref() != Some("at+jwt") {
            return Err(TokenError::invalid("not an access token (typ must be at+jwt)"));
        }

        let mut validation = Validation::new(header.alg);
        validation.leeway = issuer.leeway;
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.validate_aud = true;
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.set_issuer(&[issuer.issuer.as_str()]);
        let servers = self.servers.load();
        let accepted: Vec<&String> = issuer.audiences.iter().chain(servers.iter()).collect();
        validation.set_audience(&accepted);

        let (claims, epoch) = if let Some(secret) = issuer.hmac.as_ref().filter(|_| HMAC_DEFAULT.contains(&header.alg)) {
            (decode(token, secret, &validation)?, None)
        } else {
            let source = issuer.jwks.as_ref().ok_or_else(|| TokenError::invalid("signing algorithm not allowed for this issuer"))?;
            let (claims, epoch) = self.decode_with_jwks(token, &header, source, &validation).await?;
            (claims, Some(epoch))
        };
        let grant = claims.sid.clone();
        if let Some(revoked) = &issuer.local {
            let grant = grant.as_deref().ok_or_else(|| TokenError::invalid("token lacks the required claim sid"))?;
            if revoked.is_revoked(grant) {
                return Err(TokenError::invalid("the grant of this token was revoked"));
            }
        }
        let principal = principal_from(claims, issuer, &self.servers)?;
        Ok((principal, Arc::clone(issuer), epoch, grant))
    }

    /// Verifies with the issuer's JWKS, refreshing it once (rate-limited) if no key fits.
    async fn decode_with_jwks(
        &self,
        token: &str,
        header: &Header,
        source: &Arc<JwksSource>,
        validation: &Validation,
    ) -> Result<(Claims, u64), TokenError> {
        let mut keys = source.current();
        if matches!(keys.select(header.kid.as_deref(), header.alg), Selection::NoKey) {
            let outcome = source.refresh(self.min_refresh_interval).await;
            keys = source.current();
            if matches!(keys.select(header.kid.as_deref(), header.alg), Selection::NoKey) {
                return Err(match outcome {
                    RefreshOutcome::Fetched | RefreshOutcome::RateLimited { last_ok: true } => {
                        TokenError::invalid("no signing key of the issuer matches the token's kid and alg")
                    }
                    RefreshOutcome::RateLimited { last_ok: false } => {
                        TokenError::Unavailable("the issuer's signing keys could not be fetched recently and no cached key fits".into())
                    }
                    RefreshOutcome::Failed(why) => TokenError::Unavailable(why),
                });
            }
        }
        let candidates = match keys.select(header.kid.as_deref(), header.alg) {
            Selection::Keys(candidates) => candidates,
            Selection::Ambiguous => return Err(TokenError::invalid("token names no kid and several issuer keys fit")),
            Selection::NoKey => return Err(TokenError::invalid("no signing key of the issuer matches the token's kid and alg")),
        };
        let mut last = TokenError::invalid(SIGNATURE_MISMATCH);
        // Only a JWKS that repeats a kid yields several; bound the signature work regardless.
        for candidate in candidates.into_iter().take(MAX_KEYS_TRIED) {
            match decode(token, &candidate.key, validation) {
                Ok(claims) => return Ok((claims, keys.epoch)),
                // Several keys share the kid: another may be the right one.
                Err(e) if matches!(&e, TokenError::Invalid(why) if why == SIGNATURE_MISMATCH) => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }
}

const SIGNATURE_MISMATCH: &str = "signature does not verify";
/// Most keys one token's signature is checked against.
const MAX_KEYS_TRIED: usize = 3;

fn token_cache(capacity: u64) -> moka::sync::Cache<[u8; 32], Arc<Cached>> {
    moka::sync::Cache::builder().max_capacity(capacity).expire_after(ExpireAtExp).build()
}

/// Cache entries live until the token's `exp`; after that the token is verified again, which
/// applies the leeway exactly as a first verification would.
struct ExpireAtExp;

impl moka::Expiry<[u8; 32], Arc<Cached>> for ExpireAtExp {
    fn expire_after_create(&self, _key: &[u8; 32], value: &Arc<Cached>, _created_at: std::time::Instant) -> Option<Duration> {
        Some(Duration::from_secs(value.principal.expires_at.saturating_sub(unix_now())))
    }
}

/// The cached principal, if the entry may still be used. The time check does not rely on the
/// cache's eviction timing.
fn still_valid(hit: &Cached) -> Option<Principal> {
    if hit.principal.expires_at <= unix_now() {
        return None;
    }
    if let (Some(epoch), Some(source)) = (hit.epoch, &hit.issuer.jwks)
        && source.epoch() != epoch
    {
        return None;
    }
    Some(hit.principal.clone())
}

fn build_issuer(settings: IssuerSettings, resource: &str, http: &reqwest::Client) -> Result<Issuer, String> {
    let name = settings.issuer;
    if name.is_empty() || name.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(format!("issuer {name:?} must be non-empty, without spaces or control characters"));
    }
    if settings.leeway_secs > MAX_LEEWAY_SECS {
        return Err(format!("issuer {name:?}: leeway_secs {} exceeds {MAX_LEEWAY_SECS}", settings.leeway_secs));
    }
    let hmac = match &settings.hmac_secret {
        Some(secret) if secret.expose().len() < MIN_HMAC_SECRET_BYTES => {
            return Err(format!("issuer {name:?}: hmac_secret must be at least {MIN_HMAC_SECRET_BYTES} bytes"));
        }
        Some(secret) => Some(DecodingKey::from_secret(secret.expose().as_bytes())),
        None => None,
    };
    let algorithms: Vec<Algorithm> = if settings.algorithms.is_empty() {
        if hmac.is_some() { HMAC_DEFAULT.to_vec() } else { ASYMMETRIC_DEFAULT.to_vec() }
    } else {
        let mut list = Vec::with_capacity(settings.algorithms.len());
        for text in &settings.algorithms {
            let alg = text
                .parse::<Algorithm>()
                .map_err(|_| format!("issuer {name:?}: unsupported algorithm {text:?} (none is never allowed)"))?;
            if !list.contains(&alg) {
                list.push(alg);
            }
        }
        list
    };
    let uses_hmac = algorithms.iter().any(|a| HMAC_DEFAULT.contains(a));
    if uses_hmac && hmac.is_none() {
        return Err(format!("issuer {name:?}: HS256/HS384/HS512 are only allowed together with hmac_secret"));
    }
    if !uses_hmac && hmac.is_some() {
        return Err(format!("issuer {name:?}: hmac_secret is set but no HS* algorithm is allowed"));
    }
    let jwks = if algorithms.iter().any(|a| !HMAC_DEFAULT.contains(a)) {
        Some(Arc::new(JwksSource::new(&name, settings.jwks_uri.as_deref(), http.clone()).map_err(|e| format!("issuer {name:?}: {e}"))?))
    } else {
        None
    };
    let mut audiences = vec![resource.to_owned()];
    for audience in settings.audiences {
        if audience.is_empty() {
            return Err(format!("issuer {name:?}: an extra audience is empty"));
        }
        if !audiences.contains(&audience) {
            audiences.push(audience);
        }
    }
    Ok(Issuer { issuer: name, audiences, algorithms, hmac, leeway: settings.leeway_secs, jwks, local: None })
}

/// Final checks after the library's, then the [`Principal`]. The `iss`/`aud`/`exp` checks
/// repeat the library's on purpose: they are what this component promises, so they are
/// stated here rather than only configured.
fn principal_from(claims: Claims, issuer: &Issuer, servers: &super::ServerAudiences) -> Result<Principal, TokenError> {
    let now = unix_now();
    if claims.iss.as_deref() != Some(issuer.issuer.as_str()) {
        return Err(TokenError::invalid("token issuer mismatch"));
    }
    let aud = claims.aud.ok_or_else(|| TokenError::invalid("token lacks the required claim aud"))?;
    let exp = claims.exp.ok_or_else(|| TokenError::invalid("token lacks the required claim exp"))?;
    // Whole seconds, rounded down: never later than the token says.
    let expires_at = exp.0.floor() as u64;
    if expires_at.saturating_add(issuer.leeway) < now {
        return Err(TokenError::invalid("token has expired"));
    }
    if let Some(iat) = claims.iat
        && iat.0.ceil() as u64 > now.saturating_add(issuer.leeway)
    {
        return Err(TokenError::invalid("token is issued in the future (iat)"));
    }
    let subject = claims.sub.ok_or_else(|| TokenError::invalid("token lacks the required claim sub"))?;
    // Control characters would let a subject imitate another principal's key().
    if subject.is_empty() || subject.chars().any(char::is_control) {
        return Err(TokenError::invalid("token subject is empty or has control characters"));
    }
    let scopes: BTreeSet<String> =
        claims.scope.as_ref().or(claims.scp.as_ref()).map(|s| s.scopes().map(str::to_owned).collect()).unwrap_or_default();
    let mut principal = Principal {
        issuer: issuer.issuer.clone(),
        subject,
        client_id: claims.client_id.or(claims.azp),
        scopes,
        expires_at,
        default_audience: false,
        server_audiences: Vec::new(),
    };
    if !servers.classify(aud.values(), &issuer.audiences, &mut principal) {
        return Err(TokenError::invalid("token audience does not include this resource"));
    }
    Ok(principal)
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
