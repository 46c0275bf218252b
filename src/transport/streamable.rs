//! The Streamable HTTP endpoint (`/mcp`): one POST handler that picks the era per request,
//! the legacy session machinery (initialize, session checks, batches, GET streams with
//! `Last-Event-ID` resumption, DELETE), and 405 for everything else.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use serde_json::Value;

use super::exchange::{self, Answer, Frame, Spec};
use super::headers::Rejection;
use super::state::McpState;
use super::{headers, modern, refusal, sse};
use crate::caller::Caller;
use crate::limits::Held;
use crate::metrics::McpEra;
use crate::principal::Principal;
use crate::protocol::jsonrpc::{self, Incoming, Notification, Request, RequestId, RpcError, code};
use crate::protocol::{Era, ProtocolVersion};
use crate::session::{ClientInfo, Session, SessionKind, parse_event_id};
use crate::tool::ClientCaps;
use axum::response::IntoResponse as _;
use tracing::Instrument as _;

/// POST: content checks, body parsing, admission, then the era decides who answers.
pub async fn post(State(app): State<McpState>, mut caller: Caller, headers: HeaderMap, body: Body) -> Response<Body> {
    if !headers::is_json_body(&headers) {
        return headers::transport_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Unsupported Media Type: Content-Type must be application/json",
        );
    }
    let accepts = headers::accepts(&headers);
    if !(accepts.json && accepts.sse) {
        return headers::transport_error(
            StatusCode::NOT_ACCEPTABLE,
            "Not Acceptable: Accept must list both application/json and text/event-stream",
        );
    }
    let value = match read_json(&app, body).await {
        Ok(value) => value,
        Err(rejection) => return rejection.into_response(),
    };
    if let Value::Array(items) = value {
        return batch(&app, &headers, items, &caller).await;
    }
    let message = match Incoming::from_value(value) {
        Ok(message) => message,
        Err(bad) => return headers::error(StatusCode::BAD_REQUEST, bad.id.as_ref(), &bad.error),
    };
    let modern = is_modern(&headers, &message);
    // Everything from here on runs in the JSON-RPC request's span.
    let span = caller.message_span(&message);
    if let Incoming::Request(req) = &message {
        crate::metrics::record::mcp_request(&req.method, if modern { McpEra::Modern } else { McpEra::Legacy });
    }
    if let Err(refused) = app.admission.message(&caller, &message).instrument(span.clone()).await {
        return refusal::http(&app, &refused, message_id(&message));
    }
    if modern {
        return modern::post(&app, &headers, message, caller).instrument(span).await;
    }
    legacy(&app, &headers, message, &caller).instrument(span).await
}

/// The id a refusal answers: a request's (a notification has none).
fn message_id(message: &Incoming) -> Option<&RequestId> {
    match message {
        Incoming::Request(req) => Some(&req.id),
        Incoming::Response(r) => Some(&r.id),
        Incoming::Notification(_) => None,
    }
}

/// Reads the body within the size limit and the read timeout, and parses it as JSON; the
/// error is the HTTP answer.
pub(crate) async fn read_json(app: &McpState, body: Body) -> Result<Value, Response<Body>> {
    let limit = app.settings.server.max_body_bytes;
    let timeout = app.settings.body_read_timeout();
    let read = match tokio::time::timeout(timeout, axum::body::to_bytes(body, limit)).await {
        Ok(read) => read,
        Err(_) => {
            return Err(headers::transport_error(
                StatusCode::REQUEST_TIMEOUT,
                format!("Request Timeout: the body did not arrive within {} ms (server.body_read_timeout_ms)", timeout.as_millis()),
            ));
        }
    };
    let bytes = read.map_err(|e| {
        let too_big = std::error::Error::source(&e).is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
        if too_big {
            headers::transport_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("Payload Too Large: the body exceeds {limit} bytes (server.max_body_bytes)"),
            )
        } else {
            headers::transport_error(StatusCode::BAD_REQUEST, "Bad Request: the body could not be read")
        }
    })?;
    if std::str::from_utf8(&bytes).is_err() {
        return Err(headers::error(StatusCode::BAD_REQUEST, None, &RpcError::parse("Parse error: the body is not valid UTF-8")));
    }
    serde_json::from_slice(&bytes).map_err(|e| headers::error(StatusCode::BAD_REQUEST, None, &RpcError::parse(format!("Parse error: {e}"))))
}

