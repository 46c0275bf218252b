//! `GET /admin/series` over real HTTP: tool calls made through `/mcp` show in their tool's series
//! and in `all`, per interval, the open interval last and marked partial; bad parameters are
//! problem documents naming the allowed values; and latency percentiles (here and in
//! `/admin/overview`) never exceed the slowest call.
//!
//! The series store is process-wide, like the Prometheus recorder: run under nextest (one
//! process per test), the overview counts only this test's calls.

use std::time::Instant;

use futures_util::future::join_all;
use serde_json::{Value, json};

use crate::common::{self, TestServer};

/// A server with the task tests' tools (`slow` sleeps `ms`, `broken` fails) and a session.
async fn server() -> (TestServer, String) {
    let s = TestServer::start().await;
    common::tasks::install(&s);
    let sid = s.initialize("2025-11-25").await;
    (s, sid)
}

async fn call(s: &TestServer, sid: &str, name: &str, ms: u64) -> Value {
    s.call(sid, 1, "tools/call", json!({"name": name, "arguments": if name == "slow" { json!({"ms": ms}) } else { json!({}) }})).await
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

#[tokio::test]
async fn calls_through_mcp_show_in_their_tools_series_and_in_all() {
    let (s, sid) = server().await;
    for _ in 0..3 {
        call(&s, &sid, "slow", 5).await;
    }
    assert_eq!(call(&s, &sid, "broken", 0).await["result"]["isError"], true);

    let slow = series(&s, "scope=tool&name=slow").await;
    assert_eq!(
        (&slow["scope"], &slow["name"], &slow["window"], &slow["interval_secs"]),
        (&json!("tool"), &json!("slow"), &json!("hour"), &json!(10))
    );
    assert!(is_rfc3339(&slow["now"]), "{slow}");
    assert_eq!((total(&slow, "calls"), total(&slow, "errors")), (3, 0), "{slow}");
    // Shown at once: the open interval is the last point (the calls are in it, or in the one
    // that closed since).
    let last = points(&slow).last().expect("the open interval");
    assert_eq!(last["partial"], true, "{last}");
    assert!(points(&slow).iter().all(|p| is_rfc3339(&p["t"])), "{slow}");
    let called: Vec<&Value> = points(&slow).iter().filter(|p| p["calls"].as_u64() > Some(0)).collect();
    assert!(called.iter().all(|p| p["rate"].as_f64().is_some_and(|r| r > 0.0) && p["max"].as_f64().is_some_and(|m| m >= 0.005)), "{slow}");
    assert_eq!(total(&series(&s, "scope=tool&name=broken").await, "errors"), 1);

    let all = series(&s, "scope=all").await;
    assert_eq!(all["name"], Value::Null);
    assert!(total(&all, "calls") >= 4 && total(&all, "errors") >= 1, "{all}");
    let since_start = series(&s, "scope=tool&name=slow&window=start").await;
    assert_eq!(total(&since_start, "calls"), 3, "{since_start}");
}

#[tokio::test]
async fn a_tool_never_called_has_no_points() {
    let (s, _) = server().await;
    let v = series(&s, "scope=tool&name=slow").await;
    assert_eq!(v["points"], json!([]), "{v}");
}

#[tokio::test]
async fn an_unknown_scope_or_window_is_a_problem_naming_the_allowed_values() {
    let (s, _) = server().await;
    for (query, allowed) in [("scope=tools&name=slow", "all, tool, upstream"), ("window=day", "hour, start")] {
        let res = get(&s, query).await;
        assert_eq!(res.status(), 400, "{query}");
        assert_eq!(res.headers()["content-type"], "application/problem+json");
        let problem: Value = res.json().await.expect("json");
        assert!(problem["detail"].as_str().is_some_and(|d| d.contains(allowed)), "{problem}");
    }
}

/// The rule: four calls of known durations, the slowest 1.5 s here (the was
/// 10.0 s, whose p99 read 29.2 s when interpolated in its Prometheus bucket).
#[tokio::test]
async fn latency_percentiles_never_exceed_the_slowest_call() {
    let (s, sid) = server().await;
    let started = Instant::now();
    let (s, sid) = (&s, sid.as_str());
    let calls = [100, 200, 300, 1500].map(|ms| async move {
        call(s, sid, "slow", ms).await;
        started.elapsed()
    });
    let slowest = join_all(calls).await.into_iter().max().unwrap_or_default();

    let overview: Value = s.client.get(s.admin_url("/admin/overview")).send().await.expect("sent").json().await.expect("json");
    let l = &overview["tool_calls"]["latency_seconds"];
    let [p50, p95, p99, max] = ["p50", "p95", "p99", "max"].map(|k| l[k].as_f64().unwrap_or(f64::NAN));
    assert_eq!(l["count"], 4, "{l}");
    assert!(p50 <= p95 && p95 <= p99 && p99 <= max, "{l}");
    assert!(p99 <= slowest.as_secs_f64(), "p99 {p99} s, but no call took longer than {slowest:?}");
    assert!(p99 >= 1.5 && p99 == max, "the top rank is the slowest call: {l}");
    assert!((0.18..0.26).contains(&p50), "the second of four, within its bucket: {l}");

    let slow = series(s, "scope=tool&name=slow").await;
    for p in points(&slow).iter().filter(|p| p["calls"].as_u64() > Some(0)) {
        let [p50, p95, p99, max] = ["p50", "p95", "p99", "max"].map(|k| p[k].as_f64().unwrap_or(f64::NAN));
        assert!(p50 <= p95 && p95 <= p99 && p99 <= max && max <= slowest.as_secs_f64(), "{p}");
    }
    assert!(points(&slow).iter().any(|p| p["max"].as_f64().is_some_and(|m| m >= 1.5)), "{slow}");
}
