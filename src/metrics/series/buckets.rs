//! The latency buckets and the percentile estimate both the open intervals and the rings'
//! sparse points use: nearest rank over the buckets, clamped to the smallest and largest call
//! actually seen, so no percentile exceeds the slowest call.
//!
//! The buckets are HDR-style, in microseconds: exact below 8 µs, then 8 per power of two, so a
//! bucket is at most 12.5% wide and an estimate (its middle) is within 6.25% of any value in
//! it, from 1 µs to 2^40 µs (12.7 days; longer calls count in the last bucket).

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

/// Percentiles and extremes in µs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Latency {
    pub min: f64,
    pub max: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
}

/// The percentiles of the calls in `buckets` (`(bucket, calls)`, ascending), by nearest rank:
/// the middle of the bucket that holds the rank, clamped to `min` and `max` (µs), and `max`
/// itself for the top rank. `None` without calls in the buckets or without extremes.
pub fn estimate(buckets: impl Iterator<Item = (usize, u64)> + Clone, min: f64, max: f64) -> Option<Latency> {
    let total: u64 = buckets.clone().map(|(_, n)| n).sum();
    if total == 0 || min > max {
        return None;
    }
    let rank = |q: f64| ((q * total as f64).ceil() as u64).clamp(1, total);
    let ranks = [rank(0.5), rank(0.95), rank(0.99)];
    let mut found = [max; 3];
    let mut below = 0;
    let mut next = 0;
    for (i, n) in buckets {
        below += n;
        while next < 3 && below >= ranks[next] {
            let (lower, upper) = bounds(i);
            // The top rank is the slowest call itself: no bucket's middle can exceed it.
            found[next] = if ranks[next] == total { max } else { ((lower + upper) as f64 / 2.0).clamp(min, max) };
            next += 1;
        }
    }
    Some(Latency { min, max, p50: found[0], p95: found[1], p99: found[2] })
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
