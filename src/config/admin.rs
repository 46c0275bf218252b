//! `[admin]` settings.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

/// The admin listener: the admin API and Prometheus metrics.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdminSettings {
    /// Serve the admin listener (admin API and Prometheus `/metrics`) at all.
    pub enabled: bool,
    /// Its address; keep it private (loopback, or a port the load balancer does not expose).
    pub bind: SocketAddr,
    /// Scope an admin token must carry (when `auth.mode` is not `off`).
    pub scope: String,
    /// Let the admin API create `command` tools (they run programs on this host). Off: only
    /// the tools file, which the operator controls, may define them.
    pub allow_command_tools: bool,
    /// Let upstreams defined through the admin API use `oauth` (client credentials, or the
    /// exchange of every caller's token at the definition's `token_url`). Off: only the
    /// settings file, which the operator controls, may.
    pub allow_upstream_oauth: bool,
    /// Largest admin request body accepted; larger ones get 413.
    pub max_body_bytes: usize,
    /// TLS on the admin listener (`[admin.tls]`), independent of the public listener's.
    pub tls: super::tls::TlsSettings,
}

impl Default for AdminSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            bind: SocketAddr::from(([127, 0, 0, 1], 8081)),
            scope: "toolgate:admin".into(),
            allow_command_tools: false,
            allow_upstream_oauth: false,
            max_body_bytes: 1024 * 1024,
            tls: super::tls::TlsSettings::default(),
        }
    }
}
