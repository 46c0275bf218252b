//! Prometheus metrics: every name, its help text and its buckets are declared here, and the
//! rest of the code records through the small typed helpers in [`record`] (and the HTTP layer
//! in `transport::http_metrics`), which take plain labels and import no domain module, so call
//! sites stay one line and label values stay bounded: route templates,
//! method names from a fixed list, registered tool names, outcomes. Never raw paths, user ids
//! or tokens.
//!
//! `/metrics` is served on the admin listener only (`admin::metrics`),
//! without authentication, because Prometheus scrapes it: the admin port must never be
//! reachable from outside (bind it to loopback or a port the load balancer does not expose).
//!
//! Recording is cheap on the hot path: label sets that are fixed are resolved to handles once
//! (per tool, per route, per method), so a request costs a few atomic operations and no
//! allocation. Gauges that mirror state owned elsewhere (sessions, queues, pools, limiter
//! keys, tools per source, the process's own figures) are sampled when `/metrics` is scraped
//! instead of being updated on every change.
//!
//! Every documented series exists from start, at zero: fixed label sets are registered by
//! [`install`], labelled things when they come into being (an upstream when it is installed, a
//! virtual server, a TLS listener). `deploy/prometheus/metrics.md` lists every name; a test
//! keeps it and this file in step. Every latency is a histogram (summaries cannot be
//! aggregated across replicas). Tool-call latencies are also kept per replica as time series
//! for the console's charts ([`series`]).

mod fixed;
pub mod record;
pub mod series;

use std::sync::OnceLock;
use std::time::Duration;

use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

pub use record::{McpEra, SseKind, ToolMetrics};

// ===== names =====

