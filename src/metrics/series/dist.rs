//! One key's latencies within an interval: the atomic [`Cell`] calls are recorded into (no lock,
//! no allocation), and the [`Dist`] an interval closes into, whose percentiles are read from
//! fixed log-scale buckets and clamped to the smallest and largest call actually seen.
//!
//! The buckets are HDR-style, in microseconds: exact below 8 µs, then 8 per power of two, so a
//! bucket is at most 12.5% wide and an estimate (its middle) is within 6.25% of any value in
//! it, from 1 µs to 2^40 µs (12.7 days; longer calls count in the last bucket).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// How many buckets: 8 exact ones, then 8 for each power of two from 2^3 to 2^39 µs.
pub const BUCKETS: usize = 304;
/// The largest duration told apart, in µs.
const MAX_MICROS: u64 = (1 << 40) - 1;

/// The bucket of a duration in µs.
pub fn index(micros: u64) -> usize {
    let v = micros.min(MAX_MICROS);
    if v < 8 {
        return v as usize;
    }
    let octave = 63 - v.leading_zeros() as usize;
    let sub = ((v >> (octave - 3)) & 7) as usize;
    8 * (octave - 2) + sub
}

/// A bucket's bounds in µs: `[lower, upper)`.
pub fn bounds(i: usize) -> (u64, u64) {
    if i < 8 {
        return (i as u64, i as u64 + 1);
    }
    let octave = i / 8 + 2;
    let lower = (8 + (i % 8) as u64) << (octave - 3);
    (lower, lower + (1 << (octave - 3)))
}

/// The open interval of one key, recorded into by every call and taken by the sampler.
pub struct Cell {
    count: AtomicU64,
    errors: AtomicU64,
    sum: AtomicU64,
    min: AtomicU64,
    max: AtomicU64,
    buckets: Box<[AtomicU64]>,
}

impl std::fmt::Debug for Cell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cell").field("count", &self.count.load(Relaxed)).finish_non_exhaustive()
    }
}

