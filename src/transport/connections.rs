//! The listeners' connection handling: our own accept loop over hyper-util's HTTP/1 + HTTP/2
//! server, because `axum::serve` exposes none of what keeps one client from exhausting the
//! process:
//!
//! - **Header read timeout** (hyper's): a connection that does not complete its request head in
//!   time, including the wait for the next request on a kept-alive connection, is closed.
//! - **A connection cap below the open-file limit**, so `accept` never fails for lack of file
//!   descriptors while the database, the audit spool and the admin listener still need some.
//!   At the cap, the connection that has been *idle* longest (no request in progress, or a
//!   request whose body is still trickling in) is closed to make room: a flood of slow or idle
//!   connections cannot lock out a client that sends its request at once, nor a health probe.
//!   When every connection is busy, accepting waits for one to close (the kernel's backlog
//!   holds the rest). Long-lived streams are busy, not idle: they are bounded per client by
//!   the stream caps instead ([`crate::limits::Caps`]).
//! - **Accept-error back-off**: a failing `accept` (e.g. `EMFILE`) frees an idle connection
//!   and retries after 10 ms, doubling to 1 s, instead of spinning or stopping.
//! - **TLS** ([`super::tls`]), when the listener terminates it: the handshake runs in the
//!   connection's task under the header read timeout, and the version is ALPN's choice instead
//!   of a peek at the first bytes. Everything above holds for TLS connections alike.
//!
//! The request body's total read time is bounded where bodies are read
//! (`server.body_read_timeout_ms`), and a `Content-Length` above the body limit is refused
//! before the body is read, at the front door ([`super::guard`]).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use bytes::Bytes;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use parking_lot::Mutex;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tower::Service;

use super::tls::Tls;

/// How one listener treats its connections.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// Most connections open at once; at the cap the longest-idle one makes room.
    pub max_connections: usize,
    /// Longest wait for a complete request head, and for the next request on a kept-alive
    /// connection.
    pub header_read_timeout: Duration,
}

/// Serves `app` on `listener` (over TLS when `tls` is given) until `stop` completes, then
/// closes idle connections, lets requests in flight finish, and returns once every connection
/// is closed.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    tls: Option<Tls>,
    stop: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    let table = Arc::new(Table::default());
    let graceful = GracefulShutdown::new();
    let mut stop = std::pin::pin!(stop);
    let mut backoff = Duration::ZERO;
    loop {
        // At the cap: make room by closing the longest-idle connection, or wait for one to close.
        while table.open() >= limits.max_connections.max(1) && !table.evict_idlest() {
            tokio::select! {
                () = table.closed.notified() => {}
                () = &mut stop => return drain(graceful).await,
            }
        }
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut stop => return drain(graceful).await,
        };
        let (tcp, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                // Out of file descriptors (or another resource): free one and back off.
                backoff = (backoff * 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
                crate::metrics::record::accept_error();
                tracing::warn!(error = %e, retry_ms = backoff.as_millis() as u64, "accept failed; closing an idle connection and retrying");
                table.evict_idlest();
                tokio::time::sleep(backoff).await;
                continue;
            }
        };
        backoff = Duration::ZERO;
        // Small JSON-RPC answers must not wait for Nagle's algorithm (measured: p99 3.6 ms
        // instead of ~0.1 ms at one connection without this).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        let conn = table.insert();
        let service = Tracked { inner: app.clone(), conn: conn.clone(), peer };
        let mut builder = Builder::new(TokioExecutor::new());
        builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout);
        builder.http2().timer(TokioTimer::new());
        let table = table.clone();
        let (watcher, timeout, tls) = (graceful.watcher(), limits.header_read_timeout, tls.clone());
        tokio::spawn(async move {
            let one = Connection { builder, service, watcher, timeout };
            tokio::select! {
                () = one.serve(tcp, tls) => {},
                () = conn.evict.cancelled() => {
                    crate::metrics::record::connection_evicted();
                    tracing::debug!(%peer, "closed an idle connection to make room for a new one");
                }
            }
            table.remove(conn.id);
        });
    }
}

/// One accepted connection and what serves it.
struct Connection {
    builder: Builder<TokioExecutor>,
    service: Tracked,
    watcher: hyper_util::server::graceful::Watcher,
    /// The header read timeout, which also bounds the wait for first bytes and the handshake.
    timeout: Duration,
}

impl Connection {
    /// From its first byte (or the TLS handshake) to its end.
    async fn serve(self, tcp: tokio::net::TcpStream, tls: Option<Tls>) {
        let Some(tls) = tls else {
            // hyper's header timeout starts once it knows the protocol (HTTP/1 or HTTP/2), which
            // takes first bytes: a connection that does not send them in time is closed here.
            let Ok(Some(version)) = tokio::time::timeout(self.timeout, sniff(&tcp)).await else { return };
            return self.serve_io(tcp, version).await;
        };
        let Ok(stream) = tls.accept(tcp, self.timeout).await else { return };
        // Without ALPN a client speaks HTTP/1.1 (RFC 9113 §3.2: h2 over TLS is negotiated).
        let version = if stream.get_ref().1.alpn_protocol() == Some(b"h2") { Version::Http2 } else { Version::Http1 };
        self.serve_io(stream, version).await;
    }

