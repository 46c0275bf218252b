//! The typed helpers the rest of the code records through. Each takes values whose label is
//! bounded by construction (an enum, a registered tool, a name from a fixed list) and resolves
//! its handle once, so recording on the request path is an atomic add, not a registry look-up
//! with a freshly allocated label set.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use metrics::{Counter, Gauge, Histogram, SharedString};

use super::series;
use super::{
    ACCEPT_ERRORS, AUDIT_BATCH_DURATION, AUDIT_RECORDS_WRITTEN, AUDIT_REPLAYED_RECORDS, AUTH_VALIDATIONS, CONNECTIONS_EVICTED,
    CONNECTIONS_OPEN, INTROSPECTION_CACHE, INTROSPECTION_REQUESTS, JSONRPC_ERRORS, JWKS_REFRESHES, LIST_CHANGED_FANOUT, LIST_CHANGED_SENT,
    MCP_REQUESTS, RATE_LIMIT_REJECTIONS, SSE_STREAMS_OPEN, TASK_DURATION, TASK_INPUT_REQUESTS, TASK_LEASES_LOST, TASKS_CREATED,
    TASKS_ENDED, TASKS_RUNNING, TOOL_CALL_DURATION, TOOL_CALLS, UPSTREAM_CALL_DURATION, UPSTREAM_CALLS, UPSTREAM_CONNECTS,
    UPSTREAM_TOKEN_EXCHANGES, UPSTREAM_TOOLS, UPSTREAM_TOOLS_SKIPPED, UPSTREAM_UP,
};
use crate::protocol::jsonrpc::code;

/// A handle resolved on first use at this call site: `once!(counter!(NAME, "k" => "v"))`.
/// Only for label sets fixed at the call site.
macro_rules! once {
    ($kind:ident!($($args:tt)*)) => {{
        static HANDLE: OnceLock<once!(@type $kind)> = OnceLock::new();
        HANDLE.get_or_init(|| metrics::$kind!($($args)*))
    }};
    (@type counter) => { Counter };
    (@type gauge) => { Gauge };
    (@type histogram) => { Histogram };
}

// ===== MCP requests and JSON-RPC errors =====

/// The transport a JSON-RPC request arrived on: the `era` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum McpEra {
    /// 2026-07-28 stateless requests.
    Modern,
    /// Streamable HTTP sessions (2025-03-26 to 2025-11-25).
    Legacy,
    /// The deprecated 2024-11-05 HTTP+SSE transport.
    Sse2024,
}

impl McpEra {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Modern => "modern",
            Self::Legacy => "legacy",
            Self::Sse2024 => "sse2024",
        }
    }

    fn index(self) -> usize {
        match self {
            Self::Modern => 0,
            Self::Legacy => 1,
            Self::Sse2024 => 2,
        }
    }
}

/// Method names with a label of their own; anything else a client sends is "other".
pub(super) const MCP_METHODS: [&str; 15] = [
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "subscriptions/listen",
];

/// Counts one JSON-RPC request (not notifications or responses).
pub fn mcp_request(method: &str, era: McpEra) {
    static HANDLES: [[OnceLock<Counter>; 3]; MCP_METHODS.len() + 1] = [const { [const { OnceLock::new() }; 3] }; MCP_METHODS.len() + 1];
    let i = MCP_METHODS.iter().position(|m| *m == method).unwrap_or(MCP_METHODS.len());
    let label = MCP_METHODS.get(i).copied().unwrap_or("other");
    HANDLES[i][era.index()].get_or_init(|| metrics::counter!(MCP_REQUESTS, "method" => label, "era" => era.as_str())).increment(1);
}

