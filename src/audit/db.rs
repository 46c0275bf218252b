//! The audit table's SQL, once per dialect: batch insert, filtered read, prune.

use std::borrow::Cow;

use futures_util::TryStreamExt;
use serde_json::Value;
use sqlx::{Postgres, QueryBuilder, Row, Sqlite};
use time::{OffsetDateTime, UtcOffset};
use uuid::Uuid;

use super::record::{AuditRecord, EventKind, Outcome};
use crate::store::{Backend, Store};

/// Rows per Postgres statement. sqlx 0.9.0 does not set TCP_NODELAY (transact-rs/sqlx#4335,
/// fixed upstream by #4336, unreleased): a statement larger than one TCP segment waits ~40 ms
/// for a delayed ACK. Measured on loopback: 256-row statements 5.7k rows/s, 64-row ones 51k.
/// Remove this chunking once sqlx sets TCP_NODELAY again.
const PG_ROWS_PER_STATEMENT: usize = 64;
/// Rows per DELETE when pruning, so a large prune never holds the table for long.
const PRUNE_CHUNK: i64 = 10_000;

const COLUMNS: &str = "id, time, request_id, session_id, issuer, subject, client_id, client_ip, kind, tool, args_sha256, arguments, outcome, detail, duration_ms, result_bytes, replica_id, trace_id, server";

/// Rows per SQLite statement: a batch goes as statements of these sizes (largest first), so
/// only these few statements are ever prepared and each is cached on its connection whatever
/// the batch's length (a statement per length thrashed the cache; a JSON parameter unpacked
/// with `json_each` spent a third of the insert re-parsing JSON).
const SQLITE_CHUNKS: [usize; 9] = [256, 128, 64, 32, 16, 8, 4, 2, 1];

const PG_INSERT: &str = "INSERT INTO audit_log (id, time, request_id, session_id, issuer, subject, client_id, client_ip, kind, tool, args_sha256, arguments, outcome, detail, duration_ms, result_bytes, replica_id, trace_id, server) \
     SELECT * FROM UNNEST($1::uuid[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $15::int8[], $16::int8[], $17::text[], $18::text[], $19::text[]) \
     ON CONFLICT (id) DO NOTHING";

/// Which records to read.
#[derive(Clone, Debug, Default)]
pub struct AuditFilter {
    pub since: Option<OffsetDateTime>,
    pub until: Option<OffsetDateTime>,
    pub tool: Option<String>,
    pub subject: Option<String>,
    pub outcome: Option<Outcome>,
    pub kind: Option<EventKind>,
    pub limit: Option<u64>,
}

/// Inserts `records` atomically (one transaction); rows whose id is already present are skipped, so a
/// replayed batch never duplicates. Returns the number of rows actually inserted.
pub async fn insert_batch(store: &Store, records: &[AuditRecord]) -> Result<u64, sqlx::Error> {
    if records.is_empty() {
        return Ok(0);
    }
    let mut inserted = 0;
    match store.backend() {
        Backend::Sqlite(pool) => {
            let mut tx = pool.begin().await?;
            let mut rest = records;
            while !rest.is_empty() {
                let size = SQLITE_CHUNKS.into_iter().find(|&n| n <= rest.len()).unwrap_or(1);
                let (chunk, tail) = rest.split_at(size);
                rest = tail;
                inserted += sqlite_insert(chunk).build().execute(&mut *tx).await?.rows_affected();
            }
            tx.commit().await?;
        }
        Backend::Postgres(pool) => {
            if records.len() <= PG_ROWS_PER_STATEMENT {
                // A single statement is atomic on its own: no BEGIN/COMMIT round trips.
                return Ok(pg_insert(records).execute(pool).await?.rows_affected());
            }
            let mut tx = pool.begin().await?;
            for chunk in records.chunks(PG_ROWS_PER_STATEMENT) {
                inserted += pg_insert(chunk).execute(&mut *tx).await?.rows_affected();
            }
            tx.commit().await?;
        }
    }
    Ok(inserted)
}

/// One multi-row INSERT of `chunk` (one of [`SQLITE_CHUNKS`] long).
fn sqlite_insert(chunk: &[AuditRecord]) -> QueryBuilder<Sqlite> {
    let mut q = QueryBuilder::<Sqlite>::new(format!("INSERT INTO audit_log ({COLUMNS}) "));
    q.push_values(chunk, |mut b, r| {
        b.push_bind(r.id)
            .push_bind(sqlite_time(r.time))
            .push_bind(opt_clean(&r.request_id))
            .push_bind(opt_clean(&r.session_id))
            .push_bind(opt_clean(&r.issuer))
            .push_bind(opt_clean(&r.subject))
            .push_bind(opt_clean(&r.client_id))
            .push_bind(opt_clean(&r.client_ip))
            .push_bind(r.kind.as_str())
            .push_bind(opt_clean(&r.tool))
            .push_bind(opt_clean(&r.args_sha256))
            // Stored as JSON text, as the column always held it.
            .push_bind(r.arguments.as_ref().map(Value::to_string))
            .push_bind(r.outcome.as_str())
            .push_bind(opt_clean(&r.detail))
            .push_bind(r.duration_ms.map(to_i64))
            .push_bind(r.result_bytes.map(to_i64))
            .push_bind(clean(&r.replica_id))
            .push_bind(opt_clean(&r.trace_id))
            .push_bind(opt_clean(&r.server));
    });
    // The key is (time, id): a replayed record has both, so it is skipped.
    q.push(" ON CONFLICT (time, id) DO NOTHING");
    q
}

