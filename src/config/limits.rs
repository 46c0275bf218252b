//! The `[limits]` settings: every rate with a default that is safe to run with, and the
//! checks that refuse a combination which could never admit a request.

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::time::Duration;

use governor::Quota;
use serde::{Deserialize, Serialize};

use crate::config::Secret;

/// Rate limits. Per-client limits are keyed on the authenticated principal (issuer, subject,
/// client id), or on the client IP when authentication is off; never on a session.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitSettings {
    /// Off: every check passes (for deployments whose gateway already limits).
    pub enabled: bool,
    /// Sustained MCP requests (JSON-RPC messages) per client per minute.
    pub requests_per_minute: u32,
    /// Requests a client may send at once after being idle.
    pub request_burst: u32,
    /// Sustained tool cost units per client per minute, shared by every tool that has no
    /// rate of its own. A call consumes the tool's `cost` (1 unless configured).
    pub tool_units_per_minute: u32,
    /// Tool cost units a client may spend at once.
    pub tool_burst: u32,
    /// Per-tool rules, `[limits.tools.<name>]`.
    pub tools: BTreeMap<String, ToolLimit>,
    /// Sustained requests per second across all clients together (protects the process).
    pub global_per_second: u32,
    pub global_burst: u32,
    /// Failed authentication attempts per client IP per minute; beyond it the IP is refused
    /// before its token is even verified.
    pub auth_failures_per_minute: u32,
    pub auth_failure_burst: u32,
    /// Most distinct keys tracked per limiter table, so memory stays bounded under a flood of
    /// identities. Beyond it, new clients share one overflow bucket; new addresses in the
    /// auth-failure table go uncounted instead (see `LocalLimiter`).
    pub max_keys: usize,
    /// How often idle keys are dropped and table memory returned.
    pub housekeeping_secs: u64,
    /// Where the per-client and per-tool quotas are counted: `local` (each replica on its
    /// own) or `redis` (cluster-wide, with the local limiter in front; see `ClusterLimiter`).
    pub backend: Backend,
    /// `[limits.redis]`, used when `backend = "redis"`.
    pub redis: RedisSettings,
}

/// `limits.backend`.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// Per replica: with N replicas a client gets up to N times each limit.
    #[default]
    Local,
    /// Cluster-wide quotas in Redis, with the per-replica limiter as a cheap first line.
    Redis,
}

/// `limits.redis.on_error`: what a check does when Redis fails or is too slow to answer.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum OnError {
    /// Admit what the local (per-replica) limits admit: a client may get up to N times its
    /// quota across N replicas while Redis is down, but the service stays up.
    #[default]
    Open,
    /// Refuse with 503 and `Retry-After` (`data.limit = "backend_unavailable"`).
    Closed,
}

/// `[limits.redis]`: the shared store of `backend = "redis"`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct RedisSettings {
    /// `redis://[user:password@]host:port[/db]`, `rediss://` for TLS. A secret: it may carry
    /// a password, so it is never logged.
    pub url: Secret,
    /// Prefix of every key this server writes; replicas that share quotas share the prefix.
    pub key_prefix: String,
    /// Longest a request waits for Redis before the check counts as failed (`on_error`).
    pub timeout_ms: u64,
    /// Longest one connection attempt may take.
    pub connect_timeout_ms: u64,
    /// After a failure, how long checks skip Redis (deciding by `on_error` at once) before
    /// one request probes it again: a down Redis costs nothing per request.
    pub cooldown_ms: u64,
    pub on_error: OnError,
    /// Multiplexed connections, used round robin. Each one pipelines every concurrent check;
    /// more than one only helps past ~100k checks per second per replica.
    pub connections: usize,
}

impl Default for RedisSettings {
    fn default() -> Self {
        Self {
            url: Secret::new("redis://127.0.0.1:6379".into()),
            key_prefix: "toolgate".into(),
            timeout_ms: 50,
            connect_timeout_ms: 1_000,
            cooldown_ms: 1_000,
            on_error: OnError::Open,
            connections: 1,
        }
    }
}

impl RedisSettings {
    /// Refuses settings that cannot work. The URL is parsed here, so a typo stops start-up;
    /// the message never repeats the URL (it may carry a password).
    pub fn validate(&self) -> Result<(), String> {
        use redis::IntoConnectionInfo as _;
        self.url.expose().into_connection_info().map_err(|e| {
            format!("limits.redis.url is not a valid Redis URL (redis://[user:password@]host:port[/db], rediss:// for TLS): {e}")
        })?;
        let prefix_ok = !self.key_prefix.is_empty()
            && self.key_prefix.len() <= 64
            && self.key_prefix.bytes().all(|b| b.is_ascii_graphic() && !matches!(b, b'{' | b'}'));
        if !prefix_ok {
            return Err("limits.redis.key_prefix must be 1 to 64 printable ASCII characters without braces".into());
        }
        if !(1..=10_000).contains(&self.timeout_ms) {
            return Err("limits.redis.timeout_ms must be between 1 and 10000".into());
        }
        if self.connect_timeout_ms == 0 || self.cooldown_ms == 0 {
            return Err("limits.redis.connect_timeout_ms and limits.redis.cooldown_ms must be at least 1".into());
        }
        if !(1..=64).contains(&self.connections) {
            return Err("limits.redis.connections must be between 1 and 64".into());
        }
        Ok(())
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    pub fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.connect_timeout_ms)
    }

    pub fn cooldown(&self) -> Duration {
        Duration::from_millis(self.cooldown_ms)
    }
}

