//! Binding and serving: the public listener and, when enabled, the admin listener, each on its
//! own accept loop (`transport::connections`) and with its own TLS when set
//! (`transport::tls`), and the handle that stops them.

use std::net::SocketAddr;

use tokio::net::TcpListener;

use super::AppState;

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
    let tls = tls(&state.settings.server.tls, "server", &state)?;
    let listener = listen(bind, "server.bind").await?;
    let addr = listener.local_addr()?;
    let admin_addr = if state.settings.admin.enabled { Some(start_admin(&state).await?) } else { None };
    super::background::spawn_background(&state);
    let app = super::router::router(state.clone());
    let scheme = if tls.is_some() { "https" } else { "http" };
    let handle = tokio::spawn(super::shutdown::serve(listener, app, tls, state.clone()));
    tracing::info!(%addr, scheme, "toolgate listening");
    Ok(Running { addr, admin_addr, state, handle })
}

/// Binds the admin listener and serves it until shutdown; it stops with the public one.
async fn start_admin(state: &AppState) -> std::io::Result<SocketAddr> {
    let tls = tls(&state.settings.admin.tls, "admin", state)?;
    let listener = listen(state.settings.admin.bind, "admin.bind").await?;
    let addr = listener.local_addr()?;
    let app = super::router::admin_router(state);
    let stop = state.shutdown.clone();
    // Operators and Prometheus only: a small cap, the same timeouts as the public listener.
    let limits =
        crate::transport::connections::ConnectionLimits { max_connections: 256, ..crate::transport::connections::limits(&state.settings) };
    tokio::spawn(async move {
        if let Err(e) = crate::transport::connections::serve(listener, app, limits, tls, async move { stop.cancelled().await }).await {
            tracing::error!(error = %e, "the admin listener failed");
        }
    });
    tracing::info!(%addr, "admin listener");
    Ok(addr)
}

/// A listener's TLS, its files watched until shutdown; `None` when it speaks plain HTTP.
fn tls(
    settings: &crate::config::tls::TlsSettings,
    listener: &'static str,
    state: &AppState,
) -> std::io::Result<Option<crate::transport::tls::Tls>> {
    crate::transport::tls::Tls::start(settings, listener, state.shutdown.clone())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))
}

/// Binds `addr`, or says which setting named it and what to change.
async fn listen(addr: SocketAddr, setting: &str) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await.map_err(|e| {
        use std::io::ErrorKind;
        let hint = match e.kind() {
            ErrorKind::AddrInUse => "another process listens there: stop it, or choose another port",
            ErrorKind::PermissionDenied => "ports below 1024 need privileges: choose a port from 1024 up",
            ErrorKind::AddrNotAvailable => "no interface of this machine has that address: use 127.0.0.1, 0.0.0.0 or one of its addresses",
            _ => "check the address",
        };
        let env = format!("TOOLGATE__{}", setting.to_ascii_uppercase().replace('.', "__"));
        std::io::Error::new(e.kind(), format!("cannot listen on {addr} ({e}); {hint}, in {setting} ({env})"))
    })
}
