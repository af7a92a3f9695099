//! A per-interval timeline of one device: completed IOs and bytes (IOPS, MB/s), time-weighted
//! queue depth (bios queued, not completed) and driver depth (requests dispatched, not
//! completed), mean Q2C of the bios completed in the interval, and seeks (dispatches at a
//! nonzero distance from the previous dispatch, by btt's seek-distance rule; counted apart, in
//! [`SeekCounts`]). Memory grows with the trace's duration / interval, not with its number of
//! events, and is capped at [`MAX_INTERVALS`]: a trace that would need more intervals is
//! marked as overflowed (the caller refuses it with the numbers) instead of allocating or
//! looping without end.

use serde::Serialize;

#[derive(Debug, Clone, Default)]
struct Bucket {
    reads: u64,
    writes: u64,
    discards: u64,
    read_bytes: u64,
    write_bytes: u64,
    discard_bytes: u64,
    queue_area: u128,
    driver_area: u128,
    q2c_sum: u128,
    q2c_n: u64,
    q2c_max: u64,
    seeks: u64,
}

impl Bucket {
    fn absorb(&mut self, o: &Bucket) {
        self.reads += o.reads;
        self.writes += o.writes;
        self.discards += o.discards;
        self.read_bytes += o.read_bytes;
        self.write_bytes += o.write_bytes;
        self.discard_bytes += o.discard_bytes;
        self.queue_area += o.queue_area;
        self.driver_area += o.driver_area;
        self.q2c_sum += o.q2c_sum;
        self.q2c_n += o.q2c_n;
        self.q2c_max = self.q2c_max.max(o.q2c_max);
        self.seeks += o.seeks;
    }
}

/// Integrates a depth over time, splitting across bucket boundaries.
#[derive(Debug, Clone, Default)]
struct DepthClock {
    depth: u64,
    since: u64,
}

/// Most intervals one device's timeline may hold (a few MB): enough for a day at 1 s or
/// 100 s at 1 ms; more is a mistaken `--interval`, not a wish for a longer chart.
pub const MAX_INTERVALS: u64 = 100_000;

/// Which interval of a timeline a time falls in. Nearly every event falls in the interval of
/// the one before, so that one's window is kept: this saves two 64-bit divisions per event.
#[derive(Debug, Clone)]
struct Intervals {
    origin: u64,
    interval: u64,
    /// Set when an event fell beyond `MAX_INTERVALS` intervals: the timeline is incomplete.
    overflowed: bool,
    /// The end of the last interval allowed (saturating: a huge interval ends at u64::MAX).
    limit: u64,
    /// The interval most recently used and its time window.
    win_idx: usize,
    win_start: u64,
    win_end: u64,
}

impl Intervals {
    fn new(origin: u64, interval: u64) -> Self {
        let interval = interval.max(1);
        Intervals {
            origin,
            interval,
            overflowed: false,
            limit: origin.saturating_add(interval.saturating_mul(MAX_INTERVALS)),
            win_idx: 0,
            win_start: 1,
            win_end: 0,
        }
    }

    /// `t`, or the last instant of the last allowed interval when `t` lies beyond it.
    fn clamp(&mut self, t: u64) -> u64 {
        if t >= self.limit {
            self.overflowed = true;
            self.limit.saturating_sub(1).max(self.origin)
        } else {
            t
        }
    }

    /// True when both `from` and `t` lie in the current window.
    #[inline(always)]
    fn holds(&self, from: u64, t: u64) -> bool {
        from >= self.win_start && t < self.win_end
    }

    /// The index of the interval of `t` (never past the limit).
    #[inline(always)]
    fn index(&mut self, t: u64) -> usize {
        if self.holds(t, t) {
            return self.win_idx;
        }
        self.move_window(t)
    }

    /// [`Intervals::index`] for a `t` outside the current window.
    #[inline(never)]
    fn move_window(&mut self, t: u64) -> usize {
        let t = self.clamp(t);
        let i = (t.saturating_sub(self.origin) / self.interval) as usize;
        self.win_idx = i;
        self.win_start = self.start_of(i);
        self.win_end = self.win_start.saturating_add(self.interval);
        if t < self.origin {
            // Before the origin (out-of-order input): counted in the first interval.
            self.win_start = 1;
            self.win_end = 0;
        }
        i
    }

