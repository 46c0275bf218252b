//! The gate an upstream's listing passes before anything of it is served: each entry is
//! fingerprinted and compared with the stored versions of its source. An approved fingerprint
//! is served as listed; a different one is stored as `pending` (once) while the approved
//! version keeps serving (its stored JSON, so clients see byte for byte what they saw before
//! and hear no `list_changed`); an entry with no approved version is served only if the
//! mode's baseline rule approves it now (`pin`, first listing), else held. With the database
//! unavailable the gate fails closed: only versions known approved from its last read serve.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::db::{self, New, Row};
use super::fingerprint::fingerprint;
use super::held::{Held, Why};
use super::{Approvals, Kind, MAX_ENTRY_BYTES, State};
use crate::config::upstreams::Approval;

/// What a listing may serve.
#[derive(Debug, Default)]
pub struct Review {
    /// Per listed entry, in order: what to serve (the listed entry, or its approved version).
    pub served: Vec<Option<Value>>,
    pub held: Vec<Held>,
    /// Set when the database could not be used (the gate failed closed), with why.
    pub degraded: Option<String>,
}

/// One source's stored versions as the gate needs them.
#[derive(Debug, Default)]
pub struct Known {
    approved: HashMap<(Kind, String), (String, Value)>,
    /// (kind, name, fingerprint) of every version and its state.
    states: HashMap<(Kind, String, String), (State, String)>,
}

impl Known {
    fn from_rows(rows: Vec<Row>) -> Self {
        let mut known = Self::default();
        for r in rows {
            if r.state == State::Approved
                && let Some(entry) = r.entry
            {
                known.approved.insert((r.kind, r.name.clone()), (r.fingerprint.clone(), entry));
            }
            known.states.insert((r.kind, r.name, r.fingerprint), (r.state, r.id));
        }
        known
    }

    /// Only the approved versions: what a failed read may still serve.
    fn approved_only(&self) -> Self {
        Self { approved: self.approved.clone(), states: HashMap::new() }
    }
}

/// One listed entry, measured.
struct Item<'a> {
    kind: Kind,
    entry: &'a Value,
    /// `None` for an entry without its name (served as is: the catalog skips and reports it).
    name: Option<String>,
    fingerprint: String,
    text: String,
}

impl Approvals {
    /// Passes `source`'s listing (`listed`: kind and entry) through the gate of `mode`.
    pub async fn review(&self, source: &str, mode: Approval, listed: &[(Kind, &Value)]) -> Review {
        if mode == Approval::Off {
            return Review { served: listed.iter().map(|(_, e)| Some((*e).clone())).collect(), ..Review::default() };
        }
        let items: Vec<Item> = listed
            .iter()
            .map(|&(kind, entry)| Item {
                kind,
                entry,
                name: entry.get(kind.key()).and_then(Value::as_str).map(str::to_owned),
                fingerprint: fingerprint(kind, entry),
                text: entry.to_string(),
            })
            .collect();
        match self.store_listing(source, mode, &items).await {
            Ok(known) => {
                let known = Arc::new(known);
                self.known.lock().insert(source.to_owned(), known.clone());
                evaluate(&items, &known, None)
            }
            Err(e) => {
                tracing::error!(upstream = source, error = %e, "the approved catalog cannot be read; serving only what is known approved");
                let known = self.known.lock().get(source).map(|k| k.approved_only()).unwrap_or_default();
                let why = format!("the approved catalog cannot be read ({e}); only entries known approved are served until it can");
                evaluate(&items, &known, Some(why))
            }
        }
    }

