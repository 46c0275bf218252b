//! The store on clocks the tests move: intervals close when the test says, at the time it
//! says. The wall clock and the monotonic clock move apart, as a real wall clock set back does.

mod keys;
mod race;
mod time;

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

use super::*;

/// Unix second 1,000: interval 100 opens.
const T0: f64 = 1_000.0;

/// A wall clock and a monotonic one, each set by the test.
#[derive(Clone, Default)]
struct TestClock(Arc<(AtomicU64, AtomicU64)>);

impl TestClock {
    /// The wall clock reads `unix`.
    fn set_wall(&self, unix: f64) {
        self.0.0.store(unix.to_bits(), SeqCst);
    }

    /// Series time `t`: the monotonic clock moved to `t - T0` after start.
    fn to(&self, t: f64) {
        self.0.1.store(((t - T0) * 1e6).round() as u64, SeqCst);
    }
}

impl Clock for TestClock {
    fn unix(&self) -> f64 {
        f64::from_bits(self.0.0.load(SeqCst))
    }

    fn elapsed(&self) -> Duration {
        Duration::from_micros(self.0.1.load(SeqCst))
    }
}

/// A store started at `T0`, and its clock.
fn store() -> (Store, TestClock) {
    let clock = TestClock::default();
    clock.set_wall(T0);
    (Store::new(clock.clone()), clock)
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// Closes at series time `t`.
fn close_at(s: &Store, clock: &TestClock, t: f64) {
    clock.to(t);
    s.close();
}

#[test]
fn a_tools_chart_has_its_closed_intervals_then_the_open_one_marked_partial() {
    let (s, clock) = store();
    let echo = s.handle(Scope::Tool, "echo");
    for _ in 0..20 {
        echo.record(secs(0.01), false);
    }
    close_at(&s, &clock, T0 + 10.0);
    echo.record(secs(0.02), true);
    clock.to(T0 + 15.0);
    let chart = s.chart(Query::Tool("echo"), Window::Hour);
    assert_eq!((chart.interval_secs, chart.now), (10, T0 + 15.0));
    let [closed, open] = chart.points.as_slice() else { panic!("{chart:?}") };
    assert_eq!((closed.start, closed.calls, closed.errors, closed.partial), (1_000, 20, 0, false));
    assert_eq!(closed.rate, 2.0, "20 calls in 10 s");
    assert_eq!((open.start, open.calls, open.errors, open.partial), (1_010, 1, 1, true));
    assert_eq!(open.rate, 0.2, "1 call in the 5 s of the interval that passed");
    assert_eq!(open.max, Some(0.02));
}

#[test]
fn an_interval_without_calls_is_a_point_of_zero_with_no_percentiles() {
    let (s, clock) = store();
    s.handle(Scope::Tool, "echo").record(secs(0.01), false);
    close_at(&s, &clock, T0 + 10.0);
    close_at(&s, &clock, T0 + 20.0);
    clock.to(T0 + 21.0);
    let chart = s.chart(Query::Tool("echo"), Window::Hour);
    let quiet = &chart.points[1];
    assert_eq!((quiet.calls, quiet.rate, quiet.p50, quiet.max), (0, 0.0, None, None));
}

#[test]
fn a_name_never_called_has_no_points() {
    let (s, clock) = store();
    close_at(&s, &clock, T0 + 10.0);
    assert!(s.chart(Query::Tool("nothing"), Window::Hour).points.is_empty());
    assert!(s.chart(Query::Upstream("nothing"), Window::Start).points.is_empty());
}

#[test]
fn all_is_every_tools_calls_and_upstream_calls_are_not_counted_twice() {
    let (s, clock) = store();
    s.handle(Scope::Tool, "a").record(secs(0.1), false);
    s.handle(Scope::Tool, "b").record(secs(0.2), true);
    s.handle(Scope::Upstream, "up").record(secs(0.15), false);
    clock.to(T0 + 5.0);
    let open = |q| s.chart(q, Window::Hour).points.last().map(|p| (p.calls, p.errors));
    assert_eq!(open(Query::All), Some((2, 1)), "before the close");
    close_at(&s, &clock, T0 + 11.0);
    let chart = s.chart(Query::All, Window::Hour);
    assert_eq!((chart.points[0].calls, chart.points[0].errors), (2, 1), "after it");
    assert_eq!(s.chart(Query::Upstream("up"), Window::Hour).points[0].calls, 1);
}

/// The case: four calls, the slowest 10.0 s (an audit log said so, the overview said
/// p99 29.2 s).
#[test]
fn percentiles_never_exceed_the_slowest_call_in_a_chart_or_since_start() {
    let (s, clock) = store();
    let slow = s.handle(Scope::Tool, "slow");
    for t in [0.1, 0.2, 0.3, 10.0] {
        slow.record(secs(t), false);
    }
    let check = |p50: Option<f64>, p95: Option<f64>, p99: Option<f64>| {
        let (p50, p95, p99) = (p50.unwrap_or(f64::NAN), p95.unwrap_or(f64::NAN), p99.unwrap_or(f64::NAN));
        assert!(p50 <= p95 && p95 <= p99 && p99 <= 10.0, "{p50} {p95} {p99}");
        assert_eq!(p99, 10.0, "the top rank is the slowest call");
    };
    clock.to(T0 + 5.0);
    let open = s.chart(Query::Tool("slow"), Window::Hour).points.pop().expect("the open point");
    check(open.p50, open.p95, open.p99);
    let summary = s.since_start();
    check(summary.p50, summary.p95, summary.p99);
    close_at(&s, &clock, T0 + 11.0);
    for window in [Window::Hour, Window::Start] {
        let closed = s.chart(Query::All, window).points.remove(0);
        check(closed.p50, closed.p95, closed.p99);
    }
    let summary = s.since_start();
    assert_eq!((summary.count, summary.max), (4, Some(10.0)));
    check(summary.p50, summary.p95, summary.p99);
}

#[test]
fn since_start_merges_the_closed_intervals_with_the_open_one() {
    let (s, clock) = store();
    let h = s.handle(Scope::Tool, "a");
    h.record(secs(1.0), false);
    close_at(&s, &clock, T0 + 10.0);
    h.record(secs(3.0), false);
    let summary = s.since_start();
    assert_eq!((summary.count, summary.max, summary.mean), (2, Some(3.0), Some(2.0)));
}

#[test]
fn since_start_frames_widen_and_the_filling_one_is_the_partial_point() {
    let (s, clock) = store();
    let h = s.handle(Scope::Tool, "a");
    let frames = rings::START_FRAMES as u64;
    for i in 1..=frames + 1 {
        h.record(secs(0.001), false);
        close_at(&s, &clock, T0 + (i * INTERVAL_SECS) as f64);
    }
    h.record(secs(0.001), false);
    clock.to(T0 + ((frames + 1) * INTERVAL_SECS) as f64 + 1.0);
    let chart = s.chart(Query::Tool("a"), Window::Start);
    assert_eq!(chart.interval_secs, 20, "pairs merged: frames of 20 s");
    assert_eq!(chart.points.len(), rings::START_FRAMES / 2 + 1);
    let last = chart.points.last().expect("a point");
    assert!(last.partial, "the frame still filling");
    assert_eq!(last.calls, 2, "its closed interval and the open one");
    assert_eq!(chart.points.iter().map(|p| p.calls).sum::<u64>(), frames + 2);
    assert_eq!(s.chart(Query::Tool("a"), Window::Hour).points.len(), rings::HOUR_FRAMES as usize + 1);
}

/// The review's case through the store: 10 calls of 10 s in one interval, 990 of 1 ms in the
/// next; when the ring halves, the two become one frame, whose p99 is the 990th call's (1
/// ms), not a mean of the two intervals' p99 weighted by calls (about 0.1 s).
#[test]
fn a_merged_frames_percentiles_are_those_of_all_its_calls() {
    let (s, clock) = store();
    let h = s.handle(Scope::Tool, "a");
    (0..10).for_each(|_| h.record(secs(10.0), false));
    close_at(&s, &clock, T0 + 10.0);
    (0..990).for_each(|_| h.record(secs(0.001), false));
    for i in 2..=rings::START_FRAMES as u64 + 1 {
        close_at(&s, &clock, T0 + (i * INTERVAL_SECS) as f64);
    }
    let chart = s.chart(Query::Tool("a"), Window::Start);
    assert_eq!(chart.interval_secs, 20);
    let first = &chart.points[0];
    let [p50, p99, max] = [first.p50, first.p99, first.max].map(|v| v.unwrap_or(f64::NAN));
    assert_eq!((first.calls, max), (1000, 10.0));
    assert!((p99 - 0.001).abs() <= 0.001 * 0.0625, "p99 {p99} s");
    assert!((p50 - 0.001).abs() <= 0.001 * 0.0625, "p50 {p50} s");
}

/// A close between a call's latency and its count: the call is counted in the next interval
/// with its error (never dropped), its latency left in the interval before.
#[test]
fn a_call_caught_halfway_by_a_close_counts_in_the_next_interval() {
    let (s, clock) = store();
    let h = s.handle(Scope::Tool, "a");
    h.record(secs(0.004), false);
    h.0.note(8_000);
    close_at(&s, &clock, T0 + 10.0);
    h.0.count(true);
    let chart = s.chart(Query::Tool("a"), Window::Hour);
    let [closed, open] = chart.points.as_slice() else { panic!("{chart:?}") };
    assert_eq!((closed.calls, closed.errors, closed.max), (1, 0, Some(0.008)), "both latencies");
    assert_eq!((open.calls, open.errors, open.p50, open.max), (1, 1, None, None));
    close_at(&s, &clock, T0 + 20.0);
    let chart = s.chart(Query::Tool("a"), Window::Hour);
    assert_eq!((chart.points[1].calls, chart.points[1].errors, chart.points[1].p99), (1, 1, None));
    for window in [Window::Hour, Window::Start] {
        let points = s.chart(Query::All, window).points;
        assert_eq!(points.iter().map(|p| (p.calls, p.errors)).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1)), (2, 1));
    }
    assert_eq!((s.since_start().count, s.since_start().max), (2, Some(0.008)));
}

#[test]
fn the_slowest_public_request_bounds_the_http_estimate() {
    observe_http(0.25);
    observe_http(0.05);
    assert!(http_max().is_some_and(|m| m >= 0.25));
}
