//! The checks of settings that read but cannot work together (a drain delay longer than the
//! grace period, dev mode on a public address, ...). Every check runs, so a file with several
//! mistakes is reported whole, as `toolgate tools validate` reports a tools file; each section's
//! own `validate` still stops at its first problem.

use super::{ConfigError, Settings, auth, prefixes, servers, upstreams};

/// The most problems reported; the rest are counted.
const MAX_REPORTED: usize = 100;

/// The problems found so far.
#[derive(Default)]
struct Found(Vec<ConfigError>);

impl Found {
    /// A problem at `key` unless `ok`.
    fn check(&mut self, ok: bool, key: &'static str, reason: &str) {
        if !ok {
            self.0.push(ConfigError::Invalid { key, reason: reason.to_owned() });
        }
    }

    /// A section's own check, which says nothing of the key beyond the section.
    fn section(&mut self, key: &'static str, result: Result<(), String>) {
        if let Err(reason) = result {
            self.0.push(ConfigError::Invalid { key, reason });
        }
    }

    /// A check that names its key.
    fn at(&mut self, result: Result<(), (String, String)>) {
        if let Err((key, reason)) = result {
            self.0.push(ConfigError::InvalidAt { key, reason });
        }
    }

    fn error(&mut self, result: Result<(), ConfigError>) {
        if let Err(e) = result {
            self.0.push(e);
        }
    }
}

impl Settings {
    /// Every setting that cannot work: one error, or [`ConfigError::Several`] listing them all.
    pub fn validate(&self) -> Result<(), ConfigError> {
        ConfigError::all(self.problems())
    }

    /// Every setting that cannot work, each with its key and what would.
    pub fn problems(&self) -> Vec<ConfigError> {
        let mut found = Found::default();
        self.check_server(&mut found);
        self.check_streams_and_tools(&mut found);
        self.check_upstreams(&mut found);
        self.check_servers(&mut found);
        self.check_observability(&mut found);
        self.check_auth(&mut found);
        self.check_sections(&mut found);
        let mut problems = found.0;
        if problems.len() > MAX_REPORTED {
            let more = problems.len() - MAX_REPORTED;
            problems.truncate(MAX_REPORTED);
            problems
                .push(ConfigError::Invalid { key: "settings", reason: format!("and {more} more problems, shown once these are fixed") });
        }
        problems
    }

    fn check_server(&self, found: &mut Found) {
        let s = &self.server;
        let path = &s.mcp_path;
        let path_ok = path.starts_with('/') && path.len() >= 2 && !path.ends_with('/');
        found.check(path_ok, "server.mcp_path", "must start with '/', not end with '/', and not be '/' alone");
        let hosts = "must not be empty; list the public host names, or \"*\" to accept any";
        found.check(!s.allowed_hosts.is_empty(), "server.allowed_hosts", hosts);
        found.check(s.max_body_bytes >= 1024, "server.max_body_bytes", "must be at least 1024");
        let timeouts = "body_read_timeout_ms and header_read_timeout_ms must be at least 100";
        found.check(s.body_read_timeout_ms >= 100 && s.header_read_timeout_ms >= 100, "server", timeouts);
        found.check(s.max_batch_items > 0, "server.max_batch_items", "must be at least 1");
        let drain_ok = s.drain_delay_ms == 0 || s.drain_delay_ms < s.shutdown_grace_secs.saturating_mul(1000);
        found.check(drain_ok, "server.drain_delay_ms", "must be shorter than server.shutdown_grace_secs (or 0)");
        found.error(s.tls.validate("server.tls"));
        found.error(self.admin.tls.validate("admin.tls"));
    }

    fn check_streams_and_tools(&self, found: &mut Found) {
        let per_client = self.sessions.max_per_client > 0 && self.sse.max_streams_per_client > 0;
        let reason = "sessions.max_per_client and sse.max_streams_per_client must be at least 1";
        found.check(per_client, "sessions.max_per_client", reason);
        let sse = self.sse.stream_buffer > 0 && self.sse.keep_alive_secs > 0;
        found.check(sse, "sse", "stream_buffer and keep_alive_secs must be at least 1");
        let t = &self.tools;
        found.check(t.page_size > 0, "tools.page_size", "must be at least 1");
        let calls = t.max_concurrent_calls > 0 && t.default_char_limit >= 100;
        found.check(calls, "tools", "max_concurrent_calls must be at least 1 and default_char_limit at least 100");
        found.check(t.command.max_output_bytes >= 1024, "tools.command.max_output_bytes", "must be at least 1024");
        found.check(t.default_timeout_secs > 0, "tools.default_timeout_secs", "must be at least 1");
        if let Err((key, reason)) = self.tasks.validate() {
            found.check(false, key, reason);
        }
    }

    fn check_upstreams(&self, found: &mut Found) {
        for (name, upstream) in &self.upstreams {
            found.at(upstream.validate(name));
            found.at(self.check_user_grant(name, upstream));
            let limits = std::iter::once((format!("upstreams.{name}.rate_limit"), &upstream.rate_limit))
                .chain(upstream.tools.iter().map(|(tool, o)| (format!("upstreams.{name}.tools.{tool}.rate_limit"), &o.rate_limit)));
            for (key, limit) in limits {
                if let Some(limit) = limit {
                    found.at(self.limits.validate_tool(&key, limit).map_err(|reason| (key.clone(), reason)));
                }
            }
        }
        found.at(prefixes::check(&self.upstreams));
    }

