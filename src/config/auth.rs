//! `[auth]` settings: whether bearer tokens are required, the canonical resource URI tokens
//! must be issued for, the trusted issuers, and which scopes each kind of request needs.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Secret;

/// How requests are authenticated.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    /// No authentication: only by explicit choice (the conformance configuration uses it).
    Off,
    /// Bearer JWT access tokens from the configured issuers (and opaque tokens by introspection).
    Jwt,
    /// Tokens minted by `toolgate dev-token` with a local key: real bearer-token behaviour on
    /// loopback without an identity provider. The default; refuses non-loopback binds.
    #[default]
    Dev,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthSettings {
    pub mode: AuthMode,
    /// The canonical public URL of the MCP endpoint (e.g. `https://mcp.example.com/mcp`): the
    /// audience tokens must carry (RFC 8707) and the `resource` of the metadata. Configuration,
    /// never derived from a request: behind a load balancer the request does not know it.
    pub resource: Option<String>,
    /// Authorization servers announced in the metadata; default: the issuers below.
    pub authorization_servers: Vec<String>,
    /// A page that documents this server for people (`resource_documentation`).
    pub resource_documentation: Option<String>,
    /// Trusted issuers of JWT access tokens.
    pub issuers: Vec<IssuerSettings>,
    /// Opaque access tokens, checked at the issuer's RFC 7662 introspection endpoint.
    pub introspection: Option<IntrospectionSettings>,
    /// Scopes every MCP request needs (`tools/list`, `tools/call`, …).
    pub required_scopes: Vec<String>,
    /// Extra scopes per MCP method class (`tools`, `resources`, `prompts`, `completion`, …: the
    /// part before the `/`) or per exact method (`tools/call`). Checked after the body is read;
    /// a token without them gets 403 `insufficient_scope` naming them.
    pub method_scopes: BTreeMap<String, Vec<String>>,
    /// Extra scopes per tool name. A caller without them does not see the tool in
    /// `tools/list` and gets "Unknown tool" if it calls it: nothing is revealed.
    pub tool_scopes: BTreeMap<String, Vec<String>>,
    /// How often issuer keys are refreshed in the background.
    pub jwks_refresh_secs: u64,
    /// Dev mode: where the local signing key lives (created on first use, mode 0600).
    pub dev_key_file: std::path::PathBuf,
    /// Dev mode serves on a non-loopback address only when this is true.
    pub dev_allow_public_bind: bool,
}

impl Default for AuthSettings {
    fn default() -> Self {
        Self {
            mode: AuthMode::Dev,
            resource: None,
            authorization_servers: Vec::new(),
            resource_documentation: None,
            issuers: Vec::new(),
            introspection: None,
            required_scopes: vec!["mcp:tools".into()],
            method_scopes: BTreeMap::new(),
            tool_scopes: BTreeMap::new(),
            jwks_refresh_secs: 300,
            dev_key_file: std::path::PathBuf::from(".toolgate/dev-signing.key"),
            dev_allow_public_bind: false,
        }
    }
}

impl AuthSettings {
    /// Checks the combination; the message names the setting to fix.
    pub fn validate(&self) -> Result<(), String> {
        self.validate_with(false)
    }

    /// [`Self::validate`], knowing whether toolgate's own authorization server issues tokens
    /// (then it is a trusted issuer and none need be configured).
    pub fn validate_with(&self, own_issuer: bool) -> Result<(), String> {
        if matches!(self.mode, AuthMode::Off | AuthMode::Dev) {
            return Ok(());
        }
        let resource = self
            .resource
            .as_deref()
            .ok_or("auth.resource is required when auth.mode is not \"off\": set it to the public URL of the MCP endpoint")?;
        let parsed = url::Url::parse(resource).map_err(|e| format!("auth.resource {resource:?} is not a URL: {e}"))?;
        if parsed.fragment().is_some() || !matches!(parsed.scheme(), "https" | "http") {
            return Err(format!("auth.resource {resource:?} must be an http(s) URL without a fragment"));
        }
        if self.issuers.is_empty() && self.introspection.is_none() && !own_issuer {
            return Err(
                "with auth.mode = \"jwt\", configure at least one [[auth.issuers]] (JWT tokens) or [auth.introspection] (opaque tokens)"
                    .into(),
            );
        }
        Ok(())
    }

