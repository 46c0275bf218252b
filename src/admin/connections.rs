//! `GET /admin/connections` and `DELETE /admin/connections/{id}`: the accounts users connected
//! at per-user upstreams (`oauth.grant = "user"`), never a token; and revoking one (at the
//! upstream's authorization server too, where it offers revocation), after which the user's
//! next call asks them to connect again.

use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::actor::Actor;
use super::problem::{Kind, Problem};
use super::state::AdminState;
use crate::audit::{AuditRecord, EventKind, Outcome};

const DEFAULT_LIMIT: i64 = 200;
const MAX_LIMIT: i64 = 1000;

/// `GET /admin/connections[?user=<subject>&upstream=<name>&limit=]`: newest first. With the
/// vault off: `enabled: false` and none (not an error).
pub async fn list(State(app): State<AdminState>, RawQuery(query): RawQuery) -> Result<Json<Value>, Problem> {
    let Some(vault) = app.vault.as_ref() else {
        return Ok(Json(json!({"enabled": false, "connections": []})));
    };
    let params: Vec<(String, String)> = url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()).into_owned().collect();
    let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let limit = match get("limit") {
        Some(l) => l
            .parse::<i64>()
            .ok()
            .filter(|l| (1..=MAX_LIMIT).contains(l))
            .ok_or_else(|| Problem::new(Kind::MalformedRequest, format!("limit must be a whole number from 1 to {MAX_LIMIT}")))?,
        None => DEFAULT_LIMIT,
    };
    let (user, upstream) = (get("user"), get("upstream"));
    let connections = vault
        .connections(user.as_deref(), upstream.as_deref(), limit)
        .await
        .map_err(|_| Problem::new(Kind::Unavailable, "the vault cannot be read right now"))?;
    Ok(Json(json!({"enabled": true, "connections": connections})))
}

/// `DELETE /admin/connections/{id}`: 204, or 404 when there is no such connection.
pub async fn revoke(State(app): State<AdminState>, actor: Actor, Path(id): Path<String>) -> Result<StatusCode, Problem> {
    let vault = app.vault.as_ref().ok_or_else(|| Problem::not_found("the vault is off ([vault] keys and [authorization_server])"))?;
    let who = actor.subject().unwrap_or("an operator").to_owned();
    let revoked = vault.revoke(&id, None, &format!("{who} through the admin API")).await;
    if !revoked.map_err(|_| Problem::new(Kind::Unavailable, "the vault cannot be written right now"))? {
        return Err(Problem::not_found("no connection has this id; GET /admin/connections lists them"));
    }
    if let Some(audit) = &app.audit {
        let mut record = AuditRecord::new(EventKind::AdminChange, Outcome::Ok)
            .with_detail(format!("connection {} revoked", id.get(..36).unwrap_or(&id)));
        record.subject = actor.subject().map(str::to_owned);
        audit.record(record).await;
    }
    Ok(StatusCode::NO_CONTENT)
}
