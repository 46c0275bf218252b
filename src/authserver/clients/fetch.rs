//! Fetching Client ID Metadata Documents (CLR-11, CLR-14): any client can make toolgate fetch
//! a URL of its choosing, so the fetch is the narrowest one that works.
//!
//! * Addresses go through the SSRF guard of `http` tools: literal hosts are checked before
//!   sending, names by the resolver the client connects with (so a rebinding answer cannot
//!   slip in between), and `metadata_documents.private_hosts` are the only exemptions.
//! * GET, no redirects (a 3xx is a failure, so a hop to a private address cannot happen),
//!   only `200` counts; no proxy, no cookies, no credentials, nothing from the user's request.
//! * The body is counted as it streams and dropped past `max_bytes`; compressed encodings are
//!   refused (the client never asks for or decodes them), so no bomb expands in memory.
//! * One deadline, `timeout_ms`, covers connecting, headers and the whole body.
//! * Valid documents are cached for their `Cache-Control: max-age`, clamped to the
//!   settings' bounds; failures never are, so the next attempt fetches again. Concurrent
//!   requests for one document share one fetch.

use std::sync::Arc;
use std::time::Duration;

use moka::Expiry;
use reqwest::header::{ACCEPT, ACCEPT_ENCODING, CACHE_CONTROL, CONTENT_ENCODING};
use url::Url;

use super::{Client, metadata_document};
use crate::config::authserver::MetadataDocumentSettings;
use crate::tooldef::http::{AddressPolicy, GuardedResolver, Refusal, Unresolvable, find_cause};
use crate::untrusted::text::escaped;

/// Documents kept at once; the least recently used goes first.
const CACHE_CAPACITY: u64 = 10_000;
/// Connecting may take at most this much of the deadline.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Clone)]
struct Cached {
    client: Arc<Client>,
    ttl: Duration,
}

struct ByMaxAge;

impl Expiry<String, Cached> for ByMaxAge {
    fn expire_after_create(&self, _key: &String, value: &Cached, _now: std::time::Instant) -> Option<Duration> {
        Some(value.ttl)
    }
}

/// The fetcher and its cache.
pub(super) struct Documents {
    http: reqwest::Client,
    policy: AddressPolicy,
    cache: moka::future::Cache<String, Cached>,
    max_bytes: usize,
    timeout: Duration,
    cache_bounds: (u64, u64),
}

