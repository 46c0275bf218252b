//! The client side of one MCP connection to an upstream: request ids and their answers,
//! notifications, and requests the upstream sends back (elicitation, sampling, roots) routed to
//! the call they belong to. The wire (a child's stdio, or Streamable HTTP) only moves messages:
//! it sends what [`Peer`] gives it and pushes what arrives into [`Peer::dispatch`].

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::error::UpstreamError;
use super::wire::Wire;

/// What reaches a running call besides its answer.
#[derive(Debug)]
pub enum CallEvent {
    Progress {
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    },
    /// A request of the upstream's (`elicitation/create`, `sampling/createMessage`,
    /// `roots/list`) made while this call runs; answer it with [`Peer::respond`].
    Request {
        id: Value,
        method: String,
        params: Value,
    },
}

/// Where a call's events go, and whose call it is.
#[derive(Clone, Debug)]
pub struct CallEvents {
    pub tx: mpsc::Sender<CallEvent>,
    /// The caller's principal key (`None` without authentication): a request of the upstream
    /// that names no call goes only to a call when every call in flight is this caller's.
    pub owner: Option<String>,
}

/// Events a call may have queued before it reads them; beyond, progress is dropped (it is
/// advisory) and requests are refused.
pub(super) const CALL_EVENTS: usize = 64;
/// Answers to the upstream's requests in flight at most (see `Inner::answering`).
const MAX_ANSWERING: usize = 32;

type Reply = Result<Value, UpstreamError>;

/// One live connection. Cheap to clone.
#[derive(Clone)]
pub struct Peer {
    inner: Arc<Inner>,
}

struct Inner {
    wire: Wire,
    next_id: AtomicI64,
    pending: Mutex<HashMap<i64, oneshot::Sender<Reply>>>,
    calls: Mutex<HashMap<i64, CallEvents>>,
    /// Cancelled when the connection is gone; `reason` says why.
    closed: CancellationToken,
    reason: Mutex<Option<String>>,
    /// Woken by `notifications/{tools,resources,prompts}/list_changed`.
    pub(super) changed: Notify,
    /// Answers to the upstream's own requests being sent at once: an upstream that floods
    /// requests gets the excess dropped rather than a task each.
    answering: Arc<tokio::sync::Semaphore>,
    /// What one message may cost decoded ([`super::inbound`]).
    budget: crate::untrusted::json::Budget,
    name: String,
    /// A request of the upstream's that reached no call was explained in the log (once).
    explained_unrouted: AtomicBool,
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peer").field("upstream", &self.inner.name).finish_non_exhaustive()
    }
}

impl Peer {
    pub(super) fn new(name: &str, wire: Wire, budget: crate::untrusted::json::Budget) -> Self {
        Self {
            inner: Arc::new(Inner {
                wire,
                next_id: AtomicI64::new(1),
                pending: Mutex::default(),
                calls: Mutex::default(),
                closed: CancellationToken::new(),
                reason: Mutex::new(None),
                changed: Notify::new(),
                answering: Arc::new(tokio::sync::Semaphore::new(MAX_ANSWERING)),
                budget,
                name: name.to_owned(),
                explained_unrouted: AtomicBool::new(false),
            }),
        }
    }

