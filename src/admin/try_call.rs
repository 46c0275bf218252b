//! `POST /admin/tools/{name}/call`: the console's tool try-out. It is an MCP `tools/call` made
//! with the admin's own token, and it takes the path every MCP message takes, with nothing left
//! out: the scopes every MCP request needs (`auth.required_scopes`, which the admin gate does not
//! ask for), then [`Admission`](crate::admission::Admission) (the method's scopes, the caller's
//! and the tool's rate limits, refusals counted and audited), then the server's own
//! `tools/call` ([`crate::transport::exchange`], as a 2026-07-28 request: no session), which
//! checks the tool's scopes, validates the arguments, runs the tool under its timeout and
//! concurrency limits, records its metrics and writes its audit record. There is no second way
//! to run a tool.
//!
//! The answer is the tool's result (`is_error` when the tool reported a failure) with the
//! notifications it sent on the way; a refusal is a problem document saying what to change.
//! A request that accepts `text/event-stream` gets the same answer as the last event of a
//! stream that carries the tool's progress as it comes ([`super::try_stream`]). Either way, the
//! admin's connection closing before the answer cancels the call.

use std::time::Instant;

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::actor::Actor;
use super::extract::{JsonBody, ToolName};
use super::problem::{Kind, Problem};
use super::state::AdminState;
use crate::admission::Refused;
use crate::audit::{AuditRecord, EventKind, Outcome};
use crate::auth::bearer::Refusal;
use crate::caller::Caller;
use crate::protocol::ProtocolVersion;
use crate::protocol::jsonrpc::{Incoming, Request, RequestId, code};
use crate::tool::ClientCaps;
use crate::tooldef::FieldError;
use crate::transport::exchange::{self, Frame, Spec};

/// Notifications kept for the answer (progress, log messages); later ones are counted only.
const MAX_NOTIFICATIONS: usize = 100;

/// `POST /admin/tools/{name}/call` with `{"arguments": {...}}`.
pub async fn call(
    State(app): State<AdminState>,
    ToolName(name): ToolName,
    Actor(mut caller): Actor,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Result<Response, Problem> {
    let arguments = arguments(body)?;
    require_mcp_scopes(&app, &caller)?;
    // The verified token, for an upstream tool's token exchange, as the MCP gate keeps it.
    if let Ok(token) = crate::auth::bearer::bearer_token(&headers)
        && caller.principal.is_some()
    {
        caller.token = Some(crate::principal::BearerToken::new(token));
    }
    let mut params = Map::new();
    params.insert("name".into(), json!(name));
    params.insert("arguments".into(), Value::Object(arguments));
    // Progress notifications are sent only to a caller that asks for them.
    params.insert("_meta".into(), json!({"progressToken": "admin-console"}));
    let request = Request { id: RequestId::String("admin-console".into()), method: "tools/call".into(), params };
    let message = Incoming::Request(request.clone());
    app.mcp.admission.message(&caller, &message).await.map_err(|refused| admission_problem(&name, &refused))?;
    let running = start(&app, request, caller.clone());
    if super::try_stream::wanted(&headers) {
        return Ok(super::try_stream::answer(app, name, caller, running));
    }
    let (final_json, notes, started) = running.wait().await?;
    answer(&app, &name, &caller, &final_json, notes, started).map(|answer| Json(answer).into_response())
}

/// The answer to a call that ended with `final_json` (its JSON-RPC response): the result and
/// the notifications before it, or the error as a problem.
pub(super) fn answer(
    app: &AdminState,
    name: &str,
    caller: &Caller,
    final_json: &str,
    notes: Notes,
    started: Instant,
) -> Result<Value, Problem> {
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let answer: Value = serde_json::from_str(final_json).map_err(|e| {
        tracing::error!(error = %e, "admin try-out: the call's answer is not JSON");
        Problem::new(Kind::Internal, "the call's answer could not be read; the server logged the details")
    })?;
    if let Some(error) = answer.get("error") {
        return Err(call_problem(app, name, caller, error));
    }
    let result = answer.get("result").cloned().unwrap_or(Value::Null);
    let is_error = result.get("isError").and_then(Value::as_bool).unwrap_or(false);
    Ok(json!({
        "tool": name,
        "is_error": is_error,
        "result": result,
        "notifications": notes.kept,
        "notifications_dropped": notes.dropped,
        "duration_ms": duration_ms,
    }))
}

/// `arguments` from the body: an object, or absent for none.
fn arguments(body: Value) -> Result<Map<String, Value>, Problem> {
    let Value::Object(mut body) = body else {
        return Err(bad("body", "must be a JSON object: {\"arguments\": {...}}".into()));
    };
    if let Some(other) = body.keys().find(|k| *k != "arguments") {
        return Err(bad(other, format!("unknown member {other:?}; only `arguments` is read")));
    }
    match body.remove("arguments") {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(arguments)) => Ok(arguments),
        Some(_) => Err(bad("arguments", "must be a JSON object of the tool's arguments".into())),
    }
}

