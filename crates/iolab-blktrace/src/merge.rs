//! Merges several record streams (one per CPU, or several traces) into one stream ordered by
//! time, holding only each stream's position: memory does not grow with trace length.
//! Ties keep the order of the inputs, so records of one CPU stay in their recorded order.
//!
//! The batch reader takes a stream's records as a run, for as long as they come before every
//! other stream's next one, through the stream's own fast decoder: a CPU's records come in
//! runs (about five on average in a trace of a loop device on two CPUs). Decoding each record
//! fully and passing it through a heap made a two-file trace take 1.5 times as long as the
//! same trace merged by blkparse into one file.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::Read;
use std::path::PathBuf;

use super::blk_io_trace::Event;
use super::stream::{resolve_input, RecordStream, Source, TraceError};

/// A time-ordered merge of streams.
pub struct Merged<R> {
    streams: Vec<RecordStream<R>>,
    /// The time of each unfinished stream's next record, with the stream's index: the
    /// earliest on top, the earlier stream on ties.
    heads: BinaryHeap<Reverse<(u64, usize)>>,
    primed: bool,
    failed: bool,
    /// Which input (name on the command line) each stream belongs to, and the inputs' names.
    input_of: Vec<usize>,
    inputs: Vec<String>,
    /// Each stream's first and last record time seen (`u64::MAX, 0` before any).
    spans: Vec<(u64, u64)>,
}

impl<R: Read> Merged<R> {
    pub fn new(streams: Vec<RecordStream<R>>) -> Self {
        let n = streams.len();
        Merged {
            streams,
            heads: BinaryHeap::with_capacity(n),
            primed: false,
            failed: false,
            input_of: vec![0; n],
            inputs: vec![String::new()],
            spans: vec![(u64::MAX, 0); n],
        }
    }

    /// Notes that stream `i` holds an I/O record at `t` (notify records are left out: a
    /// blkparse-merged file keeps its process names at the boot clock's time, its I/O from 0).
    #[inline]
    fn saw(&mut self, i: usize, t: u64) {
        let s = &mut self.spans[i];
        s.0 = s.0.min(t);
        s.1 = s.1.max(t);
    }

    /// Said when the inputs, read to their end, cannot be one trace: one whose records all
    /// come after another's have ended was recorded at another time (or holds times on
    /// another clock: blkparse's merged files start at 0, tracefs records at the boot
    /// clock's time). Merged, the two read as one trace with a gap, and its rates, Q2Q and
    /// seeks are wrong. Several inputs of one time (each CPU's file, devices recorded apart
    /// together) overlap.
    pub fn inputs_apart(&self) -> Option<String> {
        let mut spans: Vec<(u64, u64, &str)> = Vec::new();
        for (input, name) in self.inputs.iter().enumerate() {
            let (first, last) = self
                .spans
                .iter()
                .zip(&self.input_of)
                .filter(|(s, of)| **of == input && s.0 <= s.1)
                .fold((u64::MAX, 0), |(f, l), (s, _)| (f.min(s.0), l.max(s.1)));
            if first <= last {
                spans.push((first, last, name));
            }
        }
        // blkparse writes a merged file's times from its own first record, which is at 0:
        // two such files share no clock, though both seem to begin together.
        if let [a, b, ..] = spans
            .iter()
            .filter(|s| s.0 == 0)
            .map(|s| s.2)
            .collect::<Vec<_>>()[..]
        {
            return Some(format!(
                "{a} and {b} both begin at time 0: each is a merged trace (blkparse -d counts \
                 times from its own first record), so their clocks cannot be lined up, and \
                 merged they would read as one recording; analyse each apart, or compare them \
                 (`iolab trace compare A B`)"
            ));
        }
        spans.sort();
        let mut ended = spans.first()?.1;
        let mut latest = spans.first()?.2;
        for &(first, last, name) in &spans[1..] {
            if first > ended {
                return Some(format!(
                    "{name} begins {:.3} s after {latest} ends: they are not one recording (or \
                     not of one clock: a blkparse-merged file starts at time 0), and merged \
                     they would read as one trace with a gap; analyse each apart, or compare \
                     them (`iolab trace compare A B`)",
                    (first - ended) as f64 / 1e9
                ));
            }
            if last > ended {
                ended = last;
                latest = name;
            }
        }
        None
    }