/// The era of a POST (checklist §11; conformance era routing): [`crate::protocol::era::is_modern`].
fn is_modern(headers: &HeaderMap, message: &Incoming) -> bool {
    crate::protocol::era::is_modern(headers.contains_key(headers::SESSION_ID), headers::get(headers, &headers::PROTOCOL_VERSION), message)
}

/// The session a legacy request names, with the 400/404 answers of S-05/S-06.
async fn session_for(app: &McpState, headers: &HeaderMap, caller: &Caller) -> Result<Arc<Session>, Rejection> {
    let principal = caller.principal.as_deref();
    let Some(id) = headers::get(headers, &headers::SESSION_ID) else {
        return Err(Rejection::transport(StatusCode::BAD_REQUEST, "Bad Request: Mcp-Session-Id header is required; send initialize first"));
    };
    // Another principal's session is reported exactly like an unknown one (SEC-07, SEC-08).
    let key = principal.map(Principal::key);
    // With several replicas, a session created elsewhere is loaded from the shared store.
    let found = app.sessions.resolve(id).await.map_err(|unavailable| {
        Rejection::transport(StatusCode::SERVICE_UNAVAILABLE, format!("Service Unavailable: {unavailable}; retry shortly"))
    })?;
    // A session belongs to the endpoint it was created on: elsewhere it is unknown.
    match found.filter(|s| s.kind == SessionKind::Streamable && s.is_owned_by(key.as_deref()) && s.server() == caller.server_name()) {
        Some(session) => {
            app.sessions.touch(&session);
            Ok(session)
        }
        None => Err(Rejection::new(
            StatusCode::NOT_FOUND,
            code::SESSION_NOT_FOUND,
            "Session not found: it expired or was terminated; initialize a new session",
        )),
    }
}

/// V-02: a version header, when present, must be one this server speaks for sessions.
fn check_version_header(headers: &HeaderMap) -> Result<(), Rejection> {
    let Some(v) = headers::get(headers, &headers::PROTOCOL_VERSION) else { return Ok(()) };
    match v.parse::<ProtocolVersion>() {
        Ok(version) if version.era() == Era::Legacy => Ok(()),
        _ => Err(Rejection::transport(
            StatusCode::BAD_REQUEST,
            format!(
                "Bad Request: unsupported MCP-Protocol-Version {v:?} for a session; supported: {}",
                ProtocolVersion::legacy_strings().join(", ")
            ),
        )),
    }
}

async fn legacy(app: &McpState, headers: &HeaderMap, message: Incoming, caller: &Caller) -> Response<Body> {
    if let Incoming::Request(req) = &message
        && req.method == "initialize"
    {
        return initialize(app, headers, req, caller).await;
    }
    let session = match session_for(app, headers, caller).await {
        Ok(s) => s,
        Err(rejection) => return rejection.into_response(),
    };
    if let Err(rejection) = check_version_header(headers) {
        return rejection.into_response();
    }
    match message {
        Incoming::Notification(n) => {
            on_notification(app, &session, &n);
            headers::accepted()
        }
        Incoming::Response(r) => {
            on_response(app, &session, r);
            headers::accepted()
        }
        Incoming::Request(req) => {
            let version = session.version();
            let rx = start_on_session(app, &session, req, caller);
            exchange::answer(
                rx,
                Answer {
                    keep_alive: app.settings.keep_alive(),
                    close: session.closed.clone(),
                    priming: version.has_priming_events(),
                    session: Some(session),
                    retry_ms: app.settings.sse.retry_ms,
                    buffer: app.settings.sse.stream_buffer,
                    drop_guard: None,
                },
            )
            .await
        }
    }
}

/// Runs a request within a legacy session; its token is tracked for `notifications/cancelled`.
pub(crate) fn start_on_session(
    app: &McpState,
    session: &Arc<Session>,
    req: Request,
    caller: &Caller,
) -> tokio::sync::mpsc::Receiver<Frame> {
    let cancel = session.closed.child_token();
    session.track(req.id.clone(), cancel.clone());
    exchange::start(
        app.server.clone(),
        req,
        Spec {
            version: session.version(),
            caps: session.caps(),
            log_level: Some(session.log_level.clone()),
            session: Some(session.clone()),
            caller: caller.clone(),
            cancel,
            buffer: app.settings.sse.stream_buffer,
            client_timeout: app.sessions.client_request_timeout(),
            status_of: exchange::legacy_status,
            audit: app.audit.clone(),
        },
    )
}

