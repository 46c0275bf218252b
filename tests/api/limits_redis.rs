//! `backend = "redis"` against a real Redis at 127.0.0.1:6379 (override with
//! `TOOLGATE_TEST_REDIS_URL`): the GCRA script's semantics, one quota across replicas (limiter
//! instances and real servers), the `on_error` policies with Redis unreachable or stalled,
//! recovery, and atomicity under concurrency. Each test writes under its own random key
//! prefix and deletes its keys at the end (they expire on their own anyway).
//!
//! Metric assertions read the process-wide recorder, so run these with nextest (one process
//! per test), as the rest of the suite.

use crate::common;

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::TestServer;
use futures_util::FutureExt as _;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use toolgate::config::{Secret, Settings};
use toolgate::limits::{
    Backend, Check, ClientKey, ClusterLimiter, LimitSettings, Limiter, LocalLimiter, OnError, Reason, Rejection, ToolLimit,
};

fn redis_url() -> String {
    std::env::var("TOOLGATE_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

fn unique_prefix() -> String {
    format!("toolgate-test-{:016x}", rand::random::<u64>())
}

/// Redis-backed settings under a fresh prefix; generous timeouts so a loaded test machine
/// does not turn a slow answer into a failure (the timeout tests set their own).
fn settings(prefix: &str) -> LimitSettings {
    let mut s = LimitSettings { backend: Backend::Redis, ..LimitSettings::default() };
    s.redis.url = Secret::new(redis_url());
    s.redis.key_prefix = prefix.to_owned();
    s.redis.timeout_ms = 2_000;
    s.redis.cooldown_ms = 100;
    s
}

async fn cluster(s: &LimitSettings) -> ClusterLimiter {
    ClusterLimiter::connect(s).await.expect("valid settings")
}

fn ip(s: &str) -> ClientKey {
    ClientKey::from_ip(s.parse::<IpAddr>().expect("ip"))
}

/// Deletes every key under `prefix`.
async fn cleanup(prefix: &str) {
    let client = redis::Client::open(redis_url()).expect("url");
    let mut conn = client.get_multiplexed_async_connection().await.expect("redis for cleanup");
    let keys: Vec<String> = redis::cmd("KEYS").arg(format!("{prefix}:*")).query_async(&mut conn).await.expect("keys");
    if !keys.is_empty() {
        let _: () = redis::cmd("DEL").arg(&keys).query_async(&mut conn).await.expect("del");
    }
}

/// A port nothing listens on (bound, then released).
async fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    listener.local_addr().expect("addr").port()
}

// ===== GCRA semantics =====

#[tokio::test]
async fn a_burst_is_admitted_then_redis_refuses_with_the_time_to_the_next_cell() {
    let prefix = unique_prefix();
    let mut s = settings(&prefix);
    (s.requests_per_minute, s.request_burst) = (60, 3);
    // Two replicas: the burst is spent through one, so the other's local tier is fresh and
    // the refusal can only come from Redis.
    let (a, b) = (cluster(&s).await, cluster(&s).await);
    let key = ip("192.0.2.1");
    for i in 0..3 {
        assert_eq!(a.check(&key, None).await, Ok(()), "request {i} of the burst");
    }
    let started = Instant::now();
    let r = b.check(&key, None).await.expect_err("the cluster burst is spent");
    assert_eq!(r.reason, Reason::Client);
    // One cell per second; at most the round trips since the burst have passed.
    assert!(r.retry_after <= Duration::from_secs(1), "{r:?}");
    assert!(r.retry_after >= Duration::from_millis(800), "{r:?}");
    assert!(a.backend_up() && b.backend_up());
    assert_eq!(a.backend_failures() + b.backend_failures(), 0);
    assert!(started.elapsed() < Duration::from_secs(1));
    cleanup(&prefix).await;
}

#[tokio::test]
async fn the_bucket_refills_at_the_configured_rate() {
    let prefix = unique_prefix();
    let mut s = settings(&prefix);
    // One cell per 100 ms, burst 2.
    (s.requests_per_minute, s.request_burst) = (600, 2);
    let (a, b) = (cluster(&s).await, cluster(&s).await);
    let key = ip("192.0.2.2");
    assert_eq!(a.check(&key, None).await, Ok(()));
    assert_eq!(a.check(&key, None).await, Ok(()));
    let wait = b.check(&key, None).await.expect_err("spent").retry_after;
    assert!(wait <= Duration::from_millis(100), "{wait:?}");
    tokio::time::sleep(wait + Duration::from_millis(5)).await;
    assert_eq!(b.check(&key, None).await, Ok(()), "one cell came back after retry_after");
    assert!(b.check(&key, None).await.is_err(), "and only one");
    // Idle for the whole bucket: full again, and the key has expired.
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(b.check(&key, None).await, Ok(()));
    assert_eq!(a.check(&key, None).await, Ok(()));
    cleanup(&prefix).await;
}

#[tokio::test]
async fn keys_expire_when_their_bucket_is_full_again() {
    let prefix = unique_prefix();
    let mut s = settings(&prefix);
    (s.requests_per_minute, s.request_burst) = (60, 5);
    let a = cluster(&s).await;
    let key = ip("192.0.2.3");
    assert_eq!(a.check(&key, None).await, Ok(()));
    let client = redis::Client::open(redis_url()).expect("url");
    let mut conn = client.get_multiplexed_async_connection().await.expect("redis");
    let name = format!("{prefix}:req:{{{}}}", key.shared_id());
    let ttl: i64 = redis::cmd("PTTL").arg(&name).query_async(&mut conn).await.expect("pttl");
    // One cell spent at one per second: full again within a second.
    assert!((1..=1_000).contains(&ttl), "{name}: {ttl} ms");
    cleanup(&prefix).await;
}

#[tokio::test]
async fn tool_costs_own_rates_and_the_shared_budget() {
    let prefix = unique_prefix();
    let mut s = settings(&prefix);
    s.request_burst = 100;
    (s.tool_units_per_minute, s.tool_burst) = (60, 10);
    s.tools.insert("heavy".into(), ToolLimit { per_minute: Some(60), burst: Some(6), cost: 3 });
    s.tools.insert("report".into(), ToolLimit { cost: 5, ..ToolLimit::default() });
    s.tools.insert("search".into(), ToolLimit { per_minute: Some(60), burst: Some(1), cost: 1 });
    let (a, b) = (cluster(&s).await, cluster(&s).await);
    let key = ip("192.0.2.4");

    // heavy: cost 3 of its own burst of 6 → two calls; a third needs 3 cells, 3 s away.
    assert_eq!(a.check(&key, Some("heavy")).await, Ok(()));
    assert_eq!(a.check(&key, Some("heavy")).await, Ok(()));
    let r = b.check(&key, Some("heavy")).await.expect_err("6 units spent cluster-wide");
    assert_eq!(r.reason, Reason::Tool);
    assert!(r.retry_after > Duration::from_millis(2_800) && r.retry_after <= Duration::from_secs(3), "{r:?}");

    // report: cost 5 from the shared budget of 10 → two calls; then echo (shared, cost 1)
    // is refused too, while tools with their own bucket are unaffected.
    assert_eq!(a.check(&key, Some("report")).await, Ok(()));
    assert_eq!(b.check(&key, Some("report")).await, Ok(()));
    assert_eq!(b.check(&key, Some("echo")).await.expect_err("shared budget spent").reason, Reason::Tool);
    assert_eq!(a.check(&key, Some("search")).await, Ok(()), "own bucket, untouched by the shared budget");
    assert_eq!(b.check(&key, Some("search")).await.map_err(|r| r.reason), Err(Reason::Tool), "own burst of 1");

    // Another client has its own buckets.
    assert_eq!(b.check(&ip("192.0.2.5"), Some("heavy")).await, Ok(()));
    cleanup(&prefix).await;
}

#[tokio::test]
async fn a_refused_request_charges_no_tool() {
    let prefix = unique_prefix();
    let mut s = settings(&prefix);
    (s.requests_per_minute, s.request_burst) = (1, 2);
    s.tools.insert("one".into(), ToolLimit { per_minute: Some(1), burst: Some(3), cost: 1 });
    let (a, b) = (cluster(&s).await, cluster(&s).await);
    let key = ip("192.0.2.6");
    assert_eq!(a.check(&key, Some("one")).await, Ok(()));
    assert_eq!(a.check(&key, Some("one")).await, Ok(()));
    assert_eq!(b.check(&key, Some("one")).await.map_err(|r| r.reason), Err(Reason::Client));
    // The tool bucket holds 3 and was charged twice: one call left for another path.
    let client = redis::Client::open(redis_url()).expect("url");
    let mut conn = client.get_multiplexed_async_connection().await.expect("redis");
    let tool_key = format!("{prefix}:tool:one:{{{}}}", key.shared_id());
    let tat: i64 = redis::cmd("GET").arg(&tool_key).query_async(&mut conn).await.expect("tool bucket exists");
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(&mut conn).await.expect("time");
    let ahead = tat - (secs * 1_000_000 + micros);
    // Two cells at one per minute: the TAT is ~120 s ahead, not 180 s.
    assert!((115_000_000..=120_000_000).contains(&ahead), "{ahead} µs");
    cleanup(&prefix).await;
}

#[tokio::test]
async fn tool_rules_from_definitions_reach_the_redis_tier_at_runtime() {
    let prefix = unique_prefix();
    let s = settings(&prefix);
    let (a, b) = (cluster(&s).await, cluster(&s).await);
    let key = ip("192.0.2.7");
    let rules: BTreeMap<String, ToolLimit> =
        [("fetch".to_owned(), ToolLimit { per_minute: Some(1), burst: Some(2), cost: 1 })].into_iter().collect();
    a.configure_tools(&rules);
    b.configure_tools(&rules);
    assert_eq!(a.check(&key, Some("fetch")).await, Ok(()));
    assert_eq!(a.check(&key, Some("fetch")).await, Ok(()));
    assert_eq!(b.check(&key, Some("fetch")).await.map_err(|r| r.reason), Err(Reason::Tool), "the definition's burst of 2");
    // The definition goes away: calls fall back to the shared budget (20 by default).
    a.configure_tools(&BTreeMap::new());
    b.configure_tools(&BTreeMap::new());
    assert_eq!(b.check(&key, Some("fetch")).await, Ok(()));
    cleanup(&prefix).await;
}

// ===== one quota across replicas =====

/// Sends `n` requests of one client round robin over `limiters`; returns how many passed.
async fn spread(limiters: &[Arc<dyn Limiter>], key: &ClientKey, n: usize) -> (usize, Vec<Rejection>) {
    let mut admitted = 0;
    let mut refused = Vec::new();
    for i in 0..n {
        match limiters[i % limiters.len()].check(key, None).await {
            Ok(()) => admitted += 1,
            Err(r) => refused.push(r),
        }
    }
    (admitted, refused)
}

#[tokio::test]
async fn three_replicas_share_one_quota_where_local_limiters_give_three() {
    let prefix = unique_prefix();
    let mut s = settings(&prefix);
    (s.requests_per_minute, s.request_burst) = (1, 10);
    let key = ip("198.51.100.1");

    let mut replicas: Vec<Arc<dyn Limiter>> = Vec::new();
    for _ in 0..3 {
        replicas.push(Arc::new(cluster(&s).await));
    }
    let (admitted, refused) = spread(&replicas, &key, 30).await;
    assert_eq!(admitted, 10, "exactly the burst, across all three");
    assert!(refused.iter().all(|r| r.reason == Reason::Client && r.retry_after > Duration::from_secs(50)), "{refused:?}");

    let local: Vec<Arc<dyn Limiter>> = (0..3).map(|_| Arc::new(LocalLimiter::new(&s).expect("valid")) as Arc<dyn Limiter>).collect();
    let (admitted, _) = spread(&local, &key, 30).await;
    assert_eq!(admitted, 30, "per-replica counting: three times the quota");
    cleanup(&prefix).await;
}

async fn servers(n: usize, adjust: impl Fn(&mut Settings) + Clone) -> Vec<TestServer> {
    let mut out = Vec::new();
    for _ in 0..n {
        let adjust = adjust.clone();
        out.push(TestServer::with(move |c| adjust(c)).await);
    }
    out
}

/// A stateless (2026-07-28) request: one charged request, no session.
async fn ping(s: &TestServer) -> reqwest::Response {
    s.modern(7, "server/discover", json!({}), json!({})).await
}

#[tokio::test]
async fn three_real_servers_share_one_quota_over_http() {
    let prefix = unique_prefix();
    let limits = settings(&prefix);
    let cluster = servers(3, move |c: &mut Settings| {
        c.limits = limits.clone();
        (c.limits.requests_per_minute, c.limits.request_burst) = (1, 10);
    })
    .await;
    let mut statuses = Vec::new();
    for i in 0..30 {
        statuses.push(ping(&cluster[i % 3]).await.status().as_u16());
    }
    assert_eq!(statuses.iter().filter(|&&c| c == 200).count(), 10, "{statuses:?}");
    assert!(statuses[..10].iter().all(|&c| c == 200), "{statuses:?}");
    let res = ping(&cluster[1]).await;
    assert_eq!(res.status(), 429);
    assert!(res.headers()["retry-after"].to_str().expect("ascii").parse::<u64>().expect("secs") > 50);
    let body: Value = res.json().await.expect("json");
    assert_eq!(body["error"]["data"]["limit"], "client");

    let local = servers(3, |c: &mut Settings| {
        c.limits.enabled = true;
        (c.limits.requests_per_minute, c.limits.request_burst) = (1, 10);
    })
    .await;
    let mut admitted = 0;
    for i in 0..30 {
        admitted += usize::from(ping(&local[i % 3]).await.status() == 200);
    }
    assert_eq!(admitted, 30, "with the local backend each server gives its own quota");
    cleanup(&prefix).await;
}

// ===== Redis unreachable, stalled, and back =====

#[tokio::test]
async fn unreachable_and_open_admits_within_the_local_limit() {
    let mut s = settings(&unique_prefix());
    s.redis.url = Secret::new(format!("redis://127.0.0.1:{}", closed_port().await));
    (s.requests_per_minute, s.request_burst) = (1, 3);
    let started = Instant::now();
    let a = cluster(&s).await;
    assert!(!a.backend_up(), "start-up found it down");
    let key = ip("203.0.113.1");
    for i in 0..3 {
        assert_eq!(a.check(&key, None).await, Ok(()), "request {i}: the local limit admits");
    }
    assert_eq!(a.check(&key, None).await.map_err(|r| r.reason), Err(Reason::Client), "and still refuses beyond it");
    assert!(started.elapsed() < Duration::from_secs(2), "a down Redis costs no waiting: {:?}", started.elapsed());
    // After the cooldown a check probes (and fails) again.
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(a.check(&ip("203.0.113.2"), None).await, Ok(()));
    assert!(a.backend_failures() >= 2, "start-up and the probe: {}", a.backend_failures());
}

#[tokio::test]
async fn unreachable_and_closed_refuses_with_503() {
    let mut s = settings(&unique_prefix());
    s.redis.url = Secret::new(format!("redis://127.0.0.1:{}", closed_port().await));
    s.redis.on_error = OnError::Closed;
    let a = cluster(&s).await;
    let r = a.check(&ip("203.0.113.3"), None).await.expect_err("fail closed");
    assert_eq!(r.reason, Reason::BackendUnavailable);
    assert_eq!(r.status(), 503);
    assert!(r.retry_after <= Duration::from_secs(1), "{r:?}");
    assert_eq!(r.jsonrpc_message(None)["error"]["data"]["limit"], "backend_unavailable");
}

#[tokio::test]
async fn a_server_whose_redis_is_down_answers_per_policy_and_says_so_in_metrics() {
    let port = closed_port().await;
    let closed = TestServer::with(move |c| {
        c.limits = settings(&unique_prefix());
        c.limits.redis.url = Secret::new(format!("redis://127.0.0.1:{port}"));
        c.limits.redis.on_error = OnError::Closed;
    })
    .await;
    let res = ping(&closed).await;
    assert_eq!(res.status(), 503, "started anyway, and refuses per on_error = closed");
    assert!(res.headers().contains_key("retry-after"));
    let body: Value = res.json().await.expect("json");
    assert_eq!(body["error"]["data"]["limit"], "backend_unavailable");

    let metrics = closed.client.get(closed.admin_url("/metrics")).send().await.expect("scrape").text().await.expect("text");
    assert!(metrics.lines().any(|l| l == "toolgate_rate_limit_backend_up 0"), "{metrics}");
    let errors: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("toolgate_rate_limit_backend_errors_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(errors >= 1.0, "{metrics}");
    assert!(metrics.contains("toolgate_rate_limit_rejections_total{reason=\"backend_unavailable\"} 1"), "{metrics}");

    let open = TestServer::with(move |c| {
        c.limits = settings(&unique_prefix());
        c.limits.redis.url = Secret::new(format!("redis://127.0.0.1:{port}"));
    })
    .await;
    assert_eq!(ping(&open).await.status(), 200, "on_error = open: the local limit decides");
}

/// A TCP proxy to Redis that can be stopped (every connection cut) and started again on the
/// same port: Redis going away and coming back.
struct Proxy {
    addr: SocketAddr,
    task: Option<JoinHandle<()>>,
}

impl Proxy {
    async fn start(addr: SocketAddr) -> Self {
        let listener = TcpListener::bind(addr).await.expect("bind the proxy port");
        let addr = listener.local_addr().expect("addr");
        let target = redis_url().trim_start_matches("redis://").trim_end_matches('/').to_owned();
        let task = tokio::spawn(async move {
            // Dropped with this task: aborts every connection, so clients see a reset.
            let mut conns = tokio::task::JoinSet::new();
            while let Ok((mut inbound, _)) = listener.accept().await {
                let target = target.clone();
                conns.spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Self { addr, task: Some(task) }
    }

    async fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }
}

/// Checks (fresh clients, so the local tier always admits) until `done` or 5 s.
async fn until(lim: &ClusterLimiter, done: impl Fn(&ClusterLimiter) -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut n = 0u32;
    while Instant::now() < deadline {
        n += 1;
        let _ = lim.check(&ClientKey::from_ip(IpAddr::from([10, 9, (n >> 8) as u8, n as u8])), None).await;
        if done(lim) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test]
async fn redis_going_away_and_coming_back() {
    let prefix = unique_prefix();
    let port = closed_port().await;
    let mut s = settings(&prefix);
    s.redis.url = Secret::new(format!("redis://127.0.0.1:{port}"));
    (s.requests_per_minute, s.request_burst) = (1, 2);
    let (a, b) = (cluster(&s).await, cluster(&s).await);
    assert!(!a.backend_up());

    let mut proxy = Proxy::start(SocketAddr::from(([127, 0, 0, 1], port))).await;
    assert!(until(&a, ClusterLimiter::backend_up).await, "reconnects after the cooldown");
    assert!(until(&b, ClusterLimiter::backend_up).await);
    let key = ip("203.0.113.9");
    assert_eq!(a.check(&key, None).await, Ok(()));
    assert_eq!(a.check(&key, None).await, Ok(()));
    assert_eq!(b.check(&key, None).await.map_err(|r| r.reason), Err(Reason::Client), "the quota is cluster-wide again");

    proxy.stop().await;
    let failures = b.backend_failures();
    assert!(until(&b, |l| !l.backend_up()).await, "notices the cut");
    assert!(b.backend_failures() > failures);
    assert_eq!(b.check(&ip("203.0.113.10"), None).await, Ok(()), "open again: local limits decide");

    let _proxy = Proxy::start(proxy.addr).await;
    assert!(until(&b, ClusterLimiter::backend_up).await, "and comes back once more");
    cleanup(&prefix).await;
}

#[tokio::test]
async fn a_stalled_redis_cannot_stall_requests() {
    // Accepts connections and never answers.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let _hole = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((conn, _)) = listener.accept().await {
            held.push(conn);
        }
    });
    let mut s = settings(&unique_prefix());
    s.redis.url = Secret::new(format!("redis://127.0.0.1:{port}"));
    s.redis.timeout_ms = 30;
    s.redis.connect_timeout_ms = 200;
    s.redis.cooldown_ms = 300;
    let a = cluster(&s).await;
    assert!(!a.backend_up(), "start-up gave up after connect_timeout_ms");
    // After the cooldown one check probes: it waits for the per-check timeout, no longer.
    tokio::time::sleep(Duration::from_millis(350)).await;
    let failures = a.backend_failures();
    let started = Instant::now();
    assert_eq!(a.check(&ip("203.0.113.20"), None).await, Ok(()), "open: admitted");
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(30) && waited < Duration::from_millis(250), "{waited:?}");
    assert_eq!(a.backend_failures(), failures + 1, "the timeout counts as a failure");
    // Within the new cooldown nothing waits on Redis at all.
    let started = Instant::now();
    for n in 0..100u8 {
        assert_eq!(a.check(&ClientKey::from_ip(IpAddr::from([10, 8, 0, n])), None).await, Ok(()));
    }
    assert!(started.elapsed() < Duration::from_millis(100), "{:?}", started.elapsed());
    assert_eq!(a.backend_failures(), failures + 1);
}

// ===== atomicity =====

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_checks_on_four_replicas_never_admit_more_than_the_burst() {
    let prefix = unique_prefix();
    let mut s = settings(&prefix);
    (s.requests_per_minute, s.request_burst) = (1, 50);
    let mut replicas = Vec::new();
    for _ in 0..4 {
        replicas.push(Arc::new(cluster(&s).await));
    }
    let key = ip("192.0.2.50");
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..200 {
        let lim = replicas[i % 4].clone();
        tasks.spawn(async move { lim.check(&key, None).await.is_ok() });
    }
    let mut admitted = 0;
    while let Some(ok) = tasks.join_next().await {
        admitted += usize::from(ok.expect("task"));
    }
    // Each local tier admits its 50 (full quota), so Redis alone decides: exactly 50.
    assert_eq!(admitted, 50);
    cleanup(&prefix).await;
}

// ===== settings and start-up =====

#[tokio::test]
async fn a_bad_url_stops_start_up_without_echoing_the_password() {
    let mut s = settings(&unique_prefix());
    s.redis.url = Secret::new("redis://:hunter2@127.0.0.1:notaport".into());
    let err = ClusterLimiter::connect(&s).await.expect_err("bad url");
    assert!(err.contains("limits.redis.url") && !err.contains("hunter2"), "{err}");
    s.redis.url = Secret::new("http://127.0.0.1:6379".into());
    assert!(ClusterLimiter::connect(&s).await.expect_err("not redis").contains("limits.redis.url"));

    let mut settings = Settings::default();
    settings.auth.mode = toolgate::auth::settings::AuthMode::Off;
    settings.limits = s;
    let dir = tempfile::tempdir().expect("dir");
    settings.storage.data_dir = dir.path().to_owned();
    let err = toolgate::app::AppState::new(settings).await.expect_err("start-up refuses");
    assert!(format!("{err:#}").contains("limits.redis.url"), "{err:#}");
}

#[tokio::test]
async fn a_tls_url_sets_up_tls() {
    // The test Redis speaks plain TCP, so the handshake fails: what matters is that the TLS
    // stack (rustls, its crypto provider) is linked and set up without a panic.
    let mut s = settings(&unique_prefix());
    s.redis.url = Secret::new(redis_url().replacen("redis://", "rediss://", 1));
    s.redis.connect_timeout_ms = 300;
    let a = cluster(&s).await;
    assert!(!a.backend_up());
    assert_eq!(a.check(&ip("192.0.2.77"), None).await, Ok(()), "open: admitted");
}

#[test]
fn the_toml_form() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.toml");
    std::fs::write(
        &path,
        "[limits]\nbackend = \"redis\"\n[limits.redis]\nurl = \"redis://:pw@redis.internal:6379/2\"\nkey_prefix = \"tg-prod\"\n\
         timeout_ms = 25\non_error = \"closed\"\nconnections = 2\n",
    )
    .expect("write");
    let s = Settings::load(Some(&path)).expect("loads");
    assert_eq!(s.limits.backend, Backend::Redis);
    assert_eq!(s.limits.redis.url.expose(), "redis://:pw@redis.internal:6379/2");
    assert!(!format!("{:?}", s.limits).contains("pw@"), "the URL is a secret");
    assert_eq!((s.limits.redis.timeout_ms, s.limits.redis.on_error, s.limits.redis.connections), (25, OnError::Closed, 2));
    assert_eq!(s.limits.redis.cooldown_ms, 1_000, "unset keys keep their defaults");

    std::fs::write(&path, "[limits]\nbackend = \"memcached\"\n").expect("write");
    assert!(Settings::load(Some(&path)).is_err());
    std::fs::write(&path, "[limits]\nbackend = \"redis\"\n[limits.redis]\nkey_prefix = \"a{b}\"\n").expect("write");
    let err = format!("{:#}", anyhow::Error::from(Settings::load(Some(&path)).expect_err("braces")));
    assert!(err.contains("key_prefix"), "{err}");
}

