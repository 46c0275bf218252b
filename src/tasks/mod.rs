//! Tasks: tool calls that outlive their request, kept in the database so any replica answers
//! for any task and a restart loses no finished result.
//!
//! A task is created `working`, stored, and claimed by the replica that runs it (a lease,
//! renewed every third of `tasks.lease_secs`); the call then runs detached from its request.
//! It ends `completed`, `failed` or `cancelled`, and a terminal task never changes
//! ([`db`]). A cancel through any replica is written first, then reaches the running replica
//! (locally, or as [`ClusterEvent::TaskCancelled`]). A replica that dies leaves its lease to
//! lapse; every replica's [`Tasks::maintain`] then fails the task with a clear message (and
//! the replica still running it, if any, stops the run), and deletes ended tasks past their
//! TTL: a task's run and its row end together, so the running cap counts what runs. Tasks
//! belong to their creator: anyone else is told the task does not exist.

mod cancel;
pub mod db;
mod inputs;
mod operator;
mod polls;
mod upkeep;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::{Notify, broadcast};
use tokio_util::sync::CancellationToken;

pub use cancel::Cancelled;
pub use db::TaskRow;
pub use inputs::Unanswered;
pub use operator::Owner;

use crate::audit::AuditLog;
use crate::cluster::{Cluster, ClusterEvent};
use crate::config::tasks::TaskSettings;
use crate::protocol::jsonrpc::{RpcError, code};
use crate::protocol::task::{Task, TaskStatus};
use crate::store::Store;

/// The task service of one replica.
pub struct Tasks {
    store: Store,
    settings: TaskSettings,
    cluster: Arc<dyn Cluster>,
    /// Tasks running here, by id: cancelling the token stops the tool.
    running: Mutex<HashMap<String, Running>>,
    /// Held on SQLite from counting a client's tasks to storing the new one, so creates at once
    /// cannot all pass the caps on one count (16 got past a cap of 4). On Postgres,
    /// [`db::insert_within`] counts and stores under a lock on the client in the database,
    /// across replicas, and one client's wait holds up no other.
    creating: tokio::sync::Mutex<()>,
    /// Woken whenever a task changes on this replica (waiters re-read the row).
    changed: Notify,
    /// Where the tasks this replica finds abandoned are recorded (`None`: the audit log is off).
    audit: Option<Arc<AuditLog>>,
    /// `tasks/get` faster than the poll interval (`None`: not limited).
    polls: Option<polls::PollLimit>,
    /// The id of every task that changed, here or (through the cluster channel) elsewhere:
    /// what status notifications are sent from.
    watch: broadcast::Sender<Arc<str>>,
}

impl std::fmt::Debug for Tasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tasks").field("running", &self.running.lock().len()).finish_non_exhaustive()
    }
}

/// A task whose tool runs on this replica.
struct Running {
    cancel: CancellationToken,
    created_ms: i64,
    tool: String,
    /// Its row is in the table (the insert returned): from then on every lease renewal must
    /// find it live, or it was ended elsewhere.
    stored: bool,
}

/// Seconds from `created_ms` to now, for the duration histogram.
fn since(created_ms: i64) -> f64 {
    (now_ms().saturating_sub(created_ms)).max(0) as f64 / 1000.0
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(now.as_millis()).unwrap_or(i64::MAX)
}

/// A task id: 128 random bits, URL-safe (unguessable, so even without authentication one
/// client cannot reach another's task by trying ids).
fn new_id() -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 16]>())
}

fn storage_error(e: &sqlx::Error) -> RpcError {
    tracing::error!(error = %e, "task storage failed");
    RpcError::internal()
}

/// -32602 for a task that does not exist, expired, or belongs to someone else (the same
/// answer, so ids cannot be probed).
fn not_found(id: &str) -> RpcError {
    RpcError::invalid_params(format!("Task not found: {id} (unknown, expired, or not yours)"))
}

impl Tasks {
    pub fn new(store: Store, settings: TaskSettings, cluster: Arc<dyn Cluster>, audit: Option<Arc<AuditLog>>) -> Arc<Self> {
        let polls = polls::PollLimit::new(settings.poll_interval_ms, settings.poll_burst);
        let (watch, _) = broadcast::channel(1024);
        Arc::new(Self {
            store,
            settings,
            cluster,
            running: Mutex::new(HashMap::new()),
            creating: tokio::sync::Mutex::new(()),
            changed: Notify::new(),
            audit,
            polls,
            watch,
        })
    }

