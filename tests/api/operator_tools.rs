//! What an operator is told about tool sources: a refused definition names the file it is in
//! (not the directory), a refusal at first start does not speak of previous tools, `tools
//! list` names each tool's file, an upstream's allow or deny entry that matches nothing is
//! warned about, an upstream's request outside any call is explained once, and the example
//! settings say which formats a tools file may be in.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate::config::{LogFormat, LogSettings};

use crate::common::{Capture, TestServer};
use crate::operator_errors::start_error;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/api/upstream_support/stdio_upstream.py");

fn definition(name: &str) -> String {
    format!("[[tools]]\nname = \"{name}\"\ndescription = \"Echoes.\"\nbuiltin = {{ id = \"echo\" }}\n")
}

/// A directory of two tools files: `good.toml` (tool `fine`) and `bad.yaml` (tool `broken`,
/// with an unknown built-in).
fn tools_dir(dir: &Path) -> std::path::PathBuf {
    let tools = dir.join("tools");
    std::fs::create_dir(&tools).expect("tools dir");
    std::fs::write(tools.join("good.toml"), definition("fine")).expect("written");
    let bad = "tools:\n  - name: broken\n    description: Broken.\n    builtin:\n      id: nope\n";
    std::fs::write(tools.join("bad.yaml"), bad).expect("written");
    tools
}

/// JSON log lines captured for the whole test process (while the `Telemetry` is held).
fn capture_logs() -> (Capture, toolgate::telemetry::Telemetry) {
    let capture = Capture::default();
    let log = LogSettings { format: LogFormat::Json, filter: "info".into(), ..LogSettings::default() };
    let telemetry = toolgate::telemetry::init_with_writer(&log, capture.clone());
    (capture, telemetry)
}

fn messages(capture: &Capture) -> Vec<String> {
    let text = capture.text();
    text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).filter_map(|l| l["message"].as_str().map(str::to_owned)).collect()
}

#[tokio::test]
async fn serving_a_directory_with_a_bad_definition_names_its_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tools = tools_dir(dir.path());
    let error = start_error(|s| s.tools.path = Some(tools.clone())).await;
    let file = tools.join("bad.yaml").display().to_string();
    assert!(error.contains(&format!("{file}: tool \"broken\"")), "{error}");
}

#[tokio::test]
async fn a_tools_file_refused_at_first_start_does_not_speak_of_previous_tools() {
    let (capture, _telemetry) = capture_logs();
    let dir = tempfile::tempdir().expect("tempdir");
    let tools = tools_dir(dir.path());
    start_error(|s| s.tools.path = Some(tools.clone())).await;
    let logged = messages(&capture);
    let refused = logged.iter().find(|m| m.starts_with("tool definitions refused")).unwrap_or_else(|| panic!("{logged:#?}"));
    assert!(refused.contains("no tools from this source are served until it is fixed"), "{refused}");
    assert!(!refused.contains("previous tools"), "{refused}");
}

#[test]
fn tools_list_names_the_file_each_tool_came_from() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tools = dir.path().join("tools");
    std::fs::create_dir(&tools).expect("tools dir");
    std::fs::write(tools.join("a.toml"), definition("from_a")).expect("written");
    std::fs::write(tools.join("b.toml"), definition("from_b")).expect("written");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["tools", "list", "--json"])
        .env_remove("TOOLGATE_CONFIG")
        .env("TOOLGATE__STORAGE__DATA_DIR", dir.path())
        .env("TOOLGATE__TOOLS__PATH", &tools)
        .output()
        .expect("toolgate runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<Value> = String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let source = |name: &str| rows.iter().find(|r| r["name"] == name).map(|r| r["source"].clone()).unwrap_or_default();
    assert_eq!(source("from_a"), json!(tools.join("a.toml").display().to_string()), "{rows:#?}");
    assert_eq!(source("from_b"), json!(tools.join("b.toml").display().to_string()), "{rows:#?}");
}

/// A server with the fixture as upstream `fx`, its settings merged with `extra`.
async fn with_upstream(extra: Value) -> TestServer {
    let mut upstream = json!({"stdio": {"program": "python3", "args": [FIXTURE], "env_passthrough": ["PATH"]}});
    if let (Some(into), Value::Object(extra)) = (upstream.as_object_mut(), extra) {
        into.extend(extra);
    }
    let settings = serde_json::from_value(upstream).expect("upstream settings");
    TestServer::with(|s| {
        s.tools.packs.examples = false;
        s.upstreams.insert("fx".into(), settings);
    })
    .await
}

/// Waits for a message that `matches` in the log; every message seen when none came.
async fn wait_logged(capture: &Capture, matches: impl Fn(&str) -> bool) -> Vec<String> {
    for _ in 0..200 {
        let logged = messages(capture);
        if logged.iter().any(|m| matches(m)) {
            return logged;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never logged: {:#?}", messages(capture));
}

#[tokio::test]
async fn allow_and_deny_entries_that_match_no_tool_are_warned_about() {
    let (capture, _telemetry) = capture_logs();
    let _server = with_upstream(json!({"allow_tools": ["echo", "add", "ad"], "deny_tools": ["ech0", "add"]})).await;
    let logged = wait_logged(&capture, |m| m == "upstream tools listed").await;
    let warned = |setting: &str, entry: &str| logged.iter().any(|m| m.contains(&format!("upstreams.fx.{setting} names \"{entry}\"")));
    assert!(warned("allow_tools", "ad") && warned("deny_tools", "ech0"), "{logged:#?}");
    assert!(!warned("allow_tools", "echo") && !warned("deny_tools", "add"), "entries that match are fine: {logged:#?}");
}

#[tokio::test]
async fn a_request_of_the_upstreams_outside_any_call_is_explained_once() {
    let (capture, _telemetry) = capture_logs();
    let _server = with_upstream(
        json!({"stdio": {"program": "python3", "args": [FIXTURE], "env_passthrough": ["PATH"], "env": {"UPSTREAM_ASK_ROOTS": "1"}}}),
    )
    .await;
    let logged = wait_logged(&capture, |m| m.contains("roots/list at start")).await;
    let explained = logged.iter().filter(|m| m.contains("outside any tool call")).count();
    assert_eq!(explained, 1, "{logged:#?}");
    let stderr = logged.iter().find(|m| m.contains("roots/list at start")).expect("the upstream's line");
    assert!(stderr.contains("only to the client of a tool call"), "the upstream is told why, too: {stderr}");
}

#[test]
fn the_example_settings_say_a_tools_file_may_be_yaml() {
    let example = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/config/toolgate.example.toml")).expect("example");
    let before_path = example.split("# path = \"/etc/toolgate/tools\"").next().expect("the tools.path example");
    let comment: String = before_path.lines().rev().take_while(|l| l.starts_with('#')).collect::<Vec<_>>().join(" ");
    for format in ["TOML", "YAML", "JSON", "*.yaml", "*.yml"] {
        assert!(comment.contains(format), "{format} missing from: {comment}");
    }
}