fn opt_clean(s: &Option<String>) -> Option<Cow<'_, str>> {
    s.as_deref().map(clean)
}

/// One statement with one array per column: always the same 19 parameters, so it is prepared
/// once per connection (a VALUES list would be a new statement for every batch length).
fn pg_insert(records: &[AuditRecord]) -> sqlx::query::Query<'static, Postgres, sqlx::postgres::PgArguments> {
    let col = |f: fn(&AuditRecord) -> Option<String>| records.iter().map(f).collect::<Vec<_>>();
    sqlx::query(PG_INSERT)
        .bind(records.iter().map(|r| r.id).collect::<Vec<_>>())
        .bind(records.iter().map(|r| r.time).collect::<Vec<_>>())
        .bind(col(|r| text(&r.request_id)))
        .bind(col(|r| text(&r.session_id)))
        .bind(col(|r| text(&r.issuer)))
        .bind(col(|r| text(&r.subject)))
        .bind(col(|r| text(&r.client_id)))
        .bind(col(|r| text(&r.client_ip)))
        .bind(records.iter().map(|r| r.kind.as_str()).collect::<Vec<_>>())
        .bind(col(|r| text(&r.tool)))
        .bind(col(|r| text(&r.args_sha256)))
        .bind(col(|r| r.arguments.as_ref().map(|a| a.to_string())))
        .bind(records.iter().map(|r| r.outcome.as_str()).collect::<Vec<_>>())
        .bind(col(|r| text(&r.detail)))
        .bind(records.iter().map(|r| r.duration_ms.map(to_i64)).collect::<Vec<_>>())
        .bind(records.iter().map(|r| r.result_bytes.map(to_i64)).collect::<Vec<_>>())
        .bind(records.iter().map(|r| clean(&r.replica_id).into_owned()).collect::<Vec<_>>())
        .bind(col(|r| text(&r.trace_id)))
        .bind(col(|r| text(&r.server)))
}

/// Calls `each` for every record matching `filter`, oldest first, without holding them all.
pub async fn for_each(
    store: &Store,
    filter: &AuditFilter,
    mut each: impl FnMut(AuditRecord) -> std::io::Result<()>,
) -> Result<(), sqlx::Error> {
    match store.backend() {
        Backend::Sqlite(pool) => {
            let mut q = QueryBuilder::<Sqlite>::new(format!("SELECT {COLUMNS} FROM audit_log WHERE 1=1"));
            if let Some(t) = filter.since {
                q.push(" AND time >= ").push_bind(sqlite_time(t));
            }
            if let Some(t) = filter.until {
                q.push(" AND time < ").push_bind(sqlite_time(t));
            }
            push_common_filters_sqlite(&mut q, filter);
            let mut rows = q.build().fetch(pool);
            while let Some(row) = rows.try_next().await? {
                each(sqlite_row(&row)?).map_err(sqlx::Error::Io)?;
            }
        }
        Backend::Postgres(pool) => {
            let mut q = QueryBuilder::<Postgres>::new(format!("SELECT {COLUMNS} FROM audit_log WHERE 1=1"));
            if let Some(t) = filter.since {
                q.push(" AND time >= ").push_bind(t);
            }
            if let Some(t) = filter.until {
                q.push(" AND time < ").push_bind(t);
            }
            if let Some(v) = &filter.tool {
                q.push(" AND tool = ").push_bind(v.clone());
            }
            if let Some(v) = &filter.subject {
                q.push(" AND subject = ").push_bind(v.clone());
            }
            if let Some(v) = filter.outcome {
                q.push(" AND outcome = ").push_bind(v.as_str());
            }
            if let Some(v) = filter.kind {
                q.push(" AND kind = ").push_bind(v.as_str());
            }
            q.push(" ORDER BY time, id");
            if let Some(n) = filter.limit {
                q.push(" LIMIT ").push_bind(to_i64(n));
            }
            let mut rows = q.build().fetch(pool);
            while let Some(row) = rows.try_next().await? {
                each(pg_row(&row)?).map_err(sqlx::Error::Io)?;
            }
        }
    }
    Ok(())
}

/// Every record matching `filter`, oldest first.
pub async fn query(store: &Store, filter: &AuditFilter) -> Result<Vec<AuditRecord>, sqlx::Error> {
    let mut out = Vec::new();
    for_each(store, filter, |r| {
        out.push(r);
        Ok(())
    })
    .await?;
    Ok(out)
}

/// Number of rows in the audit table.
pub async fn count(store: &Store) -> Result<i64, sqlx::Error> {
    let sql = "SELECT COUNT(*) FROM audit_log";
    match store.backend() {
        Backend::Sqlite(pool) => sqlx::query_scalar(sql).fetch_one(pool).await,
        Backend::Postgres(pool) => sqlx::query_scalar(sql).fetch_one(pool).await,
    }
}

