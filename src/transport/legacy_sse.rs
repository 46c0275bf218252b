//! The deprecated 2024-11-05 HTTP+SSE transport: `GET /sse` opens a session whose first
//! event names the POST endpoint; `POST /messages?sessionId=…` answers 202 and every
//! response travels back on that one SSE connection. Closing it ends the session.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Response, StatusCode, Uri};
use bytes::Bytes;
use tokio::sync::mpsc;

use super::exchange::Frame;
use super::state::McpState;
use super::{headers, refusal, sse, streamable};
use crate::admission::Refused;
use crate::caller::Caller;
use crate::limits::Held;
use crate::principal::Principal;
use crate::protocol::ProtocolVersion;
use crate::protocol::jsonrpc::{self, Incoming, RpcError, code};
use crate::session::{Session, SessionKind, SessionStore};
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

/// `GET /sse`: admitted as a stream of its client, and as a session under its cap.
pub async fn open(State(app): State<McpState>, caller: Caller) -> Response<Body> {
    let stream_permit = match app.admission.stream(&caller, Held::SseStream).await {
        Ok(permit) => permit,
        Err(refused) => return refusal::http(&app, &refused, None),
    };
    let session_permit = match app.admission.hold(&caller, Held::Session) {
        Ok(permit) => permit,
        Err(refused) => return refusal::http(&app, &refused, None),
    };
    let (tx, rx) = mpsc::channel::<Bytes>(app.settings.sse.stream_buffer);
    let owner = caller.principal.as_deref().map(|p| Arc::<str>::from(p.key()));
    let session = match app.sessions.create(SessionKind::LegacySse, ProtocolVersion::V2024_11_05, Some(tx), owner) {
        Ok(s) => s.holding(session_permit),
        Err(_) => return headers::transport_error(StatusCode::SERVICE_UNAVAILABLE, "Service Unavailable: too many sessions; retry later"),
    };
    let endpoint = format!("/messages?sessionId={}", session.id);
    let guard = SessionGuard { store: app.sessions.clone(), id: session.id.clone() };
    let options = sse::BodyOptions {
        preamble: vec![sse::endpoint_event(&endpoint)],
        on_close: None,
        guard: Some(sse::guard((guard, stream_permit))),
        kind: Some(crate::metrics::SseKind::LegacySse),
    };
    sse::response(sse::body(rx, app.settings.keep_alive(), session.notifications_closed.clone(), options))
}

/// The `sessionId` of `/messages?sessionId=…`: exactly one, or why not.
fn session_id(query: Option<&str>) -> Result<String, &'static str> {
    let mut found = None;
    for (name, value) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        if name == "sessionId" && found.replace(value.into_owned()).is_some() {
            return Err("the sessionId query parameter is given more than once; send it once");
        }
    }
    found.filter(|id| !id.is_empty()).ok_or("the sessionId query parameter is required")
}

/// `POST /messages?sessionId=…`: admitted here, on the replica that received it, then
/// dispatched where the session's SSE connection is.
pub async fn message(State(app): State<McpState>, mut caller: Caller, uri: Uri, headers: HeaderMap, body: Body) -> Response<Body> {
    let id = match session_id(uri.query()) {
        Ok(id) => id,
        Err(why) => return headers::transport_error(StatusCode::BAD_REQUEST, format!("Bad Request: {why}")),
    };
    let key = caller.principal.as_deref().map(Principal::key);
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
    let value = match streamable::read_json(&app, body).await {
        Ok(v) => v,
        Err(response) => return response,
    };
    let message = match Incoming::from_value(value.clone()) {
        Ok(m) => m,
        Err(bad) => return headers::error(StatusCode::BAD_REQUEST, bad.id.as_ref(), &bad.error),
    };
    // The JSON-RPC request's span: admission and the request's own task run in it.
    let span = caller.message_span(&message);
    if let Incoming::Request(req) = &message {
        crate::metrics::record::mcp_request(&req.method, crate::metrics::McpEra::Sse2024);
    }
    if let Err(refused) = app.admission.message(&caller, &message).instrument(span.clone()).await {
        match (&refused, &local, &message) {
            // Responses of this transport travel on the open SSE stream, so a rate-limit
            // refusal does too, as a JSON-RPC error with the retry hint; the POST is accepted.
            (Refused::Limited(_), Some(session), Incoming::Request(req)) => {
                send(session, refusal::jsonrpc(&refused, Some(&req.id)).to_string()).await;
                return headers::accepted();
            }
            _ => return refusal::http(&app, &refused, None),
        }
    }
    match local {
        Some(session) => dispatch(&app, session, message, caller).instrument(span).await,
        None => app.sessions.publish(crate::cluster::ClusterEvent::LegacyMessage {
            session: id,
            message: value,
            principal: caller.principal.as_deref().cloned(),
            ip: caller.ip,
            request_id: caller.request_id.as_deref().map(str::to_owned),
        }),
    }
    headers::accepted()
}

/// A `/messages` POST that another replica received for a session held here.
pub(crate) async fn forwarded(
    app: &McpState,
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
    // Admitted by the replica that received it.
    // The token stays with the replica that verified it: no token exchange on this path.
    let mut caller = Caller { principal, request_id: request_id.map(Arc::from), ip, trace: None, token: None, server: None };
    let span = caller.message_span(&message);
    dispatch(app, session, message, caller).instrument(span).await;
}

/// An admitted message; every answer goes on the session's SSE connection.
async fn dispatch(app: &McpState, session: Arc<Session>, message: Incoming, caller: Caller) {
    session.touch();
    match message {
        Incoming::Notification(n) => streamable::on_notification(app, &session, &n),
        Incoming::Response(r) => streamable::on_response(app, &session, r),
        Incoming::Request(req) if req.method == "initialize" => {
            let reply = match streamable::negotiate(&req) {
                Ok((version, client)) => {
                    if session.set_initialized(version, client) {
                        jsonrpc::result_message(&req.id, &app.server.initialize_result(version, None))
                    } else {
                        jsonrpc::error_message(Some(&req.id), &RpcError::invalid_request("This session is already initialized"))
                    }
                }
                Err(e) => jsonrpc::error_message(Some(&req.id), &e),
            };
            send(&session, reply.to_string()).await;
        }
        Incoming::Request(req) => {
            let mut rx = streamable::start_on_session(app, &session, req, &caller);
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
