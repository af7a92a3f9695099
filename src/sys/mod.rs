//! Everything iolab knows about the kernel comes through here: one rooted reader (`SysRoot`)
//! so the same code runs on the live machine and on a snapshot directory, and pure parsers
//! that turn the text of /proc and /sys files into values without doing any I/O themselves.

mod root;

pub use root::{SysError, SysRoot};
