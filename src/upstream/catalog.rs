//! An upstream's tools as served here: its `tools/list` (every page), filtered by the allow
//! and deny lists, renamed with the prefix or an override, with the operator's title,
//! description, annotations, scopes, timeout and concurrency applied. Each tool is checked
//! alone, so one bad tool upstream (a name or schema toolgate cannot serve) is skipped and
//! reported, never the whole upstream.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::Link;
use super::error::UpstreamError;
use super::link::SkippedTool;
use super::peer::Peer;
use crate::tool::{Origin, Tool, ToolAnnotations, schema, validate_name};

/// Pages of `tools/list` followed at most (a cursor loop ends here).
const MAX_PAGES: usize = 100;
/// Entries (tools, resources, prompts) taken from one upstream's list at most.
const MAX_TOOLS: usize = 2000;

/// Every tool the upstream lists, following `nextCursor`.
pub async fn list_tools(peer: &Peer, timeout: Duration) -> Result<Vec<Value>, UpstreamError> {
    list_all(peer, "tools/list", "tools", timeout).await
}

/// Every entry of a paginated list method (`tools/list` → `tools`), following `nextCursor`,
/// at most [`MAX_TOOLS`] entries in [`MAX_PAGES`] pages.
pub async fn list_all(peer: &Peer, method: &str, key: &str, timeout: Duration) -> Result<Vec<Value>, UpstreamError> {
    let mut entries = Vec::new();
    let mut cursor: Option<String> = None;
    // Each page was decoded under the budget; the listing as a whole, which is kept, is held
    // to it too (100 pages of a nearly full budget each would otherwise all be kept).
    let mut left = peer.budget().values;
    for _ in 0..MAX_PAGES {
        let params = match &cursor {
            Some(c) => serde_json::json!({ "cursor": c }),
            None => serde_json::json!({}),
        };
        let page = peer.request(method, params, timeout).await?;
        let Some(listed) = page.get(key).and_then(Value::as_array) else {
            return Err(UpstreamError::Protocol(format!("{method} answered without a `{key}` array")));
        };
        left = left.checked_sub(listed.iter().map(|e| crate::untrusted::json::count(e, left)).sum()).ok_or_else(|| {
            UpstreamError::TooComplex(format!("lists {key} holding more than {} JSON values in all its pages", peer.budget().values))
        })?;
        entries.extend(listed.iter().cloned());
        if entries.len() > MAX_TOOLS {
            return Err(UpstreamError::Protocol(format!("the upstream lists more than {MAX_TOOLS} {key}")));
        }
        match page.get("nextCursor").and_then(Value::as_str) {
            Some(next) if cursor.as_deref() != Some(next) => cursor = Some(next.to_owned()),
            Some(_) => return Err(UpstreamError::Protocol(format!("{method} returned the same cursor twice"))),
            None => return Ok(entries),
        }
    }
    Err(UpstreamError::Protocol(format!("{method} has more than {MAX_PAGES} pages")))
}

/// The listed tools as toolgate tools, and the ones skipped with why.
pub fn build(link: &Arc<Link>, listed: &[Value]) -> (Vec<Tool>, Vec<SkippedTool>) {
    let (mut tools, mut skipped) = (Vec::new(), Vec::new());
    let invalid = |tool: String, detail: String| SkippedTool { tool, reason: "invalid", detail };
    for entry in listed {
        let Some(upstream_name) = entry.get("name").and_then(Value::as_str) else {
            skipped.push(invalid(String::new(), "a tool without a name".to_owned()));
            continue;
        };
        if !is_offered(link, upstream_name) {
            continue;
        }
        match build_one(link, upstream_name, entry) {
            Ok(tool) => tools.push(tool),
            // The name is the upstream's, and the reason may quote its schema: shown escaped
            // and capped wherever they go.
            Err(why) => skipped.push(invalid(crate::untrusted::escaped(upstream_name, 200).to_string(), super::history::bounded(&why))),
        }
    }
    (tools, skipped)
}

/// Whether the allow and deny lists let `name` be served (what they leave out is not reviewed
/// for approval either).
pub(super) fn is_offered(link: &Link, name: &str) -> bool {
    let s = &link.settings;
    (s.allow_tools.is_empty() || s.allow_tools.iter().any(|a| a == name)) && !s.deny_tools.iter().any(|d| d == name)
}

/// Warns, once per listing, of each `allow_tools` / `deny_tools` entry that names no tool the
/// upstream lists: a misspelt deny entry denies nothing, and an allow list of misspelt names
/// serves nothing, both without a word otherwise.
pub(super) fn warn_unmatched_filters(link: &Link, listed: &[Value]) {
    let s = &link.settings;
    let listed: std::collections::HashSet<&str> = listed.iter().filter_map(|t| t.get("name").and_then(Value::as_str)).collect();
    for (setting, entries) in [("allow_tools", &s.allow_tools), ("deny_tools", &s.deny_tools)] {
        for entry in entries.iter().filter(|e| !listed.contains(e.as_str())) {
            tracing::warn!(
                upstream = %link.name,
                entry = %entry,
                "upstreams.{}.{setting} names {entry:?}, which the upstream does not list: check the name (the upstream's own, before any prefix)",
                link.name
            );
        }
    }
}

