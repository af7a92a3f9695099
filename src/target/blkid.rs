//! A second opinion on "does this device carry a format?": util-linux's blkid, whose library
//! knows some eighty formats beyond the common ones iolab recognises itself (`signatures`):
//! minix, erofs, Ceph's BlueStore, Intel and DDF RAID members, and more each year. It runs in
//! its low-level probe mode (`-p`: reads the device itself, read-only, no cache), so what it
//! says is about the bytes now. A device blkid cannot clear (not installed, an error, two
//! formats at once) is not clear.

use std::process::Command;

/// blkid by PATH first, then where util-linux installs it (PATH may lack the sbin
/// directories, under sudo for one).
const PROGRAMS: [&str; 3] = ["blkid", "/usr/sbin/blkid", "/sbin/blkid"];

/// blkid's exit status when it found nothing on the device (or could not open it).
const NOTHING_FOUND: i32 = 2;

/// The formats blkid finds on the block device at `dev_path` (its TYPE and PTTYPE values,
/// e.g. `minix`, `dos`), empty when it finds none; an error when it cannot tell.
pub(crate) fn probe(dev_path: &str) -> Result<Vec<String>, String> {
    // blkid says "nothing found" (2) of a path it cannot open, too.
    std::fs::File::open(dev_path).map_err(|e| format!("{dev_path}: {e}"))?;
    for program in PROGRAMS {
        let out = match Command::new(program)
            .args(["-p", "-o", "export", dev_path])
            .output()
        {
            Ok(out) => out,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("blkid could not be run: {e}")),
        };
        return match out.status.code() {
            Some(0) => Ok(formats(&String::from_utf8_lossy(&out.stdout))),
            Some(NOTHING_FOUND) => Ok(Vec::new()),
            code => Err(format!(
                "`blkid -p {dev_path}` could not tell ({}){}",
                code.map_or("killed".to_string(), |c| format!("exit status {c}")),
                match String::from_utf8_lossy(&out.stderr).trim() {
                    "" => String::new(),
                    err => format!(": {err}"),
                }
            )),
        };
    }
    Err(
        "blkid (util-linux) is not installed, so formats iolab does not know itself cannot be \
         ruled out: install util-linux"
            .to_string(),
    )
}

/// TYPE and PTTYPE from blkid's `-o export` lines; something unnamed when it found a
/// signature but named neither (it still found one).
fn formats(export: &str) -> Vec<String> {
    let found: Vec<String> = export
        .lines()
        .filter_map(|l| l.split_once('='))
        .filter(|(key, _)| *key == "TYPE" || *key == "PTTYPE")
        .map(|(key, value)| format!("{key}={value}"))
        .collect();
    if found.is_empty() {
        vec!["a signature".to_string()]
    } else {
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_formats_are_its_type_and_partition_table_type() {
        let export = "DEVNAME=/dev/loop5\nTYPE=minix\nUSAGE=filesystem\nPTTYPE=dos\n";
        assert_eq!(formats(export), ["TYPE=minix", "PTTYPE=dos"]);
        assert_eq!(formats("DEVNAME=/dev/loop5\nUSAGE=raid\n"), ["a signature"]);
    }

    /// What cannot be opened is not clear (blkid itself would say "nothing found").
    #[test]
    fn what_blkid_cannot_read_is_not_clear() {
        assert!(probe("/nonexistent-iolab-device").is_err());
    }
}
