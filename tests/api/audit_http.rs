//! The audit log through the whole server: every `tools/call` and every security event
//! becomes one record, with the right outcome, and shutdown flushes them all to the database.

use crate::common;

use std::time::Duration;

use common::TestServer;
use serde_json::json;
use toolgate::audit::{AuditFilter, EventKind, Outcome};
use toolgate::protocol::CallToolResult;
use toolgate::store::Store;
use toolgate::tool::{Tool, ToolError};

#[tokio::test]
async fn every_call_and_refusal_is_recorded_with_its_outcome() {
    let s = TestServer::with(|c| {
        c.audit.enabled = true;
        c.limits.enabled = true;
        c.limits.tools.insert("get_current_time".into(), toolgate::limits::ToolLimit { per_minute: Some(1), burst: Some(1), cost: 1 });
    })
    .await;
    let slow = Tool::builder("slow", "Too slow.").timeout(Duration::from_secs(1)).handler(|ctx| async move {
        ctx.sleep(Duration::from_secs(30)).await?;
        Ok::<_, ToolError>(CallToolResult::text("never"))
    });
    s.state().server.tools.upsert(slow).expect("valid");
    let sid = s.initialize("2025-11-25").await;
    let calls = [
        (json!({"name": "calculate_sum", "arguments": {"a": 1, "b": 2}}), 200),
        (json!({"name": "calculate_sum", "arguments": {"a": "x", "b": 2}}), 200),
        (json!({"name": "analyze_csv", "arguments": {"path": "missing.csv"}}), 200),
        (json!({"name": "slow"}), 200),
        (json!({"name": "get_current_time"}), 200),
        (json!({"name": "get_current_time"}), 429),
    ];
    for (i, (params, status)) in calls.iter().enumerate() {
        let body = json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}).to_string();
        let res = s.post(&body, &[("mcp-session-id", &sid)]).await;
        assert_eq!(res.status().as_u16(), *status, "{params}");
        let _ = common::response_json(res).await;
    }
    let data = s.data.path().to_owned();
    let settings = s.state().settings.storage.clone();
    s.running.stop().await.expect("stopped; the audit log is flushed");

    let store = Store::connect(&settings).await.expect("store");
    let records = toolgate::audit::query(&store, &AuditFilter::default()).await.expect("query");
    let calls: Vec<_> = records.iter().filter(|r| r.kind == EventKind::ToolCall).collect();
    let outcomes: Vec<(Option<&str>, Outcome)> = calls.iter().map(|r| (r.tool.as_deref(), r.outcome)).collect();
    assert_eq!(calls.len(), 5, "one record per executed call: {outcomes:?}");
    for expected in [
        (Some("calculate_sum"), Outcome::Ok),
        (Some("calculate_sum"), Outcome::InvalidInput),
        (Some("analyze_csv"), Outcome::ToolError),
        (Some("slow"), Outcome::Timeout),
        (Some("get_current_time"), Outcome::Ok),
    ] {
        assert!(outcomes.contains(&expected), "{expected:?} in {outcomes:?}");
    }
    let ok = calls.iter().find(|r| r.outcome == Outcome::Ok && r.tool.as_deref() == Some("calculate_sum")).expect("ok record");
    assert!(ok.args_sha256.as_ref().is_some_and(|d| d.len() == 64), "arguments are digested");
    assert!(ok.arguments.is_none(), "arguments are not stored unless configured");
    assert!(ok.session_id.is_some() && ok.request_id.is_some() && ok.client_ip.is_some() && ok.result_bytes.is_some());
    let limited = records.iter().filter(|r| r.kind == EventKind::RateLimited).count();
    assert_eq!(limited, 1, "the refused call is recorded as a rate-limit event");
    drop(data);
}

