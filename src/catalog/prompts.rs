//! Prompts (`prompts/list`, `prompts/get`) and argument completion for them. Besides its own,
//! the catalog holds prompts another MCP server serves (an upstream, `source`): listed as that
//! server lists them (names prefixed), rendered through it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::future::BoxFuture;

use super::resources::Offer;
use parking_lot::RwLock;
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::bus::{Change, EventBus};
use crate::protocol::cursor;
use crate::tool::InputRequest;

/// A rendered prompt, or the inputs it needs from the client first (MRTR).
pub type Rendered = Result<Value, Vec<InputRequest>>;
type RenderFn = Arc<dyn Fn(&HashMap<String, String>, &Map<String, Value>) -> Rendered + Send + Sync>;
type CompleteFn = Arc<dyn Fn(&str, &str) -> Vec<String> + Send + Sync>;
/// Renders a prompt through another server: `(name as listed here, arguments)` to its
/// `prompts/get` result, or why not.
pub type RemoteGet = Arc<dyn Fn(String, Map<String, Value>) -> BoxFuture<'static, Result<Value, String>> + Send + Sync>;

/// Prompts of one other server, as it lists them (names already prefixed).
#[derive(Clone)]
pub struct RemotePrompts {
    pub prompts: Vec<Value>,
    pub get: RemoteGet,
    /// Scopes a caller must hold to see and get them (the upstream's own `scopes`).
    pub scopes: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct PromptArgument {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub required: bool,
}

impl PromptArgument {
    pub fn required(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self { name: name.into(), description: Some(description.into()), required: true }
    }

    pub fn optional(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self { name: name.into(), description: Some(description.into()), required: false }
    }
}

/// A prompt: its arguments, a renderer producing `{description?, messages}`, and an optional
/// completer for argument values.
#[derive(Clone)]
pub struct Prompt {
    pub name: String,
    pub title: Option<String>,
    pub description: String,
    pub arguments: Vec<PromptArgument>,
    render: RenderFn,
    complete: Option<CompleteFn>,
}

impl Prompt {
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        render: impl Fn(&HashMap<String, String>) -> Value + Send + Sync + 'static,
    ) -> Self {
        Self::with_inputs(name, description, move |args, _| Ok(render(args)))
    }

    /// A prompt that may need client input (elicitation, sampling, roots) before it renders:
    /// the renderer sees the client's `inputResponses` and returns what is still missing.
    pub fn with_inputs(
        name: impl Into<String>,
        description: impl Into<String>,
        render: impl Fn(&HashMap<String, String>, &Map<String, Value>) -> Rendered + Send + Sync + 'static,
    ) -> Self {
        Self {
            name: name.into(),
            title: None,
            description: description.into(),
            arguments: Vec::new(),
            render: Arc::new(render),
            complete: None,
        }
    }

    pub fn argument(mut self, arg: PromptArgument) -> Self {
        self.arguments.push(arg);
        self
    }

    /// Completion for argument values: `(argument name, prefix typed so far) -> suggestions`.
    pub fn completer(mut self, f: impl Fn(&str, &str) -> Vec<String> + Send + Sync + 'static) -> Self {
        self.complete = Some(Arc::new(f));
        self
    }

    fn listing(&self) -> Value {
        let mut v = json!({ "name": self.name, "description": self.description, "arguments": self.arguments });
        if let Some(t) = &self.title {
            v["title"] = json!(t);
        }
        v
    }
}

/// All prompts, sorted by name.
pub struct PromptCatalog {
    prompts: RwLock<Vec<Prompt>>,
    /// Other servers' prompts, by source.
    remote: RwLock<BTreeMap<String, RemotePrompts>>,
    /// Set when other servers may contribute prompts: the capability is offered meanwhile.
    remote_expected: AtomicBool,
    bus: Arc<dyn EventBus>,
}

impl std::fmt::Debug for PromptCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PromptCatalog").field("prompts", &self.prompts.read().len()).finish_non_exhaustive()
    }
}

impl PromptCatalog {
    pub fn new(bus: Arc<dyn EventBus>) -> Self {
        Self { prompts: RwLock::new(Vec::new()), remote: RwLock::default(), remote_expected: AtomicBool::new(false), bus }
    }

    pub fn is_empty(&self) -> bool {
        self.prompts.read().is_empty() && self.remote.read().is_empty()
    }

