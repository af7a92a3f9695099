//! Machine-wide controls on a real kernel (cells4, which has SMT): a cell that switches SMT off
//! really takes the siblings offline, sysctls and module parameters change per cell, and
//! everything is back after the experiment, and after a SIGKILL once `iolab restore` ran.

use super::{boot, lab_ready};

#[test]
fn cells4_smt_sysctls_and_module_parameters_vary_per_cell_and_come_back() {
    if !lab_ready() {
        return;
    }
    let script = r#"
# The HBA's interrupt pinned to CPU 1, a second thread: switching SMT off breaks the pin (the
# kernel gives it every online CPU), and on again does not mend it; iolab must.
hba=$(awk '/megasas/ { sub(":", "", $1); print $1; exit }' /proc/interrupts)
echo 1 >/proc/irq/$hba/smp_affinity_list
state() { cat /sys/devices/system/cpu/smt/control /sys/devices/system/cpu/online \
  /proc/sys/vm/dirty_ratio /sys/module/nvme/parameters/sgl_threshold \
  /proc/irq/$hba/smp_affinity_list; }
state >$LAB_OUT/before.txt
exp() { cat <<TOML
name = "controls"
repetitions = 1
[target]
device = "sda"
[workload]
rw = "randread"
ioengine = "psync"
direct = 1
size = "16m"
runtime = "$1"
time_based = true
[factors]
cpu.smt = [$2]
sysctl.vm.dirty_ratio = [7]
module.nvme.sgl_threshold = [0]
[prepare]
drop_caches = true
TOML
}
exp 1s '"off", "on"' >$LAB_OUT/controls.toml
# SQLite wants a local file system, not the 9p export: the database travels out afterwards.
$IOLAB run $LAB_OUT/controls.toml --db /tmp/r.db >$LAB_OUT/run.txt 2>&1
echo $? >$LAB_OUT/run.rc
cp /tmp/r.db $LAB_OUT/r.db
state >$LAB_OUT/after.txt
# Killed while SMT is off: the siblings stay offline until `iolab restore`.
exp 30s '"off"' >$LAB_OUT/long.toml
$IOLAB run $LAB_OUT/long.toml --db /tmp/k.db >$LAB_OUT/long.txt 2>&1 &
pid=$!
for i in $(seq 300); do grep -q off /sys/devices/system/cpu/smt/control && break; sleep 0.1; done
sleep 2
cat /sys/devices/system/cpu/online >$LAB_OUT/killed.txt
kill -9 $pid
wait $pid
$IOLAB restore >$LAB_OUT/restore.txt 2>&1
echo $? >$LAB_OUT/restore.rc
state >$LAB_OUT/restored.txt
"#;
    let b = boot("cells4", script, 600);
    assert_eq!(b.code, Some(0), "{}", b.log);
    let before = b.text("before.txt");
    assert!(before.starts_with("on\n0-15\n"), "{before}");
    assert!(
        before.ends_with("\n1\n"),
        "the HBA's interrupt is pinned to CPU 1: {before}"
    );
    assert_eq!(b.text("run.rc").trim(), "0", "{}", b.text("run.txt"));
    let db = iolab::store::Store::open_existing(b.path("r.db")).unwrap();
    let runs = db.runs(1).unwrap();
    assert_eq!(runs.len(), 2, "{}", b.text("run.txt"));
    assert!(
        runs.iter().all(|r| r.status == iolab::store::RunStatus::Ok),
        "{}",
        b.text("run.txt")
    );
    assert_eq!(
        b.text("after.txt"),
        before,
        "the experiment put everything back"
    );
    // SMT off leaves one thread per core: the even CPUs.
    assert_eq!(b.text("killed.txt").trim(), "0,2,4,6,8,10,12,14");
    assert_eq!(
        b.text("restore.rc").trim(),
        "0",
        "{}",
        b.text("restore.txt")
    );
    assert_eq!(
        b.text("restored.txt"),
        before,
        "restore put everything back"
    );
}