#[tokio::test]
async fn security_events_are_recorded() {
    let idp = common::idp::Issuer::start().await;
    let url = idp.url.clone();
    let s = TestServer::with(move |c| {
        c.audit.enabled = true;
        c.auth.mode = toolgate::auth::settings::AuthMode::Jwt;
        c.auth.resource = Some(common::idp::RESOURCE.into());
        c.auth.issuers = vec![serde_json::from_value(json!({ "issuer": url })).expect("issuer")];
    })
    .await;
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    assert_eq!(s.post(init, &[("authorization", "Bearer forged.token.here")]).await.status(), 401);
    let narrow = format!("Bearer {}", idp.token("alice", "profile"));
    assert_eq!(s.post(init, &[("authorization", &narrow)]).await.status(), 403);
    let tool = Tool::builder("added", "Added at runtime.").handler(|_| async { Ok(CallToolResult::text("")) });
    s.state().server.tools.upsert(tool).expect("valid");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let settings = s.state().settings.storage.clone();
    s.running.stop().await.expect("stopped");
    let store = Store::connect(&settings).await.expect("store");
    let records = toolgate::audit::query(&store, &AuditFilter::default()).await.expect("query");
    let kinds: Vec<EventKind> = records.iter().map(|r| r.kind).collect();
    for kind in [EventKind::AuthFailure, EventKind::AuthzDenied, EventKind::RegistryChange] {
        assert!(kinds.contains(&kind), "{kind:?} in {kinds:?}");
    }
}

#[tokio::test]
async fn arguments_are_kept_only_when_the_tool_asks_and_then_redacted() {
    let s = TestServer::start().await;
    let login = Tool::builder("login", "Logs in.")
        .input_schema(json!({"type": "object", "properties": {"user": {"type": "string"}, "password": {"type": "string"}}}))
        .audit_arguments()
        .handler(|_| async { Ok::<_, ToolError>(CallToolResult::text("ok")) });
    s.state().server.tools.upsert(login).expect("valid");
    let sid = s.initialize("2025-11-25").await;
    let body =
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"login","arguments":{"user":"ada","password":"hunter2"}}})
            .to_string();
    let _ = common::response_json(s.post(&body, &[("mcp-session-id", &sid)]).await).await;
    let settings = s.state().settings.storage.clone();
    s.running.stop().await.expect("stopped");
    let store = Store::connect(&settings).await.expect("store");
    let records = toolgate::audit::query(&store, &AuditFilter::default()).await.expect("query");
    let call = records.iter().find(|r| r.tool.as_deref() == Some("login")).expect("record");
    let kept = call.arguments.as_ref().expect("arguments kept for this tool");
    assert_eq!(kept["user"], "ada");
    assert_ne!(kept["password"], "hunter2", "sensitive fields are redacted");
}

#[tokio::test]
async fn shutdown_under_load_loses_no_record() {
    let s = TestServer::start().await;
    let sid = s.initialize("2025-11-25").await;
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut load = Vec::new();
    for worker in 0..8 {
        let (client, url, sid, answered) = (s.client.clone(), s.url("/mcp"), sid.clone(), answered.clone());
        load.push(tokio::spawn(async move {
            for i in 0..10_000 {
                let body = json!({"jsonrpc":"2.0","id":worker * 100_000 + i,"method":"tools/call","params":{"name":"calculate_sum","arguments":{"a":i,"b":1}}}).to_string();
                let sent = client.post(&url).header("content-type", "application/json").header("accept", common::ACCEPT_BOTH).header("mcp-session-id", &sid).body(body).send().await;
                match sent {
                    Ok(res) if res.status() == 200 => {
                        if res.text().await.is_ok_and(|t| t.contains("\"result\"")) {
                            answered.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        }
                    }
                    _ => return,
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    let settings = s.state().settings.storage.clone();
    // The same path as SIGTERM: stop accepting, end streams, flush the audit log.
    s.running.stop().await.expect("stopped");
    for task in load {
        let _ = task.await;
    }
    let answered = answered.load(std::sync::atomic::Ordering::SeqCst);
    assert!(answered > 50, "the load ran ({answered} answers)");
    let store = Store::connect(&settings).await.expect("store");
    let records =
        toolgate::audit::query(&store, &AuditFilter { kind: Some(EventKind::ToolCall), ..Default::default() }).await.expect("query");
    let ok = records.iter().filter(|r| r.outcome == Outcome::Ok).count();
    assert!(ok >= answered, "every answered call has its record: {ok} records for {answered} answers");
    let mut ids: Vec<_> = records.iter().map(|r| r.id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), records.len(), "no duplicates");
}
