//! Upstreams that speak 2026-07-28: found with `server/discover` (no `initialize`, no session),
//! every request named in its `_meta` and headers, changes heard on `subscriptions/listen`, and
//! an upstream's questions (`input_required`) asked of toolgate's own client in either era.
//! The modern upstream is another toolgate (real HTTP on loopback); a scripted wiremock server
//! records exactly what toolgate sends.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use crate::common::{MODERN, SseReader, TestServer, open_get, response_json, spawn_post, wait_forever};
use crate::upstreams_http::{front, scripted, served, text, upstream_status, wait_for};

const V: &str = "2025-11-25";

async fn wait_status(server: &TestServer, what: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..100 {
        let now = upstream_status(server).await;
        if what(&now) {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the upstream's state never got there: {}", upstream_status(server).await);
}

/// A scripted 2026-07-28 server: `server/discover`, one tool `lookup` whose `region` goes in a
/// header, a call answered with its arguments, and no listen stream.
async fn modern_scripted() -> MockServer {
    let mock = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(|req: &Request| {
            let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
            let reply =
                |result: Value| ResponseTemplate::new(200).set_body_json(json!({"jsonrpc": "2.0", "id": body["id"], "result": result}));
            match body["method"].as_str().unwrap_or_default() {
                // serverInfo where rmcp 3.9 puts it: in the result's `_meta`.
                "server/discover" => reply(json!({"resultType": "complete", "supportedVersions": [MODERN],
                    "capabilities": {"tools": {}}, "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "scripted-modern", "version": "1"}}})),
                "tools/list" => reply(json!({"resultType": "complete", "tools": [{"name": "lookup", "description": "Looks up.",
                    "inputSchema": {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}}]})),
                "tools/call" => reply(json!({"resultType": "complete", "content": [{"type": "text", "text": "found"}],
                    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "scripted-modern"}, "trace": "t-1"}})),
                _ => ResponseTemplate::new(404).set_body_json(json!({"jsonrpc": "2.0", "id": body["id"],
                    "error": {"code": -32601, "message": "Method not found"}})),
            }
        })
        .mount(&mock)
        .await;
    mock
}

fn requests_for<'a>(seen: &'a [Request], rpc: &str) -> Vec<&'a Request> {
    seen.iter().filter(|r| serde_json::from_slice::<Value>(&r.body).is_ok_and(|b| b["method"] == rpc)).collect()
}

fn header<'a>(request: &'a Request, name: &str) -> Option<&'a str> {
    request.headers.get(name).and_then(|v| v.to_str().ok())
}

#[tokio::test]
async fn an_upstream_that_speaks_2026_07_28_is_spoken_to_in_it() {
    let upstream = TestServer::start().await;
    let server = front(&upstream.url("/mcp"), json!({}), |_| {}).await;
    wait_for(&server, "up_calculate_sum", true).await;
    assert_eq!(upstream_status(&server).await["protocol_version"], MODERN);
    let session = server.initialize(V).await;
    let answer = server.call(&session, 1, "tools/call", json!({"name": "up_calculate_sum", "arguments": {"a": 2, "b": 3}})).await;
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    assert_eq!(answer["result"]["structuredContent"]["sum"], 5.0, "{answer}");
}

#[tokio::test]
async fn protocol_legacy_keeps_to_the_initialize_handshake() {
    let upstream = TestServer::start().await;
    let server = front(&upstream.url("/mcp"), json!({"protocol": "legacy"}), |_| {}).await;
    wait_for(&server, "up_calculate_sum", true).await;
    assert_eq!(upstream_status(&server).await["protocol_version"], V);
}

#[tokio::test]
async fn an_upstream_that_refuses_the_probe_is_spoken_to_after_initialize() {
    let mock =
        scripted(|id| ResponseTemplate::new(200).set_body_json(json!({"jsonrpc": "2.0", "id": id, "result": {"content": []}}))).await;
    let server = front(&format!("{}/mcp", mock.uri()), json!({}), |_| {}).await;
    wait_for(&server, "up_lookup", true).await;
    assert_eq!(upstream_status(&server).await["protocol_version"], V);
    let seen = mock.received_requests().await.expect("recorded");
    let first: Value = serde_json::from_slice(&seen[0].body).expect("json");
    assert_eq!(first["method"], "server/discover", "the probe comes first");
    assert_eq!(requests_for(&seen, "initialize").len(), 1);
}

