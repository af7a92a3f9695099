//! The blktrace record format (the kernel's `struct blk_io_trace`, hence the name), as pure
//! functions over bytes: decode one record (version 7 or 8, either byte order) from a slice,
//! and encode one back. Everything else in `trace` sees
//! only [`Event`]s, so the on-disk layout is known in exactly one place.
//!
//! Layouts (docs/design.md, "blktrace records"): v7 is a 48-byte header with a 32-bit action;
//! v8 (Linux 6.19) a 64-byte header with a 64-bit action. Each header is followed by
//! `pdu_len` payload bytes. Integer payloads are big-endian by kernel convention, except the
//! cgroup id that leads the payload when the action carries the cgroup flag (native order).

/// Magic in the top 24 bits of the first word; the low byte is the version.
pub const MAGIC: u32 = 0x6561_7400;
pub const V7_HEADER: usize = 48;
pub const V8_HEADER: usize = 64;

/// The action's low byte is the event code.
pub mod code {
    pub const QUEUE: u8 = 1;
    pub const BACKMERGE: u8 = 2;
    pub const FRONTMERGE: u8 = 3;
    pub const GETRQ: u8 = 4;
    pub const SLEEPRQ: u8 = 5;
    pub const REQUEUE: u8 = 6;
    pub const ISSUE: u8 = 7;
    pub const COMPLETE: u8 = 8;
    pub const PLUG: u8 = 9;
    pub const UNPLUG_IO: u8 = 10;
    pub const UNPLUG_TIMER: u8 = 11;
    pub const INSERT: u8 = 12;
    pub const SPLIT: u8 = 13;
    pub const BOUNCE: u8 = 14;
    pub const REMAP: u8 = 15;
    pub const ABORT: u8 = 16;
    pub const DRV_DATA: u8 = 17;
}

/// Bit 8 of the action: the payload starts with the 8-byte cgroup id.
pub const CGROUP_FLAG: u64 = 0x100;

/// Category bits (above bit 16 of the action).
pub mod category {
    pub const READ: u64 = 1 << 0;
    pub const WRITE: u64 = 1 << 1;
    pub const FLUSH: u64 = 1 << 2;
    pub const SYNC: u64 = 1 << 3;
    pub const QUEUE: u64 = 1 << 4;
    pub const REQUEUE: u64 = 1 << 5;
    pub const ISSUE: u64 = 1 << 6;
    pub const COMPLETE: u64 = 1 << 7;
    pub const FS: u64 = 1 << 8;
    pub const PC: u64 = 1 << 9;
    pub const NOTIFY: u64 = 1 << 10;
    pub const AHEAD: u64 = 1 << 11;
    pub const META: u64 = 1 << 12;
    pub const DISCARD: u64 = 1 << 13;
    pub const DRV_DATA: u64 = 1 << 14;
    pub const FUA: u64 = 1 << 15;
}

/// The directions an I/O is counted under ([`Io::direction`]), and the index of each.
pub const DIRECTIONS: [&str; 3] = ["read", "write", "discard"];
pub const READ: usize = 0;
pub const WRITE: usize = 1;
pub const DISCARD: usize = 2;

/// iolab's recorder writes a message record where the kernel's trace buffer lost events (the
/// page read after them says so), and one with the whole loss at the end when the kernel's
/// counters saw more, so the trace itself says it is incomplete: blkparse prints them, and
/// the analysis counts them.
pub fn lost_here_message(n: u64) -> String {
    format!("{LOSS_NOTE_PREFIX}{n} events lost before this point (the trace buffer was full)")
}

pub fn lost_in_all_message(n: u64) -> String {
    format!("{LOSS_NOTE_PREFIX}{n} events lost in all while recording")
}

const LOSS_NOTE_PREFIX: &str = "iolab: ";

/// What a message record says of lost events, if it is one of iolab's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossNote {
    Here(u64),
    InAll(u64),
}

