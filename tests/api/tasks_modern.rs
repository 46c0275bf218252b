//! Tasks in the 2026-07-28 era (the `io.modelcontextprotocol/tasks` extension), with literal
//! JSON-RPC over real HTTP: advertised in `server/discover`, opted into per request, decided
//! by the server (never for a client that did not opt in; -32021 for a task-only tool), the
//! flat `CreateTaskResult`, `tasks/get` with the result or error inlined, `tasks/update` and
//! `tasks/cancel` acknowledged, `tasks/result` and `tasks/list` gone, `Mcp-Name` checked.

use crate::common;

use std::time::Duration;

use common::TestServer;
use common::tasks::opted_in;
use serde_json::{Value, json};
use toolgate::protocol::CallToolResult;
use toolgate::protocol::task::TaskSupport;
use toolgate::tool::Tool;

async fn server() -> TestServer {
    let s = TestServer::start().await;
    common::tasks::install(&s);
    s
}

async fn rpc(s: &TestServer, method: &str, params: Value, caps: Value) -> (u16, Value) {
    let res = s.modern(1, method, params, caps).await;
    let status = res.status().as_u16();
    (status, common::response_json(res).await)
}

async fn create(s: &TestServer, name: &str, args: Value) -> String {
    let (_, v) = rpc(s, "tools/call", json!({"name": name, "arguments": args}), opted_in()).await;
    assert_eq!(v["result"]["resultType"], "task", "{v}");
    v["result"]["taskId"].as_str().expect("task id").to_owned()
}

