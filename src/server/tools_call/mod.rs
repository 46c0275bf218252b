//! `tools/call`, read top to bottom: resolve the tool and its arguments, wait for a slot, run
//! the tool under its deadline with cancellation and panic isolation, map how it ended to an
//! outcome and an answer ([`ended`]), finish the result ([`result`]); then record metrics and
//! the audit record before the answer leaves.

mod ended;
mod escalate;
mod result;
mod task;
mod task_input;

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt as _;
use serde_json::{Map, Value, json};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::{McpServer, RequestCtx};
use crate::audit::{AuditRecord, EventKind, Outcome};
use crate::protocol::CallToolResult;
use crate::protocol::jsonrpc::RpcError;
use crate::tool::bulkhead::Refused;
use crate::tool::{ContextParts, Mrtr, RegisteredTool, ToolContext, schema};
use ended::{Answer, Ended, cancelled};
pub(super) use ended::{missing_capability, missing_tasks_extension};
pub(super) use task::owner;

/// What the audit record of a call needs from its run: how it ended, and whether the tool
/// keeps its arguments in the record.
struct Report {
    outcome: Outcome,
    /// Set once the caller may use the tool and the tool keeps its arguments.
    keep_arguments: bool,
    /// The registered tool the call named (its metrics label and audit policy), if any.
    tool: Option<Arc<RegisteredTool>>,
    /// The task the call became: the run's metrics and end are recorded when it ends.
    task: Option<String>,
}

impl McpServer {
    /// Runs a call and writes its audit record before the answer leaves (with `sync`
    /// durability the record is stored by then).
    pub(super) async fn call_tool(&self, params: &Map<String, Value>, ctx: &RequestCtx, mrtr: Option<Arc<Mrtr>>) -> Answer {
        let started = std::time::Instant::now();
        let mut report = Report { outcome: Outcome::Ok, keep_arguments: false, tool: None, task: None };
        // The tool's name only (a registry key, cut short if a client sends a long one); never
        // the arguments.
        let name = params.get("name").and_then(Value::as_str).unwrap_or("");
        let span = tracing::info_span!("tool", tool = short(name), outcome = tracing::field::Empty);
        let answer = self.run_call(params, ctx, mrtr, &mut report).instrument(span.clone()).await;
        span.record("outcome", report.outcome.as_str());
        let elapsed = started.elapsed();
        match report.tool.as_deref() {
            _ if report.task.is_some() => {}
            Some(tool) => tool.metrics().record(report.outcome as usize, elapsed),
            None => crate::metrics::ToolMetrics::unknown().record(report.outcome as usize, elapsed),
        }
        if ctx.audit.is_some() {
            self.audit_call(params, ctx, &report, &answer, elapsed).await;
        }
        answer
    }

    async fn audit_call(
        &self,
        params: &Map<String, Value>,
        ctx: &RequestCtx,
        report: &Report,
        answer: &Answer,
        elapsed: std::time::Duration,
    ) {
        let Some(audit) = &ctx.audit else { return };
        let name = params.get("name").and_then(Value::as_str).unwrap_or("");
        let arguments = params.get("arguments").unwrap_or(&Value::Null);
        let size = answer.as_ref().ok().map(encoded_len);
        // A call that became a task is recorded as the task's creation; its end gets its own.
        let kind = if report.task.is_some() { EventKind::TaskChange } else { EventKind::ToolCall };
        let mut record = AuditRecord::new(kind, report.outcome).with_tool(name, arguments).with_timing(elapsed, size);
        let provenance = report.tool.as_deref().and_then(|t| t.tool.provenance());
        match (&report.task, provenance) {
            (Some(task), Some(p)) => record = record.with_detail(format!("task {task} created; {p}")),
            (Some(task), None) => record = record.with_detail(format!("task {task} created")),
            (None, Some(p)) => record = record.with_detail(p),
            (None, None) => {}
        }
        if let Some(tool) = report.tool.as_deref().filter(|_| report.keep_arguments) {
            let mut sensitive = self.settings.audit.redact_field_refs();
            sensitive.extend(tool.tool.opts.redact.iter().map(String::as_str));
            record = record.with_arguments(arguments, &sensitive);
        }
        if let Some(session) = &ctx.session {
            record = record.with_session_id(session.id.as_ref());
        }
        ctx.caller.audit(audit, record).await;
    }

