//! Where declarative tools come from at run time: the tools file (`tools.path`, watched and
//! re-read on SIGHUP) and the database (written through the admin API). Each source replaces
//! only its own tools in the registry, and only after the whole new set compiled: an invalid
//! file keeps the old set, logs every problem and counts a failed reload.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::compile::{Compiled, RawDef, compile, compile_all, read_path};
use super::error::{DefinitionErrors, ToolErrors};
use crate::config::Settings;
use crate::server::McpServer;
use crate::store::Store;
use crate::tool::{Origin, SyncReport};

/// Quiet time after a file event before reloading: editors write a file in several steps, and
/// a Kubernetes ConfigMap update swaps a symlink after writing a new directory.
const DEBOUNCE: Duration = Duration::from_millis(250);

/// The last reload of one source, as the admin API and logs report it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SourceStatus {
    /// Tools currently served from this source.
    pub tools: usize,
    /// Unix seconds of the last successful load.
    pub loaded_at: Option<u64>,
    /// The problems of the last failed reload, cleared by a successful one.
    pub last_error: Option<DefinitionErrors>,
}

/// Keeps the registry's file and database tools in step with their sources.
pub struct Definitions {
    settings: Arc<Settings>,
    server: Arc<McpServer>,
    store: Option<Store>,
    file: Mutex<SourceStatus>,
    database: Mutex<SourceStatus>,
    /// Serializes reloads of one source, so two racing reloads cannot apply an older read last.
    reloading: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Definitions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Definitions").field("path", &self.settings.tools.path).finish_non_exhaustive()
    }
}

impl Definitions {
    pub fn new(settings: Arc<Settings>, server: Arc<McpServer>, store: Option<Store>) -> Self {
        Self { settings, server, store, file: Mutex::default(), database: Mutex::default(), reloading: tokio::sync::Mutex::new(()) }
    }

    /// Loads both sources at start-up; a problem here stops the server with the full report.
    pub async fn load_initial(&self) -> anyhow::Result<()> {
        if self.settings.tools.path.is_some() {
            let report = self.reload_file().await.map_err(|e| anyhow::anyhow!("invalid tool definitions:\n{e}"))?;
            tracing::info!(path = %self.path_shown(), tools = report.added.len(), "loaded the tools file");
        }
        if self.store.is_some() {
            self.reload_database().await.map_err(|e| anyhow::anyhow!("cannot load the tool definitions from the database: {e}"))?;
        }
        Ok(())
    }

    fn path_shown(&self) -> String {
        self.settings.tools.path.as_deref().map(|p| p.display().to_string()).unwrap_or_default()
    }

    /// Re-reads the tools file and applies it if every definition is valid. On error the
    /// previous tools stay and the error is logged, counted and kept for the admin API.
    pub async fn reload_file(&self) -> Result<SyncReport, DefinitionErrors> {
        let Some(path) = self.settings.tools.path.clone() else {
            return Ok(SyncReport::default());
        };
        let _one_at_a_time = self.reloading.lock().await;
        let settings = self.settings.clone();
        let shown = path.display().to_string();
        // Reading and compiling touch the file system (secret files, working directories).
        let result = tokio::task::spawn_blocking(move || {
            let raws = read_path(&path)?;
            for warning in super::warnings(&raws) {
                tracing::warn!("{warning}");
            }
            compile_all(&raws, &settings, Origin::File, &shown)
        })
        .await
        .unwrap_or_else(|e| Err(DefinitionErrors::general(self.path_shown(), format!("reload failed: {e}"))));
        let applied = result.and_then(|compiled| self.apply(Origin::File, compiled, &self.path_shown()));
        self.record(Origin::File, &applied);
        applied
    }

