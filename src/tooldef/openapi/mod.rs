//! `toolgate tools import openapi`: an OpenAPI 3.0 or 3.1 document (JSON or YAML) turned into
//! `http` tool definitions in toolgate's own format, for an operator to review and serve.
//!
//! One operation becomes one tool: its `operationId` (cleaned; generated from the method and
//! path when missing; duplicates numbered) is the name, its summary and description describe
//! it, its path, query and header parameters and its JSON request body's properties are the
//! input schema (references inlined, see [`schema`]), and its method and URL template make the
//! `http` section, with the document's first server as a `base_url` an environment variable
//! can move. Security schemes become secret headers read from environment variables (never a
//! value; an API key the scheme puts in the query string becomes a secret query parameter).
//! What cannot be expressed (a form or multipart body, a cookie, mutual TLS, a required
//! parameter in a style the templates cannot write) skips the
//! operation with the reason; an optional parameter that cannot be expressed is left out with
//! a warning. Every definition is compiled as `tools validate` would before it is written, so
//! the output validates once the secrets it names are allowed.
//!
//! The document is untrusted input. Its text reaches the output only through the serializers,
//! or quoted and escaped into a comment ([`text`]), and [`Import::render`] reads what it wrote
//! back through the tools-file loader and fails unless that is exactly the imported tools, so
//! no document text can add a definition (issue 26). What an import may cost is bounded by
//! [`Budgets`] ([`budget`]): how deep `$ref`s may chain (64 levels), how much one operation's
//! schemas may expand to once inlined (20,000 nodes, 1 MiB of text: beyond, the operation is
//! skipped with the reason), how much all imported tools together may hold (2,000,000 nodes,
//! 64 MiB of text: beyond, the import fails, since keeping only the operations that came first
//! would make the output depend on the document's order; the error says to import part of it
//! with `--include-tag` or `--include-operation`), and how long it may run (120 s). Names are
//! numbered in linear time however many operations share one ([`names::Taken`]).

mod budget;
mod names;
mod operation;
mod render;
mod schema;
mod text;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Serialize;
use serde_json::{Map, Value};

pub use budget::Budgets;
pub use render::OutputFormat;
pub use text::one_line;

use super::RawDef;
use crate::config::Settings;
use crate::tool::Origin;
use operation::Operation;

/// Longest description written; longer ones are cut (tools/list carries every description).
const MAX_DESCRIPTION: usize = 4000;
/// Longest title (an operation's summary) written.
const MAX_TITLE: usize = 200;
/// The methods an operation may have, in the order the specification lists them.
const METHODS: [&str; 8] = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];

/// What to import and how to name it.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Where the API lives, instead of the document's first server.
    pub base_url: Option<String>,
    /// Only operations with one of these tags (any case); with `include_operations`, either.
    pub include_tags: Vec<String>,
    /// Only these operations, by `operationId` (or the generated name).
    pub include_operations: Vec<String>,
    /// Put before every tool name (`gh_`), and names the environment variables.
    pub prefix: String,
    /// What the import may cost.
    pub budgets: Budgets,
}

/// What an import produced.
#[derive(Debug)]
pub struct Import {
    /// The document's `info.title` and `info.version`.
    pub title: String,
    pub version: String,
    pub tools: Vec<ImportedTool>,
    pub skipped: Vec<Skipped>,
    /// Parameters left out, filters that matched nothing.
    pub warnings: Vec<String>,
    /// Environment variables the tools read credentials from → what each must hold.
    pub secrets: BTreeMap<String, String>,
    /// The environment variable that moves every tool to another base URL, and its default.
    pub base_url: Option<(String, String)>,
}

/// An operation that was not imported, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// `GET /pets/{id} (getPet)`.
    pub operation: String,
    pub reason: String,
}

