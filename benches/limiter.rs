//! The rate limiter's costs, measured (not tested): the Redis tier's added latency per
//! request on loopback, its throughput with 64 callers on one connection, and the cost of the
//! `Limiter::check` seam on the local path. Needs Redis (`TOOLGATE_TEST_REDIS_URL`, default
//! redis://127.0.0.1:6379); keys go under a random prefix and are deleted afterwards.
//!
//!     cargo bench --bench limiter

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use toolgate::config::Secret;
use toolgate::limits::{Backend, ClientKey, ClusterLimiter, LimitSettings, Limiter, LocalLimiter};

fn redis_url() -> String {
    std::env::var("TOOLGATE_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

fn unique_prefix() -> String {
    format!("toolgate-bench-{:016x}", rand::random::<u64>())
}

fn settings(prefix: &str) -> LimitSettings {
    let mut s = LimitSettings { backend: Backend::Redis, ..LimitSettings::default() };
    s.redis.url = Secret::new(redis_url());
    s.redis.key_prefix = prefix.to_owned();
    s.redis.timeout_ms = 2_000;
    s
}

async fn cluster(s: &LimitSettings) -> ClusterLimiter {
    ClusterLimiter::connect(s).await.expect("valid settings")
}

async fn cleanup(prefix: &str) {
    let client = redis::Client::open(redis_url()).expect("url");
    let mut conn = client.get_multiplexed_async_connection().await.expect("redis for cleanup");
    let keys: Vec<String> = redis::cmd("KEYS").arg(format!("{prefix}:*")).query_async(&mut conn).await.expect("keys");
    if !keys.is_empty() {
        let _: () = redis::cmd("DEL").arg(&keys).query_async(&mut conn).await.expect("del");
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    rt.block_on(async {
        bench_redis_check_latency().await;
        bench_local_seam_overhead().await;
    });
}

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration, Duration) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
    (at(0.50), at(0.99), at(0.999))
}

/// Added latency per request: the Redis tier on loopback, sequential checks.
async fn bench_redis_check_latency() {
    let prefix = unique_prefix();
    let mut s = settings(&prefix);
    (s.requests_per_minute, s.request_burst) = (6_000_000, 1_000_000);
    s.global_burst = 10_000_000;
    let a = cluster(&s).await;
    let local = LocalLimiter::new(&s).expect("valid");
    for n in 0..1_000u32 {
        let _ = a.check(&ClientKey::from_ip(IpAddr::from(n.to_be_bytes())), Some("echo")).await;
    }
    for (label, tool) in [("request", None), ("request + tool", Some("echo"))] {
        let mut samples = Vec::with_capacity(20_000);
        for n in 0..20_000u32 {
            let key = ClientKey::from_ip(IpAddr::from((n % 500).to_be_bytes()));
            let t = Instant::now();
            let _ = a.check(&key, tool).await;
            samples.push(t.elapsed());
        }
        let (p50, p99, p999) = percentiles(samples);
        println!("redis tier, {label}: p50 {p50:?} p99 {p99:?} p99.9 {p999:?}");
    }
    let mut samples = Vec::with_capacity(20_000);
    for n in 0..20_000u32 {
        let key = ClientKey::from_ip(IpAddr::from((n % 500).to_be_bytes()));
        let t = Instant::now();
        let _ = local.check_request(&key).and_then(|()| local.check_tool(&key, "echo"));
        samples.push(t.elapsed());
    }
    let (p50, p99, p999) = percentiles(samples);
    println!("local tier alone, request + tool: p50 {p50:?} p99 {p99:?} p99.9 {p999:?}");
    // Concurrency: 64 in flight on one multiplexed connection.
    let a = Arc::new(a);
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..64u32 {
        let a = a.clone();
        tasks.spawn(async move {
            for n in 0..1_000u32 {
                let _ = a.check(&ClientKey::from_ip(IpAddr::from((t * 1_000 + n).to_be_bytes())), None).await;
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    println!("redis tier, 64 concurrent callers: {:.0} checks/s", 64_000.0 / started.elapsed().as_secs_f64());
    cleanup(&prefix).await;
}

/// The seam's cost on the local path: the old synchronous calls vs `check()` through
/// `dyn Limiter` and `.await` on the `Ready` result.
async fn bench_local_seam_overhead() {
    let mut s = LimitSettings::default();
    (s.requests_per_minute, s.request_burst) = (u32::MAX / 2, u32::MAX / 2);
    (s.tool_units_per_minute, s.tool_burst) = (u32::MAX / 2, u32::MAX / 2);
    (s.global_per_second, s.global_burst) = (u32::MAX / 2, u32::MAX / 2);
    let local = LocalLimiter::new(&s).expect("valid");
    let dynamic: Arc<dyn Limiter> = Arc::new(LocalLimiter::new(&s).expect("valid"));
    const N: u32 = 2_000_000;
    let keys: Vec<ClientKey> = (0..1_000u32).map(|n| ClientKey::from_ip(IpAddr::from(n.to_be_bytes()))).collect();
    for round in 0..3 {
        let t = Instant::now();
        for n in 0..N {
            let key = &keys[(n % 1_000) as usize];
            let r = local.check_request(key).and_then(|()| local.check_tool(key, "echo"));
            std::hint::black_box(r).ok();
        }
        let direct = t.elapsed() / N;
        let t = Instant::now();
        for n in 0..N {
            let key = &keys[(n % 1_000) as usize];
            let r = dynamic.check(key, Some("echo")).await;
            std::hint::black_box(r).ok();
        }
        let seam = t.elapsed() / N;
        println!("round {round}: direct sync {direct:?}/check, dyn check().await {seam:?}/check");
    }
}
