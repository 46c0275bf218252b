//! The caller: who sent a request (the token's principal, when auth is on), from where, under
//! which request id and trace. Built once per HTTP request by the adapters
//! (`transport::extract`), carried whole through admission into the request context, and the one place an audit record is stamped with who, from where and which request.

use std::net::IpAddr;
use std::sync::Arc;

use crate::audit::{AuditLog, AuditRecord};
use crate::limits::ClientKey;
use crate::principal::{BearerToken, Principal};
use crate::protocol::jsonrpc::Incoming;
use crate::telemetry::TraceContext;

/// Who sent a message, as far as the transport knows: for authorization, limits and audit.
#[derive(Clone, Debug, Default)]
pub struct Caller {
    /// The verified token's principal; `None` when auth is off or before the bearer gate.
    pub principal: Option<Arc<Principal>>,
    /// The HTTP request's `X-Request-Id`.
    pub request_id: Option<Arc<str>>,
    /// The client's address (the forwarded one behind a trusted proxy).
    pub ip: Option<IpAddr>,
    /// The trace: the HTTP request's, replaced by `_meta.traceparent` once the body is read.
    pub trace: Option<TraceContext>,
    /// The verified token itself, only for an upstream's token exchange (see [`BearerToken`]).
    pub token: Option<BearerToken>,
    /// The virtual server the request was sent to; `None` for the default endpoint.
    pub server: Option<Arc<crate::virtual_servers::VirtualServer>>,
}

impl Caller {
    /// Whose tasks these are: the principal's key, or "" without authentication (task ids
    /// are unguessable then).
    pub fn owner_key(&self) -> String {
        self.principal.as_deref().map(crate::principal::Principal::key).unwrap_or_default()
    }

    /// Whom limits and caps count against: the principal, else the address.
    pub fn client_key(&self) -> Option<ClientKey> {
        match (self.principal.as_deref(), self.ip) {
            (Some(p), _) => Some(ClientKey::from_principal(p)),
            (None, Some(ip)) => Some(ClientKey::from_ip(ip)),
            (None, None) => None,
        }
    }

    /// The virtual server's name, `None` for the default endpoint.
    pub fn server_name(&self) -> Option<&str> {
        self.server.as_deref().map(|s| s.name.as_ref())
    }

    /// The token's subject, if there is a token.
    pub fn subject(&self) -> Option<&str> {
        self.principal.as_deref().map(|p| p.subject.as_str())
    }

    /// The span a JSON-RPC message is handled in: for a request, an `mcp` span whose trace is
    /// `_meta.traceparent`'s when it names one (which then becomes the caller's trace).
    pub fn message_span(&mut self, message: &Incoming) -> tracing::Span {
        let Incoming::Request(req) = message else { return tracing::Span::none() };
        let (span, trace) = crate::telemetry::mcp_span(&req.method, &req.params, self.trace);
        self.trace = trace;
        span
    }

    /// Adds who, from where, and which request to a record: the only place records get them.
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
        if let Some(server) = &self.server {
            record = record.with_server(server.name.as_ref());
        }
        record
    }

    /// Stamps and writes a record, waiting for it (with `sync` durability: until it is stored).
    pub async fn audit(&self, audit: &AuditLog, record: AuditRecord) {
        audit.record(self.stamp(record)).await;
    }

    /// Stamps and writes a record off the request path: refusals must stay cheap, whatever
    /// the audit log's durability.
    pub fn audit_in_background(&self, audit: &Arc<AuditLog>, record: AuditRecord) {
        let (audit, record) = (audit.clone(), self.stamp(record));
        tokio::spawn(async move { audit.record(record).await });
    }
}
