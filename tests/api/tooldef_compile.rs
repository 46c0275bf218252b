//! Compiling tool definitions: every problem is found at once and named by source, tool and
//! field; the common settings reach the compiled tool.

use std::path::Path;

use serde_json::json;
use toolgate::config::Settings;
use toolgate::tool::{Origin, ToolContext};
use toolgate::tooldef::{DefinitionErrors, compile_all, parse_text};

fn compile_toml(text: &str) -> Result<Vec<toolgate::tooldef::Compiled>, DefinitionErrors> {
    let raws = parse_text(text, false, "tools.toml", Path::new("."))?;
    compile_all(&raws, &Settings::default(), Origin::File, "tools.toml")
}

fn errors_of(text: &str) -> Vec<(String, String, String)> {
    let err = compile_toml(text).expect_err("invalid");
    let mut out: Vec<(String, String, String)> =
        err.tools.iter().flat_map(|t| t.errors.iter().map(|e| (t.tool.clone(), e.field.clone(), e.message.clone()))).collect();
    if let Some(g) = err.general {
        out.push((String::new(), String::new(), g));
    }
    out
}

#[test]
fn every_problem_of_every_tool_is_reported_with_its_field() {
    let errors = errors_of(
        r#"
[[tools]]
name = "has space"
builtin = { id = "echo" }

[[tools]]
name = "no_description"
command = { program = "/bin/true" }
http = { url = "https://example.com" }

[[tools]]
name = "bad_limits"
description = "x"
timeout_secs = 0
concurrency = 0
char_limit = 5
scopes = ["two words"]
icons = [{ src = "http://insecure.example/icon.png" }]
rate_limit = { per_minute = 10 }
builtin = { id = "echo" }

[[tools]]
name = "bad_schema"
description = "x"
input_schema = { type = "string" }
builtin = { id = "calculate_sum" }
"#,
    );
    let has = |tool: &str, field: &str| errors.iter().any(|(t, f, _)| t == tool && f == field);
    assert!(has("has space", "name"), "{errors:#?}");
    assert!(has("no_description", "definition"), "two kinds: {errors:#?}");
    for field in ["timeout_secs", "concurrency", "char_limit", "scopes[0]", "icons[0].src", "rate_limit"] {
        assert!(has("bad_limits", field), "{field}: {errors:#?}");
    }
    assert!(has("bad_schema", "input_schema"), "builtin schemas are fixed: {errors:#?}");
}

#[test]
fn unknown_fields_and_wrong_types_name_their_path() {
    let errors =
        errors_of("[[tools]]\nname = \"t\"\ndescription = \"x\"\nbuiltin = { id = \"echo\" }\nannotations = { read_only = true }\n");
    assert_eq!(errors.len(), 1, "{errors:#?}");
    let (tool, field, message) = &errors[0];
    assert_eq!((tool.as_str(), field.as_str()), ("t", "annotations.read_only"));
    assert!(message.contains("read_only"), "{message}");

    let errors = errors_of("[[tools]]\nname = \"t\"\ndescription = \"x\"\nbuiltin = { id = \"echo\" }\ntimeout_secs = \"ten\"\n");
    assert_eq!(errors[0].1, "timeout_secs", "{errors:#?}");

    let errors = errors_of("[[tools]]\ndescription = \"nameless\"\nbuiltin = { id = \"echo\" }\n");
    assert_eq!(errors[0].0, "tools[0]", "a nameless tool is named by position: {errors:#?}");
}

#[test]
fn duplicate_names_and_file_level_problems_are_refused() {
    let one = "[[tools]]\nname = \"t\"\ndescription = \"x\"\nbuiltin = { id = \"echo\" }\n";
    let errors = errors_of(&format!("{one}{one}"));
    assert!(errors.iter().any(|(t, f, m)| t == "t" && f == "name" && m.contains("twice")), "{errors:#?}");

    let errors = errors_of("[[tool]]\nname = \"t\"\n");
    assert!(errors[0].2.contains("unknown top-level key `tool`"), "{errors:#?}");

    let err = compile_toml("[[tools]]\nname = \"t\n").expect_err("syntax");
    let text = err.to_string();
    assert!(text.starts_with("tools.toml: invalid TOML") && text.contains("line 2"), "{text}");
}