    /// Stores what the listing brings that the catalog does not know yet, and returns the
    /// catalog as stored after it. Two rounds at most: a write that lost to another replica's
    /// (a unique key) is re-read and what is still unknown stored as pending.
    async fn store_listing(&self, source: &str, mode: Approval, items: &[Item<'_>]) -> Result<Known, sqlx::Error> {
        let (mut rows, mut pinned) = db::load_source(&self.store, source).await?;
        for _ in 0..2 {
            let known = Known::from_rows(rows);
            // `pin`: a source's first listing (no baseline yet) is approved as listed.
            let auto = mode == Approval::Pin && !pinned;
            let mut wrote = false;
            for item in items.iter().filter(|i| i.text.len() <= MAX_ENTRY_BYTES) {
                let Some(name) = &item.name else { continue };
                let approved = known.approved.get(&(item.kind, name.clone()));
                let stored = known.states.get(&(item.kind, name.clone(), item.fingerprint.clone()));
                match (approved, stored) {
                    (Some((fp, _)), _) if *fp == item.fingerprint => {}
                    // The upstream went back to a version approved once: what is approved now
                    // is another, so it waits again.
                    (_, Some((State::Superseded, id))) => {
                        if db::repend(&self.store, id).await? {
                            log_held(source, item.kind, name, "changed back to an earlier version");
                        }
                        wrote = true;
                    }
                    // Pending or rejected: stays as decided.
                    (_, Some(_)) => {}
                    (None, None) if auto => {
                        if db::insert(&self.store, &new(source, item, name, State::Approved)).await? {
                            crate::metrics::record::catalog_decision("auto_approved");
                        }
                        wrote = true;
                    }
                    (approved, None) => {
                        if db::insert(&self.store, &new(source, item, name, State::Pending)).await? {
                            log_held(source, item.kind, name, if approved.is_some() { "changed" } else { "new" });
                        }
                        wrote = true;
                    }
                }
            }
            if auto {
                db::set_baseline(&self.store, source).await?;
                wrote = true;
            }
            if !wrote {
                return Ok(known);
            }
            (rows, pinned) = db::load_source(&self.store, source).await?;
        }
        Ok(Known::from_rows(rows))
    }
}

fn new<'a>(source: &'a str, item: &'a Item<'_>, name: &'a str, state: State) -> New<'a> {
    let by = (state == State::Approved).then_some("toolgate: first listing pinned");
    New { source, kind: item.kind, name, fingerprint: &item.fingerprint, entry: &item.text, state, by }
}

/// One warning per newly held version, on the replica that stored it: the upstream and the
/// entry's name (escaped by the log's formatter), never its description.
fn log_held(source: &str, kind: Kind, name: &str, change: &str) {
    tracing::warn!(
        upstream = source,
        kind = kind.as_str(),
        name,
        change,
        "upstream catalog entry held for an operator's approval (GET /admin/approvals)"
    );
}

/// What each item may serve, given the stored catalog.
fn evaluate(items: &[Item<'_>], known: &Known, degraded: Option<String>) -> Review {
    let mut review = Review { degraded, ..Review::default() };
    for item in items {
        let Some(name) = &item.name else {
            review.served.push(Some(item.entry.clone()));
            continue;
        };
        let hold = |why| Held { kind: item.kind, name: name.clone(), why };
        if item.text.len() > MAX_ENTRY_BYTES {
            review.served.push(None);
            review.held.push(hold(Why::TooLarge));
            continue;
        }
        let state = known.states.get(&(item.kind, name.clone(), item.fingerprint.clone())).map(|(s, _)| *s);
        match known.approved.get(&(item.kind, name.clone())) {
            Some((fp, _)) if *fp == item.fingerprint => review.served.push(Some(item.entry.clone())),
            Some((_, approved)) => {
                review.served.push(Some(approved.clone()));
                // Rejected: the approved version serves and nothing waits. Unknown (the
                // database is down): held for now, unstored.
                if state != Some(State::Rejected) {
                    review.held.push(hold(Why::Changed));
                }
            }
            None => {
                review.served.push(None);
                review.held.push(hold(match state {
                    Some(State::Rejected) => Why::Rejected,
                    Some(_) => Why::New,
                    None => Why::Unverified,
                }));
            }
        }
    }
    review
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn item(entry: &Value) -> Item<'_> {
        Item {
            kind: Kind::Tool,
            entry,
            name: entry["name"].as_str().map(str::to_owned),
            fingerprint: fingerprint(Kind::Tool, entry),
            text: entry.to_string(),
        }
    }

    #[test]
    fn a_changed_entry_serves_its_approved_version_and_a_new_one_nothing() {
        let (old, changed, fresh) =
            (json!({"name": "a", "description": "old"}), json!({"name": "a", "description": "new"}), json!({"name": "b"}));
        let mut known = Known::default();
        known.approved.insert((Kind::Tool, "a".into()), (fingerprint(Kind::Tool, &old), old.clone()));
        known.states.insert((Kind::Tool, "a".into(), fingerprint(Kind::Tool, &changed)), (State::Pending, "1".into()));
        known.states.insert((Kind::Tool, "b".into(), fingerprint(Kind::Tool, &fresh)), (State::Pending, "2".into()));
        let review = evaluate(&[item(&changed), item(&fresh)], &known, None);
        assert_eq!(review.served, vec![Some(old), None]);
        assert_eq!(review.held.iter().map(|h| h.why).collect::<Vec<_>>(), [Why::Changed, Why::New]);
    }

    #[test]
    fn without_the_database_only_known_approved_versions_serve() {
        let (a, b) = (json!({"name": "a"}), json!({"name": "b"}));
        let mut known = Known::default();
        known.approved.insert((Kind::Tool, "a".into()), (fingerprint(Kind::Tool, &a), a.clone()));
        let review = evaluate(&[item(&a), item(&b)], &known.approved_only(), Some("down".into()));
        assert_eq!(review.served, vec![Some(a), None]);
        assert_eq!(review.held[0].why, Why::Unverified);
    }
}
