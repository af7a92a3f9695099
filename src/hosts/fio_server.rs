//! The fio server an agent starts for its session (`Request::FioServe`). fio's server protocol
//! has no authentication: whoever reaches the port runs any job, and a server a user leaves
//! running as root is a root shell for the network. One started here exists only while its
//! session does (it is killed when the session ends, however it ends) and is confined: it may
//! read the system's files and the session's device, write that device only when the
//! experiment writes, never start a program (`workload::exec_once`), and it keeps only the
//! capabilities fio's jobs use (`workload::confine`). A job from anyone else who reaches the
//! port during the session can do no more than that.

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::experiment::file::fio_address_problem;
use crate::workload::confine::{self, Confinement};
use crate::workload::exec_once::ExecOnce;

/// How long a server may take to listen. fio does in well under a second on a host; in an
/// emulated guest on a loaded machine it once took more than 10 s (CI run 21), and waiting
/// costs nothing when it comes sooner.
const READY_WITHIN: Duration = Duration::from_secs(30);
/// How much of the server's output is kept for messages (its last bytes).
const OUTPUT_KEPT: usize = 16 * 1024;

/// A running server; dropping it stops the server and every process it started.
pub(crate) struct Served {
    keeper: Keeper,
    pub(crate) listen: String,
    pub(crate) device: String,
    pub(crate) writes: bool,
    output: Arc<Mutex<Vec<u8>>>,
}

impl Served {
    pub(crate) fn pid(&self) -> u32 {
        self.keeper.pid
    }

    fn output(&self) -> String {
        let bytes = self.output.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes).trim().to_string()
    }

    /// Stops the server (as dropping it does) and says how it ended.
    #[cfg(test)]
    fn stop(mut self) -> Option<ExitStatus> {
        self.keeper.stop();
        self.keeper.exited()
    }
}

