//! The runtime tool registry: an immutable, name-sorted snapshot swapped atomically on every
//! change, so readers (`tools/list`, `tools/call`) never take a lock. Every change is
//! validated completely before it is published and announced on the event bus.

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use jsonschema::Validator;
use parking_lot::Mutex;
use serde_json::Value;

use super::{Origin, Tool, schema};
use crate::bus::{Change, EventBus};
use crate::protocol::cursor;

/// Longest tool name accepted; the spec allows 128 but the conformance suite checks 64.
const MAX_NAME_LEN: usize = 64;
/// The kind cursors of this list carry (see `catalog::cursor`).
const CURSOR_KIND: &str = "tools";

/// A tool with its compiled schemas and its pre-serialized listing entry.
pub struct RegisteredTool {
    pub tool: Tool,
    pub(crate) input: Validator,
    pub(crate) output: Option<Validator>,
    /// The `tools/list` entry, serialized once at registration.
    pub(crate) listing: Arc<Value>,
    /// This tool's own concurrency limit, when it has one (shared with its virtual servers'
    /// renamed copies: one limit, however many names it is served under).
    pub(crate) bulkhead: Option<Arc<super::bulkhead::Bulkhead>>,
    /// The name the default endpoint serves it under, when a virtual server renamed it: what
    /// scopes (`auth.tool_scopes`), rate limits and audit key on.
    canonical: Option<Arc<str>>,
    /// Arguments the client must mirror in `Mcp-Param-<suffix>` headers (SEP-2243):
    /// `(property, suffix)`, read once from the input schema's `x-mcp-header` marks.
    pub(crate) header_params: Vec<(String, String)>,
    /// This tool's metric handles, resolved on its first call.
    metrics: std::sync::OnceLock<crate::metrics::ToolMetrics>,
    /// Unique to this compiled entry: a changed tool is a new entry with a new serial.
    pub serial: u64,
}

impl std::fmt::Debug for RegisteredTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisteredTool").field("name", &self.tool.name()).finish_non_exhaustive()
    }
}

impl RegisteredTool {
    fn compile(tool: Tool) -> Result<Self, String> {
        let d = &tool.descriptor;
        validate_name(&d.name)?;
        if d.description.trim().is_empty() {
            return Err(format!("tool {:?}: description must not be empty", d.name));
        }
        schema::require_object_root(&d.input_schema, "inputSchema").map_err(|e| format!("tool {:?}: {e}", d.name))?;
        let input = schema::compile(&d.input_schema).map_err(|e| format!("tool {:?}: inputSchema: {e}", d.name))?;
        let output = match &d.output_schema {
            None => None,
            Some(s) => {
                schema::require_object_root(s, "outputSchema").map_err(|e| format!("tool {:?}: {e}", d.name))?;
                Some(schema::compile(s).map_err(|e| format!("tool {:?}: outputSchema: {e}", d.name))?)
            }
        };
        let listing = serde_json::to_value(d).map_err(|e| format!("tool {:?}: {e}", d.name))?;
        // A tool's own queue is as deep as its limit allows a burst to wait: 4 rounds.
        let bulkhead = tool.opts.concurrency.map(|n| Arc::new(super::bulkhead::Bulkhead::new(n, n.saturating_mul(4))));
        let header_params = schema::header_params(&d.input_schema);
        Ok(Self {
            tool,
            input,
            output,
            listing: Arc::new(listing),
            bulkhead,
            canonical: None,
            header_params,
            metrics: std::sync::OnceLock::new(),
            serial: next_serial(),
        })
    }

    pub fn name(&self) -> &str {
        self.tool.name()
    }

    /// This tool served under another name, title, description or hints (a virtual server's
    /// override): the same handler and settings, its own listing entry, checked as any tool.
    pub fn served_as(&self, change: impl FnOnce(&mut super::ToolDescriptor)) -> Result<Arc<Self>, String> {
        let mut tool = self.tool.clone();
        change(&mut tool.descriptor);
        let mut served = Self::compile(tool)?;
        served.bulkhead.clone_from(&self.bulkhead);
        served.canonical = Some(self.canonical_name().into());
        Ok(Arc::new(served))
    }

    /// The name the default endpoint serves this tool under (see `canonical`).
    pub fn canonical_name(&self) -> &str {
        self.canonical.as_deref().unwrap_or_else(|| self.name())
    }

    /// The handles `tools/call` records this tool's calls with.
    pub(crate) fn metrics(&self) -> &crate::metrics::ToolMetrics {
        self.metrics.get_or_init(|| crate::metrics::ToolMetrics::new(self.name()))
    }
}

