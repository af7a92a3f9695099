//! A user's existing fio job file as the workload (`[workload] job = "my.fio"`). People
//! already have job files they trust; rewriting them as TOML loses comments and invites
//! mistakes. This module reads fio's ini format into the same `(option, value)` list an
//! inline [workload] gives, so every option then goes through the same allow-list, write
//! check, factor overrides and iolab's own target and placement settings.
//!
//! The parser does no I/O: included files and environment variables come through a
//! [`JobSource`] ([`Disk`] reads the real ones). What it accepts, and why:
//! - `[global]` sections and one job section. The global sections before the job and the job's
//!   own options are flattened, in that order, into the workload; iolab then writes one section
//!   per target device from it (fio's own layering gives the same result). Several job sections
//!   are refused: a cell's figures would mix different jobs. A `[global]` after the job applies
//!   to nothing in fio and is refused too.
//! - `include FILE` inside a section splices FILE in, resolved against the including file's
//!   directory as fio does; the path must stay in that directory or below it (no absolute
//!   paths, no `..`), so an experiment's job file cannot pull in files from elsewhere.
//! - `${VAR}` in a value is replaced by the environment variable, as fio does, but by iolab,
//!   before the check, so the checked value is the value that runs; only a variable the person
//!   running lets it read (`--job-env VAR`), since the value is stored with the results; an
//!   unset variable is an error (fio would silently substitute nothing). fio's own `$ncpus`, `$mb_memory` and
//!   `$pagesize` stay for fio; any other `$NAME` is refused (fio does not expand it either).
//! - `;` and `#` start a comment, at the start of a line or after a value (fio strips both).
//! - An option without `=` is fio's valueless form (`time_based`): its value is empty.
//! - `filename` may only name the experiment's own target devices, and is then dropped:
//!   iolab sets the target itself ([`check`]).

use std::fmt;
use std::path::{Component, Path, PathBuf};

use super::options::{self, OptionPolicy};

/// Where a line came from: the file (as named to the user) and its 1-based line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Origin {
    pub file: String,
    pub line: usize,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            0 => write!(f, "{}", self.file),
            n => write!(f, "{}:{n}", self.file),
        }
    }
}

/// One `name=value` of a job file, environment already expanded; `value` is empty for fio's
/// valueless form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JobOption {
    pub name: String,
    pub value: String,
    pub origin: Origin,
}

/// A `[name]` section with its options, includes spliced in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Section {
    pub name: String,
    pub origin: Origin,
    pub options: Vec<JobOption>,
}

/// One problem, at its file and line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
    pub origin: Origin,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.origin, self.message)
    }
}

/// The outside world a job file may reach: included files and environment variables.
pub(crate) trait JobSource {
    fn read(&self, path: &Path) -> Result<String, String>;
    /// The value of `${name}`, or why there is none (a whole sentence).
    fn var(&self, name: &str) -> Result<String, String>;
}

/// Why `${name}` has no value when the environment lacks it.
fn unset(name: &str) -> String {
    format!(
        "`${{{name}}}` is not set in iolab's environment (fio would put nothing there); set it \
         or write the value"
    )
}

/// The real files under `root` (the experiment's directory) and the environment variables
/// the person running iolab lets job files read (`--job-env NAME`): a job file handed over with
/// an experiment could otherwise copy any of them (a token, a home directory) into the results,
/// which are made to be shared.
pub(crate) struct Disk {
    root: PathBuf,
    env: Vec<String>,
}

impl Disk {
    /// Job files of the experiment file `experiment`: those in its directory or below it.
    /// `env`: the environment variables job files may read.
    pub(crate) fn beside(experiment: &Path, env: &[String]) -> Disk {
        let root = match experiment.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        Disk {
            root,
            env: env.to_vec(),
        }
    }
}

