//! OAuth for upstream MCP servers: toolgate's own token (client credentials) for listing
//! tools, and each caller's token exchanged (RFC 8693) for one meant for the upstream, over a
//! connection of that caller's own. A token endpoint on loopback records what it is asked; the
//! upstream (wiremock) records the `Authorization` of every request, so the tests assert that
//! the caller's token never reaches the upstream and one caller's token never serves another.

use std::sync::Arc;

use axum::extract::Form;
use axum::routing::post;
use base64::Engine as _;
use parking_lot::Mutex;
use serde_json::{Value, json};
use wiremock::{MockServer, ResponseTemplate};

use crate::common::TestServer;
use crate::common::idp::Issuer;
use crate::upstreams_http::{front, scripted, text, wait_for};

/// One token request's form fields.
type FormFields = Vec<(String, String)>;

/// A token endpoint: client credentials give `svc-token`; a token exchange gives
/// `as-<subject of the subject token>`, unless the subject is `mallory`.
struct TokenEndpoint {
    url: String,
    asked: Arc<Mutex<Vec<FormFields>>>,
}

impl TokenEndpoint {
    async fn start() -> Self {
        let asked: Arc<Mutex<Vec<FormFields>>> = Arc::default();
        let log = asked.clone();
        let app = axum::Router::new().route(
            "/token",
            post(move |Form(form): Form<FormFields>| {
                let log = log.clone();
                async move {
                    log.lock().push(form.clone());
                    let field = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()).unwrap_or_default();
                    let answer = match field("grant_type").as_str() {
                        "client_credentials" => json!({"access_token": "svc-token", "token_type": "Bearer", "expires_in": 300}),
                        "urn:ietf:params:oauth:grant-type:token-exchange" => match subject_of(&field("subject_token")).as_str() {
                            "mallory" => return (axum::http::StatusCode::BAD_REQUEST, axum::Json(json!({"error": "invalid_grant", "error_description": "not for you"}))),
                            sub => json!({"access_token": format!("as-{sub}"), "issued_token_type": "urn:ietf:params:oauth:token-type:access_token", "token_type": "Bearer", "expires_in": 300}),
                        },
                        _ => return (axum::http::StatusCode::BAD_REQUEST, axum::Json(json!({"error": "unsupported_grant_type"}))),
                    };
                    (axum::http::StatusCode::OK, axum::Json(answer))
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://127.0.0.1:{}/token", listener.local_addr().expect("addr").port());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, asked }
    }

    fn exchanges(&self) -> Vec<FormFields> {
        self.asked.lock().iter().filter(|f| f.iter().any(|(k, v)| k == "grant_type" && v.contains("token-exchange"))).cloned().collect()
    }
}

fn subject_of(jwt: &str) -> String {
    let payload = jwt.split('.').nth(1).unwrap_or_default();
    let claims: Value = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    claims["sub"].as_str().unwrap_or_default().to_owned()
}

/// toolgate (JWT auth) in front of a scripted upstream that answers `tools/call` with the
/// `Authorization` it received, exchanging callers' tokens at `endpoint`.
async fn setup(endpoint: &TokenEndpoint, issuer: &Issuer) -> (TestServer, MockServer) {
    let mock =
        scripted(|id| ResponseTemplate::new(200).set_body_json(json!({"jsonrpc": "2.0", "id": id, "result": {"content": []}}))).await;
    let secret = tempfile::NamedTempFile::new().expect("file").keep().expect("kept").1;
    std::fs::write(&secret, "toolgate-secret").expect("secret");
    let oauth = json!({"oauth": {"grant": "token_exchange", "token_url": endpoint.url, "client_id": "toolgate",
        "client_secret": {"file": secret}, "audience": "https://upstream.example/mcp", "scopes": ["tools"]}});
    let server = front(&format!("{}/mcp", mock.uri()), oauth, |s| issuer.trust(s)).await;
    wait_for(&server, "up_lookup", true).await;
    (server, mock)
}

/// A session of `subject`'s, and a call of `up_lookup` in it.
async fn call_as(server: &TestServer, issuer: &Issuer, subject: &str) -> (String, Value) {
    let token = issuer.token(subject, "mcp:tools");
    let bearer = format!("Bearer {token}");
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}});
    let res = server.post(&init.to_string(), &[("authorization", &bearer)]).await;
    let session = res.headers()["mcp-session-id"].to_str().expect("ascii").to_owned();
    let call = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up_lookup","arguments":{}}});
    let res = server.post(&call.to_string(), &[("authorization", &bearer), ("mcp-session-id", &session)]).await;
    (token, crate::common::response_json(res).await)
}

