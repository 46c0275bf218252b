//! The MCP server proper: what each method does, independent of how the request arrived.
//! Transports build a [`RequestCtx`] (era, session, client capabilities, the channel back to
//! the client) and call [`McpServer::handle`].

mod catalog_methods;
pub mod mrtr;
mod tasks_methods;
mod tools_call;

pub use mrtr::StateSigner;

use std::sync::Arc;
use std::sync::atomic::AtomicU8;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::bus::EventBus;
use crate::catalog::{PromptCatalog, ResourceCatalog};
use crate::config::Settings;
use crate::protocol::jsonrpc::{Request, RpcError};
use crate::protocol::{Era, ProtocolVersion};
use crate::session::Session;
use crate::tool::{ClientCaps, ClientChannel, LogLevel, ToolRegistry, ToolSet};
use crate::virtual_servers::VirtualServer;

/// Everything a method handler may need to know about the request besides its params.
pub struct RequestCtx {
    pub version: ProtocolVersion,
    pub session: Option<Arc<Session>>,
    /// Who is calling, from where, in which request and trace.
    pub caller: crate::caller::Caller,
    pub caps: ClientCaps,
    /// Threshold for log notifications; `None` sends none.
    pub log_level: Option<Arc<AtomicU8>>,
    pub channel: Arc<dyn ClientChannel>,
    /// Cancelled when the client cancels this request (or the session/stream ends).
    pub cancel: CancellationToken,
    /// Where tool calls are recorded (`None`: the audit log is off).
    pub audit: Option<Arc<crate::audit::AuditLog>>,
}

impl RequestCtx {
    pub fn era(&self) -> Era {
        self.version.era()
    }
}

/// The server's offerings and settings.
pub struct McpServer {
    pub tools: ToolRegistry,
    /// The virtual servers, each serving its own view of `tools` (`src/virtual_servers`).
    pub servers: crate::virtual_servers::VirtualServers,
    pub resources: ResourceCatalog,
    pub prompts: PromptCatalog,
    pub bus: Arc<dyn EventBus>,
    pub settings: Arc<Settings>,
    pub state_signer: StateSigner,
    /// The server-wide limit on tool calls running at once.
    pub calls: crate::tool::bulkhead::Bulkhead,
    /// Every running request (see `transport::exchange::start`); shutdown waits on it.
    pub in_flight: tokio_util::task::TaskTracker,
    /// Cancelled when the shutdown grace period is (nearly) over: tool calls still running
    /// stop and answer that the server is shutting down.
    pub halt: CancellationToken,
    /// Durable tasks, once the store is connected (`None`: `tasks.enabled` is off, or a
    /// server without a database, as in `toolgate tools list`).
    tasks: std::sync::OnceLock<Arc<crate::tasks::Tasks>>,
    /// The upstreams whose tools a caller does not see (per-user upstreams with
    /// `unconnected = "hide"` the caller has not connected), by the caller's key.
    hidden: std::sync::OnceLock<HiddenUpstreams>,
    /// This server itself, for work that outlives a request (a task's run).
    me: std::sync::Weak<McpServer>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer").field("tools", &self.tools).finish_non_exhaustive()
    }
}

/// How long clients may cache a list result (`ttlMs`), modern era.
const LIST_TTL_MS: u64 = 60_000;
/// How long clients may cache a resource read.
const READ_TTL_MS: u64 = 30_000;

