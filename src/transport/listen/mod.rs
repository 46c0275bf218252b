//! Modern-era `subscriptions/listen` streams and the fan-out of server changes to every
//! listener: legacy GET streams (per session) and modern listen streams (per filter).
//! Delivery never waits: a listener whose buffer is full is disconnected (it re-lists on
//! reconnect), so one slow client cannot delay anyone else.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use bytes::Bytes;
use dashmap::DashMap;
use serde_json::{Map, Value, json};
use tokio::sync::{broadcast, mpsc};

use super::sse;

mod tasks;

use crate::bus::Change;
use crate::protocol::jsonrpc::RequestId;
use crate::server::McpServer;
use crate::session::SessionStore;
pub use tasks::{listened_tasks, task_fan_out};

/// What one listen stream asked to hear about.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    pub tools: bool,
    pub prompts: bool,
    pub resources: bool,
    pub resource_uris: HashSet<String>,
    /// Tasks (2026-07-28 tasks extension) whose changes this stream hears as
    /// `notifications/tasks`: only ids checked to belong to the caller.
    pub task_ids: HashSet<String>,
}

impl Filter {
    /// Parses `params.notifications`, keeping only what the server can deliver.
    pub fn parse(notifications: &Map<String, Value>, has_prompts: bool, has_resources: bool) -> Self {
        let flag = |k: &str| notifications.get(k).and_then(Value::as_bool).unwrap_or(false);
        let uris = notifications
            .get("resourceSubscriptions")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default();
        Self {
            tools: flag("toolsListChanged"),
            prompts: has_prompts && flag("promptsListChanged"),
            resources: has_resources && flag("resourcesListChanged"),
            resource_uris: if has_resources { uris } else { HashSet::new() },
            task_ids: HashSet::new(),
        }
    }

    /// The honoured subset, as the acknowledgement reports it.
    pub fn to_json(&self) -> Value {
        let mut v = Map::new();
        if self.tools {
            v.insert("toolsListChanged".into(), json!(true));
        }
        if self.prompts {
            v.insert("promptsListChanged".into(), json!(true));
        }
        if self.resources {
            v.insert("resourcesListChanged".into(), json!(true));
        }
        if !self.resource_uris.is_empty() {
            let mut uris: Vec<&String> = self.resource_uris.iter().collect();
            uris.sort();
            v.insert("resourceSubscriptions".into(), json!(uris));
        }
        if !self.task_ids.is_empty() {
            let mut ids: Vec<&String> = self.task_ids.iter().collect();
            ids.sort();
            v.insert("taskIds".into(), json!(ids));
        }
        Value::Object(v)
    }

    fn wants(&self, change: &Change) -> bool {
        match change {
            Change::ToolsListChanged => self.tools,
            Change::PromptsListChanged => self.prompts,
            Change::ResourcesListChanged => self.resources,
            Change::ResourceUpdated(uri) => self.resource_uris.contains(uri.as_ref()),
        }
    }
}

struct Listener {
    subscription: RequestId,
    filter: Filter,
    tx: mpsc::Sender<Bytes>,
    /// The virtual server it listens at (`None`: the default endpoint).
    server: Option<Arc<str>>,
}

/// Every open modern listen stream of this process.
#[derive(Default)]
pub struct Listeners {
    next: AtomicU64,
    map: DashMap<u64, Listener>,
}

impl std::fmt::Debug for Listeners {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listeners").field("open", &self.map.len()).finish()
    }
}

/// Unregisters a listener when its response body is dropped (client gone or stream ended).
pub struct ListenerGuard {
    listeners: Arc<Listeners>,
    key: u64,
}

impl Drop for ListenerGuard {
    fn drop(&mut self) {
        self.listeners.map.remove(&self.key);
    }
}