#[tokio::test]
async fn protocol_2026_07_28_refuses_an_upstream_that_does_not_speak_it_naming_the_setting() {
    let mock =
        scripted(|id| ResponseTemplate::new(200).set_body_json(json!({"jsonrpc": "2.0", "id": id, "result": {"content": []}}))).await;
    let server = front(&format!("{}/mcp", mock.uri()), json!({"protocol": "2026-07-28"}), |_| {}).await;
    let error = wait_status(&server, |s| s["last_error"].as_str().is_some_and(|e| e.contains("protocol"))).await;
    assert!(error["last_error"].as_str().unwrap_or_default().contains("upstreams.<name>.protocol"), "{error}");
    assert!(!served(&server).contains(&"up_lookup".to_owned()));
}

#[test]
fn protocol_2026_07_28_on_a_stdio_upstream_is_a_configuration_error() {
    let settings: toolgate::config::upstreams::UpstreamSettings =
        serde_json::from_value(json!({"stdio": {"program": "python3"}, "protocol": "2026-07-28"})).expect("parses");
    let (key, why) = settings.validate("up").expect_err("refused");
    assert_eq!(key, "upstreams.up.protocol");
    assert!(why.contains("Streamable HTTP"), "{why}");
}

#[tokio::test]
async fn every_request_carries_the_version_and_names_itself_in_headers() {
    let mock = modern_scripted().await;
    let server = front(&format!("{}/mcp", mock.uri()), json!({}), |_| {}).await;
    wait_for(&server, "up_lookup", true).await;
    let session = server.initialize(V).await;
    let answer = server.call(&session, 1, "tools/call", json!({"name": "up_lookup", "arguments": {"region": "eu-west"}})).await;
    assert_eq!(text(&answer), "found", "{answer}");
    let seen = mock.received_requests().await.expect("recorded");
    assert!(requests_for(&seen, "initialize").is_empty(), "no handshake in 2026-07-28");
    assert_eq!(upstream_status(&server).await["server_info"]["name"], "scripted-modern");
    let call = requests_for(&seen, "tools/call")[0];
    assert_eq!(header(call, "mcp-protocol-version"), Some(MODERN));
    assert_eq!(header(call, "mcp-method"), Some("tools/call"));
    assert_eq!(header(call, "mcp-name"), Some("lookup"));
    assert_eq!(header(call, "mcp-param-region"), Some("eu-west"));
    assert_eq!(header(call, "mcp-session-id"), None);
    let body: Value = serde_json::from_slice(&call.body).expect("json");
    assert_eq!(body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], MODERN);
    assert!(body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"].is_object());
}

#[tokio::test]
async fn the_upstreams_own_protocol_meta_is_not_relayed_but_the_rest_is() {
    let mock = modern_scripted().await;
    let server = front(&format!("{}/mcp", mock.uri()), json!({}), |_| {}).await;
    wait_for(&server, "up_lookup", true).await;
    let session = server.initialize(V).await;
    let answer = server.call(&session, 1, "tools/call", json!({"name": "up_lookup", "arguments": {}})).await;
    let meta = &answer["result"]["_meta"];
    assert_eq!(meta["trace"], "t-1", "{answer}");
    assert!(meta.get("io.modelcontextprotocol/serverInfo").is_none(), "{answer}");
}

#[tokio::test]
async fn an_upstreams_tool_change_is_heard_on_its_listen_stream() {
    let upstream = TestServer::start().await;
    // The notification path is tested here: a tool added later serves at once without approval.
    let server = front(&upstream.url("/mcp"), json!({"approval": "off"}), |_| {}).await;
    wait_for(&server, "up_echo", true).await;
    assert_eq!(upstream_status(&server).await["protocol_version"], MODERN);
    let session = server.initialize(V).await;
    let mut events = SseReader::new(open_get(&server, &session, None).await);
    add_fresh_tool(&upstream);
    wait_for(&server, "up_fresh", true).await;
    let heard = loop {
        match events.next_message_within(Duration::from_secs(10)).await {
            Some((_, m)) if m["method"] == "notifications/tools/list_changed" => break true,
            Some(_) => continue,
            None => break false,
        }
    };
    assert!(heard, "no list_changed reached the client");
}

#[tokio::test]
async fn a_legacy_upstreams_tool_change_is_heard_on_its_get_stream() {
    let upstream = TestServer::start().await;
    let server = front(&upstream.url("/mcp"), json!({"protocol": "legacy", "approval": "off"}), |_| {}).await;
    wait_for(&server, "up_echo", true).await;
    add_fresh_tool(&upstream);
    wait_for(&server, "up_fresh", true).await;
}

/// Adds a tool `fresh` to a toolgate upstream, as an upstream adds one at runtime.
fn add_fresh_tool(upstream: &TestServer) {
    let fresh = toolgate::tool::Tool::builder("fresh", "A new tool.")
        .handler(|_| async { Ok::<_, toolgate::tool::ToolError>(toolgate::protocol::CallToolResult::text("new")) });
    upstream.state().server.tools.upsert(fresh).expect("added");
}

