//! Tools for the task tests: `slow` (may run as a task; sleeps `ms`, then says so),
//! `only_task` (runs only as one), `broken` (may run as one; ends in a tool error), `confirm`
//! (asks one question), `two_questions` (asks two at once), `ask_then_task` (asks within its
//! request, then continues as a task), `steps` (reports progress twice), and the client capabilities that opt a 2026-07-28
//! request into tasks.

use std::time::Duration;

use serde_json::{Value, json};
use toolgate::protocol::CallToolResult;
use toolgate::protocol::task::TaskSupport;
use toolgate::tool::{InputRequest, Tool, ToolError};

pub fn tools() -> Vec<Tool> {
    let slow = Tool::builder("slow", "Sleeps for ms milliseconds, then says done.")
        .input_schema(json!({"type":"object","properties":{"ms":{"type":"integer"}},"additionalProperties":false}))
        .task_support(TaskSupport::Optional)
        .handler(|ctx| async move {
            let ms = ctx.arguments().get("ms").and_then(Value::as_u64).unwrap_or(0);
            ctx.sleep(Duration::from_millis(ms)).await?;
            Ok(CallToolResult::text(format!("done after {ms} ms")))
        });
    let only = Tool::builder("only_task", "Runs only as a task.")
        .task_support(TaskSupport::Required)
        .handler(|_| async { Ok(CallToolResult::text("ok")) });
    let broken = Tool::builder("broken", "Fails.")
        .task_support(TaskSupport::Optional)
        .handler(|_| async { Err(ToolError::Failed("the disk is full".into())) });
    let confirm = Tool::builder("confirm", "Asks whether to go ahead.").task_support(TaskSupport::Optional).handler(|ctx| async move {
        let answer = ctx.elicit("go", form("Go ahead?", "ok")).await?;
        Ok(CallToolResult::text(format!("answered {}", answer["action"].as_str().unwrap_or("?"))))
    });
    let two = Tool::builder("two_questions", "Asks two questions at once.").task_support(TaskSupport::Optional).handler(|ctx| async move {
        let answers = ctx
            .request_inputs(vec![InputRequest::elicit("first", form("First?", "a")), InputRequest::elicit("second", form("Second?", "b"))])
            .await?;
        Ok(CallToolResult::text(format!("{} and {}", answers[0]["content"]["a"], answers[1]["content"]["b"])))
    });
    let escalating = Tool::builder("ask_then_task", "Asks for a name within the request, then goes on as a task.")
        .task_support(TaskSupport::Required)
        .input_before_task()
        .handler(|ctx| async move {
            let answer = ctx.elicit("name", form("Name?", "name")).await?;
            let became = ctx.continue_as_task().await;
            ctx.sleep(Duration::from_millis(100)).await?;
            Ok(CallToolResult::text(format!("hello {} (task: {became})", answer["content"]["name"].as_str().unwrap_or("?"))))
        });
    let steps =
        Tool::builder("steps", "Reports progress twice, then finishes.").task_support(TaskSupport::Optional).handler(|ctx| async move {
            ctx.progress(1.0, Some(2.0), None).await;
            ctx.progress(2.0, Some(2.0), None).await;
            Ok(CallToolResult::text("stepped"))
        });
    vec![slow, only, broken, confirm, two, escalating, steps]
}

/// `elicitation/create` params for a form with one string field.
fn form(message: &str, field: &str) -> Value {
    json!({"message": message, "requestedSchema": {"type": "object", "properties": {field: {"type": "string"}}}})
}

/// Installs [`tools`] on a running server.
pub fn install(s: &super::TestServer) {
    for tool in tools() {
        s.state().server.tools.upsert(tool).expect("valid tool");
    }
}

/// `clientCapabilities` declaring the 2026-07-28 tasks extension (and elicitation, so tasks
/// may ask their client).
pub fn opted_in() -> Value {
    json!({"elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}})
}

/// A 2026-07-28 request as `bearer` (none: unauthenticated), answered as JSON.
pub async fn rpc_as(s: &super::TestServer, bearer: Option<&str>, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": super::MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": opted_in(),
    });
    let name = params.get("name").or_else(|| params.get("taskId")).and_then(Value::as_str).unwrap_or_default().to_owned();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let mut headers = vec![("mcp-protocol-version", super::MODERN), ("mcp-method", method), ("mcp-name", name.as_str())];
    let auth;
    if let Some(token) = bearer {
        auth = format!("Bearer {token}");
        headers.push(("authorization", &auth));
    }
    super::response_json(s.post(&body, &headers).await).await
}
