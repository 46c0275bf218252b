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
