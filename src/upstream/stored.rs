//! Upstreams defined through the admin API: checked as completely as the settings file's
//! (every field by its path, the program, the OAuth secret), stored in
//! `upstream_definitions`, and applied on every replica: a new definition starts a supervisor,
//! a changed one restarts it, a deleted one stops it and withdraws what it served. An upstream
//! named in the settings always wins its name.

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::db::StoredUpstream;
use super::{Link, Upstreams};
use crate::config::upstreams::UpstreamSettings;

/// Why a submitted definition is refused.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// A field is wrong: its path and what to change.
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    /// The settings file defines this name.
    #[error("the upstream {0:?} is defined in toolgate's settings; change it there")]
    DefinedInSettings(String),
    /// A stdio upstream runs a program on this host.
    #[error("a stdio upstream runs a program on this host, which the admin API may not define unless `admin.allow_command_tools = true`")]
    CommandsDisabled,
    /// Something only the operator's settings may allow.
    #[error("{0}")]
    NotAllowed(String),
}

impl Upstreams {
    /// Checks a definition submitted for `name` without storing it.
    pub fn check(&self, name: &str, definition: &Value) -> Result<UpstreamSettings, Refusal> {
        if self.settings.upstreams.contains_key(name) {
            return Err(Refusal::DefinedInSettings(name.to_owned()));
        }
        let settings: UpstreamSettings = serde_path_to_error::deserialize(definition).map_err(|e| Refusal::Invalid {
            field: if e.path().to_string() == "." { "definition".into() } else { e.path().to_string() },
            message: e.inner().to_string(),
        })?;
        if settings.stdio.is_some() && !self.settings.admin.allow_command_tools {
            return Err(Refusal::CommandsDisabled);
        }
        self.operator_limits(&settings)?;
        let invalid = |key: String, message: String| {
            let field = key.strip_prefix(&format!("upstreams.{name}.")).unwrap_or(&key).to_owned();
            Refusal::Invalid { field, message }
        };
        settings.validate(name).map_err(|(key, reason)| invalid(key, reason))?;
        self.check_prefix(name, &settings)?;
        for (key, limit) in std::iter::once(("rate_limit".to_owned(), &settings.rate_limit))
            .chain(settings.tools.iter().map(|(t, o)| (format!("tools.{t}.rate_limit"), &o.rate_limit)))
        {
            if let Some(limit) = limit {
                self.settings.limits.validate_tool(&key, limit).map_err(|reason| invalid(key.clone(), reason))?;
            }
        }
        let tools = &self.settings.tools;
        Link::build(name, &settings, tools, tools.default_timeout_secs, CancellationToken::new(), self.vault.as_ref())
            .map_err(|e| invalid(e.clone(), e))?;
        Ok(settings)
    }

    /// Refuses a prefix that can collide with a running upstream's, configured or stored
    /// (see `config/prefixes.rs`).
    fn check_prefix(&self, name: &str, settings: &UpstreamSettings) -> Result<(), Refusal> {
        let prefix = settings.prefix_for(name);
        for other in self.links.read().values().filter(|l| l.name != name) {
            if let Some(why) = crate::config::prefixes::clash((name, &prefix), (&other.name, &other.settings.prefix_for(&other.name))) {
                let message = format!(
                    "{why}; choose a prefix that neither starts nor is started by the upstream {:?}'s (a prefix defaults to the upstream's name and '_')",
                    other.name
                );
                return Err(Refusal::Invalid { field: "prefix".into(), message });
            }
        }
        Ok(())
    }