    fn check_servers(&self, found: &mut Found) {
        if self.servers.len() > servers::MAX_SERVERS {
            // Each server's check reads all the others: past the cap that is work without end.
            let at_most = format!("at most {} virtual servers (there are {})", servers::MAX_SERVERS, self.servers.len());
            return found.check(false, "servers", &at_most);
        }
        for (name, server) in &self.servers {
            found.at(server.validate(name, &self.server.mcp_path, &self.servers));
        }
    }

    fn check_observability(&self, found: &mut Found) {
        let otlp = &self.log.otlp;
        found.check((0.0..=1.0).contains(&otlp.sample_ratio), "log.otlp.sample_ratio", "must be between 0.0 and 1.0");
        let endpoint_ok = otlp.endpoint.as_deref().is_none_or(|e| url::Url::parse(e).is_ok_and(|u| matches!(u.scheme(), "http" | "https")));
        let reason = "must be an http:// or https:// URL, e.g. http://otel-collector:4318";
        found.check(endpoint_ok, "log.otlp.endpoint", reason);
    }

    fn check_auth(&self, found: &mut Found) {
        found.section("auth", self.auth.validate_with(self.authorization_server.enabled));
        found.at(self.authorization_server.validate());
        let jwt = !self.authorization_server.enabled || self.auth.mode == auth::AuthMode::Jwt;
        let reason =
            "must be \"jwt\" with authorization_server.enabled: the resource server verifies the tokens the authorization server issues";
        found.check(jwt, "auth.mode", reason);
        let dev_public = self.auth.mode == auth::AuthMode::Dev && !self.server.bind.ip().is_loopback() && !self.auth.dev_allow_public_bind;
        let reason = "\"dev\" trusts locally minted tokens and only serves on a loopback address; configure real issuers for this bind, or set auth.dev_allow_public_bind = true if you must";
        found.check(!dev_public, "auth.mode", reason);
    }

    fn check_sections(&self, found: &mut Found) {
        found.at(self.vault.validate());
        found.section("storage", self.storage.validate());
        found.section("audit", self.audit.validate());
        found.section("limits", self.limits.validate());
        let open_admin = self.admin.enabled && self.auth.mode == auth::AuthMode::Off && !self.admin.bind.ip().is_loopback();
        let reason = "with auth.mode = \"off\" the admin API has no authentication, so it only serves on a loopback address; turn auth on (admin tokens need the admin.scope scope) or bind it to 127.0.0.1";
        found.check(!open_admin, "admin.bind", reason);
        found.check(!self.admin.scope.trim().is_empty(), "admin.scope", "must name the scope admin tokens carry");
    }

    /// An upstream whose calls run with each user's own account (`oauth.grant = "user"`) needs
    /// the vault's keys and the authorization server, whose identity provider signs the user in
    /// on the connect page.
    pub fn check_user_grant(&self, name: &str, upstream: &upstreams::UpstreamSettings) -> Result<(), (String, String)> {
        if !upstream.oauth.as_ref().is_some_and(|o| o.grant == upstreams::Grant::User) {
            return Ok(());
        }
        if !self.authorization_server.enabled {
            return Err((
                format!("upstreams.{name}.oauth.grant"),
                "\"user\" needs [authorization_server] enabled: its identity provider signs the user in on the page where they connect their account".into(),
            ));
        }
        if self.vault.keys.is_empty() {
            return Err((
                format!("upstreams.{name}.oauth.grant"),
                "\"user\" needs [vault] keys to seal each user's tokens (32 random bytes, base64: `openssl rand -base64 32`)".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_problem_is_reported_not_only_the_first() {
        let mut s = Settings::default();
        s.server.mcp_path = "mcp".into();
        s.tools.page_size = 0;
        s.log.otlp.sample_ratio = 2.0;
        let keys: Vec<String> = s.problems().iter().map(ToString::to_string).collect();
        assert_eq!(keys.len(), 3, "{keys:#?}");
        assert!(matches!(s.validate(), Err(ConfigError::Several(ref all)) if all.len() == 3));
    }

    #[test]
    fn past_the_server_cap_no_server_is_checked_and_the_report_is_bounded() {
        let mut s = Settings::default();
        let bad = servers::VirtualServerSettings { path: "bad path".into(), ..Default::default() };
        for i in 0..=servers::MAX_SERVERS {
            s.servers.insert(format!("s{i}"), bad.clone());
        }
        let problems = s.problems();
        assert_eq!(problems.len(), 1, "only the cap: {}", problems.iter().take(3).map(ToString::to_string).collect::<Vec<_>>().join("; "));
        assert!(problems[0].to_string().contains("at most"), "{}", problems[0]);
        s.servers.retain(|name, _| name[1..].parse::<usize>().is_ok_and(|i| i < 150));
        assert!(s.servers.len() > MAX_REPORTED);
        let many = s.problems();
        assert_eq!(many.len(), MAX_REPORTED + 1);
        let last = many.last().map(ToString::to_string).unwrap_or_default();
        assert!(last.contains(&format!("and {} more problems", s.servers.len() - MAX_REPORTED)), "{last}");
    }
}
