//! Connecting a user's account at an upstream (spec §6.4), one browser step at a time; each
//! step may land on any replica (the transaction is a row), and each is single use (a
//! conditional `UPDATE` moves the row on).
//!
//! 1. A call without a connection gets a **link** (the elicitation's URL): a random secret,
//!    short-lived, bound to the caller; by itself it grants nothing (UEL-04).
//! 2. Following it binds the transaction to the browser (a cookie) and signs the browser in at
//!    the identity provider (the authorization server's).
//! 3. The provider's callback, in that browser only, must name the user the link was made for
//!    (UEL-05): otherwise the link is spent and nothing is stored.
//! 4. The user confirms on toolgate's page (CSRF token derived from the cookie), and goes to
//!    the upstream's authorization server (PKCE S256, `state`, `resource`).
//! 5. Its callback, in that browser, with that `state`, once: the code is exchanged and the
//!    tokens sealed into the vault under the user. The page says to return to the application.
//!
//! The connections page (`/oauth/connections`) is the same steps 2–3 without a link: the user
//! signs in and sees, disconnects or connects their own accounts.

use serde::{Deserialize, Serialize};

use super::{Vault, VaultError, db};
use crate::audit::Outcome;
use crate::authserver::federation::{FederationError, PendingLogin};
use crate::authserver::flow::{PageError, constant_time_eq, csrf_token};
use crate::authserver::tokens::{hash, random_secret};
use crate::authserver::{Identity, now_ms};

/// The identity provider's `state` for a vault step starts with this, so the shared callback
/// (`/oauth/callback`) knows it is not a client's sign-in.
pub const STATE_PREFIX: &str = "v.";
/// The `upstream` of a connections-page transaction.
pub(super) const MANAGE: &str = "*";

/// A link to send a caller to.
pub struct ConnectLink {
    pub url: String,
    /// The elicitation's id (2025-11-25): derived from the link, not the link.
    pub elicitation_id: String,
}

/// Where the browser goes next.
pub enum ConnectNext {
    /// The identity provider (or the upstream's server), with the binding cookie to set.
    Redirect { url: String, cookie: Option<String> },
    /// toolgate's confirmation page for transaction `id`.
    Confirm { id: String },
    /// The connections page of transaction `id`.
    Manage { id: String },
}

/// What the confirmation page shows.
pub struct ConfirmView {
    pub id: String,
    pub csrf: String,
    pub upstream: String,
    pub user: String,
    pub scopes: Vec<String>,
    /// The upstream's authorization server's origin (shown, and the one place the form's
    /// answer may redirect to).
    pub authorization_origin: String,
}

/// What is kept between the redirect to a server and its callback (never sent anywhere).
#[derive(Serialize, Deserialize)]
enum Pending {
    SignIn(PendingLogin),
    Upstream { verifier: String, issuer: String },
}

impl Vault {
    /// A fresh link for `principal` to connect `upstream`.
    pub async fn connect_link(&self, principal: &str, upstream: &str) -> Result<ConnectLink, VaultError> {
        let secret = random_secret();
        let id = hash(&secret);
        let row = db::ConnectRow {
            id: id.clone(),
            principal: Some(principal.to_owned()),
            upstream: upstream.to_owned(),
            stage: "new".into(),
            browser_hash: None,
            state_hash: None,
            pending: None,
            identity: None,
            expires_ms: now_ms() + self.ttl_ms(),
        };
        db::connect_insert(&self.store, &row, now_ms()).await?;
        self.event("elicit", Outcome::Ok, upstream, Some(principal), "connect link sent").await;
        Ok(ConnectLink {
            url: format!("{}/oauth/connect/{upstream}?c={secret}", self.public_origin()),
            elicitation_id: id[..32].to_owned(),
        })
    }

