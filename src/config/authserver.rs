//! `[authorization_server]` settings: toolgate's own OAuth 2.1 authorization server for MCP
//! clients, which signs users in at the organization's OpenID Connect provider
//! (`[authorization_server.identity_provider]`) and maps their claims to scopes by rules.
//! Off unless `enabled`; `crate::authserver` is the service, `crate::authserver_http` its
//! endpoints and pages.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::Secret;

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthServerSettings {
    pub enabled: bool,
    /// The issuer identifier: the public origin of this server (`https://mcp.example.com`),
    /// byte for byte what the metadata, the `iss` response parameter and the tokens carry.
    /// https, or http on a loopback host.
    pub issuer: Option<String>,
    /// PEM files of EC P-256 private keys (PKCS#8), made with `toolgate keygen`. The first
    /// signs; all are published at the JWKS path, so a new key is added second, published
    /// for a token lifetime, then moved first (rotation without downtime).
    pub signing_key_files: Vec<PathBuf>,
    /// The same as PEM text (from a secret), used when no file is given.
    pub signing_keys: Vec<Secret>,
    pub access_token_ttl_secs: u64,
    /// A refresh token unused this long expires (inactivity).
    pub refresh_idle_secs: u64,
    /// A grant (sign-in) ends this long after the user signed in, refreshes or not.
    pub grant_max_secs: u64,
    pub code_ttl_secs: u64,
    /// How long a user has to sign in and consent.
    pub transaction_ttl_secs: u64,
    /// `remember`: consent is remembered per user and client, and asked again when the
    /// scopes grow or the client's metadata changes (never for an authorization request that a
    /// cross-site page started). `always`: asked every time.
    pub consent: ConsentMode,
    /// Requests per minute per client address on each endpoint (authorize, token, register,
    /// revoke, callback, consent).
    pub requests_per_minute: u32,
    /// Private-use redirect schemes accepted for native clients, as `scheme://host` (e.g.
    /// `cursor://anysphere.cursor-mcp`); https and loopback http need no entry.
    pub redirect_schemes: Vec<String>,
    pub identity_provider: IdentityProviderSettings,
    /// Which scopes a signed-in user is granted: every rule whose claim matches adds its
    /// scopes. A client's request can only narrow them.
    pub scope_rules: Vec<ScopeRule>,
    pub registration: RegistrationSettings,
    pub metadata_documents: MetadataDocumentSettings,
    /// Clients known in advance (`[[authorization_server.clients]]`).
    pub clients: Vec<ClientSettings>,
}

impl Default for AuthServerSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            issuer: None,
            signing_key_files: Vec::new(),
            signing_keys: Vec::new(),
            access_token_ttl_secs: 600,
            refresh_idle_secs: 12 * 3600,
            // A sign-in is not re-checked at the identity provider while it lasts: a user
            // removed there keeps access until it ends (or an operator revokes it).
            grant_max_secs: 86_400,
            code_ttl_secs: 60,
            transaction_ttl_secs: 600,
            consent: ConsentMode::Remember,
            requests_per_minute: 60,
            redirect_schemes: Vec::new(),
            identity_provider: IdentityProviderSettings::default(),
            scope_rules: Vec::new(),
            registration: RegistrationSettings::default(),
            metadata_documents: MetadataDocumentSettings::default(),
            clients: Vec::new(),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ConsentMode {
    #[default]
    Remember,
    Always,
}

/// The organization's OpenID Connect provider; toolgate is one confidential client there,
/// with the redirect URI `<issuer>/oauth/callback`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct IdentityProviderSettings {
    /// Known quirks: `generic`, `entra-id`, `okta`, `google`, `keycloak`, `auth0`.
    pub preset: Preset,
    /// Its issuer; its metadata is discovered from `<issuer>/.well-known/openid-configuration`.
    /// For Entra ID multi-tenant apps: `https://login.microsoftonline.com/organizations/v2.0`.
    pub issuer: String,
    pub client_id: String,
    pub client_secret: Option<Secret>,
    /// Scopes asked for at sign-in; default `openid email profile`. Never API scopes.
    pub scopes: Vec<String>,
    /// Extra authorization request parameters (e.g. `prompt = "select_account"`).
    pub extra_params: BTreeMap<String, String>,
    /// Entra ID multi-tenant: the tenant ids allowed to sign in (required with a
    /// `common`/`organizations` issuer).
    pub tenants: Vec<String>,
    /// Only users whose `email` (verified) is in one of these domains sign in; Google
    /// (any Google account can sign in otherwise) requires it.
    pub email_domains: Vec<String>,
    /// The claim holding groups or roles for `scope_rules` (default: the preset's).
    pub groups_claim: Option<String>,
    /// Allowed clock skew for the ID token's `exp`/`iat`, in seconds.
    pub leeway_secs: u64,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    #[default]
    Generic,
    EntraId,
    Okta,
    Google,
    Keycloak,
    Auth0,
}

