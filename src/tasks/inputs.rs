//! Input a running task needs from its client (elicitation, sampling, roots), in both eras.
//!
//! The replica running the task parks it `input_required` with the requests ([`Tasks::park`])
//! and waits ([`Tasks::answers`]). Answers arrive through any replica ([`Tasks::answer`]): a 2026-07-28 client's
//! `tasks/update`, or a 2025-11-25 client answering the requests its `tasks/result` stream
//! relayed. Each answer is stored before it is acknowledged, a partial one leaves the task
//! waiting on the rest, and a key that was never requested (or is answered already) is
//! ignored. The running replica is woken at once (locally, or by
//! [`ClusterEvent::TaskChanged`](crate::cluster::ClusterEvent::TaskChanged)) and also re-reads the row every few hundred milliseconds,
//! so a lost wake-up costs a delay, never the answer.

use std::time::Duration;

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::{Tasks, db, now_ms, storage_error};
use crate::protocol::jsonrpc::RpcError;
use crate::protocol::task::TaskStatus;

/// How often a waiting task re-reads its row when no wake-up came.
const RECHECK: Duration = Duration::from_millis(500);

/// Why a task's question went unanswered.
#[derive(Debug, PartialEq, Eq)]
pub enum Unanswered {
    /// The task was cancelled (or otherwise ended) meanwhile.
    Ended,
    /// The answers could not be stored or read.
    Storage,
}

impl Tasks {
    /// Parks task `id` on `requests` (`{"key": {"method", "params"}}`): it turns
    /// `input_required`, the requests stored for `tasks/get` and relays.
    pub async fn park(&self, id: &str, requests: &Map<String, Value>) -> Result<(), Unanswered> {
        let parked = db::await_input(&self.store, id, requests, now_ms()).await.map_err(|e| {
            tracing::error!(task = id, error = %e, "cannot park a task on its input");
            Unanswered::Storage
        })?;
        if !parked {
            return Err(Unanswered::Ended);
        }
        crate::metrics::record::task_input_requested();
        self.announce(id);
        Ok(())
    }

    /// Waits until every key of `requests` (parked by [`Self::park`]) is answered; returns
    /// the answers by key. The caller's `cancel` (the task's own token) ends the wait.
    pub async fn answers(
        &self,
        id: &str,
        requests: &Map<String, Value>,
        cancel: &CancellationToken,
    ) -> Result<Map<String, Value>, Unanswered> {
        loop {
            let changed = self.changed.notified();
            let row = db::get(&self.store, id, now_ms()).await.map_err(|_| Unanswered::Storage)?.ok_or(Unanswered::Ended)?;
            if row.task.status.is_terminal() {
                return Err(Unanswered::Ended);
            }
            if row.task.status == TaskStatus::Working {
                let mut answered = row.input_responses.unwrap_or_default();
                answered.retain(|key, _| requests.contains_key(key));
                if answered.len() == requests.len() {
                    db::take_answers(&self.store, id).await.map_err(|_| Unanswered::Storage)?;
                    return Ok(answered);
                }
            }
            tokio::select! {
                () = changed => {}
                () = tokio::time::sleep(RECHECK) => {}
                () = cancel.cancelled() => return Err(Unanswered::Ended),
            }
        }
    }

    /// Stores `responses` for the pending requests of task `id` of `owner`, before the caller
    /// acknowledges them. Keys that are not pending are ignored, as is a task not waiting on
    /// input. `Err` only for a task that is not the owner's (or does not exist) and storage
    /// failures.
    pub async fn answer(&self, id: &str, owner: &str, responses: &Map<String, Value>) -> Result<(), RpcError> {
        // A few rounds of compare-and-swap: two answers racing on two replicas both land.
        for _ in 0..8 {
            let row = self.get(id, owner).await?;
            if row.task.status != TaskStatus::InputRequired {
                return Ok(());
            }
            let mut pending = row.input_requests.unwrap_or_default();
            let mut answered = row.input_responses.unwrap_or_default();
            let mut took = false;
            for (key, answer) in responses {
                if pending.remove(key).is_some() {
                    answered.insert(key.clone(), answer.clone());
                    took = true;
                }
            }
            if !took {
                return Ok(());
            }
            // Strictly later than what was read, so the swap can tell the two apart.
            let now = now_ms().max(row.task.updated_ms + 1);
            let stored =
                db::store_answers(&self.store, id, &pending, &answered, row.task.updated_ms, now).await.map_err(|e| storage_error(&e))?;
            if stored {
                self.announce(id);
                return Ok(());
            }
        }
        tracing::warn!(task = id, "task answers kept colliding; asking the client to retry");
        Err(RpcError::internal())
    }
}
