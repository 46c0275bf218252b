//! `GET /metrics` on the admin listener: the Prometheus text of every metric, after sampling the
//! gauges that mirror state owned elsewhere (sessions, queues, limiter keys, the audit queue and
//! spool, database pools, tools per source, the process's memory, CPU and files), so they are
//! always fresh and cost nothing between scrapes.
//! Unauthenticated, because Prometheus scrapes it: the admin port must stay private.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::PrometheusHandle;

use crate::audit::AuditLog;
use crate::limits::Limiter;
use crate::metrics::{
    AUDIT_JOURNAL_RECORDS, AUDIT_QUEUE_DEPTH, AUDIT_SPOOL_BYTES, CONTENT_TYPE, DB_POOL_CONNECTIONS, RATE_LIMIT_TRACKED_KEYS, SESSIONS_OPEN,
    TOOL_CALLS_QUEUED, TOOLS,
};
use crate::server::McpServer;
use crate::session::SessionStore;
use crate::store::{Backend, Store};
use crate::tool::Origin;

/// What a scrape reads.
#[derive(Clone)]
pub struct Scrape {
    pub handle: PrometheusHandle,
    pub sessions: Arc<SessionStore>,
    pub server: Arc<McpServer>,
    pub limiter: Option<Arc<dyn Limiter>>,
    pub audit: Option<Arc<AuditLog>>,
    pub store: Store,
}

/// `GET /metrics`.
pub fn router(scrape: Scrape) -> Router {
    Router::new().route("/metrics", get(serve)).with_state(scrape)
}

async fn serve(State(scrape): State<Scrape>) -> Response {
    sample(&scrape);
    let body = scrape.handle.render();
    ([(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE))], body).into_response()
}

/// Refreshes the gauges that mirror state owned elsewhere: cheap reads, always fresh.
fn sample(s: &Scrape) {
    metrics::gauge!(SESSIONS_OPEN).set(s.sessions.len() as f64);
    let tools = s.server.tools.snapshot();
    let queued = s.server.calls.queued() + tools.iter().filter_map(|t| t.bulkhead.as_ref()).map(|b| b.queued()).sum::<usize>();
    metrics::gauge!(TOOL_CALLS_QUEUED).set(queued as f64);
    // Every source has its series, the built-in packs' (`code`) included, at zero when empty.
    for origin in [Origin::Code, Origin::File, Origin::Database, Origin::Upstream] {
        let served = tools.iter().filter(|t| t.tool.origin() == origin).count();
        metrics::gauge!(TOOLS, "source" => origin.as_str()).set(served as f64);
    }
    crate::metrics::sample_process();
    if let Some(limiter) = &s.limiter {
        metrics::gauge!(RATE_LIMIT_TRACKED_KEYS).set(limiter.tracked_keys() as f64);
    }
    if let Some(audit) = &s.audit {
        metrics::gauge!(AUDIT_QUEUE_DEPTH).set(audit.queue_depth() as f64);
        metrics::gauge!(AUDIT_SPOOL_BYTES).set(audit.spool_bytes() as f64);
        metrics::gauge!(AUDIT_JOURNAL_RECORDS).set(audit.journal_backlog() as f64);
    }
    let (size, idle) = match s.store.backend() {
        Backend::Sqlite(pool) => (pool.size(), pool.num_idle()),
        Backend::Postgres(pool) => (pool.size(), pool.num_idle()),
    };
    let idle = u32::try_from(idle).unwrap_or(size).min(size);
    metrics::gauge!(DB_POOL_CONNECTIONS, "state" => "idle").set(f64::from(idle));
    metrics::gauge!(DB_POOL_CONNECTIONS, "state" => "in_use").set(f64::from(size - idle));
}
