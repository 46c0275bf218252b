//! Legacy era (2025-11-25 and older) over real HTTP: sessions, version rules, content
//! negotiation, JSON-RPC hygiene and every HTTP status the transport can answer.

use crate::common;

use common::{ACCEPT_BOTH, TestServer, response_json};
use serde_json::{Value, json};

#[tokio::test]
async fn initialize_negotiates_and_issues_a_visible_ascii_session() {
    let s = TestServer::start().await;
    for (asked, expected) in
        [("2025-11-25", "2025-11-25"), ("2025-06-18", "2025-06-18"), ("2025-03-26", "2025-03-26"), ("2099-01-01", "2025-11-25")]
    {
        let body = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":asked,"capabilities":{},"clientInfo":{"name":"t","version":"1"}}});
        let res = s.post(&body.to_string(), &[]).await;
        assert_eq!(res.status(), 200);
        let sid = res.headers()["mcp-session-id"].to_str().expect("ascii").to_owned();
        assert!(sid.len() >= 32 && sid.bytes().all(|b| (0x21..=0x7e).contains(&b)), "{sid}");
        let v: Value = res.json().await.expect("json");
        assert_eq!(v["result"]["protocolVersion"], expected, "asked {asked}");
        assert_eq!(v["result"]["serverInfo"]["name"], "toolgate");
        assert!(v["result"]["capabilities"]["tools"].is_object());
    }
}

