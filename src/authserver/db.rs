//! The authorization server's tables (`migrations/*/20261127000001_authorization_server.sql`).
//! One SQL text serves SQLite and Postgres. Every state change that must happen once (a
//! transaction's step, a code's redemption, a refresh token's use) is a single conditional
//! `UPDATE`, so two replicas racing on the same value cannot both win.

use crate::store::{Store, on_pool};

/// A transaction row.
#[derive(Debug, sqlx::FromRow)]
pub struct TxRow {
    pub browser_hash: String,
    pub stage: String,
    pub request: String,
    pub idp: String,
    pub identity: Option<String>,
    pub expires_ms: i64,
}

pub async fn tx_insert(store: &Store, id: &str, browser_hash: &str, request: &str, idp: &str, expires_ms: i64) -> Result<(), sqlx::Error> {
    let sql = "INSERT INTO oauth_transactions (id, browser_hash, stage, request, idp, expires_ms) VALUES ($1, $2, 'idp', $3, $4, $5)";
    on_pool!(store, |pool| sqlx::query(sql)
        .bind(id)
        .bind(browser_hash)
        .bind(request)
        .bind(idp)
        .bind(expires_ms)
        .execute(pool)
        .await
        .map(|r| r.rows_affected()))?;
    Ok(())
}

pub async fn tx_get(store: &Store, id: &str) -> Result<Option<TxRow>, sqlx::Error> {
    let sql = "SELECT browser_hash, stage, request, idp, identity, expires_ms FROM oauth_transactions WHERE id = $1";
    on_pool!(store, |pool| sqlx::query_as::<_, TxRow>(sql).bind(id).fetch_optional(pool).await)
}

/// Moves a live transaction from stage `from` to `to` (and stores `identity` and `idp` when
/// given); false when it was not at `from` any more (replayed) or has expired.
pub async fn tx_advance(
    store: &Store,
    id: &str,
    from: &str,
    to: &str,
    identity: Option<&str>,
    idp: Option<&str>,
    now: i64,
) -> Result<bool, sqlx::Error> {
    let sql = "UPDATE oauth_transactions SET stage = $1, identity = COALESCE($2, identity), idp = COALESCE($3, idp) \
               WHERE id = $4 AND stage = $5 AND expires_ms > $6";
    let n = on_pool!(store, |pool| sqlx::query(sql)
        .bind(to)
        .bind(identity)
        .bind(idp)
        .bind(id)
        .bind(from)
        .bind(now)
        .execute(pool)
        .await
        .map(|r| r.rows_affected()))?;
    Ok(n == 1)
}

pub async fn code_insert(store: &Store, code_hash: &str, details: &str, expires_ms: i64) -> Result<(), sqlx::Error> {
    let sql = "INSERT INTO oauth_codes (code_hash, details, expires_ms) VALUES ($1, $2, $3)";
    on_pool!(store, |pool| sqlx::query(sql).bind(code_hash).bind(details).bind(expires_ms).execute(pool).await.map(|r| r.rows_affected()))?;
    Ok(())
}

/// A code row: details, expiry, when redeemed, and the grant it became.
#[derive(Debug, sqlx::FromRow)]
pub struct CodeRow {
    pub details: String,
    pub expires_ms: i64,
    pub redeemed_ms: Option<i64>,
    pub grant_id: Option<String>,
}

pub async fn code_get(store: &Store, code_hash: &str) -> Result<Option<CodeRow>, sqlx::Error> {
    let sql = "SELECT details, expires_ms, redeemed_ms, grant_id FROM oauth_codes WHERE code_hash = $1";
    on_pool!(store, |pool| sqlx::query_as::<_, CodeRow>(sql).bind(code_hash).fetch_optional(pool).await)
}

/// Redeems a code once: true for the one caller that did.
pub async fn code_redeem(store: &Store, code_hash: &str, grant_id: &str, now: i64) -> Result<bool, sqlx::Error> {
    let sql = "UPDATE oauth_codes SET redeemed_ms = $1, grant_id = $2 WHERE code_hash = $3 AND redeemed_ms IS NULL AND expires_ms > $1";
    let n =
        on_pool!(store, |pool| sqlx::query(sql).bind(now).bind(grant_id).bind(code_hash).execute(pool).await.map(|r| r.rows_affected()))?;
    Ok(n == 1)
}