impl JobSource for Disk {
    /// The names were checked to stay below `root`, but a symbolic link there can still lead
    /// anywhere (iolab reads as root, quotes what it reads and stores it with the results), and
    /// a FIFO or a device would block or be opened. So the file is first resolved without
    /// being opened (`O_PATH`: no driver sees it), judged by where it really is and what it is,
    /// and only then read, through that same resolved handle, so a link swapped in between
    /// changes nothing.
    fn read(&self, path: &Path) -> Result<String, String> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::OpenOptionsExt;
        let handle = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH)
            .open(path)
            .map_err(|e| e.to_string())?;
        let by_fd = PathBuf::from(format!("/proc/self/fd/{}", handle.as_raw_fd()));
        let real = std::fs::read_link(&by_fd).map_err(|e| format!("{}: {e}", by_fd.display()))?;
        let root = std::fs::canonicalize(&self.root)
            .map_err(|e| format!("{}: {e}", self.root.display()))?;
        if !real.starts_with(&root) {
            return Err(format!(
                "a symbolic link leads it to {}, outside the experiment's directory {} (iolab \
                 reads job files only there: copy the file there)",
                real.display(),
                root.display()
            ));
        }
        let meta = handle.metadata().map_err(|e| e.to_string())?;
        if !meta.is_file() {
            return Err("not a regular file".to_string());
        }
        crate::sys::user_file::read_text(&by_fd)
    }
    fn var(&self, name: &str) -> Result<String, String> {
        if !self.env.iter().any(|n| n == name) {
            return Err(format!(
                "`${{{name}}}` would read iolab's environment variable {name}: let it with \
                 `iolab run --job-env {name}` (its value is then stored with the results) or \
                 write the value"
            ));
        }
        std::env::var(name).map_err(|_| unset(name))
    }
}

/// Nothing to read: for experiments given as text, with no file to resolve a job file from.
pub(crate) struct NoFiles;

impl JobSource for NoFiles {
    fn read(&self, _: &Path) -> Result<String, String> {
        Err(
            "this experiment was given as text; job files are read when the experiment is \
             loaded from a file (iolab run FILE)"
                .to_string(),
        )
    }
    fn var(&self, name: &str) -> Result<String, String> {
        Err(unset(name))
    }
}

/// How deep includes may nest (fio has no limit).
const MAX_INCLUDE_DEPTH: usize = 8;
/// How many includes a job file may splice in all: files that each include the next several
/// times would otherwise be read a number of times that grows as a power of the depth.
const MAX_INCLUDES: usize = 64;

/// fio's own `$` keywords, which fio expands itself.
const FIO_KEYWORDS: &[&str] = &["$ncpus", "$mb_memory", "$pagesize"];

/// A parsed job file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JobFile {
    pub sections: Vec<Section>,
    /// Every file read (the job file, then its includes) with its text, to store with the
    /// experiment.
    pub texts: Vec<(String, String)>,
}

/// Reads the job file at `path` (through `source`) into sections. Every problem is reported.
pub(crate) fn parse(path: &Path, source: &dyn JobSource) -> Result<JobFile, Vec<Problem>> {
    let mut p = Parser {
        source,
        sections: Vec::new(),
        texts: Vec::new(),
        problems: Vec::new(),
        reading: vec![path.to_path_buf()],
        included: 0,
    };
    let at = Origin {
        file: path.display().to_string(),
        line: 0,
    };
    match source.read(path) {
        Ok(text) => p.text(path, &text),
        Err(e) => p.problem(&at, format!("cannot read the job file: {e}")),
    }
    if p.problems.is_empty() {
        Ok(JobFile {
            sections: p.sections,
            texts: p.texts,
        })
    } else {
        Err(p.problems)
    }
}

struct Parser<'s> {
    source: &'s dyn JobSource,
    sections: Vec<Section>,
    texts: Vec<(String, String)>,
    problems: Vec<Problem>,
    /// The files being read, the job file first: one included again is a cycle.
    reading: Vec<PathBuf>,
    /// Includes read so far.
    included: usize,
}

