//! A results database shaped like a real rq_affinity x placement experiment (case 0), built
//! through the store API: realistic IOPS/latency/CPU figures with run-to-run noise, one slow
//! outlier run, a failed run, cells that are not applicable here (no CPU on another node),
//! sampled interrupt and CPU series, and fio json+ output for latency histograms. Used by the
//! `answers` tests and by `benches/answers.rs` (which asks for thousands of repetitions).

#![allow(dead_code)]

use std::path::Path;

use iolab::store::{NewExperiment, NewRun, RunStatus, SampleSeries, Store};

pub const EXPERIMENT_FILE: &str = r#"name = "rq_affinity x placement, 4k random reads"
seed = 2008
repetitions = 5

[workload]
rw = "randread"
bs = "4k"
ioengine = "libaio"
iodepth = 16

[factors]
rq_affinity = [0, 1, 2]
placement = ["on", "near", "far"]
"#;

/// A small deterministic generator (xorshift64*), so snapshots never change.
pub struct Noise(u64);

impl Noise {
    pub fn new(seed: u64) -> Self {
        Noise(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Roughly normal (sum of uniforms), mean 0, stddev 1.
    pub fn gauss(&mut self) -> f64 {
        (0..12).map(|_| self.next()).sum::<f64>() - 6.0
    }
}

pub struct Spec<'a> {
    pub name: &'a str,
    pub host: &'a str,
    pub kernel: &'a str,
    pub variant: &'a str,
    pub reps: u32,
    /// Multiplies IOPS in the `rq_affinity=2` cells (a regression when < 1).
    pub rq2_factor: f64,
    pub seed: u64,
    /// Store samples and fio JSON (off for the 10,000-run benchmark database).
    pub rich: bool,
}

/// Adds one experiment and returns its id.
pub fn add_experiment(store: &mut Store, spec: &Spec<'_>) -> i64 {
    let id = store
        .create_experiment(&NewExperiment {
            name: spec.name.into(),
            file_text: EXPERIMENT_FILE.into(),
            seed: 2008,
            planned_order: serde_json::json!([]),
            host: spec.host.into(),
            kernel: spec.kernel.into(),
            part_of: None,
        })
        .unwrap();
    store
        .add_environment(
            id,
            &[
                iolab::store::EnvironmentEntry {
                    key: "governor".into(),
                    value: "powersave".into(),
                    severity: Some("warn".into()),
                    advice: Some("set the performance governor for stable numbers".into()),
                },
                iolab::store::EnvironmentEntry {
                    key: "kernel".into(),
                    value: spec.kernel.into(),
                    severity: None,
                    advice: None,
                },
            ],
        )
        .unwrap();
    let fio_json = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/fio/randread_2jobs_jsonplus.out"),
    )
    .unwrap();
    let mut noise = Noise::new(spec.seed);
    let base_iops = [
        [69_100.0, 70_200.0, 66_000.0],
        [69_000.0, 71_000.0, 0.0],
        [68_900.0, 70_900.0, 0.0],
    ];
    let mut t = 1_795_300_000.0;
    for rep in 1..=spec.reps {
        for (ri, rq) in [0, 1, 2].iter().enumerate() {
            for (pi, place) in ["on", "near", "far"].iter().enumerate() {
                let levels = serde_json::json!({"rq_affinity": rq, "placement": place});
                let key = format!("rq_affinity={rq},placement={place}");
                let mut run = NewRun {
                    experiment_id: id,
                    cell_key: key,
                    cell_levels: levels,
                    repetition: rep,
                    start_unix: t,
                    end_unix: t + 4.0,
                    tags: vec![("variant".into(), spec.variant.into())],
                    ..Default::default()
                };
                t += 5.0;
                if *place == "far" {
                    run.status =
                        RunStatus::NotApplicable("no CPU on another NUMA node (1 node)".into());
                    store.insert_run(&run).unwrap();
                    continue;
                }
                if *rq == 1 && *place == "on" && rep == 2 {
                    run.status = RunStatus::Failed("fio exited with status 1".into());
                    store.insert_run(&run).unwrap();
                    continue;
                }
                let mut iops = base_iops[ri][pi] * (1.0 + 0.006 * noise.gauss());
                if *rq == 2 {
                    iops *= spec.rq2_factor;
                }
                if *rq == 0 && *place == "near" && rep == 3 {
                    iops *= 0.78; // one slow run: flagged, kept
                }
                let lat = 16.0 / iops * 1e6;
                let sys = 38.0 + 4.0 * ri as f64 + 1.5 * noise.gauss();
                run.metrics = vec![
                    ("read_iops".into(), iops),
                    ("write_iops".into(), 0.0),
                    ("read_bw_mbs".into(), iops * 4096.0 / 1e6),
                    ("write_bw_mbs".into(), 0.0),
                    ("read_clat_mean_us".into(), lat),
                    ("read_clat_p99_us".into(), lat * (2.6 + 0.1 * noise.gauss())),
                    ("usr_pct".into(), 9.0 + 0.8 * noise.gauss()),
                    ("sys_pct".into(), sys),
                    ("irq_per_s".into(), iops * (0.98 + 0.01 * noise.gauss())),
                    // A figure with no better side (compare refuses it without `--better`).
                    ("dev_avg_rq_kb".into(), 4.0),
                    // Case 1's sign: request allocation sleeps appear with the regression.
                    (
                        "trace_sleeps".into(),
                        if *rq == 2 && spec.rq2_factor < 1.0 {
                            10.0 + f64::from(rep)
                        } else {
                            0.0
                        },
                    ),
                ];
                if spec.rich {
                    run.fio_json = Some(fio_json.clone());
                    run.samples = samples(&mut noise, iops, pi);
                    run.series = per_second(iops);
                }
                store.insert_run(&run).unwrap();
            }
        }
    }
    store.set_experiment_status(id, "done").unwrap();
    id
}

