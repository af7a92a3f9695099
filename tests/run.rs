//! `iolab run`: the loop exactly, with replayed fio outputs against a copy of a real machine's
//! /proc and /sys (knob files are plain files there, so every write and restore is checked);
//! then, as root, end to end with real fio on scratch loop devices: a 2x2 matrix, a SIGKILL
//! mid-way followed by `iolab restore`, a write refused on a device that holds data, and
//! malformed files reported through the CLI.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use iolab::experiment::run::{self as runloop, Quiet, Settings};
use iolab::experiment::{self, Planner};
use iolab::store::{RunStatus, Store};
use iolab::sys::SysRoot;
use iolab::workload::{CancelToken, Canned, FioOutcome, FioRunner, JobSpec, ReplayFio};

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fio_fixture(stem: &str) -> Canned {
    Canned::from_files(&manifest().join("tests/fixtures/fio").join(stem), 0).unwrap()
}

/// A writable copy of the `thisvm` machine (2 CPUs, loop devices, virtio disk).
struct Lab {
    dir: tempfile::TempDir,
}

impl Lab {
    fn new() -> Lab {
        Lab::of("thisvm")
    }

    fn of(machine: &str) -> Lab {
        let dir = tempfile::tempdir().unwrap();
        let ok = Command::new("cp")
            .arg("-a")
            .arg(manifest().join("tests/fixtures/machines").join(machine))
            .arg(dir.path().join("root"))
            .status()
            .unwrap()
            .success();
        assert!(ok, "cannot copy the fixture machine");
        Lab { dir }
    }

    fn settings(&self) -> Settings {
        let mut s = Settings::live(self.dir.path().join("results.db"));
        s.root = SysRoot::at(self.dir.path().join("root")).unwrap();
        s.state_dir = self.dir.path().join("state");
        s.tags = vec![("variant".to_string(), "stock".to_string())];
        s.sample_interval = Duration::from_millis(5);
        s.preflight_sample = Duration::ZERO;
        s
    }

    /// Runs `e` here with `replay` standing in for fio, to the end.
    fn run(&self, e: &experiment::Experiment, replay: &ReplayFio) -> runloop::Outcome {
        runloop::run(e, &self.settings(), replay, &CancelToken::new(), &mut Quiet).unwrap()
    }

    /// The error of a run that must not start.
    fn refused(&self, e: &experiment::Experiment, replay: &ReplayFio) -> String {
        match runloop::run(e, &self.settings(), replay, &CancelToken::new(), &mut Quiet) {
            Ok(_) => panic!("the run started"),
            Err(e) => e.to_string(),
        }
    }

    fn attr(&self, rel: &str) -> String {
        let text = std::fs::read_to_string(self.dir.path().join("root").join(rel)).unwrap();
        iolab::knobs::current_choice(&text)
    }

    fn loop3(&self, attr: &str) -> String {
        self.attr(&format!("sys/block/loop3/queue/{attr}"))
    }
}

fn exp(text: &str) -> experiment::Experiment {
    experiment::parse("t.toml", text).unwrap_or_else(|e| panic!("{e}"))
}

const MATRIX: &str = "name = \"matrix\"\nseed = 11\nrepetitions = 2\n\
    [target]\ndevice = \"loop3\"\n[workload]\nrw = \"randread\"\nbs = \"4k\"\n\
    [factors]\nnr_requests = [32]\nscheduler = [\"none\", \"mq-deadline\"]\nrq_affinity = [1, 2]\n";

/// Machine-wide controls as factors: each cell sets its sysctl, governor, boost and idle-state
/// limit on every CPU through the journal, and every file is back as it was afterwards.
#[test]
fn system_controls_are_set_per_cell_and_all_come_back() {
    let lab = Lab::new();
    let root = lab.dir.path().join("root");
    let files = crate::common::system_controls(&root);
    let e = exp(
        "name = \"sys\"\nseed = 3\nrepetitions = 1\n[target]\ndevice = \"loop3\"\n\
         [workload]\nrw = \"randread\"\n[factors]\nsysctl.vm.dirty_ratio = [10, 40]\n\
         cpu.governor = [\"performance\"]\ncpu.boost = [\"off\"]\ncpu.max_cstate = [1]\n",
    );
    let replay = ReplayFio::in_order((0..2).map(|_| fio_fixture("randread_1job_json")));
    let out = lab.run(&e, &replay);
    assert_eq!(out.cells.iter().map(|c| c.runs.len()).sum::<usize>(), 2);
    // Per run: the sysctl, two governors, no_turbo, and 2 CPUs x 3 idle states.
    assert_eq!(out.knob_changes.len(), 2 * 10);
    let set = |path: &str| -> Vec<&str> {
        out.knob_changes
            .iter()
            .filter(|w| w.path == path)
            .map(|w| w.new.as_str())
            .collect()
    };
    let mut ratios = set("/proc/sys/vm/dirty_ratio");
    ratios.sort();
    assert_eq!(ratios, ["10", "40"]);
    assert_eq!(
        set("/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor"),
        ["performance", "performance"]
    );
    assert_eq!(
        set("/sys/devices/system/cpu/intel_pstate/no_turbo"),
        ["1", "1"]
    );
    assert_eq!(
        set("/sys/devices/system/cpu/cpu0/cpuidle/state2/disable"),
        ["1", "1"],
        "states deeper than 1 are disabled"
    );
    assert_eq!(
        set("/sys/devices/system/cpu/cpu0/cpuidle/state1/disable"),
        ["0", "0"]
    );
    for (rel, value) in &files {
        assert_eq!(&lab.attr(rel), value, "{rel} came back");
    }
    assert!(!lab.dir.path().join("state/journal.json").exists());

    // A machine without the controls: the cell cannot run, and says why, naming every
    // control it lacks (not the first alone); with no other cell, nothing runs.
    let bare = Lab::new();
    let e = exp(
        "name = \"gov\"\nrepetitions = 1\n[target]\ndevice = \"loop3\"\n[workload]\nrw = \"read\"\n\
         [factors]\ncpu.governor = [\"performance\"]\ncpu.boost = [\"off\"]\n",
    );
    let replay = ReplayFio::in_order(std::iter::empty());
    let err = bare.refused(&e, &replay);
    assert!(
        err.contains(
            "no CPU here has a cpufreq governor; this machine exposes no boost/turbo switch"
        ),
        "{err}"
    );
    assert!(!bare.dir.path().join("results.db").exists());
}

/// `[stabilise]` sets preflight's advice and the named controls once, before the first run,
/// records them with the experiment and puts them back after the last; a control this
/// machine lacks stops the experiment before anything is written.
#[test]
fn stabilise_sets_the_advice_once_and_puts_it_back() {
    let lab = Lab::new();
    let files = crate::common::system_controls(&lab.dir.path().join("root"));
    let e = exp(
        "name = \"quiet\"\nrepetitions = 2\n[target]\ndevice = \"loop3\"\n\
                 [workload]\nrw = \"read\"\n[stabilise]\npreflight = true\n\
                 sysctl.vm.dirty_ratio = 15\n",
    );
    // A dry run lists every write, with what it replaces, and changes nothing.
    let plan = runloop::dry_run(
        &e,
        &lab.settings(),
        &ReplayFio::in_order(std::iter::empty()),
    );
    let plan = serde_json::to_value(plan.unwrap()).unwrap();
    let planned = plan["stabilise"].as_array().unwrap();
    assert_eq!(planned.len(), 10, "{planned:?}");
    let ratio = planned.last().unwrap();
    assert_eq!(ratio["setting"], "sysctl.vm.dirty_ratio=15", "{ratio}");
    assert_eq!(ratio["path"], "/proc/sys/vm/dirty_ratio", "{ratio}");
    assert_eq!(ratio["value"], "15", "{ratio}");
    let was = files
        .iter()
        .find(|(rel, _)| rel.ends_with("dirty_ratio"))
        .unwrap();
    assert_eq!(
        ratio["now"].as_str().map(str::trim),
        Some(was.1.trim()),
        "{ratio}"
    );
    for (rel, value) in &files {
        assert_eq!(&lab.attr(rel), value, "{rel} unchanged by a dry run");
    }
    let replay = ReplayFio::in_order((0..2).map(|_| fio_fixture("randread_1job_json")));
    let out = lab.run(&e, &replay);
    assert_eq!(out.failed_runs, 0);
    // Two governors, no_turbo, 2 x 3 idle states and the sysctl, once for both runs.
    let changed: Vec<(&str, &str)> = out
        .knob_changes
        .iter()
        .map(|w| (w.path.as_str(), w.new.as_str()))
        .collect();
    assert_eq!(changed.len(), 10, "{changed:?}");
    assert!(changed.contains(&(
        "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
        "performance"
    )));
    assert!(changed.contains(&("/sys/devices/system/cpu/intel_pstate/no_turbo", "1")));
    assert!(changed.contains(&("/sys/devices/system/cpu/cpu1/cpuidle/state2/disable", "1")));
    assert!(changed.contains(&("/proc/sys/vm/dirty_ratio", "15")));
    for (rel, value) in &files {
        assert_eq!(&lab.attr(rel), value, "{rel} came back");
    }
    let db = Store::open_existing(lab.dir.path().join("results.db")).unwrap();
    let env = db.environment(out.experiment_id).unwrap();
    let st = env
        .iter()
        .find(|e| e.key == "stabilised")
        .expect("recorded");
    assert_eq!(
        st.value,
        "cpu.governor=performance, cpu.boost=off, cpu.max_cstate=1, sysctl.vm.dirty_ratio=15"
    );

    // The bare fixture has no cpufreq: naming the governor stops everything, writing nothing.
    let bare = Lab::new();
    let e = exp(
        "name = \"q\"\n[target]\ndevice = \"loop3\"\n[workload]\nrw = \"read\"\n\
                 [stabilise]\ncpu.governor = \"performance\"\n",
    );
    let replay = ReplayFio::in_order(std::iter::empty());
    let err = bare.refused(&e, &replay);
    assert!(
        err.contains("[stabilise] cpu.governor: no CPU here has a cpufreq governor"),
        "{err}"
    );
    assert!(replay.calls().is_empty());
}

