//! `http` tools: one REST endpoint wrapped as a tool, SSRF-safe.
//!
//! A definition's `[tools.http]` table ([`HttpSpec`]) is compiled once by [`HttpTool::build`]:
//! the URL template, query, headers, body and response templates are parsed, every field they
//! use is checked against the input schema, and the tool's own HTTP client is made (rustls, no
//! proxy, the guarded resolver and redirect policy of `ssrf`). [`HttpTool::call`] then
//! expands the templates with the validated arguments, reads credentials (env or file, at
//! call time), sends with retries when that is safe, and maps the response.
//!
//! Files: `spec` (configuration shapes), `build` (validation), `call` (one call), `template`
//! (URL, text and body templates), `secret` (headers and credentials), `ssrf` (address
//! policy), `retry`, `response` (reading bodies, errors, Markdown), `render` (results),
//! `pagination`.

mod build;
mod call;
mod pagination;
mod render;
mod response;
mod retry;
mod secret;
mod spec;
mod ssrf;

// The same address policy guards upstream MCP servers (`src/upstream/http.rs`) and the
// authorization server's fetches of client metadata documents (`src/authserver/clients`).
pub(crate) use secret::{env_allowed, is_sensitive_name, is_under};
pub(crate) use ssrf::{AddressPolicy, GuardedResolver, Refusal, Unresolvable, find_cause, is_denied, redirect_policy};
// Public only so `fuzz/` can drive the URL template directly.
pub mod template;

use std::time::Duration;

pub use secret::{HeaderSpec, SecretSpec};
pub use spec::{BaseUrl, HttpMethod, HttpSpec, HttpToolSettings, PaginationSpec, QuerySpec, ResponseSpec};

use super::{BuildCtx, FieldError, ResponseFormat};
use crate::protocol::CallToolResult;
use crate::tool::{ToolContext, ToolError};

/// A compiled `http` tool. Cheap to share behind an `Arc`; its client pools connections.
#[derive(Debug)]
pub struct HttpTool {
    tool: String,
    method: HttpMethod,
    url: template::UrlTemplate,
    query: Vec<(String, template::TextTemplate)>,
    /// Query parameters read from secrets at call time (an API key in the query string).
    query_secrets: Vec<(String, secret::SecretSource, String)>,
    headers: Vec<secret::Header>,
    body: Option<template::BodyTemplate>,
    retry: retry::RetryPolicy,
    /// Time for one attempt, body included.
    attempt_timeout: Duration,
    max_response_bytes: u64,
    policy: ssrf::AddressPolicy,
    client: reqwest::Client,
    render: render::Renderer,
    pagination: Option<pagination::Pagination>,
}

impl HttpTool {
    /// Validates the whole spec against the input schema and the server's settings, and makes
    /// the tool's client. Every problem is returned, each with its field path (`http.url`,
    /// `http.headers.Authorization`, `http.body.title`).
    pub fn build(spec: &HttpSpec, cx: &BuildCtx<'_>) -> Result<Self, Vec<FieldError>> {
        build::compile(spec, cx)
    }

    /// Calls the endpoint with the call's (validated) arguments. Upstream failures, refusals
    /// and missing credentials are [`ToolError::Failed`] with a message for the model.
    pub async fn call(&self, ctx: &ToolContext, format: ResponseFormat) -> Result<CallToolResult, ToolError> {
        self.run(ctx, format).await
    }
}
