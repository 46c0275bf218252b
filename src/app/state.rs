//! The application state: everything built once at start-up, and the smaller states each part
//! of the router takes from it (`FromRef`), so a handler sees only what it uses and no module
//! below the assembly names this type.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use axum::extract::FromRef;
use tokio_util::sync::CancellationToken;

use crate::admin::{AdminShared, AdminState};
use crate::admission::Admission;
use crate::audit::AuditLog;
use crate::auth::bearer::Authenticator;
use crate::auth::introspection::Introspector;
use crate::auth::jwt::JwtVerifier;
use crate::auth::settings::AuthMode;
use crate::authserver::AuthServer;
use crate::bus::{EventBus, LocalBus};
use crate::cluster::Cluster;
use crate::config::Settings;
use crate::health::{Health, Readiness};
use crate::limits::{Caps, Limiter};
use crate::server::McpServer;
use crate::session::SessionStore;
use crate::store::Store;
use crate::tooldef::Definitions;
use crate::transport::bearer::BearerGate;
use crate::transport::client_ip::TrustedProxies;
use crate::transport::listen::Listeners;
use crate::transport::{McpShared, McpState};
use crate::upstream::Upstreams;

/// Everything request handlers and background tasks share. One `Arc`: a clone costs one
/// atomic increment (measured: cloning five `Arc`s and a token per request was 3% of the
/// request path).
#[derive(Clone, Debug)]
pub struct AppState(Arc<Shared>);

