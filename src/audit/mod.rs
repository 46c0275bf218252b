//! The audit log: one [`AuditRecord`] per `tools/call` and per security event, written off
//! the request path by a background writer in batches, with a local spool so nothing is lost
//! when the queue is full or the database is away.
//!
//! ```text
//! record() ──try_send──▶ bounded queue ──▶ writer ──batch INSERT … ON CONFLICT DO NOTHING──▶ DB
//!     │ queue full / closed                  │ DB error or timeout          ▲
//!     └────────────────▶ spool (JSON lines, fsynced) ◀┘                    │
//!                           └──────────── replayed in order ─────────────────┘
//! ```
//!
//! Integration: [`AuditLog::start`] after [`crate::store::Store::connect`]; call
//! [`AuditLog::record`] from the request path; [`AuditLog::shutdown`] after the server has
//! stopped taking requests. The getters are cheap atomics, meant for metrics.

mod db;
mod export;
mod journal;
mod record;
mod sink;
mod spool;
mod writer;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub use crate::config::audit::{AuditSettings, Durability};
pub use db::{AuditFilter, count, for_each, insert_batch, prune, query};
pub use export::{ExportFormat, export};
pub use record::{AuditRecord, EventKind, Outcome, REDACTED, args_digest, canonical_json, redact};

use crate::store::Store;
use writer::{Counters, Queued, Shared};

/// File name of the spool inside `storage.data_dir` when `audit.spool_path` is unset.
pub const DEFAULT_SPOOL_FILE: &str = "audit-spool.jsonl";

/// Why the audit log could not start.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("invalid audit settings: {0}")]
    Settings(String),
    #[error("cannot open the audit spool {path}")]
    Spool { path: PathBuf, source: std::io::Error },
    #[error("cannot open the audit JSON-lines output {target}")]
    Sink { target: String, source: std::io::Error },
}

/// A point-in-time copy of the counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AuditStats {
    pub queue_depth: usize,
    pub queue_capacity: usize,
    pub spool_bytes: u64,
    pub records_written: u64,
    pub records_spooled: u64,
    pub records_replayed: u64,
    pub write_failures: u64,
    pub records_lost: u64,
}

/// The running audit log. Share it as `Arc<AuditLog>`.
pub struct AuditLog {
    enabled: bool,
    durability: Durability,
    replica_id: String,
    tx: mpsc::Sender<Queued>,
    shared: Arc<Shared>,
    stop: watch::Sender<Option<Instant>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    pruner: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog").field("durability", &self.durability).field("stats", &self.stats()).finish_non_exhaustive()
    }
}

impl AuditLog {
    /// Opens the spool and the optional JSON-lines output and starts the writer (which first
    /// replays any spool left by an earlier run) and, when `retention_days > 0`, the hourly
    /// pruner. Must be called inside a tokio runtime.
    pub fn start(settings: &AuditSettings, store: Store) -> Result<Arc<Self>, AuditError> {
        settings.validate().map_err(AuditError::Settings)?;
        let spool_path = settings.spool_path.clone().unwrap_or_else(|| store.data_dir().join(DEFAULT_SPOOL_FILE));
        let spool = spool::Spool::open(spool_path.clone()).map_err(|source| AuditError::Spool { path: spool_path, source })?;
        // Opened by the writer, off start-up's path (see `journal`).
        let journaling = settings.durability == Durability::Sync && matches!(store.backend(), crate::store::Backend::Sqlite(_));
        let sink = match &settings.jsonl {
            Some(target) => Some(sink::Sink::open(target).map_err(|source| AuditError::Sink { target: target.clone(), source })?),
            None => None,
        };
        let shared = Arc::new(Shared {
            store: store.clone(),
            spool,
            journaling,
            journal: Default::default(),
            sink,
            counters: Counters::default(),
            journaled: Default::default(),
            handed_on: watch::channel(0).0,
            flush_now: Default::default(),
            batch_size: settings.batch_size,
            flush_interval: settings.flush_interval(),
            write_timeout: settings.write_timeout(),
            retry_interval: settings.retry_interval(),
        });
        let (tx, rx) = mpsc::channel(settings.queue_capacity);
        let (stop, stop_rx) = watch::channel(None);
        let writer = settings.enabled.then(|| tokio::spawn(writer::run(Arc::clone(&shared), rx, stop_rx)));
        let pruner = (settings.enabled && settings.retention_days > 0).then(|| tokio::spawn(prune_forever(store, settings.retention_days)));
        Ok(Arc::new(Self {
            enabled: settings.enabled,
            durability: settings.durability,
            replica_id: settings.resolved_replica_id(),
            tx,
            shared,
            stop,
            writer: Mutex::new(writer),
            pruner: Mutex::new(pruner),
        }))
    }

