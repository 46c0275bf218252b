//! The event-bus seam: every change to what the server offers (tools, resources, prompts) is
//! published here and fanned out to every listening stream. This in-process implementation
//! serves a single replica; a clustered backend replaces it without touching publishers or
//! subscribers.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::broadcast;

/// A change clients may want to hear about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    ToolsListChanged,
    ResourcesListChanged,
    PromptsListChanged,
    /// The content of one resource changed (`notifications/resources/updated`).
    ResourceUpdated(Arc<str>),
}

/// A change with the moment it was published: the fan-out measures its latency from it.
#[derive(Clone, Debug)]
pub struct Published {
    pub change: Change,
    pub at: Instant,
}

/// Publishes changes and hands out subscriptions.
pub trait EventBus: Send + Sync + 'static {
    fn publish(&self, change: Change);
    fn subscribe(&self) -> broadcast::Receiver<Change>;
    /// Like [`subscribe`](Self::subscribe), each change with its publication time.
    fn subscribe_published(&self) -> broadcast::Receiver<Published>;
}

/// A single-process bus over a tokio broadcast channel.
#[derive(Debug)]
pub struct LocalBus {
    tx: broadcast::Sender<Change>,
    /// The same changes, stamped (changes are rare: the second send costs nothing that matters).
    published: broadcast::Sender<Published>,
}

impl LocalBus {
    /// `capacity` bounds how far a lagging subscriber may fall behind before it is told it
    /// lagged (it then over-notifies rather than miss a change).
    pub fn new(capacity: usize) -> Self {
        let (tx, _) = broadcast::channel(capacity.max(16));
        let (published, _) = broadcast::channel(capacity.max(16));
        Self { tx, published }
    }
}

impl Default for LocalBus {
    fn default() -> Self {
        Self::new(1024)
    }
}

impl EventBus for LocalBus {
    fn publish(&self, change: Change) {
        // No subscribers is fine: nobody is listening yet.
        let _ = self.published.send(Published { change: change.clone(), at: Instant::now() });
        let _ = self.tx.send(change);
    }

    fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.tx.subscribe()
    }

    fn subscribe_published(&self) -> broadcast::Receiver<Published> {
        self.published.subscribe()
    }
}
