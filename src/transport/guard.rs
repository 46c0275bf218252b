//! DNS-rebinding protection: `Host` and `Origin` are checked against explicit allow-lists
//! before anything else runs (O-01, O-02, O-05). Every rejection is logged with the value
//! and the setting to change, so a deployment behind a proxy never fails silently.

use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, Response, StatusCode, Version, header};
use futures_util::future::{Either, Ready, ready};
use tokio_util::sync::CancellationToken;
use tower::{Layer, Service};

use super::headers;

/// Compiled allow-lists.
#[derive(Clone, Debug)]
pub struct HostGuard {
    hosts: Arc<[Authority]>,
    origins: Arc<[(String, Authority)]>,
    any_host: bool,
    any_origin: bool,
}

/// A host with an optional port, parsed by the URI grammar (never by splitting on `:`).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Authority {
    /// Lower case; IPv6 literals keep their brackets.
    host: String,
    port: Option<u16>,
}

impl Authority {
    /// `host[:port]` as RFC 9110 §7.2 allows it in `Host`: no userinfo, a numeric port.
    fn parse(text: &str) -> Option<Self> {
        if text.is_empty() || text.contains('@') || text.ends_with(':') {
            return None;
        }
        // After an IPv6 literal's ']' comes nothing or ':port'; the port is digits only.
        let port = match text.rfind(']') {
            Some(end) if end + 1 < text.len() => Some(text[end + 1..].strip_prefix(':')?),
            Some(_) => None,
            None => text.rsplit_once(':').map(|(_, port)| port),
        };
        if port.is_some_and(|p| !p.bytes().all(|b| b.is_ascii_digit())) {
            return None;
        }
        let authority: axum::http::uri::Authority = text.parse().ok()?;
        let port = match authority.port() {
            Some(port) => Some(port.as_str().parse::<u16>().ok()?),
            None => None,
        };
        Some(Self { host: authority.host().to_ascii_lowercase(), port })
    }

    /// Whether `self` (an allow-list entry) admits `actual`: the same host, and the same port
    /// unless the entry names none.
    fn admits(&self, actual: &Self) -> bool {
        self.host == actual.host && (self.port.is_none() || self.port == actual.port)
    }
}

/// `scheme://host[:port]` as the `Origin` header carries it (RFC 6454 §7): nothing else, no
/// userinfo, no path; a default port counts as that port.
fn parse_origin(text: &str) -> Option<(String, Authority)> {
    let url = url::Url::parse(text).ok()?;
    let bare = url.username().is_empty()
        && url.password().is_none()
        && url.path() == "/"
        && url.query().is_none()
        && url.fragment().is_none()
        && !text.trim_end_matches('/').ends_with(':');
    if !bare || !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    let host = match url.host()? {
        url::Host::Ipv6(ip) => format!("[{ip}]"),
        other => other.to_string().to_ascii_lowercase(),
    };
    Some((url.scheme().to_owned(), Authority { host, port: url.port() }))
}

impl HostGuard {
    /// Entries that do not parse are left out (and refused by [`HostGuard::check`] at start-up).
    pub fn new(hosts: &[String], origins: &[String]) -> Self {
        Self {
            any_host: hosts.iter().any(|h| h == "*"),
            any_origin: origins.iter().any(|o| o == "*"),
            hosts: hosts.iter().filter_map(|h| Authority::parse(h.trim())).collect(),
            origins: origins.iter().filter_map(|o| parse_origin(o.trim())).collect(),
        }
    }

    /// The first entry of either list that is not `*` and does not parse, with why.
    pub fn check(hosts: &[String], origins: &[String]) -> Result<(), String> {
        if let Some(bad) = hosts.iter().find(|h| *h != "*" && Authority::parse(h.trim()).is_none()) {
            return Err(format!(
                "server.allowed_hosts entry {bad:?} is not host or host:port (e.g. \"mcp.example.com\" or \"localhost:8080\")"
            ));
        }
        if let Some(bad) = origins.iter().find(|o| *o != "*" && parse_origin(o.trim()).is_none()) {
            return Err(format!("server.allowed_origins entry {bad:?} is not scheme://host[:port] (e.g. \"https://app.example.com\")"));
        }
        Ok(())
    }

    /// `host` or `host:port`; an entry without a port allows any port.
    pub fn host_allowed(&self, host: &str) -> bool {
        if self.any_host || self.plainly_allowed(host) {
            return true;
        }
        Authority::parse(host).is_some_and(|actual| self.hosts.iter().any(|allowed| allowed.admits(&actual)))
    }

