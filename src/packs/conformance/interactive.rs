//! Fixtures that ask the client for input while they run: sampling, elicitation (plain, with
//! SEP-1034 defaults, with SEP-1330 enum variants) and the SEP-1699 reconnection tool. The
//! 2025-11-25 suite calls them on a session, where the context sends real server-to-client
//! requests; on a 2026-07-28 request the same calls become MRTR round trips.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use super::inputs::{Elicited, ask_model, elicited, sampled_text};
use crate::protocol::CallToolResult;
use crate::tool::{Tool, ToolError};

pub(super) fn tools() -> Vec<Tool> {
    vec![sampling(), elicitation(), elicitation_defaults(), elicitation_enums(), reconnection()]
}

fn sampling() -> Tool {
    Tool::builder("test_sampling", "Tests server-initiated sampling (LLM completion request)")
        .input_schema(json!({
            "type": "object",
            "properties": { "prompt": { "type": "string", "description": "The prompt to send to the LLM" } },
            "required": ["prompt"]
        }))
        .handler(|ctx| async move {
            #[derive(Deserialize)]
            struct Args {
                prompt: String,
            }
            let Args { prompt } = ctx.args()?;
            let answer = ctx.sample("llm_response", ask_model(&prompt, 100)).await?;
            let text = sampled_text("llm_response", &answer)?;
            Ok(CallToolResult::text(format!("LLM response: {text}")))
        })
}

fn elicitation() -> Tool {
    Tool::builder("test_elicitation", "Tests server-initiated elicitation (user input request)")
        .input_schema(json!({
            "type": "object",
            "properties": { "message": { "type": "string", "description": "The message to show the user" } },
            "required": ["message"]
        }))
        .handler(|ctx| async move {
            #[derive(Deserialize)]
            struct Args {
                message: String,
            }
            let Args { message } = ctx.args()?;
            let params = json!({
                "message": message,
                "requestedSchema": {
                    "type": "object",
                    "properties": {
                        "username": { "type": "string", "description": "User's response" },
                        "email": { "type": "string", "description": "User's email address" }
                    },
                    "required": ["username", "email"]
                }
            });
            let answer = ctx.elicit("user_info", params).await?;
            Ok(CallToolResult::text(format!("User response: {}", describe(&elicited("user_info", &answer)?))))
        })
}

/// SEP-1034: a default for every primitive type.
fn elicitation_defaults() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "name": { "type": "string", "description": "User name", "default": "John Doe" },
            "age": { "type": "integer", "description": "User age", "default": 30 },
            "score": { "type": "number", "description": "User score", "default": 95.5 },
            "status": { "type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active" },
            "verified": { "type": "boolean", "description": "Verification status", "default": true }
        },
        "required": []
    });
    elicit_form(
        "test_elicitation_sep1034_defaults",
        "Tests elicitation with default values per SEP-1034",
        "Please review and update the form fields with defaults",
        schema,
    )
}

/// SEP-1330: untitled, titled and legacy single-select enums and both multi-select forms.
fn elicitation_enums() -> Tool {
    let titled = |prefix: &str| {
        let labels = ["First", "Second", "Third"];
        (1..=3)
            .zip(labels)
            .map(|(i, label)| json!({ "const": format!("value{i}"), "title": format!("{label} {prefix}") }))
            .collect::<Vec<_>>()
    };
    let schema = json!({
        "type": "object",
        "properties": {
            "untitledSingle": { "type": "string", "description": "Select one option", "enum": ["option1", "option2", "option3"] },
            "titledSingle": { "type": "string", "description": "Select one option with titles", "oneOf": titled("Option") },
            "legacyEnum": {
                "type": "string",
                "description": "Select one option (legacy)",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"]
            },
            "untitledMulti": {
                "type": "array",
                "description": "Select multiple options",
                "minItems": 1,
                "maxItems": 3,
                "items": { "type": "string", "enum": ["option1", "option2", "option3"] }
            },
            "titledMulti": {
                "type": "array",
                "description": "Select multiple options with titles",
                "minItems": 1,
                "maxItems": 3,
                "items": { "anyOf": titled("Choice") }
            }
        },
        "required": []
    });
    elicit_form(
        "test_elicitation_sep1330_enums",
        "Tests elicitation with enum schema improvements per SEP-1330",
        "Please select options from the enum fields",
        schema,
    )
}

/// A no-argument tool that shows one form and reports what came back.
fn elicit_form(name: &str, description: &str, message: &'static str, schema: Value) -> Tool {
    Tool::builder(name, description).input_schema(json!({ "type": "object", "properties": {} })).handler(move |ctx| {
        let params = json!({ "message": message, "requestedSchema": schema.clone() });
        async move {
            let answer = ctx.elicit("form", params).await?;
            Ok(CallToolResult::text(format!("Elicitation completed: {}", describe(&elicited("form", &answer)?))))
        }
    })
}

fn describe(answer: &Elicited) -> String {
    match answer {
        Elicited::Accepted(content) => format!("action=accept, content={}", Value::Object(content.clone())),
        Elicited::Refused(action) => format!("action={action}, content={{}}"),
    }
}

/// SEP-1699 expects the server to close the call's SSE stream mid-call and deliver the result
/// after the client reconnects; closing a stream is the transport's business, so this tool
/// only takes long enough for that to be observable.
fn reconnection() -> Tool {
    Tool::builder(
        "test_reconnection",
        "Tests SSE stream disconnection and client reconnection (SEP-1699). Server will close the stream mid-call and send the result after client reconnects.",
    )
    .input_schema(json!({ "type": "object", "properties": {} }))
    .read_only()
    .handler(|ctx| async move {
        // Close the connection mid-call; the result then waits in the stream's replay buffer
        // until the client resumes with Last-Event-ID.
        ctx.close_stream().await;
        ctx.sleep(Duration::from_millis(100)).await?;
        Ok::<_, ToolError>(CallToolResult::text(
            "Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure.",
        ))
    })
}
