//! One `tools/call` forwarded to its upstream: the arguments (already checked against the
//! upstream's input schema by the execution layer) go as they are; the answer comes back
//! block for block. While it runs, the upstream's progress reaches the client, and its
//! requests for input (elicitation, sampling, roots) are asked of the client where the
//! client's protocol allows. A cancelled or timed-out call is cancelled upstream too (dropping
//! the [`PendingCall`](super::peer::PendingCall) does it).
//!
//! A 2026-07-28 upstream asks its questions by answering `input_required`; toolgate asks the
//! client (a legacy client as requests on its stream; a 2026-07-28 client by answering
//! `input_required` itself, with the upstream's questions and state in toolgate's signed
//! `requestState`) and calls again with the answers.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::Link;
use super::error::UpstreamError;
use super::peer::{CallEvent, Peer};
use crate::protocol::{CallToolResult, Content, Era};
use crate::tool::{InputRequest, ToolContext, ToolError, ToolOutcome};

/// The upstream tool a toolgate tool forwards to.
pub(super) struct Target {
    pub name: Arc<str>,
    /// Properties its input schema marks `x-mcp-header`, with their header suffixes: a
    /// 2026-07-28 upstream wants their values as `Mcp-Param-*` headers too.
    pub header_params: Arc<[(String, String)]>,
}

/// Rounds of questions (`input_required`) one call may ask before toolgate stops it.
const MAX_INPUT_ROUNDS: usize = 8;
/// Where a 2026-07-28 client's retry finds the upstream's questions and state (inside the
/// `requestState` toolgate signs).
const STATE_KEY: &str = "upstream";

pub(super) async fn call(link: Arc<Link>, target: Arc<Target>, ctx: ToolContext) -> ToolOutcome {
    let tool = &target.name;
    let peer = match connection(&link, &ctx).await {
        Ok(peer) => peer,
        Err(stop) => return stop,
    };
    let Ok(_permit) = link.bulkhead.acquire().await else {
        return Ok(CallToolResult::error(format!(
            "The upstream MCP server {} is busy (too many calls waiting); try again shortly.",
            link.name
        )));
    };
    let started = Instant::now();
    let outcome = run(&peer, &target, &ctx).await;
    link.metrics.record(outcome_index(&outcome), started.elapsed());
    match outcome {
        Ok(Ok(result)) => relay(result),
        Ok(Err(UpstreamError::Rpc { code: -32602, message })) => Err(ToolError::InvalidArguments(message)),
        Ok(Err(e)) => Ok(CallToolResult::error(format!("The upstream MCP server {} could not run {tool}: {e}", link.name))),
        Err(stopped) => stopped,
    }
}

/// The connection a call goes over: the caller's own for a token-exchange or per-user
/// upstream, else the upstream's. `Err` is the call's answer: why there is none, for the
/// model, or a request to connect an account (`per_user`).
async fn connection(link: &Arc<Link>, ctx: &ToolContext) -> Result<Arc<Peer>, ToolOutcome> {
    if let Some(per_user) = link.oauth.as_ref().and_then(|o| o.user.as_ref()) {
        return super::per_user::connection(link, per_user, ctx).await;
    }
    let said = |why: String| Ok(CallToolResult::error(why));
    if let Some(users) = &link.users {
        let Some(token) = ctx.caller_token() else {
            return Err(said(format!(
                "The upstream MCP server {} acts as each caller, and this request carried no token to exchange (is auth off?).",
                link.name
            )));
        };
        return super::users::peer_for(link, users, token)
            .await
            .map_err(|e| said(format!("The upstream MCP server {} could not be reached as you: {e}", link.name)));
    }
    link.peer().ok_or_else(|| {
        let why = link.disconnected_reason().unwrap_or_else(|| "it is connecting".into());
        said(format!("The upstream MCP server {} is not connected ({why}); try again shortly.", link.name))
    })
}

