//! Logs and trace ids, as a log pipeline sees them: the JSON lines of a `tools/call` (including
//! lines a tool logs from a task it spawns) carry the request id and the trace id at the top
//! level, the trace id comes from the W3C `traceparent` header or from `_meta.traceparent`
//! (SEP-414), audit records carry the same trace id, and no line holds the bearer token or an
//! argument value. One test: the subscriber is global to the test process.

use crate::common;

use std::time::Duration;

use common::TestServer;
use serde_json::{Value, json};
use toolgate::audit::{AuditFilter, EventKind};
use toolgate::auth::settings::AuthMode;
use toolgate::config::{LogFormat, LogSettings};
use toolgate::protocol::CallToolResult;
use toolgate::tool::{Tool, ToolError};
use tracing::Instrument as _;

const SECRET_ARG: &str = "SECRET-ARGUMENT-VALUE-7f3a";
const HEADER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const META_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const RESOURCE: &str = "http://127.0.0.1:8080/mcp";

/// A tool that logs, and logs again from a task it spawns (the span must follow).
fn chatty() -> Tool {
    Tool::builder("chatty", "Logs while it works.")
        .input_schema(json!({"type": "object", "properties": {"api_key": {"type": "string"}}}))
        .handler(|ctx| async move {
            tracing::info!("tool working");
            let helper = tokio::spawn(async { tracing::info!("spawned helper working") }.in_current_span());
            helper.await.map_err(|e| ToolError::Failed(e.to_string()))?;
            let _ = ctx.arguments();
            Ok(CallToolResult::text("done"))
        })
}

async fn send(s: &TestServer, body: String, headers: Vec<(&'static str, String)>) -> Value {
    let pairs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    common::response_json(s.post(&body, &pairs).await).await
}

fn call(id: i64, meta: Value) -> String {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"chatty","arguments":{"api_key":SECRET_ARG},"_meta":meta}})
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_line_of_a_tool_call_carries_request_and_trace_ids_and_no_secret() {
    let buffer = common::Capture::default();
    let log = LogSettings { format: LogFormat::Json, filter: "info,toolgate=debug,tower_http=debug".into(), ..LogSettings::default() };
    let telemetry = toolgate::telemetry::init_with_writer(&log, buffer.clone());

    let dir = tempfile::tempdir().expect("tempdir");
    let key_file = dir.path().join("dev.key");
    let s = TestServer::with(|c| {
        c.auth.mode = AuthMode::Dev;
        c.auth.dev_key_file = key_file.clone();
        c.auth.resource = Some(RESOURCE.into());
    })
    .await;
    s.state().server.tools.upsert(chatty()).expect("valid tool");
    let key = toolgate::auth::dev::load_or_create_key(&key_file).expect("key");
    let token = toolgate::auth::dev::mint(&key, RESOURCE, "dana", "mcp:tools", 600).expect("token");
    let bearer = format!("Bearer {token}");
    let modern = json!({"io.modelcontextprotocol/protocolVersion": common::MODERN, "io.modelcontextprotocol/clientCapabilities": {}});
    let headers = |request_id: &'static str| {
        vec![
            ("authorization", bearer.clone()),
            ("x-request-id", request_id.to_owned()),
            ("mcp-protocol-version", common::MODERN.to_owned()),
            ("mcp-method", "tools/call".to_owned()),
            ("mcp-name", "chatty".to_owned()),
        ]
    };
    // 1. The trace comes from the HTTP header.
    let mut one = headers("req-one");
    one.push(("traceparent", format!("00-{HEADER_TRACE}-00f067aa0ba902b7-01")));
    let v = send(&s, call(1, modern.clone()), one).await;
    assert_eq!(v["result"]["content"][0]["text"], "done", "{v}");

    // 2. The trace comes from `_meta.traceparent` (SEP-414).
    let mut meta = modern.clone();
    meta["traceparent"] = json!(format!("00-{META_TRACE}-b7ad6b7169203331-01"));
    let v = send(&s, call(2, meta), headers("req-two")).await;
    assert_eq!(v["result"]["content"][0]["text"], "done", "{v}");

    // 3. A refused token is logged with its ids, never with the token.
    let bad = s.post(&call(3, modern), &[("authorization", &format!("{bearer}x")), ("x-request-id", "req-three")]).await;
    assert_eq!(bad.status(), 401);

    let state = s.state().clone();
    s.running.stop().await.expect("clean stop");
    tokio::time::sleep(Duration::from_millis(50)).await;
    let text = String::from_utf8(buffer.0.lock().expect("buffer").clone()).expect("utf-8 logs");
    let lines: Vec<Value> =
        text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("a log line that is not JSON ({e}): {l}"))).collect();
    assert!(!lines.is_empty());

    // Nothing secret, anywhere.
    assert!(!text.contains(&token), "the bearer token is in the logs");
    assert!(!text.contains(SECRET_ARG), "an argument value is in the logs");

    // Every line logged inside a request carries both ids at the top level.
    let in_request: Vec<&Value> = lines.iter().filter(|l| l["span"].as_str().is_some_and(|s| s.starts_with("request"))).collect();
    assert!(in_request.len() >= 6, "{in_request:#?}");
    for line in &in_request {
        assert!(line["request_id"].as_str().is_some_and(|r| !r.is_empty()), "no request_id: {line}");
        assert!(line["trace_id"].as_str().is_some_and(|t| t.len() == 32), "no trace_id: {line}");
    }
    let of = |request_id: &str, message: &str| -> Vec<&Value> {
        in_request.iter().copied().filter(|l| l["request_id"] == request_id && l["message"] == message).collect()
    };
    // The `_meta` trace differs from the HTTP request's, so it has a span of its own.
    for (request_id, trace, path) in [("req-one", HEADER_TRACE, "request:tool"), ("req-two", META_TRACE, "request:mcp:tool")] {
        for message in ["tool working", "spawned helper working"] {
            let found = of(request_id, message);
            assert_eq!(found.len(), 1, "{request_id} {message}: {in_request:#?}");
            assert_eq!(found[0]["trace_id"], trace, "{request_id} {message}: {}", found[0]);
            assert_eq!(found[0]["tool"], "chatty");
            assert_eq!(found[0]["span"], path);
        }
    }
    let refused = of("req-three", "request refused by the bearer gate");
    assert_eq!(refused.len(), 1, "{in_request:#?}");
    // The response line of each request (tower-http's, at debug) is in the request span too.
    assert!(in_request.iter().any(|l| l["request_id"] == "req-one" && l["message"] == "finished processing request"));

    // Audit records name the same traces.
    let filter = AuditFilter { kind: Some(EventKind::ToolCall), ..Default::default() };
    let records = toolgate::audit::query(&state.store, &filter).await.expect("audit query");
    let trace_of = |request_id: &str| records.iter().find(|r| r.request_id.as_deref() == Some(request_id)).and_then(|r| r.trace_id.clone());
    assert_eq!(trace_of("req-one").as_deref(), Some(HEADER_TRACE));
    assert_eq!(trace_of("req-two").as_deref(), Some(META_TRACE));
    telemetry.shutdown();
}
