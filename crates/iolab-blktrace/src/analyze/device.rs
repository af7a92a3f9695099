//! The per-device state machine that reproduces btt's statistics event by event.
//!
//! btt's definitions: a Q is remembered by its start sector (a new Q on the same sector
//! replaces the old one — counted here as "replaced"; unlike btt, not one of the other
//! direction still in flight: a read and a write of one block at once are both timed); G, S,
//! I and M find the Q whose sectors
//! hold their start sector (so each part of a split bio, which starts inside the one queued
//! bio, gets its own Q2G and G2I); D and C take every remembered Q whose range lies
//! inside theirs; C forgets its Qs; every delta is clamped to at least 1 ns. Where btt falls
//! short, a split (X) reshapes the remembered Q (`Device::split`), so that split bios are
//! completed too (btt gives them no D2C or Q2C). Everything is per Q (bio). Beside that,
//! iolab keeps a per-request view (one sample per dispatched request), the requests in the
//! driver (dispatch depth), and a timeline. State grows only with IOs in flight.

use std::collections::HashMap;

use super::keymap::KeyMap;
use super::sectormap::SectorMap;

use super::latency::Latency;
use super::samples::{Kind, Sample, Sums};
use super::timeline::Timeline;
use crate::blk_io_trace::{category, code, Io, DISCARD, READ, WRITE};

const NONE: u64 = u64::MAX;
const NO_SPLIT: u32 = u32::MAX;
/// Marks a split bio one of whose parts will never complete: it is not timed whole.
const PART_LOST: u32 = 1 << 31;

/// The parts still to complete of each bio the block layer split and not yet done (with
/// `PART_LOST`), and the free slots among them: they grow only with the split bios in flight.
#[derive(Debug, Clone, Default)]
struct SplitBios {
    left: Vec<u32>,
    free: Vec<u32>,
}

impl SplitBios {
    /// A slot for a bio just split in two.
    fn start(&mut self) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.left[i as usize] = 2;
                i
            }
            None => {
                self.left.push(2);
                (self.left.len() - 1) as u32
            }
        }
    }

    /// One more part of bio `i`.
    fn add_part(&mut self, i: u32) {
        self.left[i as usize] += 1;
    }

    /// A part of bio `i` is done, completed or `lost` (it never will be); true when that
    /// completed the bio whole.
    fn part_done(&mut self, i: u32, lost: bool) -> bool {
        let left = &mut self.left[i as usize];
        *left = (*left - 1) | if lost { PART_LOST } else { 0 };
        let done = *left & !PART_LOST == 0;
        if done {
            self.free.push(i);
        }
        done && *left == 0
    }
}

#[derive(Debug, Clone)]
struct Queued {
    time: u64,
    end: u64,
    /// Read, write or discard ([`Io::direction`]).
    direction: u8,
    /// Split (X) at least once, in either form.
    split: bool,
    /// Index into `Device::procs`.
    proc: u32,
    /// The bio's size as queued, in sectors (for a part of a split bio, the part's): what
    /// its completion completes, whatever range the C names.
    sectors: u32,
    /// For a part of a bio the block layer split: its bio's index into `Device::split_bios`
    /// (the parts still to complete), else `NO_SPLIT`.
    split_bio: u32,
    g: u64,
    s: u64,
    i: u64,
    m: u64,
    d: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct InDriver {
    d: u64,
    first_q: u64,
    bios: u32,
}

/// The btt latencies, per bio.
#[derive(Debug, Clone, Default)]
pub struct BioLatencies {
    pub q2q: Latency,
    pub q2g: Latency,
    pub s2g: Latency,
    pub g2i: Latency,
    pub q2m: Latency,
    pub i2d: Latency,
    pub m2d: Latency,
    pub d2c: Latency,
    pub q2c: Latency,
}

impl BioLatencies {
    /// Without histograms (min/avg/max/N only).
    pub fn plain() -> Self {
        let p = Latency::plain;
        BioLatencies {
            q2q: p(),
            q2g: p(),
            s2g: p(),
            g2i: p(),
            q2m: p(),
            i2d: p(),
            m2d: p(),
            d2c: p(),
            q2c: p(),
        }
    }