    async fn serve_io<I>(self, io: I, version: Version)
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let builder = match version {
            Version::Http1 => self.builder.http1_only(),
            Version::Http2 => self.builder.http2_only(),
        };
        let conn = builder.serve_connection(TokioIo::new(io), hyper_util::service::TowerToHyperService::new(self.service));
        if let Err(e) = self.watcher.watch(conn.into_owned()).await {
            tracing::trace!(error = %e, "connection ended with an error");
        }
    }
}

/// What a connection's first bytes say it speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Version {
    Http1,
    /// HTTP/2 with prior knowledge (h2c): the connection preface.
    Http2,
}

/// HTTP/2's connection preface (RFC 9113 §3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Tells HTTP/1 from HTTP/2 by peeking at the first bytes, consuming none; `None` when the
/// connection closes or fails first. hyper-util's own detection reads the 24 bytes and hands
/// them back to hyper, whose read buffer then doubles to 16 KiB on the next read and keeps
/// that size for the connection's life (measured on idle SSE streams: BENCHMARKS.md); with
/// nothing consumed, hyper's first read fills its 8 KiB buffer directly.
async fn sniff(tcp: &tokio::net::TcpStream) -> Option<Version> {
    let mut buf = [0u8; H2_PREFACE.len()];
    let mut seen = 0;
    loop {
        let n = tcp.peek(&mut buf).await.ok().filter(|n| *n > 0)?;
        if let Some(version) = classify(&buf[..n]) {
            return Some(version);
        }
        if n == seen {
            // Nothing new since the last look: `peek` (and readiness) return at once while the
            // bytes seen are still there, so only a short sleep waits for more.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        seen = n;
    }
}

/// The version `first` bytes decide, or `None` while they are a strict prefix of the preface.
fn classify(first: &[u8]) -> Option<Version> {
    if !H2_PREFACE.starts_with(first) {
        return Some(Version::Http1);
    }
    (first.len() == H2_PREFACE.len()).then_some(Version::Http2)
}

/// After `stop`: idle connections close now, busy ones when their response is done.
async fn drain(graceful: GracefulShutdown) -> std::io::Result<()> {
    graceful.shutdown().await;
    Ok(())
}

/// Errors of one connection that `accept` reports but that say nothing about the listener.
fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    matches!(e.kind(), ConnectionRefused | ConnectionAborted | ConnectionReset)
}

/// The open connections, for the cap and for eviction.
#[derive(Default)]
struct Table {
    next: AtomicU64,
    open: Mutex<HashMap<u64, Arc<Conn>>>,
    /// Signalled whenever a connection closes (the accept loop may be waiting for room).
    closed: Notify,
}

impl Table {
    fn open(&self) -> usize {
        self.open.lock().len()
    }

    fn insert(&self) -> Arc<Conn> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn { id, busy: AtomicUsize::new(0), idle_since: AtomicU64::new(tick()), evict: CancellationToken::new() });
        let open = {
            let mut open = self.open.lock();
            open.insert(id, conn.clone());
            open.len()
        };
        crate::metrics::record::connections_open(open);
        conn
    }

    fn remove(&self, id: u64) {
        let open = {
            let mut open = self.open.lock();
            open.remove(&id);
            open.len()
        };
        crate::metrics::record::connections_open(open);
        self.closed.notify_one();
    }

    /// Closes the connection idle the longest; `false` when none is idle.
    fn evict_idlest(&self) -> bool {
        let open = self.open.lock();
        let idlest = open
            .values()
            .filter(|c| c.busy.load(Ordering::Acquire) == 0 && !c.evict.is_cancelled())
            .min_by_key(|c| (c.idle_since.load(Ordering::Relaxed), c.id));
        match idlest {
            Some(conn) => {
                conn.evict.cancel();
                true
            }
            None => false,
        }
    }
}

/// One connection: how many of its requests are being served, and since when it is idle.
struct Conn {
    id: u64,
    /// Requests past their body whose response has not finished (SSE streams included).
    busy: AtomicUsize,
    /// When it last became idle, as a [`tick`]: only the order matters.
    idle_since: AtomicU64,
    evict: CancellationToken,
}

impl Conn {
    fn begin(&self) {
        self.busy.fetch_add(1, Ordering::AcqRel);
    }

    fn end(&self) {
        if self.busy.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.idle_since.store(tick(), Ordering::Relaxed);
        }
    }
}

/// A process-wide sequence number: a later call returns a larger one. Eviction only needs to
/// know which connection became idle first, and a counter says so without reading the clock
/// on every request (a `clock_gettime` per request showed in the profile).
fn tick() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The router, with the peer address every handler may ask for (`ConnectInfo`), and a
/// connection that counts as busy from the end of a request's body to the end of its response.
#[derive(Clone)]
struct Tracked {
    inner: Router,
    conn: Arc<Conn>,
    peer: SocketAddr,
}

