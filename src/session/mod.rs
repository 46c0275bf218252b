//! Legacy-era (2025-11-25 and older) sessions: identity, negotiated version, client
//! capabilities, log level, in-flight requests, pending server-to-client requests, resource
//! subscriptions and the session's event streams. The modern era has no sessions.

mod id;
pub mod shared;
mod store;
mod stream;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

pub use id::IdSigner;
pub use store::{SessionStore, StoreFull};
pub use stream::{EventStream, ResumeError, parse_event_id};

use crate::protocol::ProtocolVersion;
use crate::protocol::jsonrpc::{RequestId, RpcError};
use crate::tool::{ClientCaps, LogLevel};

/// Streams kept per session for resumption after their connection dropped.
const RETAINED_STREAMS: usize = 8;

/// Which transport created the session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionKind {
    /// Streamable HTTP (2025-03-26 and later), one endpoint.
    Streamable,
    /// Deprecated HTTP+SSE (2024-11-05): one SSE connection carries every server message.
    LegacySse,
}

/// What the client told us at `initialize`.
#[derive(Clone, Debug, Default)]
pub struct ClientInfo {
    pub caps: ClientCaps,
    pub name: String,
    pub version: String,
}

#[derive(Default)]
struct Streams {
    next_key: u64,
    get: Option<Arc<EventStream>>,
    /// POST response streams, newest last, kept for resumption.
    posts: Vec<Arc<EventStream>>,
}

/// One legacy session.
pub struct Session {
    pub id: Arc<str>,
    pub kind: SessionKind,
    version: AtomicU8,
    client: RwLock<ClientInfo>,
    initialized: AtomicBool,
    /// Threshold for `notifications/message`, shared with running tools.
    pub log_level: Arc<AtomicU8>,
    /// When the session was created (seconds since the epoch).
    created: u64,
    last_seen: AtomicU64,
    next_outgoing: AtomicU64,
    pending: Mutex<HashMap<RequestId, oneshot::Sender<Result<Value, RpcError>>>>,
    in_flight: Mutex<HashMap<RequestId, CancellationToken>>,
    streams: Mutex<Streams>,
    subscriptions: Mutex<HashSet<Arc<str>>>,
    /// Cancelled when the session ends: stops its streams and its in-flight work.
    pub closed: CancellationToken,
    /// Ends the streams that only carry notifications (the GET stream, the 2024-11-05 SSE
    /// connection): cancelled when the session ends or when the server starts shutting down,
    /// while requests in flight keep their own streams through the grace period.
    pub notifications_closed: CancellationToken,
    /// The 2024-11-05 transport's single outgoing channel.
    legacy_out: Option<mpsc::Sender<Bytes>>,
    replay_events: usize,
    /// The principal (issuer + subject) that created the session; only it may use it.
    owner: Option<Arc<str>>,
    /// The virtual server it was created on (unset: the default endpoint); it is used there only.
    server: std::sync::OnceLock<Arc<str>>,
    /// With several replicas: where changes to shared state (the log level) are written and
    /// announced.
    sync: Option<SessionSync>,
    /// See [`Links::tag`].
    tag: u32,
    /// The session's slot under its client's cap (`sessions.max_per_client`), given back when
    /// the session ends.
    permit: Mutex<Option<crate::limits::Permit>>,
}

/// A session's link to the other replicas (see [`shared`]).
#[derive(Clone)]
pub(crate) struct SessionSync {
    pub shared: Arc<shared::SharedSessions>,
    pub cluster: Arc<dyn crate::cluster::Cluster>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("id", &self.id).field("version", &self.version()).finish_non_exhaustive()
    }
}

/// What the session table gives every session it makes.
pub(crate) struct Links<'a> {
    pub replay_events: usize,
    /// The session table's random tag (see [`SessionStore`]): the high half of this replica's
    /// stream keys and part of its server-to-client request ids, so neither collides with
    /// another replica's for the same shared session. Without it, stream 3 of a session could
    /// exist on two replicas, and a `Last-Event-ID` meant for a dead replica's stream would
    /// replay another stream's events on a survivor (another call's answer, taken by the
    /// client as its own).
    pub tag: u32,
    /// Cancelled at shutdown: the session's notification streams end.
    pub draining: &'a CancellationToken,
    pub sync: Option<SessionSync>,
}

