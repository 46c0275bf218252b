//! Per-client caps over real HTTP: one client cannot fill the session table or hold more
//! streams of a kind than `sse.max_streams_per_client`, another client is not affected, and
//! ending a session or closing a stream gives its slot back.

use crate::common;

use common::idp::Issuer;
use common::{SseReader, TestServer, open_get};
use serde_json::{Value, json};

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

async fn jwt_server(adjust: impl FnOnce(&mut toolgate::config::Settings) + Send + 'static) -> (TestServer, Issuer) {
    let idp = Issuer::start().await;
    let s = TestServer::with(|c| {
        idp.trust(c);
        adjust(c);
    })
    .await;
    (s, idp)
}

async fn refusal(res: reqwest::Response) -> (u16, bool, Value) {
    let status = res.status().as_u16();
    let retry = res.headers().contains_key("retry-after");
    let body: Value = res.json().await.expect("json");
    (status, retry, body["error"]["data"]["limit"].clone())
}

#[tokio::test]
async fn a_client_at_its_session_cap_gets_429_naming_the_setting() {
    let (s, idp) = jwt_server(|c| c.sessions.max_per_client = 2).await;
    let alice = format!("Bearer {}", idp.token("alice", "mcp:tools"));
    for _ in 0..2 {
        assert_eq!(s.post(INIT, &[("authorization", &alice)]).await.status(), 200);
    }
    let res = s.post(INIT, &[("authorization", &alice)]).await;
    let body_text = res.text().await.expect("body");
    assert!(body_text.contains("sessions.max_per_client"), "{body_text}");
    let res = s.post(INIT, &[("authorization", &alice)]).await;
    assert_eq!(refusal(res).await, (429, true, json!("sessions")));
}

#[tokio::test]
async fn another_client_is_not_affected_by_a_full_cap() {
    let (s, idp) = jwt_server(|c| c.sessions.max_per_client = 1).await;
    let alice = format!("Bearer {}", idp.token("alice", "mcp:tools"));
    let bob = format!("Bearer {}", idp.token("bob", "mcp:tools"));
    s.post(INIT, &[("authorization", &alice)]).await;
    assert_eq!(s.post(INIT, &[("authorization", &alice)]).await.status(), 429);
    assert_eq!(s.post(INIT, &[("authorization", &bob)]).await.status(), 200);
}

#[tokio::test]
async fn ending_a_session_gives_its_slot_back() {
    let s = TestServer::with(|c| c.sessions.max_per_client = 1).await;
    let sid = s.initialize("2025-11-25").await;
    assert_eq!(s.post(INIT, &[]).await.status(), 429);
    let res = s.client.delete(s.url("/mcp")).header("mcp-session-id", &sid).send().await.expect("DELETE");
    assert_eq!(res.status(), 200);
    assert_eq!(s.post(INIT, &[]).await.status(), 200);
}

#[tokio::test]
async fn a_client_at_its_get_stream_cap_gets_429() {
    let s = TestServer::with(|c| c.sse.max_streams_per_client = 2).await;
    let mut open = Vec::new();
    for _ in 0..2 {
        let sid = s.initialize("2025-11-25").await;
        let res = open_get(&s, &sid, None).await;
        assert_eq!(res.status(), 200);
        open.push(res);
    }
    let sid = s.initialize("2025-11-25").await;
    assert_eq!(refusal(open_get(&s, &sid, None).await).await, (429, true, json!("streams")));
}

#[tokio::test]
async fn closing_a_stream_gives_its_slot_back() {
    let s = TestServer::with(|c| c.sse.max_streams_per_client = 1).await;
    let first = s.initialize("2025-11-25").await;
    let stream = open_get(&s, &first, None).await;
    let second = s.initialize("2025-11-25").await;
    assert_eq!(open_get(&s, &second, None).await.status(), 429);
    drop(stream);
    // The server notices the closed connection on its next write or keep-alive; poll briefly.
    for _ in 0..50 {
        if open_get(&s, &second, None).await.status() == 200 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the slot never came back");
}

#[tokio::test]
async fn a_client_at_its_sse_connection_cap_gets_429() {
    let s = TestServer::with(|c| c.sse.max_streams_per_client = 2).await;
    let mut open = Vec::new();
    for _ in 0..2 {
        let mut r = SseReader::new(s.client.get(s.url("/sse")).send().await.expect("GET /sse"));
        r.next_event().await.expect("endpoint");
        open.push(r);
    }
    assert_eq!(refusal(s.client.get(s.url("/sse")).send().await.expect("GET /sse")).await, (429, true, json!("streams")));
}

#[tokio::test]
async fn sse_connections_count_as_sessions_too() {
    let s = TestServer::with(|c| c.sessions.max_per_client = 1).await;
    let mut r = SseReader::new(s.client.get(s.url("/sse")).send().await.expect("GET /sse"));
    r.next_event().await.expect("endpoint");
    assert_eq!(refusal(s.post(INIT, &[]).await).await, (429, true, json!("sessions")));
}

#[tokio::test]
async fn a_client_at_its_listen_stream_cap_gets_429() {
    let s = TestServer::with(|c| c.sse.max_streams_per_client = 2).await;
    let listen = || s.modern(1, "subscriptions/listen", json!({"notifications": {"toolsListChanged": true}}), json!({}));
    let mut open = Vec::new();
    for _ in 0..2 {
        let res = listen().await;
        assert_eq!(res.status(), 200);
        open.push(res);
    }
    assert_eq!(refusal(listen().await).await, (429, true, json!("streams")));
}
