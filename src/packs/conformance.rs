//! The `conformance` pack: every fixture the official MCP conformance suite calls, for both
//! protocol eras (2025-11-25 sessions and stateless 2026-07-28 requests). Names, texts and
//! shapes follow the suite's reference `everything-server` literally, because the suite
//! checks them by name. Off by default: these are test fixtures, not product tools.

mod content;
mod diagnostics;
mod inputs;
mod interactive;
mod mrtr;
mod prompts;
mod resources;
mod tasks;

use std::sync::Arc;

use crate::server::McpServer;

/// A 1×1 PNG, the image every image fixture returns.
const TEST_IMAGE_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A minimal WAV file, the audio fixture's payload.
const TEST_AUDIO_BASE64: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

pub fn install(server: &Arc<McpServer>) -> Result<(), String> {
    server.tools.upsert_all(content::tools())?;
    server.tools.upsert_all(interactive::tools())?;
    server.tools.upsert_all(mrtr::tools())?;
    server.tools.upsert_all(tasks::tools())?;
    server.tools.upsert_all(diagnostics::tools(Arc::downgrade(server)))?;
    resources::install(server);
    prompts::install(server);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::LocalBus;
    use crate::config::Settings;

    /// Every fixture is a valid definition (names, descriptions, schemas) and installs.
    #[test]
    fn every_fixture_installs() {
        let server = McpServer::new(Arc::new(Settings::default()), Arc::new(LocalBus::default()));
        install(&server).expect("fixtures are valid");
        let tools = server.tools.snapshot();
        for name in [
            "test_simple_text",
            "test_tool_with_progress",
            "json_schema_2020_12_tool",
            "test_sampling",
            "test_elicitation_sep1330_enums",
            "test_input_required_result_multi_round",
            "test_missing_capability",
            "test_trigger_prompt_change",
            "slow_compute",
            "failing_job",
        ] {
            assert!(tools.get(name).is_some(), "{name} is registered");
        }
        assert!(server.resources.exists("test://template/123/data"));
        assert!(server.prompts.has_completions());
    }
}
