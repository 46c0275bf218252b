//! [`RedisTier`]: cluster-wide GCRA buckets in Redis, one atomic Lua script per check.
//!
//! The script is the algorithm governor runs in process (see `LocalLimiter`), with Redis's
//! own clock (`TIME`), so replicas whose clocks disagree still agree on every bucket. A bucket
//! is one string key holding its theoretical arrival time (TAT) in microseconds, expiring when
//! the bucket is full again: an idle client costs Redis nothing, and no housekeeping is needed.
//!
//! Failure handling lives here too: a per-check timeout, a circuit breaker that skips Redis for
//! `cooldown_ms` after a failure and then lets a single request probe it, the `on_error`
//! policy, and the `toolgate_rate_limit_backend_*` metrics.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use metrics::{Counter, Gauge};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, Script};

use super::rejection::{Reason, Rejection};
use crate::config::limits::{OnError, RedisSettings};

pub use crate::metrics::{RATE_LIMIT_BACKEND_ERRORS as BACKEND_ERRORS, RATE_LIMIT_BACKEND_UP as BACKEND_UP};

/// Charges each bucket in order; the first refusal stops, and buckets before it stay charged,
/// exactly as the local limiter charges a request before its tool call.
///
/// `KEYS[i]` is a bucket; `ARGV` holds three integers per bucket: the emission interval `t`
/// in microseconds (time for one cell to come back), the burst, and the cost `n`. GCRA with
/// tolerance `tau = t * (burst - 1)`: a call is admitted iff `now >= tat + t*(n-1) - tau`, and
/// then `tat = max(tat, now) + t*n`. Returns `{1, 0, 0}` when all were admitted, else
/// `{0, wait_us, i}` for the refusing bucket. `TIME` before a write needs effect replication,
/// the default since Redis 5 (and the only mode since 7).
const GCRA: &str = r"
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000000 + tonumber(now_parts[2])
for i, key in ipairs(KEYS) do
  local t = tonumber(ARGV[3 * i - 2])
  local burst = tonumber(ARGV[3 * i - 1])
  local n = tonumber(ARGV[3 * i])
  local tat = tonumber(redis.call('GET', key)) or now
  if tat < now then tat = now end
  local earliest = tat + t * (n - 1) - t * (burst - 1)
  if now < earliest then
    return {0, earliest - now, i}
  end
  local next_tat = tat + t * n
  -- %.0f: integers beyond 1e14 would otherwise be written in exponent form and lose digits.
  redis.call('SET', key, string.format('%.0f', next_tat), 'PX', math.ceil((next_tat - now) / 1000))
end
return {1, 0, 0}
";

/// One bucket a check charges.
#[derive(Clone, Debug)]
pub(crate) struct Bucket {
    pub key: String,
    /// Time for one cell to come back.
    pub interval: Duration,
    pub burst: u32,
    pub cost: u32,
    /// Which limit a refusal by this bucket reports.
    pub reason: Reason,
}

/// The Redis tier: connections, the script, and what to do when Redis fails.
pub(crate) struct RedisTier {
    connections: Box<[ConnectionManager]>,
    next: AtomicUsize,
    script: Script,
    prefix: String,
    timeout: Duration,
    on_error: OnError,
    breaker: Breaker,
    metrics: Metrics,
    /// `host:port` of the server (never the URL, which may carry a password).
    addr: String,
}

impl std::fmt::Debug for RedisTier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisTier").field("addr", &self.addr).field("prefix", &self.prefix).finish_non_exhaustive()
    }
}

