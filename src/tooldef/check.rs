//! Checking one definition before it is built: its name, its kind, the builtin it may
//! reconfigure, its description and input schema (with the `response_format` argument when
//! offered), its output schema and the settings every kind shares. Every problem is pushed
//! to the caller's list, so one reload reports all of them; only problems that leave nothing
//! to build stop the check.

use serde_json::{Value, json};

use super::builtin;
use super::error::FieldError;
use super::model::{Kind, ResponseFormat, ToolDef};
use crate::config::Settings;
use crate::tool::{Icon, Tool};

/// Longest timeout a definition may set: longer work belongs in a task, not a call.
const MAX_TIMEOUT_SECS: u64 = 3600;

/// What a checked definition builds on.
pub(super) struct Shape {
    pub kind: Kind,
    /// The builtin tool a `builtin` definition reconfigures.
    pub base: Option<Tool>,
    pub description: String,
    pub input_schema: Value,
}

/// Checks `def`; `None` when there is nothing to build (no kind, an unknown builtin, an input
/// schema that does not compile). Problems go to `errors` either way.
pub(super) fn shape(def: &ToolDef, settings: &Settings, errors: &mut Vec<FieldError>) -> Option<Shape> {
    if let Err(e) = crate::tool::validate_name(&def.name) {
        errors.push(FieldError::new("name", e));
    }
    let kind = def.kind().map_err(|e| errors.push(FieldError::new("definition", e))).ok()?;
    let base = match (&def.builtin, kind) {
        (Some(spec), Kind::Builtin) => Some(builtin::tool(spec, settings).map_err(|e| errors.push(e)).ok()?),
        _ => None,
    };
    let description = description(def, base.as_ref(), errors);
    let input_schema = input_schema(def, base.as_ref(), errors);
    let schema_ok = check_schema(&input_schema, "input_schema", errors);
    if let Some(out) = &def.output_schema {
        check_schema(out, "output_schema", errors);
    }
    check_common(def, settings, errors);
    // A command's structured result exists only in the JSON format (its Markdown result is
    // the program's output), and a declared output schema needs one on every success.
    if kind == Kind::Command && def.output_schema.is_some() && (def.response_format != ResponseFormat::Json || def.response_format_argument)
    {
        errors.push(FieldError::new(
            "output_schema",
            "a command tool with an output schema must use response_format = \"json\" without response_format_argument: its Markdown results carry no structured content",
        ));
    }
    schema_ok.then_some(Shape { kind, base, description, input_schema })
}

/// The definition's description, else the builtin's; a definition needs one.
fn description(def: &ToolDef, base: Option<&Tool>, errors: &mut Vec<FieldError>) -> String {
    match (&def.description, base) {
        (Some(d), _) if d.trim().is_empty() => {
            errors.push(FieldError::new("description", "must not be empty: say what the tool does, when to use it, and give an example"));
            String::new()
        }
        (Some(d), _) => d.clone(),
        (None, Some(base)) => base.descriptor().description.clone(),
        (None, None) => {
            errors.push(FieldError::new("description", "is required: say what the tool does, when to use it, and give an example"));
            String::new()
        }
    }
}

/// The definition's input schema (a builtin's is fixed), by default one that takes no
/// arguments, with the `response_format` argument when the definition offers it.
fn input_schema(def: &ToolDef, base: Option<&Tool>, errors: &mut Vec<FieldError>) -> Value {
    let mut schema = match (&def.input_schema, base) {
        (Some(_), Some(_)) => {
            errors.push(FieldError::new("input_schema", "a builtin tool's input schema is fixed; leave it out"));
            Value::Null
        }
        (Some(s), None) => s.clone(),
        (None, Some(base)) => base.descriptor().input_schema.clone(),
        (None, None) => json!({"type": "object", "additionalProperties": false}),
    };
    if def.response_format_argument && base.is_none() {
        add_response_format(&mut schema, def.response_format, errors);
    }
    schema
}

/// Adds the `response_format` argument unless the schema already declares one.
fn add_response_format(schema: &mut Value, default: ResponseFormat, errors: &mut Vec<FieldError>) {
    let Some(props) = schema.as_object_mut().map(|o| o.entry("properties").or_insert_with(|| json!({}))) else { return };
    let Some(props) = props.as_object_mut() else {
        errors.push(FieldError::new("input_schema.properties", "must be an object"));
        return;
    };
    let default = match default {
        ResponseFormat::Markdown => "markdown",
        ResponseFormat::Json => "json",
    };
    props.entry("response_format").or_insert_with(|| {
        json!({
            "type": "string",
            "enum": ["markdown", "json"],
            "default": default,
            "description": "\"markdown\" for readable text, \"json\" for structured data"
        })
    });
}

fn check_schema(schema: &Value, field: &str, errors: &mut Vec<FieldError>) -> bool {
    if let Err(e) = crate::tool::schema::require_object_root(schema, field) {
        errors.push(FieldError::new(field, e));
        return false;
    }
    if let Err(e) = crate::tool::schema::compile(schema) {
        errors.push(FieldError::new(field, e));
        return false;
    }
    true
}

fn check_common(def: &ToolDef, settings: &Settings, errors: &mut Vec<FieldError>) {
    if let Some(title) = &def.title
        && title.trim().is_empty()
    {
        errors.push(FieldError::new("title", "must not be empty when given"));
    }
    if let Some(secs) = def.timeout_secs
        && !(1..=MAX_TIMEOUT_SECS).contains(&secs)
    {
        errors.push(FieldError::new("timeout_secs", format!("must be between 1 and {MAX_TIMEOUT_SECS}")));
    }
    if def.concurrency == Some(0) {
        errors.push(FieldError::new("concurrency", "must be at least 1"));
    }
    if let Some(secs) = def.task_ttl_secs {
        if def.task_support == crate::protocol::task::TaskSupport::Forbidden {
            errors.push(FieldError::new("task_ttl_secs", "applies only to tasks: set task_support = \"optional\" or \"required\" too"));
        } else if secs == 0 || secs > settings.tasks.max_ttl_secs {
            errors.push(FieldError::new(
                "task_ttl_secs",
                format!("must be between 1 and {} (tasks.max_ttl_secs)", settings.tasks.max_ttl_secs),
            ));
        }
    }
    if let Some(chars) = def.char_limit
        && chars < 100
    {
        errors.push(FieldError::new("char_limit", "must be at least 100"));
    }
    for (i, scope) in def.scopes.iter().enumerate() {
        if scope.is_empty() || scope.chars().any(|c| c.is_whitespace() || c == '"' || c == '\\') {
            errors.push(FieldError::new(format!("scopes[{i}]"), "a scope is one non-empty word without spaces, quotes or backslashes"));
        }
    }
    if let Some(limit) = &def.rate_limit
        && let Err(e) = settings.limits.validate_tool("rate_limit", limit)
    {
        errors.push(FieldError::new("rate_limit", e));
    }
    for (i, icon) in def.icons.iter().enumerate() {
        check_icon(icon, &format!("icons[{i}]"), errors);
    }
    if let Some(audit) = &def.audit_arguments
        && audit.redact.iter().any(String::is_empty)
    {
        errors.push(FieldError::new("audit_arguments.redact", "field names must not be empty"));
    }
}

fn check_icon(icon: &Icon, field: &str, errors: &mut Vec<FieldError>) {
    let ok = icon.src.starts_with("https://") || icon.src.starts_with("data:image/");
    if !ok {
        errors.push(FieldError::new(format!("{field}.src"), "must be an https: URL or a data:image/ URI"));
    }
}
