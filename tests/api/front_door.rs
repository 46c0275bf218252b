//! The front door of `/mcp`, in process: the Host and Origin allow-lists (DNS rebinding),
//! CORS for admitted browser origins, the body limit, and the refusal while shutting down.
//! These rules are decided before any handler runs; no socket is needed to see them.

use crate::common;

use axum::body::Body;
use common::in_process::{INIT, InProcess, header};
use http::Request;

#[tokio::test]
async fn a_foreign_origin_gets_403() {
    let s = InProcess::start().await;
    assert_eq!(s.post(INIT, &[("origin", "https://evil.example")]).await.status(), 403);
}

#[tokio::test]
async fn a_foreign_host_gets_403() {
    let s = InProcess::start().await;
    assert_eq!(s.post(INIT, &[("host", "evil.example.com")]).await.status(), 403);
}

#[tokio::test]
async fn loopback_host_and_origin_with_any_port_pass_by_default() {
    let s = InProcess::start().await;
    assert_eq!(s.post(INIT, &[("host", "localhost:8080"), ("origin", "http://localhost:8080")]).await.status(), 200);
}

#[tokio::test]
async fn a_host_with_userinfo_does_not_pass_the_loopback_allow_list() {
    let s = InProcess::start().await;
    assert_eq!(s.post(INIT, &[("host", "localhost:80@evil")]).await.status(), 403);
}

#[tokio::test]
async fn an_origin_with_userinfo_does_not_pass_the_loopback_allow_list() {
    let s = InProcess::start().await;
    assert_eq!(s.post(INIT, &[("origin", "http://localhost:1@evil.example")]).await.status(), 403);
}

#[tokio::test]
async fn a_deployments_own_lists_replace_the_loopback_defaults() {
    let s = InProcess::with(|c| {
        c.server.allowed_hosts = vec!["mcp.example.com".into()];
        c.server.allowed_origins = vec!["https://app.example.com".into()];
    })
    .await;
    assert_eq!(s.post(INIT, &[("host", "mcp.example.com"), ("origin", "https://app.example.com")]).await.status(), 200);
    assert_eq!(s.post(INIT, &[]).await.status(), 403, "127.0.0.1 is not in this deployment's list");
}

fn preflight(origin: &str) -> Request<Body> {
    Request::options("/mcp")
        .header("host", "127.0.0.1")
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "content-type, mcp-session-id")
        .body(Body::empty())
        .expect("request")
}

#[tokio::test]
async fn an_allowed_origins_preflight_is_answered_for_that_origin() {
    let s = InProcess::start().await;
    let res = s.send(preflight("http://localhost:3000")).await;
    assert!(res.status().is_success(), "{}", res.status());
    assert_eq!(header(&res, "access-control-allow-origin"), "http://localhost:3000");
}

#[tokio::test]
async fn browser_clients_can_read_the_session_id() {
    // S-11: without `Access-Control-Expose-Headers`, a browser client never sees its session.
    let s = InProcess::start().await;
    let res = s.post(INIT, &[("origin", "http://localhost:3000")]).await;
    assert_eq!(res.status(), 200);
    assert!(header(&res, "access-control-expose-headers").to_ascii_lowercase().contains("mcp-session-id"));
}

#[tokio::test]
async fn a_foreign_origins_preflight_gets_403() {
    let s = InProcess::start().await;
    assert_eq!(s.send(preflight("https://evil.example")).await.status(), 403);
}

#[tokio::test]
async fn an_announced_body_over_the_limit_gets_413_naming_the_setting() {
    let s = InProcess::with(|c| c.server.max_body_bytes = 64 * 1024).await;
    let big = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#, "x".repeat(100_000));
    let res = s.post(&big, &[("content-length", &big.len().to_string())]).await;
    assert_eq!(res.status(), 413);
    let body = common::in_process::json(res).await;
    assert!(body.to_string().contains("server.max_body_bytes"), "{body}");
}

#[tokio::test]
async fn a_streamed_body_over_the_limit_gets_413() {
    let s = InProcess::with(|c| c.server.max_body_bytes = 64 * 1024).await;
    let chunks = (0..10).map(|_| Ok::<_, std::io::Error>(bytes::Bytes::from(vec![b' '; 10_000])));
    let request = Request::post("/mcp")
        .header("host", "127.0.0.1")
        .header("content-type", "application/json")
        .header("accept", common::ACCEPT_BOTH)
        .body(Body::from_stream(futures_util::stream::iter(chunks)))
        .expect("request");
    assert_eq!(s.send(request).await.status(), 413);
}

#[tokio::test]
async fn while_shutting_down_a_request_gets_503_with_retry_after_and_close() {
    let s = InProcess::start().await;
    s.state.closing.cancel();
    let res = s.post(INIT, &[]).await;
    assert_eq!(res.status(), 503);
    assert_eq!(header(&res, "retry-after"), "1");
    assert_eq!(header(&res, "connection"), "close");
}
