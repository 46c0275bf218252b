//! The `upstream_definitions` table: upstream MCP servers defined through the admin API, kept
//! by the store's one implementation of stored definitions (`store/definitions.rs`).

use serde_json::Value;

use crate::store::Store;
use crate::store::definitions::{self, Table};
pub use crate::store::definitions::{StoredDefinition as StoredUpstream, WriteError};

/// Every stored definition, by name.
pub async fn load_all(store: &Store) -> Result<Vec<StoredUpstream>, sqlx::Error> {
    definitions::load_all(store, Table::Upstreams).await
}

pub async fn get(store: &Store, name: &str) -> Result<Option<StoredUpstream>, sqlx::Error> {
    definitions::get(store, Table::Upstreams, name).await
}

/// Creates or replaces `name` (replacing only revision `expected`, when given); returns the
/// stored row and whether it was created.
pub async fn put(
    store: &Store,
    name: &str,
    definition: &Value,
    expected: Option<i64>,
    by: Option<&str>,
) -> Result<(StoredUpstream, bool), WriteError> {
    definitions::put(store, Table::Upstreams, name, definition, expected, by).await
}

/// Deletes `name` (only revision `expected`, when given).
pub async fn delete(store: &Store, name: &str, expected: Option<i64>) -> Result<StoredUpstream, WriteError> {
    definitions::delete(store, Table::Upstreams, name, expected).await
}
