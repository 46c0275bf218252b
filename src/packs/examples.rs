//! The `examples` pack: small, useful tools done properly, as patterns for writing your own.

mod countdown;

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::config::ToolSettings;
use crate::protocol::content::{Annotations, Role};
use crate::protocol::{CallToolResult, Content};
use crate::server::McpServer;
use crate::tool::{Tool, ToolError};

/// Largest CSV file the analysis tool reads.
const MAX_CSV_BYTES: u64 = 20 * 1024 * 1024;
/// Distinct values tracked per text column before it is reported as high-cardinality.
const MAX_DISTINCT: usize = 1000;

pub fn install(server: &McpServer, settings: &ToolSettings) -> Result<(), String> {
    server.tools.upsert_all([
        calculate_sum(),
        get_current_time(),
        echo(),
        report_progress_steps(),
        countdown::countdown(),
        analyze_csv(settings.csv_dir.clone()),
    ])
}

pub(crate) fn calculate_sum() -> Tool {
    Tool::builder(
        "calculate_sum",
        "Add two numbers and return the sum. Example: {\"a\": 2, \"b\": 3} returns 5. Use for exact arithmetic instead of estimating.",
    )
    .title("Calculate sum")
    .input_schema(json!({
        "type": "object",
        "properties": {
            "a": { "type": "number", "description": "First addend" },
            "b": { "type": "number", "description": "Second addend" }
        },
        "required": ["a", "b"],
        "additionalProperties": false
    }))
    .output_schema(json!({
        "type": "object",
        "properties": { "sum": { "type": "number" } },
        "required": ["sum"]
    }))
    .read_only()
    .handler(|ctx| async move {
        #[derive(Deserialize)]
        struct Args {
            a: f64,
            b: f64,
        }
        let Args { a, b } = ctx.args()?;
        let sum = a + b;
        if !sum.is_finite() {
            return Err(ToolError::Failed("The sum is too large to represent; use smaller numbers".into()));
        }
        Ok(CallToolResult {
            content: vec![Content::text(format_number(sum))],
            structured_content: Some(json!({ "sum": sum })),
            ..Default::default()
        })
    })
}

/// Whole numbers print without a fractional part ("5", not "5.0").
fn format_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 { format!("{}", n as i64) } else { n.to_string() }
}

pub(crate) fn get_current_time() -> Tool {
    Tool::builder(
        "get_current_time",
        "Return the current date and time in UTC. Example: {} returns \"2026-11-21T10:15:00Z\"; {\"format\": \"unix\"} returns seconds since 1970.",
    )
    .title("Current time")
    .input_schema(json!({
        "type": "object",
        "properties": { "format": { "type": "string", "enum": ["rfc3339", "unix"], "default": "rfc3339" } },
        "additionalProperties": false
    }))
    .annotations(crate::tool::ToolAnnotations { read_only_hint: Some(true), destructive_hint: Some(false), idempotent_hint: Some(false), open_world_hint: Some(false), title: None })
    .handler(|ctx| async move {
        let now = time::OffsetDateTime::now_utc();
        let text = match ctx.arguments().get("format").and_then(Value::as_str) {
            Some("unix") => now.unix_timestamp().to_string(),
            _ => now.format(&time::format_description::well_known::Rfc3339).map_err(|e| ToolError::Internal(e.into()))?,
        };
        Ok(CallToolResult::text(text))
    })
}

pub(crate) fn echo() -> Tool {
    Tool::builder(
        "echo",
        "Return the given text unchanged, for checking a connection end to end. Example: {\"text\": \"héllo\"} returns \"héllo\".",
    )
    .title("Echo")
    .input_schema(json!({
        "type": "object",
        "properties": { "text": { "type": "string", "maxLength": 10000 } },
        "required": ["text"],
        "additionalProperties": false
    }))
    .read_only()
    .handler(|ctx| async move {
        let text = ctx.arguments().get("text").and_then(Value::as_str).unwrap_or_default().to_owned();
        let annotations = Annotations { audience: Some(vec![Role::User, Role::Assistant]), priority: Some(0.5), last_modified: None };
        Ok(CallToolResult::new(vec![Content::text(text).with_annotations(annotations)]))
    })
}

