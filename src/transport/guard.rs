//! DNS-rebinding protection: `Host` and `Origin` are checked against explicit allow-lists
//! before anything else runs (O-01, O-02, O-05). Every rejection is logged with the value
//! and the setting to change, so a deployment behind a proxy never fails silently.

use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{Response, StatusCode, header};
use futures_util::future::{Either, Ready, ready};
use tokio_util::sync::CancellationToken;
use tower::{Layer, Service};

use super::headers;

/// Compiled allow-lists.
#[derive(Clone, Debug)]
pub struct HostGuard {
    hosts: Arc<[String]>,
    origins: Arc<[String]>,
    any_host: bool,
    any_origin: bool,
}

impl HostGuard {
    pub fn new(hosts: &[String], origins: &[String]) -> Self {
        let norm = |v: &[String]| v.iter().map(|s| s.trim().trim_end_matches('/').to_ascii_lowercase()).collect::<Arc<[String]>>();
        Self {
            any_host: hosts.iter().any(|h| h == "*"),
            any_origin: origins.iter().any(|o| o == "*"),
            hosts: norm(hosts),
            origins: norm(origins),
        }
    }

    /// `host` or `host:port`; an entry without a port allows any port.
    pub fn host_allowed(&self, host: &str) -> bool {
        self.any_host || self.hosts.iter().any(|allowed| matches_authority(allowed, &host.to_ascii_lowercase()))
    }

    /// `scheme://host[:port]`; an entry without a port allows any port.
    pub fn origin_allowed(&self, origin: &str) -> bool {
        if self.any_origin {
            return true;
        }
        let origin = origin.to_ascii_lowercase();
        let Some((scheme, authority)) = origin.split_once("://") else { return false };
        self.origins.iter().any(|allowed| allowed.split_once("://").is_some_and(|(s, a)| s == scheme && matches_authority(a, authority)))
    }
}

/// Splits `host[:port]`, keeping IPv6 brackets.
fn split_port(authority: &str) -> (&str, Option<&str>) {
    if authority.starts_with('[') {
        return match authority.find(']') {
            Some(end) => (&authority[..=end], authority[end + 1..].strip_prefix(':')),
            None => (authority, None),
        };
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    }
}

fn matches_authority(allowed: &str, actual: &str) -> bool {
    let (a_host, a_port) = split_port(allowed);
    let (host, port) = split_port(actual);
    a_host == host && (a_port.is_none() || a_port == port)
}

/// The middleware: 403 with a JSON-RPC error body on any disallowed Host or Origin.
pub fn refusal(guard: &HostGuard, request: &Request) -> Option<Response<Body>> {
    let headers = request.headers();
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).or_else(|| request.uri().authority().map(|a| a.as_str()));
    match host {
        Some(host) if guard.host_allowed(host) => {}
        other => {
            tracing::warn!(host = other.unwrap_or("<missing>"), path = %request.uri().path(), "rejected request: Host not in server.allowed_hosts (set TOOLGATE__SERVER__ALLOWED_HOSTS to the public host name)");
            return Some(headers::transport_error(StatusCode::FORBIDDEN, "Forbidden: Host header not allowed"));
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        if !guard.origin_allowed(origin) {
            tracing::warn!(origin, path = %request.uri().path(), "rejected request: Origin not in server.allowed_origins (set TOOLGATE__SERVER__ALLOWED_ORIGINS)");
            return Some(headers::transport_error(StatusCode::FORBIDDEN, "Forbidden: Origin not allowed"));
        }
    }
    None
}

/// The front door of `/mcp`: the refusal after a shutdown's drain delay, then the Host/Origin
/// allow-lists. Both checks are synchronous, so this is a plain tower service: unlike
/// `axum::middleware::from_fn`, it boxes and clones nothing per request (the two `from_fn`
/// layers it replaces cloned the whole inner stack, CORS included, on every request).
#[derive(Clone, Debug)]
pub struct GateLayer {
    guard: HostGuard,
    closing: CancellationToken,
}

impl GateLayer {
    pub fn new(guard: HostGuard, closing: CancellationToken) -> Self {
        Self { guard, closing }
    }
}

impl<S> Layer<S> for GateLayer {
    type Service = Gate<S>;

    fn layer(&self, inner: S) -> Gate<S> {
        Gate { inner, guard: self.guard.clone(), closing: self.closing.clone() }
    }
}

/// See [`GateLayer`].
#[derive(Clone, Debug)]
pub struct Gate<S> {
    inner: S,
    guard: HostGuard,
    closing: CancellationToken,
}

impl<S> Service<Request> for Gate<S>
where
    S: Service<Request, Response = Response<Body>>,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = Either<Ready<Result<Response<Body>, S::Error>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        match crate::shutdown::closing_refusal(&self.closing, &request).or_else(|| refusal(&self.guard, &request)) {
            Some(response) => Either::Left(ready(Ok(response))),
            None => Either::Right(self.inner.call(request)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard() -> HostGuard {
        HostGuard::new(
            &["localhost".into(), "127.0.0.1".into(), "[::1]".into(), "mcp.example.com:443".into()],
            &["http://localhost".into(), "https://app.example.com".into()],
        )
    }

    #[test]
    fn hosts_match_with_and_without_ports() {
        let g = guard();
        assert!(g.host_allowed("localhost:8080"));
        assert!(g.host_allowed("LOCALHOST"));
        assert!(g.host_allowed("[::1]:9000"));
        assert!(g.host_allowed("mcp.example.com:443"));
        assert!(!g.host_allowed("mcp.example.com:8443"));
        assert!(!g.host_allowed("evil.example.com"));
        assert!(!g.host_allowed("localhost.evil.com"));
    }

    #[test]
    fn origins_match_scheme_and_host() {
        let g = guard();
        assert!(g.origin_allowed("http://localhost:3000"));
        assert!(!g.origin_allowed("https://localhost:3000"));
        assert!(g.origin_allowed("https://app.example.com"));
        assert!(!g.origin_allowed("http://evil.example.com"));
        assert!(!g.origin_allowed("null"));
    }
}
