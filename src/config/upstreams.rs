//! `[upstreams.<name>]`: MCP servers whose tools toolgate serves as its own (`src/upstream`).
//!
//! ```toml
//! [upstreams.everything]
//! stdio = { program = "npx", args = ["-y", "@modelcontextprotocol/server-everything"], env_passthrough = ["PATH", "HOME"] }
//! prefix = "everything_"      # default: "<name>_"
//! deny_tools = ["zip"]
//!
//! [upstreams.search]
//! url = "http://10.0.4.7:8000/mcp"
//! allow_private = true        # an internal server: exempts exactly 10.0.4.7:8000 from the SSRF policy
//! headers = { "X-Api-Key" = { env = "SEARCH_API_KEY" } }
//! tools.query = { title = "Search the wiki", scopes = ["wiki:read"] }
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// One upstream MCP server.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamSettings {
    /// A server started as a child process, speaking MCP over its stdin and stdout.
    pub stdio: Option<StdioSettings>,
    /// A remote server's Streamable HTTP endpoint (`http://` or `https://`).
    pub url: Option<String>,
    /// How `url` is spoken: `streamable_http`, `sse` (the deprecated 2024-11-05 HTTP+SSE
    /// transport: `url` is its event stream), or `auto` (the default: Streamable HTTP, and the
    /// SSE transport when the first POST is refused with 400, 404 or 405).
    #[serde(default)]
    pub transport: HttpTransport,
    /// Which protocol revision a Streamable HTTP upstream is spoken in: `auto` (the default:
    /// ask `server/discover` for 2026-07-28, and fall back to the `initialize` handshake when
    /// the upstream does not know it), `legacy` (always `initialize`, for an upstream that
    /// mishandles the probe), or `2026-07-28` (no fallback). stdio and SSE upstreams are
    /// always spoken with `initialize`.
    #[serde(default)]
    pub protocol: UpstreamProtocol,
    /// Lets `url` be a loopback, private or link-local address: exactly its host and port are
    /// exempt from the SSRF policy (redirects elsewhere are still checked). Internal MCP
    /// servers usually need it; off by default.
    #[serde(default)]
    pub allow_private: bool,
    /// Readiness (`/readyz`) waits for this upstream to be connected. Off by default: a
    /// replica serves its other tools while an upstream is away.
    #[serde(default)]
    pub required: bool,
    /// Put before every tool name of this upstream. Unset: the upstream's name and `_`. No
    /// upstream's prefix may start another's, and an empty one is for the only upstream
    /// (`prefixes.rs`).
    pub prefix: Option<String>,
    /// Upstream tool names to serve; empty serves all (but `deny_tools`).
    #[serde(default)]
    pub allow_tools: Vec<String>,
    /// Upstream tool names never served.
    #[serde(default)]
    pub deny_tools: Vec<String>,
    /// Scopes a caller must hold for every tool of this upstream.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Longest a call may take, in milliseconds; then it is cancelled upstream too. Unset: the
    /// server-wide `tools.default_timeout_secs`.
    pub timeout_ms: Option<u64>,
    /// Most calls to this upstream at once (others wait in a short queue). 32.
    #[serde(default = "default_concurrency")]
    pub concurrency: usize,
    /// A per-client rate for each of this upstream's tools (`{ per_minute, burst, cost }`,
    /// as `[limits.tools.<name>]`, which still overrides it for one tool).
    pub rate_limit: Option<super::limits::ToolLimit>,
    /// Largest message accepted from the upstream, in bytes: a bigger result is refused with a
    /// clear error instead of being buffered. 4 MiB.
    #[serde(default = "default_max_message_bytes")]
    pub max_message_bytes: usize,
    /// Most JSON values one message from the upstream may decode to (every object, array,
    /// key, string, number, boolean and null counts one): what a message may cost in memory
    /// whatever its size in bytes (a few bytes of `{}` decode to far more). 200,000.
    #[serde(default = "default_max_message_values")]
    pub max_message_values: usize,
    /// Milliseconds to connect and complete the MCP handshake. 10,000.
    #[serde(default = "default_connect_timeout_ms")]
    pub connect_timeout_ms: u64,
    /// Headers sent with every request to a `url` upstream: the upstream's own credential,
    /// read from the server's environment or a file, never from the caller.
    #[serde(default)]
    pub headers: BTreeMap<String, HeaderSource>,
    /// Per-tool changes, by the upstream's tool name.
    #[serde(default)]
    pub tools: BTreeMap<String, ToolOverride>,
    /// Which of its tools, resources and prompts serve before an operator approved them
    /// (`src/approval`): `pin` (the default: its first listing is approved, every later new or
    /// changed entry waits), `approve` (every new or changed entry waits, the first listing
    /// too) or `off` (whatever it lists serves at once).
    #[serde(default)]
    pub approval: Approval,
    /// OAuth credentials for a `url` upstream: toolgate's own (client credentials), or the
    /// caller's, exchanged for a token meant for the upstream (RFC 8693). Never the caller's
    /// token itself.
    pub oauth: Option<OAuthSettings>,
}