#[tokio::test]
async fn initialize_without_version_is_invalid_params() {
    let s = TestServer::start().await;
    let res = s.post(r#"{"jsonrpc":"2.0","id":"a","method":"initialize","params":{}}"#, &[]).await;
    assert_eq!(res.status(), 400);
    let v: Value = res.json().await.expect("json");
    assert_eq!(v["error"]["code"], -32602);
    assert_eq!(v["id"], "a");
}

const LIST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
const INIT_2025_11_25: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

#[tokio::test]
async fn a_request_without_a_session_header_gets_400() {
    let s = TestServer::start().await;
    assert_eq!(s.post(LIST, &[]).await.status(), 400);
}

#[tokio::test]
async fn an_unknown_session_gets_404_with_a_json_rpc_error_and_no_null_id() {
    let s = TestServer::start().await;
    let res = s.post(LIST, &[("mcp-session-id", "not-a-session")]).await;
    assert_eq!(res.status(), 404);
    let v: Value = res.json().await.expect("json");
    assert_eq!(v["error"]["code"], -32001);
    assert!(v.get("id").is_none(), "never id: null");
}

#[tokio::test]
async fn delete_ends_a_session_and_later_requests_get_404() {
    let s = TestServer::start().await;
    let sid = s.initialize("2025-11-25").await;
    assert_eq!(s.post(LIST, &[("mcp-session-id", &sid)]).await.status(), 200);
    let del = s.client.delete(s.url("/mcp")).header("mcp-session-id", &sid).send().await.expect("delete");
    assert_eq!(del.status(), 200);
    assert_eq!(s.post(LIST, &[("mcp-session-id", &sid)]).await.status(), 404, "terminated session");
}

#[tokio::test]
async fn deleting_an_ended_session_gets_404() {
    let s = TestServer::start().await;
    let sid = s.initialize("2025-11-25").await;
    let delete = || s.client.delete(s.url("/mcp")).header("mcp-session-id", &sid).send();
    assert_eq!(delete().await.expect("delete").status(), 200);
    assert_eq!(delete().await.expect("delete").status(), 404);
}

#[tokio::test]
async fn second_initialize_on_a_live_session_is_refused_but_a_stale_id_is_not() {
    let s = TestServer::start().await;
    let sid = s.initialize("2025-11-25").await;
    let init = r#"{"jsonrpc":"2.0","id":9,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let res = s.post(init, &[("mcp-session-id", &sid)]).await;
    assert_eq!(res.status(), 400);
    assert_eq!(res.json::<Value>().await.expect("json")["error"]["code"], -32600);
    let res = s.post(init, &[("mcp-session-id", "stale-from-a-restart")]).await;
    assert_eq!(res.status(), 200, "a client re-initializing after a 404 must get a new session");
}

#[tokio::test]
async fn an_unsupported_protocol_version_header_gets_400() {
    let s = TestServer::start().await;
    let sid = s.initialize("2025-11-25").await;
    assert_eq!(s.post(LIST, &[("mcp-session-id", &sid), ("mcp-protocol-version", "1999-01-01")]).await.status(), 400);
}

#[tokio::test]
async fn a_supported_protocol_version_header_other_than_the_sessions_is_accepted() {
    // V-05
    let s = TestServer::start().await;
    let sid = s.initialize("2025-11-25").await;
    assert_eq!(s.post(LIST, &[("mcp-session-id", &sid), ("mcp-protocol-version", "2025-03-26")]).await.status(), 200);
}

#[tokio::test]
async fn an_absent_protocol_version_header_is_accepted() {
    let s = TestServer::start().await;
    let sid = s.initialize("2025-11-25").await;
    assert_eq!(s.post(LIST, &[("mcp-session-id", &sid)]).await.status(), 200);
}

async fn post_initialize(s: &TestServer, content_type: &str, accept: &str) -> reqwest::StatusCode {
    let res = s.client.post(s.url("/mcp")).header("content-type", content_type).header("accept", accept).body(INIT_2025_11_25).send();
    res.await.expect("sent").status()
}

#[tokio::test]
async fn a_post_that_does_not_accept_event_streams_gets_406() {
    let s = TestServer::start().await;
    assert_eq!(post_initialize(&s, "application/json", "application/json").await, 406);
}

#[tokio::test]
async fn an_accept_with_q_zero_refuses_that_type() {
    let s = TestServer::start().await;
    assert_eq!(post_initialize(&s, "application/json", "application/json, text/event-stream;q=0").await, 406);
}

#[tokio::test]
async fn a_body_that_is_not_json_gets_415() {
    let s = TestServer::start().await;
    assert_eq!(post_initialize(&s, "text/plain", ACCEPT_BOTH).await, 415);
}

#[tokio::test]
async fn other_http_methods_get_405_with_allow() {
    let s = TestServer::start().await;
    let put = s.client.put(s.url("/mcp")).send().await.expect("sent");
    assert_eq!(put.status(), 405);
    assert_eq!(put.headers()["allow"], "GET, POST, DELETE");
}

#[tokio::test]
async fn a_get_without_a_session_has_no_stream() {
    let s = TestServer::start().await;
    let get = s.client.get(s.url("/mcp")).header("accept", "text/event-stream").send().await.expect("sent");
    assert_eq!(get.status(), 405);
}

#[tokio::test]
async fn malformed_bodies_get_400_with_clear_codes() {
    let s = TestServer::start().await;
    let cases: Vec<(Vec<u8>, i64)> = vec![
        (b"{".to_vec(), -32700),
        (vec![b'{', b'"', 0xff, 0xfe, b'"', b'}'], -32700),
        (format!("{}{}", "[".repeat(5000), "]".repeat(5000)).into_bytes(), -32700),
        (br#"{"jsonrpc":"2.0","method":5}"#.to_vec(), -32600),
        (br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#.to_vec(), -32600),
        (br#"{"id":1,"method":"ping"}"#.to_vec(), -32600),
        (br#"42"#.to_vec(), -32600),
    ];
    for (body, code) in cases {
        let res = s
            .client
            .post(s.url("/mcp"))
            .header("content-type", "application/json")
            .header("accept", ACCEPT_BOTH)
            .body(body.clone())
            .send()
            .await
            .expect("sent");
        assert_eq!(res.status(), 400, "{}", String::from_utf8_lossy(&body[..body.len().min(40)]));
        let v: Value = res.json().await.expect("json error body");
        assert_eq!(v["error"]["code"], code);
        assert_ne!(v.get("id"), Some(&Value::Null), "never id: null");
    }
}

#[tokio::test]
async fn notifications_and_unknown_responses_get_202_with_no_body() {
    let s = TestServer::start().await;
    let sid = s.initialize("2025-11-25").await;
    for body in [
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"nope"}}"#,
        r#"{"jsonrpc":"2.0","id":"srv-999","result":{}}"#,
    ] {
        let res = s.post(body, &[("mcp-session-id", &sid)]).await;
        assert_eq!(res.status(), 202, "{body}");
        assert!(res.bytes().await.expect("body").is_empty());
    }
}

#[tokio::test]
async fn batches_only_for_2025_03_26_sessions() {
    let s = TestServer::start().await;
    let batch = r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":"two","method":"tools/list"}]"#;
    let modern = s.initialize("2025-11-25").await;
    let res = s.post(batch, &[("mcp-session-id", &modern)]).await;
    assert_eq!(res.status(), 400);
    assert_eq!(res.json::<Value>().await.expect("json")["error"]["code"], -32600);

    let old = s.initialize("2025-03-26").await;
    let res = s.post(batch, &[("mcp-session-id", &old)]).await;
    assert_eq!(res.status(), 200);
    let v: Value = res.json().await.expect("json");
    let replies = v.as_array().expect("array");
    assert_eq!(replies.len(), 2, "one response per request");
    assert_eq!(replies[0]["id"], 1);
    assert_eq!(replies[1]["id"], "two");
    assert!(replies[1]["result"]["tools"].is_array());

    let with_init = r#"[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}]"#;
    assert_eq!(s.post(with_init, &[("mcp-session-id", &old)]).await.status(), 400);
    let only_notes = r#"[{"jsonrpc":"2.0","method":"notifications/initialized"}]"#;
    assert_eq!(s.post(only_notes, &[("mcp-session-id", &old)]).await.status(), 202);
}

#[tokio::test]
async fn ping_answers_an_empty_result() {
    let s = TestServer::start().await;
    let sid = s.initialize("2025-11-25").await;
    assert_eq!(s.call(&sid, 1, "ping", json!({})).await["result"], json!({}));
}

#[tokio::test]
async fn an_unknown_method_gets_32601() {
    let s = TestServer::start().await;
    let sid = s.initialize("2025-11-25").await;
    assert_eq!(s.call(&sid, 2, "no/such/method", json!({})).await["error"]["code"], -32601);
}

#[tokio::test]
async fn a_method_of_an_undeclared_capability_gets_32601() {
    let s = TestServer::start().await;
    let sid = s.initialize("2025-11-25").await;
    assert_eq!(s.call(&sid, 3, "resources/list", json!({})).await["error"]["code"], -32601, "no resources declared");
}

#[tokio::test]
async fn set_level_takes_only_syslog_levels() {
    let s = TestServer::start().await;
    let sid = s.initialize("2025-11-25").await;
    assert_eq!(s.call(&sid, 4, "logging/setLevel", json!({"level":"verbose"})).await["error"]["code"], -32602);
    assert_eq!(s.call(&sid, 5, "logging/setLevel", json!({"level":"error"})).await["result"], json!({}));
}

#[tokio::test]
async fn a_garbled_cursor_gets_32602() {
    let s = TestServer::start().await;
    let sid = s.initialize("2025-11-25").await;
    assert_eq!(s.call(&sid, 6, "tools/list", json!({"cursor":"garbage"})).await["error"]["code"], -32602);
}

#[tokio::test]
async fn an_unknown_tool_gets_32602_naming_it() {
    let s = TestServer::start().await;
    let sid = s.initialize("2025-11-25").await;
    let unknown = s.call(&sid, 7, "tools/call", json!({"name":"nope"})).await;
    assert_eq!(unknown["error"]["code"], -32602);
    assert!(unknown["error"]["message"].as_str().unwrap_or("").contains("nope"));
}

#[tokio::test]
async fn a_call_without_a_name_or_with_non_object_arguments_gets_32602() {
    let s = TestServer::start().await;
    let sid = s.initialize("2025-11-25").await;
    assert_eq!(s.call(&sid, 8, "tools/call", json!({})).await["error"]["code"], -32602, "missing name");
    let array_args = json!({"name":"calculate_sum","arguments":[1]});
    assert_eq!(s.call(&sid, 9, "tools/call", array_args).await["error"]["code"], -32602);
}

#[tokio::test]
async fn arguments_that_break_the_schema_are_a_tool_error_naming_the_path() {
    // Input validation errors are tool results the model can act on (SEP-1303).
    let s = TestServer::start().await;
    let sid = s.initialize("2025-11-25").await;
    let bad = s.call(&sid, 10, "tools/call", json!({"name":"calculate_sum","arguments":{"a":"x","b":1}})).await;
    assert_eq!(bad["result"]["isError"], true);
    assert!(bad["result"]["content"][0]["text"].as_str().unwrap_or("").contains("/a"), "names the failing path: {bad}");
}

#[tokio::test]
async fn a_call_answers_text_and_structured_content_under_the_request_id() {
    let s = TestServer::start().await;
    let sid = s.initialize("2025-11-25").await;
    let ok = s.call(&sid, 11, "tools/call", json!({"name":"calculate_sum","arguments":{"a":2,"b":3}})).await;
    assert_eq!(ok["result"]["content"][0]["text"], "5");
    assert_eq!(ok["result"]["structuredContent"], json!({"sum": 5.0}));
    assert_eq!(ok["id"], 11, "same id value and type");
}

#[tokio::test]
async fn utf8_round_trips_through_a_tool() {
    let s = TestServer::start().await;
    let sid = s.initialize("2025-11-25").await;
    let text = "héllo — 日本語 🚀";
    let v = s.call(&sid, 1, "tools/call", json!({"name":"echo","arguments":{"text":text}})).await;
    assert_eq!(v["result"]["content"][0]["text"], text);
    assert_eq!(v["result"]["content"][0]["annotations"]["audience"], json!(["user", "assistant"]));
}

#[tokio::test]
async fn pagination_is_deterministic_and_complete() {
    let s = TestServer::with(|c| c.tools.page_size = 2).await;
    let sid = s.initialize("2025-11-25").await;
    let mut names = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..10 {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let v = s.call(&sid, 1, "tools/list", params).await;
        for t in v["result"]["tools"].as_array().expect("tools") {
            assert_eq!(t["inputSchema"]["type"], "object");
            // Only the examples pack's countdown may run as a task; a tool says nothing of
            // tasks unless its definition does.
            let want = if t["name"] == "countdown" { "optional" } else { "forbidden" };
            assert_eq!(t["execution"]["taskSupport"], want, "{}", t["name"]);
            names.push(t["name"].as_str().expect("name").to_owned());
        }
        match v["result"]["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    let mut sorted = names.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(names, sorted, "sorted, no duplicates");
    assert_eq!(names.len(), s.state().server.tools.snapshot().len());
    assert!(names.len() > 2, "more than one page was needed");
}

#[tokio::test]
async fn json_answers_use_the_request_id() {
    let s = TestServer::start().await;
    let sid = s.initialize("2025-11-25").await;
    let res = s.post(r#"{"jsonrpc":"2.0","id":"abc","method":"ping"}"#, &[("mcp-session-id", &sid)]).await;
    assert_eq!(res.headers()["content-type"], "application/json");
    assert_eq!(response_json(res).await["id"], "abc");
}

#[tokio::test]
async fn a_duplicated_session_id_on_messages_gets_a_json_rpc_400() {
    let s = TestServer::start().await;
    let mut r = common::SseReader::new(s.client.get(s.url("/sse")).send().await.expect("GET /sse"));
    let endpoint = r.next_event().await.expect("endpoint").data;
    let url = s.url(&format!("{endpoint}&sessionId=other"));
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let res = s.client.post(url).header("content-type", "application/json").body(ping).send().await.expect("POST");
    assert_eq!(res.status(), 400);
    assert_eq!(res.headers()["content-type"], "application/json");
    let body: serde_json::Value = res.json().await.expect("a JSON-RPC error");
    assert!(body["error"]["message"].as_str().unwrap_or("").contains("more than once"), "{body}");
}
