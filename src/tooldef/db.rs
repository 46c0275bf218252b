//! The `tool_definitions` table: tool definitions written through the admin API.
//! (Being built: see the admin helper's task.)

use serde_json::Value;

use crate::store::Store;

/// One stored definition.
#[derive(Clone, Debug)]
pub struct StoredTool {
    pub name: String,
    /// The definition as submitted (JSON), without `enabled`.
    pub definition: Value,
    pub enabled: bool,
    /// Starts at 1, +1 on every change (optimistic concurrency for updates).
    pub revision: i64,
}

/// Every stored definition, sorted by name.
pub async fn load_all(_store: &Store) -> Result<Vec<StoredTool>, sqlx::Error> {
    Ok(Vec::new())
}