/// Per-second series as the run loop stores them (`experiment::run::per_second`): fio's
/// IOPS over a 4 s window and each CPU's interrupts per second. No draws from the noise
/// stream: the runs' metrics (and the snapshots of them) stay as they were.
fn per_second(iops: f64) -> Vec<iolab::store::SeriesPoint> {
    let mut out = Vec::new();
    for t in 1..=4 {
        let t_s = f64::from(t);
        let point = |name: &str, value: f64| iolab::store::SeriesPoint {
            name: name.into(),
            t_s,
            value,
        };
        out.push(point("read_iops", iops * (1.0 + 0.01 * (t_s - 2.5))));
        out.push(point("cpu0:irq_per_s", iops * 0.97 + 250.0));
        out.push(point("cpu1:irq_per_s", iops * 0.03 + 250.0));
    }
    out
}

/// Interrupts/s per CPU of the device's IRQ 45 and per-CPU time shares, 1 s apart: the IRQ
/// lands on CPU 0; `near`/`far` placement moves the submitting work to CPU 1.
fn samples(noise: &mut Noise, iops: f64, placement: usize) -> Vec<SampleSeries> {
    let t: Vec<f64> = (1..=4).map(f64::from).collect();
    // Keys as experiment::run::stored::series writes them, totals included.
    let mut out = vec![
        SampleSeries {
            kind: "irq".into(),
            key: "all".into(),
            t_offsets: t.clone(),
            values: vec![iops + 500.0; t.len()],
        },
        SampleSeries {
            kind: "cpu".into(),
            key: "all/sys_pct".into(),
            t_offsets: t.clone(),
            values: vec![20.0; t.len()],
        },
    ];
    for cpu in 0..2u32 {
        let share = if cpu == 0 { 0.97 } else { 0.03 };
        out.push(SampleSeries {
            kind: "irq".into(),
            key: format!("45/cpu{cpu}"),
            t_offsets: t.clone(),
            values: t
                .iter()
                .map(|_| iops * share * (1.0 + 0.02 * noise.gauss()))
                .collect(),
        });
        out.push(SampleSeries {
            kind: "irq".into(),
            key: format!("LOC/cpu{cpu}"),
            t_offsets: t.clone(),
            values: t.iter().map(|_| 250.0 + 5.0 * noise.gauss()).collect(),
        });
        let busy = cpu == 0 || placement > 0;
        let (usr, sys, softirq) = if busy {
            (9.0, 38.0, 6.0)
        } else {
            (1.0, 3.0, 1.0)
        };
        for (cat, v) in [
            ("usr", usr),
            ("sys", sys),
            ("softirq", softirq),
            ("iowait", 2.0),
        ] {
            out.push(SampleSeries {
                kind: "cpu".into(),
                key: format!("cpu{cpu}/{cat}_pct"),
                t_offsets: t.clone(),
                values: t
                    .iter()
                    .map(|_| (v + 0.5 * noise.gauss()).max(0.0))
                    .collect(),
            });
        }
        let idle = 100.0 - usr - sys - softirq - 2.0;
        out.push(SampleSeries {
            kind: "cpu".into(),
            key: format!("cpu{cpu}/idle_pct"),
            t_offsets: t.clone(),
            values: vec![idle; t.len()],
        });
    }
    out
}

/// Two experiments: kernel 6.1 (stock) and kernel 6.6 (backport) where rq_affinity=2 lost 8%.
pub fn two_kernels(path: &Path, reps: u32, rich: bool) -> Store {
    let mut store = Store::open(path).unwrap();
    add_experiment(
        &mut store,
        &Spec {
            name: "rq_affinity x placement",
            host: "lab1",
            kernel: "6.1",
            variant: "stock",
            reps,
            rq2_factor: 1.0,
            seed: 1,
            rich,
        },
    );
    add_experiment(
        &mut store,
        &Spec {
            name: "rq_affinity x placement",
            host: "lab1",
            kernel: "6.6",
            variant: "backport",
            reps,
            rq2_factor: 0.92,
            seed: 2,
            rich,
        },
    );
    store
}