    async fn run_call(&self, params: &Map<String, Value>, ctx: &RequestCtx, mrtr: Option<Arc<Mrtr>>, report: &mut Report) -> Answer {
        report.outcome = Outcome::InvalidInput;
        let (tool, arguments) = match self.resolve(params, ctx, report) {
            Ok(resolved) => resolved,
            Err(answer) => return answer,
        };
        let name = tool.name().to_owned();
        report.outcome = Outcome::Ok;
        let progress_token =
            params.get("_meta").and_then(|m| m.get("progressToken")).filter(|t| t.is_string() || t.is_i64() || t.is_u64()).cloned();
        let escalating = match self.mode(&tool, params, ctx) {
            Ok(task::Mode::Now) => false,
            Ok(task::Mode::Escalating) => true,
            Ok(task::Mode::Task(ttl)) => {
                let created = self.start_task(tool, arguments, ttl, progress_token, ctx).await;
                report.task = task::created_id(&created);
                return created;
            }
            Err(refused) => {
                report.outcome = Outcome::InvalidInput;
                return Err(refused);
            }
        };

        // The tool's token is a child: a timeout cancels the tool, not the request. A call that
        // may become a task has its own, as it may outlive the request.
        let tool_cancel = if escalating { CancellationToken::new() } else { ctx.cancel.child_token() };
        let (escalation, asked) = escalating.then(escalate::escalation).unzip();
        let context = ToolContext::new(ContextParts {
            tool: name.as_str().into(),
            arguments,
            cancel: tool_cancel.clone(),
            progress_token,
            log_level: ctx.log_level.clone(),
            channel: ctx.channel.clone(),
            caps: ctx.caps,
            version: ctx.version,
            mrtr: mrtr.clone(),
            principal: ctx.caller.principal.clone(),
            token: ctx.caller.token.clone(),
            escalation,
        });
        let ended = match asked {
            None => self.run(&tool, context, ctx).await,
            Some(asked) => match self.run_escalating(tool.clone(), context, asked, tool_cancel.clone(), ctx).await {
                Ok(ended) => ended,
                Err(created) => {
                    report.task = task::created_id(&created);
                    return created;
                }
            },
        };
        // Whatever ended the call, the tool's own work stops now.
        tool_cancel.cancel();
        report.outcome = if ctx.cancel.is_cancelled() { Outcome::Cancelled } else { ended.outcome() };
        if ctx.cancel.is_cancelled() {
            return Err(cancelled());
        }
        let result = match ended.into_result(self, &name, ctx.era(), mrtr.as_deref()) {
            Ok(result) => result,
            Err(answer) => return answer,
        };
        let finished = result::finish(&tool, result, self.settings.tools.default_char_limit, ctx.version);
        if finished.is_err() {
            report.outcome = Outcome::InternalError;
        }
        finished
    }

