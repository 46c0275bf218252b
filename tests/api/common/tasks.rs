//! Tools for the task tests: `slow` (may run as a task; sleeps `ms`, then says so),
//! `only_task` (runs only as one) and `broken` (may run as one; ends in a tool error), and the
//! client capabilities that opt a 2026-07-28 request into tasks.

use std::time::Duration;

use serde_json::{Value, json};
use toolgate::protocol::CallToolResult;
use toolgate::protocol::task::TaskSupport;
use toolgate::tool::{Tool, ToolError};

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
    vec![slow, only, broken]
}

/// Installs [`tools`] on a running server.
pub fn install(s: &super::TestServer) {
    for tool in tools() {
        s.state().server.tools.upsert(tool).expect("valid tool");
    }
}

/// `clientCapabilities` declaring the 2026-07-28 tasks extension.
pub fn opted_in() -> Value {
    json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
}
