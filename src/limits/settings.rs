//! The `[limits]` settings: every rate with a default that is safe to run with, and the
//! checks that refuse a combination which could never admit a request.

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::time::Duration;

use governor::Quota;
use serde::Deserialize;

/// Rate limits. Per-client limits are keyed on the authenticated principal (issuer, subject,
/// client id), or on the client IP when authentication is off; never on a session.
#[derive(Clone, Debug, Deserialize)]
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
        }
    }
}

/// `[limits.tools.<name>]`: a tool's own rate (both fields or neither) and its cost.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
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
