//! The browser's way through a sign-in: the authorization request starts a transaction bound
//! to the browser (a cookie) and sends the user to the identity provider; its callback, in
//! the same browser only, signs the user in; consent (remembered per user and client, asked
//! again when the scopes grow or the client changed) ends in a code for the client.
//! Transactions live in the database, so each step may land on any replica.

use serde::{Deserialize, Serialize};

use super::authorize::{Params, Refused, ValidRequest, check};
use super::clients::{Client, ClientKind};
use super::federation::{FederationError, PendingLogin};
use super::service::{AuthServer, Who};
use super::tokens::{hash, random_secret};
use super::{Identity, db, now_ms};
use crate::audit::Outcome;
use crate::config::authserver::ConsentMode;

/// What the authorization endpoint does next.
pub enum Began {
    /// Send the browser to the identity provider, with the binding cookie.
    SignIn { idp_url: String, cookie: String },
}

/// A page-level failure: shown to the user, never a redirect. `status` is HTTP's.
#[derive(Debug)]
pub struct PageError {
    pub status: u16,
    pub message: String,
}

impl PageError {
    pub fn new(status: u16, message: impl Into<String>) -> Self {
        Self { status, message: message.into() }
    }
}

/// Where the browser goes after a step.
pub enum Next {
    /// The consent page of this transaction.
    Consent { tx: String },
    /// Back to the client (a code, or an error), already with `state` and `iss`.
    Client { url: String },
}

/// What the consent page shows.
#[derive(Debug, Serialize)]
pub struct ConsentView {
    pub tx: String,
    pub csrf: String,
    pub client_name: String,
    pub client_id: String,
    pub client_kind: ClientKind,
    /// The host a metadata document's client id names (shown beside the name).
    pub client_host: Option<String>,
    pub redirect_uri: String,
    pub redirect_host: String,
    /// Every redirect URI is loopback: any local program could claim this client.
    pub loopback_only: bool,
    pub scopes: Vec<String>,
    pub resource: String,
    pub user: String,
}

/// What the `idp` column holds: the provider's pending login, then the consent's CSRF
/// binding.
#[derive(Serialize, Deserialize)]
struct TxIdp {
    pending: PendingLogin,
    /// The authorization request came from a cross-site page (or a browser that does not
    /// say): consent is asked even when remembered (CON-05).
    cross_site: bool,
}

impl AuthServer {
    /// `/oauth/authorize`. `cookie` is the browser's binding cookie if it has one (reused, so
    /// parallel sign-ins in one browser work); `cross_site` from `Sec-Fetch-Site`.
    pub async fn begin(&self, params: &[(String, String)], cookie: Option<&str>, cross_site: bool) -> Result<Began, Refused> {
        let (mut request, client) = check(Params(params), &self.clients, &self.all_resources(), &self.issuer).await?;
        request.scope = known_scopes(request.scope.take(), &self.all_scopes());
        let cookie = cookie.filter(|c| c.len() == 43).map_or_else(random_secret, str::to_owned);
        let tx = random_secret();
        let (idp_url, pending) = self.idp.begin(&tx).await.map_err(|e| {
            tracing::warn!(error = %e, "authorization server: cannot reach the identity provider");
            Refused::Redirect {
                redirect_uri: request.redirect_uri.clone(),
                error: "temporarily_unavailable",
                description: "the identity provider cannot be reached; try again later".into(),
                state: request.state.clone(),
                trusted: false,
            }
        })?;
        let expires = now_ms() + secs_ms(self.settings.transaction_ttl_secs);
        let stored = (|| Some((serde_json::to_string(&request).ok()?, serde_json::to_string(&TxIdp { pending, cross_site }).ok()?)))();
        let Some((request_json, idp_json)) = stored else { return Err(unavailable(&request)) };
        if let Err(e) = db::tx_insert(&self.store, &tx, &hash(&cookie), &request_json, &idp_json, expires).await {
            tracing::error!(error = %e, "authorization server: cannot store a transaction");
            return Err(unavailable(&request));
        }
        self.event(
            "authorize",
            Outcome::Ok,
            Who { client_id: Some(&client.client_id), ..Who::default() },
            "sent to the identity provider".into(),
        )
        .await;
        Ok(Began::SignIn { idp_url, cookie })
    }

