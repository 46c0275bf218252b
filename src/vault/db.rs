//! The vault's tables (`migrations/*/20261127000004_vault.sql`), one SQL text for SQLite and
//! Postgres. What must happen once (a connect step, a refresh) is one conditional `UPDATE`, so
//! two replicas racing cannot both win.

use crate::store::{Store, on_pool};

/// A grant row: a user's sealed tokens at one upstream.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct GrantRow {
    pub id: String,
    pub principal: String,
    /// The user's subject (the part of `principal` after the issuer), for operators' filters.
    pub subject: String,
    pub upstream: String,
    /// The authorization server that issued the tokens: they go to no other.
    pub issuer: String,
    pub key_id: String,
    pub sealed: String,
    pub scopes: String,
    pub expires_ms: i64,
    pub version: i64,
    pub lease_until_ms: i64,
    pub created_ms: i64,
    pub updated_ms: i64,
    pub used_ms: i64,
}

macro_rules! grant_select {
    ($rest:literal) => {
        concat!(
            "SELECT id, principal, subject, upstream, issuer, key_id, sealed, scopes, expires_ms, version, lease_until_ms, created_ms, updated_ms, used_ms FROM vault_grants ",
            $rest
        )
    };
}

pub async fn grant_get(store: &Store, principal: &str, upstream: &str) -> Result<Option<GrantRow>, sqlx::Error> {
    let sql = grant_select!("WHERE principal = $1 AND upstream = $2");
    on_pool!(store, |pool| sqlx::query_as::<_, GrantRow>(sql).bind(principal).bind(upstream).fetch_optional(pool).await)
}

pub async fn grant_by_id(store: &Store, id: &str) -> Result<Option<GrantRow>, sqlx::Error> {
    let sql = grant_select!("WHERE id = $1");
    on_pool!(store, |pool| sqlx::query_as::<_, GrantRow>(sql).bind(id).fetch_optional(pool).await)
}

/// The grants of a user (under either of their keys), newest first.
pub async fn grants_of(store: &Store, keys: &[String; 2]) -> Result<Vec<GrantRow>, sqlx::Error> {
    let sql = grant_select!("WHERE principal = $1 OR principal = $2 ORDER BY updated_ms DESC LIMIT 1000");
    on_pool!(store, |pool| sqlx::query_as::<_, GrantRow>(sql).bind(&keys[0]).bind(&keys[1]).fetch_all(pool).await)
}

/// Grants newest first, at most `limit`, of one user (by subject) and one upstream when given
/// (an empty string: any).
pub async fn grants_all(store: &Store, subject: &str, upstream: &str, limit: i64) -> Result<Vec<GrantRow>, sqlx::Error> {
    let sql = grant_select!(
        "WHERE (CAST($1 AS TEXT) = '' OR subject = $1) AND (CAST($2 AS TEXT) = '' OR upstream = $2) ORDER BY updated_ms DESC LIMIT $3"
    );
    on_pool!(store, |pool| sqlx::query_as::<_, GrantRow>(sql).bind(subject).bind(upstream).bind(limit).fetch_all(pool).await)
}

/// Stores a new connection for (principal, upstream), replacing any earlier one.
pub async fn grant_put(store: &Store, row: &GrantRow) -> Result<(), sqlx::Error> {
    let delete = "DELETE FROM vault_grants WHERE principal = $1 AND upstream = $2";
    let insert = "INSERT INTO vault_grants (id, principal, subject, upstream, issuer, key_id, sealed, scopes, expires_ms, version, lease_until_ms, created_ms, updated_ms, used_ms) \
                  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 1, 0, $10, $10, 0)";
    on_pool!(store, |pool| {
        let mut tx = pool.begin().await?;
        sqlx::query(delete).bind(&row.principal).bind(&row.upstream).execute(&mut *tx).await?;
        sqlx::query(insert)
            .bind(&row.id)
            .bind(&row.principal)
            .bind(&row.subject)
            .bind(&row.upstream)
            .bind(&row.issuer)
            .bind(&row.key_id)
            .bind(&row.sealed)
            .bind(&row.scopes)
            .bind(row.expires_ms)
            .bind(row.created_ms)
            .execute(&mut *tx)
            .await?;
        tx.commit().await
    })
}

/// Takes the refresh lease of grant `id` at `version` until `until`; false when another
/// replica holds it or the grant changed meanwhile.
pub async fn grant_lease(store: &Store, id: &str, version: i64, now: i64, until: i64) -> Result<bool, sqlx::Error> {
    let sql = "UPDATE vault_grants SET lease_until_ms = $1 WHERE id = $2 AND version = $3 AND lease_until_ms < $4";
    let n = on_pool!(store, |pool| sqlx::query(sql)
        .bind(until)
        .bind(id)
        .bind(version)
        .bind(now)
        .execute(pool)
        .await
        .map(|r| r.rows_affected()))?;
    Ok(n == 1)
}