/// What `AppState` points to.
pub struct Shared {
    pub server: Arc<McpServer>,
    pub sessions: Arc<SessionStore>,
    pub listeners: Arc<Listeners>,
    pub settings: Arc<Settings>,
    /// Cancelled when the server starts shutting down: readiness turns 503 and notification
    /// streams end (the sequence is in [`super::shutdown`]).
    pub shutdown: CancellationToken,
    /// Cancelled when the drain delay after the shutdown signal is over: the listener stops
    /// accepting and requests still arriving get 503.
    pub closing: CancellationToken,
    /// The token verifier; `None` when `auth.mode = "off"`.
    pub auth: Option<Arc<Authenticator>>,
    /// Rate limits; `None` when `limits.enabled = false`.
    pub limiter: Option<Arc<dyn Limiter>>,
    /// The audit log; `None` when `audit.enabled = false`.
    pub audit: Option<Arc<AuditLog>>,
    /// The database (SQLite by default): audit log and stored tool definitions.
    pub store: Store,
    /// The declarative tools' sources (tools file, database).
    pub definitions: Arc<Definitions>,
    /// The upstream MCP servers whose tools are served here.
    pub upstreams: Arc<Upstreams>,
    /// The other replicas (Postgres LISTEN/NOTIFY), or nobody on a single node.
    pub cluster: Arc<dyn Cluster>,
    /// What `/readyz` reports.
    pub health: Arc<Health>,
    /// The process-wide Prometheus recorder, rendered by `/metrics` on the admin listener.
    pub metrics: metrics_exporter_prometheus::PrometheusHandle,
    /// The MCP endpoint's handlers' state.
    pub mcp: McpState,
    /// The admin API's handlers' state.
    pub admin: AdminState,
    /// The bearer gate's state.
    pub gate: BearerGate,
    /// toolgate's own authorization server, when `authorization_server.enabled`.
    pub authserver: Option<Arc<AuthServer>>,
    /// Per-user upstream credentials (`[vault]`), with the authorization server.
    pub vault: Option<Arc<crate::vault::Vault>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").field("server", &self.server).field("sessions", &self.sessions).finish_non_exhaustive()
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

impl FromRef<AppState> for McpState {
    fn from_ref(state: &AppState) -> Self {
        state.mcp.clone()
    }
}

impl FromRef<AppState> for AdminState {
    fn from_ref(state: &AppState) -> Self {
        state.admin.clone()
    }
}

impl FromRef<AppState> for BearerGate {
    fn from_ref(state: &AppState) -> Self {
        state.gate.clone()
    }
}

impl FromRef<AppState> for Readiness {
    fn from_ref(state: &AppState) -> Self {
        Readiness { health: state.health.clone(), upstreams: state.upstreams.clone(), shutdown: state.shutdown.clone() }
    }
}

impl AppState {
    /// State with an in-process event bus and the configured tool packs.
    pub async fn new(mut settings: Settings) -> anyhow::Result<Self> {
        // First: anything recorded before the recorder exists is lost.
        let metrics = crate::metrics::install(&settings.audit.resolved_replica_id());
        crate::transport::check_settings(&settings).map_err(|e| anyhow::anyhow!("{e}"))?;
        let dev_key = dev_key(&mut settings)?;
        let settings = Arc::new(settings);
        let bus: Arc<dyn EventBus> = Arc::new(LocalBus::default());
        let server = McpServer::new(settings.clone(), bus);
        crate::packs::install(&server, &settings.tools).map_err(|e| anyhow::anyhow!("cannot install tool packs: {e}"))?;
        // The store is connected (and migrated) before serving, so a bad URL stops start-up.
        let store = Store::connect(&settings.storage).await.map_err(|e| anyhow::Error::new(e).context("storage"))?;
        let audit = match settings.audit.enabled {
            true => Some(AuditLog::start(&settings.audit, store.clone()).map_err(|e| anyhow::anyhow!("audit log: {e}"))?),
            false => None,
        };
        let authserver = authorization_server(&settings, &store, &audit, server.servers.audiences())?;
        let auth = authenticator(&settings, dev_key, authserver.as_deref(), &server.servers.audiences())?;
        // An invalid tools file stops start-up with every problem listed; later reloads keep
        // the previous tools instead.
        let definitions = Arc::new(Definitions::new(settings.clone(), server.clone(), Some(store.clone())));
        definitions.load_initial().await?;
        // Checked now (a stdio program must exist and be allowed), connected in the background:
        // readiness never waits on an upstream.
        let vault = vault(&settings, &store, &audit, authserver.as_ref())?;
        let upstreams = Upstreams::new(settings.clone(), server.clone(), crate::approval::Approvals::new(store.clone()), vault.clone())?;
        if vault.is_some() {
            // Weak: the upstreams hold the server already.
            let hidden = Arc::downgrade(&upstreams);
            server.set_hidden_upstreams(Arc::new(move |principal| {
                let hidden = hidden.upgrade();
                Box::pin(async move {
                    match hidden {
                        Some(upstreams) => upstreams.hidden_for(&principal).await,
                        None => Vec::new(),
                    }
                })
            }));
        }
        // Those stored through the admin API too; one that no longer checks out is logged and
        // skipped, like a stored tool definition.
        upstreams.reload_stored(&store).await.map_err(|e| anyhow::Error::new(e).context("storage: cannot read upstream definitions"))?;
        // Virtual servers: a name two tools would share on one of the settings' servers stops
        // start-up (naming both and the setting); those stored through the admin API are applied.
        let tools = server.tools.snapshot();
        if let Some(collision) = server.servers.configured_collisions(&tools).first() {
            anyhow::bail!("invalid setting servers: {collision}");
        }
        server
            .servers
            .reload_stored(&store, &tools)
            .await
            .map_err(|e| anyhow::Error::new(e).context("storage: cannot read server definitions"))?;
        let shutdown = CancellationToken::new();
        let cluster = crate::cluster::connect(&settings, &store, shutdown.clone()).await?;
        let sessions = Arc::new(sessions(&settings, &store, &cluster));
        if settings.tasks.enabled {
            server.set_tasks(crate::tasks::Tasks::new(store.clone(), settings.tasks.clone(), cluster.clone(), audit.clone()));
        }
        let limiter: Option<Arc<dyn Limiter>> = match settings.limits.enabled {
            true => Some(crate::limits::build(&settings.limits).await.map_err(|e| anyhow::anyhow!("invalid [limits]: {e}"))?),
            false => None,
        };
        let proxies =
            TrustedProxies::parse(&settings.server.trusted_proxies).map_err(|e| anyhow::anyhow!("server.trusted_proxies: {e}"))?;
        // The store was just connected and migrated; dev mode and auth off verify locally,
        // otherwise tokens are ready once keys or the introspection endpoint answered.
        let tokens_ready = auth.as_ref().is_none_or(|a| a.ready_now());
        let health = Arc::new(Health { database: AtomicBool::new(true), tokens: AtomicBool::new(tokens_ready) });
        let caps = Caps::new(settings.sessions.max_per_client, settings.sse.max_streams_per_client);
        let listeners = Arc::new(Listeners::default());
        let mcp = McpState::new(McpShared {
            server: server.clone(),
            sessions: sessions.clone(),
            listeners: listeners.clone(),
            settings: settings.clone(),
            admission: Admission::new(auth.clone(), limiter.clone(), caps, audit.clone()),
            auth: auth.clone(),
            audit: audit.clone(),
            proxies: proxies.clone(),
            shutdown: shutdown.clone(),
        });
        let admin = AdminState::new(AdminShared {
            settings: settings.clone(),
            server: server.clone(),
            definitions: definitions.clone(),
            upstreams: upstreams.clone(),
            store: store.clone(),
            audit: audit.clone(),
            limiter: limiter.clone(),
            cluster: cluster.clone(),
            auth: auth.clone(),
            proxies: proxies.clone(),
            mcp: mcp.clone(),
            metrics: metrics.clone(),
            authserver: authserver.clone(),
            vault: vault.clone(),
        });
        let gate = BearerGate { auth: auth.clone(), limiter: limiter.clone(), audit: audit.clone(), proxies };
        Ok(Self(Arc::new(Shared {
            server,
            sessions,
            listeners,
            settings,
            shutdown,
            closing: CancellationToken::new(),
            auth,
            limiter,
            audit,
            store,
            definitions,
            upstreams,
            cluster,
            health,
            metrics,
            mcp,
            admin,
            gate,
            authserver,
            vault,
        })))
    }
}

/// Dev mode: the signing key of `toolgate dev-token` (created on first use) and the default
/// resource when none is set.
fn dev_key(settings: &mut Settings) -> anyhow::Result<Option<crate::config::Secret>> {
    if settings.auth.mode != AuthMode::Dev {
        return Ok(None);
    }
    if settings.auth.resource.is_none() {
        settings.auth.resource = Some(crate::auth::dev::default_resource(settings));
    }
    let path = settings.auth.dev_key_file.clone();
    let key = crate::auth::dev::load_or_create_key(&path)
        .map_err(|e| anyhow::anyhow!("cannot read or create the development key {}: {e}", path.display()))?;
    Ok(Some(key))
}

/// The built-in authorization server, when enabled.
fn authorization_server(
    settings: &Settings,
    store: &Store,
    audit: &Option<Arc<AuditLog>>,
    servers: Arc<crate::auth::ServerAudiences>,
) -> anyhow::Result<Option<Arc<AuthServer>>> {
    if !settings.authorization_server.enabled {
        return Ok(None);
    }
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| anyhow::anyhow!("cannot build the identity provider's HTTP client: {e}"))?;
    let parts = crate::authserver::Parts {
        resources: settings.auth.resource.iter().cloned().collect(),
        servers,
        scopes_supported: settings.auth.scopes_supported(),
        store: store.clone(),
        audit: audit.clone(),
        http,
    };
    let server = AuthServer::new(settings.authorization_server.clone(), parts).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(Some(Arc::new(server)))
}

