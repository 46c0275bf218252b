//! An upstream started as a child process, speaking newline-delimited JSON-RPC on its stdin and
//! stdout. The `command` kind's rules apply: the program is resolved and checked against
//! `tools.command.allowed_programs`, there is no shell, the environment is empty but for the
//! allow-list, and the child leads its own process group, which is stopped whole (SIGTERM,
//! then SIGKILL) when the connection ends. Its stderr goes to the log at a bounded rate, its
//! last lines to the status ([`super::stderr`]).

use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, Command};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::error::UpstreamError;
use super::peer::Peer;
use super::stderr::Stderr;
use super::wire::Wire;
use crate::config::ToolSettings;
use crate::config::upstreams::{StdioSettings, UpstreamSettings};
use crate::tooldef::BuildCtx;
use crate::tooldef::command::{ProcessGroup, resolve_program};

/// Between SIGTERM and SIGKILL when the connection ends.
const KILL_GRACE: Duration = Duration::from_secs(2);
/// Longest stderr line logged (a longer one is noted, not logged).
const STDERR_LINE: usize = 4096;

pub struct StdioWire {
    lines: mpsc::Sender<Vec<u8>>,
    stop: CancellationToken,
}

impl StdioWire {
    pub(super) fn lines(&self) -> mpsc::Sender<Vec<u8>> {
        self.lines.clone()
    }

    pub(super) async fn write(lines: &mpsc::Sender<Vec<u8>>, message: &Value) -> Result<(), UpstreamError> {
        let mut line = serde_json::to_vec(message).map_err(|e| UpstreamError::Protocol(e.to_string()))?;
        line.push(b'\n');
        lines.send(line).await.map_err(|_| UpstreamError::Disconnected("the upstream process is not running".into()))
    }

    pub(super) fn stop(&self) {
        self.stop.cancel();
    }
}

/// Resolves the program as a `command` tool's would be, without starting it: a bad setting
/// is reported at start-up.
pub fn program(settings: &StdioSettings, tools: &ToolSettings, upstream: &str) -> Result<std::path::PathBuf, String> {
    let schema = serde_json::json!({"type": "object"});
    let cx = BuildCtx { tool: upstream, input_schema: &schema, idempotent: false, base_dir: Path::new("."), settings: tools };
    resolve_program(&settings.program, &cx)
}

/// Starts the child and returns a peer over its stdio.
pub fn spawn(name: &str, upstream: &UpstreamSettings, tools: &ToolSettings, sink: Arc<Stderr>) -> Result<Peer, UpstreamError> {
    let Some(settings) = &upstream.stdio else {
        return Err(UpstreamError::Transport("not a stdio upstream".into()));
    };
    let program = program(settings, tools, name).map_err(|e| UpstreamError::Transport(format!("stdio.program: {e}")))?;
    let mut command = Command::new(&program);
    command
        .args(&settings.args)
        .env_clear()
        .envs(environment(settings))
        .process_group(0)
        .kill_on_drop(true)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(dir) = &settings.working_dir {
        command.current_dir(dir);
    }
    let mut child = command.spawn().map_err(|e| UpstreamError::Transport(format!("cannot start {}: {e}", program.display())))?;
    let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take()) else {
        return Err(UpstreamError::Transport("the child's pipes are missing".into()));
    };
    let group = ProcessGroup::new(child, KILL_GRACE).map_err(|e| UpstreamError::Transport(e.to_string()))?;
    let (lines, queue) = mpsc::channel(64);
    let stop = CancellationToken::new();
    let peer = Peer::new(name, Wire::Stdio(StdioWire { lines, stop: stop.clone() }), super::inbound::budget(upstream));
    tokio::spawn(write_stdin(stdin, queue, stop.clone()));
    tokio::spawn(read_stdout(peer.clone(), stdout, upstream.max_message_bytes));
    tokio::spawn(log_stderr(sink, stderr));
    tokio::spawn(watch(peer.clone(), group, stop));
    Ok(peer)
}

