//! A user's tokens at an upstream: stored sealed, used while fresh, refreshed shortly before
//! they expire by exactly one replica (a lease in the grant's row: the others wait for the
//! new version instead of spending the same refresh token, which a rotating server would take
//! as theft and revoke), forgotten when the server refuses the refresh, revoked by the user or
//! an operator. A record that does not open (altered in the database, or its key removed) is
//! never used: the user is asked to connect again.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::authorization_server::{AsError, TokenSet};
use super::{Vault, VaultError, db};
use crate::audit::Outcome;
use crate::authserver::now_ms;

/// Tokens are refreshed this long before they expire, or half their lifetime before when
/// that is shorter (a server handing out 20 s tokens must not see a refresh per call).
const RENEW_BEFORE_MS: i64 = 30_000;
/// How long one replica may hold a grant's refresh lease: well beyond the refresh's own
/// deadline, so no other replica spends the same refresh token meanwhile.
const LEASE_MS: i64 = 60_000;
/// The refresh request's deadline (the metadata and the client are resolved before the lease).
const REFRESH_DEADLINE: Duration = Duration::from_secs(20);
/// How often a replica waiting for another's refresh looks again.
const LEASE_POLL: Duration = Duration::from_millis(200);

/// What a call goes out with.
#[derive(Clone)]
pub struct Access {
    pub token: Arc<str>,
    pub expires_ms: i64,
}

/// The sealed part of a grant.
#[derive(Serialize, Deserialize)]
struct Secrets {
    access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    refresh_token: Option<String>,
}

/// A connection as users and operators see it: never a token.
#[derive(Clone, Debug, Serialize)]
pub struct ConnectionView {
    pub id: String,
    /// The user's subject, and the issuer that named them.
    pub user: String,
    pub issuer: String,
    pub upstream: String,
    pub scopes: String,
    pub created_at: String,
    pub updated_at: String,
    pub expires_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_used_at: Option<String>,
}

impl Vault {
    /// What a record is bound to: its row, its user, its upstream, the authorization server
    /// that issued it, the key.
    fn aad(row: &db::GrantRow, key_id: &str) -> String {
        format!("grant\u{1f}{}\u{1f}{}\u{1f}{}\u{1f}{}\u{1f}{key_id}", row.id, row.principal, row.upstream, row.issuer)
    }

    fn open_row(&self, row: &db::GrantRow) -> Option<Secrets> {
        let plain = self.sealer.open(&row.key_id, &Self::aad(row, &row.key_id), &row.sealed).ok()?;
        serde_json::from_slice(&plain).ok()
    }

    fn seal_for(&self, row: &db::GrantRow, secrets: &Secrets) -> (String, String) {
        let plain = serde_json::to_vec(secrets).unwrap_or_default();
        let key_id = self.sealer.current().to_owned();
        self.sealer.seal(&Self::aad(row, &key_id), &plain)
    }

    /// Stores what a connect obtained from `issuer`, replacing the user's earlier connection
    /// to `upstream`.
    pub async fn store_tokens(&self, principal: &str, upstream: &str, issuer: &str, tokens: &TokenSet) -> Result<String, VaultError> {
        let now = now_ms();
        let mut row = db::GrantRow {
            id: uuid::Uuid::now_v7().to_string(),
            principal: principal.to_owned(),
            subject: principal.split_once('\u{1f}').map_or(principal, |(_, s)| s).to_owned(),
            upstream: upstream.to_owned(),
            issuer: issuer.to_owned(),
            key_id: String::new(),
            sealed: String::new(),
            scopes: tokens.scope.clone(),
            expires_ms: tokens.expires_ms,
            version: 1,
            lease_until_ms: 0,
            created_ms: now,
            updated_ms: now,
            used_ms: 0,
        };
        let secrets = Secrets { access_token: tokens.access_token.clone(), refresh_token: tokens.refresh_token.clone() };
        (row.key_id, row.sealed) = self.seal_for(&row, &secrets);
        db::grant_put(&self.store, &row).await?;
        Ok(row.id)
    }