impl RedisTier {
    /// Connects (lazily: an unreachable Redis does not fail this) and probes once, so start-up
    /// says loudly whether the shared store answers. Fails only on settings that cannot work.
    /// Must be called within a tokio runtime.
    pub(crate) async fn connect(settings: &RedisSettings) -> Result<Self, String> {
        settings.validate()?;
        let client = Client::open(settings.url.expose()).map_err(|e| format!("limits.redis.url: {e}"))?;
        let addr = client.get_connection_info().addr().to_string();
        // Few, short reconnect attempts: the breaker paces retries, and a reconnect that backs
        // off for seconds would only delay recovery.
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(settings.connect_timeout()))
            .set_response_timeout(None)
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_millis(500));
        let connections = (0..settings.connections)
            .map(|_| ConnectionManager::new_lazy_with_config(client.clone(), config.clone()))
            .collect::<Result<Box<[_]>, _>>()
            .map_err(|e| format!("limits.redis: cannot set up the connection: {e}"))?;
        let tier = Self {
            connections,
            next: AtomicUsize::new(0),
            script: Script::new(GCRA),
            prefix: settings.key_prefix.clone(),
            timeout: settings.timeout(),
            on_error: settings.on_error,
            breaker: Breaker::new(settings.cooldown()),
            metrics: Metrics::new(),
            addr,
        };
        tier.probe_at_start(settings.connect_timeout()).await;
        Ok(tier)
    }

    /// Loads the script (so the first check is a plain EVALSHA) and reports the outcome.
    async fn probe_at_start(&self, within: Duration) {
        let mut conn = self.connection();
        let outcome = tokio::time::timeout(within, self.script.load_async(&mut conn)).await;
        match outcome {
            Ok(Ok(_)) => {
                self.metrics.up.set(1.0);
                tracing::info!(addr = %self.addr, prefix = %self.prefix, "rate limits: cluster-wide quotas in Redis");
            }
            Ok(Err(e)) => self.unreachable_at_start(Failure::Error, &e.to_string()),
            Err(_) => self.unreachable_at_start(Failure::Timeout, "no answer within limits.redis.connect_timeout_ms"),
        }
    }

    fn unreachable_at_start(&self, failure: Failure, error: &str) {
        self.record_failure(failure);
        match self.on_error {
            OnError::Open => tracing::error!(
                addr = %self.addr, error,
                "rate-limit store unreachable at start-up; starting anyway with per-replica limits only (limits.redis.on_error = \"open\") until it answers"
            ),
            OnError::Closed => tracing::error!(
                addr = %self.addr, error,
                "rate-limit store unreachable at start-up; starting anyway, refusing MCP requests with 503 (limits.redis.on_error = \"closed\") until it answers"
            ),
        }
    }

    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    fn connection(&self) -> ConnectionManager {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.connections.len();
        self.connections[i].clone()
    }

    /// Charges `buckets` atomically (one EVALSHA), or decides by `on_error` when Redis is
    /// failing, too slow, or in its cooldown.
    pub(crate) async fn charge(self: Arc<Self>, buckets: Vec<Bucket>) -> Result<(), Rejection> {
        let probe = match self.breaker.route() {
            Route::Redis => false,
            Route::Probe => true,
            Route::Skip => return self.fallback(),
        };
        let mut invocation = self.script.prepare_invoke();
        for b in &buckets {
            let interval_us = u64::try_from(b.interval.as_micros()).unwrap_or(u64::MAX).max(1);
            invocation.key(&b.key).arg(interval_us).arg(b.burst).arg(b.cost);
        }
        let mut conn = self.connection();
        let outcome = tokio::time::timeout(self.timeout, invocation.invoke_async::<(i64, i64, i64)>(&mut conn)).await;
        match outcome {
            Ok(Ok((1, _, _))) => {
                self.succeeded();
                Ok(())
            }
            Ok(Ok((_, wait_us, i))) => {
                self.succeeded();
                let reason = usize::try_from(i - 1).ok().and_then(|i| buckets.get(i)).map_or(Reason::Client, |b| b.reason);
                Err(Rejection::new(Duration::from_micros(u64::try_from(wait_us).unwrap_or(0)), reason))
            }
            Ok(Err(e)) => {
                self.failed(Failure::Error, &e.to_string(), probe);
                self.fallback()
            }
            Err(_) => {
                self.failed(Failure::Timeout, "no answer within limits.redis.timeout_ms", probe);
                self.fallback()
            }
        }
    }

    /// The decision without Redis: the local tier already admitted the request.
    fn fallback(&self) -> Result<(), Rejection> {
        match self.on_error {
            OnError::Open => Ok(()),
            OnError::Closed => Err(Rejection::new(self.breaker.remaining().max(Duration::from_secs(1)), Reason::BackendUnavailable)),
        }
    }

    fn succeeded(&self) {
        if self.breaker.close() {
            self.metrics.up.set(1.0);
            tracing::warn!(addr = %self.addr, "rate-limit store answers again: cluster-wide quotas restored");
        }
    }

    /// Counts a failure and opens the breaker; returns whether Redis was up before.
    fn record_failure(&self, failure: Failure) -> bool {
        match failure {
            Failure::Timeout => self.metrics.timeouts.increment(1),
            Failure::Error => self.metrics.errors.increment(1),
        }
        self.metrics.failures.fetch_add(1, Ordering::Relaxed);
        self.metrics.up.set(0.0);
        self.breaker.trip()
    }

    fn failed(&self, failure: Failure, error: &str, probe: bool) {
        let was_up = self.record_failure(failure);
        let policy = match self.on_error {
            OnError::Open => "admitting by per-replica limits only",
            OnError::Closed => "refusing MCP requests with 503",
        };
        // One warning when Redis goes away, then one per minute while it stays away.
        if was_up || self.metrics.should_remind() {
            tracing::warn!(addr = %self.addr, error, policy, "rate-limit store failed; retrying after limits.redis.cooldown_ms");
        } else {
            tracing::debug!(addr = %self.addr, error, probe, "rate-limit store still failing");
        }
    }

    /// Whether the last attempt reached Redis (what the `up` gauge shows).
    pub(crate) fn is_up(&self) -> bool {
        !self.breaker.is_open()
    }

    /// Failed or timed-out checks since start.
    pub(crate) fn failures(&self) -> u64 {
        self.metrics.failures.load(Ordering::Relaxed)
    }
}

