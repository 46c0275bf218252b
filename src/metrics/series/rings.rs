//! The closed intervals: the last hour (360 frames of 10 s) and since start (at most 720 frames;
//! when full, adjacent pairs merge and the frame width doubles). A frame keeps a small fixed
//! [`Point`] per key that had calls in it, so memory grows with what was called, never with
//! the number of calls: at most keys × 1,080 points.

use std::collections::VecDeque;

use super::dist::Dist;

/// Frames the last hour keeps: 360 × 10 s.
pub const HOUR_FRAMES: usize = 360;
/// Frames "since start" keeps at most before pairs merge.
pub const START_FRAMES: usize = 720;

/// One key's figures over a frame. Percentiles are computed when the interval closes, from its
/// buckets; when two frames merge they become the call-weighted mean of both (an estimate;
/// counts and extremes stay exact), clamped to the merged extremes, so they never exceed the
/// slowest call either.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub calls: u64,
    pub errors: u64,
    pub min: f64,
    pub max: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
}

impl Point {
    /// The figures of an interval with calls.
    pub fn of(d: &Dist) -> Option<Self> {
        Some(Self {
            calls: d.count,
            errors: d.errors,
            min: d.min_seconds()?,
            max: d.max_seconds()?,
            p50: d.quantile(0.5)?,
            p95: d.quantile(0.95)?,
            p99: d.quantile(0.99)?,
        })
    }

    pub fn merge(&self, other: &Self) -> Self {
        let (min, max) = (self.min.min(other.min), self.max.max(other.max));
        let total = (self.calls + other.calls).max(1) as f64;
        let weighted = |a: f64, b: f64| ((a * self.calls as f64 + b * other.calls as f64) / total).clamp(min, max);
        Self {
            calls: self.calls + other.calls,
            errors: self.errors + other.errors,
            min,
            max,
            p50: weighted(self.p50, other.p50),
            p95: weighted(self.p95, other.p95),
            p99: weighted(self.p99, other.p99),
        }
    }
}

/// The keys' points over `span` consecutive 10-s intervals from interval `index` (Unix time
/// / 10), sorted by key.
#[derive(Clone, Debug, PartialEq)]
pub struct Frame {
    pub index: u64,
    pub span: u64,
    pub points: Vec<(u32, Point)>,
}

impl Frame {
    pub fn point(&self, key: u32) -> Option<&Point> {
        self.points.binary_search_by_key(&key, |(k, _)| *k).ok().map(|i| &self.points[i].1)
    }

    /// This frame followed by `next`.
    fn absorb(&mut self, next: &Frame) {
        self.span += next.span;
        for (key, p) in &next.points {
            match self.points.binary_search_by_key(key, |(k, _)| *k) {
                Ok(i) => self.points[i].1 = self.points[i].1.merge(p),
                Err(i) => self.points.insert(i, (*key, *p)),
            }
        }
    }
}

/// Both rings.
#[derive(Debug)]
pub struct Rings {
    pub hour: VecDeque<Frame>,
    pub start: VecDeque<Frame>,
    /// The width of a full "since start" frame, in 10-s intervals (1, 2, 4, ...).
    pub width: u64,
}

impl Default for Rings {
    fn default() -> Self {
        Self { hour: VecDeque::with_capacity(HOUR_FRAMES), start: VecDeque::new(), width: 1 }
    }
}

impl Rings {
    /// Adds a closed 10-s frame to both rings.
    pub fn push(&mut self, frame: Frame) {
        if self.hour.len() == HOUR_FRAMES {
            self.hour.pop_front();
        }
        self.hour.push_back(frame.clone());
        match self.start.back_mut() {
            Some(last) if last.span < self.width => last.absorb(&frame),
            _ => self.start.push_back(frame),
        }
        if self.start.len() > START_FRAMES {
            self.halve();
        }
    }

    /// Merges adjacent pairs: half the frames, twice the width.
    fn halve(&mut self) {
        let old = std::mem::take(&mut self.start);
        let mut frames = old.into_iter();
        while let Some(mut first) = frames.next() {
            if let Some(second) = frames.next() {
                first.absorb(&second);
            }
            self.start.push_back(first);
        }
        self.width *= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(calls: u64, max: f64) -> Point {
        Point { calls, errors: 0, min: max / 2.0, max, p50: max / 2.0, p95: max, p99: max }
    }

    fn frame(index: u64, points: &[(u32, Point)]) -> Frame {
        Frame { index, span: 1, points: points.to_vec() }
    }

    #[test]
    fn the_hour_keeps_the_last_360_frames() {
        let mut rings = Rings::default();
        for i in 0..400 {
            rings.push(frame(i, &[]));
        }
        assert_eq!(rings.hour.len(), HOUR_FRAMES);
        assert_eq!(rings.hour.front().map(|f| f.index), Some(40));
    }

    #[test]
    fn since_start_never_holds_more_than_720_frames_and_loses_no_call() {
        let mut rings = Rings::default();
        for i in 0..5000 {
            rings.push(frame(i, &[(7, point(1, 0.5))]));
        }
        assert!(rings.start.len() <= START_FRAMES, "{}", rings.start.len());
        assert_eq!(rings.width, 8);
        assert_eq!(rings.start.iter().map(|f| f.span).sum::<u64>(), 5000, "every interval is in one frame");
        assert_eq!(rings.start.iter().filter_map(|f| f.point(7)).map(|p| p.calls).sum::<u64>(), 5000);
        assert!(rings.start.iter().zip(rings.start.iter().skip(1)).all(|(a, b)| a.index + a.span == b.index), "contiguous");
    }

    #[test]
    fn merged_frames_keep_each_key_and_sum_its_calls() {
        let mut a = frame(0, &[(1, point(2, 1.0)), (3, point(1, 4.0))]);
        a.absorb(&frame(1, &[(2, point(5, 0.1)), (3, point(3, 2.0))]));
        assert_eq!(a.points.iter().map(|(k, _)| *k).collect::<Vec<_>>(), vec![1, 2, 3]);
        assert_eq!(a.point(3).map(|p| (p.calls, p.max)), Some((4, 4.0)));
    }

    #[test]
    fn merged_percentiles_stay_ordered_and_within_the_extremes() {
        let m = point(3, 0.2).merge(&point(1, 10.0));
        assert!(m.min <= m.p50 && m.p50 <= m.p95 && m.p95 <= m.p99 && m.p99 <= m.max, "{m:?}");
        assert_eq!(m.max, 10.0);
    }
}
