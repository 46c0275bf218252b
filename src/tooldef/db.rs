//! The `tool_definitions` table: tool definitions written through the admin API, once per
//! dialect. Every write is one statement or one transaction, so a definition is never half
//! written, and each bumps `revision` (the admin API's ETag): a write that names a stale
//! revision changes nothing and reports the current one.
//!
//! SQLite keeps the definition as JSON text and times as fixed-width RFC 3339 UTC text;
//! Postgres keeps JSONB and `timestamptz`. Callers see the same [`StoredTool`] either way.

use serde_json::Value;
use sqlx::Row as _;
use time::format_description::BorrowedFormatItem;
use time::macros::format_description;
use time::{OffsetDateTime, PrimitiveDateTime, UtcOffset};

use crate::store::{Backend, Store};

/// One stored definition.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredTool {
    pub name: String,
    /// The definition as submitted (JSON), without `enabled`.
    pub definition: Value,
    pub enabled: bool,
    /// Starts at 1, +1 on every change (optimistic concurrency for updates).
    pub revision: i64,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
    /// The subject of the admin token behind the last change; `None` when auth is off.
    pub updated_by: Option<String>,
}

/// Why a write changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("a tool definition with this name is already stored")]
    Exists,
    #[error("no tool definition with this name is stored")]
    NotFound,
    /// The caller's expected revision is not the stored one.
    #[error("the stored revision is {current}, not the one expected")]
    RevisionMismatch { current: i64 },
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// What a create or replace writes.
#[derive(Clone, Copy, Debug)]
pub struct Write<'a> {
    pub name: &'a str,
    /// Without `enabled`.
    pub definition: &'a Value,
    /// On replace, `None` keeps the stored state.
    pub enabled: Option<bool>,
    pub by: Option<&'a str>,
}

/// The columns, as SQL literals (macros, so every statement is a `&'static str`).
macro_rules! columns {
    () => {
        "name, definition, enabled, revision, created_at, updated_at, updated_by"
    };
}
/// The columns read back on Postgres: the JSONB as text, so both dialects decode alike.
macro_rules! pg_columns {
    () => {
        "name, definition::text AS definition, enabled, revision, created_at, updated_at, updated_by"
    };
}