    /// The common case without parsing or allocating: `name` or `name:digits`, where `name` is
    /// an allowed entry's host (already validated) in any letter case. Anything else (IPv6
    /// literals, odd spellings) goes through the full parse, which decides alone.
    fn plainly_allowed(&self, text: &str) -> bool {
        if text.starts_with('[') {
            return false;
        }
        let (name, port) = match text.split_once(':') {
            // Digits only: `u16::from_str` would also take a leading `+`.
            Some((name, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => match port.parse::<u16>() {
                Ok(port) => (name, Some(port)),
                Err(_) => return false,
            },
            Some(_) => return false,
            None => (text, None),
        };
        self.hosts.iter().any(|allowed| allowed.host.eq_ignore_ascii_case(name) && (allowed.port.is_none() || allowed.port == port))
    }

    /// `scheme://host[:port]`; an entry without a port allows any port.
    pub fn origin_allowed(&self, origin: &str) -> bool {
        if self.any_origin {
            return true;
        }
        let Some((scheme, actual)) = parse_origin(origin) else { return false };
        self.origins.iter().any(|(s, allowed)| *s == scheme && allowed.admits(&actual))
    }
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

/// After the drain delay: a request that still arrives on an open connection is refused with
/// 503, `Retry-After` and (HTTP/1) `Connection: close`, so the client reconnects and lands on
/// another replica.
pub fn closing_refusal(closing: &CancellationToken, request: &Request) -> Option<Response<Body>> {
    if !closing.is_cancelled() {
        return None;
    }
    let mut res = crate::transport::headers::transport_error(
        StatusCode::SERVICE_UNAVAILABLE,
        "Service Unavailable: the server is shutting down; retry the request",
    );
    res.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    if request.version() < Version::HTTP_2 {
        res.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    Some(res)
}

/// 413 at once when `Content-Length` announces more than the body limit: waiting for a body
/// that will be refused anyway only holds the connection.
fn too_large(request: &Request, limit: usize) -> Option<Response<Body>> {
    let length = request.headers().get(header::CONTENT_LENGTH)?.to_str().ok()?.parse::<u64>().ok()?;
    (length > limit as u64).then(|| {
        let mut res = headers::transport_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("Payload Too Large: the body exceeds {limit} bytes (server.max_body_bytes)"),
        );
        // The unread body is not worth draining.
        res.headers_mut().insert(header::CONNECTION, axum::http::HeaderValue::from_static("close"));
        res
    })
}

/// The front door of `/mcp`: the refusal after a shutdown's drain delay, then the Host/Origin
/// allow-lists, then a body announced too large. Both checks are synchronous, so this is a plain tower service: unlike
/// `axum::middleware::from_fn`, it boxes and clones nothing per request (the two `from_fn`
/// layers it replaces cloned the whole inner stack, CORS included, on every request).
#[derive(Clone, Debug)]
pub struct GateLayer {
    guard: HostGuard,
    closing: CancellationToken,
    max_body_bytes: usize,
}

impl GateLayer {
    pub fn new(guard: HostGuard, closing: CancellationToken, max_body_bytes: usize) -> Self {
        Self { guard, closing, max_body_bytes }
    }
}

impl<S> Layer<S> for GateLayer {
    type Service = Gate<S>;

    fn layer(&self, inner: S) -> Gate<S> {
        Gate { inner, guard: self.guard.clone(), closing: self.closing.clone(), max_body_bytes: self.max_body_bytes }
    }
}

/// See [`GateLayer`].
#[derive(Clone, Debug)]
pub struct Gate<S> {
    inner: S,
    guard: HostGuard,
    closing: CancellationToken,
    max_body_bytes: usize,
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
        let refused = closing_refusal(&self.closing, &request)
            .or_else(|| refusal(&self.guard, &request))
            .or_else(|| too_large(&request, self.max_body_bytes));
        match refused {
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
    fn a_host_with_userinfo_is_refused() {
        assert!(!guard().host_allowed("localhost:80@evil"));
        assert!(!guard().host_allowed("localhost@evil.example"));
    }

    #[test]
    fn a_host_with_a_port_that_is_not_a_number_is_refused() {
        assert!(!guard().host_allowed("localhost:8o"));
        assert!(!guard().host_allowed("localhost:80:80"));
        assert!(!guard().host_allowed("localhost:"));
    }

    #[test]
    fn the_quick_path_never_admits_what_the_full_parse_refuses() {
        let g = guard();
        let tricky = [
            "localhost",
            "LocalHost:1",
            "localhost:+80",
            "localhost:-1",
            "localhost:65536",
            "localhost:0080",
            "localhost: 80",
            "localhost:80:80",
            "localhost:",
            ":80",
            "",
            "localhost\t",
            "local host",
            "localhost%00",
            "127.0.0.1:1",
            "127.0.0.1.evil",
            "mcp.example.com:443",
            "mcp.example.com:0443",
            "mcp.example.com",
            "[::1]",
            "[::1]:1",
        ];
        for host in tricky {
            let full = Authority::parse(host).is_some_and(|actual| g.hosts.iter().any(|allowed| allowed.admits(&actual)));
            assert!(!g.plainly_allowed(host) || full, "{host:?} admitted by the quick path only");
        }
    }

    #[test]
    fn nothing_but_a_port_may_follow_an_ipv6_literal() {
        assert!(!guard().host_allowed("[::1]evil.com"));
        assert!(guard().host_allowed("[::1]:8080"));
    }

    #[test]
    fn an_origin_with_userinfo_is_refused() {
        assert!(!guard().origin_allowed("http://localhost:1@evil.example"));
        assert!(!guard().origin_allowed("http://user@localhost"));
    }

    #[test]
    fn an_origin_with_a_path_or_query_is_refused() {
        assert!(!guard().origin_allowed("http://localhost/x"));
        assert!(!guard().origin_allowed("http://localhost?x"));
    }

    #[test]
    fn an_origin_port_is_checked_when_the_entry_names_one() {
        let g = HostGuard::new(&["*".into()], &["https://app.example.com:8443".into()]);
        assert!(g.origin_allowed("https://app.example.com:8443"));
        assert!(!g.origin_allowed("https://app.example.com"));
        assert!(!g.origin_allowed("https://app.example.com:9443"));
    }

    #[test]
    fn entries_that_do_not_parse_are_named_at_start_up() {
        assert!(HostGuard::check(&["localhost".into(), "*".into()], &["http://localhost".into()]).is_ok());
        assert!(HostGuard::check(&["a b".into()], &[]).is_err_and(|e| e.contains("\"a b\"")));
        assert!(HostGuard::check(&[], &["localhost".into()]).is_err_and(|e| e.contains("allowed_origins")));
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
