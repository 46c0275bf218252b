//! `[tools.command]`: what declarative `command` tools may run.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Server-wide `[tools.command]`: operator-controlled, so a definition (which the admin API may
/// write) cannot widen it.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct CommandToolSettings {
    /// Programs (absolute paths) command tools may run; empty allows any.
    pub allowed_programs: Vec<PathBuf>,
    /// Bytes of stdout and of stderr kept per call, each (beyond it output is read and
    /// discarded, and the result says it was truncated). A definition may lower it. 256 KiB.
    pub max_output_bytes: usize,
    /// After a timeout or cancellation, milliseconds between SIGTERM and SIGKILL to the
    /// command's process group (0: SIGKILL at once). 1000.
    pub kill_grace_ms: u64,
}

impl Default for CommandToolSettings {
    fn default() -> Self {
        Self { allowed_programs: Vec::new(), max_output_bytes: 256 * 1024, kill_grace_ms: 1000 }
    }
}
