//! Tokens for an upstream, from an authorization server: toolgate's own (OAuth client
//! credentials, through the `oauth2` crate), or the caller's exchanged for one meant for the
//! upstream (RFC 8693 token exchange: the caller's token is the `subject_token`, the upstream
//! is the `audience`/`resource`). The `oauth2` crate has no token-exchange grant, so that one
//! request is built here (ARCHITECTURE.md records why). Both are cached until shortly before
//! they expire; exchanged tokens per caller token, so one caller's never serves another.

use std::sync::Arc;
use std::time::{Duration, Instant};

use oauth2::basic::BasicClient;
use oauth2::{ClientId, ClientSecret, EndpointNotSet, EndpointSet, Scope, TokenResponse, TokenUrl};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::error::UpstreamError;
use crate::config::upstreams::{HeaderSource, OAuthSettings};
use crate::principal::BearerToken;

const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN: &str = "urn:ietf:params:oauth:token-type:access_token";
/// A token is renewed this long before it expires, so no request carries one that lapses on
/// the way.
const RENEW_BEFORE: Duration = Duration::from_secs(30);
/// Lifetime assumed when the server does not say (`expires_in` is optional).
const ASSUMED_LIFETIME: Duration = Duration::from_secs(300);

type TokenClient = BasicClient<EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointSet>;

/// A token and when to stop using it.
#[derive(Clone)]
pub struct Minted {
    pub token: Arc<str>,
    pub renew_at: Instant,
}

pub struct OAuth {
    pub settings: OAuthSettings,
    /// Unset for `grant = "user"`, whose token endpoint is in the authorization server's
    /// metadata (see `user`).
    client: Option<TokenClient>,
    /// `grant = "user"`: the vault and the upstream's authorization server, for toolgate's own
    /// token that lists the upstream's tools.
    pub(crate) user: Option<(Arc<crate::vault::Vault>, Arc<crate::vault::UpstreamAuthorization>)>,
    /// The client secret, for the token exchange's HTTP Basic authentication.
    secret: Option<String>,
    http: reqwest::Client,
    own: tokio::sync::Mutex<Option<Minted>>,
}

impl std::fmt::Debug for OAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuth").field("token_url", &self.settings.token_url).finish_non_exhaustive()
    }
}

