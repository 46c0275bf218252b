//! The Rust API for tools: a [`Tool`] is a descriptor (name, schemas, annotations) plus an
//! async handler that receives a [`ToolContext`]. A tool fits in one file:
//!
//! ```
//! use serde_json::json;
//! use toolgate::protocol::CallToolResult;
//! use toolgate::tool::{Tool, ToolError};
//!
//! let tool = Tool::builder("calculate_sum", "Add two numbers. Example: {\"a\": 2, \"b\": 3} returns 5.")
//!     .input_schema(json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}))
//!     .read_only()
//!     .handler(|ctx| async move {
//!         #[derive(serde::Deserialize)]
//!         struct Args { a: f64, b: f64 }
//!         let Args { a, b } = ctx.args()?;
//!         Ok::<_, ToolError>(CallToolResult::text((a + b).to_string()))
//!     });
//! assert_eq!(tool.name(), "calculate_sum");
//! ```

pub mod bulkhead;
mod context;
mod registry;
pub mod schema;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value};

pub use context::{ClientCaps, ClientChannel, InputRequest, LogLevel, ToolContext, no_client};
pub(crate) use context::{ContextParts, Escalation, Mrtr, TaskAsk};
pub use registry::{RegisteredTool, SyncReport, ToolRegistry, ToolSet, validate_name};

use crate::protocol::CallToolResult;

/// Why a tool did not produce a result. Every variant but `Internal` carries a message meant
/// for the model; `Internal` is logged and replaced by a generic message.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("Invalid arguments: {0}")]
    InvalidArguments(String),
    #[error("{0}")]
    Failed(String),
    #[error("The request was cancelled")]
    Cancelled,
    /// Modern era: the tool needs input from the client first; the context holds the requests.
    #[error("Input required from the client")]
    InputRequired,
    /// The client's answer to an input request has the wrong shape (not an ElicitResult,
    /// CreateMessageResult or ListRootsResult as asked). Modern era: -32602 (the retry is
    /// malformed, never a complete result); legacy: an `isError` result.
    #[error("Invalid input response: {0}")]
    InvalidInputResponse(String),
    /// The tool needs a client capability the client did not declare (`sampling`,
    /// `elicitation`, `roots`). Modern era: -32021; legacy: an `isError` result.
    #[error("This tool needs the client capability {0:?}, which the client did not declare")]
    MissingClientCapability(&'static str),
    /// 2025-11-25: the user must visit a URL first (connect an account): a `-32042` error
    /// whose data lists the URL elicitations. Another era gets the message as an `isError`
    /// result.
    #[error("{message}")]
    UrlElicitationRequired { message: String, elicitations: serde_json::Value },
    #[error("internal tool failure")]
    Internal(#[from] anyhow::Error),
}

/// What a handler returns.
pub type ToolOutcome = Result<CallToolResult, ToolError>;

type BoxFuture = Pin<Box<dyn Future<Output = ToolOutcome> + Send + 'static>>;
type Handler = Arc<dyn Fn(ToolContext) -> BoxFuture + Send + Sync>;

/// Behaviour hints for clients (untrusted by them, TL-09).
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolAnnotations {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}

/// An icon for display (`src` is an https: or data: URI).
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Icon {
    pub src: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sizes: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub theme: Option<String>,
}

/// What `tools/list` shows for a tool.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDescriptor {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub description: String,
    pub input_schema: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<ToolAnnotations>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub icons: Option<Vec<Icon>>,
    /// `{"taskSupport": …}`: whether the tool may run as a task (2025-11-25 clients read it).
    pub execution: Value,
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
}

/// A tool: descriptor, handler and execution settings.
#[derive(Clone)]
pub struct Tool {
    pub(crate) descriptor: ToolDescriptor,
    pub(crate) handler: Handler,
    pub(crate) opts: ToolOptions,
}

