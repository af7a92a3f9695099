//! fio's client obeys its servers: a server may ask it for any file (`SENDFILE`) and send it a
//! log to write under any name (`IOLOG`), and fio's protocol has no authentication. A hostile
//! server, speaking just enough of fio's protocol to make both requests, shows plain
//! `fio --client` handing over a secret and writing a file where the server chose (so the
//! server is heard), and the client `iolab run` starts doing neither.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::{iolab, root_or_skip, skip};

const QUIT: u16 = 1;
const IOLOG: u16 = 17;
const SENDFILE: u16 = 21;
/// The protocol version of fio 3.33 (Debian 12's), whose `IOLOG` layout the server knows.
const IOLOG_LAYOUT_VERSION: u16 = 97;
/// fio's `STORE_COMPRESSED`: the client writes the log's bytes as they came.
const STORE_AS_SENT: u32 = 2;
const NAME_MAX: usize = 256;

/// fio's CRC-16 (polynomial 0x8005, reflected, initial value 0).
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc = 0u16;
    for &b in bytes {
        crc ^= u16::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xa001
            } else {
                crc >> 1
            };
        }
    }
    crc
}

/// One command: a 24-byte little-endian header (version, opcode, flags, tag, length, the
/// header's CRC over its first 20 bytes, the payload's CRC), then the payload.
fn send(s: &mut TcpStream, version: u16, opcode: u16, pdu: &[u8]) {
    let mut head = Vec::with_capacity(24);
    head.extend(version.to_le_bytes());
    head.extend(opcode.to_le_bytes());
    head.extend(0u32.to_le_bytes());
    head.extend(0u64.to_le_bytes());
    head.extend(u32::try_from(pdu.len()).unwrap().to_le_bytes());
    let crc = crc16(&head);
    head.extend(crc.to_le_bytes());
    head.extend(crc16(pdu).to_le_bytes());
    s.write_all(&head).unwrap();
    s.write_all(pdu).unwrap();
}

/// The next command from the client: (version, opcode, payload).
fn receive(s: &mut TcpStream) -> Option<(u16, u16, Vec<u8>)> {
    let mut head = [0u8; 24];
    s.read_exact(&mut head).ok()?;
    let version = u16::from_le_bytes([head[0], head[1]]);
    let opcode = u16::from_le_bytes([head[2], head[3]]);
    let len = u32::from_le_bytes(head[16..20].try_into().unwrap()) as usize;
    let mut pdu = vec![0u8; len];
    s.read_exact(&mut pdu).ok()?;
    Some((version, opcode, pdu))
}

fn padded_name(name: &str) -> Vec<u8> {
    let mut bytes = name.as_bytes().to_vec();
    assert!(bytes.len() < NAME_MAX);
    bytes.resize(NAME_MAX, 0);
    bytes
}

/// What the client answered to the request for the secret.
#[derive(Debug, Clone, PartialEq)]
enum Answer {
    Sent(Vec<u8>),
    Refused(u32),
}

