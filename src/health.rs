//! Readiness: what `/readyz` reports (not draining, the database answering, tokens
//! verifiable), kept fresh by a background probe so the endpoint itself stays cheap.

use std::time::Duration;

use crate::app::AppState;

/// Readiness: not draining (false from the first moment of shutdown, so the load balancer
/// stops sending new work while streams drain), the database answering (probed in the
/// background, so this stays cheap), and tokens verifiable (issuer keys fetched, the
/// introspection endpoint reached, at least once). The body names what is missing.
pub async fn ready(axum::extract::State(state): axum::extract::State<AppState>) -> (axum::http::StatusCode, String) {
    use std::sync::atomic::Ordering;
    let unavailable = axum::http::StatusCode::SERVICE_UNAVAILABLE;
    if state.shutdown.is_cancelled() {
        return (unavailable, "draining".into());
    }
    if !state.health.database.load(Ordering::Relaxed) {
        return (unavailable, "not ready: the database does not answer".into());
    }
    if !state.health.tokens.load(Ordering::Relaxed) {
        return (unavailable, "not ready: issuer keys or the introspection endpoint not reached yet".into());
    }
    (axum::http::StatusCode::OK, "ready".into())
}

/// What readiness reports, kept fresh by [`probe_health`].
#[derive(Debug)]
pub struct Health {
    pub database: std::sync::atomic::AtomicBool,
    pub tokens: std::sync::atomic::AtomicBool,
}

/// Pings the database and checks token verification every couple of seconds.
pub async fn probe_health(state: AppState) {
    use std::sync::atomic::Ordering;
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
            () = state.shutdown.cancelled() => return,
        }
        wait = if state.health.tokens.load(Ordering::Relaxed) {
            PERIOD
        } else {
            let w = not_ready_wait;
            not_ready_wait = (not_ready_wait * 2).min(PERIOD);
            w
        };
        let database = tokio::time::timeout(Duration::from_secs(2), state.store.ping()).await.is_ok_and(|r| r.is_ok());
        if state.health.database.swap(database, Ordering::Relaxed) != database {
            if database {
                tracing::info!("the database answers again: ready")
            } else {
                tracing::warn!("the database does not answer: not ready")
            }
        }
        if !state.health.tokens.load(Ordering::Relaxed) {
            let tokens = match &state.auth {
                Some(auth) => tokio::time::timeout(Duration::from_secs(5), auth.ready()).await.unwrap_or(false),
                None => true,
            };
            // Sticky: once keys were fetched they stay in use through later outages.
            if tokens {
                state.health.tokens.store(true, Ordering::Relaxed);
                tracing::info!("token verification ready");
            }
        }
    }
}
