//! A listed entry the approved catalog does not serve as listed, and why: what the upstream's
//! status shows (`held`, `skipped`) and what a caller of the entry is told.

use serde::Serialize;

use super::{Kind, MAX_ENTRY_BYTES};

/// Why a listed entry is not served as listed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Why {
    /// New, waiting for an operator; nothing of it is served.
    New,
    /// Changed, waiting for an operator; the approved version serves.
    Changed,
    /// An operator rejected this version and none is approved; nothing is served.
    Rejected,
    /// Its listing is over [`MAX_ENTRY_BYTES`]; nothing is served.
    TooLarge,
    /// The database cannot be read and no version is known approved; nothing is served.
    Unverified,
}

/// A listed entry not served as listed.
#[derive(Clone, Debug, Serialize)]
pub struct Held {
    pub kind: Kind,
    /// The upstream's own name (a resource's URI).
    pub name: String,
    pub why: Why,
}

impl Held {
    /// Whether an operator's decision is awaited (what the status lists as `held`).
    pub fn is_pending(&self) -> bool {
        matches!(self.why, Why::New | Why::Changed)
    }

    /// Whether nothing of the entry is served.
    pub fn is_unserved(&self) -> bool {
        self.why != Why::Changed
    }

    /// What a caller of the entry (or the status) is told, naming the upstream.
    pub fn explain(&self, source: &str) -> String {
        let (kind, name) = (self.kind.as_str(), crate::untrusted::escaped(&self.name, 200));
        match self.why {
            Why::New => format!(
                "the {kind} {name} of the upstream MCP server {source} is new and waits for an operator's approval (GET /admin/approvals)"
            ),
            Why::Changed => format!(
                "the {kind} {name} of the upstream MCP server {source} changed; the change waits for an operator's approval (GET /admin/approvals) and the approved version serves meanwhile"
            ),
            Why::Rejected => format!(
                "the {kind} {name} of the upstream MCP server {source} was rejected by an operator (GET /admin/approvals?state=rejected)"
            ),
            Why::TooLarge => format!(
                "the {kind} {name} of the upstream MCP server {source} is listed with more than {} KiB, more than the approved catalog stores",
                MAX_ENTRY_BYTES / 1024
            ),
            Why::Unverified => format!(
                "the {kind} {name} of the upstream MCP server {source} cannot be checked against the approved catalog: the database is unavailable"
            ),
        }
    }
}
