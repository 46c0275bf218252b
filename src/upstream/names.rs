//! Who serves each upstream tool name. A name belongs to the first upstream that served it,
//! for as long as that upstream keeps listing it and stays configured: a lost connection
//! keeps the name (its tools come back when the upstream does, and a call meanwhile is told it
//! is not connected), and only a listing without it, or the upstream's removal, gives it up. A
//! later claim (another upstream's, through an operator's rename; or a name another source
//! serves) is skipped with a reason, so which upstream a call reaches never depends on the
//! order of listings, reconnects and withdrawals. Prefixes that could collide are refused
//! before any of this (`config/prefixes.rs`).

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::tool::{Origin, Tool};

/// Every upstream's current listing, and who owns which served name.
#[derive(Default)]
pub(super) struct Ledger {
    offers: BTreeMap<String, Offer>,
    /// Served name → the upstream that owns it.
    owners: HashMap<String, String>,
}

/// What one upstream lists, as last heard.
#[derive(Default)]
struct Offer {
    tools: Vec<Tool>,
    connected: bool,
    /// Its tools left out by the last settling, to log each conflict once when it appears.
    conflicts: Vec<Conflict>,
}

/// One listed tool that is not served, and who holds its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Conflict {
    pub tool: String,
    pub holder: Holder,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Holder {
    /// Another upstream, served now or not (it keeps its names while configured).
    Upstream { name: String, connected: bool },
    /// A tool of another source (code, the tools file, the database).
    Source(Origin),
    /// The same upstream lists the name twice (or renames a tool onto another's name).
    Itself,
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.tool, self.why())
    }
}

/// What a settling decided.
#[derive(Default)]
pub(super) struct Settled {
    /// Per connected upstream: its tools served, and its tools left out.
    pub upstreams: BTreeMap<String, (usize, Vec<Conflict>)>,
    /// Conflicts that were not there at the previous settling: `(upstream, conflict)`.
    pub fresh: Vec<(String, Conflict)>,
}

impl Conflict {
    /// Who holds the name, in a sentence (without the tool's name).
    pub fn why(&self) -> String {
        match &self.holder {
            Holder::Upstream { name, connected: true } => format!("the name is served by the upstream {name}, which served it first"),
            Holder::Upstream { name, connected: false } => format!(
                "the name belongs to the upstream {name}, which served it first (not connected now; it keeps its names while configured)"
            ),
            Holder::Source(origin) => format!("the name is taken by a tool from {}", origin.as_str()),
            Holder::Itself => "this upstream lists the name more than once; the first is served".to_owned(),
        }
    }

    /// The same tool held by the same holder (whether an owner is connected aside).
    fn same(&self, other: &Self) -> bool {
        let holder = |h: &Holder| match h {
            Holder::Upstream { name, .. } => format!("upstream {name}"),
            other => format!("{other:?}"),
        };
        self.tool == other.tool && holder(&self.holder) == holder(&other.holder)
    }
}

impl Ledger {
    /// `upstream` is connected and lists `tools`: names it no longer lists are given up.
    pub fn list(&mut self, upstream: &str, tools: Vec<Tool>) {
        let listed: HashSet<&str> = tools.iter().map(Tool::name).collect();
        self.owners.retain(|name, owner| owner != upstream || listed.contains(name.as_str()));
        let offer = self.offers.entry(upstream.to_owned()).or_default();
        offer.tools = tools;
        offer.connected = true;
    }

    /// `upstream` lost its connection: nothing of it is served, and it keeps its names.
    pub fn withdraw(&mut self, upstream: &str) {
        if let Some(offer) = self.offers.get_mut(upstream) {
            offer.connected = false;
        }
    }

    /// `upstream` is no longer configured: its names are free for the others.
    pub fn remove(&mut self, upstream: &str) {
        self.offers.remove(upstream);
        self.owners.retain(|_, owner| owner != upstream);
    }

    /// The names `upstream` owns.
    pub fn owned_by<'a>(&'a self, upstream: &'a str) -> impl Iterator<Item = &'a str> {
        self.owners.iter().filter(move |(_, o)| *o == upstream).map(|(n, _)| n.as_str())
    }

