//! Live tests in the lab machines (docs/lab.md): QEMU guests that boot Debian's packaged kernel
//! with the cases' topologies and devices (lab/machines/NAME.sh) and run the iolab just built,
//! through this machine's `/` shared read-only. Fixture trees only confirm what their author
//! believed about the kernel; these check iolab against a real one.
//!
//! Each machine boots once: a test writes one guest script that runs every iolab command it
//! needs and leaves their output in the results export, then checks the files here. Guests
//! run one at a time (a lock), since TCG has only this machine's 2 cores. TCG timings are
//! behaviour, never performance: nothing here checks a speed.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Instant;

mod system;

/// One guest at a time.
static LAB: Mutex<()> = Mutex::new(());

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// True when a lab machine can boot here; otherwise says what is missing (a failure in CI).
fn lab_ready() -> bool {
    if !crate::common::root_or_skip() {
        return false;
    }
    let missing: Vec<&str> = [
        ("qemu-system-x86_64", "command -v qemu-system-x86_64"),
        ("a kernel in /boot", "ls /boot/vmlinuz-* >/dev/null 2>&1"),
        ("/bin/busybox", "test -x /bin/busybox"),
        ("cpio", "command -v cpio"),
    ]
    .into_iter()
    .filter(|(_, check)| {
        !Command::new("sh")
            .args(["-c", &format!("{check} >/dev/null")])
            .status()
            .is_ok_and(|s| s.success())
    })
    .map(|(what, _)| what)
    .collect();
    if !missing.is_empty() {
        crate::common::skip(&format!(
            "lab machines need {} (scripts/lab-deps installs them)",
            missing.join(", ")
        ));
        return false;
    }
    true
}

/// A finished boot: the results export (removed on drop) and what QEMU and the script printed.
struct Boot {
    dir: PathBuf,
    /// Removes `dir` when dropped (None: kept, with LAB_KEEP).
    _out: Option<tempfile::TempDir>,
    log: String,
    code: Option<i32>,
}

impl Boot {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn text(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(name)).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; the guest's console:\n{}",
                self.path(name).display(),
                self.log
            )
        })
    }

    fn json(&self, name: &str) -> Value {
        let text = self.text(name);
        serde_json::from_str(&text).unwrap_or_else(|e| {
            panic!(
                "{name} is not JSON ({e}): {text:.500}\nstderr: {}",
                std::fs::read_to_string(self.path(&format!("{name}.err"))).unwrap_or_default()
            )
        })
    }
}

/// Boots `machine` and runs `script` (sh) in it with `$IOLAB` the binary under test and
/// `$LAB_OUT` the results export. Prints how long the boot took.
fn boot(machine: &str, script: &str, timeout_s: u32) -> Boot {
    boot_with(machine, script, timeout_s, &|_, _| {})
}

/// Like `boot`, with `during(out, port_base)` run here while the guest runs (to drive traffic
/// through the machine's port forwards, which start at `port_base`).
fn boot_with(machine: &str, script: &str, timeout_s: u32, during: &dyn Fn(&Path, u16)) -> Boot {
    boot_as(machine, script, timeout_s, during, false)
}

/// A guest's output directory in /dev/shm, named with this process's id, so that
/// scripts/leftovers knows it for a dead run's.
fn lab_out_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("iolab-lab-out-{}.", std::process::id()))
        .tempdir_in("/dev/shm")
        .unwrap()
}

/// Like `boot_with`; with `systemd`, systemd is the guest's first process and runs the script
/// as a service (`LAB_SYSTEMD=1`), so the script can start and stop units.
fn boot_as(
    machine: &str,
    script: &str,
    timeout_s: u32,
    during: &dyn Fn(&Path, u16),
    systemd: bool,
) -> Boot {
    let _one = LAB.lock().unwrap_or_else(|e| e.into_inner());
    let out = lab_out_dir();
    // scripts/lab puts the binary under test (LAB_IOLAB) first on the guest's PATH, copied
    // into the guest's RAM without its debug info; an installed iolab must not stand in.
    let script = format!(
        "IOLAB=/tmp/bin/iolab\n[ \"$(command -v iolab)\" = $IOLAB ] || exit 97\nexport IOLAB\n\
         {script}\n"
    );
    std::fs::write(out.path().join("checks.sh"), script).unwrap();
    let started = Instant::now();
    // Ports by process id, so two test runs on one machine do not collide.
    let port_base = 20000 + (std::process::id() % 4000) as u16 * 4;
    let child = Command::new(repo().join("scripts/lab"))
        .arg(machine)
        .arg("--out")
        .arg(out.path())
        .args(["--timeout", &timeout_s.to_string()])
        // -x: the console shows each command as it starts, so a guest that overstays its
        // time says which command it was in.
        .args(["--", "sh", "-x", "/tmp/lab/checks.sh"])
        .env("LAB_PORT_BASE", port_base.to_string())
        .env("LAB_IOLAB", env!("CARGO_BIN_EXE_iolab"))
        .env("LAB_SYSTEMD", if systemd { "1" } else { "" })
        .current_dir(repo())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    during(out.path(), port_base);
    let run = child.wait_with_output().unwrap();
    let mut log = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    if run.status.code() != Some(0) {
        log.push_str(&export_listing(out.path()));
    }
    eprintln!(
        "lab: {machine} booted and ran its checks in {:.0?}",
        started.elapsed()
    );
    // LAB_KEEP=1 keeps the results export for a look after the test (it says where).
    let dir = out.path().to_path_buf();
    let out = if std::env::var_os("LAB_KEEP").is_some() {
        eprintln!(
            "lab: the results export is kept in {}",
            out.keep().display()
        );
        None
    } else {
        Some(out)
    };
    Boot {
        dir,
        _out: out,
        log,
        code: run.status.code(),
    }
}

/// What a failed guest left in its export: each file's size, and the text of its `*.err` files.
fn export_listing(dir: &Path) -> String {
    let mut text = String::from("\nthe results export held:\n");
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    entries.sort();
    for path in entries {
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        text.push_str(&format!("  {} ({size} bytes)\n", path.display()));
        if path.extension().is_some_and(|e| e == "err") && size > 0 {
            let err = std::fs::read_to_string(&path).unwrap_or_default();
            text.push_str(&format!("    {}\n", err.trim().replace('\n', "\n    ")));
        }
    }
    text
}

fn cpus(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a CPU list: {v}"))
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

fn range(a: u64, b: u64) -> Vec<u64> {
    (a..=b).collect()
}

fn device<'a>(m: &'a Value, name: &str) -> &'a Value {
    m["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == name)
        .unwrap_or_else(|| panic!("no device {name} in {}", m["devices"]))
}

