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
//! dispatches without coming through here is a security bug: `tests/admission.rs` enumerates
//! every entry path.

use std::net::IpAddr;
use std::sync::Arc;

use serde_json::Value;
use tracing::Instrument as _;

use crate::audit::{AuditLog, AuditRecord, EventKind, Outcome};
use crate::auth::bearer::{Authenticator, Refusal};
use crate::limits::{Caps, ClientKey, Held, Limiter, Permit, Rejection};
use crate::principal::Principal;
use crate::protocol::jsonrpc::Incoming;
use crate::telemetry::TraceContext;

/// Who sent a message, as far as the transport knows: for authorization, limits and audit.
#[derive(Clone, Debug, Default)]
pub struct Caller {
    pub principal: Option<Arc<Principal>>,
    /// The HTTP request's `X-Request-Id`.
    pub request_id: Option<Arc<str>>,
    /// The client's address (the forwarded one behind a trusted proxy).
    pub ip: Option<IpAddr>,
    /// The trace: the HTTP request's, replaced by `_meta.traceparent` once the body is read.
    pub trace: Option<TraceContext>,
}

impl Caller {
    /// Whom limits and caps count against: the principal, else the address.
    pub fn client_key(&self) -> Option<ClientKey> {
        match (self.principal.as_deref(), self.ip) {
            (Some(p), _) => Some(ClientKey::from_principal(p)),
            (None, Some(ip)) => Some(ClientKey::from_ip(ip)),
            (None, None) => None,
        }
    }

    /// The span a JSON-RPC message is handled in: for a request, an `mcp` span whose trace is
    /// `_meta.traceparent`'s when it names one (which then becomes the caller's trace).
    pub fn message_span(&mut self, message: &Incoming) -> tracing::Span {
        let Incoming::Request(req) = message else { return tracing::Span::none() };
        let (span, trace) = crate::telemetry::mcp_span(&req.method, &req.params, self.trace);
        self.trace = trace;
        span
    }

    /// Adds who, from where, and which request to a record.
    pub fn stamp(&self, mut record: AuditRecord) -> AuditRecord {
        if let Some(p) = &self.principal {
            record = record.with_principal(p);
        }
        if let Some(id) = &self.request_id {
            record = record.with_request_id(id.as_ref());
        }
        if let Some(trace) = &self.trace {
            record = record.with_trace_id(trace.trace_id_hex().to_string());
        }
        if let Some(ip) = self.ip {
            record = record.with_client_ip(ip);
        }
        record
    }
}

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
                (req.method.as_str(), tool)
            }
            Incoming::Notification(n) => (n.method.as_str(), None),
            Incoming::Response(_) => ("response", None),
        };
        self.charge(caller, method, tool).await
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
            let (audit, record) = (audit.clone(), caller.stamp(record));
            tokio::spawn(async move { audit.record(record).await });
        }
    }
}
