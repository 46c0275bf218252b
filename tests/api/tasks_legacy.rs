//! Tasks in the 2025-11-25 era, with literal JSON-RPC over real HTTP: the capability, the
//! `execution.taskSupport` rules both ways, `CreateTaskResult`, `tasks/get`, `tasks/result`
//! (waits, then answers exactly what the call would have, error included, tagged with the
//! task), `tasks/cancel` (terminal tasks refused), TTLs bounded by the server, and tasks bound
//! to the session's principal only through their unguessable id without authentication.

use crate::common;

use std::time::Duration;

use common::TestServer;
use serde_json::{Value, json};
use toolgate::protocol::CallToolResult;
use toolgate::protocol::task::TaskSupport;
use toolgate::tool::Tool;

/// A server with three task tools: `slow` (optional; sleeps `ms`, then answers), `only_task`
/// (required) and `broken` (optional; a tool error).
async fn server() -> (TestServer, String) {
    let s = TestServer::with(|c| c.tasks.max_ttl_secs = 120).await;
    common::tasks::install(&s);
    let sid = s.initialize("2025-11-25").await;
    (s, sid)
}

async fn create(s: &TestServer, sid: &str, name: &str, args: Value, task: Value) -> Value {
    s.call(sid, 2, "tools/call", json!({"name": name, "arguments": args, "task": task})).await
}

#[tokio::test]
async fn initialize_declares_the_tasks_capability_for_tool_calls() {
    let s = TestServer::start().await;
    let body = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}});
    let v = common::response_json(s.post(&body.to_string(), &[]).await).await;
    assert_eq!(v["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"], json!({}));
    assert_eq!(v["result"]["capabilities"]["tasks"]["cancel"], json!({}));
    assert!(v["result"]["capabilities"]["tasks"].get("list").is_none(), "without authentication requestors cannot be told apart");
}

#[tokio::test]
async fn with_tasks_off_params_task_is_ignored() {
    let s = TestServer::with(|c| c.tasks.enabled = false).await;
    let sid = s.initialize("2025-11-25").await;
    let v = s.call(&sid, 2, "tools/call", json!({"name":"calculate_sum","arguments":{"a":1,"b":2},"task":{"ttl":60000}})).await;
    assert_eq!(v["result"]["content"][0]["text"], "3", "{v}");
}

#[tokio::test]
async fn tools_list_shows_each_tools_task_support() {
    let (s, sid) = server().await;
    let v = s.call(&sid, 2, "tools/list", json!({})).await;
    let support = |name: &str| {
        v["result"]["tools"].as_array().and_then(|t| t.iter().find(|t| t["name"] == name)).map(|t| t["execution"]["taskSupport"].clone())
    };
    assert_eq!(support("slow"), Some(json!("optional")));
    assert_eq!(support("only_task"), Some(json!("required")));
    assert_eq!(support("calculate_sum"), Some(json!("forbidden")));
}

#[tokio::test]
async fn a_forbidden_tool_called_with_a_task_gets_32601() {
    let (s, sid) = server().await;
    let v = create(&s, &sid, "calculate_sum", json!({"a":1,"b":2}), json!({})).await;
    assert_eq!(v["error"]["code"], -32601, "{v}");
}

#[tokio::test]
async fn a_required_tool_called_without_a_task_gets_32601() {
    let (s, sid) = server().await;
    let v = s.call(&sid, 2, "tools/call", json!({"name":"only_task"})).await;
    assert_eq!(v["error"]["code"], -32601, "{v}");
}

#[tokio::test]
async fn a_task_call_answers_a_working_task_with_timestamps_and_the_actual_ttl() {
    let (s, sid) = server().await;
    let v = create(&s, &sid, "slow", json!({"ms": 300}), json!({"ttl": 60000})).await;
    let task = &v["result"]["task"];
    assert!(task["taskId"].as_str().is_some_and(|id| id.len() >= 20), "{v}");
    assert_eq!(task["status"], "working");
    assert!(task["createdAt"].as_str().is_some_and(|t| t.ends_with('Z')) && task["lastUpdatedAt"].is_string());
    assert_eq!(task["ttl"], 60000);
    assert!(task["pollInterval"].as_u64().is_some());
}

#[tokio::test]
async fn a_ttl_above_the_maximum_is_shortened_and_reported() {
    let (s, sid) = server().await;
    let v = create(&s, &sid, "slow", json!({"ms": 0}), json!({"ttl": 86_400_000})).await;
    assert_eq!(v["result"]["task"]["ttl"], 120_000, "{v}");
}

