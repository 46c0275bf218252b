//! Opaque tokens through RFC 7662 introspection, over real HTTP: an introspection endpoint on
//! loopback that checks toolgate's client credentials, answers per token, and counts calls.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Form;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use common::TestServer;
use common::idp::RESOURCE;
use serde_json::{Value, json};
use toolgate::auth::settings::AuthMode;

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
const ISSUER: &str = "https://as.example.com";

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs()
}

/// Starts the endpoint; returns its URL and the call counter.
async fn introspection_endpoint() -> (String, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let handler = move |headers: HeaderMap, Form(form): Form<std::collections::HashMap<String, String>>| {
        let counter = counter.clone();
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            // "toolgate:s3cret" in HTTP Basic: the server authenticates itself.
            if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some("Basic dG9vbGdhdGU6czNjcmV0") {
                return (StatusCode::UNAUTHORIZED, axum::Json(json!({"error": "invalid_client"})));
            }
            let t = now();
            let body = match form.get("token").map(String::as_str) {
                Some("good") => {
                    json!({"active": true, "sub": "alice", "client_id": "app", "scope": "mcp:tools", "aud": RESOURCE, "iss": ISSUER, "exp": t + 600})
                }
                Some("short") => json!({"active": true, "sub": "alice", "scope": "mcp:tools", "aud": [RESOURCE], "exp": t + 1}),
                Some("other-aud") => {
                    json!({"active": true, "sub": "alice", "scope": "mcp:tools", "aud": "https://other.example.com/mcp", "exp": t + 600})
                }
                Some("no-aud") => json!({"active": true, "sub": "alice", "scope": "mcp:tools", "exp": t + 600}),
                Some("other-iss") => {
                    json!({"active": true, "sub": "alice", "scope": "mcp:tools", "aud": RESOURCE, "iss": "https://evil.example.com", "exp": t + 600})
                }
                Some("no-scope") => json!({"active": true, "sub": "alice", "scope": "profile", "aud": RESOURCE, "exp": t + 600}),
                _ => json!({"active": false}),
            };
            (StatusCode::OK, axum::Json(body))
        }
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://127.0.0.1:{}/introspect", listener.local_addr().expect("addr").port());
    tokio::spawn(async move { axum::serve(listener, axum::Router::new().route("/introspect", post(handler))).await });
    (url, calls)
}

async fn server(endpoint: &str, secret: &str) -> TestServer {
    let settings = json!({"endpoint": endpoint, "issuer": ISSUER, "client_id": "toolgate", "client_secret": secret});
    TestServer::with(move |c| {
        c.auth.mode = AuthMode::Jwt;
        c.auth.resource = Some(RESOURCE.into());
        c.auth.introspection = Some(serde_json::from_value(settings).expect("introspection settings"));
    })
    .await
}

async fn status_with(s: &TestServer, token: &str) -> u16 {
    s.post(INIT, &[("authorization", &format!("Bearer {token}"))]).await.status().as_u16()
}

#[tokio::test]
async fn an_active_opaque_token_is_accepted_and_cached() {
    let (url, calls) = introspection_endpoint().await;
    let s = server(&url, "s3cret").await;
    assert_eq!(status_with(&s, "good").await, 200);
    assert_eq!(status_with(&s, "good").await, 200);
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the second request used the cached result");
}

#[tokio::test]
async fn an_inactive_token_is_401_invalid_token() {
    let (url, _) = introspection_endpoint().await;
    let s = server(&url, "s3cret").await;
    let res = s.post(INIT, &[("authorization", "Bearer revoked")]).await;
    assert_eq!(res.status(), 401);
    let challenge = res.headers()["www-authenticate"].to_str().expect("ascii").to_owned();
    assert!(challenge.contains(r#"error="invalid_token""#), "{challenge}");
}

#[tokio::test]
async fn audience_and_issuer_are_checked() {
    let (url, _) = introspection_endpoint().await;
    let s = server(&url, "s3cret").await;
    assert_eq!(status_with(&s, "other-aud").await, 401, "a token for another resource");
    assert_eq!(status_with(&s, "no-aud").await, 401, "no audience at all");
    assert_eq!(status_with(&s, "other-iss").await, 401, "another issuer");
    assert_eq!(status_with(&s, "no-scope").await, 403, "insufficient scope");
}

#[tokio::test]
async fn results_are_never_cached_past_the_tokens_expiry() {
    let (url, calls) = introspection_endpoint().await;
    let s = server(&url, "s3cret").await;
    assert_eq!(status_with(&s, "short").await, 200);
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    // The cached result died with the token's `exp`, so the endpoint is asked again (it
    // answers with a fresh `exp`, so the token is accepted again).
    let again = status_with(&s, "short").await;
    assert_eq!(calls.load(Ordering::SeqCst), 2, "looked up again after exp");
    assert_eq!(again, 200, "a fresh exp from the endpoint is honoured");
}

#[tokio::test]
async fn an_unreachable_or_refusing_endpoint_is_503() {
    let dead = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/introspect", dead.local_addr().expect("addr"));
    drop(dead);
    let s = server(&url, "s3cret").await;
    assert_eq!(status_with(&s, "good").await, 503);

    let (url, _) = introspection_endpoint().await;
    let wrong_secret = server(&url, "wrong").await;
    assert_eq!(status_with(&wrong_secret, "good").await, 503, "toolgate's own credentials were refused: not the caller's fault");
}

#[tokio::test]
async fn the_metadata_names_the_introspecting_issuer() {
    let (url, _) = introspection_endpoint().await;
    let s = server(&url, "s3cret").await;
    let v: Value = s.client.get(s.url("/.well-known/oauth-protected-resource/mcp")).send().await.expect("sent").json().await.expect("json");
    assert_eq!(v["authorization_servers"], json!([ISSUER]));
}
