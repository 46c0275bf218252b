//! The upkeep of tasks: every replica renews its leases, fails the tasks of replicas that
//! stopped (lapsed leases), deletes tasks past their TTL and trims the poll limit's table; at
//! shutdown a replica fails the tasks it still runs. Each task failed this way gets its audit
//! record.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{Tasks, db, now_ms};
use crate::audit::{AuditRecord, EventKind, Outcome};
use crate::protocol::jsonrpc::code;
use crate::protocol::task::TaskStatus;

impl Tasks {
    /// The upkeep every replica runs until `stop`: renews this replica's leases, fails tasks
    /// whose replica stopped (lapsed leases), deletes tasks past their TTL.
    pub async fn maintain(self: Arc<Self>, stop: CancellationToken) {
        let period = Duration::from_millis(u64::try_from(self.settings.lease_ms() / 3).unwrap_or(10_000).max(100));
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = stop.cancelled() => return,
            }
            let now = now_ms();
            // Taken before the renewal, so each of these rows was in the table when it ran.
            let stored = self.stored_runs();
            let runs: Vec<String> = self.running.lock().keys().cloned().collect();
            match db::renew(&self.store, self.cluster.replica(), &runs, now + self.settings.lease_ms()).await {
                Ok(renewed) => self.stop_unclaimed(stored, &renewed),
                Err(e) => tracing::warn!(error = %e, "cannot renew task leases"),
            }
            match db::fail_lapsed(&self.store, now).await {
                Ok(lost) if lost.is_empty() => {}
                Ok(lost) => {
                    tracing::warn!(tasks = lost.len(), "tasks failed: the replica running them stopped");
                    crate::metrics::record::tasks_lease_lost(lost.len() as u64);
                    for (id, _) in &lost {
                        self.announce(id);
                    }
                    self.audit_lost(&lost).await;
                }
                Err(e) => tracing::warn!(error = %e, "cannot check task leases"),
            }
            if let Some(polls) = &self.polls {
                polls.trim();
            }
            if let Err(e) = db::prune(&self.store, now).await {
                tracing::warn!(error = %e, "cannot delete expired tasks");
            }
        }
    }

    /// The runs here whose row is in the table.
    fn stored_runs(&self) -> Vec<String> {
        self.running.lock().iter().filter(|(_, run)| run.stored).map(|(id, _)| id.clone()).collect()
    }

    /// Stops the runs of `stored` whose task the renewal did not find live under this
    /// replica's lease (`renewed` holds the ones it did): their lease lapsed (a stall, a
    /// database outage) and another replica failed them, so the run must end with its row, or
    /// it would go on uncounted by the running cap. A run that ended meanwhile has left the
    /// map and is not stopped twice.
    fn stop_unclaimed(&self, stored: Vec<String>, renewed: &[String]) {
        let renewed: HashSet<&str> = renewed.iter().map(String::as_str).collect();
        for id in stored.into_iter().filter(|id| !renewed.contains(id.as_str())) {
            if self.stop_local(&id) {
                tracing::warn!(task = %id, "a task's run stopped: its lease lapsed and the task was ended elsewhere");
            }
        }
    }

    /// One `task_change` record per task failed because its server stopped (written by this
    /// replica at its shutdown, or by whichever replica noticed the lapsed lease).
    async fn audit_lost(&self, lost: &[(String, String)]) {
        let Some(audit) = &self.audit else { return };
        for (id, tool) in lost {
            let record = AuditRecord::new(EventKind::TaskChange, Outcome::InternalError)
                .with_tool(tool, &Value::Null)
                .with_detail(format!("task {id} failed: the server running it stopped"));
            audit.record(record).await;
        }
    }

    /// At shutdown: fails the tasks still running here, so clients learn at once instead of
    /// after the lease lapses.
    pub async fn abandon_local(&self) {
        let stopped: Vec<(String, String)> = self
            .running
            .lock()
            .iter()
            .map(|(id, running)| {
                running.cancel.cancel();
                (id.clone(), running.tool.clone())
            })
            .collect();
        let error =
            json!({"error": {"code": code::INTERNAL_ERROR, "message": "The server stopped before the task finished; start it again"}});
        let mut failed = Vec::with_capacity(stopped.len());
        for (id, tool) in stopped {
            // Only the tasks this write ended: one cancelled meanwhile has its record already.
            if self.finish(&id, TaskStatus::Failed, Some("the server stopped before the task finished"), &error).await {
                failed.push((id, tool));
            }
        }
        self.audit_lost(&failed).await;
    }
}