/// A client's answer to a server-to-client request. The call waiting for it may run on
/// another replica: then it goes there over the cluster channel.
pub(crate) fn on_response(app: &McpState, session: &Session, r: crate::protocol::jsonrpc::Response) {
    // Only a shared session may need the message again, for another replica; the outcome is
    // moved into the local attempt.
    let message = app.sessions.is_shared().then(|| match &r.outcome {
        Ok(result) => serde_json::json!({"jsonrpc": "2.0", "id": r.id, "result": result}),
        Err(error) => serde_json::json!({"jsonrpc": "2.0", "id": r.id, "error": error}),
    });
    let id = r.id.clone();
    if session.complete_outgoing(&r.id, r.outcome) {
        return;
    }
    match message {
        Some(message) => app.sessions.publish(crate::cluster::ClusterEvent::ClientResponse { session: session.id.to_string(), message }),
        None => tracing::debug!(id = %id, "response to an unknown or finished server request; dropped"),
    }
}

/// Client notifications in a session.
pub(crate) fn on_notification(app: &McpState, session: &Session, n: &Notification) {
    match n.method.as_str() {
        "notifications/cancelled" => {
            let raw = n.params.get("requestId");
            let id = raw.and_then(|v| serde_json::from_value::<RequestId>(v.clone()).ok());
            if let (Some(id), Some(raw)) = (id, raw)
                && !session.cancel_request(&id)
                && app.sessions.is_shared()
            {
                // The request may run on another replica.
                app.sessions.publish(crate::cluster::ClusterEvent::CancelRequest { session: session.id.to_string(), request: raw.clone() });
            }
        }
        "notifications/initialized" | "notifications/roots/list_changed" | "notifications/progress" => {}
        other => tracing::debug!(method = other, "ignoring unknown notification"),
    }
}

/// Reads an `initialize` request: the negotiated version and what the client declared.
pub(crate) fn negotiate(req: &Request) -> Result<(ProtocolVersion, ClientInfo), RpcError> {
    let requested = req
        .params
        .get("protocolVersion")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params("initialize needs a string \"protocolVersion\""))?;
    // L-03: the same version when supported, otherwise our latest (a counter-offer, not an error).
    let version = requested.parse::<ProtocolVersion>().ok().filter(|v| v.era() == Era::Legacy).unwrap_or(ProtocolVersion::LATEST_LEGACY);
    let info = req.params.get("clientInfo");
    let client = ClientInfo {
        caps: ClientCaps::from_json(req.params.get("capabilities")),
        name: info.and_then(|i| i.get("name")).and_then(Value::as_str).unwrap_or("unknown").chars().take(128).collect(),
        version: info.and_then(|i| i.get("version")).and_then(Value::as_str).unwrap_or("").chars().take(64).collect(),
    };
    Ok((version, client))
}

async fn initialize(app: &McpState, headers: &HeaderMap, req: &Request, caller: &Caller) -> Response<Body> {
    // S-09: initialize on a live session is refused; a stale id is ignored (the client is
    // re-initializing after a 404, as it must).
    let owner = caller.principal.as_deref().map(|p| Arc::<str>::from(p.key()));
    let live = match headers::get(headers, &headers::SESSION_ID) {
        Some(id) => {
            app.sessions.resolve(id).await.ok().flatten().filter(|s| s.is_owned_by(owner.as_deref()) && s.server() == caller.server_name())
        }
        None => None,
    };
    if let Some(existing) = live {
        let message = format!("Session {} is already initialized; send initialize without Mcp-Session-Id to start a new one", existing.id);
        return headers::error(StatusCode::BAD_REQUEST, Some(&req.id), &RpcError::invalid_request(message));
    }
    let (version, client) = match negotiate(req) {
        Ok(v) => v,
        Err(e) => return headers::error(StatusCode::BAD_REQUEST, Some(&req.id), &e),
    };
    // One client must not fill the session table for everyone else.
    let permit = match app.admission.hold(caller, Held::Session) {
        Ok(permit) => permit,
        Err(refused) => return refusal::http(app, &refused, Some(&req.id)),
    };
    let session = match app.sessions.create(SessionKind::Streamable, version, None, owner) {
        Ok(s) => s.holding(permit),
        Err(full) => {
            tracing::warn!(sessions = app.sessions.len(), "refusing initialize: {full}");
            let mut res = headers::transport_error(StatusCode::SERVICE_UNAVAILABLE, "Service Unavailable: too many sessions; retry later");
            res.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
            return res;
        }
    };
    session.bind_server(caller.server_name());
    tracing::info!(session = %session.id, client = %client.name, %version, server = caller.server_name().unwrap_or("default"), "session initialized");
    session.set_initialized(version, client);
    // With several replicas the session is stored before its id is given out, so the next
    // request may go to any replica.
    if app.sessions.persist(&session).await.is_err() {
        let mut res = headers::transport_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "Service Unavailable: the session store is unavailable; retry shortly",
        );
        res.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return res;
    }
    let result = app.server.initialize_result(version, caller.server.as_deref());
    let mut res = headers::json(StatusCode::OK, &jsonrpc::result_message(&req.id, &result));
    if let Ok(v) = HeaderValue::from_str(&session.id) {
        res.headers_mut().insert(headers::SESSION_ID, v);
    }
    res
}

