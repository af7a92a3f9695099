//! Whose socket listens on a TCP port: the kernel's table of this network namespace's sockets
//! (`/proc/net/tcp` and `tcp6`) names each listening socket's inode, and a process's
//! descriptors (`/proc/PID/fd`) name the inodes of the sockets it holds.
//!
//! A fio server an agent starts is judged ready when its port accepts connections. A port
//! that something took between the agent's check that it was free and fio's own attempt to
//! bind it would pass that test while fio, unable to bind, exits: the run would then hand its
//! jobs to a server nobody confined. So the listener must be the server's own socket.

use std::path::Path;

/// TCP's LISTEN state as `/proc/net/tcp` writes it.
const LISTEN: &str = "0A";

/// The inodes of the sockets listening on `port` in `table` (the text of `/proc/net/tcp` or
/// `/proc/net/tcp6`: a header line, then one line per socket).
fn listening_inodes(table: &str, port: u16) -> Vec<u64> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let local_port = f.get(1)?.rsplit_once(':')?.1;
            let listens = *f.get(3)? == LISTEN;
            let on_port = u16::from_str_radix(local_port, 16).ok()? == port;
            (listens && on_port).then(|| f.get(9)?.parse().ok())?
        })
        .collect()
}

/// The inodes of the sockets process `pid` holds open.
fn socket_inodes_of(proc_root: &Path, pid: u32) -> std::io::Result<Vec<u64>> {
    let mut inodes = Vec::new();
    for entry in std::fs::read_dir(proc_root.join(pid.to_string()).join("fd"))? {
        let Ok(target) = std::fs::read_link(entry?.path()) else {
            continue; // closed since the listing
        };
        let target = target.to_string_lossy();
        if let Some(n) = target
            .strip_prefix("socket:[")
            .and_then(|t| t.strip_suffix(']'))
            .and_then(|n| n.parse().ok())
        {
            inodes.push(n);
        }
    }
    Ok(inodes)
}

/// True when a socket listening on `port` in this network namespace is held by process `pid`.
pub(crate) fn held_by(pid: u32, port: u16) -> std::io::Result<bool> {
    held_by_in(Path::new("/proc"), pid, port)
}

fn held_by_in(proc_root: &Path, pid: u32, port: u16) -> std::io::Result<bool> {
    let mut listeners = Vec::new();
    for table in ["net/tcp", "net/tcp6"] {
        match std::fs::read_to_string(proc_root.join(table)) {
            Ok(text) => listeners.extend(listening_inodes(&text, port)),
            // No IPv6 in this kernel.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    let held = socket_inodes_of(proc_root, pid)?;
    Ok(listeners.iter().any(|l| held.contains(l)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listening_sockets_are_found_by_port_and_state() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:223D 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4711 1 0000000015ec66b7 100 0 0 10 0
   1: 0100007F:223D 0100007F:C95C 01 00000000:00000000 03:00000448 00000000     0        0 4712 3 00000000ebb6c5c9
   2: 0100007F:223E 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4713 1 0000000015ec66b7 100 0 0 10 0
";
        // 0x223D = 8765: the listener, not the connection to it; 8766's is another port's.
        assert_eq!(listening_inodes(table, 8765), [4711]);
        assert_eq!(listening_inodes(table, 8766), [4713]);
        assert!(listening_inodes(table, 22).is_empty());
    }

    /// This process's listener is its own, and not another process's.
    #[test]
    fn a_listener_is_held_by_the_process_that_opened_it() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(held_by(std::process::id(), port).unwrap());
        let mut other = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let held = held_by(other.id(), port);
        let _ = other.kill();
        let _ = other.wait();
        assert!(!held.unwrap());
        drop(listener);
        assert!(!held_by(std::process::id(), port).unwrap());
    }
}