    fn start_of(&self, i: usize) -> u64 {
        self.origin
            .saturating_add((i as u64).saturating_mul(self.interval))
    }
}

#[derive(Debug, Clone)]
pub struct Timeline {
    at: Intervals,
    buckets: Vec<Bucket>,
    queue: DepthClock,
    driver: DepthClock,
}

impl Timeline {
    pub fn new(origin: u64, interval: u64) -> Self {
        Timeline {
            at: Intervals::new(origin, interval),
            buckets: Vec::new(),
            queue: DepthClock {
                depth: 0,
                since: origin,
            },
            driver: DepthClock {
                depth: 0,
                since: origin,
            },
        }
    }

    /// True when events fell beyond [`MAX_INTERVALS`] intervals, or closing the timeline at
    /// `end` ([`Timeline::finish`]) would reach past them: the points would be incomplete.
    pub fn overflows(&self, end: u64) -> bool {
        self.at.overflowed || end >= self.at.limit
    }

    /// The bucket index of `t`, growing the bucket list as needed (never past the limit).
    #[inline]
    fn index(&mut self, t: u64) -> usize {
        let i = self.at.index(t);
        if i >= self.buckets.len() {
            self.grow(i);
        }
        i
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self, i: usize) {
        self.buckets.resize(i + 1, Bucket::default());
    }

    #[inline]
    fn bucket(&mut self, t: u64) -> &mut Bucket {
        let i = self.index(t);
        &mut self.buckets[i]
    }

    /// Adds the area under one depth (the queue's when `QUEUE`, else the driver's) up to `t`.
    /// Nearly always the span since the last change lies in the current bucket's window,
    /// which also lies below the limit (so `clamp` would change nothing): that case is a
    /// multiply and an add, the rest goes to [`Timeline::advance_slow`].
    #[inline]
    fn advance<const QUEUE: bool>(&mut self, t: u64) {
        let clock = if QUEUE {
            &mut self.queue
        } else {
            &mut self.driver
        };
        let from = clock.since;
        if self.at.holds(from, t) {
            if t > from {
                clock.since = t;
                let area = u128::from(clock.depth) * u128::from(t - from);
                let b = &mut self.buckets[self.at.win_idx];
                if QUEUE {
                    b.queue_area += area;
                } else {
                    b.driver_area += area;
                }
            }
            return;
        }
        self.advance_slow(QUEUE, t);
    }

    #[inline(never)]
    fn advance_slow(&mut self, which: bool, t: u64) {
        let t = self.at.clamp(t);
        let (origin, interval) = (self.at.origin, self.at.interval);
        let clock = if which { &self.queue } else { &self.driver };
        let (depth, mut from) = (clock.depth, clock.since);
        if t > from && depth > 0 && self.at.holds(from, t) {
            let area = u128::from(depth) * u128::from(t - from);
            let b = &mut self.buckets[self.at.win_idx];
            if which {
                b.queue_area += area;
            } else {
                b.driver_area += area;
            }
        } else if t > from && depth > 0 {
            self.index(t);
            while from < t {
                let i = (from.saturating_sub(origin) / interval) as usize;
                let edge = origin.saturating_add((i as u64 + 1).saturating_mul(interval));
                let to = edge.min(t);
                let area = u128::from(depth) * u128::from(to - from);
                let b = &mut self.buckets[i];
                if which {
                    b.queue_area += area;
                } else {
                    b.driver_area += area;
                }
                from = to;
            }
        }
        let clock = if which {
            &mut self.queue
        } else {
            &mut self.driver
        };
        clock.since = clock.since.max(t);
    }

    /// The number of bios queued and not completed changed to `depth` at `t`.
    #[inline]
    pub fn queue_depth(&mut self, t: u64, depth: u64) {
        self.advance::<true>(t);
        self.queue.depth = depth;
    }

    /// The number of requests in the driver changed to `depth` at `t`.
    #[inline]
    pub fn driver_depth(&mut self, t: u64, depth: u64) {
        self.advance::<false>(t);
        self.driver.depth = depth;
    }

