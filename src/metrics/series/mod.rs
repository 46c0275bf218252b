//! This replica's own time series of tool calls, for the console's charts
//! (`GET /admin/series`) and the overview's latency: per tool, per upstream and for all calls,
//! over the last hour and since start. In process and bounded, so it needs no Prometheus
//! server, and it knows each interval's slowest call, so its percentiles never exceed it (a
//! Prometheus histogram can only interpolate within a bucket).
//!
//! Recording costs a few relaxed atomic operations on the key's [`Handle`], resolved once per
//! registered tool and per upstream (the metric handles are resolved at the same places): no
//! lock and no allocation per call. "All" is not recorded at all: it is the sum of the tools'
//! intervals, formed when they close. A sampler thread closes the open interval every 10 s on
//! the wall clock's 10-s boundaries (so replicas' points line up) into [`rings`].
//!
//! Keys are bounded by registration (tool names the registry accepted, configured upstream
//! names) and capped at [`MAX_KEYS`]; past the cap a new name counts under "other".

mod dist;
mod global;
mod rings;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use parking_lot::{Mutex, RwLock};

use dist::{Cell, Dist};
pub(super) use global::spawn_sampler;
pub use global::{global, http_max, observe_http};
use rings::{Frame, Point, Rings};

/// The length of one interval.
pub const INTERVAL_SECS: u64 = 10;
/// Names tracked per replica (tools and upstreams together) before new ones share "other".
pub const MAX_KEYS: usize = 2_000;
/// The key calls of names past [`MAX_KEYS`] count under.
pub const OTHER: &str = "other";
/// The key id of "all calls" in the frames: after every real key.
const ALL: u32 = u32::MAX;

/// What a key names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Tool,
    Upstream,
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

/// Where one key's calls are recorded.
#[derive(Clone, Debug)]
pub struct Handle(Arc<Cell>);

impl Handle {
    /// One call that took `elapsed`; `error` when its outcome was not "ok".
    pub fn record(&self, elapsed: Duration, error: bool) {
        self.0.record(elapsed, error);
    }
}

/// One point of a chart. Times are Unix seconds; percentiles and `max` are seconds, `None`
/// without calls.
#[derive(Clone, Debug, PartialEq)]
pub struct ChartPoint {
    /// The start of the interval.
    pub start: u64,
    pub calls: u64,
    pub errors: u64,
    /// Calls per second over the part of the interval that has passed (and this process ran).
    pub rate: f64,
    pub p50: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
    /// The interval has not closed yet: the figures so far.
    pub partial: bool,
}

/// A series as the charts read it.
#[derive(Clone, Debug, PartialEq)]
pub struct Chart {
    pub interval_secs: u64,
    /// Oldest first; empty for a name with no calls yet.
    pub points: Vec<ChartPoint>,
}

/// Figures over all calls since start, clamped like every point.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Summary {
    pub count: u64,
    pub mean: Option<f64>,
    pub p50: Option<f64>,
    pub p95: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
}

struct Key {
    scope: Scope,
    cell: Arc<Cell>,
}

#[derive(Default)]
struct Keys {
    tools: HashMap<Arc<str>, u32>,
    upstreams: HashMap<Arc<str>, u32>,
    /// By id.
    list: Vec<Key>,
}

impl Keys {
    fn names(&self, scope: Scope) -> &HashMap<Arc<str>, u32> {
        match scope {
            Scope::Tool => &self.tools,
            Scope::Upstream => &self.upstreams,
        }
    }
}

struct State {
    /// The open interval (Unix time / 10).
    open: u64,
    rings: Rings,
    /// Every closed interval of all calls together.
    all: Dist,
}

/// The store: keys, the open intervals (in the keys' cells) and the closed ones.
pub struct Store {
    /// When recording began, Unix seconds: the first interval covers only what followed.
    started: f64,
    keys: RwLock<Keys>,
    state: Mutex<State>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("started", &self.started).finish_non_exhaustive()
    }
}

impl Store {
    /// An empty store whose first interval holds `now` (Unix seconds).
    pub fn new(now: f64) -> Self {
        let store = Self {
            started: now,
            keys: RwLock::new(Keys::default()),
            state: Mutex::new(State { open: interval_of(now), rings: Rings::default(), all: Dist::default() }),
        };
        // "other" of each scope exists from the start and is not counted against the cap.
        store.handle(Scope::Tool, OTHER);
        store.handle(Scope::Upstream, OTHER);
        store
    }

    /// The handle of `name` (created on first use; "other" past the cap). Takes a lock: call
    /// it once per tool or upstream, not per call.
    pub fn handle(&self, scope: Scope, name: &str) -> Handle {
        if let Some(id) = self.keys.read().names(scope).get(name).copied() {
            return Handle(self.keys.read().list[id as usize].cell.clone());
        }
        let mut keys = self.keys.write();
        let full = keys.list.len() >= MAX_KEYS + 2;
        let known = keys.names(scope).get(name).or_else(|| if full { keys.names(scope).get(OTHER) } else { None }).copied();
        if let Some(id) = known {
            return Handle(keys.list[id as usize].cell.clone());
        }
        let id = keys.list.len() as u32;
        let cell = Arc::new(Cell::default());
        keys.list.push(Key { scope, cell: cell.clone() });
        match scope {
            Scope::Tool => keys.tools.insert(name.into(), id),
            Scope::Upstream => keys.upstreams.insert(name.into(), id),
        };
        Handle(cell)
    }