    /// Creates and stores a `working` task for `owner`, claimed by this replica, with the TTL
    /// the client asked for (bounded by `tasks.max_ttl_secs`). Returned only once stored, so
    /// a `tasks/get` through any replica finds it. The token stops the tool when the task is
    /// cancelled. `client` is whom `tasks.max_running_per_client` counts against (without
    /// authentication every task's owner is "", but each address has its own cap).
    pub async fn create(
        &self,
        owner: &str,
        client: &str,
        era: &str,
        tool: &str,
        ttl_ms: Option<u64>,
    ) -> Result<(Task, CancellationToken), RpcError> {
        let now = now_ms();
        let poll_ms = i64::try_from(self.settings.poll_interval_ms).unwrap_or(1000);
        let task = Task {
            id: new_id(),
            status: TaskStatus::Working,
            status_message: None,
            created_ms: now,
            updated_ms: now,
            ttl_ms: Some(self.settings.ttl_ms(ttl_ms)),
            poll_ms,
        };
        let row = TaskRow {
            task: task.clone(),
            owner: owner.to_owned(),
            era: era.to_owned(),
            tool: tool.to_owned(),
            outcome: None,
            lease_owner: Some(self.cluster.replica().to_owned()),
            input_requests: None,
            input_responses: None,
        };
        let cancel = CancellationToken::new();
        let run = Running { cancel: cancel.clone(), created_ms: now, tool: tool.to_owned(), stored: false };
        self.track(|running| running.insert(task.id.clone(), run));
        // Untracked again if this ends here: refused, failed, or dropped while it waits.
        let mut tracked = Untrack { tasks: self, id: task.id.clone(), armed: true };
        let stored = {
            // Postgres decides under a lock of its own, per client (db::insert_within).
            let _counted = match self.store.backend() {
                crate::store::Backend::Sqlite(_) => Some(self.creating.lock().await),
                crate::store::Backend::Postgres(_) => None,
            };
            db::insert_within(&self.store, &row, client, now + self.settings.lease_ms(), |live, stored| self.within_caps(live, stored))
                .await
        };
        stored.map_err(|e| storage_error(&e)).and_then(|within| within)?;
        tracked.armed = false;
        if let Some(run) = self.running.lock().get_mut(&task.id) {
            run.stored = true;
        }
        crate::metrics::record::task_created();
        Ok((task, cancel))
    }

    /// `Err` when a client with `live` running and `stored` kept tasks may not create another.
    fn within_caps(&self, live: i64, stored: i64) -> Result<(), RpcError> {
        if usize::try_from(live).unwrap_or(usize::MAX) >= self.settings.max_running_per_client {
            let max = self.settings.max_running_per_client;
            return Err(RpcError::new(
                code::TRANSPORT,
                format!("Too many running tasks: {max} at once (tasks.max_running_per_client); wait for one to finish or cancel one"),
            )
            .with_data(json!({ "limit": "tasks" })));
        }
        if usize::try_from(stored).unwrap_or(usize::MAX) >= self.settings.max_stored_per_client {
            let max = self.settings.max_stored_per_client;
            return Err(RpcError::new(
                code::TRANSPORT,
                format!(
                    "Too many stored tasks: {max} kept until their TTL (tasks.max_stored_per_client); ask for shorter TTLs, or wait for older tasks to expire"
                ),
            )
            .with_data(json!({ "limit": "stored_tasks" })));
        }
        Ok(())
    }

    /// A client's poll of task `id` (`tasks/get`): the task if `owner` created it, unless the
    /// owner polls it faster than the poll interval allows. Charged after the owner check and
    /// to the owner's own allowance for this task: anyone else is told exactly what an unknown
    /// id gets, and spends nothing of the owner's.
    pub async fn poll(&self, id: &str, owner: &str) -> Result<TaskRow, RpcError> {
        let row = self.get(id, owner).await?;
        if let Some(polls) = &self.polls {
            polls.check(owner, id)?;
        }
        Ok(row)
    }

    /// The task `id`, whoever owns it (for a listener already checked to own it).
    pub async fn peek(&self, id: &str) -> Result<Option<TaskRow>, RpcError> {
        db::get(&self.store, id, now_ms()).await.map_err(|e| storage_error(&e))
    }

    /// The ids of tasks as they change, here or on another replica. A receiver that lags
    /// misses some (clients poll as well; notifications are a courtesy).
    pub fn subscribe_changes(&self) -> broadcast::Receiver<Arc<str>> {
        self.watch.subscribe()
    }