/// The `Authorization` of each request the upstream received for `method`.
async fn upstream_auth(mock: &MockServer, method: &str) -> Vec<String> {
    let seen = mock.received_requests().await.expect("recorded");
    seen.iter()
        .filter(|r| serde_json::from_slice::<Value>(&r.body).is_ok_and(|b| b["method"] == method))
        .map(|r| r.headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn tools_are_listed_with_toolgates_own_client_credentials() {
    let (endpoint, issuer) = (TokenEndpoint::start().await, Issuer::start().await);
    let (_server, mock) = setup(&endpoint, &issuer).await;
    assert_eq!(upstream_auth(&mock, "tools/list").await, ["Bearer svc-token"]);
}

#[tokio::test]
async fn each_call_reaches_the_upstream_with_its_callers_exchanged_token_never_the_callers_own() {
    let (endpoint, issuer) = (TokenEndpoint::start().await, Issuer::start().await);
    let (server, mock) = setup(&endpoint, &issuer).await;
    let (alice, answer) = call_as(&server, &issuer, "alice").await;
    assert_eq!(answer["result"]["isError"], Value::Null, "{answer}");
    let (bob, _) = call_as(&server, &issuer, "bob").await;
    assert_eq!(upstream_auth(&mock, "tools/call").await, ["Bearer as-alice", "Bearer as-bob"]);
    for request in mock.received_requests().await.expect("recorded") {
        let auth = request.headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        assert!(!auth.contains(&alice) && !auth.contains(&bob), "a caller's own token reached the upstream");
    }
}

#[tokio::test]
async fn the_exchange_names_the_callers_token_and_the_upstream_as_audience() {
    let (endpoint, issuer) = (TokenEndpoint::start().await, Issuer::start().await);
    let (server, _mock) = setup(&endpoint, &issuer).await;
    let (alice, _) = call_as(&server, &issuer, "alice").await;
    let exchanges = endpoint.exchanges();
    assert_eq!(exchanges.len(), 1);
    let field = |k: &str| exchanges[0].iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!(field("subject_token"), Some(alice));
    assert_eq!(field("subject_token_type").as_deref(), Some("urn:ietf:params:oauth:token-type:access_token"));
    assert_eq!(field("audience").as_deref(), Some("https://upstream.example/mcp"));
    assert_eq!(field("scope").as_deref(), Some("tools"));
}

#[tokio::test]
async fn an_exchanged_token_is_reused_for_the_same_caller_token() {
    let (endpoint, issuer) = (TokenEndpoint::start().await, Issuer::start().await);
    let (server, mock) = setup(&endpoint, &issuer).await;
    let token = issuer.token("alice", "mcp:tools");
    let bearer = format!("Bearer {token}");
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}});
    let res = server.post(&init.to_string(), &[("authorization", &bearer)]).await;
    let session = res.headers()["mcp-session-id"].to_str().expect("ascii").to_owned();
    for id in 1..=3 {
        let call = json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"up_lookup","arguments":{}}});
        server.post(&call.to_string(), &[("authorization", &bearer), ("mcp-session-id", &session)]).await;
    }
    assert_eq!(endpoint.exchanges().len(), 1, "one exchange for three calls");
    assert_eq!(upstream_auth(&mock, "initialize").await.iter().filter(|a| *a == "Bearer as-alice").count(), 1, "one session for alice");
}

#[tokio::test]
async fn a_refused_exchange_gives_the_caller_a_clear_tool_error_and_nothing_reaches_the_upstream() {
    let (endpoint, issuer) = (TokenEndpoint::start().await, Issuer::start().await);
    let (server, mock) = setup(&endpoint, &issuer).await;
    let (_, answer) = call_as(&server, &issuer, "mallory").await;
    assert_eq!(answer["result"]["isError"], true);
    assert!(text(&answer).contains("refused to exchange") && text(&answer).contains("invalid_grant"), "{answer}");
    assert!(upstream_auth(&mock, "tools/call").await.is_empty());
}
