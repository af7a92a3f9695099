//! /proc/swaps: the block devices and files in use as swap. A header line, then
//! `Filename Type Size Used Priority` with sizes in KiB and escaped file names.

use super::mountinfo::unescape;
use super::{number, ParseError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Swap {
    pub filename: String,
    /// `partition` or `file`.
    pub kind: String,
    pub size_kb: u64,
    pub used_kb: u64,
}

pub(crate) fn swaps(text: &str) -> Result<Vec<Swap>, ParseError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.is_empty() || (i == 0 && f[0] == "Filename") {
            continue;
        }
        if f.len() < 4 {
            return Err(ParseError::new(
                i + 1,
                format!("expected 5 fields, found {}", f.len()),
            ));
        }
        out.push(Swap {
            filename: unescape(f[0]),
            kind: f[1].to_string(),
            size_kb: number(f[2], "size", i + 1)?,
            used_kb: number(f[3], "used", i + 1)?,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_only_and_entries() {
        assert!(swaps("Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n")
            .unwrap()
            .is_empty());
        let s = swaps("Filename Type Size Used Priority\n/dev/zram0 partition 4194300 0 100\n/swap\\040file file 1024 0 -2\n").unwrap();
        assert_eq!(s[0].filename, "/dev/zram0");
        assert_eq!(s[1].filename, "/swap file");
        assert_eq!(s[1].kind, "file");
        assert_eq!(
            swaps("Filename\n/dev/sda2 partition x 0 -1\n")
                .unwrap_err()
                .line,
            2
        );
    }
}
