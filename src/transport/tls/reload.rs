//! Re-reading a listener's TLS files when they change. The directories are watched, not the
//! files: cert-manager (through a mounted Secret) swaps a `..data` symlink and an editor or
//! `mv` replaces the file by rename, and a watch on the file itself misses both. A reload that
//! fails (a half-written file, a key that does not match yet) keeps the previous certificate in
//! service and says why; the next change is tried again. SIGHUP reloads too.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::ServerConfig;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::load::Files;
use crate::config::tls::TlsSettings;

/// How long a burst of events (a Secret update is several) settles before one reload.
const DEBOUNCE: Duration = Duration::from_millis(150);

/// What one listener's reloader watches and where it stores the result.
pub(super) struct Watched {
    pub settings: TlsSettings,
    pub section: String,
    pub listener: &'static str,
    pub current: Arc<ArcSwap<ServerConfig>>,
    /// The files' digest when last read: unchanged files are not reloaded, nor warned about again.
    pub digest: [u8; 32],
}

/// Watches the files' directories and reloads on change or SIGHUP, until `stop`.
pub(super) fn spawn(mut watched: Watched, stop: CancellationToken) {
    let (tx, mut rx) = mpsc::channel::<()>(1);
    let watcher = watch(&directories(&watched.settings), tx.clone(), watched.listener);
    spawn_sighup(tx, stop.clone());
    tokio::spawn(async move {
        // Dropping the watcher stops it; it lives as long as this task.
        let _watcher = watcher;
        loop {
            tokio::select! {
                got = rx.recv() => if got.is_none() { return },
                () = stop.cancelled() => return,
            }
            loop {
                tokio::select! {
                    () = tokio::time::sleep(DEBOUNCE) => break,
                    got = rx.recv() => if got.is_none() { return },
                }
            }
            watched.reload();
        }
    });
}

impl Watched {
    /// Reads the files again; a new configuration serves the next handshakes.
    fn reload(&mut self) {
        let files = match Files::read(&self.settings, &self.section) {
            Ok(Some(files)) => files,
            Ok(None) => return,
            Err(e) => return self.refused(&e),
        };
        let digest = files.digest();
        if digest == self.digest {
            return;
        }
        self.digest = digest;
        match files.build() {
            Ok((config, served)) => {
                self.current.store(config);
                metrics::counter!(crate::metrics::TLS_RELOADS, "listener" => self.listener, "result" => "ok").increment(1);
                super::record(self.listener, &served, "reloaded");
            }
            Err(e) => self.refused(&e),
        }
    }

    fn refused(&self, e: &super::LoadError) {
        metrics::counter!(crate::metrics::TLS_RELOADS, "listener" => self.listener, "result" => "invalid").increment(1);
        tracing::warn!(listener = self.listener, error = %e, "TLS files changed but cannot serve; the previous certificate stays in service");
    }
}

/// The directories holding the files, each once.
fn directories(settings: &TlsSettings) -> Vec<PathBuf> {
    let files = [&settings.cert_file, &settings.key_file, &settings.client_ca_file];
    let mut dirs: Vec<PathBuf> = files
        .into_iter()
        .flatten()
        .map(|f| f.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_owned())
        .collect();
    dirs.sort();
    dirs.dedup();
    dirs
}

fn watch(dirs: &[PathBuf], tx: mpsc::Sender<()>, listener: &'static str) -> Option<notify::RecommendedWatcher> {
    use notify::{RecursiveMode, Watcher as _};
    let handler = move |event: notify::Result<notify::Event>| {
        if let Ok(event) = event
            && !event.kind.is_access()
        {
            // A full channel already holds a pending reload: nothing is lost by dropping this.
            let _ = tx.try_send(());
        }
    };
    let mut watcher = notify::recommended_watcher(handler)
        .inspect_err(|e| tracing::warn!(listener, error = %e, "cannot watch the TLS files; reload them with SIGHUP"))
        .ok()?;
    for dir in dirs {
        if let Err(e) = watcher.watch(dir, RecursiveMode::NonRecursive) {
            tracing::warn!(listener, error = %e, dir = %dir.display(), "cannot watch a TLS directory; reload it with SIGHUP");
        }
    }
    Some(watcher)
}

#[cfg(unix)]
fn spawn_sighup(tx: mpsc::Sender<()>, stop: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hup) = signal(SignalKind::hangup()) else { return };
    tokio::spawn(async move {
        loop {
            tokio::select! {
                got = hup.recv() => if got.is_none() { return },
                () = stop.cancelled() => return,
            }
            let _ = tx.try_send(());
        }
    });
}

#[cfg(not(unix))]
fn spawn_sighup(_tx: mpsc::Sender<()>, _stop: CancellationToken) {}
