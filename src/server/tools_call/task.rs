//! `tools/call` as a task: whether a call becomes one (the era's rules and the tool's task
//! support), creating it durably, and running the tool detached from its request until its
//! terminal status and answer are stored.
//!
//! 2025-11-25: the client asks with `params.task` (`{ttl}`); a tool that forbids tasks refuses
//! it and one that requires them refuses a call without it (-32601 both ways). 2026-07-28:
//! the server decides, and only for a client that declared the tasks extension; a task-only
//! tool called by any other client gets -32021 naming the extension.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::super::{McpServer, RequestCtx};
use super::ended::{Answer, Ended};
use super::result;
use super::task_input::TaskChannel;
use crate::audit::{AuditRecord, EventKind, Outcome};
use crate::protocol::Era;
use crate::protocol::jsonrpc::{RpcError, code};
use crate::protocol::task::{TaskStatus, TaskSupport};
use crate::tasks::Tasks;
use crate::tool::{ContextParts, RegisteredTool, ToolContext};

/// How a call runs.
pub(super) enum Mode {
    Now,
    /// As a task, with the TTL the client asked for (milliseconds), if any.
    Task(Option<u64>),
    /// Within the request until the handler continues it as a task (`input_before_task`).
    Escalating,
}

/// The key a task is bound to: the principal, or "" without authentication (task ids are
/// unguessable then, and `tasks/list` is not offered).
pub(in crate::server) fn owner(ctx: &RequestCtx) -> String {
    ctx.caller.owner_key()
}

impl McpServer {
    /// Whether this call of `tool` runs now or as a task; `Err` when the era's rules refuse it.
    pub(super) fn mode(&self, tool: &RegisteredTool, params: &Map<String, Value>, ctx: &RequestCtx) -> Result<Mode, RpcError> {
        let support = tool.tool.opts.task_support;
        let name = tool.name();
        if self.tasks().is_none() {
            // TK-02: without the capability `params.task` is ignored.
            return match support {
                TaskSupport::Required => Err(RpcError::new(
                    code::METHOD_NOT_FOUND,
                    format!("The tool {name} runs only as a task, and tasks are turned off on this server (tasks.enabled)"),
                )),
                _ => Ok(Mode::Now),
            };
        }
        match ctx.era() {
            Era::Legacy => match (support, params.get("task")) {
                (TaskSupport::Forbidden, Some(_)) => Err(RpcError::new(
                    code::METHOD_NOT_FOUND,
                    format!("The tool {name} does not run as a task: call it without params.task"),
                )),
                (TaskSupport::Required, None) => Err(RpcError::new(
                    code::METHOD_NOT_FOUND,
                    format!("The tool {name} runs only as a task: call it with params.task (e.g. {{\"ttl\": 60000}})"),
                )),
                (_, Some(task)) => {
                    let task =
                        task.as_object().ok_or_else(|| RpcError::invalid_params("params.task must be an object like {\"ttl\": 60000}"))?;
                    let ttl = match task.get("ttl") {
                        None | Some(Value::Null) => None,
                        Some(ttl) => Some(
                            ttl.as_u64()
                                .ok_or_else(|| RpcError::invalid_params("params.task.ttl must be a whole number of milliseconds"))?,
                        ),
                    };
                    Ok(Mode::Task(ttl))
                }
                (_, None) => Ok(Mode::Now),
            },
            // A legacy `params.task` is ignored in this era: the server decides.
            Era::Modern => match (support, ctx.caps.tasks) {
                (TaskSupport::Forbidden, _) | (TaskSupport::Optional, false) => Ok(Mode::Now),
                (TaskSupport::Required, false) => Err(super::ended::missing_tasks_extension()),
                (_, true) if tool.tool.opts.input_before_task => Ok(Mode::Escalating),
                (_, true) => Ok(Mode::Task(None)),
            },
        }
    }

    /// Creates the task (stored before the answer leaves), starts the tool detached from the
    /// request, and answers `CreateTaskResult` in the era's shape.
    pub(super) async fn start_task(
        &self,
        tool: Arc<RegisteredTool>,
        arguments: Map<String, Value>,
        ttl: Option<u64>,
        progress_token: Option<Value>,
        ctx: &RequestCtx,
    ) -> Answer {
        let (Some(tasks), Some(me)) = (self.tasks().cloned(), self.me.upgrade()) else { return Err(RpcError::internal()) };
        let era = if ctx.era() == Era::Modern { "modern" } else { "legacy" };
        let client = ctx.caller.client_key().map(|k| k.shared_id()).unwrap_or_default();
        let ttl = ttl.or_else(|| tool_ttl(&tool));
        let (task, cancel) = tasks.create(&owner(ctx), &client, era, tool.name(), ttl).await?;
        // The run's request has been answered: its questions park the task instead.
        let told = TaskChannel::new(tasks.clone(), task.id.clone(), owner(ctx), cancel.clone(), ctx.session.as_ref());
        let channel: Arc<dyn crate::tool::ClientChannel> = told.clone();
        let caps = ctx.caps;
        let context = ToolContext::new(ContextParts {
            tool: tool.name().into(),
            arguments,
            cancel: cancel.child_token(),
            // Progress goes on for the task's life, tagged with it (2025-11-25 sessions).
            progress_token,
            log_level: None,
            channel: channel.clone(),
            caps,
            version: ctx.version,
            mrtr: None,
            principal: ctx.caller.principal.clone(),
            token: ctx.caller.token.clone(),
            escalation: None,
        });
        let run_ctx = RequestCtx {
            version: ctx.version,
            session: None,
            caller: ctx.caller.clone(),
            caps,
            log_level: None,
            channel,
            cancel,
            audit: ctx.audit.clone(),
        };
        let id = task.id.clone();
        self.in_flight.spawn(async move {
            let started = std::time::Instant::now();
            let ended = me.run(&tool, context, &run_ctx).await;
            me.settle_task(&tasks, &id, &tool, ended, started, &run_ctx).await;
            told.tell_status().await;
        });
        Ok(created(&task, ctx.era()))
    }