#[test]
fn the_environment_form() {
    // The source `Settings::load` builds, fed a map (tests must not mutate the environment).
    let vars: std::collections::HashMap<String, String> = [
        ("TOOLGATE__LIMITS__BACKEND", "redis"),
        ("TOOLGATE__LIMITS__REDIS__URL", "rediss://default:s3cret@cache.example:6380"),
        ("TOOLGATE__LIMITS__REDIS__KEY_PREFIX", "tg"),
        ("TOOLGATE__LIMITS__REDIS__ON_ERROR", "closed"),
        ("TOOLGATE__LIMITS__REDIS__TIMEOUT_MS", "20"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let env = config::Environment::with_prefix("TOOLGATE").prefix_separator("__").separator("__").try_parsing(true).source(Some(vars));
    let s: Settings = config::Config::builder().add_source(env).build().expect("builds").try_deserialize().expect("deserializes");
    assert!(s.validate().is_ok(), "rediss:// (TLS) is accepted");
    let r = &s.limits.redis;
    assert_eq!((s.limits.backend, r.on_error, r.timeout_ms, r.key_prefix.as_str()), (Backend::Redis, OnError::Closed, 20, "tg"));
    assert_eq!(r.url.expose(), "rediss://default:s3cret@cache.example:6380");
}

#[test]
fn the_local_limiter_decides_inline() {
    let lim: Arc<dyn Limiter> = Arc::new(LocalLimiter::new(&LimitSettings::default()).expect("valid"));
    let check = lim.check(&ip("192.0.2.99"), Some("echo"));
    assert!(matches!(check, Check::Ready(Ok(()))), "{check:?}");
    assert_eq!(check.now_or_never(), Some(Ok(())));
}
