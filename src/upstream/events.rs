//! The server-sent events of an upstream's HTTP response, each event bounded in size: the
//! framing is `eventsource-stream`'s, the bound is ours (that parser buffers an event until it
//! ends, so an endless one would grow without limit).

use futures_util::{Stream, StreamExt, TryStreamExt};

use super::error::UpstreamError;

/// Bytes an event may carry besides its data (field names, an id, line breaks).
const FRAMING: usize = 64 * 1024;

/// The events of `response`; a stream ends with `Err(TooLarge)` at the first event longer than
/// `max` bytes (or with the transport's error).
pub(super) fn events(response: reqwest::Response, max: usize) -> impl Stream<Item = Result<eventsource_stream::Event, UpstreamError>> {
    use eventsource_stream::Eventsource;
    let mut bound = Bound { since_blank_line: 0, after_newline: false, max: max.saturating_add(FRAMING) };
    let bytes =
        response.bytes_stream().map_err(|e| UpstreamError::Transport(format!("reading the event stream: {e}"))).and_then(move |chunk| {
            let within = bound.feed(&chunk);
            std::future::ready(if within { Ok(chunk) } else { Err(UpstreamError::TooLarge(max)) })
        });
    // Errors pass through the parser as its own error type; keep ours beside it.
    let failure = std::sync::Arc::new(parking_lot::Mutex::new(None));
    let seen = failure.clone();
    let bytes = bytes.map(move |r| {
        r.map_err(|e| {
            *seen.lock() = Some(e);
            std::io::Error::other("stream failed")
        })
    });
    bytes
        .eventsource()
        .map(move |event| event.map_err(|_| failure.lock().take().unwrap_or(UpstreamError::Protocol("a malformed event stream".into()))))
}

/// Counts the bytes since the last blank line (an event's end).
struct Bound {
    since_blank_line: usize,
    after_newline: bool,
    max: usize,
}

impl Bound {
    fn feed(&mut self, chunk: &[u8]) -> bool {
        for &b in chunk {
            match b {
                b'\n' if self.after_newline => self.since_blank_line = 0,
                b'\n' => self.after_newline = true,
                b'\r' => {}
                _ => {
                    self.after_newline = false;
                    self.since_blank_line += 1;
                }
            }
        }
        self.since_blank_line <= self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_counts_one_event_at_a_time() {
        let mut bound = Bound { since_blank_line: 0, after_newline: false, max: 10 };
        assert!(bound.feed(b"data: 1234\n\n"));
        assert!(bound.feed(b"data: 5678\r\n\r\n"), "CRLF line ends are blank lines too");
        assert!(!bound.feed(b"data: 12345678901"), "one event over the bound");
    }

    #[test]
    fn an_event_split_across_chunks_is_counted_whole() {
        let mut bound = Bound { since_blank_line: 0, after_newline: false, max: 10 };
        assert!(bound.feed(b"data: 12"));
        assert!(!bound.feed(b"3456789\n"), "no blank line in between: still one event");
    }
}