    /// Puts stream `i`'s next record on the heap (nothing when the stream has ended).
    fn push_head(&mut self, i: usize) -> Result<(), TraceError> {
        match self.streams[i].peek_time() {
            Some(Ok((t, notify))) => {
                // A notify record (a process name, a message) goes with the records before
                // it in its stream, not by its own time, which may be on another clock: a
                // blkparse-merged file keeps the process names' boot-clock times before I/O
                // timed from 0, and a CPU's part of it, ordered by those times, held back
                // every record of its CPU until the other CPUs' had all gone.
                let key = if notify {
                    t.min(self.spans[i].1)
                } else {
                    self.saw(i, t);
                    t
                };
                self.heads.push(Reverse((key, i)));
                Ok(())
            }
            Some(Err(e)) => {
                self.failed = true;
                Err(e)
            }
            None => Ok(()),
        }
    }

    fn prime(&mut self) -> Result<(), TraceError> {
        if !self.primed {
            self.primed = true;
            for i in 0..self.streams.len() {
                self.push_head(i)?;
            }
            if let Some(why) = self.copies() {
                self.failed = true;
                return Err(TraceError::Input(why));
            }
        }
        Ok(())
    }

    /// Said when two streams begin with the same record, byte for byte (time, sector, CPU
    /// and sequence number): copies of one recording, whose records would count twice
    /// (another name, a gzip copy, the same files exported elsewhere). Two recordings, or
    /// two CPUs of one, never begin alike.
    fn copies(&self) -> Option<String> {
        for (i, a) in self.streams.iter().enumerate() {
            let first = a.next_header();
            if first.len() < crate::blk_io_trace::V7_HEADER {
                continue;
            }
            if let Some(b) = self.streams[i + 1..]
                .iter()
                .find(|b| b.next_header() == first)
            {
                return Some(format!(
                    "{} and {} begin with the same record (time, sector, CPU and sequence \
                     number alike): copies of one recording, whose records would count twice; \
                     name one of them",
                    a.name(),
                    b.name()
                ));
            }
        }
        None
    }

    /// Appends records in time order to `out` until it holds `max`, offering each to `keep`
    /// first (see [`RecordStream::read_io_batch`]); returns false at the end of input.
    pub fn read_io_batch(
        &mut self,
        out: &mut super::stream::IoBatch,
        max: usize,
        keep: &mut impl FnMut(&super::blk_io_trace::Io) -> bool,
    ) -> Result<bool, TraceError> {
        if self.failed {
            return Ok(false);
        }
        if self.streams.len() == 1 {
            let r = self.streams[0].read_io_batch(out, max, keep);
            if r.is_err() {
                self.failed = true;
            }
            return r;
        }
        self.prime()?;
        while out.ios.len() < max {
            let Some(Reverse((_, i))) = self.heads.pop() else {
                return Ok(false);
            };
            // Stream i's records go first while they come before the next of the others.
            let next = self.heads.peek().map(|Reverse(head)| *head);
            let admit = |t: u64| next.is_none_or(|next| (t, i) < next);
            let before = out.ios.len();
            if let Err(e) = self.streams[i].read_io_batch_while(out, max, keep, admit) {
                self.failed = true;
                return Err(e);
            }
            // A stream's records come in time order: the first and last of each run bound it
            // (the first matters where notify records, at other times, open a merged file).
            let read = &out.ios[before..];
            if let Some(first) = read.iter().find(|io| !io.is_notify()) {
                self.saw(i, first.time);
            }
            if let Some(last) = read.iter().rev().find(|io| !io.is_notify()) {
                self.saw(i, last.time);
            }
            self.push_head(i)?;
        }
        Ok(true)
    }
}

impl<R: Read> Iterator for Merged<R> {
    type Item = Result<Event, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        // One stream: no heap needed (the common case of a merged file).
        if self.streams.len() == 1 {
            let r = self.streams[0].next_event();
            if matches!(r, Some(Err(_))) {
                self.failed = true;
            }
            return r;
        }
        if let Err(e) = self.prime() {
            return Some(Err(e));
        }
        let Reverse((_, i)) = self.heads.pop()?;
        let ev = match self.streams[i].next_event()? {
            Ok(ev) => ev,
            Err(e) => {
                self.failed = true;
                return Some(Err(e));
            }
        };
        if let Err(e) = self.push_head(i) {
            return Some(Err(e));
        }
        Some(Ok(ev))
    }
}

