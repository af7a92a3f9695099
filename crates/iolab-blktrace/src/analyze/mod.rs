//! Analysis of a block trace: feeds a time-ordered event stream through per-device state
//! machines (`device`) that reproduce btt's statistics, and builds a [`Report`] with btt's
//! sections plus percentiles, a per-request view, IOs never completed, dispatch depth and a
//! timeline. Memory grows with IOs in flight (and the timeline's length), not with events.

mod apart;
pub mod device;
pub mod keymap;
pub mod latency;
pub mod render;
pub mod samples;
pub mod sectormap;
pub mod seek;
pub mod side;
pub mod timeline;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use self::device::{BioLatencies, Device};
use self::latency::{Latency, LatencySummary};
use self::samples::{AllSums, Sample};
use self::seek::SeekSummary;
use self::side::SideStage;
use self::timeline::TimelinePoint;
use super::blk_io_trace::{category, code, dev_name, Event, Io, Payload};
use super::stream::TraceError;

/// How to analyse.
#[derive(Debug, Clone)]
pub struct Options {
    /// Timeline bucket width in nanoseconds.
    pub interval_ns: u64,
    /// Keep the timeline in the report (it can be long).
    pub timeline: bool,
    /// Also count the bytes of the bios completed from the first to the second time on the
    /// trace's clock (`[start, end)`, nanoseconds; CLOCK_MONOTONIC in iolab's recordings):
    /// an experiment compares them with what fio measured after its `ramp_time`.
    pub window: Option<(u64, u64)>,
    /// A device's own window in place of `window`, by its name as the report gives it
    /// ("major,minor"): devices driven by jobs of their own are measured over their own
    /// intervals.
    pub device_windows: BTreeMap<String, (u64, u64)>,
    /// The devices "All Devices" covers, by name ("major,minor"); every device when `None`.
    /// An experiment that also records the devices stacked below its targets keeps them out
    /// of its targets' figures. Restricted, its Q2Q is the devices' own Q2Qs together (the
    /// gaps between one device's bios), not the gaps across devices.
    pub all_devices: Option<BTreeSet<String>>,
}

impl Options {
    /// The window the bytes of `device` (its dev_t) are counted over, if any.
    fn window_of(&self, device: u32) -> Option<(u64, u64)> {
        if self.device_windows.is_empty() {
            return self.window;
        }
        self.device_windows
            .get(&dev_name(device))
            .copied()
            .or(self.window)
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            interval_ns: 1_000_000_000,
            timeline: true,
            window: None,
            device_windows: BTreeMap::new(),
            all_devices: None,
        }
    }
}

/// What a device's records before its first Q with data leave: its first record with data
/// (btt's span begins there), and its empty flushes (an fsync may flush before it writes),
/// counted like any later one.
#[derive(Default)]
struct Early {
    first_sized: Option<u64>,
    flushes: u64,
}

/// Consumes events one at a time.
pub struct Analyzer {
    /// Seek and plug statistics, when fed here rather than on a reader thread.
    side: Option<SideStage>,
    opts: Options,
    devices: Vec<Device>,
    index: HashMap<u32, usize>,
    last_device: (u32, usize),
    names: HashMap<u32, String>,
    /// What came on each device not started yet.
    early: HashMap<u32, Early>,
    pub events: u64,
    pub notify: u64,
    /// Events lost, by iolab's notes in the trace: each loss where it was, and the whole.
    lost_here: u64,
    lost_in_all: u64,
    pub pc: u64,
    pub ignored_before_first_q: u64,
    first_time: Option<u64>,
    last_time: u64,
    /// Time of the first record of any kind: btt's (blkparse's) time zero.
    trace_start: u64,
    /// The devices' latency samples summed so far (see `samples.rs`).
    sums: AllSums,
    /// Sum the devices' samples here as they come; off when `analyze_paths` takes them to its
    /// reader thread after each batch.
    sums_here: bool,
}

impl Analyzer {
    pub fn new(opts: Options) -> Self {
        Analyzer {
            side: Some(SideStage::new(opts.interval_ns)),
            opts,
            devices: Vec::new(),
            index: HashMap::new(),
            last_device: (u32::MAX, 0),
            names: HashMap::new(),
            early: HashMap::new(),
            events: 0,
            notify: 0,
            lost_here: 0,
            lost_in_all: 0,
            pc: 0,
            ignored_before_first_q: 0,
            first_time: None,
            last_time: 0,
            trace_start: u64::MAX,
            sums: AllSums::default(),
            sums_here: true,
        }
    }

    pub fn feed(&mut self, ev: &Event) {
        let (io, needs_event) = ev.io();
        self.feed_io(&io, needs_event.then_some(ev));
    }

    /// Feeds one record in its compact form; `full` is the whole event when its payload
    /// matters (process names). Inlined into the batch loop: a call per record cost ~18
    /// instructions of register saving and restoring.
    #[inline(always)]
    pub fn feed_io(&mut self, ev: &Io, full: Option<&Event>) {
        if let Some(s) = self.side.as_mut() {
            if !s.feed(ev) {
                return;
            }
        }
        self.events += 1;
        self.trace_start = self.trace_start.min(ev.time);
        if ev.categories() & (category::NOTIFY | category::PC) != 0 {
            self.feed_notify_or_pc(ev, full);
            return;
        }
        self.first_time.get_or_insert(ev.time);
        self.last_time = self.last_time.max(ev.time);
        let cached = self.last_device;
        let i = match (cached.0 == ev.device)
            .then_some(cached.1)
            .or_else(|| self.index.get(&ev.device).copied())
        {
            Some(i) => i,
            None => {
                // Like btt, a device starts at its first Q (or remap); earlier events
                // belong to IOs whose beginning the trace missed.
                let c = ev.code();
                if !(c == code::QUEUE && ev.bytes > 0) && c != code::REMAP {
                    let early = self.early.entry(ev.device).or_default();
                    if ev.bytes > 0 {
                        early.first_sized.get_or_insert(ev.time);
                    }
                    if c == code::QUEUE && ev.categories() & category::FLUSH != 0 {
                        early.flushes += 1;
                    } else {
                        self.ignored_before_first_q += 1;
                    }
                    return;
                }
                let mut d = Device::new(
                    ev.device,
                    ev.time,
                    self.opts.interval_ns,
                    self.opts.window_of(ev.device),
                );
                if let Some(early) = self.early.remove(&ev.device) {
                    d.first_sized = d.first_sized.min(early.first_sized.unwrap_or(u64::MAX));
                    d.n_flushes = early.flushes;
                }
                self.devices.push(d);
                self.index.insert(ev.device, self.devices.len() - 1);
                self.devices.len() - 1
            }
        };
        self.last_device = (ev.device, i);
        let d = &mut self.devices[i];
        d.handle(ev);
        if self.sums_here && d.samples.len() >= 4096 {
            self.sums.device(i).add(&d.samples);
            d.samples.clear();
        }
    }

    /// Feeds a batch read by [`super::merge::Merged::read_io_batch`] (its records with their
    /// whole events where those matter).
    fn feed_batch(&mut self, batch: &super::stream::IoBatch) {
        if batch.extra.is_empty() {
            for io in &batch.ios {
                self.feed_io(io, None);
            }
        } else {
            let mut extra = batch.extra.iter().peekable();
            for (i, io) in batch.ios.iter().enumerate() {
                let full = match extra.peek() {
                    Some((at, ev)) if *at == i => {
                        extra.next();
                        Some(ev)
                    }
                    _ => None,
                };
                self.feed_io(io, full);
            }
        }
    }

    /// Notify records (process names are kept) and PC records: only counted.
    #[cold]
    #[inline(never)]
    fn feed_notify_or_pc(&mut self, ev: &Io, full: Option<&Event>) {
        if ev.is_notify() {
            self.notify += 1;
            match full.map(|e| &e.payload) {
                Some(Payload::ProcessName(name)) => {
                    // blktrace writes "comm/..." for kernel threads at times; keep the command.
                    let name = name.split('/').next().unwrap_or(name).to_string();
                    self.names.insert(ev.pid, name);
                }
                Some(Payload::Message(text)) => match crate::blk_io_trace::loss_note(text) {
                    Some(crate::blk_io_trace::LossNote::Here(n)) => self.lost_here += n,
                    Some(crate::blk_io_trace::LossNote::InAll(n)) => {
                        self.lost_in_all = self.lost_in_all.max(n)
                    }
                    None => {}
                },
                _ => {}
            }
        } else {
            self.pc += 1;
        }
    }

    /// Reads a whole stream; stops at the first error.
    pub fn run(
        &mut self,
        events: impl Iterator<Item = Result<Event, TraceError>>,
    ) -> Result<(), TraceError> {
        for ev in events {
            self.feed(&ev?);
        }
        Ok(())
    }

    /// Why the timeline cannot be drawn at this interval, when events fell beyond
    /// [`timeline::MAX_INTERVALS`] intervals: the trace's span, the interval, the number of
    /// intervals that would take, the limit, and the interval that would fit.
    pub fn timeline_overflow(&self) -> Option<String> {
        let overflows = |d: &Device| d.timeline.overflows(d.last_time);
        if !self.opts.timeline || !self.devices.iter().any(overflows) {
            return None;
        }
        let span = self
            .last_time
            .saturating_sub(self.first_time.unwrap_or(self.last_time));
        let interval = self.opts.interval_ns.max(1);
        let needed = span / interval + 1;
        let fits = span.div_ceil(timeline::MAX_INTERVALS).max(1);
        Some(format!(
            "the trace spans {:.3} s: a timeline at an interval of {} s would have {needed} \
             intervals, more than the limit of {}; use --interval {} or longer",
            span as f64 / 1e9,
            interval as f64 / 1e9,
            timeline::MAX_INTERVALS,
            seconds_text(fits),
        ))
    }

    pub fn finish(mut self) -> Report {
        let interval = self.opts.interval_ns;
        let mut side = self.side.take().unwrap_or_else(|| SideStage::new(interval));
        side.settle();
        self.finish_with(&side)
    }

