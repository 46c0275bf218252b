//! Codes and the token endpoint: a code is single use, short-lived and bound to its client,
//! redirect URI, PKCE challenge and resource; redeeming it starts a grant. Refresh tokens are
//! opaque, stored hashed and rotated on every use; one presented again after its rotation
//! revokes the whole grant (RFC 9700 §4.14.2).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::clients::{AuthMethod, Client, ClientError};
use super::flow::{PageError, secs_ms};
use super::service::{AuthServer, Who};
use super::tokens::{AccessClaims, hash, mint, pkce_matches, random_secret};
use super::{Identity, authorize::ValidRequest, clients::Clients, db, now_ms};
use crate::audit::Outcome;

/// A refused token or revocation request (RFC 6749 §5.2): HTTP status, `error`, description.
#[derive(Debug)]
pub struct TokenError {
    pub status: u16,
    pub error: &'static str,
    pub description: String,
    /// The client authenticated with HTTP Basic and failed: answer with `WWW-Authenticate`.
    pub basic_challenge: bool,
}

impl TokenError {
    pub fn new(error: &'static str, description: impl Into<String>) -> Self {
        Self { status: 400, error, description: description.into(), basic_challenge: false }
    }
}

/// What a code stands for (the `details` column).
#[derive(Serialize, Deserialize)]
struct CodeDetails {
    client_id: String,
    redirect_uri: String,
    code_challenge: String,
    resource: String,
    scopes: Vec<String>,
    identity: Identity,
    refresh: bool,
}

/// The form of a token or revocation request, repeated parameters refused (OA21 §3.2).
pub struct Form<'a> {
    pub params: &'a [(String, String)],
    /// `Authorization: Basic` credentials, decoded.
    pub basic: Option<(String, String)>,
}

impl Form<'_> {
    pub fn one(&self, name: &str) -> Result<Option<&str>, TokenError> {
        let mut found = self.params.iter().filter(|(k, v)| k == name && !v.is_empty());
        match (found.next(), found.next()) {
            (Some(_), Some(_)) => Err(TokenError::new("invalid_request", format!("the {name} parameter is repeated"))),
            (first, _) => Ok(first.map(|(_, v)| v.as_str())),
        }
    }
}

impl AuthServer {
    /// After consent: stores a code and returns the client's redirect URI carrying it.
    pub(super) async fn issue_code(
        &self,
        request: &ValidRequest,
        client: &Client,
        identity: &Identity,
        scopes: &[String],
    ) -> Result<String, PageError> {
        let code = random_secret();
        let refresh = client.refresh_tokens || request.scope.as_ref().is_some_and(|s| s.iter().any(|s| s == "offline_access"));
        let details = CodeDetails {
            client_id: client.client_id.clone(),
            redirect_uri: request.redirect_uri.clone(),
            code_challenge: request.code_challenge.clone(),
            resource: request.resource.clone(),
            scopes: scopes.to_vec(),
            identity: identity.clone(),
            refresh,
        };
        let text = serde_json::to_string(&details).map_err(|_| PageError { status: 500, message: "cannot issue a code".into() })?;
        let expires = now_ms() + secs_ms(self.settings.code_ttl_secs);
        db::code_insert(&self.store, &hash(&code), &text, expires).await.map_err(|e| {
            tracing::error!(error = %e, "authorization server: cannot store a code");
            PageError { status: 503, message: "the server cannot finish this sign-in right now; try again".into() }
        })?;
        self.clients.touch(&client.client_id).await;
        Ok(self.client_url(&request.redirect_uri, &[("code", &code)], request.state.as_deref()))
    }

    /// `POST /oauth/token`.
    pub async fn token(&self, form: &Form<'_>) -> Result<Value, TokenError> {
        let result = match form.one("grant_type")? {
            Some("authorization_code") => self.redeem_code(form).await,
            Some("refresh_token") => self.refresh(form).await,
            Some(_) => Err(TokenError::new("unsupported_grant_type", "grant_type must be authorization_code or refresh_token")),
            None => Err(TokenError::new("invalid_request", "the grant_type parameter is missing")),
        };
        if let Err(e) = &result {
            let client_id = form.one("client_id").ok().flatten().or(form.basic.as_ref().map(|b| b.0.as_str()));
            self.event("token", Outcome::Denied, Who { client_id, ..Who::default() }, format!("{}: {}", e.error, e.description)).await;
        }
        result
    }

