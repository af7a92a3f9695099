//! Selecting an I/O scheduler that is not loaded makes the kernel load its module (bfq and
//! kyber are modules on distribution kernels), and putting the old scheduler back leaves the
//! module loaded: the machine is not as iolab found it. So the journal entry of the write that
//! loaded a module names it, and restore unloads it once the old scheduler is back, unless
//! something uses it by then (another disk that selected it). A journal is only a file, so the
//! name it holds is not trusted: restore unloads only the module that the running kernel's
//! module index gives for the scheduler the entry selected, and only on the live machine.

use crate::model::elevators;
use crate::sys::SysRoot;

use super::JournalEntry;

/// The device of a scheduler knob's live path (`/sys/block/sdb/queue/scheduler`).
fn scheduler_device(path: &str) -> Option<&str> {
    path.strip_prefix("/sys/block/")?
        .strip_suffix("/queue/scheduler")
        .filter(|dev| !dev.is_empty() && !dev.contains('/'))
}

/// The module of scheduler `name` in the index of the kernel running under `root`.
fn module_of(root: &SysRoot, name: &str) -> Option<String> {
    let release = root.attr("/proc/sys/kernel/osrelease")?;
    elevators::module_of(root, release.trim(), name.trim())
}

/// The module writing `value` to `path` will make the kernel load: the scheduler's module
/// when `path` is a scheduler knob and the module is not loaded (nor built in) now.
pub(crate) fn loaded_by(root: &SysRoot, path: &str, value: &str) -> Option<String> {
    scheduler_device(path)?;
    let module = module_of(root, value)?;
    (!root.exists(&format!("/sys/module/{module}"))).then_some(module)
}

/// Unloads `module`, which the kernel loaded for `entry`'s write, now that the entry's old
/// scheduler is back. Ok(true) when unloaded, Ok(false) when it was already gone; else why
/// it stays.
pub(crate) fn unload(root: &SysRoot, entry: &JournalEntry, module: &str) -> Result<bool, String> {
    if scheduler_device(&entry.path).is_none() {
        return Err(format!("{} is not a scheduler knob", entry.path));
    }
    match module_of(root, &entry.new) {
        Some(m) if m == module => {}
        _ => {
            return Err(format!(
                "not the module of scheduler {} in this kernel's module index",
                entry.new
            ))
        }
    }
    if !root.exists(&format!("/sys/module/{module}")) {
        return Ok(false);
    }
    if !root.is_live() {
        return Err("a machine tree, not the live kernel".into());
    }
    delete_module(module)
}

/// delete_module(2) without waiting: a module in use is left as it is.
fn delete_module(module: &str) -> Result<bool, String> {
    let name = std::ffi::CString::new(module).map_err(|_| "a name with a NUL byte".to_string())?;
    // SAFETY: a NUL-terminated name that outlives the call and a flags word; the kernel
    // checks both and unloads nothing that is in use.
    let r = unsafe { libc::syscall(libc::SYS_delete_module, name.as_ptr(), libc::O_NONBLOCK) };
    if r == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ENOENT) => Ok(false),
        Some(libc::EWOULDBLOCK) | Some(libc::EBUSY) => {
            Err("in use (a disk selected it since, or another module needs it)".into())
        }
        Some(libc::ENOSYS) => Err("this kernel cannot unload modules".into()),
        _ => Err(format!("the kernel refused: {e}")),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Puts into the machine tree at `dir` a kernel index that has bfq (by alias) and kyber
    /// (by file name) as modules, with bfq loaded when `bfq_loaded`.
    pub(crate) fn module_index(dir: &std::path::Path, bfq_loaded: bool) {
        let put = |rel: &str, text: &str| {
            let p = dir.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        put("proc/sys/kernel/osrelease", "6.1.0-56-amd64\n");
        put(
            "lib/modules/6.1.0-56-amd64/modules.alias",
            "alias bfq-iosched bfq\nalias fs-ext4 ext4\n",
        );
        put(
            "lib/modules/6.1.0-56-amd64/modules.dep",
            "kernel/block/kyber-iosched.ko.xz:\nkernel/fs/ext4/ext4.ko.xz:\n",
        );
        put("sys/module/ext4/refcnt", "1\n");
        if bfq_loaded {
            put("sys/module/bfq/refcnt", "0\n");
        }
    }

    fn tree(bfq_loaded: bool) -> (tempfile::TempDir, SysRoot) {
        let dir = tempfile::tempdir().unwrap();
        module_index(dir.path(), bfq_loaded);
        let root = SysRoot::at(dir.path()).unwrap();
        (dir, root)
    }

    fn entry(path: &str, new: &str) -> JournalEntry {
        JournalEntry {
            path: path.into(),
            old: "mq-deadline".into(),
            new: new.into(),
            time_unix: 0.0,
            loaded_module: None,
            serving: None,
            disk: None,
            restoring: false,
        }
    }

    #[test]
    fn a_scheduler_write_loads_the_module_only_when_it_is_not_loaded() {
        let (_d, root) = tree(false);
        let sched = "/sys/block/sdb/queue/scheduler";
        assert_eq!(loaded_by(&root, sched, "bfq").as_deref(), Some("bfq"));
        assert_eq!(
            loaded_by(&root, sched, "kyber\n").as_deref(),
            Some("kyber_iosched")
        );
        // Built in (not in the index), or not a scheduler knob at all.
        assert_eq!(loaded_by(&root, sched, "mq-deadline"), None);
        assert_eq!(
            loaded_by(&root, "/sys/block/sdb/queue/nr_requests", "bfq"),
            None
        );
        let (_d, root) = tree(true);
        assert_eq!(loaded_by(&root, sched, "bfq"), None);
    }

    #[test]
    fn only_the_module_of_the_selected_scheduler_is_unloaded_and_only_on_the_live_machine() {
        let (_d, root) = tree(true);
        let sched = "/sys/block/sdb/queue/scheduler";
        // A forged journal cannot unload another module, or name another knob.
        let e = unload(&root, &entry(sched, "bfq"), "ext4").unwrap_err();
        assert!(e.contains("not the module of scheduler bfq"), "{e}");
        let e = unload(&root, &entry("/proc/sys/vm/dirty_ratio", "bfq"), "bfq").unwrap_err();
        assert!(e.contains("not a scheduler knob"), "{e}");
        // The right one, under a tree: left, and why.
        let e = unload(&root, &entry(sched, "bfq"), "bfq").unwrap_err();
        assert!(e.contains("not the live kernel"), "{e}");
        // Already gone: nothing to do.
        let (_d, root) = tree(false);
        assert_eq!(unload(&root, &entry(sched, "bfq"), "bfq"), Ok(false));
    }
}
