//! One upstream's detail in the admin API (`GET /admin/upstreams/{name}`), what the console's
//! upstream page shows: the last error kept after a reconnect, with its time; the history of
//! state changes; the served tools; the skipped ones with their reason; the effective settings
//! with what could be a secret redacted. Against the real stdio fixture.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::common::TestServer;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/api/upstream_support/stdio_upstream.py");

/// A server with the fixture as upstream `fx`, its stdio settings merged with `extra`.
async fn serve(env: Value, extra: Value) -> TestServer {
    let mut upstream = json!({"stdio": {"program": "python3", "args": [FIXTURE], "env_passthrough": ["PATH"], "env": env}});
    for (key, value) in extra.as_object().cloned().unwrap_or_default() {
        upstream[key] = value;
    }
    let settings = serde_json::from_value(upstream).expect("upstream settings");
    TestServer::with(|s| {
        s.tools.packs.examples = false;
        s.upstreams.insert("fx".into(), settings);
    })
    .await
}

async fn detail(server: &TestServer) -> Value {
    let res = server.client.get(server.admin_url("/admin/upstreams/fx")).send().await.expect("sent");
    assert_eq!(res.status(), 200);
    res.json().await.expect("json")
}

/// Waits until the detail satisfies `done`, and returns it.
async fn wait_detail(server: &TestServer, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..200 {
        let d = detail(server).await;
        if done(&d) {
            return d;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what} not seen after 10 s: {}", detail(server).await);
}

fn connected(d: &Value) -> bool {
    d["status"]["state"] == "connected"
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// The upstream dies (its `die` tool), and toolgate reconnects it.
async fn die_and_come_back(server: &TestServer) {
    wait_detail(server, "connected", connected).await;
    let session = server.initialize("2025-11-25").await;
    server.call(&session, 1, "tools/call", json!({"name": "fx_die", "arguments": {}})).await;
    wait_detail(server, "a reconnect", |d| connected(d) && d["status"]["reconnects"] == 1).await;
}

#[tokio::test]
async fn the_last_error_stays_with_its_time_after_the_upstream_reconnects() {
    let server = serve(json!({}), json!({})).await;
    let before = now_ms();
    die_and_come_back(&server).await;
    let status = &detail(&server).await["status"];
    assert!(status["last_error"].as_str().is_some_and(|e| !e.is_empty()), "{status}");
    let at = status["last_error_ms"].as_u64().expect("last_error_ms");
    assert!((before..=now_ms()).contains(&at), "{at} not between {before} and now");
}

#[tokio::test]
async fn the_history_shows_each_state_change_with_its_reason() {
    let server = serve(json!({}), json!({})).await;
    die_and_come_back(&server).await;
    let history = detail(&server).await["history"].as_array().expect("history").clone();
    let changes: Vec<(&str, &str)> = history.iter().map(|c| (c["from"].as_str().unwrap_or(""), c["to"].as_str().unwrap_or(""))).collect();
    let expected =
        [("connecting", "connected"), ("connected", "disconnected"), ("disconnected", "connecting"), ("connecting", "connected")];
    assert_eq!(changes, expected, "{history:?}");
    let lost = &history[1];
    assert!(lost["reason"].as_str().is_some_and(|r| !r.is_empty()) && lost["at_ms"].as_u64().is_some(), "{lost}");
}

#[tokio::test]
async fn skipped_tools_are_listed_each_with_its_reason() {
    // A name toolgate cannot serve, and a rename onto a name the same upstream already serves.
    let server = serve(json!({"UPSTREAM_EXTRA_NAMES": "[\"bad name\"]"}), json!({"tools": {"add": {"name": "fx_echo"}}})).await;
    let d = wait_detail(&server, "two skipped tools", |d| d["status"]["skipped_tools"].as_array().is_some_and(|s| s.len() == 2)).await;
    let skipped: Vec<(&str, &str)> = d["status"]["skipped_tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| (s["tool"].as_str().unwrap_or(""), s["reason"].as_str().unwrap_or("")))
        .collect();
    assert!(skipped.contains(&("bad name", "invalid")), "{skipped:?}");
    assert!(skipped.contains(&("fx_echo", "name_taken")), "{skipped:?}");
}

#[tokio::test]
async fn the_detail_lists_the_names_its_tools_are_served_under() {
    let server = serve(json!({}), json!({"allow_tools": ["echo", "add"]})).await;
    let d = wait_detail(&server, "connected", connected).await;
    assert_eq!(d["served"], json!(["fx_add", "fx_echo"]));
}

#[tokio::test]
async fn the_settings_shown_redact_a_programs_environment_values() {
    let server = serve(json!({"UPSTREAM_SECRET_FOR_TEST": "sk-live-123"}), json!({})).await;
    let d = detail(&server).await;
    assert_eq!(d["settings"]["stdio"]["env"]["UPSTREAM_SECRET_FOR_TEST"], "<redacted>");
    assert!(!d.to_string().contains("sk-live-123"), "{d}");
}

#[tokio::test]
async fn the_settings_shown_redact_credentials_in_a_programs_arguments() {
    let args = json!([FIXTURE, "postgresql://user:pw-in-url-1@db/x", "--api-key=sk-flag-2", "--token", "sk-next-3", "--verbose"]);
    let server = serve(json!({}), json!({"stdio": {"program": "python3", "args": args, "env_passthrough": ["PATH"]}})).await;
    let d = detail(&server).await;
    let body = d.to_string();
    for secret in ["pw-in-url-1", "user:", "sk-flag-2", "sk-next-3"] {
        assert!(!body.contains(secret), "{secret} in {body}");
    }
    let shown = json!([FIXTURE, "postgresql://db/x", "--api-key=<redacted>", "--token", "<redacted>", "--verbose"]);
    assert_eq!(d["settings"]["stdio"]["args"], shown);
}

#[tokio::test]
async fn the_settings_shown_redact_every_urls_credentials_query_and_fragment() {
    let oauth = json!({"grant": "client_credentials", "token_url": "https://as.example.com/token?sk_live_tok", "client_id": "tg",
        "resource": "https://res:pw-res@r.example.com/#frag-secret"});
    let server =
        serve(json!({}), json!({"stdio": null, "url": "https://bob:hunter2@mcp.example.com/mcp?sk_live_abc#frag2", "oauth": oauth})).await;
    let d = detail(&server).await;
    let body = d.to_string();
    for secret in ["hunter2", "bob", "sk_live_abc", "frag2", "sk_live_tok", "pw-res", "frag-secret"] {
        assert!(!body.contains(secret), "{secret} in {body}");
    }
    assert_eq!(d["settings"]["url"], "https://mcp.example.com/mcp?<redacted>");
}
