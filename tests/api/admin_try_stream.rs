//! The console's tool try-out answered as an event stream (`POST /admin/tools/{name}/call` with
//! `Accept: text/event-stream`), over real HTTP on the admin listener: the tool's progress as it
//! comes, then the answer; an error answer as a `problem` event; only the notifications the
//! answer keeps are sent; and closing the stream cancels the call as a dropped MCP request is,
//! audited as `cancelled`, even when the tool sends nothing and a proxy in between keeps the
//! connection open (the stream's own keep-alive finds the console gone). One rule per test.

use crate::common;

use std::time::Duration;

use common::{SseReader, TestServer};
use serde_json::{Value, json};
use toolgate::audit::{AuditFilter, EventKind, Outcome};
use toolgate::protocol::CallToolResult;
use toolgate::tool::{LogLevel, Tool};

/// `POST /admin/tools/{tool}/call` asking for an event stream.
async fn stream(s: &TestServer, tool: &str, arguments: Value) -> reqwest::Response {
    stream_at(s, &s.admin_url(""), tool, arguments).await
}

/// [`stream`] through `base` (the admin listener, or something in front of it).
async fn stream_at(s: &TestServer, base: &str, tool: &str, arguments: Value) -> reqwest::Response {
    s.client
        .post(format!("{base}/admin/tools/{tool}/call"))
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .body(json!({ "arguments": arguments }).to_string())
        .send()
        .await
        .expect("admin request sent")
}

/// Every event until the stream ends: (name, data).
async fn events(res: reqwest::Response) -> Vec<(String, Value)> {
    let mut reader = SseReader::new(res);
    let mut out = Vec::new();
    while let Some(event) = tokio::time::timeout(Duration::from_secs(20), reader.next_event()).await.expect("the stream ends") {
        if let (Some(name), Some(data)) = (event.event.clone(), event.json()) {
            out.push((name, data));
        }
    }
    out
}

#[tokio::test]
async fn a_streamed_try_out_sends_each_progress_then_the_result() {
    let s = TestServer::start().await;
    let res = stream(&s, "report_progress_steps", json!({"steps": 3, "delay_ms": 20})).await;
    assert_eq!(res.headers()["content-type"], "text/event-stream");
    let seen = events(res).await;
    let names: Vec<&str> = seen.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["progress", "progress", "progress", "result"], "{seen:?}");
    assert_eq!(seen[2].1, json!({"progress": 3.0, "total": 3.0, "message": "Step 3 of 3"}));
    let result = &seen[3].1;
    assert_eq!((&result["is_error"], &result["result"]["content"][0]["text"]), (&json!(false), &json!("Completed 3 steps")), "{result}");
}

#[tokio::test]
async fn a_streamed_try_out_answered_with_an_error_ends_with_its_problem() {
    let s = TestServer::start().await;
    let seen = events(stream(&s, "no_such_tool", json!({})).await).await;
    assert_eq!(seen.len(), 1, "{seen:?}");
    let (name, problem) = &seen[0];
    assert_eq!(name, "problem");
    assert_eq!((&problem["status"], &problem["type"]), (&json!(404), &json!("urn:toolgate:problem:not-found")), "{problem}");
}

#[tokio::test]
async fn closing_a_streamed_try_out_cancels_the_call() {
    let s = TestServer::start().await;
    let mut reader = SseReader::new(stream(&s, "countdown", json!({"seconds": 30})).await);
    // Keep-alive comments may come first.
    let first = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match reader.next_event().await {
                Some(event) if event.comment => continue,
                other => return other,
            }
        }
    })
    .await
    .expect("a first event")
    .expect("an event");
    assert_eq!(first.event.as_deref(), Some("progress"), "the countdown is counting: {first:?}");
    assert_eq!(s.state().server.in_flight.len(), 1, "the countdown runs");
    drop(reader);
    let stopped = crate::audit_support::eventually(Duration::from_secs(5), || async { s.state().server.in_flight.is_empty() }).await;
    assert!(stopped, "the call was cancelled when the stream closed");
}

