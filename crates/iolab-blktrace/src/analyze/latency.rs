//! Latency accumulators with btt's min/avg/max/N plus percentiles, in constant memory: a
//! log-linear histogram (128 sub-buckets per power of two, so a percentile is within 0.4% of
//! the true sample) instead of storing every sample. Exact min, max and sum are kept beside it.

use serde::Serialize;

const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS;
const LINEAR: u64 = 2 * SUB;
const BUCKETS: usize = ((64 - SUB_BITS as usize) * SUB as usize) + SUB as usize;

#[inline(always)]
fn bucket(v: u64) -> usize {
    if v < LINEAR {
        v as usize
    } else {
        let msb = 63 - v.leading_zeros();
        let shift = msb - SUB_BITS;
        (((shift + 1) as u64) << SUB_BITS) as usize + ((v >> shift) & (SUB - 1)) as usize
    }
}

/// Lowest value and width of a bucket.
fn bucket_range(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < LINEAR {
        (i, 1)
    } else {
        let shift = (i >> SUB_BITS) - 1;
        let mantissa = SUB + (i & (SUB - 1));
        (mantissa << shift, 1u64 << shift)
    }
}

/// A histogram of nanosecond (or any u64) values.
#[derive(Debug, Clone, Default)]
pub struct LogHist {
    counts: Vec<u64>,
}

impl LogHist {
    #[inline(always)]
    pub fn add(&mut self, v: u64) {
        let b = bucket(v);
        debug_assert!(b < BUCKETS);
        match self.counts.get_mut(b) {
            Some(c) => *c += 1,
            None => {
                self.counts.resize(b + 1, 0);
                self.counts[b] = 1;
            }
        }
    }

    /// Adds `n` samples of the value `v`.
    pub fn add_count(&mut self, v: u64, n: u64) {
        if n > 0 {
            self.add(v);
            self.counts[bucket(v)] += n - 1;
        }
    }

    pub fn merge(&mut self, other: &LogHist) {
        if other.counts.len() > self.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
    }

    /// The value at nearest rank ceil(q * n), as the middle of its bucket.
    pub fn quantile(&self, q: f64, n: u64) -> Option<u64> {
        self.quantiles([q], n)[0]
    }

    /// [`LogHist::quantile`] of each of `qs` (ascending) in one walk of the counts: a report
    /// asks four of each of dozens of histograms, and a walk costs thousands of buckets.
    pub fn quantiles<const N: usize>(&self, qs: [f64; N], n: u64) -> [Option<u64>; N] {
        let mut found = [None; N];
        if n == 0 {
            return found;
        }
        let ranks = qs.map(|q| ((q * n as f64).ceil() as u64).clamp(1, n));
        let (mut next, mut seen, mut i) = (0, 0, 0);
        let counts = &self.counts;
        while next < N && i < counts.len() {
            // A whole octave that cannot reach the next rank is passed in one sum (which
            // the compiler vectorises); the walk goes bucket by bucket only where it must.
            // Octaves start at multiples of SUB from LINEAR on (LINEAR is one of them).
            if i >= LINEAR as usize
                && i.is_multiple_of(SUB as usize)
                && i + SUB as usize <= counts.len()
            {
                let octave: u64 = counts[i..i + SUB as usize].iter().sum();
                if seen + octave < ranks[next] {
                    seen += octave;
                    i += SUB as usize;
                    continue;
                }
            }
            seen += counts[i];
            while next < N && seen >= ranks[next] {
                let (lo, w) = bucket_range(i);
                found[next] = Some(lo + (w - 1) / 2);
                next += 1;
            }
            i += 1;
        }
        found
    }

    /// Counts per power-of-two range [2^k, 2^(k+1)) of the value, for display.
    pub fn octaves(&self) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        let linear = self.counts.len().min(LINEAR as usize);
        // Below LINEAR a bucket is one value, and octaves are 1, 1, 2, 4, ... buckets wide.
        for (v, &c) in self.counts[..linear].iter().enumerate() {
            if c == 0 {
                continue;
            }
            let floor = if v == 0 { 0 } else { 1u64 << v.ilog2() };
            match out.last_mut() {
                Some((f, n)) if *f == floor => *n += c,
                _ => out.push((floor, c)),
            }
        }
        // From LINEAR on, each run of SUB buckets is exactly one octave.
        for (k, octave) in self.counts[linear..].chunks(SUB as usize).enumerate() {
            let c: u64 = octave.iter().sum();
            if c > 0 {
                out.push((bucket_range(linear + k * SUB as usize).0, c));
            }
        }
        out
    }
}