    /// Re-reads the tool definitions stored in the database. A stored definition this build
    /// cannot compile (written by another version, say) is skipped and logged; the others are
    /// served.
    pub async fn reload_database(&self) -> Result<SyncReport, DefinitionErrors> {
        let Some(store) = &self.store else {
            return Ok(SyncReport::default());
        };
        let _one_at_a_time = self.reloading.lock().await;
        let rows = super::db::load_all(store).await.map_err(|e| {
            tracing::error!(error = %e, "cannot read the tool definitions from the database");
            DefinitionErrors::general("database", "cannot read the tool definitions; see the server log")
        })?;
        let mut compiled = Vec::with_capacity(rows.len());
        let mut skipped = Vec::new();
        let current = self.server.tools.snapshot();
        for row in rows.into_iter().filter(|r| r.enabled) {
            let raw = RawDef { value: row.definition, source: "database".into(), base_dir: PathBuf::from(".") };
            // A name another source serves (the tools file gained it after it was stored) is
            // skipped rather than failing every stored tool.
            if let Some(owner) = current.get(&row.name).map(|t| t.tool.origin()).filter(|o| *o != Origin::Database) {
                let why = format!("the name is taken by a tool from {}; rename or delete the stored one", owner.as_str());
                skipped.push(ToolErrors::new(row.name, vec![super::FieldError::new("name", why)]));
                continue;
            }
            match compile(&raw, &self.settings, Origin::Database) {
                // Command tools run programs on this host: stored ones are served only while
                // the operator allows the admin API to define them.
                Ok(c) if c.kind == super::Kind::Command && !self.settings.admin.allow_command_tools => {
                    let why = "a stored command tool is not served while admin.allow_command_tools is false";
                    skipped.push(ToolErrors::new(row.name, vec![super::FieldError::new("command", why)]));
                }
                Ok(c) => compiled.push(c),
                Err(errors) => skipped.push(ToolErrors::new(row.name, errors)),
            }
        }
        if !skipped.is_empty() {
            let errors = DefinitionErrors { origin: "database".into(), general: None, tools: skipped };
            tracing::error!(problems = errors.count(), "stored tool definitions skipped:\n{errors}");
        }
        let applied = self.apply(Origin::Database, compiled, "database");
        self.record(Origin::Database, &applied);
        applied
    }

    /// Validates one definition (for the admin API) without applying it: the compiled tool,
    /// or every problem found. `name`, when given, must match the definition's.
    pub fn check(&self, definition: &Value) -> Result<Compiled, DefinitionErrors> {
        let raw = RawDef { value: definition.clone(), source: "request".into(), base_dir: PathBuf::from(".") };
        compile(&raw, &self.settings, Origin::Database).map_err(|errors| DefinitionErrors {
            origin: "request".into(),
            general: None,
            tools: vec![ToolErrors::new(raw.label(0), errors)],
        })
    }

    /// Which source serves the tool called `name`, if any does.
    pub fn origin_of(&self, name: &str) -> Option<Origin> {
        self.server.tools.origin_of(name)
    }

    pub fn status(&self, origin: Origin) -> SourceStatus {
        match origin {
            Origin::File => self.file.lock().clone(),
            Origin::Database => self.database.lock().clone(),
            Origin::Code | Origin::Upstream => SourceStatus { tools: self.count(origin), ..Default::default() },
        }
    }

    fn count(&self, origin: Origin) -> usize {
        self.server.tools.snapshot().iter().filter(|t| t.tool.origin() == origin).count()
    }

    fn apply(&self, origin: Origin, compiled: Vec<Compiled>, source: &str) -> Result<SyncReport, DefinitionErrors> {
        let tools = compiled.into_iter().filter_map(|c| c.tool).collect();
        self.server.tools.sync_origin(origin, tools).map_err(|e| DefinitionErrors::general(source, e))
    }