fn bad(field: &str, message: String) -> Problem {
    Problem::new(Kind::MalformedRequest, format!("{field}: {message}")).with_errors(vec![FieldError::new(field, message)])
}

/// What the MCP endpoint's bearer gate asks of every request: the token carries
/// `auth.required_scopes`. The admin gate let the request in on the admin scope alone.
fn require_mcp_scopes(app: &AdminState, caller: &Caller) -> Result<(), Problem> {
    let (Some(auth), Some(principal)) = (&app.auth, caller.principal.as_deref()) else { return Ok(()) };
    let missing: Vec<&str> = auth.required_scopes().iter().filter(|s| !principal.has_scope(s)).map(String::as_str).collect();
    if missing.is_empty() {
        return Ok(());
    }
    if let Some(audit) = &app.audit {
        let record =
            AuditRecord::new(EventKind::AuthzDenied, Outcome::Denied).with_detail("admin try-out: insufficient scope for MCP requests");
        caller.audit_in_background(audit, record);
    }
    Err(Problem::new(
        Kind::InsufficientScope,
        format!(
            "trying a tool is an MCP call made with this token, so it needs the scopes every MCP request needs (auth.required_scopes) besides the admin scope; add {}",
            missing.join(" ")
        ),
    )
    .with_member("missing_scopes", json!(missing)))
}

/// The notifications a call sent before its answer: at most [`MAX_NOTIFICATIONS`] kept, the
/// rest counted.
#[derive(Debug, Default)]
pub(super) struct Notes {
    pub kept: Vec<Value>,
    pub dropped: usize,
}

impl Notes {
    /// Whether the next notification is kept (else it is only counted).
    pub fn has_room(&self) -> bool {
        self.kept.len() < MAX_NOTIFICATIONS
    }

    pub fn push(&mut self, message: Value) {
        if self.has_room() {
            self.kept.push(message);
        } else {
            self.dropped += 1;
        }
    }
}

/// A call on the server's call path, until its answer. Dropped before it (the admin's
/// connection closed), it cancels the call.
pub(super) struct Running {
    pub frames: mpsc::Receiver<Frame>,
    cancel_on_drop: Option<DropGuard>,
    pub started: Instant,
}

impl Running {
    /// The call answered: nothing is left to cancel.
    pub fn answered(&mut self) {
        if let Some(guard) = self.cancel_on_drop.take() {
            guard.disarm();
        }
    }

    /// Waits for the answer: the final JSON-RPC message and the notifications before it.
    async fn wait(mut self) -> Result<(String, Notes, Instant), Problem> {
        let mut notes = Notes::default();
        while let Some(frame) = self.frames.recv().await {
            match frame {
                Frame::Final { json, .. } => {
                    self.answered();
                    return Ok((json, notes, self.started));
                }
                Frame::Message(json) => notes.push(serde_json::from_str(&json).unwrap_or(Value::String(json))),
                Frame::Detach => {}
            }
        }
        Err(ended_without_answer())
    }
}