/// Polls `tasks/get` until the task is terminal.
async fn settled(s: &TestServer, id: &str) -> Value {
    for _ in 0..100 {
        let (_, v) = rpc(s, "tasks/get", json!({"taskId": id}), opted_in()).await;
        if !matches!(v["result"]["status"].as_str(), Some("working" | "input_required")) {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("task {id} did not settle");
}

#[tokio::test]
async fn discover_advertises_the_extension_and_not_the_legacy_capability() {
    let s = server().await;
    let (_, v) = rpc(&s, "server/discover", json!({}), json!({})).await;
    assert_eq!(v["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"], json!({}), "{v}");
    assert!(v["result"]["capabilities"].get("tasks").is_none());
}

#[tokio::test]
async fn a_client_that_did_not_opt_in_never_gets_a_task() {
    let s = server().await;
    let (_, v) = rpc(&s, "tools/call", json!({"name":"slow","arguments":{"ms":10},"task":{"ttl":60000}}), json!({})).await;
    assert_eq!(v["result"]["resultType"], "complete", "{v}");
    assert_eq!(v["result"]["content"][0]["text"], "done after 10 ms");
    assert!(v["result"].get("taskId").is_none());
}

#[tokio::test]
async fn a_task_only_tool_called_without_the_extension_gets_32021_naming_it() {
    let s = server().await;
    let (status, v) = rpc(&s, "tools/call", json!({"name":"only_task"}), json!({})).await;
    assert_eq!(status, 400);
    assert_eq!(v["error"]["code"], -32021, "{v}");
    assert_eq!(v["error"]["data"]["requiredCapabilities"]["extensions"]["io.modelcontextprotocol/tasks"], json!({}));
}

#[tokio::test]
async fn an_opted_in_call_of_a_task_tool_answers_a_flat_create_task_result() {
    let s = server().await;
    let (_, v) = rpc(&s, "tools/call", json!({"name":"slow","arguments":{"ms":500}}), opted_in()).await;
    let r = &v["result"];
    assert_eq!(r["resultType"], "task", "{v}");
    assert_eq!(r["status"], "working");
    assert!(r["ttlMs"].as_u64().is_some_and(|t| t > 0) && r["pollIntervalMs"].as_u64().is_some_and(|p| p > 0));
    assert!(r["createdAt"].is_string() && r["lastUpdatedAt"].is_string());
    for absent in ["task", "result", "error", "inputRequests", "requestState", "ttl", "pollInterval"] {
        assert!(r.get(absent).is_none(), "{absent} in {v}");
    }
}

#[tokio::test]
async fn a_created_task_is_found_by_the_very_next_get() {
    let s = server().await;
    let id = create(&s, "slow", json!({"ms": 500})).await;
    let (_, v) = rpc(&s, "tasks/get", json!({"taskId": id}), opted_in()).await;
    assert_eq!(v["result"]["status"], "working", "{v}");
    assert_eq!(v["result"]["resultType"], "complete");
}

#[tokio::test]
async fn a_completed_task_inlines_its_result() {
    let s = server().await;
    let id = create(&s, "slow", json!({"ms": 50})).await;
    let v = settled(&s, &id).await;
    assert_eq!(v["result"]["status"], "completed", "{v}");
    assert_eq!(v["result"]["result"]["content"][0]["text"], "done after 50 ms");
    assert!(v["result"]["result"]["_meta"].get("io.modelcontextprotocol/related-task").is_none());
}

#[tokio::test]
async fn a_tool_error_completes_the_task_with_is_error() {
    let s = server().await;
    let id = create(&s, "broken", json!({})).await;
    let v = settled(&s, &id).await;
    assert_eq!(v["result"]["status"], "completed", "{v}");
    assert_eq!(v["result"]["result"]["isError"], true);
}

#[tokio::test]
async fn cancel_is_acknowledged_and_the_task_ends_cancelled() {
    let s = server().await;
    let id = create(&s, "slow", json!({"ms": 5000})).await;
    let (_, ack) = rpc(&s, "tasks/cancel", json!({"taskId": id}), opted_in()).await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    assert!(ack["result"].get("status").is_none());
    assert_eq!(settled(&s, &id).await["result"]["status"], "cancelled");
}

#[tokio::test]
async fn cancelling_a_terminal_task_is_acknowledged_again() {
    let s = server().await;
    let id = create(&s, "slow", json!({"ms": 0})).await;
    settled(&s, &id).await;
    let (_, ack) = rpc(&s, "tasks/cancel", json!({"taskId": id}), opted_in()).await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    assert_eq!(settled(&s, &id).await["result"]["status"], "completed");
}

#[tokio::test]
async fn an_update_with_keys_never_requested_is_acknowledged_and_changes_nothing() {
    let s = server().await;
    let id = create(&s, "slow", json!({"ms": 300})).await;
    let (_, ack) = rpc(&s, "tasks/update", json!({"taskId": id, "inputResponses": {"unknown-key": {"ignored": true}}}), opted_in()).await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    assert_eq!(settled(&s, &id).await["result"]["status"], "completed");
}

#[tokio::test]
async fn an_unknown_task_gets_32602() {
    let s = server().await;
    for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
        let (_, v) = rpc(&s, method, json!({"taskId": "nope", "inputResponses": {}}), opted_in()).await;
        assert_eq!(v["error"]["code"], -32602, "{method}: {v}");
    }
}

#[tokio::test]
async fn task_methods_need_the_extension_before_the_id_is_looked_at() {
    let s = server().await;
    let (status, v) = rpc(&s, "tasks/get", json!({"taskId": "gate-test"}), json!({})).await;
    assert_eq!((status, v["error"]["code"].clone()), (400, json!(-32021)), "{v}");
}

#[tokio::test]
async fn tasks_result_and_tasks_list_do_not_exist_in_this_era() {
    let s = server().await;
    for method in ["tasks/result", "tasks/list"] {
        let (status, v) = rpc(&s, method, json!({"taskId": "x"}), opted_in()).await;
        assert_eq!((status, v["error"]["code"].clone()), (404, json!(-32601)), "{method}: {v}");
    }
}

#[tokio::test]
async fn a_mcp_name_that_is_not_the_task_id_gets_32020() {
    let s = server().await;
    let id = create(&s, "slow", json!({"ms": 0})).await;
    let meta = json!({"io.modelcontextprotocol/protocolVersion": common::MODERN, "io.modelcontextprotocol/clientCapabilities": opted_in()});
    let body = json!({"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId": id, "_meta": meta}});
    let res =
        s.post(&body.to_string(), &[("mcp-protocol-version", common::MODERN), ("mcp-method", "tasks/get"), ("mcp-name", "another")]).await;
    assert_eq!(res.status(), 400);
    assert_eq!(common::response_json(res).await["error"]["code"], -32020);
}

