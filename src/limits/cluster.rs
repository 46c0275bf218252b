//! [`ClusterLimiter`]: per-client quotas that hold across every replica, in two tiers.
//!
//! 1. The replica's own [`LocalLimiter`], configured with the **full** per-client quotas,
//!    decides first, synchronously. It can only refuse what Redis would refuse too: a replica
//!    sees a subset of the client's traffic, so its bucket is never emptier than the cluster's
//!    one (up to clock skew between the replica and Redis, well under a millisecond of
//!    refill). Dividing its quotas by the replica count instead would refuse clients that an
//!    uneven load balancer happens to pin to one replica. Its refusals cost no round trip, so
//!    a client hammering one replica is turned away at in-process cost.
//! 2. Redis then decides the cluster-wide quota (one EVALSHA charging the request bucket and,
//!    for `tools/call`, the tool's bucket) — see [`RedisTier`].
//!
//! A request refused by Redis has still been charged locally (governor cannot refund). That
//! never halves anything: the local bucket refills at the full rate, and while the client is
//! within its cluster quota each replica sees only its share of it.
//!
//! What stays per replica, on purpose:
//! - The global ceiling (`global_per_second`) protects one process's capacity, which does not
//!   change with the replica count, and a single cluster-wide key would put every request of
//!   the cluster on one Redis key.
//! - Failed authentications per address: the check runs before every token verification, so
//!   a cluster-wide one would add a round trip to every request; it exists to keep each
//!   replica's verification work bounded (per-replica by nature), and guessing a token is
//!   hopeless at N times ten attempts a minute as much as at ten.
//!
//! Redis keys (the client part in braces: one Redis Cluster hash slot per client, so the
//! script's keys always share a slot): `<prefix>:req:{<client>}`,
//! `<prefix>:tool:<tool>:{<client>}` for tools with their own rate, and
//! `<prefix>:shared_tools:{<client>}`, where `<client>` is [`ClientKey::shared_id`].

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use governor::Quota;

use super::key::ClientKey;
use super::local::LocalLimiter;
use super::redis::{Bucket, RedisTier};
use super::rejection::{Reason, Rejection};
use super::{Check, Limiter};
use crate::config::limits::{LimitSettings, ToolLimit};

/// The `backend = "redis"` limiter: [`LocalLimiter`] in front, Redis behind.
pub struct ClusterLimiter {
    enabled: bool,
    local: LocalLimiter,
    redis: Arc<RedisTier>,
    request_quota: Quota,
    shared_tool_quota: Quota,
}

impl std::fmt::Debug for ClusterLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterLimiter").field("redis", &self.redis).finish_non_exhaustive()
    }
}

impl ClusterLimiter {
    /// Validates the settings, builds the local tier and connects to Redis. An unreachable
    /// Redis does not fail this (start-up logs it and `on_error` applies until it answers);
    /// invalid settings, a bad URL among them, do. Must be called within a tokio runtime.
    pub async fn connect(settings: &LimitSettings) -> Result<Self, String> {
        let local = LocalLimiter::new(settings)?;
        let redis = Arc::new(RedisTier::connect(&settings.redis).await?);
        Ok(Self {
            enabled: settings.enabled,
            local,
            redis,
            request_quota: settings.request_quota(),
            shared_tool_quota: settings.shared_tool_quota(),
        })
    }

    /// Whether the last check reached Redis (the `toolgate_rate_limit_backend_up` gauge).
    pub fn backend_up(&self) -> bool {
        self.redis.is_up()
    }

    /// Checks that failed or timed out in Redis since start (the sum of
    /// `toolgate_rate_limit_backend_errors_total`).
    pub fn backend_failures(&self) -> u64 {
        self.redis.failures()
    }

    fn bucket(&self, kind: &str, id: &str, quota: Quota, cost: u32, reason: Reason) -> Bucket {
        Bucket {
            key: format!("{}:{kind}:{{{id}}}", self.redis.prefix()),
            interval: quota.replenish_interval(),
            burst: quota.burst_size().get(),
            cost,
            reason,
        }
    }
}

impl Limiter for ClusterLimiter {
    fn check(&self, key: &ClientKey, tool: Option<&str>) -> Check {
        if !self.enabled {
            return Check::Ready(Ok(()));
        }
        if let Err(rejection) = self.local.check_request(key) {
            return Check::Ready(Err(rejection));
        }
        if let Some(tool) = tool
            && let Err(rejection) = self.local.check_tool(key, tool)
        {
            return Check::Ready(Err(rejection));
        }
        let id = key.shared_id();
        let mut buckets = Vec::with_capacity(2);
        buckets.push(self.bucket("req", &id, self.request_quota, 1, Reason::Client));
        if let Some(tool) = tool {
            // The rule the local tier just applied (tool definitions change it at runtime).
            let (own, cost) = self.local.tool_charge(tool);
            buckets.push(match own {
                Some(quota) => self.bucket(&format!("tool:{tool}"), &id, quota, cost.get(), Reason::Tool),
                None => self.bucket("shared_tools", &id, self.shared_tool_quota, cost.get(), Reason::Tool),
            });
        }
        Check::Pending(Box::pin(self.redis.clone().charge(buckets)))
    }

    fn check_auth_failure_allowed(&self, ip: IpAddr) -> Result<(), Rejection> {
        self.local.check_auth_failure_allowed(ip)
    }

    fn record_auth_failure(&self, ip: IpAddr) {
        self.local.record_auth_failure(ip);
    }

    /// The local tier's tables; Redis keys expire on their own once their bucket is full.
    fn housekeep(&self) {
        self.local.housekeep();
    }

    fn tracked_keys(&self) -> usize {
        self.local.tracked_keys()
    }

    /// Both tiers read the same rules: the Redis tier asks the local one per check.
    fn configure_tools(&self, from_definitions: &BTreeMap<String, ToolLimit>) {
        self.local.configure_tools(from_definitions);
    }
}
