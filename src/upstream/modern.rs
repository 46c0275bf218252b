//! Speaking protocol 2026-07-28 to a Streamable HTTP upstream: no `initialize` and no session.
//! `server/discover` tells whether the upstream speaks it; then every request carries the
//! version and toolgate's capabilities in its `_meta`, and names its method (and tool, prompt
//! or resource) in `Mcp-Method` / `Mcp-Name` headers so the upstream's own intermediaries can
//! route on them. `list_changed` arrives on a `subscriptions/listen` stream; cancelling is
//! closing a request's stream; questions for the client come back as `input_required` results
//! (see `forward.rs`).

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use http::{HeaderName, HeaderValue};
use serde_json::{Map, Value, json};

use super::connect::Handshake;
use super::error::UpstreamError;
use super::peer::Peer;

/// The revision spoken without a handshake.
pub const VERSION: &str = "2026-07-28";
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CAPS: &str = "io.modelcontextprotocol/clientCapabilities";
const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` keys of the protocol itself.
const META_PREFIX: &str = "io.modelcontextprotocol/";

pub static MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
pub static MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");

/// The id of the `subscriptions/listen` request: not a number, so its closing answer never
/// matches a request waiting on [`Peer`].
pub const LISTEN_ID: &str = "toolgate-listen";

/// Asks `server/discover`. `Ok(None)`: the upstream does not speak 2026-07-28 (it refused the
/// probe, or listed other versions only), so the caller falls back to `initialize`. A
/// transport failure or refused credentials are errors: `initialize` would meet them too.
pub async fn discover(peer: &Peer, timeout: Duration) -> Result<Option<Handshake>, UpstreamError> {
    let result = match peer.request("server/discover", json!({}), timeout).await {
        Ok(result) => result,
        Err(UpstreamError::Rpc { .. } | UpstreamError::Status(400 | 404 | 405 | 406 | 415 | 422) | UpstreamError::Protocol(_)) => {
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let speaks = result.get("supportedVersions").and_then(Value::as_array).is_some_and(|v| v.iter().any(|v| v == VERSION));
    if !speaks {
        return Ok(None);
    }
    Ok(Some(Handshake {
        version: VERSION.to_owned(),
        // Where the spec puts it, or (rmcp) in the result's `_meta`.
        server_info: result.get("serverInfo").or_else(|| result.pointer("/_meta/io.modelcontextprotocol~1serverInfo")).cloned(),
        capabilities: result.get("capabilities").cloned().unwrap_or_default(),
    }))
}

/// Puts the per-request `_meta` into a request's params (keeping what is there, such as a
/// `progressToken`), and returns the headers that name it.
pub fn stamp(message: &mut Value) -> Vec<(HeaderName, HeaderValue)> {
    let Some(m) = message.as_object_mut() else { return Vec::new() };
    let method = m.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
    let params = m.entry("params").or_insert_with(|| json!({}));
    if !params.is_object() {
        *params = json!({});
    }
    let mut headers = vec![(MCP_METHOD.clone(), encode(&method))];
    if let Some(params) = params.as_object_mut() {
        let key = match method.as_str() {
            "tools/call" | "prompts/get" => Some("name"),
            "resources/read" => Some("uri"),
            _ => None,
        };
        if let Some(name) = key.and_then(|k| params.get(k)).and_then(Value::as_str) {
            headers.push((MCP_NAME.clone(), encode(name)));
        }
        let meta = params.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(META_VERSION.into(), json!(VERSION));
            // What toolgate can ask its own clients for; `forward.rs` turns each question
            // into the client's own round (or a clear error when the client cannot answer).
            meta.insert(META_CAPS.into(), json!({"elicitation": {}, "sampling": {}, "roots": {}}));
            meta.insert(META_CLIENT_INFO.into(), json!({"name": "toolgate", "version": env!("CARGO_PKG_VERSION")}));
        }
    }
    headers
}

/// `Mcp-Param-<name>` headers for a tool whose input schema marks properties with
/// `x-mcp-header` (SEP-2243): the upstream refuses a call whose headers do not repeat them.
pub fn param_headers(marked: &[(String, String)], arguments: &Map<String, Value>) -> Vec<(HeaderName, HeaderValue)> {
    marked
        .iter()
        .filter_map(|(property, suffix)| {
            let value = match arguments.get(property)? {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let name = HeaderName::from_bytes(format!("mcp-param-{}", suffix.to_ascii_lowercase()).as_bytes()).ok()?;
            Some((name, encode(&value)))
        })
        .collect()
}

/// A 2026-07-28 result as a result of either era: the fields only that era has (`resultType`,
/// `ttlMs`, `cacheScope`, the protocol's `_meta` keys) removed. `Err` for `input_required`,
/// which toolgate answers for tools only (`forward.rs`).
pub fn settled(mut result: Value) -> Result<Value, String> {
    let Some(r) = result.as_object_mut() else { return Ok(result) };
    if r.get("resultType").and_then(Value::as_str) == Some("input_required") {
        return Err("it needs input from the client, which toolgate relays for tool calls only".into());
    }
    for key in ["resultType", "ttlMs", "cacheScope"] {
        r.remove(key);
    }
    if let Some(Value::Object(meta)) = r.get_mut("_meta") {
        match own_meta(std::mem::take(meta)) {
            Some(kept) => *meta = kept,
            None => {
                r.remove("_meta");
            }
        }
    }
    Ok(result)
}

/// An upstream's `_meta` without the protocol's own keys (its serverInfo: toolgate states its
/// own); `None` when nothing else is left.
pub fn own_meta(mut meta: Map<String, Value>) -> Option<Map<String, Value>> {
    meta.retain(|k, _| !k.starts_with(META_PREFIX));
    (!meta.is_empty()).then_some(meta)
}

/// The `subscriptions/listen` request: every list change the upstream can report.
pub fn listen_request() -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": LISTEN_ID,
        "method": "subscriptions/listen",
        "params": {"notifications": {"toolsListChanged": true, "resourcesListChanged": true, "promptsListChanged": true}},
    })
}

/// SEP-2243's header encoding: visible ASCII as it is; anything else (or surrounding spaces)
/// as `=?base64?…?=` of its UTF-8.
fn encode(value: &str) -> HeaderValue {
    let plain = !value.is_empty() && value.bytes().all(|b| (0x20..0x7f).contains(&b)) && value.trim() == value;
    let text = if plain { value.to_owned() } else { format!("=?base64?{}?=", STANDARD.encode(value)) };
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_gets_the_version_and_capabilities_in_its_meta_beside_what_was_there() {
        let mut message = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "echo", "arguments": {}, "_meta": {"progressToken": 1}}});
        stamp(&mut message);
        let meta = &message["params"]["_meta"];
        assert_eq!(meta["progressToken"], 1);
        assert_eq!(meta[META_VERSION], VERSION);
        assert!(meta[META_CAPS].is_object());
    }

    #[test]
    fn the_headers_name_the_method_and_the_tool() {
        let mut message = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo"}});
        let headers = stamp(&mut message);
        assert_eq!(
            headers,
            vec![(MCP_METHOD.clone(), HeaderValue::from_static("tools/call")), (MCP_NAME.clone(), HeaderValue::from_static("echo"))]
        );
    }

    #[test]
    fn a_resource_read_is_named_by_its_uri_and_a_list_by_nothing() {
        let mut read = json!({"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": "file:///a"}});
        assert_eq!(stamp(&mut read)[1].1, "file:///a");
        let mut list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
        assert_eq!(stamp(&mut list).len(), 1);
        assert!(list["params"]["_meta"].is_object());
    }

    #[test]
    fn a_settled_result_loses_the_modern_only_fields_and_keeps_the_rest() {
        let result = json!({"resultType": "complete", "ttlMs": 5, "cacheScope": "public", "messages": [],
            "_meta": {"io.modelcontextprotocol/serverInfo": {}, "trace": 1}});
        assert_eq!(settled(result), Ok(json!({"messages": [], "_meta": {"trace": 1}})));
    }

    #[test]
    fn an_input_required_result_is_not_settled() {
        assert!(settled(json!({"resultType": "input_required", "inputRequests": {}})).is_err());
    }

    #[test]
    fn values_that_are_not_visible_ascii_are_base64_encoded() {
        assert_eq!(encode("caf\u{e9}"), "=?base64?Y2Fmw6k=?=");
        assert_eq!(encode(" padded"), "=?base64?IHBhZGRlZA==?=");
        assert_eq!(encode("plain-name_1"), "plain-name_1");
    }

    #[test]
    fn marked_properties_become_param_headers_with_their_values() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"}, "n": {"type": "integer", "x-mcp-header": "N"}, "q": {"type": "string"}}});
        let marked = crate::tool::schema::header_params(&schema);
        let args = json!({"region": "eu-west", "n": 3, "q": "x"});
        let mut headers = param_headers(&marked, args.as_object().unwrap_or(&Map::new()));
        headers.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        assert_eq!(
            headers,
            vec![
                (HeaderName::from_static("mcp-param-n"), HeaderValue::from_static("3")),
                (HeaderName::from_static("mcp-param-region"), HeaderValue::from_static("eu-west")),
            ]
        );
    }
}
