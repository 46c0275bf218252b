//! An issuer's public signing keys: where they come from (a configured `jwks_uri`, or one found
//! through authorization-server metadata), how they are fetched (bounded in time and size),
//! which JWKs are usable, and when they are fetched again.
//!
//! Reads are lock-free ([`ArcSwap`] snapshot). Fetches are serialized per issuer and
//! rate-limited: whatever asks for them (an unknown `kid`, the background refresh), an
//! issuer's keys are fetched at most once per minimum interval, so a stream of tokens with
//! made-up key ids cannot turn this server into a load generator against the IdP. A fetch
//! runs in its own task, so a client that disconnects mid-request cannot cancel a refresh
//! that other requests are waiting for. When a fetch fails the previous keys stay in use.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, DecodingKey};
use reqwest::Url;
use serde::Deserialize;
use sha2::{Digest as _, Sha256};

/// Default for the least time between two fetches of one issuer's keys.
pub const DEFAULT_MIN_REFRESH_INTERVAL: Duration = Duration::from_secs(30);
/// Bound on each HTTP request (connect, headers and body).
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound on a whole refresh (up to three metadata candidates plus the JWKS), so requests
/// waiting for a refresh are not held longer than this however the IdP misbehaves.
pub const REFRESH_DEADLINE: Duration = Duration::from_secs(10);
/// Largest metadata or JWKS document read. Real key sets are a few KiB; the cap keeps a
/// broken or hostile endpoint from making us buffer without bound.
pub const MAX_DOCUMENT_BYTES: usize = 256 * 1024;
/// Most JWKs considered from one document (the rest are ignored, with a warning).
pub const MAX_KEYS: usize = 64;
/// RSA moduli outside this range are not used: below 2048 bits is too weak (NIST SP 800-131A),
/// above 4096 the RSA backend refuses the key at verification time anyway.
const RSA_MIN_BITS: usize = 2048;
const RSA_MAX_BITS: usize = 4096;

/// The type of a public key, and for elliptic curves the curve: it decides which JWS
/// algorithms the key can verify.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// `kty: RSA`: RS256/384/512 and PS256/384/512.
    Rsa,
    /// `kty: EC, crv: P-256`: ES256 only.
    EcP256,
    /// `kty: EC, crv: P-384`: ES384 only.
    EcP384,
    /// `kty: OKP, crv: Ed25519`: EdDSA only.
    Ed25519,
}

impl KeyKind {
    /// Whether a key of this kind may verify `alg`. Symmetric algorithms never fit: a JWKS is
    /// public, so an HMAC "key" from it would let anyone forge tokens.
    pub fn supports(self, alg: Algorithm) -> bool {
        use Algorithm::*;
        matches!(
            (self, alg),
            (Self::Rsa, RS256 | RS384 | RS512 | PS256 | PS384 | PS512)
                | (Self::EcP256, ES256)
                | (Self::EcP384, ES384)
                | (Self::Ed25519, EdDSA)
        )
    }
}

/// One usable verification key from an issuer's JWKS.
#[derive(Clone, Debug)]
pub struct PublicKey {
    /// The JWK's `kid`.
    pub kid: Option<String>,
    pub kind: KeyKind,
    /// The JWK's `alg`, when it pins the key to one algorithm.
    pub alg: Option<Algorithm>,
    pub key: DecodingKey,
    /// SHA-256 over the kind and the key material: tells whether a refresh dropped a key.
    fingerprint: [u8; 32],
}

impl PublicKey {
    /// Whether this key may verify a token signed with `alg` (RFC 7517 §4.4: a JWK that names
    /// an `alg` is for that algorithm only).
    pub fn fits(&self, alg: Algorithm) -> bool {
        self.kind.supports(alg) && self.alg.is_none_or(|a| a == alg)
    }
}

/// A snapshot of an issuer's keys.
#[derive(Debug, Default)]
pub struct KeySet {
    pub keys: Vec<PublicKey>,
    /// Increases whenever a fetch no longer lists a key the previous set had (rotation out or
    /// revocation). Verified tokens remember the epoch they were checked under and are
    /// checked again after it changes, so a withdrawn key stops working at once.
    pub epoch: u64,
}