    fn record(&self, origin: Origin, result: &Result<SyncReport, DefinitionErrors>) {
        let label = origin.as_str();
        let status = if origin == Origin::File { &self.file } else { &self.database };
        match result {
            Ok(report) => {
                metrics::counter!(crate::metrics::TOOL_RELOADS, "source" => label, "result" => "ok").increment(1);
                let mut s = status.lock();
                s.tools = self.count(origin);
                s.loaded_at = Some(unix_now());
                s.last_error = None;
                if !report.is_empty() {
                    tracing::info!(source = label, added = ?report.added, changed = ?report.changed, removed = ?report.removed, "tools reloaded");
                }
            }
            Err(errors) => {
                metrics::counter!(crate::metrics::TOOL_RELOADS, "source" => label, "result" => "invalid").increment(1);
                let mut s = status.lock();
                // Before the first successful load (at start) there are no previous tools.
                let kept = match s.loaded_at {
                    Some(_) => "the previous tools stay in service",
                    None => "no tools from this source are served until it is fixed",
                };
                tracing::error!(source = label, problems = errors.count(), "tool definitions refused; {kept}:\n{errors}");
                s.last_error = Some(errors.clone());
            }
        }
    }

    /// Watches the tools file (when `tools.watch`) and reloads on SIGHUP, until `stop`.
    pub fn spawn_watchers(self: &Arc<Self>, stop: CancellationToken) {
        let Some(path) = self.settings.tools.path.clone() else { return };
        let (tx, rx) = mpsc::channel::<()>(1);
        let watcher = if self.settings.tools.watch { watch(&path, tx.clone()) } else { None };
        spawn_sighup(tx, stop.clone());
        let this = self.clone();
        tokio::spawn(async move {
            // Dropping the watcher stops it; it lives as long as this task.
            let _watcher = watcher;
            this.reload_loop(rx, stop).await;
        });
    }

    async fn reload_loop(&self, mut rx: mpsc::Receiver<()>, stop: CancellationToken) {
        loop {
            tokio::select! {
                got = rx.recv() => if got.is_none() { return },
                () = stop.cancelled() => return,
            }
            // Let a burst of events settle, then reload once.
            loop {
                tokio::select! {
                    () = tokio::time::sleep(DEBOUNCE) => break,
                    got = rx.recv() => if got.is_none() { return },
                }
            }
            let _ = self.reload_file().await;
        }
    }
}

/// A notify watcher on the tools file's directory (or the directory itself): watching the
/// directory sees atomic replaces (rename over the file) and ConfigMap symlink swaps, which a
/// watch on the file alone misses.
fn watch(path: &Path, tx: mpsc::Sender<()>) -> Option<notify::RecommendedWatcher> {
    use notify::{RecursiveMode, Watcher as _};
    let dir = if path.is_dir() {
        path.to_owned()
    } else {
        path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_owned()
    };
    let handler = move |event: notify::Result<notify::Event>| {
        if let Ok(event) = event
            && !event.kind.is_access()
        {
            // A full channel already holds a pending reload: nothing is lost by dropping this.
            let _ = tx.try_send(());
        }
    };
    let mut watcher = match notify::recommended_watcher(handler) {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch the tools file; reload it with SIGHUP");
            return None;
        }
    };
    if let Err(e) = watcher.watch(&dir, RecursiveMode::NonRecursive) {
        tracing::warn!(error = %e, dir = %dir.display(), "cannot watch the tools directory; reload it with SIGHUP");
        return None;
    }
    Some(watcher)
}

#[cfg(unix)]
fn spawn_sighup(tx: mpsc::Sender<()>, stop: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        tracing::warn!("cannot listen for SIGHUP; the tools file reloads on change only");
        return;
    };
    tokio::spawn(async move {
        loop {
            tokio::select! {
                got = hup.recv() => if got.is_none() { return },
                () = stop.cancelled() => return,
            }
            tracing::info!("SIGHUP: reloading the tools file");
            let _ = tx.try_send(());
        }
    });
}

#[cfg(not(unix))]
fn spawn_sighup(_tx: mpsc::Sender<()>, _stop: CancellationToken) {}

fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
