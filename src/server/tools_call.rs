//! `tools/call`: look-up, argument validation, execution with timeout, cancellation and
//! panic isolation, output checks, and the mapping of every outcome to a result.

use std::panic::AssertUnwindSafe;

use futures_util::FutureExt as _;
use serde_json::{Map, Value, json};
use tracing::Instrument as _;

use super::{McpServer, RequestCtx};
use crate::audit::{AuditRecord, EventKind, Outcome};
use crate::protocol::jsonrpc::{RpcError, code};
use crate::protocol::{CallToolResult, Content, Era};
use crate::tool::RegisteredTool;
use crate::tool::bulkhead::Refused;
use std::sync::Arc;
use tokio::sync::OwnedSemaphorePermit;

use crate::tool::{ContextParts, Mrtr, ToolContext, ToolError, schema};

/// What the audit record of a call needs from its run: how it ended, and whether the tool
/// keeps its arguments in the record.
struct Report {
    outcome: Outcome,
    keep_arguments: bool,
    /// The tool's own fields to redact from kept arguments.
    redact: Vec<String>,
    /// The registered tool the call named (its metrics label), if any.
    tool: Option<Arc<RegisteredTool>>,
}

/// How a call ended, before it becomes a JSON-RPC result.
enum Ended {
    Done(Result<CallToolResult, ToolError>),
    TimedOut(u64),
    Panicked,
    /// The client cancelled: no response is sent (U-11).
    Cancelled,
    /// The server's shutdown grace period ran out: the call answers that it was stopped.
    Halted,
}

impl McpServer {
    /// Runs a call and writes its audit record before the answer leaves (with `sync`
    /// durability the record is stored by then).
    pub(super) async fn call_tool(
        &self,
        params: &Map<String, Value>,
        ctx: &RequestCtx,
        mrtr: Option<Arc<Mrtr>>,
    ) -> Result<Value, RpcError> {
        let started = std::time::Instant::now();
        let mut report = Report { outcome: Outcome::Ok, keep_arguments: false, redact: Vec::new(), tool: None };
        // The tool's name only (a registry key, cut short if a client sends a long one); never
        // the arguments.
        let name = params.get("name").and_then(Value::as_str).unwrap_or("");
        let span = tracing::info_span!("tool", tool = short(name), outcome = tracing::field::Empty);
        let answer = self.run_call(params, ctx, mrtr, &mut report).instrument(span.clone()).await;
        span.record("outcome", report.outcome.as_str());
        let elapsed = started.elapsed();
        match report.tool.as_deref() {
            Some(tool) => tool.metrics().record(report.outcome as usize, elapsed),
            None => crate::metrics::ToolMetrics::unknown().record(report.outcome as usize, elapsed),
        }
        if let Some(audit) = &ctx.audit {
            let name = params.get("name").and_then(Value::as_str).unwrap_or("");
            let arguments = params.get("arguments").unwrap_or(&Value::Null);
            let size = answer.as_ref().ok().and_then(|v| serde_json::to_vec(v).ok()).map(|b| b.len() as u64);
            let mut record = AuditRecord::new(EventKind::ToolCall, report.outcome).with_tool(name, arguments).with_timing(elapsed, size);
            if report.keep_arguments {
                let mut sensitive = self.settings.audit.redact_field_refs();
                sensitive.extend(report.redact.iter().map(String::as_str));
                record = record.with_arguments(arguments, &sensitive);
            }
            if let Some(p) = &ctx.principal {
                record = record.with_principal(p);
            }
            if let Some(id) = &ctx.request_id {
                record = record.with_request_id(id.as_ref());
            }
            if let Some(trace) = &ctx.trace {
                record = record.with_trace_id(trace.trace_id_hex().to_string());
            }
            if let Some(ip) = ctx.client_ip {
                record = record.with_client_ip(ip);
            }
            if let Some(session) = &ctx.session {
                record = record.with_session_id(session.id.as_ref());
            }
            audit.record(record).await;
        }
        answer
    }

