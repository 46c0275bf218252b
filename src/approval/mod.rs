//! The approved catalog: no tool, resource or prompt of an upstream MCP server changes behind
//! the operator's back. Each listed entry gets a fingerprint of what a model reads and a
//! caller sends ([`fingerprint`]); a version is served only once approved, automatically for
//! an upstream's first listing under `approval = "pin"` (the default), by an operator through
//! the admin API otherwise. A new or changed version is stored as `pending` and held: a
//! changed entry keeps serving its approved version, a new one is not served at all. Decisions
//! are stored (`catalog_entries`, [`db`]), so every replica serves the same catalog; the admin
//! API shows each change as a diff ([`diff`]). The gate itself is [`review`].

pub mod db;
pub mod diff;
pub mod fingerprint;
mod held;
pub mod review;

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use serde::Serialize;

use crate::store::Store;

pub use held::{Held, Why};
pub use review::Review;

/// Largest listed entry stored (its JSON text): an upstream's listing is bounded by its
/// message budget, but one description needs no more, and each version is kept.
pub const MAX_ENTRY_BYTES: usize = 64 * 1024;

/// What kind of entry a version is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Tool,
    Resource,
    Template,
    Prompt,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tool => "tool",
            Self::Resource => "resource",
            Self::Template => "template",
            Self::Prompt => "prompt",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Self::Tool, Self::Resource, Self::Template, Self::Prompt].into_iter().find(|k| k.as_str() == s)
    }

    /// The field that names an entry of this kind in its upstream's listing.
    pub fn key(self) -> &'static str {
        match self {
            Self::Tool | Self::Prompt => "name",
            Self::Resource => "uri",
            Self::Template => "uriTemplate",
        }
    }
}

/// Where a stored version stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Approved,
    Pending,
    Rejected,
    Superseded,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approved => "approved",
            Self::Pending => "pending",
            Self::Rejected => "rejected",
            Self::Superseded => "superseded",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Self::Approved, Self::Pending, Self::Rejected, Self::Superseded].into_iter().find(|k| k.as_str() == s)
    }
}

/// Why a decision was not made.
#[derive(Debug, thiserror::Error)]
pub enum DecideError {
    #[error("no catalog entry has this id")]
    NotFound,
    #[error("this entry is {0} already; only a pending entry can be decided")]
    AlreadyDecided(&'static str),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// The approved catalog: the store, and per source what was last read from it (served from
/// when the database cannot be read: only what is known approved).
pub struct Approvals {
    store: Store,
    known: Mutex<HashMap<String, Arc<review::Known>>>,
}

impl std::fmt::Debug for Approvals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Approvals").field("sources", &self.known.lock().len()).finish()
    }
}

impl Approvals {
    pub fn new(store: Store) -> Arc<Self> {
        Arc::new(Self { store, known: Mutex::default() })
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Drops what was last read for `source` (the upstream was removed).
    pub fn forget(&self, source: &str) {
        self.known.lock().remove(source);
    }

    /// Approves or rejects pending version `id` as `by`; returns it as it was (pending).
    /// Approving supersedes the version approved before.
    pub async fn decide(&self, id: &str, approve: bool, by: Option<&str>) -> Result<db::Row, DecideError> {
        // Two approvals of two versions of one entry at once: the second's transaction can
        // meet the first's new approved row (unique index); it is tried again, and supersedes it.
        for attempt in 0..2 {
            let row = db::get(&self.store, id).await?.ok_or(DecideError::NotFound)?;
            if row.state != State::Pending {
                return Err(DecideError::AlreadyDecided(row.state.as_str()));
            }
            match db::decide(&self.store, &row, approve, by).await {
                Ok(true) => {
                    crate::metrics::record::catalog_decision(if approve { "approved" } else { "rejected" });
                    return Ok(row);
                }
                Ok(false) => continue,
                Err(sqlx::Error::Database(e)) if e.is_unique_violation() && attempt == 0 => continue,
                Err(e) => return Err(e.into()),
            }
        }
        let now = db::get(&self.store, id).await?.ok_or(DecideError::NotFound)?;
        Err(DecideError::AlreadyDecided(now.state.as_str()))
    }
}