impl Parser<'_> {
    fn problem(&mut self, origin: &Origin, message: String) {
        self.problems.push(Problem {
            origin: origin.clone(),
            message,
        });
    }

    fn text(&mut self, path: &Path, text: &str) {
        self.texts
            .push((path.display().to_string(), text.to_string()));
        for (i, raw) in text.lines().enumerate() {
            let origin = Origin {
                file: path.display().to_string(),
                line: i + 1,
            };
            let line = strip_comment(raw).trim();
            if line.is_empty() {
                continue;
            }
            if let Some(rest) = line.strip_prefix('[') {
                match rest.strip_suffix(']').map(str::trim) {
                    Some(name) if !name.is_empty() && !name.contains(['[', ']']) => {
                        self.sections.push(Section {
                            name: name.to_string(),
                            origin,
                            options: Vec::new(),
                        })
                    }
                    _ => self.problem(
                        &origin,
                        format!("`{line}` is not a section header; write [name]"),
                    ),
                }
                continue;
            }
            if self.sections.is_empty() {
                self.problem(
                    &origin,
                    format!(
                        "`{line}` is outside any section (fio refuses it too); put it under \
                         [global] or a job section"
                    ),
                );
                continue;
            }
            if let Some(file) = line
                .strip_prefix("include")
                .filter(|r| r.starts_with([' ', '\t']))
            {
                self.include(path, file.trim(), &origin);
                continue;
            }
            let (name, value) = match line.split_once('=') {
                Some((n, v)) => (n.trim(), v.trim()),
                None => (line, ""),
            };
            let Some(value) = self.expand(value, &origin) else {
                continue;
            };
            let section = self.sections.last_mut().expect("a section exists");
            section.options.push(JobOption {
                name: name.to_string(),
                value,
                origin,
            });
        }
    }

    /// Splices an included file in, if it stays beside or below the including file.
    fn include(&mut self, from: &Path, file: &str, origin: &Origin) {
        let rel = Path::new(file);
        let inside = !file.is_empty()
            && rel
                .components()
                .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
        if !inside {
            self.problem(
                origin,
                format!(
                    "`include {file}` reaches outside the job file's directory; iolab includes \
                     only files beside it or below it (copy the file there)"
                ),
            );
            return;
        }
        // The job file itself is the first being read.
        if self.reading.len() > MAX_INCLUDE_DEPTH {
            self.problem(
                origin,
                format!("`include {file}`: includes nest more than {MAX_INCLUDE_DEPTH} deep"),
            );
            return;
        }
        let path: PathBuf = from.parent().unwrap_or(Path::new("")).join(
            rel.components()
                .filter(|c| *c != Component::CurDir)
                .collect::<PathBuf>(),
        );
        if self.reading.contains(&path) {
            self.problem(
                origin,
                format!(
                    "`include {file}`: {} is already being read, so it would include itself \
                     without end",
                    path.display()
                ),
            );
            return;
        }
        if self.included >= MAX_INCLUDES {
            self.problem(
                origin,
                format!("`include {file}`: more than {MAX_INCLUDES} includes in all"),
            );
            return;
        }
        self.included += 1;
        match self.source.read(&path) {
            Ok(text) => {
                self.reading.push(path.clone());
                self.text(&path, &text);
                self.reading.pop();
            }
            Err(e) => self.problem(
                origin,
                format!("cannot read included file {}: {e}", path.display()),
            ),
        }
    }

    /// `${VAR}` from the environment; fio's `$` keywords kept; any other `$` refused.
    fn expand(&mut self, value: &str, origin: &Origin) -> Option<String> {
        let mut out = String::new();
        let mut rest = value;
        while let Some(at) = rest.find('$') {
            out.push_str(&rest[..at]);
            rest = &rest[at..];
            if let Some(inner) = rest.strip_prefix("${") {
                let Some(end) = inner.find('}') else {
                    self.problem(origin, format!("`{value}`: `${{` without its `}}`"));
                    return None;
                };
                let name = &inner[..end];
                let value = match name {
                    "" => Err(unset(name)),
                    _ => self.source.var(name),
                };
                match value {
                    Ok(v) => out.push_str(&v),
                    Err(why) => {
                        self.problem(origin, why);
                        return None;
                    }
                }
                rest = &inner[end + 1..];
            } else if let Some(k) = FIO_KEYWORDS.iter().find(|k| rest.starts_with(**k)) {
                out.push_str(k);
                rest = &rest[k.len()..];
            } else {
                let word: String = rest[1..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                self.problem(
                    origin,
                    format!(
                        "`${word}` is not expanded by fio; write `${{{word}}}` for an \
                         environment variable"
                    ),
                );
                return None;
            }
        }
        out.push_str(rest);
        Some(out)
    }
}

