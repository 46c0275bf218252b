//! [`PgCluster`]: events over Postgres `LISTEN`/`NOTIFY` on one channel.
//!
//! Why Postgres and not NATS or Redis pub/sub: every multi-replica deployment already has the
//! Postgres that holds the shared state, and a `NOTIFY` sent in the same database as a write
//! is ordered after it, so a replica that hears "definitions changed" reads the new rows.
//! Payloads are small JSON (Postgres caps them at 8000 bytes); larger ones are refused at the
//! sender with a log line, never truncated.
//!
//! Delivery: sqlx's `PgListener` reconnects by itself; a lost connection means lost
//! notifications, so after every reconnect subscribers get [`ClusterEvent::Resync`].
//! Publishing goes through a bounded queue to one sender task, so a slow or unreachable
//! database never blocks a request.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgListener;
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;

use super::{Cluster, ClusterEvent, Envelope};

/// Postgres refuses larger NOTIFY payloads.
const MAX_PAYLOAD: usize = 7900;
/// Events waiting to be sent; beyond it the oldest are dropped with a warning (receivers
/// re-read shared state, so a dropped "changed" is covered by the next one or a resync).
const SEND_QUEUE: usize = 1024;
/// Pause between attempts while the database is unreachable.
const RETRY: Duration = Duration::from_millis(500);

/// Events between replicas over one Postgres channel.
pub struct PgCluster {
    replica: String,
    channel: String,
    tx: broadcast::Sender<ClusterEvent>,
    outbox: mpsc::Sender<ClusterEvent>,
    connected: Arc<AtomicBool>,
}

impl std::fmt::Debug for PgCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgCluster").field("replica", &self.replica).field("channel", &self.channel).finish_non_exhaustive()
    }
}

impl PgCluster {
    /// Starts listening and the sender task; both stop when `stop` is cancelled. Returns once
    /// the first LISTEN succeeded, so events published after start-up are not missed.
    pub async fn start(pool: PgPool, replica: String, channel: String, stop: CancellationToken) -> Result<Arc<Self>, sqlx::Error> {
        let (tx, _) = broadcast::channel(1024);
        let (outbox, rx) = mpsc::channel(SEND_QUEUE);
        let mut listener = PgListener::connect_with(&pool).await?;
        listener.listen(&channel).await?;
        let connected = Arc::new(AtomicBool::new(true));
        let this = Arc::new(Self { replica, channel, tx, outbox, connected });
        tokio::spawn(this.clone().receive(listener, stop.clone()));
        tokio::spawn(this.clone().send(pool, rx, stop));
        Ok(this)
    }

    async fn receive(self: Arc<Self>, mut listener: PgListener, stop: CancellationToken) {
        loop {
            let next = tokio::select! {
                next = listener.try_recv() => next,
                () = stop.cancelled() => return,
            };
            match next {
                Ok(Some(notification)) => match serde_json::from_str::<Envelope>(notification.payload()) {
                    Ok(envelope) if envelope.from == self.replica => {}
                    Ok(envelope) => {
                        metrics::counter!(crate::metrics::CLUSTER_EVENTS_RECEIVED).increment(1);
                        let _ = self.tx.send(envelope.event);
                    }
                    Err(e) => tracing::warn!(error = %e, "ignoring an unreadable cluster event"),
                },
                // The connection was lost (sqlx may already have reconnected); either way,
                // notifications may have been missed in between.
                Ok(None) => {
                    self.mark_down("lost the cluster event connection; reconnecting");
                    self.recover(&mut listener, &stop).await;
                }
                // Reconnecting failed, or another error: wait, then re-establish the LISTEN.
                Err(e) => {
                    self.mark_down(&format!("cluster events unavailable ({e}); retrying"));
                    tokio::select! {
                        () = tokio::time::sleep(RETRY) => {}
                        () = stop.cancelled() => return,
                    }
                    self.recover(&mut listener, &stop).await;
                }
            }
        }
    }

    /// Runs a no-op on the listener's connection until it works: sqlx connects when the
    /// connection is gone and re-issues every LISTEN on a new one. Then tells subscribers to
    /// resync.
    async fn recover(&self, listener: &mut PgListener, stop: &CancellationToken) {
        loop {
            match sqlx::query("SELECT 1").execute(&mut *listener).await {
                Ok(_) => break,
                Err(e) => {
                    tracing::debug!(error = %e, "cluster reconnect failed; retrying");
                    tokio::select! {
                        () = tokio::time::sleep(RETRY) => {}
                        () = stop.cancelled() => return,
                    }
                }
            }
        }
        if !self.connected.swap(true, Ordering::Relaxed) {
            tracing::info!(channel = %self.channel, "cluster events reconnected; resynchronising");
            metrics::gauge!(crate::metrics::CLUSTER_CONNECTED).set(1.0);
            let _ = self.tx.send(ClusterEvent::Resync);
        }
    }

    fn mark_down(&self, why: &str) {
        if self.connected.swap(false, Ordering::Relaxed) {
            tracing::warn!(channel = %self.channel, "{why}");
            metrics::gauge!(crate::metrics::CLUSTER_CONNECTED).set(0.0);
        }
    }

    async fn send(self: Arc<Self>, pool: PgPool, mut rx: mpsc::Receiver<ClusterEvent>, stop: CancellationToken) {
        loop {
            let event = tokio::select! {
                event = rx.recv() => match event { Some(e) => e, None => return },
                () = stop.cancelled() => return,
            };
            let payload = match serde_json::to_string(&Envelope { from: self.replica.clone(), event }) {
                Ok(p) if p.len() <= MAX_PAYLOAD => p,
                Ok(p) => {
                    tracing::error!(bytes = p.len(), "cluster event too large for NOTIFY; not sent");
                    continue;
                }
                Err(e) => {
                    tracing::error!(error = %e, "cannot encode a cluster event");
                    continue;
                }
            };
            // Retry while the database is away: events are rare and each matters.
            loop {
                match sqlx::query("SELECT pg_notify($1, $2)").bind(&self.channel).bind(&payload).execute(&pool).await {
                    Ok(_) => {
                        metrics::counter!(crate::metrics::CLUSTER_EVENTS_SENT).increment(1);
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot send a cluster event; retrying");
                        tokio::select! {
                            () = tokio::time::sleep(RETRY) => {}
                            () = stop.cancelled() => return,
                        }
                    }
                }
            }
        }
    }
}

impl Cluster for PgCluster {
    fn replica(&self) -> &str {
        &self.replica
    }

    fn publish(&self, event: ClusterEvent) {
        if self.outbox.try_send(event).is_err() {
            tracing::warn!("cluster send queue full; an event was dropped (replicas resync on the next one)");
        }
    }

    fn subscribe(&self) -> broadcast::Receiver<ClusterEvent> {
        self.tx.subscribe()
    }

    fn connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }
}