    async fn run_call(
        &self,
        params: &Map<String, Value>,
        ctx: &RequestCtx,
        mrtr: Option<Arc<Mrtr>>,
        report: &mut Report,
    ) -> Result<Value, RpcError> {
        report.outcome = Outcome::InvalidInput;
        let name =
            params.get("name").and_then(Value::as_str).ok_or_else(|| RpcError::invalid_params("tools/call needs a string \"name\""))?;
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(map)) => map.clone(),
            Some(_) => return Err(RpcError::invalid_params("\"arguments\" must be a JSON object")),
        };
        let set = self.tools.snapshot();
        // A tool the caller may not use is reported exactly like one that does not exist.
        if let Some(t) = set.get(name) {
            report.tool = Some(t.clone());
            if !self.may_use(t, ctx) {
                report.outcome = Outcome::Denied;
            }
        }
        let tool = set
            .get(name)
            .filter(|t| self.may_use(t, ctx))
            .ok_or_else(|| RpcError::invalid_params(format!("Unknown tool: {name}")).with_data(json!({ "name": name })))?
            .clone();
        drop(set);
        report.keep_arguments = tool.tool.opts.audit_arguments;
        report.redact.clone_from(&tool.tool.opts.redact);

        // Input validation failures are tool-execution errors the model can fix (SEP-1303).
        let args_value = Value::Object(arguments);
        if let Err(problems) = schema::check(&tool.input, &args_value) {
            return to_value(CallToolResult::error(format!("Invalid arguments for tool {name}: {problems}")));
        }
        let Value::Object(arguments) = args_value else { unreachable!("constructed as an object above") };
        report.outcome = Outcome::Ok;

        let progress_token =
            params.get("_meta").and_then(|m| m.get("progressToken")).filter(|t| t.is_string() || t.is_i64() || t.is_u64()).cloned();
        let timeout = tool.tool.opts.timeout.unwrap_or_else(|| self.default_timeout());
        // The tool's token is a child: a timeout cancels the tool, not the request.
        let tool_cancel = ctx.cancel.child_token();
        let context = ToolContext::new(ContextParts {
            tool: name.into(),
            arguments,
            cancel: tool_cancel.clone(),
            progress_token,
            log_level: ctx.log_level.clone(),
            channel: ctx.channel.clone(),
            caps: ctx.caps,
            version: ctx.version,
            mrtr: mrtr.clone(),
            principal: ctx.principal.clone(),
        });
        // Waiting for a slot counts against the call's time budget.
        let deadline = tokio::time::Instant::now() + timeout;
        let admitted = tokio::select! {
            permits = self.admit(&tool) => permits,
            () = tokio::time::sleep_until(deadline) => {
                report.outcome = Outcome::Timeout;
                return to_value(CallToolResult::error(format!("The tool {name} timed out after {} seconds waiting for a free slot; the server is busy, retry shortly", timeout.as_secs())));
            }
            () = ctx.cancel.cancelled() => {
                report.outcome = Outcome::Cancelled;
                return Err(cancelled());
            }
            () = self.halt.cancelled() => {
                report.outcome = Outcome::Cancelled;
                return to_value(CallToolResult::error(halted_message(name)));
            }
        };
        let _permits = match admitted {
            Ok(permits) => permits,
            Err(Refused::QueueFull { running, queued }) => {
                tracing::warn!(tool = name, running, queued, "tool call refused: concurrency queue full");
                report.outcome = Outcome::RateLimited;
                return to_value(CallToolResult::error(format!(
                    "The server is busy ({running} calls running, {queued} waiting); retry {name} in a few seconds"
                )));
            }
        };
        let run = AssertUnwindSafe((tool.tool.handler)(context)).catch_unwind();
        let ended = tokio::select! {
            outcome = run => match outcome {
                Ok(result) => Ended::Done(result),
                Err(_) => Ended::Panicked,
            },
            () = tokio::time::sleep_until(deadline) => Ended::TimedOut(timeout.as_secs()),
            () = ctx.cancel.cancelled() => Ended::Cancelled,
            () = self.halt.cancelled() => Ended::Halted,
        };
        // Whatever ended the call, the tool's own work stops now.
        tool_cancel.cancel();
        if ctx.cancel.is_cancelled() {
            report.outcome = Outcome::Cancelled;
            return Err(cancelled());
        }

        report.outcome = match &ended {
            Ended::Cancelled | Ended::Halted => Outcome::Cancelled,
            Ended::Panicked | Ended::Done(Err(ToolError::Internal(_))) => Outcome::InternalError,
            Ended::TimedOut(_) => Outcome::Timeout,
            Ended::Done(Err(ToolError::InvalidArguments(_) | ToolError::InvalidInputResponse(_))) => Outcome::InvalidInput,
            Ended::Done(Err(ToolError::MissingClientCapability(_))) => Outcome::Denied,
            Ended::Done(Err(ToolError::Cancelled)) => Outcome::Cancelled,
            Ended::Done(Err(ToolError::InputRequired)) => Outcome::Ok,
            Ended::Done(Err(ToolError::Failed(_))) => Outcome::ToolError,
            Ended::Done(Ok(r)) if r.is_error => Outcome::ToolError,
            Ended::Done(Ok(_)) => Outcome::Ok,
        };
        let result = match ended {
            Ended::Cancelled => return Err(cancelled()),
            Ended::Halted => {
                tracing::warn!(tool = name, "tool stopped: the shutdown grace period is over");
                CallToolResult::error(halted_message(name))
            }
            Ended::Panicked => {
                tracing::error!(tool = name, "tool panicked");
                CallToolResult::error(format!("The tool {name} failed unexpectedly; the server logged the details"))
            }
            Ended::TimedOut(secs) => {
                tracing::warn!(tool = name, secs, "tool timed out");
                CallToolResult::error(format!("The tool {name} timed out after {secs} seconds; try a smaller request"))
            }
            Ended::Done(Ok(result)) => result,
            Ended::Done(Err(ToolError::InputRequired)) => return self.input_required(mrtr.as_deref(), &format!("tools/call:{name}")),
            Ended::Done(Err(ToolError::MissingClientCapability(cap))) if ctx.era() == Era::Modern => return Err(missing_capability(cap)),
            Ended::Done(Err(e @ ToolError::InvalidInputResponse(_))) if ctx.era() == Era::Modern => {
                return Err(RpcError::invalid_params(e.to_string()));
            }
            Ended::Done(Err(ToolError::Cancelled)) => CallToolResult::error(format!("The tool {name} was stopped before it finished")),
            Ended::Done(Err(ToolError::Internal(e))) => {
                tracing::error!(tool = name, error = %e, "tool failed");
                CallToolResult::error(format!("The tool {name} failed unexpectedly; the server logged the details"))
            }
            Ended::Done(Err(e)) => CallToolResult::error(e.to_string()),
        };

        let limit = tool.tool.opts.char_limit.unwrap_or(self.settings.tools.default_char_limit);
        let result = truncate_text(result, limit);
        if let (Some(validator), false) = (&tool.output, result.is_error) {
            let problem = match &result.structured_content {
                None => Some("no structuredContent".to_owned()),
                Some(value) => schema::check(validator, value).err(),
            };
            if let Some(problem) = problem {
                tracing::error!(tool = name, problem, "tool output does not match its outputSchema");
                report.outcome = Outcome::InternalError;
                return Err(RpcError::internal());
            }
        }
        to_value(result.for_version(ctx.version))
    }

    /// Permits for a call: the tool's own limit first (so a slow tool queues behind itself
    /// without holding server-wide slots), then the server-wide one.
    async fn admit(&self, tool: &RegisteredTool) -> Result<(Option<OwnedSemaphorePermit>, OwnedSemaphorePermit), Refused> {
        let own = match &tool.bulkhead {
            Some(b) => Some(b.acquire().await?),
            None => None,
        };
        let global = self.calls.acquire().await?;
        Ok((own, global))
    }

    /// The modern answer for work that needs client input first (MRTR): the input requests
    /// and, when the handler set one, the signed state for the retry.
    pub(super) fn input_required(&self, mrtr: Option<&Mrtr>, scope: &str) -> Result<Value, RpcError> {
        let Some(mrtr) = mrtr else {
            tracing::error!(scope, "input required outside a modern request");
            return Err(RpcError::internal());
        };
        let requests = std::mem::take(&mut *mrtr.requests.lock());
        let mut result = json!({ "resultType": "input_required", "inputRequests": requests });
        if let Some(state) = mrtr.next_state.lock().take() {
            result["requestState"] = json!(self.state_signer.sign(scope, &state));
        }
        Ok(result)
    }
}

