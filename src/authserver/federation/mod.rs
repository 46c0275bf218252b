//! toolgate as the identity provider's relying party (spec §4): the authorization code flow
//! with PKCE S256 and a nonce through the `openidconnect` crate, the ID token's checks, the
//! presets' quirks and the scope rules. A core service: no HTTP server types.
//!
//! - [`provider`]: discovery and the provider's keys, cached and refreshed; the HTTP client.
//! - [`id_token`]: how the ID token is verified.
//! - [`presets`]: what each known provider does differently.
//! - [`rules`]: claims to scopes, groups and display text.

mod id_token;
mod presets;
mod provider;
mod rules;

use std::time::Duration;

use openidconnect::core::{CoreAuthenticationFlow, CoreClient, CoreClientAuthMethod, CoreTokenResponse};
use openidconnect::{
    AuthType, AuthorizationCode, ClientId, ClientSecret, CsrfToken, EndpointMaybeSet, EndpointNotSet, EndpointSet, Nonce,
    PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, RequestTokenError, Scope, TokenResponse,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use self::id_token::{Expected, Failure};
use self::provider::{Discovered, Discovery};
use super::Identity;
use crate::config::authserver::{IdentityProviderSettings, Preset, ScopeRule};

/// What must be kept between the redirect to the provider and its callback (server-side, in
/// the transaction): never sent to the browser.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PendingLogin {
    /// The provider the browser was sent to (FED-04: the callback is accepted only from it).
    pub issuer: String,
    pub nonce: String,
    pub pkce_verifier: String,
}

#[derive(Debug, thiserror::Error)]
pub enum FederationError {
    /// The provider could not be reached or answered nonsense (503 for the user, logged).
    #[error("the identity provider is unavailable: {0}")]
    Unavailable(String),
    /// The sign-in failed a check (ID token, issuer, nonce, tenant, domain): 403 page.
    #[error("sign-in refused: {0}")]
    Refused(String),
}

/// Parameters toolgate sets itself, or must never send: `resource` is refused by Entra ID
/// (AADSTS901002) and means nothing at sign-in.
const RESERVED_PARAMS: [&str; 10] = [
    "resource",
    "client_id",
    "redirect_uri",
    "response_type",
    "response_mode",
    "scope",
    "state",
    "nonce",
    "code_challenge",
    "code_challenge_method",
];

type ProviderClient = CoreClient<EndpointSet, EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointMaybeSet, EndpointMaybeSet>;

pub struct IdentityProvider {
    settings: IdentityProviderSettings,
    rules: Vec<ScopeRule>,
    redirect_uri: RedirectUrl,
    scopes: Vec<String>,
    groups_claims: Vec<String>,
    http: reqwest::Client,
    discovery: Discovery,
}

impl IdentityProvider {
    /// `redirect_uri` is `<issuer>/oauth/callback`; discovery happens on first use and is
    /// cached (refreshed when a key is unknown). `_http` is not used: the provider gets its
    /// own client, which never follows redirects (see [`provider::http_client`]).
    pub fn new(
        settings: IdentityProviderSettings,
        rules: Vec<ScopeRule>,
        redirect_uri: String,
        _http: reqwest::Client,
    ) -> Result<Self, String> {
        if let Some(name) = settings.extra_params.keys().find(|k| RESERVED_PARAMS.contains(&k.to_ascii_lowercase().as_str())) {
            return Err(format!("identity_provider.extra_params: {name:?} is set by toolgate or must not be sent"));
        }
        let redirect_uri = RedirectUrl::new(redirect_uri).map_err(|e| format!("the callback URL is not a URL: {e}"))?;
        let http = provider::http_client()?;
        Ok(Self {
            scopes: presets::sign_in_scopes(&settings),
            groups_claims: presets::groups_claims(&settings),
            discovery: Discovery::new(http.clone(), settings.clone()),
            settings,
            rules,
            redirect_uri,
            http,
        })
    }

    /// The configured issuer of the provider.
    pub fn issuer(&self) -> &str {
        &self.settings.issuer
    }

    /// Discovers the provider now (for readiness); a failure is retried at the next call.
    pub async fn check(&self) -> Result<(), FederationError> {
        self.discovery.get().await.map(|_| ())
    }

