//! Prometheus metrics over real HTTP: `/metrics` on the admin listener (never on the public
//! port, no token needed even with auth on), valid text exposition, and the series that real
//! traffic must move: HTTP, MCP methods, JSON-RPC errors, tool calls by outcome, SSE streams
//! open and closed, list_changed fan-out, rate limits, auth results, audit writes, the pool.
//!
//! Counters are process-wide and the tests of this file may share a process, so they assert
//! lower bounds or deltas; the tests run one at a time so that gauges are exact.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{SseReader, TestServer, open_get};
use serde_json::{Value, json};
use toolgate::auth::settings::AuthMode;
use toolgate::protocol::CallToolResult;
use toolgate::tool::Tool;

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

/// Gauges are process-wide: one test at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// One sample of a scrape.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// A parsed scrape.
#[derive(Debug)]
struct Scrape {
    text: String,
    samples: Vec<Sample>,
}

impl Scrape {
    /// The sum of every sample of `name` whose labels include `labels`.
    fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.matching(name, labels).map(|s| s.value).sum()
    }

    /// The single sample of `name` with exactly these labels' values (others may exist).
    fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let found: Vec<&Sample> = self.matching(name, labels).collect();
        assert!(found.len() <= 1, "{name}{labels:?} matches several series: {found:?}");
        found.first().map(|s| s.value)
    }

    fn matching<'a>(&'a self, name: &'a str, labels: &'a [(&str, &str)]) -> impl Iterator<Item = &'a Sample> {
        self.samples.iter().filter(move |s| s.name == name && labels.iter().all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v)))
    }
}

/// Parses the text exposition format (0.0.4) strictly: every line is a `# HELP`, a `# TYPE`
/// or a sample, every sample belongs to a declared family, every toolgate family has help.
fn parse(text: &str) -> Scrape {
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut helps: BTreeMap<String, String> = BTreeMap::new();
    let mut samples = Vec::new();
    for line in text.lines() {
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            assert!(valid_name(name), "bad metric name in {line:?}");
            helps.insert(name.to_owned(), help.to_owned());
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE has a kind");
            assert!(valid_name(name), "bad metric name in {line:?}");
            assert!(["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind), "{line:?}");
            assert!(types.insert(name.to_owned(), kind.to_owned()).is_none(), "family declared twice: {line:?}");
            continue;
        }
        assert!(!line.starts_with('#'), "unknown comment line {line:?}");
        samples.push(parse_sample(line));
    }
    for s in &samples {
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| s.name.strip_suffix(suffix).filter(|base| types.get(*base).is_some_and(|t| t == "histogram")))
            .unwrap_or(&s.name);
        let kind = types.get(family).unwrap_or_else(|| panic!("sample {} has no TYPE line", s.name));
        if kind == "histogram" && s.name.ends_with("_bucket") {
            assert!(s.labels.contains_key("le"), "bucket without le: {s:?}");
        }
    }
    for name in types.keys().filter(|n| n.starts_with("toolgate_")) {
        assert!(helps.get(name).is_some_and(|h| !h.is_empty()), "{name} has no help text");
    }
    Scrape { text: text.to_owned(), samples }
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// `name{k="v",...} value`, with the format's escapes in label values.
fn parse_sample(line: &str) -> Sample {
    let name_end = line.find(['{', ' ']).unwrap_or_else(|| panic!("no value in {line:?}"));
    let name = &line[..name_end];
    assert!(valid_name(name), "bad metric name in {line:?}");
    let mut labels = BTreeMap::new();
    let mut rest = &line[name_end..];
    if let Some(inner) = rest.strip_prefix('{') {
        let mut chars = inner.char_indices().peekable();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            if c == '}' {
                end = Some(i);
                break;
            }
            if c == ',' {
                continue;
            }
            let key_start = i;
            let mut key_end = i;
            for (j, c) in chars.by_ref() {
                if c == '=' {
                    key_end = j;
                    break;
                }
            }
            let key = &inner[key_start..key_end];
            assert!(valid_name(key) && !key.contains(':'), "bad label name {key:?} in {line:?}");
            assert_eq!(chars.next().map(|(_, c)| c), Some('"'), "label value not quoted in {line:?}");
            let mut value = String::new();
            loop {
                match chars.next().map(|(_, c)| c) {
                    Some('"') => break,
                    Some('\\') => match chars.next().map(|(_, c)| c) {
                        Some('n') => value.push('\n'),
                        Some(c @ ('\\' | '"')) => value.push(c),
                        other => panic!("bad escape {other:?} in {line:?}"),
                    },
                    Some(c) => value.push(c),
                    None => panic!("unterminated label value in {line:?}"),
                }
            }
            labels.insert(key.to_owned(), value);
        }
        let end = end.unwrap_or_else(|| panic!("unterminated label set in {line:?}"));
        rest = &inner[end + 1..];
    }
    let mut fields = rest.split_whitespace();
    let raw = fields.next().unwrap_or_else(|| panic!("no value in {line:?}"));
    let value = match raw {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        v => v.parse().unwrap_or_else(|_| panic!("bad value {v:?} in {line:?}")),
    };
    if let Some(ts) = fields.next() {
        assert!(ts.parse::<i64>().is_ok(), "bad timestamp in {line:?}");
    }
    assert!(fields.next().is_none(), "trailing text in {line:?}");
    Sample { name: name.to_owned(), labels, value }
}