/// The vault of per-user upstream credentials, when it has keys and the authorization server
/// is on (its identity provider signs users in on the connect page). Records sealed with an
/// older key are sealed again with the current one in the background.
fn vault(
    settings: &Settings,
    store: &Store,
    audit: &Option<Arc<AuditLog>>,
    authserver: Option<&Arc<AuthServer>>,
) -> anyhow::Result<Option<Arc<crate::vault::Vault>>> {
    let (false, Some(authserver)) = (settings.vault.keys.is_empty(), authserver) else { return Ok(None) };
    let vault =
        crate::vault::Vault::new(&settings.vault, store.clone(), authserver.clone(), audit.clone()).map_err(|e| anyhow::anyhow!("{e}"))?;
    // Weak: the loop ends with the vault (in-process tests start many).
    let weak = Arc::downgrade(&vault);
    tokio::spawn(async move {
        if let Some(vault) = weak.upgrade() {
            match vault.reseal().await {
                Ok(0) => {}
                Ok(n) => tracing::info!(records = n, "vault: records sealed with an older key were sealed again with the current one"),
                Err(e) => tracing::warn!(error = %e, "vault: the re-seal pass did not finish; it runs again at the next start"),
            }
        }
        // Connect transactions past their expiry are deleted every ten minutes.
        let mut every = tokio::time::interval(Duration::from_secs(600));
        loop {
            every.tick().await;
            let Some(vault) = weak.upgrade() else { return };
            vault.purge().await;
        }
    });
    Ok(Some(vault))
}