/// Codes with a label of their own; anything else is "other".
pub(super) const ERROR_CODES: [(i32, &str); 11] = [
    (code::PARSE_ERROR, "-32700"),
    (code::INVALID_REQUEST, "-32600"),
    (code::METHOD_NOT_FOUND, "-32601"),
    (code::INVALID_PARAMS, "-32602"),
    (code::INTERNAL_ERROR, "-32603"),
    (code::TRANSPORT, "-32000"),
    (code::SESSION_NOT_FOUND, "-32001"),
    (code::RESOURCE_NOT_FOUND, "-32002"),
    (code::HEADER_MISMATCH, "-32020"),
    (code::MISSING_CLIENT_CAPABILITY, "-32021"),
    (code::UNSUPPORTED_PROTOCOL_VERSION, "-32022"),
];

/// Counts one JSON-RPC error response put on the wire.
pub fn jsonrpc_error(error_code: i32) {
    static HANDLES: [OnceLock<Counter>; ERROR_CODES.len() + 1] = [const { OnceLock::new() }; ERROR_CODES.len() + 1];
    let i = ERROR_CODES.iter().position(|(c, _)| *c == error_code).unwrap_or(ERROR_CODES.len());
    let label = ERROR_CODES.get(i).map_or("other", |(_, l)| *l);
    HANDLES[i].get_or_init(|| metrics::counter!(JSONRPC_ERRORS, "code" => label)).increment(1);
}

// ===== tools =====

/// The `outcome` labels of a tool call, in the order the audit log's `Outcome` declares them:
/// a call is recorded by its outcome's index (`outcome as usize`), so the label is looked up
/// by nothing and no domain type is named here.
pub const TOOL_OUTCOMES: [&str; 8] =
    ["ok", "tool_error", "timeout", "cancelled", "denied", "rate_limited", "invalid_input", "internal_error"];

/// The handles of one tool: a counter per outcome (all registered at once, so every outcome
/// has a series from the first call and rates over them never miss a zero), the duration, and
/// its key in this replica's time series ([`super::series`]).
pub struct ToolMetrics {
    calls: [Counter; TOOL_OUTCOMES.len()],
    duration: Histogram,
    series: series::Handle,
}

impl std::fmt::Debug for ToolMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolMetrics").finish_non_exhaustive()
    }
}

impl ToolMetrics {
    /// Handles for a registered tool (its name is the label: bounded by the registry).
    pub fn new(tool: &str) -> Self {
        let series = series::global().handle(series::Scope::Tool, tool);
        let tool = SharedString::from(Arc::<str>::from(tool));
        Self {
            calls: TOOL_OUTCOMES.map(|o| metrics::counter!(TOOL_CALLS, "tool" => tool.clone(), "outcome" => o)),
            duration: metrics::histogram!(TOOL_CALL_DURATION, "tool" => tool),
            series,
        }
    }

    /// The handles for calls naming no registered tool: label "unknown".
    pub fn unknown() -> &'static Self {
        static UNKNOWN: OnceLock<ToolMetrics> = OnceLock::new();
        UNKNOWN.get_or_init(|| Self::new("unknown"))
    }

    /// One call; `outcome` indexes [`TOOL_OUTCOMES`] (an out-of-range index counts nowhere
    /// among the counters, and as an error in the series).
    pub fn record(&self, outcome: usize, elapsed: Duration) {
        if let Some(calls) = self.calls.get(outcome) {
            calls.increment(1);
        }
        self.duration.record(elapsed.as_secs_f64());
        self.series.record(elapsed, outcome != 0);
    }
}

// ===== streams and fan-out =====

/// What an SSE response stream carries: the `kind` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SseKind {
    /// A legacy session's standalone GET stream (or its resumption).
    Get,
    /// A POST answered as a stream (either era).
    Post,
    /// A modern `subscriptions/listen` stream.
    Listen,
    /// The 2024-11-05 transport's `GET /sse` connection.
    LegacySse,
}

impl SseKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::Post => "post",
            Self::Listen => "listen",
            Self::LegacySse => "legacy_sse",
        }
    }

    pub(super) fn gauge(self) -> &'static Gauge {
        static GAUGES: [OnceLock<Gauge>; 4] = [const { OnceLock::new() }; 4];
        let i = match self {
            Self::Get => 0,
            Self::Post => 1,
            Self::Listen => 2,
            Self::LegacySse => 3,
        };
        GAUGES[i].get_or_init(|| metrics::gauge!(SSE_STREAMS_OPEN, "kind" => self.as_str()))
    }
}