/// One latency (Q2C, D2C, ...): btt's numbers and a histogram for percentiles.
#[derive(Debug, Clone)]
pub struct Latency {
    pub n: u64,
    pub total: u128,
    pub min: u64,
    pub max: u64,
    pub hist: LogHist,
    keep_hist: bool,
}

impl Default for Latency {
    fn default() -> Self {
        Latency {
            n: 0,
            total: 0,
            min: u64::MAX,
            max: 0,
            hist: LogHist::default(),
            keep_hist: true,
        }
    }
}

impl Latency {
    /// min/avg/max/N only; percentiles are reported as unknown (null in JSON).
    pub fn plain() -> Self {
        Latency {
            keep_hist: false,
            ..Latency::default()
        }
    }

    /// The same samples without the histogram.
    pub fn counts_only(&self) -> Self {
        Latency {
            n: self.n,
            total: self.total,
            min: self.min,
            max: self.max,
            ..Latency::plain()
        }
    }

    #[inline(always)]
    pub fn add(&mut self, ns: u64) {
        self.n += 1;
        self.total += u128::from(ns);
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
        if self.keep_hist {
            self.hist.add(ns);
        }
    }

    pub fn merge(&mut self, o: &Latency) {
        self.n += o.n;
        self.total += o.total;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
        self.hist.merge(&o.hist);
    }

    pub fn avg_ns(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.total as f64 / self.n as f64
        }
    }

    /// The JSON/report form in seconds; `None` when there are no samples.
    pub fn summary(&self) -> Option<LatencySummary> {
        if self.n == 0 {
            return None;
        }
        let [p50, p90, p99, p999] =
            self.hist
                .quantiles([0.50, 0.90, 0.99, 0.999], self.n)
                .map(|v| match v {
                    _ if !self.keep_hist => f64::NAN,
                    Some(v) => v.clamp(self.min, self.max) as f64 / 1e9,
                    None => 0.0,
                });
        Some(LatencySummary {
            min: self.min as f64 / 1e9,
            avg: self.avg_ns() / 1e9,
            max: self.max as f64 / 1e9,
            n: self.n,
            total: self.total as f64 / 1e9,
            p50,
            p90,
            p99,
            p999,
            histogram: self
                .hist
                .octaves()
                .into_iter()
                .map(|(lo, count)| HistBucket {
                    from: lo as f64 / 1e9,
                    to: if lo == 0 { 1e-9 } else { (lo * 2) as f64 / 1e9 },
                    count,
                })
                .collect(),
        })
    }
}

/// A latency in seconds with its percentiles and a power-of-two histogram. Of no sample (a
/// direction without I/O, M2D where nothing merged), its figures are null in JSON: a 0 would
/// read as a latency of no time.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencySummary {
    pub min: f64,
    pub avg: f64,
    pub max: f64,
    pub n: u64,
    /// Sum of all samples (seconds): what btt's Device Overhead divides.
    pub total: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub histogram: Vec<HistBucket>,
}

impl LatencySummary {
    /// Of no sample.
    pub fn empty() -> LatencySummary {
        LatencySummary {
            min: 0.0,
            avg: 0.0,
            max: 0.0,
            n: 0,
            total: 0.0,
            p50: 0.0,
            p90: 0.0,
            p99: 0.0,
            p999: 0.0,
            histogram: Vec::new(),
        }
    }
}

impl Serialize for LatencySummary {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let some = self.n > 0;
        let mut st = s.serialize_struct("LatencySummary", 10)?;
        for (name, v) in [("min", self.min), ("avg", self.avg), ("max", self.max)] {
            st.serialize_field(name, &some.then_some(v))?;
        }
        st.serialize_field("n", &self.n)?;
        // The sum of no sample is 0 seconds, truly.
        st.serialize_field("total", &self.total)?;
        for (name, v) in [
            ("p50", self.p50),
            ("p90", self.p90),
            ("p99", self.p99),
            ("p999", self.p999),
        ] {
            st.serialize_field(name, &some.then_some(v))?;
        }
        st.serialize_field("histogram", &self.histogram)?;
        st.end()
    }
}

