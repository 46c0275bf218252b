//! What a running tool receives: its arguments, a cancellation token, progress and log
//! reporters, and a way to ask the client for input (elicitation, sampling, roots).
//!
//! Asking the client works in both eras behind one call: a legacy session gets a real
//! server-to-client request on the call's stream; a modern (2026-07-28) request gets the
//! client's answer from `inputResponses` when it is there, and otherwise the tool stops with
//! [`ToolError::InputRequired`] and the server answers with an `InputRequiredResult` (MRTR).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::ToolError;
use crate::protocol::ProtocolVersion;
use crate::protocol::jsonrpc::RpcError;

/// RFC 5424 severities as MCP names them, least severe first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum LogLevel {
    Debug = 0,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

impl LogLevel {
    const ALL: [Self; 8] =
        [Self::Debug, Self::Info, Self::Notice, Self::Warning, Self::Error, Self::Critical, Self::Alert, Self::Emergency];

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|l| l.as_str() == s)
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Debug => "debug",
            Self::Info => "info",
            Self::Notice => "notice",
            Self::Warning => "warning",
            Self::Error => "error",
            Self::Critical => "critical",
            Self::Alert => "alert",
            Self::Emergency => "emergency",
        }
    }

    pub(crate) fn from_u8(v: u8) -> Self {
        Self::ALL.get(usize::from(v)).copied().unwrap_or(Self::Emergency)
    }
}

/// The client features a tool may rely on, as the client declared them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientCaps {
    pub sampling: bool,
    pub elicitation_form: bool,
    pub elicitation_url: bool,
    pub roots: bool,
    /// The 2026-07-28 tasks extension (`extensions["io.modelcontextprotocol/tasks"]`): the
    /// server may answer a `tools/call` with a task.
    pub tasks: bool,
}

impl ClientCaps {
    /// Whether the named capability (`sampling`, `elicitation`, `roots`) was declared.
    pub fn has(&self, capability: &str) -> bool {
        match capability {
            "sampling" => self.sampling,
            "elicitation" => self.elicitation_form,
            "roots" => self.roots,
            _ => false,
        }
    }

    /// Reads a `ClientCapabilities` object. An empty `elicitation: {}` means form mode.
    pub fn from_json(caps: Option<&Value>) -> Self {
        let Some(caps) = caps.and_then(Value::as_object) else { return Self::default() };
        let elicitation = caps.get("elicitation").and_then(Value::as_object);
        let (form, url) = match elicitation {
            None => (false, false),
            Some(e) if e.is_empty() => (true, false),
            Some(e) => (e.contains_key("form"), e.contains_key("url")),
        };
        let tasks = caps.get("extensions").and_then(|e| e.get(crate::protocol::task::TASKS_EXTENSION)).is_some();
        Self {
            sampling: caps.contains_key("sampling"),
            elicitation_form: form,
            elicitation_url: url,
            roots: caps.contains_key("roots"),
            tasks,
        }
    }
}

/// The connection back to the client for one call. Implemented by the transport.
pub trait ClientChannel: Send + Sync {
    /// Sends a notification related to this call (progress, log message).
    fn notify(&self, message: Value) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
    /// Sends a server-to-client request and waits for the client's answer.
    fn request(&self, method: &str, params: Value) -> Pin<Box<dyn Future<Output = Result<Value, RpcError>> + Send + '_>>;
    /// Whether `request` can reach the client at all.
    fn can_request(&self) -> bool;
    /// Asks for several inputs and waits for every answer, in request order. By default one
    /// request after another; a task's channel asks for all of them at once.
    fn request_all(&self, requests: Vec<InputRequest>) -> Pin<Box<dyn Future<Output = Result<Vec<Value>, RpcError>> + Send + '_>> {
        Box::pin(async move {
            let mut answers = Vec::with_capacity(requests.len());
            for r in requests {
                let answer = self
                    .request(r.method, r.params)
                    .await
                    .map_err(|e| RpcError::new(e.code, format!("The client answered {} with an error: {}", r.method, e.message)))?;
                answers.push(answer);
            }
            Ok(answers)
        })
    }
    /// Closes the call's HTTP connection without ending its stream (SEP-1699); the client
    /// resumes with `Last-Event-ID`. Returns false where streams are not resumable.
    fn close_connection(&self) -> Pin<Box<dyn Future<Output = bool> + Send + '_>>;
}

/// The channel of a detached context: nobody is listening.
struct NoClient;

/// A channel with no client behind it: notifications go nowhere, requests fail (a task runs
/// after its request has been answered).
pub fn no_client() -> Arc<dyn ClientChannel> {
    Arc::new(NoClient)
}

