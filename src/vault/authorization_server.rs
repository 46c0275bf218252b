//! An upstream's own authorization server, as toolgate's OAuth client sees it (spec §6.4): where
//! it is ([`super::discovery`]), who toolgate is there (a
//! pre-registered client, a Client ID Metadata Document toolgate serves about itself, or a
//! dynamic registration shared by every replica), and the grants: authorization code with
//! PKCE S256 and `resource`, refresh, revocation, client credentials. The grants go through the
//! `oauth2` crate.
//!
//! Every URL here but the upstream's own comes from a document some server wrote, so each
//! fetch is the narrowest that works: the `http` tools' SSRF guard (only `oauth.private_hosts`
//! exempt, and the upstream's own host when `allow_private`), https (http only on an exempt
//! host), no redirects, a short deadline, small bodies.

use std::sync::Arc;
use std::time::{Duration, Instant};

use oauth2::basic::{BasicClient, BasicErrorResponseType};
use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, EndpointNotSet, EndpointSet, PkceCodeChallenge, PkceCodeVerifier,
    RedirectUrl, RefreshToken, RequestTokenError, Scope, TokenResponse, TokenUrl,
};
use serde_json::{Value, json};
use url::Url;

use crate::config::upstreams::OAuthSettings;
use crate::tooldef::http::{AddressPolicy, GuardedResolver};

/// Metadata is fetched again after this long.
pub(super) const METADATA_TTL: Duration = Duration::from_secs(3600);
/// Largest document read from any of these servers.
const MAX_BODY: usize = 64 * 1024;
/// Lifetime assumed when a token response has no `expires_in`.
const ASSUMED_LIFETIME_MS: i64 = 3600 * 1000;

/// What toolgate needs of the authorization server's metadata.
#[derive(Clone, Debug)]
pub struct AsMetadata {
    pub issuer: String,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    pub registration_endpoint: Option<String>,
    pub revocation_endpoint: Option<String>,
    pub metadata_documents: bool,
    /// RFC 9207: the server sends `iss` with its authorization responses.
    pub iss_parameter: bool,
}

/// Who toolgate is at that server.
#[derive(Clone, Debug)]
pub struct ClientIdentity {
    pub client_id: String,
    pub secret: Option<String>,
}

/// Tokens from a grant. Never logged (no `Debug` of the values).
pub struct TokenSet {
    pub access_token: String,
    pub refresh_token: Option<String>,
    pub expires_ms: i64,
    pub scope: String,
}

#[derive(Debug, thiserror::Error)]
pub enum AsError {
    /// The server (or the upstream, in discovery) could not be reached or answered nonsense.
    #[error("{0}")]
    Unavailable(String),
    /// The server refused the grant (`invalid_grant`): the user must connect again.
    #[error("the authorization server refused: {0}")]
    Refused(String),
    /// The server rejected toolgate itself (`invalid_client`, `unauthorized_client`): the
    /// users' grants are not at fault and stay.
    #[error("the authorization server rejected toolgate's client: {0}")]
    ClientRejected(String),
}

type CodeClient = BasicClient<EndpointSet, EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointSet>;

/// One upstream's authorization server.
pub struct UpstreamAuthorization {
    pub upstream: String,
    pub(super) upstream_url: String,
    pub settings: OAuthSettings,
    pub redirect_uri: String,
    /// The Client ID Metadata Document's URL, which is also the client id it names.
    pub metadata_document_url: String,
    pub(super) http: reqwest::Client,
    pub(super) policy: AddressPolicy,
    pub(super) metadata: tokio::sync::Mutex<Option<(Arc<AsMetadata>, Instant)>>,
}

impl std::fmt::Debug for UpstreamAuthorization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamAuthorization").field("upstream", &self.upstream).finish_non_exhaustive()
    }
}

