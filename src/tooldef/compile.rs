//! Parsing definitions (TOML, YAML or JSON, a file or a directory of them) and compiling each into
//! a [`Tool`]. Every problem of every tool is collected before anything is refused, so one
//! reload reports all of them at once.

use std::collections::BTreeSet;
use std::hash::{Hash as _, Hasher as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::check::{self, Shape};
use super::command::CommandTool;
use super::error::{DefinitionErrors, FieldError, ToolErrors};
use super::http::HttpTool;
use super::model::{Kind, ResponseFormat, ToolDef};
use super::{BuildCtx, ToolsFile};
use crate::config::Settings;
use crate::tool::{Origin, Tool};

/// One definition as read, before compiling: the raw JSON (the fingerprint, and what the
/// admin API returns) and where it came from.
#[derive(Clone, Debug)]
pub struct RawDef {
    pub value: Value,
    /// `tools.toml`, `tools.d/github.toml`, `database`, …
    pub source: String,
    /// Relative paths in the definition resolve against this directory.
    pub base_dir: PathBuf,
}

impl RawDef {
    /// The definition's name as written, or `tools[<index>]` when it has none.
    pub fn label(&self, index: usize) -> String {
        self.value.get("name").and_then(Value::as_str).map_or_else(|| format!("tools[{index}]"), str::to_owned)
    }
}

/// The formats a tools file may be written in, told apart by the file's extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `*.toml`: `[[tools]]` tables.
    Toml,
    /// `*.json`: `{"tools": [...]}`.
    Json,
    /// `*.yaml` or `*.yml`: `tools:` and a list.
    Yaml,
}

impl Format {
    /// The format of a file named `path`, if it is a tools file's.
    pub fn of(path: &Path) -> Option<Self> {
        match path.extension().and_then(|e| e.to_str())? {
            "toml" => Some(Self::Toml),
            "json" => Some(Self::Json),
            "yaml" | "yml" => Some(Self::Yaml),
            _ => None,
        }
    }

    /// How a `tools` list is written in this format, for messages.
    fn list_hint(self) -> &'static str {
        match self {
            Self::Toml => "`[[tools]]` tables in TOML",
            Self::Json => "`\"tools\": [...]` in JSON",
            Self::Yaml => "`tools:` followed by `- name: ...` items in YAML",
        }
    }
}

/// Reads a tools file (`.toml`, `.yaml`/`.yml` or `.json`) or every such file in a directory
/// (sorted by name, hidden files skipped). Only the syntax is checked here; [`compile_all`]
/// checks the rest.
pub fn read_path(path: &Path) -> Result<Vec<RawDef>, DefinitionErrors> {
    let shown = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|e| DefinitionErrors::general(&shown, format!("cannot read: {e}")))?;
    if !meta.is_dir() {
        return read_file(path);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| DefinitionErrors::general(&shown, format!("cannot list the directory: {e}")))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|p| is_definition_file(p))
        .collect();
    files.sort();
    let mut all = Vec::new();
    for file in files {
        all.extend(read_file(&file)?);
    }
    Ok(all)
}

/// Whether a directory entry is a tools file: `*.toml`, `*.yaml`, `*.yml` or `*.json`, not
/// hidden (editors' swap files and Kubernetes' `..data` links are skipped).
pub fn is_definition_file(path: &Path) -> bool {
    let hidden = path.file_name().and_then(|n| n.to_str()).is_none_or(|n| n.starts_with('.'));
    !hidden && Format::of(path).is_some() && path.is_file()
}

fn read_file(path: &Path) -> Result<Vec<RawDef>, DefinitionErrors> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| DefinitionErrors::general(&shown, format!("cannot read: {e}")))?;
    let base_dir = path.parent().map(Path::to_owned).unwrap_or_default();
    // A file named explicitly with another extension is read as TOML, as it always was.
    parse_text_as(&text, Format::of(path).unwrap_or(Format::Toml), &shown, &base_dir)
}

