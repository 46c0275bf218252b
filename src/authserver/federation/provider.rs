//! The provider's metadata and signing keys (FED-02): discovered on first use and cached,
//! fetched again when stale or when an ID token names a key the cache lacks (rotation at the
//! provider, at most once a minute after the first), and retried at the next sign-in after a
//! failure. Every request goes through [`send`]: no redirects (openidconnect's advice against
//! SSRF), a timeout, and a cap on what is read.

use std::sync::Arc;
use std::time::{Duration, Instant};

use openidconnect::core::CoreProviderMetadata;
use openidconnect::http::{HeaderValue, header::ACCEPT};
use openidconnect::{HttpRequest, HttpResponse, JsonWebKeySet};
use serde::Deserialize;

use super::FederationError;
use super::presets::{self, IssuerPolicy};
use crate::config::authserver::IdentityProviderSettings;

/// Largest metadata, key set or token response read from the provider.
const MAX_BODY: usize = 512 * 1024;
const TIMEOUT: Duration = Duration::from_secs(10);
/// Metadata older than this is fetched again (the stale copy serves if that fails).
const MAX_AGE: Duration = Duration::from_secs(3600);
/// Refetches forced by an unknown key, after the first, are this far apart at least.
const FORCED_REFETCH_INTERVAL: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HttpError(String);

/// toolgate's client for the provider: redirects are not followed, so a hostile metadata
/// document cannot bounce a request to an internal address through a redirect.
pub fn http_client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(TIMEOUT)
        .connect_timeout(TIMEOUT / 2)
        .pool_max_idle_per_host(0)
        .build()
        .map_err(|e| format!("cannot build the identity provider's HTTP client: {e}"))
}

/// One request for openidconnect, its body read up to [`MAX_BODY`].
pub async fn send(http: reqwest::Client, request: HttpRequest) -> Result<HttpResponse, HttpError> {
    let request = reqwest::Request::try_from(request).map_err(|e| HttpError(format!("bad request: {e}")))?;
    let mut response = http.execute(request).await.map_err(|e| HttpError(format!("request failed: {}", error_chain(&e))))?;
    if response.content_length().is_some_and(|n| n > MAX_BODY as u64) {
        return Err(HttpError(format!("response larger than {MAX_BODY} bytes")));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| HttpError(format!("reading the response failed: {e}")))? {
        if body.len() + chunk.len() > MAX_BODY {
            return Err(HttpError(format!("response larger than {MAX_BODY} bytes")));
        }
        body.extend_from_slice(&chunk);
    }
    let mut out = HttpResponse::new(body);
    *out.status_mut() = response.status();
    *out.headers_mut() = std::mem::take(response.headers_mut());
    Ok(out)
}

/// What discovery found, checked.
#[derive(Debug)]
pub struct Discovered {
    /// The metadata with its key set filled in.
    pub metadata: CoreProviderMetadata,
    /// The provider promises the callback's `iss` parameter (RFC 9207).
    pub iss_parameter: bool,
    pub issuer_policy: IssuerPolicy,
    fetched: Instant,
}

#[derive(Deserialize)]
struct Rfc9207 {
    #[serde(default)]
    authorization_response_iss_parameter_supported: bool,
}

#[derive(Default)]
struct Cache {
    current: Option<Arc<Discovered>>,
    last_forced: Option<Instant>,
    /// The last failed discovery: callers that were already waiting get its error instead of
    /// each waiting out another timeout; a later call tries again.
    failure: Option<(Instant, String)>,
    /// A stale copy is not refreshed again before this, after a refresh failed.
    stale_retry_at: Option<Instant>,
}

/// The cached discovery of one provider.
pub struct Discovery {
    http: reqwest::Client,
    settings: IdentityProviderSettings,
    // A tokio mutex: concurrent first sign-ins wait for one discovery instead of each fetching.
    cache: tokio::sync::Mutex<Cache>,
}

impl Discovery {
    pub fn new(http: reqwest::Client, settings: IdentityProviderSettings) -> Self {
        Self { http, settings, cache: tokio::sync::Mutex::new(Cache::default()) }
    }

    /// The cached discovery, fetched when there is none or it is stale.
    pub async fn get(&self) -> Result<Arc<Discovered>, FederationError> {
        let arrived = Instant::now();
        let mut cache = self.cache.lock().await;
        if let Some((_, reason)) = cache.failure.as_ref().filter(|(at, _)| *at >= arrived) {
            return Err(unavailable(reason.clone()));
        }
        if let Some(current) = &cache.current {
            let stale = current.fetched.elapsed() >= MAX_AGE && cache.stale_retry_at.is_none_or(|at| Instant::now() >= at);
            if !stale {
                return Ok(current.clone());
            }
        }
        match self.fetch().await {
            Ok(fresh) => {
                (cache.failure, cache.stale_retry_at) = (None, None);
                Ok(cache.current.insert(Arc::new(fresh)).clone())
            }
            Err(e) => Self::failed(&mut cache, e),
        }
    }

