//! What a tool result goes through before it leaves: text cut to the tool's character limit
//! (with guidance for the model), `structuredContent` checked against the output schema, and
//! the shape of the client's protocol version.

use serde_json::Value;

use crate::protocol::jsonrpc::RpcError;
use crate::protocol::{CallToolResult, Content, ProtocolVersion};
use crate::tool::{RegisteredTool, schema};

/// The answer for `result` from `tool`: cut to `char_limit`, checked, shaped for `version`.
/// An output that breaks its schema is the server's fault: a generic internal error.
pub(super) fn finish(
    tool: &RegisteredTool,
    result: CallToolResult,
    char_limit: usize,
    version: ProtocolVersion,
) -> Result<Value, RpcError> {
    let result = truncate_text(result, tool.tool.opts.char_limit.unwrap_or(char_limit));
    if let (Some(validator), false) = (&tool.output, result.is_error) {
        let problem = match &result.structured_content {
            None => Some("no structuredContent".to_owned()),
            Some(value) => schema::check(validator, value).err(),
        };
        if let Some(problem) = problem {
            tracing::error!(tool = tool.name(), problem, "tool output does not match its outputSchema");
            return Err(RpcError::internal());
        }
    }
    to_value(result.for_version(version))
}

/// Cuts text content beyond `limit` characters (across all text blocks) and says so, in words
/// that tell the model how to get a smaller answer.
fn truncate_text(mut result: CallToolResult, limit: usize) -> CallToolResult {
    let mut budget = limit;
    let mut cut = false;
    for block in &mut result.content {
        let Content::Text { text, .. } = block else { continue };
        if cut {
            text.clear();
            continue;
        }
        let chars = text.chars().count();
        if chars <= budget {
            budget -= chars;
            continue;
        }
        let end = text.char_indices().nth(budget).map_or(text.len(), |(i, _)| i);
        text.truncate(end);
        text.push_str(&format!(
            "\n\n[Output truncated at {limit} characters. Ask for less: use the tool's filters, pagination (limit/offset/cursor) or a narrower range.]"
        ));
        cut = true;
    }
    if cut {
        result.content.retain(|b| !matches!(b, Content::Text { text, .. } if text.is_empty()));
    }
    result
}

pub(super) fn to_value(result: CallToolResult) -> Result<Value, RpcError> {
    serde_json::to_value(result).map_err(|e| {
        tracing::error!(error = %e, "cannot serialize a tool result");
        RpcError::internal()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_beyond_the_limit_is_cut_with_guidance() {
        let r =
            CallToolResult::new(vec![Content::text("é".repeat(80)), Content::text("x".repeat(50)), Content::image("AA==", "image/png")]);
        let r = truncate_text(r, 100);
        let Content::Text { text, .. } = &r.content[1] else { panic!("text") };
        assert!(text.starts_with(&"x".repeat(20)) && text.contains("Output truncated at 100 characters"), "{text}");
        assert_eq!(r.content.len(), 3, "non-text blocks stay");
    }

    #[test]
    fn text_within_the_limit_is_unchanged() {
        let small = truncate_text(CallToolResult::text("short"), 100);
        assert_eq!(small, CallToolResult::text("short"));
    }
}