/// SQLite's time columns: fixed-width UTC text (the audit log's format), so text order is time order.
const SQLITE_TIME: &[BorrowedFormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z");

/// Every stored definition, sorted by name.
pub async fn load_all(store: &Store) -> Result<Vec<StoredTool>, sqlx::Error> {
    match store.backend() {
        Backend::Sqlite(pool) => {
            let rows = sqlx::query(concat!("SELECT ", columns!(), " FROM tool_definitions ORDER BY name")).fetch_all(pool).await?;
            rows.iter().map(sqlite_row).collect()
        }
        Backend::Postgres(pool) => {
            let rows = sqlx::query(concat!("SELECT ", pg_columns!(), " FROM tool_definitions ORDER BY name COLLATE \"C\""))
                .fetch_all(pool)
                .await?;
            rows.iter().map(pg_row).collect()
        }
    }
}

/// The stored definition called `name`.
pub async fn get(store: &Store, name: &str) -> Result<Option<StoredTool>, sqlx::Error> {
    match store.backend() {
        Backend::Sqlite(pool) => {
            let row = sqlx::query(concat!("SELECT ", columns!(), " FROM tool_definitions WHERE name = $1"))
                .bind(name)
                .fetch_optional(pool)
                .await?;
            row.as_ref().map(sqlite_row).transpose()
        }
        Backend::Postgres(pool) => {
            let row = sqlx::query(concat!("SELECT ", pg_columns!(), " FROM tool_definitions WHERE name = $1"))
                .bind(name)
                .fetch_optional(pool)
                .await?;
            row.as_ref().map(pg_row).transpose()
        }
    }
}

/// Stores a new definition at revision 1 (enabled unless `w.enabled` says otherwise).
/// [`WriteError::Exists`] when the name is taken, also when another writer won a race.
pub async fn insert(store: &Store, w: Write<'_>) -> Result<StoredTool, WriteError> {
    let now = now_micros();
    let enabled = w.enabled.unwrap_or(true);
    // One statement: atomic on its own; the primary key settles a race between two creates.
    let inserted = match store.backend() {
        Backend::Sqlite(pool) => sqlx::query(concat!(
            "INSERT INTO tool_definitions (",
            columns!(),
            ") VALUES ($1, $2, $3, 1, $4, $4, $5) RETURNING ",
            columns!()
        ))
        .bind(w.name)
        .bind(w.definition.to_string())
        .bind(enabled)
        .bind(sqlite_time(now))
        .bind(w.by)
        .fetch_one(pool)
        .await
        .and_then(|row| sqlite_row(&row)),
        Backend::Postgres(pool) => sqlx::query(concat!(
            "INSERT INTO tool_definitions (",
            columns!(),
            ") VALUES ($1, $2::jsonb, $3, 1, $4, $4, $5) RETURNING ",
            pg_columns!()
        ))
        .bind(w.name)
        .bind(w.definition.to_string())
        .bind(enabled)
        .bind(now)
        .bind(w.by)
        .fetch_one(pool)
        .await
        .and_then(|row| pg_row(&row)),
    };
    inserted.map_err(|e| match &e {
        sqlx::Error::Database(db) if db.is_unique_violation() => WriteError::Exists,
        _ => WriteError::Database(e),
    })
}

/// Replaces a stored definition (and its enabled state when `w.enabled` is set), if its
/// revision is `expected` (any revision when `None`); the revision grows by one.
pub async fn replace(store: &Store, w: Write<'_>, expected: Option<i64>) -> Result<StoredTool, WriteError> {
    let now = now_micros();
    match store.backend() {
        Backend::Sqlite(pool) => {
            // The UPDATE comes first so the transaction holds the write lock from its first
            // statement: a read first would have to upgrade, which WAL refuses after a
            // concurrent commit.
            let mut tx = pool.begin().await?;
            let row = sqlx::query(concat!(
                "UPDATE tool_definitions SET definition = $2, enabled = COALESCE($3, enabled), revision = revision + 1, updated_at = $4, updated_by = $5 \
                 WHERE name = $1 AND ($6 IS NULL OR revision = $6) RETURNING ",
                columns!()
            ))
            .bind(w.name)
            .bind(w.definition.to_string())
            .bind(w.enabled)
            .bind(sqlite_time(now))
            .bind(w.by)
            .bind(expected)
            .fetch_optional(&mut *tx)
            .await?;
            let Some(row) = row else { return Err(why_unchanged(current_revision_sqlite(&mut tx, w.name).await?)) };
            let stored = sqlite_row(&row)?;
            tx.commit().await?;
            Ok(stored)
        }
        Backend::Postgres(pool) => {
            let mut tx = pool.begin().await?;
            let row = sqlx::query(concat!(
                "UPDATE tool_definitions SET definition = $2::jsonb, enabled = COALESCE($3, enabled), revision = revision + 1, updated_at = $4, updated_by = $5 \
                 WHERE name = $1 AND ($6::int8 IS NULL OR revision = $6) RETURNING ",
                pg_columns!()
            ))
            .bind(w.name)
            .bind(w.definition.to_string())
            .bind(w.enabled)
            .bind(now)
            .bind(w.by)
            .bind(expected)
            .fetch_optional(&mut *tx)
            .await?;
            let Some(row) = row else { return Err(why_unchanged(current_revision_pg(&mut tx, w.name).await?)) };
            let stored = pg_row(&row)?;
            tx.commit().await?;
            Ok(stored)
        }
    }
}

/// Sets `enabled`. Idempotent: the revision grows only when the state changes. Returns the
/// row and whether it changed.
pub async fn set_enabled(store: &Store, name: &str, enabled: bool, by: Option<&str>) -> Result<(StoredTool, bool), WriteError> {
    let now = now_micros();
    match store.backend() {
        Backend::Sqlite(pool) => {
            let mut tx = pool.begin().await?;
            let row = sqlx::query(concat!("UPDATE tool_definitions SET enabled = $2, revision = revision + 1, updated_at = $3, updated_by = $4 WHERE name = $1 AND enabled <> $2 RETURNING ", columns!()))
            .bind(name)
            .bind(enabled)
            .bind(sqlite_time(now))
            .bind(by)
            .fetch_optional(&mut *tx)
            .await?;
            let result = match row {
                Some(row) => (sqlite_row(&row)?, true),
                None => {
                    let row = sqlx::query(concat!("SELECT ", columns!(), " FROM tool_definitions WHERE name = $1"))
                        .bind(name)
                        .fetch_optional(&mut *tx)
                        .await?
                        .ok_or(WriteError::NotFound)?;
                    (sqlite_row(&row)?, false)
                }
            };
            tx.commit().await?;
            Ok(result)
        }
        Backend::Postgres(pool) => {
            let mut tx = pool.begin().await?;
            let row = sqlx::query(concat!("UPDATE tool_definitions SET enabled = $2, revision = revision + 1, updated_at = $3, updated_by = $4 WHERE name = $1 AND enabled <> $2 RETURNING ", pg_columns!()))
            .bind(name)
            .bind(enabled)
            .bind(now)
            .bind(by)
            .fetch_optional(&mut *tx)
            .await?;
            let result = match row {
                Some(row) => (pg_row(&row)?, true),
                None => {
                    let row = sqlx::query(concat!("SELECT ", pg_columns!(), " FROM tool_definitions WHERE name = $1"))
                        .bind(name)
                        .fetch_optional(&mut *tx)
                        .await?
                        .ok_or(WriteError::NotFound)?;
                    (pg_row(&row)?, false)
                }
            };
            tx.commit().await?;
            Ok(result)
        }
    }
}

/// Deletes a stored definition if its revision is `expected` (any when `None`); returns
/// the row as it was.
pub async fn delete(store: &Store, name: &str, expected: Option<i64>) -> Result<StoredTool, WriteError> {
    match store.backend() {
        Backend::Sqlite(pool) => {
            let mut tx = pool.begin().await?;
            let row = sqlx::query(concat!(
                "DELETE FROM tool_definitions WHERE name = $1 AND ($2 IS NULL OR revision = $2) RETURNING ",
                columns!()
            ))
            .bind(name)
            .bind(expected)
            .fetch_optional(&mut *tx)
            .await?;
            let Some(row) = row else { return Err(why_unchanged(current_revision_sqlite(&mut tx, name).await?)) };
            let deleted = sqlite_row(&row)?;
            tx.commit().await?;
            Ok(deleted)
        }
        Backend::Postgres(pool) => {
            let mut tx = pool.begin().await?;
            let row = sqlx::query(concat!(
                "DELETE FROM tool_definitions WHERE name = $1 AND ($2::int8 IS NULL OR revision = $2) RETURNING ",
                pg_columns!()
            ))
            .bind(name)
            .bind(expected)
            .fetch_optional(&mut *tx)
            .await?;
            let Some(row) = row else { return Err(why_unchanged(current_revision_pg(&mut tx, name).await?)) };
            let deleted = pg_row(&row)?;
            tx.commit().await?;
            Ok(deleted)
        }
    }
}

/// A conditional write matched no row: the name is not stored, or its revision differs.
fn why_unchanged(current: Option<i64>) -> WriteError {
    match current {
        None => WriteError::NotFound,
        Some(current) => WriteError::RevisionMismatch { current },
    }
}

async fn current_revision_sqlite(tx: &mut sqlx::SqliteConnection, name: &str) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar("SELECT revision FROM tool_definitions WHERE name = $1").bind(name).fetch_optional(tx).await
}

