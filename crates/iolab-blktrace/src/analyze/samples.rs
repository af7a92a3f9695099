//! Latency samples on their way from the state machine (`device.rs`) to the accumulators
//! that sum them. Matching Qs to their Gs, Ds and Cs has to follow one event after another on
//! one thread; adding a sample to its histogram, minimum, maximum and sum does not, and
//! costs about as much as the matching. So a device records each sample as 16 bytes, and
//! [`analyze_paths`](super::analyze_paths) sums them on the reader thread, which has time to
//! spare: the two threads then carry similar loads. Sums are exact integers (counts, sums,
//! minima, maxima), so where and in which order they are added changes no result.

use super::device::BioLatencies;
use super::latency::Latency;

/// What a sample measures: a latency of one bio, summed per device and per process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Q2G,
    S2G,
    G2I,
    Q2M,
    I2D,
    M2D,
    Q2CRead,
    Q2CWrite,
    D2CRead,
    D2CWrite,
    Q2CDiscard,
    D2CDiscard,
    /// Q2C of a part of a bio the block layer split, apart from that of whole bios: the
    /// bios as issued are the whole ones and each split bio once (`Device::absorb`).
    Q2CPartRead,
    Q2CPartWrite,
    Q2CPartDiscard,
}

impl Kind {
    /// The Q2C and D2C kinds of a direction ([`crate::blk_io_trace::Io::direction`]).
    pub const Q2C: [Kind; 3] = [Kind::Q2CRead, Kind::Q2CWrite, Kind::Q2CDiscard];
    pub const Q2C_PART: [Kind; 3] = [Kind::Q2CPartRead, Kind::Q2CPartWrite, Kind::Q2CPartDiscard];
    pub const D2C: [Kind; 3] = [Kind::D2CRead, Kind::D2CWrite, Kind::D2CDiscard];
}

#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub value: u64,
    /// Index into the device's processes.
    pub proc: u32,
    pub kind: Kind,
}

impl Sample {
    #[inline(always)]
    pub fn new(kind: Kind, proc: u32, value: u64) -> Self {
        Sample { value, proc, kind }
    }
}

const KINDS: usize = Kind::Q2CPartDiscard as usize + 1;
/// The slot each kind takes among a process's sums: Q2C and D2C per process do not tell
/// reads, writes and discards apart, nor whole bios from parts.
const PROCESS_SLOT: [usize; KINDS] = [0, 1, 2, 3, 4, 5, 6, 6, 7, 7, 6, 7, 6, 6, 6];

/// No process yet.
const NO_PROCESS: u32 = u32::MAX;

/// One device's sums of every sampled latency and count.
#[derive(Debug, Clone)]
pub struct Sums {
    /// By kind.
    by_kind: [Latency; KINDS],
    /// While every bio sample has come from one process (fio with one job, say), that
    /// process: its sums are then the device's, and are not added a second time.
    solo: u32,
    /// Per process (min/avg/max/N only), by the device's process index: Q2G, S2G, G2I, Q2M,
    /// I2D, M2D, Q2C, D2C; kept once a second process has come (`many`).
    procs: Vec<[Latency; 8]>,
    many: bool,
}

impl Default for Sums {
    fn default() -> Self {
        Sums {
            by_kind: std::array::from_fn(|_| Latency::default()),
            solo: NO_PROCESS,
            procs: Vec::new(),
            many: false,
        }
    }
}

impl Sums {
    pub fn add(&mut self, samples: &[Sample]) {
        for s in samples {
            let k = s.kind as usize;
            if !self.solo_takes(s.proc) {
                let i = s.proc as usize;
                if i >= self.procs.len() {
                    self.grow(i);
                }
                self.procs[i][PROCESS_SLOT[k]].add(s.value);
            }
            self.by_kind[k].add(s.value);
        }
    }

    /// Whether a bio sample of process `proc` needs no sum of its own: it does while one
    /// process has sent them all (its sums are the device's, before this sample is added).
    #[inline(always)]
    fn solo_takes(&mut self, proc: u32) -> bool {
        if self.many {
            return false;
        }
        if proc == self.solo {
            return true;
        }
        if self.solo == NO_PROCESS {
            self.solo = proc;
            return true;
        }
        self.keep_many();
        false
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self, i: usize) {
        self.procs
            .resize_with(i + 1, || std::array::from_fn(|_| Latency::plain()));
    }

    /// From now on every process's sums apart, starting with the lone process's (so far the
    /// device's own).
    #[cold]
    #[inline(never)]
    fn keep_many(&mut self) {
        if !self.many && self.solo != NO_PROCESS {
            let solo = self.solo as usize;
            let sums = self.solo_sums();
            self.grow(solo.max(self.procs.len().saturating_sub(1)));
            self.procs[solo] = sums;
        }
        self.many = true;
    }

    /// The lone process's sums: the device's bio sums, all directions together.
    fn solo_sums(&self) -> [Latency; 8] {
        let k = |kind: Kind| self.by_kind[kind as usize].counts_only();
        let all = |kinds: &[Kind]| {
            let mut l = k(kinds[0]);
            for kind in &kinds[1..] {
                l.merge(&k(*kind));
            }
            l
        };
        [
            k(Kind::Q2G),
            k(Kind::S2G),
            k(Kind::G2I),
            k(Kind::Q2M),
            k(Kind::I2D),
            k(Kind::M2D),
            all(&[Kind::Q2C, Kind::Q2C_PART].concat()),
            all(&Kind::D2C),
        ]
    }

    /// Process `i`'s sums, if it has any.
    fn process_sums(&self, i: usize) -> Option<[Latency; 8]> {
        if self.many {
            self.procs.get(i).cloned()
        } else if i == self.solo as usize {
            Some(self.solo_sums())
        } else {
            None
        }
    }

