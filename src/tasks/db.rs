//! The `tasks` table: one statement per change, each atomic on its own. Terminal states are
//! written only over non-terminal ones (`WHERE status IN ('working', 'input_required')`), so a
//! cancel and a finish racing on two replicas settle on whichever landed first, and a terminal
//! task never changes again. The columns are plain integers and text on both backends, so one
//! SQL text serves SQLite and Postgres.
//!
//! A task's TTL ends only a task that has ended: a live task past its TTL is still read,
//! listed, counted against the running cap and cancellable, and is deleted only once terminal.
//! Deleting it while its tool ran would let the run outlive its row: the cap (which counts
//! live rows) would no longer see it and its owner could no longer cancel it. Keeping the row
//! needs no signal between replicas (the run ends its row through [`finish`], or the lease
//! lapses and [`fail_lapsed`] does), where cancelling the run when the row goes would depend
//! on an event reaching the replica that runs it.

use serde_json::{Map, Value, json};
use sqlx::Row as _;

use crate::protocol::task::{Task, TaskStatus};
use crate::store::{Store, on_pool};

/// The same statement on whichever backend runs (`$pool` is that backend's pool).
macro_rules! columns {
    () => {
        "id, owner, era, tool, status, status_message, created_ms, updated_ms, ttl_ms, poll_ms, outcome, lease_owner, input_requests, input_responses"
    };
}

macro_rules! live {
    () => {
        "status IN ('working', 'input_required')"
    };
}

/// A stored task.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskRow {
    pub task: Task,
    /// The principal key that created it ("" without authentication).
    pub owner: String,
    /// `legacy` or `modern`: the era it was created in (its results' shape).
    pub era: String,
    pub tool: String,
    /// Once terminal: `{"result": …}` or `{"error": …}`.
    pub outcome: Option<Value>,
    /// The replica running it (while it runs).
    pub lease_owner: Option<String>,
    /// The requests still unanswered while `input_required`, keyed as the client sees them.
    pub input_requests: Option<Map<String, Value>>,
    /// Answers delivered and not yet taken by the running replica.
    pub input_responses: Option<Map<String, Value>>,
}

macro_rules! row {
    ($row:expr) => {{
        let row = $row;
        let status: String = row.try_get("status")?;
        let outcome: Option<String> = row.try_get("outcome")?;
        TaskRow {
            task: Task {
                id: row.try_get("id")?,
                status: TaskStatus::parse(&status).unwrap_or(TaskStatus::Failed),
                status_message: row.try_get("status_message")?,
                created_ms: row.try_get("created_ms")?,
                updated_ms: row.try_get("updated_ms")?,
                ttl_ms: row.try_get("ttl_ms")?,
                poll_ms: row.try_get("poll_ms")?,
            },
            owner: row.try_get::<Option<String>, _>("owner")?.unwrap_or_default(),
            era: row.try_get("era")?,
            tool: row.try_get("tool")?,
            outcome: outcome.and_then(|o| serde_json::from_str(&o).ok()),
            lease_owner: row.try_get("lease_owner")?,
            input_requests: json_map(row.try_get("input_requests")?),
            input_responses: json_map(row.try_get("input_responses")?),
        }
    }};
}

impl TaskRow {
    /// The 2026-07-28 `DetailedTask` (`tasks/get`, `notifications/tasks`): the task, with the
    /// result of a completed one, the error of a failed one, or the pending requests of one
    /// waiting for input inlined.
    pub fn detailed(&self) -> Value {
        let mut task = self.task.modern_json();
        let outcome = self.outcome.as_ref().and_then(Value::as_object);
        match self.task.status {
            TaskStatus::Completed => task["result"] = outcome.and_then(|o| o.get("result")).cloned().unwrap_or_else(|| json!({})),
            TaskStatus::Failed => {
                task["error"] =
                    outcome.and_then(|o| o.get("error")).cloned().unwrap_or_else(|| json!({"code": -32603, "message": "the task failed"}));
            }
            TaskStatus::InputRequired => task["inputRequests"] = Value::Object(self.input_requests.clone().unwrap_or_default()),
            TaskStatus::Working | TaskStatus::Cancelled => {}
        }
        task
    }
}

fn json_map(text: Option<String>) -> Option<Map<String, Value>> {
    serde_json::from_str(&text?).ok()
}

