//! Storage: one [`Store`] over SQLite (the default, a file in `storage.data_dir`) or Postgres
//! (production), chosen by the URL scheme of `storage.url`.
//!
//! Code outside this module and the few SQL files that must differ per dialect does not know
//! which backend runs. Migrations live in `migrations/sqlite` and `migrations/postgres` with
//! the same file names, are embedded in the binary, and run in [`Store::connect`] (and by
//! `toolgate migrate`).

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};

pub mod definitions;
pub mod nodelay;

pub use crate::config::storage::{BackendKind, DEFAULT_SQLITE_FILE, StorageSettings};

/// Runs `$body` with `$pool` bound to whichever pool the store has: for statements whose one
/// SQL text serves both dialects (`tasks/db.rs`, `upstream/db.rs`).
macro_rules! on_pool {
    ($store:expr, |$pool:ident| $body:expr) => {
        match $store.backend() {
            $crate::store::Backend::Sqlite($pool) => $body,
            $crate::store::Backend::Postgres($pool) => $body,
        }
    };
}
pub(crate) use on_pool;

static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("./migrations/sqlite");
static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("./migrations/postgres");

/// Why the store could not be opened or used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A setting that cannot work; the text names it.
    #[error("{0}")]
    Config(String),
    #[error("cannot create the data directory {path}")]
    DataDir { path: PathBuf, source: std::io::Error },
    #[error("cannot connect to the {backend} database at {target} ({setting})")]
    Connect { backend: &'static str, target: String, setting: &'static str, source: sqlx::Error },
    #[error("cannot apply the {backend} migrations")]
    Migrate { backend: &'static str, source: sqlx::migrate::MigrateError },
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// The connection pool of whichever backend runs. Public so per-dialect SQL (in the modules
/// that own a table) can match on it; everything else uses [`Store`]'s methods.
#[derive(Clone, Debug)]
pub enum Backend {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// A handle on the database: cheap to clone (the pools are reference-counted).
#[derive(Clone, Debug)]
pub struct Store {
    backend: Backend,
    data_dir: PathBuf,
}

impl Store {
    /// Connects (creating the data directory and, for SQLite, the database file) and applies
    /// the embedded migrations.
    pub async fn connect(settings: &StorageSettings) -> Result<Self, StoreError> {
        let store = Self::connect_without_migrating(settings).await?;
        store.migrate().await?;
        Ok(store)
    }

    /// Connects without touching the schema (for tools that only read).
    pub async fn connect_without_migrating(settings: &StorageSettings) -> Result<Self, StoreError> {
        settings.validate().map_err(StoreError::Config)?;
        let data_dir = settings.data_dir.clone();
        // The data directory holds the audit spool even when the database is Postgres.
        std::fs::create_dir_all(&data_dir).map_err(|source| StoreError::DataDir { path: data_dir.clone(), source })?;
        let url = settings.effective_url();
        // The setting that put the database there: the URL when one is set, else the directory.
        let setting = if settings.url.is_some() { "storage.url" } else { "storage.data_dir" };
        let backend = match settings.backend().map_err(StoreError::Config)? {
            BackendKind::Sqlite => Backend::Sqlite(connect_sqlite(&url, setting, settings).await?),
            BackendKind::Postgres => Backend::Postgres(connect_postgres(&url, settings).await?),
        };
        Ok(Self { backend, data_dir })
    }

    /// Applies every embedded migration not yet applied; a no-op when up to date. On
    /// Postgres, sqlx holds an advisory lock meanwhile, so replicas starting together are safe.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        let backend = self.backend_name();
        let result = match &self.backend {
            Backend::Sqlite(pool) => SQLITE_MIGRATIONS.run(pool).await,
            Backend::Postgres(pool) => POSTGRES_MIGRATIONS.run(pool).await,
        };
        result.map_err(|source| StoreError::Migrate { backend, source })
    }

    /// Versions of the embedded migrations, oldest first (for `toolgate migrate` output).
    pub fn embedded_migrations(&self) -> Vec<(i64, String)> {
        let migrator = match &self.backend {
            Backend::Sqlite(_) => &SQLITE_MIGRATIONS,
            Backend::Postgres(_) => &POSTGRES_MIGRATIONS,
        };
        migrator.iter().filter(|m| m.migration_type.is_up_migration()).map(|m| (m.version, m.description.to_string())).collect()
    }

    /// One round trip: for readiness probes.
    pub async fn ping(&self) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sqlite(pool) => sqlx::query("SELECT 1").execute(pool).await.map(drop)?,
            Backend::Postgres(pool) => sqlx::query("SELECT 1").execute(pool).await.map(drop)?,
        }
        Ok(())
    }

    /// Closes the pool, waiting for checked-out connections to come back.
    pub async fn close(&self) {
        match &self.backend {
            Backend::Sqlite(pool) => pool.close().await,
            Backend::Postgres(pool) => pool.close().await,
        }
    }

    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    pub fn backend_name(&self) -> &'static str {
        match self.backend {
            Backend::Sqlite(_) => "sqlite",
            Backend::Postgres(_) => "postgres",
        }
    }

    /// `storage.data_dir`: where local state (the audit spool) lives.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }
}

