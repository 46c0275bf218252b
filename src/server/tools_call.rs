//! `tools/call`: look-up, argument validation, execution with timeout, cancellation and
//! panic isolation, output checks, and the mapping of every outcome to a result.

use std::panic::AssertUnwindSafe;

use futures_util::FutureExt as _;
use serde_json::{Map, Value, json};

use super::{McpServer, RequestCtx};
use crate::protocol::jsonrpc::{RpcError, code};
use crate::protocol::{CallToolResult, Era};
use std::sync::Arc;

use crate::tool::{ContextParts, Mrtr, ToolContext, ToolError, schema};

/// How a call ended, before it becomes a JSON-RPC result.
enum Ended {
    Done(Result<CallToolResult, ToolError>),
    TimedOut(u64),
    Panicked,
    /// The client cancelled: no response is sent (U-11).
    Cancelled,
}

impl McpServer {
    pub(super) async fn call_tool(
        &self,
        params: &Map<String, Value>,
        ctx: &RequestCtx,
        mrtr: Option<Arc<Mrtr>>,
    ) -> Result<Value, RpcError> {
        let name =
            params.get("name").and_then(Value::as_str).ok_or_else(|| RpcError::invalid_params("tools/call needs a string \"name\""))?;
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(map)) => map.clone(),
            Some(_) => return Err(RpcError::invalid_params("\"arguments\" must be a JSON object")),
        };
        let set = self.tools.snapshot();
        // A tool the caller may not use is reported exactly like one that does not exist.
        let tool = set
            .get(name)
            .filter(|_| self.may_use(name, ctx))
            .ok_or_else(|| RpcError::invalid_params(format!("Unknown tool: {name}")).with_data(json!({ "name": name })))?
            .clone();
        drop(set);

        // Input validation failures are tool-execution errors the model can fix (SEP-1303).
        let args_value = Value::Object(arguments);
        if let Err(problems) = schema::check(&tool.input, &args_value) {
            return to_value(CallToolResult::error(format!("Invalid arguments for tool {name}: {problems}")));
        }
        let Value::Object(arguments) = args_value else { unreachable!("constructed as an object above") };

        let progress_token =
            params.get("_meta").and_then(|m| m.get("progressToken")).filter(|t| t.is_string() || t.is_i64() || t.is_u64()).cloned();
        let timeout = tool.tool.timeout.unwrap_or_else(|| self.default_timeout());
        // The tool's token is a child: a timeout cancels the tool, not the request.
        let tool_cancel = ctx.cancel.child_token();
        let context = ToolContext::new(ContextParts {
            tool: name.into(),
            arguments,
            cancel: tool_cancel.clone(),
            progress_token,
            log_level: ctx.log_level.clone(),
            channel: ctx.channel.clone(),
            caps: ctx.caps,
            version: ctx.version,
            mrtr: mrtr.clone(),
            principal: ctx.principal.clone(),
        });
        let run = AssertUnwindSafe((tool.tool.handler)(context)).catch_unwind();
        let ended = tokio::select! {
            outcome = run => match outcome {
                Ok(result) => Ended::Done(result),
                Err(_) => Ended::Panicked,
            },
            () = tokio::time::sleep(timeout) => Ended::TimedOut(timeout.as_secs()),
            () = ctx.cancel.cancelled() => Ended::Cancelled,
        };
        // Whatever ended the call, the tool's own work stops now.
        tool_cancel.cancel();
        if ctx.cancel.is_cancelled() {
            return Err(cancelled());
        }

        let result = match ended {
            Ended::Cancelled => return Err(cancelled()),
            Ended::Panicked => {
                tracing::error!(tool = name, "tool panicked");
                CallToolResult::error(format!("The tool {name} failed unexpectedly; the server logged the details"))
            }
            Ended::TimedOut(secs) => {
                tracing::warn!(tool = name, secs, "tool timed out");
                CallToolResult::error(format!("The tool {name} timed out after {secs} seconds; try a smaller request"))
            }
            Ended::Done(Ok(result)) => result,
            Ended::Done(Err(ToolError::InputRequired)) => return self.input_required(mrtr.as_deref(), &format!("tools/call:{name}")),
            Ended::Done(Err(ToolError::MissingClientCapability(cap))) if ctx.era() == Era::Modern => return Err(missing_capability(cap)),
            Ended::Done(Err(e @ ToolError::InvalidInputResponse(_))) if ctx.era() == Era::Modern => {
                return Err(RpcError::invalid_params(e.to_string()));
            }
            Ended::Done(Err(ToolError::Cancelled)) => CallToolResult::error(format!("The tool {name} was stopped before it finished")),
            Ended::Done(Err(ToolError::Internal(e))) => {
                tracing::error!(tool = name, error = %e, "tool failed");
                CallToolResult::error(format!("The tool {name} failed unexpectedly; the server logged the details"))
            }
            Ended::Done(Err(e)) => CallToolResult::error(e.to_string()),
        };

        if let (Some(validator), false) = (&tool.output, result.is_error) {
            let problem = match &result.structured_content {
                None => Some("no structuredContent".to_owned()),
                Some(value) => schema::check(validator, value).err(),
            };
            if let Some(problem) = problem {
                tracing::error!(tool = name, problem, "tool output does not match its outputSchema");
                return Err(RpcError::internal());
            }
        }
        to_value(result.for_version(ctx.version))
    }

    /// The modern answer for work that needs client input first (MRTR): the input requests
    /// and, when the handler set one, the signed state for the retry.
    pub(super) fn input_required(&self, mrtr: Option<&Mrtr>, scope: &str) -> Result<Value, RpcError> {
        let Some(mrtr) = mrtr else {
            tracing::error!(scope, "input required outside a modern request");
            return Err(RpcError::internal());
        };
        let requests = std::mem::take(&mut *mrtr.requests.lock());
        let mut result = json!({ "resultType": "input_required", "inputRequests": requests });
        if let Some(state) = mrtr.next_state.lock().take() {
            result["requestState"] = json!(self.state_signer.sign(scope, &state));
        }
        Ok(result)
    }
}

/// -32021 naming the capability the client must declare.
pub(super) fn missing_capability(cap: &str) -> RpcError {
    RpcError::new(code::MISSING_CLIENT_CAPABILITY, "Missing required client capability")
        .with_data(json!({ "requiredCapabilities": { cap: {} } }))
}

/// The error of a request the client cancelled; transports see the cancelled token and send
/// nothing (U-11).
fn cancelled() -> RpcError {
    RpcError::new(code::TRANSPORT, "Request cancelled")
}

fn to_value(result: CallToolResult) -> Result<Value, RpcError> {
    serde_json::to_value(result).map_err(|e| {
        tracing::error!(error = %e, "cannot serialize a tool result");
        RpcError::internal()
    })
}