    pub fn merge(&mut self, o: &BioLatencies) {
        self.q2q.merge(&o.q2q);
        self.q2g.merge(&o.q2g);
        self.s2g.merge(&o.s2g);
        self.g2i.merge(&o.g2i);
        self.q2m.merge(&o.q2m);
        self.i2d.merge(&o.i2d);
        self.m2d.merge(&o.m2d);
        self.d2c.merge(&o.d2c);
        self.q2c.merge(&o.q2c);
    }

    pub fn named(&self) -> [(&'static str, &Latency); 9] {
        [
            ("q2q", &self.q2q),
            ("q2g", &self.q2g),
            ("s2g", &self.s2g),
            ("g2i", &self.g2i),
            ("q2m", &self.q2m),
            ("i2d", &self.i2d),
            ("m2d", &self.m2d),
            ("d2c", &self.d2c),
            ("q2c", &self.q2c),
        ]
    }
}

/// Per-process accumulations (names are attached at the end). Like btt, min/avg/max/N only:
/// no histograms, which halves the cost of every latency sample. Q2Q and the bytes queued
/// need no matching: the side stage (`side.rs`) counts them, and the report takes them from
/// there; the processes are numbered alike in both (by first Q on the device).
#[derive(Debug, Clone)]
pub struct ProcStats {
    pub pid: u32,
    pub lat: BioLatencies,
    pub bytes: u64,
    /// Bios queued (from the side stage, like the bytes).
    pub queued: u64,
}

/// Everything known about one device.
#[derive(Debug, Clone)]
pub struct Device {
    pub device: u32,
    pub first_time: u64,
    pub last_time: u64,
    /// btt's span of the device ("% Time Q Plugged" is over it): from its first record that
    /// carries data, one before its first Q included, to its last after it.
    pub first_sized: u64,
    pub last_sized: u64,
    pub sector_min: u64,
    pub sector_max: u64,
    /// btt's latencies per bio, filled in at the end: Q2Q from the side stage, the others
    /// from the sums of the samples (see [`Device::absorb`]).
    pub lat: BioLatencies,
    /// Per dispatched request: first Q of its bios to D, D to C, first Q to C.
    pub req_q2d: Latency,
    pub req_d2c: Latency,
    pub req_q2c: Latency,
    /// Q2C and D2C per bio with reads and writes apart (index: 0 read, 1 write): a buffered
    /// writer and a reader behave nothing alike.
    /// By direction: read, write, discard.
    pub dir_q2c: [Latency; 3],
    pub dir_d2c: [Latency; 3],
    /// Q2C of each bio the block layer split, whole: from its Q to the C of its last part,
    /// by direction (what the program that issued it waited, where `dir_q2c` times each part).
    pub whole_split_q2c: [Latency; 3],
    /// Q2C per bio as issued, by direction: the bios not split and each split bio once, whole.
    pub issued_q2c: [Latency; 3],
    split_bios: SplitBios,
    pub n_q: u64,
    pub n_requeue: u64,
    pub n_d: u64,
    pub n_c: u64,
    pub n_reads: u64,
    pub n_writes: u64,
    pub n_discards: u64,
    /// Empty flush requests queued (an fsync's cache flush: no data, no sectors).
    pub n_flushes: u64,
    pub blk_min: u64,
    pub blk_max: u64,
    pub blk_total: u64,
    pub replaced: u64,
    /// Requests replaced in the driver by a later D on the same start sector.
    pub replaced_requests: u64,
    pub cgroup_events: u64,
    pub remaps: u64,
    pub splits: u64,
    /// Bios split at least once, and their sectors as queued whole.
    pub bios_split: u64,
    pub split_bio_sectors: u64,
    pub sleeps: u64,
    /// Sectors of the bios queued, reads and writes (a discard moves no data).
    pub bio_sectors_queued: u64,
    /// Sectors of the bios completed, as queued (a C may name only a split bio's last piece).
    pub bio_sectors_completed: u64,
    /// Of those, the ones completed within `window` (`Options::window`; all time when none).
    pub bio_sectors_in_window: u64,
    window: (u64, u64),
    // Active requests at Q (btt's counter, floored at 0).
    act_q: u64,
    pub act_q_total: u64,
    // Live periods: union of [D, C] intervals.
    live_start: u64,
    pub live_periods: u64,
    pub live_ns: u64,
    pub idle_ns: u64,
    pub last_live_end: u64,
    last_live_start: u64,
    /// The last completion of a request in the driver.
    last_completion: u64,
    /// The live periods as btt counts them, (periods, live ns, end of the last): only
    /// requests that completed. Known at `finish` when the requests never completed are all
    /// in the last period and it holds no completion (a trace cut while they were in flight),
    /// as btt then leaves that period out; else `None`.
    pub btt_live: Option<(u64, u64, u64)>,
    // Dispatch depth at each D (requests in the driver including this one).
    pub dispatch_depth: Latency,
    pub dispatch_sectors: Latency,
    queued: SectorMap<Queued>,
    /// Bios queued on the start sector of a later one of the other direction while still in
    /// flight (a read and a write of one block at once), kept apart so that neither replaces
    /// the other: nearly always empty, and looked at only when not.
    aside: SectorMap<Queued>,
    /// The requests in the driver, by [`driver_key`].
    in_driver: KeyMap<InDriver>,
    pub procs: Vec<ProcStats>,
    /// Latency samples not yet summed (see `samples.rs`): whoever drives the device takes
    /// them and sums them, and [`Device::absorb`] brings the sums back.
    pub samples: Vec<Sample>,
    proc_index: HashMap<u32, u32>,
    last_proc: (u32, u32),
    pub timeline: Timeline,
}

/// A request in the driver is found by its start sector and direction: a read and a write
/// of one block may be in the driver at once.
#[inline(always)]
fn driver_key(ev: &Io) -> u64 {
    ev.sector << 2 | ev.direction() as u64
}

#[inline(always)]
pub(super) fn delta(from: u64, to: u64) -> u64 {
    to.saturating_sub(from).max(1)
}

impl Device {
    pub fn new(device: u32, t: u64, interval: u64, window: Option<(u64, u64)>) -> Self {
        Device {
            device,
            first_time: t,
            last_time: t,
            first_sized: t,
            last_sized: t,
            sector_min: u64::MAX,
            sector_max: 0,
            lat: BioLatencies::default(),
            req_q2d: Latency::default(),
            req_d2c: Latency::default(),
            req_q2c: Latency::default(),
            dir_q2c: Default::default(),
            dir_d2c: Default::default(),
            whole_split_q2c: Default::default(),
            issued_q2c: Default::default(),
            split_bios: SplitBios::default(),
            n_q: 0,
            n_requeue: 0,
            n_d: 0,
            n_c: 0,
            n_reads: 0,
            n_writes: 0,
            n_discards: 0,
            n_flushes: 0,
            blk_min: u64::MAX,
            blk_max: 0,
            blk_total: 0,
            replaced: 0,
            replaced_requests: 0,
            cgroup_events: 0,
            remaps: 0,
            splits: 0,
            bios_split: 0,
            split_bio_sectors: 0,
            sleeps: 0,
            bio_sectors_queued: 0,
            bio_sectors_completed: 0,
            bio_sectors_in_window: 0,
            window: window.unwrap_or((0, u64::MAX)),
            act_q: 0,
            act_q_total: 0,
            live_start: NONE,
            live_periods: 0,
            live_ns: 0,
            idle_ns: 0,
            last_live_end: NONE,
            last_live_start: NONE,
            last_completion: 0,
            btt_live: None,
            dispatch_depth: Latency::default(),
            dispatch_sectors: Latency::default(),
            queued: SectorMap::default(),
            aside: SectorMap::default(),
            in_driver: KeyMap::default(),
            procs: Vec::new(),
            samples: Vec::new(),
            proc_index: HashMap::new(),
            last_proc: (u32::MAX, 0),
            timeline: Timeline::new(t, interval),
        }
    }

