//! Closes and reads racing calls: every read sees each call once (in the open interval or in
//! a frame), never twice and never in neither. The check holds for every interleaving; the
//! threads only make many of them happen, and the test's length is set by counts, not time.

use std::sync::Barrier;
use std::sync::atomic::AtomicBool;

use super::*;

#[test]
fn reads_racing_closes_see_every_call_once() {
    const CALLS: u64 = 200_000;
    let (s, clock) = store();
    let h = s.handle(Scope::Tool, "a");
    let (begun, ended, finished) = (AtomicU64::new(0), AtomicU64::new(0), AtomicBool::new(false));
    // All three running before the first call, so they overlap even on a busy machine.
    let go = Barrier::new(3);
    std::thread::scope(|t| {
        t.spawn(|| {
            go.wait();
            for i in 0..CALLS {
                begun.fetch_add(1, SeqCst);
                h.record(Duration::from_micros(i % 5_000), i % 7 == 0);
                ended.fetch_add(1, SeqCst);
            }
            finished.store(true, SeqCst);
        });
        t.spawn(|| {
            go.wait();
            let mut n = 0;
            while !finished.load(SeqCst) {
                n += 1;
                close_at(&s, &clock, T0 + f64::from(n) * 10.0);
            }
        });
        go.wait();
        let mut reads = 0;
        while !finished.load(SeqCst) || reads < 50 {
            reads += 1;
            let low = ended.load(SeqCst);
            let summary = s.since_start().count;
            let chart = s.chart(Query::Tool("a"), Window::Start);
            let high = begun.load(SeqCst);
            let charted: u64 = chart.points.iter().map(|p| p.calls).sum();
            assert!(low <= summary && summary <= high, "since start: {summary} calls, but {low}..={high} were made");
            assert!(low <= charted && charted <= high, "chart: {charted} calls, but {low}..={high} were made");
            assert!(chart.points.iter().all(|p| p.errors <= p.calls), "an error without its call: {chart:?}");
        }
    });
    let chart = s.chart(Query::Tool("a"), Window::Start);
    let total = chart.points.iter().fold((0, 0), |a, p| (a.0 + p.calls, a.1 + p.errors));
    assert_eq!(total, (CALLS, CALLS.div_ceil(7)));
    assert_eq!(s.since_start().count, CALLS);
}
