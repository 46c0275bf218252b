//! The `catalog_entries` and `catalog_baselines` tables. One SQL text serves SQLite and
//! Postgres. Every write is safe with several replicas listing the same upstream at once:
//! inserts are `ON CONFLICT DO NOTHING` (the unique keys decide who was first), decisions are
//! conditional on the state read (`WHERE state = 'pending'`), and an approval supersedes the
//! previous one in the same transaction (the partial unique index allows one approved version).

use serde_json::Value;

use super::{Kind, State};
use crate::store::{Store, on_pool};

/// One stored version of an entry.
#[derive(Clone, Debug)]
pub struct Row {
    pub id: String,
    pub source: String,
    pub kind: Kind,
    pub name: String,
    pub fingerprint: String,
    /// The listed JSON; loaded only where it is needed (approved rows when reviewing).
    pub entry: Option<Value>,
    pub state: State,
    pub first_seen_ms: i64,
    pub decided_by: Option<String>,
    pub decided_ms: Option<i64>,
}

/// A version to store.
pub struct New<'a> {
    pub source: &'a str,
    pub kind: Kind,
    pub name: &'a str,
    pub fingerprint: &'a str,
    pub entry: &'a str,
    pub state: State,
    pub by: Option<&'a str>,
}

fn row<R: sqlx::Row>(row: &R) -> Result<Row, sqlx::Error>
where
    for<'r> &'r str: sqlx::ColumnIndex<R>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<String>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<i64>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let bad = |what: &str| sqlx::Error::Decode(format!("catalog_entries: unknown {what}").into());
    let kind: String = row.try_get("kind")?;
    let state: String = row.try_get("state")?;
    let entry: Option<String> = row.try_get("entry")?;
    Ok(Row {
        id: row.try_get("id")?,
        source: row.try_get("source")?,
        kind: Kind::parse(&kind).ok_or_else(|| bad("kind"))?,
        name: row.try_get("name")?,
        fingerprint: row.try_get("fingerprint")?,
        entry: entry.map(|e| serde_json::from_str(&e)).transpose().map_err(|e| sqlx::Error::Decode(Box::new(e)))?,
        state: State::parse(&state).ok_or_else(|| bad("state"))?,
        first_seen_ms: row.try_get("first_seen_ms")?,
        decided_by: row.try_get("decided_by")?,
        decided_ms: row.try_get("decided_ms")?,
    })
}

macro_rules! columns {
    () => {
        "id, source, kind, name, fingerprint, entry, state, first_seen_ms, decided_by, decided_ms"
    };
}
/// The same, with the entry only for approved rows (a review needs no other).
macro_rules! review_columns {
    () => {
        "id, source, kind, name, fingerprint, CASE WHEN state = 'approved' THEN entry END AS entry, state, first_seen_ms, decided_by, decided_ms"
    };
}