pub fn loss_note(text: &str) -> Option<LossNote> {
    let rest = text.strip_prefix(LOSS_NOTE_PREFIX)?;
    let (n, what) = rest.split_once(" events lost ")?;
    let n = n.parse().ok()?;
    if what.starts_with("before this point") {
        Some(LossNote::Here(n))
    } else if what.starts_with("in all") {
        Some(LossNote::InAll(n))
    } else {
        None
    }
}

/// Notify codes (low byte of the action when the NOTIFY category is set).
pub mod notify {
    pub const PROCESS: u8 = 0;
    pub const TIMESTAMP: u8 = 1;
    pub const MESSAGE: u8 = 2;
}

/// What the payload holds, decoded according to the action. Text and raw bytes are boxed
/// slices so the enum (and every `Event`) stays small: events are copied in bulk.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Payload {
    #[default]
    None,
    /// Remap (A): where the bio came from.
    Remap {
        dev_from: u32,
        dev_to: u32,
        sector_from: u64,
    },
    /// Unplug (U/UT): number of requests released; split (X): the new sector.
    Count(u64),
    /// Notify: process name.
    ProcessName(Box<str>),
    /// Notify: wall-clock time at the trace start.
    Timestamp { sec: u32, nsec: u32 },
    /// Notify: free text.
    Message(Box<str>),
    /// Anything else: the raw payload bytes (e.g. driver data).
    Raw(Box<[u8]>),
}

/// One decoded record.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Event {
    pub version: u8,
    pub sequence: u32,
    /// Nanoseconds (trace clock).
    pub time: u64,
    /// 512-byte sectors.
    pub sector: u64,
    pub bytes: u32,
    /// The full action word (code, flags, categories).
    pub action: u64,
    pub pid: u32,
    /// Kernel dev_t: major << 20 | minor.
    pub device: u32,
    pub cpu: u32,
    pub error: u16,
    pub cgroup: Option<u64>,
    pub payload: Payload,
}

impl Event {
    pub fn code(&self) -> u8 {
        (self.action & 0xff) as u8
    }
    pub fn categories(&self) -> u64 {
        self.action >> 16
    }
    pub fn is_notify(&self) -> bool {
        self.categories() & category::NOTIFY != 0
    }
    pub fn is_pc(&self) -> bool {
        self.categories() & category::PC != 0
    }
    pub fn is_write(&self) -> bool {
        self.categories() & category::WRITE != 0
    }
    /// A discard (trim), which the kernel also marks as a write.
    pub fn is_discard(&self) -> bool {
        self.categories() & category::DISCARD != 0
    }
    /// One past the last sector touched.
    pub fn end_sector(&self) -> u64 {
        self.sector.saturating_add(u64::from(self.bytes >> 9))
    }
    pub fn major(&self) -> u32 {
        self.device >> 20
    }
    pub fn minor(&self) -> u32 {
        self.device & 0xfffff
    }
}

/// The fields the analysis needs, in 32 bytes (an [`Event`] is three times that): the
/// analysis pipeline moves hundreds of megabytes of these between threads, so size is speed.
/// Payloads other than an unplug's count stay in the full [`Event`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Io {
    pub time: u64,
    /// The start sector; for an unplug (which has none), the requests it released.
    pub sector: u64,
    /// The action word as traced (code, flags, categories).
    pub action: u32,
    pub bytes: u32,
    pub pid: u32,
    pub device: u32,
}

