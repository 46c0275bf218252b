//! Virtual servers defined through the admin API: checked completely (a name two tools would
//! share is refused naming both sources and the setting), stored, applied at once and on every
//! replica, replaced under `If-Match`, deleted; the settings' own servers are refused at start
//! when two tools would share a name on one.

use std::time::Duration;

use serde_json::{Value, json};

use crate::audit_support::{PgDb, pg_settings};
use crate::common::{ACCEPT_BOTH, MODERN, TestServer, response_json};

async fn put(s: &TestServer, name: &str, definition: &Value, if_match: Option<&str>) -> reqwest::Response {
    let mut request = s.client.put(s.admin_url(&format!("/admin/servers/{name}"))).json(definition);
    if let Some(tag) = if_match {
        request = request.header("if-match", tag);
    }
    request.send().await.expect("sent")
}

async fn names_at(s: &TestServer, path: &str) -> Option<Vec<String>> {
    let body = json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}}}});
    let res = s
        .client
        .post(s.url(path))
        .header("content-type", "application/json")
        .header("accept", ACCEPT_BOTH)
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", "tools/list")
        .body(body.to_string())
        .send()
        .await
        .expect("sent");
    if res.status() == 404 {
        return None;
    }
    let v = response_json(res).await;
    Some(v["result"]["tools"].as_array().expect("tools").iter().map(|t| t["name"].as_str().expect("name").to_owned()).collect())
}

#[tokio::test]
async fn a_stored_server_is_served_at_once_and_deleting_it_makes_its_path_unknown() {
    let s = TestServer::start().await;
    let created = put(&s, "team", &json!({"path": "/t/mcp", "tools": ["echo"], "overrides": {"echo": {"name": "say"}}}), None).await;
    assert_eq!(created.status(), 201);
    assert_eq!(created.headers()["etag"], "\"1\"");
    assert_eq!(names_at(&s, "/t/mcp").await, Some(vec!["say".to_owned()]));
    let one: Value = s.client.get(s.admin_url("/admin/servers/team")).send().await.expect("sent").json().await.expect("json");
    assert_eq!(
        one["tools"][0],
        json!({"name": "say", "served_from": "echo", "source": "the built-in tools", "description": one["tools"][0]["description"]})
    );
    assert_eq!(one["origin"], "admin");
    let deleted = s.client.delete(s.admin_url("/admin/servers/team")).send().await.expect("sent");
    assert_eq!(deleted.status(), 204);
    assert_eq!(names_at(&s, "/t/mcp").await, None);
}

#[tokio::test]
async fn a_definition_that_would_serve_two_tools_under_one_name_is_refused_naming_both_sources() {
    let s = TestServer::start().await;
    let res = put(&s, "team", &json!({"path": "/t/mcp", "tools": ["*"], "overrides": {"echo": {"name": "calculate_sum"}}}), None).await;
    assert_eq!(res.status(), 422);
    let problem: Value = res.json().await.expect("json");
    let detail = problem["detail"].as_str().expect("detail");
    assert!(detail.contains("echo from the built-in tools") && detail.contains("calculate_sum from the built-in tools"), "{detail}");
    assert!(detail.contains("servers.team.overrides"), "{detail}");
    assert_eq!(names_at(&s, "/t/mcp").await, None, "nothing was stored");
}

#[tokio::test]
async fn a_definition_taking_another_servers_path_or_a_settings_name_is_refused() {
    let s = TestServer::with(|c| {
        c.servers.insert("ops".into(), toolgate::config::servers::VirtualServerSettings { path: "/ops/mcp".into(), ..Default::default() });
    })
    .await;
    let taken = put(&s, "team", &json!({"path": "/ops/mcp"}), None).await;
    assert_eq!(taken.status(), 422);
    let problem: Value = taken.json().await.expect("json");
    assert!(problem["detail"].as_str().expect("detail").contains("servers.ops.path"), "{problem}");
    assert_eq!(put(&s, "ops", &json!({"path": "/x/mcp"}), None).await.status(), 409);
    let unknown_field = put(&s, "team", &json!({"path": "/t/mcp", "tool": ["echo"]}), None).await;
    assert_eq!(unknown_field.status(), 422);
}

#[tokio::test]
async fn a_replace_naming_a_stale_revision_changes_nothing() {
    let s = TestServer::start().await;
    assert_eq!(put(&s, "team", &json!({"path": "/t/mcp", "tools": ["echo"]}), None).await.status(), 201);
    assert_eq!(put(&s, "team", &json!({"path": "/t/mcp", "tools": ["calculate_sum"]}), Some("\"1\"")).await.status(), 200);
    assert_eq!(put(&s, "team", &json!({"path": "/t/mcp", "tools": ["get_current_time"]}), Some("\"1\"")).await.status(), 412);
    assert_eq!(names_at(&s, "/t/mcp").await, Some(vec!["calculate_sum".to_owned()]));
}

#[tokio::test]
async fn settings_that_would_serve_two_tools_under_one_name_stop_start_up_naming_both() {
    let data = tempfile::tempdir().expect("dir");
    let mut settings = crate::common::test_settings(data.path());
    let mut team =
        toolgate::config::servers::VirtualServerSettings { path: "/t/mcp".into(), tools: vec!["*".into()], ..Default::default() };
    team.overrides.insert("echo".into(), toolgate::config::servers::ServedAs { name: Some("calculate_sum".into()), ..Default::default() });
    settings.servers.insert("team".into(), team);
    let Err(err) = toolgate::app::AppState::new(settings).await else { panic!("start-up was not refused") };
    let err = err.to_string();
    assert!(err.contains("servers.team.overrides") && err.contains("echo from the built-in tools"), "{err}");
}

#[tokio::test]
async fn a_server_stored_through_one_replica_is_served_by_another() {
    let db = PgDb::create().await;
    let replica = |url: String| {
        TestServer::with(move |s| {
            let data = s.storage.data_dir.clone();
            s.storage = pg_settings(url, &data);
        })
    };
    let a = replica(db.url()).await;
    let b = replica(db.url()).await;
    assert_eq!(put(&a, "team", &json!({"path": "/t/mcp", "tools": ["echo"]}), None).await.status(), 201);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while names_at(&b, "/t/mcp").await.is_none() {
        assert!(tokio::time::Instant::now() < deadline, "replica B never served the server stored through A");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(names_at(&b, "/t/mcp").await, Some(vec!["echo".to_owned()]));
}
