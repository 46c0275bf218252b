//! One key's latencies within an interval: the atomic [`Cell`] calls are recorded into (no
//! lock, no allocation) and the dense [`Dist`] an interval is taken into.
//!
//! A call is counted last and taken first: whatever an interval counts has its latency in it
//! too, and a call caught halfway by a close is counted in the next interval, never lost. Its
//! latency may then sit in the interval before, so counts and buckets can disagree by the
//! calls in flight at a close; readers rank within the buckets and never assume they sum to
//! the count.

use std::sync::atomic::{
    AtomicU64,
    Ordering::{Acquire, Relaxed, Release},
};
use std::time::Duration;

use super::buckets::{BUCKETS, Latency, estimate, index};

/// One call in [`Cell::counts`]: calls in the low 32 bits, errors in the high 32.
const CALL: u64 = 1;
const ERROR: u64 = 1 << 32;

/// The open interval of one key, recorded into by every call and taken by the closing store.
pub struct Cell {
    /// Calls and errors together: one swap empties both, so an error is always in its call's
    /// interval. 2^32 calls between two closes would carry into the errors: 430 million calls
    /// a second with the sampler closing every 10 s.
    counts: AtomicU64,
    sum: AtomicU64,
    min: AtomicU64,
    max: AtomicU64,
    buckets: Box<[AtomicU64]>,
}

impl std::fmt::Debug for Cell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cell").field("counts", &self.counts.load(Relaxed)).finish_non_exhaustive()
    }
}

impl Default for Cell {
    fn default() -> Self {
        Self {
            counts: AtomicU64::new(0),
            sum: AtomicU64::new(0),
            min: AtomicU64::new(u64::MAX),
            max: AtomicU64::new(0),
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl Cell {
    /// One call: a handful of atomic operations, its latency first, its count last.
    pub fn record(&self, elapsed: Duration, error: bool) {
        self.note(u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX));
        self.count(error);
    }

    /// A call's latency. The extremes are read before they are written, so once they settle a
    /// call costs no contended write for them.
    pub(super) fn note(&self, micros: u64) {
        self.buckets[index(micros)].fetch_add(1, Relaxed);
        if micros > self.max.load(Relaxed) {
            self.max.fetch_max(micros, Relaxed);
        }
        if micros < self.min.load(Relaxed) {
            self.min.fetch_min(micros, Relaxed);
        }
        self.sum.fetch_add(micros, Relaxed);
    }

    /// A call's count, after its latency: `Release` pairs with the `Acquire` of a take or a
    /// peek, so one that sees the count sees the latency too.
    pub(super) fn count(&self, error: bool) {
        self.counts.fetch_add(CALL | if error { ERROR } else { 0 }, Release);
    }

    /// Whether no call was counted since the last take.
    pub fn is_empty(&self) -> bool {
        self.counts.load(Acquire) == 0
    }

    /// The interval so far, leaving it open.
    pub fn peek(&self) -> Dist {
        let counts = self.counts.load(Acquire);
        self.read(counts, |a, _| a.load(Relaxed))
    }

    /// The interval so far, starting the next one; `None` (and nothing taken) when no call was
    /// counted, so a latency noted by a call not yet counted stays for the interval that
    /// counts it.
    pub fn take(&self) -> Option<Dist> {
        // The count first: every latency of a call it holds was noted before (Release/Acquire).
        let counts = self.counts.swap(0, Acquire);
        (counts != 0).then(|| self.read(counts, |a, reset| a.swap(reset, Relaxed)))
    }

    fn read(&self, counts: u64, get: impl Fn(&AtomicU64, u64) -> u64) -> Dist {
        let mut buckets = Box::new([0; BUCKETS]);
        for (out, b) in buckets.iter_mut().zip(self.buckets.iter()) {
            *out = get(b, 0);
        }
        Dist {
            count: counts & (ERROR - 1),
            errors: counts >> 32,
            sum: get(&self.sum, 0),
            min: get(&self.min, u64::MAX),
            max: get(&self.max, 0),
            buckets,
        }
    }
}

/// A taken (or peeked) interval, or several merged: counts, the sum and extremes in µs, and
/// the calls per bucket (which may differ from `count` by calls in flight at a close).
#[derive(Clone, Debug)]
pub struct Dist {
    pub count: u64,
    pub errors: u64,
    pub sum: u64,
    pub min: u64,
    pub max: u64,
    pub buckets: Box<[u64; BUCKETS]>,
}

impl Default for Dist {
    fn default() -> Self {
        Self { count: 0, errors: 0, sum: 0, min: u64::MAX, max: 0, buckets: Box::new([0; BUCKETS]) }
    }
}

impl Dist {
    /// Adds `other` into this one.
    pub fn merge(&mut self, other: &Dist) {
        self.count += other.count;
        self.errors += other.errors;
        self.sum = self.sum.saturating_add(other.sum);
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        for (a, b) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *a += b;
        }
    }

    /// The non-empty buckets, ascending.
    pub fn nonzero(&self) -> impl Iterator<Item = (usize, u64)> + Clone + '_ {
        self.buckets.iter().enumerate().filter(|(_, n)| **n > 0).map(|(i, n)| (i, *n))
    }