impl Default for LimitSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            requests_per_minute: 600,
            request_burst: 100,
            tool_units_per_minute: 120,
            tool_burst: 20,
            tools: BTreeMap::new(),
            // A ceiling that protects a replica without throttling it in normal use (one
            // replica measured ~65k tools/call per second on one core).
            global_per_second: 20_000,
            global_burst: 40_000,
            auth_failures_per_minute: 10,
            auth_failure_burst: 5,
            max_keys: 100_000,
            housekeeping_secs: 60,
            backend: Backend::Local,
            redis: RedisSettings::default(),
        }
    }
}

/// `[limits.tools.<name>]`: a tool's own rate (both fields or neither) and its cost.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct ToolLimit {
    /// Sustained cost units per client per minute for this tool alone. Unset: the tool spends
    /// from the shared `tool_units_per_minute` budget.
    pub per_minute: Option<u32>,
    pub burst: Option<u32>,
    /// Cost units one call consumes; must fit in the burst of the bucket it is charged to.
    pub cost: u32,
}

impl Default for ToolLimit {
    fn default() -> Self {
        Self { per_minute: None, burst: None, cost: 1 }
    }
}

impl LimitSettings {
    /// Refuses settings that cannot work, naming the key. Zero rates are refused rather than
    /// read as "unlimited": use `enabled = false` to switch limiting off.
    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            ("limits.requests_per_minute", self.requests_per_minute),
            ("limits.request_burst", self.request_burst),
            ("limits.tool_units_per_minute", self.tool_units_per_minute),
            ("limits.tool_burst", self.tool_burst),
            ("limits.global_per_second", self.global_per_second),
            ("limits.global_burst", self.global_burst),
            ("limits.auth_failures_per_minute", self.auth_failures_per_minute),
            ("limits.auth_failure_burst", self.auth_failure_burst),
        ];
        if let Some((key, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(format!("{key} must be at least 1 (set limits.enabled = false to switch limiting off)"));
        }
        if self.max_keys == 0 || self.housekeeping_secs == 0 {
            return Err("limits.max_keys and limits.housekeeping_secs must be at least 1".into());
        }
        for (name, tool) in &self.tools {
            self.validate_tool(&format!("limits.tools.{name}"), tool)?;
        }
        if self.backend == Backend::Redis {
            self.redis.validate()?;
        }
        Ok(())
    }

    /// Checks one tool's rule (from `[limits.tools]` or a tool definition); `key` names it
    /// in the message.
    pub fn validate_tool(&self, key: &str, tool: &ToolLimit) -> Result<(), String> {
        if tool.cost == 0 {
            return Err(format!("{key}.cost must be at least 1"));
        }
        let burst = match (tool.per_minute, tool.burst) {
            (Some(0), _) | (_, Some(0)) => return Err(format!("{key}: per_minute and burst must be at least 1")),
            (Some(_), Some(burst)) => burst,
            (None, None) => self.tool_burst,
            _ => return Err(format!("{key}: set both per_minute and burst, or neither")),
        };
        // A call costing more than the bucket holds could never pass (governor reports
        // InsufficientCapacity); refuse it here instead of failing every call.
        if tool.cost > burst {
            return Err(format!("{key}.cost ({}) exceeds the burst it is charged to ({burst})", tool.cost));
        }
        Ok(())
    }

    pub fn housekeeping_interval(&self) -> Duration {
        Duration::from_secs(self.housekeeping_secs)
    }

    pub(crate) fn request_quota(&self) -> Quota {
        Quota::per_minute(nz(self.requests_per_minute)).allow_burst(nz(self.request_burst))
    }

    pub(crate) fn shared_tool_quota(&self) -> Quota {
        Quota::per_minute(nz(self.tool_units_per_minute)).allow_burst(nz(self.tool_burst))
    }

    pub(crate) fn global_quota(&self) -> Quota {
        Quota::per_second(nz(self.global_per_second)).allow_burst(nz(self.global_burst))
    }

    pub(crate) fn auth_failure_quota(&self) -> Quota {
        Quota::per_minute(nz(self.auth_failures_per_minute)).allow_burst(nz(self.auth_failure_burst))
    }
}

impl ToolLimit {
    /// The tool's own quota, when it has one.
    pub(crate) fn own_quota(&self) -> Option<Quota> {
        match (self.per_minute, self.burst) {
            (Some(rate), Some(burst)) => Some(Quota::per_minute(nz(rate)).allow_burst(nz(burst))),
            _ => None,
        }
    }
}

/// Zero is refused by `validate`; clamping keeps construction total without a panic path.
pub(crate) fn nz(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN)
}
