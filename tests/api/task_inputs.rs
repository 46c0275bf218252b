//! Tasks that need their client's input, and the audit trail of a task, with literal JSON-RPC
//! over real HTTP. 2026-07-28: an `input_required` task shows its `inputRequests`;
//! `tasks/update` answers them (partially or wholly; unknown keys ignored); a tool may ask
//! within its request (MRTR) and then continue as a task. 2025-11-25: `tasks/result` relays
//! the task's question on its stream, tagged with the task, and the answer resumes it. Every
//! state change leaves one `task_change` audit record; a 2025-11-25 task tells its session of
//! its progress and status.

use crate::common;

use std::time::Duration;

use common::TestServer;
use common::tasks::opted_in;
use serde_json::{Value, json};
use toolgate::audit::{AuditFilter, EventKind, Outcome};
use toolgate::store::Store;

use common::SseReader;

async fn server() -> TestServer {
    let s = TestServer::with(|c| c.audit.enabled = true).await;
    common::tasks::install(&s);
    s
}

async fn rpc(s: &TestServer, method: &str, params: Value) -> Value {
    common::response_json(s.modern(1, method, params, opted_in()).await).await
}

async fn create(s: &TestServer, name: &str) -> String {
    let v = rpc(s, "tools/call", json!({"name": name})).await;
    assert_eq!(v["result"]["resultType"], "task", "{v}");
    v["result"]["taskId"].as_str().expect("task id").to_owned()
}

