//! Streaming reader: turns any byte source (a per-CPU file, a merged file, a tracefs pipe)
//! into [`Event`]s one at a time, holding only a fixed-size buffer. Errors carry the source's
//! name and the byte offset of the bad record so a user can look at it with `xxd`.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::blk_io_trace::{self, DecodeError, Event};

/// A failure while reading a trace, naming where.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("{path}: at byte offset {offset}{}: {source}", of_data(path))]
    Corrupt {
        path: String,
        offset: u64,
        #[source]
        source: DecodeError,
    },
    /// The input ended inside a record: everything before `offset` is whole records, which
    /// `keep` says how to keep.
    #[error(
        "{path}: ends inside the record at byte offset {offset}{} ({have} of its {needed} bytes \
         are there): the trace was cut short (a recording killed or a disk full, a copy not \
         finished); {keep}",
        of_data(path)
    )]
    CutShort {
        path: String,
        offset: u64,
        needed: usize,
        have: usize,
        keep: String,
    },
    #[error("{0}")]
    Input(String),
}

/// Where an offset in a compressed file counts: in its data as decompressed.
fn of_data(path: &str) -> &'static str {
    if path.ends_with(".gz") {
        " of the decompressed data"
    } else {
        ""
    }
}

/// The read buffer. Every source, a plain file too, is read through it rather than mapped:
/// with the reader on a thread of its own the copy costs less than filling and dropping page
/// tables (measured on 500 k records: 10.35 ms against 10.93 ms for a map with its pages
/// populated ahead and released behind; 64 KiB to 1 MiB buffers made no difference), memory
/// stays at one buffer whatever the file's size, and a file truncated while it is read ends
/// short instead of killing the process (SIGBUS on a map).
const BUF: usize = 1 << 17;

/// Reads records from one source in file order, through a fixed-size buffer.
pub struct RecordStream<R> {
    name: String,
    src: R,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    offset: u64,
    eof: bool,
    failed: bool,
    /// Read from a plain file as it is: offsets are the file's own (not a gzip's contents
    /// or a pipe's).
    plain_file: bool,
    /// An error of the source that came after some bytes: said once their whole records
    /// have been read (a gzip's trailing bytes, a member cut short).
    deferred: Option<io::Error>,
}

/// What a trace is read from: a regular file, or a stream: a gzip file decompressed on the
/// fly (kept experiment traces, `NAME.blktrace.N.gz`), or a pipe such as standard input
/// (`-`), plain or gzip.
pub enum Source {
    File(File),
    Stream(Box<dyn Read + Send>),
}

impl Read for Source {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Source::File(f) => f.read(buf),
            Source::Stream(s) => s.read(buf),
        }
    }
}

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// The first two bytes of `f` (fewer at its end), read off it: whether it is gzip is decided
/// by content, not by name.
fn magic(f: &mut File) -> io::Result<Vec<u8>> {
    let mut magic = vec![0u8; 2];
    let mut got = 0;
    while got < 2 {
        match f.read(&mut magic[got..])? {
            0 => break,
            n => got += n,
        }
    }
    magic.truncate(got);
    Ok(magic)
}

fn gunzip<R: Read + Send + 'static>(r: R) -> Source {
    let members = Members {
        gz: Some(flate2::bufread::GzDecoder::new(
            io::BufReader::with_capacity(1 << 16, r),
        )),
    };
    Source::Stream(Box::new(members))
}

/// A gzip file's members one after another, as `gzip -d` reads them. Bytes after the last
/// member that are not another are said to be so: flate2's own reader of several members
/// took a few stray bytes for a member cut short, and the trace was called cut short.
struct Members<R: io::BufRead> {
    gz: Option<flate2::bufread::GzDecoder<R>>,
}

impl<R: io::BufRead> Read for Members<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let Some(mut gz) = self.gz.take() else {
                return Ok(0);
            };
            let n = gz.read(buf)?;
            if n > 0 || buf.is_empty() {
                self.gz = Some(gz);
                return Ok(n);
            }
            // The member ended (its reader takes no byte past it): the file's end, another
            // member, or something else.
            let mut rest = gz.into_inner();
            let is_gzip = match rest.fill_buf()? {
                [] => return Ok(0),
                [a] => *a == GZIP_MAGIC[0],
                [a, b, ..] => [*a, *b] == GZIP_MAGIC,
            };
            if !is_gzip {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "bytes that are not gzip follow its compressed data (trailing garbage, \
                     as `gzip -t` calls it); the records before them are whole: `gzip -dc` \
                     writes them out",
                ));
            }
            self.gz = Some(flate2::bufread::GzDecoder::new(rest));
        }
    }
}

