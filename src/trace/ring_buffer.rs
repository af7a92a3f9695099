//! The tracefs ring buffer's own pages, read per CPU from `per_cpu/cpuN/trace_pipe_raw`, and
//! the blk tracer's entries in them turned back into blktrace records.
//!
//! Why not `trace_pipe`: it hands over one event per step, merging the CPUs' buffers in the
//! kernel as it goes, so beside a busy fio the recorder took a third of the CPU, fell behind
//! and let the buffer fill. A page read costs one copy of a page and no kernel work per event.
//!
//! What a page holds is described by tracefs itself (`events/header_page` for the page header,
//! `events/header_event` for the event header, the same on every kernel since 2.6.3x): a
//! timestamp, a commit word (bytes used, and flags for events lost before the page), then
//! events, each a 32-bit header (`type_len`: 5 bits, `time_delta`: 27 bits) and its data.
//! The blk tracer's entry is `struct blk_io_trace` whose first 16 bytes (magic, sequence,
//! time) hold the generic trace entry header instead; `trace_pipe`'s binary output rebuilds
//! them from the event's time, and so does [`blk_event`].

use std::path::Path;

use anyhow::{bail, Context};

use super::blk_io_trace::{self, Event, MAGIC, V7_HEADER};

/// `type_len` values with a meaning of their own; 1 to 28 are data of `4 * type_len` bytes, 0
/// is data whose length is in the next word.
const PADDING: u32 = 29;
const TIME_EXTEND: u32 = 30;
const TIME_STAMP: u32 = 31;
/// Commit word flags: events were lost before this page; and their number is stored after
/// the page's data.
const MISSED_EVENTS: u64 = 1 << 31;
const MISSED_STORED: u64 = 1 << 30;
/// An absolute time stamp carries 59 bits; the reader keeps the top ones.
const TS_MSB: u64 = 0xf8 << 56;

/// Where a page's fields are, as tracefs describes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PageLayout {
    commit_offset: usize,
    commit_size: usize,
    data_offset: usize,
    /// Bytes per page (a "sub-buffer" since 6.7, where it may be set larger than the
    /// memory page): what one read of `trace_pipe_raw` returns.
    pub(crate) page_size: usize,
}

impl PageLayout {
    pub(crate) fn read(tracefs: &Path) -> anyhow::Result<PageLayout> {
        let header = tracefs.join("events/header_page");
        let text = read_at_once(&header)?;
        let page_size = match std::fs::read_to_string(tracefs.join("buffer_subbuf_size_kb")) {
            Ok(kb) => {
                kb.trim()
                    .parse::<usize>()
                    .context("buffer_subbuf_size_kb")?
                    * 1024
            }
            // Kernels before 6.7: one memory page.
            // SAFETY: sysconf reads a constant of the system.
            Err(_) => (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }) as usize,
        };
        PageLayout::parse(&text, page_size).with_context(|| format!("{}", header.display()))
    }

    /// From `events/header_page` ("field: local_t commit;\toffset:8;\tsize:8;...").
    fn parse(text: &str, page_size: usize) -> anyhow::Result<PageLayout> {
        let field = |name: &str| -> Option<(usize, usize)> {
            let line = text.lines().find(|l| {
                l.split(';')
                    .next()
                    .and_then(|f| f.split_whitespace().last())
                    == Some(name)
            })?;
            let number = |key: &str| -> Option<usize> {
                line.split(';')
                    .find_map(|part| part.trim().strip_prefix(key))
                    .and_then(|v| v.trim().parse().ok())
            };
            Some((number("offset:")?, number("size:")?))
        };
        let (Some((commit_offset, commit_size)), Some((data_offset, _))) =
            (field("commit"), field("data"))
        else {
            bail!("no commit or data field in the page header format");
        };
        if !matches!(commit_size, 4 | 8) || commit_offset + commit_size > data_offset {
            bail!("an unexpected page header (commit at {commit_offset}, {commit_size} bytes)");
        }
        if page_size <= data_offset {
            bail!("a page of {page_size} bytes cannot hold its header");
        }
        Ok(PageLayout {
            commit_offset,
            commit_size,
            data_offset,
            page_size,
        })
    }

    fn word(&self, page: &[u8], at: usize) -> Option<u64> {
        let b = page.get(at..at + self.commit_size)?;
        Some(match self.commit_size {
            4 => u64::from(u32::from_ne_bytes(b.try_into().ok()?)),
            _ => u64::from_ne_bytes(b.try_into().ok()?),
        })
    }
}

