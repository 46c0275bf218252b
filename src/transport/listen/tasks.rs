//! Task notifications on 2026-07-28 listen streams: which `taskIds` a stream may follow (the
//! caller's own, with the tasks extension declared), and the fan-out of each task change, read
//! once, to the streams that follow it.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio::sync::broadcast;

use super::{Listeners, sse};
use crate::protocol::jsonrpc::RpcError;
use crate::tasks::Tasks;

/// Most tasks one listen stream may follow.
const MAX_LISTENED_TASKS: usize = 100;

/// The `taskIds` a listen stream asked to follow that are the caller's (others are left out of
/// the acknowledgement, like ids that do not exist). -32021 without the tasks extension.
pub async fn listened_tasks(
    tasks: Option<&Arc<Tasks>>,
    notifications: &Map<String, Value>,
    caller: &crate::caller::Caller,
    tasks_extension: bool,
) -> Result<HashSet<String>, RpcError> {
    let Some(ids) = notifications.get("taskIds") else { return Ok(Default::default()) };
    let ids = ids
        .as_array()
        .filter(|a| a.iter().all(Value::is_string))
        .ok_or_else(|| RpcError::invalid_params("notifications.taskIds must be an array of task id strings"))?;
    if ids.is_empty() {
        return Ok(Default::default());
    }
    if !tasks_extension {
        return Err(crate::protocol::task::missing_tasks_extension());
    }
    if ids.len() > MAX_LISTENED_TASKS {
        return Err(RpcError::invalid_params(format!(
            "notifications.taskIds names {} tasks; at most {MAX_LISTENED_TASKS} per stream",
            ids.len()
        )));
    }
    let Some(tasks) = tasks else { return Ok(Default::default()) };
    let owner = caller.owner_key();
    let mut owned = HashSet::new();
    for id in ids.iter().filter_map(Value::as_str) {
        if tasks.get(id, &owner).await.is_ok() {
            owned.insert(id.to_owned());
        }
    }
    Ok(owned)
}

impl Listeners {
    /// Whether any stream here listens to task `id`.
    pub(super) fn wants_task(&self, id: &str) -> bool {
        self.map.iter().any(|l| l.filter.task_ids.contains(id))
    }

    /// `notifications/tasks` with the task as `tasks/get` shows it (`detailed`), to every
    /// stream listening to it.
    pub(super) fn deliver_task(&self, id: &str, detailed: &Value) {
        let mut dead = Vec::new();
        for entry in &self.map {
            let listener = entry.value();
            if !listener.filter.task_ids.contains(id) {
                continue;
            }
            let mut params = detailed.clone();
            params["_meta"] = json!({ "io.modelcontextprotocol/subscriptionId": listener.subscription });
            let message = json!({ "jsonrpc": "2.0", "method": "notifications/tasks", "params": params });
            if listener.tx.try_send(sse::message_event(None, &message.to_string())).is_err() {
                dead.push(*entry.key());
            }
        }
        for key in dead {
            self.map.remove(&key);
        }
    }
}

/// Runs until the task service closes: each change of a task some stream here listens to is
/// read once and sent to those streams. A lag skips changes (clients poll as well).
pub async fn task_fan_out(tasks: Arc<Tasks>, listeners: Arc<Listeners>) {
    let mut changes = tasks.subscribe_changes();
    loop {
        let id = match changes.recv().await {
            Ok(id) => id,
            Err(broadcast::error::RecvError::Lagged(n)) => {
                tracing::warn!(missed = n, "task notifications lagged; clients will see those changes by polling");
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        if !listeners.wants_task(&id) {
            continue;
        }
        match tasks.peek(&id).await {
            Ok(Some(row)) => listeners.deliver_task(&id, &row.detailed()),
            Ok(None) => {}
            Err(e) => tracing::warn!(task = %id, error = %e.message, "cannot read a task for its notification"),
        }
    }
}