impl RecordStream<Source> {
    pub fn open(path: &Path) -> Result<Self, TraceError> {
        let io_err = |source| TraceError::Io {
            path: path.display().to_string(),
            source,
        };
        let name = path.display().to_string();
        let mut f = File::open(path).map_err(io_err)?;
        let first = magic(&mut f).map_err(io_err)?;
        let gzip = first == GZIP_MAGIC;
        if !f.metadata().map(|m| m.is_file()).unwrap_or(false) {
            // A pipe cannot seek back: the bytes looked at go first, then the rest.
            let piped = io::Cursor::new(first).chain(f);
            let src = if gzip {
                gunzip(piped)
            } else {
                Source::Stream(Box::new(piped))
            };
            return Ok(RecordStream::new(name, src));
        }
        f.seek(SeekFrom::Start(0)).map_err(io_err)?;
        if gzip {
            return Ok(RecordStream::new(name, gunzip(f)));
        }
        let mut s = RecordStream::new(name, Source::File(f));
        s.plain_file = true;
        Ok(s)
    }

    /// The file's length when it is a plain file, read as it is; `None` for a stream.
    pub fn plain_len(&self) -> Option<u64> {
        match &self.src {
            Source::File(f) if self.plain_file => f.metadata().ok().map(|m| m.len()),
            _ => None,
        }
    }
}