impl Service<http::Request<Incoming>> for Tracked {
    // Not re-boxed into an axum `Body`: hyper takes any body, and a box per response shows
    // on the request path.
    type Response = http::Response<WithGuard>;
    type Error = Infallible;
    type Future = TrackedFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Service::<http::Request<Body>>::poll_ready(&mut self.inner, cx)
    }

    fn call(&mut self, request: http::Request<Incoming>) -> Self::Future {
        let (mut parts, body) = request.into_parts();
        parts.extensions.insert(ConnectInfo(self.peer));
        // A request still sending its body stays evictable: a trickled body is how a slow
        // client would otherwise pin a connection.
        let body = BusyFromEnd::new(body, self.conn.clone());
        let guard = body.guard();
        TrackedFuture { inner: self.inner.call(http::Request::from_parts(parts, Body::new(body))), guard }
    }
}

pin_project_lite::pin_project! {
    /// The router's response future; its response body keeps the connection busy until dropped
    /// (a stream's end). No box per request: the router's own future, wrapped.
    struct TrackedFuture {
        #[pin]
        inner: axum::routing::future::RouteFuture<Infallible>,
        guard: Arc<Busy>,
    }
}

impl std::future::Future for TrackedFuture {
    type Output = Result<http::Response<WithGuard>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let response = std::task::ready!(this.inner.poll(cx));
        let guard = this.guard.clone();
        Poll::Ready(response.map(|r| r.map(|b| WithGuard { inner: b, _guard: guard })))
    }
}

/// Marks its connection busy once the request body has been read to its end, until dropped.
struct Busy {
    conn: Arc<Conn>,
    begun: std::sync::atomic::AtomicBool,
}

impl Busy {
    fn begin(&self) {
        if !self.begun.swap(true, Ordering::AcqRel) {
            self.conn.begin();
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        if *self.begun.get_mut() {
            self.conn.end();
        }
    }
}

pin_project_lite::pin_project! {
    /// The request body; marks the connection busy when it ends.
    struct BusyFromEnd {
        #[pin]
        inner: Incoming,
        busy: Arc<Busy>,
    }
}

impl BusyFromEnd {
    fn new(inner: Incoming, conn: Arc<Conn>) -> Self {
        let busy = Arc::new(Busy { conn, begun: std::sync::atomic::AtomicBool::new(false) });
        if hyper::body::Body::is_end_stream(&inner) {
            busy.begin();
        }
        Self { inner, busy }
    }

    fn guard(&self) -> Arc<Busy> {
        self.busy.clone()
    }
}

impl hyper::body::Body for BusyFromEnd {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.project();
        let polled = this.inner.poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) {
            this.busy.begin();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

pin_project_lite::pin_project! {
    /// The response body, holding the request's [`Busy`] until it is dropped. A handler that
    /// answers without reading the body marks the connection busy here, for the response.
    struct WithGuard {
        #[pin]
        inner: Body,
        _guard: Arc<Busy>,
    }
}

impl hyper::body::Body for WithGuard {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.project();
        this._guard.begin();
        this.inner.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The public listener's connection limits, the cap resolved against the open-file limit.
pub fn limits(settings: &crate::config::Settings) -> ConnectionLimits {
    let max_connections = match settings.server.max_connections {
        0 => auto_max_connections(file_limit()),
        n => n,
    };
    ConnectionLimits { max_connections, header_read_timeout: Duration::from_millis(settings.server.header_read_timeout_ms) }
}

/// Raises the process's open-file limit to its hard maximum: the default soft limit of 1,024
/// on many systems is far below what a server holding streams needs. Returns the limit now
/// in force.
pub fn raise_file_limit() -> Option<u64> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if let (Some(current), Some(maximum)) = (limit.current, limit.maximum)
        && current < maximum
        && let Err(e) = setrlimit(Resource::Nofile, Rlimit { current: Some(maximum), maximum: Some(maximum) })
    {
        tracing::debug!(error = %e, current, maximum, "cannot raise the open-file limit");
    }
    file_limit()
}

/// The open-file limit in force (`None`: unlimited or unknown).
pub fn file_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

/// The connection cap when `server.max_connections` is 0: the open-file limit less what the
/// rest of the process needs (database pools, the audit spool, the admin listener, tool
/// processes): a tenth of the limit, and at least 64.
pub fn auto_max_connections(file_limit: Option<u64>) -> usize {
    let Some(limit) = file_limit else { return 10_000 };
    let reserve = (limit / 10).max(64);
    usize::try_from(limit.saturating_sub(reserve)).unwrap_or(usize::MAX).max(16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http1_request_is_told_apart_at_its_first_byte_that_differs_from_the_preface() {
        assert_eq!(classify(b"POST /mcp HTTP/1.1\r\n"), Some(Version::Http1));
        assert_eq!(classify(b"G"), Some(Version::Http1));
        assert_eq!(classify(b"PUT"), Some(Version::Http1));
    }

    #[test]
    fn the_http2_preface_is_told_only_once_complete() {
        assert_eq!(classify(b"P"), None);
        assert_eq!(classify(&H2_PREFACE[..23]), None);
        assert_eq!(classify(H2_PREFACE), Some(Version::Http2));
    }
}