/// `[prepare]`: every measured run drops the page cache first (here a plain file under the
/// fixture root), and a run whose preparation fails is stored failed with the reason.
#[test]
fn prepare_drops_caches_before_every_run_or_fails_the_run() {
    let lab = Lab::new();
    let drop = lab.dir.path().join("root/proc/sys/vm/drop_caches");
    std::fs::create_dir_all(drop.parent().unwrap()).unwrap();
    std::fs::write(&drop, "0").unwrap();
    let text = "name = \"cold\"\nrepetitions = 2\n[target]\ndevice = \"loop3\"\n\
                [workload]\nrw = \"read\"\n[prepare]\nsync = true\ndrop_caches = true\n\
                settle = \"10ms\"\n";
    let e = exp(text);
    assert!(e.prepare.drop_caches && e.prepare.settle == Some(Duration::from_millis(10)));
    let replay = ReplayFio::in_order((0..2).map(|_| fio_fixture("randread_1job_json")));
    let out = lab.run(&e, &replay);
    assert_eq!(out.failed_runs, 0);
    assert_eq!(std::fs::read_to_string(&drop).unwrap(), "3");

    // Where the cache cannot be dropped, the runs fail and say why.
    std::fs::remove_file(&drop).unwrap();
    std::fs::create_dir(&drop).unwrap();
    let replay = ReplayFio::in_order(std::iter::empty());
    let out = lab.run(&e, &replay);
    let db = Store::open_existing(lab.dir.path().join("results.db")).unwrap();
    let runs = db.runs(out.experiment_id).unwrap();
    assert_eq!(runs.len(), 2);
    for r in runs {
        let RunStatus::Failed(why) = &r.status else {
            panic!("{:?}", r.status)
        };
        assert!(why.contains("cannot drop caches"), "{why}");
    }
    // Nothing measured: the experiment failed, where the first one is done.
    let status = |id| db.experiment(id).unwrap().status;
    assert_eq!(status(out.experiment_id), "failed");
    assert_eq!(status(out.experiment_id - 1), "done");

    let err = experiment::parse(
        "p.toml",
        "name = \"x\"\n[workload]\nrw = \"read\"\n[prepare]\nsettle = \"soon\"\ntrim = true\n",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("p.toml:5:10"), "{err}");
    assert!(
        err.contains("p.toml:6:1: unknown key `trim` in [prepare]"),
        "{err}"
    );
}

