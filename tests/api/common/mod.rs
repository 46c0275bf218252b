//! Shared test harness: a real toolgate server on a loopback port, raw HTTP helpers with
//! literal JSON-RPC bodies, and an incremental SSE reader.

#![allow(dead_code)]

pub mod certs;
pub mod cimd;
pub mod idp;
pub mod in_process;
pub mod mock_idp;
pub mod tasks;
pub mod upstream_as;
pub mod upstream_mcp;
pub mod vault_gate;

use std::time::Duration;

use futures_util::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};
use toolgate::app::{self, AppState, Running};
use toolgate::config::Settings;

pub const ACCEPT_BOTH: &str = "application/json, text/event-stream";
pub const MODERN: &str = "2026-07-28";

/// A running server and an HTTP client for it.
pub struct TestServer {
    pub running: Running,
    /// The data directory (SQLite audit database, spool); removed with the server.
    pub data: tempfile::TempDir,
    pub client: reqwest::Client,
    pub base: String,
}

impl TestServer {
    pub async fn start() -> Self {
        Self::with(|_| {}).await
    }

    /// Starts with adjusted settings (port 0, examples pack on by default).
    pub async fn with(adjust: impl FnOnce(&mut Settings)) -> Self {
        let data = tempfile::tempdir().expect("data dir");
        let mut settings = test_settings(data.path());
        adjust(&mut settings);
        let state = AppState::new(settings).await.expect("state");
        let running = app::start(state, "127.0.0.1:0".parse().expect("addr")).await.expect("server starts");
        let base = format!("http://127.0.0.1:{}", running.addr.port());
        let client = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("client");
        Self { running, data, client, base }
    }

    pub fn state(&self) -> &AppState {
        &self.running.state
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A URL on the admin listener.
    pub fn admin_url(&self, path: &str) -> String {
        let addr = self.running.admin_addr.expect("the admin listener is enabled");
        format!("http://{addr}{path}")
    }

    /// POST /mcp with the standard headers plus `extra`.
    pub async fn post(&self, body: &str, extra: &[(&str, &str)]) -> reqwest::Response {
        let mut req = self
            .client
            .post(self.url("/mcp"))
            .header("content-type", "application/json")
            .header("accept", ACCEPT_BOTH)
            .body(body.to_owned());
        for (k, v) in extra {
            req = req.header(*k, *v);
        }
        req.send().await.expect("request sent")
    }

    /// Initializes a legacy session; returns its id.
    pub async fn initialize(&self, version: &str) -> String {
        self.initialize_with(version, json!({"sampling": {}, "elicitation": {}})).await
    }

    pub async fn initialize_with(&self, version: &str, caps: Value) -> String {
        let body = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":version,"capabilities":caps,"clientInfo":{"name":"test","version":"1"}}});
        let res = self.post(&body.to_string(), &[]).await;
        assert_eq!(res.status(), 200);
        let id = res.headers().get("mcp-session-id").expect("session id").to_str().expect("ascii").to_owned();
        let ok = self.post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#, &[("mcp-session-id", &id)]).await;
        assert_eq!(ok.status(), 202);
        id
    }

    /// A request in a legacy session, answered as JSON.
    pub async fn call(&self, session: &str, id: i64, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc":"2.0","id":id,"method":method,"params":params});
        let res = self.post(&body.to_string(), &[("mcp-session-id", session)]).await;
        assert_eq!(res.status(), 200, "{method}");
        response_json(res).await
    }

    /// A modern (2026-07-28) request with correct headers and `_meta`.
    pub async fn modern(&self, id: i64, method: &str, mut params: Value, caps: Value) -> reqwest::Response {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": caps,
        });
        let mut headers = vec![("mcp-protocol-version", MODERN), ("mcp-method", method)];
        let name =
            params.get("name").or_else(|| params.get("uri")).or_else(|| params.get("taskId")).and_then(Value::as_str).map(str::to_owned);
        let name_holder;
        if let Some(n) = name {
            name_holder = n;
            headers.push(("mcp-name", &name_holder));
        }
        let body = json!({"jsonrpc":"2.0","id":id,"method":method,"params":params});
        self.post(&body.to_string(), &headers).await
    }
}