/// The upstream's answer, or `Err` when the call ended here first (cancelled, a question the
/// client cannot be asked, or one a 2026-07-28 client answers by calling again).
async fn run(peer: &Peer, target: &Target, ctx: &ToolContext) -> Result<Result<Value, UpstreamError>, ToolOutcome> {
    let mut params = json!({ "name": &*target.name, "arguments": ctx.arguments() });
    if let Some(saved) = ctx.request_state().and_then(|s| s.get(STATE_KEY)) {
        // A 2026-07-28 client's retry, with its answers to the upstream's last questions.
        answer_round(ctx, &mut params, saved.get("inputRequests"), saved.get("requestState")).await?;
    }
    for _ in 0..MAX_INPUT_ROUNDS {
        let reply = one_call(peer, target, &params, ctx).await?;
        let Ok(result) = &reply else { return Ok(reply) };
        if result.get("resultType").and_then(Value::as_str) != Some("input_required") {
            return Ok(reply);
        }
        let (requests, state) = (result.get("inputRequests"), result.get("requestState"));
        // What a 2026-07-28 client's retry needs to go on (toolgate signs it, so it comes
        // back unchanged).
        ctx.set_request_state(json!({ STATE_KEY: { "inputRequests": requests, "requestState": state } }));
        answer_round(ctx, &mut params, requests, state).await?;
    }
    Err(Ok(CallToolResult::error(format!(
        "The upstream tool asked for input {MAX_INPUT_ROUNDS} times in a row; toolgate stopped the call."
    ))))
}

/// Asks the client the upstream's questions (`inputRequests`), and puts the answers and the
/// upstream's `requestState` into the next call's params.
async fn answer_round(ctx: &ToolContext, params: &mut Value, requests: Option<&Value>, state: Option<&Value>) -> Result<(), ToolOutcome> {
    let Some(Value::Object(requests)) = requests else {
        return Err(Ok(CallToolResult::error("The upstream asked for input without an inputRequests object.")));
    };
    let mut asked = Vec::with_capacity(requests.len());
    for (key, request) in requests {
        let question = request.get("params").cloned().unwrap_or_else(|| json!({}));
        asked.push(match request.get("method").and_then(Value::as_str) {
            Some("elicitation/create") => InputRequest::elicit(key, question),
            Some("sampling/createMessage") => InputRequest::sample(key, question),
            Some("roots/list") => InputRequest::roots(key),
            other => {
                return Err(Ok(CallToolResult::error(format!("The upstream asked for input toolgate does not relay ({other:?}).",))));
            }
        });
    }
    let answers = match ctx.request_inputs(asked).await {
        Ok(answers) => answers,
        Err(ToolError::MissingClientCapability(capability)) => {
            return Err(Ok(CallToolResult::error(format!(
                "The upstream tool needs {capability} from the client, which this client does not support."
            ))));
        }
        Err(e) => return Err(Err(e)),
    };
    params["inputResponses"] = Value::Object(requests.keys().cloned().zip(answers).collect());
    match state {
        Some(state) if !state.is_null() => params["requestState"] = state.clone(),
        _ => {
            if let Some(p) = params.as_object_mut() {
                p.remove("requestState");
            }
        }
    }
    Ok(())
}

/// One `tools/call` round trip, relaying progress and the upstream's own requests meanwhile.
async fn one_call(peer: &Peer, target: &Target, params: &Value, ctx: &ToolContext) -> Result<Result<Value, UpstreamError>, ToolOutcome> {
    let (events, mut incoming) = mpsc::channel(super::peer::CALL_EVENTS);
    let owner = ctx.principal().map(crate::principal::Principal::key);
    let headers = if peer.is_modern() { super::modern::param_headers(&target.header_params, ctx.arguments()) } else { Vec::new() };
    let events = Some(super::peer::CallEvents { tx: events, owner });
    let mut call = peer.start_with("tools/call", params.clone(), events, ctx.wants_progress(), headers);
    loop {
        tokio::select! {
            reply = call.reply() => {
                // Progress sent just before the answer is still relayed, in order.
                while let Ok(event) = incoming.try_recv() {
                    if let CallEvent::Progress { .. } = event {
                        on_event(peer, ctx, event).await;
                    }
                }
                return Ok(reply);
            }
            Some(event) = incoming.recv() => {
                if let Some(stop) = on_event(peer, ctx, event).await {
                    return Err(stop);
                }
            }
            () = ctx.cancellation().cancelled() => return Err(Err(ToolError::Cancelled)),
        }
    }
}

