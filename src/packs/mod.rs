//! Built-in tool packs, each switched on or off in `[tools.packs]`.

pub mod bench;
pub mod conformance;
pub mod examples;

use std::sync::Arc;

use crate::config::ToolSettings;
use crate::server::McpServer;

/// Registers the enabled packs.
pub fn install(server: &Arc<McpServer>, settings: &ToolSettings) -> Result<(), String> {
    if settings.packs.examples {
        examples::install(server, settings)?;
    }
    if settings.packs.conformance {
        conformance::install(server)?;
    }
    if settings.packs.bench {
        bench::install(Arc::downgrade(server))?;
    }
    Ok(())
}
