//! Audit log figures, measured (not a test: run it in release mode on a quiet machine).
//!
//! ```text
//! cargo run --release --example audit_bench -- throughput <sqlite|postgres> [records] [default|large] [batch_size]
//! cargo run --release --example audit_bench -- latency <sqlite|postgres> <batched|sync> [records]
//! cargo run --release --example audit_bench -- crash <sqlite|postgres> [rate/s] [seconds]
//! ```
//!
//! `crash` runs this binary again as a child that records at a steady rate and prints each
//! acknowledged id, kills it with SIGKILL, then counts which acknowledged records reached the
//! database or the spool. Postgres runs use a database of their own on 127.0.0.1:5432
//! (`TOOLGATE_TEST_PG_HOST` to change), dropped at the end.

use std::collections::HashSet;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;
use sqlx::Connection;
use toolgate::audit::{AuditLog, AuditRecord, AuditSettings, Durability, EventKind, Outcome, count};
use toolgate::config::Secret;
use toolgate::store::{StorageSettings, Store};

fn pg_host() -> String {
    std::env::var("TOOLGATE_TEST_PG_HOST").unwrap_or_else(|_| "127.0.0.1:5432".into())
}

fn record(i: usize) -> AuditRecord {
    let args = json!({"a": i, "b": "some text argument", "password": "x"});
    AuditRecord::new(EventKind::ToolCall, Outcome::Ok)
        .with_tool("calculate_sum", &args)
        .with_request_id(format!("req-{i}"))
        .with_client_ip(std::net::IpAddr::from([127, 0, 0, 1]))
        .with_timing(Duration::from_micros(300), Some(120))
}

/// A database of its own (Postgres) or a fresh directory (SQLite); removed on drop.
struct Target {
    dir: PathBuf,
    pg_db: Option<String>,
}

impl Target {
    async fn create(backend: &str) -> anyhow::Result<Self> {
        let dir = std::env::temp_dir().join(format!("toolgate-bench-{}", uuid::Uuid::now_v7().simple()));
        std::fs::create_dir_all(&dir)?;
        let pg_db = match backend {
            "sqlite" => None,
            "postgres" => {
                let name = format!("toolgate_bench_{}", uuid::Uuid::now_v7().simple());
                let mut admin = sqlx::PgConnection::connect(&format!("postgres://postgres@{}/postgres", pg_host())).await?;
                sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut admin).await?;
                Some(name)
            }
            other => bail!("backend is sqlite or postgres, not {other}"),
        };
        Ok(Self { dir, pg_db })
    }

    fn storage(&self) -> StorageSettings {
        let url = self.pg_db.as_ref().map(|db| Secret::new(format!("postgres://postgres@{}/{db}", pg_host())));
        StorageSettings { url, data_dir: self.dir.clone(), ..StorageSettings::default() }
    }

    async fn remove(self) -> anyhow::Result<()> {
        if let Some(db) = &self.pg_db {
            let mut admin = sqlx::PgConnection::connect(&format!("postgres://postgres@{}/postgres", pg_host())).await?;
            sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"))).execute(&mut admin).await?;
        }
        std::fs::remove_dir_all(&self.dir)?;
        Ok(())
    }
}

fn settings(durability: Durability) -> AuditSettings {
    AuditSettings { durability, replica_id: Some("bench".into()), retention_days: 0, ..AuditSettings::default() }
}

/// Sustained rate: one producer as fast as it goes for `n` records, until all are in the
/// database. `queue` = "default" keeps `audit.queue_capacity` (the producer outruns the
/// writer, so the overflow path through the spool is part of the figure); "large" makes the
/// queue hold all `n`, which measures the writer's database path alone.
async fn throughput(backend: &str, n: usize, queue: &str, batch_size: Option<usize>) -> anyhow::Result<()> {
    let target = Target::create(backend).await?;
    let store = Store::connect(&target.storage()).await?;
    let mut s = settings(Durability::Batched);
    if let Some(b) = batch_size {
        s.batch_size = b;
    }
    if queue == "large" {
        s.queue_capacity = n;
    }
    let log = AuditLog::start(&s, store.clone())?;
    let records: Vec<AuditRecord> = (0..n).map(record).collect();
    let started = Instant::now();
    for r in records {
        log.record(r).await;
    }
    let queued = started.elapsed();
    // The writer's own counter, not COUNT(*): polling a growing table would steal the CPU
    // being measured.
    while log.records_written() < n as u64 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let total = started.elapsed();
    anyhow::ensure!(count(&store).await? == n as i64, "row count differs from records written");
    let stats = log.stats();
    log.shutdown(Duration::from_secs(10)).await;
    println!(
        "throughput {backend} batched, {queue} queue, batch_size {}: {n} records in {:.2} s = {:.0} records/s into the database (record() loop took {:.2} s; spooled on overflow {}, replayed {})",
        s.batch_size,
        total.as_secs_f64(),
        n as f64 / total.as_secs_f64(),
        queued.as_secs_f64(),
        stats.records_spooled,
        stats.records_replayed,
    );
    store.close().await;
    target.remove().await
}

