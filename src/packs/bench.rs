//! The `bench` pack: the two helper tools the shared benchmark harness (`../shared/bench`,
//! `mcpload streams --fanout-rounds`) calls to measure `notifications/tools/list_changed`
//! fan-out the same way on every server it compares. Off by default: benchmark fixtures, not
//! product tools.
//!
//! The peers remember each registering session and notify them one by one. toolgate needs no
//! registry of sessions: every stream already hears every change on the event bus. So
//! `fanout_register` only acknowledges, and `fanout_notify` makes a real change to the tool list
//! (it adds or removes `fanout_marker`), which goes through the same registry swap, bus and
//! per-stream delivery as a hot reload or an admin API change.

use std::sync::Weak;

use serde_json::json;

use crate::protocol::CallToolResult;
use crate::server::McpServer;
use crate::tool::{Tool, ToolError};

/// The tool `fanout_notify` adds and removes in turn.
const MARKER_TOOL: &str = "fanout_marker";

/// `server` is weak: the registry owns these tools, so a strong reference would be a cycle.
pub fn install(server: Weak<McpServer>) -> Result<(), String> {
    let registry = server.upgrade().ok_or("the server is gone")?;
    registry.tools.upsert_all([register(), notify(server)])
}

fn builder(name: &str, description: &str) -> crate::tool::ToolBuilder {
    Tool::builder(name, description).input_schema(json!({ "type": "object", "properties": {}, "additionalProperties": false }))
}

fn register() -> Tool {
    builder("fanout_register", "Benchmark helper: acknowledges a listener (every stream already hears list changes)")
        .read_only()
        .handler(|_ctx| async { Ok(CallToolResult::text("registered")) })
}

fn notify(server: Weak<McpServer>) -> Tool {
    builder("fanout_notify", "Benchmark helper: changes the tool list, so every listener receives notifications/tools/list_changed")
        .handler(move |_ctx| {
            let server = server.upgrade();
            async move {
                let server = server.ok_or_else(|| ToolError::Failed("The server is shutting down".into()))?;
                server.tools.toggle(marker()).map_err(|e| ToolError::Internal(anyhow::anyhow!(e)))?;
                Ok(CallToolResult::text("notified"))
            }
        })
}

fn marker() -> Tool {
    builder(MARKER_TOOL, "Benchmark helper: added and removed by fanout_notify")
        .read_only()
        .handler(|_ctx| async { Ok(CallToolResult::text("marker")) })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::bus::{Change, EventBus, LocalBus};
    use crate::config::Settings;
    use crate::tool::ToolContext;
    use tokio_util::sync::CancellationToken;

    /// Each `fanout_notify` is a real tool-list change that the bus carries to listeners.
    #[tokio::test]
    async fn notify_publishes_a_tool_list_change_each_time() {
        let bus = Arc::new(LocalBus::default());
        let server = McpServer::new(Arc::new(Settings::default()), bus.clone());
        install(Arc::downgrade(&server)).expect("installs");
        let mut rx = bus.subscribe();
        for present_after in [true, false] {
            let tool = server.tools.snapshot().get("fanout_notify").cloned().expect("registered");
            let ctx = ToolContext::detached("fanout_notify", Default::default(), CancellationToken::new());
            tool.tool.invoke(ctx).await.expect("runs");
            assert_eq!(rx.try_recv().expect("published"), Change::ToolsListChanged);
            assert_eq!(server.tools.snapshot().get(MARKER_TOOL).is_some(), present_after);
        }
    }
}
