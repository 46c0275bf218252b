//! Served names of upstream tools are unique and stable: prefixes that can collide are refused
//! when the settings are read or an upstream is stored through the admin API, and a name that
//! still collides at run time (an operator's rename) stays with the upstream that served it
//! first, whatever the order of listings, reconnects and lost connections; the other upstream's
//! tool is skipped, and says so in the admin API, the log and the metrics.

use serde_json::{Value, json};

use crate::common::{TestServer, load_toml};

async fn admin_put(server: &TestServer, name: &str, definition: Value) -> reqwest::Response {
    server.client.put(server.admin_url(&format!("/admin/upstreams/{name}"))).json(&definition).send().await.expect("sent")
}

#[test]
fn two_upstreams_whose_default_prefixes_collide_are_refused_naming_both_and_the_setting() {
    let team = "[upstreams.team]\nurl = \"https://team.example.com/mcp\"\n";
    let error = load_toml(&format!("{team}\n[upstreams.team_wiki]\nurl = \"https://wiki.example.com/mcp\"\n")).expect_err("refused");
    for part in
        ["upstreams.team_wiki.prefix", "TOOLGATE__UPSTREAMS__TEAM_WIKI__PREFIX", "upstreams.team.prefix", "\"team\"", "\"team_wiki\""]
    {
        assert!(error.contains(part), "{part} not in: {error}");
    }
    // team_ and teams_ only share their first characters: no name can be both.
    load_toml(&format!("{team}\n[upstreams.teams]\nurl = \"https://teams.example.com/mcp\"\n")).expect("accepted");
}

#[test]
fn an_empty_prefix_is_refused_beside_another_upstream_but_accepted_alone() {
    let alone = "[upstreams.all]\nurl = \"https://all.example.com/mcp\"\nprefix = \"\"\n";
    load_toml(alone).expect("the only upstream may serve its names as they are");
    let error = load_toml(&format!("{alone}\n[upstreams.wiki]\nurl = \"https://wiki.example.com/mcp\"\n")).expect_err("refused");
    assert!(error.contains("empty prefix") && error.contains("upstreams.all.prefix"), "{error}");
}

#[tokio::test]
async fn an_upstream_stored_through_the_api_whose_prefix_collides_with_a_configured_one_is_refused() {
    let configured = serde_json::from_value(json!({"url": "https://team.example.com/mcp"})).expect("settings");
    let server = TestServer::with(|s| {
        s.tools.packs.examples = false;
        s.upstreams.insert("team".into(), configured);
    })
    .await;
    let refused = admin_put(&server, "team_wiki", json!({"url": "https://wiki.example.com/mcp"})).await;
    assert_eq!(refused.status(), 422);
    let problem: Value = refused.json().await.expect("problem");
    assert_eq!(problem["errors"][0]["field"], "prefix", "{problem}");
    assert!(problem["detail"].as_str().is_some_and(|d| d.contains("\"team\"")), "names the other upstream: {problem}");
}

#[tokio::test]
async fn an_upstream_stored_through_the_api_whose_prefix_collides_with_another_stored_one_is_refused() {
    let server = TestServer::with(|s| s.tools.packs.examples = false).await;
    let first = admin_put(&server, "docs", json!({"url": "https://docs.example.com/mcp", "prefix": "d_"})).await;
    assert_eq!(first.status(), 201);
    let refused = admin_put(&server, "drive", json!({"url": "https://drive.example.com/mcp", "prefix": "d_rive_"})).await;
    assert_eq!(refused.status(), 422);
    let problem: Value = refused.json().await.expect("problem");
    assert!(problem["detail"].as_str().is_some_and(|d| d.contains("\"docs\"")), "{problem}");
    let replaced = admin_put(&server, "docs", json!({"url": "https://docs.example.com/mcp", "prefix": "d_docs_"})).await;
    assert_eq!(replaced.status(), 200, "an upstream's own old prefix is no clash");
}

// ===== at run time: two upstreams that rename a tool onto one name =====

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/api/upstream_support/stdio_upstream.py");
const V: &str = "2025-11-25";

