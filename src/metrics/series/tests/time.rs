//! Series time: a wall clock set back or forward moves nothing once the store has started;
//! a late close makes one frame of every interval that ended, its rate over all of them; and
//! the open interval never starts after now.

use super::*;

#[test]
fn the_wall_clock_set_back_or_forward_moves_no_point() {
    let (s, clock) = store();
    let h = s.handle(Scope::Tool, "a");
    h.record(secs(0.01), false);
    clock.set_wall(T0 - 3_600.0);
    close_at(&s, &clock, T0 + 10.0);
    h.record(secs(0.01), false);
    clock.set_wall(T0 + 86_400.0);
    clock.to(T0 + 15.0);
    let chart = s.chart(Query::Tool("a"), Window::Hour);
    assert_eq!(chart.now, T0 + 15.0, "series time follows the monotonic clock");
    let starts: Vec<u64> = chart.points.iter().map(|p| p.start).collect();
    assert_eq!(starts, vec![1_000, 1_010]);
    let open = &chart.points[1];
    assert_eq!((open.calls, open.rate, open.partial), (1, 0.2, true), "1 call over the 5 s that passed");
    assert_eq!(s.until_close(), secs(5.0));
}

#[test]
fn a_late_close_makes_one_frame_of_the_intervals_that_ended_and_rates_stay_right() {
    let (s, clock) = store();
    let h = s.handle(Scope::Tool, "a");
    (0..30).for_each(|_| h.record(secs(0.01), false));
    // The sampler woke 25 s late: intervals 1,000, 1,010 and 1,020 have all ended.
    close_at(&s, &clock, T0 + 35.0);
    let chart = s.chart(Query::Tool("a"), Window::Hour);
    let [late, open] = chart.points.as_slice() else { panic!("{chart:?}") };
    assert_eq!((late.start, late.calls, late.rate), (1_000, 30, 1.0), "30 calls over 30 s, not over 10");
    assert_eq!((open.start, open.partial), (1_030, true));
    assert!(open.start as f64 <= chart.now, "the open interval never starts after now");
    assert_eq!(s.until_close(), secs(5.0));
    let start = s.chart(Query::Tool("a"), Window::Start);
    assert_eq!((start.points[0].calls, start.points[0].rate), (30, 1.0));
}

#[test]
fn a_close_before_its_interval_ends_does_nothing() {
    let (s, clock) = store();
    s.handle(Scope::Tool, "a").record(secs(0.01), false);
    close_at(&s, &clock, T0 + 9.5);
    let chart = s.chart(Query::Tool("a"), Window::Hour);
    assert_eq!(chart.points.len(), 1, "{chart:?}");
    assert_eq!((chart.points[0].start, chart.points[0].calls, chart.points[0].partial), (1_000, 1, true));
    assert_eq!(s.until_close(), secs(0.5));
    clock.to(T0 + 12.0);
    assert_eq!(s.until_close(), Duration::ZERO, "due");
    // A read closes what has ended: the chart never shows an ended interval as open.
    let chart = s.chart(Query::Tool("a"), Window::Hour);
    assert_eq!(chart.points.iter().map(|p| (p.start, p.partial)).collect::<Vec<_>>(), vec![(1_000, false), (1_010, true)]);
}

/// A store started mid-interval: its first frame's rate is over the part it ran.
#[test]
fn the_first_frame_counts_only_the_time_since_start() {
    let clock = TestClock::default();
    clock.set_wall(T0 + 5.0);
    clock.to(T0);
    let s = Store::new(clock.clone());
    s.handle(Scope::Tool, "a").record(secs(0.01), false);
    clock.to(T0 + 10.0);
    let chart = s.chart(Query::Tool("a"), Window::Hour);
    assert_eq!((chart.points[0].start, chart.points[0].rate), (1_000, 0.2), "1 call in the 5 s it ran");
}
