//! The store: backend by URL scheme, SQLite defaults, Postgres migrations, refused schemes.

use crate::audit_support;

use audit_support::{PgDb, pg_settings, sqlite_settings};
use toolgate::config::{Secret, Settings};
use toolgate::store::{Backend, StorageSettings, Store, StoreError};

#[tokio::test]
async fn sqlite_default_creates_the_data_dir_and_a_wal_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("nested/data");
    let store = Store::connect(&sqlite_settings(&data)).await.expect("connect");
    assert_eq!(store.backend_name(), "sqlite");
    assert!(data.join("toolgate.db").is_file());
    let Backend::Sqlite(pool) = store.backend() else { panic!("sqlite expected") };
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode").fetch_one(pool).await.expect("pragma");
    assert_eq!(mode, "wal");
    let tables: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM sqlite_master WHERE name = 'audit_log'").fetch_one(pool).await.expect("q");
    assert_eq!(tables, 1);
    store.ping().await.expect("ping");
    // Migrating again is a no-op.
    store.migrate().await.expect("migrate twice");
    store.close().await;
}

#[tokio::test]
async fn explicit_sqlite_url_is_used() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("other.db");
    let settings = StorageSettings { url: Some(Secret::new(format!("sqlite:{}", file.display()))), ..sqlite_settings(dir.path()) };
    let store = Store::connect(&settings).await.expect("connect");
    assert!(file.is_file());
    store.close().await;
}

#[tokio::test]
async fn postgres_connects_and_migrates_idempotently() {
    let db = PgDb::create().await;
    let dir = tempfile::tempdir().expect("tempdir");
    for url in [db.url(), db.url().replacen("postgres://", "postgresql://", 1)] {
        let store = Store::connect(&pg_settings(url, dir.path())).await.expect("connect");
        assert_eq!(store.backend_name(), "postgres");
        let Backend::Postgres(pool) = store.backend() else { panic!("postgres expected") };
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations").fetch_one(pool).await.expect("q");
        assert_eq!(n as usize, store.embedded_migrations().len());
        store.close().await;
    }
}

#[tokio::test]
async fn unknown_scheme_is_refused_naming_the_setting() {
    let dir = tempfile::tempdir().expect("tempdir");
    let settings = StorageSettings { url: Some(Secret::new("mysql://root:pw@db/x".into())), ..sqlite_settings(dir.path()) };
    let err = Store::connect(&settings).await.expect_err("refused");
    let text = err.to_string();
    assert!(matches!(err, StoreError::Config(_)));
    assert!(text.contains("storage.url") && text.contains("TOOLGATE__STORAGE__URL") && text.contains("mysql"), "{text}");
    assert!(!text.contains("pw"), "the URL's password never appears: {text}");

    // The same at configuration load time.
    let path = dir.path().join("t.toml");
    std::fs::write(&path, "[storage]\nurl = \"redis://localhost\"\n").expect("write");
    let err = Settings::load(Some(&path)).expect_err("refused");
    let text = format!("{err}");
    assert!(text.contains("storage.url") && text.contains("redis"), "{text}");
}

#[test]
fn migration_directories_are_in_lockstep() {
    let names = |dir: &str| {
        let mut v: Vec<String> = std::fs::read_dir(format!("{}/migrations/{dir}", env!("CARGO_MANIFEST_DIR")))
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let (sqlite, postgres) = (names("sqlite"), names("postgres"));
    assert!(!sqlite.is_empty());
    assert_eq!(sqlite, postgres, "every migration exists for both backends under the same name");
}

/// With TLS, a statement on a socket with Nagle's algorithm waits ~40 ms for the server's
/// delayed ACK (sqlx 0.9.0 no longer sets TCP_NODELAY): every database connection has it.
#[tokio::test]
async fn postgres_connections_do_not_wait_for_delayed_acks() {
    let db = PgDb::create().await;
    let dir = tempfile::tempdir().expect("dir");
    let store = Store::connect(&pg_settings(db.url(), dir.path())).await.expect("connect");
    let Backend::Postgres(pool) = store.backend() else { panic!("a Postgres store") };
    let held: Vec<_> = futures_util::future::join_all((0..3).map(|_| pool.acquire())).await;
    let port: u16 = audit_support::pg_host().rsplit(':').next().and_then(|p| p.parse().ok()).unwrap_or(5432);
    let sockets = toolgate::store::nodelay::sockets_connected_to(port).expect("list the sockets");
    assert!(sockets.len() >= 3, "{} connections to port {port}", sockets.len());
    let all = sockets.iter().all(|s| rustix::net::sockopt::tcp_nodelay(s).expect("getsockopt"));
    assert!(all, "a database connection without TCP_NODELAY");
    drop(held);
    store.close().await;
}
