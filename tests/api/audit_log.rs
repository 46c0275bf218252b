//! The audit log against real databases: SQLite in a tempdir, Postgres in a database of its own.

use crate::audit_support;

use std::time::Duration;

use audit_support::{PgDb, audit_settings, eventually, json_lines, pg_settings, sample, sqlite_settings};
use toolgate::audit::{AuditFilter, AuditLog, AuditRecord, AuditSettings, Durability, Outcome, count, prune, query};
use toolgate::store::{StorageSettings, Store};

/// Records `n` samples, shuts down, and checks the table holds exactly those rows.
async fn n_records_are_n_rows(storage: StorageSettings, settings: AuditSettings) {
    const N: usize = 1000;
    let store = Store::connect(&storage).await.expect("connect");
    let log = AuditLog::start(&settings, store.clone()).expect("start");
    let mut expected: Vec<AuditRecord> = (0..N).map(sample).collect();
    for r in &expected {
        log.record(r.clone()).await;
    }
    log.shutdown(Duration::from_secs(10)).await;
    assert_eq!(log.records_written(), N as u64);
    assert_eq!(log.records_lost(), 0);
    assert_eq!(log.spool_bytes(), 0);
    let rows = query(&store, &AuditFilter::default()).await.expect("query");
    for r in &mut expected {
        r.replica_id = "test-replica".into();
    }
    expected.sort_by_key(|r| (r.time, r.id));
    assert_eq!(rows.len(), N);
    assert_eq!(rows, expected, "every field reads back as written");
    // Filters: one outcome, one tool, one subject, a limit.
    let denied = query(&store, &AuditFilter { outcome: Some(Outcome::Denied), ..Default::default() }).await.expect("q");
    assert_eq!(denied.len(), N / 8);
    assert!(denied.iter().all(|r| r.outcome == Outcome::Denied));
    let tool =
        query(&store, &AuditFilter { tool: Some("tool_1".into()), subject: Some("user-3".into()), ..Default::default() }).await.expect("q");
    assert_eq!(
        tool.len(),
        expected.iter().filter(|r| r.tool.as_deref() == Some("tool_1") && r.subject.as_deref() == Some("user-3")).count()
    );
    let window = AuditFilter { since: Some(expected[10].time), until: Some(expected[20].time), limit: Some(5), ..Default::default() };
    let some = query(&store, &window).await.expect("q");
    assert_eq!(some.len(), 5);
    assert!(some.iter().all(|r| r.time >= expected[10].time && r.time < expected[20].time));
    store.close().await;
}

#[tokio::test]
async fn sqlite_n_records_are_n_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let jsonl = dir.path().join("audit.jsonl");
    let settings = AuditSettings { jsonl: Some(jsonl.display().to_string()), ..audit_settings() };
    n_records_are_n_rows(sqlite_settings(dir.path()), settings).await;
    // The JSON-lines copy has each record once.
    let lines = std::fs::read_to_string(&jsonl).expect("jsonl");
    assert_eq!(lines.lines().count(), 1000);
    let first: AuditRecord = serde_json::from_str(lines.lines().next().expect("line")).expect("parses");
    assert_eq!(first.replica_id, "test-replica");
}

#[tokio::test]
async fn postgres_n_records_are_n_rows() {
    let db = PgDb::create().await;
    let dir = tempfile::tempdir().expect("tempdir");
    n_records_are_n_rows(pg_settings(db.url(), dir.path()), audit_settings()).await;
}

/// On SQLite the record is journaled when `record()` returns and in the database once
/// `settled()` returns; on Postgres it is committed at once.
async fn sync_mode_writes_before_returning(storage: StorageSettings) {
    let store = Store::connect(&storage).await.expect("connect");
    // A long linger would delay batched records; sync records must not wait for it.
    let settings = AuditSettings { durability: Durability::Sync, flush_interval_ms: 60_000, ..audit_settings() };
    let log = AuditLog::start(&settings, store.clone()).expect("start");
    for i in 0..20 {
        let started = std::time::Instant::now();
        log.record(sample(i)).await;
        assert!(started.elapsed() < Duration::from_secs(5));
        log.settled().await;
        assert_eq!(count(&store).await.expect("count"), i as i64 + 1, "record {i} is in the database once settled");
    }
    log.shutdown(Duration::from_secs(5)).await;
    store.close().await;
}

#[tokio::test]
async fn sqlite_sync_mode_writes_before_returning() {
    let dir = tempfile::tempdir().expect("tempdir");
    sync_mode_writes_before_returning(sqlite_settings(dir.path())).await;
}

#[tokio::test]
async fn postgres_sync_mode_writes_before_returning() {
    let db = PgDb::create().await;
    let dir = tempfile::tempdir().expect("tempdir");
    sync_mode_writes_before_returning(pg_settings(db.url(), dir.path())).await;
}

