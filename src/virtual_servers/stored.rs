//! Virtual servers defined through the admin API: checked as completely as the settings
//! file's (every field by its path, its path beside every other server's, and the names it
//! would serve today), stored in `server_definitions`, and applied on every replica. A server
//! named in the settings always wins its name.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::{VirtualServers, view};
use crate::config::servers::VirtualServerSettings;
use crate::store::Store;
use crate::store::definitions::{self, StoredDefinition, Table};
use crate::tool::ToolSet;

/// Why a submitted definition is refused.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// A field is wrong: its path and what to change.
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    /// The settings file defines this name.
    #[error("the server {0:?} is defined in toolgate's settings; change it there")]
    DefinedInSettings(String),
}

impl VirtualServers {
    /// Checks a definition submitted for `name` without storing it: its fields, its path
    /// beside every other server's, and that no two tools would share a name on it now.
    pub fn check(&self, name: &str, definition: &Value, tools: &Arc<ToolSet>) -> Result<VirtualServerSettings, Refusal> {
        if self.configured.contains_key(name) {
            return Err(Refusal::DefinedInSettings(name.to_owned()));
        }
        let settings: VirtualServerSettings = serde_path_to_error::deserialize(definition).map_err(|e| Refusal::Invalid {
            field: if e.path().to_string() == "." { "definition".into() } else { e.path().to_string() },
            message: e.inner().to_string(),
        })?;
        let mut all: BTreeMap<String, VirtualServerSettings> =
            self.current.load().iter().map(|(n, s)| (n.to_string(), s.settings.clone())).collect();
        if !all.contains_key(name) && all.len() >= crate::config::servers::MAX_SERVERS {
            let message = format!("there are already {} virtual servers, the most toolgate serves", all.len());
            return Err(Refusal::Invalid { field: "definition".into(), message });
        }
        all.insert(name.to_owned(), settings.clone());
        settings.validate(name, &self.mcp_path, &all).map_err(|(key, message)| Refusal::Invalid {
            field: key.strip_prefix(&format!("servers.{name}.")).unwrap_or(&key).to_owned(),
            message,
        })?;
        let candidate = view::build(name, &settings, &super::Selection::parse(&settings.tools), tools.clone());
        if let Some(collision) = candidate.collisions.first() {
            return Err(Refusal::Invalid { field: "overrides".into(), message: collision.clone() });
        }
        Ok(settings)
    }

    /// Makes the servers the settings' own plus the stored ones that still check out; returns
    /// those that do not, with why.
    pub fn apply_stored(&self, stored: &[StoredDefinition], tools: &Arc<ToolSet>) -> Vec<String> {
        let mut all = self.configured.clone();
        let mut problems = Vec::new();
        for row in stored.iter().filter(|r| !self.configured.contains_key(&r.name)) {
            let parsed: Result<VirtualServerSettings, String> = serde_json::from_value(row.definition.clone()).map_err(|e| e.to_string());
            let checked = parsed.and_then(|s| {
                let mut with = all.clone();
                with.insert(row.name.clone(), s.clone());
                s.validate(&row.name, &self.mcp_path, &with).map(|()| s).map_err(|(key, why)| format!("{key}: {why}"))
            });
            match checked {
                Ok(settings) => {
                    all.insert(row.name.clone(), settings);
                }
                Err(why) => {
                    tracing::error!(server = %row.name, "stored server definition not applied: {why}");
                    problems.push(format!("{}: {why}", row.name));
                }
            }
        }
        let revisions = stored.iter().map(|r| (r.name.clone(), r.revision)).collect();
        self.replace(&all);
        *self.revisions.lock() = revisions;
        // Collisions with today's tools are logged when each view is built.
        for server in self.all() {
            server.view(tools);
        }
        problems
    }

    /// Reads the stored definitions and applies them (start-up, an admin change, another
    /// replica's change); one reload at a time, so an older read never applies after a newer.
    pub async fn reload_stored(&self, store: &Store, tools: &Arc<ToolSet>) -> Result<Vec<String>, sqlx::Error> {
        let _one = self.reloading.lock().await;
        let stored = definitions::load_all(store, Table::Servers).await?;
        Ok(self.apply_stored(&stored, tools))
    }

    /// The stored revision of a server defined through the admin API (`None`: the settings').
    pub fn revision(&self, name: &str) -> Option<i64> {
        self.revisions.lock().get(name).copied()
    }

    /// Names two tools would share on a server of the settings, with both sources and the
    /// setting to change: start-up refuses them.
    pub fn configured_collisions(&self, tools: &Arc<ToolSet>) -> Vec<String> {
        self.all().iter().filter(|s| self.configured.contains_key(s.name.as_ref())).flat_map(|s| s.view(tools).collisions.clone()).collect()
    }

    /// Whether the settings define `name`.
    pub fn is_configured(&self, name: &str) -> bool {
        self.configured.contains_key(name)
    }
}
