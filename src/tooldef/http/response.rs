//! Reading a response without ever holding more than the cap, telling JSON from text, and
//! rendering results and upstream errors for the model.

use http::StatusCode;
use serde_json::{Map, Value};

use super::secret::Redactor;

/// Why a body could not be read.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// Larger than the cap (by its `Content-Length` or while streaming).
    TooLarge(u64),
    Failed(reqwest::Error),
}

/// The whole body, stopping at `cap` bytes: a larger body is an error, not a truncation, so
/// the model never works from half a document.
pub(crate) async fn read_capped(response: &mut reqwest::Response, cap: u64) -> Result<Vec<u8>, ReadError> {
    if response.content_length().is_some_and(|n| n > cap) {
        return Err(ReadError::TooLarge(cap));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(ReadError::Failed)? {
        if (body.len() + chunk.len()) as u64 > cap {
            return Err(ReadError::TooLarge(cap));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// At most the first `limit` bytes of the body (for an error excerpt); the rest is not read.
pub(crate) async fn read_prefix(response: &mut reqwest::Response, limit: usize) -> Vec<u8> {
    let mut body = Vec::new();
    while body.len() < limit {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk[..chunk.len().min(limit - body.len())]),
            Ok(None) | Err(_) => break,
        }
    }
    body
}

/// A response body, by what it holds.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Body {
    Empty,
    Json(Value),
    Text(String),
    Binary { content_type: String, len: usize },
}

impl Body {
    /// Classifies a body by its `Content-Type` (JSON is also recognized without one).
    /// `Err` is a message for the model.
    pub fn classify(content_type: Option<&str>, bytes: Vec<u8>) -> Result<Self, String> {
        if bytes.is_empty() {
            return Ok(Self::Empty);
        }
        let essence = content_type.and_then(|c| c.split(';').next()).map(|c| c.trim().to_ascii_lowercase());
        let is_json = essence.as_deref().is_some_and(|e| e == "application/json" || e.ends_with("+json"));
        if is_json {
            return serde_json::from_slice(&bytes).map(Self::Json).map_err(|_| "The upstream answered with invalid JSON.".to_owned());
        }
        let texty = essence
            .as_deref()
            .is_none_or(|e| e.starts_with("text/") || e.ends_with("+xml") || matches!(e, "application/xml" | "application/javascript"));
        if essence.is_none()
            && let Ok(json) = serde_json::from_slice(&bytes)
        {
            return Ok(Self::Json(json));
        }
        match String::from_utf8(bytes) {
            Ok(text) if texty => Ok(Self::Text(text)),
            Ok(text) => Ok(Self::Binary { content_type: essence.unwrap_or_default(), len: text.len() }),
            Err(e) => {
                Ok(Self::Binary { content_type: essence.unwrap_or_else(|| "application/octet-stream".into()), len: e.into_bytes().len() })
            }
        }
    }
}

/// `structuredContent` must be an object: arrays become `{"items": [...]}`, scalars
/// `{"value": ...}`.
pub(crate) fn as_object(value: Value) -> Value {
    match value {
        Value::Object(_) => value,
        Value::Array(_) => Value::Object(Map::from_iter([("items".to_owned(), value)])),
        other => Value::Object(Map::from_iter([("value".to_owned(), other)])),
    }
}

/// The message for a response that is not a success. `body` is a redacted excerpt source.
pub(crate) fn upstream_error(status: StatusCode, body: &[u8], redactor: &Redactor, retry_after: Option<std::time::Duration>) -> String {
    let label = status_label(status);
    if status == StatusCode::TOO_MANY_REQUESTS {
        let when = retry_after.map_or_else(|| "later".to_owned(), |d| format!("in {} seconds", d.as_secs().max(1)));
        return format!("The upstream is rate limiting requests ({label}); try again {when}.");
    }
    if status.is_server_error() {
        return format!("The upstream failed with {label}; try again later.");
    }
    let excerpt = excerpt(body, redactor);
    let hint = match status.as_u16() {
        401 | 403 => " The server's credentials for it were refused or lack permission; this is not something the arguments can fix.",
        404 => " Check the identifiers in the arguments.",
        _ => "",
    };
    if status.is_redirection() {
        return format!("The upstream answered with {label}, a redirect this tool does not follow.");
    }
    match excerpt {
        Some(e) => format!("The upstream rejected the request with {label}.{hint} Its answer: {e}"),
        None => format!("The upstream rejected the request with {label}.{hint}"),
    }
}

fn status_label(status: StatusCode) -> String {
    match status.canonical_reason() {
        Some(reason) => format!("{} {reason}", status.as_u16()),
        None => status.as_u16().to_string(),
    }
}

/// Most characters of an upstream error body shown to the model.
const EXCERPT_CHARS: usize = 500;

/// A short, redacted, single-line excerpt of an error body (compact JSON when it is JSON).
fn excerpt(body: &[u8], redactor: &Redactor) -> Option<String> {
    let text = match serde_json::from_slice::<Value>(body) {
        Ok(json) => json.to_string(),
        Err(_) => String::from_utf8_lossy(body).split_whitespace().collect::<Vec<_>>().join(" "),
    };
    let text = redactor.text(&text);
    if text.is_empty() {
        return None;
    }
    Some(truncate(&text, EXCERPT_CHARS))
}

/// `text` cut to `max` characters, marked with `…` when cut.
pub(crate) fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

/// Rows and columns of a Markdown table at most, and characters per cell.
const MAX_ROWS: usize = 50;
const MAX_COLUMNS: usize = 8;
const MAX_CELL: usize = 80;

/// A compact Markdown rendering of a JSON value: an object's keys as a bullet list (arrays of
/// objects inside it as tables), an array of objects as a table of their scalar keys.
pub(crate) fn markdown(value: &Value) -> String {
    match value {
        Value::Object(map) => object_markdown(map),
        Value::Array(items) => array_markdown(items),
        other => cell(other, usize::MAX),
    }
}

fn object_markdown(map: &Map<String, Value>) -> String {
    let mut bullets = Vec::new();
    let mut sections = Vec::new();
    for (key, value) in map {
        match value {
            Value::Array(items) if items.iter().any(Value::is_object) => {
                sections.push(format!("**{key}** ({} items)\n\n{}", items.len(), array_markdown(items)));
            }
            other => bullets.push(format!("- **{key}**: {}", cell(other, 200))),
        }
    }
    let mut out = bullets.join("\n");
    for s in sections {
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(&s);
    }
    if out.is_empty() { "(empty)".into() } else { out }
}

fn array_markdown(items: &[Value]) -> String {
    if items.is_empty() {
        return "(no items)".into();
    }
    if !items.iter().any(Value::is_object) {
        let mut lines: Vec<String> = items.iter().take(MAX_ROWS).map(|v| format!("- {}", cell(v, 200))).collect();
        if items.len() > MAX_ROWS {
            lines.push(format!("- … and {} more", items.len() - MAX_ROWS));
        }
        return lines.join("\n");
    }
    let mut columns: Vec<&str> = Vec::new();
    for item in items.iter().take(MAX_ROWS).filter_map(Value::as_object) {
        for (k, v) in item {
            if !v.is_object() && !v.is_array() && !columns.contains(&k.as_str()) && columns.len() < MAX_COLUMNS {
                columns.push(k);
            }
        }
    }
    if columns.is_empty() {
        return items.iter().take(MAX_ROWS).map(|v| format!("- {}", cell(v, 200))).collect::<Vec<_>>().join("\n");
    }
    let mut out = format!("| {} |\n|{}", columns.join(" | "), " --- |".repeat(columns.len()));
    for item in items.iter().take(MAX_ROWS) {
        let row: Vec<String> = columns.iter().map(|c| item.get(*c).map_or_else(String::new, |v| cell(v, MAX_CELL))).collect();
        out.push_str(&format!("\n| {} |", row.join(" | ")));
    }
    if items.len() > MAX_ROWS {
        out.push_str(&format!("\n\n… and {} more rows", items.len() - MAX_ROWS));
    }
    out
}

/// One value on one line: strings as they are, others as compact JSON; pipes escaped.
fn cell(value: &Value, max: usize) -> String {
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Null => "—".into(),
        other => other.to_string(),
    };
    let one_line = text.replace(['\n', '\r'], " ").replace('|', "\\|");
    truncate(&one_line, max)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn bodies_are_classified_by_content_type() {
        assert_eq!(Body::classify(Some("application/json; charset=utf-8"), b"{\"a\":1}".to_vec()), Ok(Body::Json(json!({"a": 1}))));
        assert_eq!(Body::classify(Some("application/vnd.github+json"), b"[]".to_vec()), Ok(Body::Json(json!([]))));
        assert!(Body::classify(Some("application/json"), b"{oops".to_vec()).is_err());
        assert_eq!(Body::classify(Some("text/plain"), b"{\"a\":1}".to_vec()), Ok(Body::Text("{\"a\":1}".into())));
        assert_eq!(Body::classify(None, b"[1]".to_vec()), Ok(Body::Json(json!([1]))));
        assert_eq!(Body::classify(None, b"hello".to_vec()), Ok(Body::Text("hello".into())));
        assert!(matches!(Body::classify(Some("image/png"), vec![0x89, 0x50, 0xff]), Ok(Body::Binary { len: 3, .. })));
        assert_eq!(Body::classify(Some("application/json"), Vec::new()), Ok(Body::Empty));
    }

    #[test]
    fn markdown_renders_objects_as_bullets_and_object_arrays_as_tables() {
        let md = markdown(&json!({"name": "x", "count": 2, "items": [{"id": 1, "title": "a|b", "nested": {}}, {"id": 2, "extra": true}]}));
        assert!(md.contains("- **name**: x"), "{md}");
        assert!(md.contains("- **count**: 2"), "{md}");
        assert!(md.contains("**items** (2 items)"), "{md}");
        assert!(md.contains("| id | title | extra |"), "{md}");
        assert!(md.contains("| 1 | a\\|b |  |"), "{md}");
        let many: Vec<Value> = (0..60).map(|i| json!({"i": i})).collect();
        assert!(markdown(&Value::Array(many)).contains("… and 10 more rows"));
    }

    #[test]
    fn upstream_errors_say_what_happened_without_secrets() {
        let r = Redactor::default();
        let m = upstream_error(StatusCode::NOT_FOUND, br#"{"message":"Not Found"}"#, &r, None);
        assert!(m.contains("404 Not Found") && m.contains(r#"{"message":"Not Found"}"#), "{m}");
        let m = upstream_error(StatusCode::SERVICE_UNAVAILABLE, b"stack trace at 10.0.0.7", &r, None);
        assert!(m.contains("503 Service Unavailable") && m.contains("try again later") && !m.contains("10.0.0.7"), "{m}");
        let long = "x".repeat(5000);
        assert!(upstream_error(StatusCode::BAD_REQUEST, long.as_bytes(), &r, None).chars().count() < 700);
    }
}