#[tokio::test]
async fn shutdown_flushes_everything_queued() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::connect(&sqlite_settings(dir.path())).await.expect("connect");
    // Records linger up to a minute in batched mode: only shutdown can have written them.
    let settings = AuditSettings { durability: Durability::Batched, flush_interval_ms: 60_000, batch_size: 3000, ..audit_settings() };
    let log = AuditLog::start(&settings, store.clone()).expect("start");
    for i in 0..2000 {
        log.record(sample(i)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(count(&store).await.expect("count"), 0, "still lingering before shutdown");
    log.shutdown(Duration::from_secs(10)).await;
    assert_eq!(count(&store).await.expect("count"), 2000);
    assert_eq!(log.spool_bytes(), 0);
    // After shutdown a record still is not lost: it goes to the spool, replayed at next start.
    log.record(sample(5000)).await;
    assert!(log.spool_bytes() > 0);
    let again = AuditLog::start(&settings, store.clone()).expect("restart");
    assert!(eventually(Duration::from_secs(5), || async { count(&store).await.unwrap_or(0) == 2001 }).await);
    again.shutdown(Duration::from_secs(5)).await;
    assert_eq!(again.spool_bytes(), 0);
    store.close().await;
}

#[tokio::test]
async fn queue_overflow_spills_to_the_spool_and_is_replayed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::connect(&sqlite_settings(dir.path())).await.expect("connect");
    // Batched: a sync caller waits for its record, so a sequence of them never fills the queue.
    let settings = AuditSettings { durability: Durability::Batched, queue_capacity: 4, batch_size: 4, ..audit_settings() };
    let log = AuditLog::start(&settings, store.clone()).expect("start");
    const N: usize = 500;
    for i in 0..N {
        log.record(sample(i)).await;
    }
    assert!(log.records_spooled() > 0, "a 4-record queue overflows: {:?}", log.stats());
    let drained =
        eventually(Duration::from_secs(10), || async { log.spool_bytes() == 0 && count(&store).await.unwrap_or(0) == N as i64 }).await;
    assert!(drained, "spool replayed: {:?}, rows {:?}", log.stats(), count(&store).await);
    assert_eq!(log.records_replayed(), log.records_spooled());
    log.shutdown(Duration::from_secs(5)).await;
    assert_eq!(count(&store).await.expect("count"), N as i64, "no duplicates");
    assert!(!dir.path().join("audit-spool.jsonl.replaying").exists());
    store.close().await;
}

#[tokio::test]
async fn a_spool_left_by_a_previous_run_is_replayed_at_start_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::connect(&sqlite_settings(dir.path())).await.expect("connect");
    // A replay that was interrupted: 10 records, the first 5 of which had reached the database.
    let interrupted: Vec<AuditRecord> = (0..10).map(sample).collect();
    toolgate::audit::insert_batch(&store, &interrupted[..5]).await.expect("insert");
    std::fs::write(dir.path().join("audit-spool.jsonl.replaying"), json_lines(&interrupted)).expect("write");
    // The live spool: 10 more, and a torn final line from the crash.
    let live: Vec<AuditRecord> = (10..20).map(sample).collect();
    let mut text = json_lines(&live);
    text.push_str(r#"{"id":"0190"#);
    std::fs::write(dir.path().join("audit-spool.jsonl"), text).expect("write");

    let log = AuditLog::start(&audit_settings(), store.clone()).expect("start");
    assert!(eventually(Duration::from_secs(5), || async { log.spool_bytes() == 0 }).await, "{:?}", log.stats());
    assert_eq!(count(&store).await.expect("count"), 20, "each record once");
    assert!(!dir.path().join("audit-spool.jsonl").exists() && !dir.path().join("audit-spool.jsonl.replaying").exists());
    let rejected = std::fs::read_to_string(dir.path().join("audit-spool.jsonl.rejected")).expect("rejected file");
    assert_eq!(rejected, "{\"id\":\"0190\n", "the torn line is kept aside, not dropped");
    // New records after the replay go to the database as usual.
    log.record(sample(99)).await;
    log.shutdown(Duration::from_secs(5)).await;
    assert_eq!(count(&store).await.expect("count"), 21);
    store.close().await;
}

#[tokio::test]
async fn a_journal_left_by_a_crash_is_replayed_once_at_start_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::connect(&sqlite_settings(dir.path())).await.expect("connect");
    // Killed while inserting a sealed file (its first 5 records committed) with 5 more
    // journaled and answered in the other file, the last write torn.
    let sealed: Vec<AuditRecord> = (0..10).map(sample).collect();
    toolgate::audit::insert_batch(&store, &sealed[..5]).await.expect("insert");
    std::fs::write(dir.path().join("audit-journal.0.jsonl"), json_lines(&sealed)).expect("write");
    let active: Vec<AuditRecord> = (10..15).map(sample).collect();
    std::fs::write(dir.path().join("audit-journal.1.jsonl"), json_lines(&active) + r#"{"id":"01"#).expect("write");

    let log = AuditLog::start(&audit_settings(), store.clone()).expect("start");
    let recovered = eventually(Duration::from_secs(5), || async { log.records_replayed() > 0 && log.spool_bytes() == 0 }).await;
    assert!(recovered, "{:?}", log.stats());
    assert_eq!(count(&store).await.expect("count"), 15, "each record once");
    for n in 0..2 {
        // Emptied in place: the file keeps its blocks, zeros where the records were.
        let left = std::fs::read(dir.path().join(format!("audit-journal.{n}.jsonl"))).expect("journal file");
        assert!(left.iter().all(|&b| b == 0), "journal file {n} emptied");
    }
    log.shutdown(Duration::from_secs(5)).await;
    store.close().await;
}