    /// The tool the call names, if the caller may use it, and its arguments once they match
    /// the tool's input schema. `Err` is the answer: -32602 for a missing or unknown name (a
    /// tool the caller may not use is reported exactly like one that does not exist) or
    /// non-object arguments; an `isError` result for arguments the model can fix (SEP-1303).
    fn resolve(
        &self,
        params: &Map<String, Value>,
        ctx: &RequestCtx,
        report: &mut Report,
    ) -> Result<(Arc<RegisteredTool>, Map<String, Value>), Answer> {
        let name = params
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| Err(RpcError::invalid_params("tools/call needs a string \"name\"")))?;
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(value @ Value::Object(_)) => value.clone(),
            Some(_) => return Err(Err(RpcError::invalid_params("\"arguments\" must be a JSON object"))),
        };
        let tool = self.tool_set(&ctx.caller).get(name).cloned();
        report.tool.clone_from(&tool);
        let Some(tool) = tool.filter(|t| self.may_use(t, ctx)) else {
            if report.tool.is_some() {
                report.outcome = Outcome::Denied;
            } else if let Some((tool, reason)) = self.withdrawn_here(name, ctx) {
                report.tool = Some(tool);
                let message = format!("The tool {name} is unavailable for now: {reason}. Try again shortly.");
                return Err(result::to_value(CallToolResult::error(message)));
            } else if let Some((tool, reason)) = self.tools.held(name).filter(|(t, _)| self.may_use(t, ctx)) {
                // Listed by its upstream, not approved (`approval`): said as such, not "Unknown tool".
                report.tool = Some(tool);
                return Err(result::to_value(CallToolResult::error(format!("The tool {name} is not served: {reason}."))));
            }
            return Err(Err(RpcError::invalid_params(format!("Unknown tool: {name}")).with_data(json!({ "name": name }))));
        };
        report.keep_arguments = tool.tool.opts.audit_arguments;
        if let Err(problems) = schema::check(&tool.input, &arguments) {
            return Err(result::to_value(CallToolResult::error(format!("Invalid arguments for tool {name}: {problems}"))));
        }
        let Value::Object(arguments) = arguments else { unreachable!("an object, matched above") };
        Ok((tool, arguments))
    }

    /// Waits for a slot, then runs the tool; the deadline covers both, and the client's
    /// cancellation and the server's halt end either.
    async fn run(&self, tool: &RegisteredTool, context: ToolContext, ctx: &RequestCtx) -> Ended {
        let timeout = tool.tool.opts.timeout.unwrap_or_else(|| self.default_timeout());
        let deadline = Instant::now() + timeout;
        let admitted = tokio::select! {
            permits = self.admit(tool) => permits,
            () = tokio::time::sleep_until(deadline) => return Ended::NoSlot(timeout.as_secs()),
            () = ctx.cancel.cancelled() => return Ended::Cancelled,
            () = self.halt.cancelled() => return Ended::Halted,
        };
        let _permits = match admitted {
            Ok(permits) => permits,
            Err(Refused::QueueFull { running, queued }) => return Ended::Busy { running, queued },
        };
        let run = AssertUnwindSafe((tool.tool.handler)(context)).catch_unwind();
        tokio::select! {
            outcome = run => outcome.map_or(Ended::Panicked, Ended::Done),
            () = tokio::time::sleep_until(deadline) => Ended::TimedOut(timeout.as_secs()),
            () = ctx.cancel.cancelled() => Ended::Cancelled,
            () = self.halt.cancelled() => Ended::Halted,
        }
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
    /// A tool withdrawn for now (its upstream is away) that this endpoint serves as `name`.
    fn withdrawn_here(&self, name: &str, ctx: &RequestCtx) -> Option<(Arc<RegisteredTool>, String)> {
        let lookup = match &ctx.caller.server {
            None => name.to_owned(),
            // A renamed tool is known here by its new name only.
            Some(server) if server.renames(name) => return None,
            Some(server) => server.canonical_name(name),
        };
        self.tools.withdrawn(&lookup).filter(|(t, _)| self.may_use(t, ctx) && ctx.caller.server.as_ref().is_none_or(|s| s.selects(t)))
    }

    pub(super) fn input_required(&self, mrtr: Option<&Mrtr>, scope: &str) -> Answer {
        let Some(mrtr) = mrtr else {
            tracing::error!(scope, "input required outside a modern request");
            return Err(RpcError::internal());
        };
        let requests = std::mem::take(&mut *mrtr.requests.lock());
        let mut result = json!({ "resultType": "input_required", "inputRequests": requests });
        if let Some(state) = mrtr.next_state.lock().take() {
            // Signed for what the request's own state was checked against (its endpoint too).
            let scope = if mrtr.scope.is_empty() { scope } else { mrtr.scope.as_str() };
            result["requestState"] = json!(self.state_signer.sign(scope, &state));
        }
        Ok(result)
    }
}

/// At most 128 characters of a client-supplied name, for logs.
fn short(name: &str) -> &str {
    name.char_indices().nth(128).map_or(name, |(i, _)| &name[..i])
}

/// The length of `value`'s JSON encoding, counted without building it.
fn encoded_len(value: &Value) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail, and a `Value` always serializes.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}
