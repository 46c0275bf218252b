//! JSON-RPC 2.0 envelopes as MCP uses them: classification of an incoming body, request ids,
//! and error objects. Parsing is strict where the spec is (`jsonrpc: "2.0"`, non-null integer
//! or string ids) and lenient where it asks for forward compatibility (unknown fields).

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Standard JSON-RPC and MCP error codes used by this server.
pub mod code {
    pub const PARSE_ERROR: i32 = -32700;
    pub const INVALID_REQUEST: i32 = -32600;
    pub const METHOD_NOT_FOUND: i32 = -32601;
    pub const INVALID_PARAMS: i32 = -32602;
    pub const INTERNAL_ERROR: i32 = -32603;
    /// Transport-level failures (TS SDK convention): bad headers, not acceptable, etc.
    pub const TRANSPORT: i32 = -32000;
    /// Session not found (TS SDK convention).
    pub const SESSION_NOT_FOUND: i32 = -32001;
    /// Resource not found (2025-11-25; the modern era uses -32602 instead).
    pub const RESOURCE_NOT_FOUND: i32 = -32002;
    /// 2026-07-28: an HTTP header disagrees with the JSON-RPC body.
    pub const HEADER_MISMATCH: i32 = -32020;
    /// 2026-07-28: the request needs a client capability the client did not declare.
    pub const MISSING_CLIENT_CAPABILITY: i32 = -32021;
    /// 2026-07-28: the requested protocol version is not supported.
    pub const UNSUPPORTED_PROTOCOL_VERSION: i32 = -32022;
    /// 2025-11-25 only: the request needs the user to visit a URL first (URL-mode
    /// elicitation); `data.elicitations` lists them.
    pub const URL_ELICITATION_REQUIRED: i32 = -32042;
}

/// A request id: a string or an integer, never null (J-02). The original JSON form is kept so
/// the response echoes the same value and type (J-03).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    Number(i64),
    String(Arc<str>),
}

impl RequestId {
    fn from_value(value: &Value) -> Option<Self> {
        match value {
            Value::String(s) => Some(Self::String(s.as_str().into())),
            Value::Number(n) => n.as_i64().map(Self::Number),
            _ => None,
        }
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Number(n) => write!(f, "{n}"),
            Self::String(s) => write!(f, "{s:?}"),
        }
    }
}

/// A JSON-RPC error object. `message` is one sentence a person can act on; internals never
/// appear here (they go to the logs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RpcError {
    pub code: i32,
    pub message: Cow<'static, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i32, message: impl Into<Cow<'static, str>>) -> Self {
        Self { code, message: message.into(), data: None }
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    pub fn parse(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(code::PARSE_ERROR, message)
    }

    pub fn invalid_request(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(code::INVALID_REQUEST, message)
    }

    pub fn method_not_found(method: &str) -> Self {
        Self::new(code::METHOD_NOT_FOUND, format!("Method not found: {method}"))
    }

    pub fn invalid_params(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(code::INVALID_PARAMS, message)
    }

    /// A generic internal error: callers log the cause themselves; the client learns nothing
    /// about the server's internals.
    pub fn internal() -> Self {
        Self::new(code::INTERNAL_ERROR, "Internal error; the server logged the details")
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for RpcError {}

/// A client request.
#[derive(Clone, Debug)]
pub struct Request {
    pub id: RequestId,
    pub method: String,
    /// Always an object (absent params become an empty object).
    pub params: Map<String, Value>,
}

/// A client notification.
#[derive(Clone, Debug)]
pub struct Notification {
    pub method: String,
    pub params: Map<String, Value>,
}

/// A client response to a server-initiated request.
#[derive(Clone, Debug)]
pub struct Response {
    pub id: RequestId,
    pub outcome: Result<Value, RpcError>,
}

/// One incoming JSON-RPC message, classified.
#[derive(Clone, Debug)]
pub enum Incoming {
    Request(Request),
    Notification(Notification),
    Response(Response),
}

/// Why a message could not be classified; carries the id when it could be read, so the error
/// response can echo it (J-06: omit the id only when it cannot be read).
#[derive(Clone, Debug)]
pub struct Malformed {
    pub id: Option<RequestId>,
    pub error: RpcError,
}

impl Incoming {
    /// Classifies one JSON value as a request, notification or response.
    pub fn from_value(value: Value) -> Result<Self, Malformed> {
        let Value::Object(mut obj) = value else {
            return Err(malformed(None, "A JSON-RPC message must be a JSON object"));
        };
        let id = match obj.remove("id") {
            None => None,
            Some(raw) => match RequestId::from_value(&raw) {
                Some(id) => Some(id),
                None => {
                    return Err(malformed(None, "The \"id\" member must be a string or an integer (never null)"));
                }
            },
        };
        match obj.get("jsonrpc") {
            Some(Value::String(v)) if v == "2.0" => {}
            _ => return Err(malformed(id, "The \"jsonrpc\" member must be exactly \"2.0\"")),
        }
        if let Some(method) = obj.remove("method") {
            let Value::String(method) = method else {
                return Err(malformed(id, "The \"method\" member must be a string"));
            };
            let params = match obj.remove("params") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(map)) => map,
                Some(_) => {
                    return Err(Malformed { id, error: RpcError::invalid_params("\"params\" must be a JSON object") });
                }
            };
            return Ok(match id {
                Some(id) => Self::Request(Request { id, method, params }),
                None => Self::Notification(Notification { method, params }),
            });
        }
        let Some(id) = id else {
            return Err(malformed(
                None,
                "A message needs a \"method\" (request or notification) or an \"id\" with \"result\"/\"error\" (response)",
            ));
        };
        if let Some(result) = obj.remove("result") {
            return Ok(Self::Response(Response { id, outcome: Ok(result) }));
        }
        if let Some(error) = obj.remove("error") {
            let error = serde_json::from_value::<RpcError>(error)
                .map_err(|_| malformed(Some(id.clone()), "The \"error\" member must have an integer \"code\" and a string \"message\""))?;
            return Ok(Self::Response(Response { id, outcome: Err(error) }));
        }
        Err(malformed(Some(id), "A response needs a \"result\" or an \"error\" member"))
    }
}