impl Session {
    pub(crate) fn new(
        id: Arc<str>,
        kind: SessionKind,
        version: ProtocolVersion,
        legacy_out: Option<mpsc::Sender<Bytes>>,
        owner: Option<Arc<str>>,
        links: Links<'_>,
    ) -> Self {
        let Links { replay_events, tag, draining, sync } = links;
        Self {
            id,
            kind,
            version: AtomicU8::new(version_index(version)),
            client: RwLock::new(ClientInfo::default()),
            initialized: AtomicBool::new(false),
            // Until the client sets a level, send info and above.
            log_level: Arc::new(AtomicU8::new(LogLevel::Info as u8)),
            created: now_secs(),
            last_seen: AtomicU64::new(now_secs()),
            next_outgoing: AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
            in_flight: Mutex::new(HashMap::new()),
            streams: Mutex::new(Streams::default()),
            subscriptions: Mutex::new(HashSet::new()),
            closed: CancellationToken::new(),
            notifications_closed: draining.child_token(),
            legacy_out,
            replay_events,
            tag,
            owner,
            server: std::sync::OnceLock::new(),
            sync,
            permit: Mutex::new(None),
        }
    }

    /// Binds the session to the virtual server it was created on (once, before it is stored).
    pub fn bind_server(&self, server: Option<&str>) {
        if let Some(name) = server {
            let _ = self.server.set(name.into());
        }
    }

    /// The virtual server the session belongs to; `None`: the default endpoint.
    pub fn server(&self) -> Option<&str> {
        self.server.get().map(AsRef::as_ref)
    }

    /// Holds `permit` (the session's slot under its client's cap) until the session ends.
    pub fn holding(self: Arc<Self>, permit: Option<crate::limits::Permit>) -> Arc<Self> {
        *self.permit.lock() = permit;
        self
    }

    /// Whether `principal_key` (`None` when auth is off) may use this session. A session
    /// created by one principal is invisible to every other (SEC-07).
    pub fn is_owned_by(&self, principal_key: Option<&str>) -> bool {
        self.owner.as_deref() == principal_key
    }

    pub fn version(&self) -> ProtocolVersion {
        ProtocolVersion::ALL[usize::from(self.version.load(Ordering::Relaxed))]
    }

    pub fn client(&self) -> ClientInfo {
        self.client.read().clone()
    }

    pub fn caps(&self) -> ClientCaps {
        self.client.read().caps
    }

    /// Records the outcome of `initialize`. Returns false if the session was already
    /// initialized (a second `initialize` is refused).
    pub fn set_initialized(&self, version: ProtocolVersion, client: ClientInfo) -> bool {
        if self.initialized.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.version.store(version_index(version), Ordering::Relaxed);
        *self.client.write() = client;
        true
    }

    pub fn is_initialized(&self) -> bool {
        self.initialized.load(Ordering::Acquire)
    }

    pub fn touch(&self) {
        self.last_seen.store(now_secs(), Ordering::Relaxed);
    }

    pub fn idle_for(&self) -> Duration {
        Duration::from_secs(now_secs().saturating_sub(self.last_seen.load(Ordering::Relaxed)))
    }

    /// When it was created and last used, in seconds since the epoch (for the admin console).
    pub fn created_and_last_seen(&self) -> (u64, u64) {
        (self.created, self.last_seen.load(Ordering::Relaxed))
    }

    /// The key of the principal that created it (`issuer` U+001F `subject`), `None` without auth.
    pub fn owner(&self) -> Option<&str> {
        self.owner.as_deref()
    }

    /// Streams with a connection reading them now: the GET stream, POST response streams and the
    /// 2024-11-05 SSE connection (for the admin console).
    pub fn open_streams(&self) -> usize {
        let streams = self.streams.lock();
        let event_streams = streams.get.iter().chain(streams.posts.iter()).filter(|s| s.is_live()).count();
        let legacy = self.legacy_out.as_ref().is_some_and(|out| !out.is_closed());
        event_streams + usize::from(legacy)
    }

    /// `logging/setLevel`. With several replicas the level is stored and announced, so calls
    /// served by any replica log at it.
    pub fn set_log_level(&self, level: LogLevel) {
        self.log_level.store(level as u8, Ordering::Relaxed);
        if let Some(sync) = self.sync.clone() {
            let id = self.id.clone();
            sync.cluster
                .publish(crate::cluster::ClusterEvent::SessionLogLevel { session: id.to_string(), level: level.as_str().to_owned() });
            tokio::spawn(async move {
                if let Err(e) = sync.shared.set_log_level(&id, level).await {
                    tracing::warn!(error = %e, "cannot store a session's log level; other replicas keep the previous one");
                }
            });
        }
    }

    /// A level another replica set (already stored and announced there).
    pub(crate) fn apply_log_level(&self, level: LogLevel) {
        self.log_level.store(level as u8, Ordering::Relaxed);
    }

    // ---- in-flight client requests (for notifications/cancelled) ----

    pub fn track(&self, id: RequestId, token: CancellationToken) {
        self.in_flight.lock().insert(id, token);
    }

    pub fn untrack(&self, id: &RequestId) {
        self.in_flight.lock().remove(id);
    }