/// The call was cancelled (the server is shutting down) before it answered.
pub(super) fn ended_without_answer() -> Problem {
    Problem::new(Kind::Unavailable, "the call ended without an answer: the server is shutting down; retry on another replica")
}

/// Starts the request on the server's call path.
fn start(app: &AdminState, request: Request, caller: Caller) -> Running {
    let cancel = CancellationToken::new();
    let cancel_on_drop = Some(cancel.clone().drop_guard());
    let settings = &app.settings;
    let frames = exchange::start(
        app.server.clone(),
        request,
        Spec {
            version: ProtocolVersion::LATEST_MODERN,
            session: None,
            caller,
            // The console declares no client capabilities: a tool that needs sampling or
            // elicitation says so in its answer.
            caps: ClientCaps::default(),
            log_level: Some(std::sync::Arc::new(std::sync::atomic::AtomicU8::new(crate::tool::LogLevel::Info as u8))),
            cancel,
            buffer: settings.sse.stream_buffer,
            client_timeout: app.mcp.sessions.client_request_timeout(),
            status_of: crate::transport::modern::status_of,
            audit: app.audit.clone(),
        },
    );
    Running { frames, cancel_on_drop, started: Instant::now() }
}

/// An admission refusal as a problem: 403 naming the scopes, or the limit's 429 (503) with
/// `Retry-After`.
fn admission_problem(name: &str, refused: &Refused) -> Problem {
    match refused {
        Refused::Scope(refusal) => {
            let needed = match refusal {
                Refusal::InsufficientScope(shortfall) => shortfall.missing.join(" "),
                _ => String::new(),
            };
            Problem::new(
                Kind::InsufficientScope,
                format!(
                    "this token may not call tools: tools/call needs the scopes {needed} (auth.method_scopes); use a token that has them"
                ),
            )
            .with_member("scope", json!(needed))
        }
        Refused::Limited(rejection) => {
            let kind =
                if rejection.status() == axum::http::StatusCode::SERVICE_UNAVAILABLE { Kind::Unavailable } else { Kind::TooManyRequests };
            let (header, value) = rejection.retry_after_header();
            Problem::new(kind, format!("{} (calling {name} as this token's client)", rejection.rpc_error().message))
                .with_status(rejection.status())
                .with_header(header, value)
                .with_member("limit", json!(rejection.reason.as_str()))
        }
    }
}

/// The call was answered with a JSON-RPC error. "Unknown tool" becomes 404, or 403 naming the
/// scopes when the tool exists but this token may not use it (the server reports both alike, so
/// an MCP client learns nothing about tools it may not see; an operator may know). Anything else
/// is 422 `call-failed` with the error's code, message and data.
fn call_problem(app: &AdminState, name: &str, caller: &Caller, error: &Value) -> Problem {
    let code = error.get("code").and_then(Value::as_i64).unwrap_or_default();
    let message = error.get("message").and_then(Value::as_str).unwrap_or("the call failed");
    if code == i64::from(code::INVALID_PARAMS) && message.starts_with("Unknown tool") {
        let set = app.server.tools.snapshot();
        let Some(tool) = set.get(name) else {
            return Problem::not_found(format!("no tool called {name:?} is served; GET /admin/catalog lists those that are"));
        };
        let principal = caller.principal.as_deref();
        let configured = app.settings.auth.tool_scopes.get(name).into_iter().flatten();
        let missing: Vec<&str> =
            configured.chain(tool.tool.scopes()).filter(|s| principal.is_some_and(|p| !p.has_scope(s))).map(String::as_str).collect();
        return Problem::new(
            Kind::InsufficientScope,
            format!(
                "this token may not call {name}: the tool needs the scopes {} (auth.tool_scopes and the tool's own scopes)",
                missing.join(" ")
            ),
        )
        .with_member("missing_scopes", json!(missing));
    }
    Problem::new(Kind::CallFailed, format!("{name}: {message}"))
        .with_member("code", json!(code))
        .with_member("data", error.get("data").cloned().unwrap_or(Value::Null))
}
