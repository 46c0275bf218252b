//! The deprecated 2024-11-05 HTTP+SSE transport: `GET /sse` opens a session whose first
//! event names the POST endpoint; `POST /messages?sessionId=…` answers 202 and every
//! response travels back on that one SSE connection. Closing it ends the session.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Response, StatusCode};
use bytes::Bytes;
use serde::Deserialize;
use tokio::sync::mpsc;

use super::exchange::Frame;
use super::{headers, sse, streamable};
use crate::app::AppState;
use crate::auth::principal::Principal;
use crate::protocol::ProtocolVersion;
use crate::protocol::jsonrpc::{self, Incoming, RpcError, code};
use crate::session::{Session, SessionKind, SessionStore};
use axum::Extension;
use tracing::Instrument as _;

/// Ends the session when its SSE connection goes away.
struct SessionGuard {
    store: Arc<SessionStore>,
    id: Arc<str>,
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        // At shutdown the stream ends first; the session's calls in flight get the grace
        // period (their answers have nowhere to go, but they finish and are audited).
        if self.store.is_draining() {
            return;
        }
        if self.store.remove(&self.id) {
            tracing::debug!(session = %self.id, "legacy SSE connection closed; session ended");
        }
    }
}

/// `GET /sse`.
pub async fn open(State(app): State<AppState>, principal: Option<Extension<Arc<Principal>>>) -> Response<Body> {
    let (tx, rx) = mpsc::channel::<Bytes>(app.settings.sse.stream_buffer);
    let owner = principal.map(|Extension(p)| Arc::<str>::from(p.key()));
    let session = match app.sessions.create(SessionKind::LegacySse, ProtocolVersion::V2024_11_05, Some(tx), owner) {
        Ok(s) => s,
        Err(_) => return headers::transport_error(StatusCode::SERVICE_UNAVAILABLE, "Service Unavailable: too many sessions; retry later"),
    };
    let endpoint = format!("/messages?sessionId={}", session.id);
    let options = sse::BodyOptions {
        preamble: vec![sse::endpoint_event(&endpoint)],
        on_close: None,
        guard: Some(Box::new(SessionGuard { store: app.sessions.clone(), id: session.id.clone() })),
        kind: Some(crate::metrics::SseKind::LegacySse),
    };
    sse::response(sse::body(rx, app.settings.keep_alive(), session.notifications_closed.clone(), options))
}

#[derive(Debug, Deserialize)]
pub struct SessionQuery {
    #[serde(rename = "sessionId")]
    session_id: Option<String>,
}

/// `POST /messages?sessionId=…`.
#[allow(clippy::too_many_arguments)]
pub async fn message(
    State(app): State<AppState>,
    principal: Option<Extension<Arc<Principal>>>,
    peer: Option<Extension<axum::extract::ConnectInfo<std::net::SocketAddr>>>,
    trace: Option<Extension<crate::telemetry::TraceContext>>,
    Query(query): Query<SessionQuery>,
    headers: HeaderMap,
    body: Body,
) -> Response<Body> {
    let principal = principal.map(|Extension(p)| p);
    let key = principal.as_deref().map(Principal::key);
    let caller = streamable::Caller::new(principal.clone(), &headers, app.client_ip(peer.map(|Extension(c)| c.0.ip()), &headers), trace);
    let Some(id) = query.session_id else {
        return headers::transport_error(StatusCode::BAD_REQUEST, "Bad Request: the sessionId query parameter is required");
    };
    let local = app.sessions.get(&id).filter(|s| s.kind == SessionKind::LegacySse && s.is_owned_by(key.as_deref()));
    // With several replicas the session's SSE connection may be held by another replica: this
    // transport's answers can only travel there, so the message is forwarded to it.
    if local.is_none() && !app.sessions.is_shared() {
        return headers::error(
            StatusCode::NOT_FOUND,
            None,
            &RpcError::new(code::SESSION_NOT_FOUND, "Session not found: open a new stream at /sse"),
        );
    }
    if !headers::is_json_body(&headers) {
        return headers::transport_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Unsupported Media Type: Content-Type must be application/json",
        );
    }
    let value = match streamable::read_json(body, app.settings.server.max_body_bytes).await {
        Ok(v) => v,
        Err(response) => return response,
    };
    let message = match Incoming::from_value(value.clone()) {
        Ok(m) => m,
        Err(bad) => return headers::error(StatusCode::BAD_REQUEST, bad.id.as_ref(), &bad.error),
    };
    if let Incoming::Request(req) = &message {
        crate::metrics::record::mcp_request(&req.method, crate::metrics::McpEra::Sse2024);
        if let Some(refusal) = streamable::method_refusal(&app, principal.as_deref(), &req.method) {
            return refusal;
        }
    }
    match local {
        Some(session) => dispatch(&app, session, message, caller).await,
        None => app.sessions.publish(crate::cluster::ClusterEvent::LegacyMessage {
            session: id,
            message: value,
            principal: principal.as_deref().cloned(),
            ip: caller.ip,
            request_id: caller.request_id.as_deref().map(str::to_owned),
        }),
    }
    headers::accepted()
}

