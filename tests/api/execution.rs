//! The tool execution layer over real HTTP: timeouts that really stop the work, bounded
//! concurrency with a clear refusal when the queue is full, and output truncation.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use common::TestServer;
use serde_json::{Value, json};
use toolgate::protocol::CallToolResult;
use toolgate::tool::{Tool, ToolError};

fn sleeper(name: &str, secs: u64) -> Tool {
    Tool::builder(name, "Sleeps, then answers.").handler(move |ctx| async move {
        ctx.sleep(Duration::from_secs(secs)).await?;
        Ok::<_, ToolError>(CallToolResult::text("awake"))
    })
}

async fn call(s: &TestServer, sid: &str, id: i64, name: &str) -> Value {
    let body = json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":name}}).to_string();
    common::response_json(s.post(&body, &[("mcp-session-id", sid)]).await).await
}

#[tokio::test]
async fn a_timed_out_call_says_so_and_its_work_stops() {
    let s = TestServer::start().await;
    let ended = Arc::new(AtomicBool::new(false));
    let flag = ended.clone();
    let tool = Tool::builder("slow", "Too slow.").timeout(Duration::from_secs(1)).handler(move |ctx| {
        let flag = flag.clone();
        async move {
            let _ended = common::SetOnDrop(flag);
            ctx.sleep(Duration::from_secs(60)).await.map(|()| CallToolResult::text("never"))
        }
    });
    s.state().server.tools.upsert(tool).expect("valid");
    let sid = s.initialize("2025-11-25").await;
    let v = call(&s, &sid, 1, "slow").await;
    assert_eq!(v["result"]["isError"], true);
    assert!(v["result"]["content"][0]["text"].as_str().unwrap_or("").contains("timed out after 1 seconds"), "{v}");
    assert!(ended.load(std::sync::atomic::Ordering::SeqCst), "the tool's future was stopped");
}

#[tokio::test]
async fn a_full_queue_is_refused_at_once_and_others_still_run() {
    let s = TestServer::with(|c| {
        c.tools.max_concurrent_calls = 1;
        c.tools.max_queued_calls = 1;
    })
    .await;
    s.state().server.tools.upsert(sleeper("nap", 2)).expect("valid");
    let sid = s.initialize("2025-11-25").await;
    let running = common::spawn_post(&s, &sid, json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nap"}}).to_string());
    while s.state().server.calls.running() == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let queued = common::spawn_post(
        &s,
        &sid,
        json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"calculate_sum","arguments":{"a":1,"b":1}}}).to_string(),
    );
    while s.state().server.calls.queued() == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let refused = call(&s, &sid, 3, "get_current_time").await;
    assert_eq!(refused["result"]["isError"], true);
    assert!(refused["result"]["content"][0]["text"].as_str().unwrap_or("").contains("busy"), "{refused}");
    let queued = common::response_json(queued.await.expect("join")).await;
    assert_eq!(queued["result"]["content"][0]["text"], "2", "the queued call ran once a slot was free");
    running.await.expect("first call answered");
}

#[tokio::test]
async fn a_tools_own_limit_holds_its_calls_back_without_blocking_others() {
    let s = TestServer::start().await;
    let tool = Tool::builder("single", "One at a time.").concurrency(1).handler(|ctx| async move {
        ctx.sleep(Duration::from_millis(300)).await?;
        Ok::<_, ToolError>(CallToolResult::text("done"))
    });
    s.state().server.tools.upsert(tool).expect("valid");
    let sid = s.initialize("2025-11-25").await;
    let started = std::time::Instant::now();
    let (a, b, other) = tokio::join!(call(&s, &sid, 1, "single"), call(&s, &sid, 2, "single"), async {
        let v = call(&s, &sid, 3, "get_current_time").await;
        (v, started.elapsed())
    });
    assert_eq!((a["result"]["content"][0]["text"].as_str(), b["result"]["content"][0]["text"].as_str()), (Some("done"), Some("done")));
    assert!(started.elapsed() >= Duration::from_millis(600), "the two calls of `single` ran one after the other");
    assert!(other.1 < Duration::from_millis(300), "another tool was not held back: {:?}", other.1);
}

#[tokio::test]
async fn long_text_is_truncated_with_guidance() {
    let s = TestServer::with(|c| c.tools.default_char_limit = 1000).await;
    let sid = s.initialize("2025-11-25").await;
    let body =
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"y".repeat(5000)}}}).to_string();
    let v = common::response_json(s.post(&body, &[("mcp-session-id", &sid)]).await).await;
    let text = v["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.starts_with(&"y".repeat(1000)) && !text.starts_with(&"y".repeat(1001)), "cut at the limit");
    assert!(text.contains("Output truncated at 1000 characters"), "{}", &text[1000..]);
}

#[tokio::test]
async fn output_that_breaks_its_schema_is_a_generic_server_error() {
    let s = TestServer::start().await;
    let liar = Tool::builder("liar", "Promises a number, returns a string.")
        .output_schema(json!({"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]}))
        .handler(|_| async { Ok::<_, ToolError>(CallToolResult::structured(json!({"n": "not a number"}))) });
    s.state().server.tools.upsert(liar).expect("valid");
    let sid = s.initialize("2025-11-25").await;
    let v = call(&s, &sid, 1, "liar").await;
    assert_eq!(v["error"]["code"], -32603, "{v}");
    assert!(!v["error"]["message"].as_str().unwrap_or("").contains("not a number"), "no internals in the message");
}
