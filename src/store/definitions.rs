//! Definitions stored through the admin API as settings tables (`upstream_definitions`:
//! `[upstreams.<name>]`; `server_definitions`: `[servers.<name>]`). One SQL text per table
//! serves SQLite and Postgres; every write is one statement and bumps `revision` (the admin
//! API's ETag), so a write naming a stale revision changes nothing.

use serde_json::Value;

use super::{Store, on_pool};

/// One stored definition.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct StoredDefinition {
    pub name: String,
    /// One settings table (`[upstreams.<name>]`, `[servers.<name>]`), as JSON.
    pub definition: Value,
    pub revision: i64,
    pub updated_ms: i64,
    /// The subject of the admin token behind the last change; `None` when auth is off.
    pub updated_by: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("no definition with this name is stored")]
    NotFound,
    #[error("the stored revision is {current}, not the one expected")]
    RevisionMismatch { current: i64 },
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

fn row<R: sqlx::Row>(row: &R) -> Result<StoredDefinition, sqlx::Error>
where
    for<'r> &'r str: sqlx::ColumnIndex<R>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<String>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let text: String = row.try_get("definition")?;
    Ok(StoredDefinition {
        name: row.try_get("name")?,
        definition: serde_json::from_str(&text).map_err(|e| sqlx::Error::Decode(Box::new(e)))?,
        revision: row.try_get("revision")?,
        updated_ms: row.try_get("updated_ms")?,
        updated_by: row.try_get("updated_by")?,
    })
}

macro_rules! columns {
    () => {
        "name, definition, revision, updated_ms, updated_by"
    };
}

/// Which table: the SQL texts are static strings (prepared once per connection), one per table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    /// `upstream_definitions`: `[upstreams.<name>]`.
    Upstreams,
    /// `server_definitions`: `[servers.<name>]` (virtual servers).
    Servers,
}

/// The SQL text `before <table> after` for `table`.
macro_rules! sql {
    ($table:expr, $before:expr, $after:expr) => {
        match $table {
            Table::Upstreams => concat!($before, "upstream_definitions", $after),
            Table::Servers => concat!($before, "server_definitions", $after),
        }
    };
}

fn now_ms() -> i64 {
    let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// Every stored definition, by name.
pub async fn load_all(store: &Store, table: Table) -> Result<Vec<StoredDefinition>, sqlx::Error> {
    let sql = sql!(table, concat!("SELECT ", columns!(), " FROM "), " ORDER BY name");
    on_pool!(store, |pool| {
        let rows = sqlx::query(sql).fetch_all(pool).await?;
        rows.iter().map(row).collect()
    })
}

pub async fn get(store: &Store, table: Table, name: &str) -> Result<Option<StoredDefinition>, sqlx::Error> {
    let sql = sql!(table, concat!("SELECT ", columns!(), " FROM "), " WHERE name = $1");
    on_pool!(store, |pool| {
        let found = sqlx::query(sql).bind(name).fetch_optional(pool).await?;
        found.as_ref().map(row).transpose()
    })
}

/// Creates or replaces `name` (replacing only revision `expected`, when given); returns the
/// stored row and whether it was created.
pub async fn put(
    store: &Store,
    table: Table,
    name: &str,
    definition: &Value,
    expected: Option<i64>,
    by: Option<&str>,
) -> Result<(StoredDefinition, bool), WriteError> {
    let now = now_ms();
    let text = definition.to_string();
    let current = get(store, table, name).await?;
    let stored = match (&current, expected) {
        (Some(c), Some(e)) if c.revision != e => return Err(WriteError::RevisionMismatch { current: c.revision }),
        (None, Some(_)) => return Err(WriteError::NotFound),
        (Some(c), _) => {
            let sql = sql!(
                table,
                "UPDATE ",
                concat!(
                    " SET definition = $1, revision = revision + 1, updated_ms = $2, updated_by = $3 ",
                    "WHERE name = $4 AND revision = $5 RETURNING ",
                    columns!()
                )
            );
            on_pool!(store, |pool| {
                let q = sqlx::query(sql).bind(&text).bind(now).bind(by).bind(name).bind(c.revision);
                q.fetch_optional(pool).await?.as_ref().map(row).transpose()?
            })
        }
        (None, None) => {
            let sql = sql!(
                table,
                "INSERT INTO ",
                concat!(" (", columns!(), ") VALUES ($1, $2, 1, $3, $4) ON CONFLICT (name) DO NOTHING RETURNING ", columns!())
            );
            on_pool!(store, |pool| {
                let q = sqlx::query(sql).bind(name).bind(&text).bind(now).bind(by);
                q.fetch_optional(pool).await?.as_ref().map(row).transpose()?
            })
        }
    };
    match stored {
        Some(stored) => Ok((stored, current.is_none())),
        // Another write came between the read and this one.
        None => {
            let current = get(store, table, name).await?.map_or(0, |c| c.revision);
            Err(WriteError::RevisionMismatch { current })
        }
    }
}

/// Deletes `name` (only revision `expected`, when given).
pub async fn delete(store: &Store, table: Table, name: &str, expected: Option<i64>) -> Result<StoredDefinition, WriteError> {
    let current = get(store, table, name).await?.ok_or(WriteError::NotFound)?;
    if expected.is_some_and(|e| e != current.revision) {
        return Err(WriteError::RevisionMismatch { current: current.revision });
    }
    let sql = sql!(table, "DELETE FROM ", " WHERE name = $1 AND revision = $2");
    let deleted = on_pool!(store, |pool| sqlx::query(sql).bind(name).bind(current.revision).execute(pool).await?.rows_affected());
    if deleted == 0 {
        let now = get(store, table, name).await?.map_or(0, |c| c.revision);
        return Err(WriteError::RevisionMismatch { current: now });
    }
    Ok(current)
}