async fn scrape(s: &TestServer) -> Scrape {
    let res = s.client.get(s.admin_url("/metrics")).send().await.expect("scrape");
    assert_eq!(res.status(), 200);
    let content_type = res.headers()["content-type"].to_str().expect("ascii").to_owned();
    assert!(content_type.starts_with("text/plain; version=0.0.4"), "{content_type}");
    parse(&res.text().await.expect("body"))
}

/// Scrapes until `check` holds (background work: audit writer, stream teardown).
async fn scrape_until(s: &TestServer, what: &str, check: impl Fn(&Scrape) -> bool) -> Scrape {
    for _ in 0..100 {
        let m = scrape(s).await;
        if check(&m) {
            return m;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("metrics never showed {what}:\n{}", scrape(s).await.text);
}

async fn call(s: &TestServer, sid: &str, id: i64, params: Value) -> reqwest::Response {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}).to_string();
    s.post(&body, &[("mcp-session-id", sid)]).await
}

/// Real traffic of every kind moves the series it should, and nothing unbounded (paths,
/// session ids) becomes a label.
/// A server with the audit log and a one-call limit on `get_current_time`, before and after
/// traffic that touches every family: a session, a list, an ok call, a failed call, an
/// unknown tool, a rate-limited call, a modern request, two malformed bodies, an unknown path.
struct Traffic {
    s: TestServer,
    sid: String,
    before: Scrape,
    after: Scrape,
}

