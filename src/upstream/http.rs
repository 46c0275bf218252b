//! An upstream over Streamable HTTP: each message is a POST; an answer comes back as a JSON
//! body or on the POST's own event stream (with the progress and requests of that call); a GET
//! stream carries what the upstream says unprompted (`list_changed`). The address policy of
//! `http` tools applies to every connection and redirect; only an upstream marked
//! `allow_private` may be on a private address, and then only its own host and port.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use http::header::{ACCEPT, CONTENT_TYPE, WWW_AUTHENTICATE};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use parking_lot::Mutex;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use url::Url;

use super::error::UpstreamError;
use super::modern;
use super::peer::Peer;
use crate::config::upstreams::UpstreamSettings;
use crate::tooldef::http::{AddressPolicy, GuardedResolver, Refusal, find_cause, redirect_policy};

const SESSION: &str = "mcp-session-id";
const VERSION: &str = "mcp-protocol-version";
/// Redirects followed on one request.
const MAX_REDIRECTS: usize = 5;

#[derive(Clone)]
pub struct HttpWire(Arc<Inner>);

/// An HTTP client under an upstream's address policy, and its URL checked against it. One is
/// shared by every caller's own connection to a token-exchange upstream (a connection pool
/// and TLS set-up each otherwise); the token is per request, so pooled connections carry no
/// caller's identity.
pub(super) type HttpClient = (reqwest::Client, Url);

/// The `Authorization` an HTTP upstream gets.
#[derive(Clone, Debug)]
pub enum Bearer {
    /// None, or a static one among `headers`.
    None,
    /// A token minted for this connection alone (a caller's exchanged token, or a user's own
    /// from the vault), with the time it expires: never sent within
    /// [`SEND_BEFORE`](super::credentials::SEND_BEFORE) of that (the session's DELETE of a
    /// connection closed late would otherwise carry a dead token).
    Fixed(Arc<str>, std::time::Instant),
    /// toolgate's own, renewed as it expires (client credentials).
    Own(Arc<super::credentials::OAuth>),
}

struct Inner {
    client: reqwest::Client,
    bearer: Bearer,
    url: Url,
    /// The upstream's own credentials (`upstreams.<name>.headers`), never the caller's.
    headers: HeaderMap,
    session: Mutex<Option<HeaderValue>>,
    version: Mutex<Option<HeaderValue>>,
    /// Spoken in 2026-07-28: no session, `_meta` and `Mcp-*` headers on every request.
    modern: AtomicBool,
    max: usize,
    stop: CancellationToken,
}

impl HttpWire {
    /// A wire with `shared` as its client, or one of its own.
    pub fn new(settings: &UpstreamSettings, headers: HeaderMap, bearer: Bearer, shared: Option<HttpClient>) -> Result<Self, UpstreamError> {
        let credentialed = !headers.is_empty() || !matches!(bearer, Bearer::None);
        let (client, url) = match shared {
            Some(shared) => shared,
            None => client(settings, credentialed)?,
        };
        Ok(Self(Arc::new(Inner {
            client,
            bearer,
            url,
            headers,
            session: Mutex::new(None),
            version: Mutex::new(None),
            modern: AtomicBool::new(false),
            max: settings.max_message_bytes,
            stop: CancellationToken::new(),
        })))
    }

    /// After `initialize`: every later request names the negotiated version.
    pub(super) fn set_version(&self, version: &str) {
        *self.0.version.lock() = HeaderValue::from_str(version).ok();
    }

    /// Speaks 2026-07-28 from now on (`true`, before `server/discover`), or the handshake era
    /// (`false`, when the upstream did not take the probe: anything it said is forgotten).
    pub(super) fn set_modern(&self, modern: bool) {
        self.0.modern.store(modern, Ordering::Relaxed);
        *self.0.version.lock() = modern.then(|| HeaderValue::from_static(modern::VERSION));
        *self.0.session.lock() = None;
    }

    pub(super) fn is_modern(&self) -> bool {
        self.0.modern.load(Ordering::Relaxed)
    }

    async fn request(&self, method: reqwest::Method) -> Result<reqwest::RequestBuilder, UpstreamError> {
        let request = self.0.client.request(method, self.0.url.clone());
        let mut request = authorize(request, &self.0.headers, &self.0.bearer).await?;
        if let Some(session) = self.0.session.lock().clone() {
            request = request.header(SESSION, session);
        }
        if let Some(version) = self.0.version.lock().clone() {
            request = request.header(VERSION, version);
        }
        Ok(request)
    }

