//! Graceful shutdown. When [`Shared::shutdown`](crate::app::Shared) is cancelled (SIGTERM,
//! Ctrl-C, [`Running::stop`](crate::app::Running::stop)), in this order:
//!
//! 1. **At once**: `/readyz` answers 503, so the load balancer stops routing here. Streams that
//!    only carry notifications end with their closing frame: modern `subscriptions/listen`
//!    streams with their final result, legacy GET streams with a `retry` hint (2025-11-25),
//!    2024-11-05 `/sse` connections by closing. New ones opened now end the same way.
//! 2. **After `server.drain_delay_ms`** (the load balancer's reaction time) the listener stops
//!    accepting; idle keep-alive connections close, and a request still arriving on an open
//!    connection gets 503 + `Retry-After` + `Connection: close` ([`closing_refusal`]).
//! 3. **Requests in flight run on** until shortly before the end of `server.shutdown_grace_secs`;
//!    when they are all done earlier, shutdown goes on at once.
//! 4. **Then** tool calls still running are stopped ([`McpServer::halt`](crate::server::McpServer)):
//!    each answers an `isError` result saying the server is shutting down (on its stream, if
//!    the client is still there) and is audited as `cancelled`; then every legacy session ends.
//! 5. **At the end of the grace period** connections still open are abandoned.
//! 6. The audit log is flushed (database, else the fsynced spool), bounded by
//!    `audit.write_timeout_ms`; with the OTLP exporter, `main` flushes spans last.
//!
//! So the process is gone within the grace period plus the audit flush, however many streams
//! are open: ending them is one token.

use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;
use tokio::time::Instant;

use super::AppState;

/// The part of the grace period kept for stopped calls to answer and connections to close:
/// a second, or a quarter of a short grace period.
fn stop_margin(grace: Duration) -> Duration {
    (grace / 4).min(Duration::from_secs(1))
}

/// Serves `app` on `listener` until shutdown has run its course (see the module docs).
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    tls: Option<crate::transport::tls::Tls>,
    state: AppState,
) -> std::io::Result<()> {
    let stop = state.shutdown.clone();
    let closing = state.closing.clone();
    let drain = state.settings.drain_delay();
    let stop_accepting = async move {
        stop.cancelled().await;
        tokio::time::sleep(drain).await;
        closing.cancel();
        tracing::info!("drain delay over: no longer accepting connections");
    };
    let limits = crate::transport::connections::limits(&state.settings);
    tracing::debug!(max_connections = limits.max_connections, "public listener connection cap");
    let mut serve = std::pin::pin!(crate::transport::connections::serve(listener, app, limits, tls, stop_accepting));
    tokio::select! {
        // Only an accept loop that failed ends before shutdown.
        served = &mut serve => return served,
        () = state.shutdown.cancelled() => {}
    }
    let started = Instant::now();
    let grace = state.settings.shutdown_grace();
    let tasks = &state.server.in_flight;
    // Lets `wait` finish once the running requests are done; later ones are still tracked.
    tasks.close();
    state.sessions.end_notification_streams();
    tracing::info!(
        grace_secs = grace.as_secs(),
        drain_ms = u64::try_from(drain.as_millis()).unwrap_or(u64::MAX),
        sessions = state.sessions.len(),
        listen_streams = state.listeners.len(),
        requests_in_flight = tasks.len(),
        "shutting down: readiness is 503, notification streams ended"
    );

    let mut served = None;
    let all_done = async {
        served = Some((&mut serve).await);
        tasks.wait().await;
    };
    let soft_deadline = started + grace.saturating_sub(stop_margin(grace));
    if tokio::time::timeout_at(soft_deadline, all_done).await.is_err() {
        tracing::warn!(requests_in_flight = tasks.len(), "grace period nearly over: stopping the tool calls still running");
        state.server.halt.cancel();
        // Stopped calls answer (and write their audit records) within moments.
        let _ = tokio::time::timeout(stop_margin(grace) / 2, tasks.wait()).await;
    }
    // Tasks still running here fail now, with a message, instead of when their lease lapses.
    if let Some(tasks) = state.server.tasks() {
        tasks.abandon_local().await;
    }
    // Whatever still runs in a legacy session is cancelled; its streams end.
    state.sessions.close_all();
    if served.is_none() {
        match tokio::time::timeout_at(started + grace, &mut serve).await {
            Ok(result) => served = Some(result),
            Err(_) => tracing::warn!(grace_secs = grace.as_secs(), "connections still open at the end of the grace period; closing them"),
        }
    }
    // Every record reaches the database or the fsynced spool before the process ends.
    if let Some(audit) = &state.audit {
        audit.shutdown(state.settings.audit.write_timeout().max(Duration::from_secs(1))).await;
    }
    tracing::info!(elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX), "shutdown complete");
    served.unwrap_or(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stop_margin_fits_short_and_long_grace_periods() {
        assert_eq!(stop_margin(Duration::from_secs(20)), Duration::from_secs(1));
        assert_eq!(stop_margin(Duration::from_secs(2)), Duration::from_millis(500));
        assert_eq!(stop_margin(Duration::ZERO), Duration::ZERO);
    }
}