async fn traffic() -> Traffic {
    let s = TestServer::with(|c| {
        c.audit.enabled = true;
        c.limits.enabled = true;
        c.limits.tools.insert("get_current_time".into(), toolgate::limits::ToolLimit { per_minute: Some(1), burst: Some(1), cost: 1 });
    })
    .await;
    let before = scrape(&s).await;
    let sid = s.initialize("2025-11-25").await;
    let list = s.call(&sid, 2, "tools/list", json!({})).await;
    assert!(list["result"]["tools"].as_array().is_some_and(|t| !t.is_empty()));
    let ok = common::response_json(call(&s, &sid, 3, json!({"name": "calculate_sum", "arguments": {"a": 1, "b": 2}})).await).await;
    assert!(ok["result"]["content"].is_array() && ok["result"]["isError"] != json!(true), "{ok}");
    let failed = common::response_json(call(&s, &sid, 4, json!({"name": "analyze_csv", "arguments": {"path": "missing.csv"}})).await).await;
    assert_eq!(failed["result"]["isError"], json!(true), "{failed}");
    let unknown = common::response_json(call(&s, &sid, 5, json!({"name": "no_such_tool"})).await).await;
    assert_eq!(unknown["error"]["code"], json!(-32602), "{unknown}");
    assert_eq!(call(&s, &sid, 6, json!({"name": "get_current_time"})).await.status(), 200);
    assert_eq!(call(&s, &sid, 7, json!({"name": "get_current_time"})).await.status(), 429);
    assert_eq!(s.modern(8, "server/discover", json!({}), json!({})).await.status(), 200);
    // 400 with -32700 and with -32600; a path that matches no route.
    assert_eq!(s.post("{not json", &[]).await.status(), 400);
    assert_eq!(s.post(r#"{"jsonrpc":"2.0","id":9}"#, &[]).await.status(), 400);
    assert_eq!(s.client.get(s.url("/no/such/path")).send().await.expect("sent").status(), 404);
    let after = scrape(&s).await;
    Traffic { s, sid, before, after }
}

impl Traffic {
    /// How much `name` with `labels` grew over the traffic.
    fn delta(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.after.sum(name, labels) - self.before.sum(name, labels)
    }
}

#[tokio::test]
async fn the_scrape_names_the_build_and_the_replica() {
    let _serial = SERIAL.lock().await;
    let m = traffic().await.after;
    let build = m.samples.iter().find(|x| x.name == "toolgate_build_info").expect("build info");
    assert_eq!(build.value, 1.0);
    assert_eq!(build.labels.get("version").map(String::as_str), Some(env!("CARGO_PKG_VERSION")));
    assert!(build.labels.get("git_sha").is_some_and(|g| !g.is_empty()));
    assert!(build.labels.get("replica").is_some_and(|r| !r.is_empty()), "the replica is named");
}

#[tokio::test]
async fn http_requests_are_counted_by_route_method_and_status() {
    let _serial = SERIAL.lock().await;
    let t = traffic().await;
    let http = |route, method, status| t.delta("toolgate_http_requests_total", &[("route", route), ("method", method), ("status", status)]);
    assert!(http("/mcp", "POST", "200") >= 7.0, "{}", t.after.text);
    assert!(http("/mcp", "POST", "202") >= 1.0, "notifications/initialized");
    assert!(http("/mcp", "POST", "429") >= 1.0);
    assert!(http("/mcp", "POST", "400") >= 2.0);
    assert!(http("unmatched", "GET", "404") >= 1.0);
}

#[tokio::test]
async fn http_durations_are_a_histogram_whose_inf_bucket_holds_every_request() {
    let _serial = SERIAL.lock().await;
    let t = traffic().await;
    let post = [("route", "/mcp"), ("method", "POST")];
    assert!(t.delta("toolgate_http_request_duration_seconds_count", &post) >= 11.0);
    assert!(t.after.sum("toolgate_http_request_duration_seconds_sum", &post) > 0.0);
    let count = t.after.sum("toolgate_http_request_duration_seconds_count", &post);
    let inf = t.after.get("toolgate_http_request_duration_seconds_bucket", &[("route", "/mcp"), ("method", "POST"), ("le", "+Inf")]);
    assert_eq!(inf, Some(count));
    assert_eq!(t.after.get("toolgate_http_requests_in_flight", &[]), Some(0.0), "scrapes are not public-port requests");
}

#[tokio::test]
async fn mcp_requests_are_counted_by_method_and_era() {
    let _serial = SERIAL.lock().await;
    let t = traffic().await;
    let mcp = |method, era| t.delta("toolgate_mcp_requests_total", &[("method", method), ("era", era)]);
    assert!(mcp("initialize", "legacy") >= 1.0);
    assert!(mcp("tools/list", "legacy") >= 1.0);
    assert!(mcp("tools/call", "legacy") >= 5.0);
    assert!(mcp("server/discover", "modern") >= 1.0);
}

#[tokio::test]
async fn json_rpc_errors_are_counted_by_code() {
    let _serial = SERIAL.lock().await;
    let t = traffic().await;
    let errors = |code| t.delta("toolgate_jsonrpc_errors_total", &[("code", code)]);
    assert!(errors("-32602") >= 1.0, "unknown tool");
    assert!(errors("-32700") >= 1.0, "parse error");
    assert!(errors("-32600") >= 1.0, "invalid request");
    assert!(errors("-32000") >= 1.0, "rate limited");
}

#[tokio::test]
async fn tool_calls_are_counted_by_tool_and_outcome_with_every_outcome_present() {
    let _serial = SERIAL.lock().await;
    let t = traffic().await;
    let calls = |tool, outcome| t.delta("toolgate_tool_calls_total", &[("tool", tool), ("outcome", outcome)]);
    assert!(calls("calculate_sum", "ok") >= 1.0);
    assert!(calls("analyze_csv", "tool_error") >= 1.0);
    assert!(calls("unknown", "invalid_input") >= 1.0);
    assert!(calls("get_current_time", "ok") >= 1.0);
    let m = &t.after;
    assert!(
        m.get("toolgate_tool_calls_total", &[("tool", "calculate_sum"), ("outcome", "timeout")]).is_some(),
        "every outcome has a series"
    );
    assert!(m.sum("toolgate_tool_call_duration_seconds_sum", &[("tool", "calculate_sum")]) > 0.0);
    assert!(m.sum("toolgate_tool_call_duration_seconds_count", &[("tool", "calculate_sum")]) >= 1.0);
    assert_eq!(m.get("toolgate_tool_calls_queued", &[]), Some(0.0));
}

#[tokio::test]
async fn rate_limit_refusals_and_tracked_keys_are_counted() {
    let _serial = SERIAL.lock().await;
    let t = traffic().await;
    assert!(t.delta("toolgate_rate_limit_rejections_total", &[("reason", "tool")]) >= 1.0);
    assert!(t.after.get("toolgate_rate_limit_tracked_keys", &[]).is_some_and(|k| k >= 1.0));
}

#[tokio::test]
async fn open_sessions_and_the_database_pool_are_gauged() {
    let _serial = SERIAL.lock().await;
    let m = traffic().await.after;
    assert_eq!(m.get("toolgate_sessions_open", &[]), Some(1.0));
    assert!(m.get("toolgate_db_pool_connections", &[("state", "idle")]).is_some());
    assert!(m.get("toolgate_db_pool_connections", &[("state", "in_use")]).is_some());
}

#[tokio::test]
async fn nothing_unbounded_becomes_a_label() {
    let _serial = SERIAL.lock().await;
    let t = traffic().await;
    assert!(!t.after.text.contains("/no/such/path"), "a raw path leaked into the labels");
    assert!(!t.after.text.contains(&t.sid), "a session id leaked into the labels");
    assert!(!t.after.text.contains("no_such_tool"), "an unregistered tool name leaked into the labels");
}

#[tokio::test]
async fn the_audit_writer_stores_the_calls_records_in_batches() {
    let _serial = SERIAL.lock().await;
    let t = traffic().await;
    let written = t.before.sum("toolgate_audit_records_written_total", &[]);
    let m = scrape_until(&t.s, "audit records written", |m| m.sum("toolgate_audit_records_written_total", &[]) >= written + 4.0).await;
    assert!(m.sum("toolgate_audit_batch_duration_seconds_count", &[]) >= 1.0);
    assert!(m.sum("toolgate_audit_batch_duration_seconds_sum", &[]) > 0.0);
    assert!(m.get("toolgate_audit_queue_depth", &[]).is_some());
    assert_eq!(m.get("toolgate_audit_spool_bytes", &[]), Some(0.0), "the database is up: nothing spooled");
    assert!(m.get("toolgate_audit_journal_records", &[]).is_some(), "the journal's backlog is exported");
}

/// A GET stream counts as open exactly while it is, and a list change reaching it is counted
/// with its fan-out latency.
#[tokio::test]
async fn streams_are_counted_while_open_and_list_changes_while_fanned_out() {
    let _serial = SERIAL.lock().await;
    let s = TestServer::start().await;
    let streams = |m: &Scrape, kind: &str| m.get("toolgate_sse_streams_open", &[("kind", kind)]).unwrap_or(0.0);
    let before = scrape(&s).await;
    assert_eq!(streams(&before, "get"), 0.0);
    let sent_before = before.sum("toolgate_list_changed_sent_total", &[]);
    let fanout_before = before.sum("toolgate_list_changed_fanout_seconds_count", &[]);

    let sid = s.initialize("2025-11-25").await;
    let res = open_get(&s, &sid, None).await;
    assert_eq!(res.status(), 200);
    let m = scrape(&s).await;
    assert_eq!(streams(&m, "get"), 1.0, "{}", m.text);
    let get_requests = m.sum("toolgate_http_requests_total", &[("route", "/mcp"), ("method", "GET"), ("status", "200")]);
    assert!(get_requests >= 1.0, "the stream's request is counted once its head is sent");

    let mut reader = SseReader::new(res);
    let tool = Tool::builder("added_later", "Added while a stream is open.").handler(|_| async { Ok(CallToolResult::text("")) });
    s.state().server.tools.upsert(tool).expect("valid tool");
    let (_, note) = reader.next_message_within(Duration::from_secs(10)).await.expect("a notification");
    assert_eq!(note["method"], "notifications/tools/list_changed");
    let m = scrape(&s).await;
    assert!(m.sum("toolgate_list_changed_sent_total", &[]) - sent_before >= 1.0);
    assert!(m.sum("toolgate_list_changed_fanout_seconds_count", &[]) - fanout_before >= 1.0);
    assert!(m.sum("toolgate_list_changed_fanout_seconds_sum", &[]) > 0.0);

    // The client goes away: the server notices (at the latest on the next keep-alive) and the
    // gauge returns to zero.
    drop(reader);
    scrape_until(&s, "the GET stream closed", |m| streams(m, "get") == 0.0).await;

    // A POST stream that ends normally is counted only while it lasts.
    let modern = s.modern(1, "subscriptions/listen", json!({"notifications": {"toolsListChanged": true}}), json!({})).await;
    assert_eq!(modern.status(), 200);
    assert_eq!(streams(&scrape(&s).await, "listen"), 1.0);
    drop(modern);
    scrape_until(&s, "the listen stream closed", |m| streams(m, "listen") == 0.0).await;
}

/// With auth on: every outcome of the bearer gate is counted by reason, and `/metrics` stays
/// reachable without a token while the admin API does not.
#[tokio::test]
async fn auth_results_are_counted_by_reason_and_metrics_need_no_token() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("dev.key");
    let key_file = key.clone();
    let s = TestServer::with(move |c| {
        c.auth.mode = AuthMode::Dev;
        c.auth.dev_key_file = key_file;
        c.auth.resource = Some("http://127.0.0.1:8080/mcp".into());
    })
    .await;
    let auth = |m: &Scrape, result: &str, reason: &str| m.sum("toolgate_auth_validations_total", &[("result", result), ("reason", reason)]);
    let before = scrape(&s).await;

    assert_eq!(s.post(INIT, &[]).await.status(), 401);
    assert_eq!(s.post(INIT, &[("authorization", "Bearer abc.def.ghi")]).await.status(), 401);
    assert_eq!(s.post(INIT, &[("authorization", "Basic dXNlcjpwYXNz")]).await.status(), 400);
    let token = dev_token(&key);
    assert_eq!(s.post(INIT, &[("authorization", &format!("Bearer {token}"))]).await.status(), 200);

    let m = scrape(&s).await;
    assert!(auth(&m, "rejected", "missing_token") - auth(&before, "rejected", "missing_token") >= 1.0, "{}", m.text);
    assert!(auth(&m, "rejected", "malformed_token") - auth(&before, "rejected", "malformed_token") >= 1.0);
    assert!(auth(&m, "rejected", "malformed_header") - auth(&before, "rejected", "malformed_header") >= 1.0);
    assert!(auth(&m, "ok", "") - auth(&before, "ok", "") >= 1.0);
    assert!(!m.text.contains(&token), "a token leaked into the metrics");

    let admin = s.client.get(s.admin_url("/admin/tools")).send().await.expect("admin request");
    assert_eq!(admin.status(), 401, "the admin API keeps its gate");
}

/// `/metrics` is an admin-port route only.
#[tokio::test]
async fn metrics_are_not_served_on_the_public_port() {
    let _serial = SERIAL.lock().await;
    let s = TestServer::start().await;
    let public = s.client.get(s.url("/metrics")).send().await.expect("sent");
    assert_eq!(public.status(), 404);
    let admin = s.client.get(s.admin_url("/metrics")).send().await.expect("sent");
    assert_eq!(admin.status(), 200);
    assert_eq!(admin.headers()["content-type"], "text/plain; version=0.0.4; charset=utf-8");
    let m = parse(&admin.text().await.expect("body"));
    assert!(m.sum("toolgate_http_requests_total", &[("route", "unmatched"), ("method", "GET"), ("status", "404")]) >= 1.0);
}

fn dev_token(key_file: &std::path::Path) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["dev-token", "--scope", "mcp:tools", "--subject", "dana"])
        .env("TOOLGATE__AUTH__MODE", "dev")
        .env("TOOLGATE__AUTH__DEV_KEY_FILE", key_file)
        .env("TOOLGATE__AUTH__RESOURCE", "http://127.0.0.1:8080/mcp")
        .output()
        .expect("toolgate dev-token runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8").trim().to_owned()
}