/// Parses the text of a tools file: `[[tools]]` tables (TOML) or `{"tools": [...]}` (JSON).
pub fn parse_text(text: &str, json: bool, source: &str, base_dir: &Path) -> Result<Vec<RawDef>, DefinitionErrors> {
    parse_text_as(text, if json { Format::Json } else { Format::Toml }, source, base_dir)
}

/// Parses the text of a tools file written in `format`. Syntax errors name the line and
/// column; the definitions themselves are checked by [`compile_all`], the same for every format.
pub fn parse_text_as(text: &str, format: Format, source: &str, base_dir: &Path) -> Result<Vec<RawDef>, DefinitionErrors> {
    let root: Value = match format {
        Format::Json => serde_json::from_str(text).map_err(|e| DefinitionErrors::general(source, format!("invalid JSON: {e}")))?,
        // TOML errors carry the line, column and a caret under the problem.
        Format::Toml => {
            toml::from_str(text).map_err(|e| DefinitionErrors::general(source, format!("invalid TOML: {}", e.to_string().trim_end())))?
        }
        // So do YAML's (`serde-saphyr`), which also refuse alias bombs and deep nesting.
        Format::Yaml => crate::yaml::from_str(text, crate::yaml::Budget::Definitions, source)
            .map_err(|e| DefinitionErrors::general(source, format!("invalid YAML: {e}")))?,
    };
    let root = match root {
        Value::Object(root) => root,
        // An empty YAML file (or one holding only comments) has no tools, like an empty TOML file.
        Value::Null if format == Format::Yaml => serde_json::Map::new(),
        _ => return Err(DefinitionErrors::general(source, format!("the file must hold a `tools` list: {}", format.list_hint()))),
    };
    let mut root = root;
    if let Some(other) = root.keys().find(|k| *k != "tools") {
        return Err(DefinitionErrors::general(
            source,
            format!("unknown top-level key `{other}`: only `tools` (a list of tool definitions) is read"),
        ));
    }
    let tools = match root.remove("tools") {
        None => Vec::new(),
        Some(Value::Array(tools)) => tools,
        Some(_) => return Err(DefinitionErrors::general(source, format!("`tools` must be a list: {}", format.list_hint()))),
    };
    Ok(tools.into_iter().map(|value| RawDef { value, source: source.to_owned(), base_dir: base_dir.to_owned() }).collect())
}

/// Deserializes one definition, naming the field that does not fit.
pub fn parse_def(raw: &RawDef) -> Result<ToolDef, FieldError> {
    serde_path_to_error::deserialize(&raw.value).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { "definition".to_owned() } else { path };
        FieldError::new(field, e.into_inner().to_string())
    })
}

/// Problems one definition may report from parsing alone before the rest is not worth reading.
const MAX_PARSE_PROBLEMS: usize = 16;

/// Parses a definition, reporting every problem serde finds rather than the first: each member
/// found unknown or unreadable is noted and left out, and parsing goes on, until the definition
/// parses or a member it needs is missing (then `None`, with the name's own check added so a bad
/// name is never hidden behind the rest).
fn parse_collecting(raw: &RawDef) -> (Option<ToolDef>, Vec<FieldError>) {
    let mut value = raw.value.clone();
    let mut errors = Vec::new();
    let mut parsed = None;
    for _ in 0..MAX_PARSE_PROBLEMS {
        let e = match serde_path_to_error::deserialize::<_, ToolDef>(&value) {
            Ok(def) => {
                parsed = Some(def);
                break;
            }
            Err(e) => e,
        };
        let path = e.path().clone();
        let shown = path.to_string();
        let message = e.into_inner().to_string();
        // A member left out because it could not be read is now missing: nothing new.
        let parent = if shown == "." { "" } else { shown.as_str() };
        let consequence = message.starts_with("missing field") && errors.iter().any(|f: &FieldError| f.field.starts_with(parent));
        if !consequence {
            errors.push(FieldError::new(if shown == "." { "definition".to_owned() } else { shown }, message));
        }
        if consequence || !remove_at(&mut value, &path) {
            break;
        }
    }
    let name = raw.value.get("name").and_then(Value::as_str);
    if parsed.is_none()
        && let Some(Err(e)) = name.map(crate::tool::validate_name)
        && !errors.iter().any(|f| f.field == "name")
    {
        errors.insert(0, FieldError::new("name", e));
    }
    // Parsed only because problems were left out: the checks after parsing still run (they
    // find more), but the definition is not valid.
    (parsed, errors)
}