impl UpstreamAuthorization {
    /// `public_origin` is toolgate's own (the authorization server's issuer), where the
    /// callback and the metadata document are.
    pub fn new(
        upstream: &str,
        upstream_url: &str,
        allow_private: bool,
        settings: &OAuthSettings,
        public_origin: &str,
    ) -> Result<Self, String> {
        let mut exempt = settings.private_hosts.clone();
        if allow_private && let Ok(url) = Url::parse(upstream_url) {
            exempt.push(format!("{}:{}", url.host_str().unwrap_or_default(), url.port_or_known_default().unwrap_or(443)));
        }
        let policy = AddressPolicy::new(&exempt, &Default::default());
        let http = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(Arc::new(GuardedResolver::new(policy.clone())))
            .referer(false)
            .timeout(Duration::from_secs(10))
            .connect_timeout(Duration::from_secs(3))
            .user_agent(concat!("toolgate/", env!("CARGO_PKG_VERSION"), " (upstream authorization)"))
            .build()
            .map_err(|e| format!("cannot make the HTTP client: {e}"))?;
        let base = public_origin.trim_end_matches('/');
        Ok(Self {
            upstream: upstream.to_owned(),
            upstream_url: upstream_url.to_owned(),
            settings: settings.clone(),
            redirect_uri: format!("{base}/oauth/vault/callback/{upstream}"),
            metadata_document_url: format!("{base}/oauth/vault/client/{upstream}"),
            http,
            policy,
            metadata: tokio::sync::Mutex::new(None),
        })
    }

    /// The RFC 8707 resource tokens are asked for.
    pub fn resource(&self) -> &str {
        self.settings.resource.as_deref().unwrap_or(&self.upstream_url)
    }

    fn code_client(&self, metadata: &AsMetadata, client: &ClientIdentity) -> Result<CodeClient, AsError> {
        for endpoint in [&metadata.authorization_endpoint, &metadata.token_endpoint] {
            self.check(&Url::parse(endpoint).map_err(|_| unavailable("an endpoint in the metadata is not a URL"))?)?;
        }
        let auth = AuthUrl::new(metadata.authorization_endpoint.clone()).map_err(|_| unavailable("bad authorization_endpoint"))?;
        let token = TokenUrl::new(metadata.token_endpoint.clone()).map_err(|_| unavailable("bad token_endpoint"))?;
        let redirect = RedirectUrl::new(self.redirect_uri.clone()).map_err(|_| unavailable("bad redirect URI"))?;
        let mut built =
            BasicClient::new(ClientId::new(client.client_id.clone())).set_auth_uri(auth).set_token_uri(token).set_redirect_uri(redirect);
        if let Some(secret) = &client.secret {
            built = built.set_client_secret(ClientSecret::new(secret.clone()));
        }
        Ok(built)
    }