impl Io {
    #[inline]
    pub fn code(&self) -> u8 {
        (self.action & 0xff) as u8
    }
    #[inline]
    pub fn categories(&self) -> u64 {
        u64::from(self.action >> 16)
    }
    #[inline]
    pub fn is_write(&self) -> bool {
        self.categories() & category::WRITE != 0
    }
    /// Read, write or discard, as an index into [`DIRECTIONS`]: a discard carries the write
    /// bit too, but moves no data, so it counts as neither (iostat's d/s and dMB/s).
    #[inline]
    pub fn direction(&self) -> usize {
        let c = self.categories();
        if c & category::DISCARD != 0 {
            DISCARD
        } else if c & category::WRITE != 0 {
            WRITE
        } else {
            READ
        }
    }
    #[inline]
    pub fn is_notify(&self) -> bool {
        self.categories() & category::NOTIFY != 0
    }
    #[inline]
    pub fn is_pc(&self) -> bool {
        self.categories() & category::PC != 0
    }
    /// Whether the record carried a cgroup id (for notify records, which the analysis only
    /// counts, the flag means a cgroup id before their text).
    #[inline]
    pub fn has_cgroup(&self) -> bool {
        u64::from(self.action) & CGROUP_FLAG != 0
    }
    /// An unplug's count of requests released.
    #[inline]
    pub fn unplug_count(&self) -> u64 {
        self.sector
    }
    #[inline]
    pub fn end_sector(&self) -> u64 {
        self.sector.saturating_add(u64::from(self.bytes >> 9))
    }
}

impl Event {
    /// The analysis view of this record, and whether its payload needs the full event
    /// (process names, remaps, messages, raw data).
    pub fn io(&self) -> (Io, bool) {
        let unplug = matches!(self.code(), code::UNPLUG_IO | code::UNPLUG_TIMER);
        let (sector, needs_event) = match self.payload {
            Payload::None => (self.sector, false),
            Payload::Count(n) if unplug => (n, false),
            // A split's new sector: the analysis only counts splits.
            Payload::Count(_) => (self.sector, false),
            _ => (self.sector, true),
        };
        (
            Io {
                time: self.time,
                sector,
                // The trace's action word is 32 bits wide.
                action: self.action as u32,
                bytes: self.bytes,
                pid: self.pid,
                device: self.device,
            },
            needs_event,
        )
    }
}

/// The native-order u32 at `at` of a record header (the fast decoders' field reads).
#[inline(always)]
fn ne_u32(h: &[u8; V7_HEADER], at: usize) -> u32 {
    u32::from_ne_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]])
}

/// The native-order u64 at `at` of a record header.
#[inline(always)]
fn ne_u64(h: &[u8; V7_HEADER], at: usize) -> u64 {
    u64::from_ne_bytes([
        h[at],
        h[at + 1],
        h[at + 2],
        h[at + 3],
        h[at + 4],
        h[at + 5],
        h[at + 6],
        h[at + 7],
    ])
}

/// Decodes the common record (version 7, this machine's byte order; no payload, an 8-byte
/// count, or a cgroup id before either) straight into an [`Io`]; `None` means: use
/// [`decode`]. Notify records other than process names (the tracer's text messages: BFQ
/// writes several per request, half of a trace on a BFQ device) become an [`Io`] too: the
/// analysis only counts them, so their text is never decoded or allocated.
#[inline]
pub(crate) fn decode_io_native_v7(buf: &[u8]) -> Option<(Io, usize)> {
    let h: &[u8; V7_HEADER] = buf.get(..V7_HEADER)?.try_into().ok()?;
    let w32 = |at: usize| ne_u32(h, at);
    let w64 = |at: usize| ne_u64(h, at);
    if w32(0) != MAGIC | 7 {
        return None;
    }
    let action = u64::from(w32(28));
    let pdu_len = usize::from(u16::from_ne_bytes([h[46], h[47]]));
    let code = (action & 0xff) as u8;
    let mut sector = w64(16);
    if (action >> 16) & category::NOTIFY != 0 {
        // The whole record must be here (as `decode` requires); process names and iolab's
        // notes of lost events need their text (not other messages: a BFQ trace is half
        // its messages).
        let iolab_note = code == notify::MESSAGE
            && buf
                .get(V7_HEADER..V7_HEADER + pdu_len)?
                .starts_with(LOSS_NOTE_PREFIX.as_bytes());
        if code == notify::PROCESS || iolab_note || buf.len() < V7_HEADER + pdu_len {
            return None;
        }
    } else {
        // A cgroup id (native order, unused by the analysis) comes before the payload.
        let cg = if action & CGROUP_FLAG != 0 { 8 } else { 0 };
        if pdu_len < cg {
            return None;
        }
        match pdu_len - cg {
            0 => {}
            // An unplug's count stands in for its sector (see `Io::sector`).
            8 if matches!(code, code::UNPLUG_IO | code::UNPLUG_TIMER) => {
                let at = V7_HEADER + cg;
                let p: [u8; 8] = buf.get(at..at + 8)?.try_into().ok()?;
                sector = u64::from_be_bytes(p);
            }
            // A split's new sector: the analysis only counts splits.
            8 if code == code::SPLIT => {}
            _ => return None,
        }
    }
    if buf.len() < V7_HEADER + pdu_len {
        return None;
    }
    Some((
        Io {
            time: w64(8),
            sector,
            action: action as u32,
            bytes: w32(24),
            pid: w32(32),
            device: w32(36),
        },
        V7_HEADER + pdu_len,
    ))
}

