//! What a closed frame keeps per key: the last hour's compact [`Point`] (its percentiles
//! worked out when the interval closed: last-hour frames never merge) and the "since start"
//! ring's [`Sparse`] histogram (its non-empty buckets, so two frames merge exactly and the
//! percentiles of a merged frame are those of all its calls, not a mean of its halves').

use std::mem::size_of;

use super::buckets::{Latency, estimate};
use super::dist::Dist;

/// A key's calls, errors and latency over a frame or the open interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Figures {
    pub calls: u64,
    pub errors: u64,
    /// `None` when none of the calls' latencies is here (every one of them was in flight when
    /// the interval before closed).
    pub latency: Option<Latency>,
}

impl Dist {
    pub fn figures(&self) -> Figures {
        Figures { calls: self.count, errors: self.errors, latency: self.latency() }
    }
}

/// One key's figures over a last-hour frame, in 28 bytes: counts as `u32` (a frame's calls
/// come from one 32-bit word of a cell per key, saturating for "all"), latencies as `f32`
/// microseconds (exact to 16.7 s, within 1 part in 10^7 beyond), NaN without latency.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    calls: u32,
    errors: u32,
    /// min, max, p50, p95, p99.
    latency: [f32; 5],
}

impl Point {
    pub fn of(d: &Dist) -> Self {
        let saturate = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        let latency = d.latency().map_or([f32::NAN; 5], |l| [l.min, l.max, l.p50, l.p95, l.p99].map(|v| v as f32));
        Self { calls: saturate(d.count), errors: saturate(d.errors), latency }
    }

    pub fn figures(&self) -> Figures {
        let [min, max, p50, p95, p99] = self.latency.map(f64::from);
        let latency = (!max.is_nan()).then_some(Latency { min, max, p50, p95, p99 });
        Figures { calls: self.calls.into(), errors: self.errors.into(), latency }
    }
}

/// One key's calls over a "since start" frame: counts, extremes (µs; `min > max` without
/// latency) and the non-empty buckets `(bucket, calls)`, ascending. 40 bytes and 8 per
/// non-empty bucket (at most [`super::buckets::BUCKETS`]). A bucket's count saturates at 2^32 − 1
/// (4.3 billion calls of one key in one bucket of one frame); `calls` does not.
#[derive(Clone, Debug, PartialEq)]
pub struct Sparse {
    calls: u64,
    errors: u64,
    buckets: Box<[(u16, u32)]>,
    min: f32,
    max: f32,
}

impl Sparse {
    pub fn of(d: &Dist) -> Self {
        let buckets = d.nonzero().map(|(i, n)| (i as u16, u32::try_from(n).unwrap_or(u32::MAX))).collect();
        let (min, max) = if d.min <= d.max { (d.min as f32, d.max as f32) } else { (f32::INFINITY, 0.0) };
        Self { calls: d.count, errors: d.errors, buckets, min, max }
    }

    /// Adds `other`'s calls: bucket by bucket, so nothing is estimated until read.
    pub fn absorb(&mut self, other: &Sparse) {
        self.calls += other.calls;
        self.errors += other.errors;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        let (a, b) = (&self.buckets, &other.buckets);
        let mut merged = Vec::with_capacity(a.len() + b.len());
        let (mut i, mut j) = (0, 0);
        loop {
            match (a.get(i), b.get(j)) {
                (Some(x), Some(y)) if x.0 == y.0 => {
                    merged.push((x.0, x.1.saturating_add(y.1)));
                    (i, j) = (i + 1, j + 1);
                }
                (Some(x), Some(y)) if x.0 < y.0 => {
                    merged.push(*x);
                    i += 1;
                }
                (Some(x), None) => {
                    merged.push(*x);
                    i += 1;
                }
                (_, Some(y)) => {
                    merged.push(*y);
                    j += 1;
                }
                (None, None) => break,
            }
        }
        self.buckets = merged.into_boxed_slice();
    }