    /// `stdio`, `http` (Streamable HTTP) or `sse` (the 2024-11-05 transport).
    pub fn transport(&self) -> &'static str {
        match self.inner.wire {
            Wire::Stdio(_) => "stdio",
            Wire::Http(_) => "http",
            Wire::Sse(_) => "sse",
        }
    }

    /// Sends a request and waits for its answer, at most `timeout`.
    pub async fn request(&self, method: &str, params: Value, timeout: Duration) -> Reply {
        let mut call = self.start(method, params, None, false);
        match tokio::time::timeout(timeout, call.reply()).await {
            Ok(reply) => reply,
            Err(_) => Err(UpstreamError::Timeout(timeout)),
        }
    }

    /// Whether the upstream is spoken in 2026-07-28 (no handshake, no session).
    pub fn is_modern(&self) -> bool {
        self.inner.wire.is_modern()
    }

    /// Checks the upstream still answers: `ping`, or in 2026-07-28 (which has none)
    /// `server/discover`.
    pub async fn check(&self, timeout: Duration) -> Result<(), UpstreamError> {
        let method = if self.is_modern() { "server/discover" } else { "ping" };
        self.request(method, json!({}), timeout).await.map(drop)
    }

    /// Sends a request whose progress (asked for with `progress`) and requests back go to
    /// `events`. The returned [`PendingCall`] cancels the request upstream if dropped before
    /// its answer.
    pub fn start(&self, method: &str, params: Value, events: Option<CallEvents>, progress: bool) -> PendingCall {
        self.start_with(method, params, events, progress, Vec::new())
    }

    /// [`Peer::start`] with HTTP headers for this request alone (`Mcp-Param-*`).
    pub fn start_with(
        &self,
        method: &str,
        mut params: Value,
        events: Option<CallEvents>,
        progress: bool,
        headers: Vec<(http::HeaderName, http::HeaderValue)>,
    ) -> PendingCall {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        if let Some(events) = events {
            self.inner.calls.lock().insert(id, events);
        }
        if progress {
            // The request id doubles as the progress token: unique while the call lives.
            if let Some(p) = params.as_object_mut() {
                let meta = p.entry("_meta").or_insert_with(|| json!({}));
                if let Some(meta) = meta.as_object_mut() {
                    meta.insert("progressToken".into(), json!(id));
                }
            }
        }
        self.inner.pending.lock().insert(id, tx);
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let sending = if self.inner.closed.is_cancelled() {
            self.fail(id, UpstreamError::Disconnected(self.close_reason()));
            None
        } else {
            Some(self.inner.wire.send_request(self.clone(), id, message, headers))
        };
        // The spec forbids cancelling `initialize`; in 2026-07-28 ending the request's stream
        // (dropping its send) is the cancellation.
        let cancellable = method != "initialize" && !self.is_modern();
        PendingCall { peer: self.clone(), id, reply: Some(rx), sending, done: false, cancellable }
    }

    /// Sends a notification (no answer).
    pub async fn notify(&self, method: &str, params: Value) -> Result<(), UpstreamError> {
        self.inner.wire.send(self, json!({"jsonrpc": "2.0", "method": method, "params": params})).await
    }

    /// Answers a request the upstream sent (`id` as it sent it).
    pub async fn respond(&self, id: Value, answer: Result<Value, (i64, String)>) {
        let message = match answer {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err((code, message)) => json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
        };
        if let Err(e) = self.inner.wire.send(self, message).await {
            tracing::debug!(upstream = %self.inner.name, error = %e, "could not answer the upstream's request");
        }
    }

    /// Routes one message from the upstream. `related` is the request whose HTTP response
    /// carried it (Streamable HTTP), so the upstream's own requests reach the right call.
    pub(super) fn dispatch(&self, message: Value, related: Option<i64>) {
        let Value::Object(mut m) = message else {
            tracing::warn!(upstream = %self.inner.name, "ignored a message that is not a JSON object");
            return;
        };
        let method = m.get("method").and_then(Value::as_str).map(str::to_owned);
        match (method, m.remove("id")) {
            (None, Some(id)) => self.answer(id, m),
            (Some(method), Some(id)) => self.upstream_request(id, method, m.remove("params").unwrap_or(Value::Null), related),
            (Some(method), None) => self.notification(&method, m.remove("params").unwrap_or(Value::Null)),
            (None, None) => tracing::warn!(upstream = %self.inner.name, "ignored a message with neither id nor method"),
        }
    }

    fn answer(&self, id: Value, mut m: serde_json::Map<String, Value>) {
        let Some(id) = id.as_i64() else { return };
        let reply = match (m.remove("result"), m.remove("error")) {
            (Some(result), None) => Ok(result),
            (_, Some(error)) => Err(UpstreamError::rpc(&error)),
            (None, None) => Err(UpstreamError::Protocol("an answer with neither result nor error".into())),
        };
        if let Some(tx) = self.inner.pending.lock().remove(&id) {
            let _ = tx.send(reply);
        }
    }

    fn notification(&self, method: &str, params: Value) {
        match method {
            "notifications/progress" => {
                let Some(token) = params.get("progressToken").and_then(Value::as_i64) else { return };
                let Some(progress) = params.get("progress").and_then(Value::as_f64) else { return };
                let event = CallEvent::Progress {
                    progress,
                    total: params.get("total").and_then(Value::as_f64),
                    message: params.get("message").and_then(Value::as_str).map(str::to_owned),
                };
                if let Some(call) = self.inner.calls.lock().get(&token) {
                    let _ = call.tx.try_send(event);
                }
            }
            "notifications/tools/list_changed" | "notifications/resources/list_changed" | "notifications/prompts/list_changed" => {
                self.inner.changed.notify_one();
            }
            "notifications/message" => tracing::debug!(upstream = %self.inner.name, ?params, "upstream log message"),
            _ => {}
        }
    }

    /// A request from the upstream: `ping` is answered here; input requests go to the call
    /// they belong to. Over stdio (and on a stream shared by calls) nothing says which call that
    /// is, so such a request is relayed only while every call in flight is one caller's (with
    /// authentication), or while exactly one call runs (without): never to another user.
    fn upstream_request(&self, id: Value, method: String, params: Value, related: Option<i64>) {
        if method == "ping" {
            self.answer_later(id, Ok(json!({})));
            return;
        }
        let target = {
            let calls = self.inner.calls.lock();
            match related {
                Some(call) => calls.get(&call).cloned(),
                None => one_callers(&calls),
            }
        };
        let refusal = match target {
            Some(call) => match call.tx.try_send(CallEvent::Request { id: id.clone(), method, params }) {
                Ok(()) => return,
                Err(_) => "the call this request belongs to is not reading requests".to_owned(),
            },
            None => self.unrouted(&method),
        };
        self.answer_later(id, Err((-32603, refusal)));
    }

    /// The answer to a request of the upstream's that reaches no call, and one sentence in
    /// the log the first time on this connection. Upstreams such as server-everything ask for
    /// the client's roots as soon as they start, before any call, and log the refusal on their
    /// stderr at every start: the line here says why that is expected.
    fn unrouted(&self, method: &str) -> String {
        let idle = self.inner.calls.lock().is_empty();
        if !self.inner.explained_unrouted.swap(true, Ordering::Relaxed) {
            tracing::info!(
                upstream = %self.inner.name,
                method,
                "the upstream sent a request for toolgate's client outside any tool call; it was answered with an error, because toolgate relays such requests (roots/list, sampling, elicitation) only to the client of the call they belong to, so an upstream's complaint about it is expected"
            );
        } else {
            tracing::debug!(upstream = %self.inner.name, method, "a request of the upstream's reached no call");
        }
        if idle {
            format!("toolgate relays {method:?} only to the client of a tool call, and no call is running")
        } else {
            format!("toolgate cannot tell which call the request {method:?} belongs to")
        }
    }

    /// Answers an upstream's request off the reading task, within [`MAX_ANSWERING`] at once.
    fn answer_later(&self, id: Value, answer: Result<Value, (i64, String)>) {
        let Ok(permit) = self.inner.answering.clone().try_acquire_owned() else {
            tracing::debug!(upstream = %self.inner.name, "dropped an answer: too many of the upstream's requests at once");
            return;
        };
        let peer = self.clone();
        tokio::spawn(async move {
            peer.respond(id, answer).await;
            drop(permit);
        });
    }

    /// Ends the connection: every waiting request fails with `reason`.
    pub fn close(&self, reason: impl Into<String>) {
        {
            let mut slot = self.inner.reason.lock();
            if slot.is_some() {
                return;
            }
            *slot = Some(reason.into());
        }
        self.inner.closed.cancel();
        let reason = self.close_reason();
        let pending: Vec<_> = self.inner.pending.lock().drain().collect();
        for (_, tx) in pending {
            let _ = tx.send(Err(UpstreamError::Disconnected(reason.clone())));
        }
        self.inner.calls.lock().clear();
        self.inner.wire.shutdown();
    }

    pub fn close_reason(&self) -> String {
        self.inner.reason.lock().clone().unwrap_or_else(|| "the connection closed".into())
    }

    pub fn is_closed(&self) -> bool {
        self.inner.closed.is_cancelled()
    }

    pub async fn closed(&self) {
        self.inner.closed.cancelled().await
    }

    /// Resync the upstream's lists, as if it had said they changed.
    pub(super) fn mark_changed(&self) {
        self.inner.changed.notify_one();
    }

    pub(super) async fn changed(&self) {
        self.inner.changed.notified().await
    }

    pub(super) fn budget(&self) -> crate::untrusted::json::Budget {
        self.inner.budget
    }

    /// Whether request `id` still waits for its answer.
    pub(super) fn is_pending(&self, id: i64) -> bool {
        self.inner.pending.lock().contains_key(&id)
    }

    /// Fails one waiting request (its send failed, or its answer was unusable).
    pub(super) fn fail(&self, id: i64, error: UpstreamError) {
        if let Some(tx) = self.inner.pending.lock().remove(&id) {
            let _ = tx.send(Err(error));
        }
    }

    /// Fails every waiting request: the wire lost a message it could not attribute (one too
    /// large to read), so any of them may have been its answer.
    pub(super) fn fail_all(&self, error: &UpstreamError) {
        let pending: Vec<_> = self.inner.pending.lock().drain().collect();
        for (_, tx) in pending {
            let _ = tx.send(Err(error.clone()));
        }
    }

    fn forget(&self, id: i64) -> bool {
        self.inner.calls.lock().remove(&id);
        self.inner.pending.lock().remove(&id).is_some()
    }
}