/// "major,minor" as btt and the JSON output write it.
pub fn dev_name(device: u32) -> String {
    format!("{},{}", device >> 20, device & 0xfffff)
}

/// Byte order of a stream, found from the first magic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endian {
    Little,
    Big,
}

impl Endian {
    pub fn native() -> Self {
        if cfg!(target_endian = "big") {
            Endian::Big
        } else {
            Endian::Little
        }
    }
    fn u16(self, b: &[u8], at: usize) -> u16 {
        let a = [b[at], b[at + 1]];
        match self {
            Endian::Little => u16::from_le_bytes(a),
            Endian::Big => u16::from_be_bytes(a),
        }
    }
    fn u32(self, b: &[u8], at: usize) -> u32 {
        let a: [u8; 4] = b[at..at + 4].try_into().unwrap_or_default();
        match self {
            Endian::Little => u32::from_le_bytes(a),
            Endian::Big => u32::from_be_bytes(a),
        }
    }
    fn u64(self, b: &[u8], at: usize) -> u64 {
        let a: [u8; 8] = b[at..at + 8].try_into().unwrap_or_default();
        match self {
            Endian::Little => u64::from_le_bytes(a),
            Endian::Big => u64::from_be_bytes(a),
        }
    }
}

/// Why bytes are not a record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error(
        "not a blktrace record (magic {0:#010x}, expected 0x656174 followed by version 7 or 8)"
    )]
    BadMagic(u32),
    #[error(
        "text, not a blktrace record (it begins {0:?}): a binary trace is what `iolab trace \
         record` or blktrace wrote (NAME.blktrace.N), or the file of blkparse's -d FILE, not \
         blkparse's printed output"
    )]
    Text(String),
    #[error("unsupported blktrace version {0} (7 and 8 are known)")]
    BadVersion(u8),
    #[error("truncated record: {needed} bytes needed, {have} left")]
    Truncated { needed: usize, have: usize },
    #[error("cgroup flag set but payload has only {0} bytes (8 needed for the cgroup id)")]
    ShortCgroup(usize),
}

/// Reads the magic of the record at the start of `buf` and says its byte order and version.
pub fn sniff(buf: &[u8]) -> Result<(Endian, u8), DecodeError> {
    if buf.len() < 4 {
        return Err(DecodeError::Truncated {
            needed: 4,
            have: buf.len(),
        });
    }
    for endian in [Endian::native(), other(Endian::native())] {
        let word = endian.u32(buf, 0);
        if word & 0xffff_ff00 == MAGIC {
            let version = (word & 0xff) as u8;
            return match version {
                7 | 8 => Ok((endian, version)),
                v => Err(DecodeError::BadVersion(v)),
            };
        }
    }
    let head = &buf[..4];
    if head.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        return Err(DecodeError::Text(
            String::from_utf8_lossy(head).into_owned(),
        ));
    }
    Err(DecodeError::BadMagic(Endian::native().u32(buf, 0)))
}

