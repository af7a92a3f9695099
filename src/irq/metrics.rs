//! The interrupt daemon's figures for dashboards, in the Prometheus text format: per-CPU and
//! per-IRQ interrupt rates, moves made, the busiest CPU against the mean. `irq daemon` writes
//! them after every look as a node_exporter textfile (`--metrics-file`, replaced atomically so
//! the collector never reads half a file) and/or serves them over HTTP on an address the user
//! names (`--listen`); nothing listens unless asked.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{Read, Write as _};
use std::net::{TcpListener, ToSocketAddrs};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;

/// What one look of the daemon measured and did.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Figures {
    /// Interrupts per second per CPU iolab can place interrupts on.
    pub cpu: BTreeMap<u32, f64>,
    /// Interrupts per second of each interrupt that had any: (irq, name, rate).
    pub irqs: Vec<(u32, String, f64)>,
    /// Interrupts moved since the daemon started.
    pub moves_total: u64,
    /// Seconds until the next look.
    pub interval_secs: f64,
    /// When the look ended (Unix seconds).
    pub time_unix: f64,
}

impl Figures {
    /// The busiest CPU's rate over the mean CPU's rate (1 = perfectly even); 0 when idle.
    pub(crate) fn imbalance(&self) -> f64 {
        let n = self.cpu.len() as f64;
        let sum: f64 = self.cpu.values().sum();
        let max = self.cpu.values().copied().fold(0.0, f64::max);
        if sum > 0.0 {
            max / (sum / n)
        } else {
            0.0
        }
    }
}

/// The figures in the Prometheus text exposition format (version 0.0.4).
pub(crate) fn prometheus_text(f: &Figures) -> String {
    let mut o = String::new();
    let family = |o: &mut String, name: &str, kind: &str, help: &str| {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
    };
    family(
        &mut o,
        "iolab_irq_cpu_interrupts_per_second",
        "gauge",
        "Device interrupts per second handled by each CPU over the last look.",
    );
    for (cpu, rate) in &f.cpu {
        let _ = writeln!(
            o,
            "iolab_irq_cpu_interrupts_per_second{{cpu=\"{cpu}\"}} {}",
            number(*rate)
        );
    }
    family(
        &mut o,
        "iolab_irq_interrupts_per_second",
        "gauge",
        "Interrupts per second of each interrupt over the last look.",
    );
    for (irq, name, rate) in &f.irqs {
        let _ = writeln!(
            o,
            "iolab_irq_interrupts_per_second{{irq=\"{irq}\",name=\"{}\"}} {}",
            label(name),
            number(*rate)
        );
    }
    family(
        &mut o,
        "iolab_irq_imbalance_ratio",
        "gauge",
        "The busiest CPU's interrupt rate over the mean CPU's (1 is even).",
    );
    let _ = writeln!(o, "iolab_irq_imbalance_ratio {}", number(f.imbalance()));
    family(
        &mut o,
        "iolab_irq_moves_total",
        "counter",
        "Interrupts the daemon moved since it started.",
    );
    let _ = writeln!(o, "iolab_irq_moves_total {}", f.moves_total);
    family(
        &mut o,
        "iolab_irq_next_look_seconds",
        "gauge",
        "Seconds until the daemon looks again (its adaptive interval).",
    );
    let _ = writeln!(o, "iolab_irq_next_look_seconds {}", number(f.interval_secs));
    family(
        &mut o,
        "iolab_irq_last_look_timestamp_seconds",
        "gauge",
        "When the last look ended, in Unix seconds.",
    );
    let _ = writeln!(
        o,
        "iolab_irq_last_look_timestamp_seconds {}",
        number(f.time_unix)
    );
    o
}

fn number(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "NaN".to_string()
    }
}

