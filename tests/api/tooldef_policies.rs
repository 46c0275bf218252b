//! The common settings of a definition take effect on the running server: its own rate limit,
//! its audit redaction, its timeout and its character limit.

use crate::common;

use common::TestServer;
use serde_json::{Value, json};
use toolgate::audit::AuditFilter;
use toolgate::store::Store;

const TOOLS: &str = r#"
[[tools]]
name = "limited_echo"
description = "Repeat the given text; at most one call per caller at once, one a minute. Example: {\"text\": \"hi\"}."
rate_limit = { per_minute = 1, burst = 1 }
builtin = { id = "echo" }

[[tools]]
name = "secret_echo"
description = "Repeat the given text, which the audit log must not keep. Example: {\"text\": \"hi\"}."
audit_arguments = { redact = ["text"] }
builtin = { id = "echo" }

[[tools]]
name = "short_echo"
description = "Repeat the given text, cut to 100 characters. Example: {\"text\": \"hi\"}."
char_limit = 100
builtin = { id = "echo" }
"#;

async fn server(limits: bool) -> (TestServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("tools.toml");
    std::fs::write(&file, TOOLS).expect("write");
    let s = TestServer::with(move |st| {
        st.tools.path = Some(file);
        st.limits.enabled = limits;
        // Room for the protocol traffic; only the tool's own rate should bite.
        st.limits.requests_per_minute = 10_000;
        st.limits.request_burst = 1_000;
    })
    .await;
    (s, dir)
}

fn call(name: &str, text: &str) -> String {
    json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":name,"arguments":{"text":text}}}).to_string()
}

#[tokio::test]
async fn a_definitions_rate_limit_applies_per_caller() {
    let (s, _dir) = server(true).await;
    let sid = s.initialize("2025-11-25").await;
    let first = s.post(&call("limited_echo", "one"), &[("mcp-session-id", &sid)]).await;
    assert_eq!(first.status(), 200);
    let second = s.post(&call("limited_echo", "two"), &[("mcp-session-id", &sid)]).await;
    assert_eq!(second.status(), 429, "the tool's own bucket (burst 1) is empty");
    assert!(second.headers().contains_key("retry-after"));
    // Other tools draw from the shared budget, untouched by this one's.
    let other = s.post(&call("secret_echo", "x"), &[("mcp-session-id", &sid)]).await;
    assert_eq!(other.status(), 200);
}

#[tokio::test]
async fn a_definitions_redacted_fields_never_reach_the_audit_log() {
    let (s, _dir) = server(false).await;
    let sid = s.initialize("2025-11-25").await;
    let v = common::response_json(s.post(&call("secret_echo", "hunter2-pin"), &[("mcp-session-id", &sid)]).await).await;
    assert_eq!(v["result"]["content"][0]["text"], "hunter2-pin", "the call itself works");
    let long = "x".repeat(500);
    let v = common::response_json(s.post(&call("short_echo", &long), &[("mcp-session-id", &sid)]).await).await;
    let text = v["result"]["content"][0]["text"].as_str().expect("text");
    assert!(text.len() < 300 && text.starts_with("xxxx"), "cut at the tool's char_limit: {} chars", text.len());

    let storage = s.state().settings.storage.clone();
    s.running.stop().await.expect("stopped; the audit log is flushed");
    let store = Store::connect(&storage).await.expect("store");
    let records = toolgate::audit::query(&store, &AuditFilter::default()).await.expect("query");
    let record = records.iter().find(|r| r.tool.as_deref() == Some("secret_echo")).expect("a record of the call");
    let kept = record.arguments.as_ref().expect("audit_arguments keeps the arguments");
    assert_ne!(kept["text"], Value::String("hunter2-pin".into()));
    let all = serde_json::to_string(&records.iter().map(|r| (&r.arguments, &r.detail)).collect::<Vec<_>>()).expect("json");
    assert!(!all.contains("hunter2-pin"), "the value appears nowhere in the audit log");
}
