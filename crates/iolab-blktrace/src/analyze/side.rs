//! The statistics that need no Q/D/C matching — seek distances between Qs (Q2Q) and between Ds
//! (D2D, with the seeks per timeline interval), plugging (P, U, UT), and the Q2Q times (per
//! device, per process and across devices) with the bytes each process queued — kept apart
//! from the state machine so `analyze_paths` can compute them on the reader thread, which then
//! drops plug records from the batches: the two threads end up with similar work. (D2D seeks
//! were the state machine's, which handles every D anyway: 8% of its instructions on the
//! mixed benchmark trace, whose reader thread had the fewer.) Notify records other than
//! process names (the tracer's messages; BFQ writes several per request) are only counted, so
//! they stop here too. Same filters as the analyzer: no notify/PC records, no zero-byte IOs,
//! nothing before a device's first Q (or remap).

use std::collections::HashMap;

use super::device::delta;
use super::latency::Latency;
use super::seek::{SeekSummary, Seeks};
use super::timeline::SeekCounts;
use crate::blk_io_trace::{category, code, Io};

/// One process's Q2Q (min/avg/max/N, as the analyzer keeps per process) and bytes queued.
#[derive(Debug, Clone)]
pub struct ProcQueued {
    pub pid: u32,
    pub q2q: Latency,
    last_q: Option<u64>,
    pub bytes: u64,
    /// Bios it queued on this device.
    pub queued: u64,
}

/// Q2Q of one device (btt's: from the previous Q of the device) and of its processes, in
/// the order the analyzer's `Device::procs` numbers them (by first Q).
#[derive(Debug, Clone, Default)]
pub struct QueueTimes {
    pub q2q: Latency,
    last_q: Option<u64>,
    pub procs: Vec<ProcQueued>,
    proc_index: HashMap<u32, usize>,
    last_proc: Option<(u32, usize)>,
}

impl QueueTimes {
    /// A process's Q2Q and bytes queued on this device.
    pub fn process(&self, pid: u32) -> Option<&ProcQueued> {
        self.proc_index.get(&pid).map(|&i| &self.procs[i])
    }

    #[inline]
    fn queue(&mut self, ev: &Io) {
        let t = ev.time;
        if let Some(prev) = self.last_q {
            self.q2q.add(delta(prev, t));
        }
        self.last_q = Some(t);
        let i = match self.last_proc {
            Some((pid, i)) if pid == ev.pid => i,
            _ => self.proc_for(ev.pid),
        };
        let p = &mut self.procs[i];
        if let Some(last) = p.last_q {
            p.q2q.add(delta(last, t));
        }
        p.last_q = Some(t);
        p.bytes += u64::from(ev.bytes);
        p.queued += 1;
    }

    #[cold]
    #[inline(never)]
    fn proc_for(&mut self, pid: u32) -> usize {
        let next = self.procs.len();
        let i = *self.proc_index.entry(pid).or_insert(next);
        if i == next {
            self.procs.push(ProcQueued {
                pid,
                q2q: Latency::plain(),
                last_q: None,
                bytes: 0,
                queued: 0,
            });
        }
        self.last_proc = Some((pid, i));
        i
    }
}

#[derive(Debug, Clone)]
struct SideDevice {
    device: u32,
    q2q: Seeks,
    d2d: Seeks,
    /// The D2D seeks of nonzero distance, per interval of the device's timeline.
    seek_times: SeekCounts,
    times: QueueTimes,
    /// The last record counted here; the device's last of all is the later of this and the
    /// state machine's (see [`SideStage::last_record`]).
    last: u64,
    plugged: bool,
    last_plug: u64,
    plugs: u64,
    timer_unplugs: u64,
    ios_unplugged: u64,
    ios_timer_unplugged: u64,
    plugged_ns: u64,
    plug_records: u64,
    unplug_records: u64,
}

impl SideDevice {
    fn unplug(&mut self, t: u64, n: u64, timer: bool) {
        if self.plugged {
            if timer {
                self.timer_unplugs += 1;
                self.ios_timer_unplugged += n;
            } else {
                self.plugs += 1;
                self.ios_unplugged += n;
            }
            self.plugged_ns += t.saturating_sub(self.last_plug);
            self.plugged = false;
        }
    }
}