/// A rule: users whose `claim` holds one of `values` (a string claim equal to one, or a list
/// claim containing one) get `scopes`. Without `claim`, every signed-in user does.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ScopeRule {
    pub claim: Option<String>,
    #[serde(default)]
    pub values: Vec<String>,
    pub scopes: Vec<String>,
}

/// Dynamic client registration (RFC 7591), for clients that cannot use a metadata document.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct RegistrationSettings {
    pub mode: RegistrationMode,
    /// With `mode = "token"`: the bearer token a registration must carry.
    pub initial_access_token: Option<Secret>,
    /// Registrations per hour per client address.
    pub per_hour: u32,
    /// A registered client never used for a sign-in is deleted after this many seconds; one
    /// unused since its last sign-in after `unused_secs` too.
    pub unused_secs: u64,
    pub max_redirect_uris: usize,
}

impl Default for RegistrationSettings {
    fn default() -> Self {
        Self { mode: RegistrationMode::Open, initial_access_token: None, per_hour: 20, unused_secs: 30 * 86_400, max_redirect_uris: 10 }
    }
}

#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RegistrationMode {
    Off,
    #[default]
    Open,
    Token,
}

/// Client ID Metadata Documents: an `https` client id is fetched and its document names the
/// client and its redirect URIs.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetadataDocumentSettings {
    pub enabled: bool,
    /// Hosts whose documents are accepted; `*` any host.
    pub hosts: Vec<String>,
    /// Hosts (`host` or `host:port`) fetched even though they resolve to private or loopback
    /// addresses; for a client's document served inside the network. Empty by default.
    pub private_hosts: Vec<String>,
    /// Extra CA certificates (PEM) trusted for fetching documents, besides the system's.
    pub ca_file: Option<PathBuf>,
    pub max_bytes: usize,
    pub timeout_ms: u64,
    /// Documents are cached as their `Cache-Control` says, within these bounds.
    pub min_cache_secs: u64,
    pub max_cache_secs: u64,
}

impl Default for MetadataDocumentSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            hosts: vec!["*".into()],
            private_hosts: Vec::new(),
            ca_file: None,
            max_bytes: 5 * 1024,
            timeout_ms: 5_000,
            min_cache_secs: 60,
            max_cache_secs: 86_400,
        }
    }
}

/// A client registered in the settings.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClientSettings {
    /// Must not start with `https://` (that form is a metadata document's URL).
    pub client_id: String,
    pub client_name: String,
    pub redirect_uris: Vec<String>,
    /// A confidential client's secret (`client_secret_basic` or `client_secret_post`); none:
    /// a public client with PKCE.
    pub client_secret: Option<Secret>,
    /// Upper bound of the scopes it may get; empty: no bound beyond the user's.
    #[serde(default)]
    pub scopes: Vec<String>,
}

