//! `toolgate tools import openapi` on documents written to attack it (issue 26): text that
//! would write its own tool into the output, and documents that would overflow the stack, eat
//! memory or time. The written file must read back (through the loader `tools validate` and
//! `serve` use) as exactly the tools the import reported, and every budget must hold with an
//! error that names it. The memory tests read this process's peak RSS (nextest runs each test
//! in its own process), the stack test runs the real binary as a child.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate::config::Settings;
use toolgate::tooldef::openapi::{Budgets, Import, ImportOptions, OutputFormat, import};
use toolgate::tooldef::{Format, parse_text_as};

/// A title that, written raw into a comment, ends the comment and adds a `command` tool (TOML).
const TOML_INJECTION: &str = "Pets\n[[tools]]\nname = \"pwn\"\ndescription = \"runs id\"\ninput_schema = { type = \"object\" }\n[tools.command]\nprogram = \"/usr/bin/id\"\n# ";
/// The same for YAML, as one more item of the `tools` list.
const YAML_INJECTION: &str = "Pets\n- name: pwn\n  description: runs id\n  command:\n    program: /usr/bin/id\n# ";

fn doc(title: &str) -> Value {
    json!({
        "openapi": "3.0.3",
        "info": {"title": title, "version": "1"},
        "servers": [{"url": "https://api.example.com/v1"}],
        "paths": {"/pets": {"get": {"operationId": "listPets", "summary": "List\n[[tools]]", "description": "x\n# y"}}},
    })
}

fn import_all(doc: &Value) -> Import {
    import(doc, &ImportOptions::default(), &Settings::default()).expect("imports")
}

/// Renders `import` in `format` and reads the text back as a tools file is read: the same
/// names in the same order, every one an `http` tool, nothing else.
fn assert_reads_back_as_reported(import: &Import, format: OutputFormat) {
    let text = import.render(format, "spec.json").unwrap_or_else(|e| panic!("{format:?}: renders: {e}"));
    let loader = match format {
        OutputFormat::Toml => Format::Toml,
        OutputFormat::Yaml => Format::Yaml,
        OutputFormat::Json => Format::Json,
    };
    let raws = parse_text_as(&text, loader, "out", Path::new(".")).unwrap_or_else(|e| panic!("{format:?}: reads back: {e}\n{text}"));
    let names: Vec<&str> = raws.iter().filter_map(|r| r.value.get("name").and_then(Value::as_str)).collect();
    let reported: Vec<&str> = import.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, reported, "{format:?}:\n{text}");
    for raw in &raws {
        let kinds: Vec<&str> = ["http", "command", "builtin"].into_iter().filter(|k| raw.value.get(*k).is_some()).collect();
        assert_eq!(kinds, ["http"], "{format:?}:\n{text}");
    }
}

#[test]
fn a_title_that_would_add_a_command_tool_to_toml_output_reads_back_as_only_the_reported_tools() {
    let i = import_all(&doc(TOML_INJECTION));
    for format in [OutputFormat::Toml, OutputFormat::Yaml, OutputFormat::Json] {
        assert_reads_back_as_reported(&i, format);
    }
}

#[test]
fn a_title_that_would_add_a_command_tool_to_yaml_output_reads_back_as_only_the_reported_tools() {
    let i = import_all(&doc(YAML_INJECTION));
    for format in [OutputFormat::Yaml, OutputFormat::Toml, OutputFormat::Json] {
        assert_reads_back_as_reported(&i, format);
    }
}

#[test]
fn a_security_scheme_name_with_newlines_reads_back_as_only_the_reported_tools() {
    for injection in [TOML_INJECTION, YAML_INJECTION] {
        let mut d = doc("Pets");
        d["components"] = json!({"securitySchemes": {injection: {"type": "apiKey", "in": "header", "name": "X-Key"}}});
        d["security"] = json!([{injection: []}]);
        let i = import_all(&d);
        assert_eq!(i.tools.len(), 1, "{:?}", i.skipped);
        for format in [OutputFormat::Toml, OutputFormat::Yaml, OutputFormat::Json] {
            assert_reads_back_as_reported(&i, format);
        }
    }
}

/// This process's peak resident set, in KiB (Linux).
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM");
    line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("a number of kB")
}

/// `count` operations whose JSON body is `schema`.
fn operations(count: usize, schema: &Value) -> Value {
    let body = json!({"content": {"application/json": {"schema": schema}}});
    let paths: serde_json::Map<String, Value> =
        (0..count).map(|i| (format!("/p{i}"), json!({"post": {"operationId": format!("op{i}"), "requestBody": body}}))).collect();
    Value::Object(paths)
}