    /// Bios queued and never completed so far (at the end: never completed).
    pub fn bios_in_flight(&self) -> u64 {
        self.queued_len()
    }

    /// Bios queued and not completed, both maps.
    #[inline(always)]
    fn queued_len(&self) -> u64 {
        (self.queued.len() + self.aside.len()) as u64
    }

    /// The queued bio a G, S, I or M is about: the one whose sectors hold its start sector,
    /// as btt finds it, unless one of the event's own direction was put aside there.
    #[inline(always)]
    fn named_mut(&mut self, ev: &Io) -> Option<&mut Queued> {
        if !self.aside.is_empty() {
            let direction = ev.direction() as u8;
            if self
                .aside
                .get_mut(ev.sector)
                .is_some_and(|q| q.direction == direction)
            {
                return self.aside.get_mut(ev.sector);
            }
        }
        self.queued.containing_mut(ev.sector, |q| q.end)
    }

    /// Requests dispatched and never completed so far.
    pub fn requests_in_flight(&self) -> u64 {
        self.in_driver.len() as u64
    }

    /// When the earliest of the requests still in the driver was dispatched.
    pub fn oldest_in_flight_dispatch(&self) -> Option<u64> {
        self.in_driver.iter().map(|(_, r)| r.d).min()
    }

    /// Feeds one event of this device (already filtered: no notify, no PC).
    pub fn handle(&mut self, ev: &Io) {
        self.last_time = self.last_time.max(ev.time);
        // Without a branch: this runs for every record.
        let sized_time = if ev.bytes > 0 { ev.time } else { 0 };
        self.last_sized = self.last_sized.max(sized_time);
        self.cgroup_events += u64::from(ev.has_cgroup());
        let t = ev.time;
        let c = ev.code();
        let sized = ev.bytes > 0;
        match c {
            code::QUEUE if sized => self.queue(ev),
            // One flush cannot be told from another (no sector, no size): counted, not timed.
            code::QUEUE if ev.categories() & category::FLUSH != 0 => self.n_flushes += 1,
            code::GETRQ if sized => {
                if let Some(q) = self.named_mut(ev) {
                    q.g = t;
                    let (proc, queued, slept) = (q.proc, q.time, q.s);
                    self.samples
                        .push(Sample::new(Kind::Q2G, proc, delta(queued, t)));
                    if slept != NONE {
                        self.samples
                            .push(Sample::new(Kind::S2G, proc, delta(slept, t)));
                    }
                }
            }
            code::SLEEPRQ => {
                self.sleeps += 1;
                if let Some(q) = self.named_mut(ev) {
                    q.s = t;
                }
            }
            code::INSERT if sized => {
                if let Some(q) = self.named_mut(ev) {
                    q.i = t;
                    let (proc, got) = (q.proc, q.g);
                    if got != NONE {
                        self.samples
                            .push(Sample::new(Kind::G2I, proc, delta(got, t)));
                    }
                }
            }
            code::BACKMERGE | code::FRONTMERGE if sized => {
                self.act_q = self.act_q.saturating_sub(1);
                if let Some(q) = self.named_mut(ev) {
                    q.m = t;
                    let (proc, queued) = (q.proc, q.time);
                    self.samples
                        .push(Sample::new(Kind::Q2M, proc, delta(queued, t)));
                }
            }
            code::REQUEUE if sized => {
                self.n_requeue += 1;
                self.act_q += 1;
                // The request leaves the driver; its D will come again.
                if self.in_driver.remove(driver_key(ev)).is_some() {
                    self.timeline.driver_depth(t, self.in_driver.len() as u64);
                }
            }
            code::ISSUE if sized => self.issue(ev),
            code::COMPLETE if sized => self.complete(ev),
            // Plugs are counted by the side stage (`side.rs`).
            code::REMAP => self.remaps += 1,
            code::SPLIT => {
                self.splits += 1;
                self.split(ev);
            }
            _ => {}
        }
    }