#[test]
fn a_builtin_keeps_its_schema_and_takes_the_common_settings() {
    let compiled = compile_toml(
        r#"
[[tools]]
name = "sales_csv"
title = "Sales CSV"
description = "Summarize a sales CSV. Example: {\"path\": \"q3.csv\"}."
scopes = ["sales:read"]
timeout_secs = 30
concurrency = 2
char_limit = 5000
annotations = { read_only_hint = true, open_world_hint = false }
audit_arguments = { redact = ["path"] }
builtin = { id = "analyze_csv", settings = { dir = "/srv/sales" } }

[[tools]]
name = "off"
description = "Disabled tools are validated but not served."
enabled = false
builtin = { id = "echo" }
"#,
    )
    .expect("valid");
    assert_eq!(compiled.len(), 2);
    let tool = compiled[0].tool.as_ref().expect("enabled");
    let d = tool.descriptor();
    assert_eq!((d.name.as_str(), d.title.as_deref()), ("sales_csv", Some("Sales CSV")));
    assert!(d.description.starts_with("Summarize a sales CSV"));
    assert_eq!(d.input_schema["required"], json!(["path"]), "the built-in's own schema");
    assert_eq!(d.annotations.as_ref().and_then(|a| a.read_only_hint), Some(true));
    assert_eq!(tool.scopes(), ["sales:read"]);
    assert_eq!(tool.origin(), Origin::File);
    assert!(!compiled[1].enabled && compiled[1].tool.is_none());

    let errors = errors_of("[[tools]]\nname = \"t\"\nbuiltin = { id = \"analyze_csv\", settings = { folder = \"/x\" } }\n");
    assert_eq!(errors[0].1, "builtin.settings.folder", "{errors:#?}");
}

#[tokio::test]
async fn a_response_format_argument_is_offered_when_asked_for() {
    let compiled = compile_toml(
        r#"
[[tools]]
name = "clock"
description = "Current time. Example: {}."
response_format_argument = true
response_format = "json"
builtin = { id = "get_current_time" }
"#,
    )
    .expect("valid");
    // Built-ins have fixed schemas; the argument is added to http and command tools only.
    let schema = &compiled[0].tool.as_ref().expect("tool").descriptor().input_schema;
    assert!(schema["properties"].get("response_format").is_none(), "{schema}");
    let ctx = ToolContext::detached("clock", serde_json::Map::new(), Default::default());
    let result = compiled[0].tool.as_ref().expect("tool").invoke(ctx).await.expect("runs");
    let text = serde_json::to_value(&result).expect("json");
    assert!(text["content"][0]["text"].as_str().is_some_and(|t| t.contains('T')), "{text}");
}

#[test]
fn json_files_are_read_too() {
    let text = json!({"tools": [{"name": "t", "description": "x", "builtin": {"id": "echo"}}]}).to_string();
    let raws = parse_text(&text, true, "tools.json", Path::new(".")).expect("parses");
    let compiled = compile_all(&raws, &Settings::default(), Origin::File, "tools.json").expect("valid");
    assert_eq!(compiled[0].name, "t");
    let bad = parse_text("{\"tools\": [", true, "tools.json", Path::new(".")).expect_err("syntax");
    assert!(bad.to_string().contains("invalid JSON"), "{bad}");
}

#[test]
fn a_definition_with_several_problems_reports_each_of_them() {
    let errors = errors_of(
        "[[tools]]\nname = \"bad name!\"\ndescription = \"x\"\ncolour = \"red\"\nshade = 3\nhttp = { method = \"FETCH\", url = \"https://example.com/x\" }\n",
    );
    let fields: Vec<&str> = errors.iter().map(|(_, field, _)| field.as_str()).collect();
    for expected in ["name", "colour", "shade", "http.method"] {
        assert!(fields.contains(&expected), "{expected} not reported: {errors:#?}");
    }
}

#[test]
fn a_value_of_the_wrong_type_does_not_hide_the_other_problems() {
    let errors = errors_of("[[tools]]\nname = \"bad name!\"\ndescription = \"x\"\ntimeout_secs = \"ten\"\n");
    let fields: Vec<&str> = errors.iter().map(|(_, field, _)| field.as_str()).collect();
    assert!(fields.contains(&"name") && fields.contains(&"timeout_secs"), "{errors:#?}");
    assert_eq!(fields.iter().filter(|f| **f == "name").count(), 1, "reported once: {errors:#?}");
}

#[test]
fn a_required_member_that_cannot_be_read_is_not_also_reported_missing() {
    let errors = errors_of("[[tools]]\nname = \"t\"\ndescription = 5\nbuiltin = { id = \"echo\" }\n");
    assert!(errors.iter().any(|(_, field, _)| field == "description"), "{errors:#?}");
    assert!(!errors.iter().any(|(_, _, message)| message.starts_with("missing field")), "{errors:#?}");
}
