//! Opaque access tokens, checked by RFC 7662 introspection at the authorization server with
//! the `oauth2` crate's introspection client. The server authenticates to the endpoint with
//! its own client credentials; the caller's token is only ever sent there, to the issuer
//! that minted it (no passthrough anywhere else).
//!
//! Results are cached by the token's SHA-256 for at most `cache_secs` and never past the
//! token's `exp`, so a busy client costs one introspection call per window, and a revoked
//! token is honoured again at the latest `cache_secs` later.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use oauth2::basic::BasicClient;
use oauth2::{AccessToken, AuthType, ClientId, ClientSecret, EndpointNotSet, EndpointSet, IntrospectionUrl, TokenIntrospectionResponse};
use sha2::{Digest as _, Sha256};

use super::principal::{Principal, TokenError};
use crate::metrics::record::{Introspection, introspection_cache, introspection_request};

pub use crate::config::auth::{ClientAuth, IntrospectionSettings};

type IntrospectionClient = BasicClient<EndpointNotSet, EndpointNotSet, EndpointSet, EndpointNotSet, EndpointNotSet>;

#[derive(Clone)]
struct Cached {
    principal: Principal,
    until: SystemTime,
}

/// Checks opaque tokens at the authorization server.
pub struct Introspector {
    client: IntrospectionClient,
    http: reqwest::Client,
    /// The endpoint, for the readiness probe.
    endpoint: url::Url,
    /// Whether the endpoint has answered at least once (any HTTP status).
    reached: std::sync::atomic::AtomicBool,
    issuer: String,
    audiences: Vec<String>,
    /// The virtual servers' audiences, accepted besides `audiences`.
    servers: Arc<super::ServerAudiences>,
    cache_secs: u64,
    cache: moka::sync::Cache<[u8; 32], Arc<Cached>>,
}

impl std::fmt::Debug for Introspector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Introspector").field("issuer", &self.issuer).finish_non_exhaustive()
    }
}

struct ExpireAtUntil;

impl moka::Expiry<[u8; 32], Arc<Cached>> for ExpireAtUntil {
    fn expire_after_create(&self, _key: &[u8; 32], value: &Arc<Cached>, _created_at: std::time::Instant) -> Option<Duration> {
        Some(value.until.duration_since(SystemTime::now()).unwrap_or(Duration::ZERO))
    }
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

impl Introspector {
    /// `resource` is the canonical resource URI the token must be meant for.
    pub fn new(settings: &IntrospectionSettings, resource: &str) -> Result<Self, String> {
        // The same rule as for key URLs: https, plain http only on loopback.
        let url = super::jwks::fetchable_url(&settings.endpoint, "auth.introspection.endpoint")?;
        let endpoint = url.clone();
        let mut client = BasicClient::new(ClientId::new(settings.client_id.clone()))
            .set_introspection_url(IntrospectionUrl::from_url(url))
            .set_auth_type(match settings.client_auth {
                ClientAuth::Basic => AuthType::BasicAuth,
                ClientAuth::Post => AuthType::RequestBody,
            });
        if let Some(secret) = &settings.client_secret {
            client = client.set_client_secret(ClientSecret::new(secret.expose().to_owned()));
        }
        // No redirects: the endpoint is configuration, and a redirect must not carry tokens elsewhere.
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| format!("cannot build the introspection HTTP client: {e}"))?;
        let mut audiences = vec![resource.to_owned()];
        audiences.extend(settings.audiences.iter().cloned());
        let cache = moka::sync::Cache::builder().max_capacity(settings.cache_capacity).expire_after(ExpireAtUntil).build();
        Ok(Self {
            client,
            http,
            endpoint,
            reached: std::sync::atomic::AtomicBool::new(false),
            issuer: settings.issuer.clone(),
            audiences,
            servers: Arc::default(),
            cache_secs: settings.cache_secs,
            cache,
        })
    }

    /// Accepts the virtual servers' audiences too (see [`super::ServerAudiences`]).
    pub fn with_server_audiences(mut self, servers: Arc<super::ServerAudiences>) -> Self {
        self.servers = servers;
        self
    }