/// The fixture as an upstream whose tool `renamed` is served as `shared`; while `marker`
/// exists it cannot start (so a test decides when it connects).
fn fixture(renamed: &str, marker: &std::path::Path) -> toolgate::config::upstreams::UpstreamSettings {
    let script = format!("test -e {} && exit 1; exec python3 {FIXTURE}", marker.display());
    // Names, not approvals, are tested here: tools that appear after the first listing serve at once.
    let upstream = json!({"stdio": {"program": "sh", "args": ["-c", script], "env_passthrough": ["PATH"]},
        "tools": {renamed: {"name": "shared"}}, "approval": "off"});
    serde_json::from_value(upstream).expect("settings")
}

/// `keeper` serves its `echo` as `shared`; `intruder` (whose name sorts first) renames its
/// `intruder_tool` onto the same name. Returns the server and each one's start-blocking marker.
async fn two(intruder_tool: &str, intruder_waits: bool) -> (TestServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("dir");
    if intruder_waits {
        std::fs::write(dir.path().join("intruder"), "").expect("marker");
    }
    let (keeper, intruder) = (fixture("echo", &dir.path().join("keeper")), fixture(intruder_tool, &dir.path().join("intruder")));
    let server = TestServer::with(|s| {
        s.tools.packs.examples = false;
        s.upstreams.insert("keeper".into(), keeper);
        s.upstreams.insert("intruder".into(), intruder);
    })
    .await;
    wait_until(&server, "keeper serves `shared`", |s| served(s).contains(&"shared".to_owned())).await;
    (server, dir)
}

fn served(server: &TestServer) -> Vec<String> {
    server.state().server.tools.snapshot().iter().map(|t| t.name().to_owned()).collect()
}

fn status(server: &TestServer, upstream: &str) -> toolgate::upstream::UpstreamStatus {
    server.state().upstreams.link(upstream).expect("configured").status()
}