pub(super) fn now_ms() -> i64 {
    let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// Every stored version of `source`'s entries (approved ones with their JSON), and whether its
/// first listing was pinned.
pub async fn load_source(store: &Store, source: &str) -> Result<(Vec<Row>, bool), sqlx::Error> {
    let sql = concat!("SELECT ", review_columns!(), " FROM catalog_entries WHERE source = $1");
    let baseline = "SELECT at_ms FROM catalog_baselines WHERE source = $1";
    on_pool!(store, |pool| {
        let rows = sqlx::query(sql).bind(source).fetch_all(pool).await?;
        let pinned = sqlx::query(baseline).bind(source).fetch_optional(pool).await?.is_some();
        Ok((rows.iter().map(row).collect::<Result<Vec<_>, _>>()?, pinned))
    })
}

/// Stores a version unless one with its (source, kind, name, fingerprint) exists, or (for an
/// approved one) another version is approved already. Returns whether it was stored.
pub async fn insert(store: &Store, new: &New<'_>) -> Result<bool, sqlx::Error> {
    let sql =
        concat!("INSERT INTO catalog_entries (", columns!(), ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING");
    let now = now_ms();
    let decided = (new.state != State::Pending).then_some(now);
    let id = uuid::Uuid::now_v7().simple().to_string();
    on_pool!(store, |pool| {
        let q = sqlx::query(sql).bind(&id).bind(new.source).bind(new.kind.as_str()).bind(new.name).bind(new.fingerprint);
        let q = q.bind(new.entry).bind(new.state.as_str()).bind(now).bind(new.by).bind(decided);
        Ok(q.execute(pool).await?.rows_affected() == 1)
    })
}

/// A superseded version listed again (the upstream went back to it) waits again: it is not
/// what is approved now. Returns whether this call changed it.
pub async fn repend(store: &Store, id: &str) -> Result<bool, sqlx::Error> {
    let sql = "UPDATE catalog_entries SET state = 'pending', first_seen_ms = $2, decided_by = NULL, decided_ms = NULL \
               WHERE id = $1 AND state = 'superseded'";
    on_pool!(store, |pool| Ok(sqlx::query(sql).bind(id).bind(now_ms()).execute(pool).await?.rows_affected() == 1))
}

/// Records that `source`'s first listing was pinned (the first replica to say so wins).
pub async fn set_baseline(store: &Store, source: &str) -> Result<(), sqlx::Error> {
    let sql = "INSERT INTO catalog_baselines (source, at_ms) VALUES ($1, $2) ON CONFLICT DO NOTHING";
    on_pool!(store, |pool| sqlx::query(sql).bind(source).bind(now_ms()).execute(pool).await.map(drop))
}

pub async fn get(store: &Store, id: &str) -> Result<Option<Row>, sqlx::Error> {
    let sql = concat!("SELECT ", columns!(), " FROM catalog_entries WHERE id = $1");
    on_pool!(store, |pool| sqlx::query(sql).bind(id).fetch_optional(pool).await?.as_ref().map(row).transpose())
}

/// The approved version of an entry, if any.
pub async fn approved(store: &Store, source: &str, kind: Kind, name: &str) -> Result<Option<Row>, sqlx::Error> {
    let sql = concat!("SELECT ", columns!(), " FROM catalog_entries WHERE source = $1 AND kind = $2 AND name = $3 AND state = 'approved'");
    on_pool!(store, |pool| {
        let found = sqlx::query(sql).bind(source).bind(kind.as_str()).bind(name).fetch_optional(pool).await?;
        found.as_ref().map(row).transpose()
    })
}

/// Stored versions in `state` (all states when `None`), of `source` when given, newest first.
pub async fn list(store: &Store, state: Option<State>, source: Option<&str>, limit: i64) -> Result<Vec<Row>, sqlx::Error> {
    let sql = concat!(
        "SELECT ",
        columns!(),
        " FROM catalog_entries WHERE ($1 IS NULL OR state = $1) AND ($2 IS NULL OR source = $2) ",
        "ORDER BY first_seen_ms DESC, id DESC LIMIT $3"
    );
    on_pool!(store, |pool| {
        let rows = sqlx::query(sql).bind(state.map(State::as_str)).bind(source).bind(limit).fetch_all(pool).await?;
        rows.iter().map(row).collect()
    })
}

/// Decides pending version `pending`: approving supersedes the version approved before, in one
/// transaction. `Ok(false)` when it is no longer pending (another decision came first).
pub async fn decide(store: &Store, pending: &Row, approve: bool, by: Option<&str>) -> Result<bool, sqlx::Error> {
    let supersede = "UPDATE catalog_entries SET state = 'superseded' \
                     WHERE source = $1 AND kind = $2 AND name = $3 AND state = 'approved' AND id <> $4";
    let decide = "UPDATE catalog_entries SET state = $2, decided_by = $3, decided_ms = $4 WHERE id = $1 AND state = 'pending'";
    let to = if approve { State::Approved } else { State::Rejected };
    let now = now_ms();
    on_pool!(store, |pool| {
        // The UPDATEs come first, so on SQLite the transaction holds the write lock from its
        // first statement.
        let mut tx = pool.begin().await?;
        if approve {
            let q = sqlx::query(supersede).bind(&pending.source).bind(pending.kind.as_str()).bind(&pending.name).bind(&pending.id);
            q.execute(&mut *tx).await?;
        }
        let decided = sqlx::query(decide).bind(&pending.id).bind(to.as_str()).bind(by).bind(now).execute(&mut *tx).await?;
        if decided.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(false);
        }
        tx.commit().await?;
        Ok(true)
    })
}