    /// Whether the prompt methods are offered: something is listed, or may be.
    pub fn is_offered(&self) -> bool {
        self.remote_expected.load(Ordering::Relaxed) || !self.is_empty()
    }

    /// Other servers may contribute prompts (upstreams are configured).
    pub fn expect_remote(&self) {
        self.remote_expected.store(true, Ordering::Relaxed);
    }

    /// Makes `remote` what `source` contributes (`None`: nothing); clients hear
    /// `list_changed` only when the listing changed.
    pub fn sync_source(&self, source: &str, remote: Option<RemotePrompts>) {
        let mut all = self.remote.write();
        let before = all.get(source).map(|r| r.prompts.clone());
        let after = remote.as_ref().map(|r| r.prompts.clone());
        match remote {
            Some(r) => all.insert(source.to_owned(), r),
            None => all.remove(source),
        };
        drop(all);
        if before != after {
            self.bus.publish(Change::PromptsListChanged);
        }
    }

    /// The other server that renders prompt `name` for this caller, if one lists it and no
    /// own prompt has it.
    pub fn remote_get(&self, name: &str, may: super::resources::MayUse<'_>) -> Option<RemoteGet> {
        if self.prompts.read().iter().any(|p| p.name == name) {
            return None;
        }
        let remote = self.remote.read();
        remote
            .iter()
            .find(|(source, r)| r.prompts.iter().any(|p| p["name"] == name && may(&Offer::listed(p, &r.scopes, Some(source)))))
            .map(|(_, r)| r.get.clone())
    }

    pub fn has_completions(&self) -> bool {
        self.prompts.read().iter().any(|p| p.complete.is_some())
    }

    pub fn add(&self, prompt: Prompt) {
        let mut list = self.prompts.write();
        list.retain(|p| p.name != prompt.name);
        list.push(prompt);
        list.sort_by(|a, b| a.name.cmp(&b.name));
        drop(list);
        self.bus.publish(Change::PromptsListChanged);
    }

    /// One page of every listing, own and other servers', by name (a name two sources list is
    /// listed once, as the first has it).
    pub fn list(
        &self,
        cursor: Option<&str>,
        size: usize,
        may: super::resources::MayUse<'_>,
    ) -> Result<(Vec<Value>, Option<String>), String> {
        let mut list: Vec<Value> = self.prompts.read().iter().map(Prompt::listing).collect();
        list.retain(|v| may(&Offer::listed(v, &[], None)));
        let mut seen: std::collections::HashSet<String> = list.iter().filter_map(|v| v["name"].as_str().map(str::to_owned)).collect();
        for (source, remote) in self.remote.read().iter() {
            let visible = |p: &&Value| may(&Offer::listed(p, &remote.scopes, Some(source)));
            list.extend(
                remote.prompts.iter().filter(visible).filter(|p| p["name"].as_str().is_some_and(|n| seen.insert(n.to_owned()))).cloned(),
            );
        }
        list.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
        let (page, next) = cursor::page(&list, |p| p["name"].as_str().unwrap_or_default(), "prompts", cursor, size)?;
        Ok((page.to_vec(), next))
    }

    /// Renders a prompt. `Err` names the unknown prompt or the missing argument; `Ok(Err)`
    /// lists the client inputs the prompt needs first.
    pub fn get(&self, name: &str, args: &HashMap<String, String>, responses: &Map<String, Value>) -> Result<Rendered, String> {
        let prompt = self.prompts.read().iter().find(|p| p.name == name).cloned().ok_or_else(|| format!("Unknown prompt: {name}"))?;
        if let Some(missing) = prompt.arguments.iter().find(|a| a.required && !args.contains_key(&a.name)) {
            return Err(format!("Prompt {name} needs the argument {:?}", missing.name));
        }
        Ok((prompt.render)(args, responses).map(|mut result| {
            if result.get("description").is_none() {
                result["description"] = json!(prompt.description);
            }
            result
        }))
    }

    /// Completion values for a prompt argument; `None` when the prompt is unknown.
    pub fn complete(&self, name: &str, argument: &str, value: &str) -> Option<Vec<String>> {
        let Some(prompt) = self.prompts.read().iter().find(|p| p.name == name).cloned() else {
            // Another server's prompt: known, without suggestions here.
            return self.remote_get(name, &|_: &Offer<'_>| true).map(|_| Vec::new());
        };
        Some(prompt.complete.map(|f| f(argument, value)).unwrap_or_default())
    }
}
