//! This replica's own time series of tool calls, for the console's charts
//! (`GET /admin/series`) and the overview's latency: per tool, per upstream and for all calls,
//! over the last hour and since start. In process and bounded, so it needs no Prometheus
//! server, and it knows each interval's slowest call, so its percentiles never exceed it (a
//! Prometheus histogram can only interpolate within a bucket).
//!
//! Recording costs a few atomic operations on the key's [`Handle`], resolved once per
//! registered tool and per upstream (the metric handles are resolved at the same places): no
//! lock and no allocation per call. "All" is not recorded at all: it is the sum of the tools'
//! intervals, formed when they close. A sampler thread closes the open interval every 10 s
//! into [`rings`]; a read closes it too if it has ended, so a read never shows an ended
//! interval as open.
//!
//! **Time.** The wall clock is read once, at start; from then on series time is that plus a
//! monotonic clock's elapsed time, so a wall clock set back or forward moves nothing (points
//! stay in order, none lands in the future) and intervals keep their 10 s. Intervals start on
//! 10-s boundaries of series time, which line up across replicas as far as their clocks
//! agreed at start (a host suspended, which the monotonic clock does not count, leaves series
//! time behind until restart). A close that comes late (a stalled sampler) makes one frame of
//! every interval that ended, so its rate is over its real length.
//!
//! **Consistency.** A close empties every key's cell and adds the frame with the state lock
//! held; a read takes that lock before it reads the cells, so it sees each call once: in the
//! open interval or in a frame. The one lock order is state, then keys; recording takes
//! neither.
//!
//! **Keys and memory.** Keys are bounded by registration (tool names the registry accepted,
//! configured upstream names) and capped at [`MAX_KEYS`]; past the cap a new name counts
//! under the scope's overflow key, read as [`OTHER`]. A key no handle refers to and idle for
//! the hour is released (see [`keys`]). At worst (every key busy in every bucket all the
//! time): the cells take 1,002 × 2.5 KB = 2.5 MB; the hour ring 360 frames × 1,003 points
//! (the keys and "all") × 32 B = 11.6 MB; "since start" at most [`rings::START_BYTES`] (16.8
//! MB), plus the frame being added (2.5 MB) until it merges: about 34 MB in all. With 50 tools
//! each called in every interval across 40 latency buckets, under 15 MB.

mod buckets;
mod chart;
mod dist;
mod global;
mod keys;
mod points;
mod rings;

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

pub use chart::{Chart, ChartPoint, Summary};
use dist::{Cell, Dist};
pub(super) use global::spawn_sampler;
pub use global::{SystemClock, global, http_max, observe_http};
use keys::Keys;
use points::{Point, Sparse};
use rings::Rings;

/// The length of one interval.
pub const INTERVAL_SECS: u64 = 10;
/// Names tracked per replica (tools and upstreams together) before new ones share [`OTHER`].
pub const MAX_KEYS: usize = 1_000;
/// The name the calls of names past [`MAX_KEYS`] are read under, per scope: no tool or
/// upstream can be named so.
pub const OTHER: &str = "(other)";
/// The key id of "all calls" in the frames: after every real key.
const ALL: u32 = u32::MAX;

/// What a key names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Tool = 0,
    Upstream = 1,
}

/// Which series to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Query<'a> {
    All,
    Tool(&'a str),
    Upstream(&'a str),
}

/// Which ring to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Window {
    /// The last 360 intervals of 10 s.
    Hour,
    /// Everything since start, in at most 720 frames.
    Start,
}

/// Where the store's time comes from.
pub trait Clock: Send + Sync {
    /// The wall clock, Unix seconds: read once, when the store is made.
    fn unix(&self) -> f64;
    /// A monotonic clock: the time since any fixed point.
    fn elapsed(&self) -> Duration;
}

/// Where one key's calls are recorded.
#[derive(Clone, Debug)]
pub struct Handle(Arc<Cell>);