/// A tool that sends `n` log messages, then answers.
fn chatty(n: usize) -> Tool {
    Tool::builder("chatty", "Logs n lines, then answers.").handler(move |ctx| async move {
        for i in 0..n {
            ctx.log(LogLevel::Info, None, json!(format!("line {i}"))).await;
        }
        Ok(CallToolResult::text("said it all"))
    })
}

#[tokio::test]
async fn a_streamed_try_out_sends_only_the_notifications_its_answer_keeps_and_says_so_once() {
    let s = TestServer::start().await;
    s.state().server.tools.upsert(chatty(150)).expect("valid tool");
    let seen = events(stream(&s, "chatty", json!({})).await).await;
    let named = |name: &str| seen.iter().filter(|(n, _)| n == name).count();
    assert_eq!((named("notification"), named("dropped"), named("result")), (100, 1, 1), "{:?}", &seen[seen.len() - 3..]);
    let (last, result) = seen.last().expect("events");
    assert_eq!(last, "result");
    assert_eq!((result["notifications"].as_array().map(Vec::len), &result["notifications_dropped"]), (Some(100), &json!(50)));
    assert_eq!(seen[99].1["params"]["data"], "line 99", "the first hundred, in order");
}

/// A server whose MCP streams' keep-alives are too rare to notice anything by, with the quiet
/// `slow` tool.
async fn quiet_server() -> TestServer {
    let s = TestServer::with(|c| c.sse.keep_alive_secs = 3600).await;
    common::tasks::install(&s);
    s
}

/// Starts `slow` (ten minutes, sending nothing) through `base`, waits until it runs, closes the
/// stream, and waits for its audit record: its outcomes (none if it never ended).
async fn close_a_quiet_call(s: &TestServer, base: &str) -> Vec<Outcome> {
    let res = stream_at(s, base, "slow", json!({"ms": 600_000})).await;
    assert_eq!(res.status(), 200);
    let running = crate::audit_support::eventually(Duration::from_secs(20), || async { s.state().server.in_flight.len() == 1 }).await;
    assert!(running, "the quiet tool runs before the stream is closed");
    drop(res);
    let filter = AuditFilter { kind: Some(EventKind::ToolCall), tool: Some("slow".into()), ..AuditFilter::default() };
    let audited = || async { toolgate::audit::query(&s.state().store, &filter).await.expect("audit query") };
    crate::audit_support::eventually(Duration::from_secs(30), || async { !audited().await.is_empty() }).await;
    audited().await.iter().map(|r| r.outcome).collect()
}

#[tokio::test]
async fn closing_the_stream_of_a_quiet_tool_cancels_it_and_the_audit_log_says_cancelled() {
    let s = quiet_server().await;
    assert_eq!(close_a_quiet_call(&s, &s.admin_url("")).await, [Outcome::Cancelled], "stopped well before its ten minutes");
}

#[tokio::test]
async fn a_console_gone_behind_a_proxy_that_keeps_the_connection_is_noticed_by_the_streams_keep_alive() {
    let s = quiet_server().await;
    let admin = s.running.admin_addr.expect("the admin listener");
    let proxy = inattentive_proxy(admin).await;
    assert_eq!(close_a_quiet_call(&s, &format!("http://{proxy}")).await, [Outcome::Cancelled], "stopped well before its ten minutes");
}

/// A TCP relay to `target` that, like a proxy that does not watch its clients, keeps the
/// connection to `target` open when its client leaves, until a write to the client fails.
async fn inattentive_proxy(target: std::net::SocketAddr) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let addr = listener.local_addr().expect("its address");
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            tokio::spawn(async move {
                let upstream = tokio::net::TcpStream::connect(target).await.expect("the admin listener");
                let ((mut client_in, mut client_out), (mut upstream_in, mut upstream_out)) = (client.into_split(), upstream.into_split());
                let requests = async {
                    let _ = tokio::io::copy(&mut client_in, &mut upstream_out).await;
                    // The client's end is not passed on.
                    std::future::pending::<()>().await;
                };
                tokio::select! {
                    () = requests => {}
                    _ = tokio::io::copy(&mut upstream_in, &mut client_out) => {}
                }
                // Both connections close here.
            });
        }
    });
    addr
}
