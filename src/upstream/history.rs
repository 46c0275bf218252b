//! What an operator needs to see of an upstream's past, not only its present: its last error
//! (kept after a reconnect, with its time) and its recent state changes, a ring of the last
//! [`KEPT`]. Without them a connection that failed and recovered between two looks leaves no
//! trace but a counter.
//!
//! Both hold text an upstream chose (a close reason, an error's message), so it is stored only
//! through [`bounded`]: escaped and capped like a log field (`untrusted`).

use std::collections::VecDeque;

use serde::Serialize;

/// State changes kept: enough for an hour of a flapping upstream at the longest backoff.
pub const KEPT: usize = 50;
/// Longest text kept from an error or reason (bytes of the original; the rest is counted).
pub const TEXT_MAX: usize = 1000;

/// `text` escaped and capped at [`TEXT_MAX`], as the status keeps it.
pub fn bounded(text: &str) -> String {
    crate::untrusted::escaped(text, TEXT_MAX).to_string()
}

/// One change of an upstream's state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StateChange {
    /// When (ms since the epoch).
    pub at_ms: u64,
    pub from: &'static str,
    pub to: &'static str,
    /// Why, when known: the error, the close reason, or what a connection served.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The last [`KEPT`] state changes, oldest first.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(transparent)]
pub struct History(VecDeque<StateChange>);

impl History {
    /// Records `change`, forgetting the oldest when full.
    pub fn push(&mut self, change: StateChange) {
        if self.0.len() == KEPT {
            self.0.pop_front();
        }
        self.0.push_back(change);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &StateChange> {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(at_ms: u64) -> StateChange {
        StateChange { at_ms, from: "connected", to: "disconnected", reason: None }
    }

    #[test]
    fn the_ring_keeps_the_newest_changes_in_order() {
        let mut history = History::default();
        for at in 0..(KEPT as u64 + 7) {
            history.push(change(at));
        }
        let kept: Vec<u64> = history.iter().map(|c| c.at_ms).collect();
        assert_eq!(kept, (7..KEPT as u64 + 7).collect::<Vec<_>>());
    }

    #[test]
    fn kept_text_is_escaped_and_capped() {
        let text = format!("line one\nline two\u{202e}{}", "x".repeat(TEXT_MAX));
        let kept = bounded(&text);
        assert!(kept.starts_with("line one\\nline two\\u{202e}") && !kept.contains('\n'), "{kept}");
        assert!(kept.len() < TEXT_MAX + 40 && kept.ends_with("bytes)"), "{kept}");
    }
}
