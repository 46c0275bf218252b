//! The table of live legacy sessions: creation with cryptographically random ids, lookup,
//! termination, and expiry of idle sessions.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use dashmap::DashMap;
use rand::RngCore as _;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{Session, SessionKind};
use crate::config::SessionSettings;
use crate::protocol::ProtocolVersion;

/// The session table is at its configured limit.
#[derive(Debug, thiserror::Error)]
#[error("the server holds its maximum number of sessions")]
pub struct StoreFull;

/// All live sessions of this process.
pub struct SessionStore {
    sessions: DashMap<Arc<str>, Arc<Session>>,
    settings: SessionSettings,
    replay_events: usize,
    /// Cancelled at shutdown: every session's notification streams end (see [`Session`]).
    draining: CancellationToken,
}

impl std::fmt::Debug for SessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionStore").field("sessions", &self.sessions.len()).finish()
    }
}

impl SessionStore {
    pub fn new(settings: SessionSettings, replay_events: usize) -> Self {
        Self { sessions: DashMap::new(), settings, replay_events, draining: CancellationToken::new() }
    }

    /// Creates a session with a fresh id: 128 random bits from the OS CSPRNG, hex-encoded
    /// (visible ASCII, S-02/S-03).
    pub fn create(
        &self,
        kind: SessionKind,
        version: ProtocolVersion,
        legacy_out: Option<mpsc::Sender<Bytes>>,
        owner: Option<Arc<str>>,
    ) -> Result<Arc<Session>, StoreFull> {
        if self.sessions.len() >= self.settings.max_sessions {
            return Err(StoreFull);
        }
        let mut raw = [0u8; 16];
        // ThreadRng is a ChaCha CSPRNG seeded from the OS.
        rand::rng().fill_bytes(&mut raw);
        let id: Arc<str> = raw.iter().map(|b| format!("{b:02x}")).collect::<String>().into();
        let session = Arc::new(Session::new(id.clone(), kind, version, self.replay_events, legacy_out, owner, &self.draining));
        self.sessions.insert(id, session.clone());
        Ok(session)
    }

    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        self.sessions.get(id).map(|s| s.value().clone())
    }

    /// Ends a session; returns whether it existed.
    pub fn remove(&self, id: &str) -> bool {
        match self.sessions.remove(id) {
            Some((_, session)) => {
                session.close();
                true
            }
            None => false,
        }
    }

    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Every live session (for fan-out of server-wide changes).
    pub fn for_each(&self, mut f: impl FnMut(&Arc<Session>)) {
        for entry in &self.sessions {
            f(entry.value());
        }
    }

    /// Ends sessions idle for longer than the configured timeout; returns how many.
    pub fn expire_idle(&self) -> usize {
        let limit = Duration::from_secs(self.settings.idle_timeout_secs);
        let idle: Vec<Arc<str>> = self.sessions.iter().filter(|e| e.value().idle_for() > limit).map(|e| e.key().clone()).collect();
        idle.iter().filter(|id| self.remove(id)).count()
    }

    /// Shutdown begins: every session's notification streams end now (a GET stream with its
    /// `retry` hint), sessions opened from now on get theirs ended at once, and requests in
    /// flight go on. O(1): one token.
    pub fn end_notification_streams(&self) {
        self.draining.cancel();
    }

    /// Whether shutdown has begun.
    pub fn is_draining(&self) -> bool {
        self.draining.is_cancelled()
    }

    /// Ends every session: in-flight work is cancelled (the end of shutdown).
    pub fn close_all(&self) {
        let ids: Vec<Arc<str>> = self.sessions.iter().map(|e| e.key().clone()).collect();
        for id in ids {
            self.remove(&id);
        }
    }

    pub fn client_request_timeout(&self) -> Duration {
        Duration::from_secs(self.settings.client_request_timeout_secs)
    }
}
