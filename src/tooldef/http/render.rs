//! Turning a successful response into the tool's result: the `structured` pointer, the
//! MiniJinja `text` template (compiled once, run sandboxed with a fuel budget), pagination,
//! and the Markdown or JSON rendering.

use http::{HeaderMap, StatusCode};
use minijinja::value::Serde;
use minijinja::{Environment, context};
use serde_json::{Map, Value, json};

use super::pagination::{self, Pagination, is_pointer};
use super::response::{Body, as_object, markdown};
use super::secret::Redactor;
use super::spec::ResponseSpec;
use crate::protocol::{CallToolResult, Content};
use crate::tool::ToolError;
use crate::tooldef::{BuildCtx, FieldError, ResponseFormat};

/// The name the text template is stored under.
const TEXT: &str = "text";
/// Instructions a text template may run per rendering: ample for formatting a page of
/// results, a stop for a runaway loop.
const FUEL: u64 = 200_000;
/// The names a text template can use.
const SCOPE: [&str; 4] = ["response", "result", "args", "status"];

/// How a successful response becomes the result.
#[derive(Debug)]
pub(crate) struct Renderer {
    pointer: Option<String>,
    text: Option<Environment<'static>>,
}

impl Renderer {
    pub fn build(spec: &ResponseSpec, cx: &BuildCtx<'_>) -> Result<Self, Vec<FieldError>> {
        let mut errors = Vec::new();
        if let Some(p) = &spec.structured
            && !is_pointer(p)
        {
            errors.push(FieldError::new(
                "http.response.structured",
                "a JSON pointer starts with `/` (e.g. \"/items\"), or is empty for the whole response",
            ));
        }
        let mut text = None;
        if let Some(source) = &spec.text {
            let mut env = Environment::new();
            env.set_fuel(Some(FUEL));
            match env.add_template_owned(TEXT, source.clone()) {
                Ok(()) => {
                    if let Err(e) = check_names(&env, cx) {
                        errors.push(FieldError::new("http.response.text", e));
                    }
                    text = Some(env);
                }
                Err(e) => errors.push(FieldError::new("http.response.text", format!("the template does not compile: {e}"))),
            }
        }
        if errors.is_empty() { Ok(Self { pointer: spec.structured.clone().filter(|p| !p.is_empty()), text }) } else { Err(errors) }
    }

    /// The result for a successful response.
    pub fn result(&self, body: Body, call: &Call<'_>) -> Result<CallToolResult, ToolError> {
        match body {
            Body::Empty => Ok(CallToolResult::text(format!("Done: the upstream answered {} with no content.", call.status))),
            Body::Binary { content_type, len } => Ok(CallToolResult::text(format!(
                "The upstream answered with {len} bytes of {content_type}, which this tool cannot show as text."
            ))),
            Body::Text(text) => {
                let text = call.redactor.text(&text);
                let rendered = match call.format {
                    ResponseFormat::Markdown => self.render_text(&Value::String(text.clone()), &Value::String(text.clone()), call),
                    ResponseFormat::Json => None,
                };
                Ok(CallToolResult::text(rendered.unwrap_or(text)))
            }
            Body::Json(mut response) => {
                call.redactor.json(&mut response);
                self.json_result(response, call)
            }
        }
    }

    fn json_result(&self, response: Value, call: &Call<'_>) -> Result<CallToolResult, ToolError> {
        let mapped = match &self.pointer {
            Some(p) => response
                .pointer(p)
                .cloned()
                .ok_or_else(|| ToolError::Failed(format!("The upstream's response has no `{p}`, so there is nothing to return.")))?,
            None => response.clone(),
        };
        let structured = match call.pagination {
            Some(p) => p.envelope(mapped.clone(), &response, call.headers, call.args),
            None => as_object(mapped.clone()),
        };
        let text = match call.format {
            ResponseFormat::Json => serde_json::to_string_pretty(&structured).unwrap_or_default(),
            ResponseFormat::Markdown => {
                let mut text = self.render_text(&response, &mapped, call).unwrap_or_else(|| markdown(&mapped));
                if call.pagination.is_some() {
                    text.push_str("\n\n");
                    text.push_str(&pagination::footer(&structured));
                }
                text
            }
        };
        Ok(CallToolResult {
            content: vec![Content::text(call.redactor.text(&text))],
            structured_content: Some(structured),
            ..Default::default()
        })
    }

    /// The text template's output, or `None` without one or when it fails (logged; the
    /// default rendering is used instead, so the model still gets the data).
    fn render_text(&self, response: &Value, result: &Value, call: &Call<'_>) -> Option<String> {
        let template = self.text.as_ref()?.get_template(TEXT).ok()?;
        let ctx = context! {
            response => Serde(response),
            result => Serde(result),
            args => Serde(call.args),
            status => call.status.as_u16(),
        };
        match template.render(ctx) {
            Ok(text) => Some(text),
            Err(error) => {
                tracing::warn!(tool = call.tool, %error, "http tool: the response text template failed; using the default rendering");
                None
            }
        }
    }
}

/// Refuses template names outside [`SCOPE`] and `args.<field>` the input schema lacks.
fn check_names(env: &Environment<'static>, cx: &BuildCtx<'_>) -> Result<(), String> {
    let template = env.get_template(TEXT).map_err(|e| e.to_string())?;
    let mut unknown = Vec::new();
    let mut undeclared = Vec::new();
    for name in template.undeclared_variables(true) {
        let mut parts = name.splitn(3, '.');
        let root = parts.next().unwrap_or_default();
        if !SCOPE.contains(&root) {
            unknown.push(root.to_owned());
        } else if root == "args"
            && let Some(field) = parts.next()
            && !cx.has_property(field)
        {
            undeclared.push(field.to_owned());
        }
    }
    unknown.sort();
    unknown.dedup();
    undeclared.sort();
    if let Some(name) = unknown.first() {
        return Err(format!("the template uses `{name}`; it can use only {}", SCOPE.map(|s| format!("`{s}`")).join(", ")));
    }
    if let Some(field) = undeclared.first() {
        return Err(format!("the template uses `args.{field}`, which the input schema does not declare"));
    }
    Ok(())
}

/// What rendering a result needs to know about the call.
#[derive(Debug)]
pub(crate) struct Call<'a> {
    pub tool: &'a str,
    pub status: StatusCode,
    pub headers: &'a HeaderMap,
    pub args: &'a Map<String, Value>,
    pub format: ResponseFormat,
    pub redactor: &'a Redactor,
    pub pagination: Option<&'a Pagination>,
}

/// The result of a `HEAD` request: its status and the headers worth knowing.
pub(crate) fn head_result(status: StatusCode, headers: &HeaderMap) -> CallToolResult {
    let wanted = ["content-type", "content-length", "last-modified", "etag", "location"];
    let mut found = Map::new();
    let mut lines = vec![format!("The upstream answered {status}.")];
    for name in wanted {
        if let Some(v) = headers.get(name).and_then(|v| v.to_str().ok()) {
            found.insert(name.to_owned(), json!(v));
            lines.push(format!("- **{name}**: {v}"));
        }
    }
    CallToolResult {
        content: vec![Content::text(lines.join("\n"))],
        structured_content: Some(json!({"status": status.as_u16(), "headers": found})),
        ..Default::default()
    }
}
