//! Rate limits over real HTTP: 429 with `Retry-After` and a JSON-RPC body carrying the hint,
//! quotas keyed on the principal (not the session), per-tool limits, and the in-stream refusal
//! on the 2024-11-05 transport. The failed-authentication lockout is in `bearer_gate`. Bursts are tiny, so
//! they run out at once and no test waits for a clock.

use crate::common;

use common::idp::{Issuer, RESOURCE};
use common::{SseReader, TestServer};
use serde_json::{Value, json};
use toolgate::auth::settings::AuthMode;
use toolgate::config::Settings;
use toolgate::limits::ToolLimit;

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
const PING: &str = r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;

fn tight(c: &mut Settings) {
    c.limits.enabled = true;
    c.limits.requests_per_minute = 1;
    c.limits.request_burst = 4;
}

#[tokio::test]
async fn a_client_over_its_quota_gets_429_with_the_retry_hint() {
    let s = TestServer::with(tight).await;
    // Every message is charged: `initialize` and `notifications/initialized` are two, so two
    // pings fill the burst of four.
    let sid = s.initialize("2025-11-25").await;
    for _ in 0..2 {
        assert_eq!(s.post(PING, &[("mcp-session-id", &sid)]).await.status(), 200);
    }
    let res = s.post(PING, &[("mcp-session-id", &sid)]).await;
    assert_eq!(res.status(), 429);
    let retry: u64 = res.headers()["retry-after"].to_str().expect("ascii").parse().expect("seconds");
    assert!((1..=60).contains(&retry), "{retry}");
    let v: Value = res.json().await.expect("json body");
    assert_eq!(v["id"], 7, "the refusal answers the request");
    assert_eq!(v["error"]["data"]["limit"], "client");
    assert!(v["error"]["data"]["retryAfterMs"].as_u64().unwrap_or(0) >= 1000);
}

#[tokio::test]
async fn a_principal_cannot_reset_its_quota_with_a_new_session() {
    let idp = Issuer::start().await;
    let url = idp.url.clone();
    let s = TestServer::with(move |c| {
        tight(c);
        c.auth.mode = AuthMode::Jwt;
        c.auth.resource = Some(RESOURCE.into());
        c.auth.issuers = vec![serde_json::from_value(json!({ "issuer": url })).expect("issuer")];
    })
    .await;
    let alice = format!("Bearer {}", idp.token("alice", "mcp:tools"));
    let mut statuses = Vec::new();
    for _ in 0..3 {
        // each initialize is a new session, charged to the same principal
        statuses.push(s.post(INIT, &[("authorization", &alice)]).await.status().as_u16());
        statuses.push(s.post(INIT, &[("authorization", &alice)]).await.status().as_u16());
    }
    assert_eq!(&statuses[..4], &[200, 200, 200, 200]);
    assert!(statuses[4..].iter().all(|&c| c == 429), "{statuses:?}");
    let bob = format!("Bearer {}", idp.token("bob", "mcp:tools"));
    assert_eq!(s.post(INIT, &[("authorization", &bob)]).await.status(), 200, "another principal has its own quota");
}

#[tokio::test]
async fn a_tool_can_have_its_own_limit_and_cost() {
    let s = TestServer::with(|c| {
        c.limits.enabled = true;
        c.limits.tools.insert("calculate_sum".into(), ToolLimit { per_minute: Some(1), burst: Some(2), cost: 2 });
    })
    .await;
    let sid = s.initialize("2025-11-25").await;
    let call = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"calculate_sum","arguments":{"a":1,"b":2}}}"#;
    assert_eq!(s.post(call, &[("mcp-session-id", &sid)]).await.status(), 200, "one call costs the whole burst of 2");
    let res = s.post(call, &[("mcp-session-id", &sid)]).await;
    assert_eq!(res.status(), 429);
    assert_eq!(res.json::<Value>().await.expect("json")["error"]["data"]["limit"], "tool");
    let other = r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}"#;
    assert_eq!(s.post(other, &[("mcp-session-id", &sid)]).await.status(), 200, "other tools are not affected");
}

/// JWT auth with a lockout after a burst of 3 failed authentications per address.
#[tokio::test]
async fn on_the_legacy_sse_transport_the_refusal_arrives_in_the_stream() {
    let s = TestServer::with(tight).await;
    let res = s.client.get(s.url("/sse")).send().await.expect("GET /sse");
    let mut r = SseReader::new(res);
    let endpoint = r.next_event().await.expect("endpoint").data;
    let post = |body: Value| {
        let (client, url) = (s.client.clone(), s.url(&endpoint));
        async move { client.post(url).header("content-type", "application/json").body(body.to_string()).send().await.expect("POST").status() }
    };
    // Opening the stream is charged like a request; three requests fill the burst of four.
    for id in 1..=3 {
        assert_eq!(post(json!({"jsonrpc":"2.0","id":id,"method":"ping"})).await, 202);
        let (_, ok) = r.next_message().await.expect("answer");
        assert_eq!(ok["result"], json!({}));
    }
    assert_eq!(post(json!({"jsonrpc":"2.0","id":4,"method":"ping"})).await, 202);
    let (_, refused) = r.next_message().await.expect("refusal");
    assert_eq!(refused["id"], 4);
    assert_eq!(refused["error"]["data"]["limit"], "client");
}