    /// The percentiles and extremes (µs), if any call's latency is here.
    pub fn latency(&self) -> Option<Latency> {
        estimate(self.nonzero(), self.min as f64, self.max as f64)
    }

    /// The mean in seconds, if there were calls.
    pub fn mean_seconds(&self) -> Option<f64> {
        (self.count > 0 && self.max >= self.min).then(|| self.sum as f64 / 1e6 / self.count as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dist(calls: &[f64]) -> Dist {
        let cell = Cell::default();
        for s in calls {
            cell.record(Duration::from_secs_f64(*s), false);
        }
        cell.take().unwrap_or_default()
    }

    /// The percentiles in seconds (NaN without: NaN fails every comparison).
    fn seconds(d: &Dist) -> [f64; 4] {
        d.latency().map_or([f64::NAN; 4], |l| [l.p50, l.p95, l.p99, l.max].map(|v| v / 1e6))
    }

    /// The case: four calls, the slowest 10.0 s.
    #[test]
    fn percentiles_never_exceed_the_slowest_call_and_the_top_rank_is_it() {
        let [p50, p95, p99, max] = seconds(&dist(&[0.1, 0.2, 0.3, 10.0]));
        assert!(p50 <= p95 && p95 <= p99 && p99 <= max, "{p50} {p95} {p99}");
        assert_eq!((p99, max), (10.0, 10.0));
        assert!((p50 - 0.2).abs() <= 0.2 * 0.0625, "the second call, within half a bucket: {p50}");
    }

    #[test]
    fn percentiles_never_fall_below_the_fastest_call() {
        let [p50, ..] = seconds(&dist(&[0.100_01, 0.100_02, 0.100_03]));
        assert!((0.100_01..=0.100_03).contains(&p50), "{p50}");
    }

    #[test]
    fn an_interval_without_calls_is_not_taken_and_has_no_figures() {
        let cell = Cell::default();
        assert!(cell.take().is_none());
        let d = cell.peek();
        assert_eq!((d.count, d.latency(), d.mean_seconds()), (0, None, None));
    }

    #[test]
    fn taking_an_interval_starts_the_next_from_nothing() {
        let cell = Cell::default();
        cell.record(Duration::from_millis(5), true);
        let first = cell.take().expect("a call");
        assert_eq!((first.count, first.errors, first.max), (1, 1, 5_000));
        assert!(cell.take().is_none());
        assert_eq!(cell.peek().latency(), None);
    }

    /// A close between a call's latency and its count (the two halves of `record`): the call
    /// is counted in the next interval, with its error, and nothing is lost.
    #[test]
    fn a_call_caught_halfway_by_a_close_counts_in_the_next_interval() {
        let cell = Cell::default();
        cell.record(Duration::from_millis(1), false);
        cell.note(2_000);
        let first = cell.take().expect("the first call");
        assert_eq!((first.count, first.errors), (1, 0));
        assert_eq!(first.buckets.iter().sum::<u64>(), 2, "the second call's latency went with it");
        cell.count(true);
        let second = cell.take().expect("the second call, counted now");
        assert_eq!((second.count, second.errors), (1, 1), "its error with it");
        assert_eq!(second.latency(), None, "its latency was in the interval before");
    }

    /// Only latency noted, no count yet: the close takes nothing, so the latency stays for the
    /// interval that counts the call.
    #[test]
    fn a_latency_without_its_count_stays_for_the_interval_that_counts_it() {
        let cell = Cell::default();
        cell.note(3_000);
        assert!(cell.take().is_none());
        cell.count(false);
        let d = cell.take().expect("counted");
        assert_eq!((d.count, d.latency().map(|l| l.max)), (1, Some(3_000.0)));
    }

    #[test]
    fn calls_and_errors_share_one_word_without_mixing() {
        let cell = Cell::default();
        for i in 0..1000 {
            cell.record(Duration::from_micros(i), i % 3 == 0);
        }
        let d = cell.take().expect("calls");
        assert_eq!((d.count, d.errors), (1000, 334));
    }

    #[test]
    fn merged_intervals_keep_every_call_and_both_extremes() {
        let mut a = dist(&[0.001, 0.002]);
        a.merge(&dist(&[3.0]));
        assert_eq!((a.count, a.min, a.max), (3, 1_000, 3_000_000));
        assert!(a.mean_seconds().is_some_and(|m| (m - 1.001).abs() < 1e-9));
    }
}
