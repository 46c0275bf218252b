//! Legacy sessions shared by every replica through Postgres (`legacy_sessions`), so a session
//! created through one replica is accepted by all of them without load-balancer affinity.
//!
//! What is shared is what any replica needs to serve a session's requests: owner, version,
//! client capabilities, log level. What stays in the memory of one replica is what cannot
//! move: open streams, in-flight calls and the calls waiting for a client's answer; the cluster
//! channel routes what reaches the wrong replica (see `transport::cluster_route`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use dashmap::DashMap;
use sqlx::{PgPool, Row};

use super::{ClientInfo, Session, SessionKind};
use crate::protocol::ProtocolVersion;
use crate::tool::{ClientCaps, LogLevel};

/// How often one replica refreshes a session's `last_seen` at most: expiry is measured in
/// tens of minutes, so minute granularity costs nothing and saves a write per request.
const TOUCH_EVERY: Duration = Duration::from_secs(60);

/// One stored session.
#[derive(Clone, Debug)]
pub struct StoredSession {
    pub owner: Option<String>,
    /// The virtual server it belongs to (`None`: the default endpoint).
    pub server: Option<String>,
    pub kind: SessionKind,
    pub version: ProtocolVersion,
    pub initialized: bool,
    pub client: ClientInfo,
    pub log_level: LogLevel,
}

/// The `legacy_sessions` table.
pub struct SharedSessions {
    pool: PgPool,
    touched: DashMap<Arc<str>, Instant>,
}

impl std::fmt::Debug for SharedSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedSessions").finish_non_exhaustive()
    }
}

fn kind_str(kind: SessionKind) -> &'static str {
    match kind {
        SessionKind::Streamable => "streamable",
        SessionKind::LegacySse => "sse",
    }
}

impl SharedSessions {
    pub fn new(pool: PgPool) -> Self {
        Self { pool, touched: DashMap::new() }
    }

    /// Stores a new session (at `initialize`, before its id is given out).
    pub async fn insert(&self, session: &Session) -> Result<(), sqlx::Error> {
        let client = session.client();
        sqlx::query(
            "INSERT INTO legacy_sessions (id, owner, kind, version, initialized, caps_sampling, caps_elicit_form, caps_elicit_url, caps_roots, client_name, client_version, log_level, server) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
        )
        .bind(&*session.id)
        .bind(session.owner.as_deref())
        .bind(kind_str(session.kind))
        .bind(session.version().to_string())
        .bind(session.is_initialized())
        .bind(client.caps.sampling)
        .bind(client.caps.elicitation_form)
        .bind(client.caps.elicitation_url)
        .bind(client.caps.roots)
        .bind(&client.name)
        .bind(&client.version)
        .bind(i16::from(session.log_level.load(std::sync::atomic::Ordering::Relaxed)))
        .bind(session.server())
        .execute(&self.pool)
        .await?;
        self.touched.insert(session.id.clone(), Instant::now());
        Ok(())
    }

    /// The stored session `id`, if it exists.
    pub async fn load(&self, id: &str) -> Result<Option<StoredSession>, sqlx::Error> {
        let row = sqlx::query(
            "SELECT owner, kind, version, initialized, caps_sampling, caps_elicit_form, caps_elicit_url, caps_roots, client_name, client_version, log_level, server \
             FROM legacy_sessions WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let version: String = row.try_get("version")?;
        let level: i16 = row.try_get("log_level")?;
        let kind: String = row.try_get("kind")?;
        Ok(Some(StoredSession {
            owner: row.try_get("owner")?,
            server: row.try_get("server")?,
            kind: if kind == "sse" { SessionKind::LegacySse } else { SessionKind::Streamable },
            version: version.parse().unwrap_or(ProtocolVersion::LATEST_LEGACY),
            initialized: row.try_get("initialized")?,
            client: ClientInfo {
                caps: ClientCaps {
                    sampling: row.try_get("caps_sampling")?,
                    elicitation_form: row.try_get("caps_elicit_form")?,
                    elicitation_url: row.try_get("caps_elicit_url")?,
                    roots: row.try_get("caps_roots")?,
                    // Legacy sessions use the `tasks` capability, not the extension.
                    tasks: false,
                },
                name: row.try_get("client_name")?,
                version: row.try_get("client_version")?,
            },
            log_level: LogLevel::from_u8(u8::try_from(level).unwrap_or(LogLevel::Info as u8)),
        }))
    }

    pub async fn set_log_level(&self, id: &str, level: LogLevel) -> Result<(), sqlx::Error> {
        sqlx::query("UPDATE legacy_sessions SET log_level = $2, last_seen = now() WHERE id = $1")
            .bind(id)
            .bind(i16::from(level as u8))
            .execute(&self.pool)
            .await
            .map(drop)
    }

    /// Ends a session; returns whether it existed.
    pub async fn delete(&self, id: &str) -> Result<bool, sqlx::Error> {
        self.touched.remove(id);
        let done = sqlx::query("DELETE FROM legacy_sessions WHERE id = $1").bind(id).execute(&self.pool).await?;
        Ok(done.rows_affected() > 0)
    }

    /// Refreshes `last_seen`, at most once per [`TOUCH_EVERY`] per session on this replica.
    /// Off the request path: the caller spawns it.
    pub fn needs_touch(&self, id: &Arc<str>) -> bool {
        let now = Instant::now();
        let mut due = false;
        self.touched
            .entry(id.clone())
            .and_modify(|last| {
                if now.duration_since(*last) >= TOUCH_EVERY {
                    *last = now;
                    due = true;
                }
            })
            .or_insert_with(|| {
                due = true;
                now
            });
        due
    }

    pub async fn touch(&self, id: &str) -> Result<(), sqlx::Error> {
        sqlx::query("UPDATE legacy_sessions SET last_seen = now() WHERE id = $1").bind(id).execute(&self.pool).await.map(drop)
    }

    /// Deletes sessions idle for longer than `idle` (any replica may sweep; the delete is the
    /// arbiter) and returns their ids, for the other replicas to drop.
    pub async fn sweep(&self, idle: Duration) -> Result<Vec<String>, sqlx::Error> {
        let rows = sqlx::query("DELETE FROM legacy_sessions WHERE last_seen < now() - make_interval(secs => $1) RETURNING id")
            .bind(idle.as_secs_f64())
            .fetch_all(&self.pool)
            .await?;
        let ids: Vec<String> = rows.iter().filter_map(|r| r.try_get("id").ok()).collect();
        for id in &ids {
            self.touched.remove(id.as_str());
        }
        Ok(ids)
    }
}