impl Default for Cell {
    fn default() -> Self {
        Self {
            count: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            sum: AtomicU64::new(0),
            min: AtomicU64::new(u64::MAX),
            max: AtomicU64::new(0),
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl Cell {
    /// One call: a handful of relaxed atomic operations. The extremes are read before they are
    /// written, so once they settle a call costs no contended write for them.
    pub fn record(&self, elapsed: Duration, error: bool) {
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.buckets[index(micros)].fetch_add(1, Relaxed);
        if micros > self.max.load(Relaxed) {
            self.max.fetch_max(micros, Relaxed);
        }
        if micros < self.min.load(Relaxed) {
            self.min.fetch_min(micros, Relaxed);
        }
        self.sum.fetch_add(micros, Relaxed);
        if error {
            self.errors.fetch_add(1, Relaxed);
        }
        self.count.fetch_add(1, Relaxed);
    }

    /// The interval so far, leaving it open.
    pub fn peek(&self) -> Dist {
        self.read(|a, _| a.load(Relaxed))
    }

    /// The interval so far, starting the next one. Each field is taken on its own, so a call
    /// racing with the close may count its bucket in one interval and its extremes in the next;
    /// percentiles are clamped to the extremes either way.
    pub fn take(&self) -> Dist {
        self.read(|a, reset| a.swap(reset, Relaxed))
    }

    fn read(&self, get: impl Fn(&AtomicU64, u64) -> u64) -> Dist {
        let mut buckets = Box::new([0; BUCKETS]);
        for (out, b) in buckets.iter_mut().zip(self.buckets.iter()) {
            *out = get(b, 0);
        }
        Dist {
            count: get(&self.count, 0),
            errors: get(&self.errors, 0),
            sum: get(&self.sum, 0),
            min: get(&self.min, u64::MAX),
            max: get(&self.max, 0),
            buckets,
        }
    }
}

/// A closed (or peeked) interval: counts, the sum and extremes in µs, and the buckets.
#[derive(Clone, Debug)]
pub struct Dist {
    pub count: u64,
    pub errors: u64,
    pub sum: u64,
    pub min: u64,
    pub max: u64,
    buckets: Box<[u64; BUCKETS]>,
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

    /// The `q` quantile (0 to 1) in seconds, by nearest rank: the middle of the bucket that
    /// holds the rank, clamped to the smallest and largest call, and the largest call itself
    /// for the top rank. `None` without calls.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total: u64 = self.buckets.iter().sum();
        if total == 0 || self.min > self.max {
            return None;
        }
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        if rank == total {
            return Some(seconds(self.max));
        }
        let mut below = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            below += n;
            if below >= rank {
                let (lower, upper) = bounds(i);
                let middle = (lower + upper) as f64 / 2.0;
                return Some(middle.clamp(self.min as f64, self.max as f64) / 1e6);
            }
        }
        Some(seconds(self.max))
    }

    /// The largest call in seconds, if there was one.
    pub fn max_seconds(&self) -> Option<f64> {
        (self.count > 0 && self.max >= self.min).then(|| seconds(self.max))
    }

    /// The smallest call in seconds, if there was one.
    pub fn min_seconds(&self) -> Option<f64> {
        (self.count > 0 && self.max >= self.min).then(|| seconds(self.min))
    }

    /// The mean in seconds, if there were calls.
    pub fn mean_seconds(&self) -> Option<f64> {
        (self.count > 0).then(|| seconds(self.sum) / self.count as f64)
    }
}

fn seconds(micros: u64) -> f64 {
    micros as f64 / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dist(calls: &[f64]) -> Dist {
        let cell = Cell::default();
        for s in calls {
            cell.record(Duration::from_secs_f64(*s), false);
        }
        cell.take()
    }

    /// A quantile that must exist (NaN fails every comparison).
    fn q(d: &Dist, q: f64) -> f64 {
        d.quantile(q).unwrap_or(f64::NAN)
    }

    #[test]
    fn every_duration_falls_inside_its_bucket_and_buckets_tile_the_range() {
        for micros in (0..5000).chain([1 << 20, 10_000_000, MAX_MICROS]) {
            let (lower, upper) = bounds(index(micros));
            assert!(lower <= micros && micros < upper, "{micros} not in [{lower}, {upper})");
        }
        for i in 0..BUCKETS - 1 {
            assert_eq!(bounds(i).1, bounds(i + 1).0, "bucket {i} ends where the next starts");
        }
        assert_eq!(index(u64::MAX), BUCKETS - 1, "longer calls count in the last bucket");
    }

    #[test]
    fn buckets_are_at_most_an_eighth_wide() {
        for i in 8..BUCKETS {
            let (lower, upper) = bounds(i);
            assert!((upper - lower) * 8 <= lower, "bucket {i}: [{lower}, {upper})");
        }
    }

    /// The case: four calls, the slowest 10.0 s.
    #[test]
    fn percentiles_never_exceed_the_slowest_call_and_the_top_rank_is_it() {
        let d = dist(&[0.1, 0.2, 0.3, 10.0]);
        let (p50, p95, p99) = (q(&d, 0.5), q(&d, 0.95), q(&d, 0.99));
        assert!(p50 <= p95 && p95 <= p99 && p99 <= 10.0, "{p50} {p95} {p99}");
        assert_eq!(p99, 10.0);
        assert!((p50 - 0.2).abs() <= 0.2 * 0.0625, "the second call, within half a bucket: {p50}");
    }

    #[test]
    fn percentiles_never_fall_below_the_fastest_call() {
        let d = dist(&[0.100_01, 0.100_02, 0.100_03]);
        assert!(q(&d, 0.01) >= 0.100_01);
        assert!(q(&d, 0.5) <= 0.100_03);
    }

    #[test]
    fn an_interval_without_calls_has_no_figures() {
        let d = Cell::default().take();
        assert_eq!((d.quantile(0.5), d.max_seconds(), d.mean_seconds()), (None, None, None));
    }

    #[test]
    fn taking_an_interval_starts_the_next_from_nothing() {
        let cell = Cell::default();
        cell.record(Duration::from_millis(5), true);
        let first = cell.take();
        assert_eq!((first.count, first.errors), (1, 1));
        let second = cell.take();
        assert_eq!((second.count, second.errors, second.max_seconds()), (0, 0, None));
    }

    #[test]
    fn merged_intervals_keep_every_call_and_both_extremes() {
        let mut a = dist(&[0.001, 0.002]);
        a.merge(&dist(&[3.0]));
        assert_eq!(a.count, 3);
        assert_eq!((a.min_seconds(), a.max_seconds()), (Some(0.001), Some(3.0)));
        assert!(a.mean_seconds().is_some_and(|m| (m - 1.001).abs() < 1e-9));
    }
}
