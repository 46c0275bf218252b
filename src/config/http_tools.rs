//! `[tools.http]`: what every declarative `http` tool may reach and how it connects.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// `[tools.http]` server settings: what every `http` tool may reach and how it connects.
/// Operator-controlled, so a definition (which the admin API may write) cannot widen them.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpToolSettings {
    /// Hosts (a name or an IP literal, exact and case-insensitive) exempt from the
    /// private-address deny list: loopback, private, link-local (cloud metadata), CGNAT,
    /// multicast, documentation ranges and their IPv6-embedded forms.
    pub allow_hosts: Vec<String>,
    /// Static name → address answers used instead of DNS (still checked against the deny
    /// list unless the name is in `allow_hosts`).
    pub resolve: BTreeMap<String, IpAddr>,
    /// Redirects followed at most; every hop is checked like the first request.
    pub max_redirects: usize,
    /// Time to establish a connection, in milliseconds.
    pub connect_timeout_ms: u64,
    /// Default time for one attempt of a request, in milliseconds.
    pub request_timeout_ms: u64,
    /// Default largest response body, in bytes.
    pub max_response_bytes: u64,
    /// `User-Agent` sent with every request.
    pub user_agent: String,
    /// First retry delay in milliseconds; doubles per retry (with jitter).
    pub retry_base_delay_ms: u64,
    /// Longest `Retry-After` honoured, in seconds; a longer one ends the retries.
    pub max_retry_after_secs: u64,
    /// Environment variables a definition may read secrets from (`NAME` or `PREFIX_*`).
    /// Empty (the default): none. Any definition may name a variable, those from the admin
    /// API included, so without this list one could send an unrelated server secret (say
    /// `DATABASE_URL` or the sessions secret) to a host of its choosing.
    pub secret_env: Vec<String>,
    /// Directories a definition may read secret files from. Empty (the default): none.
    pub secret_dirs: Vec<PathBuf>,
}

impl Default for HttpToolSettings {
    fn default() -> Self {
        Self {
            allow_hosts: Vec::new(),
            resolve: BTreeMap::new(),
            max_redirects: 3,
            connect_timeout_ms: 5_000,
            request_timeout_ms: 30_000,
            max_response_bytes: 1024 * 1024,
            user_agent: concat!("toolgate/", env!("CARGO_PKG_VERSION")).to_owned(),
            retry_base_delay_ms: 250,
            max_retry_after_secs: 10,
            secret_env: Vec::new(),
            secret_dirs: Vec::new(),
        }
    }
}