/// How a tool is run, limited and audited: what [`ToolBuilder`] sets besides the descriptor.
#[derive(Clone, Debug, Default)]
pub(crate) struct ToolOptions {
    pub(crate) timeout: Option<Duration>,
    /// Most calls of this tool running at once (besides the server-wide limit).
    pub(crate) concurrency: Option<usize>,
    /// Most characters of text content returned; beyond it the text is truncated.
    pub(crate) char_limit: Option<usize>,
    /// Keep the call's arguments (with sensitive fields redacted) in its audit record.
    pub(crate) audit_arguments: bool,
    /// Argument fields redacted in audit records besides `audit.redact_fields`.
    pub(crate) redact: Vec<String>,
    /// Scopes a caller must hold to see and call this tool (besides `auth.tool_scopes`).
    pub(crate) scopes: Vec<String>,
    /// This tool's own rate limit, unless `[limits.tools.<name>]` sets one.
    pub(crate) rate_limit: Option<crate::limits::ToolLimit>,
    /// Where the tool comes from, and a digest of its definition (declarative tools), so a
    /// reload can tell an unchanged tool from a changed one.
    pub(crate) origin: Origin,
    pub(crate) fingerprint: u64,
    /// Whether calls may, or must, run as tasks.
    pub(crate) task_support: crate::protocol::task::TaskSupport,
    /// 2026-07-28: a call starts within its request (gathering input by MRTR) and becomes a
    /// task when the handler calls [`ToolContext::continue_as_task`].
    pub(crate) input_before_task: bool,
    /// How long this tool's tasks are kept when the client names no TTL.
    pub(crate) task_ttl: Option<Duration>,
    /// Where calls really go, for audit records (`upstream=<name> tool=<upstream's name>`).
    pub(crate) provenance: Option<Arc<str>>,
}

/// Where a tool comes from. Each source replaces only its own tools; a name belongs to one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    /// Compiled in: packs and tools registered through the Rust API.
    #[default]
    Code,
    /// The tools file (`tools.path`).
    File,
    /// The database, through the admin API.
    Database,
    /// An upstream MCP server (`[upstreams.<name>]`).
    Upstream,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Code => "code",
            Self::File => "file",
            Self::Database => "database",
            Self::Upstream => "upstream",
        }
    }

    /// What to change when a definition's name is already taken by a tool of this origin.
    pub fn clash_hint(self) -> &'static str {
        match self {
            Self::Code => {
                "rename this definition, or switch the built-in pack that serves the name off under [tools.packs] \
                 (the examples pack is on by default: examples = false, or TOOLGATE__TOOLS__PACKS__EXAMPLES=false)"
            }
            Self::File => "rename this definition, or remove the other from the tools file (tools.path)",
            Self::Database => "rename this definition, or delete the stored one (DELETE /admin/tools/{name})",
            Self::Upstream => "rename this definition, or give the upstream a prefix or deny_tools ([upstreams.<name>])",
        }
    }
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool").field("name", &self.descriptor.name).finish_non_exhaustive()
    }
}

impl Tool {
    /// Starts a tool definition. The description should say what the tool does and give a
    /// usage example: models choose tools by it.
    pub fn builder(name: impl Into<String>, description: impl Into<String>) -> ToolBuilder {
        ToolBuilder {
            descriptor: ToolDescriptor {
                name: name.into(),
                title: None,
                description: description.into(),
                input_schema: serde_json::json!({"type": "object", "additionalProperties": false}),
                output_schema: None,
                annotations: None,
                icons: None,
                execution: serde_json::json!({"taskSupport": "forbidden"}),
                meta: None,
            },
            opts: ToolOptions::default(),
        }
    }

    pub fn origin(&self) -> Origin {
        self.opts.origin
    }

    /// Where calls of this tool really go (an upstream server's tool), for audit records.
    pub fn provenance(&self) -> Option<&str> {
        self.opts.provenance.as_deref()
    }

    /// The upstream MCP server this tool's calls go to, if any (from its provenance).
    pub fn upstream(&self) -> Option<&str> {
        let rest = self.provenance()?.strip_prefix("upstream=")?;
        Some(rest.split_once(' ').map_or(rest, |(name, _)| name))
    }

    /// Scopes a caller must hold to see and call this tool.
    pub fn scopes(&self) -> &[String] {
        &self.opts.scopes
    }

    pub fn name(&self) -> &str {
        &self.descriptor.name
    }

    pub fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    /// The same tool with `change` applied to its settings; the handler is kept.
    pub(crate) fn reconfigure(self, change: impl FnOnce(ToolBuilder) -> ToolBuilder) -> Tool {
        change(ToolBuilder { descriptor: self.descriptor, opts: self.opts }).with_handler(self.handler)
    }

    /// Runs the handler directly, with none of the execution layer around it (no schema
    /// check, timeout, limits or audit): for tests and the command line.
    pub async fn invoke(&self, ctx: ToolContext) -> ToolOutcome {
        (self.handler)(ctx).await
    }
}

/// Builds a [`Tool`]; finish with [`ToolBuilder::handler`].
#[derive(Debug)]
pub struct ToolBuilder {
    descriptor: ToolDescriptor,
    opts: ToolOptions,
}