    /// Finishes with the seek and plug statistics gathered elsewhere.
    pub fn finish_with(mut self, side: &SideStage) -> Report {
        // Records consumed by the side stage count for the trace as a whole.
        self.events += side.consumed + side.notify;
        self.notify += side.notify;
        self.trace_start = self.trace_start.min(side.notify_min_time);
        self.ignored_before_first_q += side.ignored;
        // A device that never had a Q with data is no device of the report: its flushes are
        // records left out, like its other ones.
        self.ignored_before_first_q += self.early.values().map(|e| e.flushes).sum::<u64>();
        if let Some(t) = side.min_time {
            self.trace_start = self.trace_start.min(t);
            self.first_time = Some(self.first_time.map_or(t, |f| f.min(t)));
        }
        self.last_time = self.last_time.max(side.max_time);
        let mut devices = Vec::new();
        let mut all = BioLatencies::default();
        // Q2C per bio as issued over the same devices, if any of them split bios.
        let (mut all_issued, mut all_split) = (Latency::default(), false);
        let mut by_name: BTreeMap<String, (Vec<u32>, BioLatencies, u64, u64)> = BTreeMap::new();
        let origin = self.first_time.unwrap_or(0);
        for (i, d) in self.devices.iter_mut().enumerate() {
            let sums = self.sums.device(i);
            sums.add(&d.samples);
            d.samples.clear();
            d.absorb(sums);
        }
        self.devices.sort_by_key(|d| d.device);
        for mut d in self.devices {
            d.finish();
            // Q2Q and the bytes queued per process come from the side stage.
            if let Some(times) = side.queue_times(d.device) {
                d.lat.q2q = times.q2q.clone();
                for p in &mut d.procs {
                    if let Some(q) = times.process(p.pid) {
                        p.lat.q2q = q.q2q.clone();
                        p.bytes = q.bytes;
                        p.queued = q.queued;
                    }
                }
            }
            let covered = self.opts.all_devices.as_ref();
            if covered.is_none_or(|names| names.contains(&dev_name(d.device))) {
                all.merge(&d.lat);
                all_issued.merge(&d.issued_q2c_all());
                all_split |= d.splits > 0;
            }
            for p in &d.procs {
                let pid = p.pid;
                let name = self
                    .names
                    .get(&pid)
                    .cloned()
                    .unwrap_or_else(|| format!("pid {pid}"));
                let e = by_name
                    .entry(name)
                    .or_insert_with(|| (Vec::new(), BioLatencies::plain(), 0, 0));
                if !e.0.contains(&pid) {
                    e.0.push(pid);
                }
                e.1.merge(&p.lat);
                e.2 += p.bytes;
                e.3 += p.queued;
            }
            let sk = side.seeks(d.device);
            if let Some(seeks) = side.seek_counts(d.device) {
                d.timeline.add_seeks(seeks);
            }
            if let Some(last) = side.last_record(d.device) {
                d.last_time = d.last_time.max(last);
            }
            let plugs = side.plugs(d.device, (d.first_sized, d.last_sized));
            devices.push(device_report(
                d,
                sk,
                plugs,
                origin,
                self.trace_start,
                &self.opts,
            ));
        }
        if self.opts.all_devices.is_none() {
            all.q2q = side.all_q2q.clone();
        }
        let processes = by_name
            .into_iter()
            .map(|(name, (mut pids, lat, bytes, queued))| {
                pids.sort_unstable();
                ProcessReport {
                    name,
                    pids,
                    q: queued,
                    bytes,
                    latency: latency_map(&lat),
                }
            })
            .collect();
        Report {
            events: self.events,
            notify_events: self.notify,
            events_lost: self.lost_here.max(self.lost_in_all),
            pc_events: self.pc,
            ignored_before_first_q: self.ignored_before_first_q,
            duration: self.last_time.saturating_sub(origin) as f64 / 1e9,
            all: latency_map(&all),
            all_q2c_as_issued: all_split.then(|| summary_or_empty(&all_issued)),
            devices,
            processes,
        }
    }
}

fn latency_map(l: &BioLatencies) -> BTreeMap<String, LatencySummary> {
    l.named()
        .into_iter()
        .map(|(name, lat)| (name.to_string(), summary_or_empty(lat)))
        .collect()
}

fn summary_or_empty(l: &Latency) -> LatencySummary {
    l.summary().unwrap_or_else(LatencySummary::empty)
}

fn count_summary(l: &Latency) -> CountSummary {
    match l.summary() {
        Some(s) => CountSummary {
            n: s.n,
            min: l.min as f64,
            avg: l.avg_ns(),
            max: l.max as f64,
            p50: (s.p50 * 1e9).round(),
            p90: (s.p90 * 1e9).round(),
            p99: (s.p99 * 1e9).round(),
        },
        None => CountSummary::default(),
    }
}

fn pct(part: &Latency, whole: &Latency) -> f64 {
    if whole.total == 0 {
        0.0
    } else {
        100.0 * part.total as f64 / whole.total as f64
    }
}

fn device_report(
    d: Device,
    seeks: (Option<SeekSummary>, Option<SeekSummary>),
    plugs: Option<side::PlugStats>,
    origin: u64,
    trace_start: u64,
    opts: &Options,
) -> DeviceReport {
    let l = &d.lat;
    let bio_based = d.n_d == 0 && d.n_q > 0;
    let merge = Merge::of(&d);
    let plug = Plug::of(&plugs.unwrap_or(side::PlugStats {
        plugs: 0,
        timer_unplugs: 0,
        ios_unplugged: 0,
        ios_timer_unplugged: 0,
        plugged_ns: 0,
        plug_records: 0,
        unplug_records: 0,
        first: d.first_sized,
        last: d.last_sized,
    }));
    let active = ActivePeriods::of(&d, trace_start);
    let never = NeverCompleted {
        bios: if bio_based { 0 } else { d.bios_in_flight() },
        requests: d.requests_in_flight(),
        replaced_bios: d.replaced,
        replaced_requests: d.replaced_requests,
        oldest_dispatch: d
            .oldest_in_flight_dispatch()
            .map(|t| t.saturating_sub(origin) as f64 / 1e9),
    };
    let timeline = if opts.timeline {
        d.timeline.clone().finish(d.last_time, origin)
    } else {
        Vec::new()
    };
    DeviceReport {
        dev: dev_name(d.device),
        kind: if bio_based {
            "bio-based (queues but never dispatches: a remapper such as dm or md)"
        } else {
            "request-based"
        }
        .to_string(),
        first: d.first_time.saturating_sub(origin) as f64 / 1e9,
        last: d.last_time.saturating_sub(origin) as f64 / 1e9,
        reads: d.n_reads,
        writes: d.n_writes,
        discards: d.n_discards,
        flushes: d.n_flushes,
        sector_min: if d.n_q == 0 { 0 } else { d.sector_min },
        sector_max: d.sector_max,
        latency: latency_map(l),
        overhead: Overhead {
            q2g: pct(&l.q2g, &l.q2c),
            g2i: pct(&l.g2i, &l.q2c),
            q2m: pct(&l.q2m, &l.q2c),
            i2d: pct(&l.i2d, &l.q2c),
            m2d: pct(&l.m2d, &l.q2c),
            d2c: pct(&l.d2c, &l.q2c),
        },
        merge,
        seek_q2q: seeks.0,
        seek_d2d: seeks.1,
        plug,
        active_requests_at_q: if d.n_q == 0 {
            0.0
        } else {
            d.act_q_total as f64 / d.n_q as f64
        },
        active_periods: active,
        per_request: BTreeMap::from([
            ("q2d".to_string(), summary_or_empty(&d.req_q2d)),
            ("d2c".to_string(), summary_or_empty(&d.req_d2c)),
            ("q2c".to_string(), summary_or_empty(&d.req_q2c)),
        ]),
        // Discards only where there are some: most traces have none.
        by_direction: crate::blk_io_trace::DIRECTIONS
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != crate::blk_io_trace::DISCARD || d.n_discards > 0)
            .map(|(i, dir)| {
                let lat = BTreeMap::from([
                    ("q2c".to_string(), summary_or_empty(&d.dir_q2c[i])),
                    ("d2c".to_string(), summary_or_empty(&d.dir_d2c[i])),
                ]);
                (dir.to_string(), lat)
            })
            .collect(),
        split_bios_q2c: crate::blk_io_trace::DIRECTIONS
            .iter()
            .zip(&d.whole_split_q2c)
            .filter(|(_, l)| l.n > 0)
            .map(|(dir, l)| (dir.to_string(), summary_or_empty(l)))
            .collect(),
        q2c_as_issued: (d.splits > 0).then(|| summary_or_empty(&d.issued_q2c_all())),
        bios_as_issued_q2c: crate::blk_io_trace::DIRECTIONS
            .iter()
            .zip(&d.issued_q2c)
            .filter(|(_, l)| d.splits > 0 && l.n > 0)
            .map(|(dir, l)| (dir.to_string(), summary_or_empty(l)))
            .collect(),
        dispatch_depth: count_summary(&d.dispatch_depth),
        dispatch_sectors: count_summary(&d.dispatch_sectors),
        never_completed: never,
        sleeps: d.sleeps,
        cgroup_events: d.cgroup_events,
        remaps: d.remaps,
        splits: d.splits,
        bios_split: d.bios_split,
        split_bio_bytes: d.split_bio_sectors * 512,
        bio_bytes_completed: d.bio_sectors_completed * 512,
        bio_bytes_queued: d.bio_sectors_queued * 512,
        bio_bytes_in_window: opts
            .window_of(d.device)
            .map(|_| d.bio_sectors_in_window * 512),
        timeline,
    }
}

impl Merge {
    /// btt's "Device Merge Information": a requeued bio is queued again.
    fn of(d: &Device) -> Merge {
        let n_q = (d.n_q + d.n_requeue).max(d.n_d);
        Merge {
            q: n_q,
            d: d.n_d,
            ratio: if d.n_d == 0 {
                0.0
            } else {
                n_q as f64 / d.n_d as f64
            },
            blk_min: if d.n_c == 0 { 0 } else { d.blk_min },
            // Over the requests completed, as the minimum, maximum and total are: btt divides
            // by those dispatched, so one never completed put its average below its minimum.
            blk_avg: d.blk_total.checked_div(d.n_c).unwrap_or(0),
            blk_max: d.blk_max,
            total: d.blk_total,
        }
    }
}

