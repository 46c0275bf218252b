//! Settings: defaults that run with no file, an optional TOML or YAML file, and environment
//! variables `TOOLGATE__SECTION__KEY` on top. Validated once at start-up so a bad setting
//! stops the process with a message instead of misbehaving later.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub mod admin;
pub mod audit;
pub mod auth;
pub mod authserver;
mod checks;
mod collect;
pub mod command_tools;
pub mod effective;
pub mod env_names;
mod explain;
pub mod http_tools;
pub mod limits;
pub mod prefixes;
mod secret;
pub mod servers;
pub mod storage;
pub mod tasks;
pub mod tls;
pub mod upstreams;
pub mod vault;

pub use secret::Secret;

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    pub server: ServerSettings,
    pub sessions: SessionSettings,
    pub sse: SseSettings,
    pub tools: ToolSettings,
    pub log: LogSettings,
    pub auth: auth::AuthSettings,
    /// toolgate's own authorization server for MCP clients (off unless enabled).
    pub authorization_server: authserver::AuthServerSettings,
    pub storage: storage::StorageSettings,
    pub audit: audit::AuditSettings,
    pub limits: limits::LimitSettings,
    pub admin: admin::AdminSettings,
    pub tasks: tasks::TaskSettings,
    /// MCP servers whose tools are served here (`[upstreams.<name>]`).
    pub upstreams: std::collections::BTreeMap<String, upstreams::UpstreamSettings>,
    /// Virtual servers: an MCP endpoint per team, each with its own part of the catalog
    /// (`[servers.<name>]`).
    pub servers: std::collections::BTreeMap<String, servers::VirtualServerSettings>,
    /// Where per-user upstream tokens are kept (`oauth.grant = "user"`).
    pub vault: vault::VaultSettings,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerSettings {
    /// Address of the public listener.
    pub bind: SocketAddr,
    /// Path of the Streamable HTTP endpoint.
    pub mcp_path: String,
    /// Serve the deprecated 2024-11-05 HTTP+SSE transport at `/sse` + `/messages`.
    pub legacy_sse: bool,
    /// Largest request body accepted, in bytes (413 beyond; at once when `Content-Length`
    /// announces more).
    pub max_body_bytes: usize,
    /// Longest a client may take to send a whole request body, in milliseconds (408 beyond).
    pub body_read_timeout_ms: u64,
    /// Longest a client may take to send a request's head (line and headers), and to start its
    /// next request on a kept-alive connection, in milliseconds; the connection closes beyond.
    pub header_read_timeout_ms: u64,
    /// Most connections open at once on the public listener; at the cap the longest-idle
    /// connection is closed to make room. 0: the open-file limit less a tenth (at least 64) kept
    /// for the database, the audit spool, the admin listener and tool processes.
    pub max_connections: usize,
    /// Most messages in one JSON-RPC batch (2025-03-26 sessions).
    pub max_batch_items: usize,
    /// `Host` values accepted (DNS-rebinding protection). `host` or `host:port`; `*` accepts any.
    pub allowed_hosts: Vec<String>,
    /// `Origin` values accepted when the header is present. `scheme://host[:port]`; a missing
    /// port accepts any port; `*` accepts any origin.
    pub allowed_origins: Vec<String>,
    /// Name and version announced to clients.
    pub name: String,
    pub instructions: Option<String>,
    /// How long in-flight work may take to finish after a shutdown signal; calls still
    /// running near its end are stopped, so the process exits within it (plus the audit flush).
    pub shutdown_grace_secs: u64,
    /// After a shutdown signal, how long the listener keeps accepting connections while
    /// readiness already reports 503 (so load balancers stop routing here first). Must be
    /// shorter than the grace period.
    pub drain_delay_ms: u64,
    /// Load balancers and proxies (addresses or networks, e.g. `10.0.0.0/8`) whose
    /// `X-Forwarded-For` names the client. Empty: the TCP peer is the client (a client behind
    /// an unlisted proxy then shares the proxy's address for rate limits and lockouts).
    pub trusted_proxies: Vec<String>,
    /// Secret that signs MRTR `requestState`. Unset: a random per-process key (state then
    /// does not survive a restart; set the same value on every replica).
    pub state_secret: Option<Secret>,
    /// TLS on the public listener (`[server.tls]`); off: plain HTTP behind a balancer.
    pub tls: tls::TlsSettings,
}