/// Stores a new `working` task of `client` (whom the running-task cap counts against),
/// claimed by its `lease_owner` until `lease_until_ms`.
pub async fn insert(store: &Store, row: &TaskRow, client: &str, lease_until_ms: i64) -> Result<(), sqlx::Error> {
    on_pool!(store, |pool| insert_query!(row, client, lease_until_ms).execute(pool).await.map(drop))
}

/// The `INSERT` of [`insert`], bound, for a pool or a transaction of either backend.
macro_rules! insert_query {
    ($row:expr, $client:expr, $lease_until_ms:expr) => {{
        let (row, t) = ($row, &$row.task);
        sqlx::query(
            "INSERT INTO tasks (id, owner, era, tool, status, created_ms, updated_ms, ttl_ms, expires_ms, poll_ms, lease_owner, lease_until_ms, client) \
             VALUES ($1, $2, $3, $4, $5, $6, $6, $7, $8, $9, $10, $11, $12)",
        )
        .bind(&t.id)
        .bind(&row.owner)
        .bind(&row.era)
        .bind(&row.tool)
        .bind(t.status.as_str())
        .bind(t.created_ms)
        .bind(t.ttl_ms)
        .bind(t.ttl_ms.map(|ttl| t.created_ms.saturating_add(ttl)))
        .bind(t.poll_ms)
        .bind(&row.lease_owner)
        .bind($lease_until_ms)
        .bind($client)
    }};
}
use insert_query;

/// Stores `row` if `within(live, stored)`, the counts of `client`'s tasks, allows it; its
/// refusal otherwise. Counting and storing are one decision for every replica: on Postgres
/// under a transaction-scoped advisory lock on the client (two replicas counting at once
/// would each see room for one more), on SQLite (one process) under the caller's lock.
pub async fn insert_within<E>(
    store: &Store,
    row: &TaskRow,
    client: &str,
    lease_until_ms: i64,
    within: impl FnOnce(i64, i64) -> Result<(), E>,
) -> Result<Result<(), E>, sqlx::Error> {
    let crate::store::Backend::Postgres(pool) = store.backend() else {
        let (live, stored) = count(store, client).await?;
        if let Err(refused) = within(live, stored) {
            return Ok(Err(refused));
        }
        return insert(store, row, client, lease_until_ms).await.map(Ok);
    };
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
        .bind(format!("toolgate.tasks.create:{client}"))
        .execute(&mut *tx)
        .await?;
    let counts = sqlx::query(COUNT).bind(client).fetch_one(&mut *tx).await?;
    if let Err(refused) = within(counts.try_get("live")?, counts.try_get("stored")?) {
        // Explicitly, so the client's lock is let go now rather than when the pool gets round
        // to the dropped transaction.
        tx.rollback().await?;
        return Ok(Err(refused));
    }
    insert_query!(row, client, lease_until_ms).execute(&mut *tx).await?;
    tx.commit().await.map(Ok)
}

/// The task `id`, unless it ended and expired at `now_ms`.
pub async fn get(store: &Store, id: &str, now_ms: i64) -> Result<Option<TaskRow>, sqlx::Error> {
    let sql = concat!("SELECT ", columns!(), " FROM tasks WHERE id = $1 AND (expires_ms IS NULL OR expires_ms > $2 OR ", live!(), ")");
    on_pool!(store, |pool| {
        let row = sqlx::query(sql).bind(id).bind(now_ms).fetch_optional(pool).await?;
        Ok(match row {
            Some(row) => Some(row!(&row)),
            None => None,
        })
    })
}

/// `owner`'s tasks after the cursor `(created_ms, id)`, oldest first, at most `limit` (live
/// ones, and ended ones until they expire).
pub async fn list(store: &Store, owner: &str, after: Option<(i64, String)>, limit: i64, now_ms: i64) -> Result<Vec<TaskRow>, sqlx::Error> {
    let (after_ms, after_id) = after.unwrap_or((i64::MIN, String::new()));
    let sql = concat!(
        "SELECT ",
        columns!(),
        " FROM tasks WHERE COALESCE(owner, '') = $1 AND (expires_ms IS NULL OR expires_ms > $2 OR ",
        live!(),
        ") \
         AND (created_ms > $3 OR (created_ms = $3 AND id > $4)) ORDER BY created_ms, id LIMIT $5"
    );
    on_pool!(store, |pool| {
        let rows = sqlx::query(sql).bind(owner).bind(now_ms).bind(after_ms).bind(&after_id).bind(limit).fetch_all(pool).await?;
        let mut tasks = Vec::with_capacity(rows.len());
        for row in &rows {
            tasks.push(row!(row));
        }
        Ok(tasks)
    })
}