    pub fn figures(&self) -> Figures {
        let buckets = self.buckets.iter().map(|(i, n)| (usize::from(*i), u64::from(*n)));
        Figures { calls: self.calls, errors: self.errors, latency: estimate(buckets, self.min.into(), self.max.into()) }
    }

    /// The heap bytes this point holds beyond its own size.
    pub fn heap_bytes(&self) -> usize {
        self.buckets.len() * size_of::<(u16, u32)>()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::dist::Cell;
    use super::*;

    fn dist(calls: &[(f64, usize)]) -> Dist {
        let cell = Cell::default();
        for (s, n) in calls {
            for _ in 0..*n {
                cell.record(Duration::from_secs_f64(*s), false);
            }
        }
        cell.take().unwrap_or_default()
    }

    #[test]
    fn points_are_small() {
        assert_eq!(size_of::<(u32, Point)>(), 32);
        assert_eq!(size_of::<(u32, Sparse)>(), 48);
    }

    /// The review's case: 10 calls of 10 s in one frame, 990 of 1 ms in the next. A mean of
    /// the frames' p99 weighted by calls said about 0.1 s; the 990th of 1,000 calls took 1 ms.
    #[test]
    fn merged_frames_have_the_percentiles_of_all_their_calls() {
        let mut merged = Sparse::of(&dist(&[(10.0, 10)]));
        merged.absorb(&Sparse::of(&dist(&[(0.001, 990)])));
        let f = merged.figures();
        let l = f.latency.expect("latency");
        assert_eq!(f.calls, 1000);
        assert!((l.p99 / 1e6 - 0.001).abs() <= 0.001 * 0.0625, "p99 {} s", l.p99 / 1e6);
        assert!((l.p50 / 1e6 - 0.001).abs() <= 0.001 * 0.0625, "p50 {} s", l.p50 / 1e6);
        assert_eq!((l.min, l.max), (1_000.0, 10_000_000.0));
        let whole = dist(&[(10.0, 10), (0.001, 990)]).figures();
        assert_eq!(f, whole, "the same as one interval holding every call");
    }

    #[test]
    fn absorbing_merges_buckets_in_order_and_keeps_counts_exact() {
        let mut a = Sparse::of(&dist(&[(0.001, 2), (0.5, 1)]));
        a.absorb(&Sparse::of(&dist(&[(0.0001, 1), (0.001, 3), (2.0, 1)])));
        let ordered: Vec<u64> = a.buckets.iter().map(|(_, n)| u64::from(*n)).collect();
        assert_eq!(ordered, vec![1, 5, 1, 1]);
        assert!(a.buckets.windows(2).all(|w| w[0].0 < w[1].0), "ascending");
        assert_eq!(a.figures().calls, 8);
    }

    #[test]
    fn a_point_with_calls_but_no_latency_keeps_its_calls() {
        let d = Dist { count: 2, errors: 1, ..Dist::default() };
        let expected = Figures { calls: 2, errors: 1, latency: None };
        assert_eq!(Point::of(&d).figures(), expected);
        assert_eq!(Sparse::of(&d).figures(), expected);
        let mut s = Sparse::of(&d);
        s.absorb(&Sparse::of(&dist(&[(0.25, 1)])));
        assert_eq!(s.figures().latency.map(|l| (l.min, l.max)), Some((250_000.0, 250_000.0)));
    }

    #[test]
    fn a_compact_point_keeps_the_figures_of_its_interval() {
        let d = dist(&[(0.1, 1), (0.2, 1), (0.3, 1), (10.0, 1)]);
        let (exact, compact) = (d.figures(), Point::of(&d).figures());
        assert_eq!((compact.calls, compact.errors), (4, 0));
        let (e, c) = (exact.latency.expect("exact"), compact.latency.expect("compact"));
        assert_eq!((c.max, c.p99), (10_000_000.0, 10_000_000.0), "whole microseconds are exact");
        assert!((c.p50 - e.p50).abs() < 1.0, "{c:?} {e:?}");
    }
}