/// Which keys may verify a token.
#[derive(Debug)]
pub enum Selection<'a> {
    /// Try these, in order (several only when the JWKS repeats a `kid`).
    Keys(Vec<&'a PublicKey>),
    /// No key fits the token's `kid` and `alg`; a refresh may find one.
    NoKey,
    /// The token names no `kid` and more than one key fits: refusing is safer than trying
    /// each (which would multiply the signature work an attacker can cause).
    Ambiguous,
}

impl KeySet {
    /// The keys that may verify a token with header `kid` and `alg`.
    ///
    /// A token without `kid` uses the only fitting key. A token whose `kid` matches no key
    /// may still use the only fitting key when that key has no `kid` itself (it cannot be
    /// matched by id, and there is no other candidate).
    pub fn select(&self, kid: Option<&str>, alg: Algorithm) -> Selection<'_> {
        let mut fitting = self.keys.iter().filter(|k| k.fits(alg));
        if let Some(kid) = kid {
            let by_id: Vec<&PublicKey> = fitting.clone().filter(|k| k.kid.as_deref() == Some(kid)).collect();
            if !by_id.is_empty() {
                return Selection::Keys(by_id);
            }
            return match (fitting.next(), fitting.next()) {
                (Some(only), None) if only.kid.is_none() => Selection::Keys(vec![only]),
                _ => Selection::NoKey,
            };
        }
        match (fitting.next(), fitting.next()) {
            (Some(only), None) => Selection::Keys(vec![only]),
            (None, _) => Selection::NoKey,
            (Some(_), Some(_)) => Selection::Ambiguous,
        }
    }
}

/// What a call to [`JwksSource::refresh`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RefreshOutcome {
    /// The keys were fetched just now.
    Fetched,
    /// A fetch happened less than the minimum interval ago (possibly by a concurrent caller
    /// this call waited for); `last_ok` tells whether that fetch succeeded.
    RateLimited { last_ok: bool },
    /// The fetch failed; the previous keys (if any) stay in use.
    Failed(String),
}

/// Where the JWKS is.
#[derive(Debug)]
enum Location {
    /// Keys given at construction, never fetched (toolgate's own authorization server).
    Fixed,
    Configured(Url),
    /// Authorization-server metadata URLs to try in order.
    Discover(Vec<Url>),
}

#[derive(Debug, Default)]
struct RefreshState {
    last_attempt: Option<Instant>,
    last_ok: bool,
    /// The JWKS URL found through discovery; forgotten when fetching it fails, so moved
    /// metadata is picked up on the next refresh.
    discovered: Option<Url>,
}

impl RefreshState {
    fn recently_attempted(&self, min_interval: Duration) -> bool {
        self.last_attempt.is_some_and(|last| last.elapsed() < min_interval)
    }
}

/// The keys of one issuer, kept fresh.
#[derive(Debug)]
pub struct JwksSource {
    issuer: String,
    location: Location,
    http: reqwest::Client,
    keys: ArcSwap<KeySet>,
    /// Serializes fetches; also the rate limiter's memory.
    state: tokio::sync::Mutex<RefreshState>,
    /// JWKS document fetch attempts, for logs and metrics.
    fetches: AtomicU64,
}

impl JwksSource {
    /// A key source for `issuer`: `jwks_uri` when given, else discovery from the issuer URL.
    /// Both must be https, or http to a loopback host (local development and tests).
    pub fn new(issuer: &str, jwks_uri: Option<&str>, http: reqwest::Client) -> Result<Self, String> {
        let location = match jwks_uri {
            Some(uri) => Location::Configured(fetchable_url(uri, "jwks_uri")?),
            None => {
                let url = fetchable_url(issuer, "issuer (used to discover the jwks_uri)")?;
                if url.query().is_some() {
                    return Err(format!("issuer {issuer:?} must not have a query (RFC 8414 §2); set jwks_uri instead"));
                }
                Location::Discover(discovery_candidates(&url))
            }
        };
        Ok(Self {
            issuer: issuer.to_owned(),
            location,
            http,
            keys: ArcSwap::from_pointee(KeySet::default()),
            state: tokio::sync::Mutex::new(RefreshState::default()),
            fetches: AtomicU64::new(0),
        })
    }