/// The line without a `;` or `#` comment (fio strips both, also after a value).
fn strip_comment(line: &str) -> &str {
    line.find([';', '#']).map_or(line, |at| &line[..at])
}

/// The workload a job file describes: its `[global]` options before the job section, then the
/// job section's, in file order. Exactly one job section.
pub(crate) fn workload(sections: &[Section]) -> Result<Vec<JobOption>, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut options = Vec::new();
    let mut job: Option<&Section> = None;
    for s in sections {
        match (s.name == "global", job) {
            (true, None) => options.extend(s.options.iter().cloned()),
            (true, Some(j)) => problems.push(Problem {
                origin: s.origin.clone(),
                message: format!(
                    "this [global] comes after the job [{}] and applies to no job; move it \
                     above the job",
                    j.name
                ),
            }),
            (false, None) => {
                options.extend(s.options.iter().cloned());
                job = Some(s);
            }
            (false, Some(j)) => problems.push(Problem {
                origin: s.origin.clone(),
                message: format!(
                    "a second job section [{}] (the first is [{}] at {}); iolab runs one job \
                     per target, so a cell's figures are one job's: keep one job section, or \
                     make one experiment per job",
                    s.name, j.name, j.origin
                ),
            }),
        }
    }
    if job.is_none() {
        let at = sections.first().map(|s| s.origin.clone());
        problems.push(Problem {
            origin: at.unwrap_or(Origin {
                file: String::new(),
                line: 0,
            }),
            message: "the job file has no job section (only [global]); add one, e.g. [job]"
                .to_string(),
        });
    }
    if problems.is_empty() {
        Ok(options)
    } else {
        Err(problems)
    }
}

/// Checks a job file's options as inline [workload] options are checked, and returns those
/// iolab passes on (with their lines, for later messages). `targets` are the device nodes of the experiment's named target devices
/// (empty for the scratch target, whose path is made at run time). A `filename` is accepted
/// only when every file it lists is one of them, and is then dropped: iolab writes the target
/// into each section itself.
pub(crate) fn check(
    options: &[JobOption],
    targets: &[String],
    policy: &OptionPolicy,
) -> (Vec<JobOption>, Vec<Problem>) {
    let mut kept = Vec::new();
    let mut problems = Vec::new();
    for o in options {
        let problem = |message: String| Problem {
            origin: o.origin.clone(),
            message,
        };
        if options::canonical(&o.name) == "filename" {
            let outside: Vec<String> = split_filenames(&o.value)
                .into_iter()
                .filter(|f| !targets.iter().any(|t| t == f))
                .collect();
            if !outside.is_empty() {
                let have = match targets {
                    [] => "the scratch target, made at run time".to_string(),
                    t => t.join(", "),
                };
                problems.push(problem(format!(
                    "`filename={}` names {} outside the experiment's target ({have}); remove \
                     `filename`: iolab sets the target from [target]",
                    o.value,
                    outside.join(", ")
                )));
            }
            continue;
        }
        match options::check_option(&o.name, &o.value, policy) {
            Ok(()) => kept.push(o.clone()),
            Err(refusal) => problems.push(problem(refusal.to_string())),
        }
    }
    (kept, problems)
}