    /// Deletes connect transactions that expired (any replica may; the others find nothing).
    pub async fn purge(&self) {
        match db::connects_purge(&self.store, now_ms()).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(deleted = n, "vault: expired connect transactions deleted"),
            Err(e) => tracing::warn!(error = %e, "vault: cannot delete expired connect transactions"),
        }
    }

    /// Where a caller without URL elicitation connects by hand.
    pub fn connections_url(&self) -> String {
        format!("{}/oauth/connections", self.public_origin())
    }

    pub(super) fn ttl_ms(&self) -> i64 {
        i64::try_from(self.settings.connect_ttl_secs.saturating_mul(1000)).unwrap_or(600_000)
    }

    /// `GET /oauth/connect/{upstream}?c=…`: binds the link to this browser and signs it in.
    pub async fn follow_link(&self, upstream: &str, secret: &str) -> Result<ConnectNext, PageError> {
        let gone = || PageError::new(400, "this connect link is unknown, used or expired; call the tool again for a new one");
        if secret.len() != 43 {
            return Err(gone());
        }
        let row = db::connect_get(&self.store, &hash(secret)).await.map_err(db_error)?.ok_or_else(gone)?;
        if row.upstream != upstream || row.stage != "new" || row.expires_ms <= now_ms() {
            return Err(gone());
        }
        self.sign_in(&row.id, "new").await
    }

    pub(super) async fn sign_in(&self, id: &str, from: &str) -> Result<ConnectNext, PageError> {
        // A fresh binding each time (PXY-04): a value planted in the browser beforehand binds
        // nothing.
        let cookie = random_secret();
        let state = format!("{STATE_PREFIX}{}", random_secret());
        let (url, pending) = self.auth_server.sign_in_begin(&state).await.map_err(|e| {
            tracing::warn!(error = %e, "vault: cannot reach the identity provider");
            PageError::new(503, "the identity provider cannot be reached; try again later")
        })?;
        let pending = serde_json::to_string(&Pending::SignIn(pending)).map_err(|_| PageError::new(500, "cannot start"))?;
        let browser = hash(&cookie);
        let step = db::Step { browser_hash: Some(&browser), state_hash: Some(&hash(&state)), pending: Some(&pending), identity: None };
        if !db::connect_advance(&self.store, id, from, "idp", step, now_ms()).await.map_err(db_error)? {
            return Err(PageError::new(400, "this connect link was already used; call the tool again for a new one"));
        }
        Ok(ConnectNext::Redirect { url, cookie: Some(cookie) })
    }

    /// The identity provider's callback for a vault step (`state` starts with
    /// [`STATE_PREFIX`]).
    pub async fn signed_in(
        &self,
        state: &str,
        code: Option<&str>,
        error: Option<&str>,
        iss: Option<&str>,
        cookie: Option<&str>,
    ) -> Result<ConnectNext, PageError> {
        let row = self.bound_by_state(state, cookie, "idp").await?;
        if !db::connect_advance(&self.store, &row.id, "idp", "signing-in", db::Step::default(), now_ms()).await.map_err(db_error)? {
            return Err(PageError::new(400, "this sign-in was already completed or has expired"));
        }
        if error.is_some() {
            return Err(PageError::new(400, "the sign-in at the identity provider did not complete; start again from your application"));
        }
        let code = code.ok_or_else(|| PageError::new(400, "the identity provider's answer has no code"))?;
        let Some(Pending::SignIn(pending)) = row.pending.as_deref().and_then(|p| serde_json::from_str(p).ok()) else {
            return Err(PageError::new(400, "this sign-in is damaged; start again"));
        };
        let identity = self.auth_server.sign_in_complete(&pending, code, iss).await.map_err(|e| match e {
            FederationError::Refused(_) => PageError::new(403, "the sign-in was refused: this account cannot use this server"),
            FederationError::Unavailable(_) => PageError::new(503, "the identity provider cannot be reached; try again later"),
        })?;
        if let Some(principal) = &row.principal
            && !self.same_user(principal, &identity)
        {
            // UEL-05: a link opened by someone else is spent, and nothing is stored.
            let _ = db::connect_advance(&self.store, &row.id, "signing-in", "refused", db::Step::default(), now_ms()).await;
            let detail =
                format!("the connect link was opened by another user ({})", crate::untrusted::text::escaped(&identity.subject, 128));
            self.event("failure", Outcome::Denied, &row.upstream, Some(principal), &detail).await;
            return Err(PageError::new(
                403,
                "this link was made for another user than the one signed in here; nothing was connected. Ask your application for a new link while signed in as yourself.",
            ));
        }
        let identity_json = serde_json::to_string(&identity).map_err(|_| PageError::new(500, "cannot keep the sign-in"))?;
        let step = db::Step { identity: Some(&identity_json), ..db::Step::default() };
        let manage = row.upstream == MANAGE;
        let to = if manage { "manage" } else { "confirm" };
        db::connect_advance(&self.store, &row.id, "signing-in", to, step, now_ms()).await.map_err(db_error)?;
        Ok(if manage { ConnectNext::Manage { id: row.id } } else { ConnectNext::Confirm { id: row.id } })
    }

    /// The confirmation page's content.
    pub async fn confirm_view(&self, id: &str, cookie: Option<&str>) -> Result<ConfirmView, PageError> {
        let row = self.bound(id, cookie, "confirm").await?;
        let identity = identity_of(&row)?;
        let auth = self.authorization(&row.upstream).ok_or_else(|| PageError::new(404, "this upstream is no longer served"))?;
        let unavailable = |_| PageError::new(503, "the upstream's authorization server cannot be used right now; try again later");
        let metadata = self.metadata(&auth).await.map_err(unavailable)?;
        let origin = url::Url::parse(&metadata.authorization_endpoint).map(|u| u.origin().ascii_serialization()).unwrap_or_default();
        Ok(ConfirmView {
            id: id.to_owned(),
            csrf: csrf_token(cookie.unwrap_or_default(), id),
            upstream: row.upstream.clone(),
            user: display(&identity),
            scopes: auth.settings.scopes.clone(),
            authorization_origin: origin,
        })
    }

    /// The confirmation's answer: to the upstream's authorization server, or a refusal.
    pub async fn confirm_answer(&self, id: &str, csrf: &str, approve: bool, cookie: Option<&str>) -> Result<ConnectNext, PageError> {
        let row = self.bound(id, cookie, "confirm").await?;
        if !constant_time_eq(csrf, &csrf_token(cookie.unwrap_or_default(), id)) {
            return Err(PageError::new(403, "this form is not from this browser's connect page; start again"));
        }
        let principal = row.principal.clone().ok_or_else(|| PageError::new(400, "start again"))?;
        if !approve {
            db::connect_advance(&self.store, id, "confirm", "denied", db::Step::default(), now_ms()).await.map_err(db_error)?;
            self.event("failure", Outcome::Denied, &row.upstream, Some(&principal), "the user declined to connect").await;
            return Err(PageError::new(200, "Nothing was connected. You can close this page and return to your application."));
        }
        let auth = self.authorization(&row.upstream).ok_or_else(|| PageError::new(404, "this upstream is no longer served"))?;
        let unavailable = |e: super::AsError| {
            tracing::warn!(upstream = %row.upstream, error = %e, "vault: the upstream's authorization server");
            PageError::new(503, "the upstream's authorization server cannot be used right now; try again later")
        };
        let metadata = self.metadata(&auth).await.map_err(unavailable)?;
        let client = self.client(&auth).await.map_err(unavailable)?;
        let state = random_secret();
        let (url, verifier) = auth.authorize_url(&metadata, &client, &state).map_err(unavailable)?;
        let pending = serde_json::to_string(&Pending::Upstream { verifier, issuer: metadata.issuer.clone() })
            .map_err(|_| PageError::new(500, "cannot start"))?;
        // The browser's binding is set anew right before it leaves for the upstream (PXY-04).
        let cookie = random_secret();
        let browser = hash(&cookie);
        let step =
            db::Step { browser_hash: Some(&browser), state_hash: Some(&hash(&state)), pending: Some(&pending), ..db::Step::default() };
        if !db::connect_advance(&self.store, id, "confirm", "upstream", step, now_ms()).await.map_err(db_error)? {
            return Err(PageError::new(400, "this connect page was already answered or has expired"));
        }
        Ok(ConnectNext::Redirect { url, cookie: Some(cookie) })
    }

    /// `GET /oauth/vault/callback/{upstream}`: the upstream's server sends the browser back.
    /// Returns the upstream's name for the page.
    pub async fn upstream_callback(
        &self,
        upstream: &str,
        state: &str,
        code: Option<&str>,
        error: Option<&str>,
        iss: Option<&str>,
        cookie: Option<&str>,
    ) -> Result<String, PageError> {
        let row = self.bound_by_state(state, cookie, "upstream").await?;
        if row.upstream != upstream {
            return Err(PageError::new(400, "this answer is for another connection; start again from your application"));
        }
        if !db::connect_advance(&self.store, &row.id, "upstream", "exchanging", db::Step::default(), now_ms()).await.map_err(db_error)? {
            return Err(PageError::new(400, "this connection was already completed or has expired"));
        }
        let principal = row.principal.clone().ok_or_else(|| PageError::new(400, "start again"))?;
        let Some(Pending::Upstream { verifier, issuer }) = row.pending.as_deref().and_then(|p| serde_json::from_str(p).ok()) else {
            return Err(PageError::new(400, "this connection is damaged; start again"));
        };
        let failed = |why: String| {
            let principal = principal.clone();
            async move { self.event("failure", Outcome::Denied, upstream, Some(&principal), &why).await }
        };
        if let Some(error) = error {
            failed(format!("the upstream's authorization server answered {}", crate::untrusted::text::escaped(error, 64))).await;
            return Err(PageError::new(400, "the authorization at the upstream did not complete; nothing was connected"));
        }
        let code = code.ok_or_else(|| PageError::new(400, "the answer has no code"))?;
        let auth = self.authorization(upstream).ok_or_else(|| PageError::new(404, "this upstream is no longer served"))?;
        let unavailable = |_| PageError::new(503, "the upstream's authorization server cannot be used right now; try again later");
        let metadata = self.metadata(&auth).await.map_err(unavailable)?;
        // RFC 9207: the answer must come from the server the browser was sent to.
        if metadata.issuer != issuer
            || (metadata.iss_parameter && iss != Some(metadata.issuer.as_str()))
            || iss.is_some_and(|i| i != metadata.issuer)
        {
            failed("the authorization response's iss is not the upstream's authorization server (RFC 9207)".into()).await;
            return Err(PageError::new(400, "this answer did not come from the upstream's authorization server; nothing was connected"));
        }
        let client = self.client(&auth).await.map_err(unavailable)?;
        let tokens = match auth.exchange(&metadata, &client, code, &verifier).await {
            Ok(tokens) => tokens,
            Err(e) => {
                failed(format!("the code exchange failed: {e}")).await;
                return Err(PageError::new(
                    400,
                    "the upstream's authorization server refused the connection; start again from your application",
                ));
            }
        };
        self.store_tokens(&principal, upstream, &metadata.issuer, &tokens)
            .await
            .map_err(|_| PageError::new(503, "the vault cannot be written right now; try again"))?;
        db::connect_advance(&self.store, &row.id, "exchanging", "done", db::Step::default(), now_ms()).await.map_err(db_error)?;
        self.event(
            "connect",
            Outcome::Ok,
            upstream,
            Some(&principal),
            &format!("connected (scopes: {})", crate::untrusted::text::escaped(&tokens.scope, 256)),
        )
        .await;
        Ok(upstream.to_owned())
    }

    async fn bound_by_state(&self, state: &str, cookie: Option<&str>, stage: &str) -> Result<db::ConnectRow, PageError> {
        let gone = || {
            PageError::new(
                400,
                "this answer matches no connection in progress (unknown, used or expired state); start again from your application",
            )
        };
        if state.len() > 128 {
            return Err(gone());
        }
        let row = db::connect_by_state(&self.store, &hash(state)).await.map_err(db_error)?.ok_or_else(gone)?;
        self.check_bound(row, cookie, stage)
    }

    pub(super) async fn bound(&self, id: &str, cookie: Option<&str>, stage: &str) -> Result<db::ConnectRow, PageError> {
        let gone = || PageError::new(400, "this page has expired; start again from your application");
        if id.len() != 64 {
            return Err(gone());
        }
        let row = db::connect_get(&self.store, id).await.map_err(db_error)?.ok_or_else(gone)?;
        self.check_bound(row, cookie, stage)
    }

    /// PXY-05: only the browser that followed the link continues; only at `stage`; only live.
    fn check_bound(&self, row: db::ConnectRow, cookie: Option<&str>, stage: &str) -> Result<db::ConnectRow, PageError> {
        let bound = row.browser_hash.as_deref().is_some_and(|b| cookie.is_some_and(|c| constant_time_eq(&hash(c), b)));
        if !bound {
            return Err(PageError::new(403, "this step belongs to a connection started in another browser; start again in this one"));
        }
        if row.stage != stage || row.expires_ms <= now_ms() {
            return Err(PageError::new(400, "this connection was already completed or has expired; start again from your application"));
        }
        Ok(row)
    }
}

pub(super) fn identity_of(row: &db::ConnectRow) -> Result<Identity, PageError> {
    row.identity.as_deref().and_then(|i| serde_json::from_str(i).ok()).ok_or_else(|| PageError::new(400, "start again"))
}

pub(super) fn display(identity: &Identity) -> String {
    identity.email.clone().or_else(|| identity.name.clone()).unwrap_or_else(|| identity.subject.clone())
}

pub(super) fn db_error(e: sqlx::Error) -> PageError {
    tracing::error!(error = %e, "vault: database error");
    PageError::new(503, "the server cannot continue right now; try again")
}
