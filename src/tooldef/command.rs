//! `command` tools: a fixed program run without a shell. (Being built: see the helper's task.)

use serde::Deserialize;

use super::{BuildCtx, FieldError, ResponseFormat};
use crate::protocol::CallToolResult;
use crate::tool::{ToolContext, ToolError};

/// `[tools.command]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandSpec {
    pub program: String,
}

/// `[tools.command]` server settings, operator-controlled.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CommandToolSettings {
    /// Programs (absolute paths) command tools may run; empty allows any.
    pub allowed_programs: Vec<std::path::PathBuf>,
}

/// A compiled `command` tool.
#[derive(Debug)]
pub struct CommandTool {}

impl CommandTool {
    pub fn build(_spec: &CommandSpec, _cx: &BuildCtx<'_>) -> Result<Self, Vec<FieldError>> {
        Err(vec![FieldError::new("command", "not built yet")])
    }

    pub async fn call(&self, _ctx: &ToolContext, _format: ResponseFormat) -> Result<CallToolResult, ToolError> {
        Err(ToolError::Failed("not built yet".into()))
    }
}
