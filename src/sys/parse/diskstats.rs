//! /proc/diskstats: one line per block device and partition, `major minor name` then 11
//! counters (14 fields, kernels before 4.18), 15 (18 fields, discards added in 4.18) or 17
//! (20 fields, flushes added in 5.5). Times are milliseconds, sectors are 512 bytes whatever
//! the device's block size.

use super::{number, ParseError};

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct DiskStat {
    pub major: u32,
    pub minor: u32,
    pub name: String,
    pub reads: u64,
    pub reads_merged: u64,
    pub sectors_read: u64,
    pub read_ms: u64,
    pub writes: u64,
    pub writes_merged: u64,
    pub sectors_written: u64,
    pub write_ms: u64,
    /// Requests in flight at the moment of reading (a gauge, not a counter).
    pub in_flight: u64,
    /// Milliseconds the device had I/O in flight (iostat's %util numerator).
    pub io_ms: u64,
    /// Time-weighted milliseconds in flight (iostat's aqu-sz numerator).
    pub weighted_io_ms: u64,
    /// Present from Linux 4.18.
    pub discards: Option<Discards>,
    /// Present from Linux 5.5.
    pub flushes: Option<Flushes>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Discards {
    pub discards: u64,
    pub discards_merged: u64,
    pub sectors_discarded: u64,
    pub discard_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Flushes {
    pub flushes: u64,
    pub flush_ms: u64,
}

/// Parses the whole text of /proc/diskstats.
pub(crate) fn diskstats(text: &str) -> Result<Vec<DiskStat>, ParseError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        out.push(diskstat_line(line, i + 1)?);
    }
    Ok(out)
}

/// Parses one line; exposed so the sampler can parse line by line into reused storage.
pub(crate) fn diskstat_line(line: &str, lineno: usize) -> Result<DiskStat, ParseError> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if !matches!(f.len(), 14 | 18 | 20) {
        return Err(ParseError::new(
            lineno,
            format!("expected 14, 18 or 20 fields, found {}", f.len()),
        ));
    }
    let n = |i: usize, what: &str| number(f[i], what, lineno);
    let major = n(0, "major")? as u32;
    let minor = n(1, "minor")? as u32;
    Ok(DiskStat {
        major,
        minor,
        name: f[2].to_string(),
        reads: n(3, "reads")?,
        reads_merged: n(4, "reads merged")?,
        sectors_read: n(5, "sectors read")?,
        read_ms: n(6, "read ms")?,
        writes: n(7, "writes")?,
        writes_merged: n(8, "writes merged")?,
        sectors_written: n(9, "sectors written")?,
        write_ms: n(10, "write ms")?,
        in_flight: n(11, "in flight")?,
        io_ms: n(12, "io ms")?,
        weighted_io_ms: n(13, "weighted io ms")?,
        discards: if f.len() >= 18 {
            Some(Discards {
                discards: n(14, "discards")?,
                discards_merged: n(15, "discards merged")?,
                sectors_discarded: n(16, "sectors discarded")?,
                discard_ms: n(17, "discard ms")?,
            })
        } else {
            None
        },
        flushes: if f.len() == 20 {
            Some(Flushes {
                flushes: n(18, "flushes")?,
                flush_ms: n(19, "flush ms")?,
            })
        } else {
            None
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_kernel_generations() {
        let text = "   8       0 sda 100 2 3000 40 50 6 700 80 1 90 120\n\
   8       1 sda1 1 2 3 4 5 6 7 8 0 10 11 12 13 14 15\n\
 254       0 vda 29449 5398 2600554 61263 3379 8942 987560 12195 0 20340 74041 3600 72 220832 477 473 104\n";
        let d = diskstats(text).unwrap();
        assert_eq!(d.len(), 3);
        assert_eq!(d[0].name, "sda");
        assert_eq!(d[0].weighted_io_ms, 120);
        assert!(d[0].discards.is_none() && d[0].flushes.is_none());
        assert_eq!(d[1].discards.unwrap().discard_ms, 15);
        assert!(d[1].flushes.is_none());
        assert_eq!((d[2].major, d[2].minor), (254, 0));
        assert_eq!(d[2].sectors_read, 2600554);
        assert_eq!(d[2].flushes.unwrap().flushes, 473);
    }

    #[test]
    fn truncated_or_garbage_lines_name_the_line() {
        let e = diskstats("8 0 sda 1 2 3 4 5 6 7 8 9 10 11\n8 0 sdb 1 2\n").unwrap_err();
        assert_eq!(e.line, 2);
        let e = diskstats("8 0 sda 1 2 3 4 5 6 7 8 9 10 x\n").unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.message.contains("weighted"), "{e}");
    }
}