impl OAuth {
    pub fn new(
        settings: &OAuthSettings,
        user: Option<(Arc<crate::vault::Vault>, Arc<crate::vault::UpstreamAuthorization>)>,
    ) -> Result<Self, String> {
        let secret =
            settings.client_secret.as_ref().map(HeaderSource::read).transpose().map_err(|e| format!("oauth.client_secret: {e}"))?;
        let client = match (&settings.token_url, &settings.client_id) {
            (Some(url), Some(client_id)) => {
                let url = TokenUrl::new(url.clone()).map_err(|e| format!("oauth.token_url: {e}"))?;
                let mut client = BasicClient::new(ClientId::new(client_id.clone())).set_token_uri(url);
                if let Some(secret) = &secret {
                    client = client.set_client_secret(ClientSecret::new(secret.clone()));
                }
                Some(client)
            }
            _ => None,
        };
        // No redirects: a redirect must not carry toolgate's credentials or a caller's token elsewhere.
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| format!("cannot build the token endpoint's HTTP client: {e}"))?;
        Ok(Self { settings: settings.clone(), client, user, secret, http, own: tokio::sync::Mutex::new(None) })
    }

    /// toolgate's own token (client credentials), cached until shortly before it expires.
    pub async fn own_token(&self) -> Result<Arc<str>, UpstreamError> {
        let mut own = self.own.lock().await;
        if let Some(minted) = own.as_ref().filter(|m| m.renew_at > Instant::now()) {
            return Ok(minted.token.clone());
        }
        if let Some((vault, auth)) = &self.user {
            let minted = user_listing_token(vault, auth).await?;
            *own = Some(minted.clone());
            return Ok(minted.token);
        }
        let Some(client) = &self.client else {
            return Err(UpstreamError::Transport("no token endpoint is configured (oauth.token_url)".into()));
        };
        let mut request = client.exchange_client_credentials();
        for scope in &self.settings.scopes {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        if let Some(audience) = &self.settings.audience {
            request = request.add_extra_param("audience", audience.clone());
        }
        if let Some(resource) = &self.settings.resource {
            request = request.add_extra_param("resource", resource.clone());
        }
        let response = request.request_async(&self.http).await.map_err(|e| {
            let why = match &e {
                oauth2::RequestTokenError::ServerResponse(r) => format!("refused: {}", r.error()),
                oauth2::RequestTokenError::Request(_) => "could not be reached".into(),
                _ => "answered something that is not a token response".into(),
            };
            UpstreamError::Transport(format!("the token endpoint {why} (client credentials for the upstream)"))
        })?;
        let minted = Minted { token: response.access_token().secret().as_str().into(), renew_at: renew_at(response.expires_in()) };
        *own = Some(minted.clone());
        Ok(minted.token)
    }

    /// The caller's token exchanged for one meant for the upstream (RFC 8693 §2.1).
    pub async fn exchange(&self, subject: &BearerToken) -> Result<Minted, UpstreamError> {
        let s = &self.settings;
        let mut form: Vec<(&str, &str)> = vec![
            ("grant_type", TOKEN_EXCHANGE),
            ("subject_token", subject.expose()),
            ("subject_token_type", ACCESS_TOKEN),
            ("requested_token_type", ACCESS_TOKEN),
        ];
        let scope = s.scopes.join(" ");
        if !scope.is_empty() {
            form.push(("scope", &scope));
        }
        if let Some(audience) = &s.audience {
            form.push(("audience", audience));
        }
        if let Some(resource) = &s.resource {
            form.push(("resource", resource));
        }
        let (Some(token_url), Some(client_id)) = (&s.token_url, &s.client_id) else {
            return Err(UpstreamError::Exchange("oauth.token_url and oauth.client_id are required for the token exchange".into()));
        };
        let mut request = self.http.post(token_url).header(http::header::ACCEPT, "application/json");
        match &self.secret {
            Some(secret) => request = request.basic_auth(form_encode(client_id), Some(form_encode(secret))),
            None => form.push(("client_id", client_id)),
        }
        let body = serde_urlencoded_pairs(&form);
        let response = request
            .header(http::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .map_err(|_| UpstreamError::Transport("the token endpoint could not be reached for the token exchange".into()))?;
        let status = response.status();
        let body = small_body(response).await;
        let answer: Value = serde_json::from_slice(&body).unwrap_or_default();
        let token = answer.get("access_token").and_then(Value::as_str).filter(|t| !t.is_empty());
        match token {
            Some(token) if status.is_success() => {
                let lifetime = answer.get("expires_in").and_then(Value::as_u64).map(Duration::from_secs);
                Ok(Minted { token: token.into(), renew_at: renew_at(lifetime) })
            }
            _ => {
                let error = answer.get("error").and_then(Value::as_str).unwrap_or("no token in the answer");
                let detail = answer.get("error_description").and_then(Value::as_str).map(|d| format!(" ({d})")).unwrap_or_default();
                Err(UpstreamError::Exchange(format!("HTTP {}: {error}{detail}", status.as_u16()).chars().take(300).collect()))
            }
        }
    }
}

/// `grant = "user"`: toolgate's own token (client credentials at the upstream's
/// authorization server, with the client the vault uses there), to list the tools.
async fn user_listing_token(vault: &crate::vault::Vault, auth: &crate::vault::UpstreamAuthorization) -> Result<Minted, UpstreamError> {
    let failed = |e: crate::vault::AsError| UpstreamError::Transport(format!("toolgate's own token for listing the tools: {e}"));
    let metadata = vault.metadata(auth).await.map_err(failed)?;
    let client = vault.client(auth).await.map_err(failed)?;
    let tokens = auth.client_credentials(&metadata, &client).await.map_err(failed)?;
    let lifetime = Duration::from_millis(u64::try_from(tokens.expires_ms - crate::authserver::now_ms()).unwrap_or(0));
    Ok(Minted { token: tokens.access_token.into(), renew_at: renew_at(Some(lifetime)) })
}

/// A token response's body, at most 64 KiB (a bigger one is not a token response: empty).
async fn small_body(mut response: reqwest::Response) -> Vec<u8> {
    const MAX: usize = 64 * 1024;
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        if body.len() + chunk.len() > MAX {
            return Vec::new();
        }
        body.extend_from_slice(&chunk);
    }
    body
}

/// The key a caller's token is cached under: its digest, never the token.
pub fn token_key(token: &BearerToken) -> [u8; 32] {
    Sha256::digest(token.expose().as_bytes()).into()
}

/// Longest a token is kept, whatever lifetime the server names (an absurd `expires_in` must
/// not overflow the clock).
const LONGEST_LIFETIME: Duration = Duration::from_secs(24 * 3600);

fn renew_at(lifetime: Option<Duration>) -> Instant {
    let lifetime = lifetime.unwrap_or(ASSUMED_LIFETIME).min(LONGEST_LIFETIME);
    Instant::now() + lifetime.saturating_sub(RENEW_BEFORE).max(lifetime / 2)
}

/// RFC 6749 §2.3.1: client id and secret are form-encoded before HTTP Basic.
fn form_encode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

fn serde_urlencoded_pairs(pairs: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish()
}
