//! `GET /admin/grants` and `DELETE /admin/grants/{id}`: the sign-ins the built-in
//! authorization server granted (one per user, client and resource), and revoking one: its
//! refresh tokens stop at once, its access tokens within seconds on every replica.

use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::actor::Actor;
use super::problem::{Kind, Problem};
use super::state::AdminState;
use crate::audit::{AuditRecord, EventKind, Outcome};
use crate::authserver::{Identity, db, now_ms};

const DEFAULT_LIMIT: i64 = 200;
const MAX_LIMIT: i64 = 1000;

/// `GET /admin/grants[?user=<subject or email>&client=<client_id>&all=true&limit=]`: live
/// grants newest first (`all=true`: revoked and expired ones too). With the authorization
/// server off: `enabled: false` and no grants (the console says so; not an error).
pub async fn list(State(app): State<AdminState>, RawQuery(query): RawQuery) -> Result<Json<Value>, Problem> {
    let Some(server) = app.authserver.as_ref() else {
        return Ok(Json(json!({"enabled": false, "issuer": null, "grants": []})));
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
    let all = get("all").is_some_and(|v| v == "true");
    let user = get("user");
    let now = now_ms();
    let rows = db::grants_list(&app.store, user.as_deref(), get("client").as_deref(), !all, MAX_LIMIT, now)
        .await
        .map_err(|e| Problem::database(&e))?;
    let grants: Vec<Value> = rows
        .into_iter()
        .filter_map(|g| {
            let identity: Identity = serde_json::from_str(&g.identity).ok()?;
            let matches = user.as_deref().is_none_or(|u| identity.subject == u || identity.email.as_deref() == Some(u));
            matches.then(|| row(&g, &identity, now))
        })
        .take(usize::try_from(limit).unwrap_or(200))
        .collect();
    Ok(Json(json!({"enabled": true, "issuer": server.issuer(), "grants": grants})))
}

fn row(g: &db::GrantRow, identity: &Identity, now: i64) -> Value {
    let state = match (g.revoked_ms, g.expires_ms <= now) {
        (Some(_), _) => "revoked",
        (None, true) => "expired",
        (None, false) => "active",
    };
    json!({
        "id": g.id,
        "state": state,
        "client_id": g.client_id,
        "subject": identity.subject,
        "email": identity.email,
        "name": identity.name,
        "scope": g.scope,
        "resource": g.resource,
        "created_ms": g.created_ms,
        "last_used_ms": g.last_used_ms,
        "expires_ms": g.expires_ms,
        "revoked_ms": g.revoked_ms,
        "revoked_why": g.revoked_why,
    })
}

/// `DELETE /admin/grants/{id}`: revokes a grant; 204, or 404 when no live grant has this id.
pub async fn revoke(State(app): State<AdminState>, actor: Actor, Path(id): Path<String>) -> Result<StatusCode, Problem> {
    let server = app.authserver.as_ref().ok_or_else(off)?;
    let who = actor.subject().unwrap_or("an operator").to_owned();
    if !server.revoke_grant(&id, &format!("revoked by {who} through the admin API")).await {
        return Err(Problem::not_found("no live grant has this id; GET /admin/grants lists them"));
    }
    if let Some(audit) = &app.audit {
        let mut record =
            AuditRecord::new(EventKind::AdminChange, Outcome::Ok).with_detail(format!("grant {} revoked", id.get(..8).unwrap_or(&id)));
        record.subject = actor.subject().map(str::to_owned);
        audit.record(record).await;
    }
    Ok(StatusCode::NO_CONTENT)
}

fn off() -> Problem {
    Problem::not_found("the built-in authorization server is off (authorization_server.enabled)")
}
