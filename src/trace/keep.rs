//! Keeping traces small: an experiment's per-run traces (15 MB per 5 s sequential run, ~175 MB
//! per 12 s random run) are stored gzip-compressed, `NAME.blktrace.N.gz`, which `trace
//! analyze` reads on the fly (`stream::Source`). blkparse and btt cannot read gzip, so
//! `export` writes the plain `NAME.blktrace.N` files they expect into a directory.
//! gzip (flate2's pure-Rust backend) because it builds offline here and every machine can
//! also undo it with `gunzip`.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use flate2::write::GzEncoder;
use flate2::Compression;

use super::stream::{resolve_input, RecordStream};

/// Sizes before and after compressing a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Compressed {
    pub plain_bytes: u64,
    pub gz_bytes: u64,
}

/// Compresses every plain `BASE.blktrace.N` file into `BASE.blktrace.N.gz` and removes the
/// plain one (only after the compressed copy is complete and flushed; a failure leaves the
/// plain file and removes the partial copy).
pub fn compress(base: &Path) -> anyhow::Result<Compressed> {
    let mut sizes = Compressed::default();
    for cpu in 0.. {
        let plain = PathBuf::from(format!("{}.blktrace.{cpu}", base.display()));
        if !plain.is_file() {
            break;
        }
        let gz = PathBuf::from(format!("{}.gz", plain.display()));
        let result = (|| -> io::Result<u64> {
            let mut input = File::open(&plain)?;
            // Level 3: most of level 9's ratio on these records at several times the speed.
            let mut enc = GzEncoder::new(BufWriter::new(File::create(&gz)?), Compression::new(3));
            let n = io::copy(&mut input, &mut enc)?;
            let out = enc.finish()?;
            out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
            Ok(n)
        })();
        match result {
            Ok(n) => {
                sizes.plain_bytes += n;
                sizes.gz_bytes += std::fs::metadata(&gz).map(|m| m.len()).unwrap_or(0);
                std::fs::remove_file(&plain).with_context(|| {
                    format!("removing {} after compressing it", plain.display())
                })?;
            }
            Err(e) => {
                let _ = std::fs::remove_file(&gz);
                return Err(e).with_context(|| {
                    format!("compressing {} into {}", plain.display(), gz.display())
                });
            }
        }
    }
    Ok(sizes)
}

/// What `export` wrote, and the files of an earlier export (or recording) of the same name in
/// that directory that it removed or could not remove (with why): blkparse, btt and `trace
/// analyze` would read those with the files written, as one trace of two recordings.
pub(crate) struct Exported {
    pub files: Vec<PathBuf>,
    pub earlier_removed: Vec<PathBuf>,
    pub earlier_left: Vec<String>,
}