/// Counts one open stream for as long as it lives: held by the stream's body, so every end
/// (client gone, stream finished, shutdown, body never polled) decrements.
pub struct SseOpen(&'static Gauge);

impl SseOpen {
    pub fn new(kind: SseKind) -> Self {
        let gauge = kind.gauge();
        gauge.increment(1.0);
        Self(gauge)
    }
}

impl Drop for SseOpen {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

/// One list_changed notification queued on a stream; `published` is when the change was
/// published (absent for the catch-up notifications after the fan-out lagged).
pub fn list_changed_sent(published: Option<Instant>) {
    once!(counter!(LIST_CHANGED_SENT)).increment(1);
    if let Some(at) = published {
        once!(histogram!(LIST_CHANGED_FANOUT)).record(at.elapsed().as_secs_f64());
    }
}

// ===== auth =====

/// A bearer token accepted by the gate.
pub fn auth_ok() {
    // The reason of an accepted token is empty, which Prometheus treats as no label.
    once!(counter!(AUTH_VALIDATIONS, "result" => "ok", "reason" => "")).increment(1);
}

/// A request refused by the bearer gate; `reason` is one of a fixed set the auth module names
/// (`missing_token`, `expired`, `wrong_audience`, ...), never free text.
pub fn auth_refused(reason: &'static str) {
    metrics::counter!(AUTH_VALIDATIONS, "result" => "rejected", "reason" => reason).increment(1);
}

/// The request counter of one virtual server (its name is the operator's, from the settings
/// or the admin API): resolved once per server, incremented per request.
pub fn server_requests(server: &str) -> metrics::Counter {
    metrics::counter!(super::SERVER_REQUESTS, "server" => server.to_owned())
}

/// The events of the built-in authorization server: the `event` label.
const OAUTH_EVENT_NAMES: [&str; 7] = ["sign_in", "consent", "code", "token", "refresh", "revoke", "register"];

/// The authorization server started: each event's `ok` and `denied` series exist from now.
pub fn oauth_started() {
    for event in OAUTH_EVENT_NAMES {
        for outcome in ["ok", "denied"] {
            metrics::counter!(super::OAUTH_EVENTS, "event" => event, "outcome" => outcome).increment(0);
        }
    }
}

/// One event of the built-in authorization server; `event` and `outcome` are fixed words.
pub fn oauth_event(event: &'static str, outcome: &'static str) {
    metrics::counter!(super::OAUTH_EVENTS, "event" => event, "outcome" => outcome).increment(1);
}

/// One event of the vault (`src/vault`); `event` and `outcome` are fixed words, `upstream` a
/// configured name.
pub fn vault_event(upstream: &str, event: &'static str, outcome: &'static str) {
    metrics::counter!(super::VAULT_EVENTS, "upstream" => upstream.to_owned(), "event" => event, "outcome" => outcome).increment(1);
}

/// One fetch of an issuer's JWKS.
pub fn jwks_refresh(ok: bool) {
    if ok {
        once!(counter!(JWKS_REFRESHES, "result" => "ok")).increment(1);
    } else {
        once!(counter!(JWKS_REFRESHES, "result" => "error")).increment(1);
    }
}

/// How an introspection request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Introspection {
    Active,
    Inactive,
    /// The endpoint failed or could not be reached.
    Error,
}

pub fn introspection_request(result: Introspection) {
    match result {
        Introspection::Active => once!(counter!(INTROSPECTION_REQUESTS, "result" => "active")).increment(1),
        Introspection::Inactive => once!(counter!(INTROSPECTION_REQUESTS, "result" => "inactive")).increment(1),
        Introspection::Error => once!(counter!(INTROSPECTION_REQUESTS, "result" => "error")).increment(1),
    }
}

pub fn introspection_cache(hit: bool) {
    if hit {
        once!(counter!(INTROSPECTION_CACHE, "result" => "hit")).increment(1);
    } else {
        once!(counter!(INTROSPECTION_CACHE, "result" => "miss")).increment(1);
    }
}

// ===== limits =====

/// The `limit` values of a refusal (`data.limit` on the wire).
pub(super) const LIMITS: [&str; 7] = ["client", "tool", "global", "auth_failures", "backend_unavailable", "sessions", "streams"];

/// A request refused by a rate limit or a cap; `limit` is one of [`LIMITS`] (others count as
/// "other").
pub fn rate_limited(limit: &str) {
    static HANDLES: [OnceLock<Counter>; LIMITS.len() + 1] = [const { OnceLock::new() }; LIMITS.len() + 1];
    let i = LIMITS.iter().position(|l| *l == limit).unwrap_or(LIMITS.len());
    let label = LIMITS.get(i).copied().unwrap_or("other");
    HANDLES[i].get_or_init(|| metrics::counter!(RATE_LIMIT_REJECTIONS, "reason" => label)).increment(1);
}

// ===== connections =====

/// The public listener's open connections.
pub fn connections_open(open: usize) {
    once!(gauge!(CONNECTIONS_OPEN)).set(open as f64);
}

/// A task was created.
pub fn task_created() {
    once!(counter!(TASKS_CREATED)).increment(1);
}

/// A task reached a terminal status (`completed`, `failed`, `cancelled`) `seconds` after it
/// was created.
pub fn task_ended(status: &'static str, seconds: f64) {
    metrics::counter!(TASKS_ENDED, "status" => status).increment(1);
    metrics::histogram!(TASK_DURATION, "status" => status).record(seconds);
}

/// How many tasks run on this replica now.
pub fn tasks_running(n: usize) {
    once!(gauge!(TASKS_RUNNING)).set(n as f64);
}

/// A task asked its client for input.
pub fn task_input_requested() {
    once!(counter!(TASK_INPUT_REQUESTS)).increment(1);
}

/// Tasks failed because their replica stopped.
pub fn tasks_lease_lost(n: u64) {
    once!(counter!(TASK_LEASES_LOST)).increment(n);
}

/// An idle connection closed to make room at the connection cap.
pub fn connection_evicted() {
    once!(counter!(CONNECTIONS_EVICTED)).increment(1);
}

/// A failed accept on the public listener.
pub fn accept_error() {
    once!(counter!(ACCEPT_ERRORS)).increment(1);
}

// ===== upstream MCP servers =====
// Labelled by upstream name: a fixed set, from the operator's settings.

/// The outcomes of a forwarded call: the `outcome` label of `toolgate_upstream_calls_total`.
pub const UPSTREAM_OUTCOMES: [&str; 6] = ["ok", "tool_error", "rpc_error", "timeout", "failed", "cancelled"];

/// One upstream's call handles, resolved once (a look-up per call cost a registry search and
/// two label allocations on the forwarding path), and its key in the time series.
pub struct UpstreamMetrics {
    calls: [Counter; UPSTREAM_OUTCOMES.len()],
    duration: Histogram,
    series: series::Handle,
}

impl std::fmt::Debug for UpstreamMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamMetrics").finish_non_exhaustive()
    }
}