/// Polls `tasks/get` until `done` holds for the task.
async fn until(s: &TestServer, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..200 {
        let v = rpc(s, "tasks/get", json!({"taskId": id})).await;
        if done(&v["result"]) {
            return v["result"].clone();
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("task {id} never got there");
}

fn accept(field: &str, value: &str) -> Value {
    json!({"action": "accept", "content": {field: value}})
}

#[tokio::test]
async fn a_task_waiting_for_input_shows_its_input_requests() {
    let s = server().await;
    let id = create(&s, "confirm").await;
    let task = until(&s, &id, |t| t["status"] == "input_required").await;
    assert_eq!(task["inputRequests"]["go"]["method"], "elicitation/create", "{task}");
    assert_eq!(task["inputRequests"]["go"]["params"]["message"], "Go ahead?");
}

#[tokio::test]
async fn an_update_answering_every_request_resumes_the_task_to_its_result() {
    let s = server().await;
    let id = create(&s, "confirm").await;
    until(&s, &id, |t| t["status"] == "input_required").await;
    let ack = rpc(&s, "tasks/update", json!({"taskId": id, "inputResponses": {"go": {"action": "accept", "content": {"ok": "y"}}}})).await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    assert!(ack["result"].get("status").is_none(), "an ack, not the task: {ack}");
    let done = until(&s, &id, |t| t["status"] == "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "answered accept");
    assert!(done.get("inputRequests").is_none(), "{done}");
}

#[tokio::test]
async fn a_partial_update_keeps_the_task_waiting_on_the_rest() {
    let s = server().await;
    let id = create(&s, "two_questions").await;
    until(&s, &id, |t| t["status"] == "input_required").await;
    rpc(&s, "tasks/update", json!({"taskId": id, "inputResponses": {"first": accept("a", "one")}})).await;
    let task = rpc(&s, "tasks/get", json!({"taskId": id})).await["result"].clone();
    assert_eq!(task["status"], "input_required", "{task}");
    let pending: Vec<&String> = task["inputRequests"].as_object().expect("requests").keys().collect();
    assert_eq!(pending, ["second"]);
    rpc(&s, "tasks/update", json!({"taskId": id, "inputResponses": {"second": accept("b", "two")}})).await;
    let done = until(&s, &id, |t| t["status"] == "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "\"one\" and \"two\"");
}

#[tokio::test]
async fn an_update_of_a_key_never_requested_is_acknowledged_and_changes_nothing() {
    let s = server().await;
    let id = create(&s, "confirm").await;
    until(&s, &id, |t| t["status"] == "input_required").await;
    let ack = rpc(&s, "tasks/update", json!({"taskId": id, "inputResponses": {"nope": {"action": "accept"}}})).await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    let task = rpc(&s, "tasks/get", json!({"taskId": id})).await["result"].clone();
    assert_eq!(task["status"], "input_required");
    assert!(task["inputRequests"].get("go").is_some());
}

#[tokio::test]
async fn an_update_whose_answers_are_not_objects_gets_32602() {
    let s = server().await;
    let id = create(&s, "confirm").await;
    let v = rpc(&s, "tasks/update", json!({"taskId": id, "inputResponses": {"go": "yes"}})).await;
    assert_eq!(v["error"]["code"], -32602, "{v}");
    let v = rpc(&s, "tasks/update", json!({"taskId": id})).await;
    assert_eq!(v["error"]["code"], -32602, "{v}");
}

#[tokio::test]
async fn an_update_of_an_unknown_task_gets_32602() {
    let s = server().await;
    let v = rpc(&s, "tasks/update", json!({"taskId": "no-such-task", "inputResponses": {}})).await;
    assert_eq!(v["error"]["code"], -32602, "{v}");
}

#[tokio::test]
async fn a_tool_may_ask_within_its_request_and_then_continue_as_a_task() {
    let s = server().await;
    let first = rpc(&s, "tools/call", json!({"name": "ask_then_task"})).await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    assert!(first["result"].get("taskId").is_none());
    let second = rpc(&s, "tools/call", json!({"name": "ask_then_task", "inputResponses": {"name": accept("name", "Ada")}})).await;
    assert_eq!(second["result"]["resultType"], "task", "{second}");
    assert!(second["result"].get("requestState").is_none());
    let id = second["result"]["taskId"].as_str().expect("task id");
    let done = until(&s, id, |t| t["status"] == "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "hello Ada (task: true)");
}

#[tokio::test]
async fn tasks_result_relays_the_tasks_question_tagged_with_the_task_and_the_answer_resumes_it() {
    let s = server().await;
    let sid = s.initialize("2025-11-25").await;
    let created = s.call(&sid, 2, "tools/call", json!({"name": "confirm", "task": {"ttl": 60000}})).await;
    let id = created["result"]["task"]["taskId"].as_str().expect("task id").to_owned();
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/result", "params": {"taskId": id}}).to_string();
    let mut stream = SseReader::new(s.post(&body, &[("mcp-session-id", &sid)]).await);
    let (_, question) = stream.next_message().await.expect("the task's question");
    assert_eq!(question["method"], "elicitation/create", "{question}");
    assert_eq!(question["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], id.as_str());
    let status = s.call(&sid, 4, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(status["result"]["status"], "input_required", "{status}");
    let answer = json!({"jsonrpc": "2.0", "id": question["id"], "result": {"action": "decline"}}).to_string();
    assert_eq!(s.post(&answer, &[("mcp-session-id", &sid)]).await.status(), 202);
    let (_, result) = stream.next_message().await.expect("the task's result");
    assert_eq!(result["id"], 3);
    assert_eq!(result["result"]["content"][0]["text"], "answered decline", "{result}");
    assert_eq!(result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], id.as_str());
}

#[tokio::test]
async fn each_state_change_of_a_task_leaves_one_audit_record() {
    let s = server().await;
    let done = create(&s, "slow").await;
    until(&s, &done, |t| t["status"] == "completed").await;
    let cancelled = rpc(&s, "tools/call", json!({"name": "slow", "arguments": {"ms": 30_000}})).await["result"]["taskId"]
        .as_str()
        .expect("task id")
        .to_owned();
    rpc(&s, "tasks/cancel", json!({"taskId": cancelled})).await;
    rpc(&s, "tasks/cancel", json!({"taskId": cancelled})).await;
    let settings = s.state().settings.storage.clone();
    s.running.stop().await.expect("stopped; the audit log is flushed");

    let store = Store::connect(&settings).await.expect("store");
    let records = toolgate::audit::query(&store, &AuditFilter::default()).await.expect("query");
    let changes = |id: &str| -> Vec<(String, Outcome)> {
        let mut found: Vec<_> = records
            .iter()
            .filter(|r| r.kind == EventKind::TaskChange && r.detail.as_deref().is_some_and(|d| d.contains(id)))
            .map(|r| (r.detail.clone().unwrap_or_default(), r.outcome))
            .collect();
        found.sort_by(|a, b| a.0.cmp(&b.0));
        found
    };
    assert_eq!(changes(&done), [(format!("task {done} completed"), Outcome::Ok), (format!("task {done} created"), Outcome::Ok)]);
    assert_eq!(
        changes(&cancelled),
        [(format!("task {cancelled} cancelled by the client"), Outcome::Cancelled), (format!("task {cancelled} created"), Outcome::Ok)]
    );
    assert!(records.iter().all(|r| r.kind != EventKind::ToolCall || r.tool.as_deref() != Some("slow")), "no plain tool_call record");
}

#[tokio::test]
async fn a_2025_11_25_task_tells_its_session_its_progress_tagged_with_it_and_each_status() {
    let s = server().await;
    let sid = s.initialize("2025-11-25").await;
    let mut stream = SseReader::new(common::open_get(&s, &sid, None).await);
    stream.next_event().await.expect("priming event");
    let params = json!({"name": "steps", "task": {"ttl": 60000}, "_meta": {"progressToken": "p1"}});
    let created = s.call(&sid, 2, "tools/call", params).await;
    let id = created["result"]["task"]["taskId"].as_str().expect("task id").to_owned();
    let mut seen = Vec::new();
    while let Some((_, message)) = stream.next_message().await {
        let done = message["method"] == "notifications/tasks/status";
        seen.push(message);
        if done {
            break;
        }
    }
    let progress: Vec<&Value> = seen.iter().filter(|m| m["method"] == "notifications/progress").collect();
    assert_eq!(progress.len(), 2, "{seen:?}");
    for p in progress {
        assert_eq!(p["params"]["progressToken"], "p1");
        assert_eq!(p["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], id.as_str());
    }
    let status = seen.last().expect("a status notification");
    assert_eq!(status["params"]["taskId"], id.as_str(), "{status}");
    assert_eq!(status["params"]["status"], "completed");
    assert!(status["params"].get("_meta").is_none(), "status notifications carry no related-task meta");
}
