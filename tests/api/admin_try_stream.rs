//! The console's tool try-out answered as an event stream (`POST /admin/tools/{name}/call` with
//! `Accept: text/event-stream`), over real HTTP on the admin listener: the tool's progress as it
//! comes, then the answer; an error answer as a `problem` event; and closing the stream cancels
//! the call as a dropped MCP request is. One rule per test.

use crate::common;

use std::time::Duration;

use common::{SseReader, TestServer};
use serde_json::{Value, json};

/// `POST /admin/tools/{tool}/call` asking for an event stream.
async fn stream(s: &TestServer, tool: &str, arguments: Value) -> reqwest::Response {
    s.client
        .post(s.admin_url(&format!("/admin/tools/{tool}/call")))
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
    let first = tokio::time::timeout(Duration::from_secs(5), reader.next_event()).await.expect("a first event").expect("an event");
    assert_eq!(first.event.as_deref(), Some("progress"), "{first:?}");
    assert_eq!(s.state().server.in_flight.len(), 1, "the countdown runs");
    drop(reader);
    let stopped = crate::audit_support::eventually(Duration::from_secs(5), || async { s.state().server.in_flight.is_empty() }).await;
    assert!(stopped, "the call was cancelled when the stream closed");
}
