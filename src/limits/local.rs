//! [`LocalLimiter`]: the in-process [`Limiter`], governor GCRA limiters over capped key tables.
//!
//! Counts are per replica: with N replicas behind a load balancer a client gets up to N times
//! each limit. For quotas that hold across replicas use `backend = "redis"`
//! ([`ClusterLimiter`](super::ClusterLimiter)), which keeps this limiter in front.

use std::collections::HashMap;

use arc_swap::ArcSwap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use governor::clock::{Clock, DefaultClock};
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{NotUntil, Quota, RateLimiter};

use super::key::ClientKey;
use super::rejection::{Reason, Rejection};
use super::store::{CappedStore, Lookup, Overflow};
use super::{Check, Limiter};
use crate::config::limits::{LimitSettings, ToolLimit, nz};

type Keyed<C> = RateLimiter<Lookup<ClientKey>, CappedStore<ClientKey>, C, NoOpMiddleware<<C as Clock>::Instant>>;
type Direct<C> = RateLimiter<NotKeyed, InMemoryState, C, NoOpMiddleware<<C as Clock>::Instant>>;

/// A keyed limiter plus what housekeeping reports about it.
struct Table<C: Clock> {
    name: String,
    cap: usize,
    quota: Quota,
    limiter: Keyed<C>,
    overflowed: Arc<AtomicU64>,
}

impl<C: Clock> Table<C> {
    fn new(name: impl Into<String>, quota: Quota, cap: usize, policy: Overflow, clock: C) -> Self {
        let overflowed = Arc::new(AtomicU64::new(0));
        let limiter = RateLimiter::new(quota, CappedStore::new(cap, policy, overflowed.clone()), clock);
        Self { name: name.into(), cap, quota, limiter, overflowed }
    }

    fn housekeep(&self) {
        self.limiter.retain_recent();
        self.limiter.shrink_to_fit();
        let overflowed = self.overflowed.swap(0, Ordering::Relaxed);
        let len = self.limiter.len();
        if overflowed > 0 || len >= self.cap {
            // Either a traffic spike of distinct clients or a flood of forged identities; both
            // mean new clients are sharing one bucket, which operators need to see.
            tracing::warn!(table = %self.name, len, cap = self.cap, overflowed, "rate-limit key table full: new keys are not tracked separately");
        } else {
            tracing::debug!(table = %self.name, len, "rate-limit key table housekept");
        }
    }
}

/// How a tool call is charged: `cost` cells from the tool's own table, or from the shared one.
struct ToolRule<C: Clock> {
    own: Option<Table<C>>,
    cost: NonZeroU32,
    /// The rule it was built from, so a reconfiguration keeps the buckets of unchanged rules.
    limit: ToolLimit,
}

/// In-process limiter. Generic over governor's clock so tests drive time with
/// `governor::clock::FakeRelativeClock` instead of sleeping.
///
/// Key tables, each capped at `max_keys`: client requests, the shared tool budget, one per tool
/// with its own rate (in all of these, keys beyond the cap share one overflow bucket), and
/// failed authentications per IP (keys beyond the cap go uncounted: failing closed there would
/// let whoever fills the table lock every new address out). The global ceiling is a single
/// direct (unkeyed) limiter.
pub struct LocalLimiter<C: Clock = DefaultClock> {
    enabled: bool,
    clock: C,
    requests: Table<C>,
    global: Direct<C>,
    shared_tools: Table<C>,
    /// Per-tool rules: `[limits.tools]` merged with the rates tool definitions carry; swapped
    /// whole when the tool set changes (`configure_tools`).
    tools: ArcSwap<HashMap<String, Arc<ToolRule<C>>>>,
    /// `[limits.tools]`, which wins over a definition's own rate.
    configured: std::collections::BTreeMap<String, ToolLimit>,
    settings: LimitSettings,
    auth_failures: Table<C>,
}

impl LocalLimiter<DefaultClock> {
    /// A limiter on the monotonic system clock. Fails with the offending key when the settings
    /// do not validate.
    pub fn new(settings: &LimitSettings) -> Result<Self, String> {
        Self::with_clock(settings, DefaultClock::default())
    }
}

