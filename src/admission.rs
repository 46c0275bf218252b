//! Admission: the one decision every client message and every long-lived stream passes before
//! dispatch, whatever carried it: a single POST on the MCP endpoint (either era), each item of a
//! JSON-RPC batch, a `/messages` POST of the 2024-11-05 transport, a standalone GET stream, a
//! `/sse` connection, a `subscriptions/listen` stream, a DELETE. In this order:
//!
//! 1. **Scopes**: a request needs its method's scopes (`auth.method_scopes`); the bearer gate
//!    has already checked the token and `auth.required_scopes` for every HTTP request.
//! 2. **Rate limits**: every message (request, notification or response) and every stream
//!    opening is one request against the client's budget and the server-wide ceiling;
//!    `tools/call` also spends from the tool's budget.
//! 3. **Caps**: a stream or a session takes a [`Permit`] under the client's cap, held for as
//!    long as it lives.
//!
//! Refusals are counted and audited here; the transports only render them ([`Refused`] as an
//! HTTP answer, or as a JSON-RPC error inside a batch or an open stream). A path that
//! dispatches without coming through here is a security bug: `tests/api/admission.rs` enumerates
//! every entry path.

use std::sync::Arc;

use serde_json::Value;
use tracing::Instrument as _;

use crate::audit::{AuditLog, AuditRecord, EventKind, Outcome};
use crate::auth::bearer::{Authenticator, Refusal};
use crate::caller::Caller;
use crate::limits::{Caps, Held, Limiter, Permit, Rejection};
use crate::protocol::jsonrpc::Incoming;

/// Why admission refused.
#[derive(Debug)]
pub enum Refused {
    /// The token lacks the method's scopes (403 `insufficient_scope`).
    Scope(Refusal),
    /// A rate limit or a cap (429, or 503 when the shared limiter is down and fails closed).
    Limited(Rejection),
}

/// The policy every message and stream passes; see the module docs.
pub struct Admission {
    auth: Option<Arc<Authenticator>>,
    limiter: Option<Arc<dyn Limiter>>,
    caps: Arc<Caps>,
    audit: Option<Arc<AuditLog>>,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission").field("caps", &self.caps).finish_non_exhaustive()
    }
}

impl Admission {
    pub fn new(auth: Option<Arc<Authenticator>>, limiter: Option<Arc<dyn Limiter>>, caps: Arc<Caps>, audit: Option<Arc<AuditLog>>) -> Self {
        Self { auth, limiter, caps, audit }
    }

    /// One JSON-RPC message: its scopes (requests), then one request from the budgets.
    pub async fn message(&self, caller: &Caller, message: &Incoming) -> Result<(), Refused> {
        let (method, tool) = match message {
            Incoming::Request(req) => {
                self.check_scopes(caller, &req.method)?;
                let tool = req.params.get("name").and_then(Value::as_str).filter(|_| req.method == "tools/call");
                // A tool's budget is one, whatever name a virtual server serves it under.
                let tool = match (&caller.server, tool) {
                    (Some(server), Some(served)) => Some(std::borrow::Cow::Owned(server.canonical_name(served))),
                    (_, tool) => tool.map(std::borrow::Cow::Borrowed),
                };
                (req.method.as_str(), tool)
            }
            Incoming::Notification(n) => (n.method.as_str(), None),
            Incoming::Response(_) => ("response", None),
        };
        self.charge(caller, method, tool.as_deref()).await
    }

    /// A long-lived stream: one request from the budgets, then a slot under the client's cap
    /// for `held`, kept until the returned permit is dropped (`None`: nobody to count against).
    pub async fn stream(&self, caller: &Caller, held: Held) -> Result<Option<Permit>, Refused> {
        self.charge(caller, held.as_str(), None).await?;
        self.hold(caller, held)
    }

    /// A slot under the client's cap for `held`, without charging a request (the request that
    /// opens it was admitted as a message already).
    pub fn hold(&self, caller: &Caller, held: Held) -> Result<Option<Permit>, Refused> {
        let Some(key) = caller.client_key() else { return Ok(None) };
        match self.caps.acquire(held, key) {
            Ok(permit) => Ok(Some(permit)),
            Err(rejection) => {
                tracing::info!(client = ?key, held = held.as_str(), "refused: the client is at its cap");
                Err(self.limited(caller, rejection, held.as_str(), None))
            }
        }
    }

    /// One request that is neither a message nor a stream (a DELETE).
    pub async fn request(&self, caller: &Caller, what: &str) -> Result<(), Refused> {
        self.charge(caller, what, None).await
    }

    fn check_scopes(&self, caller: &Caller, method: &str) -> Result<(), Refused> {
        let (Some(auth), Some(principal)) = (&self.auth, caller.principal.as_deref()) else { return Ok(()) };
        auth.check_method(principal, method).map_err(|refusal| {
            let record = AuditRecord::new(EventKind::AuthzDenied, Outcome::Denied).with_detail(format!("insufficient scope for {method}"));
            self.spawn_record(caller, record);
            Refused::Scope(refusal)
        })
    }

    /// The client's budget (the principal, or the address without auth, never the session) and,
    /// for `tools/call`, the tool's. Async for the cluster-wide limiter's round trip; with the
    /// local one the check is `Ready` and this never suspends.
    async fn charge(&self, caller: &Caller, what: &str, tool: Option<&str>) -> Result<(), Refused> {
        let (Some(limiter), Some(key)) = (&self.limiter, caller.client_key()) else { return Ok(()) };
        let span = tracing::info_span!("rate_limit", limited = tracing::field::Empty);
        let Err(rejection) = limiter.check(&key, tool).instrument(span.clone()).await else { return Ok(()) };
        span.record("limited", rejection.reason.as_str());
        Err(self.limited(caller, rejection, what, tool))
    }

    fn limited(&self, caller: &Caller, rejection: Rejection, what: &str, tool: Option<&str>) -> Refused {
        crate::metrics::record::rate_limited(rejection.reason.as_str());
        let mut record = AuditRecord::new(EventKind::RateLimited, Outcome::RateLimited)
            .with_detail(format!("{} limit on {what}", rejection.reason.as_str()));
        if let Some(tool) = tool {
            record = record.with_tool(tool, &Value::Null);
        }
        self.spawn_record(caller, record);
        Refused::Limited(rejection)
    }

    /// Writes an audit record off the request path (refusals must stay cheap).
    fn spawn_record(&self, caller: &Caller, record: AuditRecord) {
        if let Some(audit) = &self.audit {
            caller.audit_in_background(audit, record);
        }
    }
}
