//! The store on a clock the tests set: intervals close when the test says, at the time it says.

use super::*;

/// Unix second 1,000: interval 100 opens.
const T0: f64 = 1_000.0;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

fn store() -> Store {
    Store::new(T0)
}

#[test]
fn a_tools_chart_has_its_closed_intervals_then_the_open_one_marked_partial() {
    let s = store();
    let echo = s.handle(Scope::Tool, "echo");
    for _ in 0..20 {
        echo.record(secs(0.01), false);
    }
    s.close(T0 + 10.0);
    echo.record(secs(0.02), true);
    let chart = s.chart(Query::Tool("echo"), Window::Hour, T0 + 15.0);
    assert_eq!(chart.interval_secs, 10);
    let [closed, open] = chart.points.as_slice() else { panic!("{chart:?}") };
    assert_eq!((closed.start, closed.calls, closed.errors, closed.partial), (1_000, 20, 0, false));
    assert_eq!(closed.rate, 2.0, "20 calls in 10 s");
    assert_eq!((open.start, open.calls, open.errors, open.partial), (1_010, 1, 1, true));
    assert_eq!(open.rate, 0.2, "1 call in the 5 s of the interval that passed");
    assert_eq!(open.max, Some(0.02));
}

#[test]
fn an_interval_without_calls_is_a_point_of_zero_with_no_percentiles() {
    let s = store();
    s.handle(Scope::Tool, "echo").record(secs(0.01), false);
    s.close(T0 + 10.0);
    s.close(T0 + 20.0);
    let chart = s.chart(Query::Tool("echo"), Window::Hour, T0 + 21.0);
    let quiet = &chart.points[1];
    assert_eq!((quiet.calls, quiet.rate, quiet.p50, quiet.max), (0, 0.0, None, None));
}

#[test]
fn a_name_never_called_has_no_points() {
    let s = store();
    s.close(T0 + 10.0);
    assert!(s.chart(Query::Tool("nothing"), Window::Hour, T0 + 11.0).points.is_empty());
    assert!(s.chart(Query::Upstream("nothing"), Window::Start, T0 + 11.0).points.is_empty());
}

#[test]
fn all_is_every_tools_calls_and_upstream_calls_are_not_counted_twice() {
    let s = store();
    s.handle(Scope::Tool, "a").record(secs(0.1), false);
    s.handle(Scope::Tool, "b").record(secs(0.2), true);
    s.handle(Scope::Upstream, "up").record(secs(0.15), false);
    let open = |q| s.chart(q, Window::Hour, T0 + 5.0).points.last().map(|p| (p.calls, p.errors));
    assert_eq!(open(Query::All), Some((2, 1)), "before the close");
    s.close(T0 + 10.0);
    let chart = s.chart(Query::All, Window::Hour, T0 + 11.0);
    assert_eq!((chart.points[0].calls, chart.points[0].errors), (2, 1), "after it");
    assert_eq!(s.chart(Query::Upstream("up"), Window::Hour, T0 + 11.0).points[0].calls, 1);
}

/// The case: four calls, the slowest 10.0 s (an audit log said so, the overview said
/// p99 29.2 s).
#[test]
fn percentiles_never_exceed_the_slowest_call_in_a_chart_or_since_start() {
    let s = store();
    let slow = s.handle(Scope::Tool, "slow");
    for t in [0.1, 0.2, 0.3, 10.0] {
        slow.record(secs(t), false);
    }
    let check = |p50: Option<f64>, p95: Option<f64>, p99: Option<f64>| {
        let (p50, p95, p99) = (p50.unwrap_or(f64::NAN), p95.unwrap_or(f64::NAN), p99.unwrap_or(f64::NAN));
        assert!(p50 <= p95 && p95 <= p99 && p99 <= 10.0, "{p50} {p95} {p99}");
        assert_eq!(p99, 10.0, "the top rank is the slowest call");
    };
    let open = s.chart(Query::Tool("slow"), Window::Hour, T0 + 5.0).points.pop().expect("the open point");
    check(open.p50, open.p95, open.p99);
    let summary = s.since_start();
    check(summary.p50, summary.p95, summary.p99);
    s.close(T0 + 10.0);
    let closed = s.chart(Query::All, Window::Start, T0 + 11.0).points.remove(0);
    check(closed.p50, closed.p95, closed.p99);
    let summary = s.since_start();
    assert_eq!((summary.count, summary.max), (4, Some(10.0)));
    check(summary.p50, summary.p95, summary.p99);
}