    fn proc_for(&mut self, pid: u32) -> u32 {
        if self.last_proc.0 == pid {
            return self.last_proc.1;
        }
        let next = self.procs.len() as u32;
        let i = *self.proc_index.entry(pid).or_insert(next);
        if i == next {
            self.procs.push(ProcStats {
                pid,
                lat: BioLatencies::plain(),
                bytes: 0,
                queued: 0,
            });
        }
        self.last_proc = (pid, i);
        i
    }

    fn queue(&mut self, ev: &Io) {
        let t = ev.time;
        let pi = self.proc_for(ev.pid);
        self.n_q += 1;
        self.sector_min = self.sector_min.min(ev.sector);
        self.sector_max = self.sector_max.max(ev.end_sector());
        let direction = ev.direction();
        match direction {
            READ => self.n_reads += 1,
            WRITE => self.n_writes += 1,
            _ => self.n_discards += 1,
        }
        if direction != DISCARD {
            self.bio_sectors_queued += u64::from(ev.bytes >> 9);
        }
        self.act_q_total += self.act_q;
        self.act_q += 1;
        let old = self.queued.insert(
            ev.sector,
            ev.end_sector(),
            Queued {
                time: t,
                end: ev.end_sector(),
                direction: direction as u8,
                split: false,
                proc: pi,
                sectors: ev.bytes >> 9,
                split_bio: NO_SPLIT,
                g: NONE,
                s: NONE,
                i: NONE,
                m: NONE,
                d: NONE,
            },
        );
        if let Some(old) = old {
            if old.direction != direction as u8 {
                // Still in flight, of the other direction: both are timed.
                let end = old.end;
                if let Some(older) = self.aside.insert(ev.sector, end, old) {
                    self.replaced += 1;
                    self.part_gone(older.split_bio);
                }
            } else {
                self.replaced += 1;
                self.part_gone(old.split_bio);
            }
        } else if !self.aside.is_empty()
            && self
                .aside
                .get_mut(ev.sector)
                .is_some_and(|q| q.direction == direction as u8)
        {
            // A bio of this direction put aside there and never completed is replaced like
            // any other: left, it would be found before this one by its G, I and M (a CPU's
            // file analysed alone gave Q2Gs of seconds).
            if let Some(older) = self.aside.remove(ev.sector) {
                self.replaced += 1;
                self.part_gone(older.split_bio);
            }
        }
        self.timeline.queue_depth(t, self.queued_len());
    }