    /// A source whose keys are `keys`, for an issuer in this process; refreshing it is a
    /// no-op.
    pub fn fixed(issuer: &str, keys: Vec<PublicKey>) -> Self {
        Self {
            issuer: issuer.to_owned(),
            location: Location::Fixed,
            http: reqwest::Client::new(),
            keys: ArcSwap::from_pointee(KeySet { keys, epoch: 0 }),
            state: tokio::sync::Mutex::new(RefreshState { last_attempt: None, last_ok: true, discovered: None }),
            fetches: AtomicU64::new(0),
        }
    }

    /// The current keys (empty until the first successful fetch).
    pub fn current(&self) -> Arc<KeySet> {
        self.keys.load_full()
    }

    /// The epoch of the current keys (see [`KeySet::epoch`]), without cloning the snapshot.
    pub fn epoch(&self) -> u64 {
        self.keys.load().epoch
    }

    /// How many times the JWKS document has been requested.
    pub fn fetch_count(&self) -> u64 {
        self.fetches.load(Ordering::Relaxed)
    }

    /// Fetches the keys unless a fetch happened less than `min_interval` ago.
    ///
    /// The fetch runs in a task of its own when a Tokio runtime is present, so dropping the
    /// caller's future (a client went away) does not abort a refresh others wait for.
    pub async fn refresh(self: &Arc<Self>, min_interval: Duration) -> RefreshOutcome {
        if matches!(self.location, Location::Fixed) {
            return RefreshOutcome::RateLimited { last_ok: true };
        }
        // Fast path for floods of unknown kids: answer "rate limited" without spawning. When
        // the lock is taken a fetch is running, and the slow path waits for its result.
        if let Ok(state) = self.state.try_lock()
            && state.recently_attempted(min_interval)
        {
            return RefreshOutcome::RateLimited { last_ok: state.last_ok };
        }
        let this = Arc::clone(self);
        let work = async move { this.refresh_serialized(min_interval).await };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => match handle.spawn(work).await {
                Ok(outcome) => outcome,
                Err(e) => RefreshOutcome::Failed(format!("key refresh task ended abnormally: {e}")),
            },
            Err(_) => work.await,
        }
    }

    async fn refresh_serialized(&self, min_interval: Duration) -> RefreshOutcome {
        let mut state = self.state.lock().await;
        // Whoever held the lock before us may have fetched already: that counts.
        if state.recently_attempted(min_interval) {
            return RefreshOutcome::RateLimited { last_ok: state.last_ok };
        }
        state.last_attempt = Some(Instant::now());
        let fetched = match tokio::time::timeout(REFRESH_DEADLINE, self.fetch(&mut state.discovered)).await {
            Ok(result) => result,
            Err(_) => Err(format!("no answer within {} s", REFRESH_DEADLINE.as_secs())),
        };
        crate::metrics::record::jwks_refresh(fetched.is_ok());
        match fetched {
            Ok(keys) => {
                state.last_ok = true;
                self.install(keys);
                RefreshOutcome::Fetched
            }
            Err(why) => {
                state.last_ok = false;
                tracing::warn!(issuer = %self.issuer, reason = %why, "cannot fetch the issuer's signing keys; keeping the previous ones");
                RefreshOutcome::Failed(why)
            }
        }
    }

    fn install(&self, keys: Vec<PublicKey>) {
        let previous = self.keys.load();
        let dropped = previous.keys.iter().any(|old| !keys.iter().any(|new| new.fingerprint == old.fingerprint && new.kid == old.kid));
        let epoch = if dropped { previous.epoch.wrapping_add(1) } else { previous.epoch };
        tracing::debug!(issuer = %self.issuer, keys = keys.len(), epoch, "issuer signing keys fetched");
        self.keys.store(Arc::new(KeySet { keys, epoch }));
    }

    async fn fetch(&self, discovered: &mut Option<Url>) -> Result<Vec<PublicKey>, String> {
        let (uri, was_discovered) = match &self.location {
            Location::Fixed => return Ok(self.current().keys.clone()),
            Location::Configured(uri) => (uri.clone(), false),
            Location::Discover(candidates) => match discovered.clone() {
                Some(uri) => (uri, true),
                None => {
                    let uri = self.discover(candidates).await?;
                    *discovered = Some(uri.clone());
                    (uri, true)
                }
            },
        };
        self.fetches.fetch_add(1, Ordering::Relaxed);
        let result = get_document(&self.http, &uri).await.and_then(|body| parse_jwks(&self.issuer, &body));
        if result.is_err() && was_discovered {
            *discovered = None;
        }
        result
    }

    /// Finds the `jwks_uri` in the first metadata document that answers, checking that it
    /// describes this issuer (RFC 8414 §3.3: otherwise an attacker-controlled document could
    /// substitute its own keys).
    async fn discover(&self, candidates: &[Url]) -> Result<Url, String> {
        #[derive(Deserialize)]
        struct Metadata {
            issuer: Option<String>,
            jwks_uri: Option<String>,
        }
        let mut failures = Vec::with_capacity(candidates.len());
        for candidate in candidates {
            let body = match get_document(&self.http, candidate).await {
                Ok(body) => body,
                Err(why) => {
                    failures.push(why);
                    continue;
                }
            };
            let meta: Metadata = match serde_json::from_slice(&body) {
                Ok(meta) => meta,
                Err(e) => {
                    failures.push(format!("{candidate}: not a metadata document: {e}"));
                    continue;
                }
            };
            if meta.issuer.as_deref() != Some(self.issuer.as_str()) {
                failures.push(format!("{candidate}: the document's issuer is not {:?}", self.issuer));
                continue;
            }
            let Some(jwks_uri) = meta.jwks_uri else {
                failures.push(format!("{candidate}: the document has no jwks_uri"));
                continue;
            };
            return fetchable_url(&jwks_uri, "discovered jwks_uri").map_err(|e| format!("{candidate}: {e}"));
        }
        Err(format!("no authorization server metadata found ({})", failures.join("; ")))
    }
}

