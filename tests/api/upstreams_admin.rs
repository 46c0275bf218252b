//! Upstreams defined through the admin API: checked completely, stored, applied at once (and
//! at start-up), replaced under `If-Match`, and deleted with everything they served withdrawn.

use serde_json::{Value, json};

use crate::common::TestServer;
use crate::upstreams_http::{served, wait_for};

async fn put(server: &TestServer, name: &str, definition: &Value, if_match: Option<&str>) -> reqwest::Response {
    let mut request = server.client.put(server.admin_url(&format!("/admin/upstreams/{name}"))).json(definition);
    if let Some(tag) = if_match {
        request = request.header("if-match", tag);
    }
    request.send().await.expect("sent")
}

/// A server whose operator exempts loopback upstreams (what `allow_private` from the API needs).
async fn admin_server(adjust: impl FnOnce(&mut toolgate::config::Settings)) -> TestServer {
    TestServer::with(|s| {
        s.tools.packs.examples = false;
        s.tools.http.allow_hosts = vec!["127.0.0.1".into()];
        adjust(s);
    })
    .await
}

#[tokio::test]
async fn a_stored_upstream_is_served_at_once_and_deleting_it_withdraws_its_tools() {
    let upstream = TestServer::start().await;
    let server = admin_server(|_| {}).await;
    let created = put(&server, "remote", &json!({"url": upstream.url("/mcp"), "allow_private": true, "prefix": "r_"}), None).await;
    assert_eq!(created.status(), 201);
    assert_eq!(created.headers()["etag"], "\"1\"");
    wait_for(&server, "r_echo", true).await;
    let one: Value = server.client.get(server.admin_url("/admin/upstreams/remote")).send().await.expect("sent").json().await.expect("json");
    assert_eq!((one["revision"].as_i64(), one["status"]["source"].as_str()), (Some(1), Some("admin")));
    let deleted = server.client.delete(server.admin_url("/admin/upstreams/remote")).send().await.expect("sent");
    assert_eq!(deleted.status(), 204);
    wait_for(&server, "r_echo", false).await;
}

#[tokio::test]
async fn a_replaced_definition_restarts_the_upstream_with_its_new_settings() {
    let upstream = TestServer::start().await;
    let server = admin_server(|_| {}).await;
    let url = upstream.url("/mcp");
    put(&server, "remote", &json!({"url": url, "allow_private": true, "prefix": "a_"}), None).await;
    wait_for(&server, "a_echo", true).await;
    let replaced = put(&server, "remote", &json!({"url": url, "allow_private": true, "prefix": "b_"}), Some("\"1\"")).await;
    assert_eq!(replaced.status(), 200);
    wait_for(&server, "b_echo", true).await;
    assert!(!served(&server).iter().any(|n| n.starts_with("a_")), "the old prefix is gone: {:?}", served(&server));
}

#[tokio::test]
async fn a_replaced_definition_that_cannot_connect_serves_nothing_of_the_old_one() {
    let upstream = TestServer::start().await;
    let server = admin_server(|_| {}).await;
    put(&server, "remote", &json!({"url": upstream.url("/mcp"), "allow_private": true, "prefix": "a_"}), None).await;
    wait_for(&server, "a_echo", true).await;
    // A server that takes the connection and never answers: the new definition hangs in its
    // handshake for the whole minute it is given.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/mcp", silent.local_addr().expect("address"));
    let hanging = json!({"url": url, "allow_private": true, "prefix": "a_", "connect_timeout_ms": 60_000});
    assert_eq!(put(&server, "remote", &hanging, Some("\"1\"")).await.status(), 200);
    wait_for(&server, "a_echo", false).await;
    drop(silent);
}

#[tokio::test]
async fn a_replace_naming_a_stale_revision_changes_nothing() {
    let upstream = TestServer::start().await;
    let server = admin_server(|_| {}).await;
    let definition = json!({"url": upstream.url("/mcp"), "allow_private": true});
    put(&server, "remote", &definition, None).await;
    let stale = put(&server, "remote", &definition, Some("\"7\"")).await;
    assert_eq!(stale.status(), 412);
    assert_eq!(stale.headers()["etag"], "\"1\"");
}

#[tokio::test]
async fn an_invalid_definition_is_refused_naming_the_field() {
    let server = admin_server(|_| {}).await;
    let refused = put(&server, "remote", &json!({"url": "https://mcp.example.com/mcp", "concurrency": "many"}), None).await;
    assert_eq!(refused.status(), 422);
    let problem: Value = refused.json().await.expect("problem");
    assert_eq!(problem["errors"][0]["field"], "concurrency", "{problem}");
    let missing = put(&server, "remote", &json!({"prefix": "x_"}), None).await;
    let problem: Value = missing.json().await.expect("problem");
    assert!(problem["detail"].as_str().is_some_and(|d| d.contains("url")), "says what to give: {problem}");
}

#[tokio::test]
async fn a_stdio_upstream_cannot_be_stored_unless_command_tools_are_allowed() {
    let server = admin_server(|_| {}).await;
    let refused = put(&server, "local", &json!({"stdio": {"program": "python3"}}), None).await;
    assert_eq!(refused.status(), 403);
}

#[tokio::test]
async fn an_upstream_of_the_settings_cannot_be_replaced_or_deleted_through_the_api() {
    let upstream = TestServer::start().await;
    let configured = serde_json::from_value(json!({"url": upstream.url("/mcp"), "allow_private": true})).expect("settings");
    let server = admin_server(|s| {
        s.upstreams.insert("fixed".into(), configured);
    })
    .await;
    let refused = put(&server, "fixed", &json!({"url": upstream.url("/mcp"), "allow_private": true}), None).await;
    assert_eq!(refused.status(), 409);
    let delete = server.client.delete(server.admin_url("/admin/upstreams/fixed")).send().await.expect("sent");
    assert_eq!(delete.status(), 409);
}