    /// `/oauth/callback`: the identity provider's answer, in the browser that started.
    pub async fn callback(
        &self,
        state: &str,
        code: Option<&str>,
        error: Option<&str>,
        iss: Option<&str>,
        cookie: Option<&str>,
    ) -> Result<Next, PageError> {
        let (row, request) = self.bound_tx(state, cookie, "idp").await?;
        let idp: TxIdp = serde_json::from_str(&row.idp).map_err(|_| PageError::new(500, "this sign-in is damaged; start again"))?;
        let now = now_ms();
        // Single use: a replayed callback finds the transaction past this stage.
        if !db::tx_advance(&self.store, state, "idp", "signing-in", None, None, now).await.map_err(db_error)? {
            return Err(PageError::new(400, "this sign-in was already completed or has expired; start again from your application"));
        }
        if let Some(error) = error {
            let (clipped, _) = crate::untrusted::text::clip(error, 64);
            self.event(
                "sign_in",
                Outcome::Denied,
                Who { client_id: Some(&request.client_id), ..Who::default() },
                format!("the identity provider answered {clipped}"),
            )
            .await;
            return Ok(Next::Client {
                url: self.error_url(&request, "access_denied", "the sign-in at the identity provider did not complete"),
            });
        }
        let code = code.ok_or_else(|| PageError::new(400, "the identity provider's answer has no code"))?;
        let identity = match self.idp.complete(&idp.pending, code, iss).await {
            Ok(identity) => identity,
            Err(e) => return Err(self.sign_in_failed(&request, e).await),
        };
        let who = Who { client_id: Some(&request.client_id), subject: Some(&identity.subject), ip: None };
        self.event("sign_in", Outcome::Ok, who, identity.email.clone().unwrap_or_default()).await;
        let client = self.client_of(&request).await?;
        let scopes = granted_scopes(&identity, &request, &client);
        if scopes.is_empty() {
            self.event("consent", Outcome::Denied, who, "no scope rule grants this user any of the scopes asked for".into()).await;
            return Ok(Next::Client { url: self.error_url(&request, "access_denied", "your account has no access to this server") });
        }
        if self.consent_remembered(&identity, &client, &scopes, &request, idp.cross_site).await {
            self.event("consent", Outcome::Ok, who, "remembered".into()).await;
            db::tx_advance(&self.store, state, "signing-in", "done", None, None, now).await.map_err(db_error)?;
            return self.issue_code(&request, &client, &identity, &scopes).await.map(|url| Next::Client { url });
        }
        let identity_json = serde_json::to_string(&identity).map_err(|_| PageError::new(500, "cannot keep the sign-in"))?;
        db::tx_advance(&self.store, state, "signing-in", "consent", Some(&identity_json), None, now).await.map_err(db_error)?;
        Ok(Next::Consent { tx: state.to_owned() })
    }

    /// The consent page's content, for the browser bound to the transaction.
    pub async fn consent_view(&self, tx: &str, cookie: Option<&str>) -> Result<ConsentView, PageError> {
        let (row, request) = self.bound_tx(tx, cookie, "consent").await?;
        let identity: Identity = signed_in(&row)?;
        let client = self.client_of(&request).await?;
        let host = |uri: &str| url::Url::parse(uri).ok().and_then(|u| u.host_str().map(str::to_owned));
        Ok(ConsentView {
            tx: tx.to_owned(),
            csrf: csrf_token(cookie.unwrap_or_default(), tx),
            client_name: client.name.clone(),
            client_id: client.client_id.clone(),
            client_kind: client.kind,
            client_host: (client.kind == ClientKind::MetadataDocument).then(|| host(&client.client_id)).flatten(),
            redirect_host: host(&request.redirect_uri).unwrap_or_else(|| request.redirect_uri.clone()),
            loopback_only: client.only_loopback_redirects(),
            redirect_uri: request.redirect_uri.clone(),
            scopes: granted_scopes(&identity, &request, &client),
            resource: request.resource.clone(),
            user: identity.email.clone().or(identity.name.clone()).unwrap_or(identity.subject.clone()),
        })
    }