async fn current_revision_pg(tx: &mut sqlx::PgConnection, name: &str) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar("SELECT revision FROM tool_definitions WHERE name = $1").bind(name).fetch_optional(tx).await
}

fn sqlite_row(row: &sqlx::sqlite::SqliteRow) -> Result<StoredTool, sqlx::Error> {
    let time = |column: &str| -> Result<OffsetDateTime, sqlx::Error> {
        let text: String = row.try_get(column)?;
        PrimitiveDateTime::parse(&text, SQLITE_TIME).map(PrimitiveDateTime::assume_utc).map_err(|e| decode(column, e))
    };
    Ok(StoredTool {
        name: row.try_get("name")?,
        definition: definition(&row.try_get::<String, _>("definition")?)?,
        enabled: row.try_get("enabled")?,
        revision: row.try_get("revision")?,
        created_at: time("created_at")?,
        updated_at: time("updated_at")?,
        updated_by: row.try_get("updated_by")?,
    })
}

fn pg_row(row: &sqlx::postgres::PgRow) -> Result<StoredTool, sqlx::Error> {
    Ok(StoredTool {
        name: row.try_get("name")?,
        definition: definition(&row.try_get::<String, _>("definition")?)?,
        enabled: row.try_get("enabled")?,
        revision: row.try_get("revision")?,
        created_at: row.try_get::<OffsetDateTime, _>("created_at")?.to_offset(UtcOffset::UTC),
        updated_at: row.try_get::<OffsetDateTime, _>("updated_at")?.to_offset(UtcOffset::UTC),
        updated_by: row.try_get("updated_by")?,
    })
}

fn definition(text: &str) -> Result<Value, sqlx::Error> {
    serde_json::from_str(text).map_err(|e| decode("definition", e))
}

fn decode(column: &str, e: impl std::fmt::Display) -> sqlx::Error {
    sqlx::Error::Decode(format!("tool_definitions.{column}: {e}").into())
}

fn sqlite_time(t: OffsetDateTime) -> String {
    // Formatting a UTC time with this fixed description cannot fail for years 0..=9999.
    t.to_offset(UtcOffset::UTC).format(SQLITE_TIME).unwrap_or_default()
}

/// Now, truncated to microseconds: the precision both databases keep, so a row read back
/// equals the one returned when it was written.
fn now_micros() -> OffsetDateTime {
    let now = OffsetDateTime::now_utc();
    now.replace_nanosecond(now.nanosecond() / 1000 * 1000).unwrap_or(now)
}
