//! The 2026-07-28 era on the MCP endpoint: stateless requests validated in the order the
//! spec's probes expect (headers naming the method, `_meta`, header/body version agreement,
//! supported version, known method), then served; and `subscriptions/listen` streams.

use std::sync::Arc;
use std::sync::atomic::AtomicU8;

use axum::body::Body;
use axum::http::{HeaderMap, Response, StatusCode};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::exchange::{self, Answer, Spec};
use super::listen::Filter;
use super::state::McpState;
use super::{headers, sse};
use crate::protocol::jsonrpc::{self, Incoming, Request, RpcError, code};
use crate::protocol::{Era, ProtocolVersion};
use crate::tool::{ClientCaps, LogLevel};

const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CAPS: &str = "io.modelcontextprotocol/clientCapabilities";
const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";

/// Methods of the modern era; anything else is 404 + -32601 (including the removed
/// `initialize`, `ping`, `logging/setLevel` and `resources/(un)subscribe`).
const METHODS: &[&str] = &[
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "subscriptions/listen",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
];

/// HTTP status for a JSON-RPC error answered as plain JSON in the modern era.
pub fn status_of(code: i32) -> StatusCode {
    match code {
        code::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        code::HEADER_MISMATCH | code::MISSING_CLIENT_CAPABILITY | code::UNSUPPORTED_PROTOCOL_VERSION => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

pub(crate) async fn post(app: &McpState, headers: &HeaderMap, message: Incoming, caller: crate::caller::Caller) -> Response<Body> {
    let req = match message {
        // Modern clients send no session notifications that need work; accept and drop.
        Incoming::Notification(_) => return headers::accepted(),
        Incoming::Response(r) => {
            let e = RpcError::invalid_request(
                "Responses are not accepted in protocol 2026-07-28: the server sends no requests (it uses input_required results)",
            );
            return headers::error(StatusCode::BAD_REQUEST, Some(&r.id), &e);
        }
        Incoming::Request(req) => req,
    };
    let checked = match validate(headers, &req).and_then(|c| check_param_headers(app, headers, &req, &caller).map(|()| c)) {
        Ok(checked) => checked,
        Err((status, error)) => return headers::error(status, Some(&req.id), &error),
    };
    if req.method == "subscriptions/listen" {
        return listen(app, &req, &caller, checked.caps.tasks).await;
    }
    let cancel = CancellationToken::new();
    let rx = exchange::start(
        app.server.clone(),
        req,
        Spec {
            version: checked.version,
            session: None,
            caller,
            caps: checked.caps,
            log_level: checked.log_level,
            cancel: cancel.clone(),
            buffer: app.settings.sse.stream_buffer,
            client_timeout: app.sessions.client_request_timeout(),
            status_of,
            audit: app.audit.clone(),
        },
    );
    exchange::answer(
        rx,
        Answer {
            keep_alive: app.settings.keep_alive(),
            // Not the shutdown token: a call in flight keeps its stream through the grace
            // period and ends it with its answer (a stopped call's included).
            close: CancellationToken::new(),
            session: None,
            priming: false,
            retry_ms: app.settings.sse.retry_ms,
            buffer: app.settings.sse.stream_buffer,
            // A closed response stream cancels the request (2026-07-28 cancellation).
            drop_guard: Some(cancel.drop_guard()),
        },
    )
    .await
}

/// What the per-request `_meta` declared.
struct Checked {
    version: ProtocolVersion,
    caps: ClientCaps,
    log_level: Option<Arc<AtomicU8>>,
}

type Refusal = (StatusCode, RpcError);

fn validate(headers: &HeaderMap, req: &Request) -> Result<Checked, Refusal> {
    let bad = |code: i32, message: String| (StatusCode::BAD_REQUEST, RpcError::new(code, message));

    // 1. Mcp-Method / Mcp-Name must repeat the body (SEP-2243).
    match header_value(headers, &headers::MCP_METHOD) {
        Some(m) if m == req.method => {}
        Some(m) => {
            return Err(bad(
                code::HEADER_MISMATCH,
                format!("Header mismatch: Mcp-Method {m:?} does not match the body method {:?}", req.method),
            ));
        }
        None => return Err(bad(code::HEADER_MISMATCH, "Header mismatch: the Mcp-Method header is required".into())),
    }
    let name_key = match req.method.as_str() {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        // So a balancer can route on the task id without reading the body.
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    };
    if let Some(key) = name_key {
        let body = req.params.get(key).and_then(Value::as_str);
        match header_value(headers, &headers::MCP_NAME) {
            Some(h) if Some(h.as_str()) == body => {}
            Some(h) => return Err(bad(code::HEADER_MISMATCH, format!("Header mismatch: Mcp-Name {h:?} does not match params.{key}"))),
            None => return Err(bad(code::HEADER_MISMATCH, format!("Header mismatch: the Mcp-Name header is required for {}", req.method))),
        }
    }

    // 2. `_meta` must carry the version and the client's capabilities.
    let meta = req.params.get("_meta").and_then(Value::as_object);
    let version = meta.and_then(|m| m.get(META_VERSION)).and_then(Value::as_str);
    let caps = meta.and_then(|m| m.get(META_CAPS)).filter(|c| c.is_object());
    let (Some(meta), Some(version), Some(caps)) = (meta, version, caps) else {
        return Err(bad(
            code::INVALID_PARAMS,
            format!("Invalid params: _meta must carry {META_VERSION} (a string) and {META_CAPS} (an object)"),
        ));
    };

    // 3. The header must agree with the body.
    match headers::get(headers, &headers::PROTOCOL_VERSION) {
        Some(h) if h == version => {}
        Some(h) => {
            return Err(bad(
                code::HEADER_MISMATCH,
                format!("Header mismatch: MCP-Protocol-Version header {h:?} does not match _meta value {version:?}"),
            ));
        }
        None => return Err(bad(code::HEADER_MISMATCH, "Header mismatch: the MCP-Protocol-Version header is required".into())),
    }

    // 4. A version this server speaks without initialize.
    let version = match version.parse::<ProtocolVersion>() {
        Ok(v) if v.era() == Era::Modern => v,
        _ => {
            let supported: Vec<&str> = ProtocolVersion::ALL.iter().filter(|v| v.era() == Era::Modern).map(|v| v.as_str()).collect();
            let error = RpcError::new(code::UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version")
                .with_data(json!({ "supported": supported, "requested": version }));
            return Err((StatusCode::BAD_REQUEST, error));
        }
    };

    // 5. A method of this era.
    if !METHODS.contains(&req.method.as_str()) {
        return Err((StatusCode::NOT_FOUND, RpcError::method_not_found(&req.method)));
    }

    let log_level = match meta.get(META_LOG_LEVEL) {
        None => None,
        Some(level) => {
            let parsed = level
                .as_str()
                .and_then(LogLevel::parse)
                .ok_or_else(|| bad(code::INVALID_PARAMS, format!("Invalid params: unknown {META_LOG_LEVEL} {level}")))?;
            Some(Arc::new(AtomicU8::new(parsed as u8)))
        }
    };
    Ok(Checked { version, caps: ClientCaps::from_json(Some(caps)), log_level })
}

/// SEP-2243: a tool argument whose schema names an `x-mcp-header` must be mirrored in an
/// `Mcp-Param-<name>` header with the same value, so intermediaries can route on it without
/// parsing the body. Missing, undecodable or different: 400 + -32020.
fn check_param_headers(app: &McpState, headers: &HeaderMap, req: &Request, caller: &crate::caller::Caller) -> Result<(), Refusal> {
    if req.method != "tools/call" {
        return Ok(());
    }
    let Some(name) = req.params.get("name").and_then(Value::as_str) else { return Ok(()) };
    let set = app.server.tool_set(caller);
    let Some(tool) = set.get(name) else { return Ok(()) };
    let arguments = req.params.get("arguments").and_then(Value::as_object);
    for (property, suffix) in &tool.header_params {
        let Some(value) = arguments.and_then(|a| a.get(property)) else { continue };
        let expected = match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let header = format!("mcp-param-{}", suffix.to_ascii_lowercase());
        let mismatch = |why: String| {
            (StatusCode::BAD_REQUEST, RpcError::new(code::HEADER_MISMATCH, format!("Header mismatch: Mcp-Param-{suffix} {why}")))
        };
        let Some(raw) = headers.get(header.as_str()) else {
            return Err(mismatch(format!("is required because arguments.{property} is present")));
        };
        let raw = raw.to_str().map_err(|_| mismatch("is not visible ASCII".into()))?;
        let decoded = decode_header_value(raw).ok_or_else(|| mismatch("is not valid padded base64".into()))?;
        if decoded != expected {
            return Err(mismatch(format!("does not match arguments.{property}")));
        }
    }
    Ok(())
}

/// A header value with surrounding whitespace trimmed and `=?base64?…?=` decoded.
fn header_value(headers: &HeaderMap, name: &axum::http::HeaderName) -> Option<String> {
    decode_header_value(headers::get(headers, name)?)
}

/// SEP-2243 header encoding: trimmed, and `=?base64?…?=` (padded base64 of UTF-8) decoded;
/// `None` when the encoded form does not decode.
fn decode_header_value(raw: &str) -> Option<String> {
    let raw = raw.trim();
    match raw.strip_prefix("=?base64?").and_then(|r| r.strip_suffix("?=")) {
        Some(inner) => String::from_utf8(STANDARD.decode(inner).ok()?).ok(),
        None => Some(raw.to_owned()),
    }
}

/// `subscriptions/listen`: acknowledges at once, then carries the requested change
/// notifications until the client closes it or the server shuts down. The request was admitted
/// as a message; the stream also takes a slot under the client's cap.
async fn listen(app: &McpState, req: &Request, caller: &crate::caller::Caller, tasks_extension: bool) -> Response<Body> {
    let Some(notifications) = req.params.get("notifications").and_then(Value::as_object) else {
        let e = RpcError::invalid_params("subscriptions/listen needs a \"notifications\" object naming what to listen for");
        return headers::error(StatusCode::OK, Some(&req.id), &e);
    };
    let task_ids = match super::listen::listened_tasks(app.server.tasks(), notifications, caller, tasks_extension).await {
        Ok(ids) => ids,
        Err(e) => return headers::error(status_of(e.code), Some(&req.id), &e),
    };
    let permit = match app.admission.hold(caller, crate::limits::Held::ListenStream) {
        Ok(permit) => permit,
        Err(refused) => return super::refusal::http(app, &refused, Some(&req.id)),
    };
    let server = &app.server;
    // A virtual server offers prompts and resources only when it selects some.
    let (prompts, resources) = match &caller.server {
        None => (true, true),
        Some(vs) => (vs.has_prompts(), vs.has_resources()),
    };
    let mut filter = Filter::parse(notifications, prompts && server.prompts.is_offered(), resources && server.resources.is_offered());
    filter.task_ids = task_ids;
    let meta = json!({ "io.modelcontextprotocol/subscriptionId": req.id });
    let mut ack = Map::new();
    ack.insert("_meta".into(), meta.clone());
    ack.insert("notifications".into(), filter.to_json());
    let ack = jsonrpc::notification_message("notifications/subscriptions/acknowledged", Some(Value::Object(ack)));
    let closing = jsonrpc::result_message(&req.id, &json!({ "resultType": "complete", "_meta": meta }));

    let (tx, rx) = mpsc::channel(app.settings.sse.stream_buffer);
    let guard = app.listeners.register(req.id.clone(), filter, tx, caller.server_name());
    let options = sse::BodyOptions {
        preamble: vec![sse::message_event(None, &ack.to_string())],
        on_close: Some(sse::message_event(None, &closing.to_string())),
        guard: Some(sse::guard((guard, permit))),
        kind: Some(crate::metrics::SseKind::Listen),
    };
    sse::response(sse::body(rx, app.settings.keep_alive(), app.shutdown.clone(), options))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn header_values_are_trimmed_and_base64_decoded() {
        let mut h = HeaderMap::new();
        h.insert(headers::MCP_NAME, HeaderValue::from_static("  calc  "));
        assert_eq!(header_value(&h, &headers::MCP_NAME).as_deref(), Some("calc"));
        h.insert(headers::MCP_NAME, HeaderValue::from_static("=?base64?SGVsbG8=?="));
        assert_eq!(header_value(&h, &headers::MCP_NAME).as_deref(), Some("Hello"));
        h.insert(headers::MCP_NAME, HeaderValue::from_static("=?base64?SGVs!!!bG8=?="));
        assert_eq!(header_value(&h, &headers::MCP_NAME), None);
    }

    #[test]
    fn statuses_follow_the_transport_spec() {
        assert_eq!(status_of(code::METHOD_NOT_FOUND), StatusCode::NOT_FOUND);
        assert_eq!(status_of(code::MISSING_CLIENT_CAPABILITY), StatusCode::BAD_REQUEST);
        assert_eq!(status_of(code::INVALID_PARAMS), StatusCode::OK);
    }
}