/// Most the heap may grow while a hostile document is imported and rendered.
const MAX_GROWTH_KIB: u64 = 300 * 1024;

#[test]
fn thousands_of_references_to_one_large_schema_stop_at_the_expanded_size_budget() {
    let mut d = doc("Pets");
    // Inlined 2,000 times, the half-MiB schema would be a gigabyte.
    d["paths"] = operations(2000, &json!({"$ref": "#/components/schemas/Big"}));
    let big = "x".repeat(512 * 1024);
    d["components"] = json!({"schemas": {"Big": {"type": "object", "properties": {"a": {"type": "string", "description": big}}}}});
    let before = peak_rss_kib();
    let result = import(&d, &ImportOptions::default(), &Settings::default()).map(|i| i.tools.len());
    let growth = peak_rss_kib() - before;
    eprintln!("the peak RSS grew by {growth} KiB");
    assert!(growth < MAX_GROWTH_KIB, "the peak RSS grew by {growth} KiB");
    let e = result.expect_err("over the budget");
    assert!(e.contains("expanded-size budget") && e.contains("--include-tag"), "{e}");
}

#[test]
fn operations_referring_to_the_whole_document_are_skipped_by_the_per_operation_budget() {
    let mut d = doc("Pets");
    d["paths"] = operations(300, &json!({"$ref": "#"}));
    d["components"] = json!({"examples": {"padding": {"value": vec!["0123456789abcdef"; 128 * 1024]}}});
    let before = peak_rss_kib();
    let i = import_all(&d);
    let growth = peak_rss_kib() - before;
    eprintln!("the peak RSS grew by {growth} KiB");
    assert!(growth < MAX_GROWTH_KIB, "the peak RSS grew by {growth} KiB");
    assert!(i.tools.is_empty());
    assert_eq!(i.skipped.len(), 300);
    assert!(i.skipped.iter().all(|s| s.reason.contains("per-operation budget")), "{:?}", i.skipped[0]);
}

/// The amount of work is bounded by `names::Taken`'s unit test (three look-ups a name for
/// 20,000 duplicates); this one checks the names end to end on a number a test can afford.
#[test]
fn two_thousand_operations_sharing_one_id_are_numbered_in_document_order() {
    let paths: serde_json::Map<String, Value> =
        (0..2_000).map(|i| (format!("/p{i:05}"), json!({"get": {"operationId": "op", "responses": {}}}))).collect();
    let mut d = doc("Pets");
    d["paths"] = Value::Object(paths);
    let i = import_all(&d);
    assert_eq!(i.tools.len(), 2_000, "{:?}", i.skipped.first());
    assert_eq!((i.tools[0].name.as_str(), i.tools[1].name.as_str()), ("op", "op_2"));
    assert_eq!((i.tools[1_999].name.as_str(), i.tools[1_999].labels["openapi_operation"].as_str()), ("op_2000", "op"));
}

#[test]
fn an_import_over_its_time_budget_fails_naming_the_budget() {
    let options = ImportOptions { budgets: Budgets { time: Duration::ZERO, ..Budgets::default() }, ..Default::default() };
    let e = import(&doc("Pets"), &options, &Settings::default()).map(|i| i.tools.len()).expect_err("no time");
    assert!(e.contains("time budget of 0 s") && e.contains("--include-tag"), "{e}");
}

#[test]
fn a_ten_thousand_link_reference_chain_is_refused_by_the_depth_budget_not_the_stack() {
    let dir = tempfile::tempdir().expect("tempdir");
    let schemas: serde_json::Map<String, Value> =
        (0..10_000).map(|i| (format!("s{i}"), json!({"$ref": format!("#/components/schemas/s{}", i + 1)}))).collect();
    let mut d = doc("Pets");
    d["paths"] = operations(1, &json!({"$ref": "#/components/schemas/s0"}));
    d["components"] = json!({"schemas": schemas});
    std::fs::write(dir.path().join("chain.json"), d.to_string()).expect("written");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["tools", "import", "openapi", "chain.json"])
        .current_dir(dir.path())
        .env("TOOLGATE__STORAGE__DATA_DIR", dir.path())
        .env_remove("TOOLGATE_CONFIG")
        .output()
        .expect("toolgate runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "exited by itself, with an error: {:?}\n{stderr}", out.status);
    assert!(stderr.contains("deeper than 64 levels") && stderr.contains("depth budget"), "{stderr}");
}