#[tokio::test]
async fn concurrent_sync_callers_share_journal_writes_and_every_record_reaches_the_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::connect(&sqlite_settings(dir.path())).await.expect("connect");
    let log = AuditLog::start(&audit_settings(), store.clone()).expect("start");
    let callers: Vec<_> = (0..64)
        .map(|c| {
            let log = log.clone();
            tokio::spawn(async move {
                for i in 0..20 {
                    log.record(sample(c * 100 + i)).await;
                }
            })
        })
        .collect();
    for c in callers {
        c.await.expect("caller");
    }
    log.settled().await;
    assert_eq!(count(&store).await.expect("count"), 64 * 20);
    let stats = log.stats();
    assert_eq!((stats.records_written, stats.records_spooled, stats.records_lost), (64 * 20, 0, 0), "{stats:?}");
    log.shutdown(Duration::from_secs(5)).await;
    store.close().await;
}

#[tokio::test]
async fn journaled_records_the_database_refuses_go_to_the_spool_and_come_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::connect(&sqlite_settings(dir.path())).await.expect("connect");
    let toolgate::store::Backend::Sqlite(pool) = store.backend() else { unreachable!("SQLite settings") };
    let log = AuditLog::start(&audit_settings(), store.clone()).expect("start");
    for i in 0..10 {
        log.record(sample(i)).await;
    }
    log.settled().await;
    // The table goes away: the journal still answers, its insert fails, the spool takes them.
    sqlx::query("ALTER TABLE audit_log RENAME TO audit_log_away").execute(pool).await.expect("rename");
    for i in 10..20 {
        log.record(sample(i)).await;
    }
    assert!(eventually(Duration::from_secs(5), || async { log.records_spooled() == 10 }).await, "{:?}", log.stats());
    sqlx::query("ALTER TABLE audit_log_away RENAME TO audit_log").execute(pool).await.expect("rename back");
    assert!(eventually(Duration::from_secs(5), || async { log.spool_bytes() == 0 }).await, "{:?}", log.stats());
    assert_eq!(count(&store).await.expect("count"), 20, "each record once");
    assert_eq!(log.records_lost(), 0);
    log.shutdown(Duration::from_secs(5)).await;
    store.close().await;
}

#[tokio::test]
async fn prune_deletes_only_old_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::connect(&sqlite_settings(dir.path())).await.expect("connect");
    let now = time::OffsetDateTime::now_utc();
    let mut old = sample(1);
    old.time = now - time::Duration::days(100);
    let mut recent = sample(2);
    recent.time = now - time::Duration::days(1);
    toolgate::audit::insert_batch(&store, &[old, recent.clone()]).await.expect("insert");
    let deleted = prune(&store, now - time::Duration::days(90)).await.expect("prune");
    assert_eq!(deleted, 1);
    let left = query(&store, &AuditFilter::default()).await.expect("q");
    assert_eq!(left.iter().map(|r| r.id).collect::<Vec<_>>(), vec![recent.id]);
    store.close().await;
}

#[tokio::test]
async fn replays_never_duplicate() {
    let db = PgDb::create().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::connect(&pg_settings(db.url(), dir.path())).await.expect("connect");
    let records: Vec<AuditRecord> = (0..50).map(sample).collect();
    assert_eq!(toolgate::audit::insert_batch(&store, &records).await.expect("insert"), 50);
    assert_eq!(toolgate::audit::insert_batch(&store, &records).await.expect("insert again"), 0);
    assert_eq!(count(&store).await.expect("count"), 50);
    store.close().await;
}

#[tokio::test]
async fn nul_bytes_cannot_poison_the_postgres_writer() {
    let db = PgDb::create().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::connect(&pg_settings(db.url(), dir.path())).await.expect("connect");
    let log = AuditLog::start(&audit_settings(), store.clone()).expect("start");
    let args = serde_json::json!({"q": "a\u{0}b"});
    log.record(sample(1).with_detail("bad\u{0}byte").with_arguments(&args, &[])).await;
    log.record(sample(2)).await;
    log.shutdown(Duration::from_secs(5)).await;
    assert_eq!(log.write_failures(), 0);
    let rows = query(&store, &AuditFilter::default()).await.expect("q");
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().any(|r| r.detail.as_deref() == Some("bad\u{FFFD}byte")));
    assert!(rows.iter().any(|r| r.arguments.as_ref() == Some(&args)), "JSON keeps \\u0000 escaped");
    store.close().await;
}