/// A toolgate with the conformance pack as a 2026-07-28 upstream.
async fn conformance_upstream() -> (TestServer, TestServer) {
    let upstream = TestServer::with(|s| s.tools.packs.conformance = true).await;
    let server = front(&upstream.url("/mcp"), json!({}), |_| {}).await;
    wait_for(&server, "up_test_elicitation", true).await;
    (upstream, server)
}

fn elicit_answer() -> Value {
    json!({"action": "accept", "content": {"username": "ada", "email": "ada@example.com"}})
}

#[tokio::test]
async fn an_upstreams_question_reaches_a_legacy_client_as_a_request_on_its_stream() {
    let (_upstream, server) = conformance_upstream().await;
    let session = server.initialize_with(V, json!({"elicitation": {}})).await;
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "up_test_elicitation", "arguments": {"message": "Who are you?"}}});
    let mut stream = SseReader::new(server.post(&body.to_string(), &[("mcp-session-id", &session)]).await);
    let (_, asked) = stream.next_message_within(Duration::from_secs(10)).await.expect("a request");
    assert_eq!(asked["method"], "elicitation/create");
    assert_eq!(asked["params"]["message"], "Who are you?");
    let answer = json!({"jsonrpc": "2.0", "id": asked["id"], "result": elicit_answer()});
    server.post(&answer.to_string(), &[("mcp-session-id", &session)]).await;
    let (_, done) = stream.next_message_within(Duration::from_secs(10)).await.expect("the result");
    assert!(text(&done).contains("ada@example.com"), "{done}");
}

#[tokio::test]
async fn an_upstreams_question_reaches_a_modern_client_as_input_required_and_its_retry_finishes_the_call() {
    let (_upstream, server) = conformance_upstream().await;
    let caps = json!({"elicitation": {}});
    let params = json!({"name": "up_test_elicitation", "arguments": {"message": "Who are you?"}});
    let first = response_json(server.modern(1, "tools/call", params.clone(), caps.clone()).await).await;
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    let (key, request) = result["inputRequests"].as_object().and_then(|r| r.iter().next()).expect("one question");
    assert_eq!(request["method"], "elicitation/create");
    assert_eq!(request["params"]["message"], "Who are you?");
    let mut retry = params;
    retry["inputResponses"] = json!({ key.clone(): elicit_answer() });
    retry["requestState"] = result["requestState"].clone();
    let done = response_json(server.modern(2, "tools/call", retry, caps).await).await;
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert!(text(&done).contains("ada@example.com"), "{done}");
}

#[tokio::test]
async fn a_modern_clients_retry_with_forged_state_is_refused() {
    let (_upstream, server) = conformance_upstream().await;
    let params = json!({"name": "up_test_elicitation", "arguments": {"message": "?"},
        "inputResponses": {"user_info": elicit_answer()}, "requestState": "forged.state"});
    let answer = response_json(server.modern(1, "tools/call", params, json!({"elicitation": {}})).await).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
}

#[tokio::test]
async fn a_client_without_the_capability_is_told_what_the_upstream_tool_needs() {
    let (_upstream, server) = conformance_upstream().await;
    let session = server.initialize_with(V, json!({})).await;
    let answer = server.call(&session, 1, "tools/call", json!({"name": "up_test_elicitation", "arguments": {"message": "?"}})).await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(text(&answer).contains("elicitation"), "{answer}");
}

#[tokio::test]
async fn a_cancelled_call_ends_the_upstreams_work() {
    let ended = Arc::new(AtomicBool::new(false));
    let upstream = TestServer::start().await;
    upstream.state().server.tools.upsert(wait_forever(ended.clone())).expect("added");
    let server = front(&upstream.url("/mcp"), json!({}), |_| {}).await;
    wait_for(&server, "up_wait_forever", true).await;
    let session = server.initialize(V).await;
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "up_wait_forever", "arguments": {}}});
    let call = spawn_post(&server, &session, body.to_string());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}});
    server.post(&cancel.to_string(), &[("mcp-session-id", &session)]).await;
    for _ in 0..100 {
        if ended.load(Ordering::SeqCst) {
            call.abort();
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the upstream's tool still runs after the client cancelled");
}

#[tokio::test]
async fn a_prompt_of_a_modern_upstream_is_rendered_without_its_modern_only_fields() {
    let (_upstream, server) = conformance_upstream().await;
    let session = server.initialize(V).await;
    let got = server.call(&session, 1, "prompts/get", json!({"name": "up_test_simple_prompt", "arguments": {}})).await;
    assert!(got["result"]["messages"].is_array(), "{got}");
    assert!(got["result"].get("resultType").is_none() && got["result"].get("ttlMs").is_none(), "{got}");
}
