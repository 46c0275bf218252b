//! The background writer: takes records off the queue, inserts them in batches, and falls
//! back to the spool when the database does not answer; replays the spool when it does. With
//! a journal (`sync` on SQLite) each group is journaled and answered first, and the records
//! go to the database behind it, one insert at a time, as large as the load makes them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use super::db;
use super::record::AuditRecord;
use super::sink::Sink;
use super::spool::{Replay, Spool};
use crate::store::Store;
use journaled::{Ingest, ingest_finished};

mod journaled;

/// Time kept back from a shutdown deadline for spooling what the database did not take.
const SPOOL_RESERVE: Duration = Duration::from_millis(250);

pub(crate) struct Shared {
    pub(crate) store: Store,
    pub(crate) spool: Spool,
    /// `sync` durability on SQLite: the writer opens the journal (see [`super::journal`]) when
    /// it starts, and commits each group directly until then or if it cannot.
    pub(crate) journaling: bool,
    pub(crate) journal: std::sync::OnceLock<super::journal::Journal>,
    pub(crate) sink: Option<Sink>,
    pub(crate) counters: Counters,
    /// Records journaled, and records the journal has handed on (to the database or the
    /// spool), for [`super::AuditLog::settled`].
    pub(crate) journaled: AtomicU64,
    pub(crate) handed_on: watch::Sender<u64>,
    /// A reader waits for the journaled records: insert them now, however few.
    pub(crate) flush_now: tokio::sync::Notify,
    pub(crate) batch_size: usize,
    pub(crate) flush_interval: Duration,
    pub(crate) write_timeout: Duration,
    pub(crate) retry_interval: Duration,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) written: AtomicU64,
    pub(crate) spooled: AtomicU64,
    pub(crate) replayed: AtomicU64,
    pub(crate) write_failures: AtomicU64,
    pub(crate) lost: AtomicU64,
}

pub(crate) struct Queued {
    pub(crate) record: AuditRecord,
    /// Present in sync mode: answered once the record is on disk (database, journal or spool).
    pub(crate) ack: Ack,
}

type Ack = Option<oneshot::Sender<()>>;

/// Appends to the spool (fsynced) and emits to the sink. If even the spool fails, the records
/// go to the error log in full, so an operator can still recover them, and count as lost.
pub(crate) async fn persist_local(shared: &Arc<Shared>, records: Vec<AuditRecord>) {
    spool(shared, records, true).await;
}

/// [`persist_local`]; `emit: false` for records the sink already has (journaled ones).
async fn spool(shared: &Arc<Shared>, records: Vec<AuditRecord>, emit: bool) {
    let s = Arc::clone(shared);
    let done = tokio::task::spawn_blocking(move || {
        let result = s.spool.append(&records);
        match &result {
            Ok(()) => {
                s.counters.spooled.fetch_add(records.len() as u64, Ordering::Relaxed);
                if let (true, Some(sink)) = (emit, &s.sink) {
                    sink.emit(&records);
                }
            }
            Err(e) => {
                s.counters.lost.fetch_add(records.len() as u64, Ordering::Relaxed);
                for r in &records {
                    let line = serde_json::to_string(r).unwrap_or_default();
                    tracing::error!(spool = %s.spool.path().display(), error = %e, record = %line, "audit record neither in the database nor in the spool");
                }
            }
        }
    })
    .await;
    if let Err(e) = done {
        tracing::error!(error = %e, "audit spool task failed");
    }
}

struct Writer {
    shared: Arc<Shared>,
    db_down: bool,
    next_retry: Instant,
    replay: Option<Replay>,
    deadline: Option<Instant>,
    /// Journaled records not yet handed to an insert, and when the first of them was.
    journaled: Vec<AuditRecord>,
    journaled_since: Option<Instant>,
    /// A reader asked for the journaled records to be in the database.
    flush_wanted: bool,
    /// The insert of a sealed journal file in flight, if any (one at a time).
    ingest: Option<Ingest>,
}

