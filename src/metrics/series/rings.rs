//! The closed frames: the last hour (the frames that end within the last 360 intervals of 10 s,
//! compact [`Point`]s) and since start ([`Sparse`] histograms; when the ring holds more than
//! [`START_FRAMES`] frames or [`START_BYTES`] of points, adjacent pairs merge and the frame
//! width doubles). A frame holds a point only for a key that had calls in it, so memory grows
//! with what was called, never with the number of calls.
//!
//! Frames are contiguous: each starts where the one before ended. A frame closed late (the
//! sampler stalled) spans every interval it covers, so its rate is over its real length.

use std::collections::VecDeque;
use std::mem::size_of;

use super::points::{Point, Sparse};

/// Intervals of 10 s the last hour covers.
pub const HOUR_FRAMES: u64 = 360;
/// Frames "since start" keeps at most before pairs merge.
pub const START_FRAMES: usize = 720;
/// Bytes of points "since start" keeps at most before pairs merge: 720 frames of 50 keys
/// with 40 non-empty buckets each (368 bytes a point) take 13 MB; 1,000 keys busy in every
/// bucket (2.5 MB a frame) fit in 6 frames.
pub const START_BYTES: usize = 16 << 20;

/// The keys' points over `span` consecutive 10-s intervals from interval `index`, sorted by key.
#[derive(Clone, Debug, PartialEq)]
pub struct Frame<P> {
    pub index: u64,
    pub span: u64,
    pub points: Vec<(u32, P)>,
}

impl<P> Frame<P> {
    pub fn point(&self, key: u32) -> Option<&P> {
        self.points.binary_search_by_key(&key, |(k, _)| *k).ok().map(|i| &self.points[i].1)
    }

    /// The interval after the frame's last.
    pub fn end(&self) -> u64 {
        self.index + self.span
    }

    fn purge(&mut self, keys: &[u32]) {
        // `keys` ascending: a search per point, not a scan.
        self.points.retain(|(k, _)| keys.binary_search(k).is_err());
    }
}

impl Frame<Sparse> {
    /// This frame followed by `next`.
    fn absorb(&mut self, next: &Frame<Sparse>) {
        self.span += next.span;
        for (key, p) in &next.points {
            match self.points.binary_search_by_key(key, |(k, _)| *k) {
                Ok(i) => self.points[i].1.absorb(p),
                Err(i) => self.points.insert(i, (*key, p.clone())),
            }
        }
    }

    fn bytes(&self) -> usize {
        size_of::<Self>()
            + self.points.capacity() * size_of::<(u32, Sparse)>()
            + self.points.iter().map(|(_, p)| p.heap_bytes()).sum::<usize>()
    }
}

/// Both rings.
#[derive(Debug)]
pub struct Rings {
    pub hour: VecDeque<Frame<Point>>,
    pub start: VecDeque<Frame<Sparse>>,
    /// The width of a full "since start" frame, in 10-s intervals (1, 2, 4, ...).
    pub width: u64,
    /// What the "since start" frames hold ([`Frame::bytes`]).
    start_bytes: usize,
}

impl Default for Rings {
    fn default() -> Self {
        Self { hour: VecDeque::new(), start: VecDeque::new(), width: 1, start_bytes: 0 }
    }
}

impl Rings {
    /// Adds the frame of intervals `index..index + span` to both rings.
    pub fn push(&mut self, index: u64, span: u64, hour: Vec<(u32, Point)>, start: Vec<(u32, Sparse)>) {
        let end = index + span;
        self.hour.push_back(Frame { index, span, points: hour });
        while self.hour.front().is_some_and(|f| f.end() + HOUR_FRAMES <= end) {
            self.hour.pop_front();
        }
        let frame = Frame { index, span, points: start };
        match self.start.back_mut() {
            Some(last) if last.span < self.width => {
                self.start_bytes -= last.bytes();
                last.absorb(&frame);
                self.start_bytes += last.bytes();
            }
            _ => {
                self.start_bytes += frame.bytes();
                self.start.push_back(frame);
            }
        }
        while self.start.len() > START_FRAMES || (self.start_bytes > START_BYTES && self.start.len() > 1) {
            self.halve();
        }
    }

    /// Forgets `keys` (ascending; released, their slots about to be reused).
    pub fn purge(&mut self, keys: &[u32]) {
        self.hour.iter_mut().for_each(|f| f.purge(keys));
        self.start.iter_mut().for_each(|f| f.purge(keys));
        self.start_bytes = self.start.iter().map(Frame::bytes).sum();
    }

    /// Merges adjacent pairs: half the frames, twice the width.
    fn halve(&mut self) {
        let old = std::mem::take(&mut self.start);
        let mut frames = old.into_iter();
        while let Some(mut first) = frames.next() {
            if let Some(second) = frames.next() {
                first.absorb(&second);
                first.points.shrink_to_fit();
            }
            self.start.push_back(first);
        }
        self.start_bytes = self.start.iter().map(Frame::bytes).sum();
        self.width *= 2;
    }

