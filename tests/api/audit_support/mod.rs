//! Shared by the store and audit tests: per-test Postgres databases (created and dropped; a
//! Postgres that cannot be reached fails the test), SQLite settings in a tempdir, a TCP proxy
//! that can cut and restore the database connection, and sample records.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::json;
use sqlx::Connection;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use toolgate::audit::{AuditRecord, AuditSettings, EventKind, Outcome};
use toolgate::auth::principal::Principal;
use toolgate::config::Secret;
use toolgate::store::StorageSettings;

/// The server the Postgres tests use: `TOOLGATE_TEST_PG_HOST` (host:port), default 127.0.0.1:5432.
pub fn pg_host() -> String {
    std::env::var("TOOLGATE_TEST_PG_HOST").unwrap_or_else(|_| "127.0.0.1:5432".into())
}

/// A database of its own for one test, dropped (with its connections) when this is dropped.
pub struct PgDb {
    pub name: String,
}

impl PgDb {
    pub async fn create() -> Self {
        let name = format!("toolgate_test_{}", uuid::Uuid::now_v7().simple());
        let mut admin = sqlx::PgConnection::connect(&format!("postgres://postgres@{}/postgres", pg_host()))
            .await
            .unwrap_or_else(|e| panic!("Postgres at {} is required for this test: {e}", pg_host()));
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut admin).await.expect("create test database");
        let _ = admin.close().await;
        Self { name }
    }

    /// The URL of this database through `host` (the real server, or a proxy in front of it).
    pub fn url_via(&self, host: &str) -> String {
        format!("postgres://postgres@{host}/{}", self.name)
    }

    pub fn url(&self) -> String {
        self.url_via(&pg_host())
    }
}

impl Drop for PgDb {
    fn drop(&mut self) {
        let name = self.name.clone();
        // Drop runs inside the test's runtime, which cannot block: use a thread of its own.
        let dropped = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            rt.block_on(async {
                let mut admin = sqlx::PgConnection::connect(&format!("postgres://postgres@{}/postgres", pg_host())).await?;
                sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))).execute(&mut admin).await?;
                admin.close().await
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("warning: could not drop test database {}", self.name);
        }
    }
}

pub fn sqlite_settings(dir: &Path) -> StorageSettings {
    StorageSettings { data_dir: dir.to_path_buf(), ..StorageSettings::default() }
}

pub fn pg_settings(url: String, data_dir: &Path) -> StorageSettings {
    StorageSettings { url: Some(Secret::new(url)), data_dir: data_dir.to_path_buf(), max_connections: 4, acquire_timeout_ms: 1_000 }
}

/// Fast settings for tests: short linger and retry.
pub fn audit_settings() -> AuditSettings {
    AuditSettings {
        flush_interval_ms: 20,
        retry_interval_ms: 100,
        write_timeout_ms: 2_000,
        replica_id: Some("test-replica".into()),
        retention_days: 0,
        ..AuditSettings::default()
    }
}

/// `records` as the spool and the journal hold them: one JSON line each.
pub fn json_lines(records: &[AuditRecord]) -> String {
    records.iter().map(|r| serde_json::to_string(r).expect("json") + "\n").collect()
}

/// Record `i` of a test: every field set, outcomes and kinds cycling.
pub fn sample(i: usize) -> AuditRecord {
    const OUTCOMES: [Outcome; 8] = Outcome::ALL;
    const KINDS: [EventKind; 5] =
        [EventKind::ToolCall, EventKind::AuthFailure, EventKind::AuthzDenied, EventKind::RateLimited, EventKind::RegistryChange];
    let principal = Principal {
        issuer: "https://idp.example".into(),
        subject: format!("user-{}", i % 7),
        client_id: Some("client-a".into()),
        scopes: Default::default(),
        expires_at: 0,
        default_audience: true,
        server_audiences: Vec::new(),
    };
    let args = json!({"n": i, "password": "hunter2", "nested": {"token": "t", "keep": [1, 2]}});
    AuditRecord::new(KINDS[i % KINDS.len()], OUTCOMES[i % OUTCOMES.len()])
        .with_principal(&principal)
        .with_tool(&format!("tool_{}", i % 3), &args)
        .with_arguments(&args, &["password", "token"])
        .with_request_id(format!("req-{i}"))
        .with_session_id(format!("sess-{}", i % 11))
        .with_client_ip(std::net::IpAddr::from([10, 0, 0, (i % 250) as u8]))
        .with_trace_id(format!("{i:032x}"))
        .with_detail(format!("detail {i}"))
        .with_timing(Duration::from_millis(i as u64), Some(100 + i as u64))
}

/// Polls `check` every 20 ms until it holds or `within` passes.
pub async fn eventually<F, Fut>(within: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let end = tokio::time::Instant::now() + within;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= end {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A TCP proxy in front of Postgres. `cut()` closes every open connection and refuses new
/// ones (as a network partition or a database restart would); `restore()` lets them through.
pub struct Proxy {
    pub addr: SocketAddr,
    up: Arc<AtomicBool>,
    cuts: watch::Sender<u64>,
}

impl Proxy {
    pub async fn start(upstream: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let up = Arc::new(AtomicBool::new(true));
        let (cuts, _) = watch::channel(0u64);
        let (up2, cuts2) = (Arc::clone(&up), cuts.clone());
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if !up2.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let mut cut = cuts2.subscribe();
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(&upstream).await else { return };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cut.changed() => {}
                    }
                });
            }
        });
        Self { addr, up, cuts }
    }

    pub fn cut(&self) {
        self.up.store(false, Ordering::SeqCst);
        self.cuts.send_modify(|n| *n += 1);
    }

    pub fn restore(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}
