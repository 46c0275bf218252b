//! Upstream MCP servers over Streamable HTTP. Two kinds of upstream, both real HTTP on
//! loopback: another toolgate (a full MCP server: sessions, SSE answers, a GET stream) for the
//! happy paths, and a scripted wiremock server for what a real server rarely does on purpose
//! (garbage, a 401 challenge, hanging, a huge answer) and to record the headers it receives.

use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use crate::common::idp::Issuer;
use crate::common::{SseReader, TestServer};

const V: &str = "2025-11-25";

/// A toolgate in front of `upstream_url` as upstream `up`, with `extra` settings.
pub(crate) async fn front(upstream_url: &str, extra: Value, adjust: impl FnOnce(&mut toolgate::config::Settings)) -> TestServer {
    let mut upstream = json!({"url": upstream_url, "allow_private": true, "connect_timeout_ms": 3000});
    if let (Some(u), Value::Object(extra)) = (upstream.as_object_mut(), extra) {
        u.extend(extra);
    }
    let settings = serde_json::from_value(upstream).expect("upstream settings");
    TestServer::with(|s| {
        s.tools.packs.examples = false;
        s.upstreams.insert("up".into(), settings);
        adjust(s);
    })
    .await
}

pub(crate) fn served(server: &TestServer) -> Vec<String> {
    server.state().server.tools.snapshot().iter().map(|t| t.name().to_owned()).collect()
}

