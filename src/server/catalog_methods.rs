//! Resource, prompt and completion methods.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::{McpServer, RequestCtx, cursor_param};
use crate::catalog::resources::{Offer, Reading};
use crate::protocol::Era;
use crate::protocol::jsonrpc::{RpcError, code};
use crate::virtual_servers::Entry;

fn entry<'a>(offer: &Offer<'a>) -> Entry<'a> {
    Entry { name: offer.name, origin: if offer.source.is_some() { "upstream" } else { "code" }, upstream: offer.source }
}

fn required_str<'a>(params: &'a Map<String, Value>, key: &str, method: &str) -> Result<&'a str, RpcError> {
    params.get(key).and_then(Value::as_str).ok_or_else(|| RpcError::invalid_params(format!("{method} needs a string \"{key}\"")))
}

impl McpServer {
    /// A resource (or template) is visible when the caller holds its scopes and the endpoint
    /// serves it.
    fn may_see_resource(&self, offer: &Offer<'_>, ctx: &RequestCtx) -> bool {
        self.holds(offer.scopes, ctx) && ctx.caller.server.as_ref().is_none_or(|s| s.serves_resource(&entry(offer)))
    }

    fn may_see_prompt(&self, offer: &Offer<'_>, ctx: &RequestCtx) -> bool {
        self.holds(offer.scopes, ctx) && ctx.caller.server.as_ref().is_none_or(|s| s.serves_prompt(&entry(offer)))
    }

    pub(super) async fn resource_method(&self, method: &str, params: &Map<String, Value>, ctx: &RequestCtx) -> Result<Value, RpcError> {
        let size = self.page_size();
        let listed = |(items, next): (Vec<Value>, Option<String>), key: &str| {
            let mut v = json!({ key: items });
            if let Some(next) = next {
                v["nextCursor"] = json!(next);
            }
            v
        };
        match method {
            "resources/list" => {
                let page = self
                    .resources
                    .list(cursor_param(params)?, size, &|o| self.may_see_resource(o, ctx))
                    .map_err(RpcError::invalid_params)?;
                Ok(listed(page, "resources"))
            }
            "resources/templates/list" => {
                let page = self
                    .resources
                    .list_templates(cursor_param(params)?, size, &|o| self.may_see_resource(o, ctx))
                    .map_err(RpcError::invalid_params)?;
                Ok(listed(page, "resourceTemplates"))
            }
            _ => {
                let uri = required_str(params, "uri", method)?;
                let reading = self.resources.reader(uri, &|o| self.may_see_resource(o, ctx));
                let read = match reading {
                    Some(Reading::Done(contents)) => Some(Ok(contents)),
                    Some(Reading::Remote(read)) => Some(read(uri.to_owned()).await),
                    None => None,
                };
                match read {
                    Some(Ok(contents)) => Ok(json!({ "contents": contents })),
                    Some(Err(why)) => Err(RpcError::new(code::INTERNAL_ERROR, why).with_data(json!({ "uri": uri }))),
                    None => {
                        // 2025-11-25 uses -32002; the modern era moved it to -32602.
                        let code = if ctx.era() == Era::Modern { code::INVALID_PARAMS } else { code::RESOURCE_NOT_FOUND };
                        Err(RpcError::new(code, format!("Resource not found: {uri}")).with_data(json!({ "uri": uri })))
                    }
                }
            }
        }
    }

    pub(super) fn subscription_method(&self, method: &str, params: &Map<String, Value>, ctx: &RequestCtx) -> Result<Value, RpcError> {
        let uri = required_str(params, "uri", method)?;
        let Some(session) = &ctx.session else {
            return Err(RpcError::method_not_found(method));
        };
        if method == "resources/subscribe" {
            if !self.resources.exists(uri) {
                return Err(RpcError::new(code::RESOURCE_NOT_FOUND, format!("Resource not found: {uri}")).with_data(json!({ "uri": uri })));
            }
            session.subscribe(uri);
        } else {
            session.unsubscribe(uri);
        }
        Ok(json!({}))
    }