    pub fn get(&self, kind: Kind) -> &Latency {
        &self.by_kind[kind as usize]
    }

    /// A process's latencies in btt's form (Q2Q left empty: the side stage has it).
    pub fn process(&self, i: usize) -> Option<BioLatencies> {
        let [q2g, s2g, g2i, q2m, i2d, m2d, q2c, d2c] = self.process_sums(i)?;
        Some(BioLatencies {
            q2q: Latency::plain(),
            q2g,
            s2g,
            g2i,
            q2m,
            i2d,
            m2d,
            d2c,
            q2c,
        })
    }

    pub fn merge(&mut self, o: &Sums) {
        // Both sides' processes apart first (a lone process on each may differ).
        self.keep_many();
        let count = if o.many {
            o.procs.len()
        } else if o.solo != NO_PROCESS {
            o.solo as usize + 1
        } else {
            0
        };
        for i in 0..count {
            if let Some(theirs) = o.process_sums(i) {
                self.grow(i.max(self.procs.len().saturating_sub(1)));
                for (a, b) in self.procs[i].iter_mut().zip(&theirs) {
                    a.merge(b);
                }
            }
        }
        for (a, b) in self.by_kind.iter_mut().zip(&o.by_kind) {
            a.merge(b);
        }
    }
}

/// Sums per device, by the analyzer's device index (order of first appearance).
#[derive(Debug, Clone, Default)]
pub struct AllSums(pub Vec<Sums>);

impl AllSums {
    pub fn device(&mut self, i: usize) -> &mut Sums {
        if i >= self.0.len() {
            self.0.resize_with(i + 1, Sums::default);
        }
        &mut self.0[i]
    }

    pub fn merge(&mut self, o: &AllSums) {
        for (i, s) in o.0.iter().enumerate() {
            self.device(i).merge(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BIO: [Kind; 15] = [
        Kind::Q2G,
        Kind::S2G,
        Kind::G2I,
        Kind::Q2M,
        Kind::I2D,
        Kind::M2D,
        Kind::Q2CRead,
        Kind::Q2CWrite,
        Kind::D2CRead,
        Kind::D2CWrite,
        Kind::Q2CDiscard,
        Kind::D2CDiscard,
        Kind::Q2CPartRead,
        Kind::Q2CPartWrite,
        Kind::Q2CPartDiscard,
    ];

    /// Samples from process 2 alone, then from 0, 1 and 2.
    fn samples(seed: u64, solo_first: usize, procs: u32) -> Vec<Sample> {
        let mut x = seed;
        (0..3000)
            .map(|i| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let proc = if i < solo_first {
                    2
                } else {
                    (x >> 33) as u32 % procs
                };
                Sample::new(BIO[(x >> 20) as usize % BIO.len()], proc, x >> 40)
            })
            .collect()
    }

    /// Each process's sums as the samples say, added one by one.
    fn expected(samples: &[Sample], proc: u32) -> Vec<(u64, u128, u64, u64)> {
        let mut want: [Latency; 8] = std::array::from_fn(|_| Latency::plain());
        for s in samples {
            if s.proc == proc {
                want[PROCESS_SLOT[s.kind as usize]].add(s.value);
            }
        }
        want.iter().map(|l| (l.n, l.total, l.min, l.max)).collect()
    }

    fn got(s: &Sums, proc: u32) -> Vec<(u64, u128, u64, u64)> {
        let b = s.process(proc as usize).expect("the process has sums");
        [b.q2g, b.s2g, b.g2i, b.q2m, b.i2d, b.m2d, b.q2c, b.d2c]
            .iter()
            .map(|l| (l.n, l.total, l.min, l.max))
            .collect()
    }

    #[test]
    fn processes_are_summed_apart_after_a_lone_start() {
        for (solo_first, procs) in [(0, 3), (500, 3), (3000, 3), (100, 1)] {
            let all = samples(solo_first as u64 + 1, solo_first, procs);
            let mut s = Sums::default();
            // In pieces, as batches arrive.
            for piece in all.chunks(701) {
                s.add(piece);
            }
            for proc in 0..procs.max(3) {
                let want = expected(&all, proc);
                if want.iter().all(|w| w.0 == 0) {
                    assert!(s.process(proc as usize).is_none_or(|b| b.q2g.n == 0));
                } else {
                    assert_eq!(got(&s, proc), want, "{solo_first} {procs} proc {proc}");
                }
            }
        }
    }

    #[test]
    fn merged_sums_equal_sums_of_all() {
        // Two halves, each with a different lone process or several.
        for (a, b) in [
            ((1500, 1), (1500, 3)),
            ((3000, 3), (0, 2)),
            ((0, 3), (0, 3)),
        ] {
            let first = samples(5, a.0, a.1);
            let second: Vec<Sample> = samples(9, b.0, b.1)
                .into_iter()
                .map(|s| Sample {
                    proc: s.proc % 2,
                    ..s
                })
                .collect();
            let (mut x, mut y, mut whole) = (Sums::default(), Sums::default(), Sums::default());
            x.add(&first);
            y.add(&second);
            whole.add(&first);
            whole.add(&second);
            x.merge(&y);
            for proc in 0..3 {
                let all: Vec<Sample> = first.iter().chain(&second).copied().collect();
                if expected(&all, proc).iter().any(|w| w.0 > 0) {
                    assert_eq!(got(&x, proc), expected(&all, proc));
                    assert_eq!(got(&whole, proc), expected(&all, proc));
                }
            }
            for k in 0..KINDS {
                assert_eq!(x.by_kind[k].n, whole.by_kind[k].n);
                assert_eq!(x.by_kind[k].total, whole.by_kind[k].total);
            }
        }
    }
}
