//! Authorization over real HTTP, against a real issuer on loopback: metadata, hidden tools,
//! principal-bound sessions and streams, per-method scopes, an unreachable issuer, and that a
//! token for another resource works nowhere. The gate's challenges are in `bearer_gate`.

use crate::common;

use common::TestServer;
use common::idp::{Issuer, RESOURCE};
use serde_json::{Value, json};
use toolgate::auth::jwt::IssuerSettings;
use toolgate::auth::settings::AuthMode;
use toolgate::protocol::CallToolResult;
use toolgate::tool::Tool;

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

fn issuer_settings(url: &str) -> IssuerSettings {
    serde_json::from_value(json!({ "issuer": url })).expect("issuer settings")
}

async fn secured(issuer: &Issuer) -> TestServer {
    let url = issuer.url.clone();
    TestServer::with(move |c| {
        c.auth.mode = AuthMode::Jwt;
        c.auth.resource = Some(RESOURCE.into());
        c.auth.issuers = vec![issuer_settings(&url)];
        c.auth.tool_scopes.insert("echo".into(), vec!["echo:use".into()]);
    })
    .await
}

fn challenge(res: &reqwest::Response) -> String {
    res.headers().get("www-authenticate").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned()
}

async fn init_with(s: &TestServer, token: &str) -> String {
    let res = s.post(INIT, &[("authorization", &format!("Bearer {token}"))]).await;
    assert_eq!(res.status(), 200);
    res.headers()["mcp-session-id"].to_str().expect("ascii").to_owned()
}

#[tokio::test]
async fn a_token_for_another_resource_works_on_no_route_in_no_era() {
    let idp = Issuer::start().await;
    let s = secured(&idp).await;
    let mut claims = idp.claims("alice", "mcp:tools");
    claims["aud"] = json!("https://other.example.com/mcp");
    let bearer = format!("Bearer {}", idp.sign(&claims));
    let good = idp.token("alice", "mcp:tools");
    let sid = init_with(&s, &good).await;

    assert_eq!(s.post(INIT, &[("authorization", &bearer)]).await.status(), 401, "legacy initialize");
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    assert_eq!(s.post(list, &[("authorization", &bearer), ("mcp-session-id", &sid)]).await.status(), 401, "legacy request");
    let modern = s.client.post(s.url("/mcp")).header("authorization", &bearer);
    let modern = modern
        .header("content-type", "application/json")
        .header("accept", common::ACCEPT_BOTH)
        .header("mcp-protocol-version", common::MODERN)
        .header("mcp-method", "tools/list");
    let body = json!({"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":common::MODERN,"io.modelcontextprotocol/clientCapabilities":{}}}});
    assert_eq!(modern.body(body.to_string()).send().await.expect("sent").status(), 401, "modern request");
    let get =
        s.client.get(s.url("/mcp")).header("authorization", &bearer).header("mcp-session-id", &sid).header("accept", "text/event-stream");
    assert_eq!(get.send().await.expect("sent").status(), 401, "GET stream");
    let del = s.client.delete(s.url("/mcp")).header("authorization", &bearer).header("mcp-session-id", &sid);
    assert_eq!(del.send().await.expect("sent").status(), 401, "DELETE");
    assert_eq!(s.client.get(s.url("/sse")).header("authorization", &bearer).send().await.expect("sent").status(), 401, "legacy /sse");
    let msg = s
        .client
        .post(s.url("/messages?sessionId=x"))
        .header("authorization", &bearer)
        .header("content-type", "application/json")
        .body("{}");
    assert_eq!(msg.send().await.expect("sent").status(), 401, "legacy /messages");
}

