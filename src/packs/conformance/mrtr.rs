//! The SEP-2322 (MRTR) fixtures: tools that need client input and, on a 2026-07-28 request,
//! answer `input_required` until the retry carries `inputResponses` (and the signed
//! `requestState` they asked for). On a 2025-11-25 session the same calls are served with
//! real server-to-client requests inside one call, so no state has to travel.

use serde_json::{Value, json};

use super::inputs::{Elicited, ask_model, elicited, form, nonce, root_count, sampled_text};
use crate::protocol::{CallToolResult, Era};
use crate::tool::{InputRequest, Tool, ToolContext, ToolError};

pub(super) fn tools() -> Vec<Tool> {
    vec![
        tool("test_input_required_result_elicitation", "MRTR: returns InputRequiredResult with elicitation request").handler(
            |ctx| async move {
                let answer = ctx.elicit("user_name", ask_name()).await?;
                Ok(match elicited("user_name", &answer)? {
                    Elicited::Refused(action) => CallToolResult::text(format!("No name given (the user chose {action})")),
                    accepted => CallToolResult::text(format!("Hello, {}!", required(&accepted, "user_name", "name")?)),
                })
            },
        ),
        tool("test_input_required_result_sampling", "MRTR: returns InputRequiredResult with sampling request").handler(|ctx| async move {
            let answer = ctx.sample("capital_question", ask_model("What is the capital of France?", 100)).await?;
            Ok(CallToolResult::text(format!("Sampling result: {}", sampled_text("capital_question", &answer)?)))
        }),
        tool("test_input_required_result_list_roots", "MRTR: returns InputRequiredResult with roots/list request").handler(
            |ctx| async move {
                let answer = ctx.list_roots("client_roots").await?;
                Ok(CallToolResult::text(format!("Found {} root(s)", root_count("client_roots", &answer)?)))
            },
        ),
        tool("test_input_required_result_request_state", "MRTR: returns InputRequiredResult with requestState")
            .handler(|ctx| confirm_with_state(ctx, "request-state", "state-ok: requestState validated")),
        tool("test_input_required_result_multiple_inputs", "MRTR: returns InputRequiredResult with multiple input requests")
            .handler(multiple_inputs),
        tool("test_input_required_result_multi_round", "MRTR: multi-round InputRequiredResult workflow").handler(multi_round),
        tool("test_input_required_result_tampered_state", "MRTR: HMAC-signed requestState integrity test")
            .handler(|ctx| confirm_with_state(ctx, "tamper-test", "integrity-ok: state verified")),
        tool("test_input_required_result_capabilities", "MRTR: respects client capabilities in inputRequests").handler(capabilities),
    ]
}

fn tool(name: &str, description: &str) -> crate::tool::ToolBuilder {
    Tool::builder(name, description).input_schema(json!({ "type": "object", "properties": {} }))
}

fn ask_name() -> Value {
    form("What is your name?", "name", "string")
}

/// The accepted string `field`; the form marked it required, so its absence is the client's
/// error.
fn required<'a>(answer: &'a Elicited, key: &str, field: &str) -> Result<&'a str, ToolError> {
    answer.text(field).ok_or_else(|| ToolError::InvalidInputResponse(format!("the answer to {key:?} must accept with a string {field:?}")))
}

/// The `kind` of the verified `requestState`, if the client echoed one.
fn state_kind(ctx: &ToolContext) -> Option<&str> {
    ctx.request_state().and_then(|s| s.get("kind")).and_then(Value::as_str)
}

fn is_modern(ctx: &ToolContext) -> bool {
    ctx.protocol_version().era() == Era::Modern
}

