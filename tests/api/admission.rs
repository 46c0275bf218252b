//! One admission path: every way a client message or stream reaches the server is admitted by
//! the same rules. Each test takes one entry path (a single POST, a notification, a batch item,
//! a `/messages` POST, a GET stream, a `/sse` connection, a modern request, a listen stream, a
//! DELETE), spends the client's budget first, and shows the path is refused; the scope tests do
//! the same for a method scope. A new entry path needs a test here.

use crate::common;

use common::idp::Issuer;
use common::{MODERN, SseReader, TestServer, open_get};
use serde_json::{Value, json};
use toolgate::config::Settings;

const PING: &str = r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;

/// Limits on, a burst of `burst` requests that never refills within a test.
fn budget(burst: u32) -> impl FnOnce(&mut Settings) {
    move |c| {
        c.limits.enabled = true;
        c.limits.requests_per_minute = 1;
        c.limits.request_burst = burst;
    }
}

/// Spends what is left of the client's budget with pings on `session`.
async fn drain(s: &TestServer, session: &str) {
    for _ in 0..100 {
        if s.post(PING, &[("mcp-session-id", session)]).await.status() == 429 {
            return;
        }
    }
    panic!("the budget never ran out");
}

async fn limit_of(res: reqwest::Response) -> (u16, Value) {
    let status = res.status().as_u16();
    let body: Value = res.json().await.expect("a JSON-RPC error body");
    (status, body["error"]["data"]["limit"].clone())
}

#[tokio::test]
async fn a_single_request_is_admitted() {
    let s = TestServer::with(budget(5)).await;
    let sid = s.initialize("2025-11-25").await;
    drain(&s, &sid).await;
    assert_eq!(limit_of(s.post(PING, &[("mcp-session-id", &sid)]).await).await, (429, json!("client")));
}

#[tokio::test]
async fn a_notification_is_admitted() {
    let s = TestServer::with(budget(5)).await;
    let sid = s.initialize("2025-11-25").await;
    drain(&s, &sid).await;
    let cancelled = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#;
    assert_eq!(limit_of(s.post(cancelled, &[("mcp-session-id", &sid)]).await).await, (429, json!("client")));
}

#[tokio::test]
async fn each_item_of_a_batch_is_admitted_like_a_message_sent_alone() {
    let s = TestServer::with(budget(20)).await;
    let sid = s.initialize("2025-03-26").await;
    // 2 spent on initialize and notifications/initialized: 18 of 30 pings fit.
    let batch: Vec<Value> = (0..30).map(|i| json!({"jsonrpc":"2.0","id":i,"method":"ping"})).collect();
    let res = s.post(&Value::Array(batch).to_string(), &[("mcp-session-id", &sid)]).await;
    assert_eq!(res.status(), 200);
    let replies: Vec<Value> = res.json().await.expect("an array of replies");
    let answered = replies.iter().filter(|r| r.get("result").is_some()).count();
    let refused = replies.iter().filter(|r| r["error"]["data"]["limit"] == "client").count();
    assert_eq!((answered, refused), (18, 12), "{replies:?}");
}

#[tokio::test]
async fn tool_calls_in_a_batch_spend_the_tool_budget() {
    // The reported attack: 200 tools/call in one batch for a principal whose tool burst is 20.
    let s = TestServer::with(|c| {
        c.limits.enabled = true;
        c.server.max_batch_items = 200;
    })
    .await;
    let sid = s.initialize("2025-03-26").await;
    let call = |i: i64| json!({"jsonrpc":"2.0","id":i,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}});
    let batch: Vec<Value> = (0..200).map(call).collect();
    let res = s.post(&Value::Array(batch).to_string(), &[("mcp-session-id", &sid)]).await;
    let replies: Vec<Value> = res.json().await.expect("an array of replies");
    let ran = replies.iter().filter(|r| r.get("result").is_some()).count();
    assert_eq!(ran, 20, "only the tool burst ran");
    // The rest ran out of the tool budget, then (past the request burst of 100) the client's.
    let limits: Vec<&Value> = replies.iter().filter_map(|r| r.get("error")).map(|e| &e["data"]["limit"]).collect();
    assert_eq!(limits.len(), 180);
    assert!(limits.iter().all(|l| *l == "tool" || *l == "client"), "{limits:?}");
}

#[tokio::test]
async fn a_batch_larger_than_max_batch_items_is_refused_whole() {
    let s = TestServer::with(|c| c.server.max_batch_items = 3).await;
    let sid = s.initialize("2025-03-26").await;
    let batch: Vec<Value> = (0..4).map(|i| json!({"jsonrpc":"2.0","id":i,"method":"ping"})).collect();
    let res = s.post(&Value::Array(batch).to_string(), &[("mcp-session-id", &sid)]).await;
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.expect("json");
    assert!(body["error"]["message"].as_str().unwrap_or("").contains("server.max_batch_items"), "{body}");
}

#[tokio::test]
async fn a_messages_post_is_admitted() {
    let s = TestServer::with(budget(3)).await;
    let res = s.client.get(s.url("/sse")).send().await.expect("GET /sse");
    let mut r = SseReader::new(res);
    let endpoint = r.next_event().await.expect("endpoint").data;
    let mut refused = None;
    for id in 1..=5 {
        let body = json!({"jsonrpc":"2.0","id":id,"method":"ping"}).to_string();
        let post = s.client.post(s.url(&endpoint)).header("content-type", "application/json").body(body);
        assert_eq!(post.send().await.expect("POST").status(), 202);
        let (_, reply) = r.next_message().await.expect("a reply on the stream");
        if reply.get("error").is_some() {
            refused = Some(reply);
            break;
        }
    }
    let refused = refused.expect("the budget ran out");
    assert_eq!(refused["error"]["data"]["limit"], "client");
}