impl UpstreamMetrics {
    /// The handles of a configured upstream, made when it is installed; every one of its series
    /// exists from then on, at zero (registering a gauge adds nothing to its value, so a
    /// replaced upstream's figures stand until its new link reports).
    pub fn new(upstream: &str) -> Self {
        let series = series::global().handle(series::Scope::Upstream, upstream);
        let upstream = SharedString::from(Arc::<str>::from(upstream));
        for result in ["ok", "failed"] {
            metrics::counter!(UPSTREAM_CONNECTS, "upstream" => upstream.clone(), "result" => result).increment(0);
            metrics::counter!(UPSTREAM_TOKEN_EXCHANGES, "upstream" => upstream.clone(), "result" => result).increment(0);
        }
        for reason in ["invalid", "name_taken"] {
            metrics::gauge!(UPSTREAM_TOOLS_SKIPPED, "upstream" => upstream.clone(), "reason" => reason).increment(0.0);
        }
        for gauge in [UPSTREAM_UP, UPSTREAM_TOOLS, super::CATALOG_HELD] {
            metrics::gauge!(gauge, "upstream" => upstream.clone()).increment(0.0);
        }
        Self {
            calls: UPSTREAM_OUTCOMES.map(|o| metrics::counter!(UPSTREAM_CALLS, "upstream" => upstream.clone(), "outcome" => o)),
            duration: metrics::histogram!(UPSTREAM_CALL_DURATION, "upstream" => upstream),
            series,
        }
    }