async fn wait_until(server: &TestServer, what: &str, done: impl Fn(&TestServer) -> bool) {
    for _ in 0..200 {
        if done(server) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("not within 10 s: {what}; served {:?}", served(server));
}

/// What `shared` answers to `{"text": "hi"}`: keeper's `echo` says "hi".
async fn call_shared(server: &TestServer, session: &str) -> String {
    let answer = server.call(session, 1, "tools/call", json!({"name": "shared", "arguments": {"text": "hi"}})).await;
    answer["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

async fn call(server: &TestServer, session: &str, tool: &str) {
    server.call(session, 1, "tools/call", json!({"name": tool, "arguments": {}})).await;
}

fn skips_shared(server: &TestServer, upstream: &str) -> bool {
    status(server, upstream).skipped.iter().any(|s| s.starts_with("shared: "))
}

#[tokio::test]
async fn a_name_stays_with_the_upstream_that_served_it_first_when_another_lists_it_later() {
    let (server, _dir) = two("extra", false).await;
    wait_until(&server, "intruder connected", |s| served(s).contains(&"intruder_echo".to_owned())).await;
    let session = server.initialize(V).await;
    // The intruder now lists `extra`, which it serves as `shared` too.
    call(&server, &session, "intruder_toggle_extra").await;
    wait_until(&server, "the intruder's `shared` is skipped", |s| skips_shared(s, "intruder")).await;
    assert_eq!(call_shared(&server, &session).await, "hi", "keeper's echo answers");
    // The owner lists again, and so does the intruder (withdrawing and listing it again).
    call(&server, &session, "keeper_toggle_extra").await;
    wait_until(&server, "keeper lists again", |s| served(s).contains(&"keeper_extra".to_owned())).await;
    call(&server, &session, "intruder_toggle_extra").await;
    wait_until(&server, "the intruder drops it", |s| !skips_shared(s, "intruder")).await;
    call(&server, &session, "intruder_toggle_extra").await;
    wait_until(&server, "the intruder lists it again", |s| skips_shared(s, "intruder")).await;
    assert_eq!(call_shared(&server, &session).await, "hi");
}

#[tokio::test]
async fn the_admin_status_and_the_metrics_count_only_what_is_served_and_list_the_skipped_name() {
    let (server, _dir) = two("extra", false).await;
    wait_until(&server, "intruder connected", |s| served(s).contains(&"intruder_echo".to_owned())).await;
    let session = server.initialize(V).await;
    call(&server, &session, "intruder_toggle_extra").await;
    wait_until(&server, "the intruder's `shared` is skipped", |s| skips_shared(s, "intruder")).await;
    let all: Value = server.client.get(server.admin_url("/admin/upstreams")).send().await.expect("sent").json().await.expect("json");
    let intruder = all["upstreams"].as_array().expect("list").iter().find(|u| u["name"] == "intruder").expect("intruder").clone();
    assert_eq!(intruder["tools"], 13, "14 listed, `shared` not served: {intruder}");
    let skipped = intruder["skipped"].as_array().expect("skipped");
    assert!(skipped.iter().any(|s| s.as_str().is_some_and(|s| s.starts_with("shared: ") && s.contains("keeper"))), "{intruder}");
    let metrics = server.client.get(server.admin_url("/metrics")).send().await.expect("sent").text().await.expect("body");
    let line = metrics.lines().find(|l| {
        l.starts_with("toolgate_upstream_tools_skipped{") && l.contains(r#"upstream="intruder""#) && l.contains(r#"reason="name_taken""#)
    });
    assert!(line.is_some_and(|l| l.ends_with(" 1")), "{line:?}");
    assert!(metrics.lines().any(|l| l.starts_with("toolgate_upstream_tools{") && l.contains("intruder") && l.ends_with(" 13")));
}

#[tokio::test]
async fn an_upstream_that_connects_or_reconnects_later_does_not_take_a_name_served_first_by_another() {
    // The intruder serves its `add` as `shared`: were it to win, "hi" would be refused.
    let (server, dir) = two("add", true).await;
    std::fs::remove_file(dir.path().join("intruder")).expect("marker removed");
    wait_until(&server, "intruder connected", |s| skips_shared(s, "intruder")).await;
    let session = server.initialize(V).await;
    assert_eq!(call_shared(&server, &session).await, "hi");
    call(&server, &session, "intruder_die").await;
    wait_until(&server, "intruder reconnected", |s| status(s, "intruder").reconnects == 1 && status(s, "intruder").state == "connected")
        .await;
    assert_eq!(call_shared(&server, &session).await, "hi");
}

#[tokio::test]
async fn a_name_whose_owner_lost_its_connection_stays_its_own_and_is_served_again_when_it_is_back() {
    let (server, dir) = two("extra", false).await;
    wait_until(&server, "intruder connected", |s| served(s).contains(&"intruder_echo".to_owned())).await;
    let session = server.initialize(V).await;
    std::fs::write(dir.path().join("keeper"), "").expect("marker");
    call(&server, &session, "keeper_die").await;
    wait_until(&server, "keeper withdrawn", |s| !served(s).contains(&"shared".to_owned())).await;
    call(&server, &session, "intruder_toggle_extra").await;
    wait_until(&server, "the intruder's `shared` is skipped", |s| skips_shared(s, "intruder")).await;
    assert!(!served(&server).contains(&"shared".to_owned()), "not the intruder's meanwhile");
    assert!(call_shared(&server, &session).await.contains("not connected"), "a call is told the owner is away");
    std::fs::remove_file(dir.path().join("keeper")).expect("marker removed");
    wait_until(&server, "keeper back", |s| served(s).contains(&"shared".to_owned())).await;
    assert_eq!(call_shared(&server, &session).await, "hi");
}

#[tokio::test]
async fn a_skipped_name_is_logged_once_as_a_warning_naming_the_tool_and_both_upstreams() {
    let buffer = crate::common::Capture::default();
    let log = toolgate::config::LogSettings { format: toolgate::config::LogFormat::Json, ..Default::default() };
    let _telemetry = toolgate::telemetry::init_with_writer(&log, buffer.clone());
    let (server, _dir) = two("extra", false).await;
    wait_until(&server, "intruder connected", |s| served(s).contains(&"intruder_echo".to_owned())).await;
    let session = server.initialize(V).await;
    call(&server, &session, "intruder_toggle_extra").await;
    wait_until(&server, "the intruder's `shared` is skipped", |s| skips_shared(s, "intruder")).await;
    // The owner lists again: the same conflict is not logged again.
    call(&server, &session, "keeper_toggle_extra").await;
    wait_until(&server, "keeper lists again", |s| served(s).contains(&"keeper_extra".to_owned())).await;
    let text = String::from_utf8(buffer.0.lock().expect("log").clone()).expect("utf-8");
    let warnings: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["message"].as_str().is_some_and(|m| m.contains("its name is held by another")))
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    let line = warnings[0].to_string();
    assert!(line.contains("WARN") && line.contains("\"intruder\"") && line.contains("\"shared\"") && line.contains("keeper"), "{line}");
}