/// The metadata URLs to try for `issuer`, in the order the MCP authorization spec gives:
/// RFC 8414 (path inserted after `/.well-known/…`), then OpenID Connect Discovery with the path
/// inserted, then OpenID Connect Discovery with the path appended (OIDC Discovery §4).
pub fn discovery_candidates(issuer: &Url) -> Vec<Url> {
    let path = issuer.path().trim_end_matches('/');
    let at = |p: String| {
        let mut url = issuer.clone();
        url.set_path(&p);
        url.set_query(None);
        url.set_fragment(None);
        url
    };
    if path.is_empty() {
        vec![at("/.well-known/oauth-authorization-server".into()), at("/.well-known/openid-configuration".into())]
    } else {
        vec![
            at(format!("/.well-known/oauth-authorization-server{path}")),
            at(format!("/.well-known/openid-configuration{path}")),
            at(format!("{path}/.well-known/openid-configuration")),
        ]
    }
}

/// Parses a URL the verifier will fetch from. Keys fetched over plain http could be replaced
/// by anyone on the path, so http is only accepted for loopback hosts.
pub fn fetchable_url(s: &str, what: &str) -> Result<Url, String> {
    let url = Url::parse(s).map_err(|e| format!("{what} {s:?} is not a URL: {e}"))?;
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("{what} {s:?} has no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!("{what} must not contain credentials"));
    }
    if url.fragment().is_some() {
        return Err(format!("{what} {s:?} must not have a fragment"));
    }
    match url.scheme() {
        "https" => Ok(url),
        "http" if is_loopback(&url) => Ok(url),
        _ => Err(format!("{what} {s:?} must be an https URL (plain http only for loopback hosts)")),
    }
}

