//! The statistics that need no Q/D/C matching — seek distances (Q2Q from every Q, D2D from
//! every D) and plugging (P, U, UT) — kept apart from the state machine so `analyze_paths`
//! can compute them on the reader thread, which then drops plug records from the batches:
//! the two threads end up with similar work. Notify records other than process names (the
//! tracer's messages; BFQ writes several per request) are only counted, so they stop here too. Same filters as the analyzer: no notify/PC
//! records, no zero-byte IOs, nothing before a device's first Q (or remap).

use super::seek::{SeekSummary, Seeks};
use crate::trace::blk_io_trace::{category, code, Io};

#[derive(Debug, Clone)]
struct SideDevice {
    device: u32,
    q2q: Seeks,
    d2d: Seeks,
    first: u64,
    last: u64,
    plugged: bool,
    last_plug: u64,
    plugs: u64,
    timer_unplugs: u64,
    ios_unplugged: u64,
    ios_timer_unplugged: u64,
    plugged_ns: u64,
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
    /// The device's first and last event (btt's span for "% Time Q Plugged").
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
}

impl Default for SideStage {
    fn default() -> Self {
        SideStage {
            devices: Vec::new(),
            last: 0,
            consumed: 0,
            ignored: 0,
            min_time: None,
            max_time: 0,
            notify: 0,
            notify_min_time: u64::MAX,
        }
    }
}

impl SideStage {
    /// Returns false when the record was consumed here (plug/unplug) and need not reach the
    /// state machine.
    #[inline]
    pub fn feed(&mut self, ev: &Io) -> bool {
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
            code::QUEUE if ev.bytes > 0 => d.q2q.add(ev.sector, ev.end_sector()),
            code::ISSUE if ev.bytes > 0 => d.d2d.add(ev.sector, ev.end_sector()),
            code::PLUG if !d.plugged => {
                d.plugged = true;
                d.last_plug = ev.time;
            }
            code::UNPLUG_IO | code::UNPLUG_TIMER => {
                d.unplug(ev.time, ev.count, c == code::UNPLUG_TIMER)
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
            if ev.code() == crate::trace::blk_io_trace::notify::PROCESS {
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
            first: ev.time,
            last: ev.time,
            plugged: false,
            last_plug: 0,
            plugs: 0,
            timer_unplugs: 0,
            ios_unplugged: 0,
            ios_timer_unplugged: 0,
            plugged_ns: 0,
        });
        Some(self.devices.len() - 1)
    }

    pub fn seeks(&self, dev: u32) -> (Option<SeekSummary>, Option<SeekSummary>) {
        match self.devices.iter().find(|d| d.device == dev) {
            Some(d) => (d.q2q.summary(), d.d2d.summary()),
            None => (None, None),
        }
    }

    /// Plug statistics, closing a plug still open at the device's last event (as btt does).
    pub fn plugs(&self, dev: u32) -> Option<PlugStats> {
        let mut d = self.devices.iter().find(|d| d.device == dev)?.clone();
        if d.plugged {
            let end = d.last;
            d.unplug(end, 0, false);
        }
        Some(PlugStats {
            plugs: d.plugs,
            timer_unplugs: d.timer_unplugs,
            ios_unplugged: d.ios_unplugged,
            ios_timer_unplugged: d.ios_timer_unplugged,
            plugged_ns: d.plugged_ns,
            first: d.first,
            last: d.last,
        })
    }
}
