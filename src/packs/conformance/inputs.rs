//! Reading the client's answers to input requests (`ElicitResult`, `CreateMessageResult`,
//! `ListRootsResult`) and building the request params the fixtures share. The answers come
//! from the client (legacy: a JSON-RPC response; modern: `inputResponses`), so every shape is
//! checked before use instead of trusted.

use serde_json::{Map, Value, json};

use crate::tool::ToolError;

/// What the user did with an elicitation.
pub(super) enum Elicited {
    /// `action: "accept"` with its `content` (empty when the client sent none).
    Accepted(Map<String, Value>),
    /// `decline` or `cancel`: a legitimate answer, not a failure.
    Refused(String),
}

impl Elicited {
    /// The accepted string field `field`, if the user accepted and filled it in.
    pub(super) fn text(&self, field: &str) -> Option<&str> {
        match self {
            Self::Accepted(content) => content.get(field).and_then(Value::as_str),
            Self::Refused(_) => None,
        }
    }
}

/// Reads an `ElicitResult`; `key` names the input in the error message.
pub(super) fn elicited(key: &str, answer: &Value) -> Result<Elicited, ToolError> {
    let malformed = || {
        ToolError::InvalidInputResponse(format!(
            "the answer to {key:?} is not an ElicitResult ({{\"action\": \"accept\", \"content\": {{…}}}})"
        ))
    };
    let action = answer.get("action").and_then(Value::as_str).ok_or_else(malformed)?;
    match action {
        "accept" => match answer.get("content") {
            None | Some(Value::Null) => Ok(Elicited::Accepted(Map::new())),
            Some(Value::Object(content)) => Ok(Elicited::Accepted(content.clone())),
            Some(_) => Err(malformed()),
        },
        "decline" | "cancel" => Ok(Elicited::Refused(action.to_owned())),
        _ => Err(malformed()),
    }
}

/// The text of a `CreateMessageResult`: `content` is one block, or (2025-11-25) an array of
/// blocks of which the first text block counts.
pub(super) fn sampled_text(key: &str, answer: &Value) -> Result<String, ToolError> {
    let text_of =
        |block: &Value| block.get("type").filter(|t| *t == "text").and(block.get("text")).and_then(Value::as_str).map(str::to_owned);
    let text = match answer.get("content") {
        Some(Value::Array(blocks)) => blocks.iter().find_map(text_of),
        Some(block) => text_of(block),
        None => None,
    };
    text.ok_or_else(|| ToolError::InvalidInputResponse(format!("the answer to {key:?} is not a CreateMessageResult with text content")))
}

/// The number of roots in a `ListRootsResult`.
pub(super) fn root_count(key: &str, answer: &Value) -> Result<usize, ToolError> {
    answer
        .get("roots")
        .and_then(Value::as_array)
        .map(Vec::len)
        .ok_or_else(|| ToolError::InvalidInputResponse(format!("the answer to {key:?} is not a ListRootsResult ({{\"roots\": [...]}})")))
}

/// `elicitation/create` params for a form with one required field.
pub(super) fn form(message: &str, field: &str, kind: &str) -> Value {
    json!({
        "message": message,
        "requestedSchema": { "type": "object", "properties": { field: { "type": kind } }, "required": [field] }
    })
}

/// `sampling/createMessage` params for one user text message.
pub(super) fn ask_model(text: &str, max_tokens: u32) -> Value {
    json!({ "messages": [{ "role": "user", "content": { "type": "text", "text": text } }], "maxTokens": max_tokens })
}

/// A random nonce, so two `requestState`s issued in the same second still differ.
pub(super) fn nonce() -> String {
    format!("{:016x}", rand::random::<u64>())
}
