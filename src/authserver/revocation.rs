//! Revocation: RFC 7009's endpoint, and the deny list through which the resource server
//! refuses access tokens of revoked grants before they expire. Each replica keeps the ids of
//! grants revoked within the last access-token lifetime (older ones' tokens have expired
//! anyway), learns its own revocations at once and the others' by reading the database every
//! few seconds.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use tokio_util::sync::CancellationToken;

use super::service::{AuthServer, Who};
use super::token::{Form, TokenError, authenticate};
use super::tokens::hash;
use super::{db, now_ms};
use crate::audit::Outcome;
use crate::store::Store;

/// How often a replica reads the grants other replicas revoked.
pub const DENY_LIST_REFRESH: Duration = Duration::from_secs(2);

/// Grants revoked recently, by id.
pub struct DenyList {
    /// Grant id → when it was revoked (ms).
    revoked: RwLock<HashMap<String, i64>>,
    /// How long an entry matters: the access-token lifetime plus a margin.
    keep_ms: i64,
}

impl DenyList {
    pub fn new(access_token_ttl_secs: u64) -> Self {
        let keep_ms = i64::try_from((access_token_ttl_secs + 60) * 1000).unwrap_or(i64::MAX);
        Self { revoked: RwLock::new(HashMap::new()), keep_ms }
    }

    /// Whether tokens of this grant must be refused.
    pub fn is_revoked(&self, grant_id: &str) -> bool {
        self.revoked.read().contains_key(grant_id)
    }

    pub(super) fn revoked(&self, grant_id: &str) {
        self.revoked.write().insert(grant_id.to_owned(), now_ms());
    }

    /// Reads the revocations of the last token lifetime and forgets older ones.
    pub async fn refresh(&self, store: &Store) -> Result<(), sqlx::Error> {
        let since = now_ms() - self.keep_ms;
        let rows = db::grants_revoked_since(store, since).await?;
        let mut map = self.revoked.write();
        map.retain(|_, at| *at >= since);
        map.extend(rows);
        Ok(())
    }

    /// Refreshes every [`DENY_LIST_REFRESH`] until `stop`.
    pub fn spawn(self: &Arc<Self>, store: Store, stop: CancellationToken) {
        let this = Arc::clone(self);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(DENY_LIST_REFRESH);
            loop {
                tokio::select! {
                    () = stop.cancelled() => break,
                    _ = ticks.tick() => {}
                }
                if let Err(e) = this.refresh(&store).await {
                    tracing::warn!(error = %e, "authorization server: cannot read revoked grants; keeping the list");
                }
            }
        });
    }
}

impl AuthServer {
    /// `POST /oauth/revoke` (RFC 7009): 200 for a revoked, unknown or invalid token; a token
    /// of another client is refused and stays valid.
    pub async fn revoke(&self, form: &Form<'_>) -> Result<(), TokenError> {
        let client = authenticate(&self.clients, form).await?;
        let token = form.one("token")?.ok_or_else(|| TokenError::new("invalid_request", "the token parameter is missing"))?;
        let grant_id = match self.grant_of_refresh(token).await {
            Some(grant) => Some(grant),
            None => self.grant_of_access_token(token),
        };
        let Some(grant_id) = grant_id else { return Ok(()) };
        let Some(grant) = db::grant_get(&self.store, &grant_id).await.ok().flatten() else { return Ok(()) };
        if grant.client_id != client.client_id {
            let who = Who { client_id: Some(&client.client_id), ..Who::default() };
            self.event("revoke", Outcome::Denied, who, "a client tried to revoke another client's token".into()).await;
            return Err(TokenError::new("unauthorized_client", "this token was not issued to this client"));
        }
        self.revoke_grant(&grant_id, "revoked by the client").await;
        Ok(())
    }

    async fn grant_of_refresh(&self, token: &str) -> Option<String> {
        if token.len() != 43 {
            return None;
        }
        db::refresh_get(&self.store, &hash(token)).await.ok().flatten().map(|(grant, _, _)| grant)
    }

    /// The grant (`sid`) of one of our access tokens, if the signature verifies (expiry does
    /// not matter for revocation).
    fn grant_of_access_token(&self, token: &str) -> Option<String> {
        #[derive(serde::Deserialize)]
        struct Sid {
            sid: String,
        }
        let keys = self.keys.verification_keys(&self.issuer).ok()?;
        let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
        validation.validate_exp = false;
        validation.validate_aud = false;
        validation.set_issuer(&[self.issuer.as_str()]);
        validation.required_spec_claims.clear();
        keys.iter().find_map(|k| jsonwebtoken::decode::<Sid>(token, &k.key, &validation).ok()).map(|d| d.claims.sid)
    }

    /// Starts the background work: the deny list's refresh and the purge of ended rows.
    pub fn spawn_upkeep(self: &Arc<Self>, stop: CancellationToken) {
        self.deny.spawn(self.store.clone(), stop.clone());
        let this = Arc::clone(self);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(Duration::from_secs(300));
            loop {
                tokio::select! {
                    () = stop.cancelled() => break,
                    _ = ticks.tick() => {}
                }
                match db::purge(&this.store, now_ms()).await {
                    Ok(n) if n > 0 => tracing::debug!(rows = n, "authorization server: purged ended rows"),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "authorization server: purge failed"),
                }
                if let Err(e) = this.clients.purge().await {
                    tracing::warn!(error = %e, "authorization server: purge of unused registrations failed");
                }
            }
        });
    }
}

impl crate::auth::jwt::RevokedGrants for DenyList {
    fn is_revoked(&self, grant_id: &str) -> bool {
        DenyList::is_revoked(self, grant_id)
    }
}
