//! Tasks on the wire, in both eras: the statuses, a tool's task support, and how a task is
//! shown. 2025-11-25 (the `tasks` utility) shows `ttl` / `pollInterval` and nests a created
//! task under `task`; 2026-07-28 (the `io.modelcontextprotocol/tasks` extension) shows
//! `ttlMs` / `pollIntervalMs`, flat, with `resultType`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// `_meta` key tying a message to a task (2025-11-25).
pub const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
/// The 2026-07-28 tasks extension's identifier.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// Where a task stands. `working` and `input_required` may change; the others never do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TaskStatus {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl TaskStatus {
    pub const ALL: [Self; 5] = [Self::Working, Self::InputRequired, Self::Completed, Self::Failed, Self::Cancelled];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Working => "working",
            Self::InputRequired => "input_required",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

/// Whether a tool may run as a task (`execution.taskSupport`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskSupport {
    /// Never: a call asking for a task is refused (-32601 in 2025-11-25).
    #[default]
    Forbidden,
    /// Either way: the caller decides (2025-11-25), the server does for clients that opted in
    /// (2026-07-28).
    Optional,
    /// Only as a task: a call without one is refused.
    Required,
}

impl TaskSupport {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Forbidden => "forbidden",
            Self::Optional => "optional",
            Self::Required => "required",
        }
    }
}

/// A task's state as clients see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Task {
    pub id: String,
    pub status: TaskStatus,
    /// Why it failed or was cancelled, in words for a person.
    pub status_message: Option<String>,
    /// Milliseconds since the Unix epoch.
    pub created_ms: i64,
    pub updated_ms: i64,
    /// How long the task and its result are kept, from creation (`None`: unlimited).
    pub ttl_ms: Option<i64>,
    /// How often a client should poll.
    pub poll_ms: i64,
}

impl Task {
    /// The 2025-11-25 `Task` object.
    pub fn legacy_json(&self) -> Value {
        let mut task = self.common();
        task.insert("ttl".into(), json!(self.ttl_ms));
        task.insert("pollInterval".into(), json!(self.poll_ms));
        Value::Object(task)
    }

    /// The 2026-07-28 `Task` object (without `resultType`).
    pub fn modern_json(&self) -> Value {
        let mut task = self.common();
        task.insert("ttlMs".into(), json!(self.ttl_ms));
        task.insert("pollIntervalMs".into(), json!(self.poll_ms));
        Value::Object(task)
    }

    fn common(&self) -> Map<String, Value> {
        let mut task = Map::new();
        task.insert("taskId".into(), json!(self.id));
        task.insert("status".into(), json!(self.status.as_str()));
        if let Some(message) = &self.status_message {
            task.insert("statusMessage".into(), json!(message));
        }
        task.insert("createdAt".into(), json!(iso8601(self.created_ms)));
        task.insert("lastUpdatedAt".into(), json!(iso8601(self.updated_ms)));
        task
    }
}

/// -32021 naming the 2026-07-28 tasks extension: a task-only tool, a task method, or task
/// notifications asked for by a request that did not declare it.
pub fn missing_tasks_extension() -> crate::protocol::jsonrpc::RpcError {
    crate::protocol::jsonrpc::RpcError::new(crate::protocol::jsonrpc::code::MISSING_CLIENT_CAPABILITY, "Missing required client capability")
        .with_data(json!({ "requiredCapabilities": { "extensions": { TASKS_EXTENSION: {} } } }))
}

/// Ties `object` (a result, or a message's params) to task `id`: its `_meta` gains the
/// related-task entry, next to whatever it held. Not an object: left as it is.
pub fn tag_related(object: &mut Value, id: &str) {
    let Some(object) = object.as_object_mut() else { return };
    if let Value::Object(meta) = object.entry("_meta").or_insert_with(|| json!({})) {
        meta.insert(RELATED_TASK.into(), json!({ "taskId": id }));
    }
}

/// Milliseconds since the epoch as an RFC 3339 UTC timestamp with milliseconds.
pub fn iso8601(ms: i64) -> String {
    let at = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    let format = time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");
    at.format(&format).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task() -> Task {
        Task {
            id: "t1".into(),
            status: TaskStatus::Working,
            status_message: None,
            created_ms: 1_700_000_000_123,
            updated_ms: 1_700_000_000_456,
            ttl_ms: Some(60_000),
            poll_ms: 1000,
        }
    }

    #[test]
    fn the_2025_11_25_task_has_ttl_and_poll_interval() {
        let v = task().legacy_json();
        assert_eq!(v["ttl"], 60_000);
        assert_eq!(v["pollInterval"], 1000);
        assert!(v.get("ttlMs").is_none());
    }

    #[test]
    fn the_2026_07_28_task_has_ttl_ms_and_poll_interval_ms() {
        let v = task().modern_json();
        assert_eq!(v["ttlMs"], 60_000);
        assert_eq!(v["pollIntervalMs"], 1000);
        assert!(v.get("ttl").is_none());
    }

    #[test]
    fn an_unlimited_ttl_is_null_not_absent() {
        let v = Task { ttl_ms: None, ..task() }.legacy_json();
        assert_eq!(v.get("ttl"), Some(&Value::Null));
    }

    #[test]
    fn timestamps_are_rfc_3339_utc_with_milliseconds() {
        assert_eq!(iso8601(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
    }

    #[test]
    fn only_completed_failed_and_cancelled_are_terminal() {
        let terminal: Vec<_> = TaskStatus::ALL.into_iter().filter(|s| s.is_terminal()).collect();
        assert_eq!(terminal, [TaskStatus::Completed, TaskStatus::Failed, TaskStatus::Cancelled]);
        assert!(TaskStatus::ALL.into_iter().all(|s| TaskStatus::parse(s.as_str()) == Some(s)));
    }
}