    async fn redeem_code(&self, form: &Form<'_>) -> Result<Value, TokenError> {
        let client = authenticate(&self.clients, form).await?;
        let code = form.one("code")?.ok_or_else(|| TokenError::new("invalid_request", "the code parameter is missing"))?;
        let code_hash = hash(code);
        let bad = || TokenError::new("invalid_grant", "the code is invalid, expired, already used, or was issued to another client");
        let row = db::code_get(&self.store, &code_hash).await.map_err(db_error)?.ok_or_else(bad)?;
        let details: CodeDetails = serde_json::from_str(&row.details).map_err(|_| bad())?;
        if details.client_id != client.client_id {
            return Err(bad());
        }
        // TOK-02: the verifier must match; checked before the replay rule, so a replay with a
        // wrong verifier (an attacker's) cannot revoke the real client's grant (OA21 §7.5.3).
        let verifier = form.one("code_verifier")?.ok_or_else(|| TokenError::new("invalid_grant", "code_verifier is missing"))?;
        if !pkce_matches(verifier, &details.code_challenge) {
            return Err(TokenError::new("invalid_grant", "code_verifier does not match the code_challenge"));
        }
        if form.one("redirect_uri")?.is_some_and(|r| r != details.redirect_uri) {
            return Err(TokenError::new("invalid_grant", "redirect_uri differs from the authorization request's"));
        }
        if let Some(asked) = form.one("resource")?
            && super::authorize::canonical_resource(asked, std::slice::from_ref(&details.resource)).is_none()
        {
            return Err(TokenError::new("invalid_target", "resource differs from the authorization request's"));
        }
        let now = now_ms();
        if row.redeemed_ms.is_some() {
            return Err(self.replayed_code(&code_hash, row.expires_ms, now).await);
        }
        // The grant exists before the code names it, so a concurrent second redemption always
        // finds the grant it must revoke (on every replica, through the database).
        let grant_id = random_secret();
        let grant = self.start_grant(&grant_id, &details, now).await?;
        if !db::code_redeem(&self.store, &code_hash, &grant_id, now).await.map_err(db_error)? {
            let _ = db::grant_revoke(&self.store, &grant_id, "its code was redeemed concurrently", now).await;
            return Err(self.replayed_code(&code_hash, row.expires_ms, now).await);
        }
        let who = Who { client_id: Some(&client.client_id), subject: Some(&details.identity.subject), ip: None };
        self.event("token", Outcome::Ok, who, format!("code redeemed; grant {}", short(&grant_id))).await;
        self.tokens_for(&grant, &details.identity, details.refresh, now).await
    }

    /// TOK-04: a code redeemed twice revokes what its first redemption gave.
    async fn replayed_code(&self, code_hash: &str, expires_ms: i64, now: i64) -> TokenError {
        let first = db::code_get(&self.store, code_hash).await.ok().flatten();
        if let Some(grant) = first.and_then(|r| r.redeemed_ms.and(r.grant_id)) {
            let _ = db::grant_revoke(&self.store, &grant, "authorization code replayed", now).await;
            self.deny.revoked(&grant);
            self.event("revoke", Outcome::Ok, Who::default(), format!("grant {}: its code was replayed", short(&grant))).await;
        }
        let why = if expires_ms <= now { "the code has expired" } else { "the code was already used" };
        TokenError::new("invalid_grant", why)
    }