/// Checks a tool name against `^[A-Za-z0-9_.-]{1,64}$`.
pub fn validate_name(name: &str) -> Result<(), String> {
    let ok_chars = name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if name.is_empty() || name.len() > MAX_NAME_LEN || !ok_chars {
        return Err(format!("invalid tool name {name:?}: use 1 to {MAX_NAME_LEN} characters from A-Z, a-z, 0-9, '_', '-' and '.'"));
    }
    Ok(())
}

/// One consistent view of all tools, sorted by name.
#[derive(Debug, Default)]
pub struct ToolSet {
    tools: Vec<Arc<RegisteredTool>>,
    index: HashMap<String, usize>,
    /// Whether any tool requires scopes of its own (lists then differ per caller).
    scoped: bool,
    /// Grows with every set the registry publishes: a later snapshot has a larger one.
    pub generation: u64,
}

impl ToolSet {
    fn from_sorted(tools: Vec<Arc<RegisteredTool>>) -> Self {
        let index = tools.iter().enumerate().map(|(i, t)| (t.name().to_owned(), i)).collect();
        let scoped = tools.iter().any(|t| !t.tool.opts.scopes.is_empty());
        Self { tools, index, scoped, generation: next_serial() }
    }

    /// A set of the given tools (any order; a later tool of an earlier one's name replaces it).
    pub fn of(tools: Vec<Arc<RegisteredTool>>) -> Self {
        let map: std::collections::BTreeMap<String, Arc<RegisteredTool>> = tools.into_iter().map(|t| (t.name().to_owned(), t)).collect();
        Self::from_sorted(map.into_values().collect())
    }

    pub fn get(&self, name: &str) -> Option<&Arc<RegisteredTool>> {
        self.index.get(name).map(|&i| &self.tools[i])
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether any tool requires scopes of its own, so `tools/list` differs per caller.
    pub fn has_scoped_tools(&self) -> bool {
        self.scoped
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<RegisteredTool>> {
        self.tools.iter()
    }

    /// One page of tools after `cursor`, with the cursor for the next page. The cursor names
    /// the last tool returned, so pages stay consistent while tools are added or removed.
    pub fn page(&self, cursor: Option<&str>, page_size: usize) -> Result<(&[Arc<RegisteredTool>], Option<String>), String> {
        cursor::page(&self.tools, |t| t.name(), CURSOR_KIND, cursor, page_size)
    }

    /// Like [`ToolSet::page`], over only the tools `keep` admits (per-caller visibility).
    pub fn page_filtered(
        &self,
        cursor: Option<&str>,
        page_size: usize,
        keep: impl Fn(&RegisteredTool) -> bool,
    ) -> Result<(Vec<&Arc<RegisteredTool>>, Option<String>), String> {
        let start = cursor::start(&self.tools, |t| t.name(), CURSOR_KIND, cursor)?;
        let mut visible = self.tools[start..].iter().filter(|t| keep(t));
        let page: Vec<&Arc<RegisteredTool>> = visible.by_ref().take(page_size.max(1)).collect();
        let more = visible.next().is_some();
        let next = if more { page.last().map(|t| cursor::encode(CURSOR_KIND, t.name())) } else { None };
        Ok((page, next))
    }
}

/// What [`ToolRegistry::sync_origin`] changed, by tool name.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SyncReport {
    pub added: Vec<String>,
    pub changed: Vec<String>,
    pub removed: Vec<String>,
}

impl SyncReport {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.changed.is_empty() && self.removed.is_empty()
    }
}

impl std::fmt::Display for SyncReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} added, {} changed, {} removed", self.added.len(), self.changed.len(), self.removed.len())
    }
}

/// Tools one source withdrew, and why.
type Withdrawn = (Vec<Arc<RegisteredTool>>, String);
/// Tools one source lists but may not serve, each with why.
type Held = Vec<(Arc<RegisteredTool>, String)>;

/// Numbers every compiled tool and every published set, never reused: what a virtual server's
/// view compares (an address could be reused once the old entry is freed).
static SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn next_serial() -> u64 {
    SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// The live registry.
pub struct ToolRegistry {
    current: ArcSwap<ToolSet>,
    /// Serializes writers so two concurrent changes cannot lose one another.
    write: Mutex<()>,
    bus: Arc<dyn EventBus>,
    /// Tools a source withdrew for now (an upstream server that lost its connection), by
    /// source, with why: a call gets a clear error instead of "Unknown tool".
    withdrawn: Mutex<HashMap<String, Withdrawn>>,
    /// Tools a source lists but may not serve (held for an operator's approval, or rejected),
    /// by source, each with the sentence a caller is told instead of "Unknown tool".
    held: Mutex<HashMap<String, Held>>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry").field("tools", &self.current.load().len()).finish()
    }
}