    /// The token a call of `principal` to `upstream` goes out with; `None` when the user has
    /// no usable connection (never connected, revoked, refused at refresh, or a record that
    /// does not open): the caller is asked to connect.
    pub async fn access(&self, principal: &str, upstream: &str) -> Result<Option<Access>, VaultError> {
        let waited_since = now_ms();
        loop {
            let Some(row) = db::grant_get(&self.store, principal, upstream).await? else { return Ok(None) };
            let Some(secrets) = self.open_row(&row) else {
                self.event(
                    "failure",
                    Outcome::Denied,
                    upstream,
                    Some(principal),
                    "the stored connection does not open (altered, or its key is no longer listed): not used; the user must connect again",
                )
                .await;
                return Ok(None);
            };
            let now = now_ms();
            let renew_before = RENEW_BEFORE_MS.min((row.expires_ms - row.updated_ms) / 2).max(1_000);
            if row.expires_ms - now > renew_before {
                self.used(&row, now).await;
                return Ok(Some(Access { token: secrets.access_token.into(), expires_ms: row.expires_ms }));
            }
            let Some(refresh_token) = secrets.refresh_token.as_deref() else {
                if row.expires_ms > now {
                    self.used(&row, now).await;
                    return Ok(Some(Access { token: secrets.access_token.into(), expires_ms: row.expires_ms }));
                }
                self.event("failure", Outcome::Denied, upstream, Some(principal), "the access token expired and there is no refresh token")
                    .await;
                return Ok(None);
            };
            let valid = row.expires_ms > now;
            let serve_old = |row: &db::GrantRow| Access { token: secrets.access_token.clone().into(), expires_ms: row.expires_ms };
            // The server and toolgate's client there before the lease: the lease covers the
            // refresh request alone.
            let (auth, metadata, client) = match self.refresh_parts(&row).await {
                Ok(parts) => parts,
                Err(Some(why)) if !valid => return Err(VaultError::Unavailable(why)),
                Err(Some(_)) => {
                    self.used(&row, now).await;
                    return Ok(Some(serve_old(&row)));
                }
                Err(None) => return Ok(None),
            };
            if db::grant_lease(&self.store, &row.id, row.version, now, now + LEASE_MS).await? {
                let refreshed = tokio::time::timeout(REFRESH_DEADLINE, auth.refresh(&metadata, &client, refresh_token)).await;
                let refreshed = refreshed.unwrap_or_else(|_| Err(AsError::Unavailable("the token endpoint did not answer in time".into())));
                return self.refreshed(&row, &auth, refreshed, valid.then(|| serve_old(&row))).await;
            }
            // Another replica (or call) is refreshing, or tried within the lease and could not
            // reach the server: the access token serves while it is still valid (waiting would
            // stall every call for the lease's length when the server is down).
            if row.expires_ms > now {
                self.used(&row, now).await;
                return Ok(Some(Access { token: secrets.access_token.into(), expires_ms: row.expires_ms }));
            }
            // Expired: wait for the new version.
            if now - waited_since > LEASE_MS + 5_000 {
                return Err(VaultError::Unavailable("a refresh of this connection is taking too long".into()));
            }
            tokio::time::sleep(LEASE_POLL).await;
        }
    }

    /// The upstream's server (its metadata) and toolgate's client there, for a refresh of
    /// `row`. `Err(None)`: the connection is forgotten (the upstream now has another server
    /// than the one that issued it: its refresh token goes nowhere else); `Err(Some)`: why
    /// not now.
    async fn refresh_parts(
        &self,
        row: &db::GrantRow,
    ) -> Result<(Arc<super::UpstreamAuthorization>, Arc<super::authorization_server::AsMetadata>, super::ClientIdentity), Option<String>>
    {
        let auth = self.authorization(&row.upstream).ok_or_else(|| Some(format!("the upstream {:?} is not served now", row.upstream)))?;
        let metadata = self.metadata(&auth).await.map_err(|e| Some(e.to_string()))?;
        if metadata.issuer != row.issuer {
            if db::grant_delete_version(&self.store, &row.id, row.version)
                .await
                .map_err(|_| Some("the vault cannot be written".to_owned()))?
            {
                let detail = "the upstream's authorization server is no longer the one that issued this connection: forgotten, the user must connect again";
                self.event("failure", Outcome::Denied, &row.upstream, Some(&row.principal), detail).await;
            }
            return Err(None);
        }
        let client = self.client(&auth).await.map_err(|e| Some(e.to_string()))?;
        Ok((auth, metadata, client))
    }

    /// What a refresh under the lease came to; `old` serves while still valid when the server
    /// could not be used.
    async fn refreshed(
        &self,
        row: &db::GrantRow,
        auth: &super::UpstreamAuthorization,
        outcome: Result<TokenSet, AsError>,
        old: Option<Access>,
    ) -> Result<Option<Access>, VaultError> {
        let upstream = row.upstream.as_str();
        match outcome {
            Ok(tokens) => {
                let secrets = Secrets { access_token: tokens.access_token.clone(), refresh_token: tokens.refresh_token.clone() };
                let (key_id, sealed) = self.seal_for(row, &secrets);
                // The lease is ours, so the version is still the one read, unless the user
                // connected again or the connection was revoked meanwhile: then these tokens
                // belong to nothing.
                if !db::grant_update(&self.store, &row.id, row.version, &key_id, &sealed, tokens.expires_ms, now_ms()).await? {
                    tracing::warn!(upstream, "vault: a connection was replaced or revoked during its refresh; the new tokens are dropped");
                    return Ok(None);
                }
                self.event("refresh", Outcome::Ok, upstream, Some(&row.principal), "tokens refreshed").await;
                self.event("use", Outcome::Ok, upstream, Some(&row.principal), "a call went out with the user's token").await;
                Ok(Some(Access { token: tokens.access_token.into(), expires_ms: tokens.expires_ms }))
            }
            Err(AsError::Refused(why)) => {
                // Only the version read: a newer one written meanwhile is not this refusal's.
                db::grant_delete_version(&self.store, &row.id, row.version).await?;
                let detail = format!("the refresh was refused ({why}); the connection is forgotten and the user must connect again");
                self.event("failure", Outcome::Denied, upstream, Some(&row.principal), &detail).await;
                Ok(None)
            }
            Err(e) => {
                if let AsError::ClientRejected(_) = &e {
                    self.client_rejected(auth, &row.issuer).await;
                }
                let why = e.to_string();
                self.event("failure", Outcome::InternalError, upstream, Some(&row.principal), &format!("refresh: {why}")).await;
                old.map(Some).ok_or(VaultError::Unavailable(why))
            }
        }
    }