/// A sysctl this kernel lacks, or a level that is not what its file holds (integers), stops
/// the dry run and the run before anything is touched, at its line: they failed every cell
/// after a scratch device was made, and the dry run had planned them without a word.
#[test]
fn sysctl_levels_this_kernel_cannot_take_stop_the_run_before_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.toml");
    std::fs::write(
        &file,
        "name = \"s\"\nrepetitions = 1\n[workload]\nrw = \"randread\"\nruntime = \"1s\"\n\
         [factors]\nsysctl.vm.swappiness = [60, \"abc\"]\n\
         sysctl.vm.dirty_nonexistent = [1]\nsysctl.vm.dirty_ratio = [10, 20]\n",
    )
    .unwrap();
    let db = dir.path().join("s.db");
    for dry in [true, false] {
        let mut args = vec!["run", file.to_str().unwrap(), "--db", db.to_str().unwrap()];
        if dry {
            args.push("--dry-run");
        }
        let out = crate::common::iolab()
            .args(&args)
            .env("IOLAB_STATE_DIR", dir.path().join("state"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{err}");
        assert!(
            err.contains("s.toml:7: `sysctl.vm.swappiness`: takes an integer")
                && err.contains("not \"abc\""),
            "{err}"
        );
        assert!(
            err.contains("s.toml:8: `sysctl.vm.dirty_nonexistent`: /proc/sys/vm/dirty_nonexistent does not exist"),
            "{err}"
        );
        assert!(!err.contains("dirty_ratio"), "{err}");
        assert!(!db.exists(), "a refused run stored something");
    }
}

/// Sysctls that could make the kernel run a program or take the machine's memory from its
/// programs, module parameters that tune nothing or set to fail every disk of a driver, and SMT together with
/// placement, are refused before anything runs, each at its line.
#[test]
fn unsafe_or_contradictory_system_factors_are_refused_at_their_line() {
    let err = experiment::parse(
        "t.toml",
        "name = \"x\"\n[workload]\nrw = \"read\"\n[factors]\n\
         sysctl.kernel.core_pattern = [\"core\"]\n\
         module.firmware_class.path = [\"x\"]\n\
         cpu.smt = [\"on\", \"off\"]\nplacement = [\"on\"]\n\
         sysctl.vm.panic_on_oom = [1]\n\
         module.nvme_core.io_timeout = [5]\n\
         [stabilise]\nsysctl.vm.nr_hugepages = 100000\n\
         module.workqueue.panic_on_stall = 1\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("t.toml:5:1") && err.contains("kernel.core_pattern is not one"),
        "{err}"
    );
    assert!(
        err.contains("t.toml:6:1") && err.contains("firmware_class"),
        "{err}"
    );
    assert!(
        err.contains("t.toml:7:1") && err.contains("takes CPUs offline"),
        "{err}"
    );
    assert!(
        err.contains("t.toml:9:1") && err.contains("vm.panic_on_oom makes the kernel panic"),
        "{err}"
    );
    assert!(
        err.contains("t.toml:10:")
            && err.contains("not a value of `module.nvme_core.io_timeout`")
            && err.contains("a number of at least 30 seconds"),
        "{err}"
    );
    assert!(
        err.contains("t.toml:12:") && err.contains("vm.nr_hugepages sets memory aside"),
        "{err}"
    );
    // A module whose tuning parameters are allowed is not allowed its others.
    assert!(
        err.contains("t.toml:13:")
            && err.contains("workqueue.panic_on_stall is not a parameter iolab changes"),
        "{err}"
    );
}

#[test]
fn replay_runs_the_planned_order_stores_every_run_and_restores_every_knob() {
    let lab = Lab::new();
    let before: Vec<String> = ["scheduler", "rq_affinity", "nr_requests"]
        .iter()
        .map(|a| lab.loop3(a))
        .collect();
    assert_eq!(before, ["none", "1", "64"]);
    let e = exp(MATRIX);
    let replay = ReplayFio::in_order((0..8).map(|_| fio_fixture("randread_1job_json")));
    let out = lab.run(&e, &replay);

    // fio ran the cells in exactly the planner's shuffled, interleaved order.
    let cells = experiment::cells(&e);
    let planned: Vec<&str> = Planner::fixed_plan(&e)
        .iter()
        .map(|r| cells[r.cell].key.as_str())
        .collect();
    let ran: Vec<String> = replay.calls().iter().map(|j| j.cell_key.clone()).collect();
    assert_eq!(ran, planned);
    assert_eq!(replay.calls()[0].filename, "/dev/loop3");

    // Every cell's knobs were journaled, the scheduler first (the kernel resets nr_requests
    // when it changes, so the journal also records the attributes it resets, before it;
    // read_ahead_kb, which some kernels reset on any queue write, before each), and all came
    // back.
    assert_eq!(out.knob_changes.len(), 8 * 8);
    for (run, writes) in out.knob_changes.chunks(8).enumerate() {
        let attrs: Vec<&str> = writes
            .iter()
            .map(|w| w.path.rsplit('/').next().unwrap())
            .collect();
        assert_eq!(
            attrs,
            [
                "nr_requests",
                "wbt_lat_usec",
                "read_ahead_kb",
                "scheduler",
                "read_ahead_kb",
                "nr_requests",
                "read_ahead_kb",
                "rq_affinity"
            ],
            "run {run}"
        );
        let key = &planned[run];
        assert!(
            key.contains(&format!("scheduler={}", writes[3].new)),
            "{key}"
        );
        assert_eq!(writes[5].new, "32");
        assert!(
            key.contains(&format!("rq_affinity={}", writes[7].new)),
            "{key}"
        );
    }
    assert_eq!(out.knob_changes[3].old, "none");
    assert_eq!(out.restored.restored.len(), 64);
    let after: Vec<String> = ["scheduler", "rq_affinity", "nr_requests"]
        .iter()
        .map(|a| lab.loop3(a))
        .collect();
    assert_eq!(after, before);
    assert!(!lab.dir.path().join("state/journal.json").exists());

    // Eight runs stored, in run order, with fio's and the sampler's metrics and the tags.
    let db = Store::open_existing(lab.dir.path().join("results.db")).unwrap();
    let stored = db.experiment(out.experiment_id).unwrap();
    assert_eq!((stored.status.as_str(), stored.runs_ok), ("done", 8));
    let runs = db.runs(out.experiment_id).unwrap();
    let keys: Vec<&str> = runs.iter().map(|r| r.cell_key.as_str()).collect();
    assert_eq!(keys, planned);
    let reps: Vec<u32> = runs.iter().map(|r| r.repetition).collect();
    assert_eq!(reps, [1, 1, 1, 1, 2, 2, 2, 2]);
    assert!(runs.iter().all(|r| r.status == RunStatus::Ok && !r.warmup));
    let (text, order) = db.experiment_texts(out.experiment_id).unwrap();
    assert_eq!(text, MATRIX);
    assert_eq!(order["runs"].as_array().unwrap().len(), 8);
    assert_eq!(out.cells.iter().map(|c| c.runs.len()).sum::<usize>(), 8);
    let m = &out.cells[0].runs[0];
    let iops = m.iter().find(|(k, _)| k == "read_iops").unwrap().1;
    assert!((iops - 137647.176412).abs() < 1e-6, "{iops}");
    // The fixture's counters stand still, so rates are 0 and CPU shares undefined (absent).
    assert!(!m.iter().any(|(k, _)| k == "usr_pct"));
    for name in ["read_clat_p99_us", "irq_per_s", "dev_util_pct"] {
        assert!(m.iter().any(|(k, _)| k == name), "{name} missing: {m:?}");
    }
}

/// The reasons of the runs `out` stored as not applicable, in run order.
fn not_applicable(lab: &Lab, out: &runloop::Outcome) -> Vec<String> {
    let db = Store::open_existing(lab.dir.path().join("results.db")).unwrap();
    let runs = db.runs(out.experiment_id).unwrap();
    runs.into_iter()
        .filter_map(|r| match r.status {
            RunStatus::NotApplicable(why) => Some(why),
            _ => None,
        })
        .collect()
}

/// A polled cell on a queue that says `io_poll` 0 is not applicable before it runs: fio is
/// never asked (pvsync2 would have run it on interrupts without a word).
#[test]
fn polled_cells_on_a_queue_that_cannot_poll_never_reach_fio() {
    let lab = Lab::new();
    let e = exp(
        "name = \"poll\"\nseed = 3\nrepetitions = 2\n[target]\ndevice = \"loop3\"\n\
         [workload]\nrw = \"randread\"\nioengine = \"pvsync2\"\n\
         [factors]\nhipri = [false, true]\n",
    );
    let ok = fio_fixture("randread_1job_json");
    let replay = ReplayFio::by_cell([("hipri=false".to_string(), vec![ok])]);
    let out = lab.run(&e, &replay);
    let asked: Vec<String> = replay.calls().iter().map(|j| j.cell_key.clone()).collect();
    assert_eq!(asked, ["hipri=false", "hipri=false"]);
    let na = not_applicable(&lab, &out);
    assert_eq!(
        na,
        ["polled I/O (hipri) needs a queue that polls, and loop3's has io_poll=0 (no poll queues)"]
    );
}

/// A plan none of whose cells can run here is refused with every reason, before anything is
/// set or stored (it made a scratch device, ran nothing, stored an experiment of reasons and
/// exited 0).
#[test]
fn an_experiment_no_cell_of_which_can_run_here_stops_before_it_starts() {
    let lab = Lab::new();
    let e = exp(
        "name = \"nowhere\"\n[target]\ndevice = \"loop3\"\nanchor_cpu = 0\n\
         [workload]\nrw = \"randread\"\n[factors]\nplacement = [\"far\", \"node:3\"]\n",
    );
    let replay = ReplayFio::by_cell([]);
    let err = lab.refused(&e, &replay);
    assert!(
        err.starts_with(
            "no cell can run here: all 2 are not applicable; nothing was run or stored"
        ),
        "{err}"
    );
    assert!(err.contains("placement=far: placement far: "), "{err}");
    assert!(
        err.contains("placement=node:3: placement node:3: node 3 has no online CPU"),
        "{err}"
    );
    assert!(replay.calls().is_empty());
    assert!(!lab.dir.path().join("results.db").exists(), "stored");
    assert!(!lab.dir.path().join("state/journal.json").exists());
}

#[test]
fn cells_that_cannot_run_here_are_recorded_once_with_their_reason() {
    let lab = Lab::new();
    // A queue that says it polls (a loop device's says 0, which makes the polled cells not
    // applicable before they run): here it is fio's error 95 that finds them out.
    let io_poll = lab.dir.path().join("root/sys/block/loop3/queue/io_poll");
    std::fs::write(io_poll, "1\n").unwrap();
    let e = exp("name = \"na\"\nseed = 3\nrepetitions = 2\nwarmup = true\n\
         [target]\ndevice = \"loop3\"\nanchor_cpu = 0\n\
         [workload]\nrw = \"randread\"\nioengine = \"io_uring\"\n\
         [factors]\nplacement = [\"on\", \"near\", \"far\"]\nhipri = [false, true]\n");
    let ok = fio_fixture("randread_1job_json");
    let poll = Canned::exited(
        &std::fs::read_to_string(manifest().join("tests/fixtures/fio/hipri_loop_jsonplus.out"))
            .unwrap(),
        "",
        1,
    );
    let replay = ReplayFio::by_cell([
        ("placement=on,hipri=false".to_string(), vec![ok.clone()]),
        ("placement=near,hipri=false".to_string(), vec![ok]),
        ("placement=on,hipri=true".to_string(), vec![poll.clone()]),
        ("placement=near,hipri=true".to_string(), vec![poll]),
    ]);
    let mut steps = Steps::default();
    let out = runloop::run(
        &e,
        &lab.settings(),
        &replay,
        &CancelToken::new(),
        &mut steps,
    )
    .unwrap();
    // on = the anchor CPU, near = the other CPU; fio is pinned there.
    let pins: Vec<(String, Option<String>)> = replay
        .calls()
        .iter()
        .map(|j: &JobSpec| {
            (
                j.cell_key.clone(),
                j.option("cpus_allowed").map(str::to_string),
            )
        })
        .collect();
    for (key, cpus) in &pins {
        let want = if key.contains("placement=on") {
            "0"
        } else {
            "1"
        };
        assert_eq!(cpus.as_deref(), Some(want), "{key}");
    }
    // The two polling cells ran once (fio said errno 95) and never again; the far cells never
    // ran. The two cells that work ran a warm-up plus two repetitions.
    let count = |k: &str| pins.iter().filter(|(key, _)| key == k).count();
    assert_eq!(count("placement=on,hipri=true"), 1);
    assert_eq!(count("placement=near,hipri=true"), 1);
    assert_eq!(count("placement=on,hipri=false"), 3);
    assert_eq!(pins.len(), 8);
    // Progress shows runs only, numbered without gaps: none for the far cells (the plan
    // knows), one for each polling cell; the runs left shrink when those turn out not to run.
    let numbers: Vec<usize> = steps.0.iter().map(|s| s.number).collect();
    assert_eq!(numbers, (1..=8).collect::<Vec<_>>());
    assert_eq!(
        steps.0[0].planned,
        4 * 3,
        "4 cells that may run, a warm-up and 2 each"
    );
    assert_eq!(steps.0[7].planned, 8);

    let db = Store::open_existing(lab.dir.path().join("results.db")).unwrap();
    let runs = db.runs(out.experiment_id).unwrap();
    let na: Vec<(&str, &str)> = runs
        .iter()
        .filter_map(|r| match &r.status {
            RunStatus::NotApplicable(why) => Some((r.cell_key.as_str(), why.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(na.len(), 4, "{na:?}");
    for (key, why) in &na {
        if key.contains("far") {
            assert!(
                why.starts_with("placement far: nothing here is farther"),
                "{why}"
            );
        } else {
            assert!(why.contains("95") || why.contains("not supported"), "{why}");
        }
    }
    assert!(runs
        .iter()
        .filter(|r| matches!(r.status, RunStatus::NotApplicable(_)))
        .all(|r| !r.warmup));
    let warmups = runs.iter().filter(|r| r.warmup).count();
    assert_eq!(warmups, 2);
    assert_eq!(db.experiment(out.experiment_id).unwrap().runs_ok, 4);
    assert_eq!(
        out.cells
            .iter()
            .filter(|c| c.not_applicable.is_some())
            .count(),
        4
    );
    // Finished: each not-applicable cell's one run is all the plan was to give it, so `show`
    // says nothing was left out (it said "stopped early: 8 of 12 planned runs stored").
    let show = iolab()
        .args(["show", &out.experiment_id.to_string(), "--json", "--db"])
        .arg(lab.dir.path().join("results.db"))
        .output()
        .unwrap();
    assert!(
        show.status.success(),
        "{}",
        String::from_utf8_lossy(&show.stderr)
    );
    let shown: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    assert!(shown["not_run"].is_null(), "{}", shown["not_run"]);
}

#[test]
fn irq_affinity_levels_move_the_devices_movable_irq_and_put_it_back() {
    // Two NUMA nodes; sda's IRQ 35 is movable and delivered to CPU 2 (node 0).
    let lab = Lab::of("two-node-nvme");
    assert_eq!(lab.attr("proc/irq/35/smp_affinity_list"), "0-14");
    let e = exp(
        "name = \"irq\"\nseed = 2\nrepetitions = 1\n[target]\ndevice = \"sda\"\n\
         [workload]\nrw = \"randread\"\n\
         [factors]\nirq_cpu = [\"on-node\", \"far\"]\nplacement = [\"on\", \"far\"]\n",
    );
    let replay = ReplayFio::in_order((0..4).map(|_| fio_fixture("randread_1job_json")));
    let out = lab.run(&e, &replay);
    // The first move also journals the old mask apart (new = old), so that restore can put
    // the interrupt back on CPU 2 first and then widen it to its mask.
    let (restore_only, writes) = out.knob_changes.split_first().unwrap();
    assert_eq!(
        (restore_only.old.as_str(), restore_only.new.as_str()),
        ("0-14", "0-14")
    );
    assert_eq!(writes[0].old, "2", "the CPU it was delivered to");
    let writes: Vec<(String, String)> = writes
        .iter()
        .map(|c| {
            (
                c.path.rsplit("/proc/").next().unwrap().to_string(),
                c.new.clone(),
            )
        })
        .collect();
    let pins: Vec<(String, String)> = replay
        .calls()
        .iter()
        .map(|j| {
            (
                j.cell_key.clone(),
                j.option("cpus_allowed").unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(writes.len(), 4);
    for ((key, cpus), (path, irq_cpus)) in pins.iter().zip(&writes) {
        assert_eq!(path, "irq/35/smp_affinity_list");
        // One CPU: the one taking it on its own node, the lowest-numbered on the far one
        // (x86 delivers to one CPU of a mask; on and far are judged from that CPU).
        let want_irq = if key.starts_with("irq_cpu=on-node") {
            "2"
        } else {
            "4"
        };
        assert_eq!(irq_cpus, want_irq, "{key}");
        // fio's placement follows the interrupt to where this cell moves it.
        let other = if want_irq == "2" {
            "4-7,12-14"
        } else {
            "0-3,8-11"
        };
        let want_fio = if key.ends_with("placement=on") {
            want_irq
        } else {
            other
        };
        assert_eq!(cpus, want_fio, "{key}");
    }
    assert_eq!(lab.attr("proc/irq/35/smp_affinity_list"), "0-14");
    // `show` says where each cell's fio ran: here far follows the interrupt, so each cell.
    let db = lab.dir.path().join("results.db");
    let text = crate::common::stdout_of(
        iolab()
            .args(["show", &out.experiment_id.to_string(), "--db"])
            .arg(&db),
    );
    assert!(
        text.contains(
            "where the workload ran:\n  irq_cpu=on-node,placement=on: CPU 2 takes the \
             device's interrupt (where this\n    cell moves the interrupt)\n  \
             irq_cpu=on-node,placement=far: CPUs 4-7,12-14 on the most distant node\n    \
             (distance 21) from interrupt CPU 2 (where this cell moves the interrupt)"
        ),
        "{text}"
    );
    let json = crate::common::stdout_of(
        iolab()
            .args(["show", &out.experiment_id.to_string(), "--json", "--db"])
            .arg(&db),
    );
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["placements"].as_array().unwrap().len(), 4, "{json:#}");
    assert_eq!(json["placements"][3]["cells"], "irq_cpu=far,placement=far");
    // The report: the same table, and the stored plan no longer shown as a preflight finding.
    let html = lab.dir.path().join("r.html");
    crate::common::stdout_of(
        iolab()
            .args(["report", &out.experiment_id.to_string(), "-o"])
            .arg(&html)
            .arg("--db")
            .arg(&db),
    );
    let html = std::fs::read_to_string(html).unwrap();
    assert!(
        html.contains("Where the workload ran")
            && html.contains("<td>irq_cpu=far,placement=far</td>"),
        "no placements in the report"
    );
    assert!(
        !html.contains("<td>plan</td>"),
        "the plan is a finding again"
    );
    // The target is the run's, not a finding about the machine: it stands with the experiment.
    assert!(
        html.contains("<tr><th>target</th><td>/dev/sda</td></tr>")
            && !html.contains("<td>target</td>"),
        "the target is not among the experiment's rows"
    );
}

#[test]
fn a_run_is_refused_while_another_iolab_holds_a_device_or_irq_it_would_change() {
    let lab = Lab::of("two-node-nvme");
    let settings = lab.settings();
    let e = exp(
        "name = \"irq\"\nseed = 2\nrepetitions = 1\n[target]\ndevice = \"sda\"\n\
         [workload]\nrw = \"randread\"\n[factors]\nirq_cpu = [\"on-node\", \"far\"]\n",
    );
    use iolab::sys::lock::{acquire, Resource};
    for held in [Resource::Irq(35), Resource::Device("sda".into())] {
        // Another iolab (this process, through another open file) holds it.
        let other = acquire(&settings.root, held.clone()).unwrap();
        let replay = ReplayFio::in_order(Vec::new());
        let err = runloop::run(&e, &settings, &replay, &CancelToken::new(), &mut Quiet)
            .unwrap_err()
            .to_string();
        let what = match &held {
            Resource::Irq(_) => "IRQ 35",
            _ => "/dev/sda",
        };
        assert!(
            err.contains(&format!(
                "{what} is being changed by another iolab (pid {}",
                std::process::id()
            )),
            "{err}"
        );
        assert!(replay.calls().is_empty());
        assert_eq!(lab.attr("proc/irq/35/smp_affinity_list"), "0-14");
        // Refused before the experiment was stored: nothing is left `running`.
        if settings.db_path.exists() {
            let db = Store::open_existing(&settings.db_path).unwrap();
            assert!(db.experiments().unwrap().is_empty());
        }
        assert!(!settings.state_dir.join("journal.json").exists());
        drop(other);
    }
    // Free again: the run goes ahead.
    let replay = ReplayFio::in_order((0..2).map(|_| fio_fixture("randread_1job_json")));
    runloop::run(&e, &settings, &replay, &CancelToken::new(), &mut Quiet).unwrap();
    assert_eq!(replay.calls().len(), 2);
}

/// A NIC experiment holds its interface for the whole run, as a disk experiment holds its
/// disk: a second one on the same NIC (or `irq daemon`, which leaves the interrupts of a
/// held NIC alone) would change what the first measures.
#[test]
fn a_nic_experiment_is_refused_while_another_iolab_holds_the_nic() {
    let lab = Lab::of("two-node-nvme");
    crate::common::add_nic(
        &lab.dir.path().join("root"),
        "eth0",
        "sys/devices/pci0000:80/0000:80:02.0/0000:af:00.0",
    );
    let settings = lab.settings();
    let e = exp(
        "name = \"nic\"\nrepetitions = 1\nengine = \"iperf3\"\n[target]\nnic = \"eth0\"\n\
         [iperf3]\nserver = \"10.0.0.2\"\ntime = 1\n[factors]\nplacement = [\"on\"]\n",
    );
    use iolab::sys::lock::{acquire, Resource};
    let other = acquire(&settings.root, Resource::Nic("eth0".into())).unwrap();
    let replay = ReplayFio::in_order(Vec::new());
    let err = runloop::run(&e, &settings, &replay, &CancelToken::new(), &mut Quiet)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&format!(
            "network interface eth0 is being changed by another iolab (pid {}",
            std::process::id()
        )),
        "{err}"
    );
    assert!(replay.calls().is_empty());
    assert!(!settings.state_dir.join("journal.json").exists());
    drop(other);
}

/// Cancels the token (as a signal would) while the n-th run is in progress.
struct CancelDuring<'a> {
    inner: ReplayFio,
    token: &'a CancelToken,
    at: usize,
}

impl FioRunner for CancelDuring<'_> {
    fn run(&self, job: &JobSpec) -> anyhow::Result<FioOutcome> {
        if self.inner.calls().len() + 1 == self.at {
            self.token.cancel();
        }
        self.inner.run(job)
    }
}

/// Re-attaches the target (a new diskseq under its name) while the n-th run is in progress,
/// as someone's `losetup` did between two cells.
struct ReattachDuring {
    inner: ReplayFio,
    diskseq: std::path::PathBuf,
    at: usize,
}

impl FioRunner for ReattachDuring {
    fn run(&self, job: &JobSpec) -> anyhow::Result<FioOutcome> {
        if self.inner.calls().len() + 1 == self.at {
            std::fs::write(&self.diskseq, "101\n").unwrap();
        }
        self.inner.run(job)
    }
}

/// The data check holds for the disk it checked: once the target's name is another disk's,
/// the experiment stops before the next run's knobs (the cells after a re-attach wrote over
/// a file system), and its journal ends without writing the old disk's values onto the new
/// one (here the same fixture files stand for it: they keep what the second run set).
#[test]
fn a_target_replaced_under_its_name_stops_the_experiment() {
    let lab = Lab::new();
    let diskseq = lab.dir.path().join("root/sys/block/loop3/diskseq");
    std::fs::write(&diskseq, "100\n").unwrap();
    let runner = ReattachDuring {
        inner: ReplayFio::in_order((0..8).map(|_| fio_fixture("randread_1job_json"))),
        diskseq,
        at: 2,
    };
    let err = runloop::run(
        &exp(MATRIX),
        &lab.settings(),
        &runner,
        &CancelToken::new(),
        &mut Quiet,
    )
    .unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains(
            "/dev/loop3 is no longer the disk checked before the first run (diskseq 100 \
                      then, diskseq 101 now)"
        ),
        "{msg}"
    );
    assert_eq!(runner.inner.calls().len(), 2);
    let second = &runner.inner.calls()[1].cell_key;
    let scheduler = lab.loop3("scheduler");
    assert!(
        second.contains(&format!("scheduler={scheduler}")),
        "{second}"
    );
    assert!(!lab.dir.path().join("state/journal.json").exists());
}

#[test]
fn an_interrupted_run_keeps_finished_runs_and_restores_knobs() {
    let lab = Lab::new();
    let e = exp(MATRIX);
    let token = CancelToken::new();
    let runner = CancelDuring {
        inner: ReplayFio::in_order((0..8).map(|_| fio_fixture("randread_1job_json"))),
        token: &token,
        at: 3,
    };
    let out = runloop::run(&e, &lab.settings(), &runner, &token, &mut Quiet).unwrap();
    assert!(out.interrupted);
    let db = Store::open_existing(lab.dir.path().join("results.db")).unwrap();
    let exp_row = db.experiment(out.experiment_id).unwrap();
    assert_eq!(
        (exp_row.status.as_str(), exp_row.runs_ok),
        ("interrupted", 2)
    );
    assert_eq!(lab.loop3("scheduler"), "none");
    assert_eq!(lab.loop3("nr_requests"), "64");
    assert!(!lab.dir.path().join("state/journal.json").exists());
}

#[test]
fn adaptive_repetitions_stop_precise_cells_and_report_capped_ones() {
    let lab = Lab::new();
    let e = exp(
        "name = \"adaptive\"\nseed = 5\nrepetitions = { target_ci = 0.05, min = 3, max = 5 }\n\
         [target]\ndevice = \"loop3\"\n[workload]\nrw = \"randread\"\n\
         [factors]\nrq_affinity = [1, 2]\n",
    );
    let base =
        std::fs::read_to_string(manifest().join("tests/fixtures/fio/randread_1job_json.out"))
            .unwrap();
    let with_iops = |iops: f64| {
        Canned::exited(
            &base.replacen("\"iops\" : 137647.176412", &format!("\"iops\" : {iops}"), 1),
            "",
            0,
        )
    };
    // rq_affinity=1 is steady (stops after 3), rq_affinity=2 is all over the place (capped).
    let replay = ReplayFio::by_cell([
        (
            "rq_affinity=1".to_string(),
            vec![with_iops(1000.0), with_iops(1001.0), with_iops(999.0)],
        ),
        (
            "rq_affinity=2".to_string(),
            [100.0, 1000.0, 300.0, 2000.0, 50.0]
                .into_iter()
                .map(with_iops)
                .collect(),
        ),
    ]);
    let out = lab.run(&e, &replay);
    let n: Vec<usize> = out.cells.iter().map(|c| c.runs.len()).collect();
    assert_eq!(n, [3, 5]);
    assert_eq!(out.capped_cells, ["rq_affinity=2"]);
    assert_eq!(out.primary_metric, "read_iops+write_iops");
}

#[test]
fn an_impossible_level_stops_everything_before_a_run() {
    let lab = Lab::new();
    let e =
        exp("name = \"bad\"\n[target]\ndevice = \"zram0\"\n[factors]\nscheduler = [\"none\"]\n");
    let replay = ReplayFio::in_order([]);
    let err = lab.refused(&e, &replay);
    assert_eq!(
        err,
        "t.toml:5: `scheduler`: /dev/zram0 has no queue attribute `scheduler`"
    );
    assert!(replay.calls().is_empty());
    assert!(!lab.dir.path().join("results.db").exists());
}

// ---------------------------------------------------------------------------------------
// Through the CLI.

fn iolab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_iolab"))
}

/// `iolab run --dry-run` of `file` with its database and state directory in `dir` (neither
/// may appear): the plan it prints, after it succeeded.
fn dry_run_text(dir: &Path, file: &Path) -> String {
    crate::common::stdout_of(
        iolab()
            .args(["run", "--dry-run", "--db"])
            .arg(dir.join("r.db"))
            .arg(file)
            .env("IOLAB_STATE_DIR", dir.join("state")),
    )
}

#[test]
fn malformed_experiment_files_give_precise_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(
        &path,
        "name = \"bad\"\nrepetitons = 3\n[target]\nanchor_cpu = -2\n[factors]\nrq_affinity = [0, 5]\n",
    )
    .unwrap();
    let out = iolab()
        .args(["run", "--dry-run"])
        .arg(&path)
        .env("IOLAB_STATE_DIR", dir.path().join("state"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let p = path.display();
    for want in [
        format!("{p}:2:1: unknown key `repetitons`"),
        format!("{p}:4:14: `anchor_cpu` is out of range"),
        format!("{p}:6:19:"),
    ] {
        assert!(err.contains(&want), "missing {want:?} in:\n{err}");
    }
    assert!(out.stdout.is_empty());

    let out = iolab()
        .args(["run", "--dry-run", "nowhere.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    // About the whole file: no line and column.
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("iolab: error: nowhere.toml: cannot read the experiment file"));
    // Not a file at all: read, /dev/zero took all the machine's memory.
    let out = iolab()
        .args(["run", "--dry-run", "/dev/zero"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("/dev/zero: cannot read the experiment file: not a regular file"));
}

#[test]
fn dry_run_prints_the_resolved_plan_and_touches_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let text = dry_run_text(
        dir.path(),
        &manifest().join("examples/rq_affinity_placement.toml"),
    );
    assert!(text.contains("cells (9):"), "{text}");
    // Here (one node, one package) the far cells cannot run.
    assert!(
        text.contains("order (27 runs in 3 round(s), 18 of them in cells that can run here):"),
        "{text}"
    );
    assert!(text.contains("estimated time: 1m30s"), "{text}");
    // anchor_cpu = 0 stands in for the loop device's missing interrupt.
    assert!(
        text.contains("fio on CPU 0: CPU 0 takes the device's interrupt (anchor_cpu stands in"),
        "{text}"
    );
    assert!(!dir.path().join("r.db").exists());
    assert!(!dir.path().join("state").exists());

    // What is done before the runs is in the plan, and settling in its time: 3 runs of 2 s.
    let path = dir.path().join("prepared.toml");
    std::fs::write(
        &path,
        "name = \"p\"\n[target]\ndevice = \"default\"\n[workload]\nrw = \"read\"\n\
         runtime = \"2s\"\ntime_based = 1\n[prepare]\ndrop_caches = true\nsettle = \"1s\"\n",
    )
    .unwrap();
    let text = dry_run_text(dir.path(), &path);
    assert!(
        text.contains(
            "before every measured run ([prepare]): sync, drop the page cache \
             (/proc/sys/vm/drop_caches = 3), settle 1s"
        ),
        "{text}"
    );
    assert!(
        text.contains("estimated time: 9s of measuring, and start-up around each run"),
        "{text}"
    );
}

/// fio takes any iodepth and keeps one I/O in flight with a synchronous engine: the plan
/// warns about the cells where the depth cannot be reached, and only about those.
#[test]
fn dry_run_warns_of_a_queue_depth_the_engine_cannot_reach() {
    let dir = tempfile::tempdir().unwrap();
    let plan = |engine: &str| {
        let path = dir.path().join("depth.toml");
        std::fs::write(
            &path,
            format!(
                "name = \"depth\"\n[target]\ndevice = \"default\"\n[workload]\n\
                 rw = \"randread\"\nbs = \"4k\"\ndirect = 1\n{engine}\n\
                 [factors]\niodepth = [1, 16]\n"
            ),
        )
        .unwrap();
        dry_run_text(dir.path(), &path)
    };
    let text = plan("");
    assert!(
        text.contains(
            "warning: iodepth above 1 has no effect in cells iodepth=16: ioengine psync (fio's \
             default) is synchronous"
        ),
        "{text}"
    );
    let text = plan("ioengine = \"io_uring\"");
    assert!(!text.contains("warning:"), "{text}");
}

/// `split_cpus` promises each job clone a CPU of its own: the plan says where there are more
/// clones than CPUs (fio hands them out in turn), and only there.
#[test]
fn dry_run_warns_where_split_cpus_clones_must_share_cpus() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("split.toml");
    std::fs::write(
        &path,
        "name = \"split\"\nsplit_cpus = true\n[target]\nanchor_cpu = 1\n[workload]\n\
         rw = \"randread\"\nruntime = \"1s\"\n[factors]\nnumjobs = [1, 2]\nplacement = [\"on\"]\n",
    )
    .unwrap();
    let text = dry_run_text(dir.path(), &path);
    assert!(
        text.contains(
            "warning: split_cpus: more fio job clones than CPUs in the placement, so clones \
             share CPUs (fio hands the CPUs out in turn), in cells numjobs=2,placement=on (2 \
             clones on CPU 1)"
        ),
        "{text}"
    );
    assert!(!text.contains("numjobs=1,placement=on (1"), "{text}");
}

/// Across fio servers the plan says what its estimate leaves out: the second fio's server
/// waits before it sees each run's start.
#[test]
fn dry_run_across_hosts_says_each_run_starts_a_second_late() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hosts.toml");
    std::fs::write(
        &file,
        "name = \"h\"\n[target]\ndevice = \"sdb\"\nhosts = [\"10.0.0.1\", \"10.0.0.2\"]\n\
         [workload]\nrw = \"randread\"\nruntime = \"2s\"\ntime_based = true\n",
    )
    .unwrap();
    let text = dry_run_text(dir.path(), &file);
    assert!(text.contains("estimated time: 6s"), "{text}");
    assert!(!text.contains("would stop"), "{text}");
    // Hosts an earlier run left listed stop the run: the dry run says so, as it does for
    // this machine's own journal.
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(
        state.join("hosts.json"),
        r#"[{"ssh": "lab2", "remote_iolab": "iolab"}]"#,
    )
    .unwrap();
    let text = dry_run_text(dir.path(), &file);
    assert!(
        text.contains(
            "warning: the run would stop before it starts: an earlier run may have left knobs \
             set on lab2"
        ),
        "{text}"
    );
    assert!(
        text.contains("note: each run takes about a second more than its fio runtime"),
        "{text}"
    );
}

/// A name and its address reach one fio server: each host's job would run on it. Refused at
/// the dry run already, before any fio client starts.
#[test]
fn hosts_that_reach_one_fio_server_are_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hosts.toml");
    std::fs::write(
        &file,
        "name = \"h\"\n[target]\ndevice = \"sdb\"\nhosts = [\"localhost,9911\", \"127.0.0.1,9911\"]\n\
         [workload]\nrw = \"randread\"\nruntime = \"2s\"\ntime_based = true\n",
    )
    .unwrap();
    let out = iolab()
        .args(["run", "--dry-run", "--db"])
        .arg(dir.path().join("r.db"))
        .arg(&file)
        .env("IOLAB_STATE_DIR", dir.path().join("state"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && stderr.contains("`localhost,9911` and `127.0.0.1,9911` both reach 127.0.0.1:9911"),
        "{stderr}"
    );
}

/// `local_devices` beside fio servers: the plan samples those devices of this machine (any
/// it has; sampling writes nothing) and says so; one it lacks is refused before anything runs.
#[test]
fn dry_run_across_hosts_names_the_local_devices_it_samples() {
    let dir = tempfile::tempdir().unwrap();
    let here: Vec<String> = std::fs::read_dir("/sys/block")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    let Some(local) = here.iter().min() else {
        crate::common::skip("this machine has no block device");
        return;
    };
    let file = |local: &str| {
        let file = dir.path().join(format!("{local}.toml"));
        std::fs::write(
            &file,
            format!(
                "name = \"h\"\n[target]\ndevice = \"sdb\"\nhosts = [\"10.0.0.1\"]\n\
                 local_devices = [\"/dev/{local}\"]\n[workload]\nrw = \"randread\"\n\
                 runtime = \"2s\"\ntime_based = true\n"
            ),
        )
        .unwrap();
        file
    };
    let text = dry_run_text(dir.path(), &file(local));
    assert!(
        text.contains(&format!(
            "note: this machine's {local} is sampled while the hosts run (metrics \
             local:DEVICE:dev_*)"
        )),
        "{text}"
    );
    let out = iolab()
        .args(["run", "--dry-run", "--json", "--db"])
        .arg(dir.path().join("r.db"))
        .arg(file(local))
        .env("IOLAB_STATE_DIR", dir.path().join("state"))
        .output()
        .unwrap();
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["local"][0]["name"], local.as_str(), "{plan}");
    let out = iolab()
        .args(["run", "--dry-run", "--db"])
        .arg(dir.path().join("r.db"))
        .arg(file("nosuchdisk9"))
        .env("IOLAB_STATE_DIR", dir.path().join("state"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("local_devices: nosuchdisk9: no such block device on this machine"),
        "{err}"
    );
}

/// Across hosts the devices checked for writing are those each host's job drives: a
/// controlled host with its own device is checked on that device, not on [target] device or
/// --device; fio's client mode alone refuses per-host devices and half-controlled hosts.
/// Each refusal comes before any host is reached (nothing here answers on those addresses).
#[test]
fn across_hosts_writes_are_checked_on_the_device_each_host_drives() {
    let dir = tempfile::tempdir().unwrap();
    let host = |fio: &str, more: &str| format!("[[target.host]]\nfio = \"{fio}\"\n{more}");
    let work = "[workload]\nrw = \"randwrite\"\nbs = \"4k\"\nruntime = \"2s\"\n";
    let link = dir.path().join("disk");
    std::os::unix::fs::symlink("/dev/null", &link).unwrap();
    let link_arg = link.display().to_string();
    for (name, target, hosts, args, want) in [
        (
            "own",
            "device = \"sdb\"\n",
            host("10.0.0.1", "ssh = \"a\"\ndevice = \"sda\"\n")
                + &host("10.0.0.2", "ssh = \"b\"\n"),
            &["--destructive-device", "sdb"][..],
            "writes (rw=randwrite writes to the target) to /dev/sda on 10.0.0.1:",
        ),
        (
            "override",
            "device = \"sda\"\n",
            host("10.0.0.1", "ssh = \"a\"\n") + &host("10.0.0.2", "ssh = \"b\"\n"),
            &["--device", "sdb", "--destructive-device", "sdb"][..],
            "--device sdb: controlled hosts drive the device their [[target.host]] names",
        ),
        (
            "client",
            "",
            host("10.0.0.1", "device = \"sda\"\n") + &host("10.0.0.2", "device = \"sdb\"\n"),
            &["--destructive-device", "sda", "--destructive-device", "sdb"][..],
            "a host's own `device` needs `ssh`",
        ),
        (
            "half",
            "device = \"sdb\"\n",
            host("10.0.0.1", "ssh = \"a\"\n") + &host("10.0.0.2", ""),
            &[][..],
            "iolab controls all hosts or none",
        ),
        // A link names a device only on the machine that resolves it.
        (
            "link",
            "",
            host(
                "10.0.0.1",
                "ssh = \"a\"\ndevice = \"/dev/disk/by-id/wwn-0x5000\"\n",
            ),
            &["--destructive-device", "/dev/disk/by-id/wwn-0x5000"][..],
            "`/dev/disk/by-id/wwn-0x5000`: name a device on another machine as its kernel does",
        ),
        (
            "by-id",
            "device = \"sdb\"\n",
            host("10.0.0.1", "ssh = \"a\"\n"),
            &["--destructive-device", "/dev/disk/by-id/wwn-0x5000"][..],
            "--destructive-device `/dev/disk/by-id/wwn-0x5000`: name a device on another \
             machine as its kernel does",
        ),
        (
            "client-link",
            "device = \"sdb\"\n",
            host("10.0.0.1", ""),
            // Here, /dev/null: fio on 10.0.0.1 would have written to its /dev/null.
            &[
                "--device",
                link_arg.as_str(),
                "--destructive-device",
                "null",
            ][..],
            "`: name a device on another machine as its kernel does",
        ),
    ] {
        let file = dir.path().join(format!("{name}.toml"));
        std::fs::write(
            &file,
            format!("name = \"h\"\n[target]\n{target}{hosts}{work}"),
        )
        .unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_iolab"))
            .args(["run", "--dry-run"])
            .args(args)
            .arg(&file)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert!(err.contains(want), "{name}: want {want:?} in {err}");
    }
}

// ---------------------------------------------------------------------------------------
// Real fio on scratch loop devices (root).

use crate::common::root_or_skip;

/// `iolab run ... 2>&1 | head -2`: the reader of its messages goes away early. It panicked
/// (exit 101), leaving the experiment unrecorded; it now runs to its end, silently.
#[test]
fn a_run_whose_messages_nobody_reads_still_ends_well() {
    if !root_or_skip() {
        return;
    }
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("e.toml");
    std::fs::write(
        &file,
        "name = \"unread\"\nrepetitions = 1\n[workload]\nrw = \"randread\"\nbs = \"4k\"\n\
         runtime = \"1s\"\ntime_based = true\n[factors]\niodepth = [1, 2]\n",
    )
    .unwrap();
    let mut child = crate::common::iolab()
        .args(["run", "--db"])
        .arg(dir.path().join("r.db"))
        .arg(&file)
        .env("IOLAB_STATE_DIR", dir.path().join("state"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // The reader is dropped here: every later message meets a closed pipe.
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?} after {first:?}");
    let db = Store::open_existing(dir.path().join("r.db")).unwrap();
    assert_eq!(db.experiment(1).unwrap().status, "done");
    assert_eq!(db.runs(1).unwrap().len(), 2);
}

fn read_queue(dev: &str, attr: &str) -> String {
    iolab::knobs::read_attr(&iolab::knobs::queue_attr_path(dev, attr)).unwrap()
}

fn knob_values(dev: &str) -> Vec<String> {
    ["scheduler", "rq_affinity", "nr_requests", "read_ahead_kb"]
        .iter()
        .map(|a| read_queue(dev, a))
        .collect()
}

/// A 2x2 matrix whose levels differ from the device's current values where possible.
/// `iodepth = 2` under psync is the same workload as 1 (fio caps it, and says so).
fn matrix_file(dir: &Path, runtime: &str, reps: u32, dev: &str) -> PathBuf {
    let path = dir.join("matrix.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"e2e\"\nseed = 9\nrepetitions = {reps}\n[target]\ndevice = \"{dev}\"\n\
             anchor_cpu = 0\n[workload]\nrw = \"randread\"\nbs = \"4k\"\nioengine = \"psync\"\n\
             iodepth = 2\ndirect = 1\nsize = \"16m\"\nruntime = \"{runtime}\"\ntime_based = true\n\
             [factors]\nscheduler = [\"none\", \"mq-deadline\"]\nnr_requests = [16]\n\
             rq_affinity = [0, 2]\nread_ahead_kb = [4]\n"
        ),
    )
    .unwrap();
    path
}

/// A temp dir, the iolab state dir inside it (journal, scratch markers; pass it to the
/// command as IOLAB_STATE_DIR) and a scratch device of `bytes` registered there. The device
/// is declared last so it is dropped (detached) before the directory goes.
fn live_scratch(bytes: u64) -> (tempfile::TempDir, PathBuf, iolab::target::ScratchDevice) {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let dev = iolab::target::ScratchDevice::create_in(&state, bytes).unwrap();
    (dir, state, dev)
}

#[test]
fn real_fio_matrix_stores_eight_sane_runs_and_restores_every_knob() {
    if !root_or_skip() {
        return;
    }
    let (dir, state, dev) = live_scratch(64 << 20);
    let before = knob_values(dev.name());
    let file = matrix_file(dir.path(), "1s", 2, dev.name());
    let db_path = dir.path().join("r.db");
    let out = iolab()
        .args(["run", "--tag", "variant=test", "--sample-ms", "250", "--db"])
        .arg(&db_path)
        .arg(&file)
        .env("IOLAB_STATE_DIR", &state)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("8 run(s) ok and 0 failed, stored"),
        "{stdout}"
    );
    assert!(
        stdout.contains("see it again: iolab show 1 --summary --db"),
        "{stdout}"
    );
    assert!(stderr.contains("[8/8] rep 2"), "{stderr}");
    // `show --summary` prints the run's table again, figure for figure, from the database.
    let table: String = stdout
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with("see it again"))
        .map(|l| format!("{l}\n"))
        .collect();
    let again = crate::common::stdout_of(
        iolab()
            .args(["show", "1", "--summary", "--db"])
            .arg(&db_path),
    );
    assert!(table.contains("ints/s"), "{stdout}");
    assert_eq!(again, table);
    assert_eq!(knob_values(dev.name()), before);

    let db = Store::open_existing(&db_path).unwrap();
    let runs = db.runs(1).unwrap();
    assert_eq!(runs.len(), 8);
    let ids: Vec<i64> = runs.iter().map(|r| r.id).collect();
    for r in &runs {
        assert_eq!(r.status, RunStatus::Ok, "{}", r.cell_key);
        assert!(r.end_unix - r.start_unix >= 0.9, "{}", r.cell_key);
    }
    for metric in [
        "read_iops",
        "read_clat_mean_us",
        "read_clat_p99_us",
        "usr_pct",
        "sys_pct",
    ] {
        let values = db.metric_values(&ids, metric).unwrap();
        assert_eq!(values.len(), 8, "{metric}");
        if metric == "usr_pct" {
            // fio's user time in a 1 s run on a loop device is about one 10 ms tick of the
            // two CPUs' 200: a run may see none (seen: 0.0 once in eight, 0.5 to 4.9 the rest).
            assert!(values.iter().all(|(_, v)| *v >= 0.0), "{values:?}");
            assert!(values.iter().any(|(_, v)| *v > 0.0), "{values:?}");
        } else {
            assert!(values.iter().all(|(_, v)| *v > 0.0), "{metric}: {values:?}");
        }
    }
    let iops = db.metric_values(&ids, "read_iops").unwrap();
    assert!(iops.iter().all(|(_, v)| *v > 100.0), "{iops:?}");
    let tags = db.run_tags(ids[0]).unwrap();
    assert!(
        tags.iter().any(|(k, v)| k == "variant" && v == "test"),
        "{tags:?}"
    );
    assert!(tags.iter().any(|(k, _)| k == "kernel"), "{tags:?}");
    let texts = db.run_texts(ids[0]).unwrap().unwrap();
    assert!(texts.job_file.unwrap().contains("rw=randread"));
    assert!(texts.fio_json.unwrap().contains("\"fio version\""));
    assert!(texts.fio_command.unwrap().contains("--output-format=json+"));
    // iodepth = 2 under psync: iolab warned before the runs, fio noted it in each run's
    // output, and show passes fio's note on.
    assert!(
        stderr.contains("warning: iodepth above 1 has no effect in every cell"),
        "{stderr}"
    );
    let show = crate::common::stdout_of(iolab().args(["show", "1", "--db"]).arg(&db_path));
    assert!(
        show.contains("fio notes: note: both iodepth >= 1 and synchronous I/O engine"),
        "{show}"
    );
    // Each run stored its queue as it ran, read back from the device: the factors' two levels
    // each, the fixed levels one.
    let flat = show.replace("\n  ", " ");
    let head = format!("queue of {} at run start: ", dev.name());
    let line = flat
        .lines()
        .find(|l| l.starts_with(&head))
        .unwrap_or_else(|| panic!("{show}"));
    let either = |a: &str, b: &str| line.contains(a) || line.contains(b);
    assert!(
        either(
            "scheduler none | mq-deadline,",
            "scheduler mq-deadline | none,"
        ),
        "{line}"
    );
    assert!(either("rq_affinity 0 | 2,", "rq_affinity 2 | 0,"), "{line}");
    assert!(
        line.contains(", nr_requests 16, read_ahead_kb 4,"),
        "{line}"
    );
}