    #[inline]
    pub fn complete(&mut self, t: u64, bytes: u32, direction: usize) {
        let b = self.bucket(t);
        let (n, sum) = match direction {
            crate::blk_io_trace::READ => (&mut b.reads, &mut b.read_bytes),
            crate::blk_io_trace::WRITE => (&mut b.writes, &mut b.write_bytes),
            _ => (&mut b.discards, &mut b.discard_bytes),
        };
        *n += 1;
        *sum += u64::from(bytes);
    }

    /// Takes in the seeks counted apart, over the same intervals.
    pub fn add_seeks(&mut self, seeks: &SeekCounts) {
        debug_assert_eq!(
            (self.at.origin, self.at.interval),
            (seeks.at.origin, seeks.at.interval)
        );
        self.at.overflowed |= seeks.at.overflowed;
        if let Some(last) = seeks.counts.len().checked_sub(1) {
            self.index(seeks.at.start_of(last));
        }
        for (b, n) in self.buckets.iter_mut().zip(&seeks.counts) {
            b.seeks += n;
        }
    }

    #[inline]
    pub fn q2c(&mut self, t: u64, ns: u64) {
        let b = self.bucket(t);
        b.q2c_sum += u128::from(ns);
        b.q2c_n += 1;
        b.q2c_max = b.q2c_max.max(ns);
    }

    /// The points, with start times in seconds from `trace_origin`. The last interval holds
    /// what happened up to `end` and its rates are over that part; a part shorter than half
    /// an interval is folded into the interval before it, whose rates are then over both:
    /// the last few completions over a sliver of time would read as an enormous rate (the
    /// plot's bins end a few nanoseconds short of the trace's last event, which made it
    /// one of millions of MB/s).
    pub fn finish(mut self, end: u64, trace_origin: u64) -> Vec<TimelinePoint> {
        self.advance::<true>(end);
        self.advance::<false>(end);
        let interval = self.at.interval;
        let start_of = |i: usize| self.at.start_of(i);
        let Some(last) = self.buckets.len().checked_sub(1) else {
            return Vec::new();
        };
        let covered = end.saturating_sub(start_of(last)).min(interval);
        let last_span = if last > 0 && covered < interval / 2 {
            let sliver = self.buckets.pop().unwrap_or_default();
            self.buckets[last - 1].absorb(&sliver);
            interval + covered
        } else {
            covered.max(1)
        };
        let n = self.buckets.len();
        self.buckets
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let start = start_of(i);
                let span = if i + 1 == n { last_span } else { interval } as f64;
                let dur = span / 1e9;
                TimelinePoint {
                    start: start.saturating_sub(trace_origin) as f64 / 1e9,
                    read_iops: b.reads as f64 / dur,
                    write_iops: b.writes as f64 / dur,
                    read_mb_per_s: b.read_bytes as f64 / 1e6 / dur,
                    write_mb_per_s: b.write_bytes as f64 / 1e6 / dur,
                    discard_iops: b.discards as f64 / dur,
                    discard_mb_per_s: b.discard_bytes as f64 / 1e6 / dur,
                    queue_depth: b.queue_area as f64 / span,
                    driver_depth: b.driver_area as f64 / span,
                    q2c_avg: if b.q2c_n == 0 {
                        0.0
                    } else {
                        b.q2c_sum as f64 / b.q2c_n as f64 / 1e9
                    },
                    q2c_max: b.q2c_max as f64 / 1e9,
                    seeks_per_s: b.seeks as f64 / dur,
                    interval: dur,
                }
            })
            .collect()
    }
}

/// Seeks (dispatches at a nonzero distance from the previous dispatch) per interval of a
/// device's timeline, counted apart from it: seek distances are counted on the analysis's
/// reader thread (`side.rs`), the rest of the timeline on the state machine's, and
/// [`Timeline::add_seeks`] brings them together at the end.
#[derive(Debug, Clone)]
pub struct SeekCounts {
    at: Intervals,
    counts: Vec<u64>,
}