// ===== the reference: every documented metric, from start =====

/// One row of `deploy/prometheus/metrics.md`'s table.
#[derive(Debug)]
struct Documented {
    name: &'static str,
    kind: &'static str,
    present: &'static str,
}

/// The `present` column's values: from when the series exist.
const PRESENT: [&str; 8] = ["start", "request", "upstream", "server", "tls", "redis", "authserver", "vault"];

/// The metrics table: rows whose first cell is a name in backticks.
fn documented() -> Vec<Documented> {
    let text = include_str!("../../deploy/prometheus/metrics.md");
    let rows: Vec<Documented> = text
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let name = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            Some(Documented { name, kind: cells.get(2)?, present: cells.get(4)? })
        })
        .collect();
    for row in &rows {
        assert!(valid_name(row.name) && ["counter", "gauge", "histogram"].contains(&row.kind), "{row:?}");
        assert!(PRESENT.contains(&row.present), "{row:?}: present must be one of {PRESENT:?}");
    }
    assert!(rows.len() >= 60, "the table has {} rows", rows.len());
    rows
}

/// Each documented row whose series exist under `present` is in the scrape with its own type:
/// every latency a histogram, never a summary.
fn assert_documented(m: &Scrape, present: &[&str]) {
    for row in documented().iter().filter(|r| present.contains(&r.present)) {
        let type_line = format!("# TYPE {} {}", row.name, row.kind);
        assert!(m.text.lines().any(|l| l == type_line), "no {type_line:?} ({} metric) in a fresh scrape:\n{}", row.present, m.text);
    }
}

