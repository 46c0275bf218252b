//! The `tasks/*` methods. 2025-11-25: `tasks/get`, `tasks/result` (waits for the end, then
//! answers exactly what the call would have), `tasks/list` (only with authentication, where a
//! requestor can be told apart), `tasks/cancel` (-32602 on a terminal task). 2026-07-28 (the
//! tasks extension): `tasks/get` with the result or error inlined, `tasks/update` and
//! `tasks/cancel` acknowledged, all three -32021 for a request that did not declare the
//! extension; `tasks/result` and `tasks/list` do not exist there.

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use super::tools_call::owner;
use super::{McpServer, RequestCtx};
use crate::protocol::jsonrpc::{RpcError, code};
use crate::protocol::task::{TASKS_EXTENSION, Task, tag_related};
use crate::protocol::{Era, cursor};
use crate::tasks::{TaskRow, Tasks};

const CURSOR_KIND: &str = "tasks";

fn task_id(params: &Map<String, Value>) -> Result<&str, RpcError> {
    params.get("taskId").and_then(Value::as_str).ok_or_else(|| RpcError::invalid_params("tasks methods need a string \"taskId\""))
}

impl McpServer {
    /// Whether this server answers `method` in this era (the rest get -32601).
    pub(super) fn is_task_method(&self, method: &str, era: Era) -> bool {
        let auth = self.settings.auth.mode != crate::config::auth::AuthMode::Off;
        self.tasks().is_some()
            && match era {
                Era::Legacy => matches!(method, "tasks/get" | "tasks/result" | "tasks/cancel") || (method == "tasks/list" && auth),
                Era::Modern => matches!(method, "tasks/get" | "tasks/update" | "tasks/cancel"),
            }
    }

    /// The `tasks` capability (2025-11-25) or the tasks extension (2026-07-28), when on.
    pub(super) fn task_capability(&self, era: Era) -> Option<(&'static str, Value)> {
        self.tasks()?;
        Some(match era {
            Era::Legacy => {
                let mut tasks = json!({ "cancel": {}, "requests": { "tools": { "call": {} } } });
                if self.is_task_method("tasks/list", Era::Legacy) {
                    tasks["list"] = json!({});
                }
                ("tasks", tasks)
            }
            Era::Modern => ("extensions", json!({ TASKS_EXTENSION: {} })),
        })
    }

    pub(super) async fn task_method(&self, method: &str, params: &Map<String, Value>, ctx: &RequestCtx) -> Result<Value, RpcError> {
        let Some(tasks) = self.tasks() else { return Err(RpcError::method_not_found(method)) };
        let owner = owner(ctx);
        if ctx.era() == Era::Modern {
            // Before the id is looked at: the extension's methods exist only for clients that
            // declared it.
            if !ctx.caps.tasks {
                return Err(super::tools_call::missing_tasks_extension());
            }
            if method == "tasks/cancel" {
                // Cooperative and idempotent: a terminal task is acknowledged as it is.
                return cancel(tasks, task_id(params)?, &owner, ctx).await.map(|_| json!({}));
            }
            return modern(tasks, method, params, &owner).await;
        }
        match method {
            "tasks/get" => Ok(tasks.poll(task_id(params)?, &owner).await?.task.legacy_json()),
            "tasks/result" => self.task_result(tasks, task_id(params)?, &owner, ctx).await,
            "tasks/list" => list(tasks, params, &owner, self.page_size()).await,
            "tasks/cancel" => {
                let id = task_id(params)?;
                let (task, cancelled) = cancel(tasks, id, &owner, ctx).await?;
                if !cancelled {
                    return Err(RpcError::invalid_params(format!("Task {id} is already {} and cannot be cancelled", task.status.as_str())));
                }
                Ok(task.legacy_json())
            }
            other => Err(RpcError::method_not_found(other)),
        }
    }

    /// Waits for the task to end (or the request to be cancelled), then answers what the call
    /// would have: its result, tagged with the task, or its JSON-RPC error. Meanwhile the
    /// task's questions to its client are relayed on this request's stream (TK-15).
    async fn task_result(&self, tasks: &Tasks, id: &str, owner: &str, ctx: &RequestCtx) -> Result<Value, RpcError> {
        let mut relayed = HashSet::new();
        let row = loop {
            let unrelayed = |row: &TaskRow| row.input_requests.as_ref().is_some_and(|r| r.keys().any(|k| !relayed.contains(k)));
            let waited = tasks.wait_for(id, owner, &ctx.cancel, |row| row.task.status.is_terminal() || unrelayed(row)).await?;
            let Some(row) = waited else { return Err(RpcError::new(code::TRANSPORT, "Request cancelled")) };
            if row.task.status.is_terminal() {
                break row;
            }
            relay(tasks, &row, owner, ctx, &mut relayed).await?;
        };
        match row.outcome {
            Some(Value::Object(mut outcome)) => {
                if let Some(error) = outcome.remove("error") {
                    return Err(serde_json::from_value(error).unwrap_or_else(|_| RpcError::internal()));
                }
                let mut result = outcome.remove("result").unwrap_or_else(|| json!({}));
                tag_related(&mut result, id);
                Ok(result)
            }
            _ => Err(RpcError::new(code::TRANSPORT, format!("Task {id} was {} before it finished", row.task.status.as_str()))),
        }
    }
}

