//! `GET /admin/sessions`: the live legacy sessions (2025-11-25 and older; the 2026-07-28 era has
//! none) this replica holds, and the streams open on it. Ids are shown as a prefix only: a full
//! session id lets whoever holds a matching token use the session, and the console needs none.
//! With Postgres, sessions are shared: another replica lists those created or resumed there.

use axum::Json;
use axum::extract::{RawQuery, State};
use serde_json::{Value, json};

use super::problem::Problem;
use super::state::AdminState;
use crate::session::SessionKind;

/// How many sessions are listed unless `limit` says otherwise, and the most it may say.
const DEFAULT_LIMIT: usize = 200;
const MAX_LIMIT: usize = 1000;
/// Characters of a session id shown.
const ID_PREFIX: usize = 8;

/// `GET /admin/sessions[?limit=]`: counts, and the sessions most recently used first.
pub async fn list(State(app): State<AdminState>, RawQuery(query): RawQuery) -> Result<Json<Value>, Problem> {
    let limit = limit(query.as_deref())?;
    let mut rows = Vec::new();
    app.mcp.sessions.for_each(|s| rows.push((s.created_and_last_seen().1, row(s))));
    let open = rows.len();
    // Most recently used first; ties keep no particular order.
    rows.sort_by_key(|r| std::cmp::Reverse(r.0));
    let open_streams: u64 = rows.iter().filter_map(|(_, r)| r["open_streams"].as_u64()).sum();
    let truncated = rows.len() > limit;
    let sessions: Vec<Value> = rows.into_iter().take(limit).map(|(_, r)| r).collect();
    Ok(Json(json!({
        "open": open,
        "open_streams": open_streams,
        // Modern-era `subscriptions/listen` streams belong to no session.
        "listen_streams": app.mcp.listeners.len(),
        "shared": app.mcp.sessions.is_shared(),
        "truncated": truncated,
        "sessions": sessions,
    })))
}

fn row(s: &crate::session::Session) -> Value {
    let (created, last_seen) = s.created_and_last_seen();
    let client = s.client();
    // The owner key is `issuer` U+001F `subject`.
    let (issuer, subject) = match s.owner().and_then(|k| k.split_once('\u{1f}')) {
        Some((issuer, subject)) => (Some(issuer), Some(subject)),
        None => (None, None),
    };
    let initialized = s.is_initialized();
    json!({
        "id_prefix": s.id.chars().take(ID_PREFIX).collect::<String>(),
        "transport": match s.kind { SessionKind::Streamable => "streamable_http", SessionKind::LegacySse => "sse" },
        "protocol_version": s.version().as_str(),
        "initialized": initialized,
        "client": initialized.then(|| json!({"name": client.name, "version": client.version})),
        "subject": subject,
        "issuer": issuer,
        "created_at": rfc3339(created),
        "last_seen_at": rfc3339(last_seen),
        "idle_seconds": s.idle_for().as_secs(),
        "open_streams": s.open_streams(),
    })
}

fn rfc3339(secs: u64) -> Option<String> {
    let t = time::OffsetDateTime::from_unix_timestamp(i64::try_from(secs).ok()?).ok()?;
    Some(super::tools::rfc3339(t))
}

/// `?limit=` (1 to 1000, default 200); any other parameter is refused.
fn limit(query: Option<&str>) -> Result<usize, Problem> {
    let mut limit = DEFAULT_LIMIT;
    for (key, value) in url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        let bad = |message: String| Problem::bad_field(key.to_string(), message);
        if key != "limit" {
            return Err(bad(format!("unknown query parameter {key:?}; only `limit` is read")));
        }
        limit = match value.parse::<usize>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => n,
            _ => return Err(bad(format!("limit must be a whole number from 1 to {MAX_LIMIT}, not {value:?}"))),
        };
    }
    Ok(limit)
}