    /// A split (X) comes in two forms. The block layer's (a bio over the queue's limits)
    /// names the front part, of its own size, which goes on as a new bio while the rest goes
    /// on from that part's end: the remembered Q is cut in two there, each part keeping the
    /// Q's time, so each is a bio of its own, found by its G, I and M as btt finds it, and
    /// (unlike in btt, where no part's D or C holds the whole Q) dispatched and completed with
    /// its own I2D, D2C and Q2C. Device-mapper's names what is left of the bio after the front
    /// was handed to its targets: the bio itself, whose one C, once every piece is done, names
    /// only its last piece; the remembered Q moves up to the named start, so that the C finds
    /// it and gives the whole bio's Q2C. Without either, the Q of every split bio stayed
    /// remembered and never completed.
    fn split(&mut self, ev: &Io) {
        let (from, to) = (ev.sector, ev.end_sector());
        if to <= from {
            return;
        }
        if let Some(q) = self.queued.get_mut(from) {
            // The block layer's: the front part starts where the bio does.
            if q.end <= to {
                return;
            }
            if q.split_bio == NO_SPLIT {
                q.split_bio = self.split_bios.start();
            } else {
                self.split_bios.add_part(q.split_bio);
            }
            if !q.split {
                q.split = true;
                self.bios_split += 1;
                self.split_bio_sectors += u64::from(q.sectors);
            }
            let mut rest = q.clone();
            let front = (to - from) as u32;
            rest.sectors = q.sectors.saturating_sub(front);
            q.end = to;
            q.sectors = front;
            let end = rest.end;
            if let Some(old) = self.queued.insert(to, end, rest) {
                self.part_gone(old.split_bio);
            }
            // Each part is a bio in the queue from here on, as the state machine counts them.
            let depth = self.queued_len();
            self.timeline.queue_depth(ev.time, depth);
        } else if let Some((key, mut q)) = self.queued.take_below(from, |q| q.end) {
            // Device-mapper's: the rest of the bio, to its end. Anything else is put back.
            let rest = q.end == to;
            if rest && !q.split {
                q.split = true;
                self.bios_split += 1;
                self.split_bio_sectors += u64::from(q.sectors);
            }
            let at = if rest { from } else { key };
            let end = q.end;
            self.queued.insert(at, end, q);
        }
    }

