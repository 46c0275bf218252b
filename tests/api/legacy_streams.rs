//! Legacy-era streams over real HTTP: SSE responses with progress, resumption with
//! `Last-Event-ID`, cancellation, server-to-client requests, the GET stream's
//! `list_changed` fan-out, the 2024-11-05 HTTP+SSE transport, and shutdown.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{SseReader, TestServer, open_get};
use serde_json::{Value, json};
use toolgate::protocol::CallToolResult;
use toolgate::tool::{Tool, ToolError};

fn slow_call(id: i64, steps: u32, delay_ms: u64) -> String {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"report_progress_steps","arguments":{"steps":steps,"delay_ms":delay_ms},"_meta":{"progressToken":"tok"}}}).to_string()
}

#[tokio::test]
async fn progress_comes_on_sse_strictly_increasing_then_the_response_ends_the_stream() {
    let s = TestServer::start().await;
    let sid = s.initialize("2025-11-25").await;
    let res = s.post(&slow_call(5, 3, 10), &[("mcp-session-id", &sid)]).await;
    assert_eq!(res.headers()["content-type"], "text/event-stream");
    assert_eq!(res.headers()["x-accel-buffering"], "no");
    let mut r = SseReader::new(res);
    let priming = r.next_event().await.expect("priming event");
    assert!(priming.id.is_some() && priming.data.is_empty() && priming.retry.is_some(), "{priming:?}");
    let mut last = -1.0;
    let mut progress = 0;
    loop {
        let (ev, msg) = r.next_message().await.expect("stream continues to the response");
        assert!(ev.id.is_some(), "2025-11-25 events carry ids");
        if msg["method"] == "notifications/progress" {
            let p = msg["params"]["progress"].as_f64().expect("number");
            assert!(p > last, "strictly increasing");
            assert_eq!(msg["params"]["progressToken"], "tok");
            last = p;
            progress += 1;
        } else {
            assert_eq!(msg["id"], 5);
            assert_eq!(msg["result"]["content"][0]["text"], "Completed 3 steps");
            break;
        }
    }
    assert_eq!(progress, 3);
    assert!(r.next_event().await.is_none(), "the stream ends after the response");
}

#[tokio::test]
async fn older_versions_get_no_priming_event() {
    let s = TestServer::start().await;
    let sid = s.initialize("2025-06-18").await;
    let res = s.post(&slow_call(1, 1, 10), &[("mcp-session-id", &sid)]).await;
    let mut r = SseReader::new(res);
    let first = r.next_event().await.expect("event");
    assert!(!first.data.is_empty(), "no empty-data event for 2025-06-18: {first:?}");
    let get = open_get(&s, &sid, None).await;
    assert_eq!(get.status(), 200);
    let mut g = SseReader::new(get);
    assert!(
        tokio::time::timeout(Duration::from_millis(300), g.next_event()).await.is_err(),
        "nothing sent on an idle 2025-06-18 GET stream"
    );
}

#[tokio::test]
async fn a_dropped_post_stream_resumes_on_get_with_only_its_own_events() {
    let s = TestServer::start().await;
    let sid = s.initialize("2025-11-25").await;
    let res = s.post(&slow_call(7, 4, 150), &[("mcp-session-id", &sid)]).await;
    let mut r = SseReader::new(res);
    let priming = r.next_event().await.expect("priming");
    let (first, _) = r.next_message().await.expect("first progress");
    drop(r); // the connection drops; the call keeps running (T-27)

    // Another session's event id is foreign here.
    let other = s.initialize("2025-11-25").await;
    let foreign = open_get(&s, &other, first.id.as_deref()).await;
    assert_eq!(foreign.status(), 400, "never replay another session's events");
    assert_eq!(open_get(&s, &sid, Some("999_1")).await.status(), 400, "unknown stream");
    assert_eq!(open_get(&s, &sid, Some("garbage")).await.status(), 400);

    tokio::time::sleep(Duration::from_millis(400)).await;
    let resumed = open_get(&s, &sid, first.id.as_deref()).await;
    assert_eq!(resumed.status(), 200);
    let mut r = SseReader::new(resumed);
    let mut seen = Vec::new();
    loop {
        let (ev, msg) = r.next_message_within(Duration::from_secs(5)).await.expect("replay then live events");
        let stream = ev.id.as_deref().and_then(|i| i.split('_').next()).map(str::to_owned);
        assert_eq!(stream, priming.id.as_deref().and_then(|i| i.split('_').next()).map(str::to_owned), "events of that stream only");
        seen.push(msg["params"]["progress"].as_f64().unwrap_or(-1.0));
        if msg["id"] == 7 {
            break;
        }
    }
    assert_eq!(&seen[..3], &[2.0, 3.0, 4.0], "exactly what was missed, in order: {seen:?}");
}

