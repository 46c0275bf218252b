//! The background tasks, each given only what it uses: change fan-out to streams, session
//! expiry, tool-limit updates, registry-change audit records, readiness probes, cluster
//! following, key refresh and limiter housekeeping. All end when shutdown begins.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::AppState;
use crate::audit::AuditLog;
use crate::auth::bearer::Authenticator;
use crate::bus::EventBus;
use crate::health::Health;
use crate::server::McpServer;
use crate::store::Store;

/// Starts the background tasks: change fan-out and session expiry.
pub(super) fn spawn_background(state: &AppState) {
    if let Some(audit) = &state.audit {
        tokio::spawn(audit_registry_changes(state.server.bus.clone(), audit.clone(), state.shutdown.clone()));
    }
    state.definitions.spawn_watchers(state.shutdown.clone());
    state.upstreams.spawn(state.shutdown.clone());
    tokio::spawn(super::follow::follow_upstreams(
        state.cluster.subscribe(),
        state.upstreams.clone(),
        state.store.clone(),
        state.shutdown.clone(),
    ));
    tokio::spawn(super::follow::follow_servers(
        state.cluster.subscribe(),
        state.server.clone(),
        state.store.clone(),
        state.shutdown.clone(),
    ));
    if let Some(tasks) = state.server.tasks() {
        // Lease renewal, failing tasks whose replica stopped, deleting expired ones.
        tokio::spawn(tasks.clone().maintain(state.shutdown.clone()));
    }
    tokio::spawn(probe_health(state.health.clone(), state.store.clone(), state.auth.clone(), state.shutdown.clone()));
    tokio::spawn(super::follow::follow_definitions(
        state.cluster.subscribe(),
        state.definitions.clone(),
        state.server.clone(),
        state.shutdown.clone(),
    ));
    tokio::spawn(super::follow::follow_sessions(state.cluster.subscribe(), state.mcp.clone()));
    if let Some(limiter) = &state.limiter {
        // Subscribed and applied once before serving, so the first request already meets the
        // definitions' own rates; the task then follows every change.
        let rx = state.server.bus.subscribe();
        configure_tool_limits(&state.server, limiter.as_ref());
        tokio::spawn(apply_tool_limits(state.server.clone(), limiter.clone(), rx, state.shutdown.clone()));
        crate::limits::spawn_housekeeping(limiter.clone(), state.settings.limits.housekeeping_interval(), state.shutdown.clone());
    }
    if let Some(server) = &state.authserver {
        server.spawn_upkeep(state.shutdown.clone());
    }
    if let Some(verifier) = state.auth.as_ref().and_then(|a| a.verifier()) {
        verifier.spawn_refresh(Duration::from_secs(state.settings.auth.jwks_refresh_secs.max(30)), state.shutdown.clone());
    }
    tokio::spawn(crate::transport::listen::fan_out(state.server.clone(), state.sessions.clone(), state.listeners.clone()));
    if let Some(tasks) = state.server.tasks() {
        tokio::spawn(crate::transport::listen::task_fan_out(tasks.clone(), state.listeners.clone()));
    }
    let sessions = state.sessions.clone();
    let stop = state.shutdown.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(30));
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let n = sessions.expire_idle();
                    if n > 0 {
                        tracing::info!(expired = n, "ended idle sessions");
                    }
                    // With several replicas, sessions idle on every replica end in the shared store.
                    let n = sessions.sweep_shared().await;
                    if n > 0 {
                        tracing::info!(expired = n, "ended idle shared sessions");
                    }
                }
                () = stop.cancelled() => return,
            }
        }
    });
}

/// Keeps the limiter's per-tool rules in step with the rates tool definitions carry.
fn configure_tool_limits(server: &McpServer, limiter: &dyn crate::limits::Limiter) {
    let rates = server.tools.snapshot().iter().filter_map(|t| Some((t.name().to_owned(), t.tool.opts.rate_limit.clone()?))).collect();
    limiter.configure_tools(&rates);
}

async fn apply_tool_limits(
    server: Arc<McpServer>,
    limiter: Arc<dyn crate::limits::Limiter>,
    mut rx: tokio::sync::broadcast::Receiver<crate::bus::Change>,
    stop: CancellationToken,
) {
    loop {
        let change = tokio::select! {
            change = rx.recv() => change,
            () = stop.cancelled() => return,
        };
        match change {
            Ok(crate::bus::Change::ToolsListChanged) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                configure_tool_limits(&server, limiter.as_ref());
            }
            Ok(_) => {}
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// Every change to what the server offers becomes an audit record.
async fn audit_registry_changes(bus: Arc<dyn EventBus>, audit: Arc<AuditLog>, stop: CancellationToken) {
    use crate::audit::{AuditRecord, EventKind, Outcome};
    let mut rx = bus.subscribe();
    loop {
        let change = tokio::select! {
            change = rx.recv() => change,
            () = stop.cancelled() => return,
        };
        let detail = match change {
            Ok(crate::bus::Change::ToolsListChanged) => "tools list changed",
            Ok(crate::bus::Change::PromptsListChanged) => "prompts list changed",
            Ok(crate::bus::Change::ResourcesListChanged) => "resources list changed",
            Ok(crate::bus::Change::ResourceUpdated(_)) => continue,
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => "registry changes (some coalesced)",
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        };
        audit.record(AuditRecord::new(EventKind::RegistryChange, Outcome::Ok).with_detail(detail)).await;
    }
}

/// Pings the database and checks token verification every couple of seconds.
pub(super) async fn probe_health(health: Arc<Health>, store: Store, auth: Option<Arc<Authenticator>>, shutdown: CancellationToken) {
    // Every 2 s once ready. Until the issuer keys are in (or the introspection endpoint
    // answered), sooner: from 50 ms, doubling, so a new replica turns ready as soon as it can
    // verify tokens instead of on the next slow tick (measured: /readyz 2.0 s after start
    // before, BENCHMARKS.md) without hammering an issuer that is down.
    const PERIOD: Duration = Duration::from_secs(2);
    let mut wait = Duration::ZERO;
    let mut not_ready_wait = Duration::from_millis(50);
    loop {
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = shutdown.cancelled() => return,
        }
        wait = if health.tokens.load(Ordering::Relaxed) {
            PERIOD
        } else {
            let w = not_ready_wait;
            not_ready_wait = (not_ready_wait * 2).min(PERIOD);
            w
        };
        let database = tokio::time::timeout(Duration::from_secs(2), store.ping()).await.is_ok_and(|r| r.is_ok());
        if health.database.swap(database, Ordering::Relaxed) != database {
            if database {
                tracing::info!("the database answers again: ready")
            } else {
                tracing::warn!("the database does not answer: not ready")
            }
        }
        if !health.tokens.load(Ordering::Relaxed) {
            let tokens = match &auth {
                Some(auth) => tokio::time::timeout(Duration::from_secs(5), auth.ready()).await.unwrap_or(false),
                None => true,
            };
            // Sticky: once keys were fetched they stay in use through later outages.
            if tokens {
                health.tokens.store(true, Ordering::Relaxed);
                tracing::info!("token verification ready");
            }
        }
    }
}