    pub(super) async fn prompt_method(&self, method: &str, params: &Map<String, Value>, ctx: &RequestCtx) -> Result<Value, RpcError> {
        if method == "prompts/list" {
            let (items, next) = self
                .prompts
                .list(cursor_param(params)?, self.page_size(), &|o| self.may_see_prompt(o, ctx))
                .map_err(RpcError::invalid_params)?;
            let mut v = json!({ "prompts": items });
            if let Some(next) = next {
                v["nextCursor"] = json!(next);
            }
            return Ok(v);
        }
        let name = required_str(params, "name", method)?;
        let remote = self.prompts.remote_get(name, &|o| self.may_see_prompt(o, ctx));
        if let Some(get) = remote {
            let arguments = params.get("arguments").and_then(Value::as_object).cloned().unwrap_or_default();
            return get(name.to_owned(), arguments).await.map_err(|why| RpcError::new(code::INTERNAL_ERROR, why));
        }
        if !self.may_see_prompt(&Offer { scopes: &[], name, source: None }, ctx) {
            return Err(RpcError::invalid_params(format!("Unknown prompt: {name}")));
        }
        let args = match params.get("arguments") {
            None | Some(Value::Null) => HashMap::new(),
            Some(Value::Object(map)) => map
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => Ok((k.clone(), s.clone())),
                    _ => Err(RpcError::invalid_params(format!("Prompt argument {k:?} must be a string"))),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(RpcError::invalid_params("\"arguments\" must be an object of strings")),
        };
        let scope = format!("prompts/get:{name}");
        let mrtr = match ctx.era() {
            Era::Modern => Some(self.state_signer.prepare(params, &scope)?),
            Era::Legacy => None,
        };
        let empty = Map::new();
        let responses = mrtr.as_ref().map_or(&empty, |m| &m.responses);
        match self.prompts.get(name, &args, responses).map_err(RpcError::invalid_params)? {
            Ok(result) => Ok(result),
            Err(needed) => {
                let Some(mrtr) = mrtr else {
                    return Err(RpcError::invalid_params(format!(
                        "Prompt {name} needs input from the client, which needs protocol 2026-07-28"
                    )));
                };
                if let Some(r) = needed.iter().find(|r| !ctx.caps.has(r.capability())) {
                    return Err(super::tools_call::missing_capability(r.capability()));
                }
                mrtr.requests.lock().extend(needed.into_iter().map(|r| (r.key, json!({ "method": r.method, "params": r.params }))));
                self.input_required(Some(&mrtr), &scope)
            }
        }
    }

    pub(super) fn complete(&self, params: &Map<String, Value>) -> Result<Value, RpcError> {
        let reference = params
            .get("ref")
            .and_then(Value::as_object)
            .ok_or_else(|| RpcError::invalid_params("completion/complete needs a \"ref\" object"))?;
        let argument = params
            .get("argument")
            .and_then(Value::as_object)
            .ok_or_else(|| RpcError::invalid_params("completion/complete needs an \"argument\" object"))?;
        let arg_name = required_str(argument, "name", "completion/complete argument")?;
        let arg_value = argument.get("value").and_then(Value::as_str).unwrap_or("");
        let values = match reference.get("type").and_then(Value::as_str) {
            Some("ref/prompt") => {
                let name = required_str(reference, "name", "ref/prompt")?;
                self.prompts
                    .complete(name, arg_name, arg_value)
                    .ok_or_else(|| RpcError::invalid_params(format!("Unknown prompt: {name}")))?
            }
            Some("ref/resource") => Vec::new(),
            _ => return Err(RpcError::invalid_params("\"ref.type\" must be \"ref/prompt\" or \"ref/resource\"")),
        };
        let total = values.len();
        let values: Vec<String> = values.into_iter().take(100).collect();
        Ok(json!({ "completion": { "values": values, "total": total, "hasMore": total > 100 } }))
    }
}
