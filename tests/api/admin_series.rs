//! `GET /admin/series` over real HTTP: tool calls made through `/mcp` show in their tool's series
//! and in `all`, per interval, the open interval last and marked partial; bad parameters are
//! problem documents naming the allowed values, repeating the client's text only cut short;
//! and latency percentiles (here and in `/admin/overview`) never exceed the slowest call.
//!
//! The series store is process-wide, like the Prometheus recorder, and under plain `cargo test`
//! other tests call tools in the same process: each test here calls tools of its own, named
//! for it, and reads what every tool shares (`all`, the overview) as differences or rules,
//! never as exact totals. No assertion depends on how long a call took beyond its sleep.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde_json::{Value, json};
use toolgate::protocol::CallToolResult;
use toolgate::tool::{Tool, ToolError};

use crate::common::TestServer;

/// A server with `{prefix}_sleep` (sleeps `ms`) and `{prefix}_fail` (a tool error), and a session.
async fn server(prefix: &str) -> (TestServer, String) {
    let s = TestServer::start().await;
    let sleep = Tool::builder(format!("{prefix}_sleep"), "Sleeps for ms milliseconds.")
        .input_schema(json!({"type":"object","properties":{"ms":{"type":"integer"}},"additionalProperties":false}))
        .handler(|ctx| async move {
            let ms = ctx.arguments().get("ms").and_then(Value::as_u64).unwrap_or(0);
            ctx.sleep(Duration::from_millis(ms)).await?;
            Ok(CallToolResult::text(format!("slept {ms} ms")))
        });
    let fail = Tool::builder(format!("{prefix}_fail"), "Fails.").handler(|_| async { Err(ToolError::Failed("the disk is full".into())) });
    for tool in [sleep, fail] {
        s.state().server.tools.upsert(tool).expect("valid tool");
    }
    let sid = s.initialize("2025-11-25").await;
    (s, sid)
}

/// Calls `name` with request id `id` (distinct per call in a session).
async fn call(s: &TestServer, sid: &str, id: i64, name: &str, ms: u64) -> Value {
    s.call(sid, id, "tools/call", json!({"name": name, "arguments": if name.ends_with("_sleep") { json!({"ms": ms}) } else { json!({}) }}))
        .await
}

async fn get(s: &TestServer, query: &str) -> reqwest::Response {
    s.client.get(s.admin_url(&format!("/admin/series?{query}"))).send().await.expect("sent")
}

async fn series(s: &TestServer, query: &str) -> Value {
    let res = get(s, query).await;
    assert_eq!(res.status(), 200, "{query}");
    res.json().await.expect("json")
}

fn points(v: &Value) -> &[Value] {
    v["points"].as_array().map_or(&[], Vec::as_slice)
}

/// A field summed over the points (the calls may straddle an interval's end).
fn total(v: &Value, field: &str) -> u64 {
    points(v).iter().filter_map(|p| p[field].as_u64()).sum()
}

fn is_rfc3339(v: &Value) -> bool {
    v.as_str().is_some_and(|t| time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).is_ok() && t.ends_with('Z'))
}

/// `[p50, p95, p99, max]` of a point or summary (NaN where null: NaN fails every comparison).
fn percentiles(v: &Value) -> [f64; 4] {
    ["p50", "p95", "p99", "max"].map(|k| v[k].as_f64().unwrap_or(f64::NAN))
}

#[tokio::test]
async fn calls_through_mcp_show_in_their_tools_series_and_in_all() {
    let (s, sid) = server("series_shown").await;
    let all_before = total(&series(&s, "scope=all&window=start").await, "calls");
    for id in 1..=3 {
        call(&s, &sid, id, "series_shown_sleep", 5).await;
    }
    assert_eq!(call(&s, &sid, 4, "series_shown_fail", 0).await["result"]["isError"], true);

    let slept = series(&s, "scope=tool&name=series_shown_sleep").await;
    assert_eq!(
        (&slept["scope"], &slept["name"], &slept["window"], &slept["interval_secs"]),
        (&json!("tool"), &json!("series_shown_sleep"), &json!("hour"), &json!(10))
    );
    assert!(is_rfc3339(&slept["now"]), "{slept}");
    assert_eq!((total(&slept, "calls"), total(&slept, "errors")), (3, 0), "{slept}");
    // Shown at once: the open interval is the last point (the calls are in it, or in the one
    // that closed since).
    let last = points(&slept).last().expect("the open interval");
    assert_eq!(last["partial"], true, "{last}");
    assert!(points(&slept).iter().all(|p| is_rfc3339(&p["t"])), "{slept}");
    let called: Vec<&Value> = points(&slept).iter().filter(|p| p["calls"].as_u64() > Some(0)).collect();
    assert!(called.iter().all(|p| p["rate"].as_f64().is_some_and(|r| r > 0.0) && p["max"].as_f64().is_some_and(|m| m >= 0.005)), "{slept}");
    let failed = series(&s, "scope=tool&name=series_shown_fail").await;
    assert_eq!((total(&failed, "calls"), total(&failed, "errors")), (1, 1), "{failed}");

    let all = series(&s, "scope=all&window=start").await;
    assert_eq!(all["name"], Value::Null);
    // Other tests in this process may call tools too: at least ours were added.
    assert!(total(&all, "calls") >= all_before + 4 && total(&all, "errors") >= 1, "{all}");
    let since_start = series(&s, "scope=tool&name=series_shown_sleep&window=start").await;
    assert_eq!(total(&since_start, "calls"), 3, "{since_start}");
}

