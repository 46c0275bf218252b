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
/// How long one replica may hold a grant's refresh lease.
const LEASE_MS: i64 = 15_000;
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
    fn aad(id: &str, principal: &str, upstream: &str, key_id: &str) -> String {
        format!("grant\u{1f}{id}\u{1f}{principal}\u{1f}{upstream}\u{1f}{key_id}")
    }

    fn open_row(&self, row: &db::GrantRow) -> Option<Secrets> {
        let plain = self.sealer.open(&row.key_id, &Self::aad(&row.id, &row.principal, &row.upstream, &row.key_id), &row.sealed).ok()?;
        serde_json::from_slice(&plain).ok()
    }

    fn seal_for(&self, id: &str, principal: &str, upstream: &str, secrets: &Secrets) -> (String, String) {
        let plain = serde_json::to_vec(secrets).unwrap_or_default();
        let key_id = self.sealer.current().to_owned();
        let (key_id, sealed) = self.sealer.seal(&Self::aad(id, principal, upstream, &key_id), &plain);
        (key_id, sealed)
    }

    /// Stores what a connect obtained, replacing the user's earlier connection to `upstream`.
    pub async fn store_tokens(&self, principal: &str, upstream: &str, tokens: &TokenSet) -> Result<String, VaultError> {
        let id = uuid::Uuid::now_v7().to_string();
        let secrets = Secrets { access_token: tokens.access_token.clone(), refresh_token: tokens.refresh_token.clone() };
        let (key_id, sealed) = self.seal_for(&id, principal, upstream, &secrets);
        let now = now_ms();
        let row = db::GrantRow {
            id: id.clone(),
            principal: principal.to_owned(),
            subject: principal.split_once('\u{1f}').map_or(principal, |(_, s)| s).to_owned(),
            upstream: upstream.to_owned(),
            key_id,
            sealed,
            scopes: tokens.scope.clone(),
            expires_ms: tokens.expires_ms,
            version: 1,
            lease_until_ms: 0,
            created_ms: now,
            updated_ms: now,
            used_ms: 0,
        };
        db::grant_put(&self.store, &row).await?;
        Ok(id)
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
            if db::grant_lease(&self.store, &row.id, row.version, now, now + LEASE_MS).await? {
                return self.refresh(&row, refresh_token, &secrets).await;
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

    async fn refresh(&self, row: &db::GrantRow, refresh_token: &str, old: &Secrets) -> Result<Option<Access>, VaultError> {
        let upstream = row.upstream.as_str();
        let auth = self.authorization(upstream).ok_or_else(|| VaultError::NotPerUser(upstream.to_owned()))?;
        let outcome = async {
            let metadata = auth.metadata().await?;
            let client = self.client(&auth).await?;
            auth.refresh(&metadata, &client, refresh_token).await
        }
        .await;
        match outcome {
            Ok(tokens) => {
                let secrets = Secrets { access_token: tokens.access_token.clone(), refresh_token: tokens.refresh_token.clone() };
                let (key_id, sealed) = self.seal_for(&row.id, &row.principal, upstream, &secrets);
                // The lease is ours, so the version is still the one read, unless the user
                // connected again or the connection was revoked meanwhile: then these tokens
                // belong to nothing.
                if !db::grant_update(&self.store, &row.id, row.version, &key_id, &sealed, tokens.expires_ms, now_ms()).await? {
                    tracing::warn!(
                        upstream,
                        "vault: a refreshed connection was replaced or revoked during its refresh; its new tokens are dropped"
                    );
                    return Ok(None);
                }
                self.event("refresh", Outcome::Ok, upstream, Some(&row.principal), "tokens refreshed").await;
                self.event("use", Outcome::Ok, upstream, Some(&row.principal), "a call went out with the user's token").await;
                Ok(Some(Access { token: tokens.access_token.into(), expires_ms: tokens.expires_ms }))
            }
            Err(AsError::Refused(why)) => {
                db::grant_delete(&self.store, &row.id).await?;
                let detail = format!("the refresh was refused ({why}); the connection is forgotten and the user must connect again");
                self.event("failure", Outcome::Denied, upstream, Some(&row.principal), &detail).await;
                Ok(None)
            }
            Err(AsError::Unavailable(why)) => {
                self.event("failure", Outcome::InternalError, upstream, Some(&row.principal), &format!("refresh: {why}")).await;
                if row.expires_ms > now_ms() {
                    return Ok(Some(Access { token: old.access_token.clone().into(), expires_ms: row.expires_ms }));
                }
                Err(VaultError::Unavailable(why))
            }
        }
    }

    async fn used(&self, row: &db::GrantRow, now: i64) {
        if let Err(e) = db::grant_used(&self.store, &row.id, now).await {
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
            && let (Ok(metadata), Ok(client)) = (auth.metadata().await, self.client(&auth).await)
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
                let (key_id, sealed) = self.seal_for(&row.id, &row.principal, &row.upstream, &secrets);
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