/// A grant row.
#[derive(Clone, Debug, sqlx::FromRow, serde::Serialize)]
pub struct GrantRow {
    pub id: String,
    pub client_id: String,
    pub user_key: String,
    pub identity: String,
    pub scope: String,
    pub resource: String,
    pub created_ms: i64,
    pub expires_ms: i64,
    pub last_used_ms: i64,
    pub revoked_ms: Option<i64>,
    pub revoked_why: Option<String>,
}

macro_rules! grant_columns {
    () => {
        "id, client_id, user_key, identity, scope, resource, created_ms, expires_ms, last_used_ms, revoked_ms, revoked_why"
    };
}

pub async fn grant_insert(store: &Store, g: &GrantRow) -> Result<(), sqlx::Error> {
    let sql = "INSERT INTO oauth_grants (id, client_id, user_key, identity, scope, resource, created_ms, expires_ms, last_used_ms) \
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";
    on_pool!(store, |pool| {
        sqlx::query(sql)
            .bind(&g.id)
            .bind(&g.client_id)
            .bind(&g.user_key)
            .bind(&g.identity)
            .bind(&g.scope)
            .bind(&g.resource)
            .bind(g.created_ms)
            .bind(g.expires_ms)
            .bind(g.last_used_ms)
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
    })?;
    Ok(())
}

pub async fn grant_get(store: &Store, id: &str) -> Result<Option<GrantRow>, sqlx::Error> {
    let sql = concat!("SELECT ", grant_columns!(), " FROM oauth_grants WHERE id = $1");
    on_pool!(store, |pool| sqlx::query_as::<_, GrantRow>(sql).bind(id).fetch_optional(pool).await)
}

/// Grants, newest first, optionally of one user (a subject or an email: a broad match here,
/// made exact by the caller) or client, live ones only or all.
pub async fn grants_list(
    store: &Store,
    user_key: Option<&str>,
    client_id: Option<&str>,
    live_only: bool,
    limit: i64,
    now: i64,
) -> Result<Vec<GrantRow>, sqlx::Error> {
    let sql = concat!(
        "SELECT ",
        grant_columns!(),
        " FROM oauth_grants WHERE ($1 IS NULL OR user_key LIKE '%|' || $1 OR identity LIKE '%' || $1 || '%') AND ($2 IS NULL OR client_id = $2) ",
        "AND ($3 = 0 OR (revoked_ms IS NULL AND expires_ms > $4)) ORDER BY created_ms DESC LIMIT $5"
    );
    let live = i64::from(live_only);
    on_pool!(store, |pool| sqlx::query_as::<_, GrantRow>(sql)
        .bind(user_key)
        .bind(client_id)
        .bind(live)
        .bind(now)
        .bind(limit)
        .fetch_all(pool)
        .await)
}

/// Revokes a grant (once; the first reason stays): true when this call revoked it.
pub async fn grant_revoke(store: &Store, id: &str, why: &str, now: i64) -> Result<bool, sqlx::Error> {
    let sql = "UPDATE oauth_grants SET revoked_ms = $1, revoked_why = $2 WHERE id = $3 AND revoked_ms IS NULL";
    let n = on_pool!(store, |pool| sqlx::query(sql).bind(now).bind(why).bind(id).execute(pool).await.map(|r| r.rows_affected()))?;
    Ok(n == 1)
}

pub async fn grant_touch(store: &Store, id: &str, now: i64) -> Result<(), sqlx::Error> {
    let sql = "UPDATE oauth_grants SET last_used_ms = $1 WHERE id = $2";
    on_pool!(store, |pool| sqlx::query(sql).bind(now).bind(id).execute(pool).await.map(|r| r.rows_affected()))?;
    Ok(())
}

/// Ids of grants revoked at or after `since` (the resource server's deny list).
pub async fn grants_revoked_since(store: &Store, since: i64) -> Result<Vec<(String, i64)>, sqlx::Error> {
    let sql = "SELECT id, revoked_ms FROM oauth_grants WHERE revoked_ms >= $1";
    on_pool!(store, |pool| sqlx::query_as::<_, (String, i64)>(sql).bind(since).fetch_all(pool).await)
}

