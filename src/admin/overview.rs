//! `GET /admin/overview`: the figures an operator looks at first, as one small JSON document for
//! the console's Overview view.
//!
//! Why an endpoint and not the console parsing `/metrics` itself: `/metrics` is unauthenticated
//! (Prometheus scrapes it), and every byte of data the console shows comes through the admin
//! gate; the page need not know metric names or how to fold histogram buckets; state that has an
//! owner (sessions, the audit queue and spool, the tool registry, upstreams) is read from that
//! owner, exactly; and the document is a contract in `deploy/admin/openapi.yaml`, tested like
//! the rest of the API. Counters and histograms are read back from the recorder's own text
//! ([`super::prom`]); they count since this process started, across every route and tool.
//! Tool-call latency comes from the replica's own time series (`metrics::series`), which
//! knows the slowest call, so no percentile exceeds it; the HTTP latency is estimated from
//! the Prometheus buckets and clamped to the slowest request.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::prom::{self, Sample};
use super::state::AdminState;
use crate::metrics::{
    CONNECTIONS_OPEN, HTTP_REQUEST_DURATION, HTTP_REQUESTS, HTTP_REQUESTS_IN_FLIGHT, JSONRPC_ERRORS, MCP_REQUESTS, RATE_LIMIT_REJECTIONS,
    SSE_STREAMS_OPEN, TOOL_CALLS, series,
};

/// `GET /admin/overview`.
pub async fn overview(State(app): State<AdminState>) -> Json<Value> {
    let text = app.metrics.render();
    let samples = prom::parse(&text);
    let s = &samples;
    let status_class = |class: char| move |x: &Sample<'_>| x.label("status").is_some_and(|v| v.starts_with(class));
    let tools = app.server.tools.snapshot();
    let mut by_origin: BTreeMap<&str, usize> = BTreeMap::new();
    for t in tools.iter() {
        *by_origin.entry(t.tool.origin().as_str()).or_default() += 1;
    }
    let upstreams = app.upstreams.statuses();
    Json(json!({
        "server": {
            "name": app.settings.server.name,
            "version": env!("CARGO_PKG_VERSION"),
            "git_sha": crate::metrics::GIT_SHA,
            "replica": app.settings.audit.resolved_replica_id(),
        },
        "http": {
            "requests": count(prom::sum(s, HTTP_REQUESTS, |_| true)),
            "client_errors": count(prom::sum(s, HTTP_REQUESTS, status_class('4'))),
            "server_errors": count(prom::sum(s, HTTP_REQUESTS, status_class('5'))),
            "in_flight": count(prom::sum(s, HTTP_REQUESTS_IN_FLIGHT, |_| true)),
            "latency_seconds": prom::latency(s, HTTP_REQUEST_DURATION).at_most(series::http_max()),
        },
        "mcp": {
            "requests": count(prom::sum(s, MCP_REQUESTS, |_| true)),
            "jsonrpc_errors": count(prom::sum(s, JSONRPC_ERRORS, |_| true)),
        },
        "tool_calls": tool_calls(s, &app),
        "sessions": {"open": app.mcp.sessions.len(), "shared": app.mcp.sessions.is_shared()},
        "streams": streams(s),
        "connections": {"open": count(prom::sum(s, CONNECTIONS_OPEN, |_| true))},
        "rate_limits": {
            "enabled": app.limiter.is_some(),
            "rejections": count(prom::sum(s, RATE_LIMIT_REJECTIONS, |_| true)),
            "tracked_keys": app.limiter.as_ref().map(|l| l.tracked_keys()),
        },
        "audit": audit(&app),
        "tools": {"served": tools.len(), "by_origin": by_origin},
        "upstreams": {
            "configured": upstreams.len(),
            "connected": upstreams.iter().filter(|u| u.state == "connected").count(),
        },
    }))
}

/// Counter values are integral; the text format writes them as floats.
fn count(v: f64) -> u64 {
    v.max(0.0) as u64
}

fn tool_calls(s: &[Sample<'_>], app: &AdminState) -> Value {
    let mut by_outcome: BTreeMap<String, u64> = BTreeMap::new();
    for x in s.iter().filter(|x| x.name == TOOL_CALLS) {
        if let Some(outcome) = x.label("outcome") {
            *by_outcome.entry(outcome.to_owned()).or_default() += count(x.value);
        }
    }
    let total: u64 = by_outcome.values().sum();
    let ok = by_outcome.get("ok").copied().unwrap_or(0);
    let tools = app.server.tools.snapshot();
    let queued = app.server.calls.queued() + tools.iter().filter_map(|t| t.bulkhead.as_ref()).map(|b| b.queued()).sum::<usize>();
    json!({
        "total": total,
        "errors": total - ok,
        "by_outcome": by_outcome,
        "queued": queued,
        "latency_seconds": series::global().since_start(),
    })
}

/// Open SSE response streams by kind (`get`, `post`, `listen`, `legacy_sse`: the gauge the
/// transports keep as streams open and close).
fn streams(s: &[Sample<'_>]) -> Value {
    let mut by_kind: BTreeMap<String, u64> = BTreeMap::new();
    for x in s.iter().filter(|x| x.name == SSE_STREAMS_OPEN) {
        if let Some(kind) = x.label("kind") {
            *by_kind.entry(kind.to_owned()).or_default() += count(x.value);
        }
    }
    json!({"open": by_kind.values().sum::<u64>(), "by_kind": by_kind})
}

fn audit(app: &AdminState) -> Value {
    let Some(audit) = &app.audit else { return json!({"enabled": false}) };
    let stats = audit.stats();
    json!({
        "enabled": true,
        "queue_depth": stats.queue_depth,
        "queue_capacity": stats.queue_capacity,
        "spool_bytes": stats.spool_bytes,
        "records_written": stats.records_written,
        "records_spooled": stats.records_spooled,
        "write_failures": stats.write_failures,
        "records_lost": stats.records_lost,
    })
}