/// Samples in [from, to) seconds.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HistBucket {
    pub from: f64,
    pub to: f64,
    pub count: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Of no sample, the figures are null (a 0 read as a latency of no time); of samples,
    /// numbers.
    #[test]
    fn an_empty_latency_has_null_figures_in_json() {
        let empty = serde_json::to_value(LatencySummary::empty()).unwrap();
        for k in ["min", "avg", "max", "p50", "p99", "p999"] {
            assert!(empty[k].is_null(), "{k}: {empty}");
        }
        assert_eq!(empty["n"], 0);
        let mut l = Latency::default();
        l.add(2_000);
        let one = serde_json::to_value(l.summary().unwrap()).unwrap();
        assert_eq!(one["avg"], 2e-6, "{one}");
        assert!(one["p99"].is_number(), "{one}");
    }

    #[test]
    fn buckets_are_contiguous_and_cover_u64() {
        let mut last = 0;
        for v in [0u64, 1, 255, 256, 257, 511, 512, 1 << 20, u64::MAX] {
            let b = bucket(v);
            assert!(b >= last && b < BUCKETS, "{v}");
            let (lo, w) = bucket_range(b);
            assert!(lo <= v && v - lo < w, "{v} in [{lo}, +{w})");
            last = b;
        }
    }

    #[test]
    fn quantiles_in_one_walk_are_the_nearest_ranks_buckets() {
        let mut h = LogHist::default();
        let mut values = Vec::new();
        let mut x = 7u64;
        for _ in 0..5000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Spread over six decades, with repeats, so ranks fall in many buckets.
            let v = (x >> 40) % 1_000_000 * ((x >> 20) % 4 + 1);
            h.add(v);
            values.push(v);
        }
        values.sort_unstable();
        let n = values.len() as u64;
        let qs = [0.0, 0.001, 0.5, 0.9, 0.99, 0.999, 1.0];
        let middle = |v: u64| {
            let (lo, w) = bucket_range(bucket(v));
            lo + (w - 1) / 2
        };
        let want = qs.map(|q| {
            let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
            Some(middle(values[rank as usize - 1]))
        });
        assert_eq!(h.quantiles(qs, n), want);
        assert_eq!(h.quantile(0.9, n), want[3]);
        assert_eq!(LogHist::default().quantiles([0.5, 0.9], 0), [None, None]);
    }

    #[test]
    fn octaves_sum_the_buckets_of_each_power_of_two() {
        let mut h = LogHist::default();
        let mut x = 11u64;
        let mut want = std::collections::BTreeMap::new();
        for _ in 0..5000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // From 0 to about 10^12, so both the linear buckets and many octaves are used.
            let v = (x >> 24) >> ((x >> 8) % 40);
            h.add(v);
            let (lo, _) = bucket_range(bucket(v));
            let floor = if lo == 0 { 0 } else { 1u64 << lo.ilog2() };
            *want.entry(floor).or_insert(0u64) += 1;
        }
        let want: Vec<(u64, u64)> = want.into_iter().collect();
        assert_eq!(h.octaves(), want);
        assert!(want.len() > 20, "{want:?}");
    }

    #[test]
    fn percentiles_are_close_to_exact() {
        let mut l = Latency::default();
        for v in 1..=100_000u64 {
            l.add(v * 1000);
        }
        let s = l.summary().unwrap();
        let close = |got: f64, want: f64| (got - want).abs() / want < 0.005;
        assert!(close(s.p50, 0.05), "{}", s.p50);
        assert!(close(s.p99, 0.099), "{}", s.p99);
        assert!(close(s.p999, 0.0999), "{}", s.p999);
        assert_eq!(s.n, 100_000);
        assert!((s.avg - 0.0500005).abs() < 1e-9);
        assert_eq!(s.min, 1e-6);
    }
}