/// `oauth = { … }`: how toolgate gets tokens for an upstream from an authorization server.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthSettings {
    /// `client_credentials`: every call as toolgate itself. `token_exchange`: every call as its
    /// caller, with the caller's token exchanged for one whose audience is the upstream; the
    /// tool list is read with client credentials (or with no token: `discovery = "none"`).
    /// `user`: every call with the caller's own account at the upstream, which each user
    /// connects once in the browser (URL-mode elicitation; tokens kept in the `[vault]`).
    pub grant: Grant,
    /// The authorization server's token endpoint. Required but for `user`, which reads it
    /// from the authorization server's metadata.
    pub token_url: Option<String>,
    /// toolgate's client id at the authorization server. Required but for `user`, where
    /// unset means a Client ID Metadata Document toolgate serves about itself (when the
    /// server supports them) or dynamic registration (RFC 7591).
    pub client_id: Option<String>,
    /// toolgate's client secret at the authorization server.
    pub client_secret: Option<HeaderSource>,
    /// The `audience` parameter: the upstream as the authorization server names it.
    pub audience: Option<String>,
    /// The `resource` parameter (RFC 8707): the upstream's URL, when the server uses it.
    /// `user` always sends one: this, or the upstream's `url`.
    pub resource: Option<String>,
    #[serde(default)]
    pub scopes: Vec<String>,
    /// `token_exchange` and `user`: how the upstream's tools are listed (no caller is there
    /// then).
    #[serde(default)]
    pub discovery: Discovery,
    /// `user`: the upstream's authorization server (its issuer). Unset: found the way MCP
    /// clients find it, from the upstream's 401 (RFC 9728 protected-resource metadata).
    pub authorization_server: Option<String>,
    /// `user`: `host:port`s of the authorization server on a loopback or private network
    /// that toolgate may reach (everything else it fetches must be public).
    #[serde(default)]
    pub private_hosts: Vec<String>,
    /// `user`: what a user who has not connected their account sees in `tools/list`:
    /// `list` (the default: the tools; a call asks them to connect) or `hide`.
    #[serde(default)]
    pub unconnected: Unconnected,
}

/// `unconnected = "list" | "hide"`: see [`OAuthSettings::unconnected`].
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Unconnected {
    #[default]
    List,
    Hide,
}