fn build_one(link: &Arc<Link>, upstream_name: &str, entry: &Value) -> Result<Tool, String> {
    let s = &link.settings;
    let over = s.tools.get(upstream_name).cloned().unwrap_or_default();
    let name = over.name.clone().unwrap_or_else(|| format!("{}{upstream_name}", s.prefix_for(&link.name)));
    validate_name(&name)?;
    let input_schema = entry.get("inputSchema").cloned().unwrap_or_else(|| serde_json::json!({"type": "object"}));
    // The registry's own checks, so one tool can never fail the whole publishing there.
    schema::require_object_root(&input_schema, "inputSchema")?;
    schema::compile(&input_schema).map_err(|e| format!("inputSchema: {e}"))?;
    let header_params = schema::header_params(&input_schema);
    let description = over
        .description
        .clone()
        .or_else(|| entry.get("description").and_then(Value::as_str).filter(|d| !d.trim().is_empty()).map(str::to_owned))
        .unwrap_or_else(|| format!("{upstream_name} (from the upstream MCP server {})", link.name));
    let mut builder = Tool::builder(name, description).input_schema(input_schema);
    if let Some(output) = entry.get("outputSchema").filter(|o| o.is_object()) {
        schema::require_object_root(output, "outputSchema")?;
        schema::compile(output).map_err(|e| format!("outputSchema: {e}"))?;
        builder = builder.output_schema(output.clone());
    }
    let title = over.title.clone().or_else(|| entry.get("title").and_then(Value::as_str).map(str::to_owned));
    if let Some(title) = title {
        builder = builder.title(title);
    }
    let hints = annotations(entry.get("annotations"), &over);
    if hints != ToolAnnotations::default() {
        builder = builder.annotations(hints);
    }
    let timeout = over.timeout_ms.or(s.timeout_ms).map(Duration::from_millis).unwrap_or(link.default_timeout);
    builder = builder.timeout(timeout).scopes(s.scopes.iter().chain(&over.scopes).cloned());
    if let Some(n) = over.concurrency {
        builder = builder.concurrency(n);
    }
    if let Some(limit) = over.rate_limit.clone().or_else(|| s.rate_limit.clone()) {
        builder = builder.rate_limit(limit);
    }
    let fingerprint = fingerprint(&link.name, entry, &format!("{over:?}{s:?}"));
    builder = builder.provenance(format!("upstream={} tool={upstream_name}", link.name));
    let link = link.clone();
    let target = super::forward::Target { name: upstream_name.into(), header_params: header_params.into() };
    let target = Arc::new(target);
    Ok(builder.origin(Origin::Upstream, fingerprint).handler(move |ctx| super::forward::call(link.clone(), target.clone(), ctx)))
}

/// A stand-in for a tool the approved catalog does not let serve (held or rejected): never
/// listed or run, it carries the served name and scopes, so a caller who may use the tool is
/// told `why` instead of "Unknown tool" and one who may not learns nothing.
pub(super) fn stand_in(link: &Link, upstream_name: &str, why: String) -> Option<(Tool, String)> {
    if !is_offered(link, upstream_name) {
        return None;
    }
    let s = &link.settings;
    let over = s.tools.get(upstream_name).cloned().unwrap_or_default();
    let name = over.name.clone().unwrap_or_else(|| format!("{}{upstream_name}", s.prefix_for(&link.name)));
    validate_name(&name).ok()?;
    let refusal = why.clone();
    let tool = Tool::builder(name, format!("{upstream_name} (not served: held by the approved catalog)"))
        .scopes(s.scopes.iter().chain(&over.scopes).cloned())
        .origin(Origin::Upstream, 1)
        .handler(move |_| std::future::ready(Err(crate::tool::ToolError::Failed(refusal.clone()))));
    Some((tool, why))
}

/// The upstream's hints, with the operator's overrides on top. Hints are advisory to clients
/// either way (TL-09); the operator's word is the one shown.
fn annotations(upstream: Option<&Value>, over: &crate::config::upstreams::ToolOverride) -> ToolAnnotations {
    let mut a: ToolAnnotations = upstream.and_then(|v| serde_json::from_value(v.clone()).ok()).unwrap_or_default();
    a.read_only_hint = over.read_only_hint.or(a.read_only_hint);
    a.destructive_hint = over.destructive_hint.or(a.destructive_hint);
    a.idempotent_hint = over.idempotent_hint.or(a.idempotent_hint);
    a.open_world_hint = over.open_world_hint.or(a.open_world_hint);
    a
}

/// Changes when the upstream's listing or this upstream's settings do; never 0 (0 means
/// "always replace" to the registry).
fn fingerprint(upstream: &str, entry: &Value, settings: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    upstream.hash(&mut h);
    entry.to_string().hash(&mut h);
    settings.hash(&mut h);
    h.finish().max(1)
}
