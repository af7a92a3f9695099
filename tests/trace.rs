//! `iolab trace`: the analysis checked number by number against btt's own output on a
//! recorded trace (committed fixture, and — as root — a fresh capture through tracefs that
//! blkparse and btt must read), error handling on bad input, JSON schema, compare.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command as Std;

use assert_cmd::Command;
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/trace")
        .join(name)
}

fn iolab_json(args: &[&str]) -> Value {
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The numbers of btt's text output for the first device of each section.
#[derive(Debug, Default)]
struct Btt {
    all: HashMap<String, (f64, f64, f64, u64)>,
    overhead: Vec<f64>,
    merge: Vec<f64>,
    seeks: Vec<Vec<f64>>,
    plugs: Vec<f64>,
    ios_per_unplug: f64,
    reqs_at_q: f64,
    live: Vec<f64>,
}

fn numbers(s: &str) -> Vec<f64> {
    s.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter(|w| !w.is_empty() && *w != ".")
        .filter_map(|w| w.parse().ok())
        .collect()
}

fn parse_btt(text: &str) -> Btt {
    let mut b = Btt::default();
    let mut section = String::new();
    for line in text.lines() {
        if let Some(t) = line.strip_prefix("==================== ") {
            section = t.trim_end_matches(" ====================").to_string();
            continue;
        }
        let is_dev_row = line.trim_start().starts_with("(");
        match section.as_str() {
            "All Devices" => {
                let w: Vec<&str> = line.split_whitespace().collect();
                if w.len() == 5 && w[0].len() == 3 && w[1].contains('.') {
                    b.all.insert(
                        w[0].to_lowercase(),
                        (
                            w[1].parse().unwrap(),
                            w[2].parse().unwrap(),
                            w[3].parse().unwrap(),
                            w[4].parse().unwrap(),
                        ),
                    );
                }
            }
            "Device Overhead" if is_dev_row && b.overhead.is_empty() => {
                b.overhead = numbers(line.split('|').nth(1).unwrap());
            }
            "Device Merge Information" if is_dev_row && b.merge.is_empty() => {
                let rest = line.split_once('|').unwrap().1;
                b.merge = numbers(rest);
            }
            "Device Q2Q Seek Information" | "Device D2D Seek Information" if is_dev_row => {
                let rest = line.split_once('|').unwrap().1;
                b.seeks.push(numbers(rest));
            }
            "Plug Information" if is_dev_row => {
                let rest = line.split_once('|').unwrap().1;
                if b.plugs.is_empty() {
                    b.plugs = numbers(rest);
                } else {
                    b.ios_per_unplug = numbers(rest)[0];
                }
            }
            "Active Requests At Q Information" if is_dev_row => {
                b.reqs_at_q = numbers(line.split_once('|').unwrap().1)[0];
            }
            "I/O Active Period Information" if is_dev_row => {
                b.live = numbers(line.split_once('|').unwrap().1);
            }
            _ => {}
        }
    }
    b
}

fn close(what: &str, got: f64, want: f64, tol: f64) {
    assert!(
        (got - want).abs() <= tol,
        "{what}: iolab {got} vs btt {want} (tolerance {tol})"
    );
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Checks iolab's JSON for a trace against btt's text for the same trace. `tie_order`:
/// per-CPU input is merged with a different order of same-nanosecond events than blkparse
/// used, which can move a few seek distances and plug intervals.
fn check_against_btt(report: &Value, btt_text: &str, tie_order: bool) {
    let b = parse_btt(btt_text);
    assert!(
        b.all.contains_key("q2c"),
        "btt output not parsed: {btt_text}"
    );
    let dev = &report["devices"][0];
    for (name, (min, avg, max, n)) in &b.all {
        let l = if name == "q2q" {
            &report["all"][name.as_str()]
        } else {
            &dev["latency"][name.as_str()]
        };
        assert_eq!(l["n"].as_u64().unwrap(), *n, "{name} N");
        let tol = if tie_order { 2e-9 + avg * 1e-3 } else { 1.5e-9 };
        close(
            &format!("{name} min"),
            f(&l["min"]),
            *min,
            if tie_order { 1e-6 } else { 1.5e-9 },
        );
        close(&format!("{name} avg"), f(&l["avg"]), *avg, tol);
        close(
            &format!("{name} max"),
            f(&l["max"]),
            *max,
            if tie_order { 1e-6 } else { 1.5e-9 },
        );
    }
    let o = &dev["overhead"];
    for (i, k) in ["q2g", "g2i", "q2m", "i2d", "d2c"].iter().enumerate() {
        close(&format!("overhead {k}"), f(&o[k]), b.overhead[i], 0.0051);
    }
    let m = &dev["merge"];
    for (i, k) in ["q", "d", "ratio", "blk_min", "blk_avg", "blk_max", "total"]
        .iter()
        .enumerate()
    {
        close(&format!("merge {k}"), f(&m[k]), b.merge[i], 0.051);
    }
    for (i, k) in ["seek_q2q", "seek_d2d"].iter().enumerate() {
        let s = &dev[k];
        let want = &b.seeks[i]; // nseeks mean median mode count
        assert_eq!(s["nseeks"].as_u64().unwrap() as f64, want[0], "{k} nseeks");
        if tie_order {
            close(&format!("{k} mean"), f(&s["mean"]), want[1], want[1] * 0.01);
        } else {
            close(&format!("{k} mean"), f(&s["mean"]), want[1], 0.051);
            assert_eq!(f(&s["mode"]), want[3], "{k} mode");
            assert_eq!(f(&s["mode_count"]), want[4], "{k} mode count");
        }
    }
    let p = &dev["plug"];
    let slack = if tie_order { 0.01 } else { 0.0 };
    close("plugs", f(&p["plugs"]), b.plugs[0], b.plugs[0] * slack);
    close("timer unplugs", f(&p["timer_unplugs"]), b.plugs[1], 0.0);
    close(
        "% plugged",
        f(&p["btt_pct_time_plugged"]),
        b.plugs[2],
        if tie_order { 0.05 } else { 1e-8 },
    );
    close(
        "IOs/unplug",
        f(&p["ios_per_unplug"]),
        b.ios_per_unplug,
        0.051,
    );
    close(
        "reqs at Q",
        f(&dev["active_requests_at_q"]),
        b.reqs_at_q,
        0.051,
    );
    let a = &dev["active_periods"];
    let t = if tie_order { 0.02 } else { 0.0 };
    close("# live", f(&a["live"]), b.live[0], b.live[0] * t);
    close(
        "avg act",
        f(&a["avg_active"]),
        b.live[1],
        1.5e-9 + b.live[1] * t,
    );
    close(
        "btt avg !act",
        f(&a["btt_avg_inactive"]),
        b.live[2],
        1.5e-9 + b.live[2] * t,
    );
    close(
        "btt % live",
        f(&a["btt_pct_live"]),
        b.live[3],
        0.0051 + b.live[3] * t,
    );
}

#[test]
fn merged_fixture_matches_btt_exactly() {
    let report = iolab_json(&[
        "trace",
        "analyze",
        "--json",
        fixture("fx.bin").to_str().unwrap(),
    ]);
    let btt = std::fs::read_to_string(fixture("fx.btt.txt")).unwrap();
    check_against_btt(&report, &btt, false);
}

#[test]
fn per_cpu_fixture_matches_btt_up_to_tie_order() {
    let report = iolab_json(&[
        "trace",
        "analyze",
        "--json",
        fixture("fx").to_str().unwrap(),
    ]);
    let btt = std::fs::read_to_string(fixture("fx.btt.txt")).unwrap();
    check_against_btt(&report, &btt, true);
    // Process names come from the notify records `trace record` writes.
    let procs = report["processes"].as_array().unwrap();
    assert!(procs.iter().any(|p| p["name"] == "fio"), "{procs:?}");
}

#[test]
fn json_schema_has_devices_latency_merge_and_findings() {
    let r = iolab_json(&[
        "trace",
        "analyze",
        "--json",
        fixture("fx.bin").to_str().unwrap(),
    ]);
    let d = &r["devices"][0];
    assert!(d["dev"].as_str().unwrap().starts_with("7,"));
    for k in [
        "q2q", "q2g", "s2g", "g2i", "q2m", "i2d", "m2d", "d2c", "q2c",
    ] {
        let l = &d["latency"][k];
        for field in ["min", "avg", "max", "n", "p50", "p90", "p99", "p999"] {
            assert!(l.get(field).is_some(), "latency.{k}.{field} missing");
        }
    }
    let q2c = &d["latency"]["q2c"];
    assert!(f(&q2c["min"]) <= f(&q2c["p50"]) && f(&q2c["p50"]) <= f(&q2c["p99"]));
    assert!(f(&q2c["p99"]) <= f(&q2c["p999"]) && f(&q2c["p999"]) <= f(&q2c["max"]));
    for k in ["q", "d", "ratio", "blk_min", "blk_avg", "blk_max", "total"] {
        assert!(d["merge"].get(k).is_some(), "merge.{k}");
    }
    // M2D is in iolab's overhead table (btt leaves it out).
    assert!(f(&d["overhead"]["m2d"]) > 0.0);
    assert!(f(&d["per_request"]["d2c"]["n"]) > 0.0);
    assert!(f(&d["dispatch_depth"]["avg"]) >= 1.0);
    assert!(!d["timeline"].as_array().unwrap().is_empty());
    assert!(r["findings"].is_array());
}

#[test]
fn human_output_has_btt_sections() {
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .args(["trace", "analyze", fixture("fx.bin").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for s in [
        "All Devices",
        "Device Overhead",
        "Device Merge Information",
        "Device Q2Q Seek Information",
        "Device D2D Seek Information",
        "Plug Information",
        "Active Requests At Q Information",
        "I/O Active Period Information",
        "Per Process",
        "Findings",
    ] {
        assert!(text.contains(s), "missing section {s}");
    }
    assert!(text.is_ascii());
}

#[test]
fn garbage_and_truncated_input_are_clear_errors() {
    // `trace analyze PATH` fails with exit 1; what it says.
    let refused = |path: &Path| {
        let out = Command::cargo_bin("iolab")
            .unwrap()
            .args(["trace", "analyze", path.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", path.display());
        String::from_utf8(out.stderr).unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage");
    std::fs::write(&garbage, b"this is not a block trace at all, just text\n").unwrap();
    let err = refused(&garbage);
    assert!(
        err.contains("byte offset 0") && err.contains("garbage"),
        "{err}"
    );

    let bytes = std::fs::read(fixture("fx.bin")).unwrap();
    let cut = dir.path().join("cut");
    std::fs::write(&cut, &bytes[..bytes.len() - 30]).unwrap();
    let err = refused(&cut);
    assert!(err.contains("cut short"), "{err}");
    // What the error says to keep is whole records: analysed, they are the trace up to the cut.
    let keep: usize = err
        .split("head -c ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no length to keep in {err}"));
    assert!(keep < bytes.len() - 30 && keep > 0, "{keep}");
    std::fs::write(&cut, &bytes[..keep]).unwrap();
    Command::cargo_bin("iolab")
        .unwrap()
        .args(["trace", "analyze", cut.to_str().unwrap()])
        .assert()
        .success();
    // One file of a recording cut short: the advice keeps its name, so that the copy is
    // read with the recording's other files; export refuses it and writes nothing.
    let rec = dir.path().join("rec");
    std::fs::create_dir(&rec).unwrap();
    std::fs::write(rec.join("t.blktrace.0"), &bytes[..bytes.len() - 30]).unwrap();
    std::fs::copy(fixture("fx.blktrace.1"), rec.join("t.blktrace.1")).unwrap();
    let err = refused(&rec.join("t"));
    let advice = format!(
        "head -c {keep} {}/t.blktrace.0 > DIR/t.blktrace.0",
        rec.display()
    );
    assert!(err.contains(&advice), "{err}");
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .args(["trace", "export", "-o"])
        .arg(dir.path().join("exported"))
        .arg(rec.join("t"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("nothing exported: "),
        "{err}"
    );
    assert!(!dir.path().join("exported").exists());
    let kept = dir.path().join("kept");
    std::fs::create_dir(&kept).unwrap();
    std::fs::write(kept.join("t.blktrace.0"), &bytes[..keep]).unwrap();
    std::fs::copy(rec.join("t.blktrace.1"), kept.join("t.blktrace.1")).unwrap();
    Command::cargo_bin("iolab")
        .unwrap()
        .args(["trace", "analyze"])
        .arg(kept.join("t"))
        .assert()
        .success();
    // A gzip file cut inside its compressed stream says so too.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &bytes).unwrap();
    let gz = gz.finish().unwrap();
    let cut_gz = dir.path().join("cut.gz");
    std::fs::write(&cut_gz, &gz[..gz.len() / 2]).unwrap();
    let err = refused(&cut_gz);
    assert!(
        err.contains("cut.gz") && err.contains("the compressed file was cut short"),
        "{err}"
    );

    refused(Path::new("/no/such/trace"));
}

/// `-` reads a trace from standard input (a pipe), plain or gzip, with the same result as
/// the file; what needs a second read or a second trace from it is refused, saying why.
#[test]
fn a_trace_piped_into_standard_input_is_analysed_like_the_file() {
    let file = fixture("fx.bin");
    let bytes = std::fs::read(&file).unwrap();
    let want = iolab_json(&["trace", "analyze", "--json", file.to_str().unwrap()]);
    let piped = |args: &[&str], input: Vec<u8>| {
        Command::cargo_bin("iolab")
            .unwrap()
            .args(args)
            .write_stdin(input)
            .output()
            .unwrap()
    };
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &bytes).unwrap();
    for (what, input) in [("plain", bytes.clone()), ("gzip", gz.finish().unwrap())] {
        let out = piped(&["trace", "analyze", "--json", "-"], input);
        assert!(
            out.status.success(),
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(got, want, "{what}");
    }

    let dir = tempfile::tempdir().unwrap();
    let out = piped(
        &["trace", "export", "-", "-o", dir.path().to_str().unwrap()],
        bytes.clone(),
    );
    assert!(out.status.success());
    // Parted by CPU, as blkparse reads a trace: every record once, the same analysis.
    let parts: u64 = (0..2)
        .map(|cpu| dir.path().join(format!("stdin.blktrace.{cpu}")))
        .map(|f| f.metadata().unwrap().len())
        .sum();
    assert_eq!(parts, bytes.len() as u64);
    let exported = dir.path().join("stdin");
    assert_eq!(
        iolab_json(&["trace", "analyze", "--json", exported.to_str().unwrap()]),
        want
    );

    let refused = |args: &[&str], code: i32, says: &str| {
        let out = piped(args, bytes.clone());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    };
    // Standard input named twice is a usage error, as is a file named twice.
    refused(
        &["trace", "compare", "-", "-"],
        2,
        "standard input is named more than once",
    );
    refused(
        &["trace", "analyze", "-", "-"],
        2,
        "standard input is named more than once",
    );
    let fx = file.to_str().unwrap();
    refused(&["trace", "analyze", fx, fx], 2, "named twice");
    let plots = dir.path().join("plots");
    refused(
        &["trace", "plot", "-", "-o", plots.to_str().unwrap()],
        1,
        "trace plot reads each trace twice",
    );
    assert!(!plots.exists());
}

/// `-` with standard input left to a terminal is refused at once rather than waiting on the
/// keyboard (a pseudo-terminal from util-linux's `script`; `timeout` ends a test that waits).
#[test]
fn standard_input_at_a_terminal_is_refused_not_waited_on() {
    if !have("script") || !have("timeout") {
        crate::common::skip("needs script and timeout (util-linux, coreutils)");
        return;
    }
    let bin = assert_cmd::cargo::cargo_bin("iolab");
    let out = Std::new("timeout")
        .args(["10", "script", "-qec"])
        .arg(format!("{} trace analyze -", bin.display()))
        .arg("/dev/null")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("-: standard input is a terminal; pipe a trace in"),
        "{:?} {text}",
        out.status
    );
    assert_eq!(out.status.code(), Some(1), "{text}");
}

#[test]
fn compare_a_trace_with_itself_shows_no_change() {
    let p = fixture("fx.bin");
    let c = iolab_json(&[
        "trace",
        "compare",
        "--json",
        p.to_str().unwrap(),
        p.to_str().unwrap(),
    ]);
    let rows = c["devices"][0]["rows"].as_array().unwrap();
    assert!(rows.len() > 5);
    for r in rows {
        if let Some(ch) = r["change_pct"].as_f64() {
            assert_eq!(ch, 0.0, "{r}");
        }
    }
    assert!(c["only_in_a"].as_array().unwrap().is_empty());
}

// ---------------------------------------------------------------- live capture (root)

const TRACEFS: &str = "/sys/kernel/tracing";

/// The blk tracer is global: recording tests (here, in align and in hosts) take turns.
static RECORDING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A recording test's turn at the machine's tracer. The tracer must be off when a turn begins
/// and again when it ends (unless the test failed already): a test that leaves it on fails
/// itself, rather than the next recording test, whose "before" it would have become.
pub struct RecordingTurn {
    _turn: std::sync::MutexGuard<'static, ()>,
}

pub fn recording_turn() -> RecordingTurn {
    let turn = RECORDING.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(on) = tracer_in_use() {
        panic!(
            "the block tracer is on before this test begins ({on}): a process, or a test that \
             does not take a recording turn, left it so"
        );
    }
    RecordingTurn { _turn: turn }
}

impl Drop for RecordingTurn {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        if let Some(on) = tracer_in_use() {
            panic!("this test left the block tracer on ({on})");
        }
    }
}

/// What shows the machine's block tracer in use, if anything: tracefs's current tracer (read
/// through a mount of its own when tracefs is not mounted: the tracer stays on unmounted) and
/// each disk whose block trace is enabled. Nothing as another user, who cannot read them.
fn tracer_in_use() -> Option<String> {
    if !iolab::sys::is_root() {
        return None;
    }
    let mut on = Vec::new();
    let own =
        (!Path::new(TRACEFS).join("current_tracer").exists()).then(|| tempfile::tempdir().unwrap());
    let tracefs = own.as_ref().map_or(Path::new(TRACEFS), |d| d.path());
    if own.is_some() {
        let st = Std::new("mount")
            .args(["-t", "tracefs", "nodev"])
            .arg(tracefs)
            .status()
            .unwrap();
        assert!(st.success(), "mount -t tracefs failed");
    }
    let tracer = std::fs::read_to_string(tracefs.join("current_tracer")).unwrap_or_default();
    if own.is_some() {
        let st = Std::new("umount").arg(tracefs).status().unwrap();
        assert!(st.success(), "umount {} failed", tracefs.display());
    }
    if tracer.trim() != "nop" {
        on.push(format!("current_tracer {}", tracer.trim()));
    }
    for disk in std::fs::read_dir("/sys/block").unwrap().flatten() {
        let enable = disk.path().join("trace/enable");
        if std::fs::read_to_string(&enable).is_ok_and(|v| v.trim() == "1") {
            on.push(format!("{} 1", enable.display()));
        }
    }
    (!on.is_empty()).then(|| on.join(", "))
}

/// What a live recording test holds: the recording turn, a scratch device and a temporary
/// directory (dropped in that order, so the turn's check comes before the device goes).
struct Live {
    _turn: RecordingTurn,
    scratch: Scratch,
    dir: tempfile::TempDir,
}

/// A live recording test's set-up, or None where it cannot run (not root: skipped, which
/// fails the run under CI).
fn live(tag: &str) -> Option<Live> {
    live_with(tag, &[])
}

/// [`live`] with a scratch device attached with `losetup` flags of its own.
fn live_with(tag: &str, flags: &[&str]) -> Option<Live> {
    if !iolab::sys::is_root() {
        crate::common::skip("needs root");
        return None;
    }
    let _turn = recording_turn();
    Some(Live {
        scratch: Scratch::attached(tag, flags),
        dir: tempfile::tempdir().unwrap(),
        _turn,
    })
}

/// A loop device over a file in /dev/shm, detached and removed on drop, with the queue
/// settings it had put back first (a loop device keeps them when detached).
struct Scratch {
    dev: String,
    img: PathBuf,
    queue: iolab::target::QueueSettings,
}

impl Scratch {
    fn new(tag: &str) -> Scratch {
        Scratch::attached(tag, &[])
    }

    /// With `losetup` flags of its own (`-P`: partitions may be added).
    fn attached(tag: &str, flags: &[&str]) -> Scratch {
        let img = PathBuf::from(format!(
            "/dev/shm/iolab-test-{tag}-{}.img",
            std::process::id()
        ));
        std::fs::File::create(&img)
            .unwrap()
            .set_len(64 << 20)
            .unwrap();
        let out = Std::new("losetup")
            .args(["-f", "--show"])
            .args(flags)
            .arg(&img)
            .output()
            .unwrap();
        let dev = String::from_utf8(out.stdout).unwrap().trim().to_string();
        if !out.status.success() || dev.is_empty() {
            let _ = std::fs::remove_file(&img);
            panic!("losetup failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        let queue = iolab::target::QueueSettings::read(dev.trim_start_matches("/dev/"));
        Scratch { dev, img, queue }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        self.queue.put_back(self.dev.trim_start_matches("/dev/"));
        let _ = Std::new("losetup").args(["-d", &self.dev]).status();
        let _ = std::fs::remove_file(&self.img);
    }
}

/// True as root with fio installed; otherwise says the test is skipped (which fails it under
/// CI).
fn root_with_fio() -> bool {
    if !crate::common::root_or_skip() {
        return false;
    }
    if !have("fio") {
        crate::common::skip("needs fio");
        return false;
    }
    true
}

fn have(tool: &str) -> bool {
    Std::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn tracefs_state(dev: &str) -> Vec<(String, String)> {
    let name = dev.trim_start_matches("/dev/");
    let mut v = Vec::new();
    for f in [
        "current_tracer",
        "trace_clock",
        "options/bin",
        "options/context-info",
        "tracing_on",
    ] {
        let p = Path::new(TRACEFS).join(f);
        v.push((
            f.to_string(),
            std::fs::read_to_string(p).unwrap_or_default(),
        ));
    }
    let en = format!("/sys/block/{name}/trace/enable");
    v.push((en.clone(), std::fs::read_to_string(&en).unwrap_or_default()));
    v
}

/// Merges a recording `base` with blkparse into `dir/merged.bin` (btt's input) and runs btt on
/// it: the merged file and btt's `btt.avg` text.
fn blkparse_and_btt(dir: &Path, base: &Path) -> (PathBuf, String) {
    let merged = dir.join("merged.bin");
    let bp = Std::new("blkparse")
        .arg("-i")
        .arg(base)
        .arg("-d")
        .arg(&merged)
        .arg("-O")
        .output()
        .unwrap();
    assert!(
        bp.status.success(),
        "{}",
        String::from_utf8_lossy(&bp.stderr)
    );
    let bt = Std::new("btt")
        .current_dir(dir)
        .arg("-i")
        .arg(&merged)
        .args(["-o", "btt"])
        .output()
        .unwrap();
    assert!(
        bt.status.success(),
        "{}",
        String::from_utf8_lossy(&bt.stderr)
    );
    (
        merged,
        std::fs::read_to_string(dir.join("btt.avg")).unwrap(),
    )
}

/// `iolab trace record` of `dev` into `base` while fio does direct libaio I/O on it with `io`;
/// its state directory (the tracefs journal) is `state` beside `base`.
fn record_fio(dev: &str, base: &Path, io: &[&str]) -> std::process::Output {
    Command::cargo_bin("iolab")
        .unwrap()
        .env("IOLAB_STATE_DIR", base.with_file_name("state"))
        .args(["trace", "record", "-d", dev, "-o"])
        .arg(base)
        .args(["--", "fio", "--output=/dev/null", "--name=t", "--direct=1"])
        .args(["--ioengine=libaio", &format!("--filename={dev}")])
        .args(io)
        .output()
        .unwrap()
}

/// `iolab trace record` of `dev` into `base` (with `extra` options, a 1 MiB buffer) while `sh`
/// runs `script`.
fn record_script(dev: &str, base: &Path, extra: &[&str], script: &str) -> std::process::Output {
    Command::cargo_bin("iolab")
        .unwrap()
        .args(["trace", "record"])
        .args(extra)
        .args(["-d", dev, "-o"])
        .arg(base)
        .args(["--buffer-kb", "1024", "--", "sh", "-c", script])
        .output()
        .unwrap()
}

#[test]
fn record_through_tracefs_is_readable_by_blkparse_and_btt() {
    if !iolab::sys::is_root() {
        crate::common::skip("needs root");
        return;
    }
    if !have("fio") || !have("blkparse") || !have("btt") {
        crate::common::skip("needs fio, blkparse and btt");
        return;
    }
    let _turn = recording_turn();
    let scratch = Scratch::new("trace");
    let name = scratch.dev.trim_start_matches("/dev/").to_string();
    let _ = std::fs::write(format!("/sys/block/{name}/queue/scheduler"), "mq-deadline");
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("cap");
    // Tracefs may be unmounted before the first recording; iolab mounts it and unmounts after.
    let before = tracefs_state(&scratch.dev);
    let out = record_fio(
        &scratch.dev,
        &base,
        // More random IOs than the 4,096 distinct large seek distances counted one by one, so
        // the seek mode is checked past that too.
        &[
            "--rw=randrw",
            "--bs=4k",
            "--iodepth=8",
            "--number_ios=12000",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    assert!(err.contains("recorded") && err.contains("events"), "{err}");
    assert_eq!(
        tracefs_state(&scratch.dev),
        before,
        "tracefs settings not restored"
    );
    assert!(PathBuf::from(format!("{}.blktrace.0", base.display())).exists());

    let (merged, btt) = blkparse_and_btt(dir.path(), &base);

    let report = iolab_json(&["trace", "analyze", "--json", merged.to_str().unwrap()]);
    check_against_btt(&report, &btt, false);
    assert!(f(&report["devices"][0]["latency"]["q2c"]["n"]) >= 12000.0);
    let seeks = &report["devices"][0]["seek_q2q"];
    assert_eq!(seeks["median_exact"], false, "{seeks}");
    let per_cpu = iolab_json(&["trace", "analyze", "--json", base.to_str().unwrap()]);
    check_against_btt(&per_cpu, &btt, true);
    let procs = per_cpu["processes"].as_array().unwrap();
    assert!(procs.iter().any(|p| p["name"] == "fio"), "{procs:?}");
}

/// The devices an analysis reports, by number.
fn devices_of(report: &Value) -> Vec<&Value> {
    report["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| &d["dev"])
        .collect()
}

/// A disk and its partitions share the kernel's one block trace per disk: recording two of
/// them together is refused (the second enable was a no-op, and its I/O went unrecorded), and
/// so is a disk someone else is tracing, which a dry run reports too.
#[test]
fn devices_sharing_a_disks_trace_are_refused() {
    let Some(Live {
        _turn,
        scratch: disk,
        dir,
    }) = live_with("parts", &["-P"])
    else {
        return;
    };
    // Partitions added by hand (BLKPG), not read from a table: kernels without a partition
    // table parser (this test's own VM) have them too.
    for (n, start) in [("1", "2048"), ("2", "34816")] {
        let st = Std::new("addpart")
            .args([&disk.dev, n, start, "32768"])
            .status()
            .unwrap();
        assert!(st.success(), "addpart {} {n}", disk.dev);
    }
    let name = disk.dev.trim_start_matches("/dev/").to_string();
    let (p1, p2) = (format!("{name}p1"), format!("{name}p2"));
    let record = |devices: &[&str]| {
        let mut cmd = Command::cargo_bin("iolab").unwrap();
        cmd.env("IOLAB_STATE_DIR", dir.path().join("state"))
            .args(["trace", "record", "-o"])
            .arg(dir.path().join("t"));
        for d in devices {
            cmd.args(["-d", d]);
        }
        let out = cmd.args(["--", "true"]).output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let before = tracefs_state(&disk.dev);
    for (devices, why) in [
        (
            [p1.as_str(), name.as_str()],
            format!("{p1} is a partition of {name}, and the kernel keeps one block trace per disk"),
        ),
        (
            [p1.as_str(), p2.as_str()],
            format!("{p1} and {p2} are partitions of one disk, {name}"),
        ),
    ] {
        let (ok, err) = record(&devices);
        assert!(!ok && err.contains(&why), "{devices:?}: {err}");
        assert!(err.contains(&format!("Record {name} alone")), "{err}");
    }
    assert_eq!(tracefs_state(&disk.dev), before);

    // Someone else's trace on the disk (enabled the way blktrace's tools and iolab enable
    // it) is not taken over, nor switched off, through the disk or a partition.
    struct Enabled(String);
    impl Drop for Enabled {
        fn drop(&mut self) {
            let _ = std::fs::write(&self.0, "0");
        }
    }
    let enable = Enabled(format!("/sys/block/{name}/trace/enable"));
    std::fs::write(&enable.0, "1").unwrap();
    for device in [&name, &p2] {
        let (ok, err) = record(&[device]);
        assert!(
            !ok && err.contains(&format!(
                "{device}: a block trace is already running on its disk"
            )),
            "{err}"
        );
        assert!(
            err.contains(&format!(
                "`echo 0 > /sys/class/block/{device}/trace/enable`"
            )),
            "{err}"
        );
        assert_eq!(std::fs::read_to_string(&enable.0).unwrap().trim(), "1");
    }
    drop(enable);
    assert_eq!(tracefs_state(&disk.dev), before);
    // A partition alone records.
    let (ok, err) = record(&[&p2]);
    assert!(ok, "{err}");

    // A dry run says so too, of an experiment on the disk (without its partitions, which
    // would make it a disk holding data).
    for n in ["1", "2"] {
        assert!(Std::new("delpart")
            .args([&disk.dev, n])
            .status()
            .unwrap()
            .success());
    }
    let enable = Enabled(format!("/sys/block/{name}/trace/enable"));
    std::fs::write(&enable.0, "1").unwrap();
    let file = dir.path().join("x.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"x\"\ntrace = true\n[target]\ndevice = \"{}\"\n[workload]\n\
             rw = \"randread\"\nbs = \"4k\"\nruntime = \"1s\"\n",
            disk.dev
        ),
    )
    .unwrap();
    let dry = dry_run(&file, dir.path());
    let said = String::from_utf8_lossy(&dry.stdout);
    assert!(
        said.contains(&format!(
            "right now recording would fail (a block trace is already running on {name})"
        )),
        "{said}{}",
        String::from_utf8_lossy(&dry.stderr)
    );
}

/// Beside a database in a directory shared with others, a trace directory another user made
/// first (here a link to theirs) is not recorded into, as root would otherwise fill whatever
/// it points to: the run goes on untraced and says why.
#[test]
fn an_experiment_records_no_trace_into_a_directory_iolab_did_not_make() {
    let Some(Live {
        _turn,
        scratch,
        dir,
    }) = live("own-dir")
    else {
        return;
    };
    if !have("fio") {
        crate::common::skip("needs fio");
        return;
    }
    let victim = dir.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::os::unix::fs::symlink(&victim, dir.path().join("x.db.traces")).unwrap();
    let file = dir.path().join("x.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"x\"\nrepetitions = 1\nwarmup = false\ntrace = true\n[target]\n\
             device = \"{}\"\n[workload]\nrw = \"randread\"\nbs = \"4k\"\n\
             runtime = \"1s\"\n",
            scratch.dev
        ),
    )
    .unwrap();
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .env("IOLAB_STATE_DIR", dir.path().join("state"))
        .arg("run")
        .arg(&file)
        .arg("--db")
        .arg(dir.path().join("x.db"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("x.db.traces is not a directory"), "{err}");
    assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0);
}

/// Two devices recorded together (`-d A -d B`): one set of files, where each device's
/// events stay its own (4 KiB reads on one, 64 KiB writes on the other), btt reads them, and
/// both devices' tracefs settings are put back. A device named twice is refused.
#[test]
fn two_devices_are_recorded_together_and_analysed_apart() {
    let Some(Live {
        _turn,
        scratch: a,
        dir,
    }) = live("two-a")
    else {
        return;
    };
    if !have("fio") || !have("blkparse") || !have("btt") {
        crate::common::skip("needs fio, blkparse and btt");
        return;
    }
    let b = Scratch::new("two-b");
    let before = (tracefs_state(&a.dev), tracefs_state(&b.dev));
    let base = dir.path().join("cap");
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .env("IOLAB_STATE_DIR", dir.path().join("state"))
        .args([
            "trace", "record", "--json", "-d", &a.dev, "-d", &b.dev, "-o",
        ])
        .arg(&base)
        .args([
            "--",
            "fio",
            "--output=/dev/null",
            "--direct=1",
            "--ioengine=psync",
        ])
        .args([
            "--name=a",
            &format!("--filename={}", a.dev),
            "--rw=randread",
        ])
        .args(["--bs=4k", "--number_ios=2000"])
        .args(["--name=b", &format!("--filename={}", b.dev), "--rw=write"])
        .args(["--bs=64k", "--number_ios=300"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    let name = |dev: &str| dev.trim_start_matches("/dev/").to_string();
    assert!(
        err.contains(&format!(
            "events of {} and {} in",
            name(&a.dev),
            name(&b.dev)
        )),
        "{err}"
    );
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        summary["devices"],
        serde_json::json!([name(&a.dev), name(&b.dev)])
    );
    assert!(err.contains("block events by device: "), "{err}");
    for dev in [&a.dev, &b.dev] {
        let n = f(&summary["events_per_device"][name(dev)]);
        assert!(n >= 300.0 * 3.0, "{dev}: {n} events; {summary}");
    }
    assert_eq!((tracefs_state(&a.dev), tracefs_state(&b.dev)), before);

    let report = iolab_json(&["trace", "analyze", "--json", base.to_str().unwrap()]);
    let device = |dev: &str| {
        let number = std::fs::read_to_string(format!("/sys/class/block/{}/dev", name(dev)))
            .unwrap()
            .trim()
            .replace(':', ",");
        report["devices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["dev"] == number.as_str())
            .unwrap_or_else(|| panic!("{number} not in {:?}", devices_of(&report)))
            .clone()
    };
    // fio's writes went to b only. (Reads are counted at least: udev may probe a fresh
    // loop device while the recording starts.)
    let (da, db) = (device(&a.dev), device(&b.dev));
    assert!(f(&da["reads"]) >= 2000.0, "{da}");
    assert_eq!(f(&da["writes"]), 0.0, "{da}");
    assert_eq!(f(&db["writes"]), 300.0, "{db}");
    let write_q2c = |d: &Value| f(&d["by_direction"]["write"]["q2c"]["n"]);
    assert_eq!(write_q2c(&db), 300.0, "{db}");
    // btt counts the bios of both devices in its "All Devices" section, as iolab does.
    let (_, btt) = blkparse_and_btt(dir.path(), &base);
    let q2c_n = parse_btt(&btt).all["q2c"].3 as f64;
    assert!(q2c_n >= 2300.0, "{btt}");
    assert_eq!(f(&report["all"]["q2c"]["n"]), q2c_n);

    let twice = Command::cargo_bin("iolab")
        .unwrap()
        .env("IOLAB_STATE_DIR", dir.path().join("state"))
        .args(["trace", "record", "-d", &a.dev, "-d", &name(&a.dev), "-o"])
        .arg(dir.path().join("twice"))
        .args(["--duration", "1s"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&twice.stderr);
    assert_eq!(twice.status.code(), Some(2), "{err}");
    assert!(err.contains("named twice"), "{err}");
    assert_eq!((tracefs_state(&a.dev), tracefs_state(&b.dev)), before);
}

/// The recorder reads the ring buffer's pages, where anything else written into tracefs
/// lands too: here `trace_marker` lines between the writes. They are left out and counted,
/// and every write is still recorded. (`trace_pipe`'s binary stream failed on them.)
#[test]
fn entries_not_of_the_block_tracer_are_left_out_and_counted() {
    let Some(Live {
        _turn,
        scratch,
        dir,
    }) = live("marker")
    else {
        return;
    };
    let base = dir.path().join("cap");
    let script = format!(
        "for i in 1 2 3; do echo iolab-test-marker > {TRACEFS}/trace_marker && \
         dd if=/dev/zero of={} bs=4k count=100 seek=$((i * 100)) oflag=direct status=none \
         || exit 1; done",
        scratch.dev
    );
    let out = record_script(&scratch.dev, &base, &[], &script);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("note: 3 entries of other tracefs events"),
        "{err}"
    );
    let report = iolab_json(&["trace", "analyze", "--json", base.to_str().unwrap()]);
    assert_eq!(f(&report["devices"][0]["writes"]), 300.0, "{report}");
    assert_eq!(f(&report["devices"][0]["latency"]["q2c"]["n"]), 300.0);
}

/// `trace record --json`: the JSON alone on standard output, the command's own output moved
/// to standard error beside the text summary, and the figures the text gives.
#[test]
fn record_json_is_alone_on_standard_output() {
    let Some(Live {
        _turn,
        scratch,
        dir,
    }) = live("json")
    else {
        return;
    };
    let base = dir.path().join("cap");
    let script = format!(
        "echo from-the-command; dd if=/dev/zero of={} bs=4k count=64 oflag=direct \
         status=none; exit 3",
        scratch.dev
    );
    let out = record_script(&scratch.dev, &base, &["--json"], &script);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    // The command failed, so the recording does; its summary is printed all the same.
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("from-the-command") && err.contains("recorded"),
        "{err}"
    );
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(v["device"], scratch.dev.trim_start_matches("/dev/"), "{v}");
    assert_eq!(v["command_exit_code"], 3, "{v}");
    assert_eq!(v["command_signal"], Value::Null, "{v}");
    assert_eq!(v["stopped_by"], "command exited", "{v}");
    assert_eq!(v["events_lost"], 0, "{v}");
    assert_eq!(v["empty"], false, "{v}");
    let per_cpu: f64 = v["events_per_cpu"]
        .as_object()
        .unwrap()
        .values()
        .map(f)
        .sum();
    assert_eq!(per_cpu, f(&v["events"]), "{v}");
    // 64 writes: at least their Q, D and C, beside what the block layer adds.
    assert!(f(&v["events"]) >= 192.0, "{v}");
    for file in v["files"].as_array().unwrap() {
        assert!(Path::new(file.as_str().unwrap()).exists(), "{file}");
    }
    let report = iolab_json(&["trace", "analyze", "--json", base.to_str().unwrap()]);
    assert_eq!(f(&report["devices"][0]["writes"]), 64.0, "{report}");
}

/// A busy device fills the ring buffer as fast as it is read; the recorder must still get
/// round to its clock. `--duration 1s` beside 4 KiB random reads stops after 1 s, not when
/// the reads end (a recorder that read until the buffer was empty stopped after 6 to 9 s).
#[test]
fn a_duration_stops_the_recording_on_time_beside_a_busy_device() {
    if !root_with_fio() {
        return;
    }
    let _turn = recording_turn();
    let scratch = Scratch::new("duration");
    let dir = tempfile::tempdir().unwrap();
    let mut fio = Std::new("fio")
        .args([
            "--output=/dev/null",
            "--name=busy",
            "--rw=randread",
            "--bs=4k",
            "--ioengine=libaio",
            "--iodepth=16",
            "--numjobs=2",
            "--direct=1",
            "--time_based",
            "--runtime=5",
        ])
        .arg(format!("--filename={}", scratch.dev))
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .args([
            "trace",
            "record",
            "-d",
            &scratch.dev,
            "--duration",
            "1s",
            "-o",
        ])
        .arg(dir.path().join("busy"))
        .output()
        .unwrap();
    let _ = fio.kill();
    let _ = fio.wait();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    let seconds: f64 = err
        .split(" in ")
        .nth(1)
        .and_then(|r| r.split('s').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no time in {err}"));
    assert!((1.0..1.5).contains(&seconds), "{err}");
}

/// What the command starts out of its process group (`setsid`, a shell's jobs, a daemon) is
/// ended with it, and named: it went on, unrecorded, after iolab had ended. So is what it left
/// running when it exited by itself.
#[test]
fn what_the_command_started_out_of_its_group_ends_with_it() {
    if !crate::common::root_or_skip() {
        return;
    }
    let _turn = recording_turn();
    let scratch = Scratch::new("escaped");
    let dir = tempfile::tempdir().unwrap();
    let pid_file = |n: &str| dir.path().join(n);
    let alive = |file: &std::path::Path| {
        let pid = std::fs::read_to_string(file).unwrap();
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()));
        // Gone, or a zombie not yet collected by init.
        stat.is_ok_and(|s| !s.rsplit_once(')').unwrap().1.trim_start().starts_with('Z'))
    };
    for (how, script, duration) in [
        (
            "at --duration",
            "setsid sleep 300 & echo $! > {esc}; sleep 300 & echo $! > {job}; exec sleep 300",
            "1s",
        ),
        (
            "when the command exited",
            "setsid sleep 300 & echo $! > {esc}; sleep 300 & echo $! > {job}",
            "60s",
        ),
    ] {
        let (esc, job) = (
            pid_file(&format!("esc-{duration}")),
            pid_file(&format!("job-{duration}")),
        );
        let script = script
            .replace("{esc}", esc.to_str().unwrap())
            .replace("{job}", job.to_str().unwrap());
        let state = dir.path().join("state");
        let out = recording(&state, &scratch.dev, duration, &dir.path().join(duration))
            .args(["--", "sh", "-c", &script])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{how}: {err}");
        for file in [&esc, &job] {
            assert!(!alive(file), "{how}: {} still runs: {err}", file.display());
        }
        let escaped = std::fs::read_to_string(&esc).unwrap();
        assert!(
            err.contains("the command started and left running: ")
                && err.contains(&format!("{} (sleep)", escaped.trim())),
            "{how}: {err}"
        );
    }
    // A child iolab had before, kept across the exec that started it (`monitor & exec
    // iolab ...`), is not the command's: it runs on, unnamed.
    let before = pid_file("before");
    let iolab = assert_cmd::cargo::cargo_bin("iolab");
    let script = format!(
        // Its output elsewhere: the test waits for the end of iolab's.
        "sleep 300 >/dev/null 2>&1 & echo $! > {}; exec {} trace record -d {} --duration 5s -o {} -- true",
        before.display(),
        iolab.display(),
        scratch.dev,
        dir.path().join("inherited").display()
    );
    let out = Std::new("sh")
        .args(["-c", &script])
        .env("IOLAB_STATE_DIR", dir.path().join("state"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let still = alive(&before);
    let pid = std::fs::read_to_string(&before).unwrap();
    let _ = Std::new("kill").arg(pid.trim()).status();
    assert!(out.status.success(), "{err}");
    assert!(
        still,
        "iolab ended a process that was not the command's: {err}"
    );
    assert!(!err.contains("left running"), "{err}");
}

/// `--duration` bounds the recording, not only the wait: a command still running when it
/// ends is asked to stop (SIGTERM), and what it does meanwhile is not recorded. (The trace of
/// a 1 s recording beside a 4 s fio ran to 2.8 s: the command got 2 s before it was killed,
/// and the tracer stayed on until then.)
#[test]
fn a_command_outliving_the_duration_is_stopped_and_left_out_of_the_trace() {
    if !root_with_fio() {
        return;
    }
    let _turn = recording_turn();
    let scratch = Scratch::new("outlived");
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("outlived");
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .args(["trace", "record", "--json", "-d", &scratch.dev])
        // Long enough for fio to start on a loaded machine (at 1 s, under a parallel test
        // run, it sometimes had not begun its I/O when the recording ended).
        .args(["--duration", "3s", "-o"])
        .arg(&base)
        .args([
            "--",
            "fio",
            "--output=/dev/null",
            "--name=long",
            "--rw=randread",
            "--bs=4k",
            "--direct=1",
            "--rate_iops=2000",
            "--time_based",
            "--runtime=10",
        ])
        .arg(format!("--filename={}", scratch.dev))
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    let recorded: Value = serde_json::from_slice(&out.stdout).unwrap();
    let seconds = recorded["seconds"].as_f64().unwrap();
    assert!((3.0..3.5).contains(&seconds), "{recorded}");
    // Why it stopped is said as the limit, not as a second time beside the first.
    assert_eq!(
        recorded["stopped_by"], "--duration 3s reached",
        "{recorded}"
    );
    let report = iolab_json(&["trace", "analyze", "--json", base.to_str().unwrap()]);
    let span = report["duration"].as_f64().unwrap();
    assert!(
        span > 0.5 && span <= seconds,
        "trace spans {span} s: {recorded}"
    );
}

/// A command that wraps the workload (`sh -c 'fio ...'`) is ended whole at the duration: its
/// fio went on doing I/O, unrecorded, after iolab had said the command ended. A command that
/// fails on its own fails the recording, whose files are complete.
#[test]
fn a_wrapped_command_is_ended_whole_and_a_failing_one_fails_the_recording() {
    if !root_with_fio() {
        return;
    }
    let _turn = recording_turn();
    let scratch = Scratch::new("wrapped");
    let dir = tempfile::tempdir().unwrap();
    let job = format!("iolab-wrapped-{}", std::process::id());
    let script = format!(
        "fio --output=/dev/null --name={job} --filename={} --rw=randread --bs=4k --direct=1 \
         --time_based --runtime=8; echo the wrapper went on",
        scratch.dev
    );
    let started = std::time::Instant::now();
    let out = record_script(
        &scratch.dev,
        &dir.path().join("w"),
        &["--duration", "1s"],
        &script,
    );
    let took = started.elapsed();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    // Ended with its fio at once, not when the fio it waited for ended 8 s on.
    assert!(took < std::time::Duration::from_secs(5), "{took:?} {err}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(!said.contains("the wrapper went on"), "{said}");
    let left = Command::new("pgrep").args(["-f", &job]).output().unwrap();
    assert!(
        left.stdout.is_empty(),
        "still running after iolab ended: {}",
        String::from_utf8_lossy(&left.stdout)
    );

    let out = record_script(&scratch.dev, &dir.path().join("f"), &[], "exit 3");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("the command failed (exit status: 3); its recording is complete"),
        "{err}"
    );
    assert!(dir.path().join("f.blktrace.0").exists(), "{err}");
}

/// A command that reads the terminal is given it. At a terminal, the command's process group
/// (its own) is a background one, so a `read` under `trace record` stopped (SIGTTIN) and the
/// recording went on, idle, until Ctrl-C or its duration. In a pseudo-terminal (`script`), the
/// command reads the line typed and the recording ends with it.
#[test]
fn a_command_that_reads_the_terminal_is_given_it() {
    if !root_with_fio() {
        return;
    }
    if !have("script") {
        crate::common::skip("needs script (util-linux)");
        return;
    }
    let _turn = recording_turn();
    let scratch = Scratch::new("tty");
    let dir = tempfile::tempdir().unwrap();
    let inner = format!(
        "{} trace record --duration 10s -d {} -o {} -- sh -c 'read line; echo got=$line'",
        assert_cmd::cargo::cargo_bin("iolab").display(),
        scratch.dev,
        dir.path().join("tty").display()
    );
    let mut script = Std::new("script")
        .args(["-qfec", &inner, "/dev/null"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Typed at once: the terminal keeps the line until the command reads it. The input stays
    // open until the end (its end would end the session).
    let mut typed = script.stdin.take().unwrap();
    std::io::Write::write_all(&mut typed, b"hello\n").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while script.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = script.kill();
    drop(typed);
    let out = script.wait_with_output().unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("got=hello"), "{said}");
    assert!(said.contains("(command exited)"), "{said}");
}

/// Events the kernel lost while recording are noted in the trace itself (message records
/// blkparse prints), so its analysis, later or elsewhere, says the trace is incomplete: with
/// 81% lost, `analyze` gave a D2C max of 1.18 s on a loop device and no warning.
#[test]
fn events_lost_while_recording_are_noted_in_the_trace() {
    if !root_with_fio() {
        return;
    }
    let _turn = recording_turn();
    let scratch = Scratch::new("lossy");
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("lossy");
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .args([
            "trace",
            "record",
            "--json",
            "--buffer-kb",
            "64",
            "-d",
            &scratch.dev,
            "-o",
        ])
        .arg(&base)
        .args([
            "--",
            "fio",
            "--output=/dev/null",
            "--name=l",
            "--rw=randread",
            "--bs=4k",
        ])
        .args([
            "--direct=1",
            "--ioengine=libaio",
            "--iodepth=16",
            "--number_ios=60000",
        ])
        .arg(format!("--filename={}", scratch.dev))
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    let recorded: Value = serde_json::from_slice(&out.stdout).unwrap();
    let lost = f(&recorded["events_lost"]);
    assert!(lost > 0.0, "a 64 KiB buffer lost nothing: {recorded}");
    let report = iolab_json(&["trace", "analyze", "--json", base.to_str().unwrap()]);
    assert_eq!(f(&report["events_lost"]), lost, "{recorded}");
    let findings = report["findings"].as_array().unwrap();
    assert_eq!(findings[0]["code"], "events_lost", "{findings:?}");
    if have("blkparse") {
        let text = Command::new("blkparse")
            .arg("-i")
            .arg(&base)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&text.stdout);
        assert!(text.contains("events lost"), "blkparse shows no note");
    }
}

/// An output directory that does not exist is refused before tracefs is touched (it was
/// found only when the first event was written, or at the end when there was none).
#[test]
fn record_refuses_an_output_directory_that_does_not_exist() {
    if !iolab::sys::is_root() {
        crate::common::skip("needs root");
        return;
    }
    let _turn = recording_turn();
    let scratch = Scratch::new("nodir");
    let before = tracefs_state(&scratch.dev);
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .args(["trace", "record", "-d", &scratch.dev, "--duration", "5s"])
        .args(["-o", "/nonexistent-iolab-dir/x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/nonexistent-iolab-dir: no such directory for the output files"),
        "{err}"
    );
    assert_eq!(tracefs_state(&scratch.dev), before);
}

/// A recording replaces an earlier one of the same name whole: the earlier one's files of
/// higher CPUs and its compressed copies go (an analysis by the name would read them as part
/// of this one), and what iolab does not remove (a link) is named. `-o DIR` is refused.
#[test]
fn a_recording_removes_the_files_of_an_earlier_one_of_its_name() {
    if !iolab::sys::is_root() {
        crate::common::skip("needs root");
        return;
    }
    if !have("fio") {
        crate::common::skip("needs fio");
        return;
    }
    let _turn = recording_turn();
    let scratch = Scratch::new("again");
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("cap");
    let file = |n: &str| dir.path().join(format!("cap.blktrace.{n}"));
    std::fs::write(file("7"), b"an earlier recording").unwrap();
    std::fs::write(file("0.gz"), b"an earlier copy").unwrap();
    std::os::unix::fs::symlink("/etc/hostname", file("9")).unwrap();
    std::fs::write(dir.path().join("cap.blktrace.x"), b"not a recording's").unwrap();
    let out = record_fio(
        &scratch.dev,
        &base,
        &["--rw=randread", "--bs=4k", "--number_ios=200"],
    );
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    assert!(!file("7").exists() && !file("0.gz").exists(), "{err}");
    assert!(file("0").exists());
    assert!(
        err.contains("removed 2 file(s) of an earlier recording") && err.contains("cap.blktrace.7"),
        "{err}"
    );
    assert!(
        err.contains("cap.blktrace.9 is not a regular file: iolab does not remove it"),
        "{err}"
    );
    assert!(std::fs::symlink_metadata(file("9")).is_ok());
    assert!(dir.path().join("cap.blktrace.x").exists());

    for named in [
        format!("{}/", dir.path().display()),
        dir.path().display().to_string(),
    ] {
        let out = record_script(&scratch.dev, Path::new(&named), &[], "true");
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("-o names the recording"), "{err}");
    }
}

#[test]
fn record_refuses_a_non_device() {
    if !iolab::sys::is_root() {
        crate::common::skip("needs root");
        return;
    }
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .args(["trace", "record", "-d", "nosuchdisk0", "--duration", "0.1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    // The devices there are is the fix; a tracer that is missing is another message.
    assert!(
        err.contains("nosuchdisk0: no such block device (this machine has "),
        "{err}"
    );
}

#[test]
fn plot_writes_four_svg_charts() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .args(["trace", "plot", fixture("fx").to_str().unwrap(), "-o"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for name in ["sectors.svg", "latency.svg", "depth.svg", "histogram.svg"] {
        let svg = std::fs::read_to_string(dir.path().join(name)).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
            "{name}"
        );
    }
    // It says what it wrote: a path per line, or the same paths as JSON.
    let listed: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert!(listed.len() >= 4, "{listed:?}");
    assert!(listed.iter().all(|f| Path::new(f).is_file()), "{listed:?}");
    let json = iolab_json(&[
        "trace",
        "plot",
        fixture("fx").to_str().unwrap(),
        "--json",
        "-o",
        dir.path().to_str().unwrap(),
    ]);
    let files: Vec<String> = serde_json::from_value(json["files"].clone()).unwrap();
    assert_eq!(files, listed);
    // The fixture has sequential writes and random reads: both colours in the sector cloud.
    let sectors = std::fs::read_to_string(dir.path().join("sectors.svg"))
        .unwrap()
        .to_ascii_lowercase();
    assert!(sectors.matches("#1f77b4").count() > 100, "reads");
    assert!(sectors.matches("#d62728").count() > 100, "writes");
    let plot_dev = |dev: &str| {
        Command::cargo_bin("iolab")
            .unwrap()
            .args([
                "trace",
                "plot",
                fixture("fx").to_str().unwrap(),
                "--dev",
                dev,
                "-o",
            ])
            .arg(dir.path())
            .output()
            .unwrap()
    };
    let bad = plot_dev("9,9");
    assert_eq!(bad.status.code(), Some(1));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("--dev 9,9 is not in the trace; it has 7,0"),
        "{err}"
    );
    // A number that is none is a usage error.
    let bad = plot_dev("7,0x");
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--dev 7,0x: bad minor"));
}

#[test]
fn plot_png_writes_a_png_beside_each_svg() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .args([
            "trace",
            "plot",
            fixture("fx").to_str().unwrap(),
            "--png",
            "-o",
        ])
        .arg(dir.path())
        .env("PATH", "/nonexistent") // no external converter to fall back on
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for name in ["sectors", "latency", "depth", "histogram"] {
        let svg = std::fs::read_to_string(dir.path().join(format!("{name}.svg"))).unwrap();
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let svg_px = |a: &str| {
            doc.root_element()
                .attribute(a)
                .unwrap()
                .parse::<u32>()
                .unwrap()
        };
        let png = std::fs::read(dir.path().join(format!("{name}.png"))).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{name}");
        let be = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().unwrap());
        assert_eq!(
            (be(16), be(20)),
            (2 * svg_px("width"), 2 * svg_px("height")),
            "{name}"
        );
        assert!(png.len() > 10_000, "{name}: {} bytes", png.len());
    }
}

/// Re-encodes every record of a trace with `f`, writing a new file.
fn reencode(
    src: &Path,
    dst: &Path,
    version: u8,
    endian: iolab::trace::blk_io_trace::Endian,
    f: impl Fn(&mut iolab::trace::blk_io_trace::Event),
) {
    let mut out = Vec::new();
    for ev in iolab::trace::stream::RecordStream::open(src).unwrap() {
        let mut ev = ev.unwrap();
        f(&mut ev);
        iolab::trace::blk_io_trace::encode(&ev, version, endian, &mut out);
    }
    std::fs::write(dst, out).unwrap();
}

fn without_volatile(mut v: Value) -> Value {
    // Everything but the counters that describe the encoding itself.
    for d in v["devices"].as_array_mut().unwrap() {
        d["cgroup_events"] = Value::Null;
    }
    v["findings"] = Value::Null;
    v
}

#[test]
fn version_8_big_endian_and_cgroup_tagged_records_give_the_same_analysis() {
    use iolab::trace::blk_io_trace::Endian;
    let dir = tempfile::tempdir().unwrap();
    let v8 = dir.path().join("v8be.bin");
    reencode(&fixture("fx.bin"), &v8, 8, Endian::Big, |_| {});
    let cg = dir.path().join("cgroup.bin");
    reencode(&fixture("fx.bin"), &cg, 7, Endian::Little, |ev| {
        if !ev.is_notify() {
            ev.cgroup = Some(4242);
        }
    });
    let base = iolab_json(&[
        "trace",
        "analyze",
        "--json",
        fixture("fx.bin").to_str().unwrap(),
    ]);
    let a = iolab_json(&["trace", "analyze", "--json", v8.to_str().unwrap()]);
    let b = iolab_json(&["trace", "analyze", "--json", cg.to_str().unwrap()]);
    assert_eq!(a, base, "v8 big-endian differs from v7");
    // btt drops every cgroup-tagged event; iolab counts them and says so.
    assert!(f(&b["devices"][0]["cgroup_events"]) > 1000.0);
    assert_eq!(without_volatile(b), without_volatile(base));
}

/// Process names are cut to btt's width in characters: the kernel cuts them at 15 bytes, in
/// the middle of a character at times, and a byte count then split one (it panicked).
#[test]
fn a_process_name_beyond_ascii_is_cut_between_characters() {
    use iolab::trace::blk_io_trace::{Endian, Payload};
    let dir = tempfile::tempdir().unwrap();
    let named = dir.path().join("named.bin");
    reencode(&fixture("fx.bin"), &named, 7, Endian::Little, |ev| {
        if let Payload::ProcessName(name) = &mut ev.payload {
            *name = format!("{}é and more", "a".repeat(14)).into();
        }
    });
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .args(["trace", "analyze"])
        .arg(&named)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains(&format!("{}é ", "a".repeat(14))), "{text}");
}

/// SIGTERM, and SIGHUP (a terminal closed, an ssh session dropped: it used to kill the
/// recorder with the tracer on), stop a recording as Ctrl-C does: tracefs is put back.
#[test]
fn record_restores_tracefs_on_sigterm_and_sighup() {
    let Some(Live {
        _turn,
        scratch,
        dir,
    }) = live("sigterm")
    else {
        return;
    };
    for signal in ["-TERM", "-HUP"] {
        let before = tracefs_state(&scratch.dev);
        let child = Std::new(env!("CARGO_BIN_EXE_iolab"))
            .env("IOLAB_STATE_DIR", dir.path().join("state"))
            .args(["trace", "record", "-d", &scratch.dev, "--duration", "60"])
            .arg("-o")
            .arg(dir.path().join(format!("t{signal}")))
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(800));
        // While recording, the device's trace is on.
        let name = scratch.dev.trim_start_matches("/dev/");
        let during = std::fs::read_to_string(format!("/sys/block/{name}/trace/enable")).unwrap();
        let _ = Std::new("kill")
            .args([signal, &child.id().to_string()])
            .status();
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(during.trim(), "1", "{signal}");
        assert!(out.status.success(), "{signal}: {:?}: {err}", out.status);
        assert!(err.contains("signal"), "{signal}: {err}");
        assert_eq!(
            tracefs_state(&scratch.dev),
            before,
            "{signal}: tracefs settings not restored"
        );
    }
}

#[test]
fn compare_shows_slower_completions() {
    use iolab::trace::blk_io_trace::{code, Endian};
    let dir = tempfile::tempdir().unwrap();
    let slow = dir.path().join("slow.bin");
    // Every completion 1 ms later (and so everything after it shifted too).
    reencode(&fixture("fx.bin"), &slow, 7, Endian::Little, |ev| {
        if ev.code() == code::COMPLETE && !ev.is_notify() {
            ev.time += 1_000_000;
        }
    });
    let a = fixture("fx.bin");
    let c = iolab_json(&[
        "trace",
        "compare",
        "--json",
        a.to_str().unwrap(),
        slow.to_str().unwrap(),
    ]);
    let rows = c["devices"][0]["rows"].as_array().unwrap();
    let row = |m: &str| rows.iter().find(|r| r["metric"] == m).unwrap().clone();
    let d2c = row("D2C avg (s)");
    assert!(f(&d2c["b"]) - f(&d2c["a"]) > 0.0009, "{d2c}");
    assert!(f(&d2c["change_pct"]) > 500.0, "{d2c}");
    let text = Command::cargo_bin("iolab")
        .unwrap()
        .args([
            "trace",
            "compare",
            a.to_str().unwrap(),
            slow.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains("D2C avg (s)") && text.contains("findings only in B"),
        "{text}"
    );
}

/// A recording through the library API (what an experiment uses) on a fresh scratch device,
/// in its turn: the device, a temp dir (the recording is its `run1`, the state directory its
/// `state`) and tracefs as it was before. None, after saying so, when not root.
struct Recorded {
    rec: iolab::trace::capture::Recording,
    scratch: Scratch,
    dir: tempfile::TempDir,
    before: Vec<(String, String)>,
    _turn: RecordingTurn,
}

fn start_recording(tag: &str, buffer_kb: u64) -> Option<Recorded> {
    let Live {
        _turn: turn,
        scratch,
        dir,
    } = live(tag)?;
    let before = tracefs_state(&scratch.dev);
    let rec = iolab::trace::capture::start(iolab::trace::capture::Config {
        devices: vec![scratch.dev.clone()],
        output: dir.path().join("run1"),
        duration: None,
        buffer_kb,
        command: Vec::new(),
        status_line: false,
        command_stdout_to_stderr: false,
        state_dir: dir.path().join("state"),
    })
    .unwrap();
    Some(Recorded {
        rec,
        scratch,
        dir,
        before,
        _turn: turn,
    })
}

/// The library API an experiment uses to trace each run: start, run the workload, stop.
#[test]
fn background_recording_api_captures_a_workload() {
    let Some(r) = start_recording("bg", 4096) else {
        return;
    };
    let dd = Std::new("dd")
        .args([
            "if=/dev/zero",
            "bs=4k",
            "count=300",
            "oflag=direct",
            "status=none",
        ])
        .arg(format!("of={}", r.scratch.dev))
        .status()
        .unwrap();
    assert!(dd.success());
    let summary = r.rec.stop().unwrap();
    assert!(summary.events() >= 300 * 3, "{}", summary.events());
    assert_eq!(tracefs_state(&r.scratch.dev), r.before);
    let report = iolab::trace::analyze::analyze_paths(
        &[r.dir.path().join("run1")],
        iolab::trace::analyze::Options::default(),
    )
    .unwrap();
    let d = &report.devices[0];
    assert_eq!(d.latency["q2c"].n, 300);
    assert_eq!(d.writes, 300);
    assert!(report.processes.iter().any(|p| p.name == "dd"));
}

/// A child that another thread forks holds a copy of every descriptor until its exec, and the
/// kernel will not change the tracer while a trace_pipe_raw is open (EBUSY). Here a child forked
/// from the test holds the recorder's copy for 300 ms past `stop`: the recording must wait
/// for it and still put everything back.
#[test]
fn a_ring_buffer_reader_copied_into_a_forked_child_does_not_block_the_restore() {
    let Some(r) = start_recording("busy", 1024) else {
        return;
    };
    // SAFETY: the child only sleeps and exits, both async-signal-safe.
    let child = unsafe { libc::fork() };
    if child == 0 {
        unsafe {
            libc::usleep(300_000);
            libc::_exit(0);
        }
    }
    assert!(child > 0, "fork failed");
    let summary = r.rec.stop();
    let mut status = 0;
    unsafe { libc::waitpid(child, &mut status, 0) };
    summary.unwrap();
    assert_eq!(tracefs_state(&r.scratch.dev), r.before);
}

/// A recording still running is no leftover: `iolab restore` leaves its tracefs settings (and
/// its mount) to it and exits 0, an experiment that records nothing runs beside it, and one
/// that records is refused, naming the recorder's pid. (restore said the running recorder was
/// killed, tried to unmount its tracefs, and failed; every experiment was refused.)
#[test]
fn a_recording_still_running_is_left_to_it_by_restore_and_by_runs_that_do_not_trace() {
    let Some(r) = start_recording("running", 1024) else {
        return;
    };
    let state = r.dir.path().join("state");
    let out = crate::common::restore_in(&state);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("in use   tracefs settings") && text.contains("still running"),
        "{text}"
    );
    let tracer = std::fs::read_to_string(Path::new(TRACEFS).join("current_tracer")).unwrap();
    assert_eq!(
        tracer.trim(),
        "blk",
        "restore changed the running recording's tracer"
    );
    let exp = r.dir.path().join("e.toml");
    for (trace, code) in [(false, 0), (true, 1)] {
        std::fs::write(
            &exp,
            format!(
                "name = \"beside\"\nrepetitions = 1\nwarmup = false\ntrace = {trace}\n\
                 [target]\nsize = \"16M\"\n[workload]\nrw = \"randread\"\ndirect = 1\n\
                 runtime = \"1s\"\ntime_based = true\n"
            ),
        )
        .unwrap();
        let run = Command::cargo_bin("iolab")
            .unwrap()
            .env("IOLAB_STATE_DIR", &state)
            .arg("run")
            .arg(&exp)
            .arg("--db")
            .arg(r.dir.path().join(format!("{trace}.db")))
            .timeout(std::time::Duration::from_secs(120))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&run.stderr).to_string();
        assert_eq!(run.status.code(), Some(code), "trace = {trace}: {err}");
        if trace {
            let me = format!("another iolab (pid {})", std::process::id());
            assert!(err.contains(&me), "{err}");
        }
    }
    r.rec.stop().unwrap();
    assert_eq!(tracefs_state(&r.scratch.dev), r.before);
}

/// tracefs mounted for a test's duration, unmounted at the end if it was not before.
struct TracefsMounted(bool);

impl TracefsMounted {
    fn ensure() -> TracefsMounted {
        if Path::new(TRACEFS).join("trace_pipe").exists() {
            return TracefsMounted(false);
        }
        let st = Std::new("mount")
            .args(["-t", "tracefs", "nodev", TRACEFS])
            .status()
            .unwrap();
        assert!(st.success(), "mount -t tracefs failed");
        TracefsMounted(true)
    }
}

impl Drop for TracefsMounted {
    fn drop(&mut self) {
        if self.0 {
            let _ = Std::new("umount").arg(TRACEFS).status();
        }
    }
}

/// `iolab restore` in a state directory when dropped: what a failed test leaves is put back.
struct RestoreWhenDone(PathBuf);

impl Drop for RestoreWhenDone {
    fn drop(&mut self) {
        let _ = crate::common::restore_in(&self.0);
    }
}

/// "7 (expanded: 1408)" or "1410" -> KiB; tracefs rounds sizes to whole pages.
fn ring_kb(text: &str) -> u64 {
    let t = text.trim();
    let t = t
        .split_once("(expanded:")
        .map_or(t, |(_, r)| r.trim_end_matches(')'));
    t.trim().parse().unwrap_or(0)
}

/// A recording killed with SIGKILL leaves the tracer on (blk, the device's
/// trace switch, a large ring buffer). Its journal lets `iolab restore` put it all back, and
/// until then a new recording refuses to start, from any state directory: it would journal
/// the changed values as the originals.
#[test]
fn a_killed_recording_is_put_back_by_restore() {
    let Some(Live {
        _turn,
        scratch,
        dir,
    }) = live("kill")
    else {
        return;
    };
    let state = dir.path().join("state");
    let _mounted = TracefsMounted::ensure();
    let before = tracefs_state(&scratch.dev);
    let ring = || std::fs::read_to_string(Path::new(TRACEFS).join("buffer_size_kb")).unwrap();
    let ring_before = ring_kb(&ring());
    let record = |state: &Path, out: &str, seconds: &str| {
        let mut c = recording(state, &scratch.dev, seconds, &dir.path().join(out));
        c.args(["--buffer-kb", "8192"]);
        c
    };
    let _cleanup = RestoreWhenDone(state.clone());
    // While it records, a dry run of an experiment that records too says the run would stop
    // (it said runs would go on untraced).
    let exp = dir.path().join("e.toml");
    let dry_run = |traced: &str| {
        std::fs::write(
            &exp,
            format!(
                "name = \"after a killed trace\"\nrepetitions = 1\n{traced}[target]\n\
                 device = \"{}\"\n[workload]\nrw = \"randread\"\nbs = \"4k\"\n\
                 size = \"4m\"\nruntime = \"1s\"\n[factors]\nrq_affinity = [1]\n",
                scratch.dev
            ),
        )
        .unwrap();
        let dry = crate::common::iolab()
            .env("IOLAB_STATE_DIR", &state)
            .args(["run", "--dry-run", "--db"])
            .arg(dir.path().join("r.db"))
            .arg(&exp)
            .output()
            .unwrap();
        format!(
            "{}{}",
            String::from_utf8_lossy(&dry.stdout),
            String::from_utf8_lossy(&dry.stderr)
        )
    };
    let mut live = started_recording(&scratch.dev, record(&state, "killed", "60"));
    let out = dry_run("trace = true\n");
    assert!(
        out.contains("would stop before it starts: a recording of iolab (pid"),
        "{out}"
    );
    assert!(!dry_run("").contains("would stop before it starts"));
    live.kill().unwrap();
    live.wait().unwrap();
    assert_ne!(tracefs_state(&scratch.dev), before);
    assert!(ring_kb(&ring()).abs_diff(8192) <= 4, "{}", ring());

    // Nor does an experiment run over it: every I/O would pay for the tracing.
    std::fs::write(
        &exp,
        format!(
            "name = \"after a killed trace\"\nrepetitions = 1\n[target]\ndevice = \"{}\"\n\
             [workload]\nrw = \"randread\"\nbs = \"4k\"\nsize = \"4m\"\nruntime = \"1s\"\n\
             [factors]\nrq_affinity = [1]\n",
            scratch.dev
        ),
    )
    .unwrap();
    let run = crate::common::iolab()
        .env("IOLAB_STATE_DIR", &state)
        .args(["run", "--db"])
        .arg(dir.path().join("r.db"))
        .arg(&exp)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success(), "the experiment ran");
    assert!(
        err.contains("tracer/journal.json") && err.contains("iolab restore"),
        "{err}"
    );
    // Its dry run says so, traced or not, and does not take the tracer left on for a
    // recording at work.
    for traced in ["", "trace = true\n"] {
        let out = dry_run(traced);
        assert!(
            out.contains("the run would stop before it starts")
                && out.contains("tracer/journal.json")
                && out.contains("iolab restore"),
            "{out}"
        );
        assert!(!out.contains("already running"), "{out}");
    }
    for elsewhere in [state.clone(), dir.path().join("other-state")] {
        let again = record(&elsewhere, "again", "1").output().unwrap();
        let err = String::from_utf8_lossy(&again.stderr);
        assert!(
            !again.status.success(),
            "a second recording started in {}",
            elsewhere.display()
        );
        assert!(err.contains("iolab restore"), "{err}");
    }

    let restored = crate::common::restore_in(&state);
    let out = String::from_utf8_lossy(&restored.stdout);
    assert!(
        restored.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&restored.stderr)
    );
    assert!(out.contains("tracefs settings of a killed"), "{out}");
    assert_eq!(tracefs_state(&scratch.dev), before);
    assert!(ring_kb(&ring()).abs_diff(ring_before) <= 4, "{}", ring());
    // Nothing is left to replay: a new recording works.
    let after = record(&state, "after", "0.2").output().unwrap();
    assert!(
        after.status.success(),
        "{}",
        String::from_utf8_lossy(&after.stderr)
    );
}

/// `iolab trace record` of `dev` for `seconds` into `out`, with its state in `state`.
fn recording(state: &Path, dev: &str, seconds: &str, out: &Path) -> std::process::Command {
    let mut c = crate::common::iolab();
    c.env("IOLAB_STATE_DIR", state)
        .args(["trace", "record", "-d", dev, "--duration", seconds, "-o"])
        .arg(out);
    c
}

/// Starts `record` (a `trace record` of `dev`) and kills it with SIGKILL once the device's
/// tracing is on.
fn kill_once_recording(dev: &str, record: std::process::Command) {
    let mut child = started_recording(dev, record);
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Starts `record` (a `trace record` of `dev`) and returns once the device's tracing is on.
fn started_recording(dev: &str, mut record: std::process::Command) -> std::process::Child {
    let child = record
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let enable = format!(
        "/sys/block/{}/trace/enable",
        dev.trim_start_matches("/dev/")
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::fs::read_to_string(&enable).unwrap_or_default().trim() != "1" {
        assert!(
            std::time::Instant::now() < deadline,
            "the recording never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child
}

/// tracefs unmounted for a test's duration, mounted again at the end if it was before; `None`
/// when it is mounted and busy.
struct TracefsUnmounted(bool);

impl TracefsUnmounted {
    fn ensure() -> Option<TracefsUnmounted> {
        if !tracefs_mounted() {
            return Some(TracefsUnmounted(false));
        }
        let st = Std::new("umount").arg(TRACEFS).status().unwrap();
        st.success().then_some(TracefsUnmounted(true))
    }
}

impl Drop for TracefsUnmounted {
    fn drop(&mut self) {
        if self.0 && !tracefs_mounted() {
            let _ = Std::new("mount")
                .args(["-t", "tracefs", "nodev", TRACEFS])
                .status();
        }
    }
}

fn tracefs_mounted() -> bool {
    Path::new(TRACEFS).join("trace_pipe").exists()
}

/// A recording that mounted tracefs and was killed leaves it mounted; `iolab restore` puts
/// the settings back and unmounts it, as the recording would have.
#[test]
fn a_killed_recording_that_mounted_tracefs_is_unmounted_by_restore() {
    let Some(Live {
        _turn,
        scratch,
        dir,
    }) = live("killmount")
    else {
        return;
    };
    let Some(_unmounted) = TracefsUnmounted::ensure() else {
        crate::common::skip("tracefs is mounted here and busy: it cannot be unmounted first");
        return;
    };
    let state = dir.path().join("state");
    let _cleanup = RestoreWhenDone(state.clone());
    let record = recording(&state, &scratch.dev, "60", &dir.path().join("killed"));
    kill_once_recording(&scratch.dev, record);
    assert!(tracefs_mounted(), "the recording did not mount tracefs");
    let restored = crate::common::restore_in(&state);
    let out = String::from_utf8_lossy(&restored.stdout);
    assert!(restored.status.success(), "{out}");
    assert!(out.contains("tracefs settings of a killed"), "{out}");
    assert!(
        out.contains(
            "unmounted tracefs at /sys/kernel/tracing, which a killed `trace record` had mounted"
        ),
        "{out}"
    );
    assert!(!tracefs_mounted(), "{out}");
    // Nothing is left to undo.
    let again = crate::common::restore_in(&state);
    let out = String::from_utf8_lossy(&again.stdout);
    assert!(!out.contains("tracefs"), "{out}");
}

/// A killed recording whose tracefs someone unmounted before `iolab restore`: tracefs is only
/// a view and the tracer stays on in the kernel, so restore mounts it to put the settings
/// back (it called them gone, dropped the journal, and left the tracer on), then unmounts it.
#[test]
fn a_killed_recording_is_put_back_after_tracefs_was_unmounted() {
    let Some(Live {
        _turn,
        scratch,
        dir,
    }) = live("killumount")
    else {
        return;
    };
    let Some(_unmounted) = TracefsUnmounted::ensure() else {
        crate::common::skip("tracefs is mounted here and busy: it cannot be unmounted first");
        return;
    };
    let seen = || {
        let _view = TracefsMounted::ensure();
        tracefs_state(&scratch.dev)
    };
    let before = seen();
    let state = dir.path().join("state");
    let _cleanup = RestoreWhenDone(state.clone());
    let record = recording(&state, &scratch.dev, "60", &dir.path().join("killed"));
    kill_once_recording(&scratch.dev, record);
    let st = Std::new("umount").arg(TRACEFS).status().unwrap();
    assert!(
        st.success(),
        "the killed recording's tracefs could not be unmounted"
    );
    assert_ne!(seen(), before, "the tracer was off already");
    let restored = crate::common::restore_in(&state);
    let out = String::from_utf8_lossy(&restored.stdout);
    assert!(restored.status.success(), "{out}");
    assert!(out.contains("tracefs settings of a killed"), "{out}");
    assert!(
        !tracefs_mounted(),
        "restore left its view of tracefs mounted: {out}"
    );
    assert_eq!(seen(), before, "{out}");
}

/// A caller that returns early or panics drops its recording without `stop`: the tracer must
/// not stay on.
#[test]
fn a_dropped_recording_puts_tracefs_back() {
    let Some(r) = start_recording("drop", 1024) else {
        return;
    };
    assert_ne!(tracefs_state(&r.scratch.dev), r.before);
    drop(r.rec);
    assert_eq!(tracefs_state(&r.scratch.dev), r.before);
}

#[test]
fn a_closed_stdout_is_not_a_panic() {
    use std::io::Read;
    let mut child = Std::new(env!("CARGO_BIN_EXE_iolab"))
        .args([
            "trace",
            "analyze",
            "--json",
            fixture("fx.bin").to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 16];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // The pipe is closed here, long before iolab has written its ~100 KB.
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs the experiment `file` into `dir/r.db` with its state in `dir/state`, which must
/// succeed with every run traced (no "trace:" message); the database's path.
fn run_traced(dir: &Path, file: &Path) -> PathBuf {
    let db_path = dir.join("r.db");
    let out = Std::new(env!("CARGO_BIN_EXE_iolab"))
        .args(["run", "--db"])
        .arg(&db_path)
        .arg(file)
        .env("IOLAB_STATE_DIR", dir.join("state"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("trace:"), "{stderr}");
    db_path
}

/// `trace = true`: every measured run of a 2-cell experiment keeps a trace beside the
/// database that `iolab trace analyze` reads, and carries trace metrics that agree with fio.
#[test]
fn an_experiment_with_trace_true_stores_an_analysed_trace_per_run() {
    let Some(Live {
        _turn,
        scratch,
        dir,
    }) = live("exp")
    else {
        return;
    };
    let before = tracefs_state(&scratch.dev);
    let file = dir.path().join("traced.toml");
    // fio is rate-limited so that a loaded machine's recorder keeps up (no lost events).
    std::fs::write(
        &file,
        format!(
            "name = \"traced\"\nseed = 3\nrepetitions = 1\nwarmup = true\ntrace = true\n\
             [target]\ndevice = \"{}\"\nanchor_cpu = 0\n[workload]\nrw = \"randread\"\n\
             bs = \"4k\"\nioengine = \"psync\"\ndirect = 1\nsize = \"16m\"\n\
             runtime = \"1s\"\ntime_based = true\nrate_iops = 20000\n[factors]\n\
             scheduler = [\"none\", \"mq-deadline\"]\n",
            scratch.dev
        ),
    )
    .unwrap();
    let db_path = run_traced(dir.path(), &file);
    assert_eq!(tracefs_state(&scratch.dev), before);

    let db = iolab::store::Store::open_existing(&db_path).unwrap();
    let runs = db.runs(1).unwrap();
    assert_eq!(runs.len(), 4, "two warm-ups and two measured runs");
    let traces = dir.path().join("r.db.traces/experiment-1");
    let mut dirs: Vec<String> = std::fs::read_dir(&traces)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    dirs.sort();
    assert_eq!(
        dirs,
        ["cell0-round1", "cell1-round1"],
        "warm-ups are not traced"
    );
    // `iolab runs` says where each run's trace is, as `trace analyze` takes it.
    let listing = iolab_json(&["runs", "1", "--db", db_path.to_str().unwrap(), "--json"]);
    let listed = |id: i64| {
        listing["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id)
            .map(|r| r["trace"].clone())
            .unwrap()
    };
    let table = crate::common::stdout_of(
        crate::common::iolab()
            .args(["runs", "1", "--db"])
            .arg(&db_path),
    );
    for run in &runs {
        let texts = db.run_texts(run.id).unwrap().unwrap();
        if run.warmup {
            assert_eq!(texts.trace, None);
            assert_eq!(listed(run.id), Value::Null);
            continue;
        }
        let stored = texts.trace.expect("a measured run has a trace");
        assert!(!Path::new(&stored).is_absolute(), "{stored}");
        let base = iolab::store::trace_location(&db_path, &stored);
        assert_eq!(listed(run.id), base.display().to_string());
        assert!(
            table
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("{} ", run.id))
                    && l.ends_with(&format!("ok          {}", base.display()))),
            "{table}"
        );
        let name = base.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            std::fs::read_dir(base.parent().unwrap()).unwrap().any(|e| e
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(&format!("{name}.blktrace."))),
            "{}",
            base.display()
        );
        // Kept compressed, and no plain copy beside it.
        let gz = PathBuf::from(format!("{}.blktrace.0.gz", base.display()));
        assert!(gz.is_file(), "{}", gz.display());
        assert!(!PathBuf::from(format!("{}.blktrace.0", base.display())).exists());
        let report = iolab_json(&["trace", "analyze", base.to_str().unwrap(), "--json"]);
        let q2c_n = f(&report["devices"][0]["latency"]["q2c"]["n"]);
        // Exported plain files are what btt counts: the same Q2C count.
        let plain = tempfile::tempdir().unwrap();
        Command::cargo_bin("iolab")
            .unwrap()
            .args(["trace", "export", base.to_str().unwrap(), "-o"])
            .arg(plain.path())
            .assert()
            .success();
        let exported = plain.path().join(&name);
        let again = iolab_json(&["trace", "analyze", exported.to_str().unwrap(), "--json"]);
        assert_eq!(f(&again["devices"][0]["latency"]["q2c"]["n"]), q2c_n);

        let metrics: HashMap<String, f64> = db.run_metrics(run.id).unwrap().into_iter().collect();
        let fio: Value = serde_json::from_str(&texts.fio_json.unwrap()).unwrap();
        let fio_ios: f64 = fio["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["read"]["total_ios"].as_f64().unwrap())
            .sum();
        let count = metrics["trace_q2c_count"];
        assert_eq!(
            count, q2c_n,
            "the metric is the analysis of the stored files"
        );
        assert!(fio_ios > 1000.0, "{fio_ios}");
        // The trace starts before fio and ends after it: a few extra IOs at most.
        assert!(
            count >= fio_ios && count <= fio_ios * 1.01 + 64.0,
            "{}: trace Q2C count {count} vs fio's {fio_ios} IOs; {metrics:?}",
            run.cell_key
        );
        assert_eq!(metrics["trace_events_lost"], 0.0, "{}", run.cell_key);
        // The bytes the trace saw completed are fio's, and the run's cross-check says so.
        let fio_mb: f64 = fio["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["read"]["io_bytes"].as_f64().unwrap() / 1e6)
            .sum();
        let mb = metrics["trace_completed_mb"];
        assert!(
            mb >= fio_mb && mb <= fio_mb * 1.01 + 0.3,
            "{}: trace {mb} MB vs fio's {fio_mb} MB",
            run.cell_key
        );
        let base = db
            .run_bases(1)
            .unwrap()
            .into_iter()
            .find(|b| b.run_id == run.id)
            .unwrap();
        let check = crate::common::verdict_of(&base.checks.unwrap(), "trace_bytes_vs_fio");
        assert!(check.starts_with("ok:"), "{}: {check}", run.cell_key);
        let q2c = metrics["trace_q2c_mean_us"];
        let fio_clat = metrics["read_clat_mean_us"];
        assert!(
            q2c > 0.0 && q2c < fio_clat * 1.5 + 50.0,
            "{}: Q2C {q2c} us vs fio clat {fio_clat} us",
            run.cell_key
        );
        assert!(metrics["trace_q2c_p99_us"] >= metrics["trace_q2c_p50_us"]);
        assert!((0.0..=100.0).contains(&metrics["trace_i2d_pct"]));
        assert!(
            (metrics["trace_merge_ratio"] - 1.0).abs() < 0.01,
            "random 4k: no merges"
        );
        assert!(metrics["trace_dispatch_depth_mean"] >= 1.0);
    }
    // Where the time went is a default figure of `show` when runs were traced (the
    // mq-deadline cell spends some of Q2C between insert and dispatch).
    let show = Command::cargo_bin("iolab")
        .unwrap()
        .args(["show", "1", "--db"])
        .arg(&db_path)
        .output()
        .unwrap();
    let show = String::from_utf8_lossy(&show.stdout);
    assert!(show.contains("trace_i2d_pct [%] per cell"), "{show}");
}

/// `trace = true` on two target devices: each run records both into one set of files; its
/// `trace_*` are over both (the counts add up) and each device's own are `DEVICE:trace_*`,
/// each checked against the bytes fio moved on that device. A dry run of the default target
/// on two scratch devices says the trace covers both, and does not claim it would fail.
#[test]
fn an_experiment_on_two_devices_traces_both_together() {
    let Some(Live {
        _turn,
        scratch: a,
        dir,
    }) = live("exp-two-a")
    else {
        return;
    };
    let b = Scratch::new("exp-two-b");
    let before = (tracefs_state(&a.dev), tracefs_state(&b.dev));
    let file = dir.path().join("two.toml");
    let body = "seed = 3\nrepetitions = 1\ntrace = true\n[workload]\nrw = \"randread\"\n\
                bs = \"4k\"\nioengine = \"psync\"\ndirect = 1\nsize = \"16m\"\n\
                runtime = \"1s\"\ntime_based = true\nrate_iops = 5000\n[factors]\n\
                scheduler = [\"none\"]\n";
    std::fs::write(
        &file,
        format!(
            "name = \"two\"\n{body}[target]\ndevice = [\"{}\", \"{}\"]\n",
            a.dev, b.dev
        ),
    )
    .unwrap();
    let db_path = run_traced(dir.path(), &file);
    assert_eq!((tracefs_state(&a.dev), tracefs_state(&b.dev)), before);

    let db = iolab::store::Store::open_existing(&db_path).unwrap();
    let runs = db.runs(1).unwrap();
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    let stored = db.run_texts(run.id).unwrap().unwrap().trace.unwrap();
    assert!(stored.ends_with("cell0-round1/devices"), "{stored}");
    let m: HashMap<String, f64> = db.run_metrics(run.id).unwrap().into_iter().collect();
    let name = |dev: &str| dev.trim_start_matches("/dev/").to_string();
    let own = |dev: &str, metric: &str| m[&format!("{}:{metric}", name(dev))];
    // About 5,000 4 KiB reads a second on each device, for a second: at least 1,000 bios
    // (4.1 MB) each, and the run's figure their sum.
    for (metric, least) in [("trace_q2c_count", 1000.0), ("trace_completed_mb", 4.096)] {
        let (x, y) = (own(&a.dev, metric), own(&b.dev, metric));
        assert!(x > least && y > least, "{metric}: {m:?}");
        assert!(
            (m[metric] - (x + y)).abs() < 1e-9 * m[metric],
            "{metric}: {m:?}"
        );
    }
    // The run's latency lies between the devices' own.
    let mean = |dev: &str| own(dev, "trace_q2c_mean_us");
    let (lo, hi) = (
        mean(&a.dev).min(mean(&b.dev)),
        mean(&a.dev).max(mean(&b.dev)),
    );
    let q2c = m["trace_q2c_mean_us"];
    assert!(lo <= q2c && q2c <= hi, "{lo} {q2c} {hi}");
    // The files hold both devices, and their analysis is what the run stored.
    let base = iolab::store::trace_location(&db_path, &stored);
    let report = iolab_json(&["trace", "analyze", base.to_str().unwrap(), "--json"]);
    assert_eq!(devices_of(&report).len(), 2, "{:?}", devices_of(&report));
    assert_eq!(f(&report["all"]["q2c"]["n"]), m["trace_q2c_count"]);
    // One bytes check per device, each agreeing with fio.
    let checks = db
        .run_bases(1)
        .unwrap()
        .into_iter()
        .find(|r| r.run_id == run.id)
        .unwrap()
        .checks
        .unwrap();
    let traced: Vec<(String, String)> = checks
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["check"] == "trace_bytes_vs_fio")
        .map(|c| {
            (
                c["subject"].as_str().unwrap().to_string(),
                c["verdict"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = [&a.dev, &b.dev]
        .iter()
        .map(|d| (format!("trace of {}", name(d)), "ok".to_string()))
        .collect();
    assert_eq!(traced, want, "{checks}");

    // Two scratch devices in a dry run: they do not exist yet, so a loop device that does
    // answers whether they could be traced.
    std::fs::write(
        &file,
        format!("name = \"two\"\n{body}[target]\ndevice = \"default\"\ncount = 2\n"),
    )
    .unwrap();
    let dry = dry_run(&file, dir.path());
    let said =
        String::from_utf8_lossy(&dry.stdout).to_string() + &String::from_utf8_lossy(&dry.stderr);
    assert!(dry.status.success(), "{said}");
    assert!(
        said.contains("a block trace of the targets (together"),
        "{said}"
    );
    assert!(!said.contains("would fail"), "{said}");
}

/// `iolab run --dry-run FILE` with its state directory in `dir`.
fn dry_run(file: &Path, dir: &Path) -> std::process::Output {
    Std::new(env!("CARGO_BIN_EXE_iolab"))
        .args(["run", "--dry-run"])
        .arg(file)
        .env("IOLAB_STATE_DIR", dir.join("state"))
        .output()
        .unwrap()
}

/// The `cellC-roundR` directories holding an experiment's kept traces, sorted.
fn kept_trace_dirs(db: &Path, experiment: i64) -> Vec<String> {
    let traces = PathBuf::from(format!("{}.traces/experiment-{experiment}", db.display()));
    let mut dirs: Vec<String> = match std::fs::read_dir(&traces) {
        Ok(rd) => rd
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    };
    dirs.sort();
    dirs
}

/// `[trace] keep` and `keep_max`: every measured run is analysed (its trace_* metrics are
/// stored), but only the traces the cap allows stay on disk and in the run rows, and `show`
/// says how many were analysed and not kept.
#[test]
fn trace_keep_caps_the_traces_an_experiment_keeps() {
    let Some(Live {
        _turn,
        scratch,
        dir,
    }) = live("keep")
    else {
        return;
    };
    let db = dir.path().join("k.db");
    let top = "seed = 5\nrepetitions = 2\n";
    // Top-level keys first: after `[trace]` they would belong to it.
    let body = format!(
        "[target]\ndevice = \"{}\"\nanchor_cpu = 0\n\
         [workload]\nrw = \"randread\"\nbs = \"4k\"\nioengine = \"psync\"\ndirect = 1\n\
         size = \"16m\"\nruntime = \"1s\"\ntime_based = true\nrate_iops = 5000\n\
         [factors]\nscheduler = [\"none\", \"mq-deadline\"]\n",
        scratch.dev
    );
    // keep = "first": two cells, two rounds: the first run of each cell keeps its trace.
    let stderr = crate::common::run_experiment(
        dir.path(),
        &db,
        "first",
        &format!("name = \"first\"\n{top}[trace]\nkeep = \"first\"\n{body}"),
    );
    assert!(!stderr.contains("trace:"), "{stderr}");
    let store = iolab::store::Store::open_existing(&db).unwrap();
    let runs = store.runs(1).unwrap();
    assert_eq!(runs.len(), 4);
    let mut kept_rounds = Vec::new();
    for run in &runs {
        let metrics: HashMap<String, f64> =
            store.run_metrics(run.id).unwrap().into_iter().collect();
        assert!(
            metrics.get("trace_q2c_count").copied().unwrap_or(0.0) > 1000.0,
            "every run is analysed: {metrics:?}"
        );
        let texts = store.run_texts(run.id).unwrap().unwrap();
        if let Some(stored) = texts.trace {
            let base = iolab::store::trace_location(&db, &stored);
            assert!(
                PathBuf::from(format!("{}.blktrace.0.gz", base.display())).is_file(),
                "{stored}"
            );
            kept_rounds.push((run.cell_key.clone(), run.repetition));
        }
    }
    kept_rounds.sort();
    assert_eq!(kept_rounds.len(), 2, "{kept_rounds:?}");
    assert_ne!(kept_rounds[0].0, kept_rounds[1].0, "one per cell");
    assert_eq!(
        kept_trace_dirs(&db, 1),
        ["cell0-round1", "cell1-round1"],
        "the runs not kept left no files"
    );
    let show = Command::cargo_bin("iolab")
        .unwrap()
        .args(["show", "1", "--db"])
        .arg(&db)
        .assert()
        .success();
    let text = String::from_utf8_lossy(&show.get_output().stdout).into_owned();
    assert!(
        text.contains("traces: 2 of 4 traced runs keep their trace files"),
        "{text}"
    );

    // keep_max below one trace's size: nothing is kept, everything analysed, and it is said.
    let stderr = crate::common::run_experiment(
        dir.path(),
        &db,
        "capped",
        &format!("name = \"capped\"\n{top}[trace]\nkeep_max = \"1k\"\n{body}"),
    );
    assert_eq!(
        stderr.matches("trace: keep_max reached").count(),
        1,
        "{stderr}"
    );
    assert!(kept_trace_dirs(&db, 2).is_empty());
    // Nor an empty directory of the experiment's traces.
    let none = PathBuf::from(format!("{}.traces/experiment-2", db.display()));
    assert!(!none.exists(), "{} left", none.display());
    assert!(stderr.contains("(0 traces kept,"), "{stderr}");
    let store = iolab::store::Store::open_existing(&db).unwrap();
    assert_eq!(store.trace_counts(2).unwrap(), (4, 0));
    assert_eq!(store.trace_counts(1).unwrap(), (4, 2));
}

/// `[trace] buffer_kb`: a 64 KiB buffer per CPU cannot hold unthrottled 4 KiB reads, so the
/// kernel loses events; the run's trace cross-check fails and its finding names the loss, the
/// buffer in use and the setting to raise.
#[test]
fn a_trace_buffer_too_small_loses_events_and_the_finding_says_so() {
    let Some(Live {
        _turn,
        scratch,
        dir,
    }) = live("lost")
    else {
        return;
    };
    let db = dir.path().join("l.db");
    crate::common::run_experiment(
        dir.path(),
        &db,
        "small",
        &format!(
            "name = \"small\"\nseed = 6\nrepetitions = 1\n[trace]\nbuffer_kb = 64\n\
             [target]\ndevice = \"{}\"\n[workload]\nrw = \"read\"\nbs = \"4k\"\n\
             ioengine = \"libaio\"\niodepth = 2\ndirect = 1\nsize = \"64m\"\n\
             runtime = \"1s\"\ntime_based = true\n",
            scratch.dev
        ),
    );
    let store = iolab::store::Store::open_existing(&db).unwrap();
    let run = store.runs(1).unwrap().pop().unwrap();
    let metrics: HashMap<String, f64> = store.run_metrics(run.id).unwrap().into_iter().collect();
    assert!(metrics["trace_events_lost"] > 0.0, "{metrics:?}");
    let show =
        crate::common::stdout_of(crate::common::iolab().args(["show", "1", "--db"]).arg(&db));
    assert!(
        show.contains("trace_bytes_vs_fio")
            && show.contains("64 KiB per CPU")
            && show.contains("raise [trace] buffer_kb"),
        "{show}"
    );
}

/// Large writes on a device with a small `max_sectors_kb` split every bio (one Q, then a G, I,
/// D and C per part, as case 4's 1M and 4M block sizes do). btt finds each part's Q by
/// sector range, so every part gets its Q2G and G2I; iolab's counts must match btt's, N for N.
/// btt gives no part a D2C or Q2C (no part's D or C holds the whole Q); iolab completes each
/// part from the bio's Q, so nothing is left in flight.
#[test]
fn split_bios_are_counted_per_part_like_btt() {
    if !iolab::sys::is_root() {
        crate::common::skip("needs root");
        return;
    }
    if !have("fio") || !have("blkparse") || !have("btt") {
        crate::common::skip("needs fio, blkparse and btt");
        return;
    }
    let _turn = recording_turn();
    let scratch = Scratch::new("split");
    let name = scratch.dev.trim_start_matches("/dev/").to_string();
    std::fs::write(format!("/sys/block/{name}/queue/max_sectors_kb"), "64").unwrap();
    let _ = std::fs::write(format!("/sys/block/{name}/queue/scheduler"), "mq-deadline");
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("split");
    let out = record_fio(
        &scratch.dev,
        &base,
        &["--rw=write", "--bs=1m", "--iodepth=4", "--number_ios=40"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (merged, btt) = blkparse_and_btt(dir.path(), &base);
    let report = iolab_json(&["trace", "analyze", "--json", merged.to_str().unwrap()]);
    let dev = &report["devices"][0];
    assert!(f(&dev["splits"]) >= 40.0, "no splits recorded: {dev}");
    // Every 1 MiB bio became 16 parts of 64 KiB, each with its own G and I.
    let q2g = dev["latency"]["q2g"]["n"].as_u64().unwrap();
    assert!(q2g >= 16 * 40, "q2g n = {q2g}");
    // btt lists Q2Q, Q2G and G2I here: a whole bio never lies inside one part's D or C.
    let b = parse_btt(&btt);
    assert!(b.all.contains_key("g2i"), "{btt}");
    assert!(!b.all.contains_key("q2c"), "{btt}");
    for name in ["d2c", "q2c"] {
        assert_eq!(
            dev["latency"][name]["n"].as_u64(),
            Some(q2g),
            "{name}: {dev}"
        );
    }
    assert_eq!(dev["never_completed"]["bios"], 0, "{dev}");
    // 40 writes of 1 MiB, every byte completed.
    assert_eq!(dev["merge"]["total"].as_u64(), Some(40 * 2048), "{dev}");
    for (name, (min, avg, max, n)) in &b.all {
        let l = if name == "q2q" {
            &report["all"][name.as_str()]
        } else {
            &dev["latency"][name.as_str()]
        };
        assert_eq!(l["n"].as_u64(), Some(*n), "{name} N");
        close(&format!("{name} min"), f(&l["min"]), *min, 1.5e-9);
        close(&format!("{name} avg"), f(&l["avg"]), *avg, 1.5e-9);
        close(&format!("{name} max"), f(&l["max"]), *max, 1.5e-9);
    }
}

/// `trace record --buffer-kb` takes what an experiment's `[trace] buffer_kb` takes, and is
/// refused outside it before anything is touched.
#[test]
fn a_buffer_size_out_of_range_is_refused() {
    for kb in ["10", "2000000"] {
        let out = Command::cargo_bin("iolab")
            .unwrap()
            .args(["trace", "record", "-d", "nosuchdisk0", "--buffer-kb", kb])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("is not in 64..=1048576"), "{err}");
    }
}

/// Input that is not a trace is an error that says so: an empty file (it used to be analysed
/// as a trace where "nothing stands out"), a directory, and a file with no events.
#[test]
fn empty_input_and_directories_are_errors_that_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.bin");
    std::fs::write(&empty, b"").unwrap();
    for (arg, want) in [
        (empty.clone(), "holds no block events"),
        (dir.path().to_path_buf(), "is a directory"),
    ] {
        let out = Command::cargo_bin("iolab")
            .unwrap()
            .args(["trace", "analyze"])
            .arg(&arg)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(want), "{err}");
        assert!(err.contains(&arg.display().to_string()), "{err}");
        assert!(out.stdout.is_empty());
    }
}

/// Reads and writes apart (biolatency -F): the per-direction Q2C and D2C split the per-bio
/// figures exactly, and the writes of the fixture (a buffered writer beside a reader) are the
/// slow tail.
#[test]
fn latencies_are_given_for_reads_and_writes_apart() {
    let r = iolab_json(&[
        "trace",
        "analyze",
        "--json",
        fixture("fx.bin").to_str().unwrap(),
    ]);
    let d = &r["devices"][0];
    let by = &d["by_direction"];
    for k in ["q2c", "d2c"] {
        let (rn, wn) = (f(&by["read"][k]["n"]), f(&by["write"][k]["n"]));
        assert!(rn > 0.0 && wn > 0.0, "{k}: {by}");
        assert_eq!(rn + wn, f(&d["latency"][k]["n"]), "{k}");
        let total = f(&d["latency"][k]["avg"]) * f(&d["latency"][k]["n"]);
        let parts = f(&by["read"][k]["avg"]) * rn + f(&by["write"][k]["avg"]) * wn;
        close(&format!("{k} sum"), parts, total, total * 1e-9);
    }
    assert_eq!(f(&by["read"]["q2c"]["n"]), f(&d["reads"]));
    assert_eq!(f(&by["write"]["q2c"]["n"]), f(&d["writes"]));
    let text = Command::cargo_bin("iolab")
        .unwrap()
        .args(["trace", "analyze"])
        .arg(fixture("fx.bin"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("reads and writes apart"), "{text}");
    assert!(
        text.contains("  R Q2C ") && text.contains("  W D2C "),
        "{text}"
    );
}

/// A plot into a directory an earlier plot drew in leaves no chart of that one beside its own:
/// an overlay (`--with`) and PNGs (`--png`) drawn before passed for this trace's. Files of
/// other names stay.
#[test]
fn plot_removes_the_charts_of_an_earlier_plot_it_does_not_draw() {
    let dir = tempfile::tempdir().unwrap();
    let trace = fixture("fx");
    let plot = |extra: &[&str]| {
        Command::cargo_bin("iolab")
            .unwrap()
            .args(["trace", "plot", trace.to_str().unwrap(), "-o"])
            .arg(dir.path())
            .args(extra)
            .output()
            .unwrap()
    };
    let with = fixture("fx.bin");
    let first = plot(&["--with", with.to_str().unwrap(), "--png"]);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
    assert!(dir.path().join("sectors-overlay.svg").exists());
    assert!(dir.path().join("latency.png").exists());
    let second = plot(&[]);
    assert!(
        second.status.success(),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains("sectors-overlay.svg: an earlier plot's chart, not drawn this time"),
        "{stderr}"
    );
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        [
            ".iolab-plot",
            "depth.svg",
            "histogram.svg",
            "iops.svg",
            "latency.svg",
            "notes.txt",
            "sectors.svg",
            "seeks.svg",
            "throughput.svg"
        ]
    );
    // Standard output still lists only the files written.
    let stdout = String::from_utf8_lossy(&second.stdout);
    assert_eq!(stdout.lines().count(), 7, "{stdout}");
    // A file of a chart's name that no plot of iolab's wrote there is the user's: it stays.
    std::fs::write(dir.path().join("latency.png"), "mine").unwrap();
    let third = plot(&[]);
    assert!(
        third.status.success(),
        "{}",
        String::from_utf8_lossy(&third.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("latency.png")).unwrap(),
        "mine"
    );
}

/// `trace plot` draws throughput, IOPS and seeks over time, several traces on one sector
/// chart (one colour and one legend label each), and reads and writes apart in the
/// histogram. Checked in the SVG's structure, not its pixels.
#[test]
fn plot_draws_rates_overlays_and_directions_apart() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .args(["trace", "plot", fixture("fx").to_str().unwrap()])
        .args(["--with", fixture("fx.bin").to_str().unwrap()])
        .args(["--label", "2.6.16", "--label", "2.6.32", "-o"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
    let texts = |svg: &str| -> Vec<String> {
        let doc = roxmltree::Document::parse(svg).unwrap();
        doc.descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text().map(|t| t.trim().to_string()))
            .collect()
    };
    // Lines over time: one polyline per series (the axes' are black) with one point per
    // timeline interval.
    for (name, series) in [
        ("throughput.svg", vec!["reads", "writes"]),
        ("iops.svg", vec!["reads", "writes"]),
        ("seeks.svg", vec!["seeks"]),
    ] {
        let svg = read(name);
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let paths: Vec<usize> = doc
            .descendants()
            .filter(|n| n.has_tag_name("polyline") && n.attribute("stroke") != Some("#000000"))
            .map(|n| n.attribute("points").unwrap().split_whitespace().count())
            .collect();
        assert_eq!(paths.len(), series.len(), "{name}: {paths:?}");
        assert!(paths.iter().all(|&n| n > 50), "{name}: {paths:?}");
        let t = texts(&svg);
        for s in series {
            assert!(t.iter().any(|x| x == s), "{name} lacks {s}: {t:?}");
        }
        // The title says how far apart the points are: the peaks depend on it.
        assert!(
            t.iter().any(|x| x.contains("(points every ")),
            "{name}: {t:?}"
        );
    }
    // The fixture's writes are sequential, its reads random: seeks are not all zero.
    let seeks = iolab_json(&[
        "trace",
        "analyze",
        "--json",
        fixture("fx").to_str().unwrap(),
    ]);
    let tl = seeks["devices"][0]["timeline"].as_array().unwrap();
    assert!(tl.iter().any(|p| f(&p["seeks_per_s"]) > 0.0));
    // Two traces on one chart: both labels in the legend, one colour each, points of both.
    let overlay = read("sectors-overlay.svg");
    let t = texts(&overlay);
    assert!(
        t.contains(&"2.6.16".to_string()) && t.contains(&"2.6.32".to_string()),
        "{t:?}"
    );
    // One device in both: named once, in the title.
    assert!(
        t.iter()
            .any(|x| x.starts_with("dispatched sectors over time, device ")),
        "{t:?}"
    );
    let doc = roxmltree::Document::parse(&overlay).unwrap();
    let fills = |c: &str| {
        doc.descendants()
            .filter(|n| n.has_tag_name("rect"))
            .filter(|n| {
                n.attribute("fill")
                    .is_some_and(|f| f.eq_ignore_ascii_case(c))
            })
            .count()
    };
    let (green, red) = (fills("#2ca02c"), fills("#d62728"));
    assert!(green > 100 && red > 100, "green {green} red {red}");
    // The same trace twice: the same cells, so the same number of points (+ legend square).
    assert_eq!(green, red);
    // Each cloud lets the other show through: the second would hide the first otherwise.
    let solid = doc
        .descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("width") == Some("2"))
        .filter(|n| n.attribute("opacity") != Some("0.5"))
        .count();
    assert_eq!(solid, 0, "points drawn solid in the overlay");
    // Histogram: reads and writes apart, their bars side by side (not one over the other).
    let histogram = read("histogram.svg");
    let t = texts(&histogram);
    for s in ["read Q2C", "write Q2C", "read D2C", "write D2C"] {
        assert!(t.iter().any(|x| x == s), "histogram lacks {s}: {t:?}");
    }
    let doc = roxmltree::Document::parse(&histogram).unwrap();
    // Bars stand on the x axis (the legend's squares do not): (left, right, bottom).
    let rects = |c: &str| -> Vec<(f64, f64, f64)> {
        doc.descendants()
            .filter(|n| n.has_tag_name("rect"))
            .filter(|n| {
                n.attribute("fill")
                    .is_some_and(|f| f.eq_ignore_ascii_case(c))
            })
            .filter_map(|n| {
                let num = |a: &str| n.attribute(a)?.parse::<f64>().ok();
                let (x, y, w, h) = (num("x")?, num("y")?, num("width")?, num("height")?);
                (w > 0.0 && h > 0.0).then_some((x, x + w, y + h))
            })
            .collect()
    };
    let (r, w) = (rects("#1f77b4"), rects("#d62728"));
    let axis = r.iter().chain(&w).map(|b| b.2).fold(0.0, f64::max);
    let bars = |v: Vec<(f64, f64, f64)>| -> Vec<(f64, f64)> {
        v.into_iter()
            .filter(|b| (b.2 - axis).abs() < 0.5)
            .map(|b| (b.0, b.1))
            .collect()
    };
    let (reads, writes) = (bars(r), bars(w));
    assert!(reads.len() > 1 && writes.len() > 1, "{reads:?} {writes:?}");
    for r in &reads {
        for w in &writes {
            assert!(
                r.1 <= w.0 + 0.5 || w.1 <= r.0 + 0.5,
                "read bar {r:?} under write bar {w:?}"
            );
        }
    }
    // More or fewer labels than traces is a usage error (exit 2) that says how many; a label
    // without --with has no chart to name.
    let fx = fixture("fx").to_str().unwrap().to_string();
    for (args, said) in [
        (
            vec![
                "--with", &fx, "--label", "a", "--label", "b", "--label", "c",
            ],
            "3 --label given for 2 traces",
        ),
        (
            vec!["--with", &fx, "--label", "a"],
            "1 --label given for 2 traces",
        ),
        (
            vec!["--label", "a"],
            "--label names the traces of the chart of several",
        ),
    ] {
        let bad = Command::cargo_bin("iolab")
            .unwrap()
            .args(["trace", "plot", &fx])
            .args(args)
            .arg("-o")
            .arg(dir.path())
            .output()
            .unwrap();
        assert_eq!(bad.status.code(), Some(2));
        let err = String::from_utf8_lossy(&bad.stderr);
        assert!(err.contains(said), "{err}");
    }
}

/// A trace compressed as experiments keep it is analysed exactly like the plain one, and
/// `trace export` gives back the plain files byte for byte (what blkparse and btt read).
#[test]
fn compressed_traces_are_analysed_and_exported_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("fx");
    let mut cpus = 0;
    for cpu in 0.. {
        let src = fixture(&format!("fx.blktrace.{cpu}"));
        if !src.is_file() {
            break;
        }
        std::fs::copy(&src, dir.path().join(format!("fx.blktrace.{cpu}"))).unwrap();
        cpus += 1;
    }
    assert!(cpus >= 1);
    let plain = iolab_json(&["trace", "analyze", "--json", base.to_str().unwrap()]);
    let sizes = iolab::trace::keep::compress(&base).unwrap();
    assert!(
        sizes.gz_bytes > 0 && sizes.gz_bytes < sizes.plain_bytes / 2,
        "{sizes:?}"
    );
    for cpu in 0..cpus {
        assert!(!dir.path().join(format!("fx.blktrace.{cpu}")).exists());
        assert!(dir.path().join(format!("fx.blktrace.{cpu}.gz")).is_file());
    }
    let gz = iolab_json(&["trace", "analyze", "--json", base.to_str().unwrap()]);
    assert_eq!(plain, gz);
    let out_dir = dir.path().join("plain");
    let export_json = || {
        iolab_json(&[
            "trace",
            "export",
            base.to_str().unwrap(),
            "--json",
            "-o",
            out_dir.to_str().unwrap(),
        ])
    };
    let json = export_json();
    let files: Vec<String> = serde_json::from_value(json["files"].clone()).unwrap();
    let expected: Vec<String> = (0..cpus)
        .map(|cpu| {
            out_dir
                .join(format!("fx.blktrace.{cpu}"))
                .display()
                .to_string()
        })
        .collect();
    assert_eq!(files, expected);
    for cpu in 0..cpus {
        let name = format!("fx.blktrace.{cpu}");
        assert_eq!(
            std::fs::read(out_dir.join(&name)).unwrap(),
            std::fs::read(fixture(&name)).unwrap(),
            "{name}"
        );
    }
    if have("blkparse") {
        let st = Std::new("blkparse")
            .args(["-i", out_dir.join("fx").to_str().unwrap(), "-d"])
            .arg(dir.path().join("m.bin"))
            .arg("-O")
            .status()
            .unwrap();
        assert!(st.success());
    }

    // A single file, plain or compressed, comes out as NAME.blktrace.N, one file per CPU
    // holding that CPU's records, as blkparse reads them: a merged file is parted by each
    // record's CPU (all in one file, blkparse read a fraction of it, "cpu 0 trace info has
    // error cpu 1").
    let merged = dir.path().join("m1.bin");
    std::fs::copy(fixture("fx.bin"), &merged).unwrap();
    let gz = dir.path().join("m2.bin.gz");
    let mut enc = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).unwrap(),
        flate2::Compression::fast(),
    );
    std::io::Write::write_all(&mut enc, &std::fs::read(fixture("fx.bin")).unwrap()).unwrap();
    enc.finish().unwrap();
    let merged_analysis = iolab_json(&["trace", "analyze", "--json", merged.to_str().unwrap()]);
    for (input, name) in [(&merged, "m1.bin"), (&gz, "m2.bin")] {
        let out = Command::cargo_bin("iolab")
            .unwrap()
            .args(["trace", "export", input.to_str().unwrap(), "-o"])
            .arg(&out_dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let files: Vec<PathBuf> = (0..cpus)
            .map(|cpu| out_dir.join(format!("{name}.blktrace.{cpu}")))
            .collect();
        let listed: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            listed.join("\n")
        );
        let sizes: u64 = files.iter().map(|f| f.metadata().unwrap().len()).sum();
        assert_eq!(sizes, fixture("fx.bin").metadata().unwrap().len());
        for (cpu, file) in files.iter().enumerate() {
            // The CPU of each record (bytes 40-43 of its 48-byte header).
            let bytes = std::fs::read(file).unwrap();
            let mut at = 0;
            while at < bytes.len() {
                let word =
                    |o: usize| u32::from_le_bytes(bytes[at + o..at + o + 4].try_into().unwrap());
                assert_eq!(word(40), cpu as u32, "{}", file.display());
                at += 48 + u16::from_le_bytes([bytes[at + 46], bytes[at + 47]]) as usize;
            }
        }
        let again = iolab_json(&[
            "trace",
            "analyze",
            "--json",
            out_dir.join(name).to_str().unwrap(),
        ]);
        assert_eq!(again, merged_analysis, "{name}");
        if have("blkparse") {
            let parsed = Std::new("blkparse")
                .args(["-i", out_dir.join(name).to_str().unwrap()])
                .output()
                .unwrap();
            assert!(parsed.status.success(), "{parsed:?}");
            let text = String::from_utf8_lossy(&parsed.stdout);
            let err = String::from_utf8_lossy(&parsed.stderr);
            assert!(
                text.contains(" Q ") && !err.contains("has error"),
                "{name}: {err}"
            );
        }
    }

    // Plain per-CPU files exported into their own directory, by another path to it (`-o .`
    // beside a recording): refused before anything is written, the trace intact.
    for cpu in 0..cpus {
        std::fs::copy(
            fixture(&format!("fx.blktrace.{cpu}")),
            dir.path().join(format!("px.blktrace.{cpu}")),
        )
        .unwrap();
    }
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .current_dir(dir.path())
        .args(["trace", "export", "px", "-o"])
        .arg(Path::new("..").join(dir.path().file_name().unwrap()))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() == Some(1) && err.contains("part of the trace being exported"),
        "{err}"
    );
    for cpu in 0..cpus {
        let name = format!("fx.blktrace.{cpu}");
        assert_eq!(
            std::fs::read(dir.path().join(format!("px.blktrace.{cpu}"))).unwrap(),
            std::fs::read(fixture(&name)).unwrap(),
            "{name}"
        );
    }

    // What is not a whole trace is refused, as `trace analyze` refuses it, and nothing is
    // written for blkparse to trip on.
    let whole = std::fs::read(fixture("fx.bin")).unwrap();
    for (name, bytes, says) in [
        ("garbage.bin", vec![0x5a; 1000], "not a blktrace record"),
        ("empty.bin", Vec::new(), "holds no trace records"),
        (
            "cut.bin",
            whole[..whole.len() - 10].to_vec(),
            "ends inside the record",
        ),
    ] {
        let input = dir.path().join(name);
        std::fs::write(&input, bytes).unwrap();
        let bad_out = dir.path().join("refused");
        let out = Command::cargo_bin("iolab")
            .unwrap()
            .args(["trace", "export", input.to_str().unwrap(), "-o"])
            .arg(&bad_out)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(says), "{name}: {err}");
        // Nor is the output directory made (it was left behind, empty).
        assert!(!bad_out.exists(), "{name}");
    }
    // Standard input is checked as it is copied: what does not begin with a record makes
    // nothing (`/dev/zero` filled the disk), and garbage after whole records leaves nothing.
    for (bytes, says) in [
        (vec![0u8; 1 << 20], "not a blktrace record"),
        (
            [&whole[..], &[0x5a; 1000]].concat(),
            "not a blktrace record",
        ),
    ] {
        let bad_out = dir.path().join("refused");
        let out = Command::cargo_bin("iolab")
            .unwrap()
            .args(["trace", "export", "-", "-o"])
            .arg(&bad_out)
            .write_stdin(bytes)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(says), "{err}");
        assert!(!bad_out.exists());
    }

    // Files of an earlier trace of the name in the directory, numbered above those written,
    // would be read with them: removed, and said. The compressed trace exported into its
    // own directory keeps its files.
    let stale = [
        out_dir.join(format!("fx.blktrace.{cpus}")),
        out_dir.join(format!("fx.blktrace.{}.gz", cpus + 1)),
    ];
    for f in &stale {
        std::fs::copy(fixture("fx.bin"), f).unwrap();
    }
    let json = export_json();
    let removed: Vec<String> = serde_json::from_value(json["removed"].clone()).unwrap();
    let stale: Vec<String> = stale.iter().map(|f| f.display().to_string()).collect();
    assert_eq!(removed, stale);
    let exported = iolab_json(&[
        "trace",
        "analyze",
        "--json",
        out_dir.join("fx").to_str().unwrap(),
    ]);
    assert_eq!(exported, plain);
    let out = Command::cargo_bin("iolab")
        .unwrap()
        .args(["trace", "export", base.to_str().unwrap(), "-o"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    for cpu in 0..cpus {
        assert!(dir.path().join(format!("fx.blktrace.{cpu}.gz")).is_file());
    }
}

#[test]
fn analyze_refuses_intervals_that_would_spin_or_exhaust_memory() {
    let fx = fixture("fx.bin");
    for bad in ["2e10", "1e-9", "-1", "nan", "inf", "0", "1e400"] {
        let r = crate::common::run_within(
            crate::common::iolab().args([
                "trace",
                "analyze",
                fx.to_str().unwrap(),
                &format!("--interval={bad}"),
            ]),
            std::time::Duration::from_secs(10),
        );
        assert!(!r.timed_out, "--interval {bad} ran for more than 10 s");
        assert_eq!(r.code, Some(2), "--interval {bad}: {}", r.stderr);
        assert!(
            r.stderr.contains("--interval") && r.stderr.contains("duration"),
            "--interval {bad}: {}",
            r.stderr
        );
    }
    // A trace spanning 2521 s: fine at the default 1 s, 2.5 million intervals at 1 ms.
    let dir = tempfile::tempdir().unwrap();
    let long = dir.path().join("long.bin");
    reencode(
        &fx,
        &long,
        7,
        iolab::trace::blk_io_trace::Endian::Little,
        |ev| ev.time *= 100_000,
    );
    let r = crate::common::run_within(
        crate::common::iolab().args([
            "trace",
            "analyze",
            long.to_str().unwrap(),
            "--interval",
            "1ms",
        ]),
        std::time::Duration::from_secs(20),
    );
    assert!(!r.timed_out);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr.contains("2521.")
            && r.stderr
                .contains("intervals, more than the limit of 100000")
            && r.stderr.contains("use --interval 26ms or longer"),
        "{}",
        r.stderr
    );
    let ok = iolab_json(&["trace", "analyze", "--json", long.to_str().unwrap()]);
    let points = ok["devices"][0]["timeline"].as_array().unwrap().len();
    assert!((2500..=2530).contains(&points), "{points}");
}

#[test]
fn record_refuses_durations_that_are_not_durations() {
    // Refused while parsing the arguments: nothing is traced, so no root is needed.
    for bad in ["-1", "inf", "nan", "1e30", "0", "100000000000d"] {
        let r = crate::common::run_within(
            crate::common::iolab().args([
                "trace",
                "record",
                "-d",
                "nosuchdisk0",
                &format!("--duration={bad}"),
            ]),
            std::time::Duration::from_secs(10),
        );
        assert!(!r.timed_out, "--duration {bad}");
        assert_eq!(r.code, Some(2), "--duration {bad}: {}", r.stderr);
        assert!(r.stderr.contains("duration"), "{bad}: {}", r.stderr);
    }
}
