//! One request/response exchange: the request runs (inline until it first waits, then on a
//! task of its own) and sends frames (related notifications, server-to-client requests, then
//! the final response); the HTTP side answers with plain JSON when the response comes first,
//! and upgrades to SSE as soon as the request emits anything else or runs longer than a
//! keep-alive interval (so proxies see bytes).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::AtomicU8;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Response, StatusCode};
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::sse;
use crate::protocol::ProtocolVersion;
use crate::protocol::jsonrpc::{self, Request, RpcError, code};
use crate::server::{McpServer, RequestCtx};
use crate::session::Session;
use crate::tool::{ClientCaps, ClientChannel};

/// What a running request sends back.
#[derive(Debug)]
pub enum Frame {
    /// A notification or server-to-client request related to the request.
    Message(String),
    /// The response; `status` is the HTTP status if it is sent as plain JSON.
    Final { json: String, status: StatusCode },
    /// End the HTTP connection but keep the stream for resumption (SEP-1699).
    Detach,
}

/// The channel a tool uses to reach the client during one request.
struct FrameChannel {
    tx: mpsc::Sender<Frame>,
    session: Option<Arc<Session>>,
    timeout: Duration,
}

impl ClientChannel for FrameChannel {
    fn notify(&self, message: Value) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            let _ = self.tx.send(Frame::Message(message.to_string())).await;
        })
    }

    fn request(&self, method: &str, params: Value) -> Pin<Box<dyn Future<Output = Result<Value, RpcError>> + Send + '_>> {
        let method = method.to_owned();
        Box::pin(async move {
            let Some(session) = &self.session else {
                return Err(RpcError::new(code::INTERNAL_ERROR, "no session to send a request on"));
            };
            let (id, answer) = session.begin_outgoing();
            let message = jsonrpc::request_message(&id, &method, params);
            if self.tx.send(Frame::Message(message.to_string())).await.is_err() {
                session.abandon_outgoing(&id);
                return Err(RpcError::new(code::INTERNAL_ERROR, "the request's stream is closed"));
            }
            match tokio::time::timeout(self.timeout, answer).await {
                Ok(Ok(outcome)) => outcome,
                Ok(Err(_)) => Err(RpcError::new(code::INTERNAL_ERROR, "the session ended before the client answered")),
                Err(_) => {
                    session.abandon_outgoing(&id);
                    // Tell the client to stop working on it (U-16).
                    let cancel =
                        jsonrpc::notification_message("notifications/cancelled", Some(json!({ "requestId": id, "reason": "timed out" })));
                    let _ = self.tx.send(Frame::Message(cancel.to_string())).await;
                    Err(RpcError::new(
                        code::INTERNAL_ERROR,
                        format!("the client did not answer {method} within {} seconds", self.timeout.as_secs()),
                    ))
                }
            }
        })
    }

    fn can_request(&self) -> bool {
        self.session.is_some()
    }

    fn close_connection(&self) -> Pin<Box<dyn Future<Output = bool> + Send + '_>> {
        Box::pin(async move { self.session.is_some() && self.tx.send(Frame::Detach).await.is_ok() })
    }
}

/// How to run one request.
pub struct Spec {
    pub version: ProtocolVersion,
    pub session: Option<Arc<Session>>,
    pub caller: crate::caller::Caller,
    pub caps: ClientCaps,
    pub log_level: Option<Arc<AtomicU8>>,
    pub cancel: CancellationToken,
    pub buffer: usize,
    pub client_timeout: Duration,
    /// Maps a JSON-RPC error code to the HTTP status of a plain-JSON answer.
    pub status_of: fn(i32) -> StatusCode,
    pub audit: Option<Arc<crate::audit::AuditLog>>,
}

/// Starts the request, in the caller's span (so its log lines carry the request and trace
/// ids): inline until it first waits, then on its own task, tracked for shutdown; frames
/// arrive on the returned receiver. A cancelled request sends no response (U-11): the
/// receiver just closes.
pub fn start(server: Arc<McpServer>, request: Request, spec: Spec) -> mpsc::Receiver<Frame> {
    let (tx, rx) = mpsc::channel(spec.buffer.max(1));
    let channel = Arc::new(FrameChannel { tx: tx.clone(), session: spec.session.clone(), timeout: spec.client_timeout });
    let ctx = RequestCtx {
        version: spec.version,
        session: spec.session,
        caller: spec.caller,
        caps: spec.caps,
        log_level: spec.log_level,
        channel,
        cancel: spec.cancel,
        audit: spec.audit,
    };
    let status_of = spec.status_of;
    let tasks = server.in_flight.clone();
    let task = async move {
        let outcome = server.handle(&request, &ctx).await;
        if let Some(session) = &ctx.session {
            session.untrack(&request.id);
        }
        if ctx.cancel.is_cancelled() {
            return;
        }
        let (json, status) = match outcome {
            Ok(result) => (jsonrpc::result_string(&request.id, &result), StatusCode::OK),
            Err(error) => (jsonrpc::error_message(Some(&request.id), &error).to_string(), status_of(error.code)),
        };
        let _ = tx.send(Frame::Final { json, status }).await;
    };
    // Polled once here: a request that does not wait (a list, a quick tool) needs no task of
    // its own, and one that does has got as far as it can before anything else runs (a quick
    // tool's `sync` audit record is already with the writer, so more calls share each commit:
    // +29% on the full stack, measured). [`answer`] then yields once before writing.
    let mut task = Box::pin(tracing::Instrument::in_current_span(task));
    if futures_util::FutureExt::now_or_never(task.as_mut()).is_none() {
        tasks.spawn(task);
    }
    rx
}

