//! Fixtures of the suite's tasks scenarios (the 2026-07-28 tasks extension): `greet` runs
//! within its request; `slow_compute` may run as a task; `failing_job` runs only as one and
//! ends in a tool error; `protocol_error_job` fails with a JSON-RPC error; `confirm_delete`
//! and `multi_input` ask their client for input from inside the task (one question, then
//! two at once); `test_tool_with_task` asks within its request (MRTR) and then continues as
//! a task.

use std::time::Duration;

use serde_json::{Value, json};

use super::inputs::form;
use crate::protocol::CallToolResult;
use crate::protocol::task::TaskSupport;
use crate::tool::{InputRequest, Tool, ToolError};

/// Whether an `ElicitResult` accepted with `confirm: true`.
fn confirmed(answer: &Value) -> bool {
    answer.get("action").and_then(Value::as_str) == Some("accept")
        && answer.pointer("/content/confirm").and_then(Value::as_bool) == Some(true)
}

pub(super) fn tools() -> Vec<Tool> {
    vec![
        Tool::builder("greet", "Greets someone by name, at once.")
            .input_schema(json!({"type": "object", "properties": {"name": {"type": "string"}}, "additionalProperties": false}))
            .read_only()
            .handler(|ctx| async move {
                let name = ctx.arguments().get("name").and_then(Value::as_str).unwrap_or("world").to_owned();
                Ok(CallToolResult::text(format!("Hello, {name}!")))
            }),
        Tool::builder("slow_compute", "Computes for the given number of seconds, then reports its label.")
            .input_schema(json!({
                "type": "object",
                "properties": {"seconds": {"type": "number", "minimum": 0, "maximum": 600}, "label": {"type": "string"}},
                "additionalProperties": false
            }))
            .task_support(TaskSupport::Optional)
            .timeout(Duration::from_secs(700))
            .handler(|ctx| async move {
                let seconds = ctx.arguments().get("seconds").and_then(Value::as_f64).unwrap_or(0.0);
                let label = ctx.arguments().get("label").and_then(Value::as_str).unwrap_or("result").to_owned();
                ctx.sleep(Duration::from_secs_f64(seconds)).await?;
                Ok(CallToolResult::text(format!("Computed {label} after {seconds} seconds")))
            }),
        Tool::builder("failing_job", "Works for about a second, then fails with a tool error. Runs only as a task.")
            .task_support(TaskSupport::Required)
            .handler(|ctx| async move {
                ctx.sleep(Duration::from_secs(1)).await?;
                Err(ToolError::Failed("The job failed: the input could not be processed".into()))
            }),
        Tool::builder("protocol_error_job", "Fails with a protocol (JSON-RPC) error instead of a result.")
            .task_support(TaskSupport::Optional)
            .handler(|_| async { Err(ToolError::Internal(anyhow::anyhow!("protocol_error_job always fails"))) }),
        Tool::builder("confirm_delete", "Asks the user to confirm, then reports whether the file would be deleted. Runs as a task.")
            .input_schema(json!({"type": "object", "properties": {"filename": {"type": "string"}}, "required": ["filename"]}))
            .task_support(TaskSupport::Optional)
            .handler(|ctx| async move {
                let filename = ctx.arguments().get("filename").and_then(Value::as_str).unwrap_or_default().to_owned();
                let answer = ctx.elicit("confirm", form(&format!("Delete {filename}?"), "confirm", "boolean")).await?;
                let done = if confirmed(&answer) { "Deleted" } else { "Kept" };
                Ok(CallToolResult::text(format!("{done} {filename}")))
            }),
        Tool::builder("multi_input", "Asks two questions at once (a name and a confirmation), then reports both. Runs as a task.")
            .task_support(TaskSupport::Optional)
            .handler(|ctx| async move {
                let answers = ctx
                    .request_inputs(vec![
                        InputRequest::elicit("name", form("Your name?", "name", "string")),
                        InputRequest::elicit("confirm", form("Go ahead?", "confirm", "boolean")),
                    ])
                    .await?;
                let name = answers[0].pointer("/content/name").and_then(Value::as_str).unwrap_or("nobody");
                Ok(CallToolResult::text(format!("Hello {name}; confirmed: {}", confirmed(&answers[1]))))
            }),
        Tool::builder("test_tool_with_task", "Asks for your name within the request, then greets you from a task.")
            .task_support(TaskSupport::Required)
            .input_before_task()
            .handler(|ctx| async move {
                let answer = ctx.elicit("user_name", form("What is your name?", "name", "string")).await?;
                let name = answer.pointer("/content/name").and_then(Value::as_str).unwrap_or("stranger").to_owned();
                ctx.continue_as_task().await;
                ctx.sleep(Duration::from_millis(300)).await?;
                Ok(CallToolResult::text(format!("Hello, {name}! (from a task)")))
            }),
    ]
}