/// Removes the member `path` names from `value`; false when there is none.
fn remove_at(value: &mut Value, path: &serde_path_to_error::Path) -> bool {
    use serde_path_to_error::Segment;
    let segments: Vec<&Segment> = path.iter().collect();
    let Some((last, parents)) = segments.split_last() else { return false };
    let mut at = value;
    for segment in parents {
        at = match (segment, at) {
            (Segment::Map { key }, Value::Object(map)) => match map.get_mut(key) {
                Some(next) => next,
                None => return false,
            },
            (Segment::Seq { index }, Value::Array(items)) => match items.get_mut(*index) {
                Some(next) => next,
                None => return false,
            },
            _ => return false,
        };
    }
    match (last, at) {
        (Segment::Map { key }, Value::Object(map)) => map.remove(key).is_some(),
        _ => false,
    }
}

/// A tools file's [`ToolsFile`] shape, for callers that want the typed form.
pub fn parse_file(path: &Path) -> Result<ToolsFile, DefinitionErrors> {
    let raws = read_path(path)?;
    let mut tools = Vec::with_capacity(raws.len());
    let mut errors = Vec::new();
    for (i, raw) in raws.iter().enumerate() {
        match parse_def(raw) {
            Ok(def) => tools.push(def),
            Err(e) => errors.push(ToolErrors::new(raw.label(i), vec![e])),
        }
    }
    if errors.is_empty() {
        Ok(ToolsFile { tools })
    } else {
        Err(DefinitionErrors { origin: path.display().to_string(), general: None, tools: errors })
    }
}

/// One compiled definition: the tool (absent when the definition is disabled) and its name.
#[derive(Debug)]
pub struct Compiled {
    pub name: String,
    pub enabled: bool,
    pub kind: Kind,
    pub tool: Option<Tool>,
}

/// Compiles every definition, or reports every problem (including duplicate names). Nothing
/// is returned unless all are valid.
pub fn compile_all(raws: &[RawDef], settings: &Settings, origin: Origin, source: &str) -> Result<Vec<Compiled>, DefinitionErrors> {
    let mut compiled = Vec::with_capacity(raws.len());
    let mut errors = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, raw) in raws.iter().enumerate() {
        let label = raw.label(i);
        // A directory's problems name the file each definition is in.
        let file = (raw.source != source).then(|| raw.source.clone());
        if !seen.insert(label.clone()) {
            let twice = FieldError::new("name", format!("{label:?} is defined twice (in {})", raw.source));
            errors.push(ToolErrors { file, ..ToolErrors::new(label, vec![twice]) });
            continue;
        }
        match compile(raw, settings, origin) {
            Ok(c) => compiled.push(c),
            Err(errs) => errors.push(ToolErrors { file, ..ToolErrors::new(label, errs) }),
        }
    }
    if errors.is_empty() { Ok(compiled) } else { Err(DefinitionErrors { origin: source.to_owned(), general: None, tools: errors }) }
}

/// Compiles one definition into a tool, collecting every problem.
pub fn compile(raw: &RawDef, settings: &Settings, origin: Origin) -> Result<Compiled, Vec<FieldError>> {
    let (def, mut errors) = parse_collecting(raw);
    let Some(def) = def else { return Err(errors) };
    let Some(shape) = check::shape(&def, settings, &mut errors) else { return Err(errors) };
    let kind = shape.kind;
    match build(&def, shape, raw, settings) {
        Ok(tool) if errors.is_empty() => Ok(Compiled {
            name: def.name.clone(),
            enabled: def.enabled,
            kind,
            tool: def.enabled.then(|| finish(tool, &def, &raw.value, origin)),
        }),
        Ok(_) => Err(errors),
        Err(kind_errors) => {
            errors.extend(kind_errors);
            Err(errors)
        }
    }
}