/// `approval = "pin" | "approve" | "off"`: see [`UpstreamSettings::approval`].
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Approval {
    #[default]
    Pin,
    Approve,
    Off,
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Grant {
    ClientCredentials,
    TokenExchange,
    User,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Discovery {
    #[default]
    ClientCredentials,
    None,
}

fn default_concurrency() -> usize {
    32
}

fn default_max_message_bytes() -> usize {
    4 * 1024 * 1024
}

fn default_max_message_values() -> usize {
    200_000
}

fn default_connect_timeout_ms() -> u64 {
    10_000
}

#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum HttpTransport {
    #[default]
    Auto,
    StreamableHttp,
    Sse,
}

/// `protocol = …`: how the revision an upstream speaks is chosen.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
pub enum UpstreamProtocol {
    #[default]
    #[serde(rename = "auto")]
    Auto,
    #[serde(rename = "legacy")]
    Legacy,
    #[serde(rename = "2026-07-28")]
    Modern,
}

/// `stdio = { … }`: the same rules as a `command` tool's program (no shell, an empty
/// environment but for the allow-list, its own process group).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StdioSettings {
    /// An absolute path, or a bare name looked up on the server's `PATH`; checked against
    /// `tools.command.allowed_programs`.
    pub program: String,
    #[serde(default)]
    pub args: Vec<String>,
    pub working_dir: Option<PathBuf>,
    /// Server environment variables the child sees (`["PATH", "HOME"]`).
    #[serde(default)]
    pub env_passthrough: Vec<String>,
    /// Fixed environment variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// Where a header's value comes from.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HeaderSource {
    /// An environment variable of the server holding the whole value.
    pub env: Option<String>,
    /// A file holding the whole value (trailing newline removed).
    pub file: Option<PathBuf>,
    /// Put before the value (`"Bearer "`).
    #[serde(default)]
    pub prefix: String,
}

impl HeaderSource {
    /// The value: the environment variable's, or the file's without its trailing newline.
    pub fn read(&self) -> Result<String, String> {
        match (&self.env, &self.file) {
            (Some(var), _) => std::env::var(var).map_err(|_| format!("the environment variable {var} is not set")),
            (None, Some(path)) => std::fs::read_to_string(path)
                .map(|s| s.trim_end_matches(['\r', '\n']).to_owned())
                .map_err(|e| format!("cannot read {}: {e}", path.display())),
            (None, None) => Err("give `env` or `file`".into()),
        }
    }
}

/// Changes to one upstream tool as served here.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ToolOverride {
    /// The whole name served (no prefix is added). If another upstream or source already
    /// serves it, it keeps it and this tool is skipped with the reason.
    pub name: Option<String>,
    pub title: Option<String>,
    pub description: Option<String>,
    pub read_only_hint: Option<bool>,
    pub destructive_hint: Option<bool>,
    pub idempotent_hint: Option<bool>,
    pub open_world_hint: Option<bool>,
    /// Scopes besides the upstream's own `scopes`.
    #[serde(default)]
    pub scopes: Vec<String>,
    pub timeout_ms: Option<u64>,
    /// Most calls of this tool at once.
    pub concurrency: Option<usize>,
    /// This tool's own per-client rate, instead of the upstream's `rate_limit`.
    pub rate_limit: Option<super::limits::ToolLimit>,
}

impl UpstreamSettings {
    /// The name prefix of this upstream's tools.
    pub fn prefix_for(&self, name: &str) -> String {
        self.prefix.clone().unwrap_or_else(|| format!("{name}_"))
    }

