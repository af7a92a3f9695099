//! The per-device state machine that reproduces btt's statistics event by event.
//!
//! btt's definitions: a Q is remembered by its start sector (a new Q on the same sector
//! replaces the old one — counted here as "replaced"); G, S, I and M find the Q whose sectors
//! hold their start sector (so each part of a split bio, which starts inside the one queued
//! bio, gets its own Q2G and G2I); D and C take every remembered Q whose range lies
//! inside theirs; C forgets its Qs; every delta is clamped to at least 1 ns. Everything is per
//! Q (bio). Beside that, iolab keeps a per-request view (one sample per dispatched request),
//! the requests in the driver (dispatch depth), and a timeline. State grows only with IOs in
//! flight.

use std::collections::HashMap;

use super::sectormap::SectorMap;

use super::latency::Latency;
use super::timeline::Timeline;
use crate::blk_io_trace::{code, Io};

const NONE: u64 = u64::MAX;

#[derive(Debug, Clone)]
struct Queued {
    time: u64,
    end: u64,
    bytes: u32,
    write: bool,
    /// Index into `Device::procs`.
    proc: u32,
    g: u64,
    s: u64,
    i: u64,
    m: u64,
    d: u64,
}

#[derive(Debug, Clone)]
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
}

/// Everything known about one device.
#[derive(Debug, Clone)]
pub struct Device {
    pub device: u32,
    pub first_time: u64,
    pub last_time: u64,
    pub sector_min: u64,
    pub sector_max: u64,
    /// btt's latencies per bio; Q2Q is filled in from the side stage at the end.
    pub lat: BioLatencies,
    /// Per dispatched request: first Q of its bios to D, D to C, first Q to C.
    pub req_q2d: Latency,
    pub req_d2c: Latency,
    pub req_q2c: Latency,
    /// Q2C and D2C per bio with reads and writes apart (index: 0 read, 1 write): a buffered
    /// writer and a reader behave nothing alike.
    pub dir_q2c: [Latency; 2],
    pub dir_d2c: [Latency; 2],
    pub n_q: u64,
    pub n_requeue: u64,
    pub n_d: u64,
    pub n_c: u64,
    pub n_reads: u64,
    pub n_writes: u64,
    pub blk_min: u64,
    pub blk_max: u64,
    pub blk_total: u64,
    pub replaced: u64,
    pub cgroup_events: u64,
    pub remaps: u64,
    pub splits: u64,
    pub sleeps: u64,
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
    // Dispatch depth at each D (requests in the driver including this one).
    pub dispatch_depth: Latency,
    pub dispatch_sectors: Latency,
    /// The previous dispatch's sectors (btt's first seek is from sector 0), for the
    /// timeline's seeks per second.
    last_d: (u64, u64),
    queued: SectorMap<Queued>,
    in_driver: SectorMap<InDriver>,
    pub procs: Vec<ProcStats>,
    scratch: Vec<u64>,
    proc_index: HashMap<u32, u32>,
    last_proc: (u32, u32),
    pub timeline: Timeline,
}

#[inline(always)]
pub(super) fn delta(from: u64, to: u64) -> u64 {
    to.saturating_sub(from).max(1)
}

impl Device {
    pub fn new(device: u32, t: u64, interval: u64) -> Self {
        Device {
            device,
            first_time: t,
            last_time: t,
            sector_min: u64::MAX,
            sector_max: 0,
            lat: BioLatencies::default(),
            req_q2d: Latency::default(),
            req_d2c: Latency::default(),
            req_q2c: Latency::default(),
            dir_q2c: Default::default(),
            dir_d2c: Default::default(),
            n_q: 0,
            n_requeue: 0,
            n_d: 0,
            n_c: 0,
            n_reads: 0,
            n_writes: 0,
            blk_min: u64::MAX,
            blk_max: 0,
            blk_total: 0,
            replaced: 0,
            cgroup_events: 0,
            remaps: 0,
            splits: 0,
            sleeps: 0,
            act_q: 0,
            act_q_total: 0,
            live_start: NONE,
            live_periods: 0,
            live_ns: 0,
            idle_ns: 0,
            last_live_end: NONE,
            last_live_start: NONE,
            dispatch_depth: Latency::default(),
            dispatch_sectors: Latency::default(),
            last_d: (0, 0),
            queued: SectorMap::default(),
            in_driver: SectorMap::default(),
            procs: Vec::new(),
            scratch: Vec::new(),
            proc_index: HashMap::new(),
            last_proc: (u32::MAX, 0),
            timeline: Timeline::new(t, interval),
        }
    }

    /// Bios queued and never completed so far (at the end: never completed).
    pub fn bios_in_flight(&self) -> u64 {
        self.queued.len() as u64
    }

    /// Requests dispatched and never completed so far.
    pub fn requests_in_flight(&self) -> u64 {
        self.in_driver.len() as u64
    }