#[tokio::test]
async fn tasks_result_waits_for_the_end_and_answers_the_calls_result_tagged_with_the_task() {
    let (s, sid) = server().await;
    let v = create(&s, &sid, "slow", json!({"ms": 300}), json!({})).await;
    let id = v["result"]["task"]["taskId"].as_str().expect("task id").to_owned();
    let r = s.call(&sid, 3, "tasks/result", json!({"taskId": id})).await;
    assert_eq!(r["result"]["content"][0]["text"], "done after 300 ms", "{r}");
    assert_eq!(r["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], id.as_str());
    let g = s.call(&sid, 4, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(g["result"]["status"], "completed", "{g}");
}

#[tokio::test]
async fn tasks_get_shows_a_running_task_as_working() {
    let (s, sid) = server().await;
    let v = create(&s, &sid, "slow", json!({"ms": 5000}), json!({})).await;
    let id = v["result"]["task"]["taskId"].as_str().expect("task id");
    let g = s.call(&sid, 3, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(g["result"]["status"], "working", "{g}");
    assert_eq!(g["result"]["taskId"], id);
}

#[tokio::test]
async fn a_tool_error_fails_the_task_with_a_status_message_and_the_result_is_the_tool_error() {
    let (s, sid) = server().await;
    let v = create(&s, &sid, "broken", json!({}), json!({})).await;
    let id = v["result"]["task"]["taskId"].as_str().expect("task id").to_owned();
    let r = s.call(&sid, 3, "tasks/result", json!({"taskId": id})).await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    let g = s.call(&sid, 4, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(g["result"]["status"], "failed");
    assert!(g["result"]["statusMessage"].as_str().is_some_and(|m| m.contains("disk is full")), "{g}");
}

#[tokio::test]
async fn cancel_moves_a_running_task_to_cancelled_and_it_stays_cancelled() {
    let (s, sid) = server().await;
    let v = create(&s, &sid, "slow", json!({"ms": 1000}), json!({})).await;
    let id = v["result"]["task"]["taskId"].as_str().expect("task id").to_owned();
    let c = s.call(&sid, 3, "tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(c["result"]["status"], "cancelled", "{c}");
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let g = s.call(&sid, 4, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(g["result"]["status"], "cancelled", "the finished run did not overwrite it: {g}");
}

#[tokio::test]
async fn cancelling_a_terminal_task_gets_32602() {
    let (s, sid) = server().await;
    let v = create(&s, &sid, "slow", json!({"ms": 0}), json!({})).await;
    let id = v["result"]["task"]["taskId"].as_str().expect("task id").to_owned();
    s.call(&sid, 3, "tasks/result", json!({"taskId": id})).await;
    let c = s.call(&sid, 4, "tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(c["error"]["code"], -32602, "{c}");
}

#[tokio::test]
async fn an_unknown_task_id_gets_32602_from_every_method() {
    let (s, sid) = server().await;
    for (i, method) in ["tasks/get", "tasks/result", "tasks/cancel"].into_iter().enumerate() {
        let v = s.call(&sid, 10 + i as i64, method, json!({"taskId": "nope"})).await;
        assert_eq!(v["error"]["code"], -32602, "{method}: {v}");
    }
}

#[tokio::test]
async fn tasks_list_needs_authentication() {
    let (s, sid) = server().await;
    assert_eq!(s.call(&sid, 2, "tasks/list", json!({})).await["error"]["code"], -32601);
}

#[tokio::test]
async fn a_finished_result_survives_a_restart_on_the_same_database() {
    let data = tempfile::tempdir().expect("data dir");
    let dir = data.path().to_owned();
    let setup = move |c: &mut toolgate::config::Settings| c.storage.data_dir = dir.clone();
    let s = TestServer::with(setup.clone()).await;
    let slow = Tool::builder("quick", "Answers at once.")
        .task_support(TaskSupport::Optional)
        .handler(|_| async { Ok(CallToolResult::text("kept")) });
    s.state().server.tools.upsert(slow.clone()).expect("valid");
    let sid = s.initialize("2025-11-25").await;
    let v = create(&s, &sid, "quick", json!({}), json!({})).await;
    let id = v["result"]["task"]["taskId"].as_str().expect("task id").to_owned();
    assert_eq!(s.call(&sid, 3, "tasks/result", json!({"taskId": id})).await["result"]["content"][0]["text"], "kept");
    let TestServer { running, .. } = s;
    running.stop().await.expect("stops");

    let again = TestServer::with(setup).await;
    let sid = again.initialize("2025-11-25").await;
    let r = again.call(&sid, 4, "tasks/result", json!({"taskId": id})).await;
    assert_eq!(r["result"]["content"][0]["text"], "kept", "{r}");
}

/// A declarative tool from a tools file, compiled as the server would.
fn declared(text: &str) -> toolgate::tool::Tool {
    let raws = toolgate::tooldef::parse_text(text, false, "tools.toml", std::path::Path::new(".")).expect("parses");
    let compiled =
        toolgate::tooldef::compile_all(&raws, &toolgate::config::Settings::default(), toolgate::tool::Origin::File, "tools.toml")
            .expect("compiles");
    compiled.into_iter().next().and_then(|c| c.tool).expect("a tool")
}

#[tokio::test]
async fn a_declarative_command_tool_runs_as_a_task_with_its_own_ttl() {
    let (s, sid) = server().await;
    let tool = declared(
        r#"
        [[tools]]
        name = "uname_task"
        description = "Prints the kernel name, as a task."
        task_support = "required"
        task_ttl_secs = 90
        [tools.command]
        program = "/bin/uname"
        args = ["-s"]
        "#,
    );
    s.state().server.tools.upsert(tool).expect("valid tool");
    let created = create(&s, &sid, "uname_task", json!({}), json!({})).await;
    assert_eq!(created["result"]["task"]["ttl"], 90_000, "the tool's own TTL: {created}");
    let id = created["result"]["task"]["taskId"].as_str().expect("task id");
    let result = s.call(&sid, 3, "tasks/result", json!({"taskId": id})).await;
    let text = result["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("Linux"), "the program's output: {result}");
}

#[test]
fn a_task_ttl_on_a_tool_that_never_runs_as_a_task_is_refused_naming_the_field() {
    let text = r#"
        [[tools]]
        name = "plain"
        description = "Echoes."
        task_ttl_secs = 90
        [tools.builtin]
        id = "echo"
        "#;
    let raws = toolgate::tooldef::parse_text(text, false, "tools.toml", std::path::Path::new(".")).expect("parses");
    let err = toolgate::tooldef::compile_all(&raws, &toolgate::config::Settings::default(), toolgate::tool::Origin::File, "tools.toml")
        .expect_err("refused");
    assert!(format!("{err:?}").contains("task_ttl_secs"), "{err:?}");
}
