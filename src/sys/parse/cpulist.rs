//! CPU sets as the kernel prints them: lists (`0-3,8-11`, `0, 1` in blk-mq's `cpu_list`,
//! `0-15:2` strides, or empty) and hex masks (`ff,ffffffff` with a comma every 32 bits, the
//! most significant word first). Both become a sorted `Vec<u32>`, the one CPU-set type iolab
//! uses everywhere.

use super::ParseError;

/// The largest CPU number accepted: the kernel's NR_CPUS is at most 8192. Guards against a
/// garbage list (a damaged snapshot's `0-1048576`) taking gigabytes, or the topology models,
/// whose work grows with the square of the CPUs, tens of minutes.
pub(crate) const MAX_CPU: u32 = 8191;

/// Parses a CPU list such as `0-3,8-11`, `0, 1`, `0-15:2` or an empty line.
pub fn cpulist(text: &str) -> Result<Vec<u32>, ParseError> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',') {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let (range, stride) = match part.split_once(':') {
            Some((r, s)) => {
                let stride = s.trim().parse::<u32>().ok().filter(|s| *s > 0);
                (r, stride.ok_or_else(|| bad(part))?)
            }
            None => (part, 1),
        };
        let (lo, hi) = match range.split_once('-') {
            Some((a, b)) => (cpu_number(a, part)?, cpu_number(b, part)?),
            None => {
                let c = cpu_number(range, part)?;
                (c, c)
            }
        };
        if lo > hi {
            return Err(ParseError::new(
                1,
                format!("bad CPU range {part:?}: start after end"),
            ));
        }
        cpus.extend((lo..=hi).step_by(stride as usize));
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// Like `cpulist`, for files the kernel may print from a mask it never allocated: with
/// `CONFIG_NO_HZ_FULL=y` but no `nohz_full=` on the command line, Debian's 6.1 kernel prints
/// `(null)` in /sys/devices/system/cpu/nohz_full (`%*pbl` of a NULL cpumask). That means "no
/// CPU", not a bad list.
pub(crate) fn cpulist_or_null(text: &str) -> Result<Vec<u32>, ParseError> {
    if text.trim() == "(null)" {
        return Ok(Vec::new());
    }
    cpulist(text)
}

fn cpu_number(text: &str, part: &str) -> Result<u32, ParseError> {
    text.trim()
        .parse::<u32>()
        .ok()
        .filter(|c| *c <= MAX_CPU)
        .ok_or_else(|| bad(part))
}

fn bad(part: &str) -> ParseError {
    ParseError::new(1, format!("bad CPU list element {part:?}"))
}

/// Parses a hex CPU mask such as `3`, `00000000,00000001` or `ff,ffffffff`.
pub(crate) fn cpumask(text: &str) -> Result<Vec<u32>, ParseError> {
    let text = text.trim();
    let mut cpus = Vec::new();
    let digits: Vec<char> = text.chars().filter(|c| *c != ',').collect();
    if digits.is_empty() {
        return Err(ParseError::new(1, "empty CPU mask"));
    }
    // Least significant nibble is the last digit.
    for (i, c) in digits.iter().rev().enumerate() {
        let nibble = c.to_digit(16).ok_or_else(|| {
            ParseError::new(1, format!("bad hex digit {c:?} in CPU mask {text:?}"))
        })?;
        for bit in 0..4 {
            if nibble & (1 << bit) != 0 {
                let cpu = (i * 4 + bit) as u32;
                if cpu > MAX_CPU {
                    return Err(ParseError::new(1, format!("CPU mask {text:?} too wide")));
                }
                cpus.push(cpu);
            }
        }
    }
    cpus.sort_unstable();
    Ok(cpus)
}

/// Formats a CPU set the way the kernel does (`0-3,8-11`), which is also what fio's
/// `cpus_allowed` takes; empty is `-`. Order and repeats in the input do not matter.
pub(crate) fn format_cpulist(cpus: &[u32]) -> String {
    if cpus.is_empty() {
        return "-".to_string();
    }
    let mut cpus = cpus.to_vec();
    cpus.sort_unstable();
    cpus.dedup();
    let mut out = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_null_mask_is_no_cpu_and_anything_else_still_a_list() {
        assert_eq!(cpulist_or_null("(null)\n").unwrap(), Vec::<u32>::new());
        assert_eq!(cpulist_or_null("1-3\n").unwrap(), vec![1, 2, 3]);
        assert_eq!(cpulist_or_null("\n").unwrap(), Vec::<u32>::new());
        assert!(cpulist_or_null("(nul)").is_err());
        // The plain parser still refuses it: only files known to print it accept it.
        assert!(cpulist("(null)").is_err());
    }

    #[test]
    fn formats_unsorted_sets_with_repeats() {
        assert_eq!(format_cpulist(&[5, 1, 2, 3, 7, 8, 2]), "1-3,5,7-8");
        assert_eq!(format_cpulist(&[]), "-");
    }

    #[test]
    fn lists_with_ranges_singles_and_spaces() {
        assert_eq!(
            cpulist("0-3,8-11\n").unwrap(),
            vec![0, 1, 2, 3, 8, 9, 10, 11]
        );
        assert_eq!(cpulist("0, 1").unwrap(), vec![0, 1]);
        assert_eq!(cpulist("5").unwrap(), vec![5]);
        assert_eq!(cpulist("\n").unwrap(), Vec::<u32>::new());
        assert_eq!(cpulist("0-7:2").unwrap(), vec![0, 2, 4, 6]);
        assert_eq!(cpulist("3,1,1").unwrap(), vec![1, 3]);
    }

    #[test]
    fn garbage_lists_are_errors_not_panics() {
        assert!(cpulist("0-x").is_err());
        assert!(cpulist("4-2").is_err());
        assert!(cpulist("0-99999999999").is_err());
        // No kernel numbers CPUs past NR_CPUS (at most 8192).
        assert_eq!(cpulist("8191").unwrap(), vec![8191]);
        assert!(cpulist("0-8192").is_err());
        assert!(cpumask(&format!("1{}", "0".repeat(2048))).is_err());
        assert!(cpulist("0-3:0").is_err());
        assert!(cpulist("abc").is_err());
    }

    #[test]
    fn masks_with_32_bit_groups() {
        assert_eq!(cpumask("3\n").unwrap(), vec![0, 1]);
        assert_eq!(cpumask("00000000,00000001").unwrap(), vec![0]);
        assert_eq!(cpumask("1,00000000").unwrap(), vec![32]);
        assert_eq!(
            cpumask("ff,ffffffff").unwrap(),
            (0..40).collect::<Vec<u32>>()
        );
        assert_eq!(
            cpumask("0000,00000000,00000000").unwrap(),
            Vec::<u32>::new()
        );
        assert!(cpumask("xyz").is_err());
        assert!(cpumask("").is_err());
    }

    #[test]
    fn formats_back_to_ranges() {
        assert_eq!(format_cpulist(&[0, 1, 2, 3, 8, 9, 10, 11]), "0-3,8-11");
        assert_eq!(format_cpulist(&[1]), "1");
        assert_eq!(format_cpulist(&[0, 2, 4]), "0,2,4");
        assert_eq!(format_cpulist(&[]), "-");
    }
}