/// Waits until `cond` holds, up to `limit`.
fn wait_for(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn sigkill_leaves_a_journal_that_restore_undoes_and_run_refuses_until_then() {
    if !root_or_skip() {
        return;
    }
    let (dir, state, dev) = live_scratch(64 << 20);
    let before = knob_values(dev.name());
    let file = matrix_file(dir.path(), "20s", 2, dev.name());
    let mut child = iolab()
        .args(["run", "--db"])
        .arg(dir.path().join("r.db"))
        .arg(&file)
        .env("IOLAB_STATE_DIR", &state)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let journal = state.join("journal.json");
    let changed = wait_for(Duration::from_secs(30), || {
        std::fs::read_to_string(&journal).is_ok_and(|t| t.contains("rq_affinity"))
    });
    // A moment into fio's run, then the hardest stop there is.
    std::thread::sleep(Duration::from_millis(500));
    // fio's job file lives in the run's private directory, named after iolab's pid.
    let job_tag = format!("/fio/run-{}-", child.id());
    child.kill().unwrap();
    // Not reaped until the end: a killed iolab stays a zombie until its parent waits for it
    // (a second or more from some shells), and a zombie runs nothing.
    let zombie = wait_for(Duration::from_secs(10), || {
        std::fs::read_to_string(format!("/proc/{}/stat", child.id()))
            .is_ok_and(|s| s.rsplit_once(") ").is_some_and(|(_, r)| r.starts_with('Z')))
    });
    assert!(zombie, "the killed run never became a zombie");
    assert!(changed, "the run never changed a knob");
    // fio learns of iolab's death (PR_SET_PDEATHSIG) and stops long before its 20 s are up.
    assert!(
        wait_for(Duration::from_secs(8), || !fio_running(&job_tag)),
        "fio kept running after iolab was killed"
    );
    assert!(journal.exists());
    assert_ne!(
        knob_values(dev.name()),
        before,
        "knobs should still be changed"
    );
    let leftover = |state: &Path| -> Vec<String> {
        std::fs::read_dir(state.join("fio"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(leftover(&state).len(), 1, "the killed run's fio directory");

    let out = iolab()
        .args(["run", "--db"])
        .arg(dir.path().join("r.db"))
        .arg(&file)
        .env("IOLAB_STATE_DIR", &state)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("were never restored; run `iolab restore` first"),
        "{err}"
    );

    // Another state directory does not make the device free: the killed run's journal holds
    // its original values.
    let out = iolab()
        .args(["run", "--db"])
        .arg(dir.path().join("other.db"))
        .arg(&file)
        .env("IOLAB_STATE_DIR", dir.path().join("other-state"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("/dev/{}: an iolab (pid ", dev.name()))
            && err.contains(&format!(
                "IOLAB_STATE_DIR={} iolab restore",
                state.display()
            )),
        "{err}"
    );
    assert!(!dir.path().join("other-state/journal.json").exists());

    // The refused `iolab run` already swept the killed run's fio directory; one of a process
    // that no longer exists (pid_max is below 2^22) is restore's to remove.
    assert!(leftover(&state).is_empty(), "{:?}", leftover(&state));
    std::fs::create_dir_all(state.join("fio/run-99999999-0")).unwrap();
    let out = iolab()
        .arg("restore")
        .env("IOLAB_STATE_DIR", &state)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("restored /sys/block/"), "{stdout}");
    assert_eq!(knob_values(dev.name()), before);
    assert!(!journal.exists());
    assert!(stdout.contains("removed fio run directory"), "{stdout}");
    assert!(leftover(&state).is_empty(), "{:?}", leftover(&state));
    // The killed run's experiment is no longer `running`; the refused run stored none.
    assert!(
        stdout.contains("experiment 1 in ") && stdout.contains("marked interrupted"),
        "{stdout}"
    );
    assert!(!stdout.contains("scratch device"), "{stdout}");
    let db = Store::open_existing(dir.path().join("r.db")).unwrap();
    let all = db.experiments().unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].status, "interrupted");
    child.wait().unwrap();
}