/// Writes grant `id`'s new tokens (a refresh, or a re-seal with the current key) if it is
/// still at `version`; the version grows by one and the lease ends.
pub async fn grant_update(
    store: &Store,
    id: &str,
    version: i64,
    key_id: &str,
    sealed: &str,
    expires_ms: i64,
    now: i64,
) -> Result<bool, sqlx::Error> {
    let sql = "UPDATE vault_grants SET key_id = $1, sealed = $2, expires_ms = $3, version = version + 1, lease_until_ms = 0, updated_ms = $4 \
               WHERE id = $5 AND version = $6";
    let n = on_pool!(store, |pool| sqlx::query(sql)
        .bind(key_id)
        .bind(sealed)
        .bind(expires_ms)
        .bind(now)
        .bind(id)
        .bind(version)
        .execute(pool)
        .await
        .map(|r| r.rows_affected()))?;
    Ok(n == 1)
}

pub async fn grant_used(store: &Store, id: &str, now: i64) -> Result<(), sqlx::Error> {
    let sql = "UPDATE vault_grants SET used_ms = $1 WHERE id = $2";
    on_pool!(store, |pool| sqlx::query(sql).bind(now).bind(id).execute(pool).await.map(|_| ()))
}

/// Deletes grant `id`; false when it was already gone.
pub async fn grant_delete(store: &Store, id: &str) -> Result<bool, sqlx::Error> {
    let sql = "DELETE FROM vault_grants WHERE id = $1";
    let n = on_pool!(store, |pool| sqlx::query(sql).bind(id).execute(pool).await.map(|r| r.rows_affected()))?;
    Ok(n == 1)
}

/// Deletes grant `id` if it is still at `version` (what a refresh read and found refused);
/// a newer version written meanwhile stays.
pub async fn grant_delete_version(store: &Store, id: &str, version: i64) -> Result<bool, sqlx::Error> {
    let sql = "DELETE FROM vault_grants WHERE id = $1 AND version = $2";
    let n = on_pool!(store, |pool| sqlx::query(sql).bind(id).bind(version).execute(pool).await.map(|r| r.rows_affected()))?;
    Ok(n == 1)
}

/// Forgets everything of an upstream: its users' grants, its pinned authorization server, and
/// toolgate's registrations there (the upstream was removed or now points elsewhere).
pub async fn forget_upstream(store: &Store, upstream: &str) -> Result<u64, sqlx::Error> {
    let statements = [
        "DELETE FROM vault_grants WHERE upstream = $1",
        "DELETE FROM vault_issuers WHERE upstream = $1",
        "DELETE FROM vault_clients WHERE upstream = $1",
    ];
    let mut grants = 0;
    for (i, sql) in statements.into_iter().enumerate() {
        let n = on_pool!(store, |pool| sqlx::query(sql).bind(upstream).execute(pool).await.map(|r| r.rows_affected()))?;
        if i == 0 {
            grants = n;
        }
    }
    Ok(grants)
}

/// The authorization server pinned for `upstream`: the one stored first (by any replica).
pub async fn issuer_pin(store: &Store, upstream: &str, issuer: &str, now: i64) -> Result<String, sqlx::Error> {
    let insert = "INSERT INTO vault_issuers (upstream, issuer, pinned_ms) VALUES ($1, $2, $3) ON CONFLICT (upstream) DO NOTHING";
    on_pool!(store, |pool| sqlx::query(insert).bind(upstream).bind(issuer).bind(now).execute(pool).await.map(|_| ()))?;
    let select = "SELECT issuer FROM vault_issuers WHERE upstream = $1";
    let pinned: Option<(String,)> = on_pool!(store, |pool| sqlx::query_as(select).bind(upstream).fetch_optional(pool).await)?;
    Ok(pinned.map_or_else(|| issuer.to_owned(), |(i,)| i))
}

/// Seals grant `id` again (another key) if it is still at `version` and no replica holds its
/// refresh lease: a refresh in progress keeps its right to write.
pub async fn grant_reseal(store: &Store, id: &str, version: i64, key_id: &str, sealed: &str, now: i64) -> Result<bool, sqlx::Error> {
    let sql =
        "UPDATE vault_grants SET key_id = $1, sealed = $2, version = version + 1 WHERE id = $3 AND version = $4 AND lease_until_ms < $5";
    let n = on_pool!(store, |pool| sqlx::query(sql)
        .bind(key_id)
        .bind(sealed)
        .bind(id)
        .bind(version)
        .bind(now)
        .execute(pool)
        .await
        .map(|r| r.rows_affected()))?;
    Ok(n == 1)
}

/// Grants sealed with another key than `current`, at most `limit` (the re-seal pass).
pub async fn grants_sealed_with_other(store: &Store, current: &str, limit: i64) -> Result<Vec<GrantRow>, sqlx::Error> {
    let sql = grant_select!("WHERE key_id <> $1 LIMIT $2");
    on_pool!(store, |pool| sqlx::query_as::<_, GrantRow>(sql).bind(current).bind(limit).fetch_all(pool).await)
}

/// A connect transaction: a link an elicitation sent, then its browser steps.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct ConnectRow {
    pub id: String,
    pub principal: Option<String>,
    pub upstream: String,
    pub stage: String,
    pub browser_hash: Option<String>,
    pub state_hash: Option<String>,
    pub pending: Option<String>,
    pub identity: Option<String>,
    pub expires_ms: i64,
}