/// A label value as the text format wants it: backslash, quote and newline escaped.
fn label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Replaces `path` with `text` atomically (a temporary file beside it, then a rename). The
/// temporary file is new (`O_EXCL`, never followed through a link) under a name nobody can
/// guess ahead: node_exporter's textfile directory is often writable by its own user, who
/// could otherwise plant `NAME.tmp` as a link and have the daemon, as root, write through
/// it. Readable by all (0644), as the exporter needs.
pub(crate) fn write_textfile(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let name = path
        .file_name()
        .with_context(|| format!("{}: not a file name", path.display()))?;
    let mut last = None;
    for attempt in 0..8u32 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let tmp = path.with_file_name(format!(
            ".{}.{}-{nanos}-{attempt}.tmp",
            name.to_string_lossy(),
            std::process::id()
        ));
        let opened = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp);
        let mut file = match opened {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                last = Some(e);
                continue;
            }
            Err(e) => return Err(e).with_context(|| format!("cannot write {}", tmp.display())),
        };
        // Whatever the umask: the exporter runs as another user.
        let written = file
            .set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .and_then(|()| file.write_all(text.as_bytes()))
            .and_then(|()| std::fs::rename(&tmp, path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(e).with_context(|| format!("cannot replace {}", path.display()));
        }
        return Ok(());
    }
    Err(last.unwrap_or_else(|| std::io::ErrorKind::AlreadyExists.into()))
        .with_context(|| format!("cannot write beside {}", path.display()))
}

/// The latest exposition, shared with the HTTP thread.
pub(crate) type Published = Arc<Mutex<String>>;

/// Serves the latest figures on `addr` (`GET /metrics`, or `/`); returns the address bound
/// (port 0 picks a free one) and the slot to publish into. The thread lives as long as the
/// process.
///
/// Each connection is answered on a thread of its own, at most [`MAX_CLIENTS`] at once, and
/// gets [`REQUEST_TIME`] in all to send its request: one client that connects and sends
/// nothing, or a byte at a time, must not hold up the scrapes behind it (answered one after
/// another, a client trickling a byte a second held the endpoint for hours). Past the limit a
/// connection is closed unanswered, so idle connections cannot pile up threads either.
pub(crate) fn serve(addr: &str) -> anyhow::Result<(std::net::SocketAddr, Published)> {
    let addrs: Vec<_> = addr
        .to_socket_addrs()
        .with_context(|| format!("--listen {addr}: not an address (e.g. 127.0.0.1:9464)"))?
        .collect();
    let listener = TcpListener::bind(&addrs[..]).map_err(|e| {
        // A service's RestrictAddressFamilies= (the packaged unit allows AF_UNIX only) makes
        // socket() itself fail this way.
        let hint = if e.raw_os_error() == Some(libc::EAFNOSUPPORT) {
            "; under systemd, the unit's RestrictAddressFamilies= must allow AF_INET and AF_INET6"
        } else {
            ""
        };
        anyhow::anyhow!("cannot listen on {addr}: {e}{hint}")
    })?;
    let bound = listener.local_addr()?;
    let published: Published = Arc::new(Mutex::new(String::new()));
    let slot = published.clone();
    std::thread::Builder::new()
        .name("irq-metrics".into())
        .spawn(move || {
            let busy = Arc::new(AtomicUsize::new(0));
            for stream in listener.incoming().flatten() {
                // Given back when the client's thread ends, however it ends, or at once
                // when there is no room or no thread.
                let place = Place(busy.clone());
                if busy.fetch_add(1, Ordering::AcqRel) >= MAX_CLIENTS {
                    continue; // dropped: closed unanswered
                }
                let slot = slot.clone();
                let _ = std::thread::Builder::new()
                    .name("irq-metrics-client".into())
                    .spawn(move || {
                        let _place = place;
                        let _ = answer(stream, &slot);
                    });
            }
        })?;
    Ok((bound, published))
}

/// A connection's place among the [`MAX_CLIENTS`], taken before it is counted.
struct Place(Arc<AtomicUsize>);