    /// Checks one upstream's settings; `Err((key, reason))` names what to change.
    pub fn validate(&self, name: &str) -> Result<(), (String, String)> {
        let key = |field: &str| format!("upstreams.{name}.{field}");
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-')) {
            return Err((format!("upstreams.{name}"), "an upstream's name uses only A-Z, a-z, 0-9, '_' and '-'".into()));
        }
        match (&self.stdio, &self.url) {
            (Some(_), Some(_)) => return Err((key("url"), "give either `stdio` or `url`, not both".into())),
            (None, None) => return Err((key("url"), "give `url` (a Streamable HTTP endpoint) or `stdio` (a program to run)".into())),
            (None, Some(url)) => match url::Url::parse(url) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
                _ => return Err((key("url"), format!("{url:?} is not an http:// or https:// URL"))),
            },
            (Some(stdio), None) if !self.headers.is_empty() => {
                let _ = stdio;
                return Err((key("headers"), "headers apply to `url` upstreams only".into()));
            }
            (Some(_), None) => {}
        }
        if self.protocol == UpstreamProtocol::Modern && (self.stdio.is_some() || self.transport == HttpTransport::Sse) {
            return Err((key("protocol"), "\"2026-07-28\" applies to Streamable HTTP `url` upstreams only; use \"auto\"".into()));
        }
        if self.concurrency == 0 {
            return Err((key("concurrency"), "must be at least 1".into()));
        }
        if self.max_message_bytes < 1024 {
            return Err((key("max_message_bytes"), "must be at least 1024".into()));
        }
        if self.max_message_values < 1024 {
            return Err((key("max_message_values"), "must be at least 1024".into()));
        }
        if self.timeout_ms == Some(0) || self.connect_timeout_ms == 0 {
            return Err((key("timeout_ms"), "timeout_ms and connect_timeout_ms must be at least 1".into()));
        }
        if let Some(oauth) = &self.oauth {
            if self.url.is_none() {
                return Err((key("oauth"), "OAuth applies to `url` upstreams only".into()));
            }
            if self.headers.keys().any(|h| h.eq_ignore_ascii_case("authorization")) {
                return Err((key("headers"), "an Authorization header and `oauth` cannot both set the upstream's credential".into()));
            }
            oauth.validate(&key)?;
            if let Some(secret) = &oauth.client_secret
                && secret.env.is_some() == secret.file.is_some()
            {
                return Err((key("oauth.client_secret"), "give exactly one of `env` or `file`".into()));
            }
        }
        for (header, source) in &self.headers {
            if http::HeaderName::from_bytes(header.as_bytes()).is_err() {
                return Err((key("headers"), format!("{header:?} is not a valid header name")));
            }
            if source.env.is_some() == source.file.is_some() {
                return Err((key(&format!("headers.{header}")), "give exactly one of `env` or `file`".into()));
            }
        }
        Ok(())
    }
}

impl OAuthSettings {
    fn validate(&self, key: &dyn Fn(&str) -> String) -> Result<(), (String, String)> {
        let user = self.grant == Grant::User;
        match &self.token_url {
            None if user => {}
            None => return Err((key("oauth.token_url"), "give the authorization server's token endpoint".into())),
            Some(url) => check_endpoint(url).map_err(|reason| (key("oauth.token_url"), reason))?,
        }
        match &self.client_id {
            None if user => {}
            Some(id) if !id.is_empty() && id.len() <= 512 => {}
            _ => return Err((key("oauth.client_id"), "give toolgate's client id at the authorization server".into())),
        }
        if let Some(issuer) = &self.authorization_server {
            check_endpoint(issuer).map_err(|reason| (key("oauth.authorization_server"), reason))?;
        }
        if !user && (self.authorization_server.is_some() || !self.private_hosts.is_empty() || self.unconnected != Unconnected::List) {
            return Err((key("oauth.grant"), "authorization_server, private_hosts and unconnected apply to grant = \"user\" only".into()));
        }
        if let Some(resource) = &self.resource
            && url::Url::parse(resource).is_err()
        {
            return Err((key("oauth.resource"), format!("{resource:?} is not an absolute URL")));
        }
        if let Some(scope) =
            self.scopes.iter().find(|s| s.is_empty() || !s.bytes().all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\'))
        {
            return Err((key("oauth.scopes"), format!("{scope:?} is not a scope (RFC 6749 characters, no spaces)")));
        }
        if let Some(host) = self.private_hosts.iter().find(|h| !h.contains(':')) {
            return Err((key("oauth.private_hosts"), format!("{host:?}: give host:port")));
        }
        Ok(())
    }
}

/// An authorization server's URL: https, or http on loopback.
fn check_endpoint(url: &str) -> Result<(), String> {
    match url::Url::parse(url) {
        Ok(u) if u.scheme() == "https" || (u.scheme() == "http" && is_loopback(&u)) => Ok(()),
        _ => Err("must be an https:// URL (http:// only on loopback)".into()),
    }
}

fn is_loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}