pub(crate) async fn run(shared: Arc<Shared>, mut rx: mpsc::Receiver<Queued>, mut stop: watch::Receiver<Option<Instant>>) {
    let batch_size = shared.batch_size;
    let mut w = Writer {
        shared,
        db_down: false,
        next_retry: Instant::now(),
        replay: None,
        deadline: None,
        journaled: Vec::new(),
        journaled_since: None,
        flush_wanted: false,
        ingest: None,
    };
    if w.shared.journaling {
        w.open_journal().await;
    }
    // A spool left by an earlier run goes first, while new records wait in the queue.
    while w.shared.spool.has_pending() && !w.db_down && Instant::now() >= w.next_retry && stop.borrow().is_none() {
        w.replay_step().await;
    }
    let mut buf: Vec<Queued> = Vec::with_capacity(batch_size);
    loop {
        let stopping = *stop.borrow_and_update();
        if let Some(deadline) = stopping {
            w.deadline = Some(deadline);
            w.drain(&mut rx, buf).await;
            return;
        }
        if w.shared.spool.has_pending() && Instant::now() >= w.next_retry {
            w.replay_step().await;
        }
        let idle = w.idle();
        // 32 batches journaled and not yet inserted (the database is slow): take no more until
        // the insert in flight ends; callers wait, and once the queue is full spool their own.
        let room = w.journaled.len() < w.shared.batch_size.max(1) * 32;
        tokio::select! {
            biased;
            changed = stop.changed() => {
                if changed.is_err() {
                    // The AuditLog was dropped without shutdown(): flush what is queued anyway.
                    w.deadline = Some(Instant::now() + w.shared.write_timeout);
                    w.drain(&mut rx, buf).await;
                    return;
                }
                continue;
            }
            done = ingest_finished(&mut w.ingest) => {
                w.ingested(done).await;
                w.start_ingest().await;
                continue;
            }
            n = rx.recv_many(&mut buf, batch_size), if room => {
                if n == 0 {
                    return;
                }
            }
            () = w.shared.flush_now.notified() => {
                w.flush_wanted = true;
                w.start_ingest().await;
                continue;
            }
            () = tokio::time::sleep(idle) => {
                w.start_ingest().await;
                continue;
            }
        }
        linger(&w.shared, &mut rx, &mut stop, &mut buf).await;
        let batch = std::mem::replace(&mut buf, Vec::with_capacity(batch_size));
        w.persist(batch).await;
        w.start_ingest().await;
    }
}

/// Waits up to `flush_interval` for the batch to fill, unless a sync caller is waiting.
async fn linger(shared: &Shared, rx: &mut mpsc::Receiver<Queued>, stop: &mut watch::Receiver<Option<Instant>>, buf: &mut Vec<Queued>) {
    if shared.flush_interval.is_zero() || buf.iter().any(|q| q.ack.is_some()) {
        return;
    }
    let until = Instant::now() + shared.flush_interval;
    while buf.len() < shared.batch_size {
        let room = shared.batch_size - buf.len();
        tokio::select! {
            biased;
            _ = stop.changed() => return,
            n = rx.recv_many(buf, room) => {
                if n == 0 || buf.iter().rev().take(n).any(|q| q.ack.is_some()) {
                    return;
                }
            }
            () = tokio::time::sleep_until(until) => return,
        }
    }
}

impl Writer {
    /// How long a database write may take now; `None`: do not try the database. While the
    /// database is down only replay probes it (`probe`), at `retry_interval`; new batches go
    /// straight to the spool behind the records already there.
    fn budget(&self, probe: bool) -> Option<Duration> {
        if self.db_down && !probe {
            return None;
        }
        match self.deadline {
            None => Some(self.shared.write_timeout),
            Some(d) => {
                let left = d.checked_sub(SPOOL_RESERVE).map(|d| d.saturating_duration_since(Instant::now())).unwrap_or_default();
                (!left.is_zero()).then(|| left.min(self.shared.write_timeout))
            }
        }
    }

    async fn insert(&mut self, records: &[AuditRecord], probe: bool) -> bool {
        let Some(budget) = self.budget(probe) else { return false };
        let (outcome, took) = timed_insert(&self.shared.store, records, budget, probe).await;
        self.settle(records.len(), outcome, took)
    }

    /// Counts and logs an insert's outcome; a failure marks the database down until a replay
    /// probe reaches it. Returns whether the records are in the database.
    fn settle(&mut self, records: usize, outcome: Result<(), String>, took: Duration) -> bool {
        crate::metrics::record::audit_batch(took, outcome.is_ok().then_some(records));
        match outcome {
            Ok(()) => {
                self.shared.counters.written.fetch_add(records as u64, Ordering::Relaxed);
                if self.db_down {
                    tracing::info!("audit database reachable again");
                }
                self.db_down = false;
                true
            }
            Err(reason) => {
                self.shared.counters.write_failures.fetch_add(1, Ordering::Relaxed);
                if !self.db_down {
                    tracing::warn!(error = %reason, spool = %self.shared.spool.path().display(), "audit database write failed; spooling until it returns");
                }
                self.db_down = true;
                self.next_retry = Instant::now() + self.shared.retry_interval;
                false
            }
        }
    }