/// fio's `filename` list: files separated by `:`, where `\:` is a colon in a name.
fn split_filenames(value: &str) -> Vec<String> {
    let mut files = vec![String::new()];
    let mut chars = value.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&':') => {
                files.last_mut().expect("one").push(':');
                chars.next();
            }
            ':' => files.push(String::new()),
            c => files.last_mut().expect("one").push(c),
        }
    }
    files.retain(|f| !f.trim().is_empty());
    files.iter().map(|f| f.trim().to_string()).collect()
}

/// Files and variables in memory, for tests.
#[cfg(test)]
pub(crate) mod fake {
    use super::JobSource;
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};

    #[derive(Default)]
    pub(crate) struct Fake {
        files: BTreeMap<PathBuf, String>,
        vars: BTreeMap<String, String>,
    }

    impl Fake {
        pub(crate) fn file(mut self, path: &str, text: &str) -> Self {
            self.files.insert(PathBuf::from(path), text.to_string());
            self
        }
        pub(crate) fn var(mut self, name: &str, value: &str) -> Self {
            self.vars.insert(name.to_string(), value.to_string());
            self
        }
    }

    impl JobSource for Fake {
        fn read(&self, path: &Path) -> Result<String, String> {
            self.files
                .get(path)
                .cloned()
                .ok_or_else(|| "No such file or directory".to_string())
        }
        fn var(&self, name: &str) -> Result<String, String> {
            self.vars
                .get(name)
                .cloned()
                .ok_or_else(|| super::unset(name))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::Fake;
    use super::*;

    fn messages(r: Result<JobFile, Vec<Problem>>) -> Vec<String> {
        r.unwrap_err().iter().map(Problem::to_string).collect()
    }

    fn pairs(options: &[JobOption]) -> Vec<(&str, &str)> {
        options
            .iter()
            .map(|o| (o.name.as_str(), o.value.as_str()))
            .collect()
    }

    #[test]
    fn sections_comments_valueless_options_and_lines() {
        let fake = Fake::default().file(
            "/j/a.fio",
            "; a comment\n# another\n[global]\nioengine = psync\ndirect=1\n\n\
             [rand-read]  \nrw=randread ; trailing\nbs=4k # trailing\ntime_based\n",
        );
        let parsed = parse(Path::new("/j/a.fio"), &fake).unwrap();
        assert_eq!(parsed.texts.len(), 1);
        let sections = parsed.sections;
        assert_eq!(sections.len(), 2);
        assert_eq!(sections[1].name, "rand-read");
        assert_eq!(sections[1].origin.to_string(), "/j/a.fio:7");
        let w = workload(&sections).unwrap();
        assert_eq!(
            pairs(&w),
            [
                ("ioengine", "psync"),
                ("direct", "1"),
                ("rw", "randread"),
                ("bs", "4k"),
                ("time_based", "")
            ]
        );
        assert_eq!(w[4].origin.line, 10);
    }

    #[test]
    fn includes_are_spliced_relative_to_the_including_file() {
        let fake = Fake::default()
            .file(
                "/j/a.fio",
                "[global]\ninclude common/base.fio\n[job]\nbs=4k\n",
            )
            .file("/j/common/base.fio", "rw=randread\ninclude more.fio\n")
            .file("/j/common/more.fio", "iodepth=8\n");
        let w = workload(&parse(Path::new("/j/a.fio"), &fake).unwrap().sections).unwrap();
        assert_eq!(
            pairs(&w),
            [("rw", "randread"), ("iodepth", "8"), ("bs", "4k")]
        );
        assert_eq!(w[1].origin.to_string(), "/j/common/more.fio:1");
    }

    #[test]
    fn includes_that_escape_loop_or_are_missing_are_refused_at_their_line() {
        for (inc, expect) in [
            ("../etc/x.fio", "reaches outside"),
            ("/etc/x.fio", "reaches outside"),
            ("sub/../../x.fio", "reaches outside"),
            ("a.fio", "/j/a.fio is already being read"),
            ("./a.fio", "/j/a.fio is already being read"),
            ("nope.fio", "cannot read included file /j/nope.fio"),
        ] {
            let fake = Fake::default().file("/j/a.fio", &format!("[job]\ninclude {inc}\n"));
            let m = messages(parse(Path::new("/j/a.fio"), &fake));
            assert!(m[0].starts_with("/j/a.fio:2: "), "{m:?}");
            assert!(m[0].contains(expect), "{inc}: {m:?}");
        }
        // Nine files deep, each named once: too deep.
        let mut fake = Fake::default().file("/j/a.fio", "[job]\ninclude c1.fio\n");
        for i in 1..10 {
            fake = fake.file(
                &format!("/j/c{i}.fio"),
                &format!("include c{}.fio\n", i + 1),
            );
        }
        let m = messages(parse(Path::new("/j/a.fio"), &fake));
        assert!(m[0].contains("nest more than 8"), "{m:?}");
        // Files that each include the next four times would be read 4^8 times: the count
        // of includes in all is bounded, and so are the messages.
        let mut fake = Fake::default().file("/j/a.fio", "[job]\ninclude b1.fio\n");
        for i in 1..9 {
            let next = format!("include b{}.fio\n", i + 1).repeat(4);
            fake = fake.file(&format!("/j/b{i}.fio"), &next);
        }
        let m = messages(parse(Path::new("/j/a.fio"), &fake));
        assert!(
            m.iter().any(|m| m.contains("more than 64 includes in all")),
            "{m:?}"
        );
        assert!(m.len() < 300, "{}", m.len());
    }

    #[test]
    fn on_disk_a_link_out_of_the_directory_or_a_fifo_is_not_read() {
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join("exp");
        std::fs::create_dir(&dir).unwrap();
        let secret = top.path().join("secret");
        std::fs::write(&secret, "rw=randwrite\n").unwrap();
        std::fs::write(dir.join("real.fio"), "bs=8k\n").unwrap();
        std::os::unix::fs::symlink(&secret, dir.join("out.fio")).unwrap();
        std::os::unix::fs::symlink(dir.join("real.fio"), dir.join("in.fio")).unwrap();
        let fifo = std::ffi::CString::new(dir.join("fifo.fio").to_str().unwrap()).unwrap();
        // SAFETY: a path string made above; mkfifo only creates the node.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let disk = Disk::beside(&dir.join("x.toml"), &[]);
        let job = |text: &str| {
            std::fs::write(dir.join("a.fio"), text).unwrap();
            parse(&dir.join("a.fio"), &disk)
        };
        let w = workload(&job("[job]\ninclude in.fio\n").unwrap().sections).unwrap();
        assert_eq!(pairs(&w), [("bs", "8k")]);
        for (inc, expect) in [
            ("out.fio", "outside the experiment's directory"),
            ("fifo.fio", "not a regular file"),
        ] {
            let m = messages(job(&format!("[job]\ninclude {inc}\n")));
            assert!(m[0].contains(expect), "{inc}: {m:?}");
            assert!(!m[0].contains("randwrite"), "{m:?}");
        }
        // The job file itself too.
        let m = messages(parse(&dir.join("out.fio"), &disk));
        assert!(m[0].contains("outside the experiment's directory"), "{m:?}");
    }

    #[test]
    fn environment_is_expanded_by_iolab_and_unknown_dollars_refused() {
        let fake = Fake::default()
            .var("BS", "64k")
            .file("/j/a.fio", "[job]\nbs=${BS}\nnumjobs=$ncpus\n");
        let w = workload(&parse(Path::new("/j/a.fio"), &fake).unwrap().sections).unwrap();
        assert_eq!(pairs(&w), [("bs", "64k"), ("numjobs", "$ncpus")]);
        for (line, expect) in [
            ("bs=${NOPE}", "`${NOPE}` is not set"),
            ("bs=$BS", "write `${BS}`"),
            ("bs=${BS", "without its"),
        ] {
            let fake = Fake::default()
                .var("BS", "4k")
                .file("/j/a.fio", &format!("[job]\n{line}\n"));
            let m = messages(parse(Path::new("/j/a.fio"), &fake));
            assert!(
                m[0].starts_with("/j/a.fio:2: ") && m[0].contains(expect),
                "{m:?}"
            );
        }
    }

    #[test]
    fn bad_lines_are_refused_at_their_line() {
        let fake = Fake::default().file("/j/a.fio", "bs=4k\n[job\n[]\n[ok]\nrw=read\n");
        let m = messages(parse(Path::new("/j/a.fio"), &fake));
        assert_eq!(m.len(), 3, "{m:?}");
        assert!(m[0].starts_with("/j/a.fio:1: `bs=4k` is outside any section"));
        assert!(m[1].starts_with("/j/a.fio:2: `[job` is not a section header"));
        assert!(m[2].starts_with("/j/a.fio:3: "));
        let m = messages(parse(Path::new("/j/none.fio"), &Fake::default()));
        assert!(
            m[0].starts_with("/j/none.fio: cannot read the job file"),
            "{m:?}"
        );
    }

    #[test]
    fn one_job_section_after_its_globals() {
        let parsed = |text: &str| {
            let fake = Fake::default().file("/j/a.fio", text);
            workload(&parse(Path::new("/j/a.fio"), &fake).unwrap().sections)
        };
        let m = parsed("[a]\nrw=read\n[b]\nrw=write\n").unwrap_err();
        assert_eq!(m[0].origin.line, 3);
        assert!(m[0].message.contains("second job section [b]"), "{m:?}");
        let m = parsed("[a]\nrw=read\n[global]\nbs=4k\n").unwrap_err();
        assert!(m[0].message.contains("applies to no job"), "{m:?}");
        let m = parsed("[global]\nrw=read\n").unwrap_err();
        assert!(m[0].message.contains("no job section"), "{m:?}");
    }

    #[test]
    fn options_are_checked_like_inline_ones_and_filename_must_be_the_target() {
        let fake = Fake::default().file(
            "/j/a.fio",
            "[job]\nfilename=/dev/sdb\nrw=randread\nexec_prerun=touch /tmp/x\n\
             write_lat_log=/etc/lat\nfilename=/dev/sdb:/dev/vda\n",
        );
        let opts = workload(&parse(Path::new("/j/a.fio"), &fake).unwrap().sections).unwrap();
        let targets = ["/dev/sdb".to_string()];
        let (kept, problems) = check(&opts, &targets, &OptionPolicy::default());
        assert_eq!(pairs(&kept), [("rw", "randread")]);
        let m: Vec<String> = problems.iter().map(Problem::to_string).collect();
        assert_eq!(m.len(), 3, "{m:?}");
        assert!(m[0].starts_with("/j/a.fio:4: `exec_prerun`"), "{m:?}");
        assert!(m[0].contains("allow_exec = true"), "{m:?}");
        assert!(m[1].starts_with("/j/a.fio:5: `write_lat_log`"), "{m:?}");
        assert!(m[2].starts_with("/j/a.fio:6: "), "{m:?}");
        assert!(m[2].contains("names /dev/vda outside"), "{m:?}");
        // With allow_exec the command passes; on the scratch target no filename is the target.
        let allow = OptionPolicy {
            allow_exec: true,
            ..Default::default()
        };
        let (kept, problems) = check(&opts, &[], &allow);
        assert!(kept.iter().any(|o| o.name == "exec_prerun"));
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].message.contains("scratch target"));
    }

    #[test]
    fn filename_lists_split_on_unescaped_colons() {
        assert_eq!(split_filenames("/dev/a:/dev/b"), ["/dev/a", "/dev/b"]);
        assert_eq!(
            split_filenames("/dev/disk/by-path/pci-0000\\:00"),
            ["/dev/disk/by-path/pci-0000:00"]
        );
    }
}