#[tokio::test]
async fn a_stored_upstream_is_applied_when_the_server_starts() {
    let upstream = TestServer::start().await;
    let data = tempfile::tempdir().expect("dir");
    let dir = data.path().to_owned();
    let first = admin_server(|s| s.storage.data_dir = dir.clone()).await;
    put(&first, "remote", &json!({"url": upstream.url("/mcp"), "allow_private": true}), None).await;
    first.running.stop().await.expect("stopped");
    let second = admin_server(|s| s.storage.data_dir = dir.clone()).await;
    wait_for(&second, "remote_echo", true).await;
}

#[tokio::test]
async fn an_upstream_stored_through_one_replica_is_served_and_withdrawn_by_every_replica_on_postgres() {
    use crate::audit_support::{PgDb, pg_settings};
    let upstream = TestServer::start().await;
    let db = PgDb::create().await;
    let replica = |url: String| {
        admin_server(move |s| {
            let data = s.storage.data_dir.clone();
            s.storage = pg_settings(url, &data);
        })
    };
    let (a, b) = (replica(db.url()).await, replica(db.url()).await);
    let created = put(&a, "remote", &json!({"url": upstream.url("/mcp"), "allow_private": true}), None).await;
    assert_eq!(created.status(), 201);
    wait_for(&b, "remote_echo", true).await;
    let deleted = a.client.delete(a.admin_url("/admin/upstreams/remote")).send().await.expect("sent");
    assert_eq!(deleted.status(), 204);
    wait_for(&b, "remote_echo", false).await;
}

#[tokio::test]
async fn a_private_address_through_the_api_needs_the_operators_allow_hosts() {
    let upstream = TestServer::start().await;
    let server = admin_server(|s| s.tools.http.allow_hosts.clear()).await;
    let refused = put(&server, "remote", &json!({"url": upstream.url("/mcp"), "allow_private": true}), None).await;
    assert_eq!(refused.status(), 403);
    let problem: Value = refused.json().await.expect("problem");
    assert!(problem["detail"].as_str().is_some_and(|d| d.contains("tools.http.allow_hosts")), "{problem}");
}

#[tokio::test]
async fn a_header_secret_through_the_api_comes_only_from_what_the_operator_allows() {
    let server = admin_server(|s| s.tools.http.secret_env = vec!["UPSTREAM_*".into()]).await;
    let definition = json!({"url": "https://mcp.example.com/mcp", "headers": {"X-Key": {"env": "DATABASE_URL"}}});
    let refused = put(&server, "remote", &definition, None).await;
    assert_eq!(refused.status(), 422);
    let problem: Value = refused.json().await.expect("problem");
    assert_eq!(problem["errors"][0]["field"], "headers.X-Key", "{problem}");
}

#[tokio::test]
async fn oauth_through_the_api_needs_the_operators_consent() {
    let server = admin_server(|_| {}).await;
    let oauth = json!({"grant": "token_exchange", "token_url": "https://idp.example.com/token", "client_id": "toolgate"});
    let refused = put(&server, "remote", &json!({"url": "https://mcp.example.com/mcp", "oauth": oauth}), None).await;
    assert_eq!(refused.status(), 403);
    let problem: Value = refused.json().await.expect("problem");
    assert!(problem["detail"].as_str().is_some_and(|d| d.contains("admin.allow_upstream_oauth")), "{problem}");
}

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/api/upstream_support/stdio_upstream.py");

/// Secrets a stored definition holds, and what must never be read back.
const SECRETS: [&str; 3] = ["sk-env-secret-1", "pw-url-secret-2", "sk-arg-secret-3"];

#[tokio::test]
async fn a_stored_definitions_secrets_are_never_read_back_and_a_redacted_one_cannot_be_stored() {
    let server = admin_server(|s| s.admin.allow_command_tools = true).await;
    let args = json!([FIXTURE, "postgresql://user:pw-url-secret-2@db/x", "--token", "sk-arg-secret-3"]);
    let definition =
        json!({"stdio": {"program": "python3", "args": args, "env_passthrough": ["PATH"], "env": {"API_KEY": "sk-env-secret-1"}}});
    let created = put(&server, "local", &definition, None).await;
    assert_eq!(created.status(), 201);
    assert_no_secret(&created.text().await.expect("body"));
    let detail = server.client.get(server.admin_url("/admin/upstreams/local")).send().await.expect("sent");
    let detail: Value = detail.json().await.expect("json");
    assert_no_secret(&detail.to_string());
    assert_eq!(detail["definition"]["stdio"]["env"]["API_KEY"], "<redacted>");
    let list = server.client.get(server.admin_url("/admin/upstreams")).send().await.expect("sent");
    assert_no_secret(&list.text().await.expect("body"));
    // The definition read back and sent again would store the placeholder as the secret.
    let again = put(&server, "local", &detail["definition"], None).await;
    assert_eq!(again.status(), 422);
    let problem: Value = again.json().await.expect("problem");
    assert_eq!(problem["errors"][0]["field"], "stdio.args[3]", "{problem}");
    assert!(problem["detail"].as_str().is_some_and(|d| d.contains("send the secret again")), "{problem}");
}

fn assert_no_secret(body: &str) {
    for secret in SECRETS {
        assert!(!body.contains(secret), "{secret} in {body}");
    }
}
