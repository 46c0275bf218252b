//! What replicas tell each other. On one node (SQLite) nothing leaves the process; with
//! Postgres every replica LISTENs on one channel and each event is a `NOTIFY` (see [`pg`]), so
//! a change made through any replica reaches all of them without extra infrastructure.
//!
//! Events say *what changed in shared state*, never "send this to clients": each replica
//! re-reads the shared state and announces only real differences to its own streams. A
//! replica that lost its LISTEN connection cannot know what it missed, so on reconnect it
//! gets [`ClusterEvent::Resync`] and over-notifies rather than miss a change.

pub mod pg;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::config::Settings;
use crate::store::Store;
use pg::PgCluster;

/// An event between replicas.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ClusterEvent {
    /// Tool definitions stored in the database changed: reload them.
    ToolDefinitionsChanged,
    /// Upstream definitions stored in the database changed: reload and apply them.
    UpstreamsChanged,
    /// Virtual server definitions stored in the database changed: reload and apply them.
    ServersChanged,
    /// A legacy session was ended (DELETE or expiry): drop it from every cache.
    SessionEnded { session: String },
    /// A legacy session's log level changed (`logging/setLevel` on some replica).
    SessionLogLevel { session: String, level: String },
    /// A client's answer to a server-to-client request: the POST carrying it may land on any
    /// replica; the one whose call waits for that id completes it, the others ignore it.
    ClientResponse { session: String, message: serde_json::Value },
    /// `notifications/cancelled` for a request in flight on whichever replica runs it.
    CancelRequest { session: String, request: serde_json::Value },
    /// A 2024-11-05 `POST /messages` that reached a replica other than the one holding the
    /// session's SSE connection (that transport cannot move: answers go on that connection).
    LegacyMessage {
        session: String,
        message: serde_json::Value,
        /// The verified caller, as the receiving replica authenticated it.
        principal: Option<crate::principal::Principal>,
        ip: Option<std::net::IpAddr>,
        request_id: Option<String>,
    },
    /// A task was cancelled (already stored): the replica running it stops its tool.
    TaskCancelled { task: String },
    /// A task changed (status, pending input, answers stored): the replica running it re-reads
    /// it, and listeners subscribed to it anywhere are told.
    TaskChanged { task: String },
    /// An operator approved or rejected an entry of the upstream `source` in the approved
    /// catalog: each replica lists that upstream again and serves what is approved now.
    CatalogApproved { source: String },
    /// Delivered locally only: the connection to the other replicas was lost and is back, so
    /// anything may have been missed.
    Resync,
}

/// One event as sent: who sent it, so a replica can ignore its own.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Envelope {
    pub from: String,
    #[serde(flatten)]
    pub event: ClusterEvent,
}

/// The cluster seam: publish to every other replica, subscribe to what they publish.
pub trait Cluster: Send + Sync + 'static {
    /// This replica's unique id (stable for the process's life).
    fn replica(&self) -> &str;
    /// Sends `event` to every other replica. Never blocks the caller on the network.
    fn publish(&self, event: ClusterEvent);
    /// Events from other replicas, plus local [`ClusterEvent::Resync`]s.
    fn subscribe(&self) -> broadcast::Receiver<ClusterEvent>;
    /// Whether events reach other replicas right now (for readiness and metrics).
    fn connected(&self) -> bool;
}

/// A single node: there is nobody to tell.
#[derive(Debug)]
pub struct Standalone {
    replica: String,
    tx: broadcast::Sender<ClusterEvent>,
}

impl Standalone {
    pub fn new(replica: String) -> Arc<Self> {
        Arc::new(Self { replica, tx: broadcast::channel(16).0 })
    }
}

impl Cluster for Standalone {
    fn replica(&self) -> &str {
        &self.replica
    }

    fn publish(&self, _event: ClusterEvent) {}

    fn subscribe(&self) -> broadcast::Receiver<ClusterEvent> {
        self.tx.subscribe()
    }

    fn connected(&self) -> bool {
        true
    }
}

/// A process-unique replica id: the configured or host name plus a random suffix, because
/// several processes may share a host name (tests, `docker compose --scale`).
pub fn instance_id(name: &str) -> String {
    format!("{name}-{:08x}", rand::random::<u32>())
}

/// The cluster channel when the store is Postgres (every replica shares it), else none.
/// Either way this replica hears every event there is once it returns, so the connected gauge
/// says 1 from the start; set before Postgres listens, so `pg`'s own changes come after it.
pub async fn connect(settings: &Settings, store: &Store, stop: CancellationToken) -> anyhow::Result<Arc<dyn Cluster>> {
    let replica = instance_id(&settings.audit.resolved_replica_id());
    metrics::gauge!(crate::metrics::CLUSTER_CONNECTED).set(1.0);
    connect_as(replica, store, stop).await
}

async fn connect_as(replica: String, store: &Store, stop: CancellationToken) -> anyhow::Result<Arc<dyn Cluster>> {
    match store.backend() {
        crate::store::Backend::Postgres(pool) => {
            let cluster = PgCluster::start(pool.clone(), replica.clone(), "toolgate_cluster".to_owned(), stop)
                .await
                .map_err(|e| anyhow::anyhow!("cannot listen for cluster events on Postgres: {e}"))?;
            tracing::info!(%replica, "cluster events over Postgres LISTEN/NOTIFY");
            Ok(cluster)
        }
        crate::store::Backend::Sqlite(_) => Ok(Standalone::new(replica)),
    }
}