impl Documents {
    pub fn new(settings: &MetadataDocumentSettings) -> Result<Self, String> {
        let policy = AddressPolicy::new(&settings.private_hosts, &Default::default());
        let timeout = Duration::from_millis(settings.timeout_ms);
        let mut builder = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(Arc::new(GuardedResolver::new(policy.clone())))
            .https_only(true)
            .referer(false)
            .timeout(timeout)
            .connect_timeout(CONNECT_TIMEOUT.min(timeout))
            .user_agent(concat!("toolgate/", env!("CARGO_PKG_VERSION"), " (client metadata fetch)"));
        if let Some(path) = &settings.ca_file {
            let pem = std::fs::read(path)
                .map_err(|e| format!("authorization_server.metadata_documents.ca_file: cannot read {}: {e}", path.display()))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
                format!("authorization_server.metadata_documents.ca_file: {} holds no PEM certificates: {e}", path.display())
            })?;
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        let http = builder.build().map_err(|e| format!("authorization_server.metadata_documents: cannot make the HTTP client: {e}"))?;
        let cache = moka::future::Cache::builder().max_capacity(CACHE_CAPACITY).expire_after(ByMaxAge).build();
        let cache_bounds = (settings.min_cache_secs, settings.max_cache_secs);
        Ok(Self { http, policy, cache, max_bytes: settings.max_bytes, timeout, cache_bounds })
    }

    /// The client a document URL describes, from the cache or fetched now.
    pub async fn get(&self, url: Url, redirect_schemes: &[String]) -> Result<Arc<Client>, String> {
        let key = url.as_str().to_owned();
        let found = self.cache.try_get_with(key, self.load(url, redirect_schemes)).await;
        found.map(|cached| cached.client).map_err(|reason| reason.as_ref().clone())
    }

    async fn load(&self, url: Url, redirect_schemes: &[String]) -> Result<Cached, String> {
        let outcome = match tokio::time::timeout(self.timeout, self.fetch(&url)).await {
            Ok(fetched) => fetched,
            Err(_) => Err(format!("fetching it took longer than {} ms", self.timeout.as_millis())),
        };
        let parsed = outcome.and_then(|(body, max_age)| Ok((metadata_document::parse(url.as_str(), &body, redirect_schemes)?, max_age)));
        let client_id = escaped(url.as_str(), 300);
        match parsed {
            Ok((client, max_age)) => {
                tracing::info!(%client_id, "authorization server: fetched a client metadata document");
                let ttl = Duration::from_secs(max_age.unwrap_or(0).clamp(self.cache_bounds.0, self.cache_bounds.1));
                Ok(Cached { client: Arc::new(client), ttl })
            }
            Err(reason) => {
                tracing::warn!(%client_id, reason = %escaped(&reason, 500), "authorization server: refused a client metadata document");
                Err(reason)
            }
        }
    }

    /// The body of a `200` and its `max-age`.
    async fn fetch(&self, url: &Url) -> Result<(Vec<u8>, Option<u64>), String> {
        self.policy.check_url(url).map_err(|refusal| refused(&refusal))?;
        let request = self.http.get(url.clone()).header(ACCEPT, "application/json").header(ACCEPT_ENCODING, "identity");
        let mut response = request.send().await.map_err(|e| unreachable(&e))?;
        let status = response.status();
        if status.is_redirection() {
            return Err(format!("its URL answered {status}: redirects are not followed"));
        }
        if status != reqwest::StatusCode::OK {
            return Err(format!("its URL answered {status} instead of 200"));
        }
        let encoding = response.headers().get(CONTENT_ENCODING).map(|v| v.as_bytes().to_ascii_lowercase());
        if encoding.is_some_and(|e| e != b"identity") {
            return Err("it was sent compressed, which is not accepted".into());
        }
        if response.content_length().is_some_and(|n| n > self.max_bytes as u64) {
            return Err(self.too_large());
        }
        let max_age = response.headers().get(CACHE_CONTROL).and_then(|v| v.to_str().ok()).map(max_age);
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| unreachable(&e))? {
            if body.len() + chunk.len() > self.max_bytes {
                return Err(self.too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok((body, max_age))
    }

    fn too_large(&self) -> String {
        format!("it is larger than {} bytes", self.max_bytes)
    }
}

/// The `max-age` of a `Cache-Control` value: 0 for `no-store`/`no-cache` (then the lower
/// bound applies), the given seconds otherwise.
fn max_age(value: &str) -> u64 {
    let directives: Vec<String> = value.split(',').map(|d| d.trim().to_ascii_lowercase()).collect();
    if directives.iter().any(|d| d == "no-store" || d == "no-cache") {
        return 0;
    }
    directives.iter().find_map(|d| d.strip_prefix("max-age=")?.trim_matches('"').parse().ok()).unwrap_or(0)
}

/// What the error page says about a refused address: the host, never an address.
fn refused(refusal: &Refusal) -> String {
    match refusal {
        Refusal::Port { host, port } => format!("refused: metadata_documents.private_hosts lists {host} only with other ports than {port}"),
        other => other.to_string(),
    }
}

/// A transport failure, described without the transport's own text (which can carry
/// addresses and internals).
fn unreachable(error: &reqwest::Error) -> String {
    if let Some(refusal) = find_cause::<Refusal>(error) {
        return refused(refusal);
    }
    if let Some(unresolvable) = find_cause::<Unresolvable>(error) {
        return unresolvable.to_string();
    }
    tracing::debug!(error = %escaped(&format!("{error:?}"), 1000), "authorization server: a metadata document fetch failed");
    if error.is_timeout() {
        "fetching it timed out".into()
    } else if error.is_connect() {
        "its host could not be reached over https".into()
    } else {
        "fetching it failed".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_age_is_read_from_cache_control() {
        assert_eq!(max_age("public, max-age=3600"), 3600);
        assert_eq!(max_age("Max-Age=\"60\""), 60);
        assert_eq!(max_age("no-store, max-age=3600"), 0);
        assert_eq!(max_age("public"), 0);
    }
}