    fn issue(&mut self, ev: &Io) {
        let t = ev.time;
        let end = ev.end_sector();
        self.act_q = self.act_q.saturating_sub(1);
        self.n_d += 1;
        let mut first_q = t;
        let mut bios = 0;
        let samples = &mut self.samples;
        // A request holds bios of its own direction only: a discard dispatched over a read
        // still in the driver (btt gives the read the discard's D) is not the read's.
        let direction = ev.direction() as u8;
        let mut dispatched = |_, q: &mut Queued| {
            if q.end > end || q.direction != direction {
                return;
            }
            bios += 1;
            first_q = first_q.min(q.time);
            if q.i != NONE {
                samples.push(Sample::new(Kind::I2D, q.proc, delta(q.i, t)));
            } else if q.m != NONE {
                samples.push(Sample::new(Kind::M2D, q.proc, delta(q.m, t)));
            }
            q.d = t;
        };
        self.queued.for_range_mut(ev.sector, end, &mut dispatched);
        if !self.aside.is_empty() {
            self.aside.for_range_mut(ev.sector, end, &mut dispatched);
        }
        let earlier = self.in_driver.insert(
            driver_key(ev),
            InDriver {
                d: t,
                first_q,
                bios,
            },
        );
        // A request dispatched on the start sector of one of its direction still in the
        // driver (two readers of one block): the earlier is not matched to a completion, and
        // is counted.
        if earlier.is_some() {
            self.replaced_requests += 1;
        }
        let depth = self.in_driver.len() as u64;
        // Summed here, not sent on with the samples: this keeps the two threads of
        // `analyze_paths` about even.
        self.dispatch_depth.add(depth);
        self.dispatch_sectors.add(u64::from(ev.bytes >> 9));
        self.timeline.driver_depth(t, depth);
        if self.live_start == NONE {
            if self.last_live_end == t {
                // Dispatched at the very nanosecond the last request completed: btt's
                // interval union joins the two periods, so reopen the previous one.
                self.live_ns -= t - self.last_live_start;
                self.live_start = self.last_live_start;
            } else {
                if self.last_live_end != NONE {
                    self.idle_ns += t.saturating_sub(self.last_live_end);
                }
                self.live_start = t;
                self.live_periods += 1;
            }
        }
    }

    fn complete(&mut self, ev: &Io) {
        let t = ev.time;
        let end = ev.end_sector();
        let sectors = u64::from(ev.bytes >> 9);
        self.n_c += 1;
        self.blk_min = self.blk_min.min(sectors);
        self.blk_max = self.blk_max.max(sectors);
        self.blk_total += sectors;
        self.timeline.complete(t, ev.bytes, ev.direction());
        let (timeline, samples) = (&mut self.timeline, &mut self.samples);
        let split_bios = &mut self.split_bios;
        let whole_split_q2c = &mut self.whole_split_q2c;
        let completed = &mut self.bio_sectors_completed;
        let before = *completed;
        let direction = ev.direction() as u8;
        let completes = |q: &Queued| q.end <= end && q.direction == direction;
        let mut completed_bio = |_, q: Queued| {
            // Data moved: a discard (trim) moves none.
            if usize::from(q.direction) != DISCARD {
                *completed += u64::from(q.sectors);
            }
            let q2c = delta(q.time, t);
            timeline.q2c(t, q2c);
            let direction = usize::from(q.direction);
            let q2c_kind = if q.split_bio == NO_SPLIT {
                Kind::Q2C[direction]
            } else {
                Kind::Q2C_PART[direction]
            };
            let d2c_kind = Kind::D2C[direction];
            samples.push(Sample::new(q2c_kind, q.proc, q2c));
            if q.d != NONE {
                samples.push(Sample::new(d2c_kind, q.proc, delta(q.d, t)));
            }
            // Every part shares the bio's Q time, so its last part's Q2C is the bio's.
            if q.split_bio != NO_SPLIT && split_bios.part_done(q.split_bio, false) {
                whole_split_q2c[direction].add(q2c);
            }
        };
        self.queued
            .remove_range_if(ev.sector, end, completes, &mut completed_bio);
        if !self.aside.is_empty() {
            self.aside
                .remove_range_if(ev.sector, end, completes, &mut completed_bio);
        }
        if t >= self.window.0 && t < self.window.1 {
            self.bio_sectors_in_window += self.bio_sectors_completed - before;
        }
        self.timeline.queue_depth(t, self.queued_len());
        if let Some(r) = self.in_driver.remove(driver_key(ev)) {
            // Summed here, like the dispatch depth: the two threads stay about even.
            self.req_d2c.add(delta(r.d, t));
            self.req_q2c.add(delta(r.first_q, t));
            self.req_q2d.add(delta(r.first_q, r.d));
            let _ = r.bios;
            self.timeline.driver_depth(t, self.in_driver.len() as u64);
            self.last_completion = t;
            if self.in_driver.is_empty() && self.live_start != NONE {
                self.live_ns += t.saturating_sub(self.live_start);
                self.last_live_start = self.live_start;
                self.live_start = NONE;
                self.last_live_end = t;
            }
        }
    }