/// Asks for a boolean confirmation and, in the modern era, completes only on a retry that
/// echoes the state issued with the question (the server signs it, so a tampered copy never
/// reaches this handler).
async fn confirm_with_state(ctx: ToolContext, kind: &'static str, done: &'static str) -> Result<CallToolResult, ToolError> {
    let state_ok = state_kind(&ctx) == Some(kind);
    if !state_ok {
        ctx.set_request_state(json!({ "kind": kind, "nonce": nonce() }));
    }
    let answer = ctx.elicit("confirm", form("Please confirm", "ok", "boolean")).await?;
    if is_modern(&ctx) && !state_ok {
        return Err(ToolError::InvalidArguments(
            "the answer to \"confirm\" came without the requestState issued with the question; call again without inputResponses".into(),
        ));
    }
    Ok(match elicited("confirm", &answer)? {
        answer if answer_is_true(&answer) => CallToolResult::text(done),
        _ => CallToolResult::text("Not confirmed: the user did not accept with ok = true"),
    })
}

fn answer_is_true(answer: &Elicited) -> bool {
    matches!(answer, Elicited::Accepted(content) if content.get("ok") == Some(&Value::Bool(true)))
}

/// Three inputs of three kinds in one round; the state only shows that it travels along.
async fn multiple_inputs(ctx: ToolContext) -> Result<CallToolResult, ToolError> {
    ctx.set_request_state(json!({ "kind": "multiple-inputs", "nonce": nonce() }));
    let answers = ctx
        .request_inputs(vec![
            InputRequest::elicit("user_name", ask_name()),
            InputRequest::sample("greeting", ask_model("Generate a greeting", 50)),
            InputRequest::roots("client_roots"),
        ])
        .await?;
    let [name, greeting, roots] = answers.as_slice() else {
        return Err(ToolError::Failed("expected three answers".into()));
    };
    let name = elicited("user_name", name)?;
    let name = required(&name, "user_name", "name")?;
    let greeting = sampled_text("greeting", greeting)?;
    let roots = root_count("client_roots", roots)?;
    Ok(CallToolResult::text(format!("Name: {name}; Greeting: {greeting}; Roots: {roots}")))
}

/// Round 1 asks for a name, round 2 for a colour; the name from round 1 travels in the
/// (signed) state, so round 2 needs only the new answer.
async fn multi_round(ctx: ToolContext) -> Result<CallToolResult, ToolError> {
    let remembered = ctx.request_state().filter(|s| s.get("round") == Some(&json!(2))).and_then(|s| s.get("name")).and_then(Value::as_str);
    let name = match remembered {
        Some(name) => name.to_owned(),
        None => {
            ctx.set_request_state(json!({ "round": 1, "nonce": nonce() }));
            let answer = ctx.elicit("step1", form("Step 1: What is your name?", "name", "string")).await?;
            required(&elicited("step1", &answer)?, "step1", "name")?.to_owned()
        }
    };
    ctx.set_request_state(json!({ "round": 2, "name": name, "nonce": nonce() }));
    let answer = ctx.elicit("step2", form("Step 2: What is your favorite color?", "color", "string")).await?;
    let answer = elicited("step2", &answer)?;
    let color = required(&answer, "step2", "color")?;
    Ok(CallToolResult::text(format!("Multi-round complete for {name} who likes {color}")))
}

/// Asks only for what the client declared it can answer (SEP-2322: never an input request the
/// client cannot serve); with nothing declared there is nothing to ask, which is -32021.
async fn capabilities(ctx: ToolContext) -> Result<CallToolResult, ToolError> {
    let caps = ctx.client_caps();
    let mut requests = Vec::new();
    if caps.elicitation_form {
        requests.push(InputRequest::elicit("elicit_input", form("Elicitation input", "value", "string")));
    }
    if caps.sampling {
        requests.push(InputRequest::sample("sample_input", ask_model("Sample request", 50)));
    }
    if caps.roots {
        requests.push(InputRequest::roots("roots_input"));
    }
    if requests.is_empty() {
        return Err(ToolError::MissingClientCapability("sampling"));
    }
    let keys: Vec<String> = requests.iter().map(|r| r.key.clone()).collect();
    ctx.set_request_state(json!({ "kind": "capabilities-test", "nonce": nonce() }));
    ctx.request_inputs(requests).await?;
    Ok(CallToolResult::text(format!("capabilities-ok: received {}", keys.join(","))))
}