#[test]
fn two_runs_with_different_state_dirs_cannot_share_a_device() {
    if !root_or_skip() {
        return;
    }
    let (dir, state_a, dev) = live_scratch(64 << 20);
    // The user's own settings, which the two runs must not lose between them.
    let sched =
        std::fs::read_to_string(iolab::knobs::queue_attr_path(dev.name(), "scheduler")).unwrap();
    let own = if sched.contains("bfq") { "bfq" } else { "none" };
    std::fs::write(iolab::knobs::queue_attr_path(dev.name(), "scheduler"), own).unwrap();
    std::fs::write(
        iolab::knobs::queue_attr_path(dev.name(), "nr_requests"),
        "48",
    )
    .unwrap();
    let before = knob_values(dev.name());
    assert_eq!(before[0], own);
    assert_eq!(before[2], "48");
    let file = matrix_file(dir.path(), "2s", 1, dev.name());
    let state_b = dir.path().join("state-b");
    let first = iolab()
        .args(["run", "--db"])
        .arg(dir.path().join("a.db"))
        .arg(&file)
        .env("IOLAB_STATE_DIR", &state_a)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let first_pid = first.id();
    let journal = state_a.join("journal.json");
    let changed = wait_for(Duration::from_secs(30), || {
        std::fs::read_to_string(&journal).is_ok_and(|t| t.contains("rq_affinity"))
    });
    assert!(changed, "the first run never changed a knob");
    let second = iolab()
        .args(["run", "--db"])
        .arg(dir.path().join("b.db"))
        .arg(&file)
        .env("IOLAB_STATE_DIR", &state_b)
        .output()
        .unwrap();
    let first = first.wait_with_output().unwrap();

    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "/dev/{} is being changed by another iolab (pid {first_pid},",
            dev.name(),
        )),
        "{err}"
    );
    assert!(err.contains("wait for it to finish"), "{err}");
    // Refused before anything was stored or written.
    let b = Store::open(dir.path().join("b.db")).unwrap();
    assert!(b.experiments().unwrap().is_empty());
    assert!(!state_b.join("journal.json").exists());

    let first_err = String::from_utf8_lossy(&first.stderr);
    assert!(first.status.success(), "{first_err}");
    assert!(
        String::from_utf8_lossy(&first.stdout).contains("4 run(s) ok and 0 failed, stored"),
        "{first_err}"
    );
    let a = Store::open_existing(dir.path().join("a.db")).unwrap();
    assert_eq!(a.experiment(1).unwrap().status, "done");
    assert_eq!(knob_values(dev.name()), before);
}

