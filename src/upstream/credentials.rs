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
/// A connection's own token is not sent this close to its expiry: it would arrive dead (see
/// [`super::http::authorize`]). Renewal always comes before this.
pub(super) const SEND_BEFORE: Duration = Duration::from_secs(2);
/// Lifetime assumed when the server does not say (`expires_in` is optional).
const ASSUMED_LIFETIME: Duration = Duration::from_secs(300);

type TokenClient = BasicClient<EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointSet>;

/// A token, when to get a new one, and when it lapses.
#[derive(Clone)]
pub struct Minted {
    pub token: Arc<str>,
    /// Shortly before `expires`: from then on a new token is got, and a connection opened
    /// with this one is replaced.
    pub renew_at: Instant,
    /// When the token lapses, as the server said (`expires_in`), else as assumed
    /// ([`ASSUMED_LIFETIME`]); never later than [`LONGEST_LIFETIME`] from now.
    pub expires: Instant,
}

impl Minted {
    /// `token`, valid for `lifetime` from now (`None`: the server did not say).
    pub(super) fn new(token: Arc<str>, lifetime: Option<Duration>) -> Self {
        let lifetime = lifetime.unwrap_or(ASSUMED_LIFETIME).min(LONGEST_LIFETIME);
        let now = Instant::now();
        let expires = now + lifetime;
        let renew_at = now + lifetime.saturating_sub(RENEW_BEFORE).max(lifetime / 2);
        // Renewed before the token stops being sent (however short its life), so a cached
        // connection is never handed out with a token it may no longer send.
        let renew_at = renew_at.min(expires.checked_sub(SEND_BEFORE).unwrap_or(now));
        Self { token, renew_at, expires }
    }

    /// The `Authorization` of a connection opened with this token alone: never sent once it
    /// is about to lapse.
    pub(super) fn bearer(&self) -> super::http::Bearer {
        super::http::Bearer::Fixed(self.token.clone(), self.expires)
    }
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
        let minted = Minted::new(response.access_token().secret().as_str().into(), response.expires_in());
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
                Ok(Minted::new(token.into(), lifetime))
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
    Ok(Minted::new(tokens.access_token.into(), Some(lifetime)))
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

/// RFC 6749 §2.3.1: client id and secret are form-encoded before HTTP Basic.
fn form_encode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

fn serde_urlencoded_pairs(pairs: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish()
}

#[cfg(test)]
mod tests {
    use http::HeaderMap;
    use serde_json::json;

    use super::super::http::authorize;
    use super::*;

    /// A token endpoint that answers every request with `answer`; its URL.
    async fn token_endpoint(answer: Value) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let url = format!("http://{}/token", listener.local_addr().expect("its address"));
        let app = axum::Router::new().route("/token", axum::routing::post(move || async move { axum::Json(answer) }));
        tokio::spawn(async move { axum::serve(listener, app).await });
        url
    }

    /// The caller's token exchanged at an endpoint answering `answer`.
    async fn exchanged(answer: Value) -> Minted {
        let url = token_endpoint(answer).await;
        let settings: OAuthSettings =
            serde_json::from_value(json!({"grant": "token_exchange", "token_url": url, "client_id": "toolgate"})).expect("settings");
        let oauth = OAuth::new(&settings, None).expect("an OAuth client");
        oauth.exchange(&BearerToken::new("caller-token")).await.expect("a token")
    }

    /// What a request carrying `minted` as its connection's token gets: its `Authorization`,
    /// or the refusal.
    async fn sent(minted: &Minted) -> Result<String, UpstreamError> {
        let request = reqwest::Client::new().delete("http://127.0.0.1:9/mcp");
        let request = authorize(request, &HeaderMap::new(), &minted.bearer()).await?.build().expect("a request");
        Ok(request.headers()[http::header::AUTHORIZATION].to_str().expect("ASCII").to_owned())
    }

    #[tokio::test]
    async fn an_exchanged_token_expires_when_the_server_says_and_is_not_sent_once_it_is_about_to() {
        let before = Instant::now();
        let minted = exchanged(json!({"access_token": "upstream-token", "token_type": "Bearer", "expires_in": 600})).await;
        let lifetime = Duration::from_secs(600);
        assert!((before + lifetime..=Instant::now() + lifetime).contains(&minted.expires), "expires_in is the lifetime");
        assert!(minted.renew_at + SEND_BEFORE <= minted.expires, "renewed before it stops being sent");
        assert_eq!(sent(&minted).await.expect("a live token goes out"), "Bearer upstream-token");

        // A one-second token is within the margin from the start: a request would carry it dead.
        let lapsing = exchanged(json!({"access_token": "short-lived", "token_type": "Bearer", "expires_in": 1})).await;
        assert!(matches!(sent(&lapsing).await, Err(UpstreamError::Disconnected(_))), "a lapsing token must not go out");
    }

    #[tokio::test]
    async fn an_exchanged_token_without_a_lifetime_gets_the_assumed_one_and_an_absurd_one_is_capped() {
        let before = Instant::now();
        let unsaid = exchanged(json!({"access_token": "a", "token_type": "Bearer"})).await;
        assert!((before + ASSUMED_LIFETIME..=Instant::now() + ASSUMED_LIFETIME).contains(&unsaid.expires), "the assumed lifetime");

        let absurd = exchanged(json!({"access_token": "b", "token_type": "Bearer", "expires_in": u64::MAX})).await;
        assert!(absurd.expires <= Instant::now() + LONGEST_LIFETIME, "capped at the longest lifetime");
    }
}
