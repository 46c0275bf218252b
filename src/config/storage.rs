//! `[storage]` settings: where the database is and how many connections it may take.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::Secret;

/// File name of the default SQLite database inside `storage.data_dir`.
pub const DEFAULT_SQLITE_FILE: &str = "toolgate.db";

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct StorageSettings {
    /// `sqlite:<path>` or `postgres://user:password@host/db` (`postgresql://` too). Unset:
    /// the SQLite file `toolgate.db` in `data_dir`. A secret because it may carry a password.
    pub url: Option<Secret>,
    /// Local state: the default SQLite database and the audit spool. Created if missing.
    pub data_dir: PathBuf,
    /// Largest number of pooled connections.
    pub max_connections: u32,
    /// How long a query may wait for a pooled connection before it fails.
    pub acquire_timeout_ms: u64,
}

impl Default for StorageSettings {
    fn default() -> Self {
        Self { url: None, data_dir: PathBuf::from("data"), max_connections: 8, acquire_timeout_ms: 5_000 }
    }
}

/// Which database a URL names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendKind {
    Sqlite,
    Postgres,
}

impl StorageSettings {
    /// The URL to connect to: the configured one, or the default SQLite file.
    pub fn effective_url(&self) -> String {
        match &self.url {
            Some(url) => url.expose().to_owned(),
            None => format!("sqlite://{}", self.data_dir.join(DEFAULT_SQLITE_FILE).display()),
        }
    }

    /// The backend named by the URL's scheme; anything else is refused with the setting named.
    /// The message carries the scheme only, never the URL, which may hold a password.
    pub fn backend(&self) -> Result<BackendKind, String> {
        let url = self.effective_url();
        let scheme = url.split_once(':').map(|(s, _)| s.to_ascii_lowercase()).unwrap_or_default();
        match scheme.as_str() {
            "sqlite" => Ok(BackendKind::Sqlite),
            "postgres" | "postgresql" => Ok(BackendKind::Postgres),
            "" => Err("storage.url (env TOOLGATE__STORAGE__URL) has no scheme; use sqlite:<path> or postgres://…".into()),
            other => Err(format!(
                "storage.url (env TOOLGATE__STORAGE__URL) has unsupported scheme \"{other}\"; use sqlite:<path> or postgres://… (postgresql:// also accepted)"
            )),
        }
    }

    pub fn acquire_timeout(&self) -> Duration {
        Duration::from_millis(self.acquire_timeout_ms)
    }

    /// Checks made at start-up (called from `Settings::validate`).
    pub fn validate(&self) -> Result<(), String> {
        self.backend()?;
        if self.max_connections == 0 {
            return Err("storage.max_connections must be at least 1".into());
        }
        if self.acquire_timeout_ms == 0 {
            return Err("storage.acquire_timeout_ms must be at least 1".into());
        }
        if self.data_dir.as_os_str().is_empty() {
            return Err("storage.data_dir must not be empty".into());
        }
        Ok(())
    }
}