/// Time spent inside `record()`, one caller, records paced 1 ms apart (a realistic request
/// path, not a saturated queue).
async fn latency(backend: &str, durability: &str, n: usize) -> anyhow::Result<()> {
    let mode = match durability {
        "batched" => Durability::Batched,
        "sync" => Durability::Sync,
        other => bail!("durability is batched or sync, not {other}"),
    };
    let target = Target::create(backend).await?;
    let store = Store::connect(&target.storage()).await?;
    let log = AuditLog::start(&settings(mode), store.clone())?;
    let mut samples = Vec::with_capacity(n);
    for i in 0..n {
        let r = record(i);
        let t = Instant::now();
        log.record(r).await;
        samples.push(t.elapsed());
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    log.shutdown(Duration::from_secs(10)).await;
    samples.sort();
    let pct = |p: f64| samples[((samples.len() as f64 - 1.0) * p) as usize].as_secs_f64() * 1e6;
    let mean = samples.iter().map(Duration::as_secs_f64).sum::<f64>() / samples.len() as f64 * 1e6;
    println!(
        "latency {backend} {durability}: {n} calls, record() mean {mean:.1} µs, p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
        pct(0.5),
        pct(0.99),
        pct(1.0)
    );
    store.close().await;
    target.remove().await
}

/// The child: records at `rate`/s for ever and prints `<id>` after each acknowledged record.
async fn crash_child(storage: StorageSettings, rate: u64) -> anyhow::Result<()> {
    let store = Store::connect(&storage).await?;
    let log = AuditLog::start(&settings(Durability::Batched), store)?;
    let mut out = std::io::stdout().lock();
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / rate));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let _ = writeln!(out, "ready");
    out.flush()?;
    for i in 0.. {
        tick.tick().await;
        let r = record(i);
        let id = r.id;
        log.record(r).await;
        writeln!(out, "{id}")?;
        out.flush()?;
    }
    Ok(())
}

/// Parent of `crash_child`: kill -9 after `seconds`, then count.
async fn crash(backend: &str, rate: u64, seconds: f64) -> anyhow::Result<()> {
    let target = Target::create(backend).await?;
    let storage = target.storage();
    // Migrate first so the child's start-up is the same as a server's restart.
    Store::connect(&storage).await?.close().await;
    let exe = std::env::current_exe()?;
    let mut child = std::process::Command::new(exe)
        .args(["crash-child", &storage.effective_url(), &target.dir.display().to_string(), &rate.to_string()])
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    let stdout = child.stdout.take().context("child stdout")?;
    let reader = std::thread::spawn(move || {
        let mut lines = std::io::BufReader::new(stdout).lines();
        let ready = lines.next();
        let started = Instant::now();
        let acked: Vec<String> = lines.map_while(Result::ok).collect();
        (ready.is_some(), started, acked)
    });
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    // SIGKILL: no destructor, no flush, no shutdown().
    child.kill()?;
    let killed_at = Instant::now();
    child.wait()?;
    let (ready, started, acked) = reader.join().map_err(|_| anyhow::anyhow!("reader thread"))?;
    anyhow::ensure!(ready, "child never started");
    let ran = killed_at.duration_since(started).as_secs_f64();

    let store = Store::connect(&storage).await?;
    let in_db: HashSet<String> = toolgate::audit::query(&store, &Default::default()).await?.into_iter().map(|r| r.id.to_string()).collect();
    let in_spool = spool_ids(&target.dir);
    let lost: Vec<&String> = acked.iter().filter(|id| !in_db.contains(*id) && !in_spool.contains(*id)).collect();
    let lost_ms = lost.len() as f64 * 1000.0 / rate as f64;
    println!(
        "crash {backend} batched at {rate}/s for {ran:.1} s: acknowledged {}, in database {}, in spool {}, lost {} (= {lost_ms:.0} ms of traffic at this rate); settings batch_size {} flush_interval_ms {}",
        acked.len(),
        in_db.len(),
        in_spool.len(),
        lost.len(),
        AuditSettings::default().batch_size,
        AuditSettings::default().flush_interval_ms,
    );
    if let (Some(first), Some(last)) = (lost.first(), acked.last()) {
        let first_lost = acked.iter().position(|id| id == *first).unwrap_or(0);
        println!(
            "  lost records are the last {} acknowledged (first lost at position {first_lost} of {}; last acked {last})",
            acked.len() - first_lost,
            acked.len()
        );
    }
    store.close().await;
    target.remove().await
}

fn spool_ids(dir: &Path) -> HashSet<String> {
    let mut ids = HashSet::new();
    for name in ["audit-spool.jsonl", "audit-spool.jsonl.replaying"] {
        if let Ok(text) = std::fs::read_to_string(dir.join(name)) {
            ids.extend(text.lines().filter_map(|l| serde_json::from_str::<AuditRecord>(l).ok()).map(|r| r.id.to_string()));
        }
    }
    ids
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).map(String::as_str);
    let num = |i: usize, default: u64| arg(i).map(str::parse).transpose().map(|v| v.unwrap_or(default));
    match arg(0) {
        Some("throughput") => {
            let batch = arg(4).map(str::parse).transpose()?;
            throughput(arg(1).unwrap_or("sqlite"), num(2, 200_000)? as usize, arg(3).unwrap_or("default"), batch).await
        }
        Some("latency") => latency(arg(1).unwrap_or("sqlite"), arg(2).unwrap_or("batched"), num(3, 5_000)? as usize).await,
        Some("crash") => crash(arg(1).unwrap_or("sqlite"), num(2, 2_000)?, arg(3).map(str::parse).transpose()?.unwrap_or(3.0)).await,
        Some("crash-child") => {
            let url = arg(1).context("url")?;
            let storage = StorageSettings {
                url: Some(Secret::new(url.to_owned())),
                data_dir: PathBuf::from(arg(2).context("data dir")?),
                ..StorageSettings::default()
            };
            crash_child(storage, num(3, 2_000)?).await
        }
        _ => bail!("usage: audit_bench throughput|latency|crash <sqlite|postgres> …"),
    }
}