/// Gauge, always 1: `{version, git_sha}` of the running binary.
pub const BUILD_INFO: &str = "toolgate_build_info";
/// Counter `{route, method, status}`.
pub const HTTP_REQUESTS: &str = "toolgate_http_requests_total";
/// Histogram `{route, method}`: time to the response head (an SSE stream counts until it opens).
pub const HTTP_REQUEST_DURATION: &str = "toolgate_http_request_duration_seconds";
/// Gauge: public-port requests whose response head has not been sent yet.
pub const HTTP_REQUESTS_IN_FLIGHT: &str = "toolgate_http_requests_in_flight";
/// Counter `{method, era}`.
pub const MCP_REQUESTS: &str = "toolgate_mcp_requests_total";
/// Counter `{code}`.
pub const JSONRPC_ERRORS: &str = "toolgate_jsonrpc_errors_total";
/// Counter `{tool, outcome}`.
pub const TOOL_CALLS: &str = "toolgate_tool_calls_total";
/// Histogram `{tool}`.
pub const TOOL_CALL_DURATION: &str = "toolgate_tool_call_duration_seconds";
/// Gauge (sampled): calls waiting for a concurrency slot.
pub const TOOL_CALLS_QUEUED: &str = "toolgate_tool_calls_queued";
/// Gauge (sampled): legacy sessions.
pub const SESSIONS_OPEN: &str = "toolgate_sessions_open";
/// Gauge `{kind}`.
pub const SSE_STREAMS_OPEN: &str = "toolgate_sse_streams_open";
/// Counter: list_changed notifications queued on a stream.
pub const LIST_CHANGED_SENT: &str = "toolgate_list_changed_sent_total";
/// Histogram: from the change's publication to its notification being queued on a stream.
pub const LIST_CHANGED_FANOUT: &str = "toolgate_list_changed_fanout_seconds";
/// Counter `{result, reason}`.
pub const AUTH_VALIDATIONS: &str = "toolgate_auth_validations_total";
/// Counter `{result}`.
pub const JWKS_REFRESHES: &str = "toolgate_jwks_refreshes_total";
pub const OAUTH_EVENTS: &str = "toolgate_oauth_events_total";
/// Counter `{upstream, event, outcome}`.
pub const VAULT_EVENTS: &str = "toolgate_vault_events_total";
/// Counter `{server}`.
pub const SERVER_REQUESTS: &str = "toolgate_server_requests_total";
/// Counter `{result}`.
pub const INTROSPECTION_REQUESTS: &str = "toolgate_introspection_requests_total";
/// Counter `{result}`.
pub const INTROSPECTION_CACHE: &str = "toolgate_introspection_cache_total";
/// Counter `{reason}`.
pub const RATE_LIMIT_REJECTIONS: &str = "toolgate_rate_limit_rejections_total";
/// Gauge (sampled).
pub const RATE_LIMIT_TRACKED_KEYS: &str = "toolgate_rate_limit_tracked_keys";
/// Gauge (sampled).
pub const AUDIT_QUEUE_DEPTH: &str = "toolgate_audit_queue_depth";
/// Gauge (sampled).
pub const AUDIT_SPOOL_BYTES: &str = "toolgate_audit_spool_bytes";
/// Gauge (sampled).
pub const AUDIT_JOURNAL_RECORDS: &str = "toolgate_audit_journal_records";
/// Histogram: one database insert of a batch (fresh or replayed), successful or not.
pub const AUDIT_BATCH_DURATION: &str = "toolgate_audit_batch_duration_seconds";
/// Counter.
pub const AUDIT_RECORDS_WRITTEN: &str = "toolgate_audit_records_written_total";
/// Counter.
pub const AUDIT_REPLAYED_RECORDS: &str = "toolgate_audit_replayed_records_total";
/// Gauge (sampled) `{state}`.
pub const DB_POOL_CONNECTIONS: &str = "toolgate_db_pool_connections";
/// Counter `{source, result}`, recorded by `tooldef::sources`.
pub const TOOL_RELOADS: &str = "toolgate_tool_reloads_total";
/// Gauge `{source}` (`code`, `file`, `database`, `upstream`), sampled when `/metrics` is scraped.
pub const TOOLS: &str = "toolgate_tools";
/// Counter `{kind}` (`timeout`, `error`), recorded by `limits::redis`.
pub const RATE_LIMIT_BACKEND_ERRORS: &str = "toolgate_rate_limit_backend_errors_total";
/// Gauge, recorded by `limits::redis`.
pub const RATE_LIMIT_BACKEND_UP: &str = "toolgate_rate_limit_backend_up";
/// Gauge, recorded by `transport::connections`.
pub const CONNECTIONS_OPEN: &str = "toolgate_connections_open";
/// Counter, recorded by `transport::connections`.
pub const CONNECTIONS_EVICTED: &str = "toolgate_connections_evicted_total";
/// Counter, recorded by `transport::connections`.
pub const ACCEPT_ERRORS: &str = "toolgate_accept_errors_total";
/// Gauge `{listener}`, recorded by `transport::tls`.
pub const TLS_CERTIFICATE_EXPIRY: &str = "toolgate_tls_certificate_expiry_timestamp_seconds";
/// Counter `{listener, result}`, recorded by `transport::tls`.
pub const TLS_RELOADS: &str = "toolgate_tls_reloads_total";
/// Counter `{listener}`, recorded by `transport::tls`.
pub const TLS_HANDSHAKE_FAILURES: &str = "toolgate_tls_handshake_failures_total";
/// Counter, recorded by `tasks`.
pub const TASKS_CREATED: &str = "toolgate_tasks_created_total";
/// Counter, recorded by `tasks`.
pub const TASKS_ENDED: &str = "toolgate_tasks_ended_total";
/// Histogram, recorded by `tasks`.
pub const TASK_DURATION: &str = "toolgate_task_duration_seconds";
/// Gauge, recorded by `tasks`.
pub const TASKS_RUNNING: &str = "toolgate_tasks_running";
/// Counter, recorded by `tasks`.
pub const TASK_INPUT_REQUESTS: &str = "toolgate_task_input_requests_total";
/// Counter, recorded by `tasks`.
pub const TASK_LEASES_LOST: &str = "toolgate_task_leases_lost_total";
/// Gauge, set by `cluster::connect` and kept by `cluster::pg`.
pub const CLUSTER_CONNECTED: &str = "toolgate_cluster_connected";
/// Counter, recorded by `cluster::pg`.
pub const CLUSTER_EVENTS_SENT: &str = "toolgate_cluster_events_sent_total";
/// Counter, recorded by `cluster::pg`.
pub const CLUSTER_EVENTS_RECEIVED: &str = "toolgate_cluster_events_received_total";
/// Counter, recorded by `upstream::forward`.
pub const UPSTREAM_CALLS: &str = "toolgate_upstream_calls_total";
/// Histogram, recorded by `upstream::forward`.
pub const UPSTREAM_CALL_DURATION: &str = "toolgate_upstream_call_duration_seconds";
/// Counter, recorded by `upstream::supervise`.
pub const UPSTREAM_CONNECTS: &str = "toolgate_upstream_connects_total";
/// Gauge, recorded by `upstream::supervise`.
pub const UPSTREAM_UP: &str = "toolgate_upstream_up";
/// Gauge, recorded by `upstream::supervise`.
pub const UPSTREAM_TOOLS: &str = "toolgate_upstream_tools";
/// Gauge, recorded by `upstream` when it publishes (reason: invalid, name_taken).
pub const UPSTREAM_TOOLS_SKIPPED: &str = "toolgate_upstream_tools_skipped";
/// Counter, recorded by `approval` (decision: approved, rejected, auto_approved).
pub const CATALOG_DECISIONS: &str = "toolgate_catalog_decisions_total";
/// Gauge, recorded by `upstream::supervise` after each listing.
pub const CATALOG_HELD: &str = "toolgate_catalog_held";
/// Counter, recorded by `upstream::users`.
pub const UPSTREAM_TOKEN_EXCHANGES: &str = "toolgate_upstream_token_exchanges_total";