/// Whether a fio process started with a job file whose name contains `tag` is alive.
fn fio_running(tag: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|p| {
        std::fs::read(p.path().join("cmdline")).is_ok_and(|c| {
            let c = String::from_utf8_lossy(&c);
            c.starts_with("fio") && c.contains(tag)
        })
    })
}

#[test]
fn a_write_workload_on_a_device_holding_data_is_refused_and_nothing_is_written() {
    if !root_or_skip() {
        return;
    }
    let (dir, state, dev) = live_scratch(32 << 20);
    let mkfs = Command::new("mkfs.ext4")
        .args(["-q", "-F"])
        .arg(dev.dev_path())
        .output()
        .unwrap();
    assert!(
        mkfs.status.success(),
        "{}",
        String::from_utf8_lossy(&mkfs.stderr)
    );
    let image = || std::fs::read(dev.backing_file()).unwrap();
    let before = image();
    let file = dir.path().join("write.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"w\"\n[target]\ndevice = \"{}\"\n[workload]\nrw = \"randwrite\"\n\
             bs = \"4k\"\nruntime = \"1s\"\ntime_based = true\n",
            dev.name()
        ),
    )
    .unwrap();
    let out = iolab()
        .args(["run", "--db"])
        .arg(dir.path().join("r.db"))
        .arg(&file)
        .env("IOLAB_STATE_DIR", &state)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refusing to write"), "{err}");
    assert!(err.contains("filesystem"), "{err}");
    assert!(
        err.contains(&format!("--destructive-device {}", dev.name())),
        "{err}"
    );
    assert!(image() == before, "the device was written");
    assert!(!dir.path().join("r.db").exists());
    assert!(!state.join("journal.json").exists());
}

