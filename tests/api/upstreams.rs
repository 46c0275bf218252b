//! Upstream MCP servers over stdio: a real child process (`upstream_support/stdio_upstream.py`,
//! a small MCP server with fault modes) started by toolgate, its tools served under a prefix,
//! calls forwarded over real HTTP from a client of toolgate. The fixture logs every message it
//! receives (`UPSTREAM_LOG`), so tests assert on what the upstream really saw.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{SseReader, TestServer, open_get, response_json, spawn_post};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/api/upstream_support/stdio_upstream.py");
const V: &str = "2025-11-25";

/// A server with the fixture as upstream `fx` (settings merged over the stdio basics); the
/// fixture's message log is in the server's data directory.
async fn serve(extra: Value) -> (TestServer, PathBuf) {
    let dir = tempfile::tempdir().expect("dir").keep();
    let log = dir.join("upstream.log");
    let mut upstream =
        json!({"stdio": {"program": "python3", "args": [FIXTURE], "env_passthrough": ["PATH"], "env": {"UPSTREAM_LOG": log}}});
    merge(&mut upstream, extra);
    let settings = serde_json::from_value(upstream).expect("upstream settings");
    let server = TestServer::with(|s| {
        s.tools.packs.examples = false;
        s.upstreams.insert("fx".into(), settings);
    })
    .await;
    (server, log)
}

fn merge(into: &mut Value, extra: Value) {
    if let (Some(into), Value::Object(extra)) = (into.as_object_mut(), extra) {
        for (k, v) in extra {
            match (into.get_mut(&k), v) {
                (Some(Value::Object(a)), Value::Object(b)) => a.extend(b),
                (_, v) => {
                    into.insert(k, v);
                }
            }
        }
    }
}

/// Names served now, sorted.
fn served(server: &TestServer) -> Vec<String> {
    server.state().server.tools.snapshot().iter().map(|t| t.name().to_owned()).collect()
}

