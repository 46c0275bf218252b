//! The one way a task is cancelled, by its owner (`tasks/cancel`) or by an operator (the admin
//! API): stored as `cancelled` first, then the tool is stopped wherever it runs, and the
//! cancel audited once, by whichever call's write ended the task, under whoever asked.

use serde_json::Value;

use super::{TaskRow, Tasks, now_ms, since, storage_error};
use crate::audit::{AuditRecord, EventKind, Outcome};
use crate::caller::Caller;
use crate::cluster::ClusterEvent;
use crate::protocol::jsonrpc::RpcError;
use crate::protocol::task::TaskStatus;

/// The longest owner subject written into a cancel's audit detail (it comes from a token).
const MAX_SUBJECT: usize = 256;

/// How a cancel ended.
#[derive(Debug)]
pub enum Cancelled {
    /// This call cancelled the task: it as it now stands.
    Now(TaskRow),
    /// The task had ended already (before this call, or while it ran): as it ended.
    Before(TaskRow),
    /// There is no such task: it ended and expired before the write.
    NotFound,
}

impl Tasks {
    /// `owner`'s cancel of its task `id` (`tasks/cancel`), as `actor`. Returns the task as it
    /// now stands, and whether this call cancelled it (`false`: it was terminal already).
    pub async fn cancel(&self, id: &str, owner: &str, actor: &Caller) -> Result<(TaskRow, bool), RpcError> {
        let row = self.get(id, owner).await?;
        match self.cancel_row(row, "cancelled by the client", actor).await? {
            Cancelled::Now(row) => Ok((row, true)),
            Cancelled::Before(row) => Ok((row, false)),
            Cancelled::NotFound => Err(super::not_found(id)),
        }
    }

    /// Cancels the live task `row` (whoever asked was allowed to) with `message` as its status
    /// message; when this call's write ended it, a `task_change` record (`cancelled`) names
    /// the task, how, and its owner, stamped with `actor`.
    pub(super) async fn cancel_row(&self, mut row: TaskRow, message: &str, actor: &Caller) -> Result<Cancelled, RpcError> {
        if row.task.status.is_terminal() {
            return Ok(Cancelled::Before(row));
        }
        let (id, now) = (row.task.id.clone(), now_ms());
        let won =
            super::db::finish(&self.store, &id, TaskStatus::Cancelled, Some(message), None, now).await.map_err(|e| storage_error(&e))?;
        if !won {
            // It ended between the read and the write: report what it ended as.
            return Ok(self.peek(&id).await?.map_or(Cancelled::NotFound, Cancelled::Before));
        }
        let task = &mut row.task;
        (task.status, task.status_message, task.updated_ms) = (TaskStatus::Cancelled, Some(message.to_owned()), now);
        crate::metrics::record::task_ended(TaskStatus::Cancelled.as_str(), since(task.created_ms));
        if !self.stop_local(&id) {
            self.cluster.publish(ClusterEvent::TaskCancelled { task: id.clone() });
        }
        self.announce(&id);
        if let Some(audit) = &self.audit {
            let owner = match row.owned_by().subject {
                Some(subject) => format!(" (owned by {})", crate::untrusted::text::clip(subject, MAX_SUBJECT).0),
                None => String::new(),
            };
            let record = AuditRecord::new(EventKind::TaskChange, Outcome::Cancelled)
                .with_tool(&row.tool, &Value::Null)
                .with_detail(format!("task {id} {message}{owner}"));
            actor.audit(audit, record).await;
        }
        Ok(Cancelled::Now(row))
    }
}