fn irq(m: &Value, n: &Value) -> Value {
    m["irqs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| &i["irq"] == n)
        .unwrap_or_else(|| panic!("no irq {n}"))
        .clone()
}

/// The topology part of `inspect --json`: CPU c is in package `package(c)` and node
/// `node(c)`, its SMT siblings are `siblings(c)`, and it shares its LLC with `llc(c)`.
fn check_topology(
    m: &Value,
    n: u64,
    package: &dyn Fn(u64) -> u64,
    node: &dyn Fn(u64) -> u64,
    siblings: &dyn Fn(u64) -> Vec<u64>,
    llc: &dyn Fn(u64) -> Vec<u64>,
) {
    assert_eq!(cpus(&m["online"]), range(0, n - 1));
    let list = m["cpus"].as_array().unwrap();
    assert_eq!(list.len() as u64, n);
    for c in list {
        let cpu = c["cpu"].as_u64().unwrap();
        assert_eq!(c["package"], package(cpu), "package of CPU {cpu}: {c}");
        assert_eq!(c["node"], node(cpu), "node of CPU {cpu}: {c}");
        assert_eq!(
            cpus(&c["siblings"]),
            siblings(cpu),
            "siblings of {cpu}: {c}"
        );
        assert_eq!(cpus(&c["llc"]["cpus"]), llc(cpu), "LLC of CPU {cpu}: {c}");
        let in_package: Vec<u64> = range(0, n - 1)
            .into_iter()
            .filter(|o| package(*o) == package(cpu))
            .collect();
        assert_eq!(cpus(&c["package_cpus"]), in_package, "{c}");
    }
    let nodes = m["nodes"].as_array().unwrap();
    for nd in nodes {
        let id = nd["node"].as_u64().unwrap();
        let mine: Vec<u64> = range(0, n - 1)
            .into_iter()
            .filter(|c| node(*c) == id)
            .collect();
        assert_eq!(cpus(&nd["cpus"]), mine, "node {id}");
        for d in nd["distances"].as_array().unwrap() {
            let want = if d["node"] == id { 10 } else { 20 };
            assert_eq!(d["distance"], want, "node {id}: {nd}");
        }
    }
}

/// on/near/far of a device: pairwise disjoint, online, and `on` where its interrupts go.
fn check_placement(m: &Value, dev: &Value) -> (Vec<u64>, Vec<u64>, Vec<u64>) {
    let p = &dev["placement"];
    let (on, near, far) = (cpus(&p["on"]), cpus(&p["near"]), cpus(&p["far"]));
    let online = cpus(&m["online"]);
    for (a, b) in [(&on, &near), (&on, &far), (&near, &far)] {
        assert!(
            a.iter().all(|c| !b.contains(c)),
            "{}: on {on:?} near {near:?} far {far:?} overlap",
            dev["name"]
        );
    }
    for c in on.iter().chain(&near).chain(&far) {
        assert!(online.contains(c), "{}: CPU {c} is not online", dev["name"]);
    }
    (on, near, far)
}

/// The guest script's common part: the model, and the kernel's own nohz_full text.
const INSPECT: &str = r#"
$IOLAB inspect --json >$LAB_OUT/inspect.json 2>$LAB_OUT/inspect.json.err
cat /sys/devices/system/cpu/nohz_full >$LAB_OUT/nohz_full.raw
"#;

/// Debian's 6.1 prints `(null)` for an unset nohz_full; iolab reads it as no CPU, quietly.
fn check_nohz_and_warnings(b: &Boot, m: &Value) {
    assert_eq!(
        b.text("nohz_full.raw").trim(),
        "(null)",
        "the kernel changed"
    );
    assert_eq!(m["nohz_full"], serde_json::json!([]));
    assert_eq!(
        m["warnings"],
        serde_json::json!([]),
        "{}",
        b.text("inspect.json.err")
    );
}

/// case 0's 4-cell box: 4 nodes x 2 cores x 2 threads, an HBA with one movable
/// interrupt and two disks on node 0, an NVMe with 4 managed queue interrupts on node 2.
#[test]
fn cells4_is_modelled_as_defined() {
    if !lab_ready() {
        return;
    }
    let script = format!(
        "{INSPECT}
# Is an NVMe queue interrupt really kernel-managed? Writing its affinity must fail.
q=$(awk '/nvme0q1$/ {{ sub(\":\", \"\", $1); print $1 }}' /proc/interrupts)
echo 1 >/proc/irq/$q/smp_affinity 2>$LAB_OUT/managed-write.err; echo $? >$LAB_OUT/managed-write.rc
{SNAPSHOT_PLAN}
{PLACEMENT_RUN}
{TRACE_RUN}
{ON_DEMAND_SCHEDULER_RUN}"
    );
    let b = boot("cells4", &script, 600);
    assert_eq!(b.code, Some(0), "{}", b.log);
    let m = b.json("inspect.json");
    assert_eq!(m["hostname"], "cells4");
    check_topology(
        &m,
        16,
        &|c| c / 4,
        &|c| c / 4,
        &|c| vec![c & !1, c | 1],
        &|c| range(c / 4 * 4, c / 4 * 4 + 3),
    );
    check_nohz_and_warnings(&b, &m);

    // The HBA: one interrupt for both disks, movable, on node 0, and the placement says
    // on = its CPU, near = the rest of node 0's package, far = the other nodes.
    let hba_irq = {
        let sda = device(&m, "sda");
        let sdb = device(&m, "sdb");
        for d in [sda, sdb] {
            assert_eq!(d["kind"], "scsi", "{d}");
            assert_eq!(d["node"], 0, "{d}");
            assert_eq!(d["controller_driver"], "megaraid_sas", "{d}");
            assert_eq!(d["irqs"].as_array().unwrap().len(), 1, "{d}");
        }
        assert_eq!(sda["irqs"], sdb["irqs"]);
        irq(&m, &sda["irqs"][0])
    };
    assert!(
        hba_irq["name"].as_str().unwrap().starts_with("megasas"),
        "{hba_irq}"
    );
    assert_eq!(hba_irq["managed"], false, "{hba_irq}");
    let eff = cpus(&hba_irq["effective"]);
    assert_eq!(eff.len(), 1, "{hba_irq}");
    assert!(eff[0] < 4, "the HBA's interrupt left node 0: {hba_irq}");
    let (on, near, far) = check_placement(&m, device(&m, "sda"));
    assert_eq!(on, eff);
    assert!(!near.is_empty() && near.iter().all(|c| *c < 4), "{near:?}");
    assert!(
        !near.contains(&(eff[0] ^ 1)),
        "near holds the SMT sibling: {near:?}"
    );
    assert_eq!(far, range(4, 15));

    // The NVMe: node 2, 4 hardware queues over the 16 CPUs, one interrupt each whose affinity
    // is the queue's CPUs, managed by the kernel.
    let nvme = device(&m, "nvme0n1");
    assert_eq!(nvme["node"], 2, "{nvme}");
    let queues = nvme["queues"].as_array().unwrap();
    assert_eq!(queues.len(), 4, "{nvme}");
    for (k, q) in queues.iter().enumerate() {
        let k = k as u64;
        assert_eq!(cpus(&q["cpus"]), range(4 * k, 4 * k + 3), "{q}");
        let i = irq(&m, &q["irq"]);
        assert_eq!(cpus(&i["affinity"]), cpus(&q["cpus"]), "{i}");
        assert!(cpus(&i["effective"]).iter().all(|c| c / 4 == k), "{i}");
        assert_eq!(i["managed"], true, "{i}");
    }
    assert_ne!(
        b.text("managed-write.rc").trim(),
        "0",
        "the kernel let a managed IRQ move"
    );
    check_placement(&m, nvme);
    check_snapshot_plan(&b);
    check_placement_run(&b, &hba_irq, (&on, &near, &far));
    check_trace_run(&b);
    check_on_demand_scheduler_run(&b);
}

/// A snapshot of the guest and, at once, the guest's own dry run of a placement x rq_affinity
/// plan on the HBA's disk and on the NVMe: planned here from the snapshot (`run --dry-run
/// --root`), the plan must be the one the guest made for itself.
const SNAPSHOT_PLAN: &str = r#"
cat >/tmp/plan.toml <<'T'
name = "lab cells4 plan"
[target]
device = "sda"
[workload]
rw = "randread"
runtime = "1s"
time_based = true
[factors]
placement = ["on", "near", "far"]
rq_affinity = [1, 2]
T
cp /tmp/plan.toml $LAB_OUT/plan.toml
$IOLAB snapshot -o /tmp/snap --interval 1s >$LAB_OUT/snap.txt 2>&1 && cp -a /tmp/snap $LAB_OUT/snap
for dev in sda nvme0n1; do
  $IOLAB run /tmp/plan.toml --device $dev --dry-run --json >$LAB_OUT/plan-$dev.json 2>$LAB_OUT/plan-$dev.err
done
"#;

fn check_snapshot_plan(b: &Boot) {
    for dev in ["sda", "nvme0n1"] {
        let live = b.json(&format!("plan-{dev}.json"));
        let out = crate::common::stdout_of(
            crate::common::iolab()
                .args(["run", b.path("plan.toml").to_str().unwrap()])
                .args(["--device", dev, "--dry-run", "--json", "--root"])
                .arg(b.path("snap")),
        );
        let planned: Value = serde_json::from_str(&out).unwrap();
        for key in ["devices", "cells", "order"] {
            assert_eq!(
                planned[key], live[key],
                "{dev}: {key} differs from the guest's"
            );
        }
        let cells = live["cells"].as_array().unwrap();
        assert_eq!(cells.len(), 6, "{live}");
        assert!(
            planned["notes"]
                .to_string()
                .contains("(host cells4, kernel 6.1."),
            "{planned}"
        );
    }
}

/// bfq is a module of Debian's kernel that no disk lists until it is loaded, and the kernel
/// loads it when its name is written to a disk's queue/scheduler: an experiment asking for it
/// runs, says it will unload the module again, and leaves the disk's scheduler and the
/// kernel's modules as they were; so does `iolab restore` after a kill, unless the module is
/// in use by then.
const ON_DEMAND_SCHEDULER_RUN: &str = r#"
cat /sys/block/sdb/queue/scheduler >$LAB_OUT/sched.before
$IOLAB inspect >$LAB_OUT/sched-inspect.txt 2>&1
$IOLAB inspect --interval 1s >$LAB_OUT/sched-inspect-rates.txt 2>&1
cat >/tmp/sched.toml <<'T'
name = "lab cells4 scheduler on demand"
seed = 0
repetitions = 1
[target]
device = "sdb"
[workload]
rw = "read"
bs = "64k"
ioengine = "psync"
direct = 1
runtime = "1s"
time_based = true
[factors]
scheduler = ["mq-deadline", "bfq"]
T
$IOLAB run /tmp/sched.toml --db /tmp/sched.db >$LAB_OUT/sched.txt 2>&1
echo $? >$LAB_OUT/sched.rc
$IOLAB runs 1 --db /tmp/sched.db --json >$LAB_OUT/sched-runs.json 2>&1
cat /sys/block/sdb/queue/scheduler >$LAB_OUT/sched.after
cut -d' ' -f1 /proc/modules >$LAB_OUT/sched-modules.after
# As a run killed in its bfq cell leaves it: bfq selected on sdb, loaded by that write, and a
# journal saying so. `iolab restore` first while sda uses bfq too (selected by hand: the module
# is in use and stays), then again with sda back on mq-deadline (unloaded).
killed() {
  echo bfq >/sys/block/sdb/queue/scheduler
  mkdir -p /tmp/kstate
  echo '{"pid": 999999, "started_unix": 0, "entries": [{"path": "/sys/block/sdb/queue/scheduler", "old": "mq-deadline", "new": "bfq", "time_unix": 0, "loaded_module": "bfq"}]}' >/tmp/kstate/journal.json
}
killed
echo bfq >/sys/block/sda/queue/scheduler
IOLAB_STATE_DIR=/tmp/kstate $IOLAB restore >$LAB_OUT/sched-restore-in-use.txt 2>&1
cut -d' ' -f1 /proc/modules >$LAB_OUT/sched-modules.in-use
echo mq-deadline >/sys/block/sda/queue/scheduler
killed
IOLAB_STATE_DIR=/tmp/kstate $IOLAB restore >$LAB_OUT/sched-restore.txt 2>&1
cut -d' ' -f1 /proc/modules >$LAB_OUT/sched-modules.restored
cat /sys/block/sdb/queue/scheduler >$LAB_OUT/sched.restored
"#;

fn check_on_demand_scheduler_run(b: &Boot) {
    let before = b.text("sched.before");
    assert_eq!(
        before.trim(),
        "[mq-deadline] none",
        "bfq was loaded at boot"
    );
    // With rates too: the interrupt commands' measuring leaves the module index unread,
    // `inspect --interval` reads it.
    for file in ["sched-inspect.txt", "sched-inspect-rates.txt"] {
        let inspect = b.text(file);
        assert!(
            inspect.contains("schedulers loaded on demand (any disk): bfq kyber"),
            "{inspect}"
        );
    }
    let out = b.text("sched.txt");
    assert_eq!(b.text("sched.rc").trim(), "0", "{out}");
    assert!(
        out.contains("note: scheduler bfq is not loaded: the kernel loads its module"),
        "{out}"
    );
    let runs = b.json("sched-runs.json");
    assert_eq!(runs["experiment"]["runs_ok"], 2, "{runs}");
    // The kernel loaded bfq for the bfq cell (delete_module succeeds only on a loaded
    // module), and iolab unloaded it once mq-deadline was back.
    assert!(
        out.contains(
            "unloaded module bfq (the kernel loaded it when iolab selected its scheduler)"
        ),
        "{out}"
    );
    assert!(
        !b.text("sched-modules.after").lines().any(|m| m == "bfq"),
        "bfq is still loaded: {}",
        b.text("sched-modules.after")
    );
    // Put back: mq-deadline selected again, and bfq no longer listed.
    assert_eq!(b.text("sched.after").trim(), "[mq-deadline] none");
    // After a kill, `iolab restore` does the same from the journal, and leaves a module in use.
    let in_use = b.text("sched-restore-in-use.txt");
    assert!(
        in_use.contains("restored /sys/block/sdb/queue/scheduler = mq-deadline")
            && in_use.contains("kept     module bfq loaded, which the kernel loaded when iolab")
            && in_use.contains("in use"),
        "{in_use}"
    );
    assert!(
        b.text("sched-modules.in-use").lines().any(|m| m == "bfq"),
        "bfq was unloaded while sda used it: {in_use}"
    );
    let restored = b.text("sched-restore.txt");
    assert!(restored.contains("unloaded module bfq"), "{restored}");
    assert!(
        !b.text("sched-modules.restored").lines().any(|m| m == "bfq"),
        "{restored}"
    );
    assert_eq!(b.text("sched.restored").trim(), "[mq-deadline] none");
}

/// A block trace on the guest's packaged kernel, of the HBA's two disks together: recorded
/// through tracefs while dd reads 256 4 KiB blocks of sda and 128 64 KiB blocks of sdb,
/// analysed there, and tracefs as it was after; then a recording of both killed with SIGKILL,
/// whose tracefs settings `iolab restore` puts back.
const TRACE_RUN: &str = r#"
mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
tstate() {
  for f in current_tracer trace_clock options/bin options/context-info tracing_on; do
    echo "$f $(cat /sys/kernel/tracing/$f)"
  done
  for d in sda sdb; do echo "$d/trace/enable $(cat /sys/block/$d/trace/enable)"; done
}
tstate >$LAB_OUT/tracefs.before
mkdir -p /tmp/tr
$IOLAB trace record -d sda -d sdb -o /tmp/tr/both -- sh -c 'dd if=/dev/sda of=/dev/null bs=4k count=256 iflag=direct & dd if=/dev/sdb of=/dev/null bs=64k count=128 iflag=direct; wait' >$LAB_OUT/trace-record.txt 2>&1
echo $? >$LAB_OUT/trace-record.rc
$IOLAB trace analyze --json /tmp/tr/both >$LAB_OUT/trace.json 2>$LAB_OUT/trace.json.err
tstate >$LAB_OUT/tracefs.recorded
$IOLAB trace record -d sda -d sdb -o /tmp/tr/killed --duration 600 >/dev/null 2>&1 &
rec=$!
i=0
while [ "$(cat /sys/block/sdb/trace/enable)" != 1 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
kill -9 $rec
wait $rec
tstate >$LAB_OUT/tracefs.killed
$IOLAB restore >$LAB_OUT/restore.txt 2>&1
echo $? >$LAB_OUT/restore.rc
tstate >$LAB_OUT/tracefs.restored
"#;

/// Checks `TRACE_RUN`: the trace holds each dd's reads on its own disk, and tracefs came
/// back both times.
fn check_trace_run(b: &Boot) {
    let recorded = b.text("trace-record.txt");
    assert_eq!(b.text("trace-record.rc").trim(), "0", "{recorded}");
    assert!(recorded.contains("events of sda and sdb"), "{recorded}");
    let t = b.json("trace.json");
    let disk = |dev: &str| {
        let all = t["devices"].as_array().unwrap();
        all.iter()
            .find(|d| d["dev"] == dev)
            .unwrap_or_else(|| panic!("{dev} not in the trace: {t:.800}"))
    };
    // sd's majors: sda is 8,0 and sdb 8,16.
    let (sda, sdb) = (disk("8,0"), disk("8,16"));
    assert!(sda["reads"].as_u64().unwrap() >= 256, "{sda:.800}");
    assert!(
        sda["latency"]["q2c"]["n"].as_u64().unwrap() >= 256,
        "{sda:.800}"
    );
    // 128 reads of 128 sectors (64 KiB) each went to sdb.
    assert!(sdb["reads"].as_u64().unwrap() >= 128, "{sdb:.800}");
    assert!(
        sdb["merge"]["total"].as_u64().unwrap() >= 128 * 128,
        "{sdb:.800}"
    );
    let before = b.text("tracefs.before");
    assert!(before.contains("current_tracer nop"), "{before}");
    assert_eq!(b.text("tracefs.recorded"), before);
    let killed = b.text("tracefs.killed");
    assert!(
        killed.contains("current_tracer blk")
            && killed.contains("sda/trace/enable 1")
            && killed.contains("sdb/trace/enable 1"),
        "{killed}"
    );
    let restore = b.text("restore.txt");
    assert_eq!(b.text("restore.rc").trim(), "0", "{restore}");
    assert!(
        restore.contains("tracefs settings of a killed"),
        "{restore}"
    );
    assert_eq!(b.text("tracefs.restored"), before);
}

/// The cells4 guest's placement experiments: a read-only `iolab run` on the HBA disk with
/// fio on, near and far from the HBA's interrupt moved to CPU 9 (node 2) by an `irq_cpu` level
/// and left unchanged, then the same without the factor; the HBA's affinity and the CPU it is
/// delivered to read before and after. 1 s runs, one repetition: TCG is slow, and only where things ran matters.
const PLACEMENT_RUN: &str = r#"
hba=$(awk '/megasas/ { sub(":", "", $1); print $1 }' /proc/interrupts)
cat /proc/irq/$hba/smp_affinity >$LAB_OUT/hba-affinity.before
cat >/tmp/place.toml <<'T'
name = "lab cells4 placement"
seed = 0
repetitions = 1
[target]
device = "sda"
[workload]
rw = "randread"
bs = "4k"
ioengine = "psync"
direct = 1
runtime = "1s"
time_based = true
[factors]
placement = ["on", "near", "far"]
T
sed 's/^placement = .*/&\nirq_cpu = ["9", "unchanged"]/; s/^name = .*/name = "lab cells4 irq_cpu"/' /tmp/place.toml >/tmp/irq.toml
cat /proc/irq/$hba/effective_affinity_list >$LAB_OUT/hba-effective.before
# The irq_cpu experiment first: x86 moves an interrupt only when it next fires, and keeps it
# on a CPU its mask still allows, so its `unchanged` cells (shuffled among the CPU 9 ones) and
# the placement experiment after it find the interrupt where the model did only if iolab
# brings it back to its CPU, idle or not, before writing its mask.
( $IOLAB run /tmp/irq.toml --db /tmp/place.db && $IOLAB run /tmp/place.toml --db /tmp/place.db ) >$LAB_OUT/place.txt 2>&1
echo $? >$LAB_OUT/place.rc
cp /tmp/place.db $LAB_OUT/place.db
cat /proc/irq/$hba/smp_affinity >$LAB_OUT/hba-affinity.after
cat /proc/irq/$hba/effective_affinity_list >$LAB_OUT/hba-effective.after
"#;

/// Checks the stored runs of `PLACEMENT_RUN`: every cell ran; fio was pinned to the CPUs the
/// model gives for its placement (relative to CPU 9 where the cell moved the interrupt) and
/// the CPU busiest in user+system time during the run is one of them; the HBA's interrupts
/// were all counted on its interrupt CPU; and its affinity came back exactly.
fn check_placement_run(b: &Boot, hba: &Value, model: (&[u64], &[u64], &[u64])) {
    let (on, near, far) = model;
    let rc = b.text("place.rc");
    assert_eq!(rc.trim(), "0", "iolab run failed: {}", b.text("place.txt"));
    let db = iolab::store::Store::open_existing(b.path("place.db")).unwrap();
    let mut runs = db.runs(1).unwrap();
    runs.extend(db.runs(2).unwrap());
    assert_eq!(
        runs.len(),
        9,
        "3 placements x irq_cpu 9 and unchanged, then 3 placements"
    );
    // Keep going on a failure below: print every run's figures first.
    let mut failures = Vec::new();
    let hba_irq = hba["irq"].as_u64().unwrap();
    // With the interrupt moved to CPU 9 (node 2: CPUs 8-11), near is the rest of node 2's
    // package but CPU 9's SMT sibling 8, which the model leaves out of near (it shares the
    // core), as it does for the HBA's own CPU (checked above).
    let moved = (
        vec![9],
        vec![10, 11],
        range(0, 15)
            .into_iter()
            .filter(|c| c / 4 != 2)
            .collect::<Vec<_>>(),
    );
    for r in &runs {
        let what = r.cell_key.clone();
        assert_eq!(r.status, iolab::store::RunStatus::Ok, "{what}");
        // `unchanged` cells and the experiment without an irq_cpu factor find the interrupt
        // where the model did.
        let level = |f: &str| r.cell_levels[f].as_str().unwrap_or("unchanged").to_string();
        let irq_cpus: Vec<u64> = if level("irq_cpu") == "9" {
            vec![9]
        } else {
            on.to_vec()
        };
        let want: Vec<u64> = match (level("irq_cpu").as_str(), level("placement").as_str()) {
            ("9", "on") => moved.0.clone(),
            ("9", "near") => moved.1.clone(),
            ("9", "far") => moved.2.clone(),
            (_, "on") => on.to_vec(),
            (_, "near") => near.to_vec(),
            (_, "far") => far.to_vec(),
            other => panic!("unexpected cell {other:?}"),
        };
        let texts = db.run_texts(r.id).unwrap().unwrap();
        let job = texts.job_file.unwrap_or_default();
        let pinned = job
            .lines()
            .find_map(|l| l.trim().strip_prefix("cpus_allowed="))
            .unwrap_or_else(|| panic!("fio was not pinned: {job}"));
        let pinned: Vec<u64> = iolab::sys::parse::cpulist(pinned)
            .unwrap()
            .iter()
            .map(|c| u64::from(*c))
            .collect();
        if pinned != want {
            failures.push(format!("{what}: fio pinned to {pinned:?}, not {want:?}"));
        }
        let samples = db.samples(r.id).unwrap();
        let total = |kind: &str, key: &str| -> f64 {
            samples
                .iter()
                .filter(|s| s.kind == kind && s.key == key)
                .flat_map(|s| s.values.iter())
                .sum()
        };
        let table: Vec<String> = range(0, 15)
            .into_iter()
            .map(|c| {
                format!(
                    "cpu{c} usr {:.0} sys {:.0} iowait {:.0} softirq {:.0}",
                    total("cpu", &format!("cpu{c}/usr_pct")),
                    total("cpu", &format!("cpu{c}/sys_pct")),
                    total("cpu", &format!("cpu{c}/iowait_pct")),
                    total("cpu", &format!("cpu{c}/softirq_pct"))
                )
            })
            .collect();
        // Under TCG the unpinned fio parent and iolab itself can out-run the pinned job, so
        // the busiest CPU says little; the job's CPUs must at least show system time.
        let sys: f64 = want
            .iter()
            .map(|c| total("cpu", &format!("cpu{c}/sys_pct")))
            .sum();
        if sys <= 0.0 {
            failures.push(format!(
                "{what}: no system time on fio's CPUs {want:?}:\n  {}",
                table.join("\n  ")
            ));
        }
        let ints: Vec<(u64, f64)> = range(0, 15)
            .into_iter()
            .map(|c| (c, total("irq", &format!("{hba_irq}/cpu{c}"))))
            .filter(|(_, v)| *v > 0.0)
            .collect();
        // x86 moves an interrupt when it next fires, so the first one after a move may
        // still arrive on the old CPU: nearly all, not all, are counted on the IRQ CPU.
        let all: f64 = ints.iter().map(|(_, v)| v).sum();
        let there: f64 = ints
            .iter()
            .filter(|(c, _)| irq_cpus.contains(c))
            .map(|(_, v)| v)
            .sum();
        if !(all > 0.0 && there >= 0.95 * all) {
            failures.push(format!(
                "{what}: HBA interrupts/s by CPU {ints:?}, not on {irq_cpus:?}"
            ));
        }
    }
    // sda holds no data, so fio's bytes are judged against its diskstats, not just shown.
    // Judged, and close: with 1 s runs on a loaded TCG host the window's edges can cost a
    // few percent (-3.8% seen with both host CPUs busy), over the check's 2%. There, too, a
    // run's window can be too uncertain to judge (seen once in three CI runs, at -1.3%): the
    // check says so rather than judge, which is right for that run; each experiment must
    // still have runs judged, and every run judged must be close.
    for exp in [1, 2] {
        let mut judged = 0;
        for basis in db.run_bases(exp).unwrap() {
            let checks = basis.checks.unwrap_or_default();
            let bytes = checks.as_array().and_then(|a| {
                a.iter()
                    .find(|c| c["check"] == "fio_bytes_vs_diskstats" && c["subject"] == "sda")
            });
            let too_short = bytes.is_some_and(|c| {
                c["verdict"] == "not judged"
                    && c["note"]
                        .as_str()
                        .is_some_and(|n| n.contains("too short for its window"))
            });
            let judged_and_close = bytes.is_some_and(|c| {
                c["verdict"] != "not judged"
                    && c["difference_pct"].as_f64().is_some_and(|d| d.abs() < 10.0)
            });
            judged += usize::from(judged_and_close);
            if !judged_and_close && !too_short {
                failures.push(format!("run {}: bytes check {checks}", basis.run_id));
            }
        }
        if judged == 0 {
            failures.push(format!("experiment {exp}: no run's bytes check was judged"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(
        b.text("hba-affinity.after"),
        b.text("hba-affinity.before"),
        "the irq_cpu level did not put the HBA's affinity back"
    );
    assert_eq!(
        b.text("hba-effective.after"),
        b.text("hba-effective.before"),
        "the HBA's interrupt did not come back to its CPU"
    );
}

/// A machine whose packages and L3s span nodes (nodes interleave: 0 = CPUs 0-1,4-5, 1 = 2-3,6-7).
/// The model must say so, keep on/near/far disjoint, and agree with the kernel about which
/// CPUs are near: with the HBA's interrupt on CPU 5 and rq_affinity=1, I/O submitted from a
/// near CPU completes on CPU 5, and I/O from a far CPU (even one sharing CPU 5's L3 from the
/// other node, like CPU 6) completes on the submitting CPU. BLOCK softirqs per CPU show where.
#[test]
fn snc2_cache_spanning_nodes_is_near_only_within_the_node() {
    if !lab_ready() {
        return;
    }
    let script = r#"
irq=$(awk '/megasas/ { sub(":", "", $1); print $1 }' /proc/interrupts)
echo 5 >/proc/irq/$irq/smp_affinity_list
$IOLAB inspect --json >$LAB_OUT/inspect.json 2>$LAB_OUT/inspect.json.err
cat /sys/devices/system/cpu/nohz_full >$LAB_OUT/nohz_full.raw
echo 1 >/sys/block/sda/queue/rq_affinity
for c in 4 6 2; do
  grep BLOCK /proc/softirqs >/tmp/before
  fio --name=probe --filename=/dev/sda --rw=randread --bs=4k --direct=1 --ioengine=psync \
    --cpus_allowed=$c --number_ios=200 --output=/dev/null
  grep BLOCK /proc/softirqs >/tmp/after
  # One line per submitting CPU: the BLOCK softirqs each CPU ran meanwhile.
  echo "$c $(cat /tmp/before /tmp/after | awk 'NR == 1 { for (i = 2; i <= NF; i++) b[i] = $i }
    NR == 2 { for (i = 2; i <= NF; i++) printf "%d ", $i - b[i] }')" >>$LAB_OUT/completions
done
"#;
    let b = boot("snc2", script, 600);
    assert_eq!(b.code, Some(0), "{}", b.log);
    let m = b.json("inspect.json");
    let node = |c: u64| u64::from(c % 4 >= 2);
    check_topology(&m, 8, &|c| c / 4, &node, &|c| vec![c], &|c| {
        range(c / 4 * 4, c / 4 * 4 + 3)
    });
    check_nohz_and_warnings(&b, &m);
    let sda = device(&m, "sda");
    assert_eq!(sda["node"], 0, "{sda}");
    let (on, near, far) = check_placement(&m, sda);
    assert_eq!(on, vec![5]);
    assert_eq!(near, vec![4], "the L3 sharers on node 1 are not near");
    assert_eq!(far, vec![2, 3, 6, 7]);
    let lines = b.text("completions");
    for line in lines.lines() {
        let v: Vec<u64> = line
            .split_whitespace()
            .map(|x| x.parse().unwrap())
            .collect();
        let (cpu, per_cpu) = (v[0], &v[1..]);
        let expect = if near.contains(&cpu) { 5 } else { cpu };
        assert!(
            per_cpu[expect as usize] >= 180,
            "I/O from CPU {cpu} should complete on CPU {expect}: {lines}"
        );
    }
    assert_eq!(lines.lines().count(), 3, "{lines}\n{}", b.log);
}

/// case 3's NVMe with poll queues (`nvme.poll_queues=2` on the kernel command line, which
/// scripts/lab hands to insmod): two interrupt-driven queues, two poll queues without an
/// interrupt, io_poll on; iolab runs both `hipri` cells (none is "not applicable"), and polled
/// I/O takes (almost) no device interrupts while interrupt-driven I/O takes about one each.
#[test]
fn nvme_poll_runs_hipri_cells_and_polling_drops_interrupts() {
    if !lab_ready() {
        return;
    }
    let script = r#"
$IOLAB inspect --json >$LAB_OUT/inspect.json 2>$LAB_OUT/inspect.json.err
$IOLAB inspect >$LAB_OUT/inspect.txt 2>&1
cat /sys/devices/system/cpu/nohz_full >$LAB_OUT/nohz_full.raw
cat >/tmp/exp.toml <<'T'
name = "lab nvme-poll hipri"
seed = 3
repetitions = 1
[target]
device = "nvme0n1"
[workload]
rw = "randread"
bs = "4k"
ioengine = "io_uring"
iodepth = 4
direct = 1
runtime = "2s"
time_based = true
[factors]
hipri = [false, true]
T
# SQLite's shared memory does not work over 9p: the database lives in the guest's /tmp.
$IOLAB run /tmp/exp.toml --db /tmp/lab.db >$LAB_OUT/run.txt 2>&1
$IOLAB show 1 --db /tmp/lab.db --json >$LAB_OUT/show.json 2>$LAB_OUT/show.json.err
nvme_ints() { awk '/nvme0q[1-9]/ { for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i } END { print s + 0 }' /proc/interrupts; }
for e in io_uring pvsync2; do for h in 0 1; do
  a=$(nvme_ints)
  fio --name=p --filename=/dev/nvme0n1 --rw=randread --bs=4k --direct=1 --ioengine=$e \
    --iodepth=1 --hipri=$h --number_ios=1000 --output=/dev/null
  echo "$e $h $(( $(nvme_ints) - a ))" >>$LAB_OUT/interrupts
done; done
# io_poll cannot change on 6.1: a write is ignored, and a factor of it is refused.
echo 0 >/sys/block/nvme0n1/queue/io_poll; cat /sys/block/nvme0n1/queue/io_poll >$LAB_OUT/io_poll
printf 'name = "p"\n[target]\ndevice = "nvme0n1"\n[workload]\nrw = "randread"\n[factors]\nio_poll = [0, 1]\n' >/tmp/io_poll.toml
$IOLAB run /tmp/io_poll.toml --dry-run >$LAB_OUT/io_poll.txt 2>&1 || true
# pvsync2's polling, which this kernel ignores: the polled cell is not applicable.
sed -i 's/io_uring/pvsync2/; s/^iodepth.*//' /tmp/exp.toml
$IOLAB run /tmp/exp.toml --db /tmp/lab2.db >$LAB_OUT/run2.txt 2>&1
$IOLAB show 1 --db /tmp/lab2.db --json >$LAB_OUT/show2.json 2>$LAB_OUT/show2.json.err
"#;
    let b = boot("nvme-poll", script, 600);
    assert_eq!(b.code, Some(0), "{}", b.log);
    let m = b.json("inspect.json");
    check_topology(&m, 4, &|_| 0, &|_| 0, &|c| vec![c], &|_| range(0, 3));
    check_nohz_and_warnings(&b, &m);
    let nvme = device(&m, "nvme0n1");
    assert_eq!(nvme["knobs"]["io_poll"], "1", "{nvme}");
    let queues = nvme["queues"].as_array().unwrap();
    assert_eq!(queues.len(), 4, "{nvme}");
    let with_irq: Vec<&Value> = queues.iter().filter(|q| !q["irq"].is_null()).collect();
    assert_eq!(
        with_irq.len(),
        2,
        "two poll queues have no interrupt: {nvme}"
    );
    for q in with_irq {
        assert_eq!(irq(&m, &q["irq"])["managed"], true);
    }
    check_placement(&m, nvme);
    // The text view names them: io_poll=1 and no interrupt while the others have one.
    let text = b.text("inspect.txt");
    let polled = text
        .lines()
        .filter(|l| {
            l.trim_start().starts_with("queue ") && l.ends_with("no interrupt: a poll queue")
        })
        .count();
    assert_eq!(polled, 2, "{text}");

    let shown = b.json("show.json");
    let cells = shown["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2, "{shown}");
    // The polled run was checked against the NVMe's interrupts, and it polled.
    assert_eq!(
        shown["basis"]["checks"]["polled_io_vs_interrupts"],
        serde_json::json!([1, 0, 0]),
        "{}",
        shown["basis"]
    );
    for c in cells {
        assert_eq!(c["failed"], serde_json::json!([]), "{c}");
        let iops = c["metrics"]["read_iops"]["mean"].as_f64().unwrap_or(0.0);
        assert!(iops > 0.0, "{} did not run: {c}", c["cell"]);
    }
    // 1000 I/Os each: about one interrupt per I/O without polling, almost none with it.
    let text = b.text("interrupts");
    let per = |engine_hipri: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{engine_hipri} ")))
            .unwrap_or_else(|| panic!("no `{engine_hipri}` line: {text}"))
            .trim()
            .parse()
            .unwrap()
    };
    assert!(
        per("io_uring 0") >= 500,
        "interrupt-driven I/O took few interrupts: {text}"
    );
    assert!(
        per("io_uring 1") <= 100,
        "polled I/O still took interrupts: {text}"
    );
    // Linux 5.18 and later ignore RWF_HIPRI for synchronous I/O: pvsync2 never polls here.
    assert!(
        per("pvsync2 1") >= 500,
        "pvsync2 polled on this kernel: {text}"
    );
    assert_eq!(b.text("io_poll").trim(), "1", "a write of 0 is ignored");
    let refused = b.text("io_poll.txt");
    assert!(
        refused.contains("`io_poll` cannot be changed on /dev/nvme0n1: Linux 5.16 and later"),
        "{refused}"
    );
    let shown = b.json("show2.json");
    let cells = shown["cells"].as_array().unwrap();
    let polled = cells.iter().find(|c| c["cell"] == "hipri=true").unwrap();
    let why = polled["not_applicable"].as_str().unwrap_or_default();
    assert!(why.contains("Linux 5.18 and later ignore"), "{polled}");
    let interrupts = cells.iter().find(|c| c["cell"] == "hipri=false").unwrap();
    assert!(
        interrupts["metrics"]["read_iops"]["mean"]
            .as_f64()
            .unwrap_or(0.0)
            > 0.0,
        "{interrupts}"
    );
}

/// An agent's fio server on Debian's kernel (Landlock ABI 2 on 6.1): started through the agent
/// protocol on the guest's NVMe disk for a reading session, it runs a reader's job, and a
/// job from anyone else who reaches the port writes neither the device nor a file and starts
/// no program (`exec_prerun`; the ELF loader starting bash to call a listener back). It runs
/// with few capabilities and a seccomp filter, and nothing of it is left after `bye`.
#[test]
fn an_agents_fio_server_on_debians_kernel_reads_and_can_change_nothing() {
    if !lab_ready() {
        return;
    }
    let script = r#"
ip link set lo up
export IOLAB_STATE_DIR=/tmp/state
mkdir -p /tmp/h
mkfifo /tmp/agent.in
$IOLAB agent </tmp/agent.in >$LAB_OUT/agent.out 2>$LAB_OUT/agent.err &
agent=$!
exec 3>/tmp/agent.in
echo '{"op":"fio_serve","listen":"127.0.0.1,8765","device":"nvme0n1","writes":false}' >&3
for i in $(seq 240); do grep -q '"fio_serve"' $LAB_OUT/agent.out && break; sleep 0.5; done
server=$(pgrep -o -f 'server=ip:127.0.0.1,8765')
grep -E '^(CapEff|Seccomp|NoNewPrivs):' /proc/$server/status >$LAB_OUT/status
readlink /proc/$server/ns/pid >$LAB_OUT/server_pidns
readlink /proc/self/ns/pid >$LAB_OUT/own_pidns
printf '[read]\nfilename=/dev/nvme0n1\nrw=read\nbs=4k\nsize=64k\ndirect=1\n' >/tmp/read.fio
fio --client=ip:127.0.0.1,8765 /tmp/read.fio >$LAB_OUT/read.txt 2>&1
dd if=/dev/nvme0n1 bs=64k count=1 2>/dev/null | md5sum >$LAB_OUT/before
python3 -c 'import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 8799)); s.listen(); s.settimeout(60)
open("/tmp/listening", "w").close()
try:
    s.accept(); open("/tmp/h/called", "w").write("yes")
except OSError:
    pass' &
listener=$!
for i in $(seq 240); do [ -e /tmp/listening ] && break; sleep 0.5; done
cat >/tmp/hostile.fio <<'J'
[device]
filename=/dev/nvme0n1
rw=write
bs=4k
size=64k
direct=1
[file]
filename=/tmp/h/planted
rw=write
bs=4k
size=4k
[prerun]
filename=/tmp/h/planted-too
rw=write
size=4k
exec_prerun=touch /tmp/h/ran-prerun
[callback]
ioengine=exec
std_redirect=0
program=/lib64/ld-linux-x86-64.so.2
arguments=/bin/bash -c echo>/dev/tcp/127.0.0.1/8799
runtime=1
time_based=1
J
fio --client=ip:127.0.0.1,8765 /tmp/hostile.fio >$LAB_OUT/hostile.txt 2>&1
dd if=/dev/nvme0n1 bs=64k count=1 2>/dev/null | md5sum >$LAB_OUT/after
echo '{"op":"bye"}' >&3
exec 3>&-
wait $agent
kill $listener 2>/dev/null
ls /tmp/h >$LAB_OUT/planted
pgrep -f 'server=ip:127.0.0.1,8765' | wc -l >$LAB_OUT/left
"#;
    let b = boot("nvme-poll", script, 600);
    assert_eq!(b.code, Some(0), "{}", b.log);
    let agent = b.text("agent.out");
    assert!(
        agent.contains("\"op\":\"fio_serve\",\"result\"") && agent.contains("\"ok\":true"),
        "{agent}\n{}",
        b.text("agent.err")
    );
    let read = b.text("read.txt");
    assert!(
        read.contains("READ: bw=") && read.contains("err= 0"),
        "{read}"
    );
    assert_eq!(
        b.text("before"),
        b.text("after"),
        "{}",
        b.text("hostile.txt")
    );
    assert_eq!(b.text("planted").trim(), "", "{}", b.text("hostile.txt"));
    // Only CAP_IPC_LOCK, CAP_SYS_ADMIN and CAP_SYS_NICE; a filter (2); no new privileges.
    let status = b.text("status");
    for line in ["CapEff:\t0000000000a04000", "Seccomp:\t2", "NoNewPrivs:\t1"] {
        assert!(status.contains(line), "{line}: {status}");
    }
    assert_ne!(b.text("server_pidns"), b.text("own_pidns"));
    assert_eq!(b.text("left").trim(), "0");
}

/// Case 4's stacking on Debian's kernel: a device-mapper target and an md RAID 0, each striped
/// over two loop devices in 4 KiB chunks, read in 64 KiB direct reads and traced. Both cut
/// every bio into 4 KiB pieces (dm's own requests average 4 KiB), in the two forms of split
/// the kernel traces: md names each front piece in an X and completes each piece; dm names
/// what is left after each piece and completes the bio once, naming its last piece. Either
/// way every bio (or piece) gets its Q2C, the trace's bytes agree with fio's, and the trace's
/// diagnosis says each bio was cut into 16 pieces of 4 KiB.
/// A results database on a network filesystem: SQLite's write-ahead log cannot work there and
/// SQLite says only "disk I/O error". The guest's $LAB_OUT is a 9p export (whose `statfs`
/// reports the host's filesystem, so the mount table must decide): the error names it.
#[test]
fn a_database_on_a_network_filesystem_is_an_error_that_names_it() {
    if !lab_ready() {
        return;
    }
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fio/randread_2jobs_jsonplus.out");
    let script = format!(
        "$IOLAB import {} --db $LAB_OUT/remote.db >$LAB_OUT/import.txt 2>&1; echo $? >$LAB_OUT/rc\n",
        fixture.display()
    );
    let b = boot("nvme-poll", &script, 300);
    assert_eq!(b.code, Some(0), "{}", b.log);
    assert_eq!(b.text("rc").trim(), "1", "{}", b.text("import.txt"));
    assert!(
        b.text("import.txt")
            .contains("disk I/O error: the file is on a network filesystem (9p)"),
        "{}",
        b.text("import.txt")
    );
}

/// Four loop devices of $MB MiB each (the caller sets MB first): a dm `striped` target
/// over the first two ($A, $B) and an md RAID 0 without a superblock over the others ($C, $E),
/// `md0`, set up through sysfs (no mdadm here); both stripe in 4 KiB chunks.
const STRIPES: &str = r#"
modprobe dm_mod; modprobe md_mod; modprobe raid0; modprobe loop
for f in a b c d; do truncate -s ${MB}M /tmp/$f.img; done
A=$(losetup -f --show /tmp/a.img); B=$(losetup -f --show /tmp/b.img)
echo "0 $(($MB * 4096)) striped 2 8 $A 0 $B 0" | dmsetup create stripes
C=$(losetup -f --show /tmp/c.img); E=$(losetup -f --show /tmp/d.img)
echo md0 >/sys/module/md_mod/parameters/new_array
M=/sys/block/md0/md
echo none >$M/metadata_version; echo raid0 >$M/level; echo 4096 >$M/chunk_size
echo 2 >$M/raid_disks
for l in $C $E; do cat /sys/block/${l#/dev/}/dev >$M/new_dev; done
i=0; for d in $M/dev-*; do echo 0 >$d/offset; echo $(($MB * 1024)) >$d/size; echo $i >$d/slot; i=$((i+1)); done
echo active >$M/array_state
"#;

/// The rule that protects users, on a real kernel's stacking: a loop device below a dm
/// `striped` target, one below an md RAID 0 (which also claims it), and one whose partition
/// table the kernel has read are each refused for a writing experiment, with the reason, and
/// none of their bytes change. Naming the holder as expendable does not free its leg; naming
/// the leg does (dry run only).
#[test]
fn writes_to_devices_under_dm_md_or_with_partitions_are_refused() {
    if !lab_ready() {
        return;
    }
    let script = format!("MB=64{STRIPES}")
        + r#"
truncate -s 64M /tmp/p.img
# An MBR with one Linux partition from sector 2048 to the end (no sfdisk here).
printf '\000\000\000\000\203\000\000\000\000\010\000\000\000\370\001\000' |
  dd of=/tmp/p.img bs=1 seek=446 conv=notrunc 2>/dev/null
printf '\125\252' | dd of=/tmp/p.img bs=1 seek=510 conv=notrunc 2>/dev/null
P=$(losetup -f --show -P /tmp/p.img)
udevadm settle 2>/dev/null; ls /sys/block/${P#/dev/} >$LAB_OUT/p-entries
echo "${A#/dev/} ${C#/dev/} ${P#/dev/}" >$LAB_OUT/targets
for t in $A $C $P; do md5sum $t; done >$LAB_OUT/before
for t in $A $C $P; do
n=${t#/dev/}
cat >/tmp/w-$n.toml <<T
name = "writes to $n"
repetitions = 1
[target]
device = "$n"
[workload]
rw = "randwrite"
bs = "4k"
direct = 1
size = "16m"
runtime = "1s"
time_based = true
T
$IOLAB run /tmp/w-$n.toml --db /tmp/w.db >$LAB_OUT/run-$n.txt 2>&1; echo $? >$LAB_OUT/run-$n.rc
done
n=${A#/dev/}
$IOLAB run /tmp/w-$n.toml --db /tmp/w.db --destructive-device dm-0 >$LAB_OUT/holder.txt 2>&1
echo $? >$LAB_OUT/holder.rc
$IOLAB run --dry-run /tmp/w-$n.toml --destructive-device $n >$LAB_OUT/named.txt 2>&1
echo $? >$LAB_OUT/named.rc
for t in $A $C $P; do md5sum $t; done >$LAB_OUT/after
"#;
    let b = boot("nvme-poll", &script, 400);
    assert_eq!(b.code, Some(0), "{}", b.log);
    let targets = b.text("targets");
    let [dm_leg, md_leg, parted]: [&str; 3] = targets
        .split_whitespace()
        .collect::<Vec<_>>()
        .try_into()
        .unwrap_or_else(|t| panic!("three targets: {t:?}"));
    assert!(
        b.text("p-entries").contains(&format!("{parted}p1")),
        "the kernel read no partition: {}",
        b.text("p-entries")
    );
    let refused = |dev: &str, reasons: &[&str]| {
        let said = b.text(&format!("run-{dev}.txt"));
        assert_eq!(
            b.text(&format!("run-{dev}.rc")).trim(),
            "1",
            "{dev}: {said}"
        );
        assert!(
            said.contains(&format!(
                "refusing to write to /dev/{dev}: it may hold data"
            )),
            "{dev}: {said}"
        );
        for why in reasons {
            assert!(said.contains(why), "{dev}: no `{why}` in: {said}");
        }
    };
    refused(dm_leg, &[&format!("dm-0 is built on {dm_leg}")]);
    refused(
        md_leg,
        &[
            &format!("md0 is built on {md_leg}"),
            &format!("{md_leg} is claimed by the kernel"),
        ],
    );
    refused(parted, &[&format!("it has partitions ({parted}p1)")]);
    let holder = b.text("holder.txt");
    assert_ne!(b.text("holder.rc").trim(), "0", "{holder}");
    assert!(holder.contains("--destructive-device dm-0"), "{holder}");
    assert_eq!(b.text("named.rc").trim(), "0", "{}", b.text("named.txt"));
    assert_eq!(
        b.text("before"),
        b.text("after"),
        "a refused device changed"
    );
}

#[test]
fn dm_and_md_stripes_split_every_bio_and_the_trace_completes_each() {
    if !lab_ready() {
        return;
    }
    let script = format!("MB=128{STRIPES}")
        + r#"
D=$(ls /sys/block | grep '^dm-' | head -1)
echo $D >$LAB_OUT/dm
echo "$D ${A#/dev/} ${B#/dev/}" >$LAB_OUT/legs
echo "md0 ${C#/dev/} ${E#/dev/}" >>$LAB_OUT/legs
# Every experiment here reads 64 KiB at depth 4 for a second.
cat >/tmp/workload.toml <<'T'
[workload]
rw = "read"
bs = "64k"
ioengine = "libaio"
iodepth = 4
direct = 1
size = "64m"
runtime = "1s"
time_based = true
T
for dev in $D md0; do
set -- $(grep "^$dev " $LAB_OUT/legs); L1=$2; L2=$3
cat - /tmp/workload.toml >/tmp/$dev.toml <<T
name = "lab stripes on $dev"
seed = 4
repetitions = 1
trace = true
[target]
device = "$dev"
T
$IOLAB run /tmp/$dev.toml --db /tmp/$dev.db >$LAB_OUT/run-$dev.txt 2>&1
$IOLAB show 1 --db /tmp/$dev.db --json --metric trace_q2c_mean_us --metric trace_q2c_count \
  --metric $dev:dev_avg_rq_kb --metric read_clat_mean_us --metric trace_completed_mb \
  --metric $L1:trace_q2c_count --metric $L2:trace_q2c_count \
  --metric $L1:trace_completed_mb --metric $L2:trace_completed_mb \
  --metric $L1:trace_q2c_mean_us --metric $L2:trace_q2c_mean_us \
  >$LAB_OUT/show-$dev.json 2>$LAB_OUT/show-$dev.json.err
$IOLAB run --dry-run /tmp/$dev.toml >$LAB_OUT/dry-$dev.txt 2>&1
$IOLAB trace analyze --json /tmp/$dev.db.traces/experiment-1/cell0-round1/$dev \
  >$LAB_OUT/analyze-$dev.json 2>$LAB_OUT/analyze-$dev.json.err
done
# The striped device and both its legs in one recording: 200 bios of 64 KiB, cut in 4 KiB.
for d in $D ${A#/dev/} ${B#/dev/}; do echo "$d $(cat /sys/block/$d/dev)"; done >$LAB_OUT/stack-devs
$IOLAB trace record --json -d $D -d $A -d $B -o /tmp/stack -- fio --name=s \
  --filename=/dev/$D --rw=read --bs=64k --direct=1 --ioengine=psync \
  --number_ios=200 --size=64m --output=/dev/null >$LAB_OUT/stack-record.json 2>$LAB_OUT/stack.err
$IOLAB trace analyze --json /tmp/stack >$LAB_OUT/stack.json 2>>$LAB_OUT/stack.err
# The striped device as a hypervisor's volume: fio runs on a "host" (a fio server here) and
# this machine samples and traces its own dm device and the legs below it.
set -- $(grep "^$D " $LAB_OUT/legs); L1=$2; L2=$3
ip link set lo up
fio --server=127.0.0.1,8765 >/dev/null 2>&1 &
FS=$!
sleep 1
cat - /tmp/workload.toml >/tmp/local.toml <<T
name = "lab local devices"
seed = 4
repetitions = 1
trace = true
[target]
device = "$D"
hosts = ["127.0.0.1,8765"]
local_devices = ["$D"]
T
$IOLAB run --dry-run /tmp/local.toml >$LAB_OUT/dry-local.txt 2>&1
$IOLAB run /tmp/local.toml --db /tmp/local.db >$LAB_OUT/run-local.txt 2>&1
# The striped device as a controlled host's: this guest reached over ssh at 127.0.0.1, whose
# agent samples and traces it with the legs below it.
S=/tmp/ssh; mkdir -p $S /run/sshd; chmod 700 $S
ssh-keygen -q -t ed25519 -N '' -f $S/host_key; ssh-keygen -q -t ed25519 -N '' -f $S/id
cp $S/id.pub $S/authorized_keys
echo "127.0.0.1 $(cat $S/host_key.pub)" >$S/known_hosts
printf '%s\n' "ListenAddress 127.0.0.1:22" "HostKey $S/host_key" "PidFile none" \
  "AuthorizedKeysFile $S/authorized_keys" "PermitRootLogin prohibit-password" \
  "PasswordAuthentication no" "KbdInteractiveAuthentication no" "UsePAM no" \
  "StrictModes no" "SetEnv IOLAB_STATE_DIR=/tmp/agent-state" >$S/sshd_config
printf '%s\n' "Host *" "User root" "IdentityFile $S/id" "IdentitiesOnly yes" \
  "UserKnownHostsFile $S/known_hosts" "GlobalKnownHostsFile /dev/null" \
  "StrictHostKeyChecking yes" "ConnectTimeout 60" "LogLevel ERROR" >$S/config
/usr/sbin/sshd -f $S/sshd_config -E $LAB_OUT/sshd.log
cat - /tmp/workload.toml >/tmp/host.toml <<T
name = "lab stripes on a host"
seed = 4
repetitions = 1
trace = true
[[target.host]]
ssh = "127.0.0.1"
fio = "127.0.0.1,8765"
device = "$D"
T
export IOLAB_SSH="-F $S/config"
$IOLAB run --dry-run --remote-iolab $IOLAB /tmp/host.toml >$LAB_OUT/dry-host.txt 2>&1
$IOLAB run --remote-iolab $IOLAB /tmp/host.toml --db /tmp/host.db >$LAB_OUT/run-host.txt 2>&1
H=127.0.0.1
$IOLAB show 1 --db /tmp/host.db --json --metric read_iops --metric $H:dev_r_per_s \
  --metric $H:$L1:dev_r_per_s --metric $H:$L2:dev_r_per_s --metric $H:$L1:dev_avg_rq_kb \
  --metric $H:trace_q2c_count --metric $H:$L1:trace_q2c_count --metric $H:$L2:trace_q2c_count \
  --metric $H:trace_completed_mb --metric $H:$L1:trace_completed_mb \
  --metric $H:$L2:trace_completed_mb >$LAB_OUT/show-host.json 2>$LAB_OUT/show-host.json.err
kill $FS
$IOLAB show 1 --db /tmp/local.db --json --metric read_iops \
  --metric local:$D:dev_r_per_s --metric local:$D:dev_avg_rq_kb \
  --metric local:$L1:dev_r_per_s --metric local:$L2:dev_r_per_s \
  --metric local:$L1:dev_avg_rq_kb --metric local:$D:trace_q2c_count \
  --metric local:$L1:trace_q2c_count --metric local:$L2:trace_q2c_count \
  --metric local:$D:trace_completed_mb --metric local:$L1:trace_completed_mb \
  --metric local:$L2:trace_completed_mb >$LAB_OUT/show-local.json 2>$LAB_OUT/show-local.json.err
"#;
    let b = boot("nvme-poll", &script, 600);
    assert_eq!(b.code, Some(0), "{}", b.log);
    let dm = b.text("dm").trim().to_string();
    check_stack_recording(&b);
    check_local_devices(&b, &dm);
    check_controlled_host(&b, &dm);
    for dev in [dm.as_str(), "md0"] {
        let shown = b.json(&format!("show-{dev}.json"));
        assert_eq!(
            shown["basis"]["checks"]["trace_bytes_vs_fio"],
            serde_json::json!([1, 0, 0]),
            "{dev}: {shown}"
        );
        assert_eq!(shown["basis"]["findings"], serde_json::json!([]), "{shown}");
        let m = &shown["cells"][0]["metrics"];
        let mean = |name: &str| {
            m[name]["mean"]
                .as_f64()
                .unwrap_or_else(|| panic!("{dev}: no {name}: {shown}"))
        };
        assert!(mean("trace_q2c_count") > 100.0, "{dev}: {m}");
        let (q2c, clat) = (mean("trace_q2c_mean_us"), mean("read_clat_mean_us"));
        assert!(
            q2c > 0.0 && q2c < 2.0 * clat,
            "{dev}: Q2C {q2c} us vs fio's clat {clat} us"
        );
        if dev == dm {
            assert!(
                (mean(&format!("{dm}:dev_avg_rq_kb")) - 4.0).abs() < 0.1,
                "{m}"
            );
        }
        // The devices below were traced with it, each on its own: the pieces of its bios,
        // every byte of them, each done before what it is part of. dm completes a bio once,
        // after its 16 pieces; md splits it (X) and completes each piece, and the run counts
        // its bios as issued, each once: on both, 16 pieces to a bio.
        let legs = legs_of(&b, dev);
        let of_legs = |name: &str| {
            legs.iter()
                .map(|l| mean(&format!("{l}:{name}")))
                .sum::<f64>()
        };
        let (pieces, counted) = (of_legs("trace_q2c_count"), mean("trace_q2c_count"));
        // Fewer than 16 only for the few unsplit reads of a new device; more, not even by
        // half a piece (a bio counted twice, or pieces for bios: 1 to 1).
        assert!(
            (15.0 * counted..=16.5 * counted).contains(&pieces),
            "{dev}: {pieces} pieces for {counted} bios: {m}"
        );
        for leg in &legs {
            let own = mean(&format!("{leg}:trace_q2c_mean_us"));
            assert!(own < mean("trace_q2c_mean_us"), "{dev}: {m}");
        }
        let (below, own) = (of_legs("trace_completed_mb"), mean("trace_completed_mb"));
        assert!(
            (below - own).abs() < 1e-6 * own,
            "{dev}: {below} MB below, {own} MB: {m}"
        );
        assert!(
            b.text(&format!("dry-{dev}.txt")).contains(&format!(
                "and the devices below it, {} and {} (together",
                legs[0], legs[1]
            )),
            "{}",
            b.text(&format!("dry-{dev}.txt"))
        );
        // The trace's diagnosis names the cutting: 16 pieces of 4 KiB per 64 KiB bio split
        // (over the bios split: the few unsplit 4 KiB reads of a new device are left out).
        let analysed = b.json(&format!("analyze-{dev}.json"));
        let findings = analysed["findings"].as_array().unwrap();
        let split = findings
            .iter()
            .find(|f| f["code"] == "split_bios")
            .and_then(|f| f["message"].as_str())
            .unwrap_or_else(|| panic!("{dev}: {findings:?}"));
        let words: Vec<&str> = split.split_whitespace().collect();
        let (pieces, kib): (f64, f64) = (words[3].parse().unwrap(), words[8].parse().unwrap());
        assert!(
            (15.5..=16.0).contains(&pieces) && kib == 4.0,
            "{dev}: {split}"
        );
    }
}

/// The two loop devices below `dev` (dm or md), as the guest's script listed them.
fn legs_of(b: &Boot, dev: &str) -> Vec<String> {
    let legs = b.text("legs");
    let line = legs.lines().find(|l| l.starts_with(&format!("{dev} ")));
    let legs: Vec<String> = line
        .unwrap()
        .split_whitespace()
        .skip(1)
        .map(String::from)
        .collect();
    assert_eq!(legs.len(), 2, "{dev}: {legs:?}");
    legs
}

/// The metrics of the first cell in `show_file` (`iolab show --json`), and their means by
/// name; a missing one fails the test with the shown JSON and the files `context` names.
fn first_cell(b: &Boot, show_file: &str, context: &[&str]) -> (Value, impl Fn(&str) -> f64) {
    let shown = b.json(show_file);
    let context: Vec<String> = context.iter().map(|f| b.text(f)).collect();
    let metrics = shown["cells"][0]["metrics"].clone();
    let mean = move |name: &str| {
        shown["cells"][0]["metrics"][name]["mean"]
            .as_f64()
            .unwrap_or_else(|| panic!("no {name}: {shown}\n{}", context.join("\n")))
    };
    (metrics, mean)
}

/// `local_devices` in a run across hosts: this machine's dm device and the legs below it,
/// sampled while a fio server ran the reads: the legs completed the dm device's 4 KiB pieces
/// between them, at its rate.
fn check_local_devices(b: &Boot, dm: &str) {
    let legs = legs_of(b, dm);
    let dry = b.text("dry-local.txt");
    assert!(
        dry.contains(&format!(
            "this machine's {dm}, and the devices below, {} and {}, are sampled while the hosts run",
            legs[0], legs[1]
        )),
        "{dry}"
    );
    let (m, mean) = first_cell(b, "show-local.json", &["run-local.txt"]);
    assert!(mean("read_iops") > 0.0, "{m}");
    let on_dm = mean(&format!("local:{dm}:dev_r_per_s"));
    let on_legs = mean(&format!("local:{}:dev_r_per_s", legs[0]))
        + mean(&format!("local:{}:dev_r_per_s", legs[1]));
    assert!(
        on_dm > 0.0 && (on_legs / on_dm - 1.0).abs() < 0.05,
        "{dm} {on_dm}/s, its legs {on_legs}/s: {m}"
    );
    for name in [
        format!("local:{dm}:dev_avg_rq_kb"),
        format!("local:{}:dev_avg_rq_kb", legs[0]),
    ] {
        assert!((mean(&name) - 4.0).abs() < 0.1, "{name}: {m}");
    }
    // With no host to place fio's measured interval, the dm device's own I/O placed it: its
    // rate is fio's, 16 pieces a read (over the whole sampled span, with fio's server
    // starting a second late, it was a quarter of that).
    let pieces = 16.0 * mean("read_iops");
    assert!(
        (on_dm / pieces - 1.0).abs() < 0.15,
        "{dm} {on_dm}/s, fio {pieces} pieces/s: {m}"
    );
    // And traced: the dm device's bios, each cut into 16 pieces on the legs below, every
    // byte of them.
    let of_legs = |name: &str| {
        legs.iter()
            .map(|l| mean(&format!("local:{l}:{name}")))
            .sum::<f64>()
    };
    let bios = mean(&format!("local:{dm}:trace_q2c_count"));
    assert!(
        bios > 100.0 && of_legs("trace_q2c_count") >= 15.0 * bios,
        "{m}"
    );
    let (own, below) = (
        mean(&format!("local:{dm}:trace_completed_mb")),
        of_legs("trace_completed_mb"),
    );
    assert!(
        (below - own).abs() < 1e-6 * own,
        "{own} MB, {below} MB below: {m}"
    );
    assert!(
        dry.contains(&format!(
            "this machine records a block trace of its own devices, {dm}, {} and {}",
            legs[0], legs[1]
        )),
        "{dry}"
    );
}

/// The dm device as a controlled host's (this guest over ssh): its agent sampled and traced
/// the legs below it too, whose figures come back under the host's name.
fn check_controlled_host(b: &Boot, dm: &str) {
    let legs = legs_of(b, dm);
    let dry = b.text("dry-host.txt");
    assert!(
        dry.contains(&format!(
            "(built from {} and {}: sampled and traced with it",
            legs[0], legs[1]
        )),
        "{dry}"
    );
    let (m, mean) = first_cell(b, "show-host.json", &["run-host.txt", "show-host.json.err"]);
    let host = |name: &str| mean(&format!("127.0.0.1:{name}"));
    let of_legs = |name: &str| {
        legs.iter()
            .map(|l| host(&format!("{l}:{name}")))
            .sum::<f64>()
    };
    let (on_dm, on_legs) = (host("dev_r_per_s"), of_legs("dev_r_per_s"));
    assert!(
        on_dm > 0.0 && (on_legs / on_dm - 1.0).abs() < 0.05,
        "{dm} {on_dm}/s, its legs {on_legs}/s: {m}"
    );
    let leg_kb = host(&format!("{}:dev_avg_rq_kb", legs[0]));
    assert!((leg_kb - 4.0).abs() < 0.1, "{m}");
    let bios = host("trace_q2c_count");
    assert!(
        bios > 100.0 && of_legs("trace_q2c_count") >= 15.0 * bios,
        "{m}"
    );
    let (own, below) = (host("trace_completed_mb"), of_legs("trace_completed_mb"));
    assert!(
        (below - own).abs() < 1e-6 * own,
        "{own} MB, {below} MB below: {m}"
    );
}

/// A device-mapper stripe recorded together with both its loop devices: each device's own
/// figures, and every byte the striped device completed completed on one of its legs.
fn check_stack_recording(b: &Boot) {
    let devs: Vec<(String, String)> = b
        .text("stack-devs")
        .lines()
        .map(|l| {
            let (name, dev) = l.split_once(' ').unwrap();
            (name.to_string(), dev.replace(':', ","))
        })
        .collect();
    let recorded = b.json("stack-record.json");
    let names: Vec<&str> = devs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(recorded["devices"], serde_json::json!(names), "{recorded}");
    let analysed = b.json("stack.json");
    let report = |i: usize| {
        analysed["devices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["dev"] == devs[i].1.as_str())
            .unwrap_or_else(|| panic!("{} not in {}", devs[i].1, b.text("stack.err")))
    };
    let q2c = |d: &Value| {
        (
            d["latency"]["q2c"]["avg"].as_f64().unwrap(),
            d["latency"]["q2c"]["n"].as_u64().unwrap(),
        )
    };
    let bytes = |d: &Value| d["bio_bytes_completed"].as_u64().unwrap();
    let striped = report(0);
    assert!(
        striped["kind"].as_str().unwrap().starts_with("bio-based"),
        "{striped}"
    );
    assert!(bytes(striped) >= 200 * 65536, "{striped}");
    assert!(q2c(striped).1 >= 200, "{striped}");
    let legs = [report(1), report(2)];
    for leg in legs {
        let (name, n) = (&leg["dev"], q2c(leg).1);
        assert!(n >= 1600, "{name}: {n} bios completed");
        assert_eq!(leg["never_completed"]["bios"], 0, "{name}");
        assert_eq!(leg["never_completed"]["requests"], 0, "{name}");
        // A bio of the striped device completes after the last of its pieces.
        assert!(q2c(striped).0 > q2c(leg).0, "{striped} {leg}");
    }
    assert_eq!(bytes(legs[0]) + bytes(legs[1]), bytes(striped));
    let all = analysed["all"]["q2c"]["n"].as_u64().unwrap();
    assert_eq!(all, q2c(striped).1 + q2c(legs[0]).1 + q2c(legs[1]).1);
}

/// HTTP downloads through NIC K's port forward (127.0.0.1 only), in four threads, until the
/// guest writes `done` into its export or 5 minutes pass. Bounded in count and time.
fn drive_http(out: &Path, port_base: u16) {
    use std::io::{Read, Write};
    let deadline = Instant::now() + std::time::Duration::from_secs(240);
    while !out.join("ready").exists() {
        if Instant::now() > deadline || out.join(".lab/rc").exists() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let stop = Instant::now() + std::time::Duration::from_secs(300);
    std::thread::scope(|s| {
        for k in 0..4u16 {
            s.spawn(move || {
                for _ in 0..20_000 {
                    if out.join("done").exists() || Instant::now() > stop {
                        break;
                    }
                    let Ok(mut c) = std::net::TcpStream::connect(("127.0.0.1", port_base + k))
                    else {
                        std::thread::sleep(std::time::Duration::from_millis(200));
                        continue;
                    };
                    let _ = c.set_read_timeout(Some(std::time::Duration::from_secs(10)));
                    let _ = c.write_all(b"GET /f HTTP/1.0\r\nHost: lab\r\n\r\n");
                    let mut sink = Vec::new();
                    let _ = c.read_to_end(&mut sink);
                    // A pause between downloads: steady interrupts without starving the
                    // guest's TCG vCPUs of this machine's two cores.
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
            });
        }
    });
}

/// The ht4 guest's NICs under traffic, and the steps every balancing check takes with them.
/// It serves downloads for `drive_http` and measures the rates with `irq top`. `pin` pins
/// every NIC interrupt to CPU 0 (a start-up script's mistake); `pile` pins them, waits until
/// they have fired there (x86 moves an interrupt when it next fires) and allows all CPUs
/// again: x86 keeps an interrupt where it is when the new mask contains its CPU, so they stay
/// piled on CPU 0; `affs` lists every IRQ's mask (one process: under TCG each fork costs
/// about a second); `put_back` restores the NICs' masks as found.
const NICS_UNDER_TRAFFIC: &str = r#"
mkdir -p /tmp/www && head -c 2000000 /dev/zero >/tmp/www/f
(cd /tmp/www && exec python3 -m http.server 8000 >/dev/null 2>&1) &
for i in $(seq 100); do ss -ltn | grep -q ':8000 ' && break; sleep 0.2; done
touch $LAB_OUT/ready
sleep 3
$IOLAB irq top --json --interval 3s -n 1 >$LAB_OUT/top.json 2>$LAB_OUT/top.json.err
nics=$(awk '/-input\.|-output\./ { sub(":", "", $1); print $1 }' /proc/interrupts)
echo $nics >$LAB_OUT/nics
affs() { grep -H . /proc/irq/*/smp_affinity; }
pin() { for n in $nics; do echo 0 >/proc/irq/$n/smp_affinity_list; done; }
pile() { pin; sleep 2; for n in $nics; do echo 0-7 >/proc/irq/$n/smp_affinity_list; done; }
# Where each NIC interrupt is now and its mask (`read`: no fork), to put them back at the end.
for n in $nics; do read e </proc/irq/$n/effective_affinity_list; read a </proc/irq/$n/smp_affinity_list; echo "$n $e $a"; done >/tmp/nic-orig
# Heavy: from half the 4th busiest NIC interrupt's rate in `irq top` with all of them piled on
# CPU 0, the load the balancing steps start from, so the four busiest count as heavy there.
# TCG's rates are low and vary with this machine's load, and one vCPU serving every NIC's
# softirqs carries less traffic than eight: a threshold taken from the spread load once left
# every piled interrupt light, and the daemon saw nothing to move.
pile; sleep 1
$IOLAB irq top --json --interval 3s -n 1 >$LAB_OUT/top-piled.json 2>$LAB_OUT/top-piled.json.err
put_back() {
  while read n e a; do echo $e >/proc/irq/$n/smp_affinity_list; done </tmp/nic-orig
  sleep 1
  while read n e a; do echo $a >/proc/irq/$n/smp_affinity_list; done </tmp/nic-orig
}
H="--heavy $(python3 -c '
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
nic = sorted((r["total"] for r in rows if "-input." in r["name"] or "-output." in r["name"]), reverse=True)
print(max(10, round(nic[3] / 2)) if len(nic) >= 4 else 10)' $LAB_OUT/top-piled.json)"
echo "$H" >$LAB_OUT/heavy
"#;

/// The ht4 guest's balancing steps, under traffic (after `NICS_UNDER_TRAFFIC`).
const BALANCING: &str = r#"
pile; sleep 1
affs >$LAB_OUT/aff.piled
$IOLAB irq apply $H --over 3s --json >$LAB_OUT/apply.json 2>$LAB_OUT/apply.json.err
affs >$LAB_OUT/aff.applied
$IOLAB irq rollback --json >$LAB_OUT/rollback.json 2>$LAB_OUT/rollback.json.err
affs >$LAB_OUT/aff.rolled-back
pile; sleep 1
affs >$LAB_OUT/aff.daemon-before
# TCG's low rates swing by a third between looks: the daemon moves only for a 50% gain (the
# pile-up on CPU 0 gives far more), so noise does not make it move again (with 30%, a swing
# once did, twelve seconds after the first moves). A guest that stalls (a 2 s look once took
# 10 s under a loaded host) can: eight looks leave three quiet ones after such a move.
$IOLAB irq daemon $H --min-gain 50 --min-interval 2s --max-interval 2s --cycles 8 >$LAB_OUT/daemon.out 2>$LAB_OUT/daemon.log
affs >$LAB_OUT/aff.daemon-after
pin; sleep 1
affs >$LAB_OUT/aff.pinned
$IOLAB irq plan $H --over 3s --json >$LAB_OUT/pinned-plan.json 2>$LAB_OUT/pinned-plan.json.err
$IOLAB irq plan $H --over 3s >$LAB_OUT/pinned-plan.txt 2>&1
$IOLAB irq apply $H --over 3s --unpin all --ban-cpus 1 --json >$LAB_OUT/unpin.json 2>$LAB_OUT/unpin.json.err
affs >$LAB_OUT/aff.unpinned
# The traffic stops before the pins come back: eight NICs' softirqs on one TCG vCPU locked it
# up (the watchdog said so) and kept the guest from powering off.
touch $LAB_OUT/done
$IOLAB irq rollback --json >$LAB_OUT/rollback2.json 2>$LAB_OUT/rollback2.json.err
affs >$LAB_OUT/aff.pinned-again
put_back
"#;

/// Where on / near / far put a workload against eth0's interrupts as found, on the ht4 guest.
const HT4_PLACEMENT: &str = r#"
cat >/tmp/place.toml <<'T'
name = "lab ht4 placement"
engine = "iperf3"
[target]
nic = "eth0"
[iperf3]
server = "10.0.10.2"
[factors]
placement = ["on", "near", "far"]
T
$IOLAB run /tmp/place.toml --db /tmp/place.db --dry-run >$LAB_OUT/place.txt 2>&1
"#;

/// On one node of four packages with Hyper-Threading, near is the SMT sibling of the CPUs
/// that take eth0's interrupts (it shares every cache with them) and far every CPU of the
/// packages without one: not "near = the rest of the node, nothing far".
fn check_ht4_placement(b: &Boot) {
    let text = b.text("place.txt");
    // A cell's CPUs, or None where it is not applicable.
    let placed = |level: &str| -> Option<Vec<u32>> {
        let mut lines = text.lines();
        lines
            .find(|l| l.trim_end().ends_with(&format!("placement={level}")))
            .unwrap_or_else(|| panic!("no {level} cell: {text}"));
        let line = lines.next().unwrap_or_default();
        if line.contains("not applicable") {
            return None;
        }
        let list = line
            .split_once(" on CPU")
            .and_then(|(_, r)| r.trim_start_matches('s').trim().split_once(':'))
            .unwrap_or_else(|| panic!("{level} is not placed: {line}\n{text}"))
            .0;
        Some(iolab::sys::parse::cpulist(list).unwrap())
    };
    let on = placed("on").unwrap_or_else(|| panic!("{text}"));
    let package = |c: &u32| c / 2;
    let mut near: Vec<u32> = on
        .iter()
        .map(|c| c ^ 1)
        .filter(|c| !on.contains(c))
        .collect();
    near.sort_unstable();
    near.dedup();
    let far: Vec<u32> = (0..8)
        .filter(|c| !on.iter().any(|o| package(o) == package(c)))
        .collect();
    let some = |v: Vec<u32>| (!v.is_empty()).then_some(v);
    assert_eq!(
        (placed("near"), placed("far")),
        (some(near), some(far)),
        "on {on:?}: {text}"
    );
}

/// case 2's box: 4 packages x 2 threads and four virtio-net NICs with movable queue
/// interrupts. Under real traffic (HTTP downloads from here through each NIC's port forward)
/// `irq top` sees every NIC's interrupts with a rate; heavy NIC interrupts piled on CPU 0
/// are spread by `irq apply` across packages before any shares a package (here: before any
/// lands on an SMT sibling), `irq rollback` restores every mask exactly, `irq daemon` does the
/// same on its own and then makes no more moves; with every NIC pinned to CPU 0, `irq plan`
/// names the pins and the gain of lifting them, `--unpin all` moves them (never onto a
/// `--ban-cpus` CPU) and rollback restores the pins.
#[test]
fn ht4_under_traffic_nic_irqs_are_seen_spread_across_packages_unpinned_and_put_back() {
    if !lab_ready() {
        return;
    }
    let script = format!(
        "$IOLAB inspect --json >$LAB_OUT/inspect.json 2>$LAB_OUT/inspect.json.err\n\
         cat /sys/devices/system/cpu/nohz_full >$LAB_OUT/nohz_full.raw\n\
         {HT4_PLACEMENT}{NICS_UNDER_TRAFFIC}{BALANCING}touch $LAB_OUT/done\n"
    );
    let b = boot_with("ht4", &script, 600, &drive_http);
    assert_eq!(b.code, Some(0), "{}", b.log);
    check_ht4_placement(&b);
    let m = b.json("inspect.json");
    check_topology(&m, 8, &|c| c / 2, &|_| 0, &|c| vec![c & !1, c | 1], &|c| {
        vec![c & !1, c | 1]
    });
    check_nohz_and_warnings(&b, &m);
    let nic_irqs: Vec<&Value> = m["irqs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| {
            let n = i["name"].as_str().unwrap_or("");
            n.contains("-input.") || n.contains("-output.")
        })
        .collect();
    assert_eq!(nic_irqs.len(), 8, "4 NICs x (input, output): {}", m["irqs"]);
    for i in &nic_irqs {
        assert_eq!(
            i["managed"], false,
            "a NIC's queue interrupt is movable: {i}"
        );
    }
    // The model's NIC list: 4 virtio NICs whose queue interrupts (8) each have a serving CPU.
    let nics: Vec<&Value> = m["nics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["is_virtual"] == false)
        .collect();
    assert_eq!(nics.len(), 4, "4 virtio NICs: {}", m["nics"]);
    let mut queue_irqs = 0;
    for n in &nics {
        assert_eq!(n["driver"], "virtio_net", "{n}");
        for i in n["irqs"].as_array().unwrap() {
            let name = i["name"].as_str().unwrap_or("");
            if name.contains("-input.") || name.contains("-output.") {
                queue_irqs += 1;
                assert!(
                    i["effective"].as_array().is_some_and(|e| !e.is_empty()),
                    "{i}"
                );
            }
        }
    }
    assert_eq!(queue_irqs, 8, "4 NICs x (input, output): {}", m["nics"]);
    let top = b.json("top.json");
    let rows = top["rows"].as_array().unwrap();
    let busy: Vec<&str> = rows
        .iter()
        .filter(|r| {
            let n = r["name"].as_str().unwrap_or("");
            (n.contains("-input.") || n.contains("-output.")) && r["total"].as_f64() > Some(0.0)
        })
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(busy.len() >= 4, "irq top saw too few NIC interrupts: {top}");
    check_balancing(&b);
}

/// The packaged `iolab-irq.service`, run by systemd on ht4 under traffic: inside its sandbox
/// (no capability, no new privileges, a system call filter, the file system read-only but for
/// /proc/irq, its state directory and the lock directory) the daemon still measures, moves the
/// heavy NIC interrupts piled on CPU 0, and puts every mask back when the service stops. It
/// opens no network socket: `--listen` fails, saying why, until a drop-in allows AF_INET, and
/// then serves the figures.
#[test]
fn the_packaged_irq_service_balances_inside_its_sandbox_and_puts_back_on_stop() {
    if !lab_ready() {
        return;
    }
    let script = format!(
        r#"{NICS_UNDER_TRAFFIC}
# The unit as the package installs it, with the binary under test in /usr/bin/iolab's place
# (the guest's copy lies in /tmp, which the service does not see), and a drop-in with the
# daemon's settings for TCG's low rates (see BALANCING).
mkdir -p /run/iolab-lab /run/systemd/system/iolab-irq.service.d
cp $IOLAB /run/iolab-lab/iolab
sed 's|/usr/bin/iolab|/run/iolab-lab/iolab|g' packaging/iolab-irq.service >/run/systemd/system/iolab-irq.service
printf '[Service]\nExecStart=\nExecStart=/run/iolab-lab/iolab irq daemon %s --min-gain 50 --min-interval 2s --max-interval 2s --listen 127.0.0.1:9464\n' "$H" >/run/systemd/system/iolab-irq.service.d/lab.conf
systemctl daemon-reload
# As packaged the unit opens no network socket, so --listen fails until a drop-in allows it.
systemd-analyze security iolab-irq --no-pager >$LAB_OUT/security 2>&1
systemctl start iolab-irq
for i in $(seq 30); do journalctl -u iolab-irq -o cat --no-pager | grep -q "cannot listen" && break; sleep 1; done
systemctl stop iolab-irq; systemctl reset-failed iolab-irq
journalctl -u iolab-irq -o cat --no-pager >$LAB_OUT/refused.log
printf '[Service]\nRestrictAddressFamilies=AF_INET AF_INET6\n' >/run/systemd/system/iolab-irq.service.d/listen.conf
systemctl daemon-reload
# A placement of `irq apply` in the service's state directory: its daemon refuses to start
# (exit 3), is not started again after RestartSec=, and its clean-up leaves the placement.
pile; sleep 1
IOLAB_STATE_DIR=/var/lib/iolab $IOLAB irq apply $H --over 3s --json >$LAB_OUT/svc-apply.json 2>$LAB_OUT/svc-apply.json.err
affs >$LAB_OUT/aff.svc-applied
systemctl start iolab-irq
sleep 15
systemctl show -p Result -p ExecMainStatus -p NRestarts iolab-irq >$LAB_OUT/svc-refused.result
affs >$LAB_OUT/aff.svc-refused
journalctl -u iolab-irq -o cat --no-pager >$LAB_OUT/svc-refused.log
systemctl reset-failed iolab-irq
IOLAB_STATE_DIR=/var/lib/iolab $IOLAB irq rollback --json >$LAB_OUT/svc-rollback.json
pile; sleep 1
affs >$LAB_OUT/aff.before
systemctl start iolab-irq
for i in $(seq 120); do journalctl -u iolab-irq -o cat --no-pager | grep -q "moved IRQ" && break; sleep 1; done
sleep 6
affs >$LAB_OUT/aff.during
curl -s --max-time 10 http://127.0.0.1:9464/metrics >$LAB_OUT/metrics
pid=$(systemctl show -p MainPID --value iolab-irq)
run=$(systemctl show -p InvocationID --value iolab-irq)
grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/$pid/status >$LAB_OUT/status
systemctl stop iolab-irq
affs >$LAB_OUT/aff.after
touch $LAB_OUT/done
systemctl show -p Result -p ExecMainStatus iolab-irq >$LAB_OUT/result
journalctl _SYSTEMD_INVOCATION_ID=$run -o cat --no-pager >$LAB_OUT/daemon.log
put_back
"#
    );
    let b = boot_as("ht4", &script, 600, &drive_http, true);
    assert_eq!(b.code, Some(0), "{}", b.log);
    // Refused beside an applied placement: not restarted, the placement left for its owner.
    let applied = b.json("svc-apply.json");
    assert!(
        !applied["applied"].as_array().unwrap().is_empty(),
        "apply moved nothing, so nothing was in the daemon's way: {applied:#}"
    );
    let result = b.text("svc-refused.result");
    for want in ["ExecMainStatus=3", "NRestarts=0", "Result=exit-code"] {
        assert!(result.contains(want), "{want:?} not in {result}");
    }
    assert!(
        b.text("svc-refused.log")
            .contains("placed by `iolab irq apply` (or a daemon with --keep) is in effect"),
        "{}",
        b.text("svc-refused.log")
    );
    assert_eq!(b.text("aff.svc-refused"), b.text("aff.svc-applied"));
    let rolled = b.json("svc-rollback.json");
    assert!(
        !rolled["restored"].as_array().unwrap().is_empty(),
        "{rolled:#}"
    );
    let log = b.text("daemon.log");
    for trouble in ["error", "warning", "denied", "not permitted", "Read-only"] {
        assert!(!log.contains(trouble), "the daemon met {trouble:?}: {log}");
    }
    assert!(log.contains("moved IRQ"), "the daemon moved nothing: {log}");
    assert!(log.contains("put back the affinity of"), "{log}");
    let (before, during) = (
        affinities(&b.text("aff.before")),
        affinities(&b.text("aff.during")),
    );
    let moved = before.keys().any(|irq| during[irq] != before[irq]);
    assert!(moved, "no mask changed: {log}");
    assert_eq!(b.text("aff.after"), b.text("aff.before"), "{log}");
    let status = b.text("status");
    for want in [
        "CapEff:\t0000000000000000",
        "CapBnd:\t0000000000000000",
        "NoNewPrivs:\t1",
        "Seccomp:\t2",
    ] {
        assert!(status.contains(want), "{want:?} not in {status}");
    }
    let security = b.text("security");
    let exposure: f64 = security
        .split("Overall exposure level for iolab-irq.service:")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level: {security}"));
    println!("systemd-analyze security: exposure {exposure}");
    assert!(exposure <= 2.5, "exposure {exposure}: {security}");
    // systemd marks a check passed with ✓, or + where the locale is not UTF-8.
    let inet = security
        .lines()
        .map(str::trim_start)
        .find(|l| l.contains("RestrictAddressFamilies=~AF_(INET|INET6)"))
        .unwrap_or_else(|| panic!("no address family check: {security}"));
    assert!(inet.starts_with(['✓', '+']), "{security}");
    let refused = b.text("refused.log");
    assert!(
        refused.contains(
            "cannot listen on 127.0.0.1:9464: Address family not supported by protocol (os \
             error 97); under systemd, the unit's RestrictAddressFamilies= must allow AF_INET"
        ),
        "{refused}"
    );
    let metrics = b.text("metrics");
    assert!(
        metrics.contains("iolab_irq_cpu_interrupts_per_second{cpu=\"0\"}"),
        "{metrics}"
    );
    assert!(
        b.text("result").contains("Result=success"),
        "{}",
        b.text("result")
    );
}

/// What `BALANCING` left: see the ht4 test.
fn check_balancing(b: &Boot) {
    let nics: Vec<u64> = b
        .text("nics")
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    assert_eq!(nics.len(), 8, "{nics:?}");
    // apply: moves off CPU 0, and the heavy interrupts end one per package while any is free.
    let applied = b.json("apply.json");
    let plan = &applied["plan"];
    let moves = plan["moves"].as_array().unwrap();
    assert!(
        !moves.is_empty(),
        "nothing moved from the pile-up: {plan:#}"
    );
    // (CPU, rate) of each heavy interrupt where the plan puts it.
    let mut heavy: Vec<(u64, f64)> = moves
        .iter()
        .map(|m| (m["to"].as_u64().unwrap(), m["rate"].as_f64().unwrap()))
        .collect();
    heavy.extend(
        plan["kept"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|k| k["why"] == "already well placed")
            .map(|k| (cpus(&k["on"])[0], k["rate"].as_f64().unwrap())),
    );
    // Packages before SMT siblings: where two heavy interrupts share a package (a core's two
    // threads here), moving either to a package without one would not lower the busier of
    // the two packages' load per CPU (light interrupts that stay count too).
    let cpu_after = |c: u64| plan["cpu_after"][c.to_string()].as_f64().unwrap();
    let package = |p: u64| (cpu_after(2 * p) + cpu_after(2 * p + 1)) / 2.0;
    for p in 0..4u64 {
        let mine: Vec<f64> = heavy.iter().filter(|h| h.0 / 2 == p).map(|h| h.1).collect();
        if mine.len() < 2 {
            continue;
        }
        for q in (0..4u64).filter(|q| !heavy.iter().any(|h| h.0 / 2 == *q)) {
            for r in &mine {
                let (now, moved) = (
                    package(p).max(package(q)),
                    (package(p) - r / 2.0).max(package(q) + r / 2.0),
                );
                assert!(
                    moved >= now - 1e-6,
                    "package {p} holds two heavy interrupts though package {q} would carry \
                     one for less: {heavy:?} {plan:#}"
                );
            }
        }
    }
    let after = affinities(&b.text("aff.applied"));
    for m in moves {
        let irq = m["irq"].as_u64().unwrap();
        let to = m["to"].as_u64().unwrap();
        assert_eq!(after[&irq], 1u64 << to, "IRQ {irq} was not moved: {m}");
    }
    // rollback: every mask as it was.
    assert_eq!(
        b.text("aff.rolled-back"),
        b.text("aff.piled"),
        "{}",
        b.text("rollback.json")
    );
    // daemon: moves on its own, then looks without moving, and puts everything back.
    let log = b.text("daemon.log");
    assert!(log.contains("moved IRQ"), "the daemon moved nothing: {log}");
    let still = log
        .lines()
        .find_map(|l| l.split_once(" look(s) since without a move"))
        .and_then(|(head, _)| head.rsplit('(').next())
        .and_then(|n| n.trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no closing line: {log}"));
    assert!(still >= 3, "the daemon kept moving: {log}");
    // It counts interrupts put back, not journal entries (two per interrupt).
    let moved: std::collections::BTreeSet<&str> = log
        .split("moved IRQ ")
        .skip(1)
        .filter_map(|s| s.split_whitespace().next())
        .collect();
    assert!(
        log.contains(&format!(
            "put back the affinity of {} interrupt(s)",
            moved.len()
        )),
        "{log}"
    );
    assert_eq!(
        b.text("aff.daemon-after"),
        b.text("aff.daemon-before"),
        "{log}"
    );
    // pinned: the plan names the pins and the gain, --unpin all moves them (not to the
    // banned CPU 1), rollback restores the pins.
    let p = b.json("pinned-plan.json");
    assert!(
        p["moves"].as_array().unwrap().is_empty(),
        "pins were moved: {p:#}"
    );
    let pin = &p["pinned"];
    assert_eq!(cpus(&pin["cpus"]), vec![0], "{p:#}");
    let pinned_irqs = cpus(&pin["irqs"]);
    assert!(
        !pinned_irqs.is_empty() && pinned_irqs.iter().all(|n| nics.contains(n)),
        "{p:#}"
    );
    let gain = pin["gain_pct"].as_f64().unwrap();
    assert!(gain > 0.0 && gain < 100.0, "{p:#}");
    let text = b.text("pinned-plan.txt");
    assert!(
        text.contains("pinned to CPU 0") && text.contains("% less"),
        "{text}"
    );
    let unpin = b.json("unpin.json");
    let done = unpin["applied"].as_array().unwrap();
    assert!(!done.is_empty(), "--unpin all moved nothing: {unpin:#}");
    let unpinned = affinities(&b.text("aff.unpinned"));
    for a in done {
        let (irq, to) = (a["irq"].as_u64().unwrap(), a["to"].as_u64().unwrap());
        assert!(nics.contains(&irq), "{a}");
        assert!(
            to != 0 && to != 1,
            "moved onto CPU 0 or the banned CPU 1: {a}"
        );
        assert_eq!(unpinned[&irq], 1u64 << to, "{a}");
    }
    assert_eq!(
        b.text("aff.pinned-again"),
        b.text("aff.pinned"),
        "{}",
        b.text("rollback2.json")
    );
}

/// `grep -H . /proc/irq/*/smp_affinity` lines (`/proc/irq/N/smp_affinity:MASK`, MASK in hex)
/// by IRQ.
fn affinities(text: &str) -> std::collections::BTreeMap<u64, u64> {
    text.lines()
        .filter_map(|l| {
            let (path, mask) = l.split_once(':')?;
            let irq = path
                .strip_prefix("/proc/irq/")?
                .strip_suffix("/smp_affinity")?;
            Some((
                irq.parse().ok()?,
                u64::from_str_radix(&mask.replace(',', ""), 16).ok()?,
            ))
        })
        .collect()
}

/// case 4's many guests: two guests each run `fio --server` on their own scratch disk, and a
/// hosts-mode experiment here drives both at once through fio's client mode. Every stored run
/// holds both servers' figures, and its IOPS are their sum.
#[test]
fn guests_run_one_hosts_mode_experiment_and_their_figures_add_up() {
    if !lab_ready() {
        return;
    }
    let _one = LAB.lock().unwrap_or_else(|e| e.into_inner());
    let out = lab_out_dir();
    // Runs on this machine once both servers answer; LAB_FIO_SERVERS lists them.
    let script = format!(
        r#"set -e
hosts=""
for s in $LAB_FIO_SERVERS; do hosts="$hosts\"$s\", "; done
cat >"$LAB_OUT/guests.toml" <<TOML
name = "guests"
seed = 4
repetitions = 1
[target]
device = "vda"
hosts = [$hosts]
[workload]
rw = "randread"
ioengine = "psync"
direct = 1
size = "32m"
runtime = "2s"
time_based = true
[factors]
bs = ["4k", "64k"]
TOML
IOLAB_STATE_DIR="$LAB_OUT/state" {iolab} run "$LAB_OUT/guests.toml" --db "$LAB_OUT/r.db" \
  >"$LAB_OUT/run.txt" 2>&1
"#,
        iolab = env!("CARGO_BIN_EXE_iolab")
    );
    std::fs::write(out.path().join("guests.sh"), script).unwrap();
    let port_base = 20000 + (std::process::id() % 4000) as u16 * 4;
    let run = Command::new(repo().join("scripts/lab"))
        .args(["guests", "--out"])
        .arg(out.path())
        .args(["--timeout", "600", "--", "sh"])
        .arg(out.path().join("guests.sh"))
        .env("LAB_GUESTS", "2")
        .env("LAB_PORT_BASE", port_base.to_string())
        .output()
        .unwrap();
    let log = format!(
        "{}{}\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr),
        std::fs::read_to_string(out.path().join("run.txt")).unwrap_or_default()
    );
    assert!(run.status.success(), "{log}");
    let db = iolab::store::Store::open_existing(out.path().join("r.db")).unwrap();
    let runs = db.runs(1).unwrap();
    assert_eq!(runs.len(), 2, "{log}");
    // The servers' job banners are not fio notes, and fio servers have no usr/sys/ints/s for
    // the run's closing table.
    for b in db.run_bases(1).unwrap() {
        let env = b.environment.unwrap_or_default();
        let notes = env["fio_notes"].as_str().unwrap_or("");
        assert!(
            !notes.contains("(g=") && !notes.contains("Starting "),
            "{notes}"
        );
    }
    assert!(
        log.contains("clat p99 [us]") && !log.contains("usr [%]"),
        "{log}"
    );
    for r in &runs {
        assert_eq!(
            r.status,
            iolab::store::RunStatus::Ok,
            "{}: {log}",
            r.cell_key
        );
        let texts = db.run_texts(r.id).unwrap().unwrap();
        let text = texts.fio_json.unwrap();
        // fio may print a line before its JSON.
        let fio: Value = serde_json::from_str(&text[text.find('{').unwrap()..]).unwrap();
        let clients: Vec<&Value> = fio["client_stats"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["jobname"] != "All clients")
            .collect();
        let ports: std::collections::BTreeSet<u64> =
            clients.iter().filter_map(|c| c["port"].as_u64()).collect();
        assert_eq!(ports.len(), 2, "one set of figures per guest: {ports:?}");
        let sum: f64 = clients
            .iter()
            .map(|c| c["read"]["iops"].as_f64().unwrap())
            .sum();
        let stored = db.metric_values(&[r.id], "read_iops").unwrap()[0].1;
        assert!(
            sum > 0.0 && (stored - sum).abs() <= sum * 1e-9,
            "{stored} vs {sum}"
        );
    }
}

/// case 2's question asked of a NIC: an iperf3 experiment whose target is the guest's NIC
/// `nica` (wired back to back to `nicb` in another namespace), with `irq_cpu` x `placement`.
/// Every run stores the NIC's interrupt rate; during each cell (nearly) all of the NIC's
/// interrupts land on that cell's `irq_cpu`; the client runs on that CPU (`on`), its SMT
/// sibling (`near`) or the other node (`far`); and every interrupt's mask is as before once
/// the run ends.
#[test]
fn nic2_irq_cpu_and_placement_follow_the_nics_interrupts() {
    if !lab_ready() {
        return;
    }
    let script = r#"
affs() { grep -H . /proc/irq/*/smp_affinity_list; }
affs >$LAB_OUT/aff.before
# Placement against the interrupts as found: the CPUs that take the NIC's traffic (its
# input and output vectors), not its configuration vector, which never fires.
cat >/tmp/place.toml <<'T'
name = "lab nic2 placement"
engine = "iperf3"
[target]
nic = "nica"
[iperf3]
server = "10.0.50.2"
server_netns = "peer"
[factors]
placement = ["on"]
T
$IOLAB run /tmp/place.toml --dry-run >$LAB_OUT/place.txt 2>&1
dev=$(basename $(readlink /sys/class/net/nica/device))
for n in $(awk -v d="$dev" '$NF ~ "^" d "-(input|output)" { sub(":", "", $1); print $1 }' /proc/interrupts); do
  cat /proc/irq/$n/effective_affinity_list
done >$LAB_OUT/traffic-cpus
awk -v d="$dev" '$NF == d "-config" { sub(":", "", $1); print $1 }' /proc/interrupts >$LAB_OUT/config-irq
cat >/tmp/exp.toml <<'T'
name = "lab nic2 irq_cpu x placement"
seed = 5
repetitions = 1
engine = "iperf3"
[target]
nic = "nica"
[iperf3]
server = "10.0.50.2"
server_netns = "peer"
time = 2
[factors]
irq_cpu = [1, 2]
placement = ["on", "near", "far"]
T
$IOLAB run /tmp/exp.toml --db /tmp/lab.db >$LAB_OUT/run.txt 2>&1
echo $? >$LAB_OUT/run.rc
affs >$LAB_OUT/aff.after
$IOLAB show 1 --db /tmp/lab.db --json >$LAB_OUT/show.json 2>$LAB_OUT/show.json.err
# SQLite's shared memory does not work over 9p: copied out once iolab has closed it.
cp /tmp/lab.db $LAB_OUT/lab.db
"#;
    let b = boot("nic2", script, 600);
    assert_eq!(b.code, Some(0), "{}", b.log);
    assert_eq!(b.text("run.rc").trim(), "0", "{}", b.text("run.txt"));
    let place = b.text("place.txt");
    let config = b.text("config-irq").trim().to_string();
    assert!(!config.is_empty(), "no configuration vector: {}", b.log);
    let target = place
        .lines()
        .find(|l| l.starts_with("target: NIC nica"))
        .unwrap_or_else(|| panic!("{place}"));
    assert!(
        !target.contains(&config),
        "IRQ {config} is not traffic: {target}"
    );
    let mut traffic: Vec<u32> = b
        .text("traffic-cpus")
        .split_whitespace()
        .map(|c| c.parse().unwrap())
        .collect();
    traffic.sort_unstable();
    traffic.dedup();
    // As iolab writes a CPU list: runs of consecutive CPUs as ranges.
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for &c in &traffic {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == c => *end = c,
            _ => runs.push((c, c)),
        }
    }
    let on = runs
        .iter()
        .map(|&(a, z)| {
            if a == z {
                a.to_string()
            } else {
                format!("{a}-{z}")
            }
        })
        .collect::<Vec<_>>()
        .join(",");
    let why = if traffic.len() == 1 {
        format!("CPU {on} takes the device's interrupt")
    } else {
        format!("CPUs {on} take the device's interrupts")
    };
    assert!(place.contains(&why), "want {why:?}: {place}");
    assert_eq!(
        b.text("aff.before"),
        b.text("aff.after"),
        "masks not put back"
    );
    // `show` without --metric puts the NIC's interrupt rate among its default metrics.
    let shown = b.json("show.json");
    for c in shown["cells"].as_array().unwrap() {
        assert!(
            c["metrics"]["nic_irq_per_s"]["mean"].as_f64() > Some(0.0),
            "{c}"
        );
    }
    let db = rusqlite::Connection::open(b.path("lab.db")).unwrap();
    let runs: Vec<(i64, String, String, Option<String>)> = db
        .prepare("SELECT id, cell_levels, status, fio_command FROM runs ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(runs.len(), 6, "{runs:?}\n{}", b.text("run.txt"));
    let metric = |run: i64, name: &str| -> f64 {
        db.query_row(
            "SELECT value FROM metrics WHERE run_id = ?1 AND name = ?2",
            rusqlite::params![run, name],
            |r| r.get(0),
        )
        .unwrap_or_else(|e| panic!("run {run} has no {name}: {e}"))
    };
    for (id, levels, status, command) in &runs {
        assert_eq!(status, "ok", "{levels}: {}", b.text("run.txt"));
        let command = command.as_deref().unwrap_or_default();
        let l: Value = serde_json::from_str(levels).unwrap();
        let irq_cpu: u32 = l["irq_cpu"].as_str().unwrap().parse().unwrap();
        assert!(metric(*id, "net_received_mbit_per_s") > 0.0, "{levels}");
        assert!(metric(*id, "nic_irq_per_s") > 0.0, "{levels}");
        // The NIC's own counters: iperf3's data leaves through it, only ACKs come back.
        let (tx, rx) = (
            metric(*id, "nic_tx_mb_per_s"),
            metric(*id, "nic_rx_mb_per_s"),
        );
        assert!(tx > 5.0 * rx && rx > 0.0, "{levels}: tx {tx} rx {rx} MB/s");
        // The NIC's interrupts per CPU over the run: the cell's irq_cpu took nearly all.
        let per_cpu: Vec<(String, f64)> = db
            .prepare(
                "SELECT name, SUM(value) FROM series WHERE run_id = ?1 \
                 AND name LIKE 'cpu%:nic_irq_per_s' GROUP BY name",
            )
            .unwrap()
            .query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let total: f64 = per_cpu.iter().map(|(_, v)| v).sum();
        let on_it = per_cpu
            .iter()
            .find(|(n, _)| *n == format!("cpu{irq_cpu}:nic_irq_per_s"))
            .map_or(0.0, |(_, v)| *v);
        assert!(
            total > 0.0 && on_it / total > 0.8,
            "{levels}: the NIC's interrupts per CPU {per_cpu:?}"
        );
        // 2 nodes of one core x 2 threads: CPUs 0-1 and 2-3.
        let want = match (l["placement"].as_str().unwrap(), irq_cpu) {
            ("on", c) => c.to_string(),
            ("near", c) => (c ^ 1).to_string(),
            ("far", 1) => "2-3".to_string(),
            ("far", _) => "0-1".to_string(),
            (p, _) => panic!("placement {p}"),
        };
        assert!(
            command.contains(&format!("client: taskset -c {want} iperf3")),
            "{levels}: {command}"
        );
    }
}