/// Waits until `name` is served (or not, with `present = false`).
async fn wait_for(server: &TestServer, name: &str, present: bool) {
    for _ in 0..200 {
        if served(server).iter().any(|n| n == name) == present {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{name} {} served after 10 s: {:?}", if present { "not" } else { "still" }, served(server));
}

async fn call(server: &TestServer, session: &str, name: &str, arguments: Value) -> Value {
    server.call(session, 1, "tools/call", json!({"name": name, "arguments": arguments})).await
}

fn text(response: &Value) -> String {
    response["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

/// The messages the upstream received, as logged.
fn upstream_saw(log: &PathBuf) -> Vec<Value> {
    std::fs::read_to_string(log).unwrap_or_default().lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

async fn wait_upstream_saw(log: &PathBuf, what: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..100 {
        if let Some(found) = upstream_saw(log).into_iter().find(&what) {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the upstream never saw the expected message; it saw {:#?}", upstream_saw(log));
}

#[tokio::test]
async fn every_page_of_the_upstreams_tools_is_served_under_its_prefix() {
    let (server, _) = serve(json!({})).await;
    wait_for(&server, "fx_echo", true).await;
    // The fixture lists 13 tools, three per page.
    let names = served(&server);
    for tool in ["add", "ask", "blocks", "die", "echo", "fail", "garbage", "hang", "huge", "mixed", "noisy", "slow", "toggle_extra"] {
        assert!(names.contains(&format!("fx_{tool}")), "fx_{tool} missing from {names:?}");
    }
}

#[tokio::test]
async fn the_allow_and_deny_lists_choose_which_tools_are_served() {
    let (server, _) = serve(json!({"prefix": "u.", "allow_tools": ["echo", "add", "fail"], "deny_tools": ["fail"]})).await;
    wait_for(&server, "u.echo", true).await;
    assert_eq!(served(&server), vec!["u.add", "u.echo"]);
}

#[tokio::test]
async fn an_override_renames_and_retitles_a_tool() {
    let (server, _) = serve(json!({"tools": {"echo": {"name": "say", "title": "Say it", "description": "Repeats the text."}}})).await;
    wait_for(&server, "say", true).await;
    let session = server.initialize(V).await;
    let list = server.call(&session, 1, "tools/list", json!({})).await;
    let say = list["result"]["tools"].as_array().expect("tools").iter().find(|t| t["name"] == "say").cloned().expect("say listed");
    assert_eq!((say["title"].as_str(), say["description"].as_str()), (Some("Say it"), Some("Repeats the text.")));
    assert_eq!(text(&call(&server, &session, "say", json!({"text": "hi"})).await), "hi");
}

#[tokio::test]
async fn a_result_is_relayed_block_for_block_with_every_field() {
    let (server, _) = serve(json!({})).await;
    wait_for(&server, "fx_mixed", true).await;
    let session = server.initialize(V).await;
    let result = call(&server, &session, "fx_mixed", json!({})).await["result"].clone();
    assert_eq!(result["_meta"], json!({"upstream": true}));
    let content = result["content"].as_array().expect("content");
    assert_eq!(content.iter().map(|b| b["type"].as_str().unwrap_or_default()).collect::<Vec<_>>(), ["text", "image", "resource_link"]);
    assert_eq!(content[2]["_meta"], json!({"x": 1}), "a field toolgate does not model is kept");
}

#[tokio::test]
async fn structured_content_and_is_error_are_relayed() {
    let (server, _) = serve(json!({})).await;
    wait_for(&server, "fx_add", true).await;
    let session = server.initialize(V).await;
    assert_eq!(call(&server, &session, "fx_add", json!({"a": 2, "b": 3})).await["result"]["structuredContent"], json!({"sum": 5}));
    assert_eq!(call(&server, &session, "fx_fail", json!({})).await["result"]["isError"], true);
}

#[tokio::test]
async fn arguments_are_checked_against_the_upstreams_schema_before_anything_is_sent() {
    let (server, log) = serve(json!({})).await;
    wait_for(&server, "fx_echo", true).await;
    let session = server.initialize(V).await;
    let refused = call(&server, &session, "fx_echo", json!({"text": 5})).await;
    assert_eq!(refused["result"]["isError"], true);
    assert!(!upstream_saw(&log).iter().any(|m| m["method"] == "tools/call"), "nothing reached the upstream");
}

#[tokio::test]
async fn the_upstreams_progress_reaches_the_client() {
    let (server, _) = serve(json!({})).await;
    wait_for(&server, "fx_slow", true).await;
    let session = server.initialize(V).await;
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "fx_slow", "arguments": {"steps": 3, "delay_ms": 20}, "_meta": {"progressToken": "mine"}}});
    let mut stream = SseReader::new(server.post(&body.to_string(), &[("mcp-session-id", &session)]).await);
    let mut progress = Vec::new();
    while let Some((_, message)) = stream.next_message_within(Duration::from_secs(10)).await {
        if message["method"] == "notifications/progress" {
            assert_eq!(message["params"]["progressToken"], "mine", "the client's own token, not the upstream's");
            progress.push(message["params"]["progress"].as_f64().expect("progress"));
        } else {
            assert_eq!(text(&message), "done");
            break;
        }
    }
    assert_eq!(progress, [1.0, 2.0, 3.0]);
}

#[tokio::test]
async fn a_clients_cancellation_is_relayed_upstream() {
    let (server, log) = serve(json!({})).await;
    wait_for(&server, "fx_hang", true).await;
    let session = server.initialize(V).await;
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "fx_hang", "arguments": {}}});
    let _pending = spawn_post(&server, &session, body.to_string());
    let forwarded = wait_upstream_saw(&log, |m| m["method"] == "tools/call" && m["params"]["name"] == "hang").await;
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}});
    server.post(&cancel.to_string(), &[("mcp-session-id", &session)]).await;
    let relayed = wait_upstream_saw(&log, |m| m["method"] == "notifications/cancelled").await;
    assert_eq!(relayed["params"]["requestId"], forwarded["id"], "the upstream's own request id");
}

#[tokio::test]
async fn a_timeout_here_cancels_the_call_upstream() {
    let (server, log) = serve(json!({"timeout_ms": 300})).await;
    wait_for(&server, "fx_hang", true).await;
    let session = server.initialize(V).await;
    let answer = call(&server, &session, "fx_hang", json!({})).await;
    assert!(text(&answer).contains("timed out"), "{answer}");
    wait_upstream_saw(&log, |m| m["method"] == "notifications/cancelled").await;
}

