//! `TCP_NODELAY` on the Postgres connections, which sqlx 0.9.0 no longer sets
//! (transact-rs/sqlx#4335; the fix, #4336, is not released). Without it a statement over TLS
//! waits for the server's delayed ACK: measured with the default (`sync`) audit log on
//! Postgres over TLS, 3.7k tool calls/s with p99 48 ms; with it, 27.9k and p99 4.0 ms.
//!
//! sqlx gives no access to its sockets, so after each new connection this finds the process's
//! TCP sockets connected to the database's port and sets the option through a duplicate of
//! each descriptor: `pidfd_getfd` on this very process hands back a descriptor of our own (no
//! `unsafe`, no borrowing of one sqlx owns), and the option belongs to the socket both share.
//! Where the duplicate is refused (a seccomp profile without `pidfd_getfd`, Linux < 5.6) it
//! says so once and the connections work as before, only slower. Remove this module once sqlx
//! sets the option itself.

use std::sync::atomic::{AtomicBool, Ordering};

/// Duplicates of this process's TCP sockets connected to `port` (the database's, here): the
/// descriptors are ours to use and close, the sockets behind them shared with their owners.
#[cfg(target_os = "linux")]
pub fn sockets_connected_to(port: u16) -> std::io::Result<Vec<rustix::fd::OwnedFd>> {
    use rustix::process::{PidfdFlags, PidfdGetfdFlags, getpid, pidfd_getfd, pidfd_open};
    let me = pidfd_open(getpid(), PidfdFlags::empty())?;
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd")?.flatten() {
        let Some(fd) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else { continue };
        // Only sockets ("socket:[inode]"): files, pipes and the directory itself are skipped.
        let is_socket = std::fs::read_link(entry.path()).is_ok_and(|t| t.as_os_str().as_encoded_bytes().starts_with(b"socket:"));
        if !is_socket {
            continue;
        }
        // Gone since the listing (closed by another thread): nothing to do.
        let Ok(dup) = pidfd_getfd(&me, fd, PidfdGetfdFlags::empty()) else { continue };
        let peer = rustix::net::getpeername(&dup).ok().flatten().and_then(|a| std::net::SocketAddr::try_from(a).ok());
        if peer.is_some_and(|p| p.port() == port) {
            found.push(dup);
        }
    }
    Ok(found)
}

#[cfg(not(target_os = "linux"))]
pub fn sockets_connected_to(_port: u16) -> std::io::Result<Vec<rustix::fd::OwnedFd>> {
    Ok(Vec::new())
}

/// Sets `TCP_NODELAY` on every TCP socket of this process connected to `port`; the number set.
fn set_on_connections_to(port: u16) -> std::io::Result<usize> {
    let sockets = sockets_connected_to(port)?;
    Ok(sockets.iter().filter(|s| rustix::net::sockopt::set_tcp_nodelay(s, true).is_ok()).count())
}

/// [`set_on_connections_to`], logging a failure once per process.
pub(crate) fn after_connect(port: u16) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    match set_on_connections_to(port) {
        Ok(n) => tracing::debug!(port, sockets = n, "TCP_NODELAY set on the database connections"),
        Err(e) if !WARNED.swap(true, Ordering::Relaxed) => {
            tracing::warn!(error = %e, "cannot set TCP_NODELAY on the Postgres connections; statements may wait ~40 ms for delayed ACKs (allow the pidfd_open and pidfd_getfd system calls, or reach Postgres over its Unix socket)");
        }
        Err(_) => {}
    }
}