impl ClientChannel for NoClient {
    fn notify(&self, _message: Value) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async {})
    }

    fn request(&self, method: &str, _params: Value) -> Pin<Box<dyn Future<Output = Result<Value, RpcError>> + Send + '_>> {
        let error = RpcError::new(-32603, format!("{method}: no client is connected to this call"));
        Box::pin(async move { Err(error) })
    }

    fn can_request(&self) -> bool {
        false
    }

    fn close_connection(&self) -> Pin<Box<dyn Future<Output = bool> + Send + '_>> {
        Box::pin(async { false })
    }
}

/// The MRTR state of one modern call: what the client answered, the verified state it
/// echoed, and what the tool asks for next.
#[derive(Debug, Default)]
pub(crate) struct Mrtr {
    /// What the state is bound to (method, endpoint and name): the next state is signed for it.
    pub scope: String,
    pub responses: Map<String, Value>,
    pub state: Option<Value>,
    pub requests: Mutex<Map<String, Value>>,
    pub next_state: Mutex<Option<Value>>,
}

/// Where the request answers a handler's ask to become a task: the task's channel, or `None`.
pub(crate) type TaskAsk = tokio::sync::oneshot::Sender<Option<Arc<dyn ClientChannel>>>;

/// How a call that began within its request becomes a task
/// ([`ToolContext::continue_as_task`]): the handler's ask goes to the request, which answers
/// with the task's channel once the task is stored (or `None` when it cannot become one).
pub(crate) struct Escalation {
    pub ask: Mutex<Option<tokio::sync::oneshot::Sender<TaskAsk>>>,
    /// The task's channel, once it became one: later questions park the task.
    pub channel: std::sync::OnceLock<Arc<dyn ClientChannel>>,
}

/// Everything the server hands a tool for one call.
pub(crate) struct ContextParts {
    pub tool: Arc<str>,
    pub arguments: Map<String, Value>,
    pub cancel: CancellationToken,
    pub progress_token: Option<Value>,
    pub log_level: Option<Arc<AtomicU8>>,
    pub channel: Arc<dyn ClientChannel>,
    pub caps: ClientCaps,
    pub version: ProtocolVersion,
    pub mrtr: Option<Arc<Mrtr>>,
    pub principal: Option<Arc<crate::principal::Principal>>,
    /// The caller's verified token, for an upstream's token exchange only.
    pub token: Option<crate::principal::BearerToken>,
    /// Set for a call that may still become a task.
    pub escalation: Option<Arc<Escalation>>,
}

/// The handle a tool handler works with.
pub struct ToolContext {
    parts: ContextParts,
    last_progress: Mutex<Option<f64>>,
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext").field("tool", &self.parts.tool).finish_non_exhaustive()
    }
}

impl ToolContext {
    pub(crate) fn new(parts: ContextParts) -> Self {
        Self { parts, last_progress: Mutex::new(None) }
    }

    /// A context with no client behind it: progress and log messages go nowhere and requests
    /// to the client fail. For running a tool outside a request (tests, the command line).
    pub fn detached(tool: &str, arguments: Map<String, Value>, cancel: CancellationToken) -> Self {
        Self::new(ContextParts {
            tool: tool.into(),
            arguments,
            cancel,
            progress_token: None,
            log_level: None,
            channel: Arc::new(NoClient),
            caps: ClientCaps::default(),
            version: ProtocolVersion::V2025_11_25,
            mrtr: None,
            principal: None,
            token: None,
            escalation: None,
        })
    }

    pub fn tool_name(&self) -> &str {
        &self.parts.tool
    }

    /// The validated arguments.
    pub fn arguments(&self) -> &Map<String, Value> {
        &self.parts.arguments
    }

    /// The arguments as a typed struct.
    pub fn args<T: DeserializeOwned>(&self) -> Result<T, ToolError> {
        T::deserialize(Value::Object(self.parts.arguments.clone())).map_err(|e| ToolError::InvalidArguments(e.to_string()))
    }

    /// Who is calling (issuer, subject, client id, scopes); `None` when auth is off.
    pub fn principal(&self) -> Option<&crate::principal::Principal> {
        self.parts.principal.as_deref()
    }

    /// The caller's verified bearer token: only an upstream's token exchange may use it.
    pub(crate) fn caller_token(&self) -> Option<&crate::principal::BearerToken> {
        self.parts.token.as_ref()
    }

    pub fn protocol_version(&self) -> ProtocolVersion {
        self.parts.version
    }

    pub fn client_caps(&self) -> ClientCaps {
        self.parts.caps
    }

