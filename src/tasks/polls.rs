//! The poll limit: `tasks/get` of one task faster than its poll interval is allowed up to a
//! burst (`tasks.poll_burst`), then refused until the interval has passed, so a client
//! spinning on `tasks/get` costs one refusal per call instead of a database read. Counted per
//! replica, per task; the table of tasks is capped and trimmed by the upkeep loop.

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::middleware::NoOpMiddleware;
use governor::{Quota, RateLimiter};
use serde_json::json;

use crate::limits::store::{CappedStore, Lookup, Overflow};
use crate::protocol::jsonrpc::{RpcError, code};

/// Most tasks tracked at once; polls of others go unlimited (never a shared bucket, which
/// would let one client's flood of tasks slow every other task's polls).
const TRACKED: usize = 100_000;

type Keyed = RateLimiter<Lookup<String>, CappedStore<String>, DefaultClock, NoOpMiddleware<<DefaultClock as Clock>::Instant>>;

pub(super) struct PollLimit {
    limiter: Keyed,
    clock: DefaultClock,
}

impl PollLimit {
    /// `None` when `burst` is 0 (no limit).
    pub(super) fn new(interval_ms: u64, burst: u32) -> Option<Self> {
        let burst = NonZeroU32::new(burst)?;
        let quota = Quota::with_period(Duration::from_millis(interval_ms.max(1)))?.allow_burst(burst);
        let clock = DefaultClock::default();
        let store = CappedStore::new(TRACKED, Overflow::Untracked, std::sync::Arc::default());
        Some(Self { limiter: RateLimiter::new(quota, store, clock.clone()), clock })
    }

    /// Charges one poll of task `id`; `Err` names the wait when it came too soon.
    pub(super) fn check(&self, id: &str) -> Result<(), RpcError> {
        self.limiter.check_key(&Lookup::commit(id.to_owned())).map_err(|not_until| {
            let wait = not_until.wait_time_from(self.clock.now()).as_millis().max(1);
            RpcError::new(code::TRANSPORT, format!("Task {id} is polled faster than its pollInterval; poll again in {wait} ms"))
                .with_data(json!({ "limit": "task_polls", "retryAfterMs": wait }))
        })
    }

    /// Forgets tasks not polled lately.
    pub(super) fn trim(&self) {
        self.limiter.retain_recent();
        self.limiter.shrink_to_fit();
    }
}