/// A fio "server" that, once a client has said hello, asks it for `secret` and sends it a log
/// named `plant` (fio's client appends `.HOST`).
struct HostileServer {
    port: u16,
    answers: Arc<Mutex<Vec<Answer>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HostileServer {
    fn start(secret: &Path, plant: &Path) -> HostileServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let answers = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (secret, plant) = (secret.display().to_string(), plant.display().to_string());
        let thread = {
            let (answers, stop) = (answers.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            if let Some(a) = Self::serve(stream, &secret, &plant) {
                                answers.lock().unwrap().push(a);
                            }
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(20)),
                    }
                }
            })
        };
        HostileServer {
            port,
            answers,
            stop,
            thread: Some(thread),
        }
    }

    fn serve(mut s: TcpStream, secret: &str, plant: &str) -> Option<Answer> {
        s.set_nonblocking(false).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        // The client's probe gives the protocol version it insists on.
        let (version, _, _) = receive(&mut s)?;
        send(&mut s, version, SENDFILE, &padded_name(secret));
        let answer = loop {
            let (_, opcode, pdu) = receive(&mut s)?;
            if opcode == SENDFILE {
                let size = u32::from_le_bytes(pdu[0..4].try_into().unwrap()) as usize;
                let error = u32::from_le_bytes(pdu[4..8].try_into().unwrap());
                break if error == 0 {
                    Answer::Sent(pdu[8..8 + size].to_vec())
                } else {
                    Answer::Refused(error)
                };
            }
        };
        if version == IOLOG_LAYOUT_VERSION {
            // No samples; thread, log type, compression, offsets, priorities, coarseness.
            let mut pdu = 0u64.to_le_bytes().to_vec();
            for field in [0, 0, STORE_AS_SENT, 0, 0, 0u32] {
                pdu.extend(field.to_le_bytes());
            }
            pdu.extend(padded_name(plant));
            pdu.extend(b"planted by a fio server\n");
            send(&mut s, version, IOLOG, &pdu);
        }
        send(&mut s, version, QUIT, &[]);
        // The client acts on both before it sees the connection close.
        std::thread::sleep(Duration::from_millis(300));
        Some(answer)
    }

    fn address(&self) -> String {
        format!("127.0.0.1,{}", self.port)
    }

    fn answers(&self) -> Vec<Answer> {
        self.answers.lock().unwrap().clone()
    }

    /// Whether the server knows where this fio's client writes a log.
    fn plants_logs() -> bool {
        fio_version().as_deref() == Some("fio-3.33")
    }
}

impl Drop for HostileServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn fio_version() -> Option<String> {
    let out = Command::new("fio").arg("--version").output().ok()?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A secret only its owner may read, and where a log planted as `plant` would land.
fn secret_and_plant(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let secret = dir.join("secret");
    std::fs::write(&secret, "the secret\n").unwrap();
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let plant = dir.join("planted");
    let landed = dir.join("planted.127.0.0.1");
    (secret, plant, landed)
}

fn wait_for_answer(server: &HostileServer) -> Answer {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(a) = server.answers().first() {
            return a.clone();
        }
        assert!(Instant::now() < deadline, "the client never answered");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_fio_server_reads_and_writes_files_through_a_plain_fio_client() {
    if fio_version().is_none() {
        skip("fio not on PATH");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (secret, plant, landed) = secret_and_plant(dir.path());
    let server = HostileServer::start(&secret, &plant);
    let job = dir.path().join("job.fio");
    std::fs::write(&job, "[j]\nioengine=null\nsize=1m\n").unwrap();
    let _ = Command::new("fio")
        .arg(format!("--client={}", server.address()))
        .arg(&job)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        wait_for_answer(&server),
        Answer::Sent(b"the secret\n".to_vec())
    );
    if HostileServer::plants_logs() {
        assert_eq!(
            std::fs::read_to_string(&landed).unwrap(),
            "planted by a fio server\n"
        );
    }
}

#[test]
fn iolabs_fio_client_gives_a_server_no_file_and_writes_none_for_it() {
    if !root_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (secret, plant, landed) = secret_and_plant(dir.path());
    let server = HostileServer::start(&secret, &plant);
    let state = dir.path().join("state");
    let dev = iolab::target::ScratchDevice::create_in(&state, 16 << 20).unwrap();
    let file = dir.path().join("e.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"hostile\"\n[target]\ndevice = \"{}\"\nhosts = [\"{}\"]\n\
             [workload]\nrw = \"read\"\nbs = \"4k\"\nruntime = \"1s\"\ntime_based = true\n",
            dev.name(),
            server.address()
        ),
    )
    .unwrap();
    let out = iolab()
        .args(["run", "--db"])
        .arg(dir.path().join("r.db"))
        .arg(&file)
        .env("IOLAB_STATE_DIR", &state)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Permission denied: the file is outside what the client may read.
    assert_eq!(wait_for_answer(&server), Answer::Refused(13), "{stderr}");
    assert!(!landed.exists(), "the server planted {}", landed.display());
}