impl<R: Read> RecordStream<R> {
    pub fn new(name: String, src: R) -> Self {
        RecordStream {
            name,
            src,
            buf: vec![0; BUF],
            start: 0,
            end: 0,
            offset: 0,
            eof: false,
            failed: false,
            plain_file: false,
            deferred: None,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The underlying byte source, unread (for copying a trace as it is stored, decompressed).
    pub fn source_mut(&mut self) -> &mut R {
        &mut self.src
    }

    /// The bytes not yet decoded.
    #[inline]
    fn pending(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Makes at least `need` bytes available from `start`, unless the source ends first.
    fn fill(&mut self, need: usize) -> io::Result<()> {
        if self.end - self.start >= need || self.eof {
            return Ok(());
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buf.len() < need {
            self.buf.resize(need.max(BUF), 0);
        }
        while self.end < need {
            match self.src.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // The records already here come first.
                Err(e) if self.end > self.start => {
                    self.deferred = Some(e);
                    self.eof = true;
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn corrupt(&mut self, source: DecodeError) -> TraceError {
        self.failed = true;
        // A record needs more than is left only where the input ended: a length too large
        // for any record is a corrupt one, found before this.
        if let DecodeError::Truncated { needed, have } = source {
            let (path, offset) = (self.name.clone(), self.offset);
            let keep = if offset == 0 {
                "not one whole record comes before that, so nothing of it can be analysed".into()
            } else if self.plain_file {
                // One file of a recording is read with the others of its name: the copy
                // must keep the name, beside copies of the others, to be read with them.
                let file = Path::new(&path).file_name().and_then(|f| f.to_str());
                match file.filter(|f| cpu_file(f).is_some()) {
                    Some(file) => format!(
                        "its first {offset} bytes hold whole records, which \
                         `head -c {offset} {path} > DIR/{file}` keeps for analysis, with \
                         the recording's other files copied to DIR beside it"
                    ),
                    None => format!(
                        "its first {offset} bytes hold whole records, which \
                         `head -c {offset} {path} > CUT` keeps for analysis"
                    ),
                }
            } else {
                format!("its first {offset} bytes as read (decompressed, where gzip) hold whole records")
            };
            return TraceError::CutShort {
                path,
                offset,
                needed,
                have,
                keep,
            };
        }
        TraceError::Corrupt {
            path: self.name.clone(),
            offset: self.offset,
            source,
        }
    }

    /// The next record, `None` at a clean end of input.
    pub fn next_event(&mut self) -> Option<Result<Event, TraceError>> {
        let (ev, n) = match self.decode_next()? {
            Ok(decoded) => decoded,
            Err(e) => return Some(Err(e)),
        };
        self.start += n;
        self.offset += n as u64;
        Some(Ok(ev))
    }

    /// The time of the next record, which stays unread, and whether it is a notify record
    /// (a process name or a message); `None` at a clean end of input.
    pub fn peek_time(&mut self) -> Option<Result<(u64, bool), TraceError>> {
        if !self.failed && self.end - self.start >= blk_io_trace::V8_HEADER {
            if let Some((io, _)) = blk_io_trace::decode_io_native_v7(self.pending()) {
                return Some(Ok((io.time, io.is_notify())));
            }
        }
        Some(self.decode_next()?.map(|(ev, _)| (ev.time, ev.is_notify())))
    }

    /// The undecoded bytes of the next record's header, as far as they have been read (call
    /// after [`RecordStream::peek_time`]): two streams whose first headers are equal, time,
    /// sector, CPU and sequence number alike, are copies of one recording.
    pub fn next_header(&self) -> &[u8] {
        let p = self.pending();
        &p[..p.len().min(blk_io_trace::V7_HEADER)]
    }

    /// Hands each record to `out` as it is stored (decompressed), with the CPU it names, each
    /// only once it has been decoded whole: garbage, or a stream that is not a trace at all
    /// (`/dev/zero`, a pipe of anything else), fails at its first bad record, having handed
    /// over only the whole records before it. Returns the records copied.
    pub fn copy_records(
        &mut self,
        mut out: impl FnMut(u32, &[u8]) -> io::Result<()>,
    ) -> Result<u64, TraceError> {
        let mut records = 0;
        while let Some(decoded) = self.decode_next() {
            let (ev, n) = decoded?;
            out(ev.cpu, &self.pending()[..n]).map_err(|source| TraceError::Io {
                path: self.name.clone(),
                source,
            })?;
            self.start += n;
            self.offset += n as u64;
            records += 1;
        }
        Ok(records)
    }

    /// The next record and its length in bytes, not consumed; `None` at a clean end of input.
    fn decode_next(&mut self) -> Option<Result<(Event, usize), TraceError>> {
        if self.failed {
            return None;
        }
        let io_err = |s: &mut Self, e: io::Error| {
            s.failed = true;
            // Only a gzip stream ends early this way (a plain file or pipe just ends).
            if e.kind() == io::ErrorKind::UnexpectedEof {
                return TraceError::Input(format!(
                    "{}: {e}: the compressed file was cut short (a copy not finished?); its \
                     first {} bytes as decompressed hold whole records",
                    s.name, s.offset
                ));
            }
            TraceError::Io {
                path: s.name.clone(),
                source: e,
            }
        };
        if self.end - self.start < blk_io_trace::V8_HEADER {
            if let Err(e) = self.fill(blk_io_trace::V8_HEADER) {
                return Some(Err(io_err(self, e)));
            }
            if self.start == self.end {
                return self.deferred.take().map(|e| Err(io_err(self, e)));
            }
        }
        loop {
            match blk_io_trace::decode(self.pending()) {
                Ok(decoded) => return Some(Ok(decoded)),
                // A record may straddle the buffer's end: read on, unless the input ended.
                Err(DecodeError::Truncated { needed, have })
                    if !self.eof && needed > have && needed <= (1 << 17) =>
                {
                    if let Err(e) = self.fill(needed) {
                        return Some(Err(io_err(self, e)));
                    }
                    if self.end - self.start < needed && self.eof {
                        if let Some(e) = self.deferred.take() {
                            return Some(Err(io_err(self, e)));
                        }
                        let have = self.end - self.start;
                        return Some(Err(self.corrupt(DecodeError::Truncated { needed, have })));
                    }
                }
                // A record cut by the source's error is that error's doing.
                Err(DecodeError::Truncated { .. }) if self.deferred.is_some() => {
                    let e = self.deferred.take().expect("checked");
                    return Some(Err(io_err(self, e)));
                }
                Err(e) => return Some(Err(self.corrupt(e))),
            }
        }
    }
}

/// A batch of records for the analysis pipeline: compact
/// [`Io`](crate::blk_io_trace::Io)s, plus the full events of the few records whose payload
/// matters beyond a count (process names, remaps), each with the index of its `Io`.
#[derive(Debug, Default)]
pub struct IoBatch {
    pub ios: Vec<blk_io_trace::Io>,
    pub extra: Vec<(usize, Event)>,
}

impl IoBatch {
    pub fn clear(&mut self) {
        self.ios.clear();
        self.extra.clear();
    }
    pub fn push_event(&mut self, ev: Event) {
        self.push_event_if(ev, &mut |_| true);
    }
    /// Appends the record unless `keep` says it was consumed.
    #[inline]
    pub fn push_event_if(&mut self, ev: Event, keep: &mut impl FnMut(&blk_io_trace::Io) -> bool) {
        let (io, needs_event) = ev.io();
        if !keep(&io) {
            return;
        }
        if needs_event {
            self.extra.push((self.ios.len(), ev));
        }
        self.ios.push(io);
    }
}

impl<R: Read> RecordStream<R> {
    /// Appends records to `out` until it holds `max`; returns false at the end of input.
    /// Every record is first offered to `keep`, in order; those it consumes (returns false
    /// for) are not appended — the pipeline's reader stage takes plug records this way,
    /// without a second pass over the batch. The fast path: common records are decoded
    /// straight into the compact form, others through [`RecordStream::next_event`].
    #[inline]
    pub fn read_io_batch(
        &mut self,
        out: &mut IoBatch,
        max: usize,
        keep: &mut impl FnMut(&blk_io_trace::Io) -> bool,
    ) -> Result<bool, TraceError> {
        self.read_io_batch_while(out, max, keep, |_| true)
    }

    /// [`RecordStream::read_io_batch`] up to the first record whose time `admit` refuses,
    /// which stays unread: a merge of several streams takes one stream's records this way
    /// for as long as they come before every other stream's next one.
    #[inline]
    pub fn read_io_batch_while(
        &mut self,
        out: &mut IoBatch,
        max: usize,
        keep: &mut impl FnMut(&blk_io_trace::Io) -> bool,
        admit: impl Fn(u64) -> bool,
    ) -> Result<bool, TraceError> {
        while out.ios.len() < max {
            if !self.failed {
                // Decode in place as far as the fast path goes, then settle the position once.
                let data = self.pending();
                let mut used = 0;
                let mut refused = false;
                while out.ios.len() < max && data.len() - used >= blk_io_trace::V8_HEADER {
                    let Some((io, n)) = blk_io_trace::decode_io_native_v7(&data[used..]) else {
                        break;
                    };
                    // Notify records are not ordered by their times (see `Merged::push_head`).
                    if !io.is_notify() && !admit(io.time) {
                        refused = true;
                        break;
                    }
                    if keep(&io) {
                        out.ios.push(io);
                    }
                    used += n;
                }
                self.start += used;
                self.offset += used as u64;
                if refused {
                    return Ok(true);
                }
                if out.ios.len() >= max {
                    break;
                }
            }
            match self.decode_next() {
                Some(Ok((ev, _))) if !ev.is_notify() && !admit(ev.time) => return Ok(true),
                Some(Ok((ev, n))) => {
                    self.start += n;
                    self.offset += n as u64;
                    out.push_event_if(ev, keep);
                }
                Some(Err(e)) => return Err(e),
                None => return Ok(false),
            }
        }
        Ok(true)
    }
}

impl<R: Read> Iterator for RecordStream<R> {
    type Item = Result<Event, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_event()
    }
}

/// Where `-` reads from.
const STDIN: &str = "/dev/stdin";

/// A pipe or socket (`<(zcat t.gz)`, `/dev/stdin` fed by a pipe), read once from start to end;
/// a terminal or other character device too (standard input left to the keyboard).
fn is_stream(name: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(name).is_ok_and(|m| {
        let t = m.file_type();
        t.is_fifo() || t.is_socket() || t.is_char_device()
    })
}

/// A CPU's file of a recording, `NAME.blktrace.N` or `NAME.blktrace.N.gz`, taken apart:
/// (NAME, N, compressed).
pub fn cpu_file(name: &str) -> Option<(&str, u32, bool)> {
    let (plain, gz) = match name.strip_suffix(".gz") {
        Some(plain) => (plain, true),
        None => (name, false),
    };
    let (base, cpu) = plain.rsplit_once(".blktrace.")?;
    let n = cpu
        .parse()
        .ok()
        .filter(|_| cpu.bytes().all(|b| b.is_ascii_digit()))?;
    Some((base, n, gz))
}

/// Whether the trace `name` can be read only once: standard input (`-`) or a pipe.
pub fn reads_once(name: &Path) -> bool {
    name == Path::new("-") || is_stream(name)
}

/// Refuses `-` named more than once: standard input holds one trace.
pub fn stdin_once<'a>(names: impl IntoIterator<Item = &'a Path>) -> Result<(), TraceError> {
    if names.into_iter().filter(|n| *n == Path::new("-")).count() > 1 {
        return Err(TraceError::Input(
            "-: standard input is named more than once; it holds one trace".into(),
        ));
    }
    Ok(())
}

/// The files a trace name stands for: the path itself when it is a file (a merged file or a
/// raw tracefs capture, plain or gzip) or a pipe, `-` for standard input, else
/// `NAME.blktrace.0`, `.1`, ... up to the first missing CPU (as blkparse `-i` does), each
/// plain or compressed (`NAME.blktrace.0.gz`).
pub fn resolve_input(name: &Path) -> Result<Vec<PathBuf>, TraceError> {
    if name == Path::new("-") {
        use std::io::IsTerminal;
        if io::stdin().is_terminal() {
            return Err(TraceError::Input(
                "-: standard input is a terminal; pipe a trace in (e.g. `zcat t.bin.gz | \
                 iolab trace analyze -`)"
                    .into(),
            ));
        }
        return Ok(vec![PathBuf::from(STDIN)]);
    }
    if name.is_file() || is_stream(name) {
        return Ok(vec![name.to_path_buf()]);
    }
    let mut files = Vec::new();
    for cpu in 0.. {
        let p = PathBuf::from(format!("{}.blktrace.{cpu}", name.display()));
        let gz = PathBuf::from(format!("{}.blktrace.{cpu}.gz", name.display()));
        if p.is_file() {
            files.push(p);
        } else if gz.is_file() {
            files.push(gz);
        } else {
            break;
        }
    }
    if files.is_empty() && name.is_dir() {
        return Err(TraceError::Input(format!(
            "{}: is a directory; name a trace file, or the base NAME of NAME.blktrace.0, \
             NAME.blktrace.1, ... (e.g. {}/DEVICE)",
            name.display(),
            name.display()
        )));
    }
    use std::os::unix::fs::FileTypeExt;
    if std::fs::metadata(name).is_ok_and(|m| m.file_type().is_block_device()) {
        return Err(TraceError::Input(format!(
            "{}: is a block device, not a trace; record one with `iolab trace record -d {}`",
            name.display(),
            name.file_name().unwrap_or_default().to_string_lossy()
        )));
    }
    // A recording's files are numbered without a gap (an idle CPU's file is there, empty):
    // files past a missing number belong to the trace, and without it are not read.
    let missing = files.len();
    if let Some(after) = cpu_files_of(name)
        .into_iter()
        .map(|(_, cpu, _)| cpu)
        .filter(|&n| n as usize > missing)
        .min()
    {
        return Err(TraceError::Input(format!(
            "{name}.blktrace.{missing}: missing, while {name}.blktrace.{after} is there: a \
             recording's files are numbered without a gap (blkparse stops at the first \
             missing one), so part of this trace is gone; to analyse what is there, \
             name its files one by one",
            name = name.display(),
        )));
    }
    if files.is_empty() {
        return Err(TraceError::Input(format!(
            "{}: no such trace (neither a file nor {}.blktrace.0 or .blktrace.0.gz)",
            name.display(),
            name.display()
        )));
    }
    Ok(files)
}

/// The files `NAME.blktrace.N[.gz]` of the name `name` in its directory, whatever their
/// numbers, with (N, compressed); in name order.
pub fn cpu_files_of(name: &Path) -> Vec<(PathBuf, u32, bool)> {
    let dir = match name.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let Some(stem) = name.file_name().and_then(|n| n.to_str()) else {
        return Vec::new();
    };
    let mut files: Vec<(PathBuf, u32, bool)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let file = e.file_name().into_string().ok()?;
            let (base, cpu, gz) = cpu_file(&file)?;
            (base == stem).then(|| (dir.join(&file), cpu, gz))
        })
        .collect();
    files.sort();
    files
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blk_io_trace::{action, category, code, encode, Endian, Payload};

    /// A base name stands for its CPUs' files numbered from 0 without a gap: one missing is
    /// said (those after it are part of the trace), as is a block device named for a trace.
    #[test]
    fn a_recording_missing_a_cpus_file_or_a_device_named_is_said_so() {
        let dir = std::env::temp_dir().join(format!("iolab-resolve-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let t = dir.join("t");
        for cpu in [0, 2] {
            std::fs::write(dir.join(format!("t.blktrace.{cpu}")), b"x").unwrap();
        }
        let err = resolve_input(&t).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("{}.blktrace.1: missing, while ", t.display()))
                && err.contains("t.blktrace.2 is there"),
            "{err}"
        );
        std::fs::remove_file(dir.join("t.blktrace.0")).unwrap();
        let err = resolve_input(&t).unwrap_err().to_string();
        assert!(err.contains("t.blktrace.0: missing"), "{err}");
        std::fs::write(dir.join("t.blktrace.0.gz"), b"x").unwrap();
        std::fs::write(dir.join("t.blktrace.1"), b"x").unwrap();
        assert_eq!(resolve_input(&t).unwrap().len(), 3);
        std::fs::remove_dir_all(&dir).unwrap();
        // Only the device's metadata is read.
        let device = std::fs::read_dir("/sys/block")
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| Path::new("/dev").join(e.file_name()))
            .find(|d| d.exists());
        if let Some(device) = device {
            let err = resolve_input(&device).unwrap_err().to_string();
            assert!(err.contains("is a block device, not a trace"), "{err}");
        }
    }

    fn ev(t: u64) -> Event {
        Event {
            version: 7,
            time: t,
            sector: t * 8,
            bytes: 4096,
            action: action(code::QUEUE, category::READ | category::QUEUE),
            ..Event::default()
        }
    }

    #[test]
    fn reads_records_across_buffer_refills() {
        let mut bytes = Vec::new();
        let n = 50_000u64; // > 1 MiB of records: crosses refills
        for t in 0..n {
            let mut e = ev(t);
            if t % 7 == 0 {
                e.action = action(code::UNPLUG_IO, category::QUEUE);
                e.payload = Payload::Count(t);
            }
            encode(
                &e,
                if t % 2 == 0 { 7 } else { 8 },
                Endian::Little,
                &mut bytes,
            );
        }
        let got: Vec<Event> = RecordStream::new("mem".into(), &bytes[..])
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(got.len() as u64, n);
        assert_eq!(got[49_999].time, 49_999);
        assert_eq!(got[7].payload, Payload::Count(7));
    }

    /// Reading a trace, one record at a time (as `trace plot` reads) or in batches (as
    /// `analyze_paths` does), holds one buffer, not the file: memory stays at a few MiB
    /// whatever the trace's size.
    #[test]
    fn a_trace_is_read_through_one_buffer() {
        let mut bytes = Vec::new();
        let n = 500_000u64; // 24 MB of records
        for t in 0..n {
            encode(&ev(t), 7, Endian::Little, &mut bytes);
        }
        let path = std::env::temp_dir().join(format!("iolab-buffered-{}.bin", std::process::id()));
        std::fs::write(&path, &bytes).unwrap();
        let opened = [RecordStream::open(&path), RecordStream::open(&path)];
        std::fs::remove_file(&path).unwrap();
        let [mut one_by_one, mut batched] = opened.map(Result::unwrap);
        let mut last = 0;
        while let Some(ev) = one_by_one.next_event() {
            last = ev.unwrap().time;
        }
        assert_eq!(last, n - 1);
        let (mut batch, mut read) = (IoBatch::default(), 0);
        loop {
            batch.clear();
            let more = batched
                .read_io_batch(&mut batch, 8192, &mut |_| true)
                .unwrap();
            read += batch.ios.len() as u64;
            if !more {
                break;
            }
        }
        assert_eq!(read, n);
        for (how, s) in [("one by one", &one_by_one), ("in batches", &batched)] {
            assert!(
                s.buf.capacity() <= BUF,
                "{how}: a {} KiB buffer for a 24 MB trace",
                s.buf.capacity() >> 10
            );
        }
    }

    #[test]
    fn truncation_names_the_offset() {
        let mut bytes = Vec::new();
        encode(&ev(1), 7, Endian::Little, &mut bytes);
        encode(&ev(2), 7, Endian::Little, &mut bytes);
        bytes.truncate(48 + 20);
        let mut s = RecordStream::new("f.bin".into(), &bytes[..]);
        assert!(s.next().unwrap().is_ok());
        let err = s.next().unwrap().unwrap_err().to_string();
        assert!(
            err.contains("f.bin: ends inside the record at byte offset 48 (20 of its 48")
                && err.contains(
                    "its first 48 bytes as read (decompressed, where gzip) hold whole records"
                ),
            "{err}"
        );
        assert!(s.next().is_none());
    }

    /// gzip members one after another are one trace; bytes after the last that are not
    /// gzip are said to be so, after the records before them (they were called a member
    /// cut short); a member cut short still is.
    #[test]
    fn gzip_members_are_read_in_turn_and_trailing_bytes_are_named() {
        use std::io::Write;
        let gz = |first: u64, n: u64| {
            let mut raw = Vec::new();
            for t in first..first + n {
                encode(&ev(t), 7, Endian::Little, &mut raw);
            }
            let mut w = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            w.write_all(&raw).unwrap();
            w.finish().unwrap()
        };
        let read = |bytes: Vec<u8>| {
            let s = RecordStream::new("t.blktrace.0.gz".into(), gunzip(io::Cursor::new(bytes)));
            s.map(|r| r.map(|e| e.time).map_err(|e| e.to_string()))
                .collect::<Vec<_>>()
        };
        let two = [gz(1, 3), gz(4, 2)].concat();
        let times: Vec<u64> = read(two).into_iter().map(Result::unwrap).collect();
        assert_eq!(times, [1, 2, 3, 4, 5]);
        let junk = [gz(1, 3), b"junk\n".to_vec()].concat();
        let got = read(junk);
        assert_eq!(got.len(), 4, "{got:?}");
        let err = got[3].as_ref().unwrap_err();
        assert!(err.contains("bytes that are not gzip follow"), "{err}");
        let mut cut = gz(1, 3);
        cut.truncate(cut.len() - 12);
        let err = read(cut).into_iter().find_map(Result::err).unwrap();
        assert!(err.contains("cut short"), "{err}");
    }

    /// In a compressed file, the offset is said to be one in its data as decompressed.
    #[test]
    fn an_offset_in_a_compressed_file_is_said_to_be_in_its_decompressed_data() {
        let mut bytes = Vec::new();
        encode(&ev(1), 7, Endian::Little, &mut bytes);
        bytes.truncate(47);
        let mut s = RecordStream::new("t.blktrace.0.gz".into(), &bytes[..]);
        let err = s.next().unwrap().unwrap_err().to_string();
        assert!(
            err.contains("at byte offset 0 of the decompressed data (47 of its 48"),
            "{err}"
        );
    }

    /// A cut inside the first record leaves nothing to keep, and the error does not offer to.
    #[test]
    fn a_cut_inside_the_first_record_offers_nothing_to_keep() {
        let mut bytes = Vec::new();
        encode(&ev(1), 7, Endian::Little, &mut bytes);
        bytes.truncate(47);
        let mut s = RecordStream::new("f.bin".into(), &bytes[..]);
        let err = s.next().unwrap().unwrap_err().to_string();
        assert!(
            err.contains("at byte offset 0 (47 of its 48 bytes are there)")
                && err.ends_with(
                    "not one whole record comes before that, so nothing of it can be analysed"
                ),
            "{err}"
        );
    }

    /// The reader must never panic, whatever the bytes: random garbage, truncations and
    /// single-byte corruptions of valid traces (a fuzz loop without cargo-fuzz).
    #[test]
    fn never_panics_on_random_or_damaged_input() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut valid = Vec::new();
        for t in 0..40 {
            let mut e = ev(t);
            if t % 3 == 0 {
                e.cgroup = Some(t);
            }
            if t % 5 == 0 {
                e.action = action(code::REMAP, category::READ);
                e.payload = Payload::Remap {
                    dev_from: 1,
                    dev_to: 2,
                    sector_from: 3,
                };
            }
            encode(&e, 7 + (t % 2) as u8, Endian::Big, &mut valid);
        }
        for round in 0..3000 {
            let mut bytes = if round % 3 == 0 {
                (0..(rnd() % 400)).map(|_| rnd() as u8).collect::<Vec<_>>()
            } else {
                valid.clone()
            };
            if round % 3 == 1 {
                let cut = (rnd() as usize) % (bytes.len() + 1);
                bytes.truncate(cut);
            } else if round % 3 == 2 {
                for _ in 0..(1 + rnd() % 4) {
                    let at = (rnd() as usize) % bytes.len();
                    bytes[at] = rnd() as u8;
                }
            }
            // Random bytes that start with a valid magic reach deeper code paths.
            if round % 6 == 0 && bytes.len() >= 4 {
                bytes[..4].copy_from_slice(&0x6561_7407u32.to_le_bytes());
            }
            for r in RecordStream::new("fuzz".into(), &bytes[..]) {
                let _ = r;
            }
        }
    }
}