#[tokio::test]
async fn an_oversized_result_is_refused_and_the_upstream_keeps_serving() {
    let (server, _) = serve(json!({"max_message_bytes": 65536})).await;
    wait_for(&server, "fx_huge", true).await;
    let session = server.initialize(V).await;
    let answer = call(&server, &session, "fx_huge", json!({"bytes": 200_000})).await;
    assert_eq!(answer["result"]["isError"], true);
    assert!(text(&answer).contains("max_message_bytes"), "says what to change: {answer}");
    assert_eq!(text(&call(&server, &session, "fx_echo", json!({"text": "still here"})).await), "still here");
}

#[tokio::test]
async fn a_line_that_is_not_json_rpc_is_ignored() {
    let (server, _) = serve(json!({})).await;
    wait_for(&server, "fx_garbage", true).await;
    let session = server.initialize(V).await;
    assert_eq!(text(&call(&server, &session, "fx_garbage", json!({})).await), "after garbage");
}

#[tokio::test]
async fn an_upstreams_list_change_reaches_the_clients() {
    // A tool added after the first listing serves at once only without the approved catalog
    // (`catalog_approval.rs` holds it under the default).
    let (server, _) = serve(json!({"approval": "off"})).await;
    wait_for(&server, "fx_toggle_extra", true).await;
    let session = server.initialize(V).await;
    let mut events = SseReader::new(open_get(&server, &session, None).await);
    call(&server, &session, "fx_toggle_extra", json!({})).await;
    let heard = loop {
        match events.next_message_within(Duration::from_secs(10)).await {
            Some((_, m)) if m["method"] == "notifications/tools/list_changed" => break true,
            Some(_) => continue,
            None => break false,
        }
    };
    assert!(heard, "no list_changed on the client's stream");
    wait_for(&server, "fx_extra", true).await;
}

#[tokio::test]
async fn a_dead_upstreams_tools_are_withdrawn_and_say_why_until_it_is_back() {
    let dir = tempfile::tempdir().expect("dir");
    let dead = dir.path().join("dead");
    // Restarts fail while the marker exists, so the upstream stays down as long as the test needs.
    let script = format!("test -e {} && exit 1; exec python3 {FIXTURE}", dead.display());
    let (server, _) = serve(json!({"stdio": {"program": "sh", "args": ["-c", script]}})).await;
    wait_for(&server, "fx_die", true).await;
    let session = server.initialize(V).await;
    std::fs::write(&dead, "").expect("marker");
    let died = call(&server, &session, "fx_die", json!({})).await;
    assert_eq!(died["result"]["isError"], true, "{died}");
    wait_for(&server, "fx_echo", false).await;
    let meanwhile = call(&server, &session, "fx_echo", json!({"text": "x"})).await;
    assert!(text(&meanwhile).contains("not connected"), "a clear error, not Unknown tool: {meanwhile}");
    std::fs::remove_file(&dead).expect("marker removed");
    wait_for(&server, "fx_echo", true).await;
    assert_eq!(text(&call(&server, &session, "fx_echo", json!({"text": "back"})).await), "back");
}

#[tokio::test]
async fn an_upstreams_elicitation_is_relayed_to_a_client_that_can_answer() {
    let (server, _) = serve(json!({})).await;
    wait_for(&server, "fx_ask", true).await;
    let session = server.initialize(V).await;
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "fx_ask", "arguments": {}}});
    let mut stream = SseReader::new(server.post(&body.to_string(), &[("mcp-session-id", &session)]).await);
    let (_, asked) = stream.next_message_within(Duration::from_secs(10)).await.expect("a request");
    assert_eq!(asked["method"], "elicitation/create");
    assert_eq!(asked["params"]["message"], "What is your name?");
    let answer = json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"name": "Ada"}}});
    server.post(&answer.to_string(), &[("mcp-session-id", &session)]).await;
    let (_, done) = stream.next_message_within(Duration::from_secs(10)).await.expect("the result");
    assert_eq!(text(&done), "hello Ada");
}

#[tokio::test]
async fn a_modern_client_is_told_clearly_when_the_upstream_asks_for_input() {
    let (server, _) = serve(json!({})).await;
    wait_for(&server, "fx_ask", true).await;
    let res = server.modern(1, "tools/call", json!({"name": "fx_ask", "arguments": {}}), json!({"elicitation": {}})).await;
    let answer = response_json(res).await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(text(&answer).contains("2025-11-25"), "{answer}");
}