/// The acceptance test of issue 30: a server that has just started, with an upstream (whose
/// address answers nothing), a virtual server, TLS on its public port and Redis rate limits (at a
/// closed port), and one public request, has every documented series of those in its scrape.
#[tokio::test]
async fn every_documented_metric_is_in_a_fresh_servers_scrape() {
    let _serial = SERIAL.lock().await;
    let nothing = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let closed = nothing.local_addr().expect("addr").port();
    drop(nothing);
    let (ca, dir) = (crate::common::certs::Ca::new("metrics CA"), tempfile::tempdir().expect("dir"));
    let s = crate::tls::tls_server(dir.path(), &ca.server(1), |c| {
        let upstream = json!({"url": format!("http://127.0.0.1:{closed}/mcp"), "allow_private": true});
        c.upstreams.insert("gone".into(), serde_json::from_value(upstream).expect("upstream settings"));
        let server = toolgate::config::servers::VirtualServerSettings { path: "/teams/data/mcp".into(), ..Default::default() };
        c.servers.insert("data".into(), server);
        c.limits.enabled = true;
        c.limits.backend = toolgate::config::limits::Backend::Redis;
        c.limits.redis.url = toolgate::config::Secret::new(format!("redis://127.0.0.1:{closed}"));
        c.limits.redis.connect_timeout_ms = 200;
    })
    .await;
    let public = format!("https://127.0.0.1:{}/no/such/path", s.running.addr.port());
    let res = crate::common::certs::client(&ca).build().expect("client").get(public).send().await.expect("sent");
    assert_eq!(res.status(), 404);
    let m = scrape(&s).await;
    assert_documented(&m, &["start", "request", "upstream", "server", "tls", "redis"]);
    assert_eq!(m.get("toolgate_tools", &[("source", "code")]), Some(s.state().server.tools.snapshot().len() as f64), "the packs' tools");
    assert_eq!(m.get("toolgate_upstream_up", &[("upstream", "gone")]), Some(0.0));
    assert!(m.get("process_resident_memory_bytes", &[]).is_some_and(|b| b > 0.0), "process metrics are read from the OS");
}

/// The built-in authorization server's events exist from its start; the vault's come with its
/// first event (here: a call that asks the user to connect their account).
#[tokio::test]
async fn the_authorization_server_and_vault_metrics_appear_with_them() {
    let _serial = SERIAL.lock().await;
    let g = crate::common::vault_gate::Gate::start().await;
    let scrape = || async { parse(&g.http.get(g.admin_url("/metrics")).send().await.expect("scrape").text().await.expect("text")) };
    assert_documented(&scrape().await, &["authserver"]);
    let token = g.token(crate::common::vault_gate::USER, "mcp:tools");
    let session = g.session(&token, json!({"elicitation": {"url": {}}})).await;
    assert_eq!(g.call(&token, &session, 1).await["error"]["code"], -32042, "asked to connect");
    assert_documented(&scrape().await, &["vault"]);
}