/// Opens the traces named on a command line (each a file or a per-CPU base name) as one
/// time-ordered stream. A file named twice (the same name, or a base name and one of its
/// files) is refused: its records would count twice.
pub fn open_trace(names: &[PathBuf]) -> Result<Merged<Source>, TraceError> {
    use std::os::unix::fs::MetadataExt;
    let mut streams = Vec::new();
    let mut input_of = Vec::new();
    let mut seen: Vec<((u64, u64), PathBuf)> = Vec::new();
    // One input per recording: CPU files named one by one (`t.blktrace.0 t.blktrace.1`) are
    // one, though each CPU may have been busy at another time.
    let mut inputs: Vec<String> = Vec::new();
    for name in names {
        let recording = recording_of(name);
        let input = match inputs.iter().position(|r| *r == recording) {
            Some(i) => i,
            None => {
                inputs.push(recording);
                inputs.len() - 1
            }
        };
        for path in resolve_input(name)? {
            // A pipe or standard input is read once: it cannot be another name's file.
            if let Some(m) = std::fs::metadata(&path).ok().filter(|m| m.is_file()) {
                let id = (m.dev(), m.ino());
                if let Some((_, earlier)) = seen.iter().find(|(s, _)| *s == id) {
                    return Err(TraceError::Input(format!(
                        "{} and {} are the same file: named twice, its records would count \
                         twice",
                        earlier.display(),
                        path.display()
                    )));
                }
                seen.push((id, path.clone()));
            }
            streams.push(RecordStream::open(&path)?);
            input_of.push(input);
        }
    }
    if streams.is_empty() {
        return Err(TraceError::Input("no trace given".into()));
    }
    let mut merged = Merged::new(streams);
    merged.input_of = input_of;
    merged.inputs = inputs;
    Ok(merged)
}

impl Merged<Source> {
    /// The inputs' total length when all are plain files (known before reading them).
    pub fn plain_len(&self) -> Option<u64> {
        self.streams.iter().map(RecordStream::plain_len).sum()
    }
}

/// For each name that is one CPU's file of a recording (`NAME.blktrace.N[.gz]`) whose other
/// CPUs' files lie beside it unnamed, what that means: that file alone is a part of the trace
/// (its requests dispatched on one CPU and completed on another never complete).
pub fn unread_cpu_files(names: &[PathBuf]) -> Vec<String> {
    let named: Vec<String> = names.iter().map(|n| n.display().to_string()).collect();
    let mut seen = Vec::new();
    let mut notes = Vec::new();
    for name in names {
        let recording = recording_of(name);
        // A name that is not there is an error of its own, said next.
        if recording == name.display().to_string() || seen.contains(&recording) || !name.exists() {
            continue;
        }
        let Ok(files) = resolve_input(std::path::Path::new(&recording)) else {
            continue;
        };
        let unread: Vec<String> = files
            .iter()
            .map(|f| f.display().to_string())
            .filter(|f| !named.contains(f))
            .collect();
        if let Some(first) = unread.first() {
            notes.push(format!(
                "{} is one CPU's file of the recording {recording}, whose other files ({} from \
                 {first}) are not read: `iolab trace analyze {recording}` reads them all",
                name.display(),
                unread.len(),
            ));
        }
        seen.push(recording);
    }
    notes
}