    /// Stores how a task's run ended: what the call would have answered, as the task's
    /// outcome, with its metrics and audit record. A task cancelled meanwhile keeps its
    /// `cancelled` status, and its one terminal audit record is the canceller's.
    pub(super) async fn settle_task(
        &self,
        tasks: &Tasks,
        id: &str,
        tool: &RegisteredTool,
        ended: Ended,
        started: std::time::Instant,
        ctx: &RequestCtx,
    ) {
        if ctx.cancel.is_cancelled() {
            // Cancelled (and recorded as such by whoever cancelled it), or this server stops.
            tool.metrics().record(Outcome::Cancelled as usize, started.elapsed());
            return;
        }
        let mut outcome = ended.outcome();
        // Within a request an internal failure is answered as an `isError` result; a task has
        // a place for a JSON-RPC error, so it fails with one (-32603).
        let internal = ended.is_internal();
        let answer = match ended.into_result(self, tool.name(), ctx.era(), None) {
            Ok(_) if internal => Err(RpcError::new(
                code::INTERNAL_ERROR,
                format!("The tool {} failed unexpectedly; the server logged the details", tool.name()),
            )),
            Ok(result) => result::finish(tool, result, self.settings.tools.default_char_limit, ctx.version),
            Err(answer) => answer,
        };
        if answer.is_err() && outcome == Outcome::Ok {
            outcome = Outcome::InternalError;
        }
        let (status, message, stored) = settle(&answer, ctx.era());
        tool.metrics().record(outcome as usize, started.elapsed());
        // The stored transition is the one decision: a run that lost the row to a cancel (or
        // to a lapsed lease) through any replica records nothing, since the winner did.
        if !tasks.finish(id, status, message.as_deref(), &stored).await {
            return;
        }
        if let Some(audit) = &ctx.audit {
            let record = AuditRecord::new(EventKind::TaskChange, outcome).with_tool(tool.name(), &Value::Null).with_detail(
                match tool.tool.provenance() {
                    Some(p) => format!("task {id} {}; {p}", status.as_str()),
                    None => format!("task {id} {}", status.as_str()),
                },
            );
            ctx.caller.audit(audit, record.with_timing(started.elapsed(), None)).await;
        }
    }
}

/// The tool's own TTL for its tasks (milliseconds), when it declares one.
pub(super) fn tool_ttl(tool: &RegisteredTool) -> Option<u64> {
    tool.tool.opts.task_ttl.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// `CreateTaskResult` in the era's shape: nested under `task` (2025-11-25), or flat with
/// `resultType: "task"` (2026-07-28).
pub(super) fn created(task: &crate::protocol::task::Task, era: Era) -> Value {
    match era {
        Era::Legacy => json!({ "task": task.legacy_json() }),
        Era::Modern => {
            let mut created = task.modern_json();
            created["resultType"] = json!("task");
            created
        }
    }
}

/// The id of the task a `CreateTaskResult` (either era) names.
pub(super) fn created_id(answer: &Answer) -> Option<String> {
    let created = answer.as_ref().ok()?;
    created.get("task").unwrap_or(created).get("taskId")?.as_str().map(str::to_owned)
}

/// A finished call's status, status message and stored outcome. A JSON-RPC error fails the
/// task in both eras; a tool error (`isError`) fails it in 2025-11-25 but completes it in
/// 2026-07-28, whose clients read `isError` in the inlined result.
fn settle(answer: &Answer, era: Era) -> (TaskStatus, Option<String>, Value) {
    match answer {
        Ok(result) => {
            let is_error = result.get("isError").and_then(Value::as_bool).unwrap_or(false);
            let message = is_error.then(|| first_text(result).unwrap_or_else(|| "the tool reported an error".to_owned()));
            let status = if is_error && era == Era::Legacy { TaskStatus::Failed } else { TaskStatus::Completed };
            (status, message, json!({ "result": result }))
        }
        Err(error) => (TaskStatus::Failed, Some(error.message.to_string()), json!({ "error": error })),
    }
}

/// The first text block of a result (at most 500 characters), for a status message.
fn first_text(result: &Value) -> Option<String> {
    let blocks = result.get("content")?.as_array()?;
    let text = blocks.iter().find(|b| b["type"] == "text")?.get("text")?.as_str()?;
    Some(text.chars().take(500).collect())
}