/// The token verifier `auth.mode` asks for (`None` when off); it also trusts the built-in
/// authorization server's tokens when there is one.
fn authenticator(
    settings: &Settings,
    dev_key: Option<crate::config::Secret>,
    own: Option<&AuthServer>,
    servers: &Arc<crate::auth::ServerAudiences>,
) -> anyhow::Result<Option<Arc<Authenticator>>> {
    let auth = &settings.auth;
    let resource = auth.resource.clone().unwrap_or_default();
    let (verifier, introspector) = match auth.mode {
        AuthMode::Off => return Ok(None),
        AuthMode::Dev => {
            let issuers = dev_key.map(crate::auth::dev::issuer).into_iter().collect();
            let verifier = JwtVerifier::new(issuers, resource, reqwest::Client::new())
                .map_err(|e| anyhow::anyhow!("dev mode: {e}"))?
                .with_server_audiences(servers.clone());
            tracing::warn!("auth.mode = \"dev\": accepting development tokens from `toolgate dev-token`; never use this in production");
            (Some(Arc::new(verifier)), None)
        }
        AuthMode::Jwt => {
            let http = || {
                reqwest::Client::builder()
                    .timeout(Duration::from_secs(5))
                    .build()
                    .map_err(|e| anyhow::anyhow!("cannot build the HTTP client for issuer keys: {e}"))
            };
            let verifier = match (auth.issuers.is_empty(), own) {
                (true, None) => None,
                (false, None) => {
                    let verifier = JwtVerifier::new(auth.issuers.clone(), resource.clone(), http()?)
                        .map_err(|e| anyhow::anyhow!("invalid auth.issuers: {e}"))?
                        .with_server_audiences(servers.clone());
                    Some(Arc::new(verifier))
                }
                (_, Some(own)) => {
                    let keys = own.keys().verification_keys(own.issuer()).map_err(|e| anyhow::anyhow!("authorization_server keys: {e}"))?;
                    let deny: Arc<dyn crate::auth::jwt::RevokedGrants> = own.deny_list();
                    let verifier = JwtVerifier::with_own_issuer(
                        auth.issuers.clone(),
                        resource.clone(),
                        http()?,
                        (own.issuer().to_owned(), keys, deny),
                    )
                    .map_err(|e| anyhow::anyhow!("invalid auth.issuers: {e}"))?
                    .with_server_audiences(servers.clone());
                    Some(Arc::new(verifier))
                }
            };
            let introspector = match &auth.introspection {
                None => None,
                Some(i) => Some(Arc::new(
                    Introspector::new(i, &resource)
                        .map_err(|e| anyhow::anyhow!("invalid auth.introspection: {e}"))?
                        .with_server_audiences(servers.clone()),
                )),
            };
            (verifier, introspector)
        }
    };
    Ok(Some(Arc::new(Authenticator::new(auth, verifier, introspector))))
}

/// The legacy session table; with Postgres, shared with the other replicas.
fn sessions(settings: &Settings, store: &Store, cluster: &Arc<dyn Cluster>) -> SessionStore {
    let sessions = SessionStore::new(settings.sessions.clone(), settings.sse.replay_events);
    let crate::store::Backend::Postgres(pool) = store.backend() else { return sessions };
    // Replicas share legacy sessions through Postgres; the ids must verify everywhere.
    if settings.sessions.secret.is_none() {
        tracing::warn!(
            "sessions.secret is unset: sessions created through this replica are refused by the others; set the same secret on every replica"
        );
    }
    sessions.shared_with(crate::session::shared::SharedSessions::new(pool.clone()), cluster.clone())
}
