//! Running one command: spawn it in its own process group, feed stdin, capture stdout and
//! stderr concurrently within a byte cap, and make sure nothing of it outlives the call.
//!
//! The execution layer enforces a tool's timeout by dropping the call's future, so cleanup
//! lives in [`ProcessGroup`]'s `Drop`: the whole group gets SIGTERM, then SIGKILL after the
//! grace period, and the leader is reaped. Cancellation through the call's token does the same
//! while the call waits. A process that leaves the group (`setsid`) escapes this; running
//! commands in a cgroup is the way to contain such programs.

use std::ffi::OsString;
use std::io;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process_group};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::progress::{Filter, Progress};

/// Bytes kept from the end of a stream beyond its cap (for the stderr tail of a failure).
pub(super) const TAIL_BYTES: usize = 2048;

/// How long output may still be read after the program exited and its group was killed: only
/// a process that left the group can hold the pipes open longer.
const DRAIN: Duration = Duration::from_secs(1);

/// What to run.
pub(super) struct Launch<'a> {
    pub program: &'a Path,
    pub args: Vec<String>,
    pub env: Vec<(OsString, OsString)>,
    pub working_dir: &'a Path,
    pub stdin: Option<Vec<u8>>,
    pub max_output_bytes: usize,
    pub kill_grace: Duration,
    /// Where the progress lines of stderr go ([`super::progress`]).
    pub progress: mpsc::Sender<Progress>,
}

/// A command that ran to its end.
#[derive(Debug)]
pub(super) struct Finished {
    pub status: ExitStatus,
    pub stdout: Capture,
    pub stderr: Capture,
    pub elapsed: Duration,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum RunError {
    #[error("could not start the program: {0}")]
    Spawn(#[source] io::Error),
    #[error("could not wait for the program: {0}")]
    Wait(#[source] io::Error),
    #[error("cancelled")]
    Cancelled,
}

/// Runs `launch` to its end, or until `cancel` fires (then the group is terminated first).
pub(super) async fn run(launch: Launch<'_>, cancel: &CancellationToken) -> Result<Finished, RunError> {
    let mut command = Command::new(launch.program);
    command
        .args(&launch.args)
        .env_clear()
        .envs(launch.env)
        .current_dir(launch.working_dir)
        .process_group(0)
        .kill_on_drop(true)
        .stdin(if launch.stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = command.spawn().map_err(RunError::Spawn)?;
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let mut group = ProcessGroup::new(child, launch.kill_grace)?;
    let mut out = Capture::new(launch.max_output_bytes);
    let mut err = Capture::new(launch.max_output_bytes);

    let ended = {
        let io = async {
            let mut progress = Filter::new(launch.progress);
            tokio::join!(
                read_into(stdout, |chunk| out.push(chunk)),
                read_into(stderr, |chunk| progress.push(chunk, &mut err)),
                feed(stdin, launch.stdin)
            );
            progress.finish(&mut err);
        };
        let work = async {
            tokio::pin!(io);
            let mut io_done = false;
            let status = loop {
                tokio::select! {
                    () = &mut io, if !io_done => io_done = true,
                    status = group.wait() => break status,
                }
            };
            if !io_done {
                let _ = tokio::time::timeout(DRAIN, &mut io).await;
            }
            status
        };
        tokio::select! {
            status = work => Some(status),
            () = cancel.cancelled() => None,
        }
    };
    let Some(status) = ended else {
        group.terminate().await;
        return Err(RunError::Cancelled);
    };
    Ok(Finished { status: status.map_err(RunError::Wait)?, stdout: out, stderr: err, elapsed: started.elapsed() })
}

async fn read_into(reader: Option<impl AsyncRead + Unpin>, mut take: impl FnMut(&[u8])) {
    let Some(mut reader) = reader else { return };
    let mut buf = vec![0; 16 * 1024];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) => return,
            Ok(n) => take(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                tracing::debug!(error = %e, "reading command output failed");
                return;
            }
        }
    }
}

/// Writes stdin and closes it. A program that exits without reading it is not an error.
async fn feed(stdin: Option<ChildStdin>, data: Option<Vec<u8>>) {
    let (Some(mut stdin), Some(data)) = (stdin, data) else { return };
    if let Err(e) = stdin.write_all(&data).await {
        tracing::debug!(error = %e, "writing command stdin stopped");
    }
}

// ===== impl Capture =====

/// One output stream: its first `cap` bytes, the last [`TAIL_BYTES`] beyond them, and its
/// total length. Memory stays bounded however much the program writes.
#[derive(Debug)]
pub(super) struct Capture {
    head: Vec<u8>,
    tail: Vec<u8>,
    total: u64,
    cap: usize,
}

impl Capture {
    pub(super) fn new(cap: usize) -> Self {
        Self { head: Vec::new(), tail: Vec::new(), total: 0, cap }
    }

    pub(super) fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = self.cap.saturating_sub(self.head.len()).min(bytes.len());
        self.head.extend_from_slice(&bytes[..room]);
        bytes = &bytes[room..];
        if bytes.len() >= TAIL_BYTES {
            self.tail.clear();
            self.tail.extend_from_slice(&bytes[bytes.len() - TAIL_BYTES..]);
        } else if !bytes.is_empty() {
            self.tail.extend_from_slice(bytes);
            if self.tail.len() > 2 * TAIL_BYTES {
                self.tail.drain(..self.tail.len() - TAIL_BYTES);
            }
        }
    }

    /// Whether bytes were dropped (the stream was longer than the cap).
    pub(super) fn truncated(&self) -> bool {
        self.total > self.head.len() as u64
    }

    /// Bytes kept from the start of the stream.
    pub(super) fn kept(&self) -> usize {
        self.head.len()
    }

    pub(super) fn total(&self) -> u64 {
        self.total
    }