    async fn used(&self, row: &db::GrantRow, now: i64) {
        // The last use is shown to the user and operators to the minute: no write per call.
        if now - row.used_ms > 60_000
            && let Err(e) = db::grant_used(&self.store, &row.id, now).await
        {
            tracing::warn!(error = %e, "vault: cannot stamp a connection's use");
        }
        self.event("use", Outcome::Ok, &row.upstream, Some(&row.principal), "a call went out with the user's token").await;
    }

    /// Forgets connection `id` (revoked at the upstream's server too, where it offers RFC
    /// 7009). `owner`: only when it belongs to one of these user keys. False when there is no
    /// such connection.
    pub async fn revoke(&self, id: &str, owner: Option<&[String; 2]>, by: &str) -> Result<bool, VaultError> {
        let Some(row) = db::grant_by_id(&self.store, id).await? else { return Ok(false) };
        if owner.is_some_and(|keys| !keys.contains(&row.principal)) {
            return Ok(false);
        }
        if !db::grant_delete(&self.store, id).await? {
            return Ok(false);
        }
        if let (Some(secrets), Some(auth)) = (self.open_row(&row), self.authorization(&row.upstream))
            && let (Ok(metadata), Ok(client)) = (self.metadata(&auth).await, self.client(&auth).await)
            && metadata.issuer == row.issuer
        {
            if let Some(refresh) = &secrets.refresh_token {
                auth.revoke(&metadata, &client, refresh, "refresh_token").await;
            }
            auth.revoke(&metadata, &client, &secrets.access_token, "access_token").await;
        }
        self.event("revoke", Outcome::Ok, &row.upstream, Some(&row.principal), &format!("revoked by {by}")).await;
        Ok(true)
    }

    /// A user's connections (under either of their keys).
    pub async fn connections_of(&self, keys: &[String; 2]) -> Result<Vec<ConnectionView>, VaultError> {
        Ok(db::grants_of(&self.store, keys).await?.iter().map(view).collect())
    }

    /// The upstreams `principal` has a connection to (whether or not it still opens).
    pub async fn connected_upstreams(&self, principal: &str) -> Result<Vec<String>, VaultError> {
        let keys = [principal.to_owned(), principal.to_owned()];
        Ok(db::grants_of(&self.store, &keys).await?.into_iter().map(|g| g.upstream).collect())
    }

    /// Connections newest first, at most `limit`, of one user (subject) and upstream when
    /// given (operators).
    pub async fn connections(&self, subject: Option<&str>, upstream: Option<&str>, limit: i64) -> Result<Vec<ConnectionView>, VaultError> {
        let rows = db::grants_all(&self.store, subject.unwrap_or_default(), upstream.unwrap_or_default(), limit).await?;
        Ok(rows.iter().map(view).collect())
    }

    /// Seals every record still sealed with an older key with the current one (at start-up,
    /// after a key rotation); records that do not open are left alone (and never used).
    pub async fn reseal(&self) -> Result<usize, VaultError> {
        let mut done = 0;
        loop {
            let rows = db::grants_sealed_with_other(&self.store, self.sealer.current(), 100).await?;
            let mut progressed = false;
            for row in &rows {
                let Some(secrets) = self.open_row(row) else { continue };
                let (key_id, sealed) = self.seal_for(row, &secrets);
                if db::grant_reseal(&self.store, &row.id, row.version, &key_id, &sealed, now_ms()).await? {
                    done += 1;
                    progressed = true;
                }
            }
            if rows.len() < 100 || !progressed {
                return Ok(done);
            }
        }
    }
}

fn view(row: &db::GrantRow) -> ConnectionView {
    let (issuer, user) = row.principal.split_once('\u{1f}').unwrap_or(("", &row.principal));
    ConnectionView {
        id: row.id.clone(),
        user: user.to_owned(),
        issuer: issuer.to_owned(),
        upstream: row.upstream.clone(),
        scopes: row.scopes.clone(),
        created_at: rfc3339(row.created_ms),
        updated_at: rfc3339(row.updated_ms),
        expires_at: rfc3339(row.expires_ms),
        last_used_at: (row.used_ms > 0).then(|| rfc3339(row.used_ms)),
    }
}

fn rfc3339(ms: i64) -> String {
    let at = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    at.format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}