/// Request-path latencies: 100 µs to 10 s.
const LATENCY_BUCKETS: &[f64] = &[0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];
/// Tool calls: the same, continued up to the longest timeouts tools are given.
const TOOL_BUCKETS: &[f64] =
    &[0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0];
/// Fan-out is in-process work: 10 µs to 1 s.
const FANOUT_BUCKETS: &[f64] =
    &[0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0];
/// Tasks run detached and may wait for input: 10 ms to a day.
const TASK_BUCKETS: &[f64] = &[0.01, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 21600.0, 86400.0];

/// The buckets of every histogram. A histogram left out would be rendered as a summary, whose
/// quantiles cannot be aggregated across replicas (a unit test checks none is left out).
const HISTOGRAMS: [(&str, &[f64]); 6] = [
    (HTTP_REQUEST_DURATION, LATENCY_BUCKETS),
    (TOOL_CALL_DURATION, TOOL_BUCKETS),
    (UPSTREAM_CALL_DURATION, TOOL_BUCKETS),
    (AUDIT_BATCH_DURATION, LATENCY_BUCKETS),
    (LIST_CHANGED_FANOUT, FANOUT_BUCKETS),
    (TASK_DURATION, TASK_BUCKETS),
];

/// How often histogram samples are folded into their buckets when nobody scrapes (the
/// recorder keeps raw samples until then).
const UPKEEP_INTERVAL: Duration = Duration::from_secs(5);

/// The content type of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The git commit the binary was built from: `TOOLGATE_GIT_SHA` at build time (set by
/// `build.rs` from `git rev-parse`, or by the image build), else "unknown".
pub const GIT_SHA: &str = match option_env!("TOOLGATE_GIT_SHA") {
    Some(sha) => sha,
    None => "unknown",
};

// ===== install =====

/// Installs the process-wide Prometheus recorder (once; later calls return the same handle:
/// tests start several servers in one process) and registers every help text. Metrics
/// recorded before this go nowhere, so `AppState::new` calls it first. `replica` names this
/// process in `toolgate_build_info` (the first caller's, when tests start several servers).
pub fn install(replica: &str) -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = builder().build_recorder();
            let handle = recorder.handle();
            if let Err(e) = metrics::set_global_recorder(recorder) {
                // Someone else's recorder (an embedding application): ours renders nothing.
                tracing::warn!(error = %e, "a metrics recorder is already installed; /metrics will be empty");
            }
            describe();
            crate::protocol::jsonrpc::on_error(record::jsonrpc_error);
            fixed::register();
            metrics::gauge!(BUILD_INFO, "version" => env!("CARGO_PKG_VERSION"), "git_sha" => GIT_SHA, "replica" => replica.to_owned())
                .set(1.0);
            sample_process();
            spawn_upkeep(handle.clone());
            series::spawn_sampler();
            handle
        })
        .clone()
}

fn builder() -> PrometheusBuilder {
    let mut builder = PrometheusBuilder::new();
    for (name, buckets) in HISTOGRAMS {
        builder = builder.set_buckets_for_metric(Matcher::Full(name.to_owned()), buckets).expect("bucket lists are not empty");
    }
    builder
}

/// The standard `process_*` metrics (resident and virtual memory, CPU seconds, open and
/// maximum file descriptors, threads, start time), read from the OS by `metrics-process`.
/// Called when `/metrics` is scraped, so they cost nothing between scrapes. Its CPU counter
/// has whole seconds (`metrics` counters are integers).
pub fn sample_process() {
    process_collector().collect();
}

