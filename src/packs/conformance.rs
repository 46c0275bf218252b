//! The `conformance` pack: every fixture the official MCP conformance suite calls.

use std::sync::Arc;

use crate::server::McpServer;

pub fn install(_server: &Arc<McpServer>) -> Result<(), String> {
    Ok(())
}
