//! What an operator sees and does (the admin API): every owner's tasks, filtered, and a cancel
//! of anyone's task. The cancel is the owner's own ([`Tasks::cancel_row`]): stored first, then
//! the run is stopped wherever it is, this replica or another.

use super::db::{self, Filter};
use super::{TaskRow, Tasks, now_ms, storage_error};
use crate::protocol::jsonrpc::{RpcError, code};

impl Tasks {
    /// Every owner's tasks matching `filter`, newest first, at most `limit`.
    pub async fn list_every_owner(&self, filter: &Filter, limit: usize) -> Result<Vec<TaskRow>, RpcError> {
        let limit = i64::try_from(limit.max(1)).unwrap_or(i64::MAX);
        db::list_all(&self.store, filter, limit, now_ms()).await.map_err(|e| storage_error(&e))
    }

    /// Cancels task `id`, whoever owns it. `None` when there is no such task (or it ended and
    /// expired); else the task as it now stands and whether this call cancelled it (`false`:
    /// it had ended already).
    pub async fn cancel_as_operator(&self, id: &str) -> Result<Option<(TaskRow, bool)>, RpcError> {
        let Some(row) = self.peek(id).await? else { return Ok(None) };
        match self.cancel_row(row, "cancelled by an operator").await {
            Ok(done) => Ok(Some(done)),
            // It ended and expired between the read and the write.
            Err(e) if e.code == code::INVALID_PARAMS => Ok(None),
            Err(e) => Err(e),
        }
    }
}