impl Listeners {
    pub fn register(
        self: &Arc<Self>,
        subscription: RequestId,
        filter: Filter,
        tx: mpsc::Sender<Bytes>,
        server: Option<&str>,
    ) -> ListenerGuard {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        self.map.insert(key, Listener { subscription, filter, tx, server: server.map(Into::into) });
        ListenerGuard { listeners: self.clone(), key }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// `published`: when the change was published, for the fan-out latency.
    fn deliver(&self, change: &Change, published: Option<Instant>, reach: &Reach) {
        if self.map.is_empty() {
            return;
        }
        let mut dead = Vec::new();
        // The event is the same for every listener but for its subscription id: built once,
        // each listener's frame is that event with its id spliced in (building and serializing
        // the notification per listener was most of the fan-out's own work).
        let frame = TaggedFrame::new(change);
        for entry in &self.map {
            let listener = entry.value();
            if !listener.filter.wants(change) || !reach.reaches(listener.server.as_deref()) {
                continue;
            }
            if listener.tx.try_send(frame.with(&listener.subscription)).is_err() {
                dead.push(*entry.key());
            } else if is_list_change(change) {
                crate::metrics::record::list_changed_sent(published);
            }
        }
        for key in dead {
            // Dropping the sender ends that stream; the client reconnects and re-lists.
            self.map.remove(&key);
        }
    }
}

/// A change's SSE frame for modern streams, split where the subscription id goes.
struct TaggedFrame {
    head: String,
    tail: String,
}

impl TaggedFrame {
    /// A string that cannot occur in a serialized notification but where the id goes.
    const SLOT: &'static str = "\u{0}subscription\u{0}";

    fn new(change: &Change) -> Self {
        let marked = notification(change, Some(&RequestId::String(Self::SLOT.into())));
        let event = sse::message_event(None, &marked.to_string());
        let text = String::from_utf8_lossy(&event).into_owned();
        let slot = serde_json::to_string(Self::SLOT).unwrap_or_default();
        match text.split_once(&slot) {
            Some((head, tail)) => Self { head: head.to_owned(), tail: tail.to_owned() },
            None => Self { head: text, tail: String::new() },
        }
    }

    /// The frame for the stream subscribed as `id`: exactly the event `notification` builds.
    fn with(&self, id: &RequestId) -> Bytes {
        let id = serde_json::to_string(id).unwrap_or_default();
        let mut frame = bytes::BytesMut::with_capacity(self.head.len() + id.len() + self.tail.len());
        frame.extend_from_slice(self.head.as_bytes());
        frame.extend_from_slice(id.as_bytes());
        frame.extend_from_slice(self.tail.as_bytes());
        frame.freeze()
    }
}

/// The notification for a change, tagged with the subscription id on modern streams.
pub fn notification(change: &Change, subscription: Option<&RequestId>) -> Value {
    let method = match change {
        Change::ToolsListChanged => "notifications/tools/list_changed",
        Change::PromptsListChanged => "notifications/prompts/list_changed",
        Change::ResourcesListChanged => "notifications/resources/list_changed",
        Change::ResourceUpdated(_) => "notifications/resources/updated",
    };
    let mut params = Map::new();
    if let Change::ResourceUpdated(uri) = change {
        params.insert("uri".into(), json!(uri.as_ref()));
    }
    if let Some(id) = subscription {
        params.insert("_meta".into(), json!({ "io.modelcontextprotocol/subscriptionId": id }));
    }
    if params.is_empty() {
        json!({ "jsonrpc": "2.0", "method": method })
    } else {
        json!({ "jsonrpc": "2.0", "method": method, "params": params })
    }
}

/// Which endpoints hear a change: the default one always; a virtual server when its own tool
/// list changed, or, for resources and prompts, when it serves that kind. `None`: all.
pub(crate) struct Reach(Option<HashSet<Arc<str>>>);

impl Reach {
    fn of(change: &Change, server: &McpServer) -> Self {
        let servers = &server.servers;
        if servers.is_empty() {
            return Self(None);
        }
        let set = match change {
            Change::ToolsListChanged => servers.changed_since_announced(&server.tools.snapshot()).into_iter().collect(),
            Change::PromptsListChanged => servers.all().into_iter().filter(|s| s.has_prompts()).map(|s| s.name.clone()).collect(),
            Change::ResourcesListChanged | Change::ResourceUpdated(_) => {
                servers.all().into_iter().filter(|s| s.has_resources()).map(|s| s.name.clone()).collect()
            }
        };
        Self(Some(set))
    }

