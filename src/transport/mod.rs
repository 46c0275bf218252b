//! HTTP transports: Streamable HTTP on the MCP endpoint (both eras), the deprecated
//! 2024-11-05 HTTP+SSE pair, the Origin/Host guard, header negotiation, and the listeners'
//! connection handling.

pub mod bearer;
pub mod client_ip;
pub mod connections;
pub mod endpoint;
pub mod exchange;
pub mod extract;
pub mod guard;
pub mod headers;
pub mod http_metrics;
pub mod legacy_sse;
pub mod listen;
pub mod metadata;
pub mod modern;
pub mod refusal;
pub mod sse;
pub mod state;
pub mod streamable;
pub mod tls;

pub use state::{McpShared, McpState};

/// The settings the transport owns, checked at start-up (and by `toolgate check-config`): the
/// trusted proxies and the Host/Origin allow-lists must parse, and the TLS files must serve.
pub fn check_settings(settings: &crate::config::Settings) -> Result<(), String> {
    tls::check(settings).map_err(|e| e.to_string())?;
    client_ip::TrustedProxies::parse(&settings.server.trusted_proxies)
        .map_err(|e| format!("invalid setting server.trusted_proxies: {e}"))?;
    guard::HostGuard::check(&settings.server.allowed_hosts, &settings.server.allowed_origins)
        .map_err(|e| format!("invalid setting server.allowed_hosts / server.allowed_origins: {e}"))
}