#[tokio::test]
async fn cancellation_stops_the_work_and_suppresses_the_response() {
    let s = TestServer::start().await;
    let stopped = Arc::new(AtomicBool::new(false));
    let tool = common::wait_forever(stopped.clone());
    s.state().server.tools.upsert(tool).expect("valid tool");
    let sid = s.initialize("2025-11-25").await;
    let call =
        json!({"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"wait_forever","_meta":{"progressToken":1}}}).to_string();
    let res = s.post(&call, &[("mcp-session-id", &sid)]).await;
    let mut r = SseReader::new(res);
    r.next_message().await.expect("progress arrives");
    let cancel = s
        .post(
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c1","reason":"user"}}"#,
            &[("mcp-session-id", &sid)],
        )
        .await;
    assert_eq!(cancel.status(), 202);
    let next = tokio::time::timeout(Duration::from_secs(5), r.next_message()).await.expect("stream ends promptly");
    assert!(next.is_none(), "no response for a cancelled request: {next:?}");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(stopped.load(Ordering::SeqCst), "the tool's work was stopped");
}

#[tokio::test]
async fn elicitation_goes_to_the_client_and_its_answer_comes_back() {
    let s = TestServer::start().await;
    let tool = Tool::builder("ask_name", "Asks the user for a name.").handler(|ctx| async move {
        let answer = ctx
            .elicit("name", json!({"message":"Name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}))
            .await?;
        Ok::<_, ToolError>(CallToolResult::text(format!("Hello, {}", answer["content"]["name"].as_str().unwrap_or("?"))))
    });
    s.state().server.tools.upsert(tool).expect("valid tool");
    let sid = s.initialize("2025-11-25").await;
    let res = s.post(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask_name"}}"#, &[("mcp-session-id", &sid)]).await;
    let mut r = SseReader::new(res);
    let (_, request) = r.next_message().await.expect("server request");
    assert_eq!(request["method"], "elicitation/create");
    let id = request["id"].clone();
    assert!(id.is_string() || id.is_i64(), "never a null id");
    let answer = json!({"jsonrpc":"2.0","id":id,"result":{"action":"accept","content":{"name":"Ada"}}}).to_string();
    assert_eq!(s.post(&answer, &[("mcp-session-id", &sid)]).await.status(), 202);
    let (_, done) = r.next_message().await.expect("response");
    assert_eq!(done["result"]["content"][0]["text"], "Hello, Ada");

    // A client that did not declare elicitation gets a clear tool error instead.
    let plain = s.initialize_with("2025-11-25", json!({})).await;
    let v = s.call(&plain, 2, "tools/call", json!({"name":"ask_name"})).await;
    assert_eq!(v["result"]["isError"], true);
}

#[tokio::test]
async fn list_changed_reaches_every_get_stream_once() {
    let s = TestServer::start().await;
    let mut readers = Vec::new();
    for _ in 0..40 {
        let sid = s.initialize("2025-11-25").await;
        let get = open_get(&s, &sid, None).await;
        assert_eq!(get.status(), 200);
        let mut r = SseReader::new(get);
        let priming = r.next_event().await.expect("priming");
        assert!(priming.data.is_empty());
        readers.push(r);
    }
    let tool = Tool::builder("added_later", "Added while serving.").handler(|_| async { Ok(CallToolResult::text("ok")) });
    s.state().server.tools.upsert(tool).expect("valid tool");
    for r in &mut readers {
        let (_, msg) = r.next_message_within(Duration::from_secs(5)).await.expect("notification arrives");
        assert_eq!(msg, json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"}));
    }
    // A second GET on one session takes the stream over: each message goes to one connection.
    let sid = s.initialize("2025-11-25").await;
    let mut first = SseReader::new(open_get(&s, &sid, None).await);
    first.next_event().await.expect("priming");
    let mut second = SseReader::new(open_get(&s, &sid, None).await);
    second.next_event().await.expect("priming");
    s.state().server.tools.remove("added_later");
    assert!(second.next_message_within(Duration::from_secs(5)).await.is_some());
    assert!(first.next_message_within(Duration::from_millis(300)).await.is_none(), "not broadcast twice");
}

#[tokio::test]
async fn legacy_http_sse_transport_works() {
    let s = TestServer::start().await;
    let res = s.client.get(s.url("/sse")).header("accept", "text/event-stream").send().await.expect("GET /sse");
    assert_eq!(res.status(), 200);
    let mut r = SseReader::new(res);
    let endpoint = r.next_event().await.expect("endpoint event");
    assert_eq!(endpoint.event.as_deref(), Some("endpoint"));
    assert!(endpoint.data.starts_with("/messages?sessionId="), "{endpoint:?}");
    let post = |body: Value| {
        let url = s.url(&endpoint.data);
        let client = s.client.clone();
        async move { client.post(url).header("content-type", "application/json").body(body.to_string()).send().await.expect("POST") }
    };
    let res = post(json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"old","version":"1"}}})).await;
    assert_eq!(res.status(), 202);
    let (ev, init) = r.next_message().await.expect("initialize result on the stream");
    assert_eq!(ev.event.as_deref(), Some("message"));
    assert_eq!(init["result"]["protocolVersion"], "2024-11-05");
    assert_eq!(post(json!({"jsonrpc":"2.0","method":"notifications/initialized"})).await.status(), 202);
    assert_eq!(
        post(json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"calculate_sum","arguments":{"a":1,"b":2}}}))
            .await
            .status(),
        202
    );
    let (_, sum) = r.next_message().await.expect("result");
    assert_eq!(sum["result"]["content"][0]["text"], "3");
    assert!(sum["result"].get("structuredContent").is_none(), "2024-11-05 predates structuredContent");
    let bad =
        s.client.post(s.url("/messages?sessionId=nope")).header("content-type", "application/json").body("{}").send().await.expect("POST");
    assert_eq!(bad.status(), 404);
    drop(r);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let after = post(json!({"jsonrpc":"2.0","method":"notifications/initialized"})).await;
    assert_eq!(after.status(), 404, "closing the stream ends the session");
}