#[tokio::test]
async fn the_admin_api_shows_each_upstreams_state() {
    let (server, _) = serve(json!({})).await;
    wait_for(&server, "fx_echo", true).await;
    let status: Value = server.client.get(server.admin_url("/admin/upstreams")).send().await.expect("sent").json().await.expect("json");
    let fx = &status["upstreams"][0];
    assert_eq!((fx["name"].as_str(), fx["state"].as_str(), fx["transport"].as_str()), (Some("fx"), Some("connected"), Some("stdio")));
    assert_eq!(fx["tools"], 13);
    assert_eq!(fx["server_info"]["name"], "stdio-upstream");
}

#[tokio::test]
async fn a_program_that_cannot_be_found_stops_start_up_naming_the_setting() {
    let data = tempfile::tempdir().expect("dir");
    let mut settings = crate::common::test_settings(data.path());
    let upstream = serde_json::from_value(json!({"stdio": {"program": "no-such-mcp-server"}})).expect("settings");
    settings.upstreams.insert("ghost".into(), upstream);
    let error = toolgate::app::AppState::new(settings).await.expect_err("refused").to_string();
    assert!(error.contains("upstreams.ghost.stdio.program"), "{error}");
}

#[test]
fn an_upstream_with_both_a_url_and_a_program_is_refused() {
    let mut settings = toolgate::config::Settings::default();
    let both = json!({"url": "https://mcp.example.com/mcp", "stdio": {"program": "true"}});
    settings.upstreams.insert("both".into(), serde_json::from_value(both).expect("settings"));
    let error = settings.validate().expect_err("refused").to_string();
    assert!(error.contains("upstreams.both.url") && error.contains("not both"), "{error}");
}

#[tokio::test]
async fn a_forwarded_calls_audit_record_names_the_upstream_and_its_tool() {
    let dir = tempfile::tempdir().expect("dir");
    let upstream =
        json!({"stdio": {"program": "python3", "args": [FIXTURE], "env_passthrough": ["PATH"]}, "tools": {"echo": {"name": "say"}}});
    let server = TestServer::with(|s| {
        s.audit.enabled = true;
        s.tools.packs.examples = false;
        s.upstreams.insert("fx".into(), serde_json::from_value(upstream).expect("settings"));
        s.storage.data_dir = dir.path().to_owned();
    })
    .await;
    wait_for(&server, "say", true).await;
    let session = server.initialize(V).await;
    call(&server, &session, "say", json!({"text": "hi"})).await;
    let settings = server.state().settings.storage.clone();
    server.running.stop().await.expect("stopped; the audit log is flushed");
    let store = toolgate::store::Store::connect(&settings).await.expect("store");
    let records = toolgate::audit::query(&store, &toolgate::audit::AuditFilter::default()).await.expect("query");
    let record = records.iter().find(|r| r.tool.as_deref() == Some("say")).expect("the call's record");
    assert_eq!(record.detail.as_deref(), Some("upstream=fx tool=echo"));
}

fn load(toml: &str) -> Result<toolgate::config::Settings, String> {
    let file = tempfile::Builder::new().suffix(".toml").tempfile().expect("file");
    std::fs::write(file.path(), toml).expect("written");
    toolgate::config::Settings::load(Some(file.path())).map_err(|e| format!("{e:?}"))
}

#[test]
fn the_readmes_upstream_example_is_valid_configuration() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).expect("README");
    let settings = load(&crate::common::toml_block(&readme, "## Upstream MCP servers")).expect("the README's example loads");
    assert_eq!(settings.upstreams.keys().collect::<Vec<_>>(), ["everything", "wiki"]);
}

#[test]
fn the_example_configurations_upstream_block_is_valid_when_uncommented() {
    let example = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/config/toolgate.example.toml")).expect("example");
    let (before, block) = example.split_once("# [upstreams.everything]").expect("the upstream example");
    // Up to the next section of the file.
    let block = block.split("\n# ---- ").next().unwrap_or(block);
    let uncommented: String = block.lines().map(|l| l.strip_prefix("# ").unwrap_or(l)).collect::<Vec<_>>().join("\n");
    let settings = load(&format!("{before}[upstreams.everything]{uncommented}\n")).expect("the uncommented example loads");
    let everything = &settings.upstreams["everything"];
    assert_eq!(everything.deny_tools, ["zip"]);
    assert_eq!(everything.tools["echo"].name.as_deref(), Some("say"));
}

