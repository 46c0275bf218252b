//! Fixtures the 2026-07-28 `server-stateless` scenario uses to probe transport rules: a tool
//! that needs an undeclared capability (-32021), one that needs input (never a request on the
//! stream), one that logs only when `_meta` asks for it, one whose argument is mirrored in an
//! `Mcp-Param-*` header (SEP-2243), and two that change the tool and prompt lists so
//! `subscriptions/listen` streams have something to deliver.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use serde_json::json;

use super::inputs::form;
use super::prompts;
use crate::protocol::CallToolResult;
use crate::server::McpServer;
use crate::tool::{LogLevel, Tool, ToolError};

/// The tool `test_trigger_tool_change` adds and removes in turn.
const DYNAMIC_TOOL: &str = "test_dynamic_tool";

/// `server` is weak: the registry owns these tools, so a strong reference would be a cycle.
pub(super) fn tools(server: Weak<McpServer>) -> Vec<Tool> {
    vec![
        missing_capability(),
        streaming_elicitation(),
        logging(),
        custom_header(),
        trigger_tool_change(server.clone()),
        trigger_prompt_change(server),
    ]
}

fn builder(name: &str, description: &str) -> crate::tool::ToolBuilder {
    Tool::builder(name, description).input_schema(json!({ "type": "object", "properties": {} }))
}

fn missing_capability() -> Tool {
    builder("test_missing_capability", "Test tool requiring sampling").read_only().handler(|ctx| async move {
        if !ctx.client_caps().sampling {
            return Err(ToolError::MissingClientCapability("sampling"));
        }
        Ok(CallToolResult::text("Success"))
    })
}

/// Needs a confirmation when the client can give one; in the modern era that is an
/// `input_required` result, never a JSON-RPC request on the response stream.
fn streaming_elicitation() -> Tool {
    builder("test_streaming_elicitation", "Diagnostic tool validating response progress streams").read_only().handler(|ctx| async move {
        ctx.progress(0.0, Some(1.0), Some("Waiting for confirmation")).await;
        if ctx.client_caps().elicitation_form {
            ctx.elicit("stream_confirmation", form("Continue the streaming diagnostic?", "proceed", "boolean")).await?;
        }
        ctx.progress(1.0, Some(1.0), Some("Done")).await;
        Ok(CallToolResult::text("Streaming complete"))
    })
}

/// One info message, which the context drops unless the request asked for logs.
fn logging() -> Tool {
    builder("test_logging_tool", "Diagnostic logging validator tool").read_only().handler(|ctx| async move {
        ctx.log(LogLevel::Info, Some("toolgate"), json!("Diagnostic trace logging activated")).await;
        Ok(CallToolResult::text("Logging evaluated"))
    })
}

/// SEP-2243: `x-mcp-header` asks clients to repeat `region` in an `Mcp-Param-Region` header,
/// which the transport checks against the body before the tool runs.
fn custom_header() -> Tool {
    Tool::builder("test_custom_header_param", "Echoes a region that clients also send in the Mcp-Param-Region header (SEP-2243)")
        .input_schema(json!({
            "type": "object",
            "properties": { "region": { "type": "string", "description": "Region name, e.g. \"eu-west\"", "x-mcp-header": "Region" } },
            "required": ["region"]
        }))
        .read_only()
        .handler(|ctx| async move {
            let region = ctx.arguments().get("region").and_then(serde_json::Value::as_str).unwrap_or_default().to_owned();
            Ok(CallToolResult::text(format!("Region: {region}")))
        })
}

/// Adds `test_dynamic_tool` if absent and removes it otherwise: a real change, which the
/// registry announces to every listener.
fn trigger_tool_change(server: Weak<McpServer>) -> Tool {
    builder("test_trigger_tool_change", "Adds or removes the tool test_dynamic_tool, so listeners receive notifications/tools/list_changed")
        .handler(move |_ctx| {
            let server = server.upgrade();
            async move {
                let server = server.ok_or_else(|| ToolError::Failed("The server is shutting down".into()))?;
                server.tools.toggle(dynamic_tool()).map_err(|e| ToolError::Internal(anyhow::anyhow!(e)))?;
                Ok(CallToolResult::text("Mutation triggered"))
            }
        })
}

fn dynamic_tool() -> Tool {
    builder(DYNAMIC_TOOL, "A tool that test_trigger_tool_change adds and removes")
        .read_only()
        .handler(|_ctx| async { Ok(CallToolResult::text("This is the dynamic tool; call test_trigger_tool_change to remove it.")) })
}

/// Registers a new revision of `test_dynamic_prompt`, which the catalog announces to every
/// listener.
fn trigger_prompt_change(server: Weak<McpServer>) -> Tool {
    let revision = Arc::new(AtomicU64::new(0));
    builder(
        "test_trigger_prompt_change",
        "Re-registers the prompt test_dynamic_prompt, so listeners receive notifications/prompts/list_changed",
    )
    .handler(move |_ctx| {
        let server = server.upgrade();
        let revision = revision.fetch_add(1, Ordering::Relaxed) + 1;
        async move {
            let server = server.ok_or_else(|| ToolError::Failed("The server is shutting down".into()))?;
            server.prompts.add(prompts::dynamic(revision));
            Ok(CallToolResult::text("Mutation triggered"))
        }
    })
}