    /// Cancelled when the client cancels, the call times out, or the server shuts down.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.parts.cancel
    }

    pub fn is_cancelled(&self) -> bool {
        self.parts.cancel.is_cancelled()
    }

    /// Sleeps, but returns [`ToolError::Cancelled`] as soon as the call is cancelled.
    pub async fn sleep(&self, duration: std::time::Duration) -> Result<(), ToolError> {
        tokio::select! {
            () = tokio::time::sleep(duration) => Ok(()),
            () = self.parts.cancel.cancelled() => Err(ToolError::Cancelled),
        }
    }

    /// The caller's `progressToken`, if it asked for progress.
    pub fn progress_token(&self) -> Option<&Value> {
        self.parts.progress_token.as_ref()
    }

    /// Whether the caller asked for progress (sent a `progressToken`).
    pub fn wants_progress(&self) -> bool {
        self.parts.progress_token.is_some()
    }

    /// Reports progress. Values that do not increase are dropped, so clients only ever see a
    /// strictly increasing sequence (U-03); nothing is sent without a progress token.
    pub async fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) {
        let Some(token) = &self.parts.progress_token else { return };
        {
            let mut last = self.last_progress.lock();
            if last.is_some_and(|l| progress <= l) {
                return;
            }
            *last = Some(progress);
        }
        let mut params = json!({ "progressToken": token, "progress": progress });
        if let Some(total) = total {
            params["total"] = json!(total);
        }
        if let (Some(message), true) = (message, self.parts.version >= ProtocolVersion::V2025_03_26) {
            params["message"] = json!(message);
        }
        self.notify("notifications/progress", params).await;
    }

    /// Sends a log message to the client if its level passes the client's threshold.
    pub async fn log(&self, level: LogLevel, logger: Option<&str>, data: Value) {
        let Some(threshold) = &self.parts.log_level else { return };
        if level < LogLevel::from_u8(threshold.load(Ordering::Relaxed)) {
            return;
        }
        let mut params = json!({ "level": level.as_str(), "data": data });
        if let Some(logger) = logger {
            params["logger"] = json!(logger);
        }
        self.notify("notifications/message", params).await;
    }

    async fn notify(&self, method: &str, params: Value) {
        if self.parts.cancel.is_cancelled() {
            return;
        }
        let message = json!({ "jsonrpc": "2.0", "method": method, "params": params });
        self.parts.channel.notify(message).await;
    }

    /// Ends the HTTP connection of this call while the call goes on (SEP-1699 polling): the
    /// client reconnects with `Last-Event-ID` after the `retry` delay and receives the rest,
    /// including the result. Only 2025-11-25 sessions have resumable streams; elsewhere this
    /// does nothing and returns false.
    pub async fn close_stream(&self) -> bool {
        self.parts.mrtr.is_none() && self.parts.version.has_priming_events() && self.parts.channel.close_connection().await
    }

    /// Asks the user for structured input (`elicitation/create`, form mode).
    pub async fn elicit(&self, key: &str, params: Value) -> Result<Value, ToolError> {
        let mut answers = self.request_inputs(vec![InputRequest::elicit(key, params)]).await?;
        Ok(answers.pop().unwrap_or(Value::Null))
    }

    /// Asks the client's model for a completion (`sampling/createMessage`).
    pub async fn sample(&self, key: &str, params: Value) -> Result<Value, ToolError> {
        let mut answers = self.request_inputs(vec![InputRequest::sample(key, params)]).await?;
        Ok(answers.pop().unwrap_or(Value::Null))
    }

    /// Asks the client for its filesystem roots (`roots/list`).
    pub async fn list_roots(&self, key: &str) -> Result<Value, ToolError> {
        let mut answers = self.request_inputs(vec![InputRequest::roots(key)]).await?;
        Ok(answers.pop().unwrap_or(Value::Null))
    }

    /// Several inputs at once, answers in request order. Legacy sessions send the requests
    /// one after another; a modern call asks for every missing one in a single
    /// `InputRequiredResult` (MRTR), so the client answers them all in one retry.
    pub async fn request_inputs(&self, requests: Vec<InputRequest>) -> Result<Vec<Value>, ToolError> {
        for r in &requests {
            if !self.parts.caps.has(r.capability) {
                return Err(ToolError::MissingClientCapability(r.capability));
            }
        }
        if let Some(task) = self.parts.escalation.as_ref().and_then(|e| e.channel.get()) {
            return tokio::select! {
                answers = task.request_all(requests) => answers.map_err(|e| ToolError::Failed(e.message.into_owned())),
                () = self.parts.cancel.cancelled() => Err(ToolError::Cancelled),
            };
        }
        if let Some(mrtr) = &self.parts.mrtr {
            let mut answers = Vec::with_capacity(requests.len());
            let mut missing = Map::new();
            for r in requests {
                match mrtr.responses.get(&r.key) {
                    Some(answer) => answers.push(answer.clone()),
                    None => {
                        missing.insert(r.key, json!({ "method": r.method, "params": r.params }));
                    }
                }
            }
            if missing.is_empty() {
                return Ok(answers);
            }
            mrtr.requests.lock().extend(missing);
            return Err(ToolError::InputRequired);
        }
        if !self.parts.channel.can_request() {
            return Err(ToolError::Failed("This tool needs input from the client, which is not possible on this connection".into()));
        }
        tokio::select! {
            answers = self.parts.channel.request_all(requests) => answers.map_err(|e| ToolError::Failed(e.message.into_owned())),
            () = self.parts.cancel.cancelled() => Err(ToolError::Cancelled),
        }
    }

    /// For a tool registered with `input_before_task`: answers the call's request with a task
    /// (once it is stored) while this handler goes on; what the handler returns becomes the
    /// task's result, and later questions to the client park the task `input_required`.
    /// Returns false, and the handler simply goes on within its request, where the call
    /// cannot become a task (another era, a client without the tasks extension, the running
    /// task cap, or a second call).
    pub async fn continue_as_task(&self) -> bool {
        let Some(escalation) = &self.parts.escalation else { return false };
        let Some(ask) = escalation.ask.lock().take() else { return false };
        let (reply, answer) = tokio::sync::oneshot::channel();
        if ask.send(reply).is_err() {
            return false;
        }
        match answer.await {
            Ok(Some(channel)) => escalation.channel.set(channel).is_ok(),
            _ => false,
        }
    }

    /// Modern era: the client's answer to input request `key` in this retry, if any.
    pub fn input_response(&self, key: &str) -> Option<&Value> {
        self.parts.mrtr.as_ref().and_then(|m| m.responses.get(key))
    }

    /// Modern era: asks the client `request` (again, even if this retry answered it) and ends
    /// the call with `input_required`. Elsewhere: a failure saying so.
    pub fn ask_again(&self, request: InputRequest) -> ToolError {
        let Some(mrtr) = &self.parts.mrtr else {
            return ToolError::Failed("This tool needs input from the client, which is not possible on this connection".into());
        };
        mrtr.requests.lock().insert(request.key, json!({ "method": request.method, "params": request.params }));
        ToolError::InputRequired
    }

    /// Modern era: the verified `requestState` the client echoed from an earlier
    /// `InputRequiredResult` of this tool, if any.
    pub fn request_state(&self) -> Option<&Value> {
        self.parts.mrtr.as_ref().and_then(|m| m.state.as_ref())
    }

    /// Modern era: state to carry into the client's retry. The server signs it, so what comes
    /// back is exactly what the tool set here.
    pub fn set_request_state(&self, state: Value) {
        if let Some(mrtr) = &self.parts.mrtr {
            *mrtr.next_state.lock() = Some(state);
        }
    }
}