/// Where a database URL points, without its credentials: the file of a SQLite URL, the host,
/// port and database of a Postgres one.
fn where_is(url: &str) -> String {
    if let Some(path) = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:")) {
        return path.split('?').next().unwrap_or(path).to_owned();
    }
    match url::Url::parse(url) {
        Ok(u) => format!("{}:{}{}", u.host_str().unwrap_or("localhost"), u.port().unwrap_or(5432), u.path()),
        Err(_) => "an address that is not a valid URL".to_owned(),
    }
}

async fn connect_sqlite(url: &str, setting: &'static str, settings: &StorageSettings) -> Result<SqlitePool, StoreError> {
    let connect = |source| StoreError::Connect { backend: "sqlite", target: where_is(url), setting, source };
    let options = SqliteConnectOptions::from_str(url)
        .map_err(connect)?
        .create_if_missing(true)
        // WAL: readers (audit queries) never block the writer.
        .journal_mode(SqliteJournalMode::Wal)
        // FULL, not NORMAL: a committed audit batch must survive a power cut, as the fsynced
        // spool does; batching makes the extra fsync per commit cheap.
        .synchronous(SqliteSynchronous::Full)
        // Several pooled connections share one writer lock; wait rather than fail at once.
        .busy_timeout(Duration::from_secs(5))
        .foreign_keys(true);
    SqlitePoolOptions::new()
        .max_connections(settings.max_connections)
        .acquire_timeout(settings.acquire_timeout())
        .connect_with(options)
        .await
        .map_err(connect)
}

async fn connect_postgres(url: &str, settings: &StorageSettings) -> Result<PgPool, StoreError> {
    let connect = |source| StoreError::Connect { backend: "postgres", target: where_is(url), setting: "storage.url", source };
    let options = PgConnectOptions::from_str(url).map_err(connect)?.application_name("toolgate");
    // Over TCP (not a Unix socket), each new connection gets TCP_NODELAY (`nodelay`'s docs).
    let tcp_port = options.get_socket().is_none().then(|| options.get_port());
    let pool = PgPoolOptions::new()
        .max_connections(settings.max_connections)
        .acquire_timeout(settings.acquire_timeout())
        // A connection that died while idle (database restart, proxy cut) is found and replaced
        // at checkout instead of failing the next query.
        .test_before_acquire(true)
        .after_connect(move |_, _| {
            Box::pin(async move {
                if let Some(port) = tcp_port {
                    nodelay::after_connect(port);
                }
                Ok(())
            })
        })
        .connect_with(options.clone())
        .await;
    match pool {
        Ok(pool) => Ok(pool),
        Err(e) => Err(connect(with_cause(e, &options, settings.acquire_timeout()).await)),
    }
}

/// The pool reports a database it cannot reach as "pool timed out", which hides why: one
/// direct connection attempt finds the reason (refused, unknown host, bad password) to report.
async fn with_cause(e: sqlx::Error, options: &PgConnectOptions, within: Duration) -> sqlx::Error {
    if !matches!(e, sqlx::Error::PoolTimedOut) {
        return e;
    }
    match tokio::time::timeout(within, <sqlx::PgConnection as sqlx::Connection>::connect_with(options)).await {
        Ok(Err(cause)) => cause,
        _ => e,
    }
}

#[cfg(test)]
mod tests {
    use super::where_is;

    #[test]
    fn a_sqlite_url_is_shown_as_its_file() {
        assert_eq!(where_is("sqlite:///var/lib/toolgate/toolgate.db?mode=rwc"), "/var/lib/toolgate/toolgate.db");
    }

    #[test]
    fn a_postgres_url_is_shown_without_its_credentials() {
        assert_eq!(where_is("postgres://app:s3cret@db.internal:6432/toolgate"), "db.internal:6432/toolgate");
    }
}
