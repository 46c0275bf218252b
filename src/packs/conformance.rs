//! The `conformance` pack: every fixture the official MCP conformance suite calls.

use crate::server::McpServer;

pub fn install(_server: &McpServer) -> Result<(), String> {
    Ok(())
}