/// Some call in flight, when all of them are one caller's (with authentication) or there is
/// exactly one (without).
fn one_callers(calls: &HashMap<i64, CallEvents>) -> Option<CallEvents> {
    let mut all = calls.values();
    let first = all.next()?;
    let same = match &first.owner {
        Some(owner) => all.all(|c| c.owner.as_ref() == Some(owner)),
        None => calls.len() == 1,
    };
    same.then(|| first.clone())
}

/// A request on its way. Dropped before its answer (a cancelled or timed-out call), it tells
/// the upstream with `notifications/cancelled` and stops reading the answer's stream.
pub struct PendingCall {
    peer: Peer,
    id: i64,
    reply: Option<oneshot::Receiver<Reply>>,
    sending: Option<super::wire::Sending>,
    done: bool,
    cancellable: bool,
}

impl PendingCall {
    /// Waits for the answer (once), sending the request meanwhile. Cancel-safe: the send is
    /// kept in `self` between polls.
    pub async fn reply(&mut self) -> Reply {
        let Some(rx) = self.reply.as_mut() else { return Err(UpstreamError::Protocol("the answer was already taken".into())) };
        let answer = loop {
            let Some(sending) = self.sending.as_mut() else { break rx.await };
            tokio::select! {
                biased;
                answer = &mut *rx => break answer,
                () = sending.as_mut() => self.sending = None,
            }
        };
        let reply = answer.unwrap_or_else(|_| Err(UpstreamError::Disconnected(self.peer.close_reason())));
        self.reply = None;
        self.done = true;
        self.peer.forget(self.id);
        reply
    }
}

impl Drop for PendingCall {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let waiting = self.peer.forget(self.id);
        // Dropping the send stops it, and the reading of the answer's stream.
        self.sending = None;
        if waiting && self.cancellable && !self.peer.is_closed() {
            let peer = self.peer.clone();
            let id = self.id;
            tokio::spawn(async move {
                let _ = peer.notify("notifications/cancelled", json!({"requestId": id, "reason": "cancelled by the client"})).await;
            });
        }
    }
}
