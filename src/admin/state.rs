//! What the admin API's handlers share: the stored definitions and their sources, the settings,
//! and what the admin gate needs to authenticate, limit and audit. One `Arc`, cloned per request.

use std::sync::Arc;

use crate::audit::AuditLog;
use crate::auth::bearer::Authenticator;
use crate::cluster::Cluster;
use crate::config::Settings;
use crate::limits::Limiter;
use crate::server::McpServer;
use crate::store::Store;
use crate::tooldef::Definitions;
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