#[tokio::test]
async fn a_get_stream_is_admitted() {
    let s = TestServer::with(budget(5)).await;
    let sid = s.initialize("2025-11-25").await;
    drain(&s, &sid).await;
    assert_eq!(limit_of(open_get(&s, &sid, None).await).await, (429, json!("client")));
}

#[tokio::test]
async fn an_sse_connection_is_admitted() {
    let s = TestServer::with(budget(5)).await;
    let sid = s.initialize("2025-11-25").await;
    drain(&s, &sid).await;
    assert_eq!(limit_of(s.client.get(s.url("/sse")).send().await.expect("GET /sse")).await, (429, json!("client")));
}

#[tokio::test]
async fn a_modern_request_is_admitted() {
    let s = TestServer::with(budget(5)).await;
    let sid = s.initialize("2025-11-25").await;
    drain(&s, &sid).await;
    assert_eq!(limit_of(s.modern(1, "tools/list", json!({}), json!({})).await).await, (429, json!("client")));
}

#[tokio::test]
async fn a_listen_stream_is_admitted() {
    let s = TestServer::with(budget(5)).await;
    let sid = s.initialize("2025-11-25").await;
    drain(&s, &sid).await;
    let listen = s.modern(1, "subscriptions/listen", json!({"notifications": {"toolsListChanged": true}}), json!({})).await;
    assert_eq!(limit_of(listen).await, (429, json!("client")));
}

#[tokio::test]
async fn a_delete_is_admitted() {
    let s = TestServer::with(budget(5)).await;
    let sid = s.initialize("2025-11-25").await;
    drain(&s, &sid).await;
    let res = s.client.delete(s.url("/mcp")).header("mcp-session-id", &sid).send().await.expect("DELETE");
    assert_eq!(limit_of(res).await, (429, json!("client")));
}

/// JWT auth where `tools/call` needs the scope `tools:call` beyond `mcp:tools`; the token of
/// the returned header value holds `mcp:tools` only.
async fn scoped() -> (TestServer, Issuer, String) {
    let idp = Issuer::start().await;
    let s = TestServer::with(|c| {
        idp.trust(c);
        c.auth.method_scopes.insert("tools/call".into(), vec!["tools:call".into()]);
    })
    .await;
    let bearer = format!("Bearer {}", idp.token("alice", "mcp:tools"));
    (s, idp, bearer)
}

const CALL: &str = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}"#;

async fn session(s: &TestServer, bearer: &str, version: &str) -> String {
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":version,"capabilities":{},"clientInfo":{"name":"t","version":"1"}}});
    let res = s.post(&init.to_string(), &[("authorization", bearer)]).await;
    res.headers()["mcp-session-id"].to_str().expect("ascii").to_owned()
}

#[tokio::test]
async fn a_method_scope_is_enforced_on_a_single_request() {
    let (s, _idp, bearer) = scoped().await;
    let sid = session(&s, &bearer, "2025-11-25").await;
    let res = s.post(CALL, &[("authorization", &bearer), ("mcp-session-id", &sid)]).await;
    assert_eq!(res.status(), 403);
    assert!(res.headers()["www-authenticate"].to_str().expect("ascii").contains("tools:call"));
}

#[tokio::test]
async fn a_method_scope_is_enforced_on_each_batch_item() {
    let (s, _idp, bearer) = scoped().await;
    let sid = session(&s, &bearer, "2025-03-26").await;
    let batch = format!("[{CALL},{PING}]");
    let res = s.post(&batch, &[("authorization", &bearer), ("mcp-session-id", &sid)]).await;
    let replies: Vec<Value> = res.json().await.expect("an array");
    let call = replies.iter().find(|r| r["id"] == 3).expect("the call's reply");
    assert_eq!(call["error"]["data"]["error"], "insufficient_scope", "{call}");
    assert!(replies.iter().any(|r| r["id"] == 7 && r.get("result").is_some()), "the ping is not affected");
}

#[tokio::test]
async fn a_method_scope_is_enforced_on_a_messages_post() {
    let (s, _idp, bearer) = scoped().await;
    let res = s.client.get(s.url("/sse")).header("authorization", &bearer).send().await.expect("GET /sse");
    let mut r = SseReader::new(res);
    let endpoint = r.next_event().await.expect("endpoint").data;
    let post = s.client.post(s.url(&endpoint)).header("authorization", &bearer).header("content-type", "application/json").body(CALL);
    assert_eq!(post.send().await.expect("POST").status(), 403);
}

#[tokio::test]
async fn a_method_scope_is_enforced_on_a_modern_request() {
    let (s, _idp, bearer) = scoped().await;
    let body = json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},
        "_meta":{"io.modelcontextprotocol/protocolVersion":MODERN,"io.modelcontextprotocol/clientCapabilities":{}}}});
    let headers =
        [("authorization", bearer.as_str()), ("mcp-protocol-version", MODERN), ("mcp-method", "tools/call"), ("mcp-name", "echo")];
    assert_eq!(s.post(&body.to_string(), &headers).await.status(), 403);
}
