//! Applying what other replicas report (assembly: it ties the cluster channel to the tool
//! sources and the MCP endpoint's sessions): stored tool definitions to reload, and events
//! about legacy sessions held here.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::server::McpServer;
use crate::tooldef::Definitions;
use crate::transport::McpState;

/// Applies what other replicas report: stored definitions changed → reload them (only real
/// differences are announced); the channel was lost and is back → reload and announce a
/// change regardless, since a change may have been missed (over-notify rather than miss).
/// Bursts are coalesced: one reload per quiet period.
pub async fn follow_definitions(
    mut rx: tokio::sync::broadcast::Receiver<crate::cluster::ClusterEvent>,
    definitions: Arc<Definitions>,
    server: Arc<McpServer>,
    stop: CancellationToken,
) {
    use crate::cluster::ClusterEvent;
    use tokio::sync::broadcast::error::RecvError;
    const COALESCE: Duration = Duration::from_millis(20);
    let is_resync = |e: &Result<ClusterEvent, RecvError>| matches!(e, Ok(ClusterEvent::Resync) | Err(RecvError::Lagged(_)));
    loop {
        let first = tokio::select! {
            event = rx.recv() => event,
            () = stop.cancelled() => return,
        };
        if matches!(first, Err(RecvError::Closed)) {
            return;
        }
        let mut resync = is_resync(&first);
        if !resync && !matches!(first, Ok(ClusterEvent::ToolDefinitionsChanged)) {
            continue;
        }
        // Whatever else arrives within the quiet period joins the same reload.
        let until = tokio::time::Instant::now() + COALESCE;
        while let Ok(next) = tokio::time::timeout_at(until, rx.recv()).await {
            resync |= is_resync(&next);
        }
        let _ = definitions.reload_database().await;
        if resync {
            server.bus.publish(crate::bus::Change::ToolsListChanged);
        }
    }
}

/// Applies upstream definitions another replica stored (or, after a resync, whatever may have
/// changed meanwhile): reload them from the database and start, restart or stop upstreams;
/// and decisions on an upstream's approved catalog: it lists again.
pub async fn follow_upstreams(
    mut rx: tokio::sync::broadcast::Receiver<crate::cluster::ClusterEvent>,
    upstreams: Arc<crate::upstream::Upstreams>,
    store: crate::store::Store,
    stop: CancellationToken,
) {
    use crate::cluster::ClusterEvent;
    use tokio::sync::broadcast::error::RecvError;
    loop {
        let event = tokio::select! {
            event = rx.recv() => event,
            () = stop.cancelled() => return,
        };
        match event {
            Ok(ClusterEvent::UpstreamsChanged | ClusterEvent::Resync) | Err(RecvError::Lagged(_)) => {
                if let Err(e) = upstreams.reload_stored(&store).await {
                    tracing::error!(error = %e, "stored upstream definitions not reloaded");
                }
                // A decision on the approved catalog may have been missed too.
                if !matches!(event, Ok(ClusterEvent::UpstreamsChanged)) {
                    upstreams.resync_all();
                }
            }
            Ok(ClusterEvent::CatalogApproved { source }) => upstreams.resync(&source),
            Err(RecvError::Closed) => return,
            Ok(_) => {}
        }
    }
}

/// Applies virtual server definitions another replica stored (or, after a resync, whatever may
/// have changed meanwhile): reload them, then tell the listeners of the servers that changed.
pub async fn follow_servers(
    mut rx: tokio::sync::broadcast::Receiver<crate::cluster::ClusterEvent>,
    server: Arc<McpServer>,
    store: crate::store::Store,
    stop: CancellationToken,
) {
    use crate::cluster::ClusterEvent;
    use tokio::sync::broadcast::error::RecvError;
    loop {
        let event = tokio::select! {
            event = rx.recv() => event,
            () = stop.cancelled() => return,
        };
        match event {
            Ok(ClusterEvent::ServersChanged | ClusterEvent::Resync) | Err(RecvError::Lagged(_)) => {
                if let Err(e) = server.servers.reload_stored(&store, &server.tools.snapshot()).await {
                    tracing::error!(error = %e, "stored server definitions not reloaded");
                }
                server.bus.publish(crate::bus::Change::ToolsListChanged);
            }
            Err(RecvError::Closed) => return,
            Ok(_) => {}
        }
    }
}

/// Applies what other replicas send about legacy sessions held here: ended sessions and log
/// levels, client answers and cancellations for calls running here, and 2024-11-05 messages
/// for SSE connections held here. Events for sessions this replica does not hold are ignored.
pub async fn follow_sessions(mut rx: tokio::sync::broadcast::Receiver<crate::cluster::ClusterEvent>, state: McpState) {
    use crate::cluster::ClusterEvent;
    use crate::protocol::jsonrpc::{Incoming, RequestId};
    loop {
        let event = tokio::select! {
            event = rx.recv() => event,
            () = state.shutdown.cancelled() => return,
        };
        let event = match event {
            Ok(event) => event,
            Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                tracing::warn!(missed = n, "session events lagged; some were dropped");
                continue;
            }
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        };
        match event {
            ClusterEvent::SessionEnded { .. } | ClusterEvent::SessionLogLevel { .. } => state.sessions.apply(&event),
            ClusterEvent::ClientResponse { session, message } => {
                if let (Some(s), Ok(Incoming::Response(r))) = (state.sessions.get(&session), Incoming::from_value(message)) {
                    s.complete_outgoing(&r.id, r.outcome);
                }
            }
            ClusterEvent::CancelRequest { session, request } => {
                if let (Some(s), Ok(id)) = (state.sessions.get(&session), serde_json::from_value::<RequestId>(request)) {
                    s.cancel_request(&id);
                }
            }
            ClusterEvent::LegacyMessage { session, message, principal, ip, request_id } => {
                let state = state.clone();
                tokio::spawn(async move {
                    crate::transport::legacy_sse::forwarded(&state, &session, message, principal, ip, request_id).await;
                });
            }
            ClusterEvent::TaskCancelled { task } => {
                if let Some(tasks) = state.server.tasks() {
                    tasks.stop_local(&task);
                }
            }
            ClusterEvent::TaskChanged { task } => {
                if let Some(tasks) = state.server.tasks() {
                    tasks.changed_elsewhere(&task);
                }
            }
            ClusterEvent::ToolDefinitionsChanged
            | ClusterEvent::UpstreamsChanged
            | ClusterEvent::ServersChanged
            | ClusterEvent::CatalogApproved { .. }
            | ClusterEvent::Resync => {}
        }
    }
}