/// A tracefs file read with one large buffer: `events/header_page` answers only the first
/// read it gets (a small first read, as `read_to_string` makes, cuts it short).
fn read_at_once(path: &Path) -> anyhow::Result<String> {
    use std::io::Read;
    let mut buf = vec![0u8; 64 << 10];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut buf))
        .with_context(|| format!("reading {}", path.display()))?;
    buf.truncate(n);
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

fn u32_at(page: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(page.get(at..at + 4)?.try_into().ok()?))
}

/// Calls `each(time, data)` for every data event of one page in order, and returns how many
/// events the kernel says were lost before the page (at least 1 when it lost some without
/// counting them).
pub(crate) fn events(
    layout: &PageLayout,
    page: &[u8],
    mut each: impl FnMut(u64, &[u8]),
) -> anyhow::Result<u64> {
    let bad = |what: &str| anyhow::anyhow!("a malformed ring buffer page: {what}");
    let mut time = page
        .get(..8)
        .map(|b| u64::from_ne_bytes(b.try_into().unwrap()))
        .ok_or_else(|| bad("shorter than its header"))?;
    // The flags are `int` constants in a `long`: on 64-bit kernels bit 31 comes sign-extended
    // over the upper half. Only the low 32 bits mean anything.
    let commit = layout
        .word(page, layout.commit_offset)
        .ok_or_else(|| bad("shorter than its header"))? as u32 as u64;
    let used = (commit & !(MISSED_EVENTS | MISSED_STORED)) as usize;
    let end = layout.data_offset + used;
    if end > page.len() {
        return Err(bad(&format!("{used} bytes used of {}", page.len())));
    }
    let missed = match (commit & MISSED_EVENTS != 0, commit & MISSED_STORED != 0) {
        (false, _) => 0,
        (true, true) => layout.word(page, end).unwrap_or(1).max(1),
        (true, false) => 1,
    };
    let mut at = layout.data_offset;
    while at + 4 <= end {
        let head = u32_at(page, at).unwrap();
        let (type_len, delta) = (head & 0x1f, u64::from(head >> 5));
        let array = || {
            u32_at(page, at + 4)
                .map(u64::from)
                .ok_or_else(|| bad("a cut event"))
        };
        match type_len {
            // The rest of the page is unused, or a discarded event of a given length.
            PADDING if delta == 0 => break,
            PADDING => at += 4 + array()? as usize,
            TIME_EXTEND => {
                time += array()? << 27 | delta;
                at += 8;
            }
            TIME_STAMP => {
                let stamp = array()? << 27 | delta;
                time = stamp | (time & TS_MSB);
                at += 8;
            }
            0 => {
                // The length word counts itself.
                let len = array()? as usize;
                let data = page
                    .get(at + 8..at + 4 + len)
                    .filter(|_| len >= 4 && at + 4 + len <= end)
                    .ok_or_else(|| bad("an event past the page's end"))?;
                time += delta;
                each(time, data);
                at += 4 + len;
            }
            n => {
                let len = 4 * n as usize;
                let data = page
                    .get(at + 4..at + 4 + len)
                    .filter(|_| at + 4 + len <= end)
                    .ok_or_else(|| bad("an event past the page's end"))?;
                time += delta;
                each(time, data);
                at += 4 + len;
            }
        }
    }
    Ok(missed)
}