fn process_collector() -> &'static metrics_process::Collector {
    static COLLECTOR: OnceLock<metrics_process::Collector> = OnceLock::new();
    COLLECTOR.get_or_init(|| {
        let collector = metrics_process::Collector::default();
        collector.describe();
        collector
    })
}

/// Folds histogram samples into buckets periodically, so memory stays bounded between
/// scrapes. A plain thread: the recorder outlives any one runtime (tests run many).
fn spawn_upkeep(handle: PrometheusHandle) {
    let spawned = std::thread::Builder::new().name("metrics-upkeep".into()).spawn(move || {
        loop {
            std::thread::sleep(UPKEEP_INTERVAL);
            handle.run_upkeep();
        }
    });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start the metrics upkeep thread; histograms are folded only when scraped");
    }
}

/// Help text and unit of every metric.
pub fn describe() {
    describe_gauge!(BUILD_INFO, "Always 1; the labels name the running version, the git commit it was built from, and the replica.");
    describe_counter!(HTTP_REQUESTS, "HTTP requests on the public port by route template, method and status.");
    describe_histogram!(
        HTTP_REQUEST_DURATION,
        Unit::Seconds,
        "Time from a public-port request to its response head (SSE streams: until the stream opens)."
    );
    describe_gauge!(HTTP_REQUESTS_IN_FLIGHT, "Public-port requests whose response head has not been sent yet.");
    describe_counter!(MCP_REQUESTS, "JSON-RPC requests received by MCP method (\"other\" for unknown ones) and protocol era.");
    describe_counter!(JSONRPC_ERRORS, "JSON-RPC error responses sent, by error code (\"other\" for codes this server does not define).");
    describe_counter!(TOOL_CALLS, "tools/call requests by tool (\"unknown\" when no such tool is registered) and outcome.");
    describe_histogram!(TOOL_CALL_DURATION, Unit::Seconds, "tools/call duration including the wait for a concurrency slot.");
    describe_gauge!(TOOL_CALLS_QUEUED, "Tool calls waiting for a concurrency slot (a tool's own limit or the server-wide one).");
    describe_gauge!(SESSIONS_OPEN, "Open legacy (2025-11-25 and older) sessions.");
    describe_gauge!(SSE_STREAMS_OPEN, "Open SSE response streams by kind (get, post, listen, legacy_sse).");
    describe_counter!(LIST_CHANGED_SENT, "list_changed notifications queued on a client stream (one per stream and change).");
    describe_histogram!(
        LIST_CHANGED_FANOUT,
        Unit::Seconds,
        "Time from a list change's publication to its notification being queued on each stream."
    );
    describe_counter!(AUTH_VALIDATIONS, "Bearer-token checks by result (ok, rejected) and reason of a rejection.");
    describe_counter!(JWKS_REFRESHES, "Fetches of an issuer's signing keys (JWKS) by result.");
    describe_counter!(
        OAUTH_EVENTS,
        "Events of the built-in authorization server (sign_in, consent, code, token, refresh, revoke, register) by outcome."
    );
    describe_counter!(
        VAULT_EVENTS,
        "Events of the vault of per-user upstream credentials (elicit, connect, use, refresh, revoke, failure) by upstream and outcome."
    );
    describe_counter!(SERVER_REQUESTS, "HTTP requests to each virtual server's endpoint ([servers.<name>]), by server name.");
    describe_counter!(INTROSPECTION_REQUESTS, "Token introspection requests (RFC 7662) by result: active, inactive, error.");
    describe_counter!(INTROSPECTION_CACHE, "Introspection cache look-ups by result: hit, miss.");
    describe_counter!(
        RATE_LIMIT_REJECTIONS,
        "Requests refused by a rate limit or a per-client cap, by the limit (client, tool, global, auth_failures, backend_unavailable, sessions, streams)."
    );
    describe_gauge!(RATE_LIMIT_TRACKED_KEYS, "Keys the rate limiter tracks now (clients, tools, addresses).");
    describe_gauge!(AUDIT_QUEUE_DEPTH, "Audit records waiting for the background writer.");
    describe_gauge!(AUDIT_SPOOL_BYTES, Unit::Bytes, "Bytes in the audit spool not yet confirmed in the database.");
    describe_gauge!(
        AUDIT_JOURNAL_RECORDS,
        "Audit records answered from the fsynced journal and not yet in the database (sync durability on SQLite)."
    );
    describe_histogram!(AUDIT_BATCH_DURATION, Unit::Seconds, "Duration of one audit batch insert into the database, successful or not.");
    describe_counter!(AUDIT_RECORDS_WRITTEN, "Audit records inserted into the database (directly or from the spool).");
    describe_counter!(AUDIT_REPLAYED_RECORDS, "Audit records moved from the spool into the database.");
    describe_gauge!(DB_POOL_CONNECTIONS, "Database pool connections by state (idle, in_use).");
    describe_counter!(TOOL_RELOADS, "Reloads of tool definitions by source and result (ok, invalid).");
    describe_gauge!(TOOLS, "Tools served from each definition source (code: the built-in packs; file; database; upstream).");
    describe_counter!(
        RATE_LIMIT_BACKEND_ERRORS,
        "Rate-limit checks the shared store (Redis) failed (kind=error) or did not answer in time (kind=timeout)."
    );
    describe_gauge!(
        RATE_LIMIT_BACKEND_UP,
        "1 while the shared rate-limit store (Redis) answers, 0 after a failure until it answers again."
    );
    describe_gauge!(CONNECTIONS_OPEN, "Open connections on the public listener.");
    describe_counter!(
        CONNECTIONS_EVICTED,
        "Idle connections closed to make room for new ones at the connection cap (server.max_connections)."
    );
    describe_counter!(ACCEPT_ERRORS, "Failed accepts on the public listener (e.g. out of file descriptors), each followed by a back-off.");
    describe_gauge!(
        TLS_CERTIFICATE_EXPIRY,
        "When the certificate a listener serves expires (its notAfter), in seconds since the Unix epoch, by listener (server, admin)."
    );
    describe_counter!(
        TLS_RELOADS,
        "Reloads of a listener's changed TLS files, by result (ok; invalid: the previous certificate stays in service)."
    );
    describe_counter!(
        TLS_HANDSHAKE_FAILURES,
        "TLS handshakes that failed or were refused (e.g. no client certificate under mTLS), by listener."
    );
    describe_counter!(TASKS_CREATED, "Tasks created (tool calls run detached from their request).");
    describe_counter!(TASKS_ENDED, "Tasks that reached a terminal status, by status (completed, failed, cancelled).");
    describe_histogram!(TASK_DURATION, Unit::Seconds, "Time from a task's creation to its terminal status, by status.");
    describe_gauge!(TASKS_RUNNING, "Tasks whose tool runs on this replica now (working or waiting for input).");
    describe_counter!(TASK_INPUT_REQUESTS, "Times a task asked its client for input (went input_required).");
    describe_counter!(TASK_LEASES_LOST, "Tasks failed because the replica running them stopped (their lease lapsed).");
    describe_gauge!(
        CLUSTER_CONNECTED,
        "1 while this replica hears the others' events (Postgres LISTEN; always 1 for a single replica on SQLite), 0 while reconnecting."
    );
    describe_counter!(CLUSTER_EVENTS_SENT, "Events sent to the other replicas (Postgres NOTIFY).");
    describe_counter!(CLUSTER_EVENTS_RECEIVED, "Events received from the other replicas.");
    describe_counter!(
        UPSTREAM_CALLS,
        "Tool calls forwarded to upstream MCP servers, by upstream and outcome (ok, tool_error, rpc_error, timeout, failed, cancelled)."
    );
    describe_histogram!(UPSTREAM_CALL_DURATION, Unit::Seconds, "Time an upstream MCP server took to answer a forwarded call, by upstream.");
    describe_counter!(UPSTREAM_CONNECTS, "Connection attempts to upstream MCP servers, by upstream and result (ok, failed).");
    describe_gauge!(UPSTREAM_UP, "1 while the upstream MCP server is connected, 0 otherwise.");
    describe_gauge!(UPSTREAM_TOOLS, "Tools served from the upstream MCP server now.");
    describe_gauge!(
        UPSTREAM_TOOLS_SKIPPED,
        "Tools the upstream MCP server lists that are not served, by upstream and reason (invalid: a name or schema toolgate cannot serve; name_taken: another upstream or source holds the name)."
    );
    describe_counter!(
        CATALOG_DECISIONS,
        "Decisions on upstream catalog entries (approval), by decision (approved, rejected: by an operator; auto_approved: an upstream's first listing under pin)."
    );
    describe_gauge!(
        CATALOG_HELD,
        "Entries (tools, resources, prompts) of the upstream MCP server held for an operator's approval at its last listing."
    );
    describe_counter!(
        UPSTREAM_TOKEN_EXCHANGES,
        "Caller tokens exchanged for upstream tokens (RFC 8693), by upstream and result (ok, failed)."
    );
}

#[cfg(test)]
mod tests;
