//! Assembly: shared state, the router with its layers, background tasks, and serving with a
//! graceful shutdown that ends open streams instead of waiting on them forever.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer};
use tower_http::sensitive_headers::SetSensitiveRequestHeadersLayer;
use tower_http::trace::TraceLayer;

use crate::audit::AuditLog;
use crate::auth::bearer::{self, Authenticator};
use crate::auth::introspection::Introspector;
use crate::auth::jwt::JwtVerifier;
use crate::auth::metadata;
use crate::auth::settings::AuthMode;
use crate::bus::{EventBus, LocalBus};
use crate::cluster::Cluster;
use crate::config::Settings;
use crate::server::McpServer;
use crate::session::SessionStore;
use crate::store::Store;
use crate::tooldef::Definitions;
use crate::transport::guard::{self, HostGuard};
use crate::transport::listen::{self, Listeners};
use crate::transport::{legacy_sse, streamable};

/// Everything request handlers share. One `Arc`: extractors clone the state on every
/// request, so a clone must cost one atomic increment (measured: cloning five `Arc`s and a
/// token per request was 3% of the request path).
#[derive(Clone, Debug)]
pub struct AppState(Arc<Shared>);

/// What `AppState` points to.
pub struct Shared {
    pub server: Arc<McpServer>,
    pub sessions: Arc<SessionStore>,
    pub listeners: Arc<Listeners>,
    pub settings: Arc<Settings>,
    /// Cancelled when the server starts shutting down: readiness turns 503 and notification
    /// streams end (the sequence is in [`crate::shutdown`]).
    pub shutdown: CancellationToken,
    /// Cancelled when the drain delay after the shutdown signal is over: the listener stops
    /// accepting and requests still arriving get 503.
    pub closing: CancellationToken,
    /// The bearer gate; `None` when `auth.mode = "off"`.
    pub auth: Option<Arc<Authenticator>>,
    /// Rate limits; `None` when `limits.enabled = false`.
    pub limiter: Option<Arc<dyn crate::limits::Limiter>>,
    /// The audit log; `None` when `audit.enabled = false`.
    pub audit: Option<Arc<AuditLog>>,
    /// The database (SQLite by default): audit log and stored tool definitions.
    pub store: Store,
    /// The declarative tools' sources (tools file, database).
    pub definitions: Arc<Definitions>,
    /// The other replicas (Postgres LISTEN/NOTIFY), or nobody on a single node.
    pub cluster: Arc<dyn Cluster>,
    /// Whose `X-Forwarded-For` names the client (`server.trusted_proxies`).
    pub proxies: crate::transport::client_ip::TrustedProxies,
    /// What `/readyz` reports.
    pub health: crate::health::Health,
    /// The process-wide Prometheus recorder, rendered by `/metrics` on the admin listener.
    pub metrics: metrics_exporter_prometheus::PrometheusHandle,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("server", &self.server)
            .field("sessions", &self.sessions)
            .field("auth", &self.auth)
            .finish_non_exhaustive()
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

impl AppState {
    /// The client's address: the TCP peer, or what a trusted proxy says it forwarded for.
    pub fn client_ip(&self, peer: Option<std::net::IpAddr>, headers: &axum::http::HeaderMap) -> Option<std::net::IpAddr> {
        peer.map(|peer| self.proxies.client(peer, headers))
    }