/// What an operator's list of every owner's tasks is narrowed to; an empty field matches any.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// One status (`working`, `input_required`, `completed`, `failed`, `cancelled`).
    pub status: String,
    pub tool: String,
    /// The owner's principal subject (whatever its issuer or virtual server).
    pub subject: String,
}

/// Every owner's tasks matching `filter`, newest first, at most `limit` (live ones, and ended
/// ones until they expire).
pub async fn list_all(store: &Store, filter: &Filter, limit: i64, now_ms: i64) -> Result<Vec<TaskRow>, sqlx::Error> {
    // An owner is `issuer` U+001F `subject`, then U+001E `server` at a virtual server; neither
    // separator can occur in an issuer, a subject or a server's name. So with a U+001E appended,
    // the owner holds U+001F `subject` U+001E exactly when its subject is `subject`. `replace`
    // tests that the same way on both backends (SQLite's LIKE ignores case, and the two name
    // their substring search differently); the subject is compared as text, never as a pattern.
    let sql = concat!(
        "SELECT ",
        columns!(),
        " FROM tasks WHERE (expires_ms IS NULL OR expires_ms > $1 OR ",
        live!(),
        ") \
         AND (CAST($2 AS TEXT) = '' OR status = $2) AND (CAST($3 AS TEXT) = '' OR tool = $3) \
         AND (CAST($4 AS TEXT) = '' OR replace(COALESCE(owner, '') || CAST($5 AS TEXT), CAST($4 AS TEXT), '') <> COALESCE(owner, '') || CAST($5 AS TEXT)) \
         ORDER BY created_ms DESC, id DESC LIMIT $6"
    );
    let needle = if filter.subject.is_empty() { String::new() } else { format!("\u{1f}{}\u{1e}", filter.subject) };
    on_pool!(store, |pool| {
        let rows = sqlx::query(sql)
            .bind(now_ms)
            .bind(&filter.status)
            .bind(&filter.tool)
            .bind(&needle)
            .bind("\u{1e}")
            .bind(limit)
            .fetch_all(pool)
            .await?;
        let mut tasks = Vec::with_capacity(rows.len());
        for row in &rows {
            tasks.push(row!(row));
        }
        Ok(tasks)
    })
}

/// Moves a live task to a terminal `status`; `false` when it was terminal already (or gone).
pub async fn finish(
    store: &Store,
    id: &str,
    status: TaskStatus,
    message: Option<&str>,
    outcome: Option<&Value>,
    now_ms: i64,
) -> Result<bool, sqlx::Error> {
    let sql = concat!(
        "UPDATE tasks SET status = $1, status_message = $2, outcome = $3, updated_ms = $4, lease_owner = NULL, lease_until_ms = NULL, \
         input_requests = NULL, input_responses = NULL \
         WHERE id = $5 AND ",
        live!()
    );
    let outcome = outcome.map(Value::to_string);
    on_pool!(store, |pool| {
        let done = sqlx::query(sql).bind(status.as_str()).bind(message).bind(&outcome).bind(now_ms).bind(id).execute(pool).await?;
        Ok(done.rows_affected() == 1)
    })
}

/// Extends the claim of `replica` to `until_ms` on those of `ids` (the runs it has) still live.
/// Returns their ids. Only runs: a row this replica claims whose run is gone (its result could
/// not be stored) is left to lapse, and `fail_lapsed` ends it, instead of being renewed forever.
pub async fn renew(store: &Store, replica: &str, ids: &[String], until_ms: i64) -> Result<Vec<String>, sqlx::Error> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let ids = Value::from(ids.to_vec()).to_string();
    // The ids go as one JSON array, which each backend unpacks its own way.
    let (sqlite, postgres) = (
        concat!(
            "UPDATE tasks SET lease_until_ms = $1 WHERE lease_owner = $2 AND id IN (SELECT value FROM json_each($3)) AND ",
            live!(),
            " RETURNING id"
        ),
        concat!(
            "UPDATE tasks SET lease_until_ms = $1 WHERE lease_owner = $2 AND id IN (SELECT jsonb_array_elements_text($3::jsonb)) AND ",
            live!(),
            " RETURNING id"
        ),
    );
    let sql = if matches!(store.backend(), crate::store::Backend::Sqlite(_)) { sqlite } else { postgres };
    on_pool!(store, |pool| {
        let rows = sqlx::query(sql).bind(until_ms).bind(replica).bind(&ids).fetch_all(pool).await?;
        rows.iter().map(|r| r.try_get("id")).collect()
    })
}