fn report_progress_steps() -> Tool {
    Tool::builder(
        "report_progress_steps",
        "Run a simulated job of N steps, reporting progress after each one; shows how long-running tools report progress and honour cancellation. Example: {\"steps\": 3, \"delay_ms\": 100}.",
    )
    .title("Progress demo")
    .input_schema(json!({
        "type": "object",
        "properties": {
            "steps": { "type": "integer", "minimum": 1, "maximum": 100 },
            "delay_ms": { "type": "integer", "minimum": 0, "maximum": 5000, "default": 100 }
        },
        "required": ["steps"],
        "additionalProperties": false
    }))
    .read_only()
    .handler(|ctx| async move {
        #[derive(Deserialize)]
        struct Args {
            steps: u32,
            #[serde(default = "default_delay")]
            delay_ms: u64,
        }
        fn default_delay() -> u64 {
            100
        }
        let Args { steps, delay_ms } = ctx.args()?;
        for step in 1..=steps {
            ctx.sleep(Duration::from_millis(delay_ms)).await?;
            ctx.progress(f64::from(step), Some(f64::from(steps)), Some(&format!("Step {step} of {steps}"))).await;
        }
        Ok(CallToolResult::text(format!("Completed {steps} steps")))
    })
}

pub(crate) fn analyze_csv(dir: PathBuf) -> Tool {
    Tool::builder(
        "analyze_csv",
        "Summarize a CSV file from the server's data directory: row count and, per column, numeric statistics (min, max, mean) or the most frequent values. \
         Example: {\"path\": \"sales.csv\", \"columns\": [\"region\", \"amount\"]}. Paths are relative to the data directory; '..' and absolute paths are refused. \
         Set response_format to \"json\" for machine-readable output.",
    )
    .title("Analyze CSV")
    .input_schema(json!({
        "type": "object",
        "properties": {
            "path": { "type": "string", "minLength": 1, "maxLength": 255, "description": "File name relative to the data directory, e.g. \"sales.csv\"" },
            "columns": { "type": "array", "items": { "type": "string" }, "maxItems": 50, "description": "Only these columns (default: all)" },
            "response_format": { "type": "string", "enum": ["markdown", "json"], "default": "markdown" }
        },
        "required": ["path"],
        "additionalProperties": false
    }))
    .read_only()
    .handler(move |ctx| {
        let dir = dir.clone();
        async move {
            #[derive(Deserialize)]
            struct Args {
                path: String,
                columns: Option<Vec<String>>,
                response_format: Option<String>,
            }
            let args: Args = ctx.args()?;
            let file = resolve_in(&dir, &args.path)?;
            let columns = args.columns.clone();
            let summary = tokio::task::spawn_blocking(move || summarize(&file, columns.as_deref()))
                .await
                .map_err(|e| ToolError::Internal(e.into()))??;
            Ok(if args.response_format.as_deref() == Some("json") {
                CallToolResult::structured(summary)
            } else {
                CallToolResult::text(to_markdown(&args.path, &summary))
            })
        }
    })
}

/// Resolves `relative` inside `dir`, refusing anything that could leave it.
fn resolve_in(dir: &Path, relative: &str) -> Result<PathBuf, ToolError> {
    let candidate = Path::new(relative);
    // Only CSV files: whatever else lives in the directory is not this tool's to read.
    if candidate.extension().and_then(|e| e.to_str()).is_none_or(|e| !e.eq_ignore_ascii_case("csv")) {
        return Err(ToolError::InvalidArguments(format!("path {relative:?} must name a .csv file")));
    }
    let escapes = candidate.components().any(|c| !matches!(c, Component::Normal(_)));
    if escapes {
        return Err(ToolError::InvalidArguments(format!(
            "path {relative:?} must be a plain relative path inside the data directory (no '..', no leading '/')"
        )));
    }
    let root = dir.canonicalize().map_err(|_| ToolError::Failed("The data directory is not available on this server".into()))?;
    let full = root.join(candidate).canonicalize().map_err(|_| ToolError::Failed(format!("No file {relative:?} in the data directory")))?;
    // A symlink inside the directory may still point outside it.
    if !full.starts_with(&root) {
        return Err(ToolError::InvalidArguments(format!("path {relative:?} leads outside the data directory")));
    }
    Ok(full)
}

#[derive(Default)]
struct ColumnStats {
    name: String,
    count: u64,
    numeric: u64,
    min: f64,
    max: f64,
    sum: f64,
    values: std::collections::HashMap<String, u64>,
    overflow: bool,
}

