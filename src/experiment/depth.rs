//! Queue depths fio cannot reach. fio takes `iodepth = 32` from any engine. A synchronous
//! engine (`psync`, fio's default on Linux, `sync`, `pvsync2`, `mmap`, ...) issues one I/O and
//! waits: fio only notes "queue depth will be capped at 1" at the top of its output (kept as
//! the run's `fio_notes`, which `show` prints after the fact). `libaio` without `direct = 1`
//! completes buffered I/O inside `io_submit` (fio's documentation of `iodepth` says both), and
//! fio says nothing: its `iodepth_level` still shows its queue full (fio 3.33, `iodepth = 8`,
//! 99.96% at 8), so no figure in its output tells. An `iodepth` factor then compares cells
//! that ran the same workload, and the result reads as "queue depth makes no difference".
//! iolab warns before the runs start.

use super::file::Experiment;
use super::plan::Cell;

/// fio's engines flagged `FIO_SYNCIO`: one I/O in flight per job, whatever `iodepth` says.
const SYNCHRONOUS: &[&str] = &[
    "sync", "psync", "vsync", "pvsync", "pvsync2", "mmap", "splice",
];

/// fio's engine when a job names none (on every system but Windows).
const FIO_DEFAULT: &str = "psync";

/// Why `options` (one job's, in file order) cannot reach their `iodepth`; `None` when they
/// ask for no more than 1 or the engine queues.
fn unreachable_depth(options: &[(String, String)]) -> Option<String> {
    let last = |name: &str| {
        options
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    let depth: u64 = last("iodepth")?.trim().parse().ok()?;
    if depth <= 1 {
        return None;
    }
    let engine = last("ioengine");
    let name = engine.unwrap_or(FIO_DEFAULT);
    if SYNCHRONOUS.contains(&name) {
        let default = if engine.is_none() {
            " (fio's default)"
        } else {
            ""
        };
        return Some(format!(
            "ioengine {name}{default} is synchronous: one I/O in flight per job"
        ));
    }
    // fio's booleans: 1/0, true/false, yes/no, on/off, in any case.
    let flag = |name: &str| {
        last(name).map(|v| {
            let v = v.trim().to_ascii_lowercase();
            matches!(v.as_str(), "1" | "true" | "yes" | "on")
        })
    };
    let buffered = flag("direct") != Some(true) && flag("buffered") != Some(false);
    (name == "libaio" && buffered)
        .then(|| "libaio without direct = 1 completes buffered I/O as it submits it".to_string())
}

/// One warning per distinct reason, naming the cells it concerns; empty for a program
/// engine, which fio does not run.
pub(crate) fn warnings(exp: &Experiment, cells: &[Cell]) -> Vec<String> {
    if !exp.engine.engine().runs_job_file() {
        return Vec::new();
    }
    let mut found: Vec<(String, Vec<&str>)> = Vec::new();
    for cell in cells {
        let Ok(job) = cell.job(exp, "-", None) else {
            continue;
        };
        let Some(why) = unreachable_depth(&job.options) else {
            continue;
        };
        match found.iter_mut().find(|(w, _)| *w == why) {
            Some((_, keys)) => keys.push(&cell.key),
            None => found.push((why, vec![&cell.key])),
        }
    }
    found
        .into_iter()
        .map(|(why, keys)| {
            format!(
                "iodepth above 1 has no effect in {}: {why}; for a queue depth set ioengine = \
                 \"io_uring\", or \"libaio\" with direct = 1",
                if keys.len() == cells.len() {
                    "every cell".to_string()
                } else {
                    format!("cells {}", keys.join(" "))
                }
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_depth_a_synchronous_or_buffered_libaio_job_cannot_reach_is_named() {
        let why = unreachable_depth(&opts(&[("iodepth", "8")])).unwrap();
        assert!(
            why.contains("psync (fio's default) is synchronous"),
            "{why}"
        );
        let why = unreachable_depth(&opts(&[("ioengine", "pvsync2"), ("iodepth", "4")])).unwrap();
        assert!(why.starts_with("ioengine pvsync2 is synchronous"), "{why}");
        let why = unreachable_depth(&opts(&[("ioengine", "libaio"), ("iodepth", "32")])).unwrap();
        assert!(why.contains("without direct = 1"), "{why}");
        // The last setting counts, as in fio.
        let later = opts(&[
            ("iodepth", "8"),
            ("ioengine", "psync"),
            ("ioengine", "io_uring"),
        ]);
        assert_eq!(unreachable_depth(&later), None);
    }

    #[test]
    fn depths_that_are_reached_or_not_asked_for_pass() {
        for pairs in [
            &[("iodepth", "1")][..],
            &[("ioengine", "psync")],
            &[("ioengine", "io_uring"), ("iodepth", "32")],
            &[("ioengine", "libaio"), ("direct", "1"), ("iodepth", "32")],
            &[("ioengine", "libaio"), ("buffered", "0"), ("iodepth", "32")],
            &[
                ("ioengine", "libaio"),
                ("direct", "True"),
                ("iodepth", "32"),
            ],
            &[("ioengine", "null"), ("iodepth", "16")],
        ] {
            assert_eq!(unreachable_depth(&opts(pairs)), None, "{pairs:?}");
        }
    }
}