#[tokio::test]
async fn a_tool_never_called_has_no_points() {
    let (s, _) = server("series_never").await;
    let v = series(&s, "scope=tool&name=series_never_sleep").await;
    assert_eq!(v["points"], json!([]), "{v}");
}

#[tokio::test]
async fn an_unknown_scope_or_window_is_a_problem_naming_the_allowed_values() {
    let (s, _) = server("series_refused").await;
    for (query, allowed) in [("scope=tools&name=x", "all, tool, upstream"), ("window=day", "hour, start")] {
        let res = get(&s, query).await;
        assert_eq!(res.status(), 400, "{query}");
        assert_eq!(res.headers()["content-type"], "application/problem+json");
        let problem: Value = res.json().await.expect("json");
        assert!(problem["detail"].as_str().is_some_and(|d| d.contains(allowed)), "{problem}");
    }
    // A parameter's name is the client's: repeated only cut to 64 bytes.
    let long = "p".repeat(2_000);
    let problem: Value = get(&s, &format!("{long}=1")).await.json().await.expect("json");
    let detail = problem["detail"].as_str().unwrap_or_default();
    assert!(detail.len() < 300 && detail.contains("bytes)"), "{problem}");
    let field = problem["errors"][0]["field"].as_str().unwrap_or_default();
    assert!(field.starts_with(&"p".repeat(64)) && field.len() < 100, "{problem}");
}

/// The rule: four calls of known durations, the slowest 1.5 s here (the was
/// 10.0 s, whose p99 read 29.2 s when interpolated in its Prometheus bucket). Asserted as the
/// rule, not as windows around the sleeps: a loaded machine may make any call slower.
#[tokio::test]
async fn latency_percentiles_never_exceed_the_slowest_call() {
    let (s, sid) = server("series_latency").await;
    let overview =
        || async { s.client.get(s.admin_url("/admin/overview")).send().await.expect("sent").json::<Value>().await.expect("json") };
    let before = overview().await["tool_calls"]["latency_seconds"]["count"].as_u64().unwrap_or(0);
    let started = Instant::now();
    let (s, sid) = (&s, sid.as_str());
    let calls = [100, 200, 300, 1500].into_iter().zip(1..).map(|(ms, id)| async move {
        call(s, sid, id, "series_latency_sleep", ms).await;
        started.elapsed()
    });
    let slowest = join_all(calls).await.into_iter().max().unwrap_or_default().as_secs_f64();

    // The overview counts every tool of this process: ours among them.
    let l = overview().await["tool_calls"]["latency_seconds"].clone();
    let [p50, p95, p99, max] = percentiles(&l);
    assert!(l["count"].as_u64().unwrap_or(0) >= before + 4, "{l}");
    assert!(p50 <= p95 && p95 <= p99 && p99 <= max && max >= 1.5, "{l}");

    let slept = series(s, "scope=tool&name=series_latency_sleep&window=start").await;
    assert_eq!(total(&slept, "calls"), 4, "{slept}");
    for p in points(&slept).iter().filter(|p| p["calls"].as_u64() > Some(0)) {
        let [p50, p95, p99, max] = percentiles(p);
        assert!(
            0.1 <= p50 && p50 <= p95 && p95 <= p99 && p99 <= max && max <= slowest,
            "no call was faster than 0.1 s or slower than {slowest} s: {p}"
        );
        assert_eq!(p99, max, "the top rank is the slowest call of the point: {p}");
        if p["calls"] == 4 {
            // The second of four slept 0.2 s; its bucket's middle is within 6.25% of it.
            assert!(p50 >= 0.2 * (1.0 - 0.0625), "{p}");
        }
    }
    assert!(points(&slept).iter().any(|p| p["max"].as_f64().is_some_and(|m| m >= 1.5)), "{slept}");
}