impl ToolRegistry {
    pub fn new(bus: Arc<dyn EventBus>) -> Self {
        let current = ArcSwap::from_pointee(ToolSet::default());
        Self { current, write: Mutex::new(()), bus, withdrawn: Mutex::default(), held: Mutex::default() }
    }

    /// The current snapshot; cheap, lock-free.
    pub fn snapshot(&self) -> Arc<ToolSet> {
        self.current.load_full()
    }

    /// Adds or replaces tools in one step. Nothing changes if any tool is invalid.
    pub fn upsert_all(&self, tools: impl IntoIterator<Item = Tool>) -> Result<(), String> {
        let compiled = tools.into_iter().map(|t| RegisteredTool::compile(t).map(Arc::new)).collect::<Result<Vec<_>, _>>()?;
        if compiled.is_empty() {
            return Ok(());
        }
        self.modify(|map| {
            for tool in compiled {
                map.insert(tool.name().to_owned(), tool);
            }
            true
        });
        Ok(())
    }

    /// Adds or replaces one tool.
    pub fn upsert(&self, tool: Tool) -> Result<(), String> {
        self.upsert_all([tool])
    }

    /// Removes a tool; returns whether it existed.
    pub fn remove(&self, name: &str) -> bool {
        self.modify(|map| map.remove(name).is_some())
    }

    /// Removes the tool of `tool`'s name if it is there, else adds `tool`: either way a real
    /// change that every listener hears about (the conformance and benchmark triggers).
    pub fn toggle(&self, tool: Tool) -> Result<(), String> {
        if self.remove(tool.name()) { Ok(()) } else { self.upsert(tool) }
    }

    /// Makes `tools` the whole set of tools from `origin` in one step: tools of that origin
    /// not in `tools` are removed, changed ones (by fingerprint) replaced, new ones added.
    /// Nothing changes, and nothing is announced, when any tool is invalid, when a name is
    /// already taken by another origin (served, or withdrawn for now by its source), or when
    /// nothing differs.
    pub fn sync_origin(&self, origin: Origin, tools: Vec<Tool>) -> Result<SyncReport, String> {
        let (report, taken) = self.sync(origin, tools, false)?;
        match taken.first() {
            Some((name, other)) => {
                Err(format!("tool name {name:?} is already taken by a tool from {}; {}", other.as_str(), other.clash_hint()))
            }
            None => Ok(report),
        }
    }

    /// Like [`Self::sync_origin`], but a tool whose name another origin holds is left out
    /// (and returned with that origin) instead of refusing the whole set, decided under the
    /// same lock as the change. `Err` only when a tool is invalid.
    pub fn sync_origin_leaving(&self, origin: Origin, tools: Vec<Tool>) -> Result<(SyncReport, Vec<(String, Origin)>), String> {
        self.sync(origin, tools, true)
    }

    fn sync(&self, origin: Origin, tools: Vec<Tool>, leave: bool) -> Result<(SyncReport, Vec<(String, Origin)>), String> {
        let compiled = tools.into_iter().map(|t| RegisteredTool::compile(t).map(Arc::new)).collect::<Result<Vec<_>, _>>()?;
        let mut report = SyncReport::default();
        let mut taken = Vec::new();
        self.modify(|map| {
            let held = |name: &str| self.held_elsewhere(map, name, origin);
            taken = compiled.iter().filter_map(|t| held(t.name()).map(|o| (t.name().to_owned(), o))).collect();
            if !taken.is_empty() && !leave {
                return false;
            }
            let incoming: HashMap<&str, &Arc<RegisteredTool>> =
                compiled.iter().filter(|t| !taken.iter().any(|(n, _)| n == t.name())).map(|t| (t.name(), t)).collect();
            let stale: Vec<String> = map
                .values()
                .filter(|t| t.tool.opts.origin == origin && !incoming.contains_key(t.name()))
                .map(|t| t.name().to_owned())
                .collect();
            for name in stale {
                map.remove(&name);
                report.removed.push(name);
            }
            for tool in incoming.values() {
                match map.get(tool.name()) {
                    Some(old) if old.tool.opts.fingerprint == tool.tool.opts.fingerprint && tool.tool.opts.fingerprint != 0 => continue,
                    Some(_) => report.changed.push(tool.name().to_owned()),
                    None => report.added.push(tool.name().to_owned()),
                }
                map.insert(tool.name().to_owned(), (*tool).clone());
            }
            report.added.sort();
            report.changed.sort();
            !report.is_empty()
        });
        Ok((report, taken))
    }