/// B-01: batches, for 2025-03-26 sessions only, answered with one JSON array. Every item is
/// admitted on its own, exactly like a message sent alone: a refused request is answered with
/// its error in the array, a refused notification or response is dropped.
async fn batch(app: &McpState, headers: &HeaderMap, items: Vec<Value>, caller: &Caller) -> Response<Body> {
    if items.is_empty() {
        return headers::error(StatusCode::BAD_REQUEST, None, &RpcError::invalid_request("An empty batch is not a valid JSON-RPC request"));
    }
    let most = app.settings.server.max_batch_items;
    if items.len() > most {
        let message = format!("A batch may hold at most {most} messages (server.max_batch_items); send {} in several", items.len());
        return headers::error(StatusCode::BAD_REQUEST, None, &RpcError::invalid_request(message));
    }
    let mut messages = Vec::with_capacity(items.len());
    for item in items {
        match Incoming::from_value(item) {
            Ok(Incoming::Request(r)) if r.method == "initialize" => {
                return headers::error(
                    StatusCode::BAD_REQUEST,
                    Some(&r.id),
                    &RpcError::invalid_request("initialize must not be part of a batch"),
                );
            }
            parsed => messages.push(parsed),
        }
    }
    let session = match session_for(app, headers, caller).await {
        Ok(s) => s,
        Err(rejection) => return rejection.into_response(),
    };
    if let Err(rejection) = check_version_header(headers) {
        return rejection.into_response();
    }
    if !session.version().allows_batches() {
        return headers::error(
            StatusCode::BAD_REQUEST,
            None,
            &RpcError::invalid_request(format!(
                "JSON-RPC batches are not part of protocol {}; send one message per request",
                session.version()
            )),
        );
    }
    let mut pending = Vec::new();
    let mut replies = Vec::new();
    for message in messages {
        let message = match message {
            Ok(message) => message,
            Err(bad) => {
                replies.push(jsonrpc::error_message(bad.id.as_ref(), &bad.error));
                continue;
            }
        };
        if let Incoming::Request(r) = &message {
            crate::metrics::record::mcp_request(&r.method, McpEra::Legacy);
        }
        if let Err(refused) = app.admission.message(caller, &message).await {
            if let Incoming::Request(r) = &message {
                replies.push(refusal::jsonrpc(&refused, Some(&r.id)));
            }
            continue;
        }
        match message {
            Incoming::Notification(n) => on_notification(app, &session, &n),
            Incoming::Response(r) => on_response(app, &session, r),
            Incoming::Request(req) => pending.push(start_on_session(app, &session, req, caller)),
        }
    }
    if pending.is_empty() && replies.is_empty() {
        return headers::accepted();
    }
    for mut rx in pending {
        // A batch is answered as JSON, so related notifications have nowhere to go.
        while let Some(frame) = rx.recv().await {
            if let Frame::Final { json, .. } = frame {
                if let Ok(v) = serde_json::from_str::<Value>(&json) {
                    replies.push(v);
                }
                break;
            }
        }
    }
    headers::json(StatusCode::OK, &Value::Array(replies))
}