impl McpServer {
    pub fn new(settings: Arc<Settings>, bus: Arc<dyn EventBus>) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            tools: ToolRegistry::new(bus.clone()),
            servers: crate::virtual_servers::VirtualServers::new(&settings),
            resources: ResourceCatalog::new(bus.clone()),
            prompts: PromptCatalog::new(bus.clone()),
            bus,
            state_signer: StateSigner::new(settings.server.state_secret.as_ref().map(crate::config::Secret::expose)),
            calls: crate::tool::bulkhead::Bulkhead::new(settings.tools.max_concurrent_calls, settings.tools.max_queued_calls),
            in_flight: tokio_util::task::TaskTracker::new(),
            halt: CancellationToken::new(),
            tasks: std::sync::OnceLock::new(),
            hidden: std::sync::OnceLock::new(),
            me: me.clone(),
            settings,
        })
    }

    /// Turns tasks on (at start-up, once the store is connected).
    pub fn set_tasks(&self, tasks: Arc<crate::tasks::Tasks>) {
        let _ = self.tasks.set(tasks);
    }

    /// The task service, when tasks are on.
    pub fn tasks(&self) -> Option<&Arc<crate::tasks::Tasks>> {
        self.tasks.get()
    }

    pub fn page_size(&self) -> usize {
        self.settings.tools.page_size
    }

    pub fn default_timeout(&self) -> Duration {
        Duration::from_secs(self.settings.tools.default_timeout_secs)
    }

    /// What this server offers, declared only for what is really there (L-08).
    pub fn capabilities(&self, era: Era) -> Value {
        let mut caps = Map::new();
        caps.insert("tools".into(), json!({ "listChanged": true }));
        // Both eras: legacy by logging/setLevel, modern by the per-request `_meta` logLevel.
        caps.insert("logging".into(), json!({}));
        if self.resources.is_offered() {
            caps.insert("resources".into(), json!({ "subscribe": true, "listChanged": true }));
        }
        if self.prompts.is_offered() {
            caps.insert("prompts".into(), json!({ "listChanged": true }));
        }
        if self.prompts.has_completions() {
            caps.insert("completions".into(), json!({}));
        }
        if let Some((key, value)) = self.task_capability(era) {
            caps.insert(key.into(), value);
        }
        Value::Object(caps)
    }

    /// `serverInfo`: toolgate's, or a virtual server's name and title.
    pub fn server_info(&self, server: Option<&VirtualServer>) -> Value {
        let (name, title) = match server {
            None => (self.settings.server.name.as_str(), "toolgate"),
            Some(s) => (s.name.as_ref(), s.settings.title.as_deref().unwrap_or(&s.name)),
        };
        json!({
            "name": name,
            "title": title,
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Remote MCP tool server",
        })
    }

    fn instructions<'a>(&'a self, server: Option<&'a VirtualServer>) -> Option<&'a String> {
        match server {
            None => self.settings.server.instructions.as_ref(),
            Some(s) => s.settings.instructions.as_ref(),
        }
    }

    /// The `initialize` result for a negotiated version, at the default endpoint or a virtual server.
    pub fn initialize_result(&self, version: ProtocolVersion, server: Option<&VirtualServer>) -> Value {
        let mut result = json!({
            "protocolVersion": version.as_str(),
            "capabilities": self.capabilities(Era::Legacy),
            "serverInfo": self.server_info(server),
        });
        if let Some(instructions) = self.instructions(server) {
            result["instructions"] = json!(instructions);
        }
        result
    }

    /// The `server/discover` result (modern era).
    pub fn discover_result(&self, server: Option<&VirtualServer>) -> Value {
        let mut result = json!({
            // Only versions a stateless request can use; legacy ones need `initialize`.
            "supportedVersions": [ProtocolVersion::LATEST_MODERN.as_str()],
            "capabilities": self.capabilities(Era::Modern),
            "serverInfo": self.server_info(server),
        });
        if let Some(instructions) = self.instructions(server) {
            result["instructions"] = json!(instructions);
        }
        result
    }

    /// Serves one request. Methods the era or the declared capabilities do not include get
    /// -32601 (L-09).
    pub async fn handle(&self, req: &Request, ctx: &RequestCtx) -> Result<Value, RpcError> {
        let params = &req.params;
        let era = ctx.era();
        let mut result = match req.method.as_str() {
            "ping" => Ok(json!({})),
            "server/discover" if era == Era::Modern => Ok(self.discover_result(ctx.caller.server.as_deref())),
            "tools/list" => self.list_tools(params, ctx).await,
            "tools/call" => {
                let mrtr = match era {
                    Era::Modern => {
                        let name = params.get("name").and_then(Value::as_str).unwrap_or_default();
                        // Bound to the endpoint too: the same name on two servers may be two tools.
                        let scope = match ctx.caller.server_name() {
                            None => format!("tools/call:{name}"),
                            Some(server) => format!("tools/call:{server}/{name}"),
                        };
                        Some(Arc::new(self.state_signer.prepare(params, &scope)?))
                    }
                    Era::Legacy => None,
                };
                self.call_tool(params, ctx, mrtr).await
            }
            "logging/setLevel" if era == Era::Legacy => self.set_level(params, ctx),
            "resources/list" | "resources/templates/list" | "resources/read" if self.resources.is_offered() => {
                self.resource_method(&req.method, params, ctx).await
            }
            "resources/subscribe" | "resources/unsubscribe" if self.resources.is_offered() && era == Era::Legacy => {
                self.subscription_method(&req.method, params, ctx)
            }
            "prompts/list" | "prompts/get" if self.prompts.is_offered() => self.prompt_method(&req.method, params, ctx).await,
            "completion/complete" if self.prompts.has_completions() => self.complete(params, ctx),
            method if self.is_task_method(method, era) => self.task_method(method, params, ctx).await,
            other => Err(RpcError::method_not_found(other)),
        }?;
        if era == Era::Modern {
            self.decorate_modern(&req.method, &mut result, ctx);
        }
        Ok(result)
    }

    /// Modern results carry `resultType` and the server's identity; complete cacheable
    /// results say how long they may be cached (`ttlMs`, `cacheScope`).
    fn decorate_modern(&self, method: &str, result: &mut Value, ctx: &RequestCtx) {
        let Some(obj) = result.as_object_mut() else { return };
        let complete = obj.get("resultType").is_none_or(|t| t == "complete");
        obj.entry("resultType").or_insert_with(|| json!("complete"));
        if complete {
            match method {
                "server/discover" | "tools/list" | "resources/list" | "resources/templates/list" | "prompts/list" => {
                    obj.insert("ttlMs".into(), json!(LIST_TTL_MS));
                    // A tool list filtered by the caller's scopes must not be shared.
                    let per_caller = method == "tools/list"
                        && (!self.settings.auth.tool_scopes.is_empty()
                            || self.hidden.get().is_some()
                            || self.tool_set(&ctx.caller).has_scoped_tools());
                    obj.insert("cacheScope".into(), json!(if per_caller { "private" } else { "public" }));
                }
                "resources/read" => {
                    obj.insert("ttlMs".into(), json!(READ_TTL_MS));
                    obj.insert("cacheScope".into(), json!("private"));
                }
                _ => {}
            }
        }
        let meta = obj.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            let name = ctx.caller.server.as_deref().map_or(self.settings.server.name.as_str(), |s| s.name.as_ref());
            meta.insert("io.modelcontextprotocol/serverInfo".into(), json!({ "name": name, "version": env!("CARGO_PKG_VERSION") }));
        }
    }

    fn set_level(&self, params: &Map<String, Value>, ctx: &RequestCtx) -> Result<Value, RpcError> {
        let level = params
            .get("level")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params("logging/setLevel needs a string \"level\""))?;
        let level = LogLevel::parse(level).ok_or_else(|| {
            RpcError::invalid_params(format!(
                "Unknown log level {level:?}; use one of debug, info, notice, warning, error, critical, alert, emergency"
            ))
        })?;
        if let Some(session) = &ctx.session {
            session.set_log_level(level);
        }
        Ok(json!({}))
    }

    /// Whether the caller may see and call `tool`: it holds every scope configured for it.
    /// Without auth everyone may.
    pub(crate) fn may_use(&self, tool: &crate::tool::RegisteredTool, ctx: &RequestCtx) -> bool {
        let Some(principal) = &ctx.caller.principal else { return true };
        let configured =
            self.settings.auth.tool_scopes.get(tool.canonical_name()).is_none_or(|needed| needed.iter().all(|s| principal.has_scope(s)));
        configured && tool.tool.opts.scopes.iter().all(|s| principal.has_scope(s))
    }

    /// Whether the caller holds every one of `scopes` (always, without authentication).
    pub(crate) fn holds(&self, scopes: &[String], ctx: &RequestCtx) -> bool {
        ctx.caller.principal.as_ref().is_none_or(|p| scopes.iter().all(|s| p.has_scope(s)))
    }

    /// The tools the request's endpoint serves: the whole registry at the default endpoint, a
    /// virtual server's view of it elsewhere. Every method that reads tools reads them here.
    pub fn tool_set(&self, caller: &crate::caller::Caller) -> Arc<ToolSet> {
        let all = self.tools.snapshot();
        match &caller.server {
            None => all,
            Some(server) => server.view(&all).tools.clone(),
        }
    }

    /// Sets how to find the upstreams a caller does not see (the assembly, once the vault is on).
    pub fn set_hidden_upstreams(&self, hidden: HiddenUpstreams) {
        let _ = self.hidden.set(hidden);
    }

    async fn list_tools(&self, params: &Map<String, Value>, ctx: &RequestCtx) -> Result<Value, RpcError> {
        let cursor = cursor_param(params)?;
        let set = self.tool_set(&ctx.caller);
        let hidden = match (self.hidden.get(), &ctx.caller.principal) {
            (Some(hidden), Some(principal)) => hidden(principal.key()).await,
            _ => Vec::new(),
        };
        let shown = |t: &crate::tool::RegisteredTool| {
            self.may_use(t, ctx) && (hidden.is_empty() || t.tool.upstream().is_none_or(|u| !hidden.iter().any(|h| h == u)))
        };
        let (page, next) = set.page_filtered(cursor, self.page_size(), shown).map_err(RpcError::invalid_params)?;
        let tools: Vec<&Value> = page.iter().map(|t| t.listing.as_ref()).collect();
        let mut result = json!({ "tools": tools });
        if let Some(next) = next {
            result["nextCursor"] = json!(next);
        }
        Ok(result)
    }
}

/// The upstreams whose tools a caller (by [`crate::principal::Principal::key`]) does not see.
pub type HiddenUpstreams = Arc<dyn Fn(String) -> futures_util::future::BoxFuture<'static, Vec<String>> + Send + Sync>;

/// The optional `cursor` param: a string or absent.
pub(crate) fn cursor_param(params: &Map<String, Value>) -> Result<Option<&str>, RpcError> {
    match params.get("cursor") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(RpcError::invalid_params("\"cursor\" must be a string returned as nextCursor")),
    }
}