    /// State with an in-process event bus and the configured tool packs.
    pub async fn new(mut settings: Settings) -> anyhow::Result<Self> {
        // First: anything recorded before the recorder exists is lost.
        let metrics = crate::metrics::install(&settings.audit.resolved_replica_id());
        let dev_key = match settings.auth.mode {
            AuthMode::Dev => {
                if settings.auth.resource.is_none() {
                    settings.auth.resource = Some(crate::auth::dev::default_resource(&settings));
                }
                let path = settings.auth.dev_key_file.clone();
                let key = crate::auth::dev::load_or_create_key(&path)
                    .map_err(|e| anyhow::anyhow!("cannot read or create the development key {}: {e}", path.display()))?;
                Some(key)
            }
            _ => None,
        };
        let settings = Arc::new(settings);
        let bus: Arc<dyn EventBus> = Arc::new(LocalBus::default());
        let server = Arc::new(McpServer::new(settings.clone(), bus));
        crate::packs::install(&server, &settings.tools).map_err(|e| anyhow::anyhow!("cannot install tool packs: {e}"))?;
        let auth = match settings.auth.mode {
            AuthMode::Off => None,
            AuthMode::Dev => {
                let resource = settings.auth.resource.clone().unwrap_or_default();
                let issuers = dev_key.map(crate::auth::dev::issuer).into_iter().collect();
                let http = reqwest::Client::new();
                let verifier = JwtVerifier::new(issuers, resource, http).map_err(|e| anyhow::anyhow!("dev mode: {e}"))?;
                tracing::warn!("auth.mode = \"dev\": accepting development tokens from `toolgate dev-token`; never use this in production");
                Some(Arc::new(Authenticator::new(&settings.auth, Some(Arc::new(verifier)), None)))
            }
            AuthMode::Jwt => {
                let auth = &settings.auth;
                let resource = auth.resource.clone().unwrap_or_default();
                let verifier = if auth.issuers.is_empty() {
                    None
                } else {
                    let http = reqwest::Client::builder()
                        .timeout(Duration::from_secs(5))
                        .build()
                        .map_err(|e| anyhow::anyhow!("cannot build the HTTP client for issuer keys: {e}"))?;
                    let verifier = JwtVerifier::new(auth.issuers.clone(), resource.clone(), http)
                        .map_err(|e| anyhow::anyhow!("invalid auth.issuers: {e}"))?;
                    Some(Arc::new(verifier))
                };
                let introspector = match &auth.introspection {
                    None => None,
                    Some(i) => {
                        Some(Arc::new(Introspector::new(i, &resource).map_err(|e| anyhow::anyhow!("invalid auth.introspection: {e}"))?))
                    }
                };
                Some(Arc::new(Authenticator::new(auth, verifier, introspector)))
            }
        };
        // The store is connected (and migrated) before serving, so a bad URL stops start-up.
        let store = Store::connect(&settings.storage).await.map_err(|e| anyhow::anyhow!("storage: {e}"))?;
        let audit = if settings.audit.enabled {
            Some(AuditLog::start(&settings.audit, store.clone()).map_err(|e| anyhow::anyhow!("audit log: {e}"))?)
        } else {
            None
        };
        // An invalid tools file stops start-up with every problem listed; later reloads keep
        // the previous tools instead.
        let definitions = Arc::new(Definitions::new(settings.clone(), server.clone(), Some(store.clone())));
        definitions.load_initial().await?;
        let shutdown = CancellationToken::new();
        let cluster = crate::cluster::follow::start(&settings, &store, shutdown.clone()).await?;
        let mut sessions = SessionStore::new(settings.sessions.clone(), settings.sse.replay_events);
        if let crate::store::Backend::Postgres(pool) = store.backend() {
            // Replicas share legacy sessions through Postgres; the ids must verify everywhere.
            if settings.sessions.secret.is_none() {
                tracing::warn!(
                    "sessions.secret is unset: sessions created through this replica are refused by the others; set the same secret on every replica"
                );
            }
            sessions = sessions.shared_with(crate::session::shared::SharedSessions::new(pool.clone()), cluster.clone());
        }
        let limiter: Option<Arc<dyn crate::limits::Limiter>> = if settings.limits.enabled {
            Some(crate::limits::build(&settings.limits).await.map_err(|e| anyhow::anyhow!("invalid [limits]: {e}"))?)
        } else {
            None
        };
        // Dev mode and auth off verify locally; otherwise ready once keys or the endpoint answer.
        let tokens_ready = auth.as_ref().is_none_or(|a| a.ready_now());
        Ok(Self(Arc::new(Shared {
            auth,
            limiter,
            audit,
            store,
            definitions,
            cluster,
            proxies: crate::transport::client_ip::TrustedProxies::parse(&settings.server.trusted_proxies)
                .map_err(|e| anyhow::anyhow!("server.trusted_proxies: {e}"))?,
            // The store was just connected and migrated; token readiness is known once checked.
            health: crate::health::Health {
                database: std::sync::atomic::AtomicBool::new(true),
                tokens: std::sync::atomic::AtomicBool::new(tokens_ready),
            },
            metrics,
            sessions: Arc::new(sessions),
            listeners: Arc::new(Listeners::default()),
            server,
            settings,
            shutdown,
            closing: CancellationToken::new(),
        })))
    }
}

/// The public router: MCP endpoint, legacy SSE transport, and health probes.
pub fn router(state: AppState) -> Router {
    let settings = &state.settings.server;
    let mut mcp = Router::new().route(
        &settings.mcp_path,
        post(streamable::post).get(streamable::get).delete(streamable::delete).fallback(streamable::other_method),
    );
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
                .layer(guard::GateLayer::new(host_guard.clone(), state.closing.clone()))
                .layer(cors_layer(host_guard))
                .layer(axum::middleware::from_fn_with_state(state.clone(), bearer::require)),
        )
        .with_state(state.clone());