impl Handle {
    /// One call that took `elapsed`; `error` when its outcome was not "ok".
    pub fn record(&self, elapsed: Duration, error: bool) {
        self.0.record(elapsed, error);
    }
}

struct State {
    /// The open interval (series seconds / 10).
    open: u64,
    rings: Rings,
    /// Every closed interval of all calls together.
    all: Dist,
}

/// The store: keys, the open intervals (in the keys' cells) and the closed ones.
pub struct Store {
    /// When recording began, Unix seconds by the wall clock: series time's origin.
    started: f64,
    clock: Box<dyn Clock>,
    /// The monotonic clock's reading at `started`.
    origin: Duration,
    keys: RwLock<Keys>,
    state: Mutex<State>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("started", &self.started).finish_non_exhaustive()
    }
}

impl Store {
    /// An empty store whose first interval holds the clock's now.
    pub fn new(clock: impl Clock + 'static) -> Self {
        let (started, origin) = (clock.unix(), clock.elapsed());
        let state = State { open: interval_of(started), rings: Rings::default(), all: Dist::default() };
        Self { started, clock: Box::new(clock), origin, keys: RwLock::default(), state: Mutex::new(state) }
    }

    /// Series time: Unix seconds at start plus the monotonic time since, never going back.
    pub fn now(&self) -> f64 {
        self.started + self.clock.elapsed().saturating_sub(self.origin).as_secs_f64()
    }

    /// The handle of `name` (created on first use; the overflow key past the cap). Takes a
    /// lock: call it once per tool or upstream, not per call.
    pub fn handle(&self, scope: Scope, name: &str) -> Handle {
        if let Some(cell) = self.keys.read().get(scope, name) {
            return Handle(cell.clone());
        }
        Handle(self.keys.write().insert(scope, name))
    }

    /// How long until the open interval ends (zero if it has).
    pub fn until_close(&self) -> Duration {
        let end = ((self.state.lock().open + 1) * INTERVAL_SECS) as f64;
        Duration::from_secs_f64((end - self.now()).clamp(0.0, INTERVAL_SECS as f64))
    }

    /// Closes the open interval into the rings if it has ended.
    pub fn close(&self) {
        let mut state = self.state.lock();
        self.close_due(&mut state, self.now());
    }

    /// Closes the open interval if `now` is past it: every interval that ended becomes one
    /// frame, so a late close keeps the rate right. Holds the state lock throughout (the caller
    /// passes it), so no read sees a call both in a cell and in a frame, or in neither.
    fn close_due(&self, state: &mut State, now: f64) {
        let next = interval_of(now);
        if next <= state.open {
            return;
        }
        let (index, span) = (state.open, next - state.open);
        let mut all = Dist::default();
        let (mut hour, mut start, mut idle) = (Vec::new(), Vec::new(), Vec::new());
        let keys = self.keys.read();
        for (id, slot) in keys.live() {
            let Some(d) = slot.cell.take() else {
                slot.idle.fetch_add(span, Relaxed);
                if keys.releasable(id) {
                    idle.push(id);
                }
                continue;
            };
            slot.idle.store(0, Relaxed);
            if slot.scope == Scope::Tool {
                all.merge(&d);
            }
            hour.push((id, Point::of(&d)));
            start.push((id, Sparse::of(&d)));
        }
        drop(keys);
        if all.count > 0 {
            hour.push((ALL, Point::of(&all)));
            start.push((ALL, Sparse::of(&all)));
        }
        // A frame keeps only the keys that had calls: no spare capacity for the others.
        hour.shrink_to_fit();
        start.shrink_to_fit();
        state.all.merge(&all);
        state.rings.push(index, span, hour, start);
        state.open = next;
        if !idle.is_empty() {
            let mut keys = self.keys.write();
            idle.retain(|id| keys.release(*id));
            state.rings.purge(&idle);
        }
    }
}

fn interval_of(seconds: f64) -> u64 {
    (seconds.max(0.0) as u64) / INTERVAL_SECS
}

#[cfg(test)]
mod tests;