    /// Whether the endpoint has answered at least once; if not yet, asks it now (an HTTP
    /// answer of any status counts: it proves the server is reachable, not a token's worth).
    /// A completed introspection also counts (see `verify`).
    pub async fn reachable(&self) -> bool {
        use std::sync::atomic::Ordering;
        if self.reached.load(Ordering::Relaxed) {
            return true;
        }
        // A HEAD, not an introspection: it proves the server answers without spending one of
        // its introspection calls (any status counts; most answer 405).
        let answered = self.http.head(self.endpoint.clone()).send().await.is_ok();
        if answered {
            self.reached.store(true, Ordering::Relaxed);
        }
        answered
    }

    /// Whether the endpoint has answered at least once (no network).
    pub fn reached(&self) -> bool {
        self.reached.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether this introspector speaks for `issuer`.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// Verifies an opaque token.
    pub async fn verify(&self, token: &str) -> Result<Principal, TokenError> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(hit) = self.cache.get(&key)
            && hit.until > SystemTime::now()
        {
            introspection_cache(true);
            return Ok(hit.principal.clone());
        }
        introspection_cache(false);
        let access = AccessToken::new(token.to_owned());
        let response = self.client.introspect(&access).request_async(&self.http).await.map_err(|e| {
            introspection_request(Introspection::Error);
            // The endpoint's own failure, not the token's: the caller answers 503.
            TokenError::Unavailable(format!("introspection failed: {}", error_kind(&e)))
        })?;
        self.reached.store(true, std::sync::atomic::Ordering::Relaxed);
        if !response.active() {
            introspection_request(Introspection::Inactive);
            return Err(TokenError::Invalid("token is not active".into()));
        }
        introspection_request(Introspection::Active);
        if let Some(iss) = response.iss()
            && iss != self.issuer
        {
            return Err(TokenError::Invalid("token issuer is not trusted here".into()));
        }
        let aud: Vec<&str> = response.aud().map(|aud| aud.iter().map(String::as_str).collect()).unwrap_or_default();
        let now = now_secs();
        let exp = response.exp().and_then(|t| u64::try_from(t.timestamp()).ok());
        if exp.is_some_and(|e| e <= now) {
            return Err(TokenError::Invalid("token is expired".into()));
        }
        let client_id = response.client_id().map(|c| c.as_str().to_owned());
        // Client-credentials tokens may have no `sub`; the client is then the subject.
        let subject = response.sub().or(response.username()).map(str::to_owned).or_else(|| client_id.clone());
        let Some(subject) = subject.filter(|s| !s.is_empty() && !s.chars().any(char::is_control)) else {
            return Err(TokenError::Invalid("token has no usable subject".into()));
        };
        let scopes = response.scopes().map(|s| s.iter().map(|x| x.as_str().to_owned()).collect()).unwrap_or_default();
        let mut principal = Principal {
            issuer: self.issuer.clone(),
            subject,
            client_id,
            scopes,
            expires_at: exp.unwrap_or(now + self.cache_secs),
            default_audience: false,
            server_audiences: Vec::new(),
        };
        if !self.servers.classify(aud.iter().copied(), &self.audiences, &mut principal) {
            return Err(TokenError::Invalid("token audience does not include this server".into()));
        }
        let horizon = now + self.cache_secs;
        let until = UNIX_EPOCH + Duration::from_secs(exp.map_or(horizon, |e| e.min(horizon)));
        self.cache.insert(key, Arc::new(Cached { principal: principal.clone(), until }));
        Ok(principal)
    }
}

/// A short, safe description of an introspection failure (never the response body).
fn error_kind<RE: std::error::Error + 'static, T: oauth2::ErrorResponse>(e: &oauth2::RequestTokenError<RE, T>) -> &'static str {
    match e {
        oauth2::RequestTokenError::ServerResponse(_) => "the server refused toolgate's client credentials or the request",
        oauth2::RequestTokenError::Request(_) => "the endpoint could not be reached",
        oauth2::RequestTokenError::Parse(_, _) => "the response was not an introspection response",
        oauth2::RequestTokenError::Other(_) => "unexpected response",
    }
}