    /// Records one event; stamps `replica_id`.
    ///
    /// `batched`: returns once the record is queued, or, when the queue is full or the log is
    /// shut down, once it is appended to the fsynced spool. Never waits for the database.
    /// `sync`: returns once the record is on disk: committed to the database, or appended to
    /// the fsynced journal (SQLite; the database follows, see [`Self::settled`]) or spool
    /// (bounded by `audit.write_timeout_ms`, after which the writer spools it).
    pub async fn record(&self, mut record: AuditRecord) {
        if !self.enabled {
            return;
        }
        record.replica_id.clone_from(&self.replica_id);
        match self.durability {
            Durability::Batched => {
                if let Err(e) = self.tx.try_send(Queued { record, ack: None }) {
                    let q = match e {
                        mpsc::error::TrySendError::Full(q) | mpsc::error::TrySendError::Closed(q) => q,
                    };
                    writer::persist_local(&self.shared, vec![q.record]).await;
                }
            }
            Durability::Sync => {
                let (ack, acked) = oneshot::channel();
                // Kept in case the writer is gone before answering (it then never saw it).
                let copy = record.clone();
                let queued = self.tx.try_send(Queued { record, ack: Some(ack) }).is_ok();
                if !queued || acked.await.is_err() {
                    writer::persist_local(&self.shared, vec![copy]).await;
                }
            }
        }
    }

    /// Waits until every record answered before this call is in the database (or, while the
    /// database is away, in the spool), so a read that follows sees it. Only the journal
    /// (`sync` on SQLite) answers before the database has the record; bounded by
    /// `audit.write_timeout_ms`.
    pub async fn settled(&self) {
        let target = self.shared.journaled.load(Ordering::Relaxed);
        let mut handed_on = self.shared.handed_on.subscribe();
        if *handed_on.borrow() < target {
            self.shared.flush_now.notify_one();
        }
        let _ = tokio::time::timeout(self.shared.write_timeout, handed_on.wait_for(|&n| n >= target)).await;
    }

    /// Stops taking records into the queue (later ones go straight to the spool), writes
    /// everything queued to the database while `deadline` allows and to the spool after, and
    /// waits for that. Idempotent.
    pub async fn shutdown(&self, deadline: Duration) {
        if let Some(p) = self.pruner.lock().take() {
            p.abort();
        }
        let Some(handle) = self.writer.lock().take() else { return };
        let _ = self.stop.send(Some(Instant::now() + deadline));
        // The writer keeps a reserve for spooling, so it finishes within the deadline unless
        // the disk itself hangs; a second of grace, then give up waiting.
        match tokio::time::timeout(deadline + Duration::from_secs(1), handle).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!(error = %e, "audit writer failed during shutdown"),
            Err(_) => tracing::error!(queued = self.queue_depth(), "audit writer did not finish before the shutdown deadline"),
        }
    }

    /// Records waiting in the queue.
    pub fn queue_depth(&self) -> usize {
        self.tx.max_capacity() - self.tx.capacity()
    }

    pub fn queue_capacity(&self) -> usize {
        self.tx.max_capacity()
    }

    /// Bytes in the spool not yet confirmed in the database (0 in normal operation).
    pub fn spool_bytes(&self) -> u64 {
        self.shared.spool.pending_bytes()
    }

    /// Records answered from the journal and not yet handed on to the database or the spool.
    pub fn journal_backlog(&self) -> u64 {
        self.shared.journaled.load(Ordering::Relaxed).saturating_sub(*self.shared.handed_on.borrow())
    }

    /// Records inserted into the database (directly or from the spool) by this process.
    pub fn records_written(&self) -> u64 {
        self.shared.counters.written.load(Ordering::Relaxed)
    }

    /// Records appended to the spool by this process.
    pub fn records_spooled(&self) -> u64 {
        self.shared.counters.spooled.load(Ordering::Relaxed)
    }

    /// Records moved from the spool to the database by this process.
    pub fn records_replayed(&self) -> u64 {
        self.shared.counters.replayed.load(Ordering::Relaxed)
    }

    /// Database writes that failed or timed out (each sent its batch to the spool).
    pub fn write_failures(&self) -> u64 {
        self.shared.counters.write_failures.load(Ordering::Relaxed)
    }

    /// Records that reached neither the database nor the spool (logged in full at error level).
    pub fn records_lost(&self) -> u64 {
        self.shared.counters.lost.load(Ordering::Relaxed)
    }

    pub fn stats(&self) -> AuditStats {
        AuditStats {
            queue_depth: self.queue_depth(),
            queue_capacity: self.queue_capacity(),
            spool_bytes: self.spool_bytes(),
            records_written: self.records_written(),
            records_spooled: self.records_spooled(),
            records_replayed: self.records_replayed(),
            write_failures: self.write_failures(),
            records_lost: self.records_lost(),
        }
    }

    pub fn replica_id(&self) -> &str {
        &self.replica_id
    }

    pub fn spool_path(&self) -> &std::path::Path {
        self.shared.spool.path()
    }
}

/// Hourly retention; the first pass a minute after start so it does not compete with start-up.
async fn prune_forever(store: Store, days: u32) {
    let mut tick = tokio::time::interval_at(Instant::now() + Duration::from_secs(60), Duration::from_secs(3600));
    loop {
        tick.tick().await;
        let cutoff = time::OffsetDateTime::now_utc() - time::Duration::days(i64::from(days));
        match prune(&store, cutoff).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(deleted = n, days, "audit retention pruned old records"),
            Err(e) => tracing::warn!(error = %e, "audit retention prune failed; will retry in an hour"),
        }
    }
}