pub async fn refresh_insert(store: &Store, token_hash: &str, grant_id: &str, expires_ms: i64) -> Result<(), sqlx::Error> {
    let sql = "INSERT INTO oauth_refresh_tokens (token_hash, grant_id, expires_ms) VALUES ($1, $2, $3)";
    on_pool!(store, |pool| sqlx::query(sql)
        .bind(token_hash)
        .bind(grant_id)
        .bind(expires_ms)
        .execute(pool)
        .await
        .map(|r| r.rows_affected()))?;
    Ok(())
}

/// A refresh token row: its grant, expiry, and when it was used (rotated).
pub async fn refresh_get(store: &Store, token_hash: &str) -> Result<Option<(String, i64, Option<i64>)>, sqlx::Error> {
    let sql = "SELECT grant_id, expires_ms, used_ms FROM oauth_refresh_tokens WHERE token_hash = $1";
    on_pool!(store, |pool| sqlx::query_as::<_, (String, i64, Option<i64>)>(sql).bind(token_hash).fetch_optional(pool).await)
}

/// Uses a refresh token once: true for the one caller that did.
pub async fn refresh_use(store: &Store, token_hash: &str, now: i64) -> Result<bool, sqlx::Error> {
    let sql = "UPDATE oauth_refresh_tokens SET used_ms = $1 WHERE token_hash = $2 AND used_ms IS NULL AND expires_ms > $1";
    let n = on_pool!(store, |pool| sqlx::query(sql).bind(now).bind(token_hash).execute(pool).await.map(|r| r.rows_affected()))?;
    Ok(n == 1)
}

/// Remembered consent: the scope approved and the client fingerprint it was given for.
pub async fn consent_get(store: &Store, user_key: &str, client_id: &str) -> Result<Option<(String, String)>, sqlx::Error> {
    let sql = "SELECT scope, fingerprint FROM oauth_consents WHERE user_key = $1 AND client_id = $2";
    on_pool!(store, |pool| sqlx::query_as::<_, (String, String)>(sql).bind(user_key).bind(client_id).fetch_optional(pool).await)
}

pub async fn consent_put(
    store: &Store,
    user_key: &str,
    client_id: &str,
    scope: &str,
    fingerprint: &str,
    now: i64,
) -> Result<(), sqlx::Error> {
    let sql = "INSERT INTO oauth_consents (user_key, client_id, scope, fingerprint, granted_ms) VALUES ($1, $2, $3, $4, $5) \
               ON CONFLICT (user_key, client_id) DO UPDATE SET scope = $3, fingerprint = $4, granted_ms = $5";
    on_pool!(store, |pool| sqlx::query(sql)
        .bind(user_key)
        .bind(client_id)
        .bind(scope)
        .bind(fingerprint)
        .bind(now)
        .execute(pool)
        .await
        .map(|r| r.rows_affected()))?;
    Ok(())
}

pub async fn consent_delete(store: &Store, user_key: &str, client_id: &str) -> Result<(), sqlx::Error> {
    let sql = "DELETE FROM oauth_consents WHERE user_key = $1 AND client_id = $2";
    on_pool!(store, |pool| sqlx::query(sql).bind(user_key).bind(client_id).execute(pool).await.map(|r| r.rows_affected()))?;
    Ok(())
}

/// Deletes what can no longer be used: ended transactions, codes a day past expiry (kept
/// that long so a late replay still finds and revokes its grant), expired refresh tokens,
/// rotated ones after a week, and grants ended a day ago. Returns the rows deleted.
pub async fn purge(store: &Store, now: i64) -> Result<u64, sqlx::Error> {
    let day = 86_400_000;
    let statements: [(&str, i64); 5] = [
        ("DELETE FROM oauth_transactions WHERE expires_ms < $1", now),
        ("DELETE FROM oauth_codes WHERE expires_ms < $1", now - day),
        ("DELETE FROM oauth_refresh_tokens WHERE expires_ms < $1", now),
        // Rotated tokens are kept a week to catch a stolen one used again; older replays are
        // refused as unknown, without revoking the grant.
        ("DELETE FROM oauth_refresh_tokens WHERE used_ms < $1", now - 7 * day),
        ("DELETE FROM oauth_grants WHERE expires_ms < $1 OR revoked_ms < $1", now - day),
    ];
    let mut total = 0;
    for (sql, bound) in statements {
        total += on_pool!(store, |pool| sqlx::query(sql).bind(bound).execute(pool).await.map(|r| r.rows_affected()))?;
    }
    Ok(total)
}
