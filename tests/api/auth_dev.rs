//! Development mode: tokens from the real `toolgate dev-token` command are accepted by a
//! server in dev mode; tokens signed with any other key are not; dev mode never serves on a
//! public address by accident.

use crate::common;

use common::TestServer;
use toolgate::auth::settings::AuthMode;
use toolgate::config::Settings;

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

async fn dev_server(key_file: std::path::PathBuf) -> TestServer {
    TestServer::with(move |c| {
        c.auth.mode = AuthMode::Dev;
        c.auth.dev_key_file = key_file;
        // The resource must be the same for the server and the token command.
        c.auth.resource = Some("http://127.0.0.1:8080/mcp".into());
    })
    .await
}

fn dev_token(key_file: &std::path::Path, scope: &str) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["dev-token", "--scope", scope, "--subject", "dana"])
        .env("TOOLGATE__AUTH__MODE", "dev")
        .env("TOOLGATE__AUTH__DEV_KEY_FILE", key_file)
        .env("TOOLGATE__AUTH__RESOURCE", "http://127.0.0.1:8080/mcp")
        .output()
        .expect("toolgate dev-token runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8").trim().to_owned()
}

#[tokio::test]
async fn tokens_from_the_dev_token_command_are_accepted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("dev.key");
    let s = dev_server(key.clone()).await;
    assert_eq!(s.post(INIT, &[]).await.status(), 401);
    let token = dev_token(&key, "mcp:tools");
    assert_eq!(s.post(INIT, &[("authorization", &format!("Bearer {token}"))]).await.status(), 200);
    let narrow = dev_token(&key, "profile");
    assert_eq!(s.post(INIT, &[("authorization", &format!("Bearer {narrow}"))]).await.status(), 403);
}

#[tokio::test]
async fn a_token_signed_with_another_key_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = dev_server(dir.path().join("server.key")).await;
    let foreign = dev_token(&dir.path().join("other.key"), "mcp:tools");
    assert_eq!(s.post(INIT, &[("authorization", &format!("Bearer {foreign}"))]).await.status(), 401);
}

#[test]
fn dev_mode_refuses_a_public_bind_unless_forced() {
    let mut s = Settings::default();
    s.auth.mode = AuthMode::Dev;
    s.server.bind = "0.0.0.0:8080".parse().expect("addr");
    assert!(s.validate().is_err());
    s.auth.dev_allow_public_bind = true;
    assert!(s.validate().is_ok());
}

fn dev_token_for(key_file: &std::path::Path, resource: &str) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["dev-token"])
        .env("TOOLGATE__AUTH__MODE", "dev")
        .env("TOOLGATE__AUTH__DEV_KEY_FILE", key_file)
        .env("TOOLGATE__AUTH__RESOURCE", resource)
        .output()
        .expect("toolgate dev-token runs");
    String::from_utf8(out.stdout).expect("utf-8").trim().to_owned()
}

async fn refusal_message(s: &TestServer, token: &str) -> String {
    let res = s.post(INIT, &[("authorization", &format!("Bearer {token}"))]).await;
    assert_eq!(res.status(), 401);
    let body: serde_json::Value = res.json().await.expect("json");
    body["error"]["message"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn a_dev_token_minted_for_another_resource_is_refused_saying_to_mint_it_with_the_servers_settings() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("dev.key");
    let s = dev_server(key.clone()).await;
    let message = refusal_message(&s, &dev_token_for(&key, "http://127.0.0.1:9999/mcp")).await;
    assert!(message.contains("audience") && message.contains("--config") && message.contains("TOOLGATE__"), "{message}");
}

#[tokio::test]
async fn a_dev_token_signed_with_another_key_is_refused_naming_the_key_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("server.key");
    let s = dev_server(key.clone()).await;
    let message = refusal_message(&s, &dev_token(&dir.path().join("other.key"), "mcp:tools")).await;
    assert!(message.contains("auth.dev_key_file") && message.contains(&key.display().to_string()), "{message}");
}
