//! What an operator sees and does (the admin API): every owner's tasks, filtered, each with
//! its owner read back from the owner key, and a cancel of anyone's task. The cancel is the
//! owner's own ([`Tasks::cancel_row`](super::Tasks)): stored first, then the run is stopped
//! wherever it is, this replica or another.

use super::db::{self, Filter};
use super::{Cancelled, TaskRow, Tasks, now_ms, storage_error};
use crate::caller::Caller;
use crate::protocol::jsonrpc::RpcError;

/// Who owns a task, read back from its owner key ([`Caller::owner_key`]): `issuer` U+001F
/// `subject`, then U+001E `server` at a virtual server; all `None` without authentication.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Owner<'a> {
    pub issuer: Option<&'a str>,
    pub subject: Option<&'a str>,
    pub server: Option<&'a str>,
}

impl TaskRow {
    /// Its owner, as [`Owner`] parts.
    pub fn owned_by(&self) -> Owner<'_> {
        let (principal, server) = self.owner.split_once('\u{1e}').map_or((self.owner.as_str(), None), |(p, s)| (p, Some(s)));
        let (issuer, subject) = principal.split_once('\u{1f}').map_or((None, None), |(i, s)| (Some(i), Some(s)));
        Owner { issuer, subject, server }
    }
}

impl Tasks {
    /// Every owner's tasks matching `filter`, newest first, at most `limit`.
    pub async fn list_every_owner(&self, filter: &Filter, limit: usize) -> Result<Vec<TaskRow>, RpcError> {
        let limit = i64::try_from(limit.max(1)).unwrap_or(i64::MAX);
        db::list_all(&self.store, filter, limit, now_ms()).await.map_err(|e| storage_error(&e))
    }

    /// An operator's (`actor`'s) cancel of task `id`, whoever owns it.
    pub async fn cancel_as_operator(&self, id: &str, actor: &Caller) -> Result<Cancelled, RpcError> {
        let Some(row) = self.peek(id).await? else { return Ok(Cancelled::NotFound) };
        self.cancel_row(row, "cancelled by an operator", actor).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned(owner: &str) -> TaskRow {
        let task = crate::protocol::task::Task {
            id: "t".into(),
            status: crate::protocol::task::TaskStatus::Working,
            status_message: None,
            created_ms: 0,
            updated_ms: 0,
            ttl_ms: None,
            poll_ms: 1000,
        };
        TaskRow {
            task,
            owner: owner.into(),
            era: "modern".into(),
            tool: "t".into(),
            outcome: None,
            lease_owner: None,
            input_requests: None,
            input_responses: None,
        }
    }

    #[test]
    fn an_owner_key_reads_back_as_issuer_subject_and_server() {
        let at_server = owned("https://idp\u{1f}alice\u{1e}billing");
        assert_eq!(at_server.owned_by(), Owner { issuer: Some("https://idp"), subject: Some("alice"), server: Some("billing") });
        assert_eq!(owned("https://idp\u{1f}bob").owned_by().subject, Some("bob"));
        assert_eq!(owned("").owned_by(), Owner::default(), "no authentication: no owner");
    }
}