pub(crate) async fn wait_for(server: &TestServer, name: &str, present: bool) {
    for _ in 0..200 {
        if served(server).iter().any(|n| n == name) == present {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{name} {} served after 10 s: {:?}", if present { "not" } else { "still" }, served(server));
}

pub(crate) async fn upstream_status(server: &TestServer) -> Value {
    let status: Value = server.client.get(server.admin_url("/admin/upstreams")).send().await.expect("sent").json().await.expect("json");
    status["upstreams"][0].clone()
}

/// Waits until the upstream's last error contains `needle`.
async fn wait_error(server: &TestServer, needle: &str) -> String {
    for _ in 0..100 {
        let error = upstream_status(server).await["last_error"].as_str().unwrap_or_default().to_owned();
        if error.contains(needle) {
            return error;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the upstream's last error never mentioned {needle:?}: {}", upstream_status(server).await);
}

pub(crate) fn text(response: &Value) -> String {
    response["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

/// A scripted MCP server: `initialize`, one tool `lookup` whose call (with this JSON-RPC id)
/// is answered by `call`.
pub(crate) async fn scripted(call: impl Fn(&Value) -> ResponseTemplate + Send + Sync + 'static) -> MockServer {
    let mock = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(move |req: &Request| {
            let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
            let reply =
                |result: Value| ResponseTemplate::new(200).set_body_json(json!({"jsonrpc": "2.0", "id": body["id"], "result": result}));
            match body["method"].as_str().unwrap_or_default() {
                "initialize" => {
                    reply(json!({"protocolVersion": V, "capabilities": {"tools": {}}, "serverInfo": {"name": "scripted", "version": "1"}}))
                        .insert_header("mcp-session-id", "s-1")
                }
                "tools/list" => {
                    reply(json!({"tools": [{"name": "lookup", "description": "Looks up.", "inputSchema": {"type": "object"}}]}))
                }
                "tools/call" => call(&body["id"]),
                "ping" => reply(json!({})),
                _ => ResponseTemplate::new(202),
            }
        })
        .mount(&mock)
        .await;
    Mock::given(method("GET")).respond_with(ResponseTemplate::new(405)).mount(&mock).await;
    mock
}

#[tokio::test]
async fn a_remote_mcp_servers_tools_are_served_and_called() {
    let upstream = TestServer::start().await;
    let server = front(&upstream.url("/mcp"), json!({}), |_| {}).await;
    wait_for(&server, "up_calculate_sum", true).await;
    let session = server.initialize(V).await;
    let sum = server.call(&session, 1, "tools/call", json!({"name": "up_calculate_sum", "arguments": {"a": 2, "b": 3}})).await;
    assert_eq!(text(&sum), "5");
    assert_eq!(upstream_status(&server).await["transport"], "http");
}

#[tokio::test]
async fn progress_on_the_upstreams_event_stream_reaches_the_client() {
    let upstream = TestServer::with(|s| s.tools.packs.conformance = true).await;
    let server = front(&upstream.url("/mcp"), json!({}), |_| {}).await;
    wait_for(&server, "up_test_tool_with_progress", true).await;
    let session = server.initialize(V).await;
    let body = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "up_test_tool_with_progress", "arguments": {}, "_meta": {"progressToken": "t"}}});
    let mut stream = SseReader::new(server.post(&body.to_string(), &[("mcp-session-id", &session)]).await);
    let mut steps = Vec::new();
    while let Some((_, m)) = stream.next_message_within(Duration::from_secs(10)).await {
        match m["method"].as_str() {
            Some("notifications/progress") => steps.push(m["params"]["progress"].as_f64().expect("progress")),
            _ => break,
        }
    }
    assert_eq!(steps, [0.0, 50.0, 100.0]);
}

#[tokio::test]
async fn a_stopped_upstreams_tools_are_withdrawn() {
    let upstream = TestServer::start().await;
    let server = front(&upstream.url("/mcp"), json!({}), |_| {}).await;
    wait_for(&server, "up_echo", true).await;
    upstream.running.stop().await.expect("stopped");
    wait_for(&server, "up_echo", false).await;
    assert_eq!(upstream_status(&server).await["state"], "disconnected");
}

#[tokio::test]
async fn the_callers_token_is_never_sent_upstream_only_the_upstreams_own_credential() {
    let issuer = Issuer::start().await;
    let mock =
        scripted(|id| ResponseTemplate::new(200).set_body_json(json!({"jsonrpc": "2.0", "id": id, "result": {"content": []}}))).await;
    let secret = tempfile::NamedTempFile::new().expect("file");
    std::fs::write(secret.path(), "upstream-secret\n").expect("secret");
    let headers = json!({"headers": {"Authorization": {"file": secret.path(), "prefix": "Bearer "}}});
    let server = front(&format!("{}/mcp", mock.uri()), headers, |s| issuer.trust(s)).await;
    wait_for(&server, "up_lookup", true).await;
    let token = issuer.token("alice", "mcp:tools");
    let bearer = format!("Bearer {token}");
    let body = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":V,"capabilities":{},"clientInfo":{"name":"t","version":"1"}}});
    let res = server.post(&body.to_string(), &[("authorization", &bearer)]).await;
    let session = res.headers()["mcp-session-id"].to_str().expect("ascii").to_owned();
    let call = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up_lookup","arguments":{}}});
    let res = server.post(&call.to_string(), &[("authorization", &bearer), ("mcp-session-id", &session)]).await;
    assert_eq!(res.status(), 200);
    let seen = mock.received_requests().await.expect("recorded");
    assert!(seen.iter().any(|r| String::from_utf8_lossy(&r.body).contains("tools/call")), "the call reached the upstream");
    for request in &seen {
        let auth = request.headers.get("authorization").and_then(|v| v.to_str().ok());
        assert_eq!(auth, Some("Bearer upstream-secret"), "every request carries the upstream's credential");
        assert!(!String::from_utf8_lossy(&request.body).contains(&token), "the caller's token never travels upstream");
    }
}

#[tokio::test]
async fn an_upstream_challenge_is_reported_with_what_to_change() {
    let mock = MockServer::start().await;
    let challenge = r#"Bearer resource_metadata="https://up.example/.well-known/oauth-protected-resource""#;
    Mock::given(method("POST")).respond_with(ResponseTemplate::new(401).insert_header("www-authenticate", challenge)).mount(&mock).await;
    let server = front(&format!("{}/mcp", mock.uri()), json!({}), |_| {}).await;
    let error = wait_error(&server, "401").await;
    assert!(error.contains("upstreams.<name>.headers") && error.contains("resource_metadata"), "{error}");
}

#[tokio::test]
async fn a_private_address_is_refused_unless_the_operator_allows_it() {
    let upstream = TestServer::start().await;
    let server = front(&upstream.url("/mcp"), json!({"allow_private": false}), |_| {}).await;
    let error = wait_error(&server, "allow_private").await;
    assert!(error.contains("private or local"), "{error}");
    assert!(!served(&server).iter().any(|n| n.starts_with("up_")));
}

#[tokio::test]
async fn an_answer_that_is_not_json_gives_a_clear_tool_error_and_the_upstream_stays() {
    let mock =
        scripted(|_| ResponseTemplate::new(200).insert_header("content-type", "application/json").set_body_string("<html>oops")).await;
    let server = front(&format!("{}/mcp", mock.uri()), json!({}), |_| {}).await;
    wait_for(&server, "up_lookup", true).await;
    let session = server.initialize(V).await;
    let answer = server.call(&session, 1, "tools/call", json!({"name": "up_lookup", "arguments": {}})).await;
    assert_eq!(answer["result"]["isError"], true);
    assert!(text(&answer).contains("not JSON"), "{answer}");
    assert!(served(&server).contains(&"up_lookup".to_owned()));
}

#[tokio::test]
async fn a_hanging_upstream_times_out_with_a_clear_tool_error() {
    let mock = scripted(|_| ResponseTemplate::new(200).set_delay(Duration::from_secs(30))).await;
    let server = front(&format!("{}/mcp", mock.uri()), json!({"timeout_ms": 300}), |_| {}).await;
    wait_for(&server, "up_lookup", true).await;
    let session = server.initialize(V).await;
    let answer = server.call(&session, 1, "tools/call", json!({"name": "up_lookup", "arguments": {}})).await;
    assert!(text(&answer).contains("timed out"), "{answer}");
}

#[tokio::test]
async fn a_huge_answer_is_refused_before_it_is_buffered() {
    let big = "x".repeat(300_000);
    let mock = scripted(move |id| {
        ResponseTemplate::new(200)
            .set_body_json(json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": big}]}}))
    })
    .await;
    let server = front(&format!("{}/mcp", mock.uri()), json!({"max_message_bytes": 65536}), |_| {}).await;
    wait_for(&server, "up_lookup", true).await;
    let session = server.initialize(V).await;
    let answer = server.call(&session, 1, "tools/call", json!({"name": "up_lookup", "arguments": {}})).await;
    assert!(text(&answer).contains("max_message_bytes"), "{answer}");
}

/// A toolgate with the conformance pack (resources, a template, prompts) as upstream `up`.
async fn conformance_upstream() -> (TestServer, TestServer) {
    let upstream = TestServer::with(|s| s.tools.packs.conformance = true).await;
    let server = front(&upstream.url("/mcp"), json!({}), |_| {}).await;
    wait_for(&server, "up_test_simple_text", true).await;
    (upstream, server)
}

#[tokio::test]
async fn an_upstreams_resources_are_listed_under_its_prefix_and_read_through_it() {
    let (_upstream, server) = conformance_upstream().await;
    let session = server.initialize(V).await;
    let list = server.call(&session, 1, "resources/list", json!({})).await;
    let listed = list["result"]["resources"].as_array().expect("resources");
    let text = listed.iter().find(|r| r["uri"] == "test://static-text").expect("the upstream's resource, its URI unchanged");
    assert_eq!(text["name"], "up_static-text");
    let read = server.call(&session, 2, "resources/read", json!({"uri": "test://static-text"})).await;
    assert_eq!(read["result"]["contents"][0]["uri"], "test://static-text");
    assert!(read["result"]["contents"][0]["text"].as_str().is_some_and(|t| !t.is_empty()), "{read}");
}

#[tokio::test]
async fn a_uri_matching_an_upstreams_template_is_read_through_it() {
    let (_upstream, server) = conformance_upstream().await;
    let session = server.initialize(V).await;
    let templates = server.call(&session, 1, "resources/templates/list", json!({})).await;
    assert_eq!(templates["result"]["resourceTemplates"][0]["uriTemplate"], "test://template/{id}/data");
    let read = server.call(&session, 2, "resources/read", json!({"uri": "test://template/42/data"})).await;
    assert!(read["result"]["contents"][0]["text"].as_str().is_some_and(|t| t.contains("Data for ID: 42")), "{read}");
}

#[tokio::test]
async fn an_upstreams_prompts_are_listed_under_its_prefix_and_rendered_through_it() {
    let (_upstream, server) = conformance_upstream().await;
    let session = server.initialize(V).await;
    let list = server.call(&session, 1, "prompts/list", json!({})).await;
    let names: Vec<&str> = list["result"]["prompts"].as_array().expect("prompts").iter().filter_map(|p| p["name"].as_str()).collect();
    assert!(names.contains(&"up_test_prompt_with_arguments"), "{names:?}");
    let params = json!({"name": "up_test_prompt_with_arguments", "arguments": {"arg1": "one", "arg2": "two"}});
    let got = server.call(&session, 2, "prompts/get", params).await;
    let rendered = got["result"]["messages"][0]["content"]["text"].as_str().unwrap_or_default().to_owned();
    assert!(rendered.contains("one") && rendered.contains("two"), "{got}");
}

#[tokio::test]
async fn a_stopped_upstreams_resources_and_prompts_are_withdrawn() {
    let (upstream, server) = conformance_upstream().await;
    upstream.running.stop().await.expect("stopped");
    wait_for(&server, "up_test_simple_text", false).await;
    let session = server.initialize(V).await;
    let list = server.call(&session, 1, "resources/list", json!({})).await;
    assert_eq!(list["result"]["resources"], json!([]), "{list}");
    let prompts = server.call(&session, 2, "prompts/list", json!({})).await;
    assert_eq!(prompts["result"]["prompts"], json!([]), "{prompts}");
}

#[tokio::test]
async fn an_event_without_end_is_cut_at_the_size_bound() {
    let endless = format!("data: {}", "x".repeat(400_000));
    let mock =
        scripted(move |_| ResponseTemplate::new(200).insert_header("content-type", "text/event-stream").set_body_string(endless.clone()))
            .await;
    let server = front(&format!("{}/mcp", mock.uri()), json!({"max_message_bytes": 65536}), |_| {}).await;
    wait_for(&server, "up_lookup", true).await;
    let session = server.initialize(V).await;
    let answer = server.call(&session, 1, "tools/call", json!({"name": "up_lookup", "arguments": {}})).await;
    assert!(text(&answer).contains("max_message_bytes"), "{answer}");
}

#[tokio::test]
async fn an_upstream_on_the_2024_11_05_sse_transport_is_served() {
    let upstream = TestServer::start().await;
    let server = front(&upstream.url("/sse"), json!({"transport": "sse"}), |_| {}).await;
    wait_for(&server, "up_calculate_sum", true).await;
    let session = server.initialize(V).await;
    let sum = server.call(&session, 1, "tools/call", json!({"name": "up_calculate_sum", "arguments": {"a": 20, "b": 22}})).await;
    assert_eq!(text(&sum), "42");
    assert_eq!(upstream_status(&server).await["transport"], "sse");
}

#[tokio::test]
async fn an_sse_only_upstream_is_found_when_the_transport_is_auto() {
    let upstream = TestServer::start().await;
    let server = front(&upstream.url("/sse"), json!({}), |_| {}).await;
    wait_for(&server, "up_echo", true).await;
    assert_eq!(upstream_status(&server).await["transport"], "sse", "a refused POST falls back to the SSE transport");
}

#[tokio::test]
async fn an_sse_upstreams_progress_reaches_the_client() {
    let upstream = TestServer::with(|s| s.tools.packs.conformance = true).await;
    let server = front(&upstream.url("/sse"), json!({"transport": "sse"}), |_| {}).await;
    wait_for(&server, "up_test_tool_with_progress", true).await;
    let session = server.initialize(V).await;
    let body = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "up_test_tool_with_progress", "arguments": {}, "_meta": {"progressToken": "t"}}});
    let mut stream = SseReader::new(server.post(&body.to_string(), &[("mcp-session-id", &session)]).await);
    let mut steps = 0;
    while let Some((_, m)) = stream.next_message_within(Duration::from_secs(10)).await {
        match m["method"].as_str() {
            Some("notifications/progress") => steps += 1,
            _ => break,
        }
    }
    assert_eq!(steps, 3);
}

/// `method` in a new session of a caller holding `scope`.
async fn as_caller(server: &TestServer, issuer: &Issuer, scope: &str, method: &str, params: Value) -> Value {
    let bearer = format!("Bearer {}", issuer.token("alice", scope));
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":V,"capabilities":{},"clientInfo":{"name":"t","version":"1"}}});
    let res = server.post(&init.to_string(), &[("authorization", &bearer)]).await;
    let session = res.headers()["mcp-session-id"].to_str().expect("ascii").to_owned();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    crate::common::response_json(server.post(&body.to_string(), &[("authorization", &bearer), ("mcp-session-id", &session)]).await).await
}

#[tokio::test]
async fn an_upstreams_scopes_guard_its_resources_and_prompts_too() {
    let issuer = Issuer::start().await;
    let upstream = TestServer::with(|s| s.tools.packs.conformance = true).await;
    let server = front(&upstream.url("/mcp"), json!({"scopes": ["up:read"]}), |s| issuer.trust(s)).await;
    wait_for(&server, "up_test_simple_text", true).await;
    let without = as_caller(&server, &issuer, "mcp:tools", "resources/list", json!({})).await;
    assert_eq!(without["result"]["resources"], json!([]), "hidden without the scope: {without}");
    let read = as_caller(&server, &issuer, "mcp:tools", "resources/read", json!({"uri": "test://static-text"})).await;
    assert!(read["error"].is_object(), "not readable without the scope: {read}");
    let prompts = as_caller(&server, &issuer, "mcp:tools", "prompts/list", json!({})).await;
    assert_eq!(prompts["result"]["prompts"], json!([]), "{prompts}");
    let with = as_caller(&server, &issuer, "mcp:tools up:read", "resources/list", json!({})).await;
    assert!(with["result"]["resources"].as_array().is_some_and(|r| !r.is_empty()), "listed with the scope: {with}");
}