/// The tool a checked definition describes: the builtin it reconfigures, or its kind (http,
/// command) built from its section, served with the definition's response format.
fn build(def: &ToolDef, shape: Shape, raw: &RawDef, settings: &Settings) -> Result<Tool, Vec<FieldError>> {
    let Shape { kind, base, description, input_schema } = shape;
    if let Some(base) = base {
        let name = def.name.clone();
        return Ok(base.reconfigure(|b| b.rename(name).description(description)));
    }
    let cx = BuildCtx {
        tool: &def.name,
        input_schema: &input_schema,
        idempotent: def.annotations.as_ref().and_then(|a| a.idempotent_hint).unwrap_or(false),
        base_dir: &raw.base_dir,
        settings: &settings.tools,
    };
    let (format, offered) = (def.response_format, def.response_format_argument);
    let builder = Tool::builder(def.name.clone(), description).input_schema(input_schema.clone());
    match kind {
        Kind::Http => def.http.as_ref().map(|spec| {
            HttpTool::build(spec, &cx).map(|t| serve(builder, t, format, offered, |t, ctx, f| async move { t.call(&ctx, f).await }))
        }),
        Kind::Command => def.command.as_ref().map(|spec| {
            CommandTool::build(spec, &cx).map(|t| serve(builder, t, format, offered, |t, ctx, f| async move { t.call(&ctx, f).await }))
        }),
        Kind::Builtin => None,
    }
    .unwrap_or_else(|| Err(vec![FieldError::new(kind.as_str(), "missing")]))
}

/// A built kind as the tool's handler: each call gets the response format it asked for.
fn serve<T, Fut>(
    builder: crate::tool::ToolBuilder,
    kind: T,
    format: ResponseFormat,
    offered: bool,
    call: fn(Arc<T>, crate::tool::ToolContext, ResponseFormat) -> Fut,
) -> Tool
where
    T: Send + Sync + 'static,
    Fut: std::future::Future<Output = crate::tool::ToolOutcome> + Send + 'static,
{
    let kind = Arc::new(kind);
    builder.handler(move |ctx| {
        let format = format.for_call(offered, ctx.arguments());
        call(kind.clone(), ctx, format)
    })
}

/// Applies the common settings to a built tool.
fn finish(tool: Tool, def: &ToolDef, raw: &Value, origin: Origin) -> Tool {
    tool.reconfigure(|b| configure(b, def, raw, origin))
}

fn configure(mut b: crate::tool::ToolBuilder, def: &ToolDef, raw: &Value, origin: Origin) -> crate::tool::ToolBuilder {
    if let Some(title) = &def.title {
        b = b.title(title.clone());
    }
    if let Some(out) = &def.output_schema {
        b = b.output_schema(out.clone());
    }
    if let Some(a) = &def.annotations {
        b = b.annotations(a.to_tool(def.title.as_deref()));
    }
    for icon in &def.icons {
        b = b.icon(icon.clone());
    }
    if let Some(secs) = def.timeout_secs {
        b = b.timeout(Duration::from_secs(secs));
    }
    if let Some(n) = def.concurrency {
        b = b.concurrency(n);
    }
    if def.task_support != crate::protocol::task::TaskSupport::Forbidden {
        b = b.task_support(def.task_support);
    }
    if let Some(secs) = def.task_ttl_secs {
        b = b.task_ttl(Duration::from_secs(secs));
    }
    if let Some(chars) = def.char_limit {
        b = b.char_limit(chars);
    }
    if let Some(audit) = &def.audit_arguments {
        b = b.audit_arguments_redacting(audit.redact.iter().cloned());
    }
    if let Some(limit) = &def.rate_limit {
        b = b.rate_limit(limit.clone());
    }
    b.scopes(def.scopes.iter().cloned()).origin(origin, fingerprint(raw))
}

/// A digest of the definition as written: equal definitions compile to equal tools, so a
/// reload leaves them (and their clients) alone. serde_json maps are sorted, so key order
/// in the file does not matter.
fn fingerprint(raw: &Value) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    raw.to_string().hash(&mut h);
    // 0 means "no definition" (tools from code), which always counts as changed.
    h.finish().max(1)
}