    /// POSTs one message. For a request (`related`), whatever the answer's body or stream
    /// carries is dispatched, and the request fails if no answer came. `extra` headers go with
    /// it in 2026-07-28 only (`Mcp-Param-*`).
    pub(super) async fn post(
        &self,
        peer: &Peer,
        message: Value,
        related: Option<i64>,
        extra: Vec<(HeaderName, HeaderValue)>,
    ) -> Result<(), UpstreamError> {
        let modern = self.is_modern();
        // 2026-07-28 defines nothing a client sends but requests: cancelling is closing the
        // request's stream, and the upstream asks no questions of its own.
        if modern && (message.get("id").is_none() || message.get("method").is_none()) {
            return Ok(());
        }
        let response = self.post_request(modern, message, extra).await?.send().await.map_err(|e| send_error(&e))?;
        if !modern && let Some(session) = response.headers().get(SESSION) {
            self.0.session.lock().get_or_insert_with(|| session.clone());
        }
        let status = response.status();
        if related.is_none() && status.is_success() {
            return Ok(());
        }
        if status == StatusCode::ACCEPTED {
            // 202 is for notifications and answers; a request it meets will never be answered.
            return Err(UpstreamError::Protocol("the upstream accepted a request (HTTP 202) without answering it".into()));
        }
        // A 2026-07-28 upstream answers some JSON-RPC errors with 400 or 404 and the error as
        // the body: that error is the answer.
        let rpc_error_body = modern && status.is_client_error() && !is_event_stream(response.headers()) && is_json(response.headers());
        if !status.is_success() && !rpc_error_body {
            return Err(status_error(&response, self.0.session.lock().is_some()));
        }
        if is_event_stream(response.headers()) {
            self.read_events(peer, response, related).await;
        } else {
            let body = read_limited(response, self.0.max).await?;
            peer.receive(&body, related)?;
        }
        if let Some(id) = related {
            peer.fail(id, UpstreamError::Protocol("the upstream's response ended without an answer".into()));
        }
        Ok(())
    }

    /// Dispatches each event of a stream until it ends. A message above the size limit fails
    /// the related request and ends the stream.
    async fn read_events(&self, peer: &Peer, response: reqwest::Response, related: Option<i64>) {
        read_events(peer, response, related, self.0.max).await;
    }

    /// Listens for what the upstream says unprompted while the connection lives: on the GET
    /// stream, or in 2026-07-28 on a `subscriptions/listen` stream. An upstream without one
    /// (405, or 404 in 2026-07-28) is left alone; one that cannot be reached any more ends the
    /// connection. A stream opened again may have missed changes: the tools are listed again.
    pub(super) async fn listen(self, peer: Peer) {
        let mut delay = Duration::from_millis(250);
        let mut opened_before = false;
        let modern = self.is_modern();
        while !self.0.stop.is_cancelled() {
            let request = match self.listen_request(modern).await {
                Ok(r) => r,
                Err(e) => {
                    peer.close(e.to_string());
                    return;
                }
            };
            let sent = tokio::select! {
                sent = request.send() => sent,
                () = self.0.stop.cancelled() => return,
            };
            match sent {
                Err(e) => {
                    peer.close(send_error(&e).to_string());
                    return;
                }
                Ok(r) if r.status() == StatusCode::METHOD_NOT_ALLOWED => return,
                Ok(r) if modern && r.status() == StatusCode::NOT_FOUND => return,
                Ok(r) if r.status() == StatusCode::NOT_FOUND => {
                    peer.close("the upstream ended the session (HTTP 404)");
                    return;
                }
                Ok(r) if r.status().is_success() && is_event_stream(r.headers()) => {
                    delay = Duration::from_millis(250);
                    if opened_before {
                        peer.mark_changed();
                    }
                    opened_before = true;
                    tokio::select! {
                        () = self.read_events(&peer, r, None) => {}
                        () = self.0.stop.cancelled() => return,
                    }
                }
                Ok(_) => delay = (delay * 2).min(Duration::from_secs(30)),
            }
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = self.0.stop.cancelled() => return,
            }
        }
    }

    /// The request that opens the listening stream.
    async fn listen_request(&self, modern: bool) -> Result<reqwest::RequestBuilder, UpstreamError> {
        if !modern {
            return Ok(self.request(reqwest::Method::GET).await?.header(ACCEPT, "text/event-stream"));
        }
        self.post_request(true, modern::listen_request(), Vec::new()).await
    }

    /// The POST carrying `message`: in 2026-07-28 stamped with its `_meta` and named in headers
    /// (with `extra` ones).
    async fn post_request(
        &self,
        modern: bool,
        mut message: Value,
        extra: Vec<(HeaderName, HeaderValue)>,
    ) -> Result<reqwest::RequestBuilder, UpstreamError> {
        let mut request = self.request(reqwest::Method::POST).await?;
        if modern {
            for (name, value) in modern::stamp(&mut message).into_iter().chain(extra) {
                request = request.header(name, value);
            }
        }
        let body = serde_json::to_vec(&message).map_err(|e| UpstreamError::Protocol(e.to_string()))?;
        Ok(request.header(ACCEPT, "application/json, text/event-stream").header(CONTENT_TYPE, "application/json").body(body))
    }

    /// Stops listening and ends the upstream's session (DELETE), without waiting.
    pub(super) fn end_session(&self) {
        self.0.stop.cancel();
        if self.0.session.lock().is_none() {
            return;
        }
        let wire = self.clone();
        tokio::spawn(async move {
            if let Ok(request) = wire.request(reqwest::Method::DELETE).await {
                let _ = request.timeout(Duration::from_secs(2)).send().await;
            }
        });
    }
}

