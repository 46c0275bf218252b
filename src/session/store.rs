//! The table of live legacy sessions: creation with signed random ids, lookup, termination,
//! and expiry of idle sessions. With several replicas (Postgres), sessions are also stored in
//! [`SharedSessions`] and a replica that meets a session it does not hold loads it from there
//! (see [`SessionStore::resolve`]); changes are announced on the cluster channel.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use dashmap::DashMap;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::id::IdSigner;
use super::shared::SharedSessions;
use super::{Links, Session, SessionKind, SessionSync};
use crate::cluster::{Cluster, ClusterEvent};
use crate::config::Secret;
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
    signer: IdSigner,
    /// Random per table: see [`Links::tag`](super::Links).
    tag: u32,
    /// With several replicas: the shared table and the channel to the others.
    sync: Option<SessionSync>,
}

/// The shared session store could not be read.
#[derive(Debug, thiserror::Error)]
#[error("the session store is unavailable")]
pub struct StoreUnavailable;

impl std::fmt::Debug for SessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionStore").field("sessions", &self.sessions.len()).finish()
    }
}

impl SessionStore {
    pub fn new(settings: SessionSettings, replay_events: usize) -> Self {
        let signer = IdSigner::new(settings.secret.as_ref().map(Secret::expose));
        // Never 0, so a tagged key is never mistaken for an untagged small number.
        let tag = rand::random::<u32>() | 1;
        Self { sessions: DashMap::new(), settings, replay_events, draining: CancellationToken::new(), signer, tag, sync: None }
    }

    /// Shares sessions with the other replicas through `shared`, announcing on `cluster`.
    pub fn shared_with(mut self, shared: SharedSessions, cluster: Arc<dyn Cluster>) -> Self {
        self.sync = Some(SessionSync { shared: Arc::new(shared), cluster });
        self
    }

    /// Whether sessions are shared with other replicas.
    pub fn is_shared(&self) -> bool {
        self.sync.is_some()
    }

    /// Sends `event` to the other replicas (nothing on a single node).
    pub fn publish(&self, event: ClusterEvent) {
        if let Some(sync) = &self.sync {
            sync.cluster.publish(event);
        }
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
        let id: Arc<str> = self.signer.mint().into();
        // The 2024-11-05 transport's sessions live on their SSE connection: never shared.
        let sync = self.sync.clone().filter(|_| kind == SessionKind::Streamable);
        let links = Links { replay_events: self.replay_events, tag: self.tag, draining: &self.draining, sync };
        let session = Arc::new(Session::new(id.clone(), kind, version, legacy_out, owner, links));
        self.sessions.insert(id, session.clone());
        Ok(session)
    }

    /// Stores a just-initialized session for the other replicas (a no-op on a single node).
    /// On failure the session is dropped here too: an id other replicas refuse is no session.
    pub async fn persist(&self, session: &Arc<Session>) -> Result<(), StoreUnavailable> {
        let Some(sync) = &self.sync else { return Ok(()) };
        match sync.shared.insert(session).await {
            Ok(()) => Ok(()),
            Err(e) => {
                tracing::error!(error = %e, "cannot store a new session; refusing initialize");
                self.remove(&session.id);
                Err(StoreUnavailable)
            }
        }
    }

    /// The session held here, if any (no shared-store lookup).
    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        self.sessions.get(id).map(|s| s.value().clone())
    }

    /// The session `id`: held here, or (with several replicas) loaded from the shared store
    /// when its signature is valid. `Ok(None)`: no such session (404).
    pub async fn resolve(&self, id: &str) -> Result<Option<Arc<Session>>, StoreUnavailable> {
        if let Some(session) = self.get(id) {
            return Ok(Some(session));
        }
        let Some(sync) = &self.sync else { return Ok(None) };
        // A forged or mistyped id costs a hash, not a query.
        if !self.signer.verify(id) {
            return Ok(None);
        }
        let stored = sync.shared.load(id).await.map_err(|e| {
            tracing::warn!(error = %e, "cannot read the shared session store");
            StoreUnavailable
        })?;
        let Some(stored) = stored.filter(|s| s.kind == SessionKind::Streamable) else { return Ok(None) };
        let id: Arc<str> = id.into();
        let links = Links { replay_events: self.replay_events, tag: self.tag, draining: &self.draining, sync: Some(sync.clone()) };
        let session = Session::new(id.clone(), stored.kind, stored.version, None, stored.owner.map(Into::into), links);
        session.bind_server(stored.server.as_deref());
        if stored.initialized {
            session.set_initialized(stored.version, stored.client);
        }
        session.apply_log_level(stored.log_level);
        // Two requests may load it at once: the first copy wins, both use it.
        let session = self.sessions.entry(id).or_insert_with(|| Arc::new(session)).value().clone();
        Ok(Some(session))
    }

    /// Marks `session` used: locally always, in the shared store at most once a minute.
    pub fn touch(&self, session: &Arc<Session>) {
        session.touch();
        if let Some(sync) = &self.sync
            && sync.shared.needs_touch(&session.id)
        {
            let (shared, id) = (sync.shared.clone(), session.id.clone());
            tokio::spawn(async move {
                if let Err(e) = shared.touch(&id).await {
                    tracing::debug!(error = %e, "cannot refresh a session's last use");
                }
            });
        }
    }

    /// Ends a session everywhere (DELETE): here, in the shared store, and on every replica
    /// holding a copy. Returns whether it existed.
    pub async fn end(&self, id: &str) -> bool {
        let here = self.remove(id);
        let Some(sync) = &self.sync else { return here };
        sync.cluster.publish(ClusterEvent::SessionEnded { session: id.to_owned() });
        match sync.shared.delete(id).await {
            Ok(stored) => here || stored,
            Err(e) => {
                tracing::warn!(error = %e, "cannot delete a session from the shared store; it expires there instead");
                here
            }
        }
    }

    /// Applies another replica's change to a session held here.
    pub fn apply(&self, event: &ClusterEvent) {
        match event {
            ClusterEvent::SessionEnded { session } => {
                self.remove(session);
            }
            ClusterEvent::SessionLogLevel { session, level } => {
                if let (Some(s), Some(level)) = (self.get(session), crate::tool::LogLevel::parse(level)) {
                    s.apply_log_level(level);
                }
            }
            _ => {}
        }
    }

    /// Deletes sessions idle everywhere from the shared store (any replica may run it) and
    /// tells every replica to drop them. Returns how many ended.
    pub async fn sweep_shared(&self) -> usize {
        let Some(sync) = &self.sync else { return 0 };
        let idle = Duration::from_secs(self.settings.idle_timeout_secs);
        match sync.shared.sweep(idle).await {
            Ok(ids) => {
                for id in &ids {
                    self.remove(id);
                    sync.cluster.publish(ClusterEvent::SessionEnded { session: id.clone() });
                }
                ids.len()
            }
            Err(e) => {
                tracing::debug!(error = %e, "cannot sweep idle shared sessions");
                0
            }
        }
    }

    /// Drops the copy held here (closing its streams); the shared session is untouched.
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
