//! Built-in tool packs, each switched on or off in `[tools.packs]`.

pub mod conformance;
pub mod examples;

use crate::config::ToolSettings;
use crate::server::McpServer;

/// Registers the enabled packs.
pub fn install(server: &McpServer, settings: &ToolSettings) -> Result<(), String> {
    if settings.packs.examples {
        examples::install(server, settings)?;
    }
    if settings.packs.conformance {
        conformance::install(server)?;
    }
    Ok(())
}