#[tokio::test]
async fn protected_resource_metadata_is_public_and_cacheable() {
    let idp = Issuer::start().await;
    let s = secured(&idp).await;
    for path in ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"] {
        let res = s.client.get(s.url(path)).send().await.expect("sent");
        assert_eq!(res.status(), 200, "{path}");
        assert_eq!(res.headers()["access-control-allow-origin"], "*");
        assert!(res.headers()["cache-control"].to_str().unwrap_or("").contains("max-age"));
        let v: Value = res.json().await.expect("json");
        assert_eq!(v["resource"], RESOURCE);
        assert_eq!(v["authorization_servers"], json!([idp.url]));
        assert_eq!(v["bearer_methods_supported"], json!(["header"]));
        assert_eq!(v["scopes_supported"], json!(["echo:use", "mcp:tools"]));
    }
    let open = TestServer::start().await;
    assert_eq!(
        open.client.get(open.url("/.well-known/oauth-protected-resource")).send().await.expect("sent").status(),
        404,
        "no metadata with auth off"
    );
}

#[tokio::test]
async fn tools_a_caller_may_not_use_are_hidden_and_unknown() {
    let idp = Issuer::start().await;
    let s = secured(&idp).await;
    let plain = idp.token("alice", "mcp:tools");
    let sid = init_with(&s, &plain).await;
    let auth = format!("Bearer {plain}");
    let names = |v: &Value| {
        v["result"]["tools"]
            .as_array()
            .map(|a| a.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect::<Vec<_>>())
            .unwrap_or_default()
    };
    let res = s.post(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#, &[("authorization", &auth), ("mcp-session-id", &sid)]).await;
    let listed = names(&res.json().await.expect("json"));
    assert!(listed.contains(&"calculate_sum".to_owned()) && !listed.contains(&"echo".to_owned()), "{listed:?}");
    let call = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}"#;
    let v: Value = s.post(call, &[("authorization", &auth), ("mcp-session-id", &sid)]).await.json().await.expect("json");
    assert_eq!(v["error"]["message"], "Unknown tool: echo", "reported exactly like a tool that does not exist");

    let scoped = idp.token("bob", "mcp:tools echo:use");
    let sid = init_with(&s, &scoped).await;
    let auth = format!("Bearer {scoped}");
    let v: Value = s.post(call, &[("authorization", &auth), ("mcp-session-id", &sid)]).await.json().await.expect("json");
    assert_eq!(v["result"]["content"][0]["text"], "x");
}

#[tokio::test]
async fn sessions_and_streams_are_bound_to_their_principal() {
    let idp = Issuer::start().await;
    let s = secured(&idp).await;
    let alice = format!("Bearer {}", idp.token("alice", "mcp:tools"));
    let mallory = format!("Bearer {}", idp.token("mallory", "mcp:tools"));
    let sid = init_with(&s, &idp.token("alice", "mcp:tools")).await;
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    assert_eq!(s.post(list, &[("authorization", &alice), ("mcp-session-id", &sid)]).await.status(), 200);
    let hijack = s.post(list, &[("authorization", &mallory), ("mcp-session-id", &sid)]).await;
    assert_eq!(hijack.status(), 404, "another principal learns nothing about the session");
    let get = s
        .client
        .get(s.url("/mcp"))
        .header("authorization", &mallory)
        .header("mcp-session-id", &sid)
        .header("accept", "text/event-stream")
        .header("last-event-id", "1_0");
    assert_eq!(get.send().await.expect("sent").status(), 404, "nor can it resume the session's streams");
    let answer = r#"{"jsonrpc":"2.0","id":"srv-1","result":{"action":"accept","content":{}}}"#;
    assert_eq!(
        s.post(answer, &[("authorization", &mallory), ("mcp-session-id", &sid)]).await.status(),
        404,
        "nor answer its server requests"
    );
    let del = s.client.delete(s.url("/mcp")).header("authorization", &mallory).header("mcp-session-id", &sid);
    assert_eq!(del.send().await.expect("sent").status(), 404, "nor end it");
    assert_eq!(s.post(list, &[("authorization", &alice), ("mcp-session-id", &sid)]).await.status(), 200, "the owner is unaffected");
}

#[tokio::test]
async fn tools_see_who_is_calling() {
    let idp = Issuer::start().await;
    let s = secured(&idp).await;
    let whoami = Tool::builder("whoami", "Says who is calling.").handler(|ctx| async move {
        let who = ctx.principal().map(|p| format!("{} via {}", p.subject, p.client_id.as_deref().unwrap_or("?"))).unwrap_or_default();
        Ok(CallToolResult::text(who))
    });
    s.state().server.tools.upsert(whoami).expect("valid");
    let token = idp.token("alice", "mcp:tools");
    let sid = init_with(&s, &token).await;
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"whoami"}}"#;
    let res = s.post(call, &[("authorization", &format!("Bearer {token}")), ("mcp-session-id", &sid)]).await;
    let v = common::response_json(res).await;
    assert_eq!(v["result"]["content"][0]["text"], "alice via test-client");
}

