//! TLS on a listener (`[server.tls]`, `[admin.tls]`), for deployments without a balancer that
//! terminates it: rustls (the TLS stack the binary already links through reqwest), TLS 1.2 and
//! 1.3, ALPN `h2` and `http/1.1`, and optional client certificates against a CA file (mTLS).
//!
//! The configuration sits behind an `ArcSwap`: each handshake takes the one current when it
//! starts, so a reload ([`reload`]) changes what new connections see and leaves open ones as
//! they are. The handshake runs in the connection's own task under the listener's header read
//! timeout (`transport::connections`), so a client that never sends its ClientHello holds its
//! slot no longer than one that never sends a request.

mod load;
pub mod probe;
mod reload;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::ServerConfig;
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;

use crate::config::Settings;
use crate::config::tls::TlsSettings;
pub use load::{LoadError, Served};

/// A listener's TLS: the configuration new handshakes use.
#[derive(Clone)]
pub struct Tls {
    current: Arc<ArcSwap<ServerConfig>>,
    /// `server` or `admin`: the metrics' `listener` label.
    listener: &'static str,
}

impl Tls {
    /// Reads `listener`'s files (`<listener>.tls`) and re-reads them whenever their directories
    /// change or on SIGHUP, until `stop`; `None` when its TLS is off.
    pub fn start(settings: &TlsSettings, listener: &'static str, stop: CancellationToken) -> Result<Option<Self>, LoadError> {
        let section = format!("{listener}.tls");
        let Some(files) = load::Files::read(settings, &section)? else { return Ok(None) };
        let (config, served) = files.build()?;
        record(listener, &served, "loaded");
        let current = Arc::new(ArcSwap::new(config));
        reload::spawn(
            reload::Watched { settings: settings.clone(), section, listener, current: current.clone(), digest: files.digest() },
            stop,
        );
        Ok(Some(Self { current, listener }))
    }

    /// The TLS handshake on an accepted connection, with the configuration current now, within
    /// `timeout` (the listener's header read timeout).
    pub(crate) async fn accept(&self, tcp: TcpStream, timeout: Duration) -> std::io::Result<TlsStream<TcpStream>> {
        let handshake = tokio_rustls::TlsAcceptor::from(self.current.load_full()).accept(tcp);
        let accepted = tokio::time::timeout(timeout, handshake).await.unwrap_or_else(|_| {
            Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "no complete TLS handshake within the header read timeout"))
        });
        if let Err(e) = &accepted {
            metrics::counter!(crate::metrics::TLS_HANDSHAKE_FAILURES, "listener" => self.listener).increment(1);
            tracing::debug!(listener = self.listener, error = %e, "TLS handshake failed");
        }
        accepted
    }
}

/// Whether both listeners' files can serve (start-up and `toolgate check-config`): each file
/// there and readable, a certificate in the certificate file, a key matching it, CA
/// certificates in the CA file.
pub fn check(settings: &Settings) -> Result<(), LoadError> {
    let admin = settings.admin.enabled.then_some((&settings.admin.tls, "admin.tls"));
    for (tls, section) in std::iter::once((&settings.server.tls, "server.tls")).chain(admin) {
        if let Some(files) = load::Files::read(tls, section)? {
            files.build()?;
        }
    }
    Ok(())
}

/// Logs which certificate `listener` serves now and sets its expiry metric (and registers
/// its reload and handshake counters, so they exist from its first certificate).
fn record(listener: &'static str, served: &Served, how: &str) {
    metrics::gauge!(crate::metrics::TLS_CERTIFICATE_EXPIRY, "listener" => listener).set(served.not_after as f64);
    metrics::counter!(crate::metrics::TLS_HANDSHAKE_FAILURES, "listener" => listener).increment(0);
    for result in ["ok", "invalid"] {
        metrics::counter!(crate::metrics::TLS_RELOADS, "listener" => listener, "result" => result).increment(0);
    }
    let subject = crate::untrusted::text::escaped(&served.subject, 256);
    let not_after = time::OffsetDateTime::from_unix_timestamp(i64::try_from(served.not_after).unwrap_or(i64::MAX))
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_default();
    tracing::info!(listener, %subject, serial = %served.serial, %not_after, "TLS certificate {how}");
}