    async fn start_grant(&self, id: &str, details: &CodeDetails, now: i64) -> Result<db::GrantRow, TokenError> {
        let grant = db::GrantRow {
            id: id.to_owned(),
            client_id: details.client_id.clone(),
            user_key: details.identity.user_key(),
            identity: serde_json::to_string(&details.identity).unwrap_or_default(),
            scope: details.scopes.join(" "),
            resource: details.resource.clone(),
            created_ms: now,
            expires_ms: now + secs_ms(self.settings.grant_max_secs),
            last_used_ms: now,
            revoked_ms: None,
            revoked_why: None,
        };
        db::grant_insert(&self.store, &grant).await.map_err(db_error)?;
        Ok(grant)
    }

    async fn refresh(&self, form: &Form<'_>) -> Result<Value, TokenError> {
        let client = authenticate(&self.clients, form).await?;
        let token =
            form.one("refresh_token")?.ok_or_else(|| TokenError::new("invalid_request", "the refresh_token parameter is missing"))?;
        let token_hash = hash(token);
        let bad = || TokenError::new("invalid_grant", "the refresh token is invalid, expired or revoked");
        let (grant_id, _, used) = db::refresh_get(&self.store, &token_hash).await.map_err(db_error)?.ok_or_else(bad)?;
        let grant = db::grant_get(&self.store, &grant_id).await.map_err(db_error)?.ok_or_else(bad)?;
        if grant.client_id != client.client_id {
            return Err(bad());
        }
        let now = now_ms();
        if used.is_some() {
            self.revoke_grant(&grant.id, "a rotated refresh token was used again").await;
            return Err(bad());
        }
        // The request's own errors come before the token is used: a refused request (wrong
        // scope or resource) leaves it valid, or the client's corrected retry would count
        // as reuse and revoke the grant.
        let scopes = narrowed(form.one("scope")?, &grant.scope, &self.scopes_supported)?;
        if let Some(asked) = form.one("resource")?
            && super::authorize::canonical_resource(asked, std::slice::from_ref(&grant.resource)).is_none()
        {
            return Err(TokenError::new("invalid_target", "resource is not the one this grant is for"));
        }
        if !db::refresh_use(&self.store, &token_hash, now).await.map_err(db_error)? {
            // Used meanwhile by a concurrent request: reuse as well.
            if db::refresh_get(&self.store, &token_hash).await.ok().flatten().is_some_and(|r| r.2.is_some()) {
                self.revoke_grant(&grant.id, "a rotated refresh token was used again").await;
            }
            return Err(bad());
        }
        if grant.revoked_ms.is_some() || grant.expires_ms <= now {
            return Err(bad());
        }
        let identity: Identity = serde_json::from_str(&grant.identity).map_err(|_| bad())?;
        let _ = db::grant_touch(&self.store, &grant.id, now).await;
        // A registration in use must not expire as unused.
        self.clients.touch(&client.client_id).await;
        let who = Who { client_id: Some(&client.client_id), subject: Some(&identity.subject), ip: None };
        self.event("refresh", Outcome::Ok, who, format!("grant {}", short(&grant.id))).await;
        let narrowed_grant = db::GrantRow { scope: scopes, ..grant };
        self.tokens_for(&narrowed_grant, &identity, true, now).await
    }

    /// The token response: an access token, and a new refresh token when the grant has them.
    async fn tokens_for(&self, grant: &db::GrantRow, identity: &Identity, refresh: bool, now: i64) -> Result<Value, TokenError> {
        let iat = u64::try_from(now / 1000).unwrap_or_default();
        let ttl = self.settings.access_token_ttl_secs;
        let claims = AccessClaims {
            iss: &self.issuer,
            sub: &identity.subject,
            aud: &grant.resource,
            client_id: &grant.client_id,
            scope: &grant.scope,
            iat,
            exp: iat + ttl,
            jti: random_secret(),
            sid: &grant.id,
            email: identity.email.as_deref(),
        };
        let access = mint(&self.keys, &claims).map_err(|e| {
            tracing::error!(error = %e, "authorization server: cannot sign");
            TokenError { status: 500, error: "server_error", description: "cannot issue a token".into(), basic_challenge: false }
        })?;
        let mut body = json!({"access_token": access, "token_type": "Bearer", "expires_in": ttl, "scope": grant.scope});
        if refresh {
            let token = random_secret();
            let expires = (now + secs_ms(self.settings.refresh_idle_secs)).min(grant.expires_ms);
            db::refresh_insert(&self.store, &hash(&token), &grant.id, expires).await.map_err(db_error)?;
            body["refresh_token"] = json!(token);
        }
        Ok(body)
    }