fn other(e: Endian) -> Endian {
    match e {
        Endian::Little => Endian::Big,
        Endian::Big => Endian::Little,
    }
}

/// Header size of a version.
pub fn header_len(version: u8) -> usize {
    if version >= 8 {
        V8_HEADER
    } else {
        V7_HEADER
    }
}

/// Total length of the record at the start of `buf` (header + payload), if the header is
/// complete; used by the stream reader to know how many bytes to wait for.
pub fn record_len(buf: &[u8], endian: Endian, version: u8) -> Option<usize> {
    let h = header_len(version);
    if buf.len() < h {
        return None;
    }
    let pdu_at = if version >= 8 { 50 } else { 46 };
    Some(h + usize::from(endian.u16(buf, pdu_at)))
}

/// Decodes one record from the start of `buf`; returns it and its length in bytes.
#[inline]
pub fn decode(buf: &[u8]) -> Result<(Event, usize), DecodeError> {
    if let Some(fast) = decode_native_v7(buf) {
        return Ok(fast);
    }
    decode_any(buf)
}

/// The common case — a version 7 record in this machine's byte order without payload (what
/// tracefs and blkparse write here) — without the general path's checks per field.
#[inline]
pub(crate) fn decode_native_v7(buf: &[u8]) -> Option<(Event, usize)> {
    let h: &[u8; V7_HEADER] = buf.get(..V7_HEADER)?.try_into().ok()?;
    let w32 = |at: usize| ne_u32(h, at);
    let w64 = |at: usize| ne_u64(h, at);
    let pdu_len = u16::from_ne_bytes([h[46], h[47]]);
    if w32(0) != MAGIC | 7 || pdu_len != 0 {
        return None;
    }
    let action = u64::from(w32(28));
    if action & CGROUP_FLAG != 0 {
        return None;
    }
    Some((
        Event {
            version: 7,
            sequence: w32(4),
            time: w64(8),
            sector: w64(16),
            bytes: w32(24),
            action,
            pid: w32(32),
            device: w32(36),
            cpu: w32(40),
            error: u16::from_ne_bytes([h[44], h[45]]),
            cgroup: None,
            payload: Payload::None,
        },
        V7_HEADER,
    ))
}

fn decode_any(buf: &[u8]) -> Result<(Event, usize), DecodeError> {
    let (endian, version) = sniff(buf)?;
    let h = header_len(version);
    if buf.len() < h {
        return Err(DecodeError::Truncated {
            needed: h,
            have: buf.len(),
        });
    }
    let e = endian;
    let mut ev = Event {
        version,
        sequence: e.u32(buf, 4),
        time: e.u64(buf, 8),
        sector: e.u64(buf, 16),
        bytes: e.u32(buf, 24),
        ..Event::default()
    };
    let pdu_len;
    if version >= 8 {
        ev.pid = e.u32(buf, 28);
        ev.action = e.u64(buf, 32);
        ev.device = e.u32(buf, 40);
        ev.cpu = e.u32(buf, 44);
        ev.error = e.u16(buf, 48);
        pdu_len = usize::from(e.u16(buf, 50));
    } else {
        ev.action = u64::from(e.u32(buf, 28));
        ev.pid = e.u32(buf, 32);
        ev.device = e.u32(buf, 36);
        ev.cpu = e.u32(buf, 40);
        ev.error = e.u16(buf, 44);
        pdu_len = usize::from(e.u16(buf, 46));
    }
    let total = h + pdu_len;
    if buf.len() < total {
        return Err(DecodeError::Truncated {
            needed: total,
            have: buf.len(),
        });
    }
    let mut pdu = &buf[h..total];
    if ev.action & CGROUP_FLAG != 0 && !ev.is_notify() {
        if pdu.len() < 8 {
            return Err(DecodeError::ShortCgroup(pdu.len()));
        }
        ev.cgroup = Some(e.u64(pdu, 0));
        pdu = &pdu[8..];
    }
    ev.payload = decode_payload(&ev, pdu, endian);
    Ok((ev, total))
}