    fn reaches(&self, server: Option<&str>) -> bool {
        match (server, &self.0) {
            (None, _) | (_, None) => true,
            (Some(name), Some(set)) => set.contains(name),
        }
    }
}

/// Runs until the bus closes: every change goes to every interested stream.
pub async fn fan_out(server: Arc<McpServer>, sessions: Arc<SessionStore>, listeners: Arc<Listeners>) {
    let mut rx = server.bus.subscribe_published();
    loop {
        let published = match rx.recv().await {
            Ok(published) => published,
            // Fell behind: some changes were dropped, so announce every list as changed
            // (over-notify rather than miss).
            Err(broadcast::error::RecvError::Lagged(n)) => {
                tracing::warn!(missed = n, "change fan-out lagged; notifying every list");
                for change in [Change::ToolsListChanged, Change::PromptsListChanged, Change::ResourcesListChanged] {
                    deliver(&change, None, &sessions, &listeners, &Reach(None));
                }
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let reach = Reach::of(&published.change, &server);
        deliver(&published.change, Some(published.at), &sessions, &listeners, &reach);
    }
}

/// Whether the change is one of the `list_changed` notifications (counted in metrics).
fn is_list_change(change: &Change) -> bool {
    !matches!(change, Change::ResourceUpdated(_))
}

fn deliver(change: &Change, published: Option<Instant>, sessions: &SessionStore, listeners: &Listeners, reach: &Reach) {
    let legacy = notification(change, None).to_string();
    sessions.for_each(|session| {
        if !session.is_initialized() || !reach.reaches(session.server()) {
            return;
        }
        if let Change::ResourceUpdated(uri) = change
            && !session.is_subscribed(uri)
        {
            return;
        }
        if session.deliver_unsolicited(&legacy) && is_list_change(change) {
            crate::metrics::record::list_changed_sent(published);
        }
    });
    listeners.deliver(change, published, reach);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_keeps_only_what_the_server_offers() {
        let n = json!({"toolsListChanged": true, "promptsListChanged": true, "resourceSubscriptions": ["a://b"]});
        let f = Filter::parse(n.as_object().expect("object"), false, true);
        assert!(f.tools && !f.prompts);
        assert_eq!(f.to_json(), json!({"toolsListChanged": true, "resourceSubscriptions": ["a://b"]}));
        assert!(f.wants(&Change::ResourceUpdated("a://b".into())));
        assert!(!f.wants(&Change::ResourceUpdated("a://c".into())));
    }

    #[test]
    fn a_spliced_frame_is_the_event_built_for_that_listener() {
        for change in [Change::ToolsListChanged, Change::ResourceUpdated("file:///a\"b".into())] {
            let frame = TaggedFrame::new(&change);
            for id in [RequestId::Number(7), RequestId::String("sub-\"x\"".into())] {
                let built = sse::message_event(None, &notification(&change, Some(&id)).to_string());
                assert_eq!(frame.with(&id), built);
            }
        }
    }

    #[test]
    fn notifications_are_tagged_for_listeners_only() {
        let id = RequestId::Number(42);
        let tagged = notification(&Change::ToolsListChanged, Some(&id));
        assert_eq!(tagged["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], json!(42));
        assert_eq!(notification(&Change::ToolsListChanged, None), json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"}));
    }

    #[tokio::test]
    async fn a_full_listener_is_dropped_without_blocking_others() {
        let listeners = Arc::new(Listeners::default());
        let (slow_tx, _slow_rx) = mpsc::channel(1);
        let (fast_tx, mut fast_rx) = mpsc::channel(8);
        let filter = Filter { tools: true, ..Filter::default() };
        let _g1 = listeners.register(RequestId::Number(1), filter.clone(), slow_tx, None);
        let _g2 = listeners.register(RequestId::Number(2), filter, fast_tx, None);
        for _ in 0..3 {
            listeners.deliver(&Change::ToolsListChanged, None, &Reach(None));
        }
        assert_eq!(listeners.len(), 1, "the slow listener was disconnected");
        let mut got = 0;
        while fast_rx.try_recv().is_ok() {
            got += 1;
        }
        assert_eq!(got, 3);
    }
}