    /// Task `id` changed here: waiters here re-read it, the other replicas are told.
    fn announce(&self, id: &str) {
        self.changed.notify_waiters();
        let _ = self.watch.send(id.into());
        self.cluster.publish(ClusterEvent::TaskChanged { task: id.to_owned() });
    }

    /// Task `id` changed on another replica.
    pub fn changed_elsewhere(&self, id: &str) {
        self.changed.notify_waiters();
        let _ = self.watch.send(id.into());
    }

    /// The task `id` if `owner` created it.
    pub async fn get(&self, id: &str, owner: &str) -> Result<TaskRow, RpcError> {
        let row = db::get(&self.store, id, now_ms()).await.map_err(|e| storage_error(&e))?;
        row.filter(|r| r.owner == owner).ok_or_else(|| not_found(id))
    }

    /// A page of `owner`'s tasks after `after` (`created_ms`, id), and the key of the next.
    pub async fn list(
        &self,
        owner: &str,
        after: Option<(i64, String)>,
        limit: usize,
    ) -> Result<(Vec<TaskRow>, Option<(i64, String)>), RpcError> {
        let limit = i64::try_from(limit.max(1)).unwrap_or(100);
        let mut rows = db::list(&self.store, owner, after, limit + 1, now_ms()).await.map_err(|e| storage_error(&e))?;
        let next = (rows.len() > usize::try_from(limit).unwrap_or(usize::MAX)).then(|| {
            rows.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
            rows.last().map(|r| (r.task.created_ms, r.task.id.clone()))
        });
        Ok((rows, next.flatten()))
    }

    /// Ends a live task with `outcome` (`{"result": …}` or `{"error": …}`); a task already
    /// terminal (cancelled meanwhile) stays as it is. Returns whether this write ended it.
    pub async fn finish(&self, id: &str, status: TaskStatus, message: Option<&str>, outcome: &Value) -> bool {
        let created_ms = self.track(|running| running.remove(id)).map_or_else(now_ms, |r| r.created_ms);
        let ended = match db::finish(&self.store, id, status, message, Some(outcome), now_ms()).await {
            Ok(ended) => ended,
            Err(e) => {
                // The lease lapses and another replica fails the task: never lost silently.
                tracing::error!(task = id, error = %e, "cannot store a task's result");
                false
            }
        };
        if ended {
            crate::metrics::record::task_ended(status.as_str(), since(created_ms));
            self.announce(id);
        }
        ended
    }

    /// Stops the tool of task `id` if it runs here (a cancel written through another
    /// replica). Returns whether it did.
    pub fn stop_local(&self, id: &str) -> bool {
        match self.track(|running| running.remove(id)) {
            Some(running) => {
                running.cancel.cancel();
                true
            }
            None => false,
        }
    }

    /// Changes the map of tasks running here, keeping the running-tasks gauge in step.
    fn track<T>(&self, change: impl FnOnce(&mut HashMap<String, Running>) -> T) -> T {
        let mut running = self.running.lock();
        let out = change(&mut running);
        crate::metrics::record::tasks_running(running.len());
        out
    }

    /// Waits until task `id` of `owner` is terminal, or `stop` is cancelled (`None`).
    pub async fn wait_terminal(&self, id: &str, owner: &str, stop: &CancellationToken) -> Result<Option<TaskRow>, RpcError> {
        self.wait_for(id, owner, stop, |row| row.task.status.is_terminal()).await
    }

    /// Waits until task `id` of `owner` is terminal or `until` holds for it, or `stop` is
    /// cancelled (`None`).
    pub async fn wait_for(
        &self,
        id: &str,
        owner: &str,
        stop: &CancellationToken,
        until: impl Fn(&TaskRow) -> bool,
    ) -> Result<Option<TaskRow>, RpcError> {
        loop {
            let changed = self.changed.notified();
            let row = self.get(id, owner).await?;
            if row.task.status.is_terminal() || until(&row) {
                return Ok(Some(row));
            }
            // Changes made on other replicas are seen by polling; local ones wake at once.
            let poll = Duration::from_millis(u64::try_from(row.task.poll_ms).unwrap_or(1000).clamp(50, 500));
            tokio::select! {
                () = changed => {}
                () = tokio::time::sleep(poll) => {}
                () = stop.cancelled() => return Ok(None),
            }
        }
    }
}

/// Removes a run from [`Tasks::running`] when its creation ends without a stored row.
struct Untrack<'a> {
    tasks: &'a Tasks,
    id: String,
    armed: bool,
}

impl Drop for Untrack<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.tasks.track(|running| running.remove(&self.id));
        }
    }
}