/// The settings every test server starts from, with its data under `data`.
pub fn test_settings(data: &std::path::Path) -> Settings {
    let mut settings = Settings::default();
    // Protocol tests run without auth (by explicit choice, as production never would);
    // the auth tests turn it on themselves.
    settings.auth.mode = toolgate::auth::settings::AuthMode::Off;
    // Likewise rate limits: protocol tests send bursts; the limit tests turn them on.
    settings.limits.enabled = false;
    settings.server.shutdown_grace_secs = 2;
    // Readiness still flips at once; tests need no load balancer to notice.
    settings.server.drain_delay_ms = 100;
    settings.sse.keep_alive_secs = 5;
    settings.storage.data_dir = data.to_owned();
    settings.admin.bind = "127.0.0.1:0".parse().expect("addr");
    settings
}

/// The final JSON-RPC response of a reply, whether JSON or SSE.
pub async fn response_json(res: reqwest::Response) -> Value {
    let sse = res.headers().get("content-type").is_some_and(|v| v.to_str().unwrap_or("").starts_with("text/event-stream"));
    if !sse {
        return res.json().await.expect("json body");
    }
    let mut reader = SseReader::new(res);
    while let Some(event) = reader.next_event().await {
        if let Some(msg) = event.json()
            && msg.get("id").is_some()
            && (msg.get("result").is_some() || msg.get("error").is_some())
        {
            return msg;
        }
    }
    panic!("the SSE stream ended without a response");
}

/// One SSE event.
#[derive(Debug, Default, Clone)]
pub struct Event {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: String,
    pub retry: Option<u64>,
    pub comment: bool,
}

impl Event {
    pub fn json(&self) -> Option<Value> {
        serde_json::from_str(&self.data).ok()
    }
}

/// Reads SSE events from a streaming response.
/// Calls tool `name` in session `sid` with a progress token: the progress notifications, in
/// order, and the answer that ends the stream.
pub async fn call_with_progress(s: &TestServer, sid: &str, name: &str, arguments: Value) -> (Vec<Value>, Value) {
    let params = json!({"name": name, "arguments": arguments, "_meta": {"progressToken": "p"}});
    let body = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": params});
    let mut reader = SseReader::new(s.post(&body.to_string(), &[("mcp-session-id", sid)]).await);
    let mut progress = Vec::new();
    loop {
        let (_, msg) = reader.next_message().await.expect("the stream runs to the response");
        if msg["method"] == "notifications/progress" {
            progress.push(msg["params"].clone());
        } else {
            return (progress, msg);
        }
    }
}

pub struct SseReader {
    stream: std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buf: String,
}

impl SseReader {
    pub fn new(res: reqwest::Response) -> Self {
        Self { stream: Box::pin(res.bytes_stream()), buf: String::new() }
    }

    /// The next event (keep-alive comments included), or `None` at the end of the stream.
    pub async fn next_event(&mut self) -> Option<Event> {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let mut ev = Event::default();
                for line in block.lines() {
                    if let Some(c) = line.strip_prefix(':') {
                        let _ = c;
                        ev.comment = true;
                    } else if let Some(v) = line.strip_prefix("id: ") {
                        ev.id = Some(v.to_owned());
                    } else if let Some(v) = line.strip_prefix("event: ") {
                        ev.event = Some(v.to_owned());
                    } else if let Some(v) = line.strip_prefix("data: ").or_else(|| line.strip_prefix("data:")) {
                        ev.data.push_str(v);
                    } else if let Some(v) = line.strip_prefix("retry: ") {
                        ev.retry = v.parse().ok();
                    }
                }
                return Some(ev);
            }
            match self.stream.next().await {
                Some(Ok(chunk)) => self.buf.push_str(&String::from_utf8_lossy(&chunk)),
                _ => return None,
            }
        }
    }

    /// The next event that carries a JSON message (skips comments and priming events).
    pub async fn next_message(&mut self) -> Option<(Event, Value)> {
        while let Some(ev) = self.next_event().await {
            if let Some(v) = ev.json() {
                return Some((ev, v));
            }
        }
        None
    }

    /// Like `next_message` but gives up after `limit`.
    pub async fn next_message_within(&mut self, limit: Duration) -> Option<(Event, Value)> {
        tokio::time::timeout(limit, self.next_message()).await.ok().flatten()
    }
}