impl Drop for Place {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Connections answered at once; more are closed unanswered.
const MAX_CLIENTS: usize = 16;
/// How long a client has to send its whole request, and each write of the answer.
const REQUEST_TIME: Duration = Duration::from_secs(2);

fn answer(mut stream: std::net::TcpStream, slot: &Published) -> std::io::Result<()> {
    stream.set_write_timeout(Some(REQUEST_TIME))?;
    let deadline = std::time::Instant::now() + REQUEST_TIME;
    let mut request = Vec::new();
    let mut buf = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 8192 {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        stream.set_read_timeout(Some(left))?;
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        request.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&request);
    let target = line.split_whitespace().nth(1).unwrap_or("");
    let (status, body) = if line.starts_with("GET ") && matches!(target, "/" | "/metrics") {
        let body = slot.lock().map(|s| s.clone()).unwrap_or_default();
        ("200 OK", body)
    } else {
        (
            "404 Not Found",
            "only GET /metrics is served here\n".to_string(),
        )
    };
    write!(
        stream,
        "HTTP/1.0 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Where the daemon's figures go after each look: the textfile, the HTTP endpoint, both or
/// neither, as the user named them.
pub(crate) struct Outlets {
    file: Option<std::path::PathBuf>,
    served: Option<Published>,
}

impl Outlets {
    /// Starts serving on `listen` if named (logged through `log` with the bound address).
    pub(crate) fn open(
        file: Option<std::path::PathBuf>,
        listen: Option<&str>,
        log: &mut dyn FnMut(super::daemon::Level, &str),
    ) -> anyhow::Result<Self> {
        // A path that cannot be written (no such directory, a directory) is said at the
        // start, as a bad --listen address is, not warned about at every look.
        if let Some(path) = &file {
            write_textfile(path, "# iolab irq daemon: its first look is under way\n")
                .with_context(|| format!("--metrics-file {}", path.display()))?;
        }
        let served = match listen {
            Some(addr) => {
                let (bound, slot) = serve(addr)?;
                log(
                    super::daemon::Level::Info,
                    &format!("serving metrics on http://{bound}/metrics"),
                );
                Some(slot)
            }
            None => None,
        };
        Ok(Outlets { file, served })
    }

    /// Publishes one look's figures; a textfile that cannot be written is warned about and
    /// the daemon goes on.
    pub(crate) fn publish(&self, f: &Figures) {
        let text = prometheus_text(f);
        if let Some(path) = &self.file {
            if let Err(e) = write_textfile(path, &text) {
                say!("iolab: warning: {e:#}");
            }
        }
        if let Some(slot) = &self.served {
            if let Ok(mut s) = slot.lock() {
                *s = text;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures() -> Figures {
        Figures {
            cpu: BTreeMap::from([(0, 3000.0), (1, 1000.0)]),
            irqs: vec![(29, "virtio0-input.0 \"x\"\\y".into(), 2500.0)],
            moves_total: 2,
            interval_secs: 4.0,
            time_unix: 1.5e9,
        }
    }

    #[test]
    fn the_text_format_has_every_family_with_help_type_and_escaped_labels() {
        let t = prometheus_text(&figures());
        for family in [
            "iolab_irq_cpu_interrupts_per_second",
            "iolab_irq_interrupts_per_second",
            "iolab_irq_imbalance_ratio",
            "iolab_irq_moves_total",
            "iolab_irq_next_look_seconds",
            "iolab_irq_last_look_timestamp_seconds",
        ] {
            assert!(t.contains(&format!("# HELP {family} ")), "{family}");
            assert!(t.contains(&format!("# TYPE {family} ")), "{family}");
        }
        assert!(t.contains("iolab_irq_cpu_interrupts_per_second{cpu=\"0\"} 3000\n"));
        assert!(
            t.contains(r#"{irq="29",name="virtio0-input.0 \"x\"\\y"} 2500"#),
            "{t}"
        );
        // The busiest CPU carries 3000/s against a mean of 2000/s.
        assert!(t.contains("iolab_irq_imbalance_ratio 1.5\n"), "{t}");
        assert!(t.contains("iolab_irq_moves_total 2\n"));
        assert!(t.ends_with('\n'));
    }

    #[test]
    fn the_server_answers_get_metrics_and_nothing_else() {
        let (addr, slot) = serve("127.0.0.1:0").unwrap();
        *slot.lock().unwrap() = prometheus_text(&figures());
        let get = |req: &str| {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            s.write_all(req.as_bytes()).unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).unwrap();
            out
        };
        let ok = get("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.0 200 OK"), "{ok}");
        assert!(ok.contains("iolab_irq_moves_total 2"), "{ok}");
        assert!(get("GET /etc/passwd HTTP/1.1\r\n\r\n").starts_with("HTTP/1.0 404"));
        assert!(get("POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.0 404"));
    }

    #[test]
    fn clients_that_send_nothing_or_trickle_hold_up_no_scrape() {
        let (addr, slot) = serve("127.0.0.1:0").unwrap();
        *slot.lock().unwrap() = prometheus_text(&figures());
        // Eight clients connect and never send (a server answering one client at a time gives
        // each its 2 s: 16 s in all); another sends a byte every 200 ms, which kept such a
        // server, with 2 s per read, busy for half an hour.
        let silent: Vec<_> = (0..8)
            .map(|_| std::net::TcpStream::connect(addr).unwrap())
            .collect();
        let mut trickler = std::net::TcpStream::connect(addr).unwrap();
        let trickling = std::thread::spawn(move || {
            let started = std::time::Instant::now();
            for b in b"GET /metrics HTTP/1.1\r\nX-Pad: "
                .iter()
                .chain([b'a'; 200].iter())
            {
                if trickler.write_all(&[*b]).is_err() {
                    return Some(started.elapsed());
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            None
        });
        std::thread::sleep(Duration::from_millis(300));
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert!(out.contains("iolab_irq_moves_total 2"), "{out}");
        // The trickler is cut off once its time is up (its writes fail soon after the close).
        let cut = trickling.join().unwrap();
        assert!(
            cut.is_some(),
            "a client trickling its request was never cut off"
        );
        drop(silent);
    }

    #[test]
    fn connections_past_the_limit_are_closed_unanswered() {
        let (addr, _slot) = serve("127.0.0.1:0").unwrap();
        let _held: Vec<_> = (0..MAX_CLIENTS)
            .map(|_| std::net::TcpStream::connect(addr).unwrap())
            .collect();
        let mut extra = std::net::TcpStream::connect(addr).unwrap();
        extra
            .set_read_timeout(Some(Duration::from_secs(1)))
            .unwrap();
        // Closed at once (end of stream), while the others still have their time to send.
        assert_eq!(extra.read(&mut [0u8; 16]).unwrap(), 0);
    }

    #[test]
    fn a_textfile_is_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("iolab.prom");
        write_textfile(&p, "a 1\n").unwrap();
        write_textfile(&p, &prometheus_text(&figures())).unwrap();
        assert!(std::fs::read_to_string(&p)
            .unwrap()
            .contains("iolab_irq_moves_total 2"));
        assert!(!dir.path().join("iolab.prom.tmp").exists());
        // Only the file itself is left, readable by the exporter's user.
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "{names:?}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&p).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o644);
    }

    /// A link planted where the old fixed temporary name was is never written through.
    #[test]
    fn a_planted_link_beside_the_textfile_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious\n").unwrap();
        let p = dir.path().join("iolab.prom");
        std::os::unix::fs::symlink(&victim, dir.path().join("iolab.prom.tmp")).unwrap();
        write_textfile(&p, "x 1\n").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "x 1\n");
    }
}