impl Plug {
    /// btt's "Plug Information", from the side stage's counts.
    fn of(p: &side::PlugStats) -> Plug {
        let plug_span = p.last.saturating_sub(p.first);
        let per = |n: u64, of: u64| if of == 0 { 0.0 } else { n as f64 / of as f64 };
        let btt_pct_time_plugged = if plug_span == 0 {
            0.0
        } else {
            100.0 * p.plugged_ns as f64 / plug_span as f64
        };
        // A P is traced when a task's plug list goes from empty to not, so a P can follow
        // another only after an unplug: more P than U and UT, beyond one plug left open at
        // the end, means unplugs went untraced.
        let unplugs_traced = p.plug_records <= p.unplug_records + 1;
        Plug {
            plugs: p.plugs,
            timer_unplugs: p.timer_unplugs,
            pct_time_plugged: unplugs_traced.then_some(btt_pct_time_plugged),
            ios_per_unplug: per(p.ios_unplugged, p.plugs),
            ios_per_timer_unplug: per(p.ios_timer_unplugged, p.timer_unplugs),
            plug_records: p.plug_records,
            unplug_records: p.unplug_records,
            btt_pct_time_plugged,
        }
    }
}

impl ActivePeriods {
    /// btt's "I/O Active Period Information", as iolab counts it and as btt would print it.
    fn of(d: &Device, trace_start: u64) -> ActivePeriods {
        // btt measures the lulls from time zero of the trace (its t_start is never set), so
        // the lead-in before the first dispatch counts as idle; iolab counts only gaps between
        // periods.
        let btt = d.btt_live.map(|(periods, live_ns, last_end)| {
            let span = last_end.saturating_sub(trace_start);
            let inactive = if periods < 2 || last_end == u64::MAX {
                0.0
            } else {
                span.saturating_sub(live_ns) as f64 / (periods - 1) as f64 / 1e9
            };
            let pct = if periods == 1 {
                100.0
            } else if span == 0 || last_end == u64::MAX {
                0.0
            } else {
                100.0 * live_ns as f64 / span as f64
            };
            (inactive, pct)
        });
        ActivePeriods {
            btt_avg_inactive: btt.map(|b| b.0),
            btt_pct_live: btt.map(|b| b.1),
            live: d.live_periods,
            avg_active: if d.live_periods == 0 {
                0.0
            } else {
                d.live_ns as f64 / d.live_periods as f64 / 1e9
            },
            avg_inactive: if d.live_periods < 2 {
                0.0
            } else {
                d.idle_ns as f64 / (d.live_periods - 1) as f64 / 1e9
            },
            pct_live: if d.live_ns + d.idle_ns == 0 {
                0.0
            } else {
                100.0 * d.live_ns as f64 / (d.live_ns + d.idle_ns) as f64
            },
        }
    }
}

/// The whole analysis (JSON schema of `iolab trace analyze --json`).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub events: u64,
    pub notify_events: u64,
    /// Events the recording lost, as iolab's recorder noted in the trace (its message
    /// records): the trace is incomplete, and what pairs events across a loss may be wrong.
    pub events_lost: u64,
    pub pc_events: u64,
    /// Records of a device before its first Q with data, left out as btt leaves them (the
    /// beginnings of their IOs were not traced); its empty flushes are counted as flushes
    /// instead, unless the device never has such a Q.
    pub ignored_before_first_q: u64,
    /// Seconds from the first to the last event.
    pub duration: f64,
    /// btt's "All Devices" latencies.
    pub all: BTreeMap<String, LatencySummary>,
    /// Q2C per bio as issued over the same devices, reads and writes together, where any
    /// of them split bios (else `all`'s q2c is it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all_q2c_as_issued: Option<LatencySummary>,
    pub devices: Vec<DeviceReport>,
    pub processes: Vec<ProcessReport>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DeviceReport {
    /// "major,minor".
    pub dev: String,
    pub kind: String,
    /// First and last event, seconds from the trace start.
    pub first: f64,
    pub last: f64,
    /// Bios queued, by direction: a discard (trim) is the kernel's write that moves no data,
    /// counted apart from the writes, here and in every per-direction figure.
    pub reads: u64,
    pub writes: u64,
    pub discards: u64,
    /// Empty flush requests queued (an fsync's cache flush), counted only: one cannot be told
    /// from another in a trace (no sector, no size), so they are in no latency figure.
    #[serde(default)]
    pub flushes: u64,
    /// Lowest and highest (end) sector queued.
    pub sector_min: u64,
    pub sector_max: u64,
    /// Per bio (btt's view): q2q, q2g, s2g, g2i, q2m, i2d, m2d, d2c, q2c.
    pub latency: BTreeMap<String, LatencySummary>,
    pub overhead: Overhead,
    pub merge: Merge,
    pub seek_q2q: Option<SeekSummary>,
    pub seek_d2d: Option<SeekSummary>,
    pub plug: Plug,
    pub active_requests_at_q: f64,
    pub active_periods: ActivePeriods,
    /// Per dispatched request: q2d (first bio queued to dispatch), d2c, q2c.
    pub per_request: BTreeMap<String, LatencySummary>,
    /// Per bio, reads and writes apart: `read`/`write` -> q2c, d2c.
    pub by_direction: BTreeMap<String, BTreeMap<String, LatencySummary>>,
    /// The Q2C of each bio the block layer split, whole (its Q to its last part's C), by
    /// direction (`read`/`write`/`discard`, those with such bios only): the latency the
    /// program that issued it saw, where `latency` and `by_direction` time each part.
    #[serde(default)]
    pub split_bios_q2c: BTreeMap<String, LatencySummary>,
    /// Q2C per bio as issued, by direction, where the trace has splits (else empty: it is
    /// `by_direction`'s): the bios not split and each split bio once, whole.
    #[serde(default)]
    pub bios_as_issued_q2c: BTreeMap<String, LatencySummary>,
    /// The same over all directions, where the trace has splits (else `latency`'s q2c is
    /// it): what an experiment's `trace_q2c_*` figures are made of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub q2c_as_issued: Option<LatencySummary>,
    /// Requests in the driver at each dispatch, including the one dispatched.
    pub dispatch_depth: CountSummary,
    /// Size of each dispatched request in sectors.
    pub dispatch_sectors: CountSummary,
    pub never_completed: NeverCompleted,
    /// S events: a request allocation slept.
    pub sleeps: u64,
    pub cgroup_events: u64,
    pub remaps: u64,
    pub splits: u64,
    /// Bios split at least once (in either form), and their bytes as queued whole: what the
    /// splits cut, apart from the bios never split.
    #[serde(default)]
    pub bios_split: u64,
    #[serde(default)]
    pub split_bio_bytes: u64,
    /// Bytes of the bios completed, each as queued: a device-mapper device's C names only the
    /// last piece of a bio it split, so the merge table's total (btt's, from the Cs) falls short.
    /// Reads and writes: a discard moves no data.
    pub bio_bytes_completed: u64,
    /// Bytes of the bios queued, reads and writes: in a trace cut mid-workload, the bios
    /// queued and their bytes go together, where some of them never completed.
    #[serde(default)]
    pub bio_bytes_queued: u64,
    /// Of those, the bytes of the bios completed within [`Options::window`], when one was set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bio_bytes_in_window: Option<u64>,
    pub timeline: Vec<TimelinePoint>,
}