impl<C> LocalLimiter<C>
where
    C: Clock + Clone,
{
    /// A limiter on `clock` (every table shares it, so one `advance` moves them all).
    pub fn with_clock(settings: &LimitSettings, clock: C) -> Result<Self, String> {
        settings.validate()?;
        let cap = settings.max_keys;
        let table = |name: &str, quota| Table::new(name, quota, cap, Overflow::Shared, clock.clone());
        let tools = settings.tools.iter().map(|(name, tool)| (name.clone(), Arc::new(Self::rule(settings, &clock, name, tool)))).collect();
        Ok(Self {
            enabled: settings.enabled,
            requests: table("requests", settings.request_quota()),
            global: RateLimiter::direct_with_clock(settings.global_quota(), clock.clone()),
            shared_tools: table("shared_tools", settings.shared_tool_quota()),
            tools: ArcSwap::from_pointee(tools),
            configured: settings.tools.clone(),
            settings: settings.clone(),
            auth_failures: Table::new("auth_failures", settings.auth_failure_quota(), cap, Overflow::Untracked, clock.clone()),
            clock,
        })
    }

    fn rule(settings: &LimitSettings, clock: &C, name: &str, tool: &ToolLimit) -> ToolRule<C> {
        let own =
            tool.own_quota().map(|quota| Table::new(format!("tool:{name}"), quota, settings.max_keys, Overflow::Shared, clock.clone()));
        ToolRule { own, cost: nz(tool.cost), limit: tool.clone() }
    }

    /// Every key table but the per-tool ones (those live behind the swap).
    fn fixed_tables(&self) -> [&Table<C>; 3] {
        [&self.requests, &self.shared_tools, &self.auth_failures]
    }

    fn rejection(&self, not_until: &NotUntil<C::Instant>, reason: Reason) -> Rejection {
        Rejection::new(not_until.wait_time_from(self.clock.now()), reason)
    }

    /// How a call of `tool` is charged under the current rules: its own bucket's quota
    /// (`None`: the shared tool budget) and its cost. The cluster tier charges by this, so
    /// both tiers always apply the same rule.
    pub(crate) fn tool_charge(&self, tool: &str) -> (Option<Quota>, NonZeroU32) {
        match self.tools.load().get(tool).map(AsRef::as_ref) {
            Some(ToolRule { own, cost, .. }) => (own.as_ref().map(|t| t.quota), *cost),
            None => (None, NonZeroU32::MIN),
        }
    }

    /// Charges one request to `key`: the client first and the global ceiling second, so a
    /// client already over its own limit cannot drain the shared ceiling for everyone else.
    /// The synchronous half of [`Limiter::check`].
    pub fn check_request(&self, key: &ClientKey) -> Result<(), Rejection> {
        if !self.enabled {
            return Ok(());
        }
        self.requests.limiter.check_key(&Lookup::commit(*key)).map_err(|nu| self.rejection(&nu, Reason::Client))?;
        self.global.check().map_err(|nu| self.rejection(&nu, Reason::Global))
    }

    /// Charges a call of `tool` to `key` (the other half of [`Limiter::check`]).
    pub fn check_tool(&self, key: &ClientKey, tool: &str) -> Result<(), Rejection> {
        if !self.enabled {
            return Ok(());
        }
        // Unknown tool names (they come from the request body) all map to the shared table,
        // keyed by client only, so they cannot grow the tables.
        let rules = self.tools.load();
        let (table, cost) = match rules.get(tool).map(AsRef::as_ref) {
            Some(ToolRule { own: Some(own), cost, .. }) => (own, *cost),
            Some(ToolRule { own: None, cost, .. }) => (&self.shared_tools, *cost),
            None => (&self.shared_tools, NonZeroU32::MIN),
        };
        match table.limiter.check_key_n(&Lookup::commit(*key), cost) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(nu)) => Err(self.rejection(&nu, Reason::Tool)),
            // `validate` refuses a cost above its bucket's burst, so this cannot happen; if it
            // ever does, refuse with the time a full bucket takes rather than admit for free.
            Err(capacity) => {
                tracing::error!(tool, %capacity, "tool cost exceeds its bucket; check [limits.tools]");
                Err(Rejection::new(table.quota.burst_size_replenished_in(), Reason::Tool))
            }
        }
    }
}

impl<C> Limiter for LocalLimiter<C>
where
    C: Clock + Clone + Send + Sync,
    C::Instant: Send + Sync,
{
    /// Always `Ready`: decided inline, nothing allocated.
    fn check(&self, key: &ClientKey, tool: Option<&str>) -> Check {
        Check::Ready(self.check_request(key).and_then(|()| tool.map_or(Ok(()), |tool| self.check_tool(key, tool))))
    }

    /// A dry run on the failure table: exact (same GCRA state that `record_auth_failure`
    /// updates) and it never consumes a cell nor creates an entry.
    fn check_auth_failure_allowed(&self, ip: IpAddr) -> Result<(), Rejection> {
        if !self.enabled {
            return Ok(());
        }
        let key = ClientKey::from_ip(ip);
        self.auth_failures.limiter.check_key(&Lookup::dry_run(key)).map_err(|nu| self.rejection(&nu, Reason::AuthFailures))
    }

    fn record_auth_failure(&self, ip: IpAddr) {
        if !self.enabled {
            return;
        }
        // A refusal here means the address was already over its limit: nothing more to count.
        let _ = self.auth_failures.limiter.check_key(&Lookup::commit(ClientKey::from_ip(ip)));
    }

    /// `retain_recent()` + `shrink_to_fit()` on every key table. Cost is linear in tracked
    /// keys (each table is at most `max_keys`), taking one shard lock at a time, so requests
    /// are never blocked for the whole pass.
    fn housekeep(&self) {
        self.fixed_tables().into_iter().for_each(Table::housekeep);
        self.tools.load().values().filter_map(|rule| rule.own.as_ref()).for_each(Table::housekeep);
    }

    fn tracked_keys(&self) -> usize {
        let own = self.tools.load().values().filter_map(|rule| rule.own.as_ref()).map(|t| t.limiter.len()).sum::<usize>();
        self.fixed_tables().iter().map(|table| table.limiter.len()).sum::<usize>() + own
    }

    /// Rules whose limit is unchanged keep their table (and so their clients' state); a rule
    /// that a definition gives but `[limits.tools]` also sets keeps the configured one.
    fn configure_tools(&self, from_definitions: &std::collections::BTreeMap<String, ToolLimit>) {
        let current = self.tools.load();
        let mut next = HashMap::new();
        for (name, limit) in from_definitions.iter().chain(&self.configured) {
            let limit = self.configured.get(name).unwrap_or(limit);
            let rule = match current.get(name) {
                Some(rule) if rule.limit == *limit => rule.clone(),
                _ => Arc::new(Self::rule(&self.settings, &self.clock, name, limit)),
            };
            next.insert(name.clone(), rule);
        }
        self.tools.store(Arc::new(next));
    }
}