impl AuthServerSettings {
    /// Checks the combination; `Err((key, reason))` names the setting to fix.
    pub fn validate(&self) -> Result<(), (String, String)> {
        if !self.enabled {
            return Ok(());
        }
        let fail = |key: &str, reason: String| Err((format!("authorization_server.{key}"), reason));
        let Some(issuer) = &self.issuer else {
            return fail("issuer", "is required when enabled: the public origin of this server, e.g. https://mcp.example.com".into());
        };
        if let Err(reason) = check_issuer(issuer) {
            return fail("issuer", reason);
        }
        if self.signing_key_files.is_empty() && self.signing_keys.is_empty() {
            return fail(
                "signing_key_files",
                "name at least one signing key (make one with `toolgate keygen --out <file>`); keys are never generated silently".into(),
            );
        }
        if self.access_token_ttl_secs < 30 || self.access_token_ttl_secs > 3600 {
            return fail("access_token_ttl_secs", "must be between 30 and 3600 (short-lived access tokens)".into());
        }
        if self.code_ttl_secs < 10 || self.code_ttl_secs > 600 {
            return fail("code_ttl_secs", "must be between 10 and 600".into());
        }
        if self.transaction_ttl_secs < 60 || self.transaction_ttl_secs > 3600 {
            return fail("transaction_ttl_secs", "must be between 60 and 3600".into());
        }
        if self.refresh_idle_secs < 60 || self.grant_max_secs < self.refresh_idle_secs {
            return fail("refresh_idle_secs", "must be at least 60 and at most grant_max_secs".into());
        }
        if self.requests_per_minute == 0 {
            return fail("requests_per_minute", "must be at least 1".into());
        }
        for scheme in &self.redirect_schemes {
            check_private_scheme(scheme).or_else(|reason| fail("redirect_schemes", reason))?;
        }
        self.identity_provider.validate().or_else(|(key, reason)| fail(&format!("identity_provider.{key}"), reason))?;
        if self.scope_rules.is_empty() {
            return fail(
                "scope_rules",
                "add at least one rule saying which signed-in users get which scopes, e.g. [[authorization_server.scope_rules]] scopes = [\"mcp:tools\"] for everyone".into(),
            );
        }
        for (i, rule) in self.scope_rules.iter().enumerate() {
            if rule.scopes.is_empty() || (rule.claim.is_some() && rule.values.is_empty()) {
                return fail(&format!("scope_rules[{i}]"), "needs scopes, and values when it names a claim".into());
            }
        }
        if self.registration.mode == RegistrationMode::Token
            && self.registration.initial_access_token.as_ref().is_none_or(|t| t.expose().len() < 16)
        {
            return fail(
                "registration.initial_access_token",
                "is required (at least 16 characters) with registration.mode = \"token\"".into(),
            );
        }
        if self.registration.per_hour == 0 || self.registration.max_redirect_uris == 0 {
            return fail("registration", "per_hour and max_redirect_uris must be at least 1".into());
        }
        let docs = &self.metadata_documents;
        if docs.max_bytes < 512 || docs.max_bytes > 64 * 1024 || docs.timeout_ms < 100 || docs.min_cache_secs > docs.max_cache_secs {
            return fail(
                "metadata_documents",
                "max_bytes must be 512..=65536, timeout_ms at least 100, min_cache_secs at most max_cache_secs".into(),
            );
        }
        for (i, client) in self.clients.iter().enumerate() {
            if client.client_id.is_empty() || client.client_id.starts_with("https://") || client.redirect_uris.is_empty() {
                return fail(
                    &format!("clients[{i}]"),
                    "needs a client_id that does not start with https:// (that form is a metadata document) and at least one redirect URI"
                        .into(),
                );
            }
        }
        Ok(())
    }
}

impl IdentityProviderSettings {
    fn validate(&self) -> Result<(), (String, String)> {
        let fail = |key: &str, reason: &str| Err((key.to_owned(), reason.to_owned()));
        if self.issuer.is_empty() {
            return fail("issuer", "is required: the identity provider's issuer URL");
        }
        if check_issuer_like(&self.issuer).is_err() {
            return fail("issuer", "must be an https URL (http only on a loopback host)");
        }
        if self.client_id.is_empty() {
            return fail("client_id", "is required: toolgate's client id at the identity provider");
        }
        let multi_tenant = ["/common/", "/organizations/", "/consumers/"].iter().any(|t| self.issuer.contains(t));
        if self.preset == Preset::EntraId && multi_tenant && self.tenants.is_empty() {
            return fail("tenants", "list the tenant ids allowed to sign in: a multi-tenant issuer lets any organization's users in");
        }
        if self.preset == Preset::Google && self.email_domains.is_empty() {
            return fail("email_domains", "list your Workspace domains: any Google account can sign in otherwise");
        }
        if self.leeway_secs > 300 {
            return fail("leeway_secs", "must be at most 300");
        }
        Ok(())
    }
}

/// An issuer identifier: https (http on loopback), no query, no fragment, no trailing `/`
/// unless it is the whole path (which is then dropped by the operator: we refuse it so the
/// string stays byte-identical everywhere).
pub fn check_issuer(issuer: &str) -> Result<(), String> {
    let url = check_issuer_like(issuer)?;
    if issuer.ends_with('/') {
        return Err(format!("{issuer:?} ends with '/': write it without, so every place that names the issuer has the same bytes"));
    }
    // ASM-02: a bare origin keeps the discovery list short and the endpoints at the root.
    if url.path() != "/" {
        return Err(format!("{issuer:?} must be an origin without a path, e.g. https://mcp.example.com"));
    }
    if url.as_str().trim_end_matches('/') != issuer {
        return Err(format!(
            "{issuer:?} is not in canonical form (lower-case host, no default port); write {}",
            url.as_str().trim_end_matches('/')
        ));
    }
    Ok(())
}

