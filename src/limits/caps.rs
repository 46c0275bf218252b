//! Per-client caps on what a client holds open: legacy sessions and long-lived streams of each
//! kind. Rate limits bound how fast a client asks; caps bound how much it keeps, so one client
//! cannot fill the session table or pin thousands of connections with streams that cost a file
//! descriptor and a buffer each. Counted per replica, keyed like the rate limits (the principal,
//! or the client address without authentication, so behind trusted proxies the forwarded one).
//!
//! A [`Permit`] is held for as long as the thing it admits: dropping it gives the slot back.

use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use dashmap::mapref::entry::Entry;

use super::{ClientKey, Reason, Rejection};

/// What a client holds open.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Held {
    /// A legacy session (Streamable HTTP or the 2024-11-05 transport).
    Session,
    /// A standalone `GET` stream on the MCP endpoint (or a resumed one).
    GetStream,
    /// A 2024-11-05 `GET /sse` connection.
    SseStream,
    /// A 2026-07-28 `subscriptions/listen` stream.
    ListenStream,
}

impl Held {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Session => "session",
            Self::GetStream => "get_stream",
            Self::SseStream => "sse_stream",
            Self::ListenStream => "listen_stream",
        }
    }

    /// The refusal's retry hint: sessions free up by DELETE or idle expiry, streams as soon as
    /// the client closes one.
    fn retry_after(self) -> Duration {
        match self {
            Self::Session => Duration::from_secs(5),
            _ => Duration::from_secs(1),
        }
    }
}

/// The caps and what each client holds now.
#[derive(Debug)]
pub struct Caps {
    held: DashMap<(Held, ClientKey), usize>,
    max_sessions: usize,
    max_streams: usize,
}

impl Caps {
    /// `max_sessions` sessions and `max_streams` streams of each kind per client.
    pub fn new(max_sessions: usize, max_streams: usize) -> Arc<Self> {
        Arc::new(Self { held: DashMap::new(), max_sessions, max_streams })
    }

    fn max(&self, held: Held) -> usize {
        match held {
            Held::Session => self.max_sessions,
            _ => self.max_streams,
        }
    }

    /// One more `held` for `client`, or the refusal when the client holds its cap already.
    pub fn acquire(self: &Arc<Self>, held: Held, client: ClientKey) -> Result<Permit, Rejection> {
        let max = self.max(held);
        let mut count = self.held.entry((held, client)).or_insert(0);
        if *count >= max {
            return Err(Rejection::new(held.retry_after(), Reason::Held(held)));
        }
        *count += 1;
        Ok(Permit { caps: self.clone(), key: (held, client) })
    }

    /// How many `held` the client holds now.
    pub fn holding(&self, held: Held, client: ClientKey) -> usize {
        self.held.get(&(held, client)).map_or(0, |c| *c)
    }

    /// Clients holding anything (the table's size: one entry per client and kind).
    pub fn tracked(&self) -> usize {
        self.held.len()
    }
}

/// One slot under a cap, given back on drop.
#[derive(Debug)]
pub struct Permit {
    caps: Arc<Caps>,
    key: (Held, ClientKey),
}

impl Drop for Permit {
    fn drop(&mut self) {
        // The entry goes with its last permit, so the table holds only clients holding something.
        if let Entry::Occupied(mut count) = self.caps.held.entry(self.key) {
            *count.get_mut() = count.get().saturating_sub(1);
            if *count.get() == 0 {
                count.remove();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(n: u8) -> ClientKey {
        ClientKey::from_ip(std::net::IpAddr::from([10, 0, 0, n]))
    }

    #[test]
    fn a_client_at_its_cap_is_refused_with_the_cap_as_the_reason() {
        let caps = Caps::new(2, 5);
        let _a = caps.acquire(Held::Session, client(1)).expect("first");
        let _b = caps.acquire(Held::Session, client(1)).expect("second");
        let refused = caps.acquire(Held::Session, client(1)).expect_err("third");
        assert_eq!(refused.reason, Reason::Held(Held::Session));
    }

    #[test]
    fn dropping_a_permit_frees_its_slot() {
        let caps = Caps::new(1, 1);
        let permit = caps.acquire(Held::GetStream, client(1)).expect("first");
        assert!(caps.acquire(Held::GetStream, client(1)).is_err());
        drop(permit);
        assert!(caps.acquire(Held::GetStream, client(1)).is_ok());
    }

    #[test]
    fn clients_and_kinds_are_counted_apart() {
        let caps = Caps::new(1, 1);
        let _a = caps.acquire(Held::ListenStream, client(1)).expect("one client");
        assert!(caps.acquire(Held::ListenStream, client(2)).is_ok(), "another client");
        assert!(caps.acquire(Held::SseStream, client(1)).is_ok(), "another kind");
    }

    #[test]
    fn the_table_forgets_a_client_that_holds_nothing() {
        let caps = Caps::new(3, 3);
        let permit = caps.acquire(Held::Session, client(1)).expect("permit");
        assert_eq!(caps.tracked(), 1);
        drop(permit);
        assert_eq!((caps.tracked(), caps.holding(Held::Session, client(1))), (0, 0));
    }
}