fn be32(b: &[u8], at: usize) -> u32 {
    Endian::Big.u32(b, at)
}
fn be64(b: &[u8], at: usize) -> u64 {
    Endian::Big.u64(b, at)
}

fn text(pdu: &[u8]) -> String {
    let end = pdu.iter().position(|&c| c == 0).unwrap_or(pdu.len());
    String::from_utf8_lossy(&pdu[..end]).into_owned()
}

fn decode_payload(ev: &Event, pdu: &[u8], endian: Endian) -> Payload {
    if pdu.is_empty() {
        return Payload::None;
    }
    if ev.is_notify() {
        // In notify records a cgroup flag also means a leading cgroup id.
        let pdu = if ev.action & CGROUP_FLAG != 0 && pdu.len() >= 8 {
            &pdu[8..]
        } else {
            pdu
        };
        return match ev.code() {
            notify::PROCESS => Payload::ProcessName(text(pdu).into()),
            notify::TIMESTAMP if pdu.len() >= 8 => Payload::Timestamp {
                sec: endian.u32(pdu, 0),
                nsec: endian.u32(pdu, 4),
            },
            notify::MESSAGE => Payload::Message(text(pdu).into()),
            _ => Payload::Raw(pdu.into()),
        };
    }
    match ev.code() {
        code::REMAP if pdu.len() >= 16 => Payload::Remap {
            dev_from: be32(pdu, 0),
            dev_to: be32(pdu, 4),
            sector_from: be64(pdu, 8),
        },
        code::UNPLUG_IO | code::UNPLUG_TIMER | code::SPLIT if pdu.len() >= 8 => {
            Payload::Count(be64(pdu, 0))
        }
        _ => Payload::Raw(pdu.into()),
    }
}

/// Encodes one record in the given version and byte order (the inverse of [`decode`]).
pub fn encode(ev: &Event, version: u8, endian: Endian, out: &mut Vec<u8>) {
    let mut pdu: Vec<u8> = Vec::new();
    let mut action = ev.action;
    if let Some(cg) = ev.cgroup {
        action |= CGROUP_FLAG;
        put64(&mut pdu, endian, cg);
    }
    match &ev.payload {
        Payload::None => {}
        Payload::Remap {
            dev_from,
            dev_to,
            sector_from,
        } => {
            pdu.extend_from_slice(&dev_from.to_be_bytes());
            pdu.extend_from_slice(&dev_to.to_be_bytes());
            pdu.extend_from_slice(&sector_from.to_be_bytes());
        }
        Payload::Count(n) => pdu.extend_from_slice(&n.to_be_bytes()),
        Payload::ProcessName(s) | Payload::Message(s) => {
            pdu.extend_from_slice(s.as_bytes());
            pdu.push(0);
        }
        Payload::Timestamp { sec, nsec } => {
            put32(&mut pdu, endian, *sec);
            put32(&mut pdu, endian, *nsec);
        }
        Payload::Raw(b) => pdu.extend_from_slice(b),
    }
    let pdu_len = u16::try_from(pdu.len()).unwrap_or(u16::MAX);
    pdu.truncate(usize::from(pdu_len));
    put32(out, endian, MAGIC | u32::from(version));
    put32(out, endian, ev.sequence);
    put64(out, endian, ev.time);
    put64(out, endian, ev.sector);
    put32(out, endian, ev.bytes);
    if version >= 8 {
        put32(out, endian, ev.pid);
        put64(out, endian, action);
        put32(out, endian, ev.device);
        put32(out, endian, ev.cpu);
        put16(out, endian, ev.error);
        put16(out, endian, pdu_len);
        out.extend_from_slice(&[0u8; 12]);
    } else {
        put32(out, endian, action as u32);
        put32(out, endian, ev.pid);
        put32(out, endian, ev.device);
        put32(out, endian, ev.cpu);
        put16(out, endian, ev.error);
        put16(out, endian, pdu_len);
    }
    out.extend_from_slice(&pdu);
}

