//! Pure parsers for the text of /proc and /sys files. None of them does I/O: each takes the
//! text (as read through `SysRoot`) and returns values or a `ParseError` carrying the 1-based
//! line it is about, which the reader turns into an error naming the file. Keeping them pure
//! lets the sampler and the IRQ tools reuse them on buffers they already hold, and lets tests
//! feed them text pasted from real machines.

pub(crate) mod cpulist;
pub(crate) mod diskstats;
pub(crate) mod duration;
pub(crate) mod interrupts;
pub(crate) mod mountinfo;
pub(crate) mod queue;
pub(crate) mod stat;
pub(crate) mod swaps;

pub use cpulist::cpulist;
pub(crate) use cpulist::{cpulist_or_null, cpumask, format_cpulist};
pub(crate) use diskstats::diskstats;
pub(crate) use interrupts::interrupts;
pub(crate) use stat::stat;

/// What went wrong in a file's text, and on which line (1-based; 0 when the whole text is
/// at fault, e.g. it is empty).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    pub(crate) line: usize,
    pub(crate) message: String,
}

impl ParseError {
    pub(crate) fn new(line: usize, message: impl Into<String>) -> Self {
        ParseError {
            line,
            message: message.into(),
        }
    }
}

/// Parses one unsigned decimal field, naming it when it is not a number.
pub(crate) fn number(field: &str, what: &str, line: usize) -> Result<u64, ParseError> {
    field
        .parse::<u64>()
        .map_err(|_| ParseError::new(line, format!("{what}: expected a number, found {field:?}")))
}

#[cfg(test)]
mod robustness {
    //! Every parser on every truncation and on scrambled copies of real text: errors are
    //! fine, panics are not.

    const INTERRUPTS: &str = "           CPU0       CPU1\n 36:          0      27567 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\n 40:   0   0  IR-PCI-MSI 458752-edge      PCIe PME, pciehp\nLOC:      12188      13566   Local timer interrupts\nERR:          0\n";
    const STAT: &str = "cpu  3071 0 1304 40900 2107 0 62 1 0 0\ncpu0 1224 0 488 21759 222 0 26 0 0 0\nintr 127902 0 0\nctxt 235083\n";
    const DISKSTATS: &str = " 254       0 vda 29449 5398 2600554 61263 3379 8942 987560 12195 0 20340 74041 3600 72 220832 477 473 104\n";
    const MOUNTINFO: &str = "27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n30 27 259:3 / /mnt/a\\040b ro - xfs /dev/x ro\n";
    const SWAPS: &str = "Filename Type Size Used Priority\n/dev/zram0 partition 4194300 0 100\n";

    fn all(text: &str) {
        let _ = super::interrupts(text);
        let mut layout = super::interrupts::IrqLayout::default();
        let _ = super::interrupts::counts_into(text, &mut layout, &mut Vec::new());
        let _ = super::stat(text);
        let _ = super::diskstats(text);
        let _ = super::mountinfo::mountinfo(text);
        let _ = super::swaps::swaps(text);
        let _ = super::cpulist(text);
        let _ = super::cpumask(text);
        let _ = super::queue::bracketed_choice(text);
        let _ = super::duration::duration(text);
    }

    #[test]
    fn no_panic_on_truncation_or_scrambling() {
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let alphabet = b" \n\t:-,.[]0123456789abcdefxCPU\\";
        for text in [INTERRUPTS, STAT, DISKSTATS, MOUNTINFO, SWAPS] {
            for cut in 0..=text.len() {
                all(&text[..cut]);
            }
            for _ in 0..300 {
                let mut bytes = text.as_bytes().to_vec();
                for _ in 0..4 {
                    let at = (next() as usize) % bytes.len();
                    bytes[at] = alphabet[(next() as usize) % alphabet.len()];
                }
                all(&String::from_utf8_lossy(&bytes));
            }
        }
    }
}

#[cfg(test)]
mod overflow {
    #[test]
    fn huge_counters_do_not_overflow() {
        let max = u64::MAX;
        let s = super::stat(&format!("cpu {max} {max} {max} {max}\n")).unwrap();
        assert_eq!(s.all.total(), u64::MAX);
        let i =
            super::interrupts(&format!("  CPU0 CPU1\n 1: {max} {max} chip 1-edge x\n")).unwrap();
        assert_eq!(i.rows[0].total, u64::MAX);
    }
}