/// Fails every live task whose claim lapsed before `now_ms`: its replica stopped without
/// finishing it. Returns their ids and tools.
pub async fn fail_lapsed(store: &Store, now_ms: i64) -> Result<Vec<(String, String)>, sqlx::Error> {
    let error = serde_json::json!({"error": {"code": -32603, "message": "The server running this task stopped before it finished; start it again"}});
    let sql = concat!(
        "UPDATE tasks SET status = 'failed', status_message = 'the server running this task stopped before it finished', \
         outcome = $1, updated_ms = $2, lease_owner = NULL, lease_until_ms = NULL, input_requests = NULL, input_responses = NULL \
         WHERE lease_until_ms < $2 AND ",
        live!(),
        " RETURNING id, tool"
    );
    on_pool!(store, |pool| {
        let rows = sqlx::query(sql).bind(error.to_string()).bind(now_ms).fetch_all(pool).await?;
        rows.iter().map(|r| Ok((r.try_get("id")?, r.try_get("tool")?))).collect()
    })
}

/// Deletes tasks that ended and are past their TTL (never a live one: see the module's
/// comment). Returns how many.
pub async fn prune(store: &Store, now_ms: i64) -> Result<u64, sqlx::Error> {
    let sql = concat!("DELETE FROM tasks WHERE expires_ms <= $1 AND NOT ", live!());
    on_pool!(store, |pool| Ok(sqlx::query(sql).bind(now_ms).execute(pool).await?.rows_affected()))
}

/// How many tasks `client` has live, and stored in all (live or kept until their TTL).
pub async fn count(store: &Store, client: &str) -> Result<(i64, i64), sqlx::Error> {
    on_pool!(store, |pool| {
        let row = sqlx::query(COUNT).bind(client).fetch_one(pool).await?;
        Ok((row.try_get::<i64, _>("live")?, row.try_get::<i64, _>("stored")?))
    })
}

/// [`count`]'s query.
const COUNT: &str =
    concat!("SELECT COALESCE(SUM(CASE WHEN ", live!(), " THEN 1 ELSE 0 END), 0) AS live, COUNT(*) AS stored FROM tasks WHERE client = $1");

/// Parks a `working` task on `requests` (`input_required`, no answers yet); `false` when it is
/// no longer working (cancelled meanwhile).
pub async fn await_input(store: &Store, id: &str, requests: &Map<String, Value>, now_ms: i64) -> Result<bool, sqlx::Error> {
    let sql = "UPDATE tasks SET status = 'input_required', input_requests = $1, input_responses = '{}', updated_ms = $2 \
               WHERE id = $3 AND status = 'working'";
    let requests = Value::Object(requests.clone()).to_string();
    on_pool!(store, |pool| Ok(sqlx::query(sql).bind(&requests).bind(now_ms).bind(id).execute(pool).await?.rows_affected() == 1))
}

/// Stores answers over the state read at `seen_ms` (compare and swap: `false` when the task
/// changed since, and the caller reads it again). With nothing left pending the task is
/// `working` again, its answers waiting for the replica that runs it.
pub async fn store_answers(
    store: &Store,
    id: &str,
    pending: &Map<String, Value>,
    answered: &Map<String, Value>,
    seen_ms: i64,
    now_ms: i64,
) -> Result<bool, sqlx::Error> {
    let sql = "UPDATE tasks SET status = $1, input_requests = $2, input_responses = $3, updated_ms = $4 \
               WHERE id = $5 AND status = 'input_required' AND updated_ms = $6";
    let status = if pending.is_empty() { "working" } else { "input_required" };
    let pending = (!pending.is_empty()).then(|| Value::Object(pending.clone()).to_string());
    let answered = Value::Object(answered.clone()).to_string();
    on_pool!(store, |pool| {
        let done = sqlx::query(sql).bind(status).bind(&pending).bind(&answered).bind(now_ms).bind(id).bind(seen_ms).execute(pool).await?;
        Ok(done.rows_affected() == 1)
    })
}

/// The running replica took the answers of a `working` task.
pub async fn take_answers(store: &Store, id: &str) -> Result<(), sqlx::Error> {
    let sql = "UPDATE tasks SET input_requests = NULL, input_responses = NULL WHERE id = $1 AND status = 'working'";
    on_pool!(store, |pool| sqlx::query(sql).bind(id).execute(pool).await.map(drop))
}
