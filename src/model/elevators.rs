//! Which I/O schedulers the running kernel would load on demand. A disk's `queue/scheduler`
//! lists only the schedulers registered now; on a stock distribution kernel `bfq` and `kyber`
//! are modules that are not loaded until someone selects one: writing its name to
//! `queue/scheduler` makes the kernel load module `NAME-iosched` (an alias for bfq, the
//! module's own name for kyber) and switch. So a scheduler missing from that list is still
//! possible when the kernel's module index names it, and iolab must not refuse it.

use crate::sys::SysRoot;

/// Scheduler names the module index of the running kernel (`/lib/modules/RELEASE`) can load,
/// sorted; empty when the index cannot be read (a snapshot without it, a kernel without
/// modules).
pub(crate) fn on_demand(root: &SysRoot, release: Option<&str>) -> Vec<String> {
    let mut names: Vec<String> = release
        .map(|r| index(root, r).into_iter().map(|(name, _)| name).collect())
        .unwrap_or_default();
    names.sort();
    names.dedup();
    names
}

/// The module that provides scheduler `name` in the module index of kernel `release`, as
/// `/sys/module` names it (dashes become underscores): `bfq` for bfq, `kyber_iosched` for
/// kyber. `None` when the index has no module for it (built in, or no such scheduler).
pub(crate) fn module_of(root: &SysRoot, release: &str, name: &str) -> Option<String> {
    // Called on every scheduler write: stops at the first file that names it (the aliases,
    // for bfq), instead of reading the whole index.
    INDEX_FILES.iter().find_map(|(file, entry)| {
        let text = root.read(&format!("/lib/modules/{release}/{file}")).ok()?;
        let (_, module) = text.lines().filter_map(entry).find(|(n, _)| n == name)?;
        Some(module.replace('-', "_"))
    })
}

/// (scheduler, module) for every scheduler the index can load, aliases first.
fn index(root: &SysRoot, release: &str) -> Vec<(String, String)> {
    INDEX_FILES
        .iter()
        .filter_map(|(file, entry)| {
            let text = root.read(&format!("/lib/modules/{release}/{file}")).ok()?;
            Some(text.lines().filter_map(entry).collect::<Vec<_>>())
        })
        .flatten()
        .collect()
}

/// How a line of a module index file names a scheduler and its module, when it does.
type Entry = fn(&str) -> Option<(String, String)>;

/// The module index files read here, and how a line of each names a scheduler's module.
const INDEX_FILES: [(&str, Entry); 2] =
    [("modules.alias", alias_entry), ("modules.dep", dep_entry)];

/// `alias bfq-iosched bfq`: the kernel asks modprobe for the alias.
fn alias_entry(line: &str) -> Option<(String, String)> {
    let mut words = line.strip_prefix("alias ")?.split_whitespace();
    let name = words.next()?.strip_suffix("-iosched")?;
    Some((name.to_string(), words.next()?.to_string()))
}

/// `kernel/block/kyber-iosched.ko.xz: ...`: a module named after the request itself.
fn dep_entry(line: &str) -> Option<(String, String)> {
    let path = line.split(':').next()?;
    let file = path.rsplit('/').next()?;
    let module = file.split(".ko").next()?;
    let name = module.strip_suffix("-iosched")?;
    Some((name.to_string(), module.to_string()))
}

/// How a line of the module index file `abs` names a scheduler's module.
fn index_entry_of(abs: &str) -> Option<Entry> {
    let (dir, file) = abs.rsplit_once('/')?;
    let release = dir.strip_prefix("/lib/modules/")?;
    if release.is_empty() || release.contains('/') {
        return None;
    }
    INDEX_FILES
        .iter()
        .find(|(f, _)| *f == file)
        .map(|(_, entry)| *entry)
}

/// For a module index file read here (`/lib/modules/RELEASE/modules.alias` or `.dep`), only
/// the lines that name a scheduler's module: what a snapshot keeps of a file of a megabyte or
/// more (every driver's aliases), all that reading the snapshot back needs. `None` for any
/// other file.
pub(crate) fn scheduler_lines(abs: &str, text: &str) -> Option<String> {
    let entry = index_entry_of(abs)?;
    Some(
        text.lines()
            .filter(|l| entry(l).is_some())
            .map(|l| format!("{l}\n"))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_and_module_names_ending_in_iosched_are_schedulers() {
        let dir = tempfile::tempdir().unwrap();
        let m = dir.path().join("lib/modules/6.1.0-56-amd64");
        std::fs::create_dir_all(&m).unwrap();
        std::fs::write(
            m.join("modules.alias"),
            "alias fs-ext4 ext4\nalias bfq-iosched bfq\nalias pci:v00001AF4d* virtio_pci\n",
        )
        .unwrap();
        std::fs::write(
            m.join("modules.dep"),
            "kernel/block/kyber-iosched.ko.xz:\nkernel/block/bfq.ko:\n\
             kernel/drivers/nvme/host/nvme.ko: kernel/drivers/nvme/host/nvme-core.ko\n",
        )
        .unwrap();
        let root = SysRoot::at(dir.path()).unwrap();
        assert_eq!(on_demand(&root, Some("6.1.0-56-amd64")), ["bfq", "kyber"]);
        assert!(on_demand(&root, Some("6.12.0")).is_empty());
        assert!(on_demand(&root, None).is_empty());
        // The module each is loaded as, named as /sys/module names it.
        let module = |name| module_of(&root, "6.1.0-56-amd64", name);
        assert_eq!(module("bfq").as_deref(), Some("bfq"));
        assert_eq!(module("kyber").as_deref(), Some("kyber_iosched"));
        assert_eq!(module("mq-deadline"), None);
        assert_eq!(module("ext4"), None);
        // What a snapshot keeps of each file: the lines above that name a scheduler.
        let alias = std::fs::read_to_string(m.join("modules.alias")).unwrap();
        let kept = |abs: &str, text: &str| scheduler_lines(abs, text);
        assert_eq!(
            kept("/lib/modules/6.1.0-56-amd64/modules.alias", &alias).as_deref(),
            Some("alias bfq-iosched bfq\n")
        );
        let dep = std::fs::read_to_string(m.join("modules.dep")).unwrap();
        assert_eq!(
            kept("/lib/modules/6.1.0-56-amd64/modules.dep", &dep).as_deref(),
            Some("kernel/block/kyber-iosched.ko.xz:\n")
        );
        assert_eq!(
            kept("/lib/modules/6.1.0-56-amd64/modules.symbols", &dep),
            None
        );
        assert_eq!(kept("/proc/modules.alias", &alias), None);
        assert_eq!(kept("/lib/modules/modules.dep", &dep), None);
    }
}
