//! Reading the store: a key's chart over either ring, the open interval last, and the summary
//! of every call since start. Each read takes the state lock first and closes an interval that
//! has ended, so it sees every call once (see the module above).

use super::buckets::Latency;
use super::points::{Figures, Point, Sparse};
use super::{ALL, INTERVAL_SECS, Query, Store, Window};

/// One point of a chart. Times are series seconds (Unix seconds as the store counts them);
/// percentiles and `max` are seconds, `None` without calls (or when every call's latency was
/// counted in the interval before, being in flight at its close).
#[derive(Clone, Debug, PartialEq)]
pub struct ChartPoint {
    /// The start of the interval.
    pub start: u64,
    pub calls: u64,
    pub errors: u64,
    /// Calls per second over the part of the frame that has passed (and this process ran).
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
    /// The width of a full frame (one that closed on time).
    pub interval_secs: u64,
    /// When it was read, series seconds.
    pub now: f64,
    /// Oldest first; empty for a name with no key.
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

impl Store {
    /// The series `query` names over `window`, ending with the open interval (`partial`).
    pub fn chart(&self, query: Query<'_>, window: Window) -> Chart {
        let mut state = self.state.lock();
        let now = self.now();
        self.close_due(&mut state, now);
        let width = match window {
            Window::Hour => 1,
            Window::Start => state.rings.width,
        };
        let mut chart = Chart { interval_secs: INTERVAL_SECS * width, now, points: Vec::new() };
        let found = {
            let keys = self.keys.read();
            keys.find(query).map(|id| (id, keys.peek(id)))
        };
        let Some((id, open)) = found else { return chart };
        let called = |f: Figures| (f.calls > 0).then_some(f);
        let rings = &state.rings;
        let end = |frame_end: u64| (frame_end * INTERVAL_SECS) as f64;
        chart.points = match window {
            Window::Hour => {
                let closed = rings.hour.iter().map(|f| self.point(f.index, end(f.end()), f.point(id).map(Point::figures), false));
                closed.chain([self.point(state.open, now, called(open.figures()), true)]).collect()
            }
            Window::Start => {
                let mut points: Vec<ChartPoint> =
                    rings.start.iter().map(|f| self.point(f.index, end(f.end()), f.point(id).map(Sparse::figures), false)).collect();
                match rings.start.back().filter(|f| f.span < width) {
                    // A frame still filling: it and the open interval are one point.
                    Some(last) => {
                        let mut merged = last.point(id).cloned();
                        if open.count > 0 {
                            let open = Sparse::of(&open);
                            match merged.as_mut() {
                                Some(m) => m.absorb(&open),
                                None => merged = Some(open),
                            }
                        }
                        points.pop();
                        points.push(self.point(last.index, now, merged.map(|m| m.figures()), true));
                    }
                    None => points.push(self.point(state.open, now, called(open.figures()), true)),
                }
                points
            }
        };
        chart
    }

    /// All calls since start, the open interval included.
    pub fn since_start(&self) -> Summary {
        let mut state = self.state.lock();
        self.close_due(&mut state, self.now());
        let mut total = self.keys.read().peek(ALL);
        total.merge(&state.all);
        let latency = total.latency();
        let seconds = |pick: fn(&Latency) -> f64| latency.as_ref().map(|l| pick(l) / 1e6);
        Summary {
            count: total.count,
            mean: total.mean_seconds(),
            p50: seconds(|l| l.p50),
            p95: seconds(|l| l.p95),
            p99: seconds(|l| l.p99),
            max: seconds(|l| l.max),
        }
    }

    /// The point of the frame from interval `index` to `end` (series seconds: the frame's end,
    /// or now for the open one, whose rate is over the time that has passed in it).
    fn point(&self, index: u64, end: f64, f: Option<Figures>, partial: bool) -> ChartPoint {
        let start = index * INTERVAL_SECS;
        // At least a second: the first moments of an interval would give wild rates.
        let covered = (end - self.started.max(start as f64)).max(1.0);
        let calls = f.map_or(0, |f| f.calls);
        let latency = f.and_then(|f| f.latency);
        let seconds = |pick: fn(&Latency) -> f64| latency.as_ref().map(|l| pick(l) / 1e6);
        ChartPoint {
            start,
            calls,
            errors: f.map_or(0, |f| f.errors),
            rate: calls as f64 / covered,
            p50: seconds(|l| l.p50),
            p95: seconds(|l| l.p95),
            p99: seconds(|l| l.p99),
            max: seconds(|l| l.max),
            partial,
        }
    }
}
