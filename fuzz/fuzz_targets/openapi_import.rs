//! An OpenAPI document from anyone (issue 26): JSON, or YAML when it is not JSON, imported
//! with small budgets, then rendered as TOML, YAML and JSON. The round-trip property: a tools
//! file `render` returns reads back, through the loader `tools validate` and `serve` use, as
//! exactly the tools the import reported (the same names in the same order, every one `http`,
//! nothing more). `render` checks that itself and refuses to return text that fails it; this
//! target checks it again from outside, and treats a refusal as a finding too unless the
//! loader refused the text for one of its own budgets (nesting deeper than a tools file may).
//! Importing never connects anywhere: it only compiles the definitions.

#![no_main]

use std::path::Path;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use toolgate::config::Settings;
use toolgate::tooldef::openapi::{Budgets, ImportOptions, OutputFormat, import};
use toolgate::tooldef::{Format, parse_text_as};

/// Budgets small enough that one input stays far below libFuzzer's 10 s timeout.
fn options() -> ImportOptions {
    ImportOptions {
        base_url: Some("https://api.example.com".into()),
        budgets: Budgets {
            operation_nodes: 2_000,
            operation_bytes: 256 * 1024,
            import_nodes: 20_000,
            import_bytes: 1024 * 1024,
            time: Duration::from_secs(3),
            ..Budgets::default()
        },
        ..ImportOptions::default()
    }
}

fn document(text: &str) -> Option<Value> {
    serde_json::from_str(text).ok().or_else(|| toolgate::yaml::from_str(text, toolgate::yaml::Budget::Document, "fuzz").ok())
}

/// Whether a refusal by `render` is the loader's own limit rather than a wrong output.
fn loader_limit(error: &str) -> bool {
    ["budget", "recursion limit", "depth", "nesting"].iter().any(|k| error.to_lowercase().contains(k))
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Some(doc) = document(text) else { return };
    let Ok(imported) = import(&doc, &options(), &Settings::default()) else { return };
    let reported: Vec<&str> = imported.tools.iter().map(|t| t.name.as_str()).collect();
    for (format, loader) in [(OutputFormat::Toml, Format::Toml), (OutputFormat::Yaml, Format::Yaml), (OutputFormat::Json, Format::Json)] {
        let written = match imported.render(format, "fuzz.json") {
            Ok(written) => written,
            Err(e) if e.contains("would not read back") && !e.contains("reads back differently") && loader_limit(&e) => continue,
            // TOML cannot hold an integer above i64::MAX: its serializer says so, nothing is written.
            Err(e) if format == OutputFormat::Toml && !e.contains("would not read back") => continue,
            Err(e) => panic!("{format:?}: {e}"),
        };
        let raws = parse_text_as(&written, loader, "fuzz", Path::new(".")).unwrap_or_else(|e| panic!("{format:?} does not read back: {e}"));
        let names: Vec<&str> = raws.iter().filter_map(|r| r.value.get("name").and_then(Value::as_str)).collect();
        assert_eq!(names, reported, "{format:?}: the tools read back are not the reported ones");
        for raw in &raws {
            assert!(raw.value.get("http").is_some(), "{format:?}: not an http tool: {}", raw.value);
            assert!(raw.value.get("command").is_none() && raw.value.get("builtin").is_none(), "{format:?}: {}", raw.value);
        }
    }
});