    /// The other origin that holds `name`: it serves it, or its source withdrew it for now
    /// (an upstream that lost its connection keeps its names).
    fn held_elsewhere(&self, map: &std::collections::BTreeMap<String, Arc<RegisteredTool>>, name: &str, origin: Origin) -> Option<Origin> {
        if let Some(t) = map.get(name) {
            return (t.tool.opts.origin != origin).then_some(t.tool.opts.origin);
        }
        let withdrawn = self.withdrawn.lock();
        withdrawn.values().flat_map(|(tools, _)| tools).find(|t| t.name() == name).map(|t| t.tool.opts.origin).filter(|o| *o != origin)
    }

    /// Records `tools` as withdrawn for now by `source`, for `reason` (replacing what that
    /// source withdrew before; an empty list clears it).
    pub fn set_withdrawn(&self, source: &str, tools: Vec<Arc<RegisteredTool>>, reason: String) {
        let mut withdrawn = self.withdrawn.lock();
        if tools.is_empty() {
            withdrawn.remove(source);
        } else {
            withdrawn.insert(source.to_owned(), (tools, reason));
        }
    }

    /// A tool not served now because its source withdrew it, and why.
    pub fn withdrawn(&self, name: &str) -> Option<(Arc<RegisteredTool>, String)> {
        let withdrawn = self.withdrawn.lock();
        withdrawn.values().find_map(|(tools, reason)| tools.iter().find(|t| t.name() == name).map(|t| (t.clone(), reason.clone())))
    }

    /// Records `tools` as listed by `source` but not served, each with why (replacing what that
    /// source had held; an empty list clears it). A tool that does not compile is left out.
    pub fn set_held(&self, source: &str, tools: Vec<(Tool, String)>) {
        let held: Vec<_> = tools.into_iter().filter_map(|(t, why)| RegisteredTool::compile(t).ok().map(|t| (Arc::new(t), why))).collect();
        let mut all = self.held.lock();
        if held.is_empty() {
            all.remove(source);
        } else {
            all.insert(source.to_owned(), held);
        }
    }

    /// A tool listed by its source but not served, and why, when no tool of its name serves.
    pub fn held(&self, name: &str) -> Option<(Arc<RegisteredTool>, String)> {
        let held = self.held.lock();
        held.values().flatten().find(|(t, _)| t.name() == name).map(|(t, why)| (t.clone(), why.clone()))
    }

    /// The origin of the tool called `name`, if there is one.
    pub fn origin_of(&self, name: &str) -> Option<Origin> {
        self.current.load().get(name).map(|t| t.tool.opts.origin)
    }

