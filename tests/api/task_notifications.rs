//! 2026-07-28 task notifications: a `subscriptions/listen` stream that names `taskIds` hears
//! `notifications/tasks` with the task as `tasks/get` would show it, on every change; only the
//! caller's own tasks are followed; naming tasks without the tasks extension gets -32021.

use crate::common;

use std::time::Duration;

use common::tasks::opted_in;
use common::{SseReader, TestServer};
use serde_json::{Value, json};

async fn server() -> TestServer {
    let s = TestServer::start().await;
    common::tasks::install(&s);
    s
}

async fn create(s: &TestServer, name: &str, args: Value) -> String {
    let v = common::response_json(s.modern(1, "tools/call", json!({"name": name, "arguments": args}), opted_in()).await).await;
    v["result"]["taskId"].as_str().expect("task id").to_owned()
}

async fn listen(s: &TestServer, task_ids: Value, caps: Value) -> reqwest::Response {
    s.modern(7, "subscriptions/listen", json!({"notifications": {"taskIds": task_ids}}), caps).await
}

#[tokio::test]
async fn a_listener_hears_each_change_of_its_task_with_the_task_inlined() {
    let s = server().await;
    let id = create(&s, "confirm", json!({})).await;
    // Listen once it waits for input (listening earlier may or may not hear it park), then the
    // answer resumes and ends it: each change after that is heard.
    for _ in 0..100 {
        let v = common::response_json(s.modern(2, "tasks/get", json!({"taskId": id}), opted_in()).await).await;
        if v["result"]["status"] == "input_required" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut stream = SseReader::new(listen(&s, json!([id]), opted_in()).await);
    let (_, ack) = stream.next_message().await.expect("ack");
    assert_eq!(ack["params"]["notifications"]["taskIds"], json!([id]), "{ack}");
    let answer = json!({"taskId": id, "inputResponses": {"go": {"action": "accept", "content": {"ok": "y"}}}});
    common::response_json(s.modern(3, "tasks/update", answer, opted_in()).await).await;
    let mut statuses = Vec::new();
    while let Some((_, n)) = stream.next_message_within(Duration::from_secs(5)).await {
        assert_eq!(n["method"], "notifications/tasks", "{n}");
        assert_eq!(n["params"]["taskId"], id.as_str());
        assert_eq!(n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 7);
        statuses.push(n["params"]["status"].as_str().unwrap_or_default().to_owned());
        if n["params"]["status"] == "completed" {
            assert_eq!(n["params"]["result"]["content"][0]["text"], "answered accept", "{n}");
            break;
        }
    }
    // A change is sent as the task is when the fan-out reads it, so a resume that completes
    // before that read (a loaded machine) is heard once, as completed: never out of order.
    assert!(statuses == ["working", "completed"] || statuses == ["completed"], "{statuses:?}");
}

#[tokio::test]
async fn a_task_that_is_not_the_callers_is_left_out_of_the_acknowledgement() {
    let s = server().await;
    let mut stream = SseReader::new(listen(&s, json!(["no-such-task"]), opted_in()).await);
    let (_, ack) = stream.next_message().await.expect("ack");
    assert!(ack["params"]["notifications"].get("taskIds").is_none(), "{ack}");
}

#[tokio::test]
async fn naming_tasks_without_the_tasks_extension_gets_32021() {
    let s = server().await;
    let res = listen(&s, json!(["any"]), json!({})).await;
    let v = common::response_json(res).await;
    assert_eq!(v["error"]["code"], -32021, "{v}");
    assert_eq!(v["error"]["data"]["requiredCapabilities"]["extensions"]["io.modelcontextprotocol/tasks"], json!({}));
}

#[tokio::test]
async fn task_ids_that_are_not_strings_get_32602() {
    let s = server().await;
    let v = common::response_json(listen(&s, json!([1, 2]), opted_in()).await).await;
    assert_eq!(v["error"]["code"], -32602, "{v}");
}
