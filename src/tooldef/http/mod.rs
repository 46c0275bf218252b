//! `http` tools: one REST endpoint wrapped as a tool. (Being built: see the helper's task.)

use serde::Deserialize;

use super::{BuildCtx, FieldError, ResponseFormat};
use crate::protocol::CallToolResult;
use crate::tool::{ToolContext, ToolError};

/// `[tools.http]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpSpec {
    pub url: String,
}

/// `[tools.http]` server settings: what every `http` tool may reach. Operator-controlled, so
/// a definition (which the admin API may write) cannot widen them.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpToolSettings {
    /// Hosts (`name` or IP literal) exempt from the private-address deny list.
    pub allow_hosts: Vec<String>,
}

impl Default for HttpToolSettings {
    fn default() -> Self {
        Self { allow_hosts: Vec::new() }
    }
}

/// A compiled `http` tool.
#[derive(Debug)]
pub struct HttpTool {}

impl HttpTool {
    pub fn build(_spec: &HttpSpec, _cx: &BuildCtx<'_>) -> Result<Self, Vec<FieldError>> {
        Err(vec![FieldError::new("http", "not built yet")])
    }

    pub async fn call(&self, _ctx: &ToolContext, _format: ResponseFormat) -> Result<CallToolResult, ToolError> {
        Err(ToolError::Failed("not built yet".into()))
    }
}