fn malformed(id: Option<RequestId>, message: &'static str) -> Malformed {
    Malformed { id, error: RpcError::invalid_request(message) }
}

/// Serializes a success response.
pub fn result_message(id: &RequestId, result: &Value) -> Value {
    serde_json::json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// A success response written straight to its wire form, without first building (and deep
/// copying into) a `Value` envelope: this is the hot path of every request.
pub fn result_string(id: &RequestId, result: &Value) -> String {
    #[derive(Serialize)]
    struct Envelope<'a> {
        jsonrpc: &'static str,
        id: &'a RequestId,
        result: &'a Value,
    }
    serde_json::to_string(&Envelope { jsonrpc: "2.0", id, result }).unwrap_or_else(|e| {
        // Serializing a Value with string keys cannot fail; keep the client informed anyway.
        tracing::error!(error = %e, "cannot serialize a response");
        error_message(Some(id), &RpcError::internal()).to_string()
    })
}

/// Called with the code of every error response built: the metrics layer installs its counter
/// here ([`on_error`]), so the wire vocabulary depends on nothing above it.
static ERROR_HOOK: std::sync::OnceLock<fn(i32)> = std::sync::OnceLock::new();

/// Installs the function told of every error response (once; later calls are ignored).
pub fn on_error(hook: fn(i32)) {
    let _ = ERROR_HOOK.set(hook);
}

/// Serializes an error response. `id` is omitted when unknown (J-06), never `null`.
///
/// Every error response the server sends is built here, so this is where they are counted.
pub fn error_message(id: Option<&RequestId>, error: &RpcError) -> Value {
    if let Some(hook) = ERROR_HOOK.get() {
        hook(error.code);
    }
    match id {
        Some(id) => serde_json::json!({ "jsonrpc": "2.0", "id": id, "error": error }),
        None => serde_json::json!({ "jsonrpc": "2.0", "error": error }),
    }
}

/// Serializes a server notification.
pub fn notification_message(method: &str, params: Option<Value>) -> Value {
    match params {
        Some(params) => serde_json::json!({ "jsonrpc": "2.0", "method": method, "params": params }),
        None => serde_json::json!({ "jsonrpc": "2.0", "method": method }),
    }
}

/// Serializes a server-initiated request.
pub fn request_message(id: &RequestId, method: &str, params: Value) -> Value {
    serde_json::json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn classify(v: Value) -> Result<Incoming, Malformed> {
        Incoming::from_value(v)
    }

    #[test]
    fn request_keeps_id_type() {
        let Ok(Incoming::Request(r)) = classify(json!({"jsonrpc":"2.0","id":"7","method":"ping"})) else {
            panic!("expected a request");
        };
        assert_eq!(r.id, RequestId::String("7".into()));
        assert_eq!(serde_json::to_value(&r.id).ok(), Some(json!("7")));
        let Ok(Incoming::Request(r)) = classify(json!({"jsonrpc":"2.0","id":7,"method":"ping"})) else {
            panic!("expected a request");
        };
        assert_eq!(serde_json::to_value(&r.id).ok(), Some(json!(7)));
    }

    #[test]
    fn null_and_float_ids_are_invalid_requests() {
        for id in [json!(null), json!(1.5), json!([1])] {
            let err = classify(json!({"jsonrpc":"2.0","id":id,"method":"ping"})).err();
            let err = err.map(|m| (m.id, m.error.code));
            assert_eq!(err, Some((None, code::INVALID_REQUEST)));
        }
    }

    #[test]
    fn missing_jsonrpc_is_invalid_but_keeps_id() {
        let err = classify(json!({"id":3,"method":"ping"})).err();
        assert_eq!(err.map(|m| (m.id, m.error.code)), Some((Some(RequestId::Number(3)), code::INVALID_REQUEST)));
    }

    #[test]
    fn notification_and_response_are_classified() {
        assert!(matches!(classify(json!({"jsonrpc":"2.0","method":"notifications/initialized"})), Ok(Incoming::Notification(_))));
        assert!(matches!(classify(json!({"jsonrpc":"2.0","id":1,"result":{}})), Ok(Incoming::Response(_))));
        assert!(matches!(
            classify(json!({"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"no"}})),
            Ok(Incoming::Response(Response { outcome: Err(_), .. }))
        ));
    }

    #[test]
    fn non_string_method_and_array_params_are_rejected() {
        let err = classify(json!({"jsonrpc":"2.0","method":5})).err();
        assert_eq!(err.map(|m| m.error.code), Some(code::INVALID_REQUEST));
        let err = classify(json!({"jsonrpc":"2.0","id":1,"method":"x","params":[1]})).err();
        assert_eq!(err.map(|m| m.error.code), Some(code::INVALID_PARAMS));
    }

    #[test]
    fn result_string_matches_the_value_form() {
        let id = RequestId::String("a".into());
        let result = serde_json::json!({"tools": [], "nextCursor": "x"});
        let parsed: Value = serde_json::from_str(&result_string(&id, &result)).unwrap_or_default();
        assert_eq!(parsed, result_message(&id, &result));
    }

    #[test]
    fn error_without_id_omits_the_member() {
        let msg = error_message(None, &RpcError::parse("bad"));
        assert!(msg.get("id").is_none());
    }
}
