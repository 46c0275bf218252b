//! The shape of a tool definition, as written in a tools file (TOML, YAML or JSON) or sent to the
//! admin API (JSON). Exactly one of `http`, `command` or `builtin` says what the tool runs;
//! everything else is common to all kinds.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::builtin::BuiltinSpec;
use super::command::CommandSpec;
use super::http::HttpSpec;
use crate::tool::{Icon, ToolAnnotations};

/// A tools file: `[[tools]]` tables (TOML), `tools:` and a list (YAML) or `{"tools": [...]}` (JSON).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsFile {
    #[serde(default)]
    pub tools: Vec<ToolDef>,
}

/// One declarative tool.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDef {
    /// `^[A-Za-z0-9_.-]{1,64}$`, unique across every source.
    pub name: String,
    pub title: Option<String>,
    /// What the tool does, when to use it, and a usage example: models choose tools by it.
    /// A `builtin` may leave it out and keep the built-in's own.
    pub description: Option<String>,
    /// JSON Schema (2020-12 unless `$schema` says draft-07) of the arguments; its root must be
    /// an object schema. A `builtin` may leave it out and keep the built-in's own.
    pub input_schema: Option<Value>,
    pub output_schema: Option<Value>,
    #[serde(default)]
    pub annotations: Option<Annotations>,
    #[serde(default)]
    pub icons: Vec<Icon>,
    /// Scopes a caller's token must hold to see and call the tool (besides the server's).
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Overrides `tools.default_timeout_secs`.
    pub timeout_secs: Option<u64>,
    /// Most calls of this tool running at once.
    pub concurrency: Option<usize>,
    /// Whether calls may (`optional`) or must (`required`) run as tasks, detached from their
    /// request; `forbidden` (the default) runs every call within its request.
    #[serde(default)]
    pub task_support: crate::protocol::task::TaskSupport,
    /// How long this tool's tasks and their results are kept when the client names no TTL
    /// (seconds; at most `tasks.max_ttl_secs`). Unset: `tasks.default_ttl_secs`.
    pub task_ttl_secs: Option<u64>,
    /// This tool's own rate limit per client (like `[limits.tools.<name>]`, which wins).
    pub rate_limit: Option<crate::limits::ToolLimit>,
    /// Keep the call's arguments in audit records, with these fields (and the server-wide
    /// `audit.redact_fields`) redacted. Unset: records carry an argument digest only.
    pub audit_arguments: Option<AuditArguments>,
    /// How results are rendered by default.
    #[serde(default)]
    pub response_format: ResponseFormat,
    /// Offer a `response_format` argument (`markdown` or `json`) so the model can choose.
    #[serde(default)]
    pub response_format_argument: bool,
    /// Overrides `tools.default_char_limit`.
    pub char_limit: Option<usize>,
    /// A disabled tool is validated but not served.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Free-form labels an operator can filter on; never shown to clients.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    pub http: Option<HttpSpec>,
    pub command: Option<CommandSpec>,
    pub builtin: Option<BuiltinSpec>,
}

fn yes() -> bool {
    true
}

/// Behaviour hints shown to clients (they are hints: clients must not trust them).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Annotations {
    #[serde(alias = "readOnlyHint")]
    pub read_only_hint: Option<bool>,
    #[serde(alias = "destructiveHint")]
    pub destructive_hint: Option<bool>,
    #[serde(alias = "idempotentHint")]
    pub idempotent_hint: Option<bool>,
    #[serde(alias = "openWorldHint")]
    pub open_world_hint: Option<bool>,
}

impl Annotations {
    pub(crate) fn to_tool(&self, title: Option<&str>) -> ToolAnnotations {
        ToolAnnotations {
            title: title.map(str::to_owned),
            read_only_hint: self.read_only_hint,
            destructive_hint: self.destructive_hint,
            idempotent_hint: self.idempotent_hint,
            open_world_hint: self.open_world_hint,
        }
    }
}

/// `audit_arguments = { redact = ["password"] }`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditArguments {
    #[serde(default)]
    pub redact: Vec<String>,
}

/// How a result is rendered: readable Markdown for people and models (the default), or JSON
/// for programs.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ResponseFormat {
    #[default]
    Markdown,
    Json,
}

impl ResponseFormat {
    /// The format a call asked for through its `response_format` argument, else `self`.
    pub fn for_call(self, offered_as_argument: bool, args: &serde_json::Map<String, Value>) -> Self {
        if !offered_as_argument {
            return self;
        }
        match args.get("response_format").and_then(Value::as_str) {
            Some("json") => Self::Json,
            Some("markdown") => Self::Markdown,
            _ => self,
        }
    }
}

/// Which kind a definition is, after checking that exactly one is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Http,
    Command,
    Builtin,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Command => "command",
            Self::Builtin => "builtin",
        }
    }
}

impl ToolDef {
    /// The kind, or the reason there is none (zero or several kinds given).
    pub fn kind(&self) -> Result<Kind, String> {
        let given: Vec<Kind> = [
            self.http.as_ref().map(|_| Kind::Http),
            self.command.as_ref().map(|_| Kind::Command),
            self.builtin.as_ref().map(|_| Kind::Builtin),
        ]
        .into_iter()
        .flatten()
        .collect();
        match given.as_slice() {
            [one] => Ok(*one),
            [] => Err("give exactly one of `http`, `command` or `builtin`: it says what the tool runs".into()),
            _ => Err(format!(
                "give exactly one of `http`, `command` or `builtin`, not {}",
                given.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(" and ")
            )),
        }
    }
}