/// One generated definition, in the order its fields are written.
#[derive(Clone, Debug, Serialize)]
pub struct ImportedTool {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub description: String,
    pub annotations: ImportedAnnotations,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    pub input_schema: Value,
    pub http: ImportedHttp,
    /// Written above the definition in TOML and YAML (which secret to set).
    #[serde(skip)]
    pub comments: Vec<String>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct ImportedAnnotations {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    pub open_world_hint: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct ImportedHttp {
    pub method: String,
    /// A fixed URL, or `{ env = "..._BASE_URL", default = "https://..." }`.
    pub base_url: Value,
    pub url: String,
    /// Name → `"{argument}"`, or a secret (`{ env = "..." }`) for an API key in the query.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub query: BTreeMap<String, Value>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
}

/// Reads an OpenAPI document: JSON for `*.json`, YAML for `*.yaml`/`*.yml`, otherwise JSON if
/// it parses as JSON and YAML if not.
pub fn read_document(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let yaml = |text: &str| {
        crate::yaml::from_str::<Value>(text, crate::yaml::Budget::Document, &path.display().to_string())
            .map_err(|e| format!("{}: invalid YAML: {e}", path.display()))
    };
    match path.extension().and_then(|e| e.to_str()) {
        Some("json") => serde_json::from_str(&text).map_err(|e| format!("{}: invalid JSON: {e}", path.display())),
        Some("yaml" | "yml") => yaml(&text),
        _ => serde_json::from_str(&text).or_else(|_| yaml(&text)),
    }
}

/// Imports every operation `options` selects. `Err` when the document is not OpenAPI 3.x, has
/// no usable server, or the import is over one of its [`Budgets`]; problems of single
/// operations are in [`Import::skipped`].
pub fn import(doc: &Value, options: &ImportOptions, settings: &Settings) -> Result<Import, String> {
    let mut meter = budget::Meter::new(options.budgets);
    check_version(doc)?;
    let info = doc.get("info");
    let text = |v: Option<&Value>, key: &str| v.and_then(|i| i.get(key)).and_then(Value::as_str).unwrap_or("").trim().to_owned();
    let (title, version) = (text(info, "title"), text(info, "version"));
    let env_prefix = match options.prefix.trim_matches(['_', '-', '.']) {
        "" if title.is_empty() => "OPENAPI".to_owned(),
        "" => title.clone(),
        prefix => prefix.to_owned(),
    };
    let root_server = match &options.base_url {
        Some(url) => url.clone(),
        None => server_url(doc.get("servers")).unwrap_or_else(|| "/".into()),
    };
    if !is_absolute(&root_server) {
        return Err(format!(
            "the document's server is `{root_server}`, a relative URL (or none is given): pass --base-url with the API's address, e.g. --base-url https://api.example.com{}",
            if root_server == "/" { "" } else { root_server.as_str() }
        ));
    }
    let base_env = names::env_var(&[&env_prefix, "BASE_URL"]);
    let mut import = Import {
        title,
        version,
        tools: Vec::new(),
        skipped: Vec::new(),
        warnings: Vec::new(),
        secrets: BTreeMap::new(),
        base_url: Some((base_env.clone(), root_server.clone())),
    };
    let cx = Context { doc, env_prefix, root_server, base_env, settings };

    let mut taken = names::Taken::default();
    let mut matched_tags = BTreeSet::new();
    let mut matched_ops = BTreeSet::new();
    let empty = Map::new();
    let paths = doc.get("paths").and_then(Value::as_object).unwrap_or(&empty);
    for (path, item) in paths {
        let item = match item.get("$ref").and_then(Value::as_str) {
            Some(r) => match schema::resolve(doc, r) {
                Ok(target) => target,
                Err(e) => {
                    import.skipped.push(Skipped { operation: path.clone(), reason: e });
                    continue;
                }
            },
            None => item,
        };
        let Some(item) = item.as_object() else { continue };
        for method in METHODS {
            let Some(op) = item.get(method).and_then(Value::as_object) else { continue };
            meter.check_time()?;
            let operation_id = op.get("operationId").and_then(Value::as_str);
            let generated = names::tool_name(&options.prefix, operation_id, method, path);
            let tags: Vec<&str> = op.get("tags").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
            if !options.include_tags.is_empty() || !options.include_operations.is_empty() {
                let tag = options.include_tags.iter().find(|t| tags.iter().any(|g| g.eq_ignore_ascii_case(t)));
                let id = options.include_operations.iter().find(|o| Some(o.as_str()) == operation_id || **o == generated);
                if let Some(t) = tag {
                    matched_tags.insert(t.clone());
                }
                if let Some(o) = id {
                    matched_ops.insert(o.clone());
                }
                if tag.is_none() && id.is_none() {
                    continue;
                }
            }
            let label = match operation_id {
                Some(id) => format!("{} {path} ({id})", method.to_ascii_uppercase()),
                None => format!("{} {path}", method.to_ascii_uppercase()),
            };
            let mut warnings = Vec::new();
            let built = Operation { path, method, item, op, tags: &tags }.build(&cx, &meter, &mut warnings).and_then(|(tool, secrets)| {
                let tool = ImportedTool { name: taken.propose(&generated), ..tool };
                cx.self_check(&tool, &secrets).map(|definition| (tool, secrets, definition))
            });
            import.warnings.extend(warnings.into_iter().map(|w| format!("{label}: {w}")));
            match built {
                Ok((tool, secrets, definition)) => {
                    meter.keep(&definition)?;
                    taken.claim(&tool.name);
                    import.secrets.extend(secrets);
                    import.tools.push(tool);
                }
                Err(reason) => {
                    // Out of time inside the operation: the whole import is, not just this one.
                    meter.check_time()?;
                    import.skipped.push(Skipped { operation: label, reason });
                }
            }
        }
    }
    for tag in options.include_tags.iter().filter(|t| !matched_tags.contains(*t)) {
        import.warnings.push(format!("--include-tag {tag} matched no operation"));
    }
    for op in options.include_operations.iter().filter(|o| !matched_ops.contains(*o)) {
        import.warnings.push(format!("--include-operation {op} matched no operation"));
    }
    if !import.tools.iter().any(|t| t.http.base_url.get("env").is_some()) {
        import.base_url = None;
    }
    Ok(import)
}

fn check_version(doc: &Value) -> Result<(), String> {
    match doc.get("openapi").and_then(Value::as_str) {
        Some(v) if v.starts_with("3.") => Ok(()),
        Some(v) => Err(format!("OpenAPI {v} is not supported: the importer reads OpenAPI 3.0 and 3.1 documents")),
        None if doc.get("swagger").is_some() => Err(
            "this is a Swagger 2.0 document: convert it to OpenAPI 3 first (for example with the swagger2openapi npm package), then import that".into(),
        ),
        None => Err("not an OpenAPI document: it has no `openapi` version field".into()),
    }
}

fn is_absolute(url: &str) -> bool {
    let lower = url.to_ascii_lowercase();
    lower.starts_with("https://") || lower.starts_with("http://")
}

/// The first server's URL with its variables set to their defaults.
fn server_url(servers: Option<&Value>) -> Option<String> {
    let server = servers?.as_array()?.first()?;
    let mut url = server.get("url")?.as_str()?.trim().to_owned();
    if let Some(vars) = server.get("variables").and_then(Value::as_object) {
        for (name, var) in vars {
            if let Some(default) = var.get("default").and_then(Value::as_str) {
                url = url.replace(&format!("{{{name}}}"), default);
            }
        }
    }
    Some(url.trim_end_matches('/').to_owned()).map(|u| if u.is_empty() { "/".to_owned() } else { u })
}

/// What every operation shares.
struct Context<'a> {
    doc: &'a Value,
    /// Names the environment variables (`PETSTORE` → `PETSTORE_API_KEY`).
    env_prefix: String,
    root_server: String,
    base_env: String,
    settings: &'a Settings,
}

impl Context<'_> {
    /// Compiles the definition as `tools validate` would, with its own secrets and host
    /// allowed (those are the operator's decisions, not the document's); the definition as
    /// JSON when it compiles.
    fn self_check(&self, tool: &ImportedTool, secrets: &BTreeMap<String, String>) -> Result<Value, String> {
        let mut settings = self.settings.clone();
        settings.tools.http.secret_env.extend(secrets.keys().cloned());
        let base = tool.http.base_url.get("default").or(Some(&tool.http.base_url)).and_then(Value::as_str).unwrap_or_default();
        let env_base = tool.http.base_url.get("env").and_then(Value::as_str).and_then(|v| std::env::var(v).ok());
        for url in [Some(base.to_owned()), env_base].into_iter().flatten() {
            if let Some(host) = url::Url::parse(&url).ok().and_then(|u| u.host_str().map(str::to_owned)) {
                settings.tools.http.allow_hosts.push(host.trim_matches(['[', ']']).to_owned());
            }
        }
        let value = serde_json::to_value(tool).map_err(|e| e.to_string())?;
        let raw = RawDef { value, source: "import".into(), base_dir: ".".into() };
        super::compile(&raw, &settings, Origin::File).map(|_| raw.value).map_err(|errors| {
            format!("the definition would not validate: {}", errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))
        })
    }
}
