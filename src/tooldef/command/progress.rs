//! Progress from a command: a line on its stderr of the form
//!
//! ```text
//! toolgate:progress <progress>[/<total>] [message]
//! ```
//!
//! e.g. `echo "toolgate:progress 3/10 copying files" >&2`, becomes a `notifications/progress`
//! for the caller (when it sent a progress token; values that do not increase are dropped, as
//! for any tool). Such lines are taken out of the stderr the result shows; a line that starts
//! with the prefix but does not parse stays in stderr as written.

use tokio::sync::mpsc;

use super::process::Capture;

/// What starts a progress line.
pub(super) const PREFIX: &str = "toolgate:progress ";

/// Longer lines are never progress lines: they go to the capture as they arrive, so a program
/// that writes no newline cannot make the filter hold its output.
const MAX_LINE: usize = 4096;

/// Progress updates queued for the caller; beyond this the newest are dropped (each is a
/// snapshot, and the next one supersedes it).
pub(super) const QUEUE: usize = 64;

/// One parsed progress line.
#[derive(Debug, PartialEq)]
pub(super) struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// Splits stderr into lines as it arrives: progress lines to `tx`, the rest to the capture.
pub(super) struct Filter {
    pending: Vec<u8>,
    tx: mpsc::Sender<Progress>,
}

impl Filter {
    pub fn new(tx: mpsc::Sender<Progress>) -> Self {
        Self { pending: Vec::new(), tx }
    }

    pub fn push(&mut self, mut chunk: &[u8], capture: &mut Capture) {
        while let Some(end) = chunk.iter().position(|&b| b == b'\n') {
            let (line, rest) = chunk.split_at(end + 1);
            chunk = rest;
            if self.pending.is_empty() {
                self.line(line, capture);
            } else {
                let mut whole = std::mem::take(&mut self.pending);
                whole.extend_from_slice(line);
                self.line(&whole, capture);
            }
        }
        if self.pending.len() + chunk.len() > MAX_LINE {
            capture.push(&std::mem::take(&mut self.pending));
            capture.push(chunk);
        } else {
            self.pending.extend_from_slice(chunk);
        }
    }

    /// The last line, if it had no newline.
    pub fn finish(mut self, capture: &mut Capture) {
        let last = std::mem::take(&mut self.pending);
        if !last.is_empty() {
            self.line(&last, capture);
        }
    }

    fn line(&mut self, line: &[u8], capture: &mut Capture) {
        match std::str::from_utf8(line).ok().and_then(parse) {
            // A full queue drops this update: the next one carries the news.
            Some(progress) => _ = self.tx.try_send(progress),
            None => capture.push(line),
        }
    }
}

/// Parses one line (with or without its newline); `None` when it is not a progress line.
pub(super) fn parse(line: &str) -> Option<Progress> {
    let rest = line.trim_end_matches(['\n', '\r']).strip_prefix(PREFIX)?;
    let (numbers, message) = rest.split_once(' ').map_or((rest, None), |(n, m)| (n, Some(m.trim())));
    let (progress, total) = match numbers.split_once('/') {
        Some((p, t)) => (p.parse::<f64>().ok()?, Some(t.parse::<f64>().ok()?)),
        None => (numbers.parse::<f64>().ok()?, None),
    };
    if !progress.is_finite() || total.is_some_and(|t| !t.is_finite()) {
        return None;
    }
    Some(Progress { progress, total, message: message.filter(|m| !m.is_empty()).map(str::to_owned) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_progress_line_has_a_value_an_optional_total_and_an_optional_message() {
        let p = parse("toolgate:progress 3/10 copying files\n").expect("progress");
        assert_eq!(p, Progress { progress: 3.0, total: Some(10.0), message: Some("copying files".into()) });
        assert_eq!(parse("toolgate:progress 0.5"), Some(Progress { progress: 0.5, total: None, message: None }));
    }

    #[test]
    fn lines_that_do_not_parse_are_not_progress() {
        for line in ["toolgate:progress", "toolgate:progress x/10", "toolgate:progress 1/y", "toolgate:progress NaN", "progress 1/2"] {
            assert_eq!(parse(line), None, "{line}");
        }
    }

    #[test]
    fn progress_lines_leave_stderr_and_the_rest_stays_in_order_across_chunks() {
        let (tx, mut rx) = mpsc::channel(QUEUE);
        let mut capture = Capture::new(1024);
        let mut filter = Filter::new(tx);
        filter.push(b"warming up\ntoolgate:prog", &mut capture);
        filter.push(b"ress 1/2 half\nstill here\nno newline", &mut capture);
        filter.finish(&mut capture);
        assert_eq!(rx.try_recv().expect("one update").message.as_deref(), Some("half"));
        assert_eq!(capture.head_text(), "warming up\nstill here\nno newline");
    }
}