    /// The consent form's answer. Returns where the browser goes: the client, with a code or
    /// `access_denied`.
    pub async fn consent_answer(&self, tx: &str, csrf: &str, approve: bool, cookie: Option<&str>) -> Result<String, PageError> {
        let (row, request) = self.bound_tx(tx, cookie, "consent").await?;
        if !constant_time_eq(csrf, &csrf_token(cookie.unwrap_or_default(), tx)) {
            return Err(PageError::new(403, "this consent form is not from this browser's sign-in; start again"));
        }
        if !db::tx_advance(&self.store, tx, "consent", "done", None, None, now_ms()).await.map_err(db_error)? {
            return Err(PageError::new(400, "this sign-in was already answered or has expired"));
        }
        let identity: Identity = signed_in(&row)?;
        let who = Who { client_id: Some(&request.client_id), subject: Some(&identity.subject), ip: None };
        if !approve {
            self.event("consent", Outcome::Denied, who, "the user denied".into()).await;
            return Ok(self.error_url(&request, "access_denied", "the user denied access"));
        }
        let client = self.client_of(&request).await?;
        let scopes = granted_scopes(&identity, &request, &client);
        if let Err(e) =
            db::consent_put(&self.store, &identity.user_key(), &client.client_id, &scopes.join(" "), &client.fingerprint, now_ms()).await
        {
            tracing::warn!(error = %e, "authorization server: cannot remember consent");
        }
        self.event("consent", Outcome::Ok, who, format!("approved {}", scopes.join(" "))).await;
        self.issue_code(&request, &client, &identity, &scopes).await
    }

    /// The transaction `id` at `stage`, if this browser started it and it is still live.
    async fn bound_tx(&self, id: &str, cookie: Option<&str>, stage: &str) -> Result<(db::TxRow, ValidRequest), PageError> {
        let gone = || PageError::new(400, "this sign-in is unknown or has expired; start again from your application");
        if id.len() != 43 {
            return Err(gone());
        }
        let row = db::tx_get(&self.store, id).await.map_err(db_error)?.ok_or_else(gone)?;
        // PXY-05: only the browser that started the transaction may continue it.
        if !cookie.is_some_and(|c| constant_time_eq(&hash(c), &row.browser_hash)) {
            self.event(
                "sign_in",
                Outcome::Denied,
                Who::default(),
                "a sign-in step came from another browser than the one that started it".into(),
            )
            .await;
            return Err(PageError::new(403, "this sign-in was started in another browser; start again from your application in this one"));
        }
        if row.expires_ms <= now_ms() || row.stage != stage {
            return Err(gone());
        }
        let request = serde_json::from_str(&row.request).map_err(|_| gone())?;
        Ok((row, request))
    }

    /// The request's client, again: a transaction outlives a cached document or a
    /// registration, so each step resolves it anew.
    async fn client_of(&self, request: &ValidRequest) -> Result<std::sync::Arc<Client>, PageError> {
        self.clients.resolve(&request.client_id).await.map_err(|_| PageError::new(400, "this application is no longer known; start again"))
    }

    async fn consent_remembered(
        &self,
        identity: &Identity,
        client: &Client,
        scopes: &[String],
        request: &ValidRequest,
        cross_site: bool,
    ) -> bool {
        if self.settings.consent == ConsentMode::Always || cross_site || request.force_consent {
            return false;
        }
        match db::consent_get(&self.store, &identity.user_key(), &client.client_id).await {
            Ok(Some((approved, fingerprint))) => {
                let approved: Vec<&str> = approved.split(' ').collect();
                fingerprint == client.fingerprint && scopes.iter().all(|s| approved.contains(&s.as_str()))
            }
            _ => false,
        }
    }

    async fn sign_in_failed(&self, request: &ValidRequest, e: FederationError) -> PageError {
        let who = Who { client_id: Some(&request.client_id), ..Who::default() };
        match e {
            FederationError::Refused(why) => {
                self.event("sign_in", Outcome::Denied, who, why).await;
                PageError::new(403, "the sign-in was refused: this account cannot use this server")
            }
            FederationError::Unavailable(why) => {
                self.event("sign_in", Outcome::InternalError, who, why).await;
                PageError::new(503, "the identity provider cannot be reached; try again later")
            }
        }
    }

