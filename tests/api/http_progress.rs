//! An `http` tool tells a caller that asked for progress about each retry (which attempt of
//! how many, after what answer, and how long it waits) and, when it pages, about the page it
//! read (how far through the collection, of how many, and where the next page starts).

use crate::common;

use common::{TestServer, call_with_progress};
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

#[tokio::test]
async fn a_paginated_call_reports_the_page_it_read() {
    let upstream = MockServer::start().await;
    let page = json!({"total_count": 5, "items": [{"name": "c"}, {"name": "d"}]});
    Mock::given(path("/repos")).respond_with(ResponseTemplate::new(200).set_body_json(page)).mount(&upstream).await;
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("tools.toml");
    let tools = format!(
        "[[tools]]\nname = \"list_repos\"\ndescription = \"Lists repositories. Example: {{}}\"\n\
         input_schema = {{ type = \"object\", properties = {{ limit = {{ type = \"integer\" }}, offset = {{ type = \"integer\" }} }} }}\n\
         [tools.http]\nurl = \"{}/repos\"\nresponse = {{ structured = \"/items\" }}\n\
         [tools.http.pagination]\nlimit = \"per_page\"\npage = \"page\"\ndefault_limit = 2\ntotal_count = \"/total_count\"\n",
        upstream.uri()
    );
    std::fs::write(&file, tools).expect("write tools file");
    let s = TestServer::with(move |s| {
        s.tools.path = Some(file);
        s.tools.http.allow_hosts = vec!["127.0.0.1".into()];
    })
    .await;
    let (progress, answer) = call_with_progress(&s, &s.initialize("2025-11-25").await, "list_repos", json!({"offset": 2})).await;
    assert_eq!(answer["result"]["structuredContent"]["next_offset"], 4, "{answer}");
    assert_eq!(progress.len(), 1, "{progress:?}");
    assert_eq!((progress[0]["progress"].as_f64(), progress[0]["total"].as_f64()), (Some(4.0), Some(5.0)), "{progress:?}");
    assert_eq!(progress[0]["message"], "items 3-4 of 5; more from offset 4");
}

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
    let (progress, answer) = call_with_progress(&s, &s.initialize("2025-11-25").await, "flaky", json!({})).await;
    assert_eq!(answer["result"]["structuredContent"], json!({"ok": true}), "{answer}");
    let steps: Vec<(f64, f64)> =
        progress.iter().map(|p| (p["progress"].as_f64().expect("n"), p["total"].as_f64().expect("total"))).collect();
    assert_eq!(steps, vec![(1.0, 4.0), (2.0, 4.0)], "{progress:?}");
    let first = progress[0]["message"].as_str().expect("message");
    assert!(first.contains("503 Service Unavailable") && first.contains("attempt 2 of 4"), "{first}");
}