#[tokio::test]
async fn unreachable_issuer_keys_give_503_with_retry_after() {
    let idp = Issuer::start().await;
    let dead = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let jwks_uri = format!("http://{}/jwks", dead.local_addr().expect("addr"));
    drop(dead);
    let url = idp.url.clone();
    let s = TestServer::with(move |c| {
        c.auth.mode = AuthMode::Jwt;
        c.auth.resource = Some(RESOURCE.into());
        c.auth.issuers = vec![serde_json::from_value(json!({"issuer": url, "jwks_uri": jwks_uri})).expect("settings")];
    })
    .await;
    let res = s.post(INIT, &[("authorization", &format!("Bearer {}", idp.token("alice", "mcp:tools")))]).await;
    assert_eq!(res.status(), 503);
    assert!(res.headers().contains_key("retry-after"));
}

#[tokio::test]
async fn method_classes_can_need_their_own_scopes() {
    let idp = Issuer::start().await;
    let url = idp.url.clone();
    let s = TestServer::with(move |c| {
        c.auth.mode = AuthMode::Jwt;
        c.auth.resource = Some(RESOURCE.into());
        c.auth.issuers = vec![issuer_settings(&url)];
        c.auth.method_scopes.insert("tools/call".into(), vec!["tools:call".into()]);
    })
    .await;
    let reader = idp.token("alice", "mcp:tools");
    let sid = init_with(&s, &reader).await;
    let auth = format!("Bearer {reader}");
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    assert_eq!(s.post(list, &[("authorization", &auth), ("mcp-session-id", &sid)]).await.status(), 200);
    let call = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"calculate_sum","arguments":{"a":1,"b":2}}}"#;
    let res = s.post(call, &[("authorization", &auth), ("mcp-session-id", &sid)]).await;
    assert_eq!(res.status(), 403);
    assert!(challenge(&res).contains(r#"scope="mcp:tools tools:call""#), "what it has plus what is missing: {}", challenge(&res));

    let caller = idp.token("alice", "mcp:tools tools:call");
    let res = s.post(call, &[("authorization", &format!("Bearer {caller}")), ("mcp-session-id", &sid)]).await;
    assert_eq!(res.status(), 200, "the same principal with the scope continues its session");
}

/// Sends `head`, then `body` a moment later (as a client streaming its body does), and reads
/// one response; then `next` on the same connection and returns what came back for it.
async fn refused_then_reused(s: &TestServer, head: &str, body: &str, next: &str) -> (String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(s.running.addr).await.expect("connect");
    conn.write_all(head.as_bytes()).await.expect("head");
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    conn.write_all(body.as_bytes()).await.expect("body");
    let first = read_response(&mut conn).await;
    let _ = conn.write_all(next.as_bytes()).await;
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), conn.read_to_end(&mut rest)).await;
    (first, String::from_utf8_lossy(&rest).into_owned())
}

async fn read_response(conn: &mut tokio::net::TcpStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("\"jsonrpc\":\"2.0\"}") {
        let n = conn.read(&mut buf).await.expect("read");
        assert!(n > 0, "the connection closed before the response: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&seen).into_owned()
}

#[tokio::test]
async fn a_connection_refused_a_token_before_its_body_arrived_carries_the_next_request() {
    let issuer = Issuer::start().await;
    let s = secured(&issuer).await;
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {}\r\n\r\n",
        INIT.len()
    );
    let next = "GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n";
    let (refused, after) = refused_then_reused(&s, &head, INIT, next).await;
    assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");
    assert!(!refused.to_ascii_lowercase().contains("connection: close"), "a small body is read, so the connection stays: {refused}");
    assert!(after.starts_with("HTTP/1.1 200"), "the next request on the connection is served: {after:?}");
}