    /// The client's redirect URI with `error`, `error_description`, `state` and `iss`.
    pub fn error_url(&self, request: &ValidRequest, error: &str, description: &str) -> String {
        self.client_url(&request.redirect_uri, &[("error", error), ("error_description", description)], request.state.as_deref())
    }

    /// `redirect_uri` with `params`, `state` (when the client sent one) and `iss` (RFC 9207).
    pub fn client_url(&self, redirect_uri: &str, params: &[(&str, &str)], state: Option<&str>) -> String {
        let Ok(mut url) = url::Url::parse(redirect_uri) else { return redirect_uri.to_owned() };
        {
            let mut q = url.query_pairs_mut();
            for (k, v) in params {
                q.append_pair(k, v);
            }
            if let Some(state) = state {
                q.append_pair("state", state);
            }
            q.append_pair("iss", &self.issuer);
        }
        url.to_string()
    }
}

/// The user a transaction at the consent stage signed in.
fn signed_in(row: &db::TxRow) -> Result<Identity, PageError> {
    row.identity.as_deref().and_then(|i| serde_json::from_str(i).ok()).ok_or_else(|| PageError::new(400, "start again"))
}

fn unavailable(request: &ValidRequest) -> Refused {
    Refused::Redirect {
        redirect_uri: request.redirect_uri.clone(),
        error: "temporarily_unavailable",
        description: "the server cannot start a sign-in right now; try again".into(),
        state: request.state.clone(),
        trusted: false,
    }
}

fn db_error(e: sqlx::Error) -> PageError {
    tracing::error!(error = %e, "authorization server: database error");
    PageError::new(503, "the server cannot continue this sign-in right now; try again")
}

/// AUZ-06: scopes this server does not know (`openid`, `profile`, sent by generic clients)
/// are dropped rather than refused; `offline_access` is kept (it asks for refresh tokens).
/// Nothing known left: the request asks for everything the user may have.
pub fn known_scopes(asked: Option<Vec<String>>, supported: &[String]) -> Option<Vec<String>> {
    let known: Vec<String> = asked?.into_iter().filter(|s| s == "offline_access" || supported.contains(s)).collect();
    known.iter().any(|s| s != "offline_access").then_some(known)
}

/// The scopes a user gets for a request: the rules' scopes, narrowed by what the client asked
/// for and what it may have; `offline_access` is kept when asked (it decides refresh tokens).
pub fn granted_scopes(identity: &Identity, request: &ValidRequest, client: &Client) -> Vec<String> {
    let mut out: Vec<String> = identity
        .scopes
        .iter()
        .filter(|s| request.scope.as_ref().is_none_or(|asked| asked.contains(s)))
        .filter(|s| client.scopes.is_empty() || client.scopes.contains(s))
        .cloned()
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The consent form's CSRF token: derived from the browser's binding cookie (HttpOnly, so a
/// page elsewhere cannot read it) and the transaction.
pub fn csrf_token(cookie: &str, tx: &str) -> String {
    hash(&format!("csrf\u{1f}{cookie}\u{1f}{tx}"))
}

pub fn constant_time_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub(super) fn secs_ms(secs: u64) -> i64 {
    i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::known_scopes;

    fn list(s: &[&str]) -> Option<Vec<String>> {
        Some(s.iter().map(|s| (*s).to_owned()).collect())
    }

    #[test]
    fn scopes_this_server_does_not_know_are_dropped() {
        let supported = vec!["mcp:tools".to_owned()];
        assert_eq!(known_scopes(list(&["openid", "mcp:tools", "offline_access"]), &supported), list(&["mcp:tools", "offline_access"]));
    }

    #[test]
    fn a_request_of_unknown_scopes_only_asks_for_everything_the_user_may_have() {
        let supported = vec!["mcp:tools".to_owned()];
        assert_eq!(known_scopes(list(&["openid", "profile", "offline_access"]), &supported), None);
    }
}