    let mut public = Router::new().route("/healthz", get(|| async { "ok" })).route("/readyz", get(crate::health::ready));
    if state.auth.is_some() {
        // RFC 9728: at the root and with the MCP path appended; public and cacheable.
        let suffixed = format!("/.well-known/oauth-protected-resource{}", settings.mcp_path);
        public = public.route("/.well-known/oauth-protected-resource", get(metadata::serve)).route(&suffixed, get(metadata::serve));
    }
    let public = public.with_state(state.clone());
    Router::new().merge(public).merge(mcp).layer(
        ServiceBuilder::new()
            .layer(SetSensitiveRequestHeadersLayer::new([axum::http::header::AUTHORIZATION, axum::http::header::COOKIE]))
            .layer(SetRequestIdLayer::x_request_id(RequestIds::new()))
            .layer(PropagateRequestIdLayer::x_request_id())
            // The request's span (request id, trace id); TraceLayer logs the response in it.
            .layer(crate::telemetry::http::RequestSpanLayer)
            .layer(TraceLayer::new_for_http().make_span_with(crate::telemetry::http::current_span))
            // Inside the trace span and outside the panic catcher, so a panic counts as its 500.
            .layer(crate::metrics::http::HttpMetricsLayer)
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

/// Starts the background tasks: change fan-out and session expiry.
fn spawn_background(state: &AppState) {
    if let Some(audit) = &state.audit {
        tokio::spawn(audit_registry_changes(state.server.bus.clone(), audit.clone(), state.shutdown.clone()));
    }
    state.definitions.spawn_watchers(state.shutdown.clone());
    tokio::spawn(crate::health::probe_health(state.clone()));
    tokio::spawn(crate::cluster::follow::follow_definitions(
        state.cluster.subscribe(),
        state.definitions.clone(),
        state.server.clone(),
        state.shutdown.clone(),
    ));
    tokio::spawn(crate::cluster::follow::follow_sessions(state.cluster.subscribe(), state.clone()));
    if let Some(limiter) = &state.limiter {
        // Subscribed and applied once before serving, so the first request already meets the
        // definitions' own rates; the task then follows every change.
        let rx = state.server.bus.subscribe();
        configure_tool_limits(&state.server, limiter.as_ref());
        tokio::spawn(apply_tool_limits(state.server.clone(), limiter.clone(), rx, state.shutdown.clone()));
        crate::limits::spawn_housekeeping(limiter.clone(), state.settings.limits.housekeeping_interval(), state.shutdown.clone());
    }
    if let Some(verifier) = state.auth.as_ref().and_then(|a| a.verifier()) {
        verifier.spawn_refresh(Duration::from_secs(state.settings.auth.jwks_refresh_secs.max(30)), state.shutdown.clone());
    }
    tokio::spawn(listen::fan_out(state.server.bus.clone(), state.sessions.clone(), state.listeners.clone()));
    let sessions = state.sessions.clone();
    let stop = state.shutdown.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(30));
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let n = sessions.expire_idle();
                    if n > 0 {
                        tracing::info!(expired = n, "ended idle sessions");
                    }
                    // With several replicas, sessions idle on every replica end in the shared store.
                    let n = sessions.sweep_shared().await;
                    if n > 0 {
                        tracing::info!(expired = n, "ended idle shared sessions");
                    }
                }
                () = stop.cancelled() => return,
            }
        }
    });
}