/// Sends the task's pending questions that this request has not sent yet to the client, as
/// requests tagged with the task, and stores each answer (or error) for the task.
async fn relay(tasks: &Tasks, row: &TaskRow, owner: &str, ctx: &RequestCtx, relayed: &mut HashSet<String>) -> Result<(), RpcError> {
    let id = &row.task.id;
    for (key, request) in row.input_requests.iter().flatten() {
        if !relayed.insert(key.clone()) || !ctx.channel.can_request() {
            continue;
        }
        let method = request.get("method").and_then(Value::as_str).unwrap_or_default();
        let mut params = request.get("params").cloned().unwrap_or_else(|| json!({}));
        tag_related(&mut params, id);
        let answer = tokio::select! {
            answer = ctx.channel.request(method, params) => answer,
            () = ctx.cancel.cancelled() => return Err(RpcError::new(code::TRANSPORT, "Request cancelled")),
        };
        let answer = answer.unwrap_or_else(|e| json!({ "error": { "code": e.code, "message": e.message } }));
        let mut answers = Map::new();
        answers.insert(key.clone(), answer);
        tasks.answer(id, owner, &answers).await?;
    }
    Ok(())
}

/// Cancels task `id` of `owner` as the caller (who is audited as its canceller). Returns the
/// task as it now stands and whether this call cancelled it.
async fn cancel(tasks: &Tasks, id: &str, owner: &str, ctx: &RequestCtx) -> Result<(Task, bool), RpcError> {
    let (row, cancelled) = tasks.cancel(id, owner, &ctx.caller).await?;
    Ok((row.task, cancelled))
}

/// `tasks/list`: the caller's tasks, oldest first, a page at a time.
async fn list(tasks: &Tasks, params: &Map<String, Value>, owner: &str, page: usize) -> Result<Value, RpcError> {
    let after = match params.get("cursor").and_then(Value::as_str) {
        None => None,
        Some(c) => {
            let key = cursor::decode(CURSOR_KIND, c).ok_or_else(|| RpcError::invalid_params(cursor::invalid(c)))?;
            let (ms, id) = key.split_once(':').ok_or_else(|| RpcError::invalid_params(cursor::invalid(c)))?;
            Some((ms.parse().map_err(|_| RpcError::invalid_params(cursor::invalid(c)))?, id.to_owned()))
        }
    };
    let (rows, next) = tasks.list(owner, after, page).await?;
    let mut result = json!({ "tasks": rows.iter().map(|r| r.task.legacy_json()).collect::<Vec<_>>() });
    if let Some((ms, id)) = next {
        result["nextCursor"] = json!(cursor::encode(CURSOR_KIND, &format!("{ms}:{id}")));
    }
    Ok(result)
}

/// The 2026-07-28 methods, for a client that declared the extension.
async fn modern(tasks: &Tasks, method: &str, params: &Map<String, Value>, owner: &str) -> Result<Value, RpcError> {
    let id = task_id(params)?;
    match method {
        "tasks/get" => Ok(tasks.poll(id, owner).await?.detailed()),
        // Stored before the ack; keys never requested (or answered already) are ignored.
        "tasks/update" => tasks.answer(id, owner, input_responses(params)?).await.map(|()| json!({})),
        other => Err(RpcError::method_not_found(other)),
    }
}

/// `tasks/update`'s `inputResponses`: an object of answer objects, keyed as the task asked.
fn input_responses(params: &Map<String, Value>) -> Result<&Map<String, Value>, RpcError> {
    let responses = params.get("inputResponses").and_then(Value::as_object).ok_or_else(|| {
        RpcError::invalid_params("tasks/update needs \"inputResponses\": an object keyed by the task's inputRequests keys")
    })?;
    if let Some((key, _)) = responses.iter().find(|(_, v)| !v.is_object()) {
        return Err(RpcError::invalid_params(format!(
            "inputResponses.{key} must be an object (an ElicitResult, CreateMessageResult or ListRootsResult)"
        )));
    }
    Ok(responses)
}