#[test]
fn every_device_of_a_writing_target_must_be_named_destructive() {
    if !root_or_skip() {
        return;
    }
    let (dir, state, a) = live_scratch(32 << 20);
    let b = iolab::target::ScratchDevice::create_in(&state, 32 << 20).unwrap();
    for dev in [&a, &b] {
        let mkfs = Command::new("mkfs.ext4")
            .args(["-q", "-F"])
            .arg(dev.dev_path())
            .output()
            .unwrap();
        assert!(mkfs.status.success());
    }
    let file = dir.path().join("write2.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"w2\"\n[target]\ndevice = [\"{}\", \"{}\"]\n[workload]\n\
             rw = \"randwrite\"\nbs = \"4k\"\nruntime = \"1s\"\ntime_based = true\n",
            a.name(),
            b.name()
        ),
    )
    .unwrap();
    let dry = |named: &[&str]| {
        let mut cmd = iolab();
        cmd.args(["run", "--dry-run"]).arg(&file);
        for n in named {
            cmd.args(["--destructive-device", n]);
        }
        cmd.env("IOLAB_STATE_DIR", &state).output().unwrap()
    };
    let out = dry(&[a.name()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains(&format!("--destructive-device {}", b.name())),
        "{err}"
    );
    let b_path = b.dev_path();
    let out = dry(&[a.name(), &b_path]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn ctrl_c_stops_fio_restores_knobs_and_exits_130() {
    if !root_or_skip() {
        return;
    }
    let (dir, state, dev) = live_scratch(64 << 20);
    let before = knob_values(dev.name());
    let file = matrix_file(dir.path(), "30s", 1, dev.name());
    let db_path = dir.path().join("r.db");
    let child = iolab()
        .args(["run", "--db"])
        .arg(&db_path)
        .arg(&file)
        .env("IOLAB_STATE_DIR", &state)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let journal = state.join("journal.json");
    let changed = wait_for(Duration::from_secs(30), || {
        std::fs::read_to_string(&journal).is_ok_and(|t| t.contains("rq_affinity"))
    });
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGINT);
    }
    let out = child.wait_with_output().unwrap();
    assert!(changed, "the run never changed a knob");
    // fio was stopped, not waited for: its runtime is 30 s.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("stopped by signal 2; knobs restored"), "{err}");
    // The device was named, not created by the run: there was no scratch device to remove.
    assert!(!err.contains("scratch device"), "{err}");
    assert_eq!(knob_values(dev.name()), before);
    assert!(!journal.exists());
    let db = Store::open_existing(&db_path).unwrap();
    assert_eq!(db.experiment(1).unwrap().status, "interrupted");
}

/// A fixture machine is not this one: `trace = true` records nothing there, says so once,
/// and the runs are stored without a trace.
#[test]
fn trace_true_on_a_fixture_machine_stores_runs_without_traces() {
    struct Said(Vec<String>);
    impl runloop::Progress for Said {
        fn message(&mut self, text: &str) {
            self.0.push(text.to_string());
        }
        fn run_started(&mut self, _: &runloop::Step) {}
    }
    let lab = Lab::new();
    let e = exp(&MATRIX.replace("repetitions = 2", "repetitions = 1\ntrace = true"));
    assert!(e.trace);
    let replay = ReplayFio::in_order((0..4).map(|_| fio_fixture("randread_1job_json")));
    let settings = lab.settings();
    let mut said = Said(Vec::new());
    runloop::run(&e, &settings, &replay, &CancelToken::new(), &mut said).unwrap();
    let traced: Vec<&String> = said.0.iter().filter(|m| m.starts_with("trace:")).collect();
    assert_eq!(traced.len(), 1, "{:?}", said.0);
    let db = Store::open_existing(&settings.db_path).unwrap();
    let runs = db.runs(1).unwrap();
    assert_eq!(runs.len(), 4);
    for r in runs {
        assert_eq!(db.run_texts(r.id).unwrap().unwrap().trace, None);
        let names: Vec<String> = db
            .run_metrics(r.id)
            .unwrap()
            .into_iter()
            .map(|m| m.0)
            .collect();
        assert!(names.iter().all(|n| !n.starts_with("trace_")), "{names:?}");
    }
    assert!(!runloop::trace::traces_dir(&settings.db_path).exists());
}

#[test]
fn several_devices_get_their_knobs_their_own_placement_and_one_job_file() {
    let lab = Lab::of("two-node-nvme");
    let queue = |d: &str, a: &str| lab.attr(&format!("sys/block/{d}/queue/{a}"));
    let before: Vec<String> = ["nvme0n1", "nvme1n1"]
        .iter()
        .map(|d| queue(d, "scheduler"))
        .collect();
    let e = exp("name = \"two\"\nseed = 5\nrepetitions = 1\n\
         [target]\ndevice = [\"nvme0n1\", \"/dev/nvme1n1\"]\n\
         [workload]\nrw = \"randread\"\n\
         [factors]\nscheduler = [\"mq-deadline\"]\nplacement = [\"on\"]\n\
         irq_cpu = [\"unchanged\", \"far\"]\n");
    let replay = ReplayFio::in_order([fio_fixture("randread_1job_json")]);
    let out = lab.run(&e, &replay);
    // The scheduler went to both devices through the journal, and both came back.
    let set: Vec<(String, String)> = out
        .knob_changes
        .iter()
        .filter(|w| w.path.ends_with("/queue/scheduler"))
        .map(|w| {
            (
                w.path.split('/').rev().nth(2).unwrap().to_string(),
                w.new.clone(),
            )
        })
        .collect();
    assert_eq!(
        set,
        [
            ("nvme0n1".to_string(), "mq-deadline".to_string()),
            ("nvme1n1".to_string(), "mq-deadline".to_string())
        ]
    );
    let after: Vec<String> = ["nvme0n1", "nvme1n1"]
        .iter()
        .map(|d| queue(d, "scheduler"))
        .collect();
    assert_eq!(after, before);

    // One fio run, one job file, a section per device placed `on` its own interrupt's CPUs.
    let calls = replay.calls();
    assert_eq!(calls.len(), 1);
    let file = calls[0].job_file();
    let sections: Vec<(&str, &str, &str)> = file
        .split("\n[")
        .skip(1)
        .map(|s| {
            let get = |k: &str| {
                s.lines()
                    .find_map(|l| l.strip_prefix(k))
                    .unwrap_or_default()
            };
            (
                s.lines().next().unwrap(),
                get("filename="),
                get("cpus_allowed="),
            )
        })
        .collect();
    assert_eq!(
        sections,
        [
            ("iolab-nvme0n1]", "/dev/nvme0n1", "0-7"),
            ("iolab-nvme1n1]", "/dev/nvme1n1", "0,2,4,6")
        ],
        "{file}"
    );

    // The cell whose interrupts cannot move is not applicable, and says on which device.
    let na = not_applicable(&lab, &out);
    assert_eq!(na.len(), 1, "{na:?}");
    let db = Store::open_existing(lab.dir.path().join("results.db")).unwrap();
    let runs = db.runs(out.experiment_id).unwrap();
    assert!(
        na[0].starts_with("/dev/nvme0n1: irq_cpu far: the kernel manages"),
        "{}",
        na[0]
    );
    assert_eq!(runs.iter().filter(|r| r.status == RunStatus::Ok).count(), 1);
}

#[test]
fn dry_run_shows_every_device_and_its_cpus() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("two.toml");
    std::fs::write(
        &file,
        "name = \"two\"\n[target]\ndevice = \"default\"\ncount = 2\nanchor_cpu = 0\n\
         [workload]\nrw = \"randread\"\n[factors]\nplacement = [\"on\"]\n",
    )
    .unwrap();
    let text = dry_run_text(dir.path(), &file);
    let target = text.lines().find(|l| l.starts_with("target: ")).unwrap();
    // The scratch devices do not exist yet: no existing loop device is named for them.
    assert!(
        target.contains("2 new scratch loop device(s)") && target.contains("scratch1, scratch2"),
        "{text}"
    );
    assert!(!text.contains("/dev/loop"), "{text}");
    assert_eq!(text.matches("fio for /dev/scratch").count(), 2, "{text}");
    assert_eq!(text.matches(" on CPU 0: CPU 0 takes").count(), 2, "{text}");
    assert!(!dir.path().join("r.db").exists());
}

/// Keeps the runs the loop shows.
#[derive(Default)]
struct Steps(Vec<runloop::Step>);
impl runloop::Progress for Steps {
    fn message(&mut self, _: &str) {}
    fn run_started(&mut self, step: &runloop::Step) {
        self.0.push(step.clone());
    }
}

/// Keeps what the loop says (the scratch devices it created and their files).
#[derive(Default)]
struct Said(Vec<String>);
impl runloop::Progress for Said {
    fn message(&mut self, text: &str) {
        self.0.push(text.to_string());
    }
    fn run_started(&mut self, _: &runloop::Step) {}
}

