//! The audit table's move to a compact row on SQLite (migration `20261128000001`): records
//! stored in the old text layout read back unchanged after the upgrade.

use crate::audit_support::{sample, sqlite_settings};

use sqlx::Row;
use toolgate::audit::{AuditFilter, AuditRecord, query};
use toolgate::store::{Backend, Store};

const COMPACT: i64 = 20261128000001;

/// The table as it was before the compact row (its first migration, and the `server` column).
const OLD_TABLE: &str = "CREATE TABLE audit_log (id TEXT PRIMARY KEY NOT NULL, time TEXT NOT NULL, request_id TEXT, \
     session_id TEXT, issuer TEXT, subject TEXT, client_id TEXT, client_ip TEXT, kind TEXT NOT NULL, tool TEXT, \
     args_sha256 TEXT, arguments TEXT, outcome TEXT NOT NULL, detail TEXT, duration_ms INTEGER, result_bytes INTEGER, \
     replica_id TEXT NOT NULL, trace_id TEXT, server TEXT)";

/// Rewinds a migrated store to the old layout holding `records`, as the old code wrote them.
async fn rewind(store: &Store, records: &[AuditRecord]) {
    let Backend::Sqlite(pool) = store.backend() else { panic!("a SQLite store") };
    sqlx::query("DROP TABLE audit_log").execute(pool).await.expect("drop");
    sqlx::query(OLD_TABLE).execute(pool).await.expect("old table");
    let text_time = time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z");
    for r in records {
        sqlx::query("INSERT INTO audit_log VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
            .bind(r.id.to_string())
            .bind(r.time.format(text_time).expect("format"))
            .bind(&r.request_id)
            .bind(&r.session_id)
            .bind(&r.issuer)
            .bind(&r.subject)
            .bind(&r.client_id)
            .bind(&r.client_ip)
            .bind(r.kind.as_str())
            .bind(&r.tool)
            .bind(&r.args_sha256)
            .bind(r.arguments.as_ref().map(|a| a.to_string()))
            .bind(r.outcome.as_str())
            .bind(&r.detail)
            .bind(r.duration_ms.map(|n| n as i64))
            .bind(r.result_bytes.map(|n| n as i64))
            .bind(&r.replica_id)
            .bind(&r.trace_id)
            .bind(&r.server)
            .execute(pool)
            .await
            .expect("old row");
    }
    sqlx::query("DELETE FROM _sqlx_migrations WHERE version = ?").bind(COMPACT).execute(pool).await.expect("forget");
}

#[tokio::test]
async fn records_in_the_old_text_layout_read_back_unchanged_after_the_upgrade() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut records: Vec<AuditRecord> = (0..50).map(sample).collect();
    records[3].server = Some("team".into());
    let store = Store::connect(&sqlite_settings(dir.path())).await.expect("connect");
    rewind(&store, &records).await;
    store.close().await;

    let store = Store::connect(&sqlite_settings(dir.path())).await.expect("upgrade");
    let rows = query(&store, &AuditFilter::default()).await.expect("query");
    records.sort_by_key(|r| (r.time, r.id));
    assert_eq!(rows, records, "every field reads back as the old layout held it");
    let Backend::Sqlite(pool) = store.backend() else { panic!("a SQLite store") };
    let id_type: String = sqlx::query("SELECT typeof(id) FROM audit_log LIMIT 1").fetch_one(pool).await.expect("q").get(0);
    assert_eq!(id_type, "blob", "the id is stored as its 16 bytes");
    store.close().await;
}
