//! Virtual servers (`[servers.<name>]`): each path is a complete MCP endpoint serving exactly
//! its own selection under its own names, with its own sessions, audience, scopes, metadata
//! and `list_changed`; the default endpoint keeps serving everything.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate::config::Settings;
use toolgate::config::servers::{ServedAs, VirtualServerSettings};

use crate::common::idp::Issuer;
use crate::common::{ACCEPT_BOTH, MODERN, SseReader, TestServer, response_json};

const DATA: &str = "/teams/data/mcp";
const OPS: &str = "/teams/ops/mcp";

/// Two servers: `data` serves `echo` as `say` and `calculate_*`; `ops` serves `get_current_time`.
fn two_servers(c: &mut Settings) {
    let mut data = VirtualServerSettings {
        path: DATA.into(),
        title: Some("Data team".into()),
        instructions: Some("Tools of the data team.".into()),
        tools: vec!["calculate_*".into()],
        ..Default::default()
    };
    data.overrides
        .insert("echo".into(), ServedAs { name: Some("say".into()), description: Some("Say it back".into()), ..Default::default() });
    let ops = VirtualServerSettings { path: OPS.into(), tools: vec!["get_current_time".into()], ..Default::default() };
    c.servers = BTreeMap::from([("data".into(), data), ("ops".into(), ops)]);
}

async fn post_to(s: &TestServer, path: &str, body: &Value, extra: &[(&str, &str)]) -> reqwest::Response {
    let mut req =
        s.client.post(s.url(path)).header("content-type", "application/json").header("accept", ACCEPT_BOTH).body(body.to_string());
    for (k, v) in extra {
        req = req.header(*k, *v);
    }
    req.send().await.expect("sent")
}

/// A 2026-07-28 request to `path` with the headers and `_meta` that era needs.
async fn modern_to(s: &TestServer, path: &str, method: &str, mut params: Value, extra: &[(&str, &str)]) -> reqwest::Response {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let name = params.get("name").and_then(Value::as_str).map(str::to_owned);
    let mut headers = vec![("mcp-protocol-version", MODERN), ("mcp-method", method)];
    if let Some(name) = name.as_deref() {
        headers.push(("mcp-name", name));
    }
    headers.extend_from_slice(extra);
    post_to(s, path, &json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}), &headers).await
}

async fn tool_names(s: &TestServer, path: &str) -> Vec<String> {
    let res = modern_to(s, path, "tools/list", json!({}), &[]).await;
    assert_eq!(res.status(), 200, "{path}");
    let body = response_json(res).await;
    body["result"]["tools"].as_array().expect("tools").iter().map(|t| t["name"].as_str().expect("name").to_owned()).collect()
}

/// Initializes a legacy session at `path`; returns its id.
async fn initialize_at(s: &TestServer, path: &str, extra: &[(&str, &str)]) -> (String, Value) {
    let body = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}});
    let res = post_to(s, path, &body, extra).await;
    assert_eq!(res.status(), 200, "{path}");
    let id = res.headers()["mcp-session-id"].to_str().expect("ascii").to_owned();
    let result = response_json(res).await["result"].clone();
    let mut extra = extra.to_vec();
    extra.push(("mcp-session-id", &id));
    let done = post_to(s, path, &json!({"jsonrpc":"2.0","method":"notifications/initialized"}), &extra).await;
    assert_eq!(done.status(), 202);
    (id, result)
}

#[tokio::test]
async fn each_server_lists_exactly_its_own_tools_under_its_own_names() {
    let s = TestServer::with(two_servers).await;
    assert_eq!(tool_names(&s, DATA).await, ["calculate_sum", "say"]);
    assert_eq!(tool_names(&s, OPS).await, ["get_current_time"]);
    let all = tool_names(&s, "/mcp").await;
    assert!(all.contains(&"echo".to_owned()) && !all.contains(&"say".to_owned()), "{all:?}");
}

#[tokio::test]
async fn an_overridden_tool_is_listed_with_the_servers_description_and_called_by_its_new_name() {
    let s = TestServer::with(two_servers).await;
    let body = response_json(modern_to(&s, DATA, "tools/list", json!({}), &[]).await).await;
    let say = body["result"]["tools"].as_array().expect("tools").iter().find(|t| t["name"] == "say").cloned().expect("say");
    assert_eq!(say["description"], "Say it back");
    let res = modern_to(&s, DATA, "tools/call", json!({"name": "say", "arguments": {"text": "hi"}}), &[]).await;
    let body = response_json(res).await;
    assert_eq!(body["result"]["content"][0]["text"], "hi", "{body}");
}