/// One input a tool needs from the client.
#[derive(Clone, Debug)]
pub struct InputRequest {
    /// Names the input in MRTR `inputRequests` / `inputResponses`.
    pub key: String,
    pub method: &'static str,
    pub params: Value,
    capability: &'static str,
}

impl InputRequest {
    pub fn elicit(key: impl Into<String>, params: Value) -> Self {
        Self { key: key.into(), method: "elicitation/create", params, capability: "elicitation" }
    }

    pub fn sample(key: impl Into<String>, params: Value) -> Self {
        Self { key: key.into(), method: "sampling/createMessage", params, capability: "sampling" }
    }

    pub fn roots(key: impl Into<String>) -> Self {
        Self { key: key.into(), method: "roots/list", params: json!({}), capability: "roots" }
    }

    /// The client capability this request needs.
    pub fn capability(&self) -> &'static str {
        self.capability
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_caps_read_elicitation_modes() {
        let caps = ClientCaps::from_json(Some(&json!({"elicitation": {}, "sampling": {}})));
        assert!(caps.elicitation_form && !caps.elicitation_url && caps.sampling && !caps.roots);
        let caps = ClientCaps::from_json(Some(&json!({"elicitation": {"url": {}}})));
        assert!(!caps.elicitation_form && caps.elicitation_url);
        assert_eq!(ClientCaps::from_json(None), ClientCaps::default());
    }

    #[test]
    fn log_levels_order_and_parse() {
        assert!(LogLevel::Debug < LogLevel::Emergency);
        assert_eq!(LogLevel::parse("warning"), Some(LogLevel::Warning));
        assert_eq!(LogLevel::parse("verbose"), None);
        assert_eq!(LogLevel::from_u8(LogLevel::Error as u8), LogLevel::Error);
    }
}