    /// After a failed fetch: the stale copy, if any, serves (tried again in a minute, not at
    /// every sign-in while the provider is down); otherwise the error.
    fn failed(cache: &mut Cache, e: FederationError) -> Result<Arc<Discovered>, FederationError> {
        if let Some(stale) = &cache.current {
            tracing::warn!(error = %e, "identity provider metadata refresh failed; using the cached copy");
            cache.stale_retry_at = Some(Instant::now() + FORCED_REFETCH_INTERVAL);
            return Ok(stale.clone());
        }
        let (FederationError::Unavailable(reason) | FederationError::Refused(reason)) = &e;
        cache.failure = Some((Instant::now(), reason.clone()));
        Err(e)
    }

    /// A fresh discovery after `seen` lacked an ID token's key, or `None` when another
    /// refetch happened too recently (rate limit) and nothing newer than `seen` is cached.
    pub async fn refetch_for_unknown_key(&self, seen: &Arc<Discovered>) -> Result<Option<Arc<Discovered>>, FederationError> {
        let mut cache = self.cache.lock().await;
        if let Some(current) = cache.current.as_ref().filter(|c| c.fetched > seen.fetched) {
            return Ok(Some(current.clone()));
        }
        if cache.last_forced.is_some_and(|at| at.elapsed() < FORCED_REFETCH_INTERVAL) {
            return Ok(None);
        }
        cache.last_forced = Some(Instant::now());
        tracing::info!("identity provider signed with an unknown key; fetching its keys again");
        let fresh = Arc::new(self.fetch().await?);
        cache.current = Some(fresh.clone());
        Ok(Some(fresh))
    }

    async fn fetch(&self) -> Result<Discovered, FederationError> {
        let url = format!("{}/.well-known/openid-configuration", self.settings.issuer.trim_end_matches('/'));
        let body = self.get_json(&url).await?;
        let metadata: CoreProviderMetadata =
            serde_json::from_slice(&body).map_err(|e| unavailable(format!("its metadata is not OpenID provider metadata: {e}")))?;
        let iss_parameter = serde_json::from_slice::<Rfc9207>(&body).is_ok_and(|m| m.authorization_response_iss_parameter_supported);
        let expected = presets::expected_metadata_issuer(&self.settings);
        if metadata.issuer().as_str() != expected {
            return Err(unavailable(format!("its metadata names the issuer {:?}, not {expected:?}", metadata.issuer().as_str())));
        }
        check_endpoints(&metadata)?;
        let http = self.http.clone();
        let client = move |request| send(http.clone(), request);
        let jwks = JsonWebKeySet::fetch_async(metadata.jwks_uri(), &client)
            .await
            .map_err(|e| unavailable(format!("its keys could not be fetched: {}", error_chain(&e))))?;
        let issuer_policy = IssuerPolicy::new(&self.settings, metadata.issuer().as_str());
        Ok(Discovered { metadata: metadata.set_jwks(jwks), iss_parameter, issuer_policy, fetched: Instant::now() })
    }

    async fn get_json(&self, url: &str) -> Result<Vec<u8>, FederationError> {
        let request = HttpRequest::new(Vec::new());
        let (mut parts, body) = request.into_parts();
        parts.uri = url.parse().map_err(|e| unavailable(format!("{url:?} is not a URL: {e}")))?;
        parts.headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        let response = send(self.http.clone(), HttpRequest::from_parts(parts, body))
            .await
            .map_err(|e| unavailable(format!("{url} could not be fetched: {e}")))?;
        if !response.status().is_success() {
            return Err(unavailable(format!("{url} answered {}", response.status())));
        }
        Ok(response.into_body())
    }
}

/// The endpoints toolgate sends secrets and codes to must be https (http only on loopback,
/// for tests and local providers), whatever the metadata says.
fn check_endpoints(metadata: &CoreProviderMetadata) -> Result<(), FederationError> {
    let mut urls = vec![metadata.authorization_endpoint().url(), metadata.jwks_uri().url()];
    urls.extend(metadata.token_endpoint().map(|t| t.url()));
    match urls.into_iter().find(|url| !secure(url)) {
        Some(url) => Err(unavailable(format!("its metadata names an endpoint that is not https: {url}"))),
        None => Ok(()),
    }
}

fn secure(url: &url::Url) -> bool {
    let loopback = matches!(url.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"));
    url.scheme() == "https" || url.scheme() == "http" && loopback
}

fn unavailable(reason: String) -> FederationError {
    FederationError::Unavailable(reason)
}

/// An error and its sources on one line (openidconnect's top-level messages are terse).
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_and_loopback_http_endpoints_are_secure() {
        assert!(secure(&"https://idp.example.com/token".parse().expect("url")));
        assert!(secure(&"http://127.0.0.1:8080/token".parse().expect("url")));
    }

    #[test]
    fn a_plain_http_endpoint_elsewhere_is_not() {
        assert!(!secure(&"http://idp.example.com/token".parse().expect("url")));
    }
}