impl SeekCounts {
    /// Over the intervals of `Timeline::new(origin, interval)`.
    pub fn new(origin: u64, interval: u64) -> Self {
        SeekCounts {
            at: Intervals::new(origin, interval),
            counts: Vec::new(),
        }
    }

    /// A dispatch at `t` moved the head.
    #[inline]
    pub fn seek(&mut self, t: u64) {
        let i = self.at.index(t);
        if i >= self.counts.len() {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += 1;
    }
}

/// One interval of the timeline (start in trace seconds).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TimelinePoint {
    pub start: f64,
    /// The interval's length in seconds, the rates' divisor: the last one ends at the
    /// trace's end, so it may be shorter than the others, or longer by less than half an
    /// interval (see [`Timeline::finish`]).
    pub interval: f64,
    pub read_iops: f64,
    pub write_iops: f64,
    pub read_mb_per_s: f64,
    pub write_mb_per_s: f64,
    /// Discards (trims) completed: no data moves, so neither reads nor writes.
    pub discard_iops: f64,
    pub discard_mb_per_s: f64,
    /// Time-weighted mean of bios queued and not yet completed.
    pub queue_depth: f64,
    /// Time-weighted mean of requests dispatched to the driver and not yet completed.
    pub driver_depth: f64,
    pub q2c_avg: f64,
    pub q2c_max: f64,
    /// Dispatches per second whose seek distance (btt's rule at D: 0 when the request overlaps
    /// the previous one, else its start minus the previous end going forward, or minus the
    /// previous start going back; the first from sector 0) is not zero.
    pub seeks_per_s: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_is_time_weighted_across_buckets() {
        let mut t = Timeline::new(0, 1000);
        t.driver_depth(500, 2); // depth 2 from 500 to 1500
        t.driver_depth(1500, 0);
        t.complete(1500, 4096, 0);
        let pts = t.finish(2000, 0);
        assert_eq!(pts.len(), 2);
        assert!((pts[0].driver_depth - 1.0).abs() < 1e-9);
        assert!((pts[1].driver_depth - 1.0).abs() < 1e-9);
        assert!(pts[1].read_iops > 0.0);
    }

    #[test]
    fn seeks_are_counted_per_interval() {
        let mut seeks = SeekCounts::new(0, 1000);
        seeks.seek(10);
        seeks.seek(20);
        seeks.seek(1500);
        let mut t = Timeline::new(0, 1000);
        t.add_seeks(&seeks);
        let pts = t.finish(2000, 0);
        // 2 seeks in the first 1000 ns bucket: 2e6 per second; 1 in the second.
        assert!((pts[0].seeks_per_s - 2.0e6).abs() < 1e-3);
        assert!((pts[1].seeks_per_s - 1.0e6).abs() < 1e-3);
    }

    #[test]
    fn a_last_sliver_is_folded_into_the_interval_before() {
        let mut t = Timeline::new(0, 1000);
        t.complete(100, 4096, 0);
        t.complete(1999, 4096, 0);
        // Past the second interval by nothing: alone, 1 IO over 1 ns would be 1e9 IOPS.
        t.complete(2000, 4096, 0);
        let pts = t.finish(2000, 0);
        assert_eq!(pts.len(), 2, "{pts:?}");
        assert!((pts[1].interval - 1000e-9).abs() < 1e-15, "{pts:?}");
        assert!((pts[1].read_iops - 2.0 / 1000e-9).abs() < 1e-3, "{pts:?}");
        // Nothing is lost: rate x length gives back every completion.
        let ios: f64 = pts.iter().map(|p| p.read_iops * p.interval).sum();
        assert!((ios - 3.0).abs() < 1e-9);
    }

    #[test]
    fn a_last_part_of_half_an_interval_or_more_stands_alone() {
        let mut t = Timeline::new(0, 1000);
        t.complete(100, 4096, 0);
        t.complete(1500, 4096, 0);
        let pts = t.finish(1600, 0);
        assert_eq!(pts.len(), 2);
        assert!((pts[1].interval - 600e-9).abs() < 1e-15);
        assert!((pts[1].read_iops - 1.0 / 600e-9).abs() < 1e-3);
    }
}