/// Relays one event; `Some` ends the call here.
async fn on_event(peer: &Peer, ctx: &ToolContext, event: CallEvent) -> Option<ToolOutcome> {
    let (id, method, params) = match event {
        CallEvent::Progress { progress, total, message } => {
            ctx.progress(progress, total, message.as_deref()).await;
            return None;
        }
        CallEvent::Request { id, method, params } => (id, method, params),
    };
    if ctx.protocol_version().era() == Era::Modern {
        // A 2026-07-28 client answers input requests by retrying its call, and the upstream
        // call cannot wait across that.
        return Some(Ok(CallToolResult::error(format!(
            "The upstream tool asked the client for input ({method}), which toolgate relays only to clients of protocol 2025-11-25 and earlier."
        ))));
    }
    let key = format!("upstream-{id}");
    let answer = match method.as_str() {
        "elicitation/create" => ctx.elicit(&key, params).await,
        "sampling/createMessage" => ctx.sample(&key, params).await,
        "roots/list" => ctx.list_roots(&key).await,
        other => {
            peer.respond(id, Err((-32601, format!("toolgate does not relay {other:?} to its clients")))).await;
            return None;
        }
    };
    match answer {
        Ok(result) => peer.respond(id, Ok(result)).await,
        Err(ToolError::Cancelled) => return Some(Err(ToolError::Cancelled)),
        Err(ToolError::MissingClientCapability(capability)) => {
            peer.respond(id, Err((-32601, format!("the client does not support {capability}")))).await
        }
        Err(e) => peer.respond(id, Err((-32603, e.to_string()))).await,
    }
    None
}

/// The upstream's result as a toolgate result, every block kept: a block toolgate models
/// exactly becomes that block, any other is relayed verbatim.
pub fn relay(result: Value) -> ToolOutcome {
    let Value::Object(mut result) = result else {
        return Ok(CallToolResult::error("The upstream answered tools/call with something that is not a result object."));
    };
    let Some(Value::Array(blocks)) = result.remove("content") else {
        return Ok(CallToolResult::error("The upstream's tools/call result has no content array."));
    };
    let content = blocks.into_iter().filter_map(|b| if let Value::Object(b) = b { Some(block(b)) } else { None }).collect();
    Ok(CallToolResult {
        content,
        structured_content: result.remove("structuredContent"),
        is_error: result.get("isError").and_then(Value::as_bool).unwrap_or(false),
        meta: match result.remove("_meta") {
            Some(Value::Object(meta)) => super::modern::own_meta(meta),
            _ => None,
        },
    })
}

fn block(mut raw: Map<String, Value>) -> Content {
    // The common block, a bare text, without the round trip below.
    if raw.len() == 2
        && raw.get("type").and_then(Value::as_str) == Some("text")
        && let Some(Value::String(_)) = raw.get("text")
        && let Some(Value::String(text)) = raw.remove("text")
    {
        return Content::text(text);
    }
    let value = Value::Object(raw);
    match serde_json::from_value::<Content>(value.clone()) {
        Ok(modelled) if !matches!(modelled, Content::Relayed(_)) && serde_json::to_value(&modelled).ok().as_ref() == Some(&value) => {
            modelled
        }
        _ => match value {
            Value::Object(raw) => Content::Relayed(raw),
            _ => Content::text(""),
        },
    }
}

/// The outcome's index in [`crate::metrics::record::UPSTREAM_OUTCOMES`].
fn outcome_index(outcome: &Result<Result<Value, UpstreamError>, ToolOutcome>) -> usize {
    match outcome {
        Ok(Ok(v)) if v.get("isError").and_then(Value::as_bool) == Some(true) => 1,
        Ok(Ok(_)) => 0,
        Ok(Err(UpstreamError::Rpc { .. })) => 2,
        Ok(Err(UpstreamError::Timeout(_))) => 3,
        Ok(Err(_)) => 4,
        Err(_) => 5,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_block(block: Value) -> Value {
        let Ok(result) = relay(json!({"content": [block]})) else { panic!("relayed") };
        serde_json::to_value(&result.content[0]).unwrap_or_default()
    }

    #[test]
    fn a_bare_text_block_is_modelled_as_text() {
        let Ok(result) = relay(json!({"content": [{"type": "text", "text": "hi"}]})) else { panic!("relayed") };
        assert_eq!(result.content[0], Content::text("hi"));
    }

    #[test]
    fn a_text_block_with_fields_toolgate_does_not_model_is_relayed_verbatim() {
        let block = json!({"type": "text", "text": "hi", "_meta": {"k": 1}});
        assert_eq!(one_block(block.clone()), block);
    }

    #[test]
    fn a_text_block_whose_text_is_not_a_string_keeps_it() {
        let block = json!({"type": "text", "text": 5});
        assert_eq!(one_block(block.clone()), block);
    }
}