/// GET: the session's standalone stream, or a resumed stream with `Last-Event-ID`.
pub async fn get(State(app): State<McpState>, caller: Caller, headers: HeaderMap) -> Response<Body> {
    if !headers.contains_key(headers::SESSION_ID) {
        // Modern clients use subscriptions/listen; a GET without a session has no stream.
        return headers::method_not_allowed("POST, DELETE");
    }
    if !headers::accepts(&headers).sse {
        return headers::transport_error(StatusCode::NOT_ACCEPTABLE, "Not Acceptable: a GET stream needs Accept: text/event-stream");
    }
    let session = match session_for(&app, &headers, &caller).await {
        Ok(s) => s,
        Err(rejection) => return rejection.into_response(),
    };
    if let Err(rejection) = check_version_header(&headers) {
        return rejection.into_response();
    }
    let permit = match app.admission.stream(&caller, Held::GetStream).await {
        Ok(permit) => permit,
        Err(refused) => return refusal::http(&app, &refused, None),
    };
    let version = session.version();
    let buffer = app.settings.sse.stream_buffer;
    let mut options = sse::BodyOptions { kind: Some(crate::metrics::SseKind::Get), guard: permit.map(sse::guard), ..Default::default() };
    // The standalone stream carries notifications only and ends when shutdown begins; a
    // resumed request stream stays until its answer (or the end of the grace period).
    let mut close = session.notifications_closed.clone();
    // With several replicas, a stream this replica does not hold may be another's (the load
    // balancer sent the reconnect elsewhere, or that replica died): its events cannot be
    // replayed here. The client gets a fresh GET stream and a `list_changed`, since a change
    // may have been missed; never an error that would end a healthy session, and never
    // another stream's events.
    let last_event_id = headers::get(&headers, &headers::LAST_EVENT_ID)
        .filter(|raw| !app.sessions.is_shared() || parse_event_id(raw).is_some_and(|(key, _)| session.find_stream(key).is_some()));
    let over_notify = last_event_id.is_none() && headers.contains_key(headers::LAST_EVENT_ID);
    let live = match last_event_id {
        Some(raw) => {
            // R-03/R-04: only a stream of this very session can be resumed.
            let resumed = parse_event_id(raw)
                .and_then(|(key, seq)| session.find_stream(key).map(|s| (s, seq)))
                .inspect(|(stream, _)| {
                    if !session.is_get_stream(stream) {
                        close = session.closed.clone();
                    }
                })
                .ok_or_else(|| crate::session::ResumeError::Unknown(raw.to_owned()))
                .and_then(|(stream, seq)| stream.attach(Some((raw.to_owned(), seq))));
            match resumed {
                Ok(rx) => rx,
                Err(e) => return headers::transport_error(StatusCode::BAD_REQUEST, format!("Bad Request: {e}")),
            }
        }
        None => {
            let stream = session.get_stream(buffer);
            if version.has_priming_events() {
                options.preamble.push(sse::priming_event(&stream.position_id(), app.settings.sse.retry_ms));
            }
            match stream.attach(None) {
                Ok(rx) => {
                    if over_notify {
                        stream.push(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#, false);
                    }
                    rx
                }
                Err(e) => return headers::transport_error(StatusCode::BAD_REQUEST, format!("Bad Request: {e}")),
            }
        }
    };
    if version.has_priming_events() {
        options.on_close = Some(sse::retry_hint(app.settings.sse.retry_ms));
    }
    sse::response(sse::body(live, app.settings.keep_alive(), close, options))
}

/// DELETE: ends the session (S-08); its id then gets 404.
pub async fn delete(State(app): State<McpState>, caller: Caller, headers: HeaderMap) -> Response<Body> {
    if !headers.contains_key(headers::SESSION_ID) {
        return headers::method_not_allowed("POST");
    }
    if let Err(refused) = app.admission.request(&caller, "delete").await {
        return refusal::http(&app, &refused, None);
    }
    let session = match session_for(&app, &headers, &caller).await {
        Ok(s) => s,
        Err(rejection) => return rejection.into_response(),
    };
    // Everywhere: here, in the shared store, and on every replica holding a copy.
    app.sessions.end(&session.id).await;
    tracing::info!(session = %session.id, "session terminated by the client");
    let mut res = Response::new(Body::empty());
    *res.status_mut() = StatusCode::OK;
    res
}

/// Any other HTTP method: 405 with `Allow` (T-03).
pub async fn other_method() -> Response<Body> {
    headers::method_not_allowed("GET, POST, DELETE")
}