    /// The authorization servers the metadata lists.
    pub fn announced_servers(&self) -> Vec<String> {
        if !self.authorization_servers.is_empty() {
            return self.authorization_servers.clone();
        }
        let mut servers: Vec<String> = self.issuers.iter().map(|i| i.issuer.clone()).collect();
        if let Some(i) = &self.introspection
            && !servers.contains(&i.issuer)
        {
            servers.push(i.issuer.clone());
        }
        servers
    }

    /// The scopes a method needs beyond `required_scopes`: its class's and its own.
    pub fn scopes_for_method<'a>(&'a self, method: &str) -> impl Iterator<Item = &'a String> + 'a {
        let class = method.split('/').next().unwrap_or(method).to_owned();
        let exact = method.to_owned();
        self.method_scopes.iter().filter(move |(k, _)| **k == class || **k == exact).flat_map(|(_, v)| v.iter())
    }

    /// Every scope this server knows, for `scopes_supported`.
    pub fn scopes_supported(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .required_scopes
            .iter()
            .chain(self.method_scopes.values().flatten())
            .chain(self.tool_scopes.values().flatten())
            .cloned()
            .collect();
        all.sort();
        all.dedup();
        all
    }
}

fn default_leeway() -> u64 {
    30
}

/// One trusted token issuer (`[[auth.issuers]]`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct IssuerSettings {
    /// The exact `iss` value of its tokens (and, without `jwks_uri`, the URL its metadata is
    /// discovered from).
    pub issuer: String,
    /// Where its signing keys are. Unset: discovered from
    /// `/.well-known/oauth-authorization-server`, then `/.well-known/openid-configuration`
    /// (RFC 8414 path insertion for issuers with a path, then OIDC path appending).
    /// https, or http to a loopback host only.
    pub jwks_uri: Option<String>,
    /// Audiences accepted besides the canonical resource URI, e.g. `api://toolgate`.
    #[serde(default)]
    pub audiences: Vec<String>,
    /// Allowed `alg` values. Default: RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384,
    /// EdDSA; with `hmac_secret` set and this empty: HS256, HS384, HS512 only.
    /// HS* may only be listed together with `hmac_secret`; `none` is never allowed.
    #[serde(default)]
    pub algorithms: Vec<String>,
    /// Shared secret for HS256/384/512 tokens (at least 32 bytes). Only with it are HMAC
    /// algorithms accepted for this issuer.
    pub hmac_secret: Option<Secret>,
    /// Allowed clock skew for `exp`, `nbf` and `iat`, in seconds (default 30, at most 300).
    #[serde(default = "default_leeway")]
    pub leeway_secs: u64,
}

/// `[auth.introspection]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct IntrospectionSettings {
    /// The authorization server's introspection endpoint (https; http only on loopback).
    pub endpoint: String,
    /// The issuer the tokens come from: the principal's issuer, and checked against the
    /// response's `iss` when the server sends one.
    pub issuer: String,
    /// toolgate's own client at the authorization server.
    pub client_id: String,
    pub client_secret: Option<Secret>,
    /// `basic` (HTTP Basic, the RFC 6749 default) or `post` (credentials in the form body).
    #[serde(default)]
    pub client_auth: ClientAuth,
    /// Extra accepted audiences besides the canonical resource URI.
    #[serde(default)]
    pub audiences: Vec<String>,
    /// Longest time a result is reused (also bounds how late a revocation is noticed).
    #[serde(default = "default_cache_secs")]
    pub cache_secs: u64,
    #[serde(default = "default_cache_capacity")]
    pub cache_capacity: u64,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ClientAuth {
    #[default]
    Basic,
    Post,
}

fn default_cache_secs() -> u64 {
    60
}

fn default_cache_capacity() -> u64 {
    10_000
}
