//! What an operator and a client are told when a request is refused at the front door: a
//! token short of a scope hears which scope it lacks, the log says why a token was refused
//! (once per cause, not once per request), and a path nothing serves is 404, not a request
//! for a token.

use std::path::Path;

use serde_json::Value;
use toolgate::auth::settings::AuthMode;
use toolgate::config::{LogFormat, LogSettings};

use crate::common::in_process::{INIT, InProcess, header, json};

const RESOURCE: &str = "http://127.0.0.1/mcp";

/// A dev-mode server signing with `key_file`, for tokens minted here.
async fn dev_server(key_file: &Path) -> InProcess {
    let key_file = key_file.to_owned();
    InProcess::with(move |c| {
        c.auth.mode = AuthMode::Dev;
        c.auth.dev_key_file = key_file;
        c.auth.resource = Some(RESOURCE.into());
    })
    .await
}

/// `Bearer <token>` of a dev token signed with the key in `key_file` (made when missing).
fn bearer(key_file: &Path, scope: &str) -> String {
    let key = toolgate::auth::dev::load_or_create_key(key_file).expect("key");
    format!("Bearer {}", toolgate::auth::dev::mint(&key, RESOURCE, "dana", scope, 600).expect("token"))
}

#[tokio::test]
async fn a_token_short_of_a_scope_is_told_the_scope_it_lacks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("dev.key");
    let s = dev_server(&key).await;
    let res = s.post(INIT, &[("authorization", &bearer(&key, "foo"))]).await;
    assert_eq!(res.status(), 403);
    let challenge = header(&res, "www-authenticate").to_owned();
    assert!(challenge.contains(r#"error_description="the token lacks mcp:tools""#), "{challenge}");
    assert!(challenge.contains(r#"scope="foo mcp:tools""#), "the hint keeps what the token has (A-20): {challenge}");
    let message = json(res).await["error"]["message"].as_str().unwrap_or_default().to_owned();
    assert!(message.contains("lacks the scope mcp:tools"), "{message}");
    assert!(message.contains("this token has the scopes foo"), "what the token has is labelled as such: {message}");
    assert!(!message.contains("needs the scopes foo"), "{message}");
}

#[tokio::test]
async fn a_method_scope_refusal_in_a_batch_names_the_missing_scope() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("dev.key");
    let key_file = key.clone();
    let s = InProcess::with(move |c| {
        c.auth.mode = AuthMode::Dev;
        c.auth.dev_key_file = key_file;
        c.auth.resource = Some(RESOURCE.into());
        c.auth.method_scopes.insert("tools/list".into(), vec!["tools:read".into()]);
    })
    .await;
    let auth = bearer(&key, "mcp:tools");
    let init = s.post(&INIT.replace("2025-11-25", "2025-03-26"), &[("authorization", &auth)]).await;
    let session = header(&init, "mcp-session-id").to_owned();
    let batch = r#"[{"jsonrpc":"2.0","id":2,"method":"tools/list"}]"#;
    let replies = json(s.post(batch, &[("authorization", &auth), ("mcp-session-id", &session)]).await).await;
    let error = &replies[0]["error"];
    assert_eq!(error["data"]["missing"], serde_json::json!(["tools:read"]), "{replies}");
    assert!(error["message"].as_str().is_some_and(|m| m.contains("lacks the scope tools:read")), "{replies}");
}

/// JSON log lines captured for the whole test process (while the `Telemetry` is held).
fn capture_logs() -> (crate::common::Capture, toolgate::telemetry::Telemetry) {
    let capture = crate::common::Capture::default();
    let log = LogSettings { format: LogFormat::Json, filter: "info".into(), ..LogSettings::default() };
    let telemetry = toolgate::telemetry::init_with_writer(&log, capture.clone());
    (capture, telemetry)
}

fn refusal_lines(capture: &crate::common::Capture) -> Vec<Value> {
    let text = capture.text();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["message"] == "request refused by the bearer gate")
        .collect()
}

#[tokio::test]
async fn a_dev_token_signed_with_another_key_is_logged_with_the_reason_and_the_setting() {
    let (capture, _telemetry) = capture_logs();
    let dir = tempfile::tempdir().expect("tempdir");
    let s = dev_server(&dir.path().join("server.key")).await;
    let foreign = bearer(&dir.path().join("elsewhere.key"), "mcp:tools");
    let res = s.post(INIT, &[("authorization", &foreign)]).await;
    assert_eq!(res.status(), 401);
    let lines = refusal_lines(&capture);
    let reason = lines.first().and_then(|l| l["reason"].as_str()).unwrap_or_default();
    assert!(reason.contains("signature does not verify") && reason.contains("auth.dev_key_file"), "{lines:#?}");
}

#[tokio::test]
async fn refusals_of_one_cause_are_logged_once_and_counted_not_repeated() {
    let (capture, _telemetry) = capture_logs();
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("server.key");
    let s = dev_server(&key).await;
    let foreign = bearer(&dir.path().join("elsewhere.key"), "mcp:tools");
    for _ in 0..5 {
        assert_eq!(s.post(INIT, &[("authorization", &foreign)]).await.status(), 401);
    }
    assert_eq!(s.post(INIT, &[("authorization", &bearer(&key, "foo"))]).await.status(), 403);
    let lines = refusal_lines(&capture);
    let of = |kind: &str| lines.iter().filter(|l| l["refusal"] == kind).count();
    assert_eq!(of("invalid_token"), 1, "one line for five bad signatures: {lines:#?}");
    assert_eq!(of("insufficient_scope"), 1, "another cause has its own line: {lines:#?}");
}

#[tokio::test]
async fn operator_auth_a_scope_refusal_logs_the_missing_scopes_and_a_count_never_the_held_ones() {
    let (capture, _telemetry) = capture_logs();
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("server.key");
    let s = dev_server(&key).await;
    assert_eq!(s.post(INIT, &[("authorization", &bearer(&key, "foo private-claim-xyz"))]).await.status(), 403);
    let lines = refusal_lines(&capture);
    let line = lines.iter().find(|l| l["refusal"] == "insufficient_scope").expect("a line");
    assert_eq!(line["reason"], "the token lacks the scope mcp:tools", "{line}");
    assert_eq!(line["held_count"], 2, "{line}");
    let all = capture.text();
    assert!(!all.contains("private-claim-xyz"), "a held scope in the log: {all}");
}

#[tokio::test]
async fn operator_auth_a_token_with_many_scopes_cannot_grow_the_challenge() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("dev.key");
    let s = dev_server(&key).await;
    let many: Vec<String> = (0..130).map(|i| format!("scope-number-{i:04}")).collect();
    let res = s.post(INIT, &[("authorization", &bearer(&key, &many.join(" ")))]).await;
    assert_eq!(res.status(), 403);
    let challenge = header(&res, "www-authenticate").to_owned();
    assert!(challenge.len() < 4096, "{} bytes", challenge.len());
    assert!(
        challenge.contains(r#"scope="scope-number-0000 "#) && challenge.contains(r#" mcp:tools", error_description"#),
        "the missing scope kept: {challenge}"
    );
    let message = json(res).await["error"]["message"].as_str().unwrap_or_default().to_owned();
    assert!(message.len() < 600 && message.contains("more)"), "{message}");
}

#[tokio::test]
async fn the_client_is_told_no_more_than_before_about_a_bad_signature() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("server.key");
    let s = InProcess::with(|c| {
        c.auth.mode = AuthMode::Dev;
        c.auth.dev_key_file = key.clone();
    })
    .await;
    let res = s.post(INIT, &[("authorization", &bearer(&dir.path().join("elsewhere.key"), "mcp:tools"))]).await;
    let challenge = header(&res, "www-authenticate").to_owned();
    assert!(challenge.contains(r#"error_description="signature does not verify""#), "{challenge}");
    assert!(!challenge.contains("dev_key_file"), "the setting is for the operator's log and the dev-mode body: {challenge}");
}

async fn get(s: &InProcess, path: &str, token: Option<&str>) -> http::Response<axum::body::Body> {
    let mut request = http::Request::get(path).header("host", "127.0.0.1");
    if let Some(token) = token {
        request = request.header("authorization", token);
    }
    s.send(request.body(axum::body::Body::empty()).expect("request")).await
}

#[tokio::test]
async fn a_mistyped_path_is_404_with_or_without_a_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("dev.key");
    let s = dev_server(&key).await;
    let token = bearer(&key, "mcp:tools");
    for path in ["/health", "/healthz/", "/mcpx", "/mcp/", "/readiness"] {
        assert_eq!(get(&s, path, None).await.status(), 404, "{path} without a token");
        assert_eq!(get(&s, path, Some(&token)).await.status(), 404, "{path} with a token");
    }
    assert_eq!(get(&s, "/healthz", None).await.status(), 200);
}

#[tokio::test]
async fn the_mcp_endpoint_still_asks_for_a_token_with_its_metadata() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = dev_server(&dir.path().join("dev.key")).await;
    for path in ["/mcp", "/sse"] {
        let res = get(&s, path, None).await;
        assert_eq!(res.status(), 401, "{path}");
        assert!(header(&res, "www-authenticate").contains("resource_metadata="), "{path}");
    }
    assert_eq!(s.post(INIT, &[]).await.status(), 401);
}
