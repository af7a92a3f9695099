//! /proc/self/mountinfo: which block devices are mounted, and where. Only the fields that
//! tie a mount to a device are kept (device number, mount point, filesystem type, source);
//! options are dropped because they may carry credentials (cifs `password=`), and the
//! snapshot writer relies on that when it rewrites the file.

use super::ParseError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mount {
    pub id: u64,
    pub parent: u64,
    pub major: u32,
    pub minor: u32,
    pub root: String,
    pub mount_point: String,
    pub read_only: bool,
    pub fs_type: String,
    /// The mount source ("/dev/vda1", "tmpfs", "server:/export").
    pub source: String,
}

/// Parses the whole text of a mountinfo file.
pub(crate) fn mountinfo(text: &str) -> Result<Vec<Mount>, ParseError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        out.push(mount_line(line, i + 1)?);
    }
    Ok(out)
}

/// Parses one line (`lineno` is 1-based, for the error).
pub(crate) fn mount_line(line: &str, lineno: usize) -> Result<Mount, ParseError> {
    let fields: Vec<&str> = line.split(' ').filter(|f| !f.is_empty()).collect();
    let err = |m: &str| ParseError::new(lineno, m.to_string());
    let sep = fields
        .iter()
        .position(|f| *f == "-")
        .ok_or_else(|| err("missing the ` - ` separator"))?;
    if sep < 6 || fields.len() < sep + 3 {
        return Err(err("expected at least 6 fields before ` - ` and 2 after"));
    }
    let num = |s: &str, what: &str| {
        s.parse::<u64>()
            .map_err(|_| err(&format!("{what}: expected a number, found {s:?}")))
    };
    let (major, minor) = fields[2]
        .split_once(':')
        .ok_or_else(|| err("device number is not major:minor"))?;
    Ok(Mount {
        id: num(fields[0], "mount id")?,
        parent: num(fields[1], "parent id")?,
        major: num(major, "major")? as u32,
        minor: num(minor, "minor")? as u32,
        root: unescape(fields[3]),
        mount_point: unescape(fields[4]),
        read_only: fields[5].split(',').any(|o| o == "ro"),
        fs_type: unescape(fields[sep + 1]),
        source: unescape(fields[sep + 2]),
    })
}

/// The kernel escapes space, tab, newline and backslash as `\ooo` octal.
pub(crate) fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') as u32 * 64
                + (b[i + 2] - b'0') as u32 * 8
                + (b[i + 3] - b'0') as u32;
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Escapes a value back for writing a mountinfo or swaps line.
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            ' ' | '\t' | '\n' | '\\' => out.push_str(&format!("\\{:03o}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lines_with_optional_fields_and_escapes() {
        let text = "27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard\n\
30 27 259:3 / /mnt/my\\040disk ro,relatime - xfs /dev/nvme0n1p3 ro\n\
24 27 0:6 / /dev rw,relatime - devtmpfs devtmpfs rw,size=1k\n";
        let m = mountinfo(text).unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!((m[0].major, m[0].minor), (254, 0));
        assert_eq!(m[0].mount_point, "/");
        assert_eq!(m[0].fs_type, "ext4");
        assert_eq!(m[0].source, "/dev/vda");
        assert_eq!(m[1].mount_point, "/mnt/my disk");
        assert!(m[1].read_only);
        assert_eq!(escape(&m[1].mount_point), "/mnt/my\\040disk");
    }

    #[test]
    fn garbage_names_the_line() {
        assert_eq!(
            mountinfo("27 1 254:0 / / rw - ext4 /dev/vda rw\nnonsense\n")
                .unwrap_err()
                .line,
            2
        );
        assert_eq!(
            mountinfo("x 1 254:0 / / rw - ext4 /dev/vda rw\n")
                .unwrap_err()
                .line,
            1
        );
        assert_eq!(
            mountinfo("27 1 2540 / / rw - ext4 /dev/vda rw\n")
                .unwrap_err()
                .line,
            1
        );
    }
}
