//! One call of an `http` tool: build the request from the arguments, read the credentials,
//! send with retries (each one reported as progress to a caller that asked for it), and turn
//! the response (or the failure) into a result; a paginated tool reports the page it read as
//! progress too.

use bytes::Bytes;
use http::HeaderMap;
use http::header::CONTENT_TYPE;
use serde_json::{Map, Value};
use url::Url;

use super::HttpTool;
use super::render::{Call, head_result};
use super::response::{Body, ReadError, read_capped, read_prefix, upstream_error};
use super::retry::{is_retryable_status, retry_after};
use super::secret::{self, Redactor};
use super::spec::HttpMethod;
use super::ssrf::{Refusal, Unresolvable, find_cause};
use super::template::scalar_text;
use crate::protocol::CallToolResult;
use crate::tool::{ToolContext, ToolError};
use crate::tooldef::ResponseFormat;

/// What the model sees when a credential is missing: the operator must act, not the model.
const MISCONFIGURED: &str = "The tool is misconfigured on the server: a credential is unavailable; tell the operator.";
/// Bytes of an error response read for its excerpt.
const ERROR_BODY_BYTES: usize = 8 * 1024;

impl HttpTool {
    pub(super) async fn run(&self, ctx: &ToolContext, format: ResponseFormat) -> Result<CallToolResult, ToolError> {
        let args = ctx.arguments();
        let mut url = self.request_url(args).map_err(ToolError::InvalidArguments)?;
        self.policy.check_url(&url).map_err(|r| ToolError::Failed(r.to_string()))?;
        let body = self.request_body(args)?;
        let (mut headers, mut redactor) = secret::resolve_headers(&self.headers).await.map_err(|e| {
            tracing::error!(tool = %self.tool, credential = %e.what, "http tool: a credential is unavailable; calls fail until it is provided");
            ToolError::Failed(MISCONFIGURED.into())
        })?;
        self.argument_headers(args, &mut headers).map_err(ToolError::InvalidArguments)?;
        self.secret_query(&mut url, &mut redactor).await?;
        let host = url.host_str().unwrap_or_default().to_owned();
        let mut response = self.send(ctx, &url, &headers, body, &host, &redactor).await?;
        let status = response.status();
        tracing::debug!(tool = %self.tool, host, %status, "http tool: upstream answered");
        if !status.is_success() {
            let wait = retry_after(response.headers());
            let excerpt = read_prefix(&mut response, ERROR_BODY_BYTES).await;
            return Err(ToolError::Failed(upstream_error(status, &excerpt, &redactor, wait)));
        }
        let response_headers = response.headers().clone();
        if self.method == HttpMethod::Head {
            return Ok(head_result(status, &response_headers));
        }
        let content_type = response_headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok());
        let bytes = read_capped(&mut response, self.max_response_bytes).await.map_err(|e| match e {
            ReadError::TooLarge(cap) => ToolError::Failed(format!(
                "The upstream's response is larger than {cap} bytes, the most this tool reads; narrow the request (a smaller limit, more specific filters)."
            )),
            ReadError::Failed(e) => self.transport_error(&e, &host, &redactor),
        })?;
        let body = Body::classify(content_type, bytes).map_err(ToolError::Failed)?;
        let call = Call {
            tool: &self.tool,
            status,
            headers: &response_headers,
            args,
            format,
            redactor: &redactor,
            pagination: self.pagination.as_ref(),
        };
        let result = self.render.result(body, &call)?;
        if self.pagination.is_some()
            && let Some(envelope) = &result.structured_content
        {
            report_page(ctx, args, envelope).await;
        }
        Ok(result)
    }

    /// The URL with the extra and pagination query parameters. `Err` is for the model.
    fn request_url(&self, args: &Map<String, Value>) -> Result<Url, String> {
        let mut url = self.url.expand(args)?;
        let mut pairs: Vec<(String, String)> = Vec::new();
        for (name, template) in &self.query {
            match template.exact_field().and_then(|f| args.get(f)) {
                Some(Value::Array(items)) => pairs.extend(items.iter().map(|v| (name.clone(), scalar_text(v)))),
                _ => pairs.extend(template.render(args).map(|v| (name.clone(), v))),
            }
        }
        if let Some(p) = &self.pagination {
            pairs.extend(p.query(args)?);
        }
        if !pairs.is_empty() {
            url.query_pairs_mut().extend_pairs(pairs);
        }
        Ok(url)
    }

    /// Adds the headers whose values come from the arguments; one whose fields are absent is
    /// left out. `Err` is for the model.
    fn argument_headers(&self, args: &Map<String, Value>, headers: &mut HeaderMap) -> Result<(), String> {
        for header in &self.headers {
            let secret::Header::Template(name, template) = header else { continue };
            let Some(text) = template.render(args) else { continue };
            let value = http::HeaderValue::from_str(&text)
                .map_err(|_| format!("the value for the {name} header must be visible ASCII text without line breaks"))?;
            headers.append(name.clone(), value);
        }
        Ok(())
    }

    /// Appends the query parameters read from secrets (after the address checks, so no
    /// refusal message can carry them), and has the redactor remove them from what comes back.
    async fn secret_query(&self, url: &mut Url, redactor: &mut Redactor) -> Result<(), ToolError> {
        for (name, source, prefix) in &self.query_secrets {
            let Some(secret) = source.read().await else {
                tracing::error!(tool = %self.tool, credential = %source.describe(), "http tool: a credential is unavailable; calls fail until it is provided");
                return Err(ToolError::Failed(MISCONFIGURED.into()));
            };
            url.query_pairs_mut().append_pair(name, &format!("{prefix}{}", secret.expose()));
            redactor.add_query_value(secret);
        }
        Ok(())
    }

    fn request_body(&self, args: &Map<String, Value>) -> Result<Option<Bytes>, ToolError> {
        let Some(template) = &self.body else { return Ok(None) };
        let Some(value) = template.render(args) else { return Ok(None) };
        let bytes = serde_json::to_vec(&value).map_err(|e| ToolError::Internal(e.into()))?;
        Ok(Some(Bytes::from(bytes)))
    }

    /// Sends the request, retrying what is safe and worth retrying. Returns the final
    /// response whatever its status; a transport failure becomes a message for the model.
    async fn send(
        &self,
        ctx: &ToolContext,
        url: &Url,
        headers: &HeaderMap,
        body: Option<Bytes>,
        host: &str,
        redactor: &Redactor,
    ) -> Result<reqwest::Response, ToolError> {
        let mut retry = 0;
        loop {
            let mut request =
                self.client.request(self.method.as_http(), url.clone()).headers(headers.clone()).timeout(self.attempt_timeout);
            if let Some(body) = &body {
                if !headers.contains_key(CONTENT_TYPE) {
                    request = request.header(CONTENT_TYPE, "application/json");
                }
                request = request.body(body.clone());
            }
            let outcome = request.send().await;
            let (retryable, hint) = match &outcome {
                Ok(r) => (is_retryable_status(r.status()), retry_after(r.headers())),
                Err(e) => (is_transient(e), None),
            };
            if retryable
                && retry < self.retry.retries
                && let Some(wait) = self.retry.wait_for(retry, hint)
            {
                let reason = outcome.as_ref().map_or_else(|_| "transport failure".to_owned(), |r| r.status().to_string());
                tracing::info!(tool = %self.tool, host, reason, retry = retry + 1, wait_ms = wait.as_millis() as u64, "http tool: retrying");
                drop(outcome);
                // A caller that asked for progress hears each retry: attempts made of the most
                // there will be, and why it waits.
                let attempts = self.retry.retries + 1;
                let note = format!("upstream: {reason}; retrying (attempt {} of {attempts}) in {} ms", retry + 2, wait.as_millis());
                ctx.progress(f64::from(retry + 1), Some(f64::from(attempts)), Some(&note)).await;
                ctx.sleep(wait).await?;
                retry += 1;
                continue;
            }
            return outcome.map_err(|e| self.transport_error(&e, host, redactor));
        }
    }

    /// A transport failure as a message for the model: what happened, never an address.
    fn transport_error(&self, error: &reqwest::Error, host: &str, redactor: &Redactor) -> ToolError {
        if let Some(refusal) = find_cause::<Refusal>(error) {
            tracing::warn!(tool = %self.tool, host, %refusal, "http tool: request refused by the address policy");
            return ToolError::Failed(refusal.to_string());
        }
        tracing::warn!(tool = %self.tool, host, error = %redactor.text(&error_chain(error)), "http tool: request failed");
        let message = if let Some(u) = find_cause::<Unresolvable>(error) {
            format!("The upstream is unreachable: {u}.")
        } else if error.is_timeout() {
            format!("The upstream {host} did not answer within {} ms; try again later.", self.attempt_timeout.as_millis())
        } else if error.is_connect() {
            format!("The upstream {host} is unreachable (the connection failed); try again later.")
        } else {
            format!("The request to the upstream {host} failed before a complete answer arrived; try again later.")
        };
        ToolError::Failed(message)
    }
}