    /// What only the operator may allow, checked for definitions from the admin API: secrets
    /// from the environment or files the `http` kind may read (`tools.http.secret_env`,
    /// `tools.http.secret_dirs`), a private address the operator exempts
    /// (`tools.http.allow_hosts`), and OAuth (`admin.allow_upstream_oauth`: a `token_url`
    /// receives every caller's token).
    fn operator_limits(&self, settings: &UpstreamSettings) -> Result<(), Refusal> {
        use crate::tooldef::http::{env_allowed, is_under};
        let http = &self.settings.tools.http;
        let secrets = settings.headers.iter().map(|(h, s)| (format!("headers.{h}"), s));
        let secrets =
            secrets.chain(settings.oauth.iter().filter_map(|o| o.client_secret.as_ref()).map(|s| ("oauth.client_secret".to_owned(), s)));
        for (field, source) in secrets {
            if let Some(var) = &source.env
                && !env_allowed(var, &http.secret_env)
            {
                let message = format!("the environment variable {var} is not in tools.http.secret_env, which the operator sets");
                return Err(Refusal::Invalid { field, message });
            }
            if let Some(path) = &source.file
                && !is_under(path, &http.secret_dirs)
            {
                let message = format!("{} is not under tools.http.secret_dirs, which the operator sets", path.display());
                return Err(Refusal::Invalid { field, message });
            }
        }
        if settings.allow_private {
            let url = settings.url.as_deref().and_then(|u| url::Url::parse(u).ok());
            let listed = url.as_ref().and_then(|u| u.host_str()).is_some_and(|host| {
                let policy = crate::tooldef::http::AddressPolicy::new(&http.allow_hosts, &Default::default());
                policy.is_allowed(host) && url.as_ref().is_some_and(|u| policy.check_url(u).is_ok())
            });
            if !listed {
                return Err(Refusal::NotAllowed(
                    "allow_private through the admin API needs the upstream's host (and port) in tools.http.allow_hosts, which the operator sets".into(),
                ));
            }
        }
        if settings.oauth.is_some() && !self.settings.admin.allow_upstream_oauth {
            return Err(Refusal::NotAllowed(
                "an upstream defined through the admin API may use `oauth` only with `admin.allow_upstream_oauth = true`: its token_url would receive every caller's token".into(),
            ));
        }
        Ok(())
    }

    /// Makes the running upstreams match the stored definitions (besides the settings' own).
    /// Returns the stored definitions that could not be applied, with why.
    pub fn apply_stored(self: &Arc<Self>, stored: &[StoredUpstream]) -> Vec<String> {
        let mut problems = Vec::new();
        let current: Vec<Arc<Link>> = self.links.read().values().filter(|l| l.status().source == "admin").cloned().collect();
        for link in &current {
            let kept = stored.iter().any(|s| s.name == link.name && link.status().revision == Some(s.revision));
            if !kept {
                self.remove(&link.name);
            }
        }
        for row in stored {
            let running = self.links.read().get(&row.name).map(|l| l.status().revision);
            if running == Some(Some(row.revision)) || self.settings.upstreams.contains_key(&row.name) {
                continue;
            }
            match self.check_stored(row, self.child_stop()) {
                Ok(link) => self.start(link),
                Err(why) => {
                    tracing::error!(upstream = %row.name, "stored upstream definition not applied: {why}");
                    problems.push(format!("{}: {why}", row.name));
                }
            }
        }
        problems
    }

    /// A stored row as a link; checked again, as the settings it depends on may have changed.
    fn check_stored(&self, row: &StoredUpstream, stop: CancellationToken) -> Result<Link, String> {
        let settings = self.check(&row.name, &row.definition).map_err(|e| e.to_string())?;
        let tools = &self.settings.tools;
        let link = Link::build(&row.name, &settings, tools, tools.default_timeout_secs, stop, self.vault.as_ref())?;
        link.update(|s| {
            s.source = "admin";
            s.revision = Some(row.revision);
        });
        Ok(link)
    }

    /// Reads the stored definitions and applies them (start-up, an admin change, another
    /// replica's change).
    pub async fn reload_stored(self: &Arc<Self>, store: &crate::store::Store) -> Result<Vec<String>, sqlx::Error> {
        // One reload at a time, read and applied together: a reload that read an older
        // revision can never apply after one that read a newer one.
        let _one = self.reloading.lock().await;
        let stored = super::db::load_all(store).await?;
        Ok(self.apply_stored(&stored))
    }
}
