//! What writing one knob changes besides it, so that the journal records those too before the
//! write and puts them back with it: an elevator's own settings, which a scheduler switch
//! discards; the queue attributes the kernel resets on a scheduler or queue-limit change;
//! and the two forms of a linked sysctl (`vm.dirty_ratio` and `vm.dirty_bytes`), of which
//! only the one in use may be written back.

use super::journal::JournalEntry;
use super::kinds;
use crate::sys::SysRoot;

/// For a write of a queue's `scheduler`: the writable settings of the elevator it has now
/// (`queue/iosched/*`), which the kernel discards when it switches to another; a user's tuned
/// `slice_idle` came back as the default.
pub(super) fn elevator_settings(root: &SysRoot, path: &str) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    let Some(queue) = path
        .strip_suffix("/scheduler")
        .filter(|q| q.ends_with("/queue"))
    else {
        return Vec::new();
    };
    let dir = format!("{queue}/iosched");
    let mut out: Vec<String> = root
        .list_optional(&dir)
        .unwrap_or_default()
        .into_iter()
        .map(|name| format!("{dir}/{name}"))
        .filter(|p| {
            std::fs::metadata(root.path(p))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o200 != 0)
        })
        .collect();
    out.sort();
    out
}

/// Attributes that writing `path` resets as a side effect.
pub(super) fn dependents_of(path: &str) -> Vec<String> {
    if let Some((partner, _)) = kinds::linked_sysctl(path) {
        return vec![partner];
    }
    let Some((dev, attr)) = path.rsplit_once("/queue/") else {
        return Vec::new();
    };
    let dependents: &[&str] = match attr {
        "scheduler" => &["nr_requests", "wbt_lat_usec", "read_ahead_kb"],
        "read_ahead_kb" => &[],
        // Some kernels re-apply the default read-ahead on a queue-limit update, and which
        // attributes update the limits changes from kernel to kernel (a review saw 996 come
        // back as 1020 after a run that wrote stable_writes; a fresh loop device here keeps
        // it). So every queue attribute's write journals read_ahead_kb; where it is not reset
        // the entry only rewrites the value it found.
        _ => &["read_ahead_kb"],
    };
    dependents
        .iter()
        .map(|a| format!("{dev}/queue/{a}"))
        .collect()
}

/// For the newest entry of a linked sysctl (`kinds::linked_sysctl`), the one write that puts
/// both forms back: the form that was in use (not 0) at its original value, found in the
/// oldest entry of each form among `older` and `entry`. Writing it sets the other to 0 in the
/// kernel. `None` for any other entry.
pub(super) fn linked_restore(
    entry: &JournalEntry,
    older: &[JournalEntry],
) -> Option<(String, String)> {
    let (partner, is_ratio) = kinds::linked_sysctl(&entry.path)?;
    let original = |path: &str| {
        older
            .iter()
            .chain(std::iter::once(entry))
            .find(|e| e.path == path)
            .map(|e| e.old.clone())
    };
    let (ratio, bytes) = match is_ratio {
        true => (entry.path.clone(), partner),
        false => (partner, entry.path.clone()),
    };
    // With the bytes form in use the ratio reads 0; a ratio of 0 with no bytes is a ratio.
    // A form never journaled (a tree without it) leaves the other as it was.
    match (original(&bytes), original(&ratio)) {
        (Some(b), _) if b.trim() != "0" => Some((bytes, b)),
        (_, Some(r)) => Some((ratio, r)),
        (b, None) => b.map(|b| (bytes, b)),
    }
}

/// `entry` with every older entry of its linked sysctl's two forms, taken out of `entries`:
/// each form's entries together (one line per form in a report), newest first.
pub(super) fn take_linked(
    entry: JournalEntry,
    entries: &mut Vec<JournalEntry>,
) -> Vec<JournalEntry> {
    let partner = kinds::linked_sysctl(&entry.path).map(|(p, _)| p);
    let mut group = vec![entry];
    let mut i = entries.len();
    while i > 0 {
        i -= 1;
        if Some(&entries[i].path) == partner.as_ref() || entries[i].path == group[0].path {
            group.push(entries.remove(i));
        }
    }
    group.sort_by(|a, b| a.path.cmp(&b.path));
    group
}