    /// When the open interval ends, Unix seconds.
    pub fn next_close(&self) -> f64 {
        ((self.state.lock().open + 1) * INTERVAL_SECS) as f64
    }

    /// Closes the open interval into the rings; the next open one is the one holding `now`.
    pub fn close(&self, now: f64) {
        let cells: Vec<(Scope, Arc<Cell>)> = self.keys.read().list.iter().map(|k| (k.scope, k.cell.clone())).collect();
        let mut all = Dist::default();
        let mut points = Vec::new();
        for (id, (scope, cell)) in cells.iter().enumerate() {
            let d = cell.take();
            if *scope == Scope::Tool {
                all.merge(&d);
            }
            if let Some(p) = Point::of(&d) {
                points.push((id as u32, p));
            }
        }
        if let Some(p) = Point::of(&all) {
            points.push((ALL, p));
        }
        let mut state = self.state.lock();
        state.all.merge(&all);
        let index = state.open;
        state.rings.push(Frame { index, span: 1, points });
        // Never backwards: a clock set back keeps the frames in order (their times drift until
        // the clock catches up).
        state.open = (index + 1).max(interval_of(now));
    }

    /// The series `query` names over `window`, ending with the open interval (`partial`).
    pub fn chart(&self, query: Query<'_>, window: Window, now: f64) -> Chart {
        let Some((id, current)) = self.current(query) else {
            return Chart { interval_secs: INTERVAL_SECS, points: Vec::new() };
        };
        let state = self.state.lock();
        let (frames, width) = match window {
            Window::Hour => (&state.rings.hour, 1),
            Window::Start => (&state.rings.start, state.rings.width),
        };
        let mut points: Vec<ChartPoint> = frames.iter().map(|f| self.point(f.index, Some(f.end()), f.point(id).copied())).collect();
        let open = Point::of(&current);
        match frames.back().filter(|f| f.span < width) {
            // A "since start" frame still filling: it and the open interval are one point.
            Some(last) => {
                let merged = match (last.point(id), open) {
                    (Some(a), Some(b)) => Some(a.merge(&b)),
                    (a, b) => a.copied().or(b),
                };
                points.pop();
                points.push(self.point(last.index, None, merged).at(now, self.started));
            }
            None => points.push(self.point(state.open, None, open).at(now, self.started)),
        }
        Chart { interval_secs: INTERVAL_SECS * width, points }
    }

    /// All calls since start, the open interval included.
    pub fn since_start(&self) -> Summary {
        let Some((_, mut total)) = self.current(Query::All) else { return Summary::default() };
        total.merge(&self.state.lock().all);
        Summary {
            count: total.count,
            mean: total.mean_seconds(),
            p50: total.quantile(0.5),
            p95: total.quantile(0.95),
            p99: total.quantile(0.99),
            max: total.max_seconds(),
        }
    }

    /// The key id `query` names and its open interval so far.
    fn current(&self, query: Query<'_>) -> Option<(u32, Dist)> {
        let keys = self.keys.read();
        let (scope, name) = match query {
            Query::All => {
                let mut all = Dist::default();
                keys.list.iter().filter(|k| k.scope == Scope::Tool).for_each(|k| all.merge(&k.cell.peek()));
                return Some((ALL, all));
            }
            Query::Tool(name) => (Scope::Tool, name),
            Query::Upstream(name) => (Scope::Upstream, name),
        };
        let id = *keys.names(scope).get(name)?;
        Some((id, keys.list[id as usize].cell.peek()))
    }

    /// A closed frame's point from interval `index` to `end` (Unix seconds), or an open one's
    /// (`end` None: its rate is completed by [`ChartPoint::at`]).
    fn point(&self, index: u64, end: Option<u64>, p: Option<Point>) -> ChartPoint {
        let start = index * INTERVAL_SECS;
        let calls = p.map_or(0, |p| p.calls);
        let covered = end.map_or(1.0, |end| (end as f64 - self.started.max(start as f64)).max(1.0));
        ChartPoint {
            start,
            calls,
            errors: p.map_or(0, |p| p.errors),
            rate: calls as f64 / covered,
            p50: p.map(|p| p.p50),
            p95: p.map(|p| p.p95),
            p99: p.map(|p| p.p99),
            max: p.map(|p| p.max),
            partial: end.is_none(),
        }
    }
}

impl ChartPoint {
    /// An open point's rate over the time that has passed in it (at least a second).
    fn at(mut self, now: f64, started: f64) -> Self {
        let covered = (now - started.max(self.start as f64)).max(1.0);
        self.rate = self.calls as f64 / covered;
        self
    }
}

impl Frame {
    fn end(&self) -> u64 {
        (self.index + self.span) * INTERVAL_SECS
    }
}

fn interval_of(unix: f64) -> u64 {
    (unix.max(0.0) as u64) / INTERVAL_SECS
}

/// Now, in Unix seconds.
pub fn unix_now() -> f64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests;