/// The server's variables in `env_passthrough` (when set), then the fixed ones.
fn environment(settings: &StdioSettings) -> Vec<(OsString, OsString)> {
    let passed = settings.env_passthrough.iter().filter_map(|k| std::env::var_os(k).map(|v| (OsString::from(k), v)));
    passed.chain(settings.env.iter().map(|(k, v)| (k.into(), v.into()))).collect()
}

async fn write_stdin(mut stdin: ChildStdin, mut queue: mpsc::Receiver<Vec<u8>>, stop: CancellationToken) {
    loop {
        let line = tokio::select! {
            line = queue.recv() => line,
            () = stop.cancelled() => None,
        };
        let Some(line) = line else { break };
        if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
            break;
        }
    }
    // Closing stdin is how a stdio server is asked to exit.
    drop(stdin);
}

async fn read_stdout(peer: Peer, stdout: tokio::process::ChildStdout, max: usize) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        match read_line(&mut reader, max, &mut line).await {
            Ok(Line::End) => break,
            // Whichever request it answered fails, and nothing says which, so every waiting
            // one does; the connection itself goes on.
            Ok(Line::TooLong) => peer.fail_all(&UpstreamError::TooLarge(max)),
            Ok(Line::Complete) if line.iter().all(u8::is_ascii_whitespace) => {}
            Ok(Line::Complete) => {
                if peer.receive(&line, None).is_err() {
                    let shown: String = String::from_utf8_lossy(&line).chars().take(200).collect();
                    tracing::warn!(upstream = ?peer, line = %shown, "ignored a line that is not JSON-RPC on the upstream's stdout");
                }
            }
            Err(e) => {
                peer.close(format!("cannot read the upstream's output: {e}"));
                return;
            }
        }
    }
    peer.close("the upstream process closed its output");
}

async fn log_stderr(sink: Arc<Stderr>, stderr: tokio::process::ChildStderr) {
    // A flood followed by silence would otherwise leave its count unsaid.
    let reporter = tokio::spawn({
        let sink = sink.clone();
        async move {
            let mut every = tokio::time::interval(super::stderr::REPORT_EVERY);
            loop {
                every.tick().await;
                sink.report();
            }
        }
    });
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    // Read to the end whatever it is: a child blocked on a full stderr pipe would hang.
    while let Ok(read) = read_line(&mut reader, STDERR_LINE, &mut line).await {
        match read {
            Line::End => break,
            Line::TooLong => sink.too_long(STDERR_LINE),
            Line::Complete => sink.line(&line),
        }
    }
    reporter.abort();
    sink.report();
}

enum Line {
    Complete,
    /// A line longer than the cap: read and dropped.
    TooLong,
    End,
}

/// The next line into `line` (without its newline), keeping at most `max` bytes. Unlike
/// `tokio_util`'s `LinesCodec`, whose stream ends at the first over-long line, reading goes on
/// after one: an upstream's one oversized answer must not end its connection.
async fn read_line(reader: &mut (impl AsyncBufRead + Unpin), max: usize, line: &mut Vec<u8>) -> std::io::Result<Line> {
    line.clear();
    let mut too_long = false;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok(if too_long {
                Line::TooLong
            } else if line.is_empty() {
                Line::End
            } else {
                Line::Complete
            });
        }
        let newline = buf.iter().position(|&b| b == b'\n');
        let chunk = &buf[..newline.unwrap_or(buf.len())];
        if !too_long && line.len() + chunk.len() > max {
            too_long = true;
            line.clear();
        } else if !too_long {
            line.extend_from_slice(chunk);
        }
        let used = newline.map_or(buf.len(), |i| i + 1);
        reader.consume(used);
        if newline.is_some() {
            return Ok(if too_long { Line::TooLong } else { Line::Complete });
        }
    }
}

/// Ends the connection when the process exits, and stops the process when the connection ends.
async fn watch(peer: Peer, mut group: ProcessGroup, stop: CancellationToken) {
    tokio::select! {
        status = group.wait() => {
            let reason = match status {
                Ok(s) => format!("the upstream process exited ({s})"),
                Err(e) => format!("the upstream process could not be waited for: {e}"),
            };
            peer.close(reason);
        }
        () = stop.cancelled() => group.terminate().await,
    }
}