    /// Decides what is served and hands it to `publish`: an owned name by its owner; a free
    /// one by the first connected upstream that lists it (`first`, the one that just listed,
    /// before the others by name), unless `elsewhere` says another source serves it.
    /// `publish` returns the names it had to leave out after all (another source took them
    /// since `elsewhere` looked), which are given up like any other conflict.
    pub fn settle(
        &mut self,
        first: &str,
        elsewhere: impl Fn(&str) -> Option<Origin>,
        publish: impl FnOnce(Vec<Tool>) -> Vec<(String, Origin)>,
    ) -> Settled {
        let mut settled = Settled::default();
        let mut served = Vec::new();
        let order: Vec<String> = std::iter::once(first.to_owned()).chain(self.offers.keys().filter(|k| *k != first).cloned()).collect();
        for upstream in order {
            let Some(offer) = self.offers.get(&upstream).filter(|o| o.connected) else { continue };
            let (mut count, mut conflicts, mut seen) = (0, Vec::new(), HashSet::new());
            for tool in &offer.tools {
                let name = tool.name();
                let holder = if !seen.insert(name) {
                    Some(Holder::Itself)
                } else {
                    match self.owners.get(name) {
                        Some(owner) if *owner == upstream => None,
                        Some(owner) => {
                            let connected = self.offers.get(owner).is_some_and(|o| o.connected);
                            Some(Holder::Upstream { name: owner.clone(), connected })
                        }
                        None => elsewhere(name).map(Holder::Source),
                    }
                };
                match holder {
                    Some(holder) => conflicts.push(Conflict { tool: name.to_owned(), holder }),
                    None => {
                        self.owners.insert(name.to_owned(), upstream.clone());
                        served.push(tool.clone());
                        count += 1;
                    }
                }
            }
            settled.upstreams.insert(upstream, (count, conflicts));
        }
        for (name, origin) in publish(served) {
            let Some(owner) = self.owners.remove(&name) else { continue };
            if let Some((count, conflicts)) = settled.upstreams.get_mut(&owner) {
                *count = count.saturating_sub(1);
                conflicts.push(Conflict { tool: name, holder: Holder::Source(origin) });
            }
        }
        self.remember(&mut settled);
        settled
    }

