//! The `oauth_clients` table: dynamically registered clients. One SQL text serves SQLite and
//! Postgres. Every replica reads it on each use, so a registration made through one replica
//! works at once through every other.

use crate::store::{Store, on_pool};

/// One stored registration.
#[derive(Clone, Debug)]
pub struct StoredClient {
    /// The registered metadata, as JSON text.
    pub metadata: String,
    /// SHA-256 (hex) of the issued secret, for confidential clients.
    pub secret_hash: Option<String>,
}

/// How long a use is remembered before [`touch`] writes again: the purge works in days, so
/// one write an hour per client is plenty.
const TOUCH_EVERY_MS: i64 = 3_600_000;

pub async fn insert(store: &Store, client_id: &str, metadata: &str, secret_hash: Option<&str>, now_ms: i64) -> Result<(), sqlx::Error> {
    let sql = "INSERT INTO oauth_clients (client_id, metadata, secret_hash, created_ms) VALUES ($1, $2, $3, $4)";
    on_pool!(store, |pool| {
        sqlx::query(sql).bind(client_id).bind(metadata).bind(secret_hash).bind(now_ms).execute(pool).await?;
        Ok(())
    })
}

pub async fn get(store: &Store, client_id: &str) -> Result<Option<StoredClient>, sqlx::Error> {
    let sql = "SELECT metadata, secret_hash FROM oauth_clients WHERE client_id = $1";
    on_pool!(store, |pool| {
        let found: Option<(String, Option<String>)> = sqlx::query_as(sql).bind(client_id).fetch_optional(pool).await?;
        Ok(found.map(|(metadata, secret_hash)| StoredClient { metadata, secret_hash }))
    })
}

/// Records a use, at most once per [`TOUCH_EVERY_MS`].
pub async fn touch(store: &Store, client_id: &str, now_ms: i64) -> Result<(), sqlx::Error> {
    let sql = "UPDATE oauth_clients SET last_used_ms = $2 WHERE client_id = $1 AND (last_used_ms IS NULL OR last_used_ms < $3)";
    on_pool!(store, |pool| {
        sqlx::query(sql).bind(client_id).bind(now_ms).bind(now_ms - TOUCH_EVERY_MS).execute(pool).await?;
        Ok(())
    })
}

/// Deletes registrations last used (or, never used, created) before `cutoff_ms`.
pub async fn purge(store: &Store, cutoff_ms: i64) -> Result<u64, sqlx::Error> {
    let sql = "DELETE FROM oauth_clients WHERE last_used_ms < $1 OR (last_used_ms IS NULL AND created_ms < $1)";
    on_pool!(store, |pool| Ok(sqlx::query(sql).bind(cutoff_ms).execute(pool).await?.rows_affected()))
}