#[derive(Clone, Copy)]
enum Failure {
    Timeout,
    Error,
}

/// Metric handles, resolved once.
struct Metrics {
    timeouts: Counter,
    errors: Counter,
    up: Gauge,
    failures: AtomicU64,
    /// When the last "still failing" warning was logged (µs on the breaker's clock).
    last_warning: AtomicU64,
    started: Instant,
}

impl Metrics {
    const REMIND_EVERY: Duration = Duration::from_secs(60);

    fn new() -> Self {
        Self {
            timeouts: metrics::counter!(BACKEND_ERRORS, "kind" => "timeout"),
            errors: metrics::counter!(BACKEND_ERRORS, "kind" => "error"),
            up: metrics::gauge!(BACKEND_UP),
            failures: AtomicU64::new(0),
            last_warning: AtomicU64::new(0),
            started: Instant::now(),
        }
    }

    fn should_remind(&self) -> bool {
        let now = micros(self.started.elapsed());
        let last = self.last_warning.load(Ordering::Relaxed);
        now.saturating_sub(last) >= micros(Self::REMIND_EVERY)
            && self.last_warning.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok()
    }
}

/// Where a check goes.
#[derive(Debug, PartialEq, Eq)]
enum Route {
    /// Redis is healthy.
    Redis,
    /// The cooldown is over: this check tries Redis while the others keep skipping it.
    Probe,
    /// In the cooldown, or another check is probing: decide by `on_error` now.
    Skip,
}

/// A circuit breaker on a monotonic clock. Closed (`open_until == 0`) every check goes to
/// Redis; a failure opens it for `cooldown`, during which checks skip Redis at the cost of two
/// atomic loads; then a single check probes, and its success closes it again.
struct Breaker {
    started: Instant,
    cooldown: Duration,
    /// 0 while closed, else the end of the cooldown in µs since `started` (always > 0).
    open_until: AtomicU64,
    probing: AtomicBool,
}

impl Breaker {
    fn new(cooldown: Duration) -> Self {
        Self { started: Instant::now(), cooldown, open_until: AtomicU64::new(0), probing: AtomicBool::new(false) }
    }

    fn now(&self) -> u64 {
        micros(self.started.elapsed())
    }

    fn route(&self) -> Route {
        let until = self.open_until.load(Ordering::Acquire);
        if until == 0 {
            return Route::Redis;
        }
        if self.now() < until {
            return Route::Skip;
        }
        if self.probing.compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed).is_ok() { Route::Probe } else { Route::Skip }
    }

    /// Opens (or re-opens) for one cooldown; returns whether it was closed before.
    fn trip(&self) -> bool {
        let until = (self.now() + micros(self.cooldown)).max(1);
        let before = self.open_until.swap(until, Ordering::AcqRel);
        self.probing.store(false, Ordering::Release);
        before == 0
    }

    /// Closes; returns whether it was open before.
    fn close(&self) -> bool {
        let before = self.open_until.swap(0, Ordering::AcqRel);
        self.probing.store(false, Ordering::Release);
        before != 0
    }

    fn is_open(&self) -> bool {
        self.open_until.load(Ordering::Acquire) != 0
    }

    /// Time left in the cooldown (zero when closed or over).
    fn remaining(&self) -> Duration {
        let until = self.open_until.load(Ordering::Acquire);
        Duration::from_micros(until.saturating_sub(self.now()))
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_breaker_skips_during_the_cooldown_then_lets_one_probe_through() {
        let breaker = Breaker::new(Duration::from_millis(30));
        assert_eq!(breaker.route(), Route::Redis);
        assert!(breaker.trip(), "closed before");
        assert!(!breaker.trip(), "a second failure re-opens without a new transition");
        assert_eq!(breaker.route(), Route::Skip);
        assert!(breaker.remaining() > Duration::ZERO);
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(breaker.route(), Route::Probe, "first check after the cooldown probes");
        assert_eq!(breaker.route(), Route::Skip, "only one probe at a time");
        assert!(!breaker.trip(), "the probe failed: another cooldown, still no transition");
        assert_eq!(breaker.route(), Route::Skip);
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(breaker.route(), Route::Probe);
        assert!(breaker.close(), "the probe succeeded");
        assert_eq!(breaker.route(), Route::Redis);
        assert!(!breaker.close());
    }
}
