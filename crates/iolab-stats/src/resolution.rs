//! How finely a metric was measured, where that is coarser than its digits suggest.
//!
//! A latency percentile from fio or from a trace is not a sample's value but the value that
//! stands for a histogram bucket: fio keeps 64 buckets per power of two (its json prints
//! each bucket's middle), iolab's trace analysis 128. Runs whose true percentiles differ by
//! a tenth of a percent then print the same number, or numbers one bucket apart, and a CI
//! drawn from those numbers alone has no width: `+-0.0%` in `show`, `+1.6% [+1.6%, +1.6%]`
//! in `compare` for two configurations a bucket apart, whose true difference may be nearly
//! nothing. A [`Resolution`] says how far such a value may be from what was measured, so
//! that an interval is never narrower than that.

use serde::Serialize;

/// Values that are log-linear histogram buckets' representatives: `2^sub_bits` buckets per
/// power of two, counted in a unit `units_per_value` times finer than the metric's (1000
/// for nanosecond buckets of a metric in microseconds). Below `2^(sub_bits + 1)` units every
/// bucket holds one value, so those are exact.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Resolution {
    pub sub_bits: u32,
    pub units_per_value: f64,
}

impl Resolution {
    /// fio's completion-latency histogram (`FIO_IO_U_PLAT_BITS` = 6, in ns), for a metric
    /// in microseconds: within 0.4 to 0.8% of the value.
    pub const FIO_NS_AS_US: Resolution = Resolution {
        sub_bits: 6,
        units_per_value: 1000.0,
    };

    /// iolab's trace latency histogram (128 buckets per power of two, in ns), for a metric
    /// in microseconds: within 0.2 to 0.4% of the value.
    pub const TRACE_NS_AS_US: Resolution = Resolution {
        sub_bits: 7,
        units_per_value: 1000.0,
    };

    /// The bucket a value stands for, `[low, high]` in the metric's unit: every value that
    /// could have been measured as it. A representative shares its highest bit with the
    /// bucket, which sets the width, and buckets start at multiples of their width. Exact
    /// in integers, so that two neighbouring buckets share an edge to the last bit.
    pub fn bucket(&self, value: f64) -> (f64, f64) {
        let units = (value * self.units_per_value).round();
        // Past 2^62 units (53 days in ns) no latency histogram has a bucket to stand for.
        if !(units >= (2u64 << self.sub_bits) as f64 && units < (1u64 << 62) as f64) {
            return (value, value);
        }
        let units = units as u64;
        let shift = (63 - units.leading_zeros()) - self.sub_bits;
        let low = units >> shift << shift;
        let high = low + (1 << shift);
        (
            low as f64 / self.units_per_value,
            high as f64 / self.units_per_value,
        )
    }

    /// The low and the high edges of the values' buckets, in the values' order. The edges
    /// grow with the value, so any median or mean of the true values lies between the same
    /// statistic of the low edges and of the high ones.
    pub fn edges(&self, values: &[f64]) -> (Vec<f64>, Vec<f64>) {
        values.iter().map(|&v| self.bucket(v)).unzip()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// fio's bucket of 1,056,768 ns (its print of a p99) is index 1,040: 16,384 ns wide,
    /// from 1,048,576 to 1,064,960 (fio's `plat_idx_to_val` gives its middle).
    #[test]
    fn a_percentile_stands_for_its_whole_bucket() {
        let fio = Resolution::FIO_NS_AS_US;
        assert_eq!(fio.bucket(1056.768), (1048.576, 1064.96));
        // The next bucket starts where that one ends, to the last bit.
        assert_eq!(fio.bucket(1073.152), (1064.96, 1081.344));
        // The last bucket below 2^20 ns is 8,192 ns wide.
        assert_eq!(fio.bucket(1044.48), (1040.384, 1048.576));
        // Below 128 ns a bucket holds one value; from there two.
        assert_eq!(fio.bucket(0.127), (0.127, 0.127));
        assert_eq!(fio.bucket(0.129), (0.128, 0.13));
        // The trace's buckets are half as wide; its representative is the middle rounded
        // down.
        assert_eq!(
            Resolution::TRACE_NS_AS_US.bucket(1052.671),
            (1048.576, 1056.768)
        );
        assert!(fio.bucket(f64::NAN).0.is_nan());
    }

    #[test]
    fn the_edges_keep_the_values_order_and_the_trace_starts_at_256_ns() {
        let fio = Resolution::FIO_NS_AS_US;
        let (low, high) = fio.edges(&[1073.152, 1056.768]);
        assert_eq!(low, [1064.96, 1048.576]);
        assert_eq!(high, [1081.344, 1064.96]);
        let trace = Resolution::TRACE_NS_AS_US;
        assert_eq!(trace.bucket(0.255), (0.255, 0.255));
        assert_eq!(trace.bucket(0.257), (0.256, 0.258));
        assert_eq!(fio.bucket(1e16), (1e16, 1e16));
    }
}
