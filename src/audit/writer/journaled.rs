//! The writer's journal path (`sync` on SQLite, see [`crate::audit::journal`]): journal a
//! group and answer it, then insert what the journal holds, one insert at a time, and empty
//! each sealed file once its records are in the database or the spool.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::{Ack, Writer, blocking, spool, timed_insert};
use crate::audit::journal::Journal;
use crate::audit::record::AuditRecord;

/// The insert of a sealed journal file, in flight. The records stay here too, so a task that
/// fails leaves them to the spool, not lost.
pub(super) struct Ingest {
    sealed: usize,
    records: Arc<Vec<AuditRecord>>,
    handle: JoinHandle<(Result<(), String>, Duration)>,
}

impl Writer {
    /// Journals a group and answers its callers, when there is a journal and the database is
    /// up; gives the group back otherwise (or when the journal cannot be written).
    pub(super) async fn journal(&mut self, records: Vec<AuditRecord>, acks: Vec<Ack>) -> Option<(Vec<AuditRecord>, Vec<Ack>)> {
        if self.shared.journal.get().is_none() || self.db_down {
            return Some((records, acks));
        }
        let s = Arc::clone(&self.shared);
        let appended = tokio::task::spawn_blocking(move || {
            let result = s.journal.get().map_or(Ok(()), |j| j.append(&records));
            if let (Ok(()), Some(sink)) = (&result, &s.sink) {
                sink.emit(&records);
            }
            (records, result)
        })
        .await;
        match appended {
            Ok((records, Ok(()))) => {
                for ack in acks.into_iter().flatten() {
                    let _ = ack.send(());
                }
                self.shared.journaled.fetch_add(records.len() as u64, Ordering::Relaxed);
                self.journaled_since.get_or_insert_with(Instant::now);
                self.journaled.extend(records);
                None
            }
            Ok((records, Err(e))) => {
                tracing::warn!(error = %e, "cannot append to the audit journal; committing this group directly");
                Some((records, acks))
            }
            Err(e) => {
                // The task died with the group; its callers, never answered, spool their copies.
                tracing::error!(error = %e, "audit journal task failed");
                None
            }
        }
    }

    /// Opens the journal beside the spool; what an earlier run left in it moves into the spool
    /// first, for the replay that follows.
    pub(super) async fn open_journal(&mut self) {
        let s = Arc::clone(&self.shared);
        match blocking(move || Journal::open_beside(&s.spool)).await {
            Ok((journal, moved)) => {
                if moved > 0 {
                    tracing::info!(bytes = moved, "audit journal left by an earlier run moved to the spool for replay");
                }
                let _ = self.shared.journal.set(journal);
            }
            Err(e) => {
                tracing::error!(error = %e, spool = %self.shared.spool.path().display(), "cannot open the audit journal beside the spool; committing each group to the database instead");
            }
        }
    }

    /// How long the loop may sleep: until the next replay try, or until journaled records are
    /// due in the database (while an insert is in flight, its end wakes the loop instead).
    pub(super) fn idle(&self) -> Duration {
        let now = Instant::now();
        let retry = self.shared.spool.has_pending().then(|| self.next_retry.saturating_duration_since(now));
        let since = self.journaled_since.filter(|_| self.ingest.is_none());
        let ingest = since.map(|t| (t + self.shared.flush_interval).saturating_duration_since(now));
        retry.into_iter().chain(ingest).min().unwrap_or(Duration::from_secs(3600))
    }

    /// Seals the journal and inserts what it holds in a task of its own, once a batch is full,
    /// the oldest record has waited `flush_interval`, or a flush is wanted (a reader waits, or
    /// shutdown): a large insert costs far less per record than a small one, and the journal
    /// already holds the records safe. One insert at a time.
    pub(super) async fn start_ingest(&mut self) {
        if self.ingest.is_some() || self.journaled.is_empty() {
            return;
        }
        let due = self.journaled_since.is_some_and(|t| t.elapsed() >= self.shared.flush_interval);
        if !(due || self.flush_wanted || self.journaled.len() >= self.shared.batch_size) {
            return;
        }
        self.journaled_since = None;
        self.flush_wanted = false;
        let Some(journal) = self.shared.journal.get() else { return };
        let sealed = journal.seal();
        let records = std::mem::take(&mut self.journaled);
        let Some(budget) = self.budget(false) else {
            // The database is down, or the shutdown deadline is near: straight to the spool.
            return self.retire(sealed, records, false).await;
        };
        let (store, records) = (self.shared.store.clone(), Arc::new(records));
        let inserting = Arc::clone(&records);
        let handle = tokio::spawn(async move { timed_insert(&store, &inserting, budget, false).await });
        self.ingest = Some(Ingest { sealed, records, handle });
    }

    /// Settles the insert in flight once `done` says how it ended.
    pub(super) async fn ingested(&mut self, done: Result<(Result<(), String>, Duration), tokio::task::JoinError>) {
        let Some(Ingest { sealed, records, .. }) = self.ingest.take() else { return };
        let (outcome, took) = done.unwrap_or_else(|e| (Err(format!("the insert task failed: {e}")), Duration::ZERO));
        let in_db = self.settle(records.len(), outcome, took);
        // The task has ended, so this is the only reference left.
        let records = Arc::try_unwrap(records).unwrap_or_else(|shared| shared.as_ref().clone());
        self.retire(sealed, records, in_db).await;
    }

    /// Waits for the insert in flight, if any, and settles it.
    pub(super) async fn finish_ingest(&mut self) {
        let Some(ingest) = self.ingest.as_mut() else { return };
        let done = (&mut ingest.handle).await;
        self.ingested(done).await;
    }

    /// Empties a sealed journal file once its records are in the database, or else in the spool.
    pub(super) async fn retire(&mut self, sealed: usize, records: Vec<AuditRecord>, in_db: bool) {
        let n = records.len() as u64;
        if !in_db {
            spool(&self.shared, records, false).await;
        }
        self.shared.handed_on.send_modify(|h| *h += n);
        let s = Arc::clone(&self.shared);
        let cleared = blocking(move || s.journal.get().map_or(Ok(()), |j| j.clear(sealed))).await;
        if let Err(e) = cleared {
            tracing::warn!(error = %e, "cannot empty a sealed audit journal file; its records are replayed at the next start");
        }
    }
}

/// How the insert in flight ended, once it has; never, when there is none.
pub(super) async fn ingest_finished(ingest: &mut Option<Ingest>) -> Result<(Result<(), String>, Duration), tokio::task::JoinError> {
    match ingest {
        Some(ingest) => (&mut ingest.handle).await,
        None => std::future::pending().await,
    }
}