/// The recording a name stands for: `NAME` of `NAME.blktrace.N[.gz]`, else the name.
fn recording_of(name: &std::path::Path) -> String {
    let full = name.display().to_string();
    match super::stream::cpu_file(&full) {
        Some((base, _, _)) => base.to_string(),
        None => full,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blk_io_trace::{action, category, code, encode, notify, Endian, Payload};
    use crate::stream::IoBatch;

    /// One stream's records: (time, kind) where kind 'q' is a queue record (the fast path),
    /// 'n' a process name (decoded in full), 'b' a big-endian queue record (decoded in full);
    /// each record's sector says which stream and which record it is.
    fn stream_of(records: &[(u64, char)], cpu: u32) -> Vec<u8> {
        let mut b = Vec::new();
        for (k, &(time, kind)) in records.iter().enumerate() {
            let mut ev = Event {
                version: 7,
                time,
                cpu,
                sector: u64::from(cpu) * 1000 + k as u64,
                bytes: 4096,
                action: action(code::QUEUE, category::READ),
                ..Event::default()
            };
            let mut endian = Endian::Little;
            match kind {
                'n' => {
                    ev.action = action(notify::PROCESS, category::NOTIFY);
                    ev.payload = Payload::ProcessName(format!("p{cpu}").into());
                }
                'b' => endian = Endian::Big,
                _ => {}
            }
            encode(&ev, 7, endian, &mut b);
        }
        b
    }

    /// Inputs analysed together must be one recording: a file named twice, or one whose
    /// records all come after another's have ended, is refused; inputs that overlap in time
    /// (each CPU's file, devices recorded apart at once) are one trace.
    #[test]
    fn inputs_are_one_recording_or_refused() {
        let dir = std::env::temp_dir().join(format!("iolab-merge-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = |name: &str, records: &[(u64, char)]| {
            let p = dir.join(name);
            std::fs::write(&p, stream_of(records, 0)).unwrap();
            p
        };
        let a = file("a", &[(100, 'q'), (200, 'q'), (300, 'q')]);
        let b = file("b", &[(150, 'q'), (400, 'q')]);
        let later = file("later", &[(5_000_000_100, 'q'), (5_000_000_200, 'q')]);
        let analyse = |names: &[&PathBuf]| {
            let names: Vec<PathBuf> = names.iter().map(|p| (*p).clone()).collect();
            crate::analyze::analyze_paths(&names, crate::analyze::Options::default())
        };
        assert_eq!(analyse(&[&a, &b]).unwrap().events, 5);
        let apart = analyse(&[&a, &later]).unwrap_err().to_string();
        assert!(
            apart.contains("later begins 5.000 s after") && apart.contains("a ends"),
            "{apart}"
        );
        // A blkparse-merged file (I/O from time 0, process names at the boot clock's time)
        // beside a recording of other times: its names do not make it overlap everything.
        let merged = file("merged", &[(0, 'q'), (83_346_903_544_922, 'n'), (200, 'q')]);
        let apart = analyse(&[&merged, &later]).unwrap_err().to_string();
        assert!(apart.contains("later begins"), "{apart}");
        // Two merged files: each begins at 0, on a clock of its own, and they seem to overlap.
        let merged2 = dir.join("merged2");
        std::fs::write(&merged2, stream_of(&[(0, 'q'), (150, 'q')], 1)).unwrap();
        let apart = analyse(&[&merged, &merged2]).unwrap_err().to_string();
        assert!(
            apart.contains("merged and") && apart.contains("merged2 both begin at time 0"),
            "{apart}"
        );
        let twice = analyse(&[&a, &b, &a]).unwrap_err().to_string();
        assert!(twice.contains("are the same file"), "{twice}");
        // A copy under another name, compressed or not, or a CPU's file copied as another
        // CPU's: the same records would count twice.
        let copy = dir.join("copy");
        std::fs::copy(&a, &copy).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &std::fs::read(&a).unwrap()).unwrap();
        let gz_copy = dir.join("copy.gz");
        std::fs::write(&gz_copy, gz.finish().unwrap()).unwrap();
        for copied in [&copy, &gz_copy] {
            let twice = analyse(&[&a, &b, copied]).unwrap_err().to_string();
            assert!(
                twice.contains("begin with the same record") && twice.contains("copy"),
                "{twice}"
            );
        }
        std::fs::copy(&a, dir.join("c.blktrace.0")).unwrap();
        std::fs::copy(&a, dir.join("c.blktrace.1")).unwrap();
        let twice = analyse(&[&dir.join("c")]).unwrap_err().to_string();
        assert!(twice.contains("c.blktrace.0 and "), "{twice}");
        // The CPU files of one recording, named one by one, are one input.
        let cpu0 = file("r.blktrace.0", &[(100, 'q')]);
        let cpu1 = file("r.blktrace.1.gz", &[(5_000_000_100, 'q')]);
        assert_eq!(analyse(&[&cpu0, &cpu1]).unwrap().events, 2);
        // One of them named alone is said to be a part, with the way to read the whole.
        let r = dir.join("r");
        let notes = unread_cpu_files(std::slice::from_ref(&cpu0));
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].contains("(1 from ")
                && notes[0].ends_with(&format!("analyze {}` reads them all", r.display())),
            "{notes:?}"
        );
        assert!(unread_cpu_files(&[cpu0.clone(), cpu1.clone()]).is_empty());
        assert!(unread_cpu_files(&[r]).is_empty());
        // The per-record path (the plots' second pass) sees the same spans.
        let mut m = open_trace(&[a.clone(), later.clone()]).unwrap();
        assert_eq!(m.by_ref().count(), 5);
        assert!(m.inputs_apart().is_some());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The (time, sector) of every record, through batches of at most `max` records.
    fn batched(inputs: &[Vec<u8>], max: usize) -> Vec<(u64, u64)> {
        let streams = inputs
            .iter()
            .enumerate()
            .map(|(i, b)| RecordStream::new(format!("s{i}"), &b[..]))
            .collect();
        let mut m = Merged::new(streams);
        let mut got = Vec::new();
        loop {
            let mut batch = IoBatch::default();
            let more = m.read_io_batch(&mut batch, max, &mut |_| true).unwrap();
            assert!(batch.ios.len() <= max);
            got.extend(batch.ios.iter().map(|io| (io.time, io.sector)));
            if !more {
                return got;
            }
        }
    }

    #[test]
    fn merges_by_time_keeping_stream_order_on_ties() {
        let mk = |times: &[u64], cpu: u32| {
            let mut b = Vec::new();
            for &t in times {
                let ev = Event {
                    version: 7,
                    time: t,
                    cpu,
                    ..Event::default()
                };
                encode(&ev, 7, Endian::Little, &mut b);
            }
            b
        };
        let a = mk(&[1, 4, 4, 9], 0);
        let b = mk(&[2, 4, 10], 1);
        let m = Merged::new(vec![
            RecordStream::new("a".into(), &a[..]),
            RecordStream::new("b".into(), &b[..]),
        ]);
        let got: Vec<(u64, u32)> = m.map(|e| e.map(|e| (e.time, e.cpu)).unwrap()).collect();
        assert_eq!(
            got,
            vec![(1, 0), (2, 1), (4, 0), (4, 0), (4, 1), (9, 0), (10, 1)]
        );
    }

    /// A CPU's part of a blkparse-merged file opens with process names at boot-clock times
    /// before its I/O, timed from 0: the names go with their stream, and its I/O interleaves
    /// with the other CPU's by time, in batches and record by record alike.
    #[test]
    fn notify_records_do_not_hold_back_their_stream() {
        let a = stream_of(&[(83_346_903_544_922, 'n'), (0, 'q'), (200, 'q')], 0);
        let b = stream_of(&[(100, 'q'), (300, 'q')], 1);
        let times: Vec<u64> = batched(&[a.clone(), b.clone()], 8192)
            .into_iter()
            .map(|(t, _)| t)
            .collect();
        assert_eq!(times, vec![83_346_903_544_922, 0, 100, 200, 300]);
        let m = Merged::new(vec![
            RecordStream::new("a".into(), &a[..]),
            RecordStream::new("b".into(), &b[..]),
        ]);
        let got: Vec<u64> = m.map(|e| e.unwrap().time).collect();
        assert_eq!(got, times);
    }

    #[test]
    fn batches_take_runs_in_the_same_order_as_the_iterator() {
        // Ties between streams, runs of one stream, a record earlier than its stream's
        // previous one (taken when it is its stream's next, as the iterator does), and
        // records the fast decoder leaves to the full one, at run ends and inside runs.
        let inputs = vec![
            stream_of(
                &[
                    (1, 'q'),
                    (4, 'q'),
                    (4, 'n'),
                    (5, 'q'),
                    (6, 'q'),
                    (3, 'q'),
                    (20, 'b'),
                ],
                0,
            ),
            stream_of(&[(2, 'b'), (4, 'q'), (7, 'q'), (8, 'n'), (9, 'q')], 1),
            stream_of(&[(4, 'q'), (10, 'q'), (11, 'q'), (12, 'q')], 2),
        ];
        let iterated: Vec<(u64, u64)> = Merged::new(
            inputs
                .iter()
                .map(|b| RecordStream::new("s".into(), &b[..]))
                .collect(),
        )
        .map(|e| e.map(|e| (e.time, e.sector)).unwrap())
        .collect();
        let expected = vec![
            (1, 0),
            (2, 1000),
            (4, 1),
            (4, 2),
            (4, 1001),
            (4, 2000),
            (5, 3),
            (6, 4),
            (3, 5),
            (7, 1002),
            (8, 1003),
            (9, 1004),
            (10, 2001),
            (11, 2002),
            (12, 2003),
            (20, 6),
        ];
        assert_eq!(iterated, expected);
        for max in [1, 2, 3, 5, 64] {
            assert_eq!(batched(&inputs, max), expected, "batches of {max}");
        }
    }

    #[test]
    fn a_damaged_stream_stops_a_batched_merge_naming_it() {
        let good = stream_of(&[(1, 'q'), (2, 'q'), (3, 'q')], 0);
        let mut bad = stream_of(&[(1, 'q'), (2, 'q')], 1);
        bad[48] ^= 0xff; // the second record's magic
        let mut m = Merged::new(vec![
            RecordStream::new("good".into(), &good[..]),
            RecordStream::new("bad".into(), &bad[..]),
        ]);
        let mut batch = IoBatch::default();
        let err = m.read_io_batch(&mut batch, 64, &mut |_| true).unwrap_err();
        assert!(
            err.to_string().starts_with("bad: at byte offset 48"),
            "{err}"
        );
        // Nothing more is read after a failure.
        assert!(!m.read_io_batch(&mut batch, 64, &mut |_| true).unwrap());
    }
}