#[test]
fn since_start_merges_the_closed_intervals_with_the_open_one() {
    let s = store();
    let h = s.handle(Scope::Tool, "a");
    h.record(secs(1.0), false);
    s.close(T0 + 10.0);
    h.record(secs(3.0), false);
    let summary = s.since_start();
    assert_eq!((summary.count, summary.max, summary.mean), (2, Some(3.0), Some(2.0)));
}

#[test]
fn since_start_frames_widen_and_the_filling_one_is_the_partial_point() {
    let s = store();
    let h = s.handle(Scope::Tool, "a");
    for i in 1..=(rings::START_FRAMES as u64 + 1) {
        h.record(secs(0.001), false);
        s.close(T0 + (i * INTERVAL_SECS) as f64);
    }
    h.record(secs(0.001), false);
    let now = T0 + ((rings::START_FRAMES as u64 + 1) * INTERVAL_SECS) as f64 + 1.0;
    let chart = s.chart(Query::Tool("a"), Window::Start, now);
    assert_eq!(chart.interval_secs, 20, "pairs merged: frames of 20 s");
    assert_eq!(chart.points.len(), rings::START_FRAMES / 2 + 1);
    let last = chart.points.last().expect("a point");
    assert!(last.partial, "the frame still filling");
    assert_eq!(last.calls, 2, "its closed interval and the open one");
    assert_eq!(chart.points.iter().map(|p| p.calls).sum::<u64>(), rings::START_FRAMES as u64 + 2);
    assert_eq!(s.chart(Query::Tool("a"), Window::Hour, now).points.len(), rings::HOUR_FRAMES + 1);
}

#[test]
fn names_past_the_cap_share_other() {
    let s = store();
    for i in 0..MAX_KEYS {
        s.handle(Scope::Tool, &format!("t{i}"));
    }
    s.handle(Scope::Tool, "late").record(secs(0.1), false);
    s.handle(Scope::Upstream, "late_upstream").record(secs(0.1), false);
    assert!(s.chart(Query::Tool("late"), Window::Hour, T0 + 1.0).points.is_empty());
    assert_eq!(s.chart(Query::Tool(OTHER), Window::Hour, T0 + 1.0).points[0].calls, 1);
    assert_eq!(s.chart(Query::Upstream(OTHER), Window::Hour, T0 + 1.0).points[0].calls, 1);
    assert_eq!(s.chart(Query::All, Window::Hour, T0 + 1.0).points[0].calls, 1, "still counted in all");
}

#[test]
fn the_same_name_gets_the_same_key() {
    let s = store();
    s.handle(Scope::Tool, "echo").record(secs(0.1), false);
    s.handle(Scope::Tool, "echo").record(secs(0.1), false);
    s.handle(Scope::Upstream, "echo").record(secs(0.1), false);
    assert_eq!(s.chart(Query::Tool("echo"), Window::Hour, T0 + 1.0).points[0].calls, 2);
}

#[test]
fn the_next_interval_opens_where_the_clock_is_and_never_before() {
    let s = store();
    assert_eq!(s.next_close(), T0 + 10.0);
    s.close(T0 + 35.0);
    assert_eq!(s.next_close(), T0 + 40.0, "a late close skips to the current interval");
    s.close(T0 - 500.0);
    assert_eq!(s.next_close(), T0 + 50.0, "a clock set back does not reopen an old interval");
}

#[test]
fn the_slowest_public_request_bounds_the_http_estimate() {
    observe_http(0.25);
    observe_http(0.05);
    assert!(http_max().is_some_and(|m| m >= 0.25));
}
