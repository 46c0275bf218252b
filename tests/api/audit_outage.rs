//! Postgres goes away in the middle of a load (a TCP proxy between the pool and the server is
//! cut, then restored): every record ends in the database exactly once and the spool empties.

use crate::audit_support;

use std::collections::BTreeSet;
use std::time::Duration;

use audit_support::{PgDb, Proxy, audit_settings, eventually, pg_host, pg_settings, sample};
use toolgate::audit::{AuditFilter, AuditLog, AuditSettings, count, query};
use toolgate::store::Store;

fn outage_settings() -> AuditSettings {
    AuditSettings { write_timeout_ms: 1_000, retry_interval_ms: 100, batch_size: 64, ..audit_settings() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_outage_mid_load_loses_and_duplicates_nothing() {
    let db = PgDb::create().await;
    let proxy = Proxy::start(pg_host()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut storage = pg_settings(db.url_via(&proxy.addr.to_string()), dir.path());
    storage.acquire_timeout_ms = 500;
    let store = Store::connect(&storage).await.expect("connect");
    let log = AuditLog::start(&outage_settings(), store.clone()).expect("start");

    const N: usize = 3000;
    let mut ids = BTreeSet::new();
    for i in 0..N {
        if i == N / 3 {
            proxy.cut();
        }
        if i == 2 * N / 3 {
            proxy.restore();
        }
        let r = sample(i);
        ids.insert(r.id);
        log.record(r).await;
        // A steady rate (about 1.5 s for the whole load) so the outage spans many batches.
        if i % 2 == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    let stats = log.stats();
    assert!(stats.write_failures > 0 && stats.records_spooled > 0, "the cut was felt: {stats:?}");

    let settled =
        eventually(Duration::from_secs(20), || async { log.spool_bytes() == 0 && count(&store).await.unwrap_or(0) == N as i64 }).await;
    assert!(settled, "spool drained and every row present: {:?}, rows {:?}", log.stats(), count(&store).await);
    log.shutdown(Duration::from_secs(5)).await;

    let rows = query(&store, &AuditFilter::default()).await.expect("query");
    assert_eq!(rows.len(), N, "exactly once");
    assert_eq!(rows.iter().map(|r| r.id).collect::<BTreeSet<_>>(), ids);
    assert_eq!(log.records_lost(), 0);
    assert!(
        !dir.path().join("audit-spool.jsonl").exists() || std::fs::metadata(dir.path().join("audit-spool.jsonl")).expect("meta").len() == 0
    );
    assert!(!dir.path().join("audit-spool.jsonl.replaying").exists());
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_during_an_outage_spools_and_the_next_start_replays() {
    let db = PgDb::create().await;
    let proxy = Proxy::start(pg_host()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut storage = pg_settings(db.url_via(&proxy.addr.to_string()), dir.path());
    storage.acquire_timeout_ms = 300;
    let store = Store::connect(&storage).await.expect("connect");
    let log = AuditLog::start(&outage_settings(), store.clone()).expect("start");
    proxy.cut();
    for i in 0..200 {
        log.record(sample(i)).await;
    }
    let started = std::time::Instant::now();
    log.shutdown(Duration::from_secs(2)).await;
    assert!(started.elapsed() < Duration::from_secs(3), "shutdown keeps its deadline");
    assert!(log.spool_bytes() > 0, "{:?}", log.stats());
    assert_eq!(log.records_lost(), 0);

    proxy.restore();
    let again = AuditLog::start(&outage_settings(), store.clone()).expect("restart");
    let replayed =
        eventually(Duration::from_secs(10), || async { again.spool_bytes() == 0 && count(&store).await.unwrap_or(0) == 200 }).await;
    assert!(replayed, "{:?}", again.stats());
    again.shutdown(Duration::from_secs(5)).await;
    store.close().await;
}