/// Opens the GET stream of a legacy session.
pub async fn open_get(server: &TestServer, session: &str, last_event_id: Option<&str>) -> reqwest::Response {
    let mut headers = HeaderMap::new();
    headers.insert("accept", HeaderValue::from_static("text/event-stream"));
    headers.insert(HeaderName::from_static("mcp-session-id"), HeaderValue::from_str(session).expect("ascii"));
    if let Some(id) = last_event_id {
        headers.insert(HeaderName::from_static("last-event-id"), HeaderValue::from_str(id).expect("ascii"));
    }
    server.client.get(server.url("/mcp")).headers(headers).send().await.expect("GET sent")
}

/// A tool that reports progress once (when asked for it) and then waits until cancelled;
/// `ended` is set when its work ends by any route, completed or its future dropped.
pub fn wait_forever(ended: std::sync::Arc<std::sync::atomic::AtomicBool>) -> toolgate::tool::Tool {
    toolgate::tool::Tool::builder("wait_forever", "Waits until cancelled.").handler(move |ctx| {
        let ended = ended.clone();
        async move {
            let _ended = SetOnDrop(ended);
            ctx.progress(1.0, None, None).await;
            ctx.sleep(Duration::from_secs(60)).await.map(|()| toolgate::protocol::CallToolResult::text("finished"))
        }
    })
}

/// Sends a request in a legacy session on its own task, for tests that act while it is in
/// flight.
pub fn spawn_post(server: &TestServer, session: &str, body: String) -> tokio::task::JoinHandle<reqwest::Response> {
    let request = server
        .client
        .post(server.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", ACCEPT_BOTH)
        .header("mcp-session-id", session)
        .body(body);
    tokio::spawn(async move { request.send().await.expect("request sent") })
}

/// Sets its flag when dropped: proves a tool's work ended even when the server stopped it by
/// dropping its future.
pub struct SetOnDrop(pub std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Settings loaded from `text` as a settings file (defaults, the file, then the environment),
/// or the error as the command line would print it.
pub fn load_toml(text: &str) -> Result<Settings, String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("toolgate.toml");
    std::fs::write(&path, text).expect("written");
    Settings::load(Some(&path)).map_err(|e| format!("{:#}", anyhow::Error::from(e)))
}

/// The TOML block under `heading` in a Markdown file (tests/docs_check.py then names the test
/// that loads it instead of running `toolgate check-config` on it).
pub fn toml_block(markdown: &str, heading: &str) -> String {
    let section = markdown.split(heading).nth(1).expect("the section");
    let block = section.split("```toml\n").nth(1).expect("a toml block");
    block.split("```").next().expect("closed").to_owned()
}

/// Reads the JSON log lines of a child process until one has `message == wanted`.
pub async fn log_line(
    lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    wanted: &str,
    seen: &mut Vec<Value>,
) -> Value {
    loop {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("no {wanted:?} log line; seen: {seen:#?}"))
            .expect("read stdout")
            .unwrap_or_else(|| panic!("stdout ended before {wanted:?}; seen: {seen:#?}"));
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("a log line that is not JSON ({e}): {line}"));
        seen.push(v.clone());
        if v["message"] == wanted {
            return v;
        }
    }
}

/// Log output captured in memory: `toolgate::telemetry::init_with_writer(&settings, capture.clone())`.
#[derive(Clone, Default)]
pub struct Capture(pub std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Capture {
    /// Everything logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().map(|b| b.clone()).unwrap_or_default()).into_owned()
    }
}

impl std::io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().map_err(|_| std::io::Error::other("poisoned"))?.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Capture {
    type Writer = Capture;

    fn make_writer(&'a self) -> Capture {
        self.clone()
    }
}
