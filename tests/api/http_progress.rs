//! An `http` tool tells a caller that asked for progress about each retry: which attempt of
//! how many, after what answer, and how long it waits.

use crate::common;

use common::{SseReader, TestServer};
use serde_json::json;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

#[tokio::test]
async fn each_retry_reaches_the_caller_as_a_progress_notification() {
    let upstream = MockServer::start().await;
    Mock::given(method("GET")).respond_with(ResponseTemplate::new(503)).up_to_n_times(2).mount(&upstream).await;
    Mock::given(method("GET")).respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": true}))).mount(&upstream).await;
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("tools.toml");
    let tools = format!(
        "[[tools]]\nname = \"flaky\"\ndescription = \"Reads a flaky endpoint. Example: {{}}\"\n\n[tools.http]\nurl = \"{}/flaky\"\nretries = 3\n",
        upstream.uri()
    );
    std::fs::write(&file, tools).expect("write tools file");
    let s = TestServer::with(move |s| {
        s.tools.path = Some(file);
        s.tools.http.allow_hosts = vec!["127.0.0.1".into()];
        s.tools.http.retry_base_delay_ms = 10;
    })
    .await;
    let sid = s.initialize("2025-11-25").await;
    let body = json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"flaky","arguments":{},"_meta":{"progressToken":"r"}}});
    let mut reader = SseReader::new(s.post(&body.to_string(), &[("mcp-session-id", &sid)]).await);
    let mut progress = Vec::new();
    let answer = loop {
        let (_, msg) = reader.next_message().await.expect("the stream runs to the response");
        if msg["method"] == "notifications/progress" {
            progress.push(msg["params"].clone());
        } else {
            break msg;
        }
    };
    assert_eq!(answer["result"]["structuredContent"], json!({"ok": true}), "{answer}");
    let steps: Vec<(f64, f64)> =
        progress.iter().map(|p| (p["progress"].as_f64().expect("n"), p["total"].as_f64().expect("total"))).collect();
    assert_eq!(steps, vec![(1.0, 4.0), (2.0, 4.0)], "{progress:?}");
    let first = progress[0]["message"].as_str().expect("message");
    assert!(first.contains("503 Service Unavailable") && first.contains("attempt 2 of 4"), "{first}");
}
