//! Who sent an admin request (its [`Caller`]: the token's principal when auth is on, the
//! request id, the client address) and what follows every successful write: the registry
//! catches up with the database, and the change is audited.

use std::convert::Infallible;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use super::state::AdminState;
use crate::audit::{AuditRecord, EventKind, Outcome};
use crate::caller::Caller;

/// The sender of an admin request.
#[derive(Clone, Debug, Default)]
pub struct Actor(pub Caller);

impl FromRequestParts<AdminState> for Actor {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, app: &AdminState) -> Result<Self, Infallible> {
        Ok(Self(crate::transport::extract::caller(&app.proxies, &parts.extensions, &parts.headers)))
    }
}

impl Actor {
    /// The token's subject, recorded as `updated_by`.
    pub fn subject(&self) -> Option<&str> {
        self.0.subject()
    }

    /// After a successful write: reloads the database source (the registry changes and
    /// `notifications/tools/list_changed` goes out) and writes an `admin_change` audit record.
    /// `detail` names the tool and revision, never a definition's contents.
    pub async fn changed(&self, app: &AdminState, tool: &str, detail: String) {
        // This replica reloads now, so the answer reflects the change; every other replica
        // hears of it over the cluster channel and reloads too (sent after the commit, so
        // they read the new rows).
        app.cluster.publish(crate::cluster::ClusterEvent::ToolDefinitionsChanged);
        if let Err(e) = app.definitions.reload_database().await {
            // The write stands; `GET /admin/sources` shows the error and `served` is false.
            tracing::error!(tool, problems = e.count(), "the database tools were not reloaded after an admin change:\n{e}");
        }
        tracing::info!(tool, subject = self.subject(), "{detail}");
        self.audit(app, Some(tool), detail).await;
    }

    /// An `admin_change` audit record (when the audit log is on).
    pub async fn audit(&self, app: &AdminState, tool: Option<&str>, detail: String) {
        let Some(audit) = &app.audit else { return };
        let mut record = AuditRecord::new(EventKind::AdminChange, Outcome::Ok).with_detail(detail);
        record.tool = tool.map(str::to_owned);
        self.0.audit(audit, record).await;
    }
}