impl ToolBuilder {
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.descriptor.title = Some(title.into());
        self
    }

    pub fn input_schema(mut self, schema: Value) -> Self {
        self.descriptor.input_schema = schema;
        self
    }

    pub fn output_schema(mut self, schema: Value) -> Self {
        self.descriptor.output_schema = Some(schema);
        self
    }

    pub fn annotations(mut self, annotations: ToolAnnotations) -> Self {
        self.descriptor.annotations = Some(annotations);
        self
    }

    /// Marks the tool read-only, non-destructive and idempotent.
    pub fn read_only(self) -> Self {
        let mut a = self.descriptor.annotations.clone().unwrap_or_default();
        a.read_only_hint = Some(true);
        a.destructive_hint = Some(false);
        a.idempotent_hint = Some(true);
        self.annotations(a)
    }

    pub fn icon(mut self, icon: Icon) -> Self {
        self.descriptor.icons.get_or_insert_with(Vec::new).push(icon);
        self
    }

    pub fn meta(mut self, meta: Map<String, Value>) -> Self {
        self.descriptor.meta = Some(meta);
        self
    }

    /// Overrides the server-wide default call timeout for this tool.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.opts.timeout = Some(timeout);
        self
    }

    /// Whether a call may run as a task, detached from its request (`Optional`), must
    /// (`Required`), or never does (`Forbidden`, the default). Long work (reports, builds, slow
    /// upstream APIs) belongs in a task rather than a request held open.
    pub fn task_support(mut self, support: crate::protocol::task::TaskSupport) -> Self {
        self.opts.task_support = support;
        self.descriptor.execution = serde_json::json!({ "taskSupport": support.as_str() });
        self
    }

    /// How long this tool's tasks and their results are kept when the client names no TTL
    /// (still at most `tasks.max_ttl_secs`); unset: `tasks.default_ttl_secs`.
    pub fn task_ttl(mut self, ttl: Duration) -> Self {
        self.opts.task_ttl = Some(ttl);
        self
    }

    /// For clients of 2026-07-28 with the tasks extension: a call starts within its request,
    /// so the handler can gather input first (MRTR rounds, answered within the request), and
    /// becomes a task only when the handler calls [`ToolContext::continue_as_task`]. Other
    /// eras and clients run it as [`Self::task_support`] says.
    pub fn input_before_task(mut self) -> Self {
        self.opts.input_before_task = true;
        self
    }

    /// At most `n` calls of this tool run at once; others wait in the bounded queue.
    pub fn concurrency(mut self, n: usize) -> Self {
        self.opts.concurrency = Some(n.max(1));
        self
    }

    /// Overrides the server-wide limit on returned text characters for this tool.
    pub fn char_limit(mut self, chars: usize) -> Self {
        self.opts.char_limit = Some(chars);
        self
    }

    /// Keep this tool's arguments in its audit records, with the fields named in
    /// `audit.redact_fields` redacted. Off by default: records always carry a digest only.
    pub fn audit_arguments(mut self) -> Self {
        self.opts.audit_arguments = true;
        self
    }

    /// Like [`audit_arguments`](Self::audit_arguments), also redacting these fields.
    pub fn audit_arguments_redacting(mut self, fields: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.opts.audit_arguments = true;
        self.opts.redact.extend(fields.into_iter().map(Into::into));
        self
    }

    /// The caller's token must hold every one of these scopes to see and call the tool.
    pub fn scopes(mut self, scopes: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.opts.scopes.extend(scopes.into_iter().map(Into::into));
        self
    }

    /// A per-client rate of this tool's own (`[limits.tools.<name>]` overrides it).
    pub fn rate_limit(mut self, limit: crate::limits::ToolLimit) -> Self {
        self.opts.rate_limit = Some(limit);
        self
    }

    pub(crate) fn origin(mut self, origin: Origin, fingerprint: u64) -> Self {
        self.opts.origin = origin;
        self.opts.fingerprint = fingerprint;
        self
    }

    /// Where calls of this tool really go, named in their audit records.
    pub fn provenance(mut self, provenance: String) -> Self {
        self.opts.provenance = Some(provenance.into());
        self
    }

    pub(crate) fn rename(mut self, name: String) -> Self {
        self.descriptor.name = name;
        self
    }

    pub(crate) fn description(mut self, description: String) -> Self {
        self.descriptor.description = description;
        self
    }

    pub fn handler<F, Fut>(self, handler: F) -> Tool
    where
        F: Fn(ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ToolOutcome> + Send + 'static,
    {
        self.with_handler(Arc::new(move |ctx| Box::pin(handler(ctx))))
    }

    fn with_handler(self, handler: Handler) -> Tool {
        Tool { descriptor: self.descriptor, handler, opts: self.opts }
    }
}