/// The blktrace record of a blk tracer entry `data` at `time`, if it is one for one of
/// `devices` (kernel dev_t): an entry of the same size and device, with a payload that fits, built into
/// `scratch` as `trace_pipe` would write it (version 7, sequence 0) and decoded. Anything else
/// in the buffer (events another user enabled) gives None.
pub(crate) fn blk_event(
    time: u64,
    data: &[u8],
    devices: &[u32],
    scratch: &mut Vec<u8>,
) -> Option<Event> {
    let field = |at: usize| u32_at(data, at);
    let pdu_len = usize::from(u16::from_ne_bytes(data.get(46..48)?.try_into().ok()?));
    let len = V7_HEADER + pdu_len;
    // Entries are padded to 4 bytes, and to 8 where the ring buffer aligns so.
    if data.len() < len || data.len() >= len + 8 || !devices.contains(&field(36)?) {
        return None;
    }
    scratch.clear();
    scratch.extend_from_slice(&(MAGIC | 7).to_ne_bytes());
    scratch.extend_from_slice(&0u32.to_ne_bytes());
    scratch.extend_from_slice(&time.to_ne_bytes());
    scratch.extend_from_slice(&data[16..len]);
    blk_io_trace::decode(scratch).ok().map(|(ev, _)| ev)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::blk_io_trace::{action, category, code, Payload};

    const HEADER_PAGE: &str = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\
        \tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\
        \tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\
        \tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n";

    fn layout() -> PageLayout {
        PageLayout::parse(HEADER_PAGE, 4096).unwrap()
    }

    #[test]
    fn the_page_header_format_gives_the_layout() {
        assert_eq!(
            layout(),
            PageLayout {
                commit_offset: 8,
                commit_size: 8,
                data_offset: 16,
                page_size: 4096
            }
        );
        let small = HEADER_PAGE.replace("size:8;\tsigned:1", "size:4;\tsigned:1");
        let small = small.replace("offset:16", "offset:12");
        assert_eq!(PageLayout::parse(&small, 4096).unwrap().commit_size, 4);
        assert!(PageLayout::parse("field: u64 timestamp;\toffset:0;\tsize:8;", 4096).is_err());
        assert!(PageLayout::parse(HEADER_PAGE, 16).is_err());
    }

    /// An entry as the blk tracer writes it: the generic header where magic and sequence
    /// were, an unwritten time, then the record from its sector on.
    fn entry(sector: u64, code: u8, pdu: &[u8]) -> Vec<u8> {
        let ev = Event {
            sector,
            bytes: 4096,
            action: action(code, category::READ),
            pid: 42,
            device: 7 << 20 | 3,
            cpu: 1,
            payload: if pdu.is_empty() {
                Payload::None
            } else {
                Payload::Raw(pdu.into())
            },
            ..Event::default()
        };
        let mut out = Vec::new();
        blk_io_trace::encode(&ev, 7, blk_io_trace::Endian::native(), &mut out);
        out[..8].copy_from_slice(&[14, 0, 1, 1, 42, 0, 0, 0]);
        out[8..16].copy_from_slice(&0xdead_beefu64.to_ne_bytes());
        out
    }

    /// A page of `events` (header words and data), with `flags` in its commit word.
    fn page(time: u64, events: &[Vec<u8>], flags: u64, missed: Option<u64>) -> Vec<u8> {
        let body: Vec<u8> = events.concat();
        let mut p = vec![0u8; 4096];
        p[..8].copy_from_slice(&time.to_ne_bytes());
        p[8..16].copy_from_slice(&(body.len() as u64 | flags).to_ne_bytes());
        p[16..16 + body.len()].copy_from_slice(&body);
        if let Some(n) = missed {
            p[16 + body.len()..24 + body.len()].copy_from_slice(&n.to_ne_bytes());
        }
        p
    }

    fn small(delta: u32, data: &[u8]) -> Vec<u8> {
        let words = data.len().div_ceil(4);
        let mut e = ((delta << 5) | words as u32).to_ne_bytes().to_vec();
        e.extend_from_slice(data);
        e.resize(4 + 4 * words, 0);
        e
    }

    #[test]
    fn events_follow_deltas_extends_stamps_and_skip_padding() {
        let a = entry(8, code::QUEUE, &[]);
        let mut large = (0u32 << 5).to_ne_bytes().to_vec(); // type_len 0, delta 0
        let big = entry(16, code::UNPLUG_IO, &[0u8; 72]);
        large.extend_from_slice(&(big.len() as u32 + 4).to_ne_bytes());
        large.extend_from_slice(&big);
        let mut extend = ((3u32 << 5) | TIME_EXTEND).to_ne_bytes().to_vec();
        extend.extend_from_slice(&2u32.to_ne_bytes()); // 2 << 27 | 3
                                                       // A discarded event of 12 bytes of data: its length word is the first of them.
        let mut discarded = ((1u32 << 5) | PADDING).to_ne_bytes().to_vec();
        discarded.extend_from_slice(&12u32.to_ne_bytes());
        discarded.extend_from_slice(&[0xff; 8]);
        let mut stamp = ((5u32 << 5) | TIME_STAMP).to_ne_bytes().to_vec();
        stamp.extend_from_slice(&1u32.to_ne_bytes()); // 1 << 27 | 5
        let p = page(
            1000,
            &[
                small(10, &a),
                large,
                extend,
                small(0, &a),
                discarded,
                small(7, &a),
                stamp,
                small(0, &a),
            ],
            0,
            None,
        );
        let mut seen = Vec::new();
        let lost = events(&layout(), &p, |t, d| seen.push((t, d.len()))).unwrap();
        assert_eq!(lost, 0);
        let ext = 1010 + (2u64 << 27 | 3);
        assert_eq!(
            seen,
            [
                (1010, 48),
                (1010, 48 + 72),
                (ext, 48),
                (ext + 7, 48),
                ((1 << 27) | 5, 48)
            ]
        );
    }

    #[test]
    fn a_page_after_lost_events_says_how_many() {
        let a = small(0, &entry(8, code::QUEUE, &[]));
        // As a 64-bit kernel writes the flags: sign-extended.
        let flags = (MISSED_EVENTS | MISSED_STORED) | 0xffff_ffff << 32;
        let p = page(0, std::slice::from_ref(&a), flags, Some(1234));
        assert_eq!(events(&layout(), &p, |_, _| {}).unwrap(), 1234);
        let p = page(0, std::slice::from_ref(&a), MISSED_EVENTS, None);
        assert_eq!(events(&layout(), &p, |_, _| {}).unwrap(), 1);
        // A commit word past the page is an error, not a read out of bounds.
        let mut p = page(0, &[a], 0, None);
        p[8..16].copy_from_slice(&5000u64.to_ne_bytes());
        assert!(events(&layout(), &p, |_, _| {}).is_err());
    }

    #[test]
    fn entries_become_the_records_trace_pipe_would_write() {
        let mut scratch = Vec::new();
        let dev = 7 << 20 | 3;
        let q = entry(8, code::QUEUE, &[]);
        let ev = blk_event(5_000, &q, &[dev], &mut scratch).unwrap();
        assert_eq!(
            (ev.time, ev.sector, ev.bytes, ev.pid, ev.cpu),
            (5_000, 8, 4096, 42, 1)
        );
        assert_eq!((ev.code(), ev.device, ev.sequence), (code::QUEUE, dev, 0));
        let u = entry(0, code::UNPLUG_IO, &1u64.to_be_bytes());
        let ev = blk_event(6_000, &u, &[dev], &mut scratch).unwrap();
        assert_eq!(ev.payload, Payload::Count(1));
        // Another device's, a shorter or a longer entry are not ours.
        assert!(blk_event(0, &q, &[dev + 1], &mut scratch).is_none());
        assert!(blk_event(0, &q, &[dev + 1, dev], &mut scratch).is_some());
        assert!(blk_event(0, &q[..40], &[dev], &mut scratch).is_none());
        let mut long = q.clone();
        long.extend_from_slice(&[0; 16]);
        assert!(blk_event(0, &long, &[dev], &mut scratch).is_none());
    }

    /// The events of a page read from a live kernel's per_cpu/cpu0/trace_pipe_raw while `dd`
    /// read three 4 KiB blocks (direct) from /dev/loop0, as (time, event), and their codes.
    fn live_page(name: &str) -> (Vec<(u64, Event)>, String) {
        let p = std::fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/trace")
                .join(name),
        )
        .unwrap();
        let mut scratch = Vec::new();
        let mut seen = Vec::new();
        let lost = events(&layout(), &p, |t, d| {
            seen.push((t, blk_event(t, d, &[7 << 20], &mut scratch).unwrap()))
        })
        .unwrap();
        assert_eq!(lost, 0);
        let codes: String = seen
            .iter()
            .map(|(_, e)| match e.code() {
                1 => 'Q',
                4 => 'G',
                9 => 'P',
                10 => 'U',
                12 => 'I',
                7 => 'D',
                8 => 'C',
                _ => '?',
            })
            .collect();
        (seen, codes)
    }

    /// Linux 6.18, no scheduler: each read queued, got a request, plugged, unplugged, was
    /// issued and completed.
    #[test]
    fn a_page_from_a_live_kernel_decodes() {
        let (seen, codes) = live_page("raw-page-6.18.bin");
        assert_eq!(codes, "QGPUDCQGPUDCQGPUDC");
        let sectors: Vec<u64> = seen.iter().step_by(6).map(|(_, e)| e.sector).collect();
        assert_eq!(sectors, [0, 8, 16]);
        check_live(&seen);
    }

    /// Debian's 6.1 (a lab guest), mq-deadline: the same reads, each inserted into the
    /// scheduler (their completions ran on another CPU: not in CPU 0's page). The blk
    /// tracer's entry has another type number there (13, not 14), which is why entries are
    /// recognised by size and device.
    #[test]
    fn a_page_from_debians_6_1_decodes() {
        let (seen, codes) = live_page("raw-page-6.1.bin");
        assert_eq!(codes, "QGIDQGIDQGID");
        let sectors: Vec<u64> = seen.iter().step_by(4).map(|(_, e)| e.sector).collect();
        assert_eq!(sectors, [0, 8, 16]);
        check_live(&seen);
    }

    fn check_live(seen: &[(u64, Event)]) {
        assert!(seen.windows(2).all(|w| w[0].0 <= w[1].0), "times in order");
        assert!(seen.iter().all(|(_, e)| e.device == 7 << 20 && e.cpu == 0));
        assert!(seen
            .iter()
            .filter(|(_, e)| e.code() != 9 && e.code() != 10)
            .all(|(_, e)| e.bytes == 4096));
    }
}