    #[cfg(test)]
    pub fn start_bytes(&self) -> usize {
        self.start_bytes
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::buckets::{BUCKETS, bounds};
    use super::super::dist::{Cell, Dist};
    use super::*;

    fn dist(calls: usize, seconds: f64) -> Dist {
        let cell = Cell::default();
        for _ in 0..calls {
            cell.record(Duration::from_secs_f64(seconds), false);
        }
        cell.take().unwrap_or_default()
    }

    fn push(rings: &mut Rings, index: u64, points: &[(u32, Dist)]) {
        let hour = points.iter().map(|(k, d)| (*k, Point::of(d))).collect();
        let start = points.iter().map(|(k, d)| (*k, Sparse::of(d))).collect();
        rings.push(index, 1, hour, start);
    }

    #[test]
    fn the_hour_keeps_the_frames_of_the_last_360_intervals() {
        let mut rings = Rings::default();
        for i in 0..400 {
            push(&mut rings, i, &[]);
        }
        assert_eq!(rings.hour.len(), 360);
        assert_eq!(rings.hour.front().map(|f| f.index), Some(40));
        rings.push(400, 100, Vec::new(), Vec::new());
        assert_eq!(rings.hour.front().map(|f| f.index), Some(140), "a long frame pushes out what it covers");
        assert_eq!(rings.hour.back().map(Frame::end), Some(500));
    }

    #[test]
    fn since_start_never_holds_more_than_720_frames_and_loses_no_call() {
        let mut rings = Rings::default();
        let one = dist(1, 0.5);
        for i in 0..5000 {
            push(&mut rings, i, &[(7, one.clone())]);
        }
        assert!(rings.start.len() <= START_FRAMES, "{}", rings.start.len());
        assert_eq!(rings.width, 8);
        assert_eq!(rings.start.iter().map(|f| f.span).sum::<u64>(), 5000, "every interval is in one frame");
        assert_eq!(rings.start.iter().filter_map(|f| f.point(7)).map(|p| p.figures().calls).sum::<u64>(), 5000);
        assert!(rings.start.iter().zip(rings.start.iter().skip(1)).all(|(a, b)| a.end() == b.index), "contiguous");
    }

    /// 1,000 keys with a call in every bucket: frames merge to stay within the bytes allowed.
    #[test]
    fn since_start_merges_frames_to_stay_within_its_bytes() {
        let cell = Cell::default();
        (0..BUCKETS).for_each(|i| cell.record(Duration::from_micros(bounds(i).0), false));
        let full = Sparse::of(&cell.take().unwrap_or_default());
        let mut rings = Rings::default();
        for i in 0..40 {
            rings.push(i, 1, Vec::new(), (0..1000).map(|k| (k, full.clone())).collect());
            assert!(rings.start_bytes() <= START_BYTES, "{} after frame {i}", rings.start_bytes());
        }
        assert_eq!(rings.start_bytes(), rings.start.iter().map(Frame::bytes).sum::<usize>(), "accounted");
        assert!(rings.width > 1 && rings.start.len() < 40, "{} frames of {}", rings.start.len(), rings.width);
        let calls: u64 = rings.start.iter().filter_map(|f| f.point(5)).map(|p| p.figures().calls).sum();
        assert_eq!(calls, 40 * BUCKETS as u64, "no call lost");
    }

    #[test]
    fn merged_frames_keep_each_key_and_sum_its_calls() {
        let mut a = Frame { index: 0, span: 1, points: vec![(1, Sparse::of(&dist(2, 1.0))), (3, Sparse::of(&dist(1, 4.0)))] };
        a.absorb(&Frame { index: 1, span: 1, points: vec![(2, Sparse::of(&dist(5, 0.1))), (3, Sparse::of(&dist(3, 2.0)))] });
        assert_eq!(a.points.iter().map(|(k, _)| *k).collect::<Vec<_>>(), vec![1, 2, 3]);
        let f = a.point(3).map(Sparse::figures);
        assert_eq!(f.map(|f| (f.calls, f.latency.map(|l| l.max))), Some((4, Some(4e6))));
    }

    #[test]
    fn a_purged_key_leaves_every_frame() {
        let mut rings = Rings::default();
        for i in 0..3 {
            push(&mut rings, i, &[(1, dist(1, 0.1)), (2, dist(1, 0.1))]);
        }
        let before = rings.start_bytes();
        rings.purge(&[1]);
        assert!(rings.hour.iter().all(|f| f.point(1).is_none() && f.point(2).is_some()));
        assert!(rings.start.iter().all(|f| f.point(1).is_none() && f.point(2).is_some()));
        assert!(rings.start_bytes() < before);
    }
}