#[tokio::test]
async fn a_tool_another_server_serves_is_unknown_here() {
    let s = TestServer::with(two_servers).await;
    for (path, name) in [(OPS, "calculate_sum"), (DATA, "echo"), (DATA, "get_current_time")] {
        let res = modern_to(&s, path, "tools/call", json!({"name": name, "arguments": {}}), &[]).await;
        let body = response_json(res).await;
        assert_eq!(body["error"]["code"], -32602, "{path} {name}: {body}");
        assert!(body["error"]["message"].as_str().expect("message").contains("Unknown tool"), "{body}");
    }
}

#[tokio::test]
async fn initialize_names_the_server_and_gives_its_instructions() {
    let s = TestServer::with(two_servers).await;
    let (_, result) = initialize_at(&s, DATA, &[]).await;
    assert_eq!(result["serverInfo"]["name"], "data");
    assert_eq!(result["serverInfo"]["title"], "Data team");
    assert_eq!(result["instructions"], "Tools of the data team.");
}

#[tokio::test]
async fn a_2026_answer_is_stamped_with_the_servers_own_name() {
    let s = TestServer::with(two_servers).await;
    let body = response_json(modern_to(&s, DATA, "server/discover", json!({}), &[]).await).await;
    assert_eq!(body["result"]["serverInfo"]["name"], "data");
    assert_eq!(body["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "data", "{body}");
}

#[tokio::test]
async fn a_session_is_unknown_at_every_endpoint_but_its_own() {
    let s = TestServer::with(two_servers).await;
    let (sid, _) = initialize_at(&s, DATA, &[]).await;
    let list = json!({"jsonrpc":"2.0","id":2,"method":"tools/list"});
    assert_eq!(post_to(&s, DATA, &list, &[("mcp-session-id", &sid)]).await.status(), 200);
    for path in [OPS, "/mcp"] {
        assert_eq!(post_to(&s, path, &list, &[("mcp-session-id", &sid)]).await.status(), 404, "{path}");
    }
}

#[tokio::test]
async fn a_path_no_endpoint_has_is_404_not_a_request_for_a_token() {
    let idp = Issuer::start().await;
    let s = TestServer::with(|c| {
        idp.trust(c);
        two_servers(c);
    })
    .await;
    for path in ["/teams/nope/mcp", "/health", "/mcp/"] {
        let res = post_to(&s, path, &json!({"jsonrpc":"2.0","id":1,"method":"ping"}), &[]).await;
        assert_eq!(res.status(), 404, "{path}");
    }
}

/// JWT settings whose resource origin is this test server's, so each virtual server's
/// resource is `<origin><path>`.
fn secured(idp: &Issuer) -> impl FnOnce(&mut Settings) + '_ {
    move |c| {
        idp.trust(c);
        two_servers(c);
        c.servers.get_mut("ops").expect("ops").scopes = vec!["team:ops".into()];
    }
}

fn token_for(idp: &Issuer, audience: &str, scope: &str) -> String {
    let mut claims = idp.claims("alice", scope);
    claims["aud"] = json!(audience);
    idp.sign(&claims)
}

const ORIGIN: &str = "http://127.0.0.1";

#[tokio::test]
async fn a_token_issued_for_one_server_is_refused_at_another_pointing_at_its_metadata() {
    let idp = Issuer::start().await;
    let s = TestServer::with(secured(&idp)).await;
    let for_data = token_for(&idp, &format!("{ORIGIN}{DATA}"), "mcp:tools team:ops");
    let bearer = format!("Bearer {for_data}");
    let ok = modern_to(&s, DATA, "tools/list", json!({}), &[("authorization", &bearer)]).await;
    assert_eq!(ok.status(), 200);
    for (path, metadata) in [
        (OPS, format!("{ORIGIN}/.well-known/oauth-protected-resource{OPS}")),
        ("/mcp", format!("{ORIGIN}/.well-known/oauth-protected-resource/mcp")),
    ] {
        let res = modern_to(&s, path, "tools/list", json!({}), &[("authorization", &bearer)]).await;
        assert_eq!(res.status(), 401, "{path}");
        let challenge = res.headers()["www-authenticate"].to_str().expect("ascii").to_owned();
        assert!(challenge.contains(r#"error="invalid_token""#), "{challenge}");
        assert!(challenge.contains(&format!(r#"resource_metadata="{metadata}""#)), "{challenge}");
    }
}

#[tokio::test]
async fn a_token_for_the_default_endpoint_is_refused_at_a_virtual_server() {
    let idp = Issuer::start().await;
    let s = TestServer::with(secured(&idp)).await;
    let bearer = format!("Bearer {}", idp.token("alice", "mcp:tools"));
    assert_eq!(modern_to(&s, "/mcp", "tools/list", json!({}), &[("authorization", &bearer)]).await.status(), 200);
    assert_eq!(modern_to(&s, DATA, "tools/list", json!({}), &[("authorization", &bearer)]).await.status(), 401);
}

#[tokio::test]
async fn a_servers_own_scopes_are_required_there_and_named_in_the_refusal() {
    let idp = Issuer::start().await;
    let s = TestServer::with(secured(&idp)).await;
    let without = format!("Bearer {}", token_for(&idp, &format!("{ORIGIN}{OPS}"), "mcp:tools"));
    let res = modern_to(&s, OPS, "tools/list", json!({}), &[("authorization", &without)]).await;
    assert_eq!(res.status(), 403);
    let challenge = res.headers()["www-authenticate"].to_str().expect("ascii").to_owned();
    assert!(challenge.contains(r#"error="insufficient_scope", scope="mcp:tools team:ops""#), "{challenge}");
    let with = format!("Bearer {}", token_for(&idp, &format!("{ORIGIN}{OPS}"), "mcp:tools team:ops"));
    assert_eq!(modern_to(&s, OPS, "tools/list", json!({}), &[("authorization", &with)]).await.status(), 200);
}

#[tokio::test]
async fn each_server_has_its_own_protected_resource_metadata() {
    let idp = Issuer::start().await;
    let s = TestServer::with(secured(&idp)).await;
    let doc: Value =
        s.client.get(s.url(&format!("/.well-known/oauth-protected-resource{OPS}"))).send().await.expect("sent").json().await.expect("json");
    assert_eq!(doc["resource"], format!("{ORIGIN}{OPS}"));
    assert!(doc["scopes_supported"].as_array().expect("scopes").contains(&json!("team:ops")), "{doc}");
    let default: Value =
        s.client.get(s.url("/.well-known/oauth-protected-resource/mcp")).send().await.expect("sent").json().await.expect("json");
    assert_eq!(default["resource"], "http://127.0.0.1/mcp");
    let none = s.client.get(s.url("/.well-known/oauth-protected-resource/teams/nope/mcp")).send().await.expect("sent");
    assert_eq!(none.status(), 404);
}

/// Opens a `subscriptions/listen` stream for tool list changes at `path`.
async fn listen_at(s: &TestServer, path: &str) -> SseReader {
    let params = json!({"notifications": {"toolsListChanged": true}});
    let res = modern_to(s, path, "subscriptions/listen", params, &[]).await;
    assert_eq!(res.status(), 200);
    let mut reader = SseReader::new(res);
    let (_, ack) = reader.next_message_within(Duration::from_secs(5)).await.expect("acknowledged");
    assert!(ack.get("method").is_some() || ack.get("result").is_some(), "{ack}");
    reader
}

async fn hears_list_changed(reader: &mut SseReader, within: Duration) -> bool {
    let until = tokio::time::Instant::now() + within;
    while let Ok(Some((_, message))) = tokio::time::timeout_at(until, reader.next_message()).await {
        if message["method"] == "notifications/tools/list_changed" {
            return true;
        }
    }
    false
}

#[tokio::test]
async fn list_changed_reaches_only_the_servers_whose_list_changed() {
    let s = TestServer::with(two_servers).await;
    let mut data = listen_at(&s, DATA).await;
    let mut ops = listen_at(&s, OPS).await;
    let mut default = listen_at(&s, "/mcp").await;
    // A tool only the data server selects (`calculate_*`) appears.
    let tool = toolgate::tool::Tool::builder("calculate_product", "Multiply two numbers")
        .handler(|_| async { Ok::<_, toolgate::tool::ToolError>(toolgate::protocol::CallToolResult::text("0")) });
    s.state().server.tools.upsert(tool).expect("registered");
    assert!(hears_list_changed(&mut data, Duration::from_secs(5)).await, "the data server's list changed");
    assert!(hears_list_changed(&mut default, Duration::from_secs(5)).await, "the default endpoint's list changed");
    assert!(!hears_list_changed(&mut ops, Duration::from_millis(700)).await, "the ops server's list did not change");
    assert_eq!(tool_names(&s, DATA).await, ["calculate_product", "calculate_sum", "say"]);
}

#[tokio::test]
async fn a_call_at_a_virtual_server_is_audited_with_the_servers_name_and_the_name_it_was_called_by() {
    let s = TestServer::with(|c| {
        c.audit.enabled = true;
        two_servers(c);
    })
    .await;
    let res = modern_to(&s, DATA, "tools/call", json!({"name": "say", "arguments": {"text": "x"}}), &[]).await;
    assert_eq!(res.status(), 200);
    let settings = s.state().settings.storage.clone();
    s.running.stop().await.expect("stopped; the audit log is flushed");
    let store = toolgate::store::Store::connect(&settings).await.expect("store");
    let records = toolgate::audit::query(&store, &Default::default()).await.expect("query");
    let call = records.iter().find(|r| r.tool.as_deref() == Some("say")).expect("the call's record");
    assert_eq!(call.server.as_deref(), Some("data"));
}

#[test]
fn the_example_configurations_server_block_is_valid_when_uncommented() {
    let example = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/config/toolgate.example.toml")).expect("example");
    let (before, block) = example.split_once("# [servers.data]").expect("the server example");
    let block = block.split("\n# ---- ").next().unwrap_or(block);
    let uncommented: String = block.lines().map(|l| l.strip_prefix("# ").unwrap_or(l)).collect::<Vec<_>>().join("\n");
    let settings = crate::common::load_toml(&format!("{before}[servers.data]{uncommented}\n")).expect("the uncommented example loads");
    let data = &settings.servers["data"];
    assert_eq!(data.path, "/teams/data/mcp");
    assert_eq!(data.overrides["echo"].name.as_deref(), Some("say"));
}

#[tokio::test]
async fn a_tool_arriving_later_under_a_name_an_override_gave_does_not_take_it() {
    let s = TestServer::with(|c| {
        let mut team = VirtualServerSettings { path: DATA.into(), tools: vec!["*".into()], ..Default::default() };
        team.overrides.insert("echo".into(), ServedAs { name: Some("search".into()), ..Default::default() });
        c.servers.insert("team".into(), team);
    })
    .await;
    let newcomer = toolgate::tool::Tool::builder("search", "A tool that arrived later")
        .handler(|_| async { Ok::<_, toolgate::tool::ToolError>(toolgate::protocol::CallToolResult::text("newcomer")) });
    s.state().server.tools.upsert(newcomer).expect("registered");
    let res = modern_to(&s, DATA, "tools/call", json!({"name": "search", "arguments": {"text": "mine"}}), &[]).await;
    let body = response_json(res).await;
    assert_eq!(body["result"]["content"][0]["text"], "mine", "the operator's search is still echo: {body}");
    let detail: Value = s.client.get(s.admin_url("/admin/servers/team")).send().await.expect("sent").json().await.expect("json");
    let collisions = detail["collisions"].as_array().expect("collisions");
    assert!(
        collisions.iter().any(|c| c.as_str().is_some_and(|c| c.contains("search from the built-in tools") && c.contains("echo"))),
        "{detail}"
    );
}

#[tokio::test]
async fn the_admin_api_refuses_a_token_issued_for_a_virtual_server() {
    let idp = Issuer::start().await;
    let s = TestServer::with(secured(&idp)).await;
    let for_data = token_for(&idp, &format!("{ORIGIN}{DATA}"), "toolgate:admin mcp:tools");
    let res = s.client.get(s.admin_url("/admin/servers")).bearer_auth(&for_data).send().await.expect("sent");
    assert_eq!(res.status(), 401);
    let for_default = idp.token("alice", "toolgate:admin");
    assert_eq!(s.client.get(s.admin_url("/admin/servers")).bearer_auth(&for_default).send().await.expect("sent").status(), 200);
}

/// A 2026-07-28 request with the tasks extension declared, to `path`, with a bearer token.
async fn task_rpc(s: &TestServer, path: &str, method: &str, mut params: Value, bearer: &str) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": crate::common::tasks::opted_in(),
    });
    let name = params.get("name").or_else(|| params.get("taskId")).and_then(Value::as_str).map(str::to_owned).unwrap_or_default();
    let headers = [("mcp-protocol-version", MODERN), ("mcp-method", method), ("mcp-name", name.as_str()), ("authorization", bearer)];
    response_json(post_to(s, path, &json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}), &headers).await).await
}

#[tokio::test]
async fn a_task_created_at_a_virtual_server_runs_there_and_is_unknown_at_another_endpoint() {
    let idp = Issuer::start().await;
    let s = TestServer::with(|c| {
        idp.trust(c);
        c.servers.insert("data".into(), VirtualServerSettings { path: DATA.into(), tools: vec!["slow".into()], ..Default::default() });
    })
    .await;
    crate::common::tasks::install(&s);
    let for_data = format!("Bearer {}", token_for(&idp, &format!("{ORIGIN}{DATA}"), "mcp:tools"));
    let created = task_rpc(&s, DATA, "tools/call", json!({"name": "slow", "arguments": {"ms": 10}}), &for_data).await;
    let id = created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("a task: {created}")).to_owned();
    let mut status = Value::Null;
    for _ in 0..100 {
        let got = task_rpc(&s, DATA, "tasks/get", json!({"taskId": id}), &for_data).await;
        status = got["result"]["status"].clone();
        if status != "working" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status, "completed");
    let for_default = format!("Bearer {}", idp.token("alice", "mcp:tools"));
    let elsewhere = task_rpc(&s, "/mcp", "tasks/get", json!({"taskId": id}), &for_default).await;
    assert!(elsewhere.get("error").is_some(), "the same user's task of another endpoint is unknown here: {elsewhere}");
}