    /// The URL to send the browser to, with `state`, and what the callback needs.
    pub async fn begin(&self, state: &str) -> Result<(String, PendingLogin), FederationError> {
        let discovered = self.discovery.get().await?;
        let client = self.client(&discovered);
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let nonce = Nonce::new_random();
        let (state, sent_nonce) = (CsrfToken::new(state.to_owned()), nonce.clone());
        let mut request = client
            .authorize_url(CoreAuthenticationFlow::AuthorizationCode, move || state, move || sent_nonce)
            .set_pkce_challenge(challenge);
        // openidconnect asks for `openid` itself.
        for scope in self.scopes.iter().filter(|s| *s != "openid") {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        for (name, value) in &self.settings.extra_params {
            request = request.add_extra_param(name.clone(), value.clone());
        }
        let (url, _, _) = request.url();
        let pending =
            PendingLogin { issuer: self.settings.issuer.clone(), nonce: nonce.secret().clone(), pkce_verifier: verifier.secret().clone() };
        Ok((url.to_string(), pending))
    }

    /// Redeems the provider's code, verifies the ID token, applies the tenant and domain
    /// rules and the scope rules. `iss` is the callback's `iss` parameter (RFC 9207), if any.
    pub async fn complete(&self, pending: &PendingLogin, code: &str, iss: Option<&str>) -> Result<Identity, FederationError> {
        if pending.issuer != self.settings.issuer {
            return Err(refused("the sign-in was started at another identity provider"));
        }
        let discovered = self.discovery.get().await?;
        check_iss_parameter(&discovered, iss)?;
        let response = self.redeem(&discovered, pending, code).await?;
        let raw = response.id_token().ok_or_else(|| refused("the provider's token response has no ID token"))?.to_string();
        let claims = self.verified_claims(discovered.clone(), &raw, &Nonce::new(pending.nonce.clone())).await?;
        let identity = self.identity(&claims, &discovered.issuer_policy)?;
        tracing::info!(issuer = %identity.issuer, subject = %identity.subject, scopes = identity.scopes.len(), "identity provider sign-in");
        Ok(identity)
    }

    fn client(&self, discovered: &Discovered) -> ProviderClient {
        let secret = self.settings.client_secret.as_ref().map(|s| ClientSecret::new(s.expose().to_owned()));
        let client =
            CoreClient::from_provider_metadata(discovered.metadata.clone(), ClientId::new(self.settings.client_id.clone()), secret)
                .set_redirect_uri(self.redirect_uri.clone());
        // Basic is the default (RFC 8414 §2); the body only when the provider offers that alone.
        let methods = discovered.metadata.token_endpoint_auth_methods_supported();
        let post_only = methods
            .is_some_and(|m| m.contains(&CoreClientAuthMethod::ClientSecretPost) && !m.contains(&CoreClientAuthMethod::ClientSecretBasic));
        if post_only { client.set_auth_type(AuthType::RequestBody) } else { client }
    }

    async fn redeem(&self, discovered: &Discovered, pending: &PendingLogin, code: &str) -> Result<CoreTokenResponse, FederationError> {
        let client = self.client(discovered);
        let request = client
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .map_err(|e| FederationError::Unavailable(format!("the provider has no token endpoint: {e}")))?
            .set_pkce_verifier(PkceCodeVerifier::new(pending.pkce_verifier.clone()));
        let http = self.http.clone();
        let send = move |request| provider::send(http.clone(), request);
        request.request_async(&send).await.map_err(|e| match e {
            RequestTokenError::ServerResponse(r) => refused(&format!("the provider refused the code: {}", r.error())),
            // Only where it broke: serde's message can quote the response, which holds tokens.
            RequestTokenError::Parse(e, _) => refused(&format!("the provider's token response is unusable at {}", e.path())),
            RequestTokenError::Request(e) => FederationError::Unavailable(format!("the token endpoint could not be reached: {e}")),
            RequestTokenError::Other(e) => FederationError::Unavailable(format!("the token request failed: {e}")),
        })
    }

    /// The ID token's claims, verified; a key the cache lacks makes one refetch of the keys.
    async fn verified_claims(&self, discovered: std::sync::Arc<Discovered>, raw: &str, nonce: &Nonce) -> Result<Value, FederationError> {
        let expected = Expected { client_id: &self.settings.client_id, nonce, leeway: Duration::from_secs(self.settings.leeway_secs) };
        match id_token::verify(raw, &discovered, &expected) {
            Err(Failure::UnknownKey) => {}
            other => return other.map_err(failure),
        }
        let Some(fresh) = self.discovery.refetch_for_unknown_key(&discovered).await? else {
            return Err(refused("the ID token is signed with a key the provider does not publish"));
        };
        id_token::verify(raw, &fresh, &expected).map_err(failure)
    }

    fn identity(&self, claims: &Value, issuers: &presets::IssuerPolicy) -> Result<Identity, FederationError> {
        let text = |name: &str| claims.get(name).and_then(Value::as_str);
        let tid = text("tid");
        let iss = text("iss").unwrap_or_default();
        let issuer = issuers.accept(iss, tid).ok_or_else(|| refused("the ID token's issuer or tenant is not accepted"))?;
        let subject =
            text("sub").filter(|s| !s.is_empty() && s.len() <= rules::MAX_TEXT).ok_or_else(|| refused("the ID token's sub is unusable"))?;
        let entra = self.settings.preset == Preset::EntraId;
        let email = rules::verified_email(claims, entra);
        self.check_domain(claims, email.as_deref())?;
        Ok(Identity {
            issuer,
            subject: subject.to_owned(),
            // Only a verified email is kept: an unverified one could name anybody.
            email,
            name: rules::display_text(claims, "name"),
            tenant: if entra { tid.map(str::to_owned) } else { None },
            groups: rules::groups(claims, &self.groups_claims),
            scopes: rules::scopes(&self.rules, claims),
        })
    }

    /// `email_domains`: a verified email in one of them; for Google, the Workspace domain
    /// (`hd`), which a consumer account lacks.
    fn check_domain(&self, claims: &Value, verified_email: Option<&str>) -> Result<(), FederationError> {
        let allowed = &self.settings.email_domains;
        if allowed.is_empty() {
            return Ok(());
        }
        let in_list = |domain: &str| allowed.iter().any(|a| a.eq_ignore_ascii_case(domain));
        let email_ok = verified_email.and_then(rules::email_domain).is_some_and(|d| in_list(&d));
        let hd_ok = self.settings.preset != Preset::Google || claims.get("hd").and_then(Value::as_str).is_some_and(in_list);
        if email_ok && hd_ok { Ok(()) } else { Err(refused("the account's verified email is not in an allowed domain")) }
    }
}

/// RFC 9207 (FED-04, mix-up): a provider that promises `iss` must send it; a present `iss`
/// must name this provider either way.
fn check_iss_parameter(discovered: &Discovered, iss: Option<&str>) -> Result<(), FederationError> {
    match iss {
        None if discovered.iss_parameter => Err(refused("the callback lacks the iss parameter the provider promises")),
        Some(iss) if !discovered.issuer_policy.accepts_parameter(iss) => Err(refused("the callback's iss names another provider")),
        _ => Ok(()),
    }
}

fn failure(failure: Failure) -> FederationError {
    match failure {
        Failure::Refused(reason) => FederationError::Refused(reason),
        Failure::UnknownKey => refused("the ID token is signed with a key the provider does not publish"),
    }
}

fn refused(reason: &str) -> FederationError {
    tracing::warn!(reason, "identity provider sign-in refused");
    FederationError::Refused(reason.to_owned())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn provider(preset: Preset, domains: &[&str], extra: &[(&str, &str)]) -> Result<IdentityProvider, String> {
        let settings = IdentityProviderSettings {
            preset,
            issuer: "https://accounts.google.com".into(),
            client_id: "tg".into(),
            email_domains: domains.iter().map(|d| (*d).to_owned()).collect(),
            extra_params: extra.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            ..Default::default()
        };
        IdentityProvider::new(settings, Vec::new(), "https://mcp.example.com/oauth/callback".into(), reqwest::Client::new())
    }

    #[test]
    fn resource_in_extra_params_is_refused() {
        assert!(provider(Preset::EntraId, &[], &[("Resource", "api://x")]).is_err());
    }

    #[test]
    fn harmless_extra_params_are_accepted() {
        assert!(provider(Preset::Generic, &[], &[("prompt", "select_account")]).is_ok());
    }

    #[test]
    fn google_accepts_a_workspace_account_of_an_allowed_domain() {
        let google = provider(Preset::Google, &["example.com"], &[]).expect("provider");
        assert!(google.check_domain(&json!({"hd": "example.com"}), Some("ada@example.com")).is_ok());
    }

    #[test]
    fn google_refuses_a_consumer_account_without_hd() {
        let google = provider(Preset::Google, &["gmail.com"], &[]).expect("provider");
        assert!(google.check_domain(&json!({}), Some("ada@gmail.com")).is_err());
    }

    #[test]
    fn a_verified_email_outside_the_domains_is_refused() {
        let okta = provider(Preset::Okta, &["example.com"], &[]).expect("provider");
        assert!(okta.check_domain(&json!({}), Some("ada@example.org")).is_err());
    }

    #[test]
    fn no_domains_means_no_domain_check() {
        let okta = provider(Preset::Okta, &[], &[]).expect("provider");
        assert!(okta.check_domain(&json!({}), None).is_ok());
    }
}