/// Keeps the limiter's per-tool rules in step with the rates tool definitions carry.
fn configure_tool_limits(server: &McpServer, limiter: &dyn crate::limits::Limiter) {
    let rates = server.tools.snapshot().iter().filter_map(|t| Some((t.name().to_owned(), t.tool.opts.rate_limit.clone()?))).collect();
    limiter.configure_tools(&rates);
}

async fn apply_tool_limits(
    server: Arc<McpServer>,
    limiter: Arc<dyn crate::limits::Limiter>,
    mut rx: tokio::sync::broadcast::Receiver<crate::bus::Change>,
    stop: CancellationToken,
) {
    loop {
        let change = tokio::select! {
            change = rx.recv() => change,
            () = stop.cancelled() => return,
        };
        match change {
            Ok(crate::bus::Change::ToolsListChanged) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                configure_tool_limits(&server, limiter.as_ref());
            }
            Ok(_) => {}
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// Every change to what the server offers becomes an audit record.
async fn audit_registry_changes(bus: Arc<dyn EventBus>, audit: Arc<AuditLog>, stop: CancellationToken) {
    use crate::audit::{AuditRecord, EventKind, Outcome};
    let mut rx = bus.subscribe();
    loop {
        let change = tokio::select! {
            change = rx.recv() => change,
            () = stop.cancelled() => return,
        };
        let detail = match change {
            Ok(crate::bus::Change::ToolsListChanged) => "tools list changed",
            Ok(crate::bus::Change::PromptsListChanged) => "prompts list changed",
            Ok(crate::bus::Change::ResourcesListChanged) => "resources list changed",
            Ok(crate::bus::Change::ResourceUpdated(_)) => continue,
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => "registry changes (some coalesced)",
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        };
        audit.record(AuditRecord::new(EventKind::RegistryChange, Outcome::Ok).with_detail(detail)).await;
    }
}

/// A bound, running server (tests use this with port 0).
#[derive(Debug)]
pub struct Running {
    pub addr: SocketAddr,
    /// The admin listener's address, when `admin.enabled`.
    pub admin_addr: Option<SocketAddr>,
    pub state: AppState,
    pub handle: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Running {
    /// Starts the shutdown sequence and waits for the server to stop.
    pub async fn stop(self) -> std::io::Result<()> {
        self.state.shutdown.cancel();
        self.handle.await.unwrap_or_else(|e| Err(std::io::Error::other(e)))
    }
}

/// Binds and serves until `state.shutdown` is cancelled.
pub async fn start(state: AppState, bind: SocketAddr) -> std::io::Result<Running> {
    let listener = TcpListener::bind(bind).await?;
    let addr = listener.local_addr()?;
    let admin_addr = if state.settings.admin.enabled { Some(start_admin(&state).await?) } else { None };
    spawn_background(&state);
    let app = router(state.clone());
    let handle = tokio::spawn(crate::shutdown::serve(listener, app, state.clone()));
    tracing::info!(%addr, "toolgate listening");
    Ok(Running { addr, admin_addr, state, handle })
}

/// Binds the admin listener and serves it until shutdown; it stops with the public one.
async fn start_admin(state: &AppState) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(state.settings.admin.bind).await?;
    let addr = listener.local_addr()?;
    // `/metrics` is not behind the admin gate: Prometheus scrapes it, and this port is private.
    let app = crate::admin::router(state.clone()).merge(crate::metrics::router(state.clone())).layer(
        ServiceBuilder::new()
            .layer(SetSensitiveRequestHeadersLayer::new([axum::http::header::AUTHORIZATION, axum::http::header::COOKIE]))
            .layer(SetRequestIdLayer::x_request_id(RequestIds::new()))
            .layer(PropagateRequestIdLayer::x_request_id())
            .layer(crate::telemetry::http::RequestSpanLayer)
            .layer(TraceLayer::new_for_http().make_span_with(crate::telemetry::http::current_span)),
    );
    let stop = state.shutdown.clone();
    tokio::spawn(async move {
        let serve = axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>());
        if let Err(e) = serve.with_graceful_shutdown(async move { stop.cancelled().await }).await {
            tracing::error!(error = %e, "the admin listener failed");
        }
    });
    tracing::info!(%addr, "admin listener");
    Ok(addr)
}