    fn modify(&self, change: impl FnOnce(&mut std::collections::BTreeMap<String, Arc<RegisteredTool>>) -> bool) -> bool {
        let _guard = self.write.lock();
        let current = self.current.load();
        let mut map: std::collections::BTreeMap<_, _> = current.tools.iter().map(|t| (t.name().to_owned(), t.clone())).collect();
        let changed = change(&mut map);
        if changed {
            self.current.store(Arc::new(ToolSet::from_sorted(map.into_values().collect())));
            self.bus.publish(Change::ToolsListChanged);
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::LocalBus;
    use crate::protocol::CallToolResult;
    use crate::tool::ToolError;

    fn tool(name: &str) -> Tool {
        Tool::builder(name, "test tool").handler(|_| async { Ok::<_, ToolError>(CallToolResult::text("ok")) })
    }

    fn registry() -> (ToolRegistry, Arc<LocalBus>) {
        let bus = Arc::new(LocalBus::default());
        (ToolRegistry::new(bus.clone()), bus)
    }

    #[test]
    fn sync_replaces_one_origin_and_reports_the_difference() {
        let (reg, bus) = registry();
        let mut rx = bus.subscribe();
        reg.upsert(tool("pack_tool")).expect("valid");
        let _ = rx.try_recv();
        let from_file = |name: &str, fp: u64| {
            Tool::builder(name, "file tool").origin(Origin::File, fp).handler(|_| async { Ok::<_, ToolError>(CallToolResult::text("ok")) })
        };
        let report = reg.sync_origin(Origin::File, vec![from_file("a", 1), from_file("b", 2)]).expect("valid");
        assert_eq!(report.added, ["a", "b"]);
        assert_eq!(rx.try_recv().ok(), Some(Change::ToolsListChanged));
        // The same definitions again: nothing changes and nobody is told.
        assert!(reg.sync_origin(Origin::File, vec![from_file("a", 1), from_file("b", 2)]).expect("valid").is_empty());
        assert!(rx.try_recv().is_err());
        let report = reg.sync_origin(Origin::File, vec![from_file("a", 9)]).expect("valid");
        assert_eq!((report.changed, report.removed), (vec!["a".to_owned()], vec!["b".to_owned()]));
        assert!(reg.snapshot().get("pack_tool").is_some(), "other origins are untouched");
        let err = reg.sync_origin(Origin::File, vec![from_file("pack_tool", 3)]).expect_err("name taken");
        assert!(err.contains("pack_tool") && err.contains("code"), "{err}");
        assert_eq!(reg.origin_of("a"), Some(Origin::File));
    }

    fn with_origin(name: &str, origin: Origin) -> Tool {
        Tool::builder(name, "t").origin(origin, 1).handler(|_| async { Ok::<_, ToolError>(CallToolResult::text("ok")) })
    }

    #[test]
    fn a_name_withdrawn_for_now_by_its_source_is_not_taken_by_another_origin() {
        let (reg, _) = registry();
        reg.sync_origin(Origin::Upstream, vec![with_origin("away", Origin::Upstream)]).expect("valid");
        let gone = reg.snapshot().get("away").cloned().into_iter().collect();
        reg.set_withdrawn("wiki", gone, "not connected".into());
        reg.sync_origin(Origin::Upstream, Vec::new()).expect("valid");
        let err = reg.sync_origin(Origin::File, vec![with_origin("away", Origin::File)]).expect_err("held");
        assert!(err.contains("\"away\"") && err.contains("upstream"), "{err}");
    }

    #[test]
    fn leaving_out_a_held_name_publishes_the_rest_and_says_which() {
        let (reg, _) = registry();
        reg.sync_origin(Origin::File, vec![with_origin("mine", Origin::File)]).expect("valid");
        let (report, left) = reg
            .sync_origin_leaving(Origin::Upstream, vec![with_origin("mine", Origin::Upstream), with_origin("free", Origin::Upstream)])
            .expect("valid");
        assert_eq!((report.added, left), (vec!["free".to_owned()], vec![("mine".to_owned(), Origin::File)]));
        assert_eq!(reg.origin_of("mine"), Some(Origin::File));
    }

    #[test]
    fn names_are_validated() {
        assert!(validate_name("get_weather.v2-beta").is_ok());
        for bad in ["", "has space", "comma,", &"x".repeat(65), "slash/"] {
            assert!(validate_name(bad).is_err(), "{bad:?} should be refused");
        }
        let (reg, _) = registry();
        assert!(reg.upsert(tool("bad name")).is_err());
        assert!(reg.snapshot().is_empty());
    }

    #[test]
    fn pages_are_sorted_and_complete() {
        let (reg, _) = registry();
        reg.upsert_all(["d", "b", "a", "c", "e"].map(tool)).expect("valid tools");
        let set = reg.snapshot();
        let mut seen = Vec::new();
        let mut cursor = None;
        loop {
            let (page, next) = set.page(cursor.as_deref(), 2).expect("valid cursor");
            seen.extend(page.iter().map(|t| t.name().to_owned()));
            match next {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        assert_eq!(seen, ["a", "b", "c", "d", "e"]);
        assert!(set.page(Some("garbage!"), 2).is_err());
    }

    #[test]
    fn changes_are_published_and_invalid_batches_change_nothing() {
        let (reg, bus) = registry();
        let mut rx = bus.subscribe();
        reg.upsert(tool("a")).expect("valid");
        assert_eq!(rx.try_recv().ok(), Some(Change::ToolsListChanged));
        let bad =
            Tool::builder("b", "x").input_schema(serde_json::json!({"type": "string"})).handler(|_| async { Ok(CallToolResult::text("")) });
        assert!(reg.upsert_all([tool("c"), bad]).is_err());
        assert_eq!(reg.snapshot().len(), 1);
        assert!(rx.try_recv().is_err());
        assert!(reg.remove("a"));
        assert!(!reg.remove("a"));
    }
}