fn put16(out: &mut Vec<u8>, e: Endian, v: u16) {
    out.extend_from_slice(&match e {
        Endian::Little => v.to_le_bytes(),
        Endian::Big => v.to_be_bytes(),
    });
}
fn put32(out: &mut Vec<u8>, e: Endian, v: u32) {
    out.extend_from_slice(&match e {
        Endian::Little => v.to_le_bytes(),
        Endian::Big => v.to_be_bytes(),
    });
}
fn put64(out: &mut Vec<u8>, e: Endian, v: u64) {
    out.extend_from_slice(&match e {
        Endian::Little => v.to_le_bytes(),
        Endian::Big => v.to_be_bytes(),
    });
}

/// Builds an action word from a code and category bits.
pub fn action(code: u8, categories: u64) -> u64 {
    u64::from(code) | (categories << 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Event {
        Event {
            version: 7,
            sequence: 3,
            time: 123_456_789,
            sector: 4096,
            bytes: 8192,
            action: action(code::QUEUE, category::WRITE | category::QUEUE),
            pid: 42,
            device: (7 << 20) | 3,
            cpu: 1,
            error: 0,
            cgroup: None,
            payload: Payload::None,
        }
    }

    #[test]
    fn roundtrip_all_versions_and_orders() {
        let payloads = [
            Payload::None,
            Payload::Remap {
                dev_from: 0x80_0001,
                dev_to: 0xfe0_0000,
                sector_from: 77,
            },
        ];
        for version in [7u8, 8] {
            for endian in [Endian::Little, Endian::Big] {
                for (i, p) in payloads.iter().enumerate() {
                    let mut ev = sample();
                    ev.version = version;
                    if i == 1 {
                        ev.action = action(code::REMAP, category::READ);
                    }
                    ev.payload = p.clone();
                    ev.cgroup = if endian == Endian::Big {
                        Some(99)
                    } else {
                        None
                    };
                    let mut buf = Vec::new();
                    encode(&ev, version, endian, &mut buf);
                    let (back, len) = decode(&buf).unwrap();
                    assert_eq!(len, buf.len());
                    let mut expect = ev.clone();
                    if expect.cgroup.is_some() {
                        expect.action |= CGROUP_FLAG;
                    }
                    assert_eq!(back, expect, "v{version} {endian:?}");
                }
            }
        }
    }

    /// The fast decoder (what the analysis reads with) must agree with the full one on every
    /// record it accepts, and leave the rest (process names, remaps, other byte orders,
    /// truncated records) to it.
    #[test]
    fn fast_path_agrees_with_the_full_decoder() {
        let notify_msg = action(notify::MESSAGE, category::NOTIFY);
        let mk = |act: u64, cgroup: Option<u64>, payload: Payload| Event {
            action: act,
            cgroup,
            payload,
            ..sample()
        };
        let unplug = action(code::UNPLUG_IO, category::QUEUE);
        let cases = [
            (mk(sample().action, None, Payload::None), true),
            (mk(sample().action, Some(7), Payload::None), true),
            (mk(unplug, None, Payload::Count(5)), true),
            (mk(unplug, Some(7), Payload::Count(5)), true),
            (
                mk(
                    action(code::SPLIT, category::WRITE),
                    None,
                    Payload::Count(9),
                ),
                true,
            ),
            (
                mk(notify_msg, Some(7), Payload::Message("bfq D-S x".into())),
                true,
            ),
            (mk(notify_msg, None, Payload::Message("hello".into())), true),
            (
                mk(
                    action(notify::PROCESS, category::NOTIFY),
                    None,
                    Payload::ProcessName("fio".into()),
                ),
                false,
            ),
            (
                mk(
                    action(code::REMAP, category::READ),
                    None,
                    Payload::Remap {
                        dev_from: 1,
                        dev_to: 2,
                        sector_from: 3,
                    },
                ),
                false,
            ),
        ];
        for (ev, fast) in cases {
            let mut buf = Vec::new();
            encode(&ev, 7, Endian::native(), &mut buf);
            let got = decode_io_native_v7(&buf);
            assert_eq!(got.is_some(), fast, "{ev:?}");
            if let Some((io, n)) = got {
                assert_eq!(n, buf.len(), "{ev:?}");
                let (full, m) = decode(&buf).unwrap();
                assert_eq!((io, n), (full.io().0, m), "{ev:?}");
                // A record cut short is never taken by the fast path.
                for cut in 0..buf.len() {
                    assert!(
                        decode_io_native_v7(&buf[..cut]).is_none(),
                        "{ev:?} cut at {cut}"
                    );
                }
            }
            let mut other = Vec::new();
            let swapped = if Endian::native() == Endian::Little {
                Endian::Big
            } else {
                Endian::Little
            };
            encode(&ev, 7, swapped, &mut other);
            assert!(decode_io_native_v7(&other).is_none());
        }
    }

    #[test]
    fn v7_field_offsets_match_the_kernel_layout() {
        let mut buf = Vec::new();
        encode(&sample(), 7, Endian::Little, &mut buf);
        assert_eq!(buf.len(), 48);
        assert_eq!(&buf[0..4], &[0x07, 0x74, 0x61, 0x65]);
        assert_eq!(u32::from_le_bytes(buf[32..36].try_into().unwrap()), 42); // pid
        assert_eq!(
            u32::from_le_bytes(buf[36..40].try_into().unwrap()),
            (7 << 20) | 3
        );
        let mut v8 = Vec::new();
        encode(&sample(), 8, Endian::Little, &mut v8);
        assert_eq!(v8.len(), 64);
        assert_eq!(u32::from_le_bytes(v8[28..32].try_into().unwrap()), 42);
    }

    #[test]
    fn notify_unplug_and_split_payloads() {
        let mut ev = sample();
        ev.action = action(notify::PROCESS, category::NOTIFY);
        ev.payload = Payload::ProcessName("fio".into());
        let mut buf = Vec::new();
        encode(&ev, 7, Endian::Little, &mut buf);
        assert_eq!(
            decode(&buf).unwrap().0.payload,
            Payload::ProcessName("fio".into())
        );

        let mut un = sample();
        un.action = action(code::UNPLUG_IO, category::QUEUE);
        un.payload = Payload::Count(5);
        let mut buf = Vec::new();
        encode(&un, 7, Endian::Little, &mut buf);
        // Unplug counts are big-endian in the payload whatever the header's order.
        assert_eq!(&buf[48..56], &5u64.to_be_bytes());
        assert_eq!(decode(&buf).unwrap().0.payload, Payload::Count(5));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        // Text (blkparse's printed output, say) is said to be text.
        assert_eq!(
            decode(b"Input file t.blktrace.0 added"),
            Err(DecodeError::Text("Inpu".into()))
        );
        assert!(matches!(
            decode(&[0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0]),
            Err(DecodeError::BadMagic(_))
        ));
        assert!(matches!(
            decode(&[0x07, 0x74, 0x61]),
            Err(DecodeError::Truncated { .. })
        ));
        let mut buf = Vec::new();
        encode(&sample(), 7, Endian::Little, &mut buf);
        buf[0] = 9;
        assert_eq!(decode(&buf), Err(DecodeError::BadVersion(9)));
        buf[0] = 7;
        assert!(matches!(
            decode(&buf[..40]),
            Err(DecodeError::Truncated { .. })
        ));
    }
}