#[tokio::test]
async fn the_running_task_cap_counts_per_client_address_without_authentication() {
    let s = TestServer::with(|c| {
        c.tasks.max_running_per_client = 1;
        c.server.trusted_proxies = vec!["127.0.0.1/32".into()];
    })
    .await;
    let slow = Tool::builder("slow", "Sleeps.").task_support(TaskSupport::Optional).handler(|ctx| async move {
        ctx.sleep(Duration::from_secs(30)).await?;
        Ok(CallToolResult::text("done"))
    });
    s.state().server.tools.upsert(slow).expect("valid tool");
    let call_as = |client: &'static str| {
        let meta =
            json!({"io.modelcontextprotocol/protocolVersion": common::MODERN, "io.modelcontextprotocol/clientCapabilities": opted_in()});
        let body = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","_meta": meta}}).to_string();
        let s = &s;
        async move {
            let headers =
                [("mcp-protocol-version", common::MODERN), ("mcp-method", "tools/call"), ("mcp-name", "slow"), ("x-forwarded-for", client)];
            common::response_json(s.post(&body, &headers).await).await
        }
    };
    assert_eq!(call_as("10.0.0.1").await["result"]["resultType"], "task");
    let refused = call_as("10.0.0.1").await;
    assert_eq!(refused["error"]["data"]["limit"], "tasks", "{refused}");
    assert!(refused["error"]["message"].as_str().is_some_and(|m| m.contains("tasks.max_running_per_client")));
    assert_eq!(call_as("10.0.0.2").await["result"]["resultType"], "task", "another client is not blocked");
}

#[tokio::test]
async fn polling_one_task_faster_than_its_poll_interval_is_refused_after_the_burst() {
    let s = TestServer::with(|c| {
        c.tasks.poll_interval_ms = 60_000;
        c.tasks.poll_burst = 3;
    })
    .await;
    common::tasks::install(&s);
    let id = create(&s, "slow", json!({"ms": 30_000})).await;
    for _ in 0..3 {
        let (_, v) = rpc(&s, "tasks/get", json!({"taskId": id}), opted_in()).await;
        assert_eq!(v["result"]["status"], "working", "{v}");
    }
    let (_, refused) = rpc(&s, "tasks/get", json!({"taskId": id}), opted_in()).await;
    assert_eq!(refused["error"]["data"]["limit"], "task_polls", "{refused}");
    assert!(refused["error"]["data"]["retryAfterMs"].as_u64().is_some_and(|ms| ms > 1000), "{refused}");
    // Another task has its own allowance.
    let other = create(&s, "slow", json!({"ms": 30_000})).await;
    let (_, v) = rpc(&s, "tasks/get", json!({"taskId": other}), opted_in()).await;
    assert_eq!(v["result"]["status"], "working", "{v}");
}

#[tokio::test]
async fn a_client_at_its_stored_task_cap_is_refused_a_new_task_naming_the_setting() {
    let s = TestServer::with(|c| {
        c.tasks.max_running_per_client = 2;
        c.tasks.max_stored_per_client = 2;
    })
    .await;
    common::tasks::install(&s);
    for _ in 0..2 {
        let id = create(&s, "slow", json!({"ms": 0})).await;
        settled(&s, &id).await;
    }
    let (_, refused) = rpc(&s, "tools/call", json!({"name": "slow", "arguments": {"ms": 0}}), opted_in()).await;
    assert_eq!(refused["error"]["data"]["limit"], "stored_tasks", "{refused}");
    assert!(refused["error"]["message"].as_str().is_some_and(|m| m.contains("tasks.max_stored_per_client")));
}