/// Writes the trace `name` (plain or compressed per-CPU files, or one file) as plain files
/// blkparse and btt read, `DIR/BASENAME.blktrace.N`.
pub(crate) fn export(name: &Path, out_dir: &Path) -> anyhow::Result<Exported> {
    let inputs = resolve_input(name)?;
    // blkparse and btt must not be handed garbage, an empty file or a record cut short,
    // which `trace analyze` refuses too. Files are checked before anything is made; standard
    // input and pipes, which cannot be read twice, record by record as they are copied.
    for input in inputs.iter().filter(|i| !super::stream::reads_once(i)) {
        whole_records(input).map_err(|why| anyhow::anyhow!("nothing exported: {why}"))?;
    }
    let mut streams = Vec::new();
    for input in &inputs {
        let mut stream = RecordStream::open(input)?;
        // A stream that does not begin with a record is refused before a file is made.
        match stream.peek_time() {
            Some(Ok(_)) => {}
            Some(Err(e)) => anyhow::bail!("nothing exported: {e}"),
            None => anyhow::bail!(
                "nothing exported: {} holds no trace records",
                input.display()
            ),
        }
        streams.push(stream);
    }
    let made = !out_dir.exists();
    crate::sys::own_dir::make_own_dir(out_dir.parent().unwrap_or(Path::new("")), out_dir)
        .map_err(anyhow::Error::msg)?;
    // A single file (a merged trace) becomes NAME.blktrace.0, its name without a .gz ending:
    // blkparse finds its input only by that pattern, and btt reads it as it is.
    let base = if name == Path::new("-") {
        "stdin".to_string()
    } else {
        let file = name
            .file_name()
            .map(|b| b.to_string_lossy().into_owned())
            .unwrap_or_else(|| "trace".into());
        match file.strip_suffix(".gz") {
            Some(stem) if inputs.len() == 1 && inputs[0] == name => stem.to_string(),
            _ => file,
        }
    };
    // Each CPU's records go to its own file, which is how blkparse reads them (it takes a
    // file's records to be of the CPU its name gives): a recording's files one to one, and a
    // merged file (blkparse -d's) parted by the CPU of each record.
    let mut outs: BTreeMap<u32, (PathBuf, BufWriter<std::fs::File>)> = BTreeMap::new();
    let copied = (|| -> anyhow::Result<()> {
        for (i, mut stream) in streams.into_iter().enumerate() {
            let own_cpu = (inputs.len() > 1).then_some(i as u32);
            stream
                .copy_records(|cpu, record| {
                    let cpu = own_cpu.unwrap_or(cpu);
                    let out = match outs.entry(cpu) {
                        std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
                        std::collections::btree_map::Entry::Vacant(v) => {
                            let path = cpu_out(out_dir, &base, cpu, &inputs)?;
                            let file = crate::sys::own_dir::create_named_file(&path)
                                .map_err(io::Error::other)?;
                            v.insert((path, BufWriter::new(file)))
                        }
                    };
                    out.1
                        .write_all(record)
                        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", out.0.display())))
                })
                .map_err(|e| anyhow::anyhow!("nothing exported: {e}"))?;
        }
        // blkparse stops at the first CPU without a file: those without records get an
        // empty one.
        let last = outs.keys().next_back().copied().unwrap_or(0);
        for cpu in 0..last {
            if let std::collections::btree_map::Entry::Vacant(v) = outs.entry(cpu) {
                let path = cpu_out(out_dir, &base, cpu, &inputs)?;
                let file =
                    crate::sys::own_dir::create_named_file(&path).map_err(anyhow::Error::msg)?;
                v.insert((path, BufWriter::new(file)));
            }
        }
        for (path, w) in outs.values_mut() {
            w.flush()
                .with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(())
    })();
    let written: Vec<PathBuf> = std::mem::take(&mut outs)
        .into_values()
        .map(|(p, _)| p)
        .collect();
    if let Err(e) = copied {
        for done in &written {
            let _ = std::fs::remove_file(done);
        }
        if made {
            // Only if empty: nothing of the user's goes.
            let _ = std::fs::remove_dir(out_dir);
        }
        return Err(e);
    }
    // The trace exported may be beside its compressed files (`-o` its own directory): only
    // files above the CPUs written go, which no input is.
    let max = u32::try_from(written.len().saturating_sub(1)).unwrap_or(u32::MAX);
    let (earlier_removed, earlier_left) =
        super::capture::remove_earlier_files(&out_dir.join(&base), max, false);
    Ok(Exported {
        files: written,
        earlier_removed,
        earlier_left,
    })
}

/// Trace records name CPUs of the machine that recorded them: beyond this, a record's CPU
/// is damage, and would have a file made for every CPU below it.
const MOST_CPUS: u32 = 8192;

/// The file CPU `cpu`'s records are exported to, refused when it is one of the `inputs` (an
/// export into the recording's own directory, by whatever path, would empty it before it is
/// read) or the CPU cannot be.
fn cpu_out(dir: &Path, base: &str, cpu: u32, inputs: &[PathBuf]) -> io::Result<PathBuf> {
    if cpu >= MOST_CPUS {
        return Err(io::Error::other(format!(
            "a record names CPU {cpu}, beyond any machine's {MOST_CPUS}: the trace is damaged"
        )));
    }
    let out = dir.join(format!("{base}.blktrace.{cpu}"));
    if let Some(input) = inputs.iter().find(|i| same_file(i, &out)) {
        return Err(io::Error::other(format!(
            "{} is {}, part of the trace being exported: exporting would overwrite it; choose \
             another -o DIR",
            out.display(),
            input.display()
        )));
    }
    Ok(out)
}

/// Whether `a` and `b` name one file (by device and inode: paths can differ, links too).
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

/// Whether `path` holds one or more whole trace records and nothing else; why not, naming it.
fn whole_records(path: &Path) -> Result<(), String> {
    let mut stream = RecordStream::open(path).map_err(|e| e.to_string())?;
    let mut records = 0u64;
    for ev in stream.by_ref() {
        ev.map_err(|e| e.to_string())?;
        records += 1;
    }
    match records {
        0 => Err(format!("{} holds no trace records", path.display())),
        _ => Ok(()),
    }
}