#[test]
fn real_fio_on_two_scratch_devices_drives_both_and_removes_both() {
    if !root_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let e = exp("name = \"two scratch\"\nseed = 4\nrepetitions = 1\n\
         [target]\ndevice = \"default\"\ncount = 2\nsize = \"64M\"\nanchor_cpu = 0\n\
         [workload]\nrw = \"randread\"\nbs = \"4k\"\nioengine = \"psync\"\ndirect = 1\n\
         runtime = \"1s\"\ntime_based = true\n\
         [factors]\nscheduler = [\"none\", \"mq-deadline\"]\nnr_requests = [16]\n");
    let mut settings = Settings::live(dir.path().join("r.db"));
    settings.state_dir = dir.path().join("state");
    settings.sample_interval = Duration::from_millis(250);
    settings.preflight_sample = Duration::ZERO;
    let mut said = Said::default();
    let out = runloop::run(
        &e,
        &settings,
        &iolab::workload::RealFio::default(),
        &CancelToken::new(),
        &mut said,
    )
    .unwrap();

    // Both scratch devices existed, were driven by one fio run each cell, and are gone.
    let names: Vec<&str> = out.plan.devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names.len(), 2);
    assert_ne!(names[0], names[1]);
    let files: Vec<String> = said
        .0
        .iter()
        .filter_map(|m| m.strip_prefix("target: scratch device /dev/"))
        .map(|m| {
            m.rsplit(" on ")
                .next()
                .unwrap()
                .trim_end_matches(')')
                .to_string()
        })
        .collect();
    assert_eq!(files.len(), 2, "{:?}", said.0);
    for (name, file) in names.iter().zip(&files) {
        assert!(!Path::new(file).exists(), "{file} is still there");
        let bound = std::fs::read_to_string(format!("/sys/block/{name}/loop/backing_file"));
        assert!(
            bound.map_or(true, |b| b.trim() != file),
            "/dev/{name} still backs {file}"
        );
    }

    // Every knob written (on both devices) was put back before the devices went.
    assert!(out.knob_changes.iter().any(|w| w.path.contains(names[0])));
    assert!(out.knob_changes.iter().any(|w| w.path.contains(names[1])));
    assert_eq!(out.restored.restored.len(), out.knob_changes.len());
    assert!(out.restored.vanished.is_empty());

    let db = Store::open_existing(dir.path().join("r.db")).unwrap();
    let runs = db.runs(out.experiment_id).unwrap();
    assert_eq!(runs.len(), 2);
    let ids: Vec<i64> = runs.iter().map(|r| r.id).collect();
    assert!(runs.iter().all(|r| r.status == RunStatus::Ok), "{runs:?}");
    let iops = db.metric_values(&ids, "read_iops").unwrap();
    assert_eq!(iops.len(), 2);
    assert!(iops.iter().all(|(_, v)| *v > 0.0), "{iops:?}");
    let job = db.run_texts(ids[0]).unwrap().unwrap().job_file.unwrap();
    for name in &names {
        assert!(job.contains(&format!("filename=/dev/{name}\n")), "{job}");
    }
}

/// A `fio --server` on a free local port, stopped on drop (also when the test fails).
struct FioServer {
    port: u16,
    pid_file: PathBuf,
    _dir: tempfile::TempDir,
}

impl FioServer {
    fn start() -> FioServer {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let pid_file = dir.path().join("fio.pid");
        let ok = Command::new("fio")
            .arg(format!("--server=ip:127.0.0.1,{port}"))
            .arg(format!("--daemonize={}", pid_file.display()))
            .current_dir(dir.path())
            .status()
            .unwrap()
            .success();
        assert!(ok, "fio --server did not start");
        let server = FioServer {
            port,
            pid_file,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "fio server not listening");
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    fn address(&self) -> String {
        format!("ip:127.0.0.1,{}", self.port)
    }
}

impl Drop for FioServer {
    fn drop(&mut self) {
        if let Some(pid) = std::fs::read_to_string(&self.pid_file)
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok())
        {
            // SAFETY: kill has no memory preconditions; the pid is the server we started.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
    }
}

#[test]
fn hosts_run_one_job_at_once_and_their_results_add_up() {
    if !root_or_skip() {
        return;
    }
    let (dir, state, dev) = live_scratch(32 << 20);
    let servers = [FioServer::start(), FioServer::start()];
    let write_file = |rw: &str| {
        let file = dir.path().join(format!("{rw}.toml"));
        std::fs::write(
            &file,
            format!(
                "name = \"two hosts\"\nrepetitions = 2\n[target]\ndevice = \"{}\"\n\
                 hosts = [\"{}\", \"{}\"]\n[workload]\nrw = \"{rw}\"\nbs = \"4k\"\n\
                 direct = 1\nruntime = \"1s\"\ntime_based = true\n[factors]\n\
                 iodepth = [1, 2]\n",
                dev.name(),
                servers[0].address(),
                servers[1].address()
            ),
        )
        .unwrap();
        file
    };
    let db_path = dir.path().join("hosts.db");
    let out = iolab()
        .args(["run", "--json", "--tag", "kernel=stock", "--db"])
        .arg(&db_path)
        .arg(write_file("randread"))
        .env("IOLAB_STATE_DIR", &state)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // fio's default engine keeps one I/O in flight: the outcome says so for iodepth=2.
    let outcome: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let warnings = outcome["plan"]["warnings"].to_string();
    assert!(
        warnings.contains("no effect in cells iodepth=2: ioengine psync"),
        "{warnings}"
    );
    let db = rusqlite::Connection::open(&db_path).unwrap();
    let runs: Vec<(i64, String, String)> = db
        .prepare("SELECT id, status, fio_json FROM runs")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(runs.len(), 4);
    // fio servers do not say their kernel: the experiment's is the one the user tagged.
    let kernel: String = db
        .query_row("SELECT kernel FROM experiments", [], |r| r.get(0))
        .unwrap();
    assert_eq!(kernel, "stock");
    for (id, status, fio_json) in &runs {
        assert_eq!(status, "ok");
        let doc: serde_json::Value =
            serde_json::from_str(&fio_json[fio_json.find('{').unwrap()..]).unwrap();
        let clients: Vec<&serde_json::Value> = doc["client_stats"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["jobname"] != "All clients")
            .collect();
        let ports: std::collections::BTreeSet<u64> = clients
            .iter()
            .map(|c| c["port"].as_u64().unwrap())
            .collect();
        assert_eq!(
            ports,
            servers.iter().map(|s| u64::from(s.port)).collect(),
            "both servers ran the job"
        );
        let sum: f64 = clients
            .iter()
            .map(|c| c["read"]["iops"].as_f64().unwrap())
            .sum();
        let stored: f64 = db
            .query_row(
                "SELECT value FROM metrics WHERE run_id = ?1 AND name = 'read_iops'",
                [id],
                |r| r.get(0),
            )
            .unwrap();
        assert!((stored - sum).abs() < 1e-6 * sum, "{stored} vs {sum}");
        // This machine did none of the I/O: none of its figures are stored as the run's own,
        // only as what it was doing meanwhile (`local:*`, and its series as the run's samples).
        let (own, local): (i64, i64) = db
            .query_row(
                "SELECT (SELECT COUNT(*) FROM metrics WHERE run_id = ?1 AND name IN \
                 ('irq_per_s', 'dev_r_per_s', 'usr_pct')), (SELECT COUNT(*) FROM metrics \
                 WHERE run_id = ?1 AND name IN ('local:irq_per_s', 'local:usr_pct'))",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!((own, local), (0, 2));
        // Taken over fio's 1 s runtime up to where fio exited, not over the whole sampled
        // span, which also holds fio's start and its servers' second-late start.
        let window: String = db
            .query_row("SELECT sample_window FROM runs WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .unwrap();
        let window: serde_json::Value = serde_json::from_str(&window).unwrap();
        assert_eq!(window["basis"], "end of fio", "{window}");
        let span = window["end_s"].as_f64().unwrap() - window["start_s"].as_f64().unwrap();
        assert!((span - 1.0).abs() < 0.05, "{window}");
    }

    let out = iolab()
        .args(["run", "--dry-run"])
        .arg(write_file("randread"))
        .env("IOLAB_STATE_DIR", &state)
        .output()
        .unwrap();
    let plan = String::from_utf8_lossy(&out.stdout);
    assert!(
        plan.contains(&format!("/dev/{} on {}", dev.name(), servers[0].address())),
        "{plan}"
    );

    // Writing to another machine's device needs it named expendable.
    let out = iolab()
        .args(["run", "--dry-run"])
        .arg(write_file("randwrite"))
        .env("IOLAB_STATE_DIR", &state)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains(&format!("--destructive-device {}", dev.name())),
        "{err}"
    );
}

/// On a terminal the progress is one live line (a bar, the run, a counting-down ETA) redrawn
/// in place while fio runs; piped, it is one plain line per run.
#[test]
fn progress_is_a_live_bar_on_a_terminal_and_plain_lines_in_a_pipe() {
    if !root_or_skip() {
        return;
    }
    let (dir, state, dev) = live_scratch(32 << 20);
    let file = dir.path().join("p.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"progress\"\nrepetitions = 2\n[target]\ndevice = \"{}\"\n[workload]\n\
             rw = \"randread\"\nioengine = \"psync\"\ndirect = 1\nsize = \"8m\"\n\
             runtime = \"3s\"\ntime_based = true\n",
            dev.name()
        ),
    )
    .unwrap();
    let command = format!(
        "{} run --db {} {}",
        env!("CARGO_BIN_EXE_iolab"),
        dir.path().join("tty.db").display(),
        file.display()
    );
    // `script` gives the command a pseudo-terminal; what it drew comes back on stdout.
    let out = Command::new("script")
        .args(["-qfec", &command, "/dev/null"])
        .env("IOLAB_STATE_DIR", &state)
        .output()
        .unwrap();
    let screen = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{screen}");
    let redraws = screen.matches("\r\x1b[2K[").count();
    // Two runs of 3 s, redrawn every second: more redraws than runs.
    assert!(redraws > 3, "{redraws} redraws:\n{screen:?}");
    assert!(screen.contains("] [2/2] rep 2 base"), "{screen:?}");
    assert!(screen.contains("ETA "), "{screen:?}");

    let out = iolab()
        .args(["run", "--db"])
        .arg(dir.path().join("pipe.db"))
        .arg(&file)
        .env("IOLAB_STATE_DIR", &state)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains('\x1b'), "{err:?}");
    assert!(
        err.lines().any(|l| l.starts_with("[1/2] rep 1 base")),
        "{err}"
    );
    assert!(
        err.lines().any(|l| l.starts_with("[2/2] rep 2 base")),
        "{err}"
    );
}

/// Every metric a run stores is in the metric registry (`iolab::metrics`), listed as itself
/// (per-device `DEVICE:dev_*` names as their `dev_*`), so `iolab metrics` and docs/metrics.md
/// describe everything a database can hold: fio's per direction, the sampler's system-wide,
/// summed and per-device figures.
#[test]
fn every_metric_a_replayed_run_stores_is_in_the_registry() {
    let lab = Lab::of("two-node-nvme");
    let e = exp("name = \"all\"\nseed = 3\nrepetitions = 1\n\
         [target]\ndevice = [\"nvme0n1\", \"nvme1n1\"]\n[workload]\nrw = \"randread\"\n");
    // The replayed output is a mixed workload's (reads and writes): a read-only job here keeps
    // the devices safe, and the figures come from the output.
    let replay = ReplayFio::in_order([fio_fixture("randrw_2jobs_jsonplus")]);
    lab.run(&e, &replay);
    let db = Store::open_existing(lab.dir.path().join("results.db")).unwrap();
    let names = db.metric_names().unwrap();
    for wanted in [
        "read_clat_p99_us",
        "write_iops",
        "fio_sys_pct",
        "irq_per_s",
        "dev_r_per_s",
        "nvme1n1:dev_w_per_s",
    ] {
        assert!(
            names.iter().any(|n| n == wanted),
            "{wanted} not in {names:?}"
        );
    }
    for name in &names {
        assert!(
            iolab::metrics::exact(name).is_some(),
            "{name} is stored but not in the registry"
        );
    }
}
