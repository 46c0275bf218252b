//! One SSE stream of a session, resumable: every event gets an id `<stream>_<seq>`, the last
//! N events are kept, and a client that reconnects with `Last-Event-ID` gets exactly what it
//! missed on that stream and nothing from any other.
//!
//! The connection currently reading the stream is "live"; events are pushed to it without
//! waiting. If it cannot keep up its connection is dropped (the client resumes from the
//! replay buffer), so one slow client never holds up the code that produces events.

use std::collections::VecDeque;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::mpsc;

use crate::protocol::sse;

/// Why a `Last-Event-ID` cannot be honoured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResumeError {
    #[error("Last-Event-ID {0:?} was not issued by this server for this session")]
    Unknown(String),
    #[error("the events after Last-Event-ID {0:?} are no longer available; re-initialize the session")]
    Expired(String),
}

/// Splits `<stream>_<seq>` into its parts.
pub fn parse_event_id(id: &str) -> Option<(u64, u64)> {
    let (stream, seq) = id.split_once('_')?;
    Some((stream.parse().ok()?, seq.parse().ok()?))
}

struct Inner {
    next_seq: u64,
    replay: VecDeque<(u64, Bytes)>,
    live: Option<mpsc::Sender<Bytes>>,
    finished: bool,
}

/// A resumable event stream.
pub struct EventStream {
    key: u64,
    replay_cap: usize,
    buffer: usize,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream").field("key", &self.key).finish_non_exhaustive()
    }
}

impl EventStream {
    pub(crate) fn new(key: u64, replay_cap: usize, buffer: usize) -> Self {
        let inner = Inner { next_seq: 1, replay: VecDeque::new(), live: None, finished: false };
        Self { key, replay_cap, buffer: buffer.max(1), inner: Mutex::new(inner) }
    }

    pub fn key(&self) -> u64 {
        self.key
    }

    pub fn is_finished(&self) -> bool {
        self.inner.lock().finished
    }

    /// Whether a connection reads it now.
    pub fn is_live(&self) -> bool {
        self.inner.lock().live.as_ref().is_some_and(|tx| !tx.is_closed())
    }

    /// The id of the priming event (sequence 0): it carries no message, only a position.
    pub fn priming_id(&self) -> String {
        format!("{}_0", self.key)
    }

    /// The id of the newest event so far: a fresh connection's priming event carries it, so
    /// a later resume replays only what came after this point.
    pub fn position_id(&self) -> String {
        format!("{}_{}", self.key, self.inner.lock().next_seq - 1)
    }

    /// Appends a message. `last` ends the stream after it (the response to a POST).
    /// Returns whether a live connection took it.
    pub fn push(&self, json: &str, last: bool) -> bool {
        let mut inner = self.inner.lock();
        if inner.finished {
            return false;
        }
        let seq = inner.next_seq;
        inner.next_seq += 1;
        let id = format!("{}_{seq}", self.key);
        let frame = sse::message_event(Some(&id), json);
        if self.replay_cap > 0 {
            if inner.replay.len() == self.replay_cap {
                inner.replay.pop_front();
            }
            inner.replay.push_back((seq, frame.clone()));
        }
        let delivered = match &inner.live {
            Some(tx) => match tx.try_send(frame) {
                Ok(()) => true,
                Err(_) => {
                    // Full (slow reader) or gone: cut the connection; the client resumes.
                    inner.live = None;
                    false
                }
            },
            None => false,
        };
        if last {
            inner.finished = true;
            inner.live = None;
        }
        delivered
    }

    /// Attaches a new live connection, first replaying what came after `after`
    /// (`None`: a fresh connection that wants only new events). Replaces any previous
    /// live connection, so each event goes to exactly one connection (T-41).
    pub fn attach(&self, after: Option<(String, u64)>) -> Result<mpsc::Receiver<Bytes>, ResumeError> {
        let mut inner = self.inner.lock();
        let backlog: Vec<Bytes> = match &after {
            None => Vec::new(),
            Some((raw, seq)) => {
                if *seq >= inner.next_seq {
                    return Err(ResumeError::Unknown(raw.clone()));
                }
                let oldest = inner.replay.front().map_or(inner.next_seq, |(s, _)| *s);
                if seq + 1 < oldest {
                    return Err(ResumeError::Expired(raw.clone()));
                }
                inner.replay.iter().filter(|(s, _)| s > seq).map(|(_, f)| f.clone()).collect()
            }
        };
        let (tx, rx) = mpsc::channel(self.buffer.max(backlog.len() + 1));
        for frame in backlog {
            // Capacity was sized for the backlog, so this cannot fail.
            let _ = tx.try_send(frame);
        }
        if !inner.finished {
            inner.live = Some(tx);
        }
        Ok(rx)
    }

    /// Drops the live connection but keeps the stream: later events are buffered for a
    /// `Last-Event-ID` resume.
    pub fn detach(&self) {
        self.inner.lock().live = None;
    }

    /// Ends the stream: the live connection closes after what it already has.
    pub fn finish(&self) {
        let mut inner = self.inner.lock();
        inner.finished = true;
        inner.live = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(rx: &mut mpsc::Receiver<Bytes>) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(b) = rx.try_recv() {
            out.push(String::from_utf8_lossy(&b).into_owned());
        }
        out
    }

    #[test]
    fn resume_replays_only_what_was_missed() {
        let s = EventStream::new(3, 16, 8);
        let mut first = s.attach(None).expect("attach");
        s.push("{\"n\":1}", false);
        s.push("{\"n\":2}", false);
        assert_eq!(drain(&mut first).len(), 2);
        drop(first);
        s.push("{\"n\":3}", false);
        let mut again = s.attach(Some(("3_2".into(), 2))).expect("resume");
        let got = drain(&mut again);
        assert_eq!(got.len(), 1);
        assert!(got[0].contains("id: 3_3") && got[0].contains("{\"n\":3}"), "{got:?}");
    }

    #[test]
    fn future_ids_are_unknown_and_old_ones_expired() {
        let s = EventStream::new(1, 2, 8);
        for i in 0..5 {
            s.push(&format!("{{\"n\":{i}}}"), false);
        }
        assert!(matches!(s.attach(Some(("1_99".into(), 99))), Err(ResumeError::Unknown(_))));
        assert!(matches!(s.attach(Some(("1_1".into(), 1))), Err(ResumeError::Expired(_))));
        assert!(s.attach(Some(("1_3".into(), 3))).is_ok());
    }

    #[test]
    fn slow_reader_is_cut_off_not_waited_for() {
        let s = EventStream::new(1, 16, 1);
        let rx = s.attach(None).expect("attach");
        assert!(s.push("{}", false));
        assert!(!s.push("{}", false), "second push overflows the 1-slot buffer");
        drop(rx);
        assert!(!s.push("{}", false));
    }

    #[test]
    fn event_ids_parse() {
        assert_eq!(parse_event_id("12_7"), Some((12, 7)));
        assert_eq!(parse_event_id("x_7"), None);
        assert_eq!(parse_event_id("12"), None);
    }
}