/// Plug statistics of one device, btt's "Plug Information".
#[derive(Debug, Clone, PartialEq)]
pub struct PlugStats {
    pub plugs: u64,
    pub timer_unplugs: u64,
    pub ios_unplugged: u64,
    pub ios_timer_unplugged: u64,
    pub plugged_ns: u64,
    /// P records, and U and UT records, as traced.
    pub plug_records: u64,
    pub unplug_records: u64,
    /// btt's span of the device for "% Time Q Plugged": its first and last record with data.
    pub first: u64,
    pub last: u64,
}

#[derive(Debug)]
pub struct SideStage {
    devices: Vec<SideDevice>,
    last: usize,
    /// Plug records handled here and not passed on.
    pub consumed: u64,
    /// Of those, records before their device's first Q.
    pub ignored: u64,
    /// First and last time of the consumed records, for the trace's span.
    pub min_time: Option<u64>,
    pub max_time: u64,
    /// Notify records consumed here (all but process names: the analysis only counts them),
    /// and the earliest of their times (they count for the trace's time zero only).
    pub notify: u64,
    pub notify_min_time: u64,
    /// Q2Q across all devices (btt's "All Devices" Q2Q).
    pub all_q2q: Latency,
    last_q: Option<u64>,
    /// The timelines' interval (`Options::interval_ns`).
    interval: u64,
}

impl SideStage {
    pub fn new(interval: u64) -> Self {
        SideStage {
            devices: Vec::new(),
            last: 0,
            consumed: 0,
            ignored: 0,
            min_time: None,
            max_time: 0,
            notify: 0,
            notify_min_time: u64::MAX,
            all_q2q: Latency::default(),
            last_q: None,
            interval,
        }
    }

    /// Returns false when the record was consumed here (plug/unplug) and need not reach the
    /// state machine. Inlined into the reader's loop: most records (G, I, M, C, ...) concern
    /// nothing here and pass straight on, without a call.
    #[inline(always)]
    pub fn feed(&mut self, ev: &Io) -> bool {
        let counted = ev.categories() & (category::NOTIFY | category::PC) != 0
            || matches!(
                ev.code(),
                code::QUEUE
                    | code::ISSUE
                    | code::PLUG
                    | code::UNPLUG_IO
                    | code::UNPLUG_TIMER
                    | code::REMAP
            );
        !counted || self.count(ev)
    }

    /// [`SideStage::feed`] for the records this stage counts (Q, D, plugs, notify and PC
    /// records) and for remaps, which start a device.
    #[inline(never)]
    fn count(&mut self, ev: &Io) -> bool {
        if ev.categories() & (category::NOTIFY | category::PC) != 0 {
            return self.feed_notify_or_pc(ev);
        }
        let c = ev.code();
        let is_plug = matches!(c, code::PLUG | code::UNPLUG_IO | code::UNPLUG_TIMER);
        if is_plug {
            self.consumed += 1;
            self.min_time = Some(self.min_time.map_or(ev.time, |m| m.min(ev.time)));
            self.max_time = self.max_time.max(ev.time);
        }
        let i = match self.devices.get(self.last) {
            Some(d) if d.device == ev.device => self.last,
            _ => match self.find_device(ev, c) {
                Some(i) => i,
                None => {
                    if is_plug {
                        self.ignored += 1;
                    }
                    return !is_plug;
                }
            },
        };
        self.last = i;
        let d = &mut self.devices[i];
        d.last = d.last.max(ev.time);
        match c {
            code::QUEUE if ev.bytes > 0 => {
                d.q2q.add(ev.sector, ev.end_sector());
                d.times.queue(ev);
                if let Some(prev) = self.last_q {
                    self.all_q2q.add(delta(prev, ev.time));
                }
                self.last_q = Some(ev.time);
            }
            code::ISSUE if ev.bytes > 0 => {
                let distance = d.d2d.add(ev.sector, ev.end_sector());
                if distance != 0 {
                    d.seek_times.seek(ev.time);
                }
            }
            code::PLUG => {
                d.plug_records += 1;
                if !d.plugged {
                    d.plugged = true;
                    d.last_plug = ev.time;
                }
            }
            code::UNPLUG_IO | code::UNPLUG_TIMER => {
                d.unplug_records += 1;
                d.unplug(ev.time, ev.unplug_count(), c == code::UNPLUG_TIMER)
            }
            _ => {}
        }
        !is_plug
    }