/// -32021 naming the capability the client must declare.
pub(super) fn missing_capability(cap: &str) -> RpcError {
    RpcError::new(code::MISSING_CLIENT_CAPABILITY, "Missing required client capability")
        .with_data(json!({ "requiredCapabilities": { cap: {} } }))
}

/// What a call stopped by shutdown answers: an `isError` result the model can act on.
fn halted_message(name: &str) -> String {
    format!("The server is shutting down and stopped the tool {name} before it finished; retry the call")
}

/// At most 128 characters of a client-supplied name, for logs.
fn short(name: &str) -> &str {
    name.char_indices().nth(128).map_or(name, |(i, _)| &name[..i])
}

/// The error of a request the client cancelled; transports see the cancelled token and send
/// nothing (U-11).
fn cancelled() -> RpcError {
    RpcError::new(code::TRANSPORT, "Request cancelled")
}

/// Cuts text content beyond `limit` characters (across all text blocks) and says so, in words
/// that tell the model how to get a smaller answer.
fn truncate_text(mut result: CallToolResult, limit: usize) -> CallToolResult {
    let mut budget = limit;
    let mut cut = false;
    for block in &mut result.content {
        let Content::Text { text, .. } = block else { continue };
        if cut {
            text.clear();
            continue;
        }
        let chars = text.chars().count();
        if chars <= budget {
            budget -= chars;
            continue;
        }
        let end = text.char_indices().nth(budget).map_or(text.len(), |(i, _)| i);
        text.truncate(end);
        text.push_str(&format!(
            "\n\n[Output truncated at {limit} characters. Ask for less: use the tool's filters, pagination (limit/offset/cursor) or a narrower range.]"
        ));
        cut = true;
    }
    if cut {
        result.content.retain(|b| !matches!(b, Content::Text { text, .. } if text.is_empty()));
    }
    result
}

fn to_value(result: CallToolResult) -> Result<Value, RpcError> {
    serde_json::to_value(result).map_err(|e| {
        tracing::error!(error = %e, "cannot serialize a tool result");
        RpcError::internal()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_beyond_the_limit_is_cut_with_guidance() {
        let r =
            CallToolResult::new(vec![Content::text("é".repeat(80)), Content::text("x".repeat(50)), Content::image("AA==", "image/png")]);
        let r = truncate_text(r, 100);
        let Content::Text { text, .. } = &r.content[1] else { panic!("text") };
        assert!(text.starts_with(&"x".repeat(20)) && text.contains("Output truncated at 100 characters"), "{text}");
        assert_eq!(r.content.len(), 3, "non-text blocks stay");
        let small = truncate_text(CallToolResult::text("short"), 100);
        assert_eq!(small, CallToolResult::text("short"));
    }
}
