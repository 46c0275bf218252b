//! Readiness: what `/readyz` reports (not draining, the database answering, tokens
//! verifiable, upstreams marked `required` connected), kept fresh by a background probe (`app::background`) so the endpoint itself
//! stays cheap.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::extract::State;
use axum::http::StatusCode;
use tokio_util::sync::CancellationToken;

/// Readiness: not draining (false from the first moment of shutdown, so the load balancer
/// stops sending new work while streams drain), the database answering (probed in the
/// background, so this stays cheap), and tokens verifiable (issuer keys fetched, the
/// introspection endpoint reached, at least once). The body names what is missing.
pub async fn ready(State(state): State<Readiness>) -> (StatusCode, String) {
    let unavailable = StatusCode::SERVICE_UNAVAILABLE;
    if state.shutdown.is_cancelled() {
        return (unavailable, "draining".into());
    }
    if !state.health.database.load(Ordering::Relaxed) {
        return (unavailable, "not ready: the database does not answer".into());
    }
    if !state.health.tokens.load(Ordering::Relaxed) {
        return (unavailable, "not ready: issuer keys or the introspection endpoint not reached yet".into());
    }
    if let Some(name) = state.upstreams.missing_required() {
        return (unavailable, format!("not ready: the upstream MCP server {name} (required = true) is not connected"));
    }
    (StatusCode::OK, "ready".into())
}

/// What `/readyz` reads.
#[derive(Clone, Debug)]
pub struct Readiness {
    pub health: Arc<Health>,
    /// Upstreams marked `required` must be connected.
    pub upstreams: Arc<crate::upstream::Upstreams>,
    /// Cancelled when shutdown begins.
    pub shutdown: CancellationToken,
}

/// What readiness reports, kept fresh by the background probe.
#[derive(Debug)]
pub struct Health {
    pub database: AtomicBool,
    pub tokens: AtomicBool,
}