    /// Notify records (all but process names stop here) and PC records (passed on).
    #[cold]
    #[inline(never)]
    fn feed_notify_or_pc(&mut self, ev: &Io) -> bool {
        if ev.is_notify() {
            // Process names and messages (iolab's notes of lost events) are read, not counted.
            if matches!(
                ev.code(),
                crate::blk_io_trace::notify::PROCESS | crate::blk_io_trace::notify::MESSAGE
            ) {
                return true;
            }
            self.notify += 1;
            self.notify_min_time = self.notify_min_time.min(ev.time);
            return false;
        }
        true
    }

    /// The index of the event's device, started at its first Q (or remap) as the analyzer
    /// does; `None` before that.
    #[cold]
    #[inline(never)]
    fn find_device(&mut self, ev: &Io, c: u8) -> Option<usize> {
        if let Some(i) = self.devices.iter().position(|d| d.device == ev.device) {
            return Some(i);
        }
        if !((c == code::QUEUE && ev.bytes > 0) || c == code::REMAP) {
            return None;
        }
        self.devices.push(SideDevice {
            device: ev.device,
            q2q: Seeks::default(),
            d2d: Seeks::default(),
            // The state machine starts the device's timeline at this same record.
            seek_times: SeekCounts::new(ev.time, self.interval),
            times: QueueTimes::default(),
            last: ev.time,
            plugged: false,
            last_plug: 0,
            plugs: 0,
            timer_unplugs: 0,
            ios_unplugged: 0,
            ios_timer_unplugged: 0,
            plugged_ns: 0,
            plug_records: 0,
            unplug_records: 0,
        });
        Some(self.devices.len() - 1)
    }

    fn device(&self, dev: u32) -> Option<&SideDevice> {
        self.devices.iter().find(|d| d.device == dev)
    }

    /// The Q2Q times of a device and its processes.
    pub fn queue_times(&self, dev: u32) -> Option<&QueueTimes> {
        self.device(dev).map(|d| &d.times)
    }

    /// Folds every device's pending seek distances (see [`Seeks::settle`]).
    pub fn settle(&mut self) {
        for d in &mut self.devices {
            d.q2q.settle();
            d.d2d.settle();
        }
    }

    /// A device's Q2Q and D2D seeks.
    pub fn seeks(&self, dev: u32) -> (Option<SeekSummary>, Option<SeekSummary>) {
        self.device(dev)
            .map_or((None, None), |d| (d.q2q.summary(), d.d2d.summary()))
    }

    /// A device's D2D seeks of nonzero distance per interval of its timeline.
    pub fn seek_counts(&self, dev: u32) -> Option<&SeekCounts> {
        self.device(dev).map(|d| &d.seek_times)
    }

    /// The time of the device's last record counted here (plugs included).
    pub fn last_record(&self, dev: u32) -> Option<u64> {
        self.device(dev).map(|d| d.last)
    }

    /// Plug statistics over btt's span of the device, `(first, last)` (its records with data,
    /// which the state machine sees: btt's `% Time Q Plugged` divides by it), closing a plug
    /// still open at its end, as btt does.
    pub fn plugs(&self, dev: u32, (first, last): (u64, u64)) -> Option<PlugStats> {
        let d = self.device(dev)?;
        let mut stats = PlugStats {
            plugs: d.plugs,
            timer_unplugs: d.timer_unplugs,
            ios_unplugged: d.ios_unplugged,
            ios_timer_unplugged: d.ios_timer_unplugged,
            plugged_ns: d.plugged_ns,
            plug_records: d.plug_records,
            unplug_records: d.unplug_records,
            first,
            last,
        };
        // Still plugged at the end: unplugged by the end of the trace (as btt closes it).
        if d.plugged {
            stats.plugs += 1;
            stats.plugged_ns += last.saturating_sub(d.last_plug);
        }
        Some(stats)
    }
}