fn summarize(file: &Path, only: Option<&[String]>) -> ToolOutcome2 {
    let meta = std::fs::metadata(file).map_err(|e| ToolError::Failed(format!("Cannot read the file: {e}")))?;
    if meta.len() > MAX_CSV_BYTES {
        return Err(ToolError::Failed(format!("The file is larger than {} MiB; split it or filter it first", MAX_CSV_BYTES / 1024 / 1024)));
    }
    let mut reader = csv::Reader::from_path(file).map_err(|e| ToolError::Failed(format!("Cannot read the CSV: {e}")))?;
    let headers = reader.headers().map_err(|e| ToolError::Failed(format!("Cannot read the CSV header: {e}")))?.clone();
    let selected: Vec<usize> = match only {
        None => (0..headers.len()).collect(),
        Some(names) => {
            let mut idx = Vec::new();
            for name in names {
                let i = headers.iter().position(|h| h == name).ok_or_else(|| {
                    ToolError::InvalidArguments(format!(
                        "no column {name:?}; the columns are: {}",
                        headers.iter().collect::<Vec<_>>().join(", ")
                    ))
                })?;
                idx.push(i);
            }
            idx
        }
    };
    let mut stats: Vec<ColumnStats> = selected
        .iter()
        .map(|&i| ColumnStats { name: headers[i].to_owned(), min: f64::INFINITY, max: f64::NEG_INFINITY, ..Default::default() })
        .collect();
    let mut rows = 0u64;
    for record in reader.records() {
        let record = record.map_err(|e| ToolError::Failed(format!("Malformed CSV at row {}: {e}", rows + 2)))?;
        rows += 1;
        for (s, &i) in stats.iter_mut().zip(&selected) {
            let Some(cell) = record.get(i).map(str::trim).filter(|c| !c.is_empty()) else { continue };
            s.count += 1;
            if let Ok(n) = cell.parse::<f64>() {
                s.numeric += 1;
                s.min = s.min.min(n);
                s.max = s.max.max(n);
                s.sum += n;
            } else if s.values.len() < MAX_DISTINCT || s.values.contains_key(cell) {
                *s.values.entry(cell.to_owned()).or_default() += 1;
            } else {
                s.overflow = true;
            }
        }
    }
    let columns: Vec<Value> = stats
        .into_iter()
        .map(|s| {
            if s.numeric > 0 && s.numeric == s.count {
                json!({ "name": s.name, "type": "number", "count": s.count, "min": s.min, "max": s.max, "mean": s.sum / s.numeric as f64 })
            } else {
                let mut top: Vec<(String, u64)> = s.values.into_iter().collect();
                top.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                top.truncate(5);
                json!({ "name": s.name, "type": "text", "count": s.count, "top_values": top.into_iter().map(|(v, n)| json!({"value": v, "count": n})).collect::<Vec<_>>(), "distinct_capped": s.overflow })
            }
        })
        .collect();
    Ok(json!({ "rows": rows, "columns": columns }))
}

type ToolOutcome2 = Result<Value, ToolError>;

fn to_markdown(path: &str, summary: &Value) -> String {
    let mut out = format!("# {path}\n\n{} rows\n\n| column | type | count | summary |\n|---|---|---|---|\n", summary["rows"]);
    for c in summary["columns"].as_array().into_iter().flatten() {
        let detail = if c["type"] == "number" {
            format!("min {} · max {} · mean {:.3}", c["min"], c["max"], c["mean"].as_f64().unwrap_or(0.0))
        } else {
            c["top_values"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|v| format!("{} ({})", v["value"].as_str().unwrap_or(""), v["count"]))
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            c["name"].as_str().unwrap_or(""),
            c["type"].as_str().unwrap_or(""),
            c["count"],
            detail
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traversal_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("a.csv"), "x\n1\n").expect("write");
        assert!(resolve_in(dir.path(), "a.csv").is_ok());
        for bad in ["../etc/passwd", "/etc/passwd", "sub/../../x.csv", "./a.csv", "audit-spool.jsonl", "toolgate.db"] {
            assert!(matches!(resolve_in(dir.path(), bad), Err(ToolError::InvalidArguments(_))), "{bad} must be refused");
        }
    }

    #[test]
    fn summary_has_numeric_and_text_columns() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("s.csv");
        std::fs::write(&file, "region,amount\neu,10\nus,20\neu,30\n").expect("write");
        let s = summarize(&file, None).expect("summary");
        assert_eq!(s["rows"], json!(3));
        assert_eq!(s["columns"][1]["mean"], json!(20.0));
        assert_eq!(s["columns"][0]["top_values"][0], json!({"value": "eu", "count": 2}));
        assert!(summarize(&file, Some(&["nope".to_owned()])).is_err());
    }

    #[test]
    fn whole_numbers_print_plainly() {
        assert_eq!(format_number(5.0), "5");
        assert_eq!(format_number(2.5), "2.5");
    }
}
