//! The prompt fixtures, the completion source for `test_prompt_with_arguments`, the MRTR
//! prompt that needs an elicitation first, and the prompt `test_trigger_prompt_change`
//! re-registers.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::TEST_IMAGE_BASE64;
use super::inputs::{Elicited, elicited, form};
use crate::catalog::{Prompt, PromptArgument};
use crate::server::McpServer;
use crate::tool::InputRequest;

/// Values offered when completing `test_prompt_with_arguments` arguments.
const SUGGESTIONS: &[&str] = &["paris", "parameter", "partial", "test", "testValue1", "testValue2"];

pub(super) fn install(server: &McpServer) {
    server.prompts.add(titled(
        Prompt::new("test_simple_prompt", "A simple prompt without arguments", |_| user(&[text("This is a simple prompt for testing.")])),
        "Simple Test Prompt",
    ));
    server.prompts.add(titled(
        Prompt::new("test_prompt_with_arguments", "A prompt with required arguments", |args| {
            let arg = |k: &str| args.get(k).map_or("", String::as_str).to_owned();
            user(&[text(&format!("Prompt with arguments: arg1='{}', arg2='{}'", arg("arg1"), arg("arg2")))])
        })
        .argument(PromptArgument::required("arg1", "First test argument"))
        .argument(PromptArgument::required("arg2", "Second test argument"))
        .completer(|_argument, prefix| {
            let prefix = prefix.to_lowercase();
            SUGGESTIONS.iter().filter(|s| s.to_lowercase().starts_with(&prefix)).map(|s| (*s).to_owned()).collect()
        }),
        "Prompt With Arguments",
    ));
    server.prompts.add(titled(
        Prompt::new("test_prompt_with_embedded_resource", "A prompt that includes an embedded resource", |args| {
            let uri = args.get("resourceUri").map_or("", String::as_str);
            let resource = json!({ "type": "resource", "resource": { "uri": uri, "mimeType": "text/plain", "text": "Embedded resource content for testing." } });
            user(&[resource, text("Please process the embedded resource above.")])
        })
        .argument(PromptArgument::required("resourceUri", "URI of the resource to embed")),
        "Prompt With Embedded Resource",
    ));
    server.prompts.add(titled(
        Prompt::new("test_prompt_with_image", "A prompt that includes image content", |_| {
            user(&[json!({ "type": "image", "data": TEST_IMAGE_BASE64, "mimeType": "image/png" }), text("Please analyze the image above.")])
        }),
        "Prompt With Image",
    ));
    server.prompts.add(Prompt::with_inputs(
        "test_input_required_result_prompt",
        "MRTR: prompt that requires elicitation input",
        with_context,
    ));
}

/// Renders once the client answered the `user_context` question. An answer of the wrong
/// shape is asked again rather than rendered.
fn with_context(_args: &HashMap<String, String>, responses: &Map<String, Value>) -> Result<Value, Vec<InputRequest>> {
    let ask = || vec![InputRequest::elicit("user_context", form("What context should the prompt use?", "context", "string"))];
    let answer = responses.get("user_context").ok_or_else(ask)?;
    let context = match elicited("user_context", answer).map_err(|_| ask())? {
        Elicited::Refused(action) => format!("(none: the user chose {action})"),
        accepted => accepted.text("context").ok_or_else(ask)?.to_owned(),
    };
    Ok(user(&[text(&format!("Prompt with context: {context}"))]))
}

/// Revision `n` of the prompt `test_trigger_prompt_change` re-registers.
pub(super) fn dynamic(revision: u64) -> Prompt {
    let description = format!("A prompt re-registered by test_trigger_prompt_change (revision {revision})");
    Prompt::new("test_dynamic_prompt", description, move |_| user(&[text(&format!("Dynamic prompt, revision {revision}."))]))
}

fn titled(mut prompt: Prompt, title: &str) -> Prompt {
    prompt.title = Some(title.to_owned());
    prompt
}

fn text(text: &str) -> Value {
    json!({ "type": "text", "text": text })
}

/// `{messages}` with one user message per content block.
fn user(blocks: &[Value]) -> Value {
    json!({ "messages": blocks.iter().map(|content| json!({ "role": "user", "content": content })).collect::<Vec<_>>() })
}
