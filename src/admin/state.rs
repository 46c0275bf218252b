//! What the admin API's handlers share: the stored definitions and their sources, the settings,
//! what the admin gate needs to authenticate, limit and audit, and for the console the MCP
//! endpoint's state (sessions, streams, and the admission policy a tool try-out passes) and the
//! metrics recorder. One `Arc`, cloned per request.

use std::sync::Arc;

use metrics_exporter_prometheus::PrometheusHandle;

use crate::audit::AuditLog;
use crate::auth::bearer::Authenticator;
use crate::cluster::Cluster;
use crate::config::Settings;
use crate::limits::Limiter;
use crate::server::McpServer;
use crate::store::Store;
use crate::tooldef::Definitions;
use crate::transport::McpState;
use crate::transport::client_ip::TrustedProxies;

/// See the module docs.
#[derive(Clone)]
pub struct AdminState(Arc<AdminShared>);

/// What [`AdminState`] points to.
pub struct AdminShared {
    pub settings: Arc<Settings>,
    /// For the names served by code and files besides the stored definitions.
    pub server: Arc<McpServer>,
    pub definitions: Arc<Definitions>,
    /// The upstream MCP servers, for their status.
    pub upstreams: Arc<crate::upstream::Upstreams>,
    pub store: Store,
    pub audit: Option<Arc<AuditLog>>,
    pub limiter: Option<Arc<dyn Limiter>>,
    pub cluster: Arc<dyn Cluster>,
    pub auth: Option<Arc<Authenticator>>,
    pub proxies: TrustedProxies,
    /// The MCP endpoint's state: its sessions and listen streams (`GET /admin/sessions`), and
    /// the one [`Admission`](crate::admission::Admission) a tool try-out passes like every
    /// MCP message (`POST /admin/tools/{name}/call`).
    pub mcp: McpState,
    /// The process-wide Prometheus recorder, read back by `GET /admin/overview`.
    pub metrics: PrometheusHandle,
    /// The built-in authorization server, for its grants (`/admin/grants`).
    pub authserver: Option<Arc<crate::authserver::AuthServer>>,
    /// Users' upstream connections (`/admin/connections`), when the vault is on.
    pub vault: Option<Arc<crate::vault::Vault>>,
}

impl AdminState {
    pub fn new(shared: AdminShared) -> Self {
        Self(Arc::new(shared))
    }
}

impl std::ops::Deref for AdminState {
    type Target = AdminShared;

    fn deref(&self) -> &AdminShared {
        &self.0
    }
}