/// Deletes records older than `cutoff`, in chunks; returns how many went.
pub async fn prune(store: &Store, cutoff: OffsetDateTime) -> Result<u64, sqlx::Error> {
    let mut total = 0;
    loop {
        let deleted = match store.backend() {
            Backend::Sqlite(pool) => {
                sqlx::query("DELETE FROM audit_log WHERE rowid IN (SELECT rowid FROM audit_log WHERE time < ? LIMIT ?)")
                    .bind(sqlite_time(cutoff))
                    .bind(PRUNE_CHUNK)
                    .execute(pool)
                    .await?
                    .rows_affected()
            }
            Backend::Postgres(pool) => sqlx::query("DELETE FROM audit_log WHERE id IN (SELECT id FROM audit_log WHERE time < $1 LIMIT $2)")
                .bind(cutoff)
                .bind(PRUNE_CHUNK)
                .execute(pool)
                .await?
                .rows_affected(),
        };
        total += deleted;
        if deleted < PRUNE_CHUNK as u64 {
            return Ok(total);
        }
    }
}

fn push_common_filters_sqlite(q: &mut QueryBuilder<Sqlite>, filter: &AuditFilter) {
    if let Some(v) = &filter.tool {
        q.push(" AND tool = ").push_bind(v.clone());
    }
    if let Some(v) = &filter.subject {
        q.push(" AND subject = ").push_bind(v.clone());
    }
    if let Some(v) = filter.outcome {
        q.push(" AND outcome = ").push_bind(v.as_str());
    }
    if let Some(v) = filter.kind {
        q.push(" AND kind = ").push_bind(v.as_str());
    }
    q.push(" ORDER BY time, id");
    if let Some(n) = filter.limit {
        q.push(" LIMIT ").push_bind(to_i64(n));
    }
}

fn sqlite_row(row: &sqlx::sqlite::SqliteRow) -> Result<AuditRecord, sqlx::Error> {
    // SQLite stores the id as its 16 bytes and the time as microseconds since the epoch.
    let micros: i64 = row.try_get("time")?;
    let time = OffsetDateTime::from_unix_timestamp_nanos(i128::from(micros) * 1000).map_err(|e| decode("time", e))?;
    record_from(row, row.try_get::<Uuid, _>("id")?, time)
}

fn pg_row(row: &sqlx::postgres::PgRow) -> Result<AuditRecord, sqlx::Error> {
    record_from(row, row.try_get("id")?, row.try_get::<OffsetDateTime, _>("time")?.to_offset(UtcOffset::UTC))
}

/// Every column but the two whose types differ per backend.
fn record_from<'r, R>(row: &'r R, id: Uuid, time: OffsetDateTime) -> Result<AuditRecord, sqlx::Error>
where
    R: Row,
    &'r str: sqlx::ColumnIndex<R>,
    String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    Ok(AuditRecord {
        id,
        time,
        request_id: row.try_get("request_id")?,
        session_id: row.try_get("session_id")?,
        issuer: row.try_get("issuer")?,
        subject: row.try_get("subject")?,
        client_id: row.try_get("client_id")?,
        client_ip: row.try_get("client_ip")?,
        kind: row.try_get::<String, _>("kind")?.parse().map_err(|e: String| decode("kind", e))?,
        tool: row.try_get("tool")?,
        args_sha256: row.try_get("args_sha256")?,
        arguments: json(row.try_get("arguments")?)?,
        outcome: row.try_get::<String, _>("outcome")?.parse().map_err(|e: String| decode("outcome", e))?,
        detail: row.try_get("detail")?,
        duration_ms: row.try_get::<Option<i64>, _>("duration_ms")?.map(to_u64),
        result_bytes: row.try_get::<Option<i64>, _>("result_bytes")?.map(to_u64),
        replica_id: row.try_get("replica_id")?,
        trace_id: row.try_get("trace_id")?,
        server: row.try_get("server")?,
    })
}

/// SQLite's time column: microseconds since the Unix epoch, so integer order is time order.
fn sqlite_time(t: OffsetDateTime) -> i64 {
    i64::try_from(t.unix_timestamp_nanos() / 1000).unwrap_or(i64::MAX)
}

fn json(text: Option<String>) -> Result<Option<serde_json::Value>, sqlx::Error> {
    text.map(|t| serde_json::from_str(&t).map_err(|e| decode("arguments", e))).transpose()
}

fn decode(column: &str, e: impl std::fmt::Display) -> sqlx::Error {
    sqlx::Error::Decode(format!("audit_log.{column}: {e}").into())
}

/// Postgres refuses NUL in text, and a refused row would block the writer forever: replace it.
fn clean(s: &str) -> Cow<'_, str> {
    if s.contains('\0') { Cow::Owned(s.replace('\0', "\u{FFFD}")) } else { Cow::Borrowed(s) }
}

fn text(s: &Option<String>) -> Option<String> {
    s.as_deref().map(|s| clean(s).into_owned())
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}