/// Dispatches each event of `response` until it ends; see [`HttpWire::read_events`].
pub(super) async fn read_events(peer: &Peer, response: reqwest::Response, related: Option<i64>, max: usize) {
    let mut events = Box::pin(super::events::events(response, max));
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                match related {
                    Some(id) => peer.fail(id, e),
                    None => tracing::warn!(upstream = ?peer, error = %e, "the upstream's event stream ended"),
                }
                return;
            }
        };
        // A priming event carries only an id for resumption; `endpoint` is the legacy transport's.
        if event.data.is_empty() || event.event == "endpoint" {
            continue;
        }
        if event.data.len() > max {
            match related {
                Some(id) => peer.fail(id, UpstreamError::TooLarge(max)),
                None => tracing::warn!(upstream = ?peer, "dropped an event larger than max_message_bytes"),
            }
            continue;
        }
        if peer.receive(event.data.as_bytes(), related).is_err() {
            tracing::warn!(upstream = ?peer, "ignored an event that is not JSON-RPC");
        }
        // The answer ends this request's stream: stop reading it, whether or not the upstream
        // closes it (the spec says it should, not that it must).
        if related.is_some_and(|id| !peer.is_pending(id)) {
            read_to_end(events);
            return;
        }
    }
}

/// Longest the rest of a stream is read after its answer, so that its connection can be reused.
const READ_TO_END: Duration = Duration::from_secs(2);

/// Reads what is left of an answered request's stream, without holding up the answer: hyper
/// reuses a connection only once its response was read to the end, and an upstream ends the
/// stream right after the answer (as the spec says it should). Dropped unread, every call
/// whose end had not arrived yet would cost a new connection.
fn read_to_end(mut events: std::pin::Pin<Box<impl futures_util::Stream + Send + 'static>>) {
    use futures_util::FutureExt as _;
    loop {
        match events.next().now_or_never() {
            Some(Some(_)) => continue,
            Some(None) => return,
            None => break,
        }
    }
    tokio::spawn(async move {
        let _ = tokio::time::timeout(READ_TO_END, async move { while events.next().await.is_some() {} }).await;
    });
}

