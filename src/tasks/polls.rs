//! The poll limit: `tasks/get` of one task faster than its poll interval is allowed up to a
//! burst (`tasks.poll_burst`), then refused until the interval has passed, so a client
//! spinning on `tasks/get` gets a refusal instead of the task. Counted per replica, per owner
//! and task, and charged only once the caller is known to own the task: another principal
//! (who is told the task does not exist) can neither spend the owner's allowance nor tell a
//! real id from an unknown one by being refused. The table is capped and trimmed by the
//! upkeep loop.

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

    /// Charges one poll of task `id` by its `owner`; `Err` names the wait when it came too
    /// soon.
    pub(super) fn check(&self, owner: &str, id: &str) -> Result<(), RpcError> {
        // Task ids are URL-safe base64, so the first space ends the id: no two (id, owner)
        // pairs share a key.
        self.limiter.check_key(&Lookup::commit(format!("{id} {owner}"))).map_err(|not_until| {
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