    /// Q2C per bio as issued, all directions together.
    pub fn issued_q2c_all(&self) -> Latency {
        let mut all = self.issued_q2c[0].clone();
        for l in &self.issued_q2c[1..] {
            all.merge(l);
        }
        all
    }

    /// A part of a split bio that will never complete (replaced by a later Q on its sector):
    /// its bio is not timed whole, and its slot is free once no other part is to complete.
    fn part_gone(&mut self, split_bio: u32) {
        if split_bio != NO_SPLIT {
            self.split_bios.part_done(split_bio, true);
        }
    }

    /// Takes in the sums of this device's samples (all of them, once, before `finish`).
    pub fn absorb(&mut self, s: &Sums) {
        let l = &mut self.lat;
        l.q2g = s.get(Kind::Q2G).clone();
        l.s2g = s.get(Kind::S2G).clone();
        l.g2i = s.get(Kind::G2I).clone();
        l.q2m = s.get(Kind::Q2M).clone();
        l.i2d = s.get(Kind::I2D).clone();
        l.m2d = s.get(Kind::M2D).clone();
        for dir in 0..3 {
            let whole = s.get(Kind::Q2C[dir]);
            self.dir_q2c[dir] = whole.clone();
            self.dir_q2c[dir].merge(s.get(Kind::Q2C_PART[dir]));
            self.issued_q2c[dir] = whole.clone();
            self.issued_q2c[dir].merge(&self.whole_split_q2c[dir]);
        }
        self.dir_d2c = Kind::D2C.map(|k| s.get(k).clone());
        for (i, p) in self.procs.iter_mut().enumerate() {
            if let Some(lat) = s.process(i) {
                p.lat = lat;
            }
        }
    }

    /// Closes open intervals at the end of the trace, and sums each direction's Q2C and D2C
    /// into the device's (kept apart per direction only, which halves their cost).
    pub fn finish(&mut self) {
        for (all, dir) in [
            (&mut self.lat.q2c, &self.dir_q2c),
            (&mut self.lat.d2c, &self.dir_d2c),
        ] {
            for d in dir {
                all.merge(d);
            }
        }
        let end = self.last_time;
        // btt completes no request that holds a part of a split bio (its D and C do not hold
        // the whole Q), so its periods are not these: it is not known here what it prints.
        self.btt_live = if self.splits > 0 {
            None
        } else if self.live_start == NONE {
            Some((self.live_periods, self.live_ns, self.last_live_end))
        } else if self.last_completion < self.live_start {
            Some((self.live_periods - 1, self.live_ns, self.last_live_end))
        } else {
            None
        };
        if self.live_start != NONE {
            // Requests still in the driver never completed: the period ends at the last event.
            self.live_ns += end.saturating_sub(self.live_start);
            self.live_start = NONE;
            self.last_live_end = end;
        }
    }
}
