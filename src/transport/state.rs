//! What the MCP endpoint's handlers share: the server, the legacy sessions and listen streams,
//! the settings, the admission policy, the token verifier (to render scope refusals), and the
//! shutdown token that ends notification streams. One `Arc`, cloned per request.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::client_ip::TrustedProxies;
use super::listen::Listeners;
use crate::admission::Admission;
use crate::audit::AuditLog;
use crate::auth::bearer::Authenticator;
use crate::config::Settings;
use crate::server::McpServer;
use crate::session::SessionStore;

/// See the module docs.
#[derive(Clone)]
pub struct McpState(Arc<McpShared>);

/// What [`McpState`] points to.
pub struct McpShared {
    pub server: Arc<McpServer>,
    pub sessions: Arc<SessionStore>,
    pub listeners: Arc<Listeners>,
    pub settings: Arc<Settings>,
    /// The one policy every message and stream passes before dispatch (scopes, limits, caps).
    pub admission: Admission,
    /// `None` when `auth.mode = "off"`.
    pub auth: Option<Arc<Authenticator>>,
    /// Tool calls write their audit records here; `None` when `audit.enabled = false`.
    pub audit: Option<Arc<AuditLog>>,
    pub proxies: TrustedProxies,
    /// Cancelled when shutdown begins: notification streams end.
    pub shutdown: CancellationToken,
}

impl McpState {
    pub fn new(shared: McpShared) -> Self {
        Self(Arc::new(shared))
    }
}

impl std::ops::Deref for McpState {
    type Target = McpShared;

    fn deref(&self) -> &McpShared {
        &self.0
    }
}

impl std::fmt::Debug for McpState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpState").field("sessions", &self.sessions).finish_non_exhaustive()
    }
}
