//! Rate limiting: per-client request budgets, per-tool budgets and costs, a global ceiling,
//! and a per-IP limit on failed authentication.
//!
//! Clients are identified by [`ClientKey`]: the verified principal (issuer + subject + client
//! id), or the client IP when authentication is off, never the session, so re-initializing
//! does not reset a quota. The HTTP layer calls, in order:
//!
//! 1. [`Limiter::check_auth_failure_allowed`] before verifying a bearer token (refusing a
//!    brute-forcing address costs a hash lookup, not a signature check), and
//!    [`Limiter::record_auth_failure`] when verification fails;
//! 2. [`Limiter::check_request`] for every JSON-RPC request once the caller is known;
//! 3. [`Limiter::check_tool`] additionally for `tools/call`, once the tool name is known.
//!
//! A refusal is a [`Rejection`]: a 429 with `Retry-After` and a JSON-RPC error body, or the
//! same JSON-RPC error inside an SSE stream that is already open.

mod key;
mod local;
mod rejection;
mod settings;
mod store;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

pub use key::ClientKey;
pub use local::LocalLimiter;
pub use rejection::{Reason, Rejection};
pub use settings::{LimitSettings, ToolLimit};

/// The rate-limiting seam. [`LocalLimiter`] counts in process; a cluster-wide implementation
/// (GCRA in Redis) can replace it without touching callers. Every check is synchronous and
/// cheap, so it can run inline on the request path.
pub trait Limiter: Send + Sync {
    /// Charges one request to `key` and to the global ceiling.
    fn check_request(&self, key: &ClientKey) -> Result<(), Rejection>;

    /// Charges a call of `tool` to `key`: the tool's `cost` cells from its own bucket when
    /// `[limits.tools.<tool>]` gives it a rate, else from the client's shared tool budget.
    /// Comes in addition to [`check_request`](Self::check_request) for the same message.
    fn check_tool(&self, key: &ClientKey, tool: &str) -> Result<(), Rejection>;

    /// Whether `ip` may still have a token verified. Consumes nothing: only failures count,
    /// and whether this attempt fails is not known yet.
    ///
    /// Split from [`record_auth_failure`](Self::record_auth_failure) rather than one combined
    /// call because the check must come before verification (that is where refusing is
    /// cheap) while the count can only come after it. A refused address is refused even with
    /// a valid token until `retry_after`: that is what makes guessing pointless.
    fn check_auth_failure_allowed(&self, ip: IpAddr) -> Result<(), Rejection>;

    /// Counts one failed authentication from `ip`.
    fn record_auth_failure(&self, ip: IpAddr);

    /// Drops keys whose buckets are full again (indistinguishable from new) and returns the
    /// memory. Run it periodically: [`spawn_housekeeping`].
    fn housekeep(&self);

    /// Keys currently tracked across all tables (a gauge worth exporting).
    fn tracked_keys(&self) -> usize;

    /// The per-tool rates that tool definitions carry, replacing the previous set whenever the
    /// tools change. `[limits.tools.<name>]` wins over a definition's rate for the same tool.
    fn configure_tools(&self, from_definitions: &std::collections::BTreeMap<String, ToolLimit>);
}

/// Runs [`Limiter::housekeep`] every `interval` until `cancel` fires. The first run is one
/// interval after the call: there is nothing to clean before traffic arrives. Must be called
/// within a tokio runtime.
pub fn spawn_housekeeping<L>(limiter: Arc<L>, interval: Duration, cancel: CancellationToken) -> JoinHandle<()>
where
    L: Limiter + ?Sized + 'static,
{
    // The schedule starts now, not whenever the task is first polled.
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    // After a stall, one catch-up pass is enough; a burst of back-to-back passes is waste.
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = cancel.cancelled() => break,
                _ = ticks.tick() => limiter.housekeep(),
            }
        }
    })
}
