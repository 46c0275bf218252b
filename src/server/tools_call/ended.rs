//! How a call ended, whatever ended it (the tool, its deadline, the client, the shutdown, a
//! full queue), and the one mapping from each ending to its audit outcome and its answer.

use serde_json::{Value, json};

use super::super::McpServer;
use crate::audit::Outcome;
use crate::protocol::jsonrpc::{RpcError, code};
use crate::protocol::{CallToolResult, Era};
use crate::tool::{Mrtr, ToolError};

/// How a call ended, before it becomes a JSON-RPC result.
pub(super) enum Ended {
    Done(Result<CallToolResult, ToolError>),
    /// The deadline passed while the tool ran (seconds).
    TimedOut(u64),
    /// The deadline passed while the call waited for a free slot (seconds).
    NoSlot(u64),
    /// The tool's or the server's queue of waiting calls is full.
    Busy {
        running: usize,
        queued: usize,
    },
    Panicked,
    /// The client cancelled: no response is sent (U-11).
    Cancelled,
    /// The server's shutdown grace period ran out: the call answers that it was stopped.
    Halted,
}

/// What the caller gets: a result (an `isError` one included) or a JSON-RPC error.
pub(super) type Answer = Result<Value, RpcError>;

impl Ended {
    /// The audit outcome (and the metrics label) of this ending.
    pub(super) fn outcome(&self) -> Outcome {
        match self {
            Self::Cancelled | Self::Halted | Self::Done(Err(ToolError::Cancelled)) => Outcome::Cancelled,
            Self::Panicked | Self::Done(Err(ToolError::Internal(_))) => Outcome::InternalError,
            Self::TimedOut(_) | Self::NoSlot(_) => Outcome::Timeout,
            Self::Busy { .. } => Outcome::RateLimited,
            Self::Done(Err(ToolError::InvalidArguments(_) | ToolError::InvalidInputResponse(_))) => Outcome::InvalidInput,
            Self::Done(Err(ToolError::MissingClientCapability(_))) => Outcome::Denied,
            Self::Done(Err(ToolError::InputRequired | ToolError::UrlElicitationRequired { .. })) => Outcome::Ok,
            Self::Done(Err(ToolError::Failed(_))) => Outcome::ToolError,
            Self::Done(Ok(r)) if r.is_error => Outcome::ToolError,
            Self::Done(Ok(_)) => Outcome::Ok,
        }
    }

    /// A panic or an internal error: the server's fault, not a result the model can act on.
    pub(super) fn is_internal(&self) -> bool {
        matches!(self, Self::Panicked | Self::Done(Err(ToolError::Internal(_))))
    }

    /// The tool result this ending reports, or the answer itself when it is not a tool result
    /// (a cancellation, an MRTR `input_required`, an error the modern era sends as JSON-RPC).
    pub(super) fn into_result(self, server: &McpServer, name: &str, era: Era, mrtr: Option<&Mrtr>) -> Result<CallToolResult, Answer> {
        Ok(match self {
            Self::Cancelled => return Err(Err(cancelled())),
            Self::Halted => {
                tracing::warn!(tool = name, "tool stopped: the shutdown grace period is over");
                CallToolResult::error(halted_message(name))
            }
            Self::Panicked => {
                tracing::error!(tool = name, "tool panicked");
                CallToolResult::error(format!("The tool {name} failed unexpectedly; the server logged the details"))
            }
            Self::TimedOut(secs) => {
                tracing::warn!(tool = name, secs, "tool timed out");
                CallToolResult::error(format!("The tool {name} timed out after {secs} seconds; try a smaller request"))
            }
            Self::NoSlot(secs) => CallToolResult::error(format!(
                "The tool {name} timed out after {secs} seconds waiting for a free slot; the server is busy, retry shortly"
            )),
            Self::Busy { running, queued } => {
                tracing::warn!(tool = name, running, queued, "tool call refused: concurrency queue full");
                CallToolResult::error(format!(
                    "The server is busy ({running} calls running, {queued} waiting); retry {name} in a few seconds"
                ))
            }
            Self::Done(Ok(result)) => result,
            Self::Done(Err(ToolError::InputRequired)) => return Err(server.input_required(mrtr, &format!("tools/call:{name}"))),
            Self::Done(Err(ToolError::UrlElicitationRequired { message, elicitations })) if era != Era::Modern => {
                return Err(Err(RpcError::new(code::URL_ELICITATION_REQUIRED, message).with_data(json!({ "elicitations": elicitations }))));
            }
            Self::Done(Err(ToolError::MissingClientCapability(cap))) if era == Era::Modern => return Err(Err(missing_capability(cap))),
            Self::Done(Err(e @ ToolError::InvalidInputResponse(_))) if era == Era::Modern => {
                return Err(Err(RpcError::invalid_params(e.to_string())));
            }
            Self::Done(Err(ToolError::Cancelled)) => CallToolResult::error(format!("The tool {name} was stopped before it finished")),
            Self::Done(Err(ToolError::Internal(e))) => {
                tracing::error!(tool = name, error = %e, "tool failed");
                CallToolResult::error(format!("The tool {name} failed unexpectedly; the server logged the details"))
            }
            Self::Done(Err(e)) => CallToolResult::error(e.to_string()),
        })
    }
}

/// -32021 naming the capability the client must declare.
pub(in crate::server) fn missing_capability(cap: &str) -> RpcError {
    RpcError::new(code::MISSING_CLIENT_CAPABILITY, "Missing required client capability")
        .with_data(json!({ "requiredCapabilities": { cap: {} } }))
}

/// -32021 naming the 2026-07-28 tasks extension: a task-only tool, or a task method, called
/// by a request that did not declare it.
pub(in crate::server) fn missing_tasks_extension() -> RpcError {
    crate::protocol::task::missing_tasks_extension()
}

/// What a call stopped by shutdown answers: an `isError` result the model can act on.
fn halted_message(name: &str) -> String {
    format!("The server is shutting down and stopped the tool {name} before it finished; retry the call")
}

/// The error of a request the client cancelled; transports see the cancelled token and send
/// nothing (U-11).
pub(super) fn cancelled() -> RpcError {
    RpcError::new(code::TRANSPORT, "Request cancelled")
}
