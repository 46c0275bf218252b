//! The public router and its layers, as one commented stack (outermost first), and the admin
//! listener's router.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer};
use tower_http::sensitive_headers::SetSensitiveRequestHeadersLayer;
use tower_http::trace::TraceLayer;

use super::AppState;
use crate::admin::metrics::Scrape;
use crate::transport::guard::{self, HostGuard};
use crate::transport::{legacy_sse, streamable};

/// The public router: MCP endpoint, legacy SSE transport, and health probes.
pub fn router(state: AppState) -> Router {
    let settings = &state.settings.server;
    let endpoint = || post(streamable::post).get(streamable::get).delete(streamable::delete).fallback(streamable::other_method);
    // Virtual servers come and go with the stored definitions, so their paths are not routes:
    // every other path reaches the fallback, where the endpoint layer finds the server by its
    // path or answers 404.
    let mut mcp = Router::new().route(&settings.mcp_path, endpoint()).fallback(endpoint());
    if settings.legacy_sse {
        mcp = mcp.route("/sse", get(legacy_sse::open)).route("/messages", post(legacy_sse::message));
    }
    let host_guard = HostGuard::new(&settings.allowed_hosts, &settings.allowed_origins);
    // One ServiceBuilder per router: every `Router::layer` call boxes the routes again, and
    // axum clones each box per request (measured: ~5% of the request path in clone_box).
    // Order, outermost first: the guard (Host/Origin, 403), then CORS, which answers
    // preflights and exposes Mcp-Session-Id to browser clients (S-11) for admitted origins.
    // The bearer gate runs after both, so a preflight or a foreign origin never reaches it.
    let mcp = mcp
        .layer(
            ServiceBuilder::new()
                // After the drain delay of a shutdown: 503 before any other work; then Host/Origin.
                .layer(guard::GateLayer::new(host_guard.clone(), state.closing.clone(), settings.max_body_bytes))
                // Which endpoint (default or a virtual server), or 404 for a path none has.
                .layer(crate::transport::endpoint::EndpointLayer::new(state.server.clone(), &settings.mcp_path, settings.legacy_sse))
                .layer(cors_layer(host_guard))
                .layer(state.gate.clone()),
        )
        .with_state(state.clone());

    let mut public = Router::new().route("/healthz", get(|| async { "ok" })).route("/readyz", get(crate::health::ready));
    if state.auth.is_some() {
        // RFC 9728: at the root and with the MCP path appended; public and cacheable.
        let suffixed = format!("/.well-known/oauth-protected-resource{}", settings.mcp_path);
        public = public
            .route("/.well-known/oauth-protected-resource", get(crate::transport::metadata::serve))
            .route(&suffixed, get(crate::transport::metadata::serve))
            .route("/.well-known/oauth-protected-resource/{*path}", get(crate::transport::metadata::serve_server));
    }
    let mut public = public.with_state(state.clone());
    if let Some(server) = &state.authserver {
        // Outside the MCP endpoint's bearer gate: these endpoints are how a client gets a token.
        let proxies = crate::transport::client_ip::TrustedProxies::parse(&settings.trusted_proxies).unwrap_or_default();
        let upstreams = state.upstreams.clone();
        let per_user: Arc<dyn Fn() -> Vec<String> + Send + Sync> = Arc::new(move || upstreams.per_user());
        public = public.merge(crate::authserver_http::router(server.clone(), proxies, state.vault.clone(), per_user));
    }
    Router::new().merge(public).merge(mcp).layer(
        ServiceBuilder::new()
            .layer(SetSensitiveRequestHeadersLayer::new([axum::http::header::AUTHORIZATION, axum::http::header::COOKIE]))
            .layer(SetRequestIdLayer::x_request_id(RequestIds::new()))
            .layer(PropagateRequestIdLayer::x_request_id())
            // The request's span (request id, trace id); TraceLayer logs the response in it.
            .layer(crate::telemetry::http::RequestSpanLayer)
            .layer(TraceLayer::new_for_http().make_span_with(crate::telemetry::http::current_span))
            // Inside the trace span and outside the panic catcher, so a panic counts as its 500.
            .layer(crate::transport::http_metrics::HttpMetricsLayer)
            .layer(CatchPanicLayer::custom(|_| {
                crate::transport::headers::transport_error(
                    axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                    "Internal error; the server logged the details",
                )
            })),
    )
}

/// Request ids `<process prefix>-<counter>`: unique across replicas (random prefix) without a
/// `getrandom` syscall per request, which UUIDv4 ids cost (measured in the request path).
#[derive(Clone, Debug)]
struct RequestIds {
    prefix: Arc<str>,
    next: Arc<std::sync::atomic::AtomicU64>,
}

impl RequestIds {
    fn new() -> Self {
        let prefix = format!("{:08x}", rand::random::<u32>());
        Self { prefix: prefix.into(), next: Arc::new(std::sync::atomic::AtomicU64::new(1)) }
    }
}

impl MakeRequestId for RequestIds {
    fn make_request_id<B>(&mut self, _: &axum::http::Request<B>) -> Option<RequestId> {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        axum::http::HeaderValue::from_str(&format!("{}-{n}", self.prefix)).ok().map(RequestId::new)
    }
}

fn cors_layer(guard: HostGuard) -> tower_http::cors::CorsLayer {
    use axum::http::{HeaderName, Method, header};
    use tower_http::cors::{AllowOrigin, CorsLayer};
    let mcp_headers = ["mcp-session-id", "mcp-protocol-version", "last-event-id", "mcp-method", "mcp-name"].map(HeaderName::from_static);
    CorsLayer::new()
        .allow_origin(AllowOrigin::predicate(move |origin, _| origin.to_str().is_ok_and(|o| guard.origin_allowed(o))))
        .allow_methods([Method::GET, Method::POST, Method::DELETE])
        .allow_headers(
            [header::CONTENT_TYPE, header::AUTHORIZATION, header::ACCEPT].into_iter().chain(mcp_headers.clone()).collect::<Vec<_>>(),
        )
        .expose_headers([HeaderName::from_static("mcp-session-id")])
        .max_age(Duration::from_secs(600))
}

/// The admin listener's router: the admin API and `/metrics`, with request ids and traces.
pub fn admin_router(state: &AppState) -> Router {
    let scrape = Scrape {
        handle: state.metrics.clone(),
        sessions: state.sessions.clone(),
        server: state.server.clone(),
        limiter: state.limiter.clone(),
        audit: state.audit.clone(),
        store: state.store.clone(),
    };
    // `/metrics` is not behind the admin gate: Prometheus scrapes it, and this port is private.
    crate::admin::router(state.admin.clone()).merge(crate::admin::metrics::router(scrape)).layer(
        ServiceBuilder::new()
            .layer(SetSensitiveRequestHeadersLayer::new([axum::http::header::AUTHORIZATION, axum::http::header::COOKIE]))
            .layer(SetRequestIdLayer::x_request_id(RequestIds::new()))
            .layer(PropagateRequestIdLayer::x_request_id())
            .layer(crate::telemetry::http::RequestSpanLayer)
            .layer(TraceLayer::new_for_http().make_span_with(crate::telemetry::http::current_span)),
    )
}