/// A paginated tool's step through its collection, to a caller that asked for progress: the
/// items up to the end of this page, of the total when the upstream says it, and where the
/// next page starts. Clients walking a collection page by page can show how far they are.
async fn report_page(ctx: &ToolContext, args: &Map<String, Value>, envelope: &Value) {
    let offset = args.get("offset").and_then(Value::as_u64).unwrap_or(0);
    let count = envelope.get("count").and_then(Value::as_u64).unwrap_or(0);
    let total = envelope.get("total_count").and_then(Value::as_u64);
    let through = offset + count;
    let mut note = match (count, total) {
        (0, _) => "no items on this page".to_owned(),
        (_, Some(total)) => format!("items {}-{through} of {total}", offset + 1),
        (_, None) => format!("items {}-{through}", offset + 1),
    };
    match (envelope.get("next_offset").and_then(Value::as_u64), envelope.get("next_cursor").and_then(Value::as_str)) {
        (Some(next), _) => note.push_str(&format!("; more from offset {next}")),
        (None, Some(_)) => note.push_str("; more with next_cursor"),
        (None, None) => note.push_str("; the last page"),
    }
    // Progress must grow within a call: a page with items counts them; an empty page counts 1.
    ctx.progress(through.max(1) as f64, total.map(|t| t.max(through) as f64), Some(&note)).await;
}

/// Connection failures and timeouts are worth another attempt; refusals are not.
fn is_transient(error: &reqwest::Error) -> bool {
    find_cause::<Refusal>(error).is_none() && !error.is_redirect() && (error.is_connect() || error.is_timeout())
}

/// An error and its causes on one line, for the server log.
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut out = error.to_string();
    let mut next = error.source();
    while let Some(e) = next {
        out.push_str(": ");
        out.push_str(&e.to_string());
        next = e.source();
    }
    out
}