    /// Keeps each upstream's conflicts and reports the ones not there before.
    fn remember(&mut self, settled: &mut Settled) {
        for (upstream, (_, conflicts)) in &settled.upstreams {
            let Some(offer) = self.offers.get_mut(upstream) else { continue };
            let fresh = conflicts.iter().filter(|c| !offer.conflicts.iter().any(|old| old.same(c)));
            settled.fresh.extend(fresh.map(|c| (upstream.clone(), c.clone())));
            offer.conflicts = conflicts.clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::CallToolResult;
    use crate::tool::ToolError;

    fn tools(names: &[&str]) -> Vec<Tool> {
        names.iter().map(|n| Tool::builder(*n, "t").handler(|_| async { Ok::<_, ToolError>(CallToolResult::text("ok")) })).collect()
    }

    /// Settles after `upstream` changed; returns who serves each name, by name.
    fn settle(ledger: &mut Ledger, upstream: &str) -> BTreeMap<String, String> {
        ledger.settle(upstream, |_| None, |_| Vec::new());
        ledger
            .owners
            .iter()
            .filter(|(_, o)| ledger.offers.get(*o).is_some_and(|x| x.connected))
            .map(|(n, o)| (n.clone(), o.clone()))
            .collect()
    }

    fn owner(served: &BTreeMap<String, String>, name: &str) -> Option<String> {
        served.get(name).cloned()
    }

    #[test]
    fn the_first_upstream_to_serve_a_name_keeps_it_whichever_name_sorts_first() {
        for (first, later) in [("a", "b"), ("b", "a")] {
            let mut ledger = Ledger::default();
            ledger.list(first, tools(&["shared"]));
            settle(&mut ledger, first);
            ledger.list(later, tools(&["shared", "own"]));
            let served = settle(&mut ledger, later);
            assert_eq!(owner(&served, "shared").as_deref(), Some(first), "{first} listed first");
            assert_eq!(owner(&served, "own").as_deref(), Some(later));
        }
    }

    #[test]
    fn relisting_or_reconnecting_never_moves_a_name() {
        let mut ledger = Ledger::default();
        ledger.list("z", tools(&["shared"]));
        settle(&mut ledger, "z");
        ledger.list("a", tools(&["shared"]));
        settle(&mut ledger, "a");
        ledger.list("z", tools(&["shared", "more"]));
        assert_eq!(owner(&settle(&mut ledger, "z"), "shared").as_deref(), Some("z"), "the owner lists again");
        ledger.withdraw("a");
        settle(&mut ledger, "a");
        ledger.list("a", tools(&["shared"]));
        assert_eq!(owner(&settle(&mut ledger, "a"), "shared").as_deref(), Some("z"), "the other reconnects");
    }

    #[test]
    fn a_withdrawn_owner_keeps_its_name_and_serves_it_again_when_back() {
        let mut ledger = Ledger::default();
        ledger.list("z", tools(&["shared"]));
        settle(&mut ledger, "z");
        ledger.withdraw("z");
        settle(&mut ledger, "z");
        ledger.list("a", tools(&["shared"]));
        let settled = ledger.settle("a", |_| None, |_| Vec::new());
        let (served, conflicts) = &settled.upstreams["a"];
        assert_eq!(*served, 0);
        assert_eq!(conflicts[0].holder, Holder::Upstream { name: "z".into(), connected: false });
        assert!(conflicts[0].to_string().contains("not connected now"), "{}", conflicts[0]);
        ledger.list("z", tools(&["shared"]));
        assert_eq!(owner(&settle(&mut ledger, "z"), "shared").as_deref(), Some("z"));
    }

    #[test]
    fn a_name_given_up_by_its_owner_goes_to_an_upstream_that_lists_it() {
        let mut ledger = Ledger::default();
        ledger.list("z", tools(&["shared", "other"]));
        settle(&mut ledger, "z");
        ledger.list("a", tools(&["shared", "other"]));
        settle(&mut ledger, "a");
        ledger.list("z", tools(&["other"]));
        assert_eq!(owner(&settle(&mut ledger, "z"), "shared").as_deref(), Some("a"), "no longer listed by z");
        ledger.remove("z");
        assert_eq!(owner(&settle(&mut ledger, "z"), "other").as_deref(), Some("a"), "z was removed");
    }

    #[test]
    fn each_conflict_is_fresh_once() {
        let mut ledger = Ledger::default();
        ledger.list("z", tools(&["shared"]));
        settle(&mut ledger, "z");
        ledger.list("a", tools(&["shared"]));
        assert_eq!(ledger.settle("a", |_| None, |_| Vec::new()).fresh.len(), 1);
        ledger.list("a", tools(&["shared"]));
        assert!(ledger.settle("a", |_| None, |_| Vec::new()).fresh.is_empty(), "the same conflict again");
    }

    #[test]
    fn a_name_listed_twice_or_held_by_another_source_is_skipped_with_why() {
        let mut ledger = Ledger::default();
        ledger.list("a", tools(&["dup", "dup", "file_tool", "raced"]));
        let elsewhere = |n: &str| (n == "file_tool").then_some(Origin::File);
        let settled = ledger.settle("a", elsewhere, |_| vec![("raced".to_owned(), Origin::Database)]);
        let (served, conflicts) = &settled.upstreams["a"];
        assert_eq!(*served, 1, "only the first dup");
        let holders: Vec<&Holder> = conflicts.iter().map(|c| &c.holder).collect();
        assert_eq!(holders, [&Holder::Itself, &Holder::Source(Origin::File), &Holder::Source(Origin::Database)]);
        assert_eq!(ledger.owned_by("a").collect::<Vec<_>>(), ["dup"], "nothing left out is owned");
    }
}