/// The thread that started the server and stops it. fio's job processes leave its process
/// group (`setsid`), so a group cannot be killed as one: the server is started as the first
/// process of a PID namespace of its own, whose end the kernel makes the end of every process
/// in it. Its parent-death signal fires when the thread that forked it ends, so that thread
/// lives as long as the server.
struct Keeper {
    pid: u32,
    stop: Option<mpsc::Sender<()>>,
    exited: Arc<Mutex<Option<ExitStatus>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Keeper {
    /// Spawns `cmd` in a new PID namespace, from a thread that waits to be told to stop it.
    fn spawn(mut cmd: Command) -> Result<Keeper, String> {
        let (started_tx, started_rx) = mpsc::channel();
        let (stop, stop_rx) = mpsc::channel::<()>();
        let exited = Arc::new(Mutex::new(None));
        let exited_here = exited.clone();
        let thread = std::thread::spawn(move || {
            // SAFETY: changes only where this thread's children are born.
            if unsafe { libc::unshare(libc::CLONE_NEWPID) } != 0 {
                let e = std::io::Error::last_os_error();
                let _ = started_tx.send(Err(format!("cannot make a PID namespace: {e}")));
                return;
            }
            let spawned = cmd.spawn();
            // The pipe's writing end is the child's now: the output ends when the server does.
            drop(cmd);
            let mut child = match spawned {
                Ok(c) => c,
                Err(e) => {
                    let _ = started_tx.send(Err(e.to_string()));
                    return;
                }
            };
            let _ = started_tx.send(Ok(child.id()));
            let record = |child: &mut Child| match child.try_wait() {
                Ok(Some(status)) => {
                    *exited_here.lock().unwrap_or_else(|e| e.into_inner()) = Some(status);
                    true
                }
                _ => false,
            };
            // Until told to stop (or the Served is gone), noting an early exit.
            while let Err(mpsc::RecvTimeoutError::Timeout) =
                stop_rx.recv_timeout(Duration::from_millis(20))
            {
                if record(&mut child) {
                    return;
                }
            }
            // The first process of a PID namespace takes only the signals it handles, and
            // SIGKILL; its end kills the rest of the namespace, and its wait returns once they
            // are all gone. fio 3.33's server handles SIGINT (it ends within 0.2 s), not
            // SIGTERM, which it leaves to a default action the kernel does not take here: the
            // server lived on to the SIGKILL below, 3 s later. SIGINT goes again every half
            // second: its handler only ends a wait for a connection, and one that comes
            // outside that wait is lost.
            let pid = child.id() as i32;
            // SAFETY: signals to the child this thread started.
            let interrupt = || unsafe { libc::kill(pid, libc::SIGINT) };
            let started = Instant::now();
            let mut sent = 0;
            while !record(&mut child) && started.elapsed() < Duration::from_secs(3) {
                if started.elapsed() >= Duration::from_millis(500) * sent {
                    interrupt();
                    sent += 1;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            if exited_here
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_none()
            {
                let _ = child.kill();
                if let Ok(status) = child.wait() {
                    *exited_here.lock().unwrap_or_else(|e| e.into_inner()) = Some(status);
                }
            }
        });
        match started_rx.recv() {
            Ok(Ok(pid)) => Ok(Keeper {
                pid,
                stop: Some(stop),
                exited,
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err("the thread starting the fio server failed".to_string()),
        }
    }

    fn exited(&self) -> Option<ExitStatus> {
        *self.exited.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Keeper {
    /// Tells the thread to stop the server, and waits until it has.
    fn stop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Starts `fio --server` on `listen` ("10.0.0.1", "10.0.0.1,8765", "ip:..", "ip6:..") for jobs
/// on `/dev/DEVICE`, confined, and returns once it accepts connections.
pub(crate) fn start(listen: &str, device: &str, writes: bool) -> Result<Served, String> {
    if let Some(problem) = fio_address_problem(listen) {
        return Err(problem);
    }
    // One already there would answer the readiness check below while this one failed to
    // bind: the run would go to a server nobody confined.
    if let Some(a) = listening(&socket_addresses(listen)?) {
        return Err(format!(
            "something already listens on {a} (a fio server of your own?): with `serve` the \
             agent starts its own there; stop that one, or drop `serve` to use it"
        ));
    }
    let device_path = device_path(device)?;
    let fio =
        confine::resolve(Path::new("fio")).ok_or("no fio on this host's PATH (install fio)")?;
    let confinement =
        Confinement::fio_server(&fio, &device_path, writes).map_err(|e| format!("{e:#}"))?;
    let server_arg = format!("--server={}", server_spec(listen));
    let once = ExecOnce::new(
        &fio,
        &[std::ffi::OsStr::new(&server_arg)],
        [("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")],
    )
    .map_err(|e| format!("{e:#}"))?;
    let (reader, writer) = std::io::pipe().map_err(|e| format!("cannot make a pipe: {e}"))?;
    let mut cmd = Command::new(&fio);
    cmd.stdin(Stdio::null())
        .stdout(
            writer
                .try_clone()
                .map_err(|e| format!("cannot make a pipe: {e}"))?,
        )
        .stderr(writer);
    confinement
        .apply_to(&mut cmd)
        .map_err(|e| format!("{e:#}"))?;
    // SAFETY: prctl only. An agent killed outright takes its server with it.
    unsafe {
        cmd.pre_exec(
            || match libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            },
        );
    }
    once.apply_to(&mut cmd);
    let keeper = Keeper::spawn(cmd)
        .map_err(|e| format!("cannot start {} {server_arg}: {e}", fio.display()))?;
    let output = Arc::new(Mutex::new(Vec::new()));
    crate::workload::process::keep_tail(reader, output.clone(), OUTPUT_KEPT);
    let served = Served {
        keeper,
        listen: listen.to_string(),
        device: device.to_string(),
        writes,
        output,
    };
    wait_until_listening(&served)?;
    Ok(served)
}

/// `/dev/DEVICE`, when DEVICE is a kernel name and that is a block device.
fn device_path(device: &str) -> Result<PathBuf, String> {
    if device.is_empty() || device.contains('/') || device.starts_with('.') {
        return Err(format!(
            "`{device}` is not a device's kernel name (`sdb`, `nvme0n1`)"
        ));
    }
    let path = Path::new("/dev").join(device);
    match std::fs::metadata(&path) {
        Ok(m) if m.file_type().is_block_device() => Ok(path),
        Ok(_) => Err(format!("{} is not a block device", path.display())),
        Err(e) => Err(format!("no block device {}: {e}", path.display())),
    }
}

/// The address as fio's `--server` takes it, with the prefix of its family (`ip4:` and no
/// prefix are `ip:`).
fn server_spec(listen: &str) -> String {
    use crate::experiment::file::{fio_family, IpFamily};
    match fio_family(listen) {
        (IpFamily::V6, bare) => format!("ip6:{bare}"),
        (IpFamily::V4, bare) => format!("ip:{bare}"),
    }
}

/// Where a client reaches the server: its host and port (fio's default when none is given).
/// Only of the family fio resolves it in (IPv4 unless `ip6:`).
pub(crate) fn socket_addresses(listen: &str) -> Result<Vec<SocketAddr>, String> {
    use crate::experiment::file::{fio_family, IpFamily};
    let (host, port) = crate::experiment::file::fio_endpoint(listen)?;
    let family = fio_family(listen).0;
    (host, port)
        .to_socket_addrs()
        .map(|all| {
            all.filter(|a| match family {
                IpFamily::V4 => a.is_ipv4(),
                IpFamily::V6 => a.is_ipv6(),
            })
            .collect()
        })
        .map_err(|e| format!("cannot resolve `{host}`: {e}"))
}

/// The first of `addresses` that accepts a connection.
fn listening(addresses: &[SocketAddr]) -> Option<SocketAddr> {
    let timeout = Duration::from_millis(200);
    addresses
        .iter()
        .find(|a| TcpStream::connect_timeout(a, timeout).is_ok())
        .copied()
}

/// Returns once the server accepts a connection; fails, with what it said, when it exits or
/// does not listen within `READY_WITHIN`.
fn wait_until_listening(served: &Served) -> Result<(), String> {
    let addresses = socket_addresses(&served.listen)?;
    let deadline = Instant::now() + READY_WITHIN;
    loop {
        if let Some(status) = served.keeper.exited() {
            // Its last words may still be in the pipe.
            std::thread::sleep(Duration::from_millis(50));
            return Err(format!(
                "fio --server={} exited ({status}): {}",
                server_spec(&served.listen),
                served.output()
            ));
        }
        // Only the server's own socket will do (`listener`): a port taken by another program
        // after it was checked free must not pass for the server.
        let mut other = None;
        if let Some(addr) = listening(&addresses) {
            match super::listener::held_by(served.keeper.pid, addr.port()) {
                Ok(true) => return Ok(()),
                Ok(false) => other = Some(addr),
                // fio ended since it was asked (its descriptors went with it): the check at
                // the top of the loop gives its own words.
                Err(_) if served.keeper.exited().is_some() => continue,
                Err(e) => return Err(format!("cannot tell who listens on {addr}: {e}")),
            }
        }
        if Instant::now() >= deadline {
            let why = match other {
                Some(addr) => format!("another program listens on {addr}"),
                None => match served.output() {
                    said if said.trim().is_empty() => "it said nothing".to_string(),
                    said => said,
                },
            };
            return Err(format!(
                "fio --server={} did not listen within {} s: {why}",
                server_spec(&served.listen),
                READY_WITHIN.as_secs(),
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::confine::tests::landlock_or_skip;
    use std::io::Read;

    /// `ip4:` was taken for no prefix and given `ip:` in front (`ip:ip4:...`).
    #[test]
    fn the_server_is_told_its_address_with_the_prefix_of_its_family() {
        assert_eq!(server_spec("10.0.0.1,8765"), "ip:10.0.0.1,8765");
        assert_eq!(server_spec("ip4:10.0.0.1,8765"), "ip:10.0.0.1,8765");
        assert_eq!(server_spec("ip:lab1"), "ip:lab1");
        assert_eq!(server_spec("ip6:::1,8765"), "ip6:::1,8765");
    }

    fn free_port() -> u16 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    }

    /// Runs `job` through plain `fio --client` against the server on `port`.
    fn client(port: u16, job: &str, dir: &Path) -> String {
        let file = dir.join("job.fio");
        std::fs::write(&file, job).unwrap();
        let out = Command::new("fio")
            .arg(format!("--client=ip:127.0.0.1,{port}"))
            .arg(&file)
            .current_dir(dir)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr)
    }

    fn first_64k(path: &Path) -> Vec<u8> {
        let mut bytes = vec![0u8; 64 << 10];
        std::fs::File::open(path)
            .unwrap()
            .read_exact(&mut bytes)
            .unwrap();
        bytes
    }

    /// Jobs from someone else who reached the port: one writes the device, one a file, one
    /// runs a program before its I/O, and two start a program through the ELF loader: one
    /// to write a file, one to call `port` back (writing nothing: Landlock alone would not
    /// stop it, only a fio that can start no program does).
    fn hostile(device: &Path, dir: &Path, port: u16) -> String {
        let loader = crate::workload::exec_once::tests::elf_loader();
        let d = dir.display();
        format!(
            "[device]\nfilename={}\nrw=write\nbs=4k\nsize=64k\ndirect=1\n\
             [file]\nfilename={d}/planted\nrw=write\nbs=4k\nsize=4k\n\
             [prerun]\nfilename={d}/planted-too\nrw=write\nsize=4k\n\
             exec_prerun=touch {d}/ran-prerun\n\
             [loader]\nioengine=exec\nstd_redirect=0\nprogram={loader}\n\
             arguments=/usr/bin/touch {d}/ran-loader\nruntime=1\ntime_based=1\n\
             [callback]\nioengine=exec\nstd_redirect=0\nprogram={loader}\n\
             arguments=/bin/bash -c echo>/dev/tcp/127.0.0.1/{port}\nruntime=1\ntime_based=1\n",
            device.display()
        )
    }

    /// A port to be called back on, and whether anyone called by now.
    fn callback() -> (u16, impl Fn() -> bool) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        (l.local_addr().unwrap().port(), move || l.accept().is_ok())
    }

    /// How many processes run with `arg` on their command line (fio's forks keep the server's).
    fn processes_with(arg: &str) -> usize {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
            .filter(|c| c.split(|b| *b == 0).any(|a| a == arg.as_bytes()))
            .count()
    }

    const PLANTED: [&str; 4] = ["planted", "planted-too", "ran-prerun", "ran-loader"];

    /// The server runs a reader's job on its device, and a job from anyone else who reaches
    /// the port can write nothing and start nothing; stopped, its processes are gone. Plain
    /// `fio --server` runs the same hostile jobs in full (the control).
    #[test]
    fn a_served_fio_reads_its_device_and_can_change_nothing() {
        if !landlock_or_skip(true) {
            return;
        }
        let state = tempfile::tempdir().unwrap();
        let dev = crate::target::ScratchDevice::create_in(state.path(), 8 << 20).unwrap();
        let device = Path::new("/dev").join(dev.name());
        let before = first_64k(&device);
        let port = free_port();
        let served = start(&format!("127.0.0.1,{port}"), dev.name(), false).unwrap();
        let pid = served.pid();

        let work = tempfile::tempdir().unwrap();
        let read = format!(
            "[read]\nfilename={}\nrw=read\nbs=4k\nsize=64k\ndirect=1\n",
            device.display()
        );
        let said = client(port, &read, work.path());
        assert!(said.contains("READ: bw="), "{said}");
        assert!(said.contains("err= 0"), "{said}");

        let (back, called) = callback();
        let said = client(port, &hostile(&device, work.path(), back), work.path());
        for name in PLANTED {
            assert!(!work.path().join(name).exists(), "{name} exists: {said}");
        }
        assert!(!called(), "a program called back: {said}");
        assert_eq!(first_64k(&device), before, "{said}");

        // A job still running when the session ends goes too, though fio's job processes
        // leave the server's process group.
        let long = format!("{read}time_based=1\nruntime=60\n");
        let job = work.path().join("long.fio");
        std::fs::write(&job, long).unwrap();
        let mut running = Command::new("fio")
            .arg(format!("--client=ip:127.0.0.1,{port}"))
            .arg(&job)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let server_arg = format!("--server=ip:127.0.0.1,{port}");
        let deadline = Instant::now() + Duration::from_secs(10);
        while processes_with(&server_arg) < 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(processes_with(&server_arg) >= 2, "the job never started");
        drop(served);
        assert_eq!(processes_with(&server_arg), 0);
        // SAFETY: signal 0 only asks whether the process exists.
        assert_eq!(unsafe { libc::kill(pid as i32, 0) }, -1);
        assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
        let _ = running.kill();
        let _ = running.wait();

        // The control: unconfined, the same jobs do it all.
        let port = free_port();
        let mut plain = Command::new("fio")
            .arg(format!("--server=ip:127.0.0.1,{port}"))
            .current_dir(work.path())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + READY_WITHIN;
        while TcpStream::connect(("127.0.0.1", port)).is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let (back, called) = callback();
        let said = client(port, &hostile(&device, work.path(), back), work.path());
        plain.kill().unwrap();
        plain.wait().unwrap();
        for name in PLANTED {
            assert!(work.path().join(name).exists(), "{name} missing: {said}");
        }
        assert!(called(), "{said}");
        assert_ne!(first_64k(&device), before, "{said}");
    }

    /// An idle server ends on the signal it is sent, not killed by the fallback 3 s later:
    /// until it has ended, its agent holds the host's locks against the next run.
    #[test]
    fn a_stopped_server_ends_by_itself() {
        if !landlock_or_skip(true) {
            return;
        }
        use std::os::unix::process::ExitStatusExt;
        let state = tempfile::tempdir().unwrap();
        let dev = crate::target::ScratchDevice::create_in(state.path(), 8 << 20).unwrap();
        let served = start(&format!("127.0.0.1,{}", free_port()), dev.name(), false).unwrap();
        let status = served.stop().expect("the server ended");
        assert_eq!(status.signal(), None, "{status:?}");
    }

    #[test]
    fn a_server_on_every_interface_or_off_a_block_device_or_a_taken_port_is_refused() {
        let e = start("0.0.0.0,8765", "loop0", false).err().unwrap();
        assert!(e.contains("never on all interfaces"), "{e}");
        for (device, why) in [
            ("../sda", "not a device's kernel name"),
            ("null", "not a block device"),
            ("no-such-disk", "no block device"),
        ] {
            let e = start(&format!("127.0.0.1,{}", free_port()), device, false)
                .err()
                .unwrap();
            assert!(e.contains(why), "{device}: {e}");
        }
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let e = start(&format!("127.0.0.1,{port}"), "no-such-disk", false)
            .err()
            .unwrap();
        assert!(
            e.contains(&format!("something already listens on 127.0.0.1:{port}")),
            "{e}"
        );
    }
}