#[tokio::test]
async fn an_upstreams_rate_limit_applies_to_each_of_its_tools_per_caller() {
    let dir = tempfile::tempdir().expect("dir");
    let upstream = json!({"stdio": {"program": "python3", "args": [FIXTURE], "env_passthrough": ["PATH"]},
        "rate_limit": {"per_minute": 1, "burst": 1, "cost": 1}});
    let server = TestServer::with(|s| {
        s.limits.enabled = true;
        s.tools.packs.examples = false;
        s.upstreams.insert("fx".into(), serde_json::from_value(upstream).expect("settings"));
        s.storage.data_dir = dir.path().to_owned();
    })
    .await;
    wait_for(&server, "fx_echo", true).await;
    let session = server.initialize(V).await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "fx_echo", "arguments": {"text": "a"}}});
    assert_eq!(server.post(&body.to_string(), &[("mcp-session-id", &session)]).await.status(), 200);
    assert_eq!(server.post(&body.to_string(), &[("mcp-session-id", &session)]).await.status(), 429, "the second call within the minute");
}

#[tokio::test]
async fn readiness_waits_only_for_upstreams_marked_required() {
    let dir = tempfile::tempdir().expect("dir");
    let dead = dir.path().join("dead");
    std::fs::write(&dead, "").expect("marker");
    let script = format!("test -e {} && exit 1; exec python3 {FIXTURE}", dead.display());
    let (server, _) = serve(json!({"required": true, "stdio": {"program": "sh", "args": ["-c", script]}})).await;
    let ready = server.client.get(server.url("/readyz")).send().await.expect("sent");
    assert_eq!(ready.status(), 503);
    assert!(ready.text().await.expect("body").contains("upstream MCP server fx"), "names the upstream");
    std::fs::remove_file(&dead).expect("marker removed");
    wait_for(&server, "fx_echo", true).await;
    assert_eq!(server.client.get(server.url("/readyz")).send().await.expect("sent").status(), 200);
}

#[tokio::test]
async fn readiness_does_not_wait_for_an_upstream_not_marked_required() {
    let (server, _) = serve(json!({"stdio": {"program": "sh", "args": ["-c", "exit 1"]}})).await;
    assert_eq!(server.client.get(server.url("/readyz")).send().await.expect("sent").status(), 200);
}