#[tokio::test]
async fn shutdown_ends_open_streams_with_a_retry_hint() {
    let s = TestServer::start().await;
    let sid = s.initialize("2025-11-25").await;
    let mut get = SseReader::new(open_get(&s, &sid, None).await);
    get.next_event().await.expect("priming");
    let sse = s.client.get(s.url("/sse")).send().await.expect("GET /sse");
    let mut old = SseReader::new(sse);
    old.next_event().await.expect("endpoint");
    let stopped = tokio::spawn(s.running.stop());
    let hint = tokio::time::timeout(Duration::from_secs(5), get.next_event()).await.expect("stream ends").expect("retry hint");
    assert!(hint.retry.is_some(), "{hint:?}");
    assert!(tokio::time::timeout(Duration::from_secs(5), get.next_event()).await.expect("ends").is_none());
    assert!(tokio::time::timeout(Duration::from_secs(5), old.next_event()).await.expect("legacy stream ends").is_none());
    tokio::time::timeout(Duration::from_secs(5), stopped).await.expect("server stops in time").expect("join").expect("clean stop");
}

#[tokio::test]
async fn a_tool_can_end_its_connection_and_the_client_polls_for_the_result() {
    let s = TestServer::start().await;
    let tool = Tool::builder("poll_me", "Closes its connection, then finishes.").handler(|ctx| async move {
        let closed = ctx.close_stream().await;
        ctx.sleep(Duration::from_millis(100)).await?;
        Ok::<_, ToolError>(CallToolResult::text(if closed { "done later" } else { "kept the connection" }))
    });
    s.state().server.tools.upsert(tool).expect("valid");
    let sid = s.initialize("2025-11-25").await;
    let res = s.post(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"poll_me"}}"#, &[("mcp-session-id", &sid)]).await;
    let mut r = SseReader::new(res);
    let priming = r.next_event().await.expect("priming");
    assert!(priming.retry.is_some(), "retry before the server closes (T-22)");
    assert!(r.next_event().await.is_none(), "the server ended the connection");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut resumed = SseReader::new(open_get(&s, &sid, priming.id.as_deref()).await);
    let (_, msg) = resumed.next_message_within(Duration::from_secs(5)).await.expect("result on resume");
    assert_eq!(msg["id"], 3);
    assert_eq!(msg["result"]["content"][0]["text"], "done later");

    // Older sessions cannot resume, so the call keeps its connection.
    let old = s.initialize("2025-06-18").await;
    let v = s.call(&old, 4, "tools/call", json!({"name": "poll_me"})).await;
    assert_eq!(v["result"]["content"][0]["text"], "kept the connection");
}

#[tokio::test]
async fn a_panicking_tool_yields_a_generic_error_and_the_server_lives_on() {
    let s = TestServer::start().await;
    let tool = Tool::builder("explode", "Panics.").handler(|ctx| async move {
        if ctx.arguments().is_empty() {
            panic!("internal detail that must not leak");
        }
        Ok::<_, ToolError>(CallToolResult::text("unreachable with no arguments"))
    });
    s.state().server.tools.upsert(tool).expect("valid");
    let sid = s.initialize("2025-11-25").await;
    let v = s.call(&sid, 1, "tools/call", json!({"name": "explode"})).await;
    assert_eq!(v["result"]["isError"], true);
    let text = v["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(!text.contains("internal detail"), "panic details stay in the logs: {text}");
    assert_eq!(s.call(&sid, 2, "ping", json!({})).await["result"], json!({}));
}
