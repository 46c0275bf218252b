//! `GET /admin/tasks` and `POST /admin/tasks/{id}/cancel`: every owner's durable tasks (state,
//! tool, owner, age, TTL, the questions a task waits on), filtered in the database, and an
//! operator's cancel, which is the protocol's own `tasks/cancel` (stored first, then the run
//! stopped on whichever replica has it) recorded under the operator. A waiting task's questions
//! are listed by key and method only, never their contents (a tool or an upstream wrote them).

use axum::Json;
use axum::extract::{Path, RawQuery, State};
use serde_json::{Value, json};

use super::actor::Actor;
use super::problem::{Kind, Problem};
use super::state::AdminState;
use crate::protocol::task::{TaskStatus, iso8601};
use crate::tasks::{Cancelled, TaskRow, db::Filter, now_ms};

/// How many tasks are listed unless `limit` says otherwise, and the most it may say.
const DEFAULT_LIMIT: usize = 100;
const MAX_LIMIT: usize = 1000;
/// Waiting questions listed per task, and the bytes of a key, a method or a status message
/// shown: all three come from a tool or an upstream.
const MAX_WAITING: usize = 20;
const MAX_KEY: usize = 128;
const MAX_MESSAGE: usize = 1000;
/// The bytes of a query parameter's name or value repeated in a refusal: the request's sender
/// wrote them, and a problem document is no place for a megabyte of them.
const MAX_ECHO: usize = 64;

/// `GET /admin/tasks[?status=&tool=&owner=&limit=]`: newest first. With tasks off:
/// `enabled: false` and none (not an error).
pub async fn list(State(app): State<AdminState>, RawQuery(query): RawQuery) -> Result<Json<Value>, Problem> {
    let (filter, limit) = parse(query.as_deref())?;
    let Some(tasks) = app.server.tasks() else {
        return Ok(Json(json!({"enabled": false, "tasks": [], "truncated": false})));
    };
    let mut rows = tasks.list_every_owner(&filter, limit + 1).await.map_err(|_| unavailable())?;
    let truncated = rows.len() > limit;
    rows.truncate(limit);
    let now = now_ms();
    Ok(Json(json!({
        "enabled": true,
        "truncated": truncated,
        "tasks": rows.iter().map(|r| task_json(r, now)).collect::<Vec<_>>(),
    })))
}

/// `POST /admin/tasks/{id}/cancel`: the task, now `cancelled`; 409 when it had ended, 404 when
/// there is no such task (or tasks are off). The task service audits the cancel under the
/// operator.
pub async fn cancel(State(app): State<AdminState>, Actor(caller): Actor, Path(id): Path<String>) -> Result<Json<Value>, Problem> {
    let tasks = app
        .server
        .tasks()
        .ok_or_else(|| Problem::new(Kind::FeatureOff, "tasks are off (tasks.enabled = false): there is no task to cancel"))?;
    match tasks.cancel_as_operator(&id, &caller).await.map_err(|_| unavailable())? {
        Cancelled::Now(row) => Ok(Json(task_json(&row, now_ms()))),
        Cancelled::Before(row) => {
            let status = row.task.status.as_str();
            Err(Problem::new(
                Kind::TaskEnded,
                format!("the task is {status} already; only a working or input_required task can be cancelled"),
            )
            .with_member("task_status", json!(status)))
        }
        Cancelled::NotFound => Err(Problem::not_found("no task has this id (or it ended and expired); GET /admin/tasks lists them")),
    }
}

fn unavailable() -> Problem {
    // The cause is logged where it happened (the task store).
    Problem::new(Kind::Unavailable, "the task store cannot be read right now; retry shortly")
}

/// One task as the console shows it.
fn task_json(r: &TaskRow, now: i64) -> Value {
    let t = &r.task;
    let owner = r.owned_by();
    json!({
        "id": t.id,
        "status": t.status.as_str(),
        "status_message": t.status_message.as_deref().map(|m| clipped(m, MAX_MESSAGE)),
        "tool": r.tool,
        "owner": owner.subject,
        "issuer": owner.issuer,
        "server": owner.server,
        "era": if r.era == "modern" { "2026-07-28" } else { "2025-11-25" },
        "created_at": iso8601(t.created_ms),
        "updated_at": iso8601(t.updated_ms),
        "age_seconds": (now - t.created_ms).max(0) / 1000,
        "ttl_seconds": t.ttl_ms.map(|ms| ms / 1000),
        // A live task is kept past its TTL until it ends (`tasks::db`).
        "expires_at": t.ttl_ms.map(|ms| iso8601(t.created_ms.saturating_add(ms))),
        "replica": r.lease_owner,
        "input_requests": waiting(r),
    })
}

/// The questions an `input_required` task waits on: how many, and each one's key and method.
fn waiting(r: &TaskRow) -> Value {
    let pending = r.input_requests.as_ref().filter(|_| r.task.status == TaskStatus::InputRequired);
    let Some(pending) = pending else { return json!({"count": 0, "waiting": []}) };
    let listed: Vec<Value> = pending
        .iter()
        .take(MAX_WAITING)
        .map(|(key, request)| {
            let method = request.get("method").and_then(Value::as_str).unwrap_or("");
            json!({"key": clipped(key, MAX_KEY), "method": clipped(method, MAX_KEY)})
        })
        .collect();
    json!({"count": pending.len(), "waiting": listed})
}

fn clipped(text: &str, max: usize) -> &str {
    crate::untrusted::text::clip(text, max).0
}

/// `status`, `tool`, `owner` (a subject) and `limit` (1 to 1000, default 100); anything else is
/// refused, naming the parameter and the value clipped to [`MAX_ECHO`] bytes.
fn parse(query: Option<&str>) -> Result<(Filter, usize), Problem> {
    let (mut filter, mut limit) = (Filter::default(), DEFAULT_LIMIT);
    for (key, value) in url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        let (name, shown) = (clipped(&key, MAX_ECHO), clipped(&value, MAX_ECHO));
        let bad = |message: String| Problem::bad_field(name, message);
        match key.as_ref() {
            "status" if value.is_empty() || TaskStatus::parse(&value).is_some() => filter.status = value.into_owned(),
            "status" => {
                let known: Vec<&str> = TaskStatus::ALL.iter().map(|s| s.as_str()).collect();
                return Err(bad(format!("status must be one of {}, not {shown:?}", known.join(", "))));
            }
            "tool" => filter.tool = value.into_owned(),
            "owner" => filter.subject = value.into_owned(),
            "limit" => {
                limit = value
                    .parse::<usize>()
                    .ok()
                    .filter(|n| (1..=MAX_LIMIT).contains(n))
                    .ok_or_else(|| bad(format!("limit must be a whole number from 1 to {MAX_LIMIT}, not {shown:?}")))?;
            }
            _ => return Err(bad(format!("unknown query parameter {name:?}; status, tool, owner and limit are read"))),
        }
    }
    Ok((filter, limit))
}
