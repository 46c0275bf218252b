//! What a stdio upstream writes on its stderr: the last lines kept for the admin API's status
//! (escaped and capped, as everything from outside), and the log fed at a bounded rate. A child
//! that writes 20,000 lines in three seconds gets the first [`LOG_BURST`] logged, then
//! [`LOG_PER_SECOND`] a second, and one line saying how many were not logged; the count is in
//! the status too.

use std::collections::VecDeque;
use std::num::NonZeroU32;

use governor::clock::DefaultClock;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use parking_lot::Mutex;
use serde::Serialize;

use crate::untrusted::text::{self, escaped};

/// Lines kept for the status.
pub const TAIL_LINES: usize = 20;
/// Longest line kept for the status (bytes of the original); the log caps its own fields.
const TAIL_LINE_MAX: usize = 1024;
/// Lines logged at once before the rate applies.
pub const LOG_BURST: u32 = 100;
/// Lines logged per second after the burst.
pub const LOG_PER_SECOND: u32 = 10;
/// How soon lines not logged are reported when no later line is.
pub const REPORT_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// One upstream's stderr, shared by every connection it makes (a restarted child's lines join
/// the same tail).
pub struct Stderr {
    name: String,
    logged: RateLimiter<NotKeyed, InMemoryState, DefaultClock>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    tail: VecDeque<String>,
    /// Lines not logged since the last one that was.
    unlogged: u64,
    /// Lines not logged, ever.
    dropped: u64,
}

/// The status's view of stderr.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct StderrStatus {
    /// The last lines, oldest first, escaped.
    pub tail: Vec<String>,
    /// Lines not written to the log (over its rate).
    pub lines_not_logged: u64,
}

impl Stderr {
    pub fn new(name: &str) -> Self {
        let quota = Quota::per_second(nonzero(LOG_PER_SECOND)).allow_burst(nonzero(LOG_BURST));
        Self { name: name.to_owned(), logged: RateLimiter::direct(quota), state: Mutex::default() }
    }

    /// One line the child wrote (without its newline, possibly not UTF-8).
    pub fn line(&self, line: &[u8]) {
        let line = String::from_utf8_lossy(line);
        let unlogged = {
            let mut state = self.state.lock();
            if state.tail.len() == TAIL_LINES {
                state.tail.pop_front();
            }
            state.tail.push_back(escaped(&line, TAIL_LINE_MAX).to_string());
            if self.logged.check().is_err() {
                state.unlogged += 1;
                state.dropped += 1;
                return;
            }
            std::mem::take(&mut state.unlogged)
        };
        self.report_unlogged(unlogged);
        let (shown, _) = text::clip(&line, TAIL_LINE_MAX * 4);
        tracing::info!(upstream = %self.name, "stderr: {shown}");
    }

    /// A line longer than the reader keeps.
    pub fn too_long(&self, max: usize) {
        self.line(format!("(a line longer than {max} bytes, not kept)").as_bytes());
    }

    /// Says how many lines the log did not get since it last said (called every
    /// [`REPORT_EVERY`] while the child runs, and when its stderr ends).
    pub fn report(&self) {
        let unlogged = std::mem::take(&mut self.state.lock().unlogged);
        self.report_unlogged(unlogged);
    }

    pub fn status(&self) -> StderrStatus {
        let state = self.state.lock();
        StderrStatus { tail: state.tail.iter().cloned().collect(), lines_not_logged: state.dropped }
    }

    fn report_unlogged(&self, unlogged: u64) {
        if unlogged > 0 {
            tracing::warn!(
                upstream = %self.name,
                lines = unlogged,
                "stderr: {unlogged} lines were not logged (more than {LOG_PER_SECOND} a second after a burst of {LOG_BURST}); the last {TAIL_LINES} are in the admin API's upstream status"
            );
        }
    }
}

impl std::fmt::Debug for Stderr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stderr").field("upstream", &self.name).finish_non_exhaustive()
    }
}

fn nonzero(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_is_logged_up_to_the_burst_and_counted_beyond() {
        let stderr = Stderr::new("noisy");
        let started = std::time::Instant::now();
        for i in 0..5_000 {
            stderr.line(format!("line {i}").as_bytes());
        }
        let status = stderr.status();
        // The burst, and the few more the rate refilled while the loop ran (however slow).
        let refilled = u64::from(LOG_PER_SECOND) * (started.elapsed().as_secs() + 1);
        let not_logged = 5_000 - u64::from(LOG_BURST);
        assert!((not_logged.saturating_sub(refilled)..=not_logged).contains(&status.lines_not_logged), "{status:?}");
        assert_eq!(status.tail.len(), TAIL_LINES);
        assert_eq!(status.tail.last().map(String::as_str), Some("line 4999"));
    }

    #[test]
    fn the_tail_keeps_lines_escaped() {
        let stderr = Stderr::new("hostile");
        stderr.line(b"ok\x1b[2J\rforged");
        assert_eq!(stderr.status().tail, vec!["ok\\u{1b}[2J\\rforged".to_owned()]);
    }
}