    /// Cancels an in-flight request; unknown or finished ids are ignored (U-12, U-13).
    pub fn cancel_request(&self, id: &RequestId) -> bool {
        match self.in_flight.lock().remove(id) {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    // ---- server-to-client requests ----

    /// Registers an outgoing request; returns its id and the receiver of the client's answer.
    pub fn begin_outgoing(&self) -> (RequestId, oneshot::Receiver<Result<Value, RpcError>>) {
        let n = self.next_outgoing.fetch_add(1, Ordering::Relaxed);
        // Unique across replicas: two calls of one session on two replicas may both ask the
        // client something, and its answers may land on either replica.
        let id = RequestId::String(format!("srv-{:08x}-{n}", self.tag).into());
        let (tx, rx) = oneshot::channel();
        self.pending.lock().insert(id.clone(), tx);
        (id, rx)
    }

    pub fn abandon_outgoing(&self, id: &RequestId) {
        self.pending.lock().remove(id);
    }

    /// Routes a client response to the waiting call; false if nobody waits for that id.
    pub fn complete_outgoing(&self, id: &RequestId, outcome: Result<Value, RpcError>) -> bool {
        match self.pending.lock().remove(id) {
            Some(tx) => tx.send(outcome).is_ok(),
            None => false,
        }
    }

    // ---- streams ----

    /// Opens a new resumable stream for a POST response.
    pub fn open_post_stream(&self, buffer: usize) -> Arc<EventStream> {
        let mut streams = self.streams.lock();
        streams.next_key += 1;
        let stream = Arc::new(EventStream::new((u64::from(self.tag) << 32) | streams.next_key, self.replay_events, buffer));
        streams.posts.push(stream.clone());
        // Forget the oldest finished streams beyond the retention bound.
        while streams.posts.len() > RETAINED_STREAMS {
            match streams.posts.iter().position(|s| s.is_finished()) {
                Some(i) => {
                    streams.posts.remove(i);
                }
                None => break,
            }
        }
        stream
    }

    /// The standalone GET stream, created on first use.
    pub fn get_stream(&self, buffer: usize) -> Arc<EventStream> {
        let mut streams = self.streams.lock();
        if let Some(s) = &streams.get {
            return s.clone();
        }
        streams.next_key += 1;
        let stream = Arc::new(EventStream::new((u64::from(self.tag) << 32) | streams.next_key, self.replay_events, buffer));
        streams.get = Some(stream.clone());
        stream
    }

    /// Whether `stream` is the standalone GET stream (notifications only).
    pub fn is_get_stream(&self, stream: &EventStream) -> bool {
        self.streams.lock().get.as_ref().is_some_and(|s| s.key() == stream.key())
    }

    /// Finds a stream of this session by key (for `Last-Event-ID`).
    pub fn find_stream(&self, key: u64) -> Option<Arc<EventStream>> {
        let streams = self.streams.lock();
        if let Some(s) = streams.get.as_ref().filter(|s| s.key() == key) {
            return Some(s.clone());
        }
        streams.posts.iter().find(|s| s.key() == key).cloned()
    }

    /// Delivers a server-initiated message (list_changed, resources/updated) on the stream
    /// meant for unrelated messages: the GET stream, or the 2024-11-05 SSE connection.
    /// Never blocks: a client that does not keep up loses its connection, not our time.
    /// Returns whether a live connection took it.
    pub fn deliver_unsolicited(&self, json: &str) -> bool {
        if let Some(out) = &self.legacy_out {
            return out.try_send(crate::protocol::sse::message_event(None, json)).is_ok();
        }
        let get = self.streams.lock().get.clone();
        get.is_some_and(|stream| stream.push(json, false))
    }

    /// The 2024-11-05 transport's outgoing channel.
    pub fn legacy_out(&self) -> Option<&mpsc::Sender<Bytes>> {
        self.legacy_out.as_ref()
    }

    pub fn subscribe(&self, uri: &str) {
        self.subscriptions.lock().insert(uri.into());
    }

    pub fn unsubscribe(&self, uri: &str) {
        self.subscriptions.lock().remove(uri);
    }

    pub fn is_subscribed(&self, uri: &str) -> bool {
        self.subscriptions.lock().contains(uri)
    }

    /// Ends the session: in-flight work is cancelled and its streams close.
    pub fn close(&self) {
        self.permit.lock().take();
        self.closed.cancel();
        self.notifications_closed.cancel();
        for (_, token) in self.in_flight.lock().drain() {
            token.cancel();
        }
        self.pending.lock().clear();
        let streams = std::mem::take(&mut *self.streams.lock());
        for s in streams.get.iter().chain(streams.posts.iter()) {
            s.finish();
        }
    }
}

fn version_index(v: ProtocolVersion) -> u8 {
    ProtocolVersion::ALL.iter().position(|x| *x == v).and_then(|i| u8::try_from(i).ok()).unwrap_or(0)
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}