    /// One forwarded call; `outcome` indexes [`UPSTREAM_OUTCOMES`].
    pub fn record(&self, outcome: usize, elapsed: Duration) {
        if let Some(calls) = self.calls.get(outcome) {
            calls.increment(1);
        }
        self.duration.record(elapsed.as_secs_f64());
        self.series.record(elapsed, outcome != 0);
    }
}

/// A connection attempt to `upstream`; its state and tool count after it.
pub fn upstream_connect(upstream: &str, ok: bool) {
    metrics::counter!(UPSTREAM_CONNECTS, "upstream" => upstream.to_owned(), "result" => if ok { "ok" } else { "failed" }).increment(1);
}

/// A caller's token exchanged (or not) for `upstream`.
pub fn upstream_token_exchange(upstream: &str, ok: bool) {
    metrics::counter!(UPSTREAM_TOKEN_EXCHANGES, "upstream" => upstream.to_owned(), "result" => if ok { "ok" } else { "failed" })
        .increment(1);
}

/// How many of `upstream`'s listed tools are served, and how many are not, by why.
pub fn upstream_tools(upstream: &str, served: usize, invalid: usize, name_taken: usize) {
    metrics::gauge!(UPSTREAM_TOOLS, "upstream" => upstream.to_owned()).set(served as f64);
    for (reason, n) in [("invalid", invalid), ("name_taken", name_taken)] {
        metrics::gauge!(UPSTREAM_TOOLS_SKIPPED, "upstream" => upstream.to_owned(), "reason" => reason).set(n as f64);
    }
}

/// A decision on an upstream catalog entry: `approved`, `rejected` or `auto_approved`.
pub fn catalog_decision(decision: &'static str) {
    metrics::counter!(super::CATALOG_DECISIONS, "decision" => decision).increment(1);
}

/// Entries of `upstream` held for an operator's approval at its last listing.
pub fn catalog_held(upstream: &str, held: usize) {
    metrics::gauge!(super::CATALOG_HELD, "upstream" => upstream.to_owned()).set(held as f64);
}

/// Whether `upstream` is connected, and how many of its tools are served.
pub fn upstream_state(upstream: &str, up: bool, tools: usize) {
    metrics::gauge!(UPSTREAM_UP, "upstream" => upstream.to_owned()).set(if up { 1.0 } else { 0.0 });
    metrics::gauge!(UPSTREAM_TOOLS, "upstream" => upstream.to_owned()).set(tools as f64);
}

// ===== audit =====

/// One batch insert into the database; `written` is the number of records when it succeeded.
pub fn audit_batch(elapsed: Duration, written: Option<usize>) {
    once!(histogram!(AUDIT_BATCH_DURATION)).record(elapsed.as_secs_f64());
    if let Some(n) = written {
        once!(counter!(AUDIT_RECORDS_WRITTEN)).increment(n as u64);
    }
}

/// Records confirmed in the database from the spool.
pub fn audit_replayed(records: usize) {
    once!(counter!(AUDIT_REPLAYED_RECORDS)).increment(records as u64);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_methods_and_codes_share_one_label() {
        assert_eq!(MCP_METHODS.iter().position(|m| *m == "tools/call"), Some(4));
        assert!(!MCP_METHODS.contains(&"other"));
        assert!(ERROR_CODES.iter().all(|(c, l)| c.to_string() == *l));
    }
}