#[tokio::test]
async fn forwarded_calls_and_the_upstreams_state_are_in_the_metrics() {
    let (server, _) = serve(json!({})).await;
    wait_for(&server, "fx_echo", true).await;
    let session = server.initialize(V).await;
    call(&server, &session, "fx_echo", json!({"text": "m"})).await;
    call(&server, &session, "fx_fail", json!({})).await;
    let text = server.client.get(server.admin_url("/metrics")).send().await.expect("sent").text().await.expect("body");
    // (metric, labels it carries, value): label order and other labels do not matter.
    let expected: [(&str, &[&str], &str); 4] = [
        ("toolgate_upstream_calls_total", &[r#"upstream="fx""#, r#"outcome="ok""#], "1"),
        ("toolgate_upstream_calls_total", &[r#"upstream="fx""#, r#"outcome="tool_error""#], "1"),
        ("toolgate_upstream_up", &[r#"upstream="fx""#], "1"),
        ("toolgate_upstream_tools", &[r#"upstream="fx""#], "13"),
    ];
    for (metric, labels, value) in expected {
        let found = text.lines().any(|l| {
            l.starts_with(&format!("{metric}{{")) && labels.iter().all(|label| l.contains(label)) && l.ends_with(&format!(" {value}"))
        });
        assert!(
            found,
            "{metric} {labels:?} = {value} not in:\n{}",
            text.lines().filter(|l| l.contains("upstream")).collect::<Vec<_>>().join("\n")
        );
    }
}

// A hostile upstream: names, answers and stderr chosen to hurt (issue 26).

/// Peak resident memory of this process (nextest runs each test in its own), in KiB.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM");
    line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("VmHWM in kB")
}

#[tokio::test]
async fn an_upstream_tool_name_with_a_newline_cannot_forge_a_log_line() {
    let capture = crate::common::Capture::default();
    let log = toolgate::config::LogSettings { format: toolgate::config::LogFormat::Pretty, filter: "info".into(), ..Default::default() };
    let _telemetry = toolgate::telemetry::init_with_writer(&log, capture.clone());
    let forged = "ok\n2026-11-27T10:00:00.000000Z ERROR toolgate: forged line";
    let (server, _) = serve(json!({"stdio": {"env": {"UPSTREAM_EXTRA_NAMES": json!([forged]).to_string()}}})).await;
    wait_for(&server, "fx_echo", true).await;
    let logged = capture.text();
    assert!(logged.contains("ok\\n2026-11-27T10:00:00.000000Z ERROR toolgate: forged line"), "the name is logged, escaped:\n{logged}");
    assert!(!logged.lines().any(|l| l.starts_with("2026-11-27T10:00:00.000000Z")), "a forged line:\n{logged}");
}

#[tokio::test]
async fn a_result_of_a_million_empty_blocks_is_refused_without_costing_its_decoded_size() {
    let (server, _) = serve(json!({})).await;
    wait_for(&server, "fx_blocks", true).await;
    let session = server.initialize(V).await;
    let before = peak_rss_kib();
    // 3.8 MB on the wire, under max_message_bytes: ~670 MiB once decoded and relayed, before.
    let answer = call(&server, &session, "fx_blocks", json!({"count": 1_300_000})).await;
    let grown_mib = peak_rss_kib().saturating_sub(before) / 1024;
    assert!(grown_mib < 64, "the answer cost {grown_mib} MiB");
    assert_eq!(answer["result"]["isError"], true);
    assert!(text(&answer).contains("max_message_values"), "says what to change: {}", text(&answer));
    assert_eq!(text(&call(&server, &session, "fx_echo", json!({"text": "still here"})).await), "still here");
}

#[tokio::test]
async fn a_flood_on_an_upstreams_stderr_is_logged_at_a_bounded_rate_and_counted() {
    let capture = crate::common::Capture::default();
    let log = toolgate::config::LogSettings { format: toolgate::config::LogFormat::Pretty, filter: "info".into(), ..Default::default() };
    let _telemetry = toolgate::telemetry::init_with_writer(&log, capture.clone());
    let (server, _) = serve(json!({})).await;
    wait_for(&server, "fx_noisy", true).await;
    let session = server.initialize(V).await;
    assert_eq!(text(&call(&server, &session, "fx_noisy", json!({"lines": 20_000})).await), "noisy");
    let url = server.admin_url("/admin/upstreams");
    let mut stderr = Value::Null;
    for _ in 0..200 {
        let status: Value = server.client.get(&url).send().await.expect("sent").json().await.expect("json");
        stderr = status["upstreams"][0]["stderr"].clone();
        if stderr["tail"].as_array().and_then(|t| t.last()) == Some(&json!("noisy line 19999")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(stderr["tail"].as_array().map(Vec::len), Some(20), "the last lines are kept: {stderr}");
    let not_logged = stderr["lines_not_logged"].as_u64().unwrap_or_default();
    let logged = capture.text().lines().filter(|l| l.contains("stderr: noisy line")).count() as u64;
    assert_eq!(logged + not_logged, 20_000, "every line is logged or counted");
    assert!(logged <= 200, "{logged} lines logged");
    for _ in 0..60 {
        if capture.text().contains("lines were not logged") {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the log never said lines were not logged");
}

#[tokio::test]
async fn a_listing_whose_pages_each_fit_the_budget_but_not_together_is_refused() {
    // 73 tools of about 18 values each, 3 a page: each page fits 1,024 values, all of them not.
    let names: Vec<String> = (0..60).map(|i| format!("extra_{i}")).collect();
    let env = json!({"UPSTREAM_EXTRA_NAMES": json!(names).to_string()});
    let (server, _) = serve(json!({"max_message_values": 1024, "stdio": {"env": env}})).await;
    let url = server.admin_url("/admin/upstreams");
    let mut last_error = String::new();
    for _ in 0..200 {
        let status: Value = server.client.get(&url).send().await.expect("sent").json().await.expect("json");
        last_error = status["upstreams"][0]["last_error"].as_str().unwrap_or_default().to_owned();
        if !last_error.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(last_error.contains("in all its pages") && last_error.contains("max_message_values"), "{last_error:?}");
    assert!(served(&server).is_empty(), "nothing of the listing is served: {:?}", served(&server));
}