impl Default for ServerSettings {
    fn default() -> Self {
        Self {
            bind: SocketAddr::from(([127, 0, 0, 1], 8080)),
            mcp_path: "/mcp".into(),
            legacy_sse: true,
            max_body_bytes: 4 * 1024 * 1024,
            body_read_timeout_ms: 30_000,
            header_read_timeout_ms: 10_000,
            max_connections: 0,
            max_batch_items: 100,
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "[::1]".into()],
            allowed_origins: vec!["http://localhost".into(), "http://127.0.0.1".into(), "http://[::1]".into()],
            name: "toolgate".into(),
            instructions: None,
            shutdown_grace_secs: 20,
            trusted_proxies: Vec::new(),
            drain_delay_ms: 2_000,
            state_secret: None,
            tls: tls::TlsSettings::default(),
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct SessionSettings {
    /// A legacy session unused for this long is ended (its id then gets 404).
    pub idle_timeout_secs: u64,
    /// Most legacy sessions held at once; `initialize` beyond it gets 503 with Retry-After.
    pub max_sessions: usize,
    /// Most legacy sessions one client (principal, or address without authentication) holds
    /// at once on this replica; beyond it 429 with Retry-After. Applies whether or not rate
    /// limiting is enabled.
    pub max_per_client: usize,
    /// How long a tool waits for the client to answer a server-to-client request.
    pub client_request_timeout_secs: u64,
    /// Key that signs session ids. With several replicas (Postgres storage) set the same
    /// value on every one, so a session created through one is accepted by all. Unset: a
    /// random per-process key (sessions then end with the process, as on a single node).
    pub secret: Option<Secret>,
}

impl Default for SessionSettings {
    fn default() -> Self {
        Self { idle_timeout_secs: 30 * 60, max_sessions: 100_000, max_per_client: 256, client_request_timeout_secs: 300, secret: None }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct SseSettings {
    /// Interval of `: keep-alive` comments; keep it below every proxy idle timeout.
    pub keep_alive_secs: u64,
    /// `retry` hint sent to 2025-11-25 clients, in milliseconds.
    pub retry_ms: u64,
    /// Events kept per stream for `Last-Event-ID` resumption.
    pub replay_events: usize,
    /// Messages queued per stream before a slow client starts losing notifications.
    pub stream_buffer: usize,
    /// Most long-lived streams of each kind (GET streams on the MCP endpoint, `/sse`
    /// connections, `subscriptions/listen` streams) one client holds open at once on this
    /// replica; beyond it 429 with Retry-After.
    pub max_streams_per_client: usize,
}

impl Default for SseSettings {
    fn default() -> Self {
        Self { keep_alive_secs: 15, retry_ms: 3000, replay_events: 64, stream_buffer: 64, max_streams_per_client: 256 }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolSettings {
    /// Built-in tool packs.
    pub packs: PackSettings,
    /// Items per page of every list method.
    pub page_size: usize,
    /// Timeout of a tool call unless the tool sets its own.
    pub default_timeout_secs: u64,
    /// Directory the CSV analysis tool may read (nothing outside it).
    pub csv_dir: PathBuf,
    /// Tool calls running at once across the server; more wait in the queue.
    pub max_concurrent_calls: usize,
    /// Calls waiting for a slot at most; beyond it a call is refused at once.
    pub max_queued_calls: usize,
    /// Characters of text a tool result may carry unless the tool sets its own limit.
    pub default_char_limit: usize,
    /// Declarative tool definitions: a TOML, YAML or JSON file, or a directory of them
    /// (`*.toml`, `*.yaml`, `*.yml`, `*.json`). Watched and re-read on change and on SIGHUP.
    pub path: Option<PathBuf>,
    /// Watch `path` for changes (SIGHUP reloads either way).
    pub watch: bool,
    /// What `http` tools may reach.
    pub http: http_tools::HttpToolSettings,
    /// What `command` tools may run.
    pub command: command_tools::CommandToolSettings,
}

impl Default for ToolSettings {
    fn default() -> Self {
        Self {
            packs: PackSettings::default(),
            page_size: 50,
            default_timeout_secs: 60,
            // Not the storage data directory: the audit database and spool must never be
            // readable through a tool.
            csv_dir: PathBuf::from("data/csv"),
            max_concurrent_calls: 256,
            max_queued_calls: 1024,
            default_char_limit: 25_000,
            path: None,
            watch: true,
            http: Default::default(),
            command: Default::default(),
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct PackSettings {
    pub examples: bool,
    /// Every fixture the official conformance suite calls. Off in production.
    pub conformance: bool,
    /// `fanout_register` / `fanout_notify`, the helpers of the shared benchmark's fan-out test
    /// (`benches/run.sh`). Off in production.
    pub bench: bool,
}

impl Default for PackSettings {
    fn default() -> Self {
        Self { examples: true, conformance: false, bench: false }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogSettings {
    /// `pretty` for people, `json` for log pipelines.
    pub format: LogFormat,
    /// A tracing `EnvFilter` directive; `RUST_LOG` overrides it.
    pub filter: String,
    /// OpenTelemetry trace export (builds with the `otel` feature).
    pub otlp: OtlpSettings,
}

impl Default for LogSettings {
    fn default() -> Self {
        Self { format: LogFormat::Pretty, filter: "info,toolgate=info".into(), otlp: OtlpSettings::default() }
    }
}

/// `[log.otlp]`: where traces go. Unset endpoint: no export.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct OtlpSettings {
    /// The collector's OTLP/HTTP base URL, e.g. `http://otel-collector:4318` (`/v1/traces` is
    /// appended unless present).
    pub endpoint: Option<String>,
    /// `service.name` of the exported spans.
    pub service_name: String,
    /// Share of new traces exported, 0.0–1.0; a caller's `traceparent` decides for its own.
    pub sample_ratio: f64,
}

impl Default for OtlpSettings {
    fn default() -> Self {
        Self { endpoint: None, service_name: "toolgate".into(), sample_ratio: 1.0 }
    }
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Pretty,
    Json,
}

/// A setting that cannot work, with the key that names it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot load configuration")]
    Load(#[from] config::ConfigError),
    #[error("invalid setting {key}: {reason}")]
    Invalid { key: &'static str, reason: String },
    /// A setting under a key chosen by the operator (`upstreams.<name>.url`).
    #[error("invalid setting {key}: {reason}")]
    InvalidAt { key: String, reason: String },
    /// A value that does not fit its key (or a key that is none), with where it was set: the
    /// settings file, or the environment variable's name.
    #[error("invalid setting {key} ({from}): {reason}")]
    Value { key: String, from: String, reason: String },
    /// More than one of the above, each to fix.
    #[error("{} problems in the settings, each to fix:\n{}", .0.len(), list(.0))]
    Several(Vec<ConfigError>),
}

impl ConfigError {
    /// The key the problem is at (`None` for a load failure or a list of several).
    pub fn key(&self) -> Option<&str> {
        match self {
            Self::Invalid { key, .. } => Some(key),
            Self::InvalidAt { key, .. } | Self::Value { key, .. } => Some(key),
            Self::Load(_) | Self::Several(_) => None,
        }
    }

    /// `Ok` for no problems, the one problem, or all of them.
    pub fn all(mut problems: Vec<ConfigError>) -> Result<(), ConfigError> {
        match problems.len() {
            0 => Ok(()),
            1 => Err(problems.remove(0)),
            _ => Err(ConfigError::Several(problems)),
        }
    }
}

/// One problem a line, as `tools validate` lists a tools file's.
fn list(problems: &[ConfigError]) -> String {
    let lines: Vec<String> = problems.iter().map(|p| format!("  - {p}")).collect();
    lines.join("\n")
}

/// A settings file as a source: `*.yaml`/`*.yml` is YAML ([`YamlFile`]), anything else TOML.
/// Every reader of the settings file goes through here, so all of them accept the same files.
/// (A list of one, since `config` takes a list of boxed sources but not one alone.)
pub(crate) fn file_source(path: &Path) -> Vec<Box<dyn config::Source + Send + Sync>> {
    if YamlFile::is_yaml(path) {
        vec![Box::new(YamlFile(path.to_owned()))]
    } else {
        vec![Box::new(config::File::from(path).format(config::FileFormat::Toml).required(true))]
    }
}

/// The `TOOLGATE__SECTION__KEY` variables as a settings source.
pub(crate) fn env_source() -> config::Environment {
    config::Environment::with_prefix("TOOLGATE")
        .prefix_separator("__")
        .separator("__")
        .try_parsing(true)
        .list_separator(",")
        .with_list_parse_key("server.allowed_hosts")
        .with_list_parse_key("server.allowed_origins")
        .with_list_parse_key("server.trusted_proxies")
        .with_list_parse_key("auth.authorization_servers")
        .with_list_parse_key("auth.required_scopes")
        .with_list_parse_key("audit.redact_fields")
        .with_list_parse_key("tools.http.allow_hosts")
        .with_list_parse_key("tools.http.secret_env")
        .with_list_parse_key("tools.http.secret_dirs")
        .with_list_parse_key("tools.command.allowed_programs")
}

impl Settings {
    /// Defaults, then the file (when given: `*.yaml`/`*.yml` is YAML, anything else TOML),
    /// then `TOOLGATE__SECTION__KEY` variables.
    pub fn load(file: Option<&Path>) -> Result<Self, ConfigError> {
        let mut builder = config::Config::builder();
        if let Some(path) = file {
            builder = builder.add_source(file_source(path));
        }
        // A file that is not TOML or YAML stops here, at its first syntax error.
        let built = builder.add_source(env_source()).build().map_err(explain::explain)?;
        let table = config::Source::collect(&built)?;
        let (settings, mut problems) = collect::deserialize(table);
        // Values left out as unreadable fall back to defaults: the checks still run, so one
        // report holds every problem, but such settings are never returned.
        // A check of a key left out (or under it, or of its section) would judge the default
        // standing in for it: `auth.mode = "JWT"` is not "dev" on a public address.
        if let Some(settings) = &settings {
            let left_out: Vec<String> = problems.iter().filter_map(ConfigError::key).map(str::to_owned).collect();
            let touches = |key: &str| left_out.iter().any(|out| collect::is_within(key, out) || collect::is_within(out, key));
            problems.extend(settings.problems().into_iter().filter(|p| !p.key().is_some_and(touches)));
        }
        ConfigError::all(problems)?;
        settings.ok_or_else(|| ConfigError::Invalid { key: "settings", reason: "cannot be read".into() })
    }

    pub fn keep_alive(&self) -> Duration {
        Duration::from_secs(self.sse.keep_alive_secs)
    }

    /// The shutdown grace period.
    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_secs(self.server.shutdown_grace_secs)
    }

    /// The drain delay, at most half the grace period (settings built in code skip `validate`).
    pub fn drain_delay(&self) -> Duration {
        Duration::from_millis(self.server.drain_delay_ms).min(self.shutdown_grace() / 2)
    }

    pub fn body_read_timeout(&self) -> Duration {
        Duration::from_millis(self.server.body_read_timeout_ms)
    }
}

/// A YAML settings file, read by the same parser (and budget) as YAML tools files rather than
/// the `config` crate's own YAML support, so the product has one YAML dialect and one set of
/// error messages (line, column and the line itself). Keys and values reach the settings
/// exactly as a TOML file's would: unknown keys are refused the same way.
#[derive(Clone, Debug)]
struct YamlFile(PathBuf);

impl YamlFile {
    fn is_yaml(path: &Path) -> bool {
        matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"))
    }

    fn convert(origin: &String, value: serde_json::Value) -> config::Value {
        use config::ValueKind;
        use serde_json::Value as J;
        let kind = match value {
            J::Null => ValueKind::Nil,
            J::Bool(b) => ValueKind::Boolean(b),
            J::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => ValueKind::I64(i),
                (None, Some(u)) => ValueKind::U64(u),
                _ => ValueKind::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            J::String(s) => ValueKind::String(s),
            J::Array(items) => ValueKind::Array(items.into_iter().map(|v| Self::convert(origin, v)).collect()),
            J::Object(map) => ValueKind::Table(map.into_iter().map(|(k, v)| (k, Self::convert(origin, v))).collect()),
        };
        config::Value::new(Some(origin), kind)
    }
}

impl config::Source for YamlFile {
    fn clone_into_box(&self) -> Box<dyn config::Source + Send + Sync> {
        Box::new(self.clone())
    }

    fn collect(&self) -> Result<config::Map<String, config::Value>, config::ConfigError> {
        let uri = self.0.display().to_string();
        let text = std::fs::read_to_string(&self.0).map_err(|e| config::ConfigError::Foreign(format!("cannot read {uri}: {e}").into()))?;
        let parse_error =
            |cause: String| config::ConfigError::FileParse { uri: Some(uri.clone()), cause: format!("invalid YAML: {cause}").into() };
        match crate::yaml::from_str(&text, crate::yaml::Budget::Definitions, &uri).map_err(parse_error)? {
            serde_json::Value::Object(map) => Ok(map.into_iter().map(|(k, v)| (k, Self::convert(&uri, v))).collect()),
            // Empty, or only comments: nothing set, as with an empty TOML file.
            serde_json::Value::Null => Ok(config::Map::new()),
            _ => Err(parse_error("the settings file must be a mapping of sections (`server:`, `auth:`, ...)".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_loopback() {
        let s = Settings::default();
        assert!(s.validate().is_ok());
        assert!(s.server.bind.ip().is_loopback());
        assert!(s.tools.packs.examples && !s.tools.packs.conformance);
    }

    #[test]
    fn file_values_override_defaults_and_typos_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("t.toml");
        std::fs::write(&path, "[server]\nbind = \"127.0.0.1:9999\"\n[tools.packs]\nconformance = true\n").expect("write");
        let s = Settings::load(Some(&path)).expect("loads");
        assert_eq!(s.server.bind.port(), 9999);
        assert!(s.tools.packs.conformance);
        std::fs::write(&path, "[server]\nbnd = \"x\"\n").expect("write");
        let err = Settings::load(Some(&path)).err().map(|e| format!("{:#}", anyhow::Error::from(e))).unwrap_or_default();
        assert!(err.contains("bnd"), "the cause names the unknown key: {err}");
    }

    #[test]
    fn secrets_never_print() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("t.toml");
        std::fs::write(&path, "[server]\nstate_secret = \"hunter2\"\n").expect("write");
        let s = Settings::load(Some(&path)).expect("loads");
        assert_eq!(s.server.state_secret.as_ref().map(Secret::expose), Some("hunter2"));
        assert!(!format!("{s:?}").contains("hunter2"));
    }

    #[test]
    fn bad_paths_are_refused() {
        let mut s = Settings::default();
        s.server.mcp_path = "mcp".into();
        assert!(s.validate().is_err());
    }
}