    /// Revokes a grant everywhere: its refresh tokens stop at once, its access tokens at the
    /// next deny-list refresh of each replica (this one at once).
    pub async fn revoke_grant(&self, grant_id: &str, why: &str) -> bool {
        let done = db::grant_revoke(&self.store, grant_id, why, now_ms()).await.unwrap_or(false);
        self.deny.revoked(grant_id);
        if done {
            self.event("revoke", Outcome::Ok, Who::default(), format!("grant {}: {why}", short(grant_id))).await;
        }
        done
    }
}

/// The scope of a refreshed token: the grant's, or a subset of it the client asked for.
/// Scopes this server does not know are ignored, as at authorization (AUZ-06).
fn narrowed(asked: Option<&str>, granted: &str, supported: &[String]) -> Result<String, TokenError> {
    let Some(asked) = asked else { return Ok(granted.to_owned()) };
    let granted: Vec<&str> = granted.split(' ').collect();
    let asked: Vec<&str> = asked.split(' ').filter(|s| !s.is_empty() && supported.iter().any(|k| k == s)).collect();
    if asked.is_empty() {
        return Ok(granted.join(" "));
    }
    if let Some(extra) = asked.iter().find(|s| !granted.contains(s)) {
        return Err(TokenError::new("invalid_scope", format!("scope {extra} was not granted")));
    }
    Ok(asked.join(" "))
}

/// Authenticates the client of a token or revocation request (OA21 §3.2.1): HTTP Basic or
/// form credentials (not both), or a public client's `client_id`.
pub async fn authenticate(clients: &Clients, form: &Form<'_>) -> Result<std::sync::Arc<Client>, TokenError> {
    let in_form = form.one("client_id")?;
    let form_secret = form.one("client_secret")?;
    if form.basic.is_some() && (form_secret.is_some() || in_form.is_some_and(|id| Some(id) != form.basic.as_ref().map(|b| b.0.as_str()))) {
        return Err(TokenError::new("invalid_request", "use one client authentication method, not several"));
    }
    let (client_id, secret, basic) = match &form.basic {
        Some((id, secret)) => (id.as_str(), Some(secret.as_str()), true),
        None => (in_form.ok_or_else(|| TokenError::new("invalid_client", "client_id is missing"))?, form_secret, false),
    };
    let failed = |why: &str| TokenError {
        status: if basic { 401 } else { 400 },
        error: "invalid_client",
        description: why.into(),
        basic_challenge: basic,
    };
    let client = clients.resolve(client_id).await.map_err(|e| match e {
        ClientError::Database(_) => {
            TokenError { status: 503, error: "temporarily_unavailable", description: "try again".into(), basic_challenge: false }
        }
        // A metadata document that cannot be fetched now (its host slow or down) must not
        // look like a revoked client: SDKs drop every credential on invalid_client.
        ClientError::Document(_) => TokenError {
            status: 503,
            error: "temporarily_unavailable",
            description: "the client's metadata document cannot be used right now; try again".into(),
            basic_challenge: false,
        },
        _ => failed("unknown client"),
    })?;
    match (client.auth_method, secret) {
        (AuthMethod::None, None) => Ok(client),
        (AuthMethod::None, Some(_)) => Err(failed("this client is public: send no client secret")),
        (_, Some(secret)) if client.secret_matches(secret) => Ok(client),
        (_, _) => Err(failed("client authentication failed")),
    }
}

fn db_error(e: sqlx::Error) -> TokenError {
    tracing::error!(error = %e, "authorization server: database error");
    TokenError {
        status: 503,
        error: "temporarily_unavailable",
        description: "the server cannot answer right now; try again".into(),
        basic_challenge: false,
    }
}

/// The first characters of an id, enough to find it in the admin API, in logs.
pub(super) fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}
