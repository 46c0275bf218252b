//! The client channel of a tool running as a task. Its request has been answered, so a
//! question parks the task `input_required` with the requests (keys unique for the task's
//! life) until answers arrive through any replica ([`Tasks::park`], [`Tasks::answers`]).
//! A 2025-11-25 task created in a session also tells that session: progress and log messages,
//! tagged with the task, and `notifications/tasks/status` on each change of status made here,
//! go to the session's GET stream. The 2026-07-28 tasks extension carries neither.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::protocol::Era;
use crate::protocol::jsonrpc::{RpcError, code};
use crate::protocol::task::tag_related;
use crate::session::Session;
use crate::tasks::{Tasks, Unanswered};
use crate::tool::{ClientChannel, InputRequest};

pub(super) struct TaskChannel {
    tasks: Arc<Tasks>,
    id: String,
    /// Who created the task (to read it back for status notifications).
    owner: String,
    /// The 2025-11-25 session that created the task, while it lives.
    session: Option<Weak<Session>>,
    /// The task's own token: a cancel ends the wait for answers.
    cancel: CancellationToken,
    /// Every key asked so far, so a key asked again gets a fresh name.
    used: Mutex<HashSet<String>>,
}

impl TaskChannel {
    pub(super) fn new(
        tasks: Arc<Tasks>,
        id: String,
        owner: String,
        cancel: CancellationToken,
        session: Option<&Arc<Session>>,
    ) -> Arc<Self> {
        let session = session.filter(|s| s.version().era() == Era::Legacy).map(Arc::downgrade);
        Arc::new(Self { tasks, id, owner, session, cancel, used: Mutex::new(HashSet::new()) })
    }

    /// Sends `message` to the session's stream for unrelated messages, if it has one open.
    fn tell_session(&self, message: &Value) {
        if let Some(session) = self.session.as_ref().and_then(Weak::upgrade) {
            session.deliver_unsolicited(&message.to_string());
        }
    }

    /// `notifications/tasks/status` with the task as it now stands, to its session.
    pub(super) async fn tell_status(&self) {
        if self.session.is_none() {
            return;
        }
        if let Ok(row) = self.tasks.get(&self.id, &self.owner).await {
            self.tell_session(&json!({ "jsonrpc": "2.0", "method": "notifications/tasks/status", "params": row.task.legacy_json() }));
        }
    }

    /// `key`, or `key-2`, `key-3`… if the task asked under that key before.
    fn fresh(&self, key: &str) -> String {
        let mut used = self.used.lock();
        let key = (1..).map(|n| if n == 1 { key.to_owned() } else { format!("{key}-{n}") }).find(|k| !used.contains(k));
        let key = key.unwrap_or_else(|| unreachable!("an unbounded range has an unused key"));
        used.insert(key.clone());
        key
    }

    async fn ask(&self, requests: Vec<(String, &'static str, Value)>) -> Result<Vec<Value>, RpcError> {
        let mut asked = Map::new();
        let mut keys = Vec::with_capacity(requests.len());
        for (key, method, params) in requests {
            let key = self.fresh(&key);
            asked.insert(key.clone(), json!({ "method": method, "params": params }));
            keys.push((key, method));
        }
        let unanswered = |why| match why {
            Unanswered::Ended => RpcError::new(code::TRANSPORT, "the task ended while it waited for input"),
            Unanswered::Storage => RpcError::internal(),
        };
        self.tasks.park(&self.id, &asked).await.map_err(unanswered)?;
        self.tell_status().await;
        let mut answers = self.tasks.answers(&self.id, &asked, &self.cancel).await.map_err(unanswered)?;
        self.tell_status().await;
        keys.into_iter()
            .map(|(key, method)| {
                let answer = answers.remove(&key).unwrap_or(Value::Null);
                // A 2025-11-25 client that answered the relayed request with an error.
                match answer.get("error").and_then(Value::as_object) {
                    Some(error) => {
                        let message = error.get("message").and_then(Value::as_str).unwrap_or("no message");
                        Err(RpcError::new(code::INTERNAL_ERROR, format!("The client answered {method} with an error: {message}")))
                    }
                    None => Ok(answer),
                }
            })
            .collect()
    }
}

impl ClientChannel for TaskChannel {
    fn notify(&self, mut message: Value) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        if let Some(params) = message.get_mut("params") {
            tag_related(params, &self.id);
        }
        self.tell_session(&message);
        Box::pin(async {})
    }

    fn request(&self, method: &str, params: Value) -> Pin<Box<dyn Future<Output = Result<Value, RpcError>> + Send + '_>> {
        let method: &'static str = match method {
            "elicitation/create" => "elicitation/create",
            "sampling/createMessage" => "sampling/createMessage",
            "roots/list" => "roots/list",
            other => {
                let error = RpcError::new(code::INTERNAL_ERROR, format!("{other}: a task cannot send this request to its client"));
                return Box::pin(async move { Err(error) });
            }
        };
        Box::pin(async move { Ok(self.ask(vec![("input".to_owned(), method, params)]).await?.remove(0)) })
    }

    fn request_all(&self, requests: Vec<InputRequest>) -> Pin<Box<dyn Future<Output = Result<Vec<Value>, RpcError>> + Send + '_>> {
        Box::pin(self.ask(requests.into_iter().map(|r| (r.key, r.method, r.params)).collect()))
    }

    fn can_request(&self) -> bool {
        true
    }

    fn close_connection(&self) -> Pin<Box<dyn Future<Output = bool> + Send + '_>> {
        Box::pin(async { false })
    }
}
