//! Modern era (2026-07-28) over real HTTP: per-request `_meta` validation in the order the
//! spec probes it, header rules, result decoration, `subscriptions/listen`, cancellation by
//! closing the response stream, and MRTR (`input_required`) with signed request state.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{MODERN, SseReader, TestServer, response_json};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use toolgate::protocol::CallToolResult;
use toolgate::tool::{InputRequest, Tool, ToolError};

fn raw(id: i64, method: &str, params: Value) -> String {
    json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}).to_string()
}

fn meta(version: &str) -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": version, "io.modelcontextprotocol/clientCapabilities": {}})
}

async fn error_of(res: reqwest::Response) -> (u16, Value) {
    let status = res.status().as_u16();
    let v: Value = res.json().await.expect("json error");
    (status, v)
}

#[tokio::test]
async fn discover_and_validation_order() {
    let s = TestServer::start().await;
    let h = [("mcp-protocol-version", MODERN), ("mcp-method", "server/discover")];

    let (status, v) = error_of(s.post(&raw(101, "server/discover", json!({})), &h).await).await;
    assert_eq!((status, v["error"]["code"].as_i64()), (400, Some(-32602)), "missing _meta");
    assert_eq!(v["id"], 101);

    let no_version = json!({"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}});
    let (status, v) = error_of(s.post(&raw(102, "server/discover", no_version), &h).await).await;
    assert_eq!((status, v["error"]["code"].as_i64()), (400, Some(-32602)), "-32602 before header mismatch");

    let (status, v) = error_of(s.post(&raw(302, "server/discover", json!({"_meta": meta("v999.0.0")})), &h).await).await;
    assert_eq!((status, v["error"]["code"].as_i64()), (400, Some(-32020)), "header disagrees with _meta");

    let both = [("mcp-protocol-version", "v999.0.0"), ("mcp-method", "server/discover")];
    let (status, v) = error_of(s.post(&raw(301, "server/discover", json!({"_meta": meta("v999.0.0")})), &both).await).await;
    assert_eq!((status, v["error"]["code"].as_i64()), (400, Some(-32022)));
    assert_eq!(v["error"]["data"], json!({"supported": [MODERN], "requested": "v999.0.0"}));

    let res = s.modern(201, "server/discover", json!({}), json!({})).await;
    assert_eq!(res.status(), 200);
    let v: Value = res.json().await.expect("json");
    let r = &v["result"];
    assert_eq!(r["supportedVersions"], json!([MODERN]));
    assert_eq!(r["resultType"], "complete");
    assert!(r["ttlMs"].is_u64() && r["cacheScope"] == "public");
    assert_eq!(r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "toolgate");
    assert!(r["capabilities"]["tools"]["listChanged"].as_bool().unwrap_or(false));
}

#[tokio::test]
async fn removed_and_unknown_methods_are_404() {
    let s = TestServer::start().await;
    for method in ["initialize", "ping", "logging/setLevel", "resources/subscribe", "no/such"] {
        let res = s.modern(500, method, json!({}), json!({})).await;
        let (status, v) = error_of(res).await;
        assert_eq!((status, v["error"]["code"].as_i64()), (404, Some(-32601)), "{method}");
    }
}

#[tokio::test]
async fn method_and_name_headers_must_match_the_body() {
    let s = TestServer::start().await;
    let body = raw(1, "tools/list", json!({"_meta": meta(MODERN)}));
    let (status, v) = error_of(s.post(&body, &[("mcp-protocol-version", MODERN), ("mcp-method", "prompts/list")]).await).await;
    assert_eq!((status, v["error"]["code"].as_i64()), (400, Some(-32020)));
    let (status, _) = error_of(s.post(&body, &[("mcp-protocol-version", MODERN)]).await).await;
    assert_eq!(status, 400, "Mcp-Method is required");
    let call = raw(2, "tools/call", json!({"name": "echo", "arguments": {"text": "x"}, "_meta": meta(MODERN)}));
    let (status, v) =
        error_of(s.post(&call, &[("mcp-protocol-version", MODERN), ("mcp-method", "tools/call"), ("mcp-name", "other")]).await).await;
    assert_eq!((status, v["error"]["code"].as_i64()), (400, Some(-32020)));
    let ok = s.post(&call, &[("mcp-protocol-version", MODERN), ("mcp-method", "tools/call"), ("mcp-name", "  echo  ")]).await;
    assert_eq!(ok.status(), 200, "whitespace around header values is trimmed");
    let b64 = s.post(&call, &[("mcp-protocol-version", MODERN), ("mcp-method", "tools/call"), ("mcp-name", "=?base64?ZWNobw==?=")]).await;
    assert_eq!(b64.status(), 200, "base64-encoded header values are decoded");
}

#[tokio::test]
async fn results_are_decorated_and_sessions_are_not_issued() {
    let s = TestServer::start().await;
    let res = s.modern(1, "tools/list", json!({}), json!({})).await;
    assert!(res.headers().get("mcp-session-id").is_none());
    let v: Value = res.json().await.expect("json");
    assert_eq!(v["result"]["resultType"], "complete");
    assert_eq!(v["result"]["cacheScope"], "public");
    assert!(v["result"]["ttlMs"].as_u64().is_some());
    let res = s.modern(2, "tools/call", json!({"name": "calculate_sum", "arguments": {"a": 1, "b": 2}}), json!({})).await;
    let v: Value = res.json().await.expect("json");
    assert_eq!(v["result"]["resultType"], "complete");
    assert_eq!(v["result"]["content"][0]["text"], "3");
    assert!(v["result"].get("ttlMs").is_none(), "a call result is not cacheable");
    let (status, v) = error_of(s.modern(3, "tools/call", json!({"name": "nope"}), json!({})).await).await;
    assert_eq!((status, v["error"]["code"].as_i64()), (200, Some(-32602)), "ordinary errors are HTTP 200");
}

#[tokio::test]
async fn progress_comes_on_sse_and_logs_only_when_asked() {
    let s = TestServer::start().await;
    let logging = Tool::builder("log_once", "Logs one info line.").handler(|ctx| async move {
        ctx.log(toolgate::tool::LogLevel::Info, Some("test"), json!("hello")).await;
        Ok::<_, ToolError>(CallToolResult::text("done"))
    });
    s.state().server.tools.upsert(logging).expect("valid tool");
    // `TestServer::modern` writes its own `_meta`; this request carries a progress token too.
    let mut params = json!({"name": "report_progress_steps", "arguments": {"steps": 2, "delay_ms": 5}});
    params["_meta"] = meta(MODERN);
    params["_meta"]["progressToken"] = json!("p");
    let res = s
        .post(
            &raw(2, "tools/call", params),
            &[("mcp-protocol-version", MODERN), ("mcp-method", "tools/call"), ("mcp-name", "report_progress_steps")],
        )
        .await;
    assert_eq!(res.headers()["content-type"], "text/event-stream");
    let mut r = SseReader::new(res);
    let (ev, first) = r.next_message().await.expect("progress");
    assert!(ev.id.is_none(), "no event ids in the modern era");
    assert_eq!(first["method"], "notifications/progress");

    let silent = s.modern(3, "tools/call", json!({"name": "log_once"}), json!({})).await;
    assert_eq!(silent.headers()["content-type"], "application/json", "no log messages without a logLevel");
    let mut params = json!({"name": "log_once"});
    params["_meta"] = meta(MODERN);
    params["_meta"]["io.modelcontextprotocol/logLevel"] = json!("debug");
    let res = s
        .post(&raw(4, "tools/call", params), &[("mcp-protocol-version", MODERN), ("mcp-method", "tools/call"), ("mcp-name", "log_once")])
        .await;
    let mut r = SseReader::new(res);
    let (_, log) = r.next_message().await.expect("log message");
    assert_eq!(log["params"], json!({"level": "info", "logger": "test", "data": "hello"}));
}

#[tokio::test]
async fn closing_the_response_stream_cancels_the_request() {
    // The server notices a vanished client when it next writes (at the latest the next
    // keep-alive), so a short interval keeps this test quick.
    let s = TestServer::with(|c| c.sse.keep_alive_secs = 1).await;
    let stopped = Arc::new(AtomicBool::new(false));
    let tool = common::wait_forever(stopped.clone());
    s.state().server.tools.upsert(tool).expect("valid tool");
    // A raw socket, so the test controls exactly when the connection closes.
    let body = raw(1, "tools/call", json!({"name": "wait_forever", "_meta": meta(MODERN)}));
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: {MODERN}\r\nMcp-Method: tools/call\r\nMcp-Name: wait_forever\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut socket = tokio::net::TcpStream::connect(s.running.addr).await.expect("connect");
    socket.write_all(request.as_bytes()).await.expect("send");
    let mut head = vec![0u8; 512];
    let n = socket.read(&mut head).await.expect("response head");
    let head = String::from_utf8_lossy(&head[..n]).to_ascii_lowercase();
    assert!(head.contains("text/event-stream"), "a long call upgrades to SSE after one keep-alive interval: {head}");
    drop(socket);
    for _ in 0..50 {
        if stopped.load(Ordering::SeqCst) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the work did not stop after the client went away");
}

#[tokio::test]
async fn listen_acknowledges_then_delivers_filtered_tagged_notifications() {
    let s = TestServer::start().await;
    let res = s
        .modern(
            1_732_000_000_000,
            "subscriptions/listen",
            json!({"notifications": {"toolsListChanged": true, "promptsListChanged": true}}),
            json!({}),
        )
        .await;
    assert_eq!(res.headers()["content-type"], "text/event-stream");
    let mut tools = SseReader::new(res);
    let (_, ack) = tools.next_message().await.expect("ack");
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 1_732_000_000_000_i64);
    assert_eq!(ack["params"]["notifications"], json!({"toolsListChanged": true}), "no prompts on this server, so not honoured");

    let res = s.modern(2, "subscriptions/listen", json!({"notifications": {}}), json!({})).await;
    let mut nothing = SseReader::new(res);
    nothing.next_message().await.expect("ack");

    let tool = Tool::builder("new_tool", "New.").handler(|_| async { Ok(CallToolResult::text("")) });
    s.state().server.tools.upsert(tool).expect("valid");
    let (_, n) = tools.next_message_within(Duration::from_secs(5)).await.expect("notification");
    assert_eq!(n["method"], "notifications/tools/list_changed");
    assert_eq!(n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 1_732_000_000_000_i64);
    assert!(nothing.next_message_within(Duration::from_millis(300)).await.is_none(), "filter honoured");

    let (status, v) = error_of(s.modern(3, "subscriptions/listen", json!({}), json!({})).await).await;
    assert_eq!((status, v["error"]["code"].as_i64()), (200, Some(-32602)), "notifications is required");
}

#[tokio::test]
async fn listen_streams_end_with_a_result_on_shutdown() {
    let s = TestServer::start().await;
    let res = s.modern(9, "subscriptions/listen", json!({"notifications": {"toolsListChanged": true}}), json!({})).await;
    let mut r = SseReader::new(res);
    r.next_message().await.expect("ack");
    let stop = tokio::spawn(s.running.stop());
    let (_, last) = r.next_message_within(Duration::from_secs(5)).await.expect("closing result");
    assert_eq!(last["id"], 9);
    assert_eq!(last["result"]["resultType"], "complete");
    assert!(r.next_event().await.is_none());
    stop.await.expect("join").expect("stopped");
}

/// Two MRTR rounds: round 1 asks for a name; round 2 (state says round 1) asks the model
/// for a color; the third request completes.
fn greeter() -> Tool {
    Tool::builder("greet_multi", "Needs a name, then a color, over two rounds.").handler(|ctx| async move {
        let Some(name) = ctx.request_state().and_then(|s| s["name"].as_str()).map(str::to_owned) else {
            let answer = ctx
                .elicit(
                    "name",
                    json!({"message": "Name?", "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}),
                )
                .await?;
            let name = answer["content"]["name"].as_str().unwrap_or("?");
            ctx.set_request_state(json!({"name": name}));
            ctx.request_inputs(vec![InputRequest::sample("color", json!({"messages": [], "maxTokens": 5}))]).await?;
            return Err(ToolError::Failed("a color must be asked for in a later round".into()));
        };
        let color = ctx.sample("color", json!({"messages": [], "maxTokens": 5})).await?;
        Ok(CallToolResult::text(format!("{name} likes {}", color["content"]["text"].as_str().unwrap_or("?"))))
    })
}

#[tokio::test]
async fn mrtr_input_required_round_trips_with_signed_state() {
    let s = TestServer::start().await;
    s.state().server.tools.upsert(greeter()).expect("valid");
    let caps = json!({"elicitation": {}, "sampling": {}});
    let v = response_json(s.modern(1, "tools/call", json!({"name": "greet_multi"}), caps.clone()).await).await;
    assert_eq!(v["result"]["resultType"], "input_required");
    assert_eq!(v["result"]["inputRequests"]["name"]["method"], "elicitation/create");
    assert!(v["result"].get("requestState").is_none());
    assert!(v["result"].get("ttlMs").is_none(), "input_required carries no caching hints");

    let round2 = json!({"name": "greet_multi", "inputResponses": {"name": {"action": "accept", "content": {"name": "Ada"}}}});
    let v = response_json(s.modern(2, "tools/call", round2, caps.clone()).await).await;
    assert_eq!(v["result"]["resultType"], "input_required");
    assert_eq!(v["result"]["inputRequests"]["color"]["method"], "sampling/createMessage");
    let state = v["result"]["requestState"].as_str().expect("signed state").to_owned();

    let answer = json!({"role": "assistant", "content": {"type": "text", "text": "blue"}, "model": "m"});
    let round3 = json!({"name": "greet_multi", "requestState": state, "inputResponses": {"color": answer}});
    let v = response_json(s.modern(3, "tools/call", round3, caps.clone()).await).await;
    assert_eq!(v["result"]["content"][0]["text"], "Ada likes blue");

    let tampered = json!({"name": "greet_multi", "requestState": format!("{state}-TAMPERED"), "inputResponses": {"color": answer}});
    let v = response_json(s.modern(4, "tools/call", tampered, caps.clone()).await).await;
    assert_eq!(v["error"]["code"], -32602);

    let bad = json!({"name": "greet_multi", "inputResponses": {"name": 12345}});
    let v = response_json(s.modern(5, "tools/call", bad, caps).await).await;
    assert_eq!(v["error"]["code"], -32602, "malformed inputResponses are refused");
}

#[tokio::test]
async fn a_missing_client_capability_is_32021() {
    let s = TestServer::start().await;
    s.state().server.tools.upsert(greeter()).expect("valid");
    let (status, v) = error_of(s.modern(1, "tools/call", json!({"name": "greet_multi"}), json!({"sampling": {}})).await).await;
    assert_eq!((status, v["error"]["code"].as_i64()), (400, Some(-32021)));
    assert_eq!(v["error"]["data"]["requiredCapabilities"], json!({"elicitation": {}}));
}

#[tokio::test]
async fn mcp_param_headers_must_mirror_marked_arguments() {
    let s = TestServer::start().await;
    let tool = Tool::builder("regional", "Uses a region.")
        .input_schema(json!({"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}))
        .handler(|_| async { Ok(CallToolResult::text("ok")) });
    s.state().server.tools.upsert(tool).expect("valid");
    let mut params = json!({"name": "regional", "arguments": {"region": "Hello"}});
    params["_meta"] = meta(MODERN);
    let body = raw(1, "tools/call", params);
    let base = [("mcp-protocol-version", MODERN), ("mcp-method", "tools/call"), ("mcp-name", "regional")];
    let with = |value: &'static str| {
        let mut h = base.to_vec();
        h.push(("mcp-param-region", value));
        h
    };
    let (status, v) = error_of(s.post(&body, &base).await).await;
    assert_eq!((status, v["error"]["code"].as_i64()), (400, Some(-32020)), "missing header");
    for bad in ["=?base64?SGVsbG8?=", "=?base64?SGVs!!!bG8=?=", "Goodbye"] {
        let (status, v) = error_of(s.post(&body, &with(bad)).await).await;
        assert_eq!((status, v["error"]["code"].as_i64()), (400, Some(-32020)), "{bad}");
    }
    for good in ["Hello", "=?base64?SGVsbG8=?="] {
        assert_eq!(s.post(&body, &with(good)).await.status(), 200, "{good}");
    }
}