fn check_issuer_like(issuer: &str) -> Result<url::Url, String> {
    let url = url::Url::parse(issuer).map_err(|e| format!("{issuer:?} is not a URL: {e}"))?;
    let loopback = matches!(url.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"));
    if !(url.scheme() == "https" || url.scheme() == "http" && loopback) {
        return Err(format!("{issuer:?} must be https (http only on a loopback host)"));
    }
    if url.query().is_some() || url.fragment().is_some() || !url.username().is_empty() {
        return Err(format!("{issuer:?} must have no query, fragment or user name"));
    }
    Ok(url)
}

fn check_private_scheme(entry: &str) -> Result<(), String> {
    let Some((scheme, host)) = entry.split_once("://") else {
        return Err(format!("{entry:?} must be scheme://host, e.g. cursor://anysphere.cursor-mcp"));
    };
    let bad = ["http", "https", "javascript", "data", "file", "vbscript", "blob", "about"];
    if scheme.is_empty() || host.is_empty() || host.contains('/') || bad.contains(&scheme.to_ascii_lowercase().as_str()) {
        return Err(format!("{entry:?} must be scheme://host of a private-use scheme (not http, https, javascript, data, file)"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enabled() -> AuthServerSettings {
        AuthServerSettings {
            enabled: true,
            issuer: Some("https://mcp.example.com".into()),
            signing_key_files: vec!["k.pem".into()],
            identity_provider: IdentityProviderSettings {
                issuer: "https://login.example.com".into(),
                client_id: "toolgate".into(),
                ..Default::default()
            },
            scope_rules: vec![ScopeRule { claim: None, values: vec![], scopes: vec!["mcp:tools".into()] }],
            ..Default::default()
        }
    }

    fn key_of(s: &AuthServerSettings) -> String {
        s.validate().expect_err("invalid").0
    }

    #[test]
    fn a_complete_setup_is_valid() {
        assert_eq!(enabled().validate(), Ok(()));
    }

    #[test]
    fn an_issuer_with_a_trailing_slash_is_refused() {
        let mut s = enabled();
        s.issuer = Some("https://mcp.example.com/".into());
        assert_eq!(key_of(&s), "authorization_server.issuer");
    }

    #[test]
    fn a_plain_http_issuer_off_loopback_is_refused() {
        let mut s = enabled();
        s.issuer = Some("http://mcp.example.com".into());
        assert_eq!(key_of(&s), "authorization_server.issuer");
        s.issuer = Some("http://127.0.0.1:8080".into());
        assert_eq!(s.validate(), Ok(()));
    }

    #[test]
    fn no_signing_key_is_refused_rather_than_generated() {
        let mut s = enabled();
        s.signing_key_files.clear();
        assert_eq!(key_of(&s), "authorization_server.signing_key_files");
    }

    #[test]
    fn no_scope_rule_is_refused() {
        let mut s = enabled();
        s.scope_rules.clear();
        assert_eq!(key_of(&s), "authorization_server.scope_rules");
    }

    #[test]
    fn google_without_email_domains_is_refused() {
        let mut s = enabled();
        s.identity_provider.preset = Preset::Google;
        assert_eq!(key_of(&s), "authorization_server.identity_provider.email_domains");
    }

    #[test]
    fn entra_multi_tenant_without_tenants_is_refused() {
        let mut s = enabled();
        s.identity_provider.preset = Preset::EntraId;
        s.identity_provider.issuer = "https://login.microsoftonline.com/organizations/v2.0".into();
        assert_eq!(key_of(&s), "authorization_server.identity_provider.tenants");
    }

    #[test]
    fn a_pre_registered_client_id_in_metadata_document_form_is_refused() {
        let mut s = enabled();
        s.clients.push(ClientSettings {
            client_id: "https://client.example.com/meta".into(),
            client_name: "x".into(),
            redirect_uris: vec!["https://client.example.com/cb".into()],
            client_secret: None,
            scopes: vec![],
        });
        assert_eq!(key_of(&s), "authorization_server.clients[0]");
    }

    #[test]
    fn dangerous_private_schemes_are_refused() {
        for bad in ["javascript://x", "https://x", "cursor", "data://x"] {
            let mut s = enabled();
            s.redirect_schemes = vec![bad.into()];
            assert_eq!(key_of(&s), "authorization_server.redirect_schemes", "{bad}");
        }
    }
}