fn is_loopback(url: &Url) -> bool {
    let Some(host) = url.host_str() else { return false };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// GETs a JSON document with a time bound and a size cap.
async fn get_document(http: &reqwest::Client, url: &Url) -> Result<Vec<u8>, String> {
    let mut response = http
        .get(url.clone())
        .header(reqwest::header::ACCEPT, "application/json")
        .timeout(FETCH_TIMEOUT)
        .send()
        .await
        .map_err(|e| format!("{url}: {}", error_chain(&e.without_url())))?;
    // The client may follow redirects: the place the document really came from must meet the
    // same rule as the configured one.
    if fetchable_url(response.url().as_str(), "redirect target").is_err() {
        return Err(format!("{url}: redirected to a location that is neither https nor loopback"));
    }
    let status = response.status();
    if !status.is_success() {
        return Err(format!("{url}: HTTP {status}"));
    }
    if response.content_length().is_some_and(|len| len > MAX_DOCUMENT_BYTES as u64) {
        return Err(format!("{url}: document larger than {MAX_DOCUMENT_BYTES} bytes"));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| format!("{url}: {}", error_chain(&e.without_url())))? {
        if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
            return Err(format!("{url}: document larger than {MAX_DOCUMENT_BYTES} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// "outer: inner: innermost": reqwest's top-level message alone ("error sending request")
/// does not say what went wrong.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        out.push_str(": ");
        out.push_str(&inner.to_string());
        source = inner.source();
    }
    out
}

/// Parses a JWK Set, keeping the usable signature keys. A key that cannot be used is skipped
/// (with a log line), not fatal: one odd key must not take down all the others.
pub fn parse_jwks(issuer: &str, body: &[u8]) -> Result<Vec<PublicKey>, String> {
    #[derive(Deserialize)]
    struct JwkSet {
        keys: Vec<serde_json::Value>,
    }
    let set: JwkSet = serde_json::from_slice(body).map_err(|e| format!("not a JWK Set: {e}"))?;
    if set.keys.len() > MAX_KEYS {
        tracing::warn!(issuer, keys = set.keys.len(), "JWK Set lists more keys than are considered; using the first {MAX_KEYS}");
    }
    let mut keys = Vec::new();
    for (index, value) in set.keys.into_iter().take(MAX_KEYS).enumerate() {
        match serde_json::from_value::<RawJwk>(value).map_err(|_| "not a JWK").and_then(public_key) {
            Ok(key) => keys.push(key),
            Err(why) => tracing::debug!(issuer, index, reason = why, "skipping a JWK"),
        }
    }
    Ok(keys)
}

/// The JWK members this verifier reads (RFC 7517 §4, RFC 7518 §6). Private members, if an IdP
/// were to publish them, are ignored.
#[derive(Deserialize)]
struct RawJwk {
    kty: String,
    kid: Option<String>,
    #[serde(rename = "use")]
    use_: Option<String>,
    key_ops: Option<Vec<String>>,
    alg: Option<String>,
    crv: Option<String>,
    n: Option<String>,
    e: Option<String>,
    x: Option<String>,
    y: Option<String>,
}

fn public_key(jwk: RawJwk) -> Result<PublicKey, &'static str> {
    if jwk.use_.as_deref().is_some_and(|u| u != "sig") {
        return Err("not a signature key (use)");
    }
    if jwk.key_ops.as_ref().is_some_and(|ops| !ops.iter().any(|op| op == "verify")) {
        return Err("key_ops does not allow verify");
    }
    let alg = match jwk.alg.as_deref() {
        None => None,
        Some(name) => Some(name.parse::<Algorithm>().map_err(|_| "unsupported alg")?),
    };
    let mut hash = Sha256::new();
    let (kind, key) = match jwk.kty.as_str() {
        "RSA" => {
            let n = b64(jwk.n.as_deref().ok_or("RSA key without n")?)?;
            let e = b64(jwk.e.as_deref().ok_or("RSA key without e")?)?;
            let n = strip_leading_zeros(&n);
            let e = strip_leading_zeros(&e);
            let bits = n.first().map_or(0, |top| (n.len() - 1) * 8 + (8 - top.leading_zeros() as usize));
            if !(RSA_MIN_BITS..=RSA_MAX_BITS).contains(&bits) {
                return Err("RSA modulus size outside 2048..=4096 bits");
            }
            if e.is_empty() || e.len() > 8 {
                return Err("RSA exponent out of range");
            }
            hash.update(b"RSA\0");
            hash.update(n);
            hash.update(b"\0");
            hash.update(e);
            (KeyKind::Rsa, DecodingKey::from_rsa_raw_components(n, e))
        }
        "EC" => {
            let (kind, size) = match jwk.crv.as_deref() {
                Some("P-256") => (KeyKind::EcP256, 32),
                Some("P-384") => (KeyKind::EcP384, 48),
                _ => return Err("unsupported EC curve"),
            };
            let x_text = jwk.x.as_deref().ok_or("EC key without x")?;
            let y_text = jwk.y.as_deref().ok_or("EC key without y")?;
            let (x, y) = (b64(x_text)?, b64(y_text)?);
            if x.len() != size || y.len() != size {
                return Err("EC coordinates of the wrong length");
            }
            hash.update(if kind == KeyKind::EcP256 { b"P-256\0".as_slice() } else { b"P-384\0".as_slice() });
            hash.update(&x);
            hash.update(&y);
            let key =
                DecodingKey::from_ec_components(x_text.trim_end_matches('='), y_text.trim_end_matches('=')).map_err(|_| "bad EC key")?;
            (kind, key)
        }
        "OKP" => {
            if jwk.crv.as_deref() != Some("Ed25519") {
                return Err("unsupported OKP curve");
            }
            let x_text = jwk.x.as_deref().ok_or("OKP key without x")?;
            let x = b64(x_text)?;
            // The length check matters: the EdDSA backend slices the key to 32 bytes and
            // would panic on a shorter one.
            if x.len() != 32 {
                return Err("Ed25519 key of the wrong length");
            }
            hash.update(b"Ed25519\0");
            hash.update(&x);
            let key = DecodingKey::from_ed_components(x_text.trim_end_matches('=')).map_err(|_| "bad Ed25519 key")?;
            (KeyKind::Ed25519, key)
        }
        "oct" => return Err("symmetric key in a public JWK Set (never used)"),
        _ => return Err("unsupported kty"),
    };
    if alg.is_some_and(|a| !kind.supports(a)) {
        return Err("alg does not match the key type");
    }
    Ok(PublicKey { kid: jwk.kid, kind, alg, key, fingerprint: hash.finalize().into() })
}

/// base64url as JWKs use it; trailing padding, which some IdPs add, is tolerated.
fn b64(text: &str) -> Result<Vec<u8>, &'static str> {
    URL_SAFE_NO_PAD.decode(text.trim_end_matches('=')).map_err(|_| "bad base64url")
}

fn strip_leading_zeros(bytes: &[u8]) -> &[u8] {
    let first = bytes.iter().position(|b| *b != 0).unwrap_or(bytes.len());
    &bytes[first..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_urls_follow_rfc8414_and_oidc() {
        let plain = Url::parse("https://as.example.com").expect("url");
        let urls: Vec<String> = discovery_candidates(&plain).iter().map(|u| u.to_string()).collect();
        assert_eq!(
            urls,
            ["https://as.example.com/.well-known/oauth-authorization-server", "https://as.example.com/.well-known/openid-configuration"]
        );
        let tenant = Url::parse("https://as.example.com/tenant1/").expect("url");
        let urls: Vec<String> = discovery_candidates(&tenant).iter().map(|u| u.to_string()).collect();
        assert_eq!(
            urls,
            [
                "https://as.example.com/.well-known/oauth-authorization-server/tenant1",
                "https://as.example.com/.well-known/openid-configuration/tenant1",
                "https://as.example.com/tenant1/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn only_https_or_loopback_http_is_fetched() {
        assert!(fetchable_url("https://idp.example.com/jwks", "x").is_ok());
        for ok in ["http://127.0.0.1:8080/jwks", "http://localhost/jwks", "http://[::1]:9/jwks"] {
            assert!(fetchable_url(ok, "x").is_ok(), "{ok}");
        }
        for bad in
            ["http://idp.example.com/jwks", "ftp://idp.example.com/jwks", "https://u:p@idp.example.com/", "https://idp/#f", "not a url"]
        {
            assert!(fetchable_url(bad, "x").is_err(), "{bad}");
        }
    }

    #[test]
    fn unusable_jwks_are_skipped() {
        let short_ed = serde_json::json!({"kty": "OKP", "crv": "Ed25519", "x": "AAAA"});
        let oct = serde_json::json!({"kty": "oct", "k": "c2VjcmV0"});
        let enc = serde_json::json!({"kty": "EC", "crv": "P-256", "use": "enc", "x": "", "y": ""});
        let weak_rsa = serde_json::json!({"kty": "RSA", "n": URL_SAFE_NO_PAD.encode([0xffu8; 128]), "e": "AQAB"});
        let body = serde_json::json!({"keys": [short_ed, oct, enc, weak_rsa, 42]}).to_string();
        assert!(parse_jwks("i", body.as_bytes()).expect("a JWK Set").is_empty());
        assert!(parse_jwks("i", b"{}").is_err());
    }

    #[test]
    fn key_kinds_only_support_their_algorithms() {
        assert!(KeyKind::Rsa.supports(Algorithm::PS256));
        assert!(!KeyKind::Rsa.supports(Algorithm::HS256));
        assert!(!KeyKind::EcP256.supports(Algorithm::ES384));
        assert!(KeyKind::Ed25519.supports(Algorithm::EdDSA));
    }
}
