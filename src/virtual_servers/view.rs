//! A virtual server's view of the tool registry: the tools it selects, under the names, titles,
//! descriptions and hints its overrides give, as one [`ToolSet`] that `tools/list` and
//! `tools/call` read exactly as they read the registry's. Built once per registry snapshot
//! (changes are rare, reads are not) and compared by digest, so listeners hear `list_changed`
//! only when this server's own list changed.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry as Slot;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use super::select::{Entry, Selection};
use crate::config::servers::{ServedAs, VirtualServerSettings};
use crate::tool::{RegisteredTool, ToolAnnotations, ToolDescriptor, ToolSet};

/// See the module docs.
#[derive(Debug)]
pub struct View {
    /// The registry snapshot this view was built from.
    pub(super) source: Arc<ToolSet>,
    pub tools: Arc<ToolSet>,
    /// Changes exactly when what this server lists changes.
    pub digest: u64,
    /// Tools left out because another tool of this server has their name, with why.
    pub collisions: Vec<String>,
}

/// Where a tool comes from, as a message names it.
pub fn source_of(tool: &RegisteredTool) -> String {
    match tool.tool.upstream() {
        Some(upstream) => format!("the upstream {upstream}"),
        None => match tool.tool.origin().as_str() {
            "file" => "the tools file".to_owned(),
            "database" => "the database (admin API)".to_owned(),
            _ => "the built-in tools".to_owned(),
        },
    }
}

pub(super) fn build(name: &str, settings: &VirtualServerSettings, selection: &Selection, source: Arc<ToolSet>) -> View {
    let mut chosen: BTreeMap<String, (Arc<RegisteredTool>, bool)> = BTreeMap::new();
    let mut collisions = Vec::new();
    let mut digest = std::collections::hash_map::DefaultHasher::new();
    for tool in source.iter() {
        let over = settings.overrides.get(tool.name());
        let entry = Entry { name: tool.name(), origin: tool.tool.origin().as_str(), upstream: tool.tool.upstream() };
        if over.is_none() && !selection.matches(&entry) {
            continue;
        }
        let served = match over {
            None => tool.clone(),
            Some(o) => match tool.served_as(|d| apply(o, d)) {
                Ok(served) => served,
                Err(why) => {
                    collisions.push(format!("{} is not served: servers.{name}.overrides.{}: {why}", tool.name(), tool.name()));
                    continue;
                }
            },
        };
        let renamed = over.is_some_and(|o| o.name.is_some());
        // What a client sees changes when the tool does (its entry, and so its serial, is
        // replaced in the registry only then) or when its override does.
        (served.name(), tool.serial, over.map(|o| format!("{o:?}"))).hash(&mut digest);
        match chosen.entry(served.name().to_owned()) {
            Slot::Vacant(v) => {
                v.insert((served, renamed));
            }
            Slot::Occupied(mut o) => {
                // The operator's override wins the name it gives: a tool that arrives later under
                // that name (through a glob, `source:` or `upstream:` selector) is left out, so
                // what a name on this server calls never changes behind the operator's back.
                // (Two overrides giving one name are refused with the settings.)
                let (kept, left) = if renamed { (served, o.get().0.clone()) } else { (o.get().0.clone(), served) };
                collisions.push(format!(
                    "{} from {} and {} from {} would both be served as {:?} on the server {name}, so {} is left out: give one of them another name (servers.{name}.overrides.<tool>.name) or change the selectors (servers.{name}.tools)",
                    left.canonical_name(),
                    source_of(&left),
                    kept.canonical_name(),
                    source_of(&kept),
                    kept.name(),
                    left.canonical_name(),
                ));
                if !Arc::ptr_eq(&o.get().0, &kept) {
                    o.insert((kept, renamed));
                }
            }
        }
    }
    let tools = ToolSet::of(chosen.into_values().map(|(t, _)| t).collect());
    View { source, tools: Arc::new(tools), digest: digest.finish(), collisions }
}

fn apply(over: &ServedAs, d: &mut ToolDescriptor) {
    if let Some(name) = &over.name {
        d.name.clone_from(name);
    }
    if let Some(title) = &over.title {
        d.title = Some(title.clone());
    }
    if let Some(description) = &over.description {
        d.description.clone_from(description);
    }
    let hints = [over.read_only_hint, over.destructive_hint, over.idempotent_hint, over.open_world_hint];
    if hints.iter().any(Option::is_some) {
        let mut a: ToolAnnotations = d.annotations.clone().unwrap_or_default();
        a.read_only_hint = over.read_only_hint.or(a.read_only_hint);
        a.destructive_hint = over.destructive_hint.or(a.destructive_hint);
        a.idempotent_hint = over.idempotent_hint.or(a.idempotent_hint);
        a.open_world_hint = over.open_world_hint.or(a.open_world_hint);
        d.annotations = Some(a);
    }
}