    /// Feeds one event of this device (already filtered: no notify, no PC).
    pub fn handle(&mut self, ev: &Io) {
        self.last_time = self.last_time.max(ev.time);
        if ev.has_cgroup() {
            self.cgroup_events += 1;
        }
        let t = ev.time;
        let c = ev.code();
        let sized = ev.bytes > 0;
        match c {
            code::QUEUE if sized => self.queue(ev),
            code::GETRQ if sized => {
                if let Some(q) = self.queued.containing_mut(ev.sector, |q| q.end) {
                    q.g = t;
                    let q2g = delta(q.time, t);
                    self.lat.q2g.add(q2g);
                    let p = &mut self.procs[q.proc as usize];
                    p.lat.q2g.add(q2g);
                    if q.s != NONE {
                        let s2g = delta(q.s, t);
                        self.lat.s2g.add(s2g);
                        p.lat.s2g.add(s2g);
                    }
                }
            }
            code::SLEEPRQ => {
                self.sleeps += 1;
                if let Some(q) = self.queued.containing_mut(ev.sector, |q| q.end) {
                    q.s = t;
                }
            }
            code::INSERT if sized => {
                if let Some(q) = self.queued.containing_mut(ev.sector, |q| q.end) {
                    q.i = t;
                    if q.g != NONE {
                        let g2i = delta(q.g, t);
                        self.lat.g2i.add(g2i);
                        self.procs[q.proc as usize].lat.g2i.add(g2i);
                    }
                }
            }
            code::BACKMERGE | code::FRONTMERGE if sized => {
                self.act_q = self.act_q.saturating_sub(1);
                if let Some(q) = self.queued.containing_mut(ev.sector, |q| q.end) {
                    q.m = t;
                    let q2m = delta(q.time, t);
                    self.lat.q2m.add(q2m);
                    self.procs[q.proc as usize].lat.q2m.add(q2m);
                }
            }
            code::REQUEUE if sized => {
                self.n_requeue += 1;
                self.act_q += 1;
                // The request leaves the driver; its D will come again.
                if self.in_driver.remove(ev.sector).is_some() {
                    self.timeline.driver_depth(t, self.in_driver.len() as u64);
                }
            }
            code::ISSUE if sized => self.issue(ev),
            code::COMPLETE if sized => self.complete(ev),
            // Plugs are counted by the side stage (`side.rs`).
            code::REMAP => self.remaps += 1,
            code::SPLIT => self.splits += 1,
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
        if ev.is_write() {
            self.n_writes += 1;
        } else {
            self.n_reads += 1;
        }
        self.act_q_total += self.act_q;
        self.act_q += 1;
        let old = self.queued.insert(
            ev.sector,
            ev.end_sector(),
            Queued {
                time: t,
                end: ev.end_sector(),
                bytes: ev.bytes,
                write: ev.is_write(),
                proc: pi,
                g: NONE,
                s: NONE,
                i: NONE,
                m: NONE,
                d: NONE,
            },
        );
        if old.is_some() {
            self.replaced += 1;
        }
        self.timeline.queue_depth(t, self.queued.len() as u64);
    }

    fn issue(&mut self, ev: &Io) {
        let t = ev.time;
        let end = ev.end_sector();
        self.act_q = self.act_q.saturating_sub(1);
        self.n_d += 1;
        let mut first_q = t;
        let mut bios = 0;
        let (lat, procs) = (&mut self.lat, &mut self.procs);
        self.queued.for_range_mut(ev.sector, end, |_, q| {
            if q.end > end {
                return;
            }
            bios += 1;
            first_q = first_q.min(q.time);
            let p = &mut procs[q.proc as usize];
            if q.i != NONE {
                let v = delta(q.i, t);
                lat.i2d.add(v);
                p.lat.i2d.add(v);
            } else if q.m != NONE {
                let v = delta(q.m, t);
                lat.m2d.add(v);
                p.lat.m2d.add(v);
            }
            q.d = t;
        });
        self.in_driver.insert(
            ev.sector,
            end,
            InDriver {
                d: t,
                first_q,
                bios,
            },
        );
        let depth = self.in_driver.len() as u64;
        self.dispatch_depth.add(depth);
        self.dispatch_sectors.add(u64::from(ev.bytes >> 9));
        self.timeline.driver_depth(t, depth);
        if super::seek::distance(self.last_d.0, self.last_d.1, ev.sector, end) != 0 {
            self.timeline.seek(t);
        }
        self.last_d = (ev.sector, end);
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
        self.timeline.complete(t, ev.bytes, ev.is_write());
        let mut done = std::mem::take(&mut self.scratch);
        done.clear();
        self.queued.for_range_mut(ev.sector, end, |s, q| {
            if q.end <= end {
                done.push(s);
            }
        });
        for &s in &done {
            let Some(q) = self.queued.remove(s) else {
                continue;
            };
            let q2c = delta(q.time, t);
            self.lat.q2c.add(q2c);
            self.dir_q2c[usize::from(q.write)].add(q2c);
            self.timeline.q2c(t, q2c);
            let p = &mut self.procs[q.proc as usize];
            p.lat.q2c.add(q2c);
            if q.d != NONE {
                let d2c = delta(q.d, t);
                self.lat.d2c.add(d2c);
                self.dir_d2c[usize::from(q.write)].add(d2c);
                p.lat.d2c.add(d2c);
            }
            let _ = q.bytes;
        }
        self.scratch = done;
        self.timeline.queue_depth(t, self.queued.len() as u64);
        if let Some(r) = self.in_driver.remove(ev.sector) {
            self.req_d2c.add(delta(r.d, t));
            self.req_q2c.add(delta(r.first_q, t));
            self.req_q2d.add(delta(r.first_q, r.d));
            let _ = r.bios;
            self.timeline.driver_depth(t, self.in_driver.len() as u64);
            if self.in_driver.is_empty() && self.live_start != NONE {
                self.live_ns += t.saturating_sub(self.live_start);
                self.last_live_start = self.live_start;
                self.live_start = NONE;
                self.last_live_end = t;
            }
        }
    }

    /// Closes open intervals at the end of the trace.
    pub fn finish(&mut self) {
        let end = self.last_time;
        if self.live_start != NONE {
            // Requests still in the driver never completed: the period ends at the last event.
            self.live_ns += end.saturating_sub(self.live_start);
            self.live_start = NONE;
            self.last_live_end = end;
        }
    }
}
