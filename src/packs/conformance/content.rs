//! Fixtures that return fixed content (text, image, audio, embedded resources, an error),
//! report progress or logs while they run, or carry the JSON Schema 2020-12 input schema.
//! They behave the same in both eras; the transport decides how notifications travel.

use std::time::Duration;

use serde_json::{Value, json};

use super::{TEST_AUDIO_BASE64, TEST_IMAGE_BASE64};
use crate::protocol::content::ResourceContents;
use crate::protocol::{CallToolResult, Content};
use crate::tool::{LogLevel, Tool, ToolError};

/// The pause between progress or log steps; the suite expects notifications spread out in time.
const STEP: Duration = Duration::from_millis(50);

pub(super) fn tools() -> Vec<Tool> {
    vec![
        fixed("test_simple_text", "Tests simple text content response", || {
            vec![Content::text("This is a simple text response for testing.")]
        }),
        fixed("test_image_content", "Tests image content response", || vec![Content::image(TEST_IMAGE_BASE64, "image/png")]),
        fixed("test_audio_content", "Tests audio content response", || vec![Content::audio(TEST_AUDIO_BASE64, "audio/wav")]),
        fixed("test_embedded_resource", "Tests embedded resource content response", || {
            vec![Content::resource(ResourceContents::text(
                "test://embedded-resource",
                "text/plain",
                "This is an embedded resource content.",
            ))]
        }),
        fixed("test_multiple_content_types", "Tests response with multiple content types (text, image, resource)", || {
            vec![
                Content::text("Multiple content types test:"),
                Content::image(TEST_IMAGE_BASE64, "image/png"),
                Content::resource(ResourceContents::text(
                    "test://mixed-content-resource",
                    "application/json",
                    r#"{"test":"data","value":123}"#,
                )),
            ]
        }),
        error_handling(),
        with_logging(),
        with_progress(),
        json_schema_2020_12(),
    ]
}

/// The schema every argument-less fixture declares.
fn no_arguments() -> Value {
    json!({ "type": "object", "properties": {} })
}

fn fixed(name: &str, description: &str, content: fn() -> Vec<Content>) -> Tool {
    Tool::builder(name, description)
        .input_schema(no_arguments())
        .read_only()
        .handler(move |_ctx| async move { Ok::<_, ToolError>(CallToolResult::new(content())) })
}

/// A tool-execution error (`isError: true`), not a JSON-RPC error: the model must see it.
fn error_handling() -> Tool {
    Tool::builder("test_error_handling", "Tests error response handling")
        .input_schema(no_arguments())
        .read_only()
        .handler(|_ctx| async { Ok(CallToolResult::error("This tool intentionally returns an error for testing")) })
}

/// Three info messages 50 ms apart. Legacy sessions get them at the `logging/setLevel`
/// threshold; modern requests only when `_meta` named a log level (the context filters).
fn with_logging() -> Tool {
    Tool::builder("test_tool_with_logging", "Tests tool that emits log messages during execution")
        .input_schema(no_arguments())
        .read_only()
        .handler(|ctx| async move {
            let steps = ["Tool execution started", "Tool processing data", "Tool execution completed"];
            for (i, message) in steps.into_iter().enumerate() {
                if i > 0 {
                    ctx.sleep(STEP).await?;
                }
                ctx.log(LogLevel::Info, Some("toolgate"), json!(message)).await;
            }
            Ok(CallToolResult::text("Tool with logging executed successfully"))
        })
}

/// Progress 0, 50 and 100 of 100, 50 ms apart (sent only when the caller gave a token).
fn with_progress() -> Tool {
    Tool::builder("test_tool_with_progress", "Tests tool that reports progress notifications")
        .input_schema(no_arguments())
        .read_only()
        .handler(|ctx| async move {
            for (i, step) in [0u32, 50, 100].into_iter().enumerate() {
                if i > 0 {
                    ctx.sleep(STEP).await?;
                }
                ctx.progress(f64::from(step), Some(100.0), Some(&format!("Completed step {step} of 100"))).await;
            }
            // Like the reference server, echo the token the progress was reported against.
            Ok(CallToolResult::text(match ctx.progress_token() {
                Some(serde_json::Value::String(token)) => token.clone(),
                Some(token) => token.to_string(),
                None => "Completed without progress token".to_owned(),
            }))
        })
}

/// SEP-1613/SEP-2106: the listed schema must keep every 2020-12 keyword verbatim.
fn json_schema_2020_12() -> Tool {
    Tool::builder("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)")
        .input_schema(json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {
                "address": {
                    "$anchor": "addressDef",
                    "type": "object",
                    "properties": { "street": { "type": "string" }, "city": { "type": "string" } }
                }
            },
            "properties": {
                "name": { "type": "string" },
                "address": { "$ref": "#/$defs/address" },
                "contactMethod": { "type": "string", "enum": ["phone", "email"] },
                "phone": { "type": "string" },
                "email": { "type": "string" }
            },
            "allOf": [{ "anyOf": [{ "required": ["phone"] }, { "required": ["email"] }] }],
            "if": { "properties": { "contactMethod": { "const": "phone" } }, "required": ["contactMethod"] },
            "then": { "required": ["phone"] },
            "else": { "required": ["email"] },
            "additionalProperties": false
        }))
        .read_only()
        .handler(|ctx| async move {
            let args = Value::Object(ctx.arguments().clone());
            Ok(CallToolResult::text(format!("JSON Schema 2020-12 tool called with: {args}")))
        })
}