/// The HTTP client for an upstream under the address policy, and its URL checked against it.
/// A client that sends credentials (headers or a bearer token) follows redirects within the
/// URL's own origin only.
pub(super) fn client(settings: &UpstreamSettings, credentialed: bool) -> Result<HttpClient, UpstreamError> {
    let url = settings.url.as_deref().unwrap_or_default();
    let url = Url::parse(url).map_err(|e| UpstreamError::Transport(format!("url: {e}")))?;
    let exempt: Vec<String> = match (settings.allow_private, url.host_str(), url.port_or_known_default()) {
        (true, Some(host), Some(port)) => vec![format!("{}:{port}", host.trim_start_matches('[').trim_end_matches(']'))],
        _ => Vec::new(),
    };
    let policy = AddressPolicy::new(&exempt, &Default::default());
    policy.check_url(&url).map_err(|r| UpstreamError::Transport(refusal_hint(&r)))?;
    let client = reqwest::Client::builder()
        .use_rustls_tls()
        .no_proxy()
        .dns_resolver(Arc::new(GuardedResolver::new(policy.clone())))
        .redirect(redirect_policy(policy, MAX_REDIRECTS, credentialed))
        .connect_timeout(Duration::from_millis(settings.connect_timeout_ms))
        .user_agent(concat!("toolgate/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| UpstreamError::Transport(format!("the HTTP client could not be created: {e}")))?;
    Ok((client, url))
}

/// Adds the upstream's own credentials to a request: its headers and its bearer token.
pub(super) async fn authorize(
    request: reqwest::RequestBuilder,
    headers: &HeaderMap,
    bearer: &Bearer,
) -> Result<reqwest::RequestBuilder, UpstreamError> {
    let request = request.headers(headers.clone());
    Ok(match bearer {
        Bearer::None => request,
        // A token sent a moment before it lapses arrives dead: it is refused a little early.
        Bearer::Fixed(_, expires) if std::time::Instant::now() + super::credentials::SEND_BEFORE >= *expires => {
            return Err(UpstreamError::Disconnected("the caller's token for this connection has expired".into()));
        }
        Bearer::Fixed(token, _) => request.bearer_auth(token),
        Bearer::Own(oauth) => request.bearer_auth(oauth.own_token().await?),
    })
}

fn content_type_is(headers: &HeaderMap, media_type: &str) -> bool {
    headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with(media_type))
}

fn is_json(headers: &HeaderMap) -> bool {
    content_type_is(headers, "application/json")
}

pub(super) fn is_event_stream(headers: &HeaderMap) -> bool {
    content_type_is(headers, "text/event-stream")
}

async fn read_limited(mut response: reqwest::Response, max: usize) -> Result<Vec<u8>, UpstreamError> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| UpstreamError::Transport(format!("reading the answer: {e}")))? {
        if body.len() + chunk.len() > max {
            return Err(UpstreamError::TooLarge(max));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Why a request did not get an HTTP answer, naming an address-policy refusal as such.
pub(super) fn send_error(error: &reqwest::Error) -> UpstreamError {
    if let Some(refusal) = find_cause::<Refusal>(error) {
        return UpstreamError::Transport(refusal_hint(refusal));
    }
    let what = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "cannot connect"
    } else {
        "the request failed"
    };
    let mut cause: &dyn std::error::Error = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    UpstreamError::Transport(format!("{what}: {cause}"))
}

fn refusal_hint(refusal: &Refusal) -> String {
    format!("{refusal} (set upstreams.<name>.allow_private = true for an internal server)")
}

pub(super) fn status_error(response: &reqwest::Response, had_session: bool) -> UpstreamError {
    let status = response.status();
    match status {
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
            let challenge = response.headers().get(WWW_AUTHENTICATE).and_then(|v| v.to_str().ok()).unwrap_or_default();
            let challenge =
                if challenge.is_empty() { String::new() } else { format!(", {}", challenge.chars().take(300).collect::<String>()) };
            UpstreamError::Refused { status: status.as_u16(), challenge }
        }
        StatusCode::NOT_FOUND if had_session => UpstreamError::Disconnected("the upstream ended the session (HTTP 404)".into()),
        _ => UpstreamError::Status(status.as_u16()),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::super::credentials::SEND_BEFORE;
    use super::*;

    fn request() -> reqwest::RequestBuilder {
        reqwest::Client::new().delete("http://127.0.0.1:9/mcp")
    }

    #[tokio::test]
    async fn a_connections_own_token_is_not_sent_once_it_has_expired_or_is_about_to() {
        let expired = Bearer::Fixed("user-token".into(), Instant::now() - Duration::from_secs(1));
        let refused = authorize(request(), &HeaderMap::new(), &expired).await;
        assert!(matches!(refused, Err(UpstreamError::Disconnected(_))), "an expired token must not go out");

        // Still valid, but it would lapse on the way.
        let lapsing = Bearer::Fixed("user-token".into(), Instant::now() + SEND_BEFORE / 2);
        let refused = authorize(request(), &HeaderMap::new(), &lapsing).await;
        assert!(matches!(refused, Err(UpstreamError::Disconnected(_))), "a token about to lapse must not go out");

        let valid = Bearer::Fixed("user-token".into(), Instant::now() + Duration::from_secs(60));
        let sent = authorize(request(), &HeaderMap::new(), &valid).await.expect("a valid token goes out").build().expect("a request");
        assert_eq!(sent.headers()[http::header::AUTHORIZATION], "Bearer user-token");
    }
}