    /// Where the browser goes to authorize toolgate, and the PKCE verifier to keep.
    pub fn authorize_url(&self, metadata: &AsMetadata, client: &ClientIdentity, state: &str) -> Result<(String, String), AsError> {
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let state = state.to_owned();
        let code_client = self.code_client(metadata, client)?;
        let mut request = code_client.authorize_url(move || CsrfToken::new(state)).set_pkce_challenge(challenge);
        for scope in &self.settings.scopes {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        let (url, _) = request.add_extra_param("resource", self.resource()).url();
        Ok((url.to_string(), verifier.secret().clone()))
    }

    /// The authorization code for tokens.
    pub async fn exchange(&self, metadata: &AsMetadata, client: &ClientIdentity, code: &str, verifier: &str) -> Result<TokenSet, AsError> {
        let code_client = self.code_client(metadata, client)?;
        let response = code_client
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .set_pkce_verifier(PkceCodeVerifier::new(verifier.to_owned()))
            .add_extra_param("resource", self.resource())
            .request_async(&self.http)
            .await
            .map_err(token_error)?;
        Ok(token_set(&response, None))
    }

    /// A refresh (the new refresh token, or the old one when the server sends none).
    pub async fn refresh(&self, metadata: &AsMetadata, client: &ClientIdentity, refresh_token: &str) -> Result<TokenSet, AsError> {
        let code_client = self.code_client(metadata, client)?;
        let response = code_client
            .exchange_refresh_token(&RefreshToken::new(refresh_token.to_owned()))
            .add_extra_param("resource", self.resource())
            .request_async(&self.http)
            .await
            .map_err(token_error)?;
        Ok(token_set(&response, Some(refresh_token)))
    }

    /// toolgate's own token (client credentials), to list the upstream's tools.
    pub async fn client_credentials(&self, metadata: &AsMetadata, client: &ClientIdentity) -> Result<TokenSet, AsError> {
        let code_client = self.code_client(metadata, client)?;
        let mut request = code_client.exchange_client_credentials();
        for scope in &self.settings.scopes {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        let response = request.add_extra_param("resource", self.resource()).request_async(&self.http).await.map_err(token_error)?;
        Ok(token_set(&response, None))
    }

    /// RFC 7009 at the server, when it offers it; best effort (the vault forgets the tokens
    /// whatever the server says).
    pub async fn revoke(&self, metadata: &AsMetadata, client: &ClientIdentity, token: &str, hint: &str) {
        let Some(endpoint) = metadata.revocation_endpoint.as_deref().and_then(|e| Url::parse(e).ok()) else { return };
        if self.check(&endpoint).is_err() {
            return;
        }
        let mut form = vec![("token", token), ("token_type_hint", hint)];
        let mut request = self.http.post(endpoint);
        match &client.secret {
            Some(secret) => request = request.basic_auth(form_encode(&client.client_id), Some(form_encode(secret))),
            None => form.push(("client_id", &client.client_id)),
        }
        if let Err(e) = request.form(&form).send().await {
            tracing::warn!(upstream = %self.upstream, error = %e, "vault: the upstream's revocation endpoint could not be reached");
        }
    }

    /// RFC 7591 registration of toolgate as a confidential web client; `None` when the server
    /// offers no registration endpoint.
    pub async fn register(&self, metadata: &AsMetadata, client_name: &str) -> Result<Option<ClientIdentity>, AsError> {
        let Some(endpoint) = metadata.registration_endpoint.as_deref() else { return Ok(None) };
        let url = Url::parse(endpoint).map_err(|_| unavailable("bad registration_endpoint"))?;
        self.check(&url)?;
        // Client credentials too when they list the upstream's tools (`discovery`).
        let mut grant_types = vec!["authorization_code", "refresh_token"];
        if self.settings.discovery == crate::config::upstreams::Discovery::ClientCredentials {
            grant_types.push("client_credentials");
        }
        let body = json!({
            "client_name": client_name,
            "redirect_uris": [self.redirect_uri],
            "grant_types": grant_types,
            "response_types": ["code"],
            "token_endpoint_auth_method": "client_secret_basic",
            "application_type": "web",
        });
        let mut body = body;
        if !self.settings.scopes.is_empty() {
            body["scope"] = json!(self.settings.scopes.join(" "));
        }
        let response = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .map_err(|_| unavailable("the registration endpoint could not be reached"))?;
        let status = response.status();
        let answer: Value = small_body(response).await.and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
        let client_id = answer.get("client_id").and_then(Value::as_str).filter(|id| !id.is_empty() && id.len() <= 512);
        match client_id {
            Some(id) if status.is_success() => Ok(Some(ClientIdentity {
                client_id: id.to_owned(),
                secret: answer.get("client_secret").and_then(Value::as_str).map(str::to_owned),
            })),
            _ => {
                let error = answer.get("error").and_then(Value::as_str).unwrap_or("no client_id in the answer");
                Err(AsError::Refused(format!("registration: HTTP {}: {}", status.as_u16(), crate::untrusted::text::escaped(error, 100))))
            }
        }
    }
}

fn token_set(response: &oauth2::basic::BasicTokenResponse, old_refresh: Option<&str>) -> TokenSet {
    let lifetime = response.expires_in().map_or(ASSUMED_LIFETIME_MS, |d| i64::try_from(d.as_millis()).unwrap_or(ASSUMED_LIFETIME_MS));
    TokenSet {
        access_token: response.access_token().secret().clone(),
        refresh_token: response.refresh_token().map(|t| t.secret().clone()).or_else(|| old_refresh.map(str::to_owned)),
        expires_ms: crate::authserver::now_ms().saturating_add(lifetime.min(30 * 24 * 3600 * 1000)),
        scope: response.scopes().map(|s| s.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" ")).unwrap_or_default(),
    }
}

fn token_error<E: std::error::Error>(e: RequestTokenError<E, oauth2::StandardErrorResponse<BasicErrorResponseType>>) -> AsError {
    match e {
        RequestTokenError::ServerResponse(r) => {
            // The server's own words: bounded and escaped before they reach a log or a record.
            let what = crate::untrusted::text::escaped(r.error().as_ref(), 64).to_string();
            match r.error() {
                BasicErrorResponseType::InvalidGrant => AsError::Refused(what),
                BasicErrorResponseType::InvalidClient | BasicErrorResponseType::UnauthorizedClient => AsError::ClientRejected(what),
                _ => AsError::Unavailable(format!("the token endpoint answered {what}")),
            }
        }
        RequestTokenError::Request(_) => unavailable("the token endpoint could not be reached"),
        _ => unavailable("the token endpoint answered something that is not a token response"),
    }
}

pub(super) fn unavailable(why: &str) -> AsError {
    AsError::Unavailable(why.to_owned())
}

pub(super) async fn small_body(mut response: reqwest::Response) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        if body.len() + chunk.len() > MAX_BODY {
            return None;
        }
        body.extend_from_slice(&chunk);
    }
    Some(body)
}

fn form_encode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}