/// A `/messages` POST that another replica received for a session held here.
pub(crate) async fn forwarded(
    app: &AppState,
    id: &str,
    value: serde_json::Value,
    principal: Option<Principal>,
    ip: Option<std::net::IpAddr>,
    request_id: Option<String>,
) {
    let principal = principal.map(Arc::new);
    let key = principal.as_deref().map(Principal::key);
    let Some(session) = app.sessions.get(id).filter(|s| s.kind == SessionKind::LegacySse && s.is_owned_by(key.as_deref())) else {
        return;
    };
    let Ok(message) = Incoming::from_value(value) else { return };
    let caller = streamable::Caller { principal, request_id: request_id.map(Arc::from), ip, trace: None };
    dispatch(app, session, message, caller).await;
}

/// Rate limits, then the message itself; every answer goes on the session's SSE connection.
async fn dispatch(app: &AppState, session: Arc<Session>, message: Incoming, mut caller: streamable::Caller) {
    // The JSON-RPC request's span: the limits and the request's own task run in it.
    let span = caller.message_span(&message);
    if let Incoming::Request(req) = &message {
        // Responses of this transport travel on the open SSE stream, so a rate-limit refusal
        // does too, as a JSON-RPC error with the retry hint; the POST itself is accepted.
        if let Some(rejection) = streamable::rate_limited(app, &caller, req).instrument(span.clone()).await {
            send(&session, rejection.jsonrpc_message(Some(&req.id)).to_string()).await;
            return;
        }
    }
    session.touch();
    match message {
        Incoming::Notification(n) => streamable::on_notification(app, &session, &n),
        Incoming::Response(r) => streamable::on_response(app, &session, r),
        Incoming::Request(req) if req.method == "initialize" => {
            let reply = match streamable::negotiate(&req) {
                Ok((version, client)) => {
                    if session.set_initialized(version, client) {
                        jsonrpc::result_message(&req.id, &app.server.initialize_result(version))
                    } else {
                        jsonrpc::error_message(Some(&req.id), &RpcError::invalid_request("This session is already initialized"))
                    }
                }
                Err(e) => jsonrpc::error_message(Some(&req.id), &e),
            };
            send(&session, reply.to_string()).await;
        }
        Incoming::Request(req) => {
            let mut rx = span.in_scope(|| streamable::start_on_session(app, &session, req, &caller));
            tokio::spawn(async move {
                while let Some(frame) = rx.recv().await {
                    let json = match frame {
                        Frame::Message(json) | Frame::Final { json, .. } => json,
                        // The 2024-11-05 transport has one connection and no resumption.
                        Frame::Detach => continue,
                    };
                    send(&session, json).await;
                }
            });
        }
    }
}

async fn send(session: &Session, json: String) {
    if let Some(out) = session.legacy_out() {
        let _ = out.send(sse::message_event(None, &json)).await;
    }
}