/// How the HTTP answer is shaped.
pub struct Answer {
    pub keep_alive: Duration,
    /// Ends the SSE body (server shutdown, session end).
    pub close: CancellationToken,
    /// Legacy session: make the SSE stream resumable in this session.
    pub session: Option<Arc<Session>>,
    pub priming: bool,
    pub retry_ms: u64,
    pub buffer: usize,
    /// Modern era: dropping the response cancels the request.
    pub drop_guard: Option<DropGuard>,
}

/// Waits for the first frame and answers with JSON or SSE.
pub async fn answer(mut rx: mpsc::Receiver<Frame>, mut how: Answer) -> Response<Body> {
    // Let the other ready connections run before this answer is written, even when it is
    // ready already: answers then leave together and the client wakes once for several, where
    // writing each the moment it was ready woke it once per answer (measured at c=64: 23% of
    // the core's throughput without this yield; BENCHMARKS.md, "Step two, continued").
    tokio::task::yield_now().await;
    match tokio::time::timeout(how.keep_alive, rx.recv()).await {
        Ok(Some(Frame::Final { json, status })) => {
            // Finished: nothing left to cancel.
            if let Some(guard) = how.drop_guard.take() {
                guard.disarm();
            }
            super::headers::json_text(status, json)
        }
        Ok(Some(first @ (Frame::Message(_) | Frame::Detach))) => stream(Some(first), rx, how),
        // Cancelled before anything was sent, or still running after a keep-alive interval.
        Ok(None) | Err(_) => stream(None, rx, how),
    }
}

fn stream(first: Option<Frame>, mut rx: mpsc::Receiver<Frame>, how: Answer) -> Response<Body> {
    let mut options = sse::BodyOptions {
        guard: how.drop_guard.map(|g| Box::new(g) as Box<dyn std::any::Any + Send + Sync>),
        kind: Some(crate::metrics::SseKind::Post),
        ..Default::default()
    };
    let live = match &how.session {
        // Legacy: a resumable stream of the session; a dropped connection loses nothing.
        Some(session) => {
            let stream = session.open_post_stream(how.buffer);
            let live = stream.attach(None).unwrap_or_else(|_| mpsc::channel(1).1);
            if how.priming {
                options.preamble.push(sse::priming_event(&stream.priming_id(), how.retry_ms));
                options.on_close = Some(sse::retry_hint(how.retry_ms));
            }
            let apply = move |stream: &crate::session::EventStream, frame: Frame| match frame {
                Frame::Message(json) => {
                    stream.push(&json, false);
                    true
                }
                Frame::Final { json, .. } => {
                    stream.push(&json, true);
                    false
                }
                Frame::Detach => {
                    stream.detach();
                    true
                }
            };
            if let Some(first) = first {
                apply(&stream, first);
            }
            tokio::spawn(async move {
                while let Some(frame) = rx.recv().await {
                    if !apply(&stream, frame) {
                        return;
                    }
                }
                // Cancelled: the stream ends without a response.
                stream.finish();
            });
            live
        }
        // Modern: a plain stream; the client's disconnect cancels the request instead.
        None => {
            let (tx, live) = mpsc::channel::<Bytes>(how.buffer.max(1));
            tokio::spawn(async move {
                let mut next = first;
                loop {
                    let frame = match next.take() {
                        Some(frame) => frame,
                        None => match rx.recv().await {
                            Some(frame) => frame,
                            None => return,
                        },
                    };
                    let (json, last) = match frame {
                        Frame::Message(json) => (json, false),
                        Frame::Final { json, .. } => (json, true),
                        // Modern streams are not resumable; nothing to detach.
                        Frame::Detach => continue,
                    };
                    if tx.send(sse::message_event(None, &json)).await.is_err() || last {
                        return;
                    }
                }
            });
            live
        }
    };
    sse::response(sse::body(live, how.keep_alive, how.close, options))
}

/// Legacy: every JSON-RPC error goes out with HTTP 200.
pub fn legacy_status(_code: i32) -> StatusCode {
    StatusCode::OK
}
