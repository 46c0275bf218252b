//! Rate limiting: per-client request budgets, per-tool budgets and costs, a global ceiling,
//! and a per-IP limit on failed authentication; and per-client caps on open sessions and
//! streams ([`Caps`]).
//!
//! Clients are identified by [`ClientKey`]: the verified principal (issuer + subject + client
//! id), or the client IP when authentication is off, never the session, so re-initializing
//! does not reset a quota. The HTTP layer calls, in order:
//!
//! 1. [`Limiter::check_auth_failure_allowed`] before verifying a bearer token (refusing a
//!    brute-forcing address costs a hash lookup, not a signature check), and
//!    [`Limiter::record_auth_failure`] when verification fails;
//! 2. [`Limiter::check`] for every JSON-RPC request once the caller is known, with the tool
//!    name for `tools/call`.
//!
//! A refusal is a [`Rejection`]: a 429 with `Retry-After` and a JSON-RPC error body, or the
//! same JSON-RPC error inside an SSE stream that is already open (a 503 when the shared store
//! of `backend = "redis"` is down and `on_error = "closed"`).
//!
//! Two implementations: [`LocalLimiter`] (`backend = "local"`, per replica) and
//! [`ClusterLimiter`] (`backend = "redis"`: the local limiter in front, cluster-wide quotas in
//! Redis behind); [`build`] picks one from the settings.

mod caps;
mod cluster;
mod key;
mod local;
mod redis;
mod rejection;
pub(crate) mod store;

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

pub use crate::config::limits::{Backend, LimitSettings, OnError, RedisSettings, ToolLimit};
pub use caps::{Caps, Held, Permit};
pub use cluster::ClusterLimiter;
pub use key::ClientKey;
pub use local::LocalLimiter;
pub use redis::{BACKEND_ERRORS, BACKEND_UP};
pub use rejection::{Reason, Rejection};

/// The decision of [`Limiter::check`]: already taken, or waiting on a shared store.
///
/// Why an enum and not an `async fn` in the trait: the local limiter decides in ~100 ns
/// without allocating, and must stay that way (it is the whole cost of limiting in the
/// default deployment). A `Pin<Box<dyn Future>>` return would allocate on every request, and
/// a generic associated future would make the trait unusable as `dyn Limiter`. With `Check`,
/// `Ready` costs nothing (awaiting it returns at once, no allocation, no waker), and only the
/// cluster limiter boxes the future of its network round trip, where the box is noise next to
/// the ~50-100 µs the round trip takes.
#[must_use = "a check that is not awaited admits nothing and refuses nothing"]
pub enum Check {
    Ready(Result<(), Rejection>),
    Pending(Pin<Box<dyn Future<Output = Result<(), Rejection>> + Send + 'static>>),
}

impl Future for Check {
    type Output = Result<(), Rejection>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            Self::Ready(decision) => Poll::Ready(*decision),
            Self::Pending(future) => future.as_mut().poll(cx),
        }
    }
}

impl std::fmt::Debug for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Ready(decision) => f.debug_tuple("Ready").field(decision).finish(),
            Self::Pending(_) => f.write_str("Pending"),
        }
    }
}

/// The limiter `settings.backend` asks for. Fails on invalid settings (a bad Redis URL
/// among them); an unreachable Redis does not fail it (see [`ClusterLimiter::connect`]).
pub async fn build(settings: &LimitSettings) -> Result<Arc<dyn Limiter>, String> {
    Ok(match settings.backend {
        Backend::Local => Arc::new(LocalLimiter::new(settings)?),
        Backend::Redis => Arc::new(ClusterLimiter::connect(settings).await?),
    })
}

/// The rate-limiting seam: [`LocalLimiter`] counts in process, [`ClusterLimiter`] across
/// replicas; callers cannot tell them apart. The request check returns a [`Check`], so the
/// local limiter decides inline and a shared store may take a round trip; the auth-failure
/// checks stay synchronous and per replica (see `ClusterLimiter` for why).
pub trait Limiter: Send + Sync {
    /// Charges one JSON-RPC request to `key` (and to the replica's global ceiling) and, for
    /// `tools/call`, a call of `tool`: the tool's `cost` cells from its own bucket when it has
    /// a rate of its own, else from the client's shared tool budget. The request is charged
    /// first; a refused request charges no tool.
    fn check(&self, key: &ClientKey, tool: Option<&str>) -> Check;

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