    async fn persist(&mut self, batch: Vec<Queued>) {
        let (records, acks): (Vec<_>, Vec<_>) = batch.into_iter().map(|q| (q.record, q.ack)).unzip();
        let Some((records, acks)) = self.journal(records, acks).await else { return };
        if self.insert(&records, false).await {
            if self.shared.sink.is_some() {
                let s = Arc::clone(&self.shared);
                let _ = tokio::task::spawn_blocking(move || {
                    if let Some(sink) = &s.sink {
                        sink.emit(&records);
                    }
                })
                .await;
            }
        } else {
            persist_local(&self.shared, records).await;
        }
        for ack in acks.into_iter().flatten() {
            let _ = ack.send(());
        }
    }

    /// Moves one batch from the spool to the database.
    async fn replay_step(&mut self) {
        let shared = Arc::clone(&self.shared);
        let replay = match self.replay.take() {
            Some(r) => Ok(Some(r)),
            None => blocking(move || shared.spool.begin_replay()).await,
        };
        let mut replay = match replay {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(e) => return self.spool_failed(e),
        };
        let shared = Arc::clone(&self.shared);
        let n = self.shared.batch_size;
        let (replay_back, batch) = match tokio::task::spawn_blocking(move || {
            let batch = shared.spool.next_batch(&mut replay, n);
            (replay, batch)
        })
        .await
        {
            Ok(pair) => pair,
            Err(e) => return self.spool_failed(std::io::Error::other(e)),
        };
        let mut replay = replay_back;
        let batch = match batch {
            Ok(b) => b,
            Err(e) => {
                self.replay = Some(replay);
                return self.spool_failed(e);
            }
        };
        if batch.is_empty() {
            let shared = Arc::clone(&self.shared);
            if let Err(e) = blocking(move || shared.spool.finish_replay(replay)).await {
                self.spool_failed(e);
            }
            return;
        }
        if self.insert(&batch, true).await {
            replay.confirm();
            self.shared.counters.replayed.fetch_add(batch.len() as u64, Ordering::Relaxed);
            crate::metrics::record::audit_replayed(batch.len());
        }
        self.replay = Some(replay);
    }

    fn spool_failed(&mut self, e: std::io::Error) {
        tracing::error!(spool = %self.shared.spool.path().display(), error = %e, "cannot replay the audit spool");
        self.next_retry = Instant::now() + self.shared.retry_interval;
    }

    /// Shutdown: takes everything still queued; the database while the deadline allows, the
    /// spool after that.
    async fn drain(&mut self, rx: &mut mpsc::Receiver<Queued>, mut rest: Vec<Queued>) {
        rx.close();
        while let Some(q) = rx.recv().await {
            rest.push(q);
        }
        let total = rest.len();
        let mut rest = rest.into_iter();
        loop {
            let batch: Vec<Queued> = rest.by_ref().take(self.shared.batch_size).collect();
            if batch.is_empty() {
                break;
            }
            self.persist(batch).await;
        }
        // The journal's last records: the insert in flight, then the rest, as the deadline allows.
        self.finish_ingest().await;
        self.flush_wanted = true;
        self.start_ingest().await;
        self.finish_ingest().await;
        tracing::debug!(records = total, "audit writer drained");
    }
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> std::io::Result<T> + Send + 'static) -> std::io::Result<T> {
    tokio::task::spawn_blocking(f).await.map_err(std::io::Error::other)?
}

/// One insert under a time budget, traced; the error says what went wrong.
async fn timed_insert(store: &Store, records: &[AuditRecord], budget: Duration, replay: bool) -> (Result<(), String>, Duration) {
    let started = Instant::now();
    let span = tracing::info_span!("audit.write", records = records.len(), replay);
    let write = tracing::Instrument::instrument(db::insert_batch(store, records), span);
    let outcome = match tokio::time::timeout(budget, write).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {} ms", budget.as_millis())),
    };
    (outcome, started.elapsed())
}
