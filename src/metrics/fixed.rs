//! The series that exist from start: every one whose labels are a fixed set is registered at
//! zero when the recorder is installed, so rates over them never miss a zero and a dashboard
//! shows 0 rather than "no data". Series labelled by something that comes into being later (an
//! upstream, a virtual server, a TLS listener, the authorization server) are registered where
//! that happens.

use super::record::{ERROR_CODES, LIMITS, MCP_METHODS, McpEra, SseKind, ToolMetrics};
use super::*;

/// Registers every series whose labels are a fixed set, at zero.
pub(super) fn register() {
    let counters = [
        LIST_CHANGED_SENT,
        AUDIT_RECORDS_WRITTEN,
        AUDIT_REPLAYED_RECORDS,
        CONNECTIONS_EVICTED,
        ACCEPT_ERRORS,
        TASKS_CREATED,
        TASK_INPUT_REQUESTS,
        TASK_LEASES_LOST,
        CLUSTER_EVENTS_SENT,
        CLUSTER_EVENTS_RECEIVED,
    ];
    for name in counters {
        metrics::counter!(name).increment(0);
    }
    let gauges = [
        HTTP_REQUESTS_IN_FLIGHT,
        RATE_LIMIT_TRACKED_KEYS,
        AUDIT_QUEUE_DEPTH,
        AUDIT_SPOOL_BYTES,
        AUDIT_JOURNAL_RECORDS,
        CONNECTIONS_OPEN,
        TASKS_RUNNING,
    ];
    for name in gauges {
        metrics::gauge!(name).increment(0.0);
    }
    // Making a handle registers the series; nothing is recorded into it here.
    for name in [LIST_CHANGED_FANOUT, AUDIT_BATCH_DURATION] {
        let _registered = metrics::histogram!(name);
    }
    for method in MCP_METHODS.iter().copied().chain(["other"]) {
        for era in [McpEra::Modern, McpEra::Legacy, McpEra::Sse2024] {
            metrics::counter!(MCP_REQUESTS, "method" => method, "era" => era.as_str()).increment(0);
        }
    }
    for (_, code) in ERROR_CODES.iter().copied().chain([(0, "other")]) {
        metrics::counter!(JSONRPC_ERRORS, "code" => code).increment(0);
    }
    ToolMetrics::unknown();
    for kind in [SseKind::Get, SseKind::Post, SseKind::Listen, SseKind::LegacySse] {
        kind.gauge().increment(0.0);
    }
    metrics::counter!(AUTH_VALIDATIONS, "result" => "ok", "reason" => "").increment(0);
    for (name, results) in [
        (JWKS_REFRESHES, &["ok", "error"][..]),
        (INTROSPECTION_REQUESTS, &["active", "inactive", "error"][..]),
        (INTROSPECTION_CACHE, &["hit", "miss"][..]),
    ] {
        for result in results {
            metrics::counter!(name, "result" => *result).increment(0);
        }
    }
    for reason in LIMITS.iter().copied().chain(["other"]) {
        metrics::counter!(RATE_LIMIT_REJECTIONS, "reason" => reason).increment(0);
    }
    for source in ["file", "database"] {
        for result in ["ok", "invalid"] {
            metrics::counter!(TOOL_RELOADS, "source" => source, "result" => result).increment(0);
        }
    }
    for status in TASK_STATUSES {
        metrics::counter!(TASKS_ENDED, "status" => status).increment(0);
        let _registered = metrics::histogram!(TASK_DURATION, "status" => status);
    }
    for decision in ["approved", "rejected", "auto_approved"] {
        metrics::counter!(CATALOG_DECISIONS, "decision" => decision).increment(0);
    }
}

/// The terminal statuses of a task: the `status` label.
const TASK_STATUSES: [&str; 3] = ["completed", "failed", "cancelled"];