    pub(super) fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The kept head as text (invalid UTF-8 replaced; a character cut by the cap left out).
    pub(super) fn head_text(&self) -> String {
        let end = if self.truncated() { complete_prefix(&self.head) } else { self.head.len() };
        String::from_utf8_lossy(&self.head[..end]).into_owned()
    }

    /// The last `n` bytes of the stream as text, and whether that is less than all of it.
    pub(super) fn last_text(&self, n: usize) -> (String, bool) {
        let skipped = self.total - self.head.len() as u64 - self.tail.len() as u64;
        let mut bytes = self.tail[self.tail.len().saturating_sub(n)..].to_vec();
        if bytes.len() < n && skipped == 0 {
            let from_head = (n - bytes.len()).min(self.head.len());
            bytes.splice(0..0, self.head[self.head.len() - from_head..].iter().copied());
        }
        let partial = (bytes.len() as u64) < self.total;
        let start = if partial { bytes.iter().take(3).take_while(|b| **b & 0xC0 == 0x80).count() } else { 0 };
        (String::from_utf8_lossy(&bytes[start..]).into_owned(), partial)
    }
}

/// The length of `bytes` without a multi-byte character cut off at its end.
fn complete_prefix(bytes: &[u8]) -> usize {
    match std::str::from_utf8(bytes) {
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        _ => bytes.len(),
    }
}

// ===== impl ProcessGroup =====

/// The child leads its own process group; until the leader is reaped, dropping this stops the
/// whole group (SIGTERM, SIGKILL after `grace`) and reaps the leader.
pub(crate) struct ProcessGroup {
    child: Option<Child>,
    pgid: Pid,
    grace: Duration,
}

impl ProcessGroup {
    pub(crate) fn new(mut child: Child, grace: Duration) -> Result<Self, RunError> {
        let pgid = child.id().and_then(|id| i32::try_from(id).ok()).and_then(Pid::from_raw);
        match pgid {
            Some(pgid) => Ok(Self { child: Some(child), pgid, grace }),
            None => {
                // Cannot happen before the first wait; still, never leave a child unreaped.
                let _ = child.start_kill();
                Err(RunError::Spawn(io::Error::other("the child has no process id")))
            }
        }
    }

    fn signal(&self, signal: Signal) {
        // ESRCH: every member already exited.
        let _ = kill_process_group(self.pgid, signal);
    }

    /// Waits for the leader, then kills what it left behind in its group, so no stray process
    /// outlives the call or keeps the output pipes open. Cancel-safe.
    pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
        let Some(child) = self.child.as_mut() else { return Err(io::Error::other("the command was already reaped")) };
        let status = child.wait().await;
        // The leader's pid is free for reuse once reaped; signal its group in the same poll,
        // while any member left keeps the group id taken.
        self.signal(Signal::KILL);
        self.child = None;
        status
    }

    /// Stops the group now (the call was cancelled) and reaps the leader.
    pub(crate) async fn terminate(mut self) {
        let grace = std::mem::replace(&mut self.grace, Duration::ZERO);
        self.stop(grace).await;
    }

    /// SIGTERM to the group, SIGKILL once the leader has exited or `grace` has passed, then
    /// reap. `self.grace` is zero here: if this future is dropped half-way (or never polled),
    /// `Drop` kills the group at once instead of starting over.
    async fn stop(mut self, grace: Duration) {
        if self.child.is_none() {
            return;
        }
        if !grace.is_zero() {
            self.signal(Signal::TERM);
            if let Some(child) = self.child.as_mut() {
                let _ = tokio::time::timeout(grace, child.wait()).await;
            }
        }
        self.signal(Signal::KILL);
        if let Some(child) = self.child.as_mut() {
            let _ = child.wait().await;
        }
        self.child = None;
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        let Some(child) = self.child.take() else { return };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) if !self.grace.is_zero() => {
                let rest = Self { child: Some(child), pgid: self.pgid, grace: Duration::ZERO };
                handle.spawn(rest.stop(self.grace));
            }
            _ => {
                self.signal(Signal::KILL);
                // Tokio reaps a dropped child in the background once it has exited.
                drop(child);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_keeps_head_tail_and_total() {
        let mut c = Capture::new(4);
        c.push(b"ab");
        assert!(!c.truncated());
        assert_eq!(c.last_text(10), ("ab".to_owned(), false));
        c.push(b"cdefgh");
        assert!(c.truncated());
        assert_eq!((c.head_text().as_str(), c.total()), ("abcd", 8));
        assert_eq!(c.last_text(2), ("gh".to_owned(), true));
        // Head and tail are contiguous here, so the tail reaches into the head.
        assert_eq!(c.last_text(6), ("cdefgh".to_owned(), true));
    }

    #[test]
    fn capture_memory_stays_bounded() {
        let mut c = Capture::new(10);
        for _ in 0..10_000 {
            c.push(&[b'x'; 1000]);
        }
        c.push(b"END");
        assert_eq!(c.total(), 10_000_003);
        assert!(c.head.len() == 10 && c.tail.len() <= 2 * TAIL_BYTES);
        let (last, partial) = c.last_text(5);
        assert_eq!((last.as_str(), partial), ("xxEND", true));
    }

    #[test]
    fn cut_characters_are_left_out_not_mangled() {
        let mut c = Capture::new(4);
        c.push("aé€".as_bytes()); // 1 + 2 + 3 bytes: the cap cuts the euro sign
        assert_eq!(c.head_text(), "aé");
        let (last, _) = c.last_text(2); // starts inside the euro sign
        assert_eq!(last, "");
        let mut c = Capture::new(16);
        c.push(b"ok \xff bytes");
        assert_eq!(c.head_text(), "ok \u{fffd} bytes");
    }
}
