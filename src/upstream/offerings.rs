//! What an upstream offers besides tools: its resources, resource templates and prompts,
//! listed in toolgate's catalogs under the upstream's name prefix (URIs unchanged, so links in
//! its tool results still resolve) and read or rendered through its connection. An upstream
//! whose calls run as each caller (token exchange) offers tools only: a resource read here has
//! no caller to act as.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::Link;
use super::catalog::list_all;
use super::peer::Peer;
use crate::catalog::prompts::RemotePrompts;
use crate::catalog::resources::RemoteResources;

/// What an upstream offers besides tools, as it listed them (before the approved catalog).
#[derive(Default)]
pub(super) struct Listing {
    /// Its resources and resource templates, when it has resources.
    pub resources: Option<(Vec<Value>, Vec<Value>)>,
    /// Its prompts, when it has prompts.
    pub prompts: Option<Vec<Value>>,
    /// Kinds left out because listing them failed, with why.
    pub problems: Vec<String>,
}

/// What an upstream offers besides tools, ready for the catalogs.
pub(super) struct Offerings {
    pub resources: Option<RemoteResources>,
    pub prompts: Option<RemotePrompts>,
}

/// Lists the upstream's resources and prompts (where its capabilities say it has them); a
/// list that fails leaves that kind out and says why.
pub(super) async fn list(link: &Arc<Link>, peer: &Peer, capabilities: &Value) -> Listing {
    let mut listing = Listing::default();
    let per_caller = link.users.is_some();
    let timeout = Duration::from_millis(link.settings.connect_timeout_ms.max(5_000));
    if capabilities.get("resources").is_some() && !per_caller {
        match list_all(peer, "resources/list", "resources", timeout).await {
            // Templates are optional even for a server with resources.
            Ok(listed) => {
                let templates = list_all(peer, "resources/templates/list", "resourceTemplates", timeout).await.unwrap_or_default();
                let listed = listed.into_iter().filter(|r| r["uri"].is_string()).collect();
                listing.resources = Some((listed, templates.into_iter().filter(|t| t["uriTemplate"].is_string()).collect()));
            }
            Err(e) => listing.problems.push(format!("resources: {e}")),
        }
    }
    if capabilities.get("prompts").is_some() && !per_caller {
        match list_all(peer, "prompts/list", "prompts", timeout).await {
            Ok(listed) => listing.prompts = Some(listed),
            Err(e) => listing.problems.push(format!("prompts: {e}")),
        }
    }
    listing
}

/// The catalogs' view of what may be served of a listing (the approved catalog chose).
pub(super) fn build(link: &Arc<Link>, resources: Option<(Vec<Value>, Vec<Value>)>, prompts_listed: Option<Vec<Value>>) -> Offerings {
    let prefix = link.settings.prefix_for(&link.name);
    Offerings {
        resources: resources.map(|(listed, templates)| self::resources(link, &prefix, listed, templates)),
        prompts: prompts_listed.map(|listed| prompts(link, &prefix, listed)),
    }
}

fn prefixed(mut entry: Value, prefix: &str) -> Value {
    if let Some(name) = entry.get("name").and_then(Value::as_str) {
        entry["name"] = json!(format!("{prefix}{name}"));
    }
    entry
}

fn resources(link: &Arc<Link>, prefix: &str, listed: Vec<Value>, templates: Vec<Value>) -> RemoteResources {
    let link = link.clone();
    RemoteResources {
        resources: listed.into_iter().map(|r| prefixed(r, prefix)).collect(),
        templates: templates.into_iter().map(|t| prefixed(t, prefix)).collect(),
        scopes: link.settings.scopes.clone(),
        read: Arc::new(move |uri| {
            let link = link.clone();
            Box::pin(async move {
                let peer = link.peer().ok_or_else(|| format!("the upstream MCP server {} is not connected", link.name))?;
                let timeout = link.settings.timeout_ms.map_or(link.default_timeout, Duration::from_millis);
                let read = peer.request("resources/read", json!({ "uri": uri }), timeout).await;
                read.map(|r| r.get("contents").cloned().unwrap_or_else(|| json!([])))
                    .map_err(|e| format!("the upstream MCP server {}: {e}", link.name))
            })
        }),
    }
}

fn prompts(link: &Arc<Link>, prefix: &str, listed: Vec<Value>) -> RemotePrompts {
    let mut upstream_names = HashMap::new();
    let mut prompts = Vec::new();
    for prompt in listed {
        let Some(name) = prompt.get("name").and_then(Value::as_str).map(str::to_owned) else { continue };
        upstream_names.insert(format!("{prefix}{name}"), name);
        prompts.push(prefixed(prompt, prefix));
    }
    let scopes = link.settings.scopes.clone();
    let link = link.clone();
    let upstream_names = Arc::new(upstream_names);
    RemotePrompts {
        prompts,
        scopes,
        get: Arc::new(move |served: String, arguments: Map<String, Value>| {
            let (link, names) = (link.clone(), upstream_names.clone());
            Box::pin(async move {
                let name = names.get(&served).ok_or_else(|| format!("Unknown prompt: {served}"))?;
                let peer = link.peer().ok_or_else(|| format!("the upstream MCP server {} is not connected", link.name))?;
                let timeout = link.settings.timeout_ms.map_or(link.default_timeout, Duration::from_millis);
                let got = peer.request("prompts/get", json!({ "name": name, "arguments": arguments }), timeout).await;
                got.map_err(|e| e.to_string())
                    .and_then(super::modern::settled)
                    .map_err(|e| format!("the upstream MCP server {}: {e}", link.name))
            })
        }),
    }
}