pub async fn connect_insert(store: &Store, row: &ConnectRow, now: i64) -> Result<(), sqlx::Error> {
    let sql = "INSERT INTO vault_connects (id, principal, upstream, stage, browser_hash, state_hash, pending, identity, created_ms, expires_ms) \
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)";
    on_pool!(store, |pool| sqlx::query(sql)
        .bind(&row.id)
        .bind(&row.principal)
        .bind(&row.upstream)
        .bind(&row.stage)
        .bind(&row.browser_hash)
        .bind(&row.state_hash)
        .bind(&row.pending)
        .bind(&row.identity)
        .bind(now)
        .bind(row.expires_ms)
        .execute(pool)
        .await
        .map(|_| ()))
}

macro_rules! connect_select {
    ($rest:literal) => {
        concat!(
            "SELECT id, principal, upstream, stage, browser_hash, state_hash, pending, identity, expires_ms FROM vault_connects ",
            $rest
        )
    };
}

pub async fn connect_get(store: &Store, id: &str) -> Result<Option<ConnectRow>, sqlx::Error> {
    let sql = connect_select!("WHERE id = $1");
    on_pool!(store, |pool| sqlx::query_as::<_, ConnectRow>(sql).bind(id).fetch_optional(pool).await)
}

pub async fn connect_by_state(store: &Store, state_hash: &str) -> Result<Option<ConnectRow>, sqlx::Error> {
    let sql = connect_select!("WHERE state_hash = $1");
    on_pool!(store, |pool| sqlx::query_as::<_, ConnectRow>(sql).bind(state_hash).fetch_optional(pool).await)
}

/// What a step changes besides the stage (`None` keeps the column).
#[derive(Default)]
pub struct Step<'a> {
    pub browser_hash: Option<&'a str>,
    pub state_hash: Option<&'a str>,
    pub pending: Option<&'a str>,
    pub identity: Option<&'a str>,
}

/// Moves a live connect from stage `from` to `to`; false when it was not at `from` any more
/// (replayed, raced) or has expired.
pub async fn connect_advance(store: &Store, id: &str, from: &str, to: &str, step: Step<'_>, now: i64) -> Result<bool, sqlx::Error> {
    let sql = "UPDATE vault_connects SET stage = $1, browser_hash = COALESCE($2, browser_hash), state_hash = COALESCE($3, state_hash), \
               pending = COALESCE($4, pending), identity = COALESCE($5, identity) WHERE id = $6 AND stage = $7 AND expires_ms > $8";
    let n = on_pool!(store, |pool| sqlx::query(sql)
        .bind(to)
        .bind(step.browser_hash)
        .bind(step.state_hash)
        .bind(step.pending)
        .bind(step.identity)
        .bind(id)
        .bind(from)
        .bind(now)
        .execute(pool)
        .await
        .map(|r| r.rows_affected()))?;
    Ok(n == 1)
}

/// Removes connects that expired before `before`.
pub async fn connects_purge(store: &Store, before: i64) -> Result<u64, sqlx::Error> {
    let sql = "DELETE FROM vault_connects WHERE expires_ms < $1";
    on_pool!(store, |pool| sqlx::query(sql).bind(before).execute(pool).await.map(|r| r.rows_affected()))
}

/// toolgate's registration at an upstream's authorization server.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct ClientRow {
    pub client_id: String,
    pub key_id: Option<String>,
    pub sealed_secret: Option<String>,
}

pub async fn client_get(store: &Store, upstream: &str, issuer: &str) -> Result<Option<ClientRow>, sqlx::Error> {
    let sql = "SELECT client_id, key_id, sealed_secret FROM vault_clients WHERE upstream = $1 AND issuer = $2";
    on_pool!(store, |pool| sqlx::query_as::<_, ClientRow>(sql).bind(upstream).bind(issuer).fetch_optional(pool).await)
}

/// Keeps a registration unless another replica stored one first (then that one counts).
pub async fn client_put(store: &Store, upstream: &str, issuer: &str, row: &ClientRow, now: i64) -> Result<(), sqlx::Error> {
    let sql = "INSERT INTO vault_clients (upstream, issuer, client_id, key_id, sealed_secret, created_ms) VALUES ($1, $2, $3, $4, $5, $6) \
               ON CONFLICT (upstream, issuer) DO NOTHING";
    on_pool!(store, |pool| sqlx::query(sql)
        .bind(upstream)
        .bind(issuer)
        .bind(&row.client_id)
        .bind(&row.key_id)
        .bind(&row.sealed_secret)
        .bind(now)
        .execute(pool)
        .await
        .map(|_| ()))
}

/// Forgets toolgate's registration at `issuer` for `upstream` (the server rejected it).
pub async fn client_forget(store: &Store, upstream: &str, issuer: &str) -> Result<(), sqlx::Error> {
    let sql = "DELETE FROM vault_clients WHERE upstream = $1 AND issuer = $2";
    on_pool!(store, |pool| sqlx::query(sql).bind(upstream).bind(issuer).execute(pool).await.map(|_| ()))
}