/// Percent of the summed Q2C spent in each phase (btt's Device Overhead, plus M2D).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Overhead {
    pub q2g: f64,
    pub g2i: f64,
    pub q2m: f64,
    pub i2d: f64,
    pub m2d: f64,
    pub d2c: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Merge {
    pub q: u64,
    pub d: u64,
    pub ratio: f64,
    pub blk_min: u64,
    pub blk_avg: u64,
    pub blk_max: u64,
    pub total: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Plug {
    /// Plugs ended by an unplug (U), and by the unplug timer (UT), as btt counts them.
    pub plugs: u64,
    pub timer_unplugs: u64,
    /// `None` when unplugs went untraced (more P than U and UT, beyond one plug open at the
    /// end): blk-mq can pass plugged requests to the driver without tracing an unplug (seen
    /// with NVMe on Linux 6.1, whose flush through the driver's `queue_rqs` traces none), so
    /// when plugging ended is not in the trace. btt keeps such a plug open to the next U, or
    /// to the trace's end ([`Plug::btt_pct_time_plugged`]).
    pub pct_time_plugged: Option<f64>,
    pub ios_per_unplug: f64,
    pub ios_per_timer_unplug: f64,
    /// P records, and U and UT records, as traced.
    pub plug_records: u64,
    pub unplug_records: u64,
    /// btt's "% Time Q Plugged", which an open plug keeps to the device's last event.
    pub btt_pct_time_plugged: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ActivePeriods {
    pub live: u64,
    /// Mean length of a period with requests in the driver (seconds).
    pub avg_active: f64,
    /// Mean gap between such periods (seconds).
    pub avg_inactive: f64,
    pub pct_live: f64,
    /// btt's "Avg. !Act": lulls measured from the trace's time zero (includes the lead-in).
    /// btt counts only requests that completed; null when requests that never completed
    /// share a period with ones that did, which makes its figure unknowable here.
    pub btt_avg_inactive: Option<f64>,
    /// btt's "% Live": live time over time zero to the last completion (null as above).
    pub btt_pct_live: Option<f64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct NeverCompleted {
    /// Bios queued and never completed (0 for bio-based devices, which never complete).
    pub bios: u64,
    /// Requests dispatched and never completed.
    pub requests: u64,
    /// Bios whose Q was replaced by a later Q on the same start sector before completing.
    pub replaced_bios: u64,
    /// Requests whose D was replaced by a later D on the same start sector before completing:
    /// left out of the per-request figures.
    pub replaced_requests: u64,
    /// When the first of the requests never completed was dispatched (seconds from the trace's
    /// start): the device counts as active from then to the trace's end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oldest_dispatch: Option<f64>,
}

/// A distribution of counts (not times).
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct CountSummary {
    pub n: u64,
    pub min: f64,
    pub avg: f64,
    pub max: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProcessReport {
    pub name: String,
    pub pids: Vec<u32>,
    /// Bios queued, counted at each Q.
    pub q: u64,
    pub bytes: u64,
    pub latency: BTreeMap<String, LatencySummary>,
}

/// Batches of 8192 records (256 KiB) in a pool of four: enough to keep both threads of
/// [`analyze_apart`] busy, and small enough to stay in the caches and cost few page faults. A
/// hand-over that finds the other thread asleep wakes it, tens of microseconds in a VM: with
/// 4096 a 2.2 M-event trace took 10-15% longer, 500 k events up to 8% (as the machine's load
/// went); 16384 gained nothing more.
const BATCH: usize = 8192;

/// Plain trace files up to this size (about 85,000 records) are analysed on the calling
/// thread alone: starting a second thread, pinning both and waking each other costs more
/// than it saves on so few records. On the 2-vCPU VM of the trace benchmark, medians of 20-30
/// alternating runs: one thread took 3.4 ms on 1,000 records against 3.9 ms, 4.6 against 5.6
/// ms on 20,000, and 7.3 against 7.5 ms on 100,000, where two threads were faster from
/// 150,000 (8.6 against 9.1 ms) on.
const ONE_THREAD_BYTES: u64 = 4 << 20;

/// Opens and analyses traces in one call: small files on this thread ([`analyze_here`]),
/// the rest on two ([`analyze_apart`]).
pub fn analyze_paths(names: &[std::path::PathBuf], opts: Options) -> Result<Report, TraceError> {
    let events = super::merge::open_trace(names)?;
    let apart = events.plain_len().is_none_or(|n| n > ONE_THREAD_BYTES);
    analyze_opened(events, names, opts, apart)
}

/// [`analyze_paths`] on the traces opened, on two threads when `apart`.
fn analyze_opened(
    events: super::merge::Merged<super::stream::Source>,
    names: &[std::path::PathBuf],
    opts: Options,
    apart: bool,
) -> Result<Report, TraceError> {
    let (a, side) = if apart {
        analyze_apart(events, opts)?
    } else {
        analyze_here(events, opts)?
    };
    if let Some(why) = a.timeline_overflow() {
        return Err(TraceError::Input(why));
    }
    let report = a.finish_with(&side);
    if report.events + report.notify_events + report.pc_events == 0 {
        let names: Vec<String> = names.iter().map(|n| n.display().to_string()).collect();
        return Err(TraceError::Input(format!(
            "{}: holds no block events (an empty file; if it is a capture, nothing reached the \
             device while recording: see what `iolab trace record` said)",
            names.join(", ")
        )));
    }
    Ok(report)
}

/// Reads and analyses every record on the calling thread.
fn analyze_here(
    mut events: super::merge::Merged<super::stream::Source>,
    opts: Options,
) -> Result<(Analyzer, SideStage), TraceError> {
    let mut side = SideStage::new(opts.interval_ns);
    let mut a = Analyzer::new(opts);
    a.side = None;
    let mut batch = super::stream::IoBatch {
        ios: Vec::with_capacity(BATCH),
        extra: Vec::new(),
    };
    loop {
        batch.clear();
        let more = events.read_io_batch(&mut batch, BATCH, &mut |io: &Io| side.feed(io))?;
        a.feed_batch(&batch);
        if !more {
            break;
        }
    }
    if let Some(why) = events.inputs_apart() {
        return Err(TraceError::Input(why));
    }
    side.settle();
    Ok((a, side))
}

/// Reading, decoding, Q2Q and D2D seek and plug counting run on a second thread: it hands
/// batches of compact records ([`Io`], 32 bytes) to the state machine through a bounded
/// channel and gets each batch back, with the latency samples the state machine recorded
/// from it when the state machine is the busier of the two (it sums them itself when it is
/// ahead). Batches and sample buffers are recycled, so memory stays constant. On two cores
/// the two halves overlap, each thread pinned to a CPU of its own while they run
/// (`analyze::apart`).
fn analyze_apart(
    mut events: super::merge::Merged<super::stream::Source>,
    opts: Options,
) -> Result<(Analyzer, SideStage), TraceError> {
    use super::stream::IoBatch;
    use std::sync::mpsc::sync_channel;
    // The first batches are shorter, so the state machine starts within a fraction of a
    // millisecond.
    const POOL: usize = 4;
    const FIRST: usize = 512;
    /// A batch read, with empty sample buffers for the state machine to fill.
    type Full = Result<(IoBatch, Vec<Vec<Sample>>), TraceError>;
    /// A batch used, with the samples recorded per device index.
    type Used = (IoBatch, Vec<(usize, Vec<Sample>)>);
    let interval = opts.interval_ns;
    let (full_tx, full_rx) = sync_channel::<Full>(8);
    // Batches read and not yet taken by the state machine: when there are none, the state
    // machine is ahead of the reader and sums its samples itself; else it hands them over.
    // Which thread is busier depends on the trace (a large file's reading costs the reader
    // thread most in the kernel), so the split follows it as it goes.
    let waiting = std::sync::Arc::new(std::sync::atomic::AtomicIsize::new(0));
    let waiting_reader = waiting.clone();
    let (used_tx, used_rx) = sync_channel::<Used>(16);
    for _ in 0..POOL {
        let batch = IoBatch {
            ios: Vec::with_capacity(BATCH),
            extra: Vec::new(),
        };
        let _ = used_tx.send((batch, Vec::new()));
    }
    let pinned = apart::pin_here();
    let reader_cpu = pinned.as_ref().map(|(_, cpu)| *cpu);
    let reader = std::thread::Builder::new()
        .name("trace-reader".into())
        .spawn(move || {
            if let Some(cpu) = reader_cpu {
                apart::pin_to(cpu);
            }
            let mut side = SideStage::new(interval);
            let mut sums = AllSums::default();
            let mut spares: Vec<Vec<Sample>> = Vec::new();
            let mut sum = |used: Vec<(usize, Vec<Sample>)>, spares: &mut Vec<Vec<Sample>>| {
                for (i, mut samples) in used {
                    sums.device(i).add(&samples);
                    samples.clear();
                    spares.push(samples);
                }
            };
            let mut max = FIRST;
            loop {
                let (mut batch, used) = used_rx.recv().unwrap_or_default();
                sum(used, &mut spares);
                batch.clear();
                // Plug records stop here (the side stage consumes them as they are read).
                let mut keep = |io: &Io| side.feed(io);
                let (more, failed) = match events.read_io_batch(&mut batch, max, &mut keep) {
                    Ok(more) => (more, None),
                    Err(e) => (false, Some(e)),
                };
                let done = !more || failed.is_some();
                max = (max * 2).min(BATCH);
                if !batch.ios.is_empty() {
                    waiting_reader.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if full_tx
                        .send(Ok((batch, std::mem::take(&mut spares))))
                        .is_err()
                    {
                        break;
                    }
                }
                if let Some(e) = failed {
                    let _ = full_tx.send(Err(e));
                }
                if done {
                    if let Some(why) = events.inputs_apart() {
                        let _ = full_tx.send(Err(TraceError::Input(why)));
                    }
                    break;
                }
            }
            // The state machine still sends back the samples of the batches it holds.
            drop(full_tx);
            while let Ok((_, used)) = used_rx.recv() {
                sum(used, &mut spares);
            }
            side.settle();
            (side, sums)
        })
        .map_err(|e| TraceError::Input(format!("cannot start the reader thread: {e}")))?;
    let mut a = Analyzer::new(opts);
    a.side = None;
    a.sums_here = false;
    let mut result = Ok(());
    for batch in full_rx {
        let (batch, mut spares) = match batch {
            Ok(b) => {
                waiting.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
                b
            }
            Err(e) => {
                result = Err(e);
                break;
            }
        };
        a.feed_batch(&batch);
        let mut used = Vec::new();
        let ahead = waiting.load(std::sync::atomic::Ordering::Relaxed) <= 0;
        for (i, d) in a.devices.iter_mut().enumerate() {
            if ahead {
                a.sums.device(i).add(&d.samples);
                d.samples.clear();
            } else if !d.samples.is_empty() {
                // Room for a batch's samples (fewer than two per record), so none grows.
                let mut samples = spares
                    .pop()
                    .unwrap_or_else(|| Vec::with_capacity(2 * BATCH));
                std::mem::swap(&mut samples, &mut d.samples);
                used.push((i, samples));
            }
        }
        let _ = used_tx.send((batch, used));
    }
    drop(used_tx);
    drop(pinned);
    let (side, sums) = reader
        .join()
        .map_err(|_| TraceError::Input("the reader thread failed".into()))?;
    a.sums.merge(&sums);
    result?;
    Ok((a, side))
}

/// A duration in nanoseconds as a `--interval` value, rounded up to whole milliseconds.
fn seconds_text(ns: u64) -> String {
    let ms = ns.div_ceil(1_000_000).max(1);
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blk_io_trace::{action, category, Event};

    fn ev(t: u64, c: u8, dev: u32, sector: u64, bytes: u32) -> Event {
        Event {
            version: 7,
            time: t,
            sector,
            bytes,
            action: action(c, category::WRITE),
            pid: 1,
            device: dev,
            ..Event::default()
        }
    }

    /// An event far beyond the rest that the timeline itself does not count (here a G, as a
    /// corrupt time gives) still stretches it when it is closed at the device's last event:
    /// that is refused like any overflow, not drawn as 100,000 empty intervals.
    #[test]
    fn a_last_event_beyond_the_timelines_limit_is_an_overflow() {
        let dev = 8 << 20;
        let mut a = Analyzer::new(Options::default());
        a.feed(&ev(100, code::QUEUE, dev, 0, 4096));
        assert_eq!(a.timeline_overflow(), None);
        a.feed(&ev(
            100 + 200_000 * 1_000_000_000,
            code::GETRQ,
            dev,
            0,
            4096,
        ));
        let why = a.timeline_overflow().expect("the timeline would overflow");
        assert!(
            why.contains("the trace spans 200000.000 s")
                && why.contains("would have 200001 intervals, more than the limit of 100000")
                && why.contains("use --interval 2s or longer"),
            "{why}"
        );
    }

    /// The timeline's seeks are the dispatches at a nonzero D2D distance, in the interval of
    /// their D (counted on the side stage, over the state machine's intervals).
    #[test]
    fn the_timelines_seeks_are_the_dispatches_that_moved() {
        let dev = 8 << 20;
        let mut a = Analyzer::new(Options {
            interval_ns: 1000,
            ..Default::default()
        });
        // (time, sector): from sector 0 (no move), far on (a seek), right after it (none),
        // back (a seek) and far on again (a seek).
        for (t, sector) in [(0, 0), (200, 1000), (1100, 1008), (1300, 50), (1600, 5000)] {
            a.feed(&ev(t, code::QUEUE, dev, sector, 4096));
            a.feed(&ev(t + 10, code::ISSUE, dev, sector, 4096));
            a.feed(&ev(t + 50, code::COMPLETE, dev, sector, 4096));
        }
        let r = a.finish();
        let d = &r.devices[0];
        assert_eq!(d.seek_d2d.as_ref().map(|s| s.nseeks), Some(5));
        let seeks: Vec<f64> = d
            .timeline
            .iter()
            .map(|p| (p.seeks_per_s * p.interval * 1e6).round() / 1e6)
            .collect();
        assert_eq!(seeks, [1.0, 2.0], "{:?}", d.timeline);
    }

    /// Rows 10 ms apart are told apart (with one decimal they all read 0.0), and the last
    /// row, which ends with the trace, says the length its rates are over.
    #[test]
    fn the_timelines_rows_show_as_many_decimals_as_the_interval_needs() {
        let dev = 8 << 20;
        let mut a = Analyzer::new(Options {
            interval_ns: 10_000_000,
            ..Default::default()
        });
        for i in 0..4u64 {
            let t = i * 10_000_000;
            a.feed(&ev(t, code::QUEUE, dev, i * 8, 4096));
            a.feed(&ev(t + 1_000, code::ISSUE, dev, i * 8, 4096));
            a.feed(&ev(t + 7_000_000, code::COMPLETE, dev, i * 8, 4096));
        }
        let text = render::render(&a.finish());
        let rows: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.trim_start().starts_with("t(s)"))
            .skip(1)
            .take(4)
            .collect();
        let times: Vec<&str> = rows
            .iter()
            .filter_map(|r| r.split_whitespace().next())
            .collect();
        assert_eq!(times, ["0.00", "0.01", "0.02", "0.03"], "{text}");
        // The last interval ends at the last completion, 7 ms into it.
        assert!(
            text.contains("(the last row's rates are over 0.007000 s, to the trace's end)"),
            "{text}"
        );
        // A trace shorter than one interval: its one row says so too (20906 r/s from 13418
        // completions read as a mistake without it).
        let mut a = Analyzer::new(Options::default());
        a.feed(&ev(0, code::QUEUE, dev, 0, 4096));
        a.feed(&ev(1_000, code::ISSUE, dev, 0, 4096));
        a.feed(&ev(250_000_000, code::COMPLETE, dev, 0, 4096));
        let text = render::render(&a.finish());
        assert!(
            text.contains("(the row's rates are over 0.250000 s, from the device's first event"),
            "{text}"
        );
    }

    /// With reads and writes in the trace, the text's Q2C histogram is drawn for each apart
    /// (a fast reader and a slow writer mixed in one would read as neither); with one
    /// direction only, once.
    #[test]
    fn the_q2c_histogram_is_drawn_per_direction_when_both_are_there() {
        let dev = 8 << 20;
        let run = |directions: &[u64]| {
            let mut a = Analyzer::new(Options::default());
            for (i, &dir) in directions.iter().enumerate() {
                let (t, sector) = (i as u64 * 1_000_000, i as u64 * 8);
                for (dt, c) in [
                    (0, code::QUEUE),
                    (1_000, code::ISSUE),
                    (50_000, code::COMPLETE),
                ] {
                    let mut e = ev(t + dt, c, dev, sector, 4096);
                    e.action = action(c, dir);
                    a.feed(&e);
                }
            }
            render::render(&a.finish())
        };
        let both = run(&[category::READ, category::WRITE, category::WRITE]);
        assert!(
            both.contains("Q2C histogram, reads:") && both.contains("Q2C histogram, writes:"),
            "{both}"
        );
        assert!(!both.contains("Q2C histogram:"), "{both}");
        let reads = run(&[category::READ, category::READ]);
        assert!(reads.contains("Q2C histogram:"), "{reads}");
        assert!(!reads.contains("Q2C histogram, reads:"), "{reads}");
    }

    /// A plug still open at the end closes at the device's last record, even when that is a
    /// completion, which the side stage that counts plugs lets pass without looking.
    #[test]
    fn a_plug_open_at_the_end_closes_at_the_last_completion() {
        let dev = 8 << 20;
        let mut a = Analyzer::new(Options::default());
        for e in [
            ev(100, code::QUEUE, dev, 0, 4096),
            ev(110, code::PLUG, dev, 0, 0),
            ev(120, code::ISSUE, dev, 0, 4096),
            ev(500, code::COMPLETE, dev, 0, 4096),
        ] {
            a.feed(&e);
        }
        let p = &a.finish().devices[0].plug;
        // Plugged from 110 to 500, over the device's span from 100 to 500.
        assert_eq!(p.plugs, 1);
        assert!(
            (p.pct_time_plugged.unwrap() - 100.0 * 390.0 / 400.0).abs() < 1e-9,
            "{p:?}"
        );
    }

    /// Plugged requests can reach the driver with no unplug traced (NVMe on Linux 6.1): each
    /// I/O then brings a P and no U. btt keeps the first plug open to the end (99.7% plugged
    /// on such a capture); iolab says the time plugged is unknown and what btt would print.
    /// btt's "% Time Q Plugged" is over the device's records with data: from the first, one
    /// before the first Q included, to the last, not to a flush (no data) after it.
    #[test]
    fn the_time_plugged_is_over_the_records_with_data_as_btt_has_it() {
        let dev = 8 << 20;
        let mut a = Analyzer::new(Options::default());
        for e in [
            ev(50, code::COMPLETE, dev, 64, 4096),
            ev(100, code::QUEUE, dev, 0, 4096),
            ev(110, code::PLUG, dev, 0, 0),
            ev(120, code::ISSUE, dev, 0, 4096),
            ev(150, code::UNPLUG_IO, dev, 1, 0),
            ev(500, code::COMPLETE, dev, 0, 4096),
            ev(900, code::QUEUE, dev, 0, 0),
            ev(950, code::COMPLETE, dev, 0, 0),
        ] {
            a.feed(&e);
        }
        let p = &a.finish().devices[0].plug;
        // Plugged from 110 to 150, over 50 to 500.
        assert!(
            (p.btt_pct_time_plugged - 100.0 * 40.0 / 450.0).abs() < 1e-9,
            "{p:?}"
        );
    }

    /// The average request size is over the requests completed, like its minimum and
    /// maximum: a request never completed does not pull it below the minimum (btt printed
    /// BLKmin 8, BLKavg 7, BLKmax 8).
    #[test]
    fn the_average_request_lies_between_the_smallest_and_the_largest() {
        let dev = 8 << 20;
        let mut a = Analyzer::new(Options::default());
        for i in 0..4u64 {
            let s = i * 8;
            a.feed(&ev(i * 100, code::QUEUE, dev, s, 4096));
            a.feed(&ev(i * 100 + 10, code::ISSUE, dev, s, 4096));
            if i < 3 {
                a.feed(&ev(i * 100 + 50, code::COMPLETE, dev, s, 4096));
            }
        }
        let m = &a.finish().devices[0].merge;
        assert_eq!((m.blk_min, m.blk_avg, m.blk_max, m.d), (8, 8, 8, 4));
    }

    #[test]
    fn plugs_without_traced_unplugs_leave_the_time_plugged_unknown() {
        let dev = 259 << 20;
        let run = |unplugged: bool| {
            let mut a = Analyzer::new(Options::default());
            for i in 0..3u64 {
                let (t, sector) = (100 + i * 100, i * 8);
                a.feed(&ev(t, code::QUEUE, dev, sector, 4096));
                a.feed(&ev(t + 1, code::PLUG, dev, 0, 0));
                if unplugged {
                    a.feed(&ev(t + 5, code::UNPLUG_IO, dev, 0, 0));
                }
                a.feed(&ev(t + 10, code::ISSUE, dev, sector, 4096));
                a.feed(&ev(t + 50, code::COMPLETE, dev, sector, 4096));
            }
            a.finish()
        };
        let r = run(false);
        let p = &r.devices[0].plug;
        assert_eq!((p.plug_records, p.unplug_records), (3, 0));
        assert_eq!(p.pct_time_plugged, None);
        // btt: plugged from the first P (101) to the last event (350), over 100 to 350.
        assert!(
            (p.btt_pct_time_plugged - 100.0 * 249.0 / 250.0).abs() < 1e-9,
            "{p:?}"
        );
        let text = render::render(&r);
        assert!(text.contains("|        unknown\n"), "{text}");
        assert!(
            text.contains("3 plugs (P) but 0 unplugs (U, UT) traced"),
            "{text}"
        );
        assert!(text.contains("btt would print 99.600000000%"), "{text}");

        let r = run(true);
        let p = &r.devices[0].plug;
        assert_eq!((p.plugs, p.plug_records, p.unplug_records), (3, 3, 3));
        assert!(
            (p.pct_time_plugged.unwrap() - 100.0 * 12.0 / 250.0).abs() < 1e-9,
            "{p:?}"
        );
        assert!(!render::render(&r).contains("unknown"));
    }

    /// The latency samples are summed on the reader thread by `analyze_paths` on two threads,
    /// and in place on one and by `Analyzer::feed` (a few thousand at a time): all give the
    /// same report, over several batches, devices and processes, reads and writes, merges and
    /// splits.
    #[test]
    fn samples_summed_on_the_reader_thread_give_the_same_report() {
        let mut events = Vec::new();
        let mut x = 7u64;
        for i in 0..6000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let t = i * 1000;
            let dev = if x >> 63 == 0 { 8 << 20 } else { 259 << 20 };
            let sector = (x >> 20) % 100_000 * 8;
            let pid = 100 + (x >> 40) as u32 % 5;
            let dir = if x >> 62 & 1 == 0 { 0 } else { category::WRITE };
            let mk = |t, c, sector, bytes| Event {
                version: 7,
                time: t,
                sector,
                bytes,
                action: action(c, dir),
                pid,
                device: dev,
                ..Event::default()
            };
            events.push(mk(t, code::QUEUE, sector, 8192));
            if i % 7 == 0 {
                // Merged into the previous bio's request.
                events.push(mk(t + 1, code::BACKMERGE, sector, 8192));
            } else {
                events.push(mk(t + 1, code::GETRQ, sector, 8192));
                events.push(mk(t + 2, code::INSERT, sector, 8192));
            }
            events.push(mk(t + 10 + x % 50, code::ISSUE, sector, 8192));
            events.push(mk(t + 500 + x % 5000, code::COMPLETE, sector, 8192));
        }
        events.sort_by_key(|e| e.time);
        let mut bytes = Vec::new();
        for e in &events {
            crate::blk_io_trace::encode(e, 7, crate::blk_io_trace::Endian::Little, &mut bytes);
        }
        let dir = std::env::temp_dir().join(format!("iolab-samples-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("trace.bin");
        std::fs::write(&file, &bytes).unwrap();
        let cpus = apart::tests::mine();
        let names = std::slice::from_ref(&file);
        let open = || super::super::merge::open_trace(names).unwrap();
        let threaded = analyze_opened(open(), names, Options::default(), true);
        let one_thread = analyze_opened(open(), names, Options::default(), false);
        std::fs::remove_dir_all(&dir).unwrap();
        // Its two threads were pinned apart; the caller may run where it could before (what it
        // starts next inherits that).
        assert_eq!(apart::tests::mine(), cpus);
        let mut a = Analyzer::new(Options::default());
        for e in &events {
            a.feed(e);
        }
        let here = a.finish();
        let [threaded, one_thread, here] = [threaded.unwrap(), one_thread.unwrap(), here]
            .map(|r| serde_json::to_string(&r).unwrap());
        assert!(here.contains("\"d2c\""), "{here}");
        assert_eq!(threaded, here);
        assert_eq!(one_thread, here);
    }

    /// A device-mapper device (253,0) queues and remaps to a virtio disk (254,0): no major is
    /// treated specially; the dm device is recognised as bio-based because it never
    /// dispatches, and its bios are not reported as never completed.
    #[test]
    fn remappers_are_recognised_by_behaviour_not_major() {
        let dm = 253 << 20;
        let vd = 254 << 20;
        let mut a = Analyzer::new(Options::default());
        for i in 0..10u64 {
            let t = i * 1_000_000;
            a.feed(&ev(t, code::QUEUE, dm, i * 8, 4096));
            let mut remap = ev(t + 10, code::REMAP, vd, i * 8 + 2048, 4096);
            remap.payload = Payload::Remap {
                dev_from: dm,
                dev_to: vd,
                sector_from: i * 8,
            };
            a.feed(&remap);
            a.feed(&ev(t + 20, code::QUEUE, vd, i * 8 + 2048, 4096));
            a.feed(&ev(t + 30, code::ISSUE, vd, i * 8 + 2048, 4096));
            a.feed(&ev(t + 500, code::COMPLETE, vd, i * 8 + 2048, 4096));
        }
        let r = a.finish();
        assert_eq!(r.devices.len(), 2);
        let (d0, d1) = (&r.devices[0], &r.devices[1]);
        assert_eq!(d0.dev, "253,0");
        assert!(d0.kind.starts_with("bio-based"));
        assert_eq!(d0.never_completed.bios, 0);
        assert_eq!(d1.dev, "254,0");
        assert_eq!(d1.kind, "request-based");
        assert_eq!(d1.latency["d2c"].n, 10);
        assert_eq!(d1.remaps, 10);
        assert!((d1.latency["d2c"].avg - 470e-9).abs() < 1e-12);
    }

    /// A discard carries the write bit, but moves no data: it is counted apart from the
    /// writes (their count, latency and bytes), in the timeline too, and still in the device's
    /// whole Q2C and D2C (as btt counts it).
    #[test]
    fn discards_are_not_writes() {
        let dev = 7 << 20;
        let mut a = Analyzer::new(Options::default());
        // Four 4 KiB writes (100 us each), then two 1 MiB discards (2 ms each).
        for (i, cats, bytes, took) in [
            (0u64, category::WRITE, 4096, 100_000),
            (1, category::WRITE, 4096, 100_000),
            (2, category::WRITE, 4096, 100_000),
            (3, category::WRITE, 4096, 100_000),
            (4, category::WRITE | category::DISCARD, 1 << 20, 2_000_000),
            (5, category::WRITE | category::DISCARD, 1 << 20, 2_000_000),
        ] {
            let (t, s) = (i * 10_000_000, i * 4096);
            for (at, c) in [
                (0, code::QUEUE),
                (10, code::GETRQ),
                (20, code::ISSUE),
                (took, code::COMPLETE),
            ] {
                let mut e = ev(t + at, c, dev, s, bytes);
                e.action = action(c, cats);
                a.feed(&e);
            }
        }
        let d = &a.finish().devices[0];
        assert_eq!((d.reads, d.writes, d.discards), (0, 4, 2));
        assert_eq!(d.bio_bytes_completed, 4 * 4096);
        let w = &d.by_direction["write"]["q2c"];
        assert_eq!(w.n, 4);
        assert!((w.avg - 100e-6).abs() < 1e-9, "{}", w.avg);
        let disc = &d.by_direction["discard"]["q2c"];
        assert_eq!(disc.n, 2);
        assert!((disc.avg - 2e-3).abs() < 1e-9, "{}", disc.avg);
        assert_eq!(d.latency["q2c"].n, 6);
        let seconds = |f: fn(&TimelinePoint) -> f64| -> f64 {
            d.timeline.iter().map(|p| f(p) * p.interval).sum()
        };
        assert!((seconds(|p| p.write_mb_per_s) - 4.0 * 4096.0 / 1e6).abs() < 1e-9);
        assert!((seconds(|p| p.discard_mb_per_s) - 2.0 * 1048576.0 / 1e6).abs() < 1e-9);
        assert!((seconds(|p| p.discard_iops) - 2.0).abs() < 1e-9);
        // A trace without discards has no such direction.
        let mut a = Analyzer::new(Options::default());
        a.feed(&ev(0, code::QUEUE, dev, 0, 4096));
        a.feed(&ev(100, code::COMPLETE, dev, 0, 4096));
        assert!(!a.finish().devices[0].by_direction.contains_key("discard"));
    }

    /// Empty flush requests (an fsync's: no sector, no size) are counted and said, in no
    /// latency: nothing tells one from another. They went unmentioned.
    #[test]
    fn empty_flushes_are_counted() {
        let dev = 7 << 20;
        let mut a = Analyzer::new(Options::default());
        let flush = category::WRITE | category::FLUSH | category::SYNC;
        // A device starts at its first Q with data (as btt's); a flush before it counts too.
        let mut early = ev(0, code::QUEUE, dev, 0, 0);
        early.action = action(code::QUEUE, flush);
        a.feed(&early);
        a.feed(&ev(10, code::QUEUE, dev, 8, 4096));
        a.feed(&ev(100, code::COMPLETE, dev, 8, 4096));
        for i in 1..3u64 {
            for (at, c) in [(0, code::QUEUE), (10, code::ISSUE), (500, code::COMPLETE)] {
                let mut e = ev(i * 1_000 + at, c, dev, 0, 0);
                e.action = action(c, flush);
                a.feed(&e);
            }
        }
        let report = a.finish();
        let d = &report.devices[0];
        assert_eq!((d.writes, d.flushes), (1, 3));
        assert_eq!(report.ignored_before_first_q, 0);
        assert_eq!(d.latency["q2c"].n, 1);
        let text = render::render(&report);
        assert!(
            text.contains("writes 1 flushes 3 (empty: counted, in no latency)"),
            "{text}"
        );
        // On a device that never has a Q with data they are left out, and counted so.
        let mut a = Analyzer::new(Options::default());
        a.feed(&early);
        let report = a.finish();
        assert_eq!(
            (report.devices.len(), report.ignored_before_first_q),
            (0, 1)
        );
    }

    /// A discard dispatched and completed over a read still in the driver is not the read's:
    /// the read keeps its own D (81 us to its C; given the discard's, 2 us) and is completed
    /// by its own C, not by the discard's just before.
    #[test]
    fn a_discard_over_a_read_in_flight_is_not_the_reads() {
        let dev = 7 << 20;
        let mut a = Analyzer::new(Options::default());
        let read = category::READ;
        let trim = category::WRITE | category::DISCARD;
        for (t, c, cats, sector, bytes) in [
            (0, code::QUEUE, read, 104, 4096),
            (1_000, code::ISSUE, read, 104, 4096),
            (2_000, code::QUEUE, trim, 96, 65536),
            (80_000, code::ISSUE, trim, 96, 65536),
            (81_000, code::COMPLETE, trim, 96, 65536),
            (82_000, code::COMPLETE, read, 104, 4096),
        ] {
            let mut e = ev(t, c, dev, sector, bytes);
            e.action = action(c, cats);
            a.feed(&e);
        }
        let d = &a.finish().devices[0];
        let (r, disc) = (&d.by_direction["read"], &d.by_direction["discard"]);
        assert_eq!((r["d2c"].n, r["q2c"].n), (1, 1));
        assert!((r["d2c"].avg - 81e-6).abs() < 1e-12, "{}", r["d2c"].avg);
        assert!((r["q2c"].avg - 82e-6).abs() < 1e-12, "{}", r["q2c"].avg);
        assert_eq!((disc["d2c"].n, disc["q2c"].n), (1, 1));
        assert!(
            (disc["d2c"].avg - 1e-6).abs() < 1e-12,
            "{}",
            disc["d2c"].avg
        );
        assert!(
            (disc["q2c"].avg - 79e-6).abs() < 1e-12,
            "{}",
            disc["q2c"].avg
        );
    }

    /// Two readers of one block: the second request is dispatched on the start sector of the
    /// first while it is still in the driver. The first is then matched to no completion: it
    /// is counted as replaced, not lost from the per-request figures unsaid.
    #[test]
    fn a_request_replaced_in_the_driver_is_counted() {
        let dev = 7 << 20;
        let mut a = Analyzer::new(Options::default());
        for (t, c) in [
            (0, code::QUEUE),
            (10, code::GETRQ),
            (20, code::ISSUE),
            (30, code::QUEUE),
            (40, code::GETRQ),
            (50, code::ISSUE),
            (1_000, code::COMPLETE),
        ] {
            a.feed(&ev(t, c, dev, 64, 4096));
        }
        let d = &a.finish().devices[0];
        assert_eq!(d.never_completed.replaced_requests, 1);
        assert_eq!(d.per_request["d2c"].n, 1);
    }

    /// A read and a write of one block at once (two programs, one random reader and one
    /// random writer): the write is queued on the read's start sector while the read is in
    /// flight, and the two complete apart. Neither replaces the other: both are timed, in the
    /// driver too (btt drops one).
    #[test]
    fn a_read_and_a_write_of_one_block_in_flight_are_both_timed() {
        let dev = 7 << 20;
        let rw = |t, c, read: bool| Event {
            action: action(
                c,
                if read {
                    category::READ
                } else {
                    category::WRITE
                },
            ),
            ..ev(t, c, dev, 64, 4096)
        };
        let mut a = Analyzer::new(Options::default());
        for (t, c, read) in [
            (0, code::QUEUE, true),
            (10, code::GETRQ, true),
            (20, code::ISSUE, true),
            (30, code::QUEUE, false),
            (40, code::GETRQ, false),
            (50, code::ISSUE, false),
            (100, code::COMPLETE, true),
            (230, code::COMPLETE, false),
        ] {
            a.feed(&rw(t, c, read));
        }
        let d = &a.finish().devices[0];
        assert_eq!(d.never_completed.replaced_bios, 0);
        assert_eq!(d.never_completed.replaced_requests, 0);
        assert_eq!(d.never_completed.bios, 0);
        assert_eq!(d.latency["q2g"].n, 2);
        assert_eq!(d.latency["q2c"].n, 2);
        assert_eq!(d.latency["d2c"].n, 2);
        assert!(
            (d.latency["q2c"].avg - 150e-9).abs() < 1e-15,
            "{:?}",
            d.latency["q2c"]
        );
        assert_eq!(d.per_request["d2c"].n, 2);
        // Two reads of one block are still one replacing the other, as btt counts them.
        let mut a = Analyzer::new(Options::default());
        for (t, c) in [(0, code::QUEUE), (30, code::QUEUE), (100, code::COMPLETE)] {
            a.feed(&rw(t, c, true));
        }
        let d = &a.finish().devices[0];
        assert_eq!(d.never_completed.replaced_bios, 1);
        assert_eq!(d.latency["q2c"].n, 1);
        // A write put aside that never completes (its C in a CPU's file not read), then the
        // read done and a new write there: the new write's G finds the new write, which
        // replaced the old one, not the old one (a Q2G of 1 s).
        let mut a = Analyzer::new(Options::default());
        for (t, c, read) in [
            (0, code::QUEUE, false),
            (10, code::QUEUE, true),
            (20, code::ISSUE, true),
            (30, code::COMPLETE, true),
            (1_000_000_000, code::QUEUE, false),
            (1_000_000_010, code::GETRQ, false),
        ] {
            a.feed(&rw(t, c, read));
        }
        let d = &a.finish().devices[0];
        assert_eq!(d.latency["q2g"].n, 1);
        assert!(d.latency["q2g"].max < 1e-6, "{:?}", d.latency["q2g"]);
        assert_eq!(d.never_completed.replaced_bios, 1);
    }

    /// With a window, the bytes of the bios completed inside it are counted apart, each
    /// where its C falls (the start counts, the end does not), a split bio's parts too; a
    /// report without one says nothing about it.
    #[test]
    fn bios_completed_inside_the_window_are_counted_apart() {
        let dev = 7 << 20;
        let feed = |a: &mut Analyzer| {
            // Ten 8-sector reads, one per millisecond, each completed 500 us after its Q.
            for i in 0..10u64 {
                let (t, s) = (i * 1_000_000, i * 64);
                a.feed(&ev(t, code::QUEUE, dev, s, 4096));
                a.feed(&ev(t + 10, code::GETRQ, dev, s, 4096));
                a.feed(&ev(t + 20, code::ISSUE, dev, s, 4096));
                a.feed(&ev(t + 500_000, code::COMPLETE, dev, s, 4096));
            }
            // A 16-sector bio split in two, its parts completed at 11.0 and 12.5 ms.
            let (t, s) = (10_000_000, 10_000);
            a.feed(&ev(t, code::QUEUE, dev, s, 8192));
            a.feed(&ev(t + 10, code::SPLIT, dev, s, 4096));
            for (part, done) in [(0u64, 11_000_000), (1, 12_500_000)] {
                a.feed(&ev(t + 20, code::GETRQ, dev, s + part * 8, 4096));
                a.feed(&ev(t + 30, code::ISSUE, dev, s + part * 8, 4096));
                a.feed(&ev(done, code::COMPLETE, dev, s + part * 8, 4096));
            }
        };
        let mut a = Analyzer::new(Options {
            window: Some((2_500_000, 11_000_001)),
            ..Options::default()
        });
        feed(&mut a);
        let d = &a.finish().devices[0];
        assert_eq!(d.bio_bytes_completed, 12 * 4096);
        // The reads completed at 2.5, 3.5, ... 9.5 ms and the split's first part at 11 ms.
        assert_eq!(d.bio_bytes_in_window, Some(9 * 4096));
        let mut a = Analyzer::new(Options::default());
        feed(&mut a);
        assert_eq!(a.finish().devices[0].bio_bytes_in_window, None);
    }

    /// A device's own window takes the place of the common one; the others keep it.
    #[test]
    fn a_device_counts_its_bytes_over_its_own_window() {
        let mut a = Analyzer::new(Options {
            window: Some((0, 2_000_000)),
            device_windows: BTreeMap::from([("8,16".to_string(), (2_000_000, 5_000_000))]),
            ..Options::default()
        });
        // One 4 KiB read a millisecond on each of 8,0 and 8,16, completed 100 us later.
        for dev in [8 << 20, 8 << 20 | 16] {
            for i in 0..10u64 {
                let (t, s) = (i * 1_000_000, i * 8);
                a.feed(&ev(t, code::QUEUE, dev, s, 4096));
                a.feed(&ev(t + 10, code::ISSUE, dev, s, 4096));
                a.feed(&ev(t + 100_000, code::COMPLETE, dev, s, 4096));
            }
        }
        let r = a.finish();
        let in_window = |name: &str| {
            let d = r.devices.iter().find(|d| d.dev == name).unwrap();
            d.bio_bytes_in_window
        };
        // Completed at 0.1, 1.1 ms in [0, 2) ms; at 2.1, 3.1, 4.1 ms in [2, 5) ms.
        assert_eq!(in_window("8,0"), Some(2 * 4096));
        assert_eq!(in_window("8,16"), Some(3 * 4096));
    }

    /// btt's active periods count only requests that completed. A request dispatched after
    /// the last completion (a trace cut while it was in flight) is left out of btt's figures
    /// exactly; one in flight beside requests that completed makes them unknown, not wrong.
    #[test]
    fn btts_active_periods_leave_out_requests_that_never_completed() {
        let dev = 8 << 20;
        let io = |a: &mut Analyzer, sector: u64, d: u64, c: Option<u64>| {
            a.feed(&ev(d - 5, code::QUEUE, dev, sector, 4096));
            a.feed(&ev(d, code::ISSUE, dev, sector, 4096));
            if let Some(c) = c {
                a.feed(&ev(c, code::COMPLETE, dev, sector, 4096));
            }
        };
        let mut a = Analyzer::new(Options::default());
        io(&mut a, 0, 100, Some(200));
        io(&mut a, 8, 300, Some(400));
        io(&mut a, 16, 500, None);
        a.feed(&ev(600, code::QUEUE, dev, 24, 4096));
        let r = a.finish();
        let (p, n) = (&r.devices[0].active_periods, &r.devices[0].never_completed);
        // iolab: three periods, the last from 500 to the end (600); btt: two, 100 long each,
        // live 200 of the 400 from time zero (95, the first Q) to 400, idle 100 between.
        assert_eq!(p.live, 3);
        assert_eq!(p.btt_pct_live, Some(100.0 * 200.0 / 305.0));
        assert_eq!(p.btt_avg_inactive, Some(105.0 / 1e9));
        assert_eq!((n.requests, n.oldest_dispatch), (1, Some(405.0 / 1e9)));

        let mut a = Analyzer::new(Options::default());
        io(&mut a, 0, 100, Some(200));
        io(&mut a, 8, 300, None);
        io(&mut a, 16, 350, Some(400));
        a.feed(&ev(600, code::QUEUE, dev, 24, 4096));
        let p = a.finish().devices[0].active_periods.clone();
        assert_eq!(
            (p.live, p.btt_pct_live, p.btt_avg_inactive),
            (2, None, None)
        );
    }

    /// A process's bios queued are counted, not derived from its latencies: two pids of one
    /// name, one bio never completed, one queued on a second device.
    #[test]
    fn a_process_counts_every_bio_it_queued() {
        use crate::blk_io_trace::{notify, Payload};
        let mut a = Analyzer::new(Options::default());
        for pid in [1, 2] {
            let mut name = ev(0, 0, 8 << 20, 0, 0);
            name.action = action(notify::PROCESS, category::NOTIFY);
            name.pid = pid;
            name.payload = Payload::ProcessName("fio".into());
            a.feed(&name);
        }
        let mut t = 100;
        for (pid, dev, sector, completes) in [
            (1, 8 << 20, 0, true),
            (2, 8 << 20, 100, true),
            (1, 8 << 20 | 16, 200, true),
            (2, 8 << 20, 300, false),
            (1, 8 << 20, 400, true),
        ] {
            for (code, at) in [
                (code::QUEUE, t),
                (code::ISSUE, t + 10),
                (code::COMPLETE, t + 50),
            ] {
                if code == code::COMPLETE && !completes {
                    continue;
                }
                let mut e = ev(at, code, dev, sector, 4096);
                e.pid = pid;
                a.feed(&e);
            }
            t += 1000;
        }
        let r = a.finish();
        assert_eq!(r.processes.len(), 1, "{:?}", r.processes);
        let fio = &r.processes[0];
        assert_eq!(
            (fio.pids.clone(), fio.q, fio.bytes),
            (vec![1, 2], 5, 5 * 4096)
        );
    }

    /// "All Devices" covers the devices named in `all_devices`, every device without it.
    #[test]
    fn all_devices_covers_the_devices_asked_for() {
        let q2c = |all_devices: Option<&str>| {
            let mut a = Analyzer::new(Options {
                all_devices: all_devices.map(|d| [d.to_string()].into()),
                ..Options::default()
            });
            // Ten 4 KiB reads on each device: completed 100 us after their Q on 8,0, 300 us
            // on 8,16.
            for (dev, d2c) in [(8 << 20, 100_000), (8 << 20 | 16, 300_000)] {
                for i in 0..10u64 {
                    let (t, s) = (i * 1_000_000, i * 8);
                    a.feed(&ev(t, code::QUEUE, dev, s, 4096));
                    a.feed(&ev(t + 10, code::ISSUE, dev, s, 4096));
                    a.feed(&ev(t + d2c, code::COMPLETE, dev, s, 4096));
                }
            }
            let r = a.finish();
            assert_eq!(r.devices.len(), 2);
            (
                r.all["q2c"].n,
                (r.all["q2c"].avg * 1e6).round(),
                r.all["q2q"].n,
            )
        };
        assert_eq!(q2c(None), (20, 200.0, 19));
        // Q2Q: the gaps between 8,0's own bios.
        assert_eq!(q2c(Some("8,0")), (10, 100.0, 9));
        assert_eq!(q2c(Some("8,16")), (10, 300.0, 9));
    }

    /// Q2C as issued over the devices "All Devices" covers: there only where one of those
    /// splits bios, and over their bios only (an experiment's stacked legs stay out).
    #[test]
    fn q2c_as_issued_over_all_devices_covers_the_same_devices() {
        let issued = |all_devices: Option<&str>| {
            let mut a = Analyzer::new(Options {
                all_devices: all_devices.map(|d| [d.to_string()].into()),
                ..Options::default()
            });
            for i in 0..10u64 {
                let (t, s) = (i * 1_000_000, i * 4096);
                // On 8,0 a 4 KiB write done in 100 us.
                a.feed(&ev(t, code::QUEUE, 8 << 20, s, 4096));
                a.feed(&ev(t + 100_000, code::COMPLETE, 8 << 20, s, 4096));
                // On 8,16 a 1 MiB write cut in two halves, done 100 and 300 us after its Q.
                let dev = 8 << 20 | 16;
                a.feed(&ev(t, code::QUEUE, dev, s, 2048 * 512));
                a.feed(&ev(t + 10, code::SPLIT, dev, s, 1024 * 512));
                a.feed(&ev(t + 100_000, code::COMPLETE, dev, s, 1024 * 512));
                a.feed(&ev(t + 300_000, code::COMPLETE, dev, s + 1024, 1024 * 512));
            }
            let r = a.finish();
            assert_eq!(r.devices[1].q2c_as_issued.as_ref().unwrap().n, 10);
            assert_eq!(r.devices[0].q2c_as_issued, None);
            r.all_q2c_as_issued.map(|l| (l.n, (l.avg * 1e6).round()))
        };
        assert_eq!(issued(None), Some((20, 200.0)));
        assert_eq!(issued(Some("8,16")), Some((10, 300.0)));
        assert_eq!(issued(Some("8,0")), None);
    }

    /// A bio split in three (two X, as a 1.5 MiB read on a queue that takes 512 KiB): one Q,
    /// then each part's G, D and C. Each part finds its Q2G as in btt, and unlike in btt is
    /// dispatched and completed with its own D2C and Q2C from the Q's time; nothing is left
    /// in flight.
    #[test]
    fn each_part_of_a_split_bio_is_completed_from_the_bios_queue_time() {
        let dev = 7 << 20;
        let mut a = Analyzer::new(Options::default());
        for i in 0..10u64 {
            let (t, s) = (i * 1_000_000, i * 4096);
            a.feed(&ev(t, code::QUEUE, dev, s, 3072 * 512));
            a.feed(&ev(t + 10, code::SPLIT, dev, s, 1024 * 512));
            a.feed(&ev(t + 20, code::SPLIT, dev, s + 1024, 1024 * 512));
            for part in 0..3u64 {
                let (ps, pt) = (s + part * 1024, t + 100 * part);
                a.feed(&ev(pt + 30, code::GETRQ, dev, ps, 1024 * 512));
                a.feed(&ev(pt + 40, code::ISSUE, dev, ps, 1024 * 512));
            }
            for part in 0..3u64 {
                a.feed(&ev(
                    t + 1000 * (part + 1),
                    code::COMPLETE,
                    dev,
                    s + part * 1024,
                    1024 * 512,
                ));
            }
        }
        let report = a.finish();
        let d = &report.devices[0];
        assert_eq!(d.splits, 20);
        // Ten bios split (the second cut of each is of a part), each whole as queued.
        assert_eq!((d.bios_split, d.split_bio_bytes), (10, 10 * 3072 * 512));
        // btt completes none of these requests: what it prints for the active periods is not
        // iolab's to say.
        assert_eq!(d.active_periods.btt_pct_live, None);
        assert!(render::render(&report).contains("what btt prints is not known here"));
        for name in ["q2g", "d2c", "q2c"] {
            assert_eq!(d.latency[name].n, 30, "{name}");
        }
        // Q2C: 1000, 2000 and 3000 ns after the Q; D2C: from 40, 140 and 240 ns.
        assert!((d.latency["q2c"].avg - 2000e-9).abs() < 1e-12);
        assert!((d.latency["d2c"].avg - 1860e-9).abs() < 1e-12);
        assert!((d.latency["q2g"].avg - 130e-9).abs() < 1e-12);
        assert_eq!(d.never_completed.bios, 0);
        assert_eq!(d.merge.total, 30 * 1024);
        assert_eq!(d.bio_bytes_completed, 10 * 3072 * 512);
        // Whole, each bio took 3000 ns: from its Q to its last part's C.
        let whole = &d.split_bios_q2c;
        assert_eq!(whole.keys().collect::<Vec<_>>(), ["write"]);
        assert_eq!(whole["write"].n, 10);
        assert!((whole["write"].avg - 3000e-9).abs() < 1e-12);
        assert!(render::render(&report).contains("split bios whole"));
    }

    /// A split bio one of whose parts is replaced (a later Q on its start sector) never
    /// completes whole: it is left out, and a bio split after it is timed alone.
    #[test]
    fn a_split_bio_with_a_part_replaced_is_not_timed_whole() {
        let dev = 7 << 20;
        let mut a = Analyzer::new(Options::default());
        a.feed(&ev(0, code::QUEUE, dev, 0, 2048 * 512));
        a.feed(&ev(10, code::SPLIT, dev, 0, 1024 * 512));
        a.feed(&ev(20, code::QUEUE, dev, 1024, 8 * 512));
        a.feed(&ev(30, code::COMPLETE, dev, 0, 1024 * 512));
        a.feed(&ev(40, code::COMPLETE, dev, 1024, 8 * 512));
        a.feed(&ev(100, code::QUEUE, dev, 4096, 2048 * 512));
        a.feed(&ev(110, code::SPLIT, dev, 4096, 1024 * 512));
        a.feed(&ev(500, code::COMPLETE, dev, 4096, 1024 * 512));
        a.feed(&ev(900, code::COMPLETE, dev, 5120, 1024 * 512));
        let d = &a.finish().devices[0];
        let whole = &d.split_bios_q2c["write"];
        assert_eq!(whole.n, 1);
        assert!((whole.avg - 800e-9).abs() < 1e-12);
        assert_eq!(d.never_completed.replaced_bios, 1);
        // As issued: the bio that replaced a part (20 ns) and the whole split bio (800 ns);
        // per bio, each part counts (30, 20, 400 and 800 ns).
        let issued = &d.bios_as_issued_q2c["write"];
        assert_eq!((issued.n, issued.max), (2, 800e-9));
        assert!((issued.avg - 410e-9).abs() < 1e-12);
        assert_eq!(d.by_direction["write"]["q2c"].n, 4);
    }

    /// Device-mapper splitting a 64 KiB bio over 4 KiB stripes: one Q, then an X for what is
    /// left after each piece (sector and size of the rest), and one C once all are done,
    /// naming the last piece. The whole bio gets its Q2C, and its 64 KiB count as completed.
    /// A split bio's parts are in the queue from the split on: the timeline's queue depth
    /// counts them there, not only from the next Q or C (a trace of 1 MiB writes split in 64
    /// KiB parts showed fewer bios queued than requests in the driver).
    #[test]
    fn the_parts_of_a_split_bio_count_in_the_queue_depth_from_the_split() {
        let dev = 7 << 20;
        let mut a = Analyzer::new(Options::default());
        a.feed(&ev(0, code::QUEUE, dev, 0, 3072 * 512));
        a.feed(&ev(10, code::SPLIT, dev, 0, 1024 * 512));
        a.feed(&ev(10, code::SPLIT, dev, 1024, 1024 * 512));
        for part in 0..3u64 {
            a.feed(&ev(
                1000 * (part + 1),
                code::COMPLETE,
                dev,
                part * 1024,
                1024 * 512,
            ));
        }
        let d = &a.finish().devices[0];
        // 1 bio for 10 ns, then 3, 2 and 1 for 1000, 1000 and 1000 ns (less 10).
        let expected = (10.0 + 3.0 * 990.0 + 2.0 * 1000.0 + 1000.0) / 3000.0;
        assert!(
            (d.timeline[0].queue_depth - expected).abs() < 1e-9,
            "{}",
            d.timeline[0].queue_depth
        );
    }

    #[test]
    fn a_bio_device_mapper_splits_completes_whole_at_its_last_piece() {
        let dm = 254 << 20;
        let mut a = Analyzer::new(Options::default());
        for i in 0..5u64 {
            let (t, s) = (i * 1_000_000, i * 128);
            a.feed(&ev(t, code::QUEUE, dm, s, 128 * 512));
            for k in 1..16u64 {
                a.feed(&ev(
                    t + k,
                    code::SPLIT,
                    dm,
                    s + 8 * k,
                    (128 - 8 * k) as u32 * 512,
                ));
            }
            a.feed(&ev(t + 5000, code::COMPLETE, dm, s + 120, 8 * 512));
        }
        let d = &a.finish().devices[0];
        assert_eq!(d.latency["q2c"].n, 5);
        assert!((d.latency["q2c"].avg - 5000e-9).abs() < 1e-12);
        // As issued, the same five bios (an experiment's `trace_q2c_*`).
        let issued = d.q2c_as_issued.as_ref().unwrap();
        assert_eq!(issued.n, 5);
        assert!((issued.avg - 5000e-9).abs() < 1e-12);
        assert_eq!(d.bio_bytes_completed, 5 * 128 * 512);
        // btt's total, from the Cs, holds only the last pieces.
        assert_eq!(d.merge.total, 5 * 8);
        assert_eq!(d.never_completed.replaced_bios, 0);
    }

    /// btt's iostat queue goes negative when requests merge; iolab's counters cannot: merges
    /// and dispatches of IOs it never saw queued leave them at zero.
    #[test]
    fn depths_never_go_negative() {
        let dev = 8 << 20;
        let mut a = Analyzer::new(Options::default());
        a.feed(&ev(0, code::QUEUE, dev, 0, 4096));
        for i in 1..20u64 {
            a.feed(&ev(i * 10, code::BACKMERGE, dev, i * 8, 4096));
            a.feed(&ev(i * 10 + 1, code::ISSUE, dev, 10_000 + i * 8, 4096));
            a.feed(&ev(i * 10 + 2, code::COMPLETE, dev, 10_000 + i * 8, 4096));
        }
        a.feed(&ev(500, code::QUEUE, dev, 64, 4096));
        let r = a.finish();
        let d = &r.devices[0];
        assert!(d.active_requests_at_q >= 0.0);
        assert!(d
            .timeline
            .iter()
            .all(|p| p.queue_depth >= 0.0 && p.driver_depth >= 0.0));
        assert_eq!(d.never_completed.bios, 2);
    }
}
