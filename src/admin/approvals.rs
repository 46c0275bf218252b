//! `/admin/approvals`: the approved catalog's versions of upstream tools, resources and
//! prompts (`src/approval`), and the operator's decision on a held one. A change is shown
//! beside the version approved now, with a diff per field; approving it supersedes that
//! version and puts it live on every replica (each lists the upstream again, and clients hear
//! `list_changed` then); rejecting it keeps the approved version, and the same change is not
//! held again.

use axum::Json;
use axum::extract::{Path, RawQuery, State};
use serde_json::{Value, json};

use super::actor::Actor;
use super::problem::{Kind, Problem};
use super::state::AdminState;
use crate::approval::db::{self, Row};
use crate::approval::{DecideError, State as EntryState, diff};
use crate::cluster::ClusterEvent;

const DEFAULT_LIMIT: i64 = 200;
const MAX_LIMIT: i64 = 1000;

/// `GET /admin/approvals[?state=pending|approved|rejected|superseded|all&source=&limit=]`:
/// stored versions newest first (`pending` by default); a pending or rejected change with the
/// version approved now (`approved`) and what differs (`diff`).
pub async fn list(State(app): State<AdminState>, RawQuery(query): RawQuery) -> Result<Json<Value>, Problem> {
    let (state, source, limit) = filters(query.as_deref())?;
    let store = app.upstreams.approvals().store();
    let rows = db::list(store, state, source.as_deref(), limit).await.map_err(|e| Problem::database(&e))?;
    let mut items = Vec::with_capacity(rows.len());
    for row in &rows {
        let approved = match row.state {
            EntryState::Pending | EntryState::Rejected => {
                db::approved(store, &row.source, row.kind, &row.name).await.map_err(|e| Problem::database(&e))?
            }
            _ => None,
        };
        items.push(item(row, approved.as_ref()));
    }
    Ok(Json(json!({ "approvals": items })))
}

/// `POST /admin/approvals/{id}/approve`: the held version serves from now on, on every replica.
pub async fn approve(State(app): State<AdminState>, actor: Actor, Path(id): Path<String>) -> Result<Json<Value>, Problem> {
    decide(app, actor, id, true).await
}

/// `POST /admin/approvals/{id}/reject`: the held version never serves; the approved one stays.
pub async fn reject(State(app): State<AdminState>, actor: Actor, Path(id): Path<String>) -> Result<Json<Value>, Problem> {
    decide(app, actor, id, false).await
}

async fn decide(app: AdminState, actor: Actor, id: String, approve: bool) -> Result<Json<Value>, Problem> {
    let approvals = app.upstreams.approvals();
    let decided = approvals.decide(&id, approve, actor.subject()).await.map_err(|e| match e {
        DecideError::NotFound => Problem::not_found("no catalog entry has this id; GET /admin/approvals lists them"),
        DecideError::AlreadyDecided(state) => {
            Problem::new(Kind::AlreadyDecided, format!("this entry is {state} already; only a pending entry can be decided"))
                .with_member("state", json!(state))
        }
        DecideError::Database(e) => Problem::database(&e),
    })?;
    // Every replica lists the upstream again (this one now): what is approved serves, and its
    // clients hear list_changed if what they see changed.
    app.cluster.publish(ClusterEvent::CatalogApproved { source: decided.source.clone() });
    app.upstreams.resync(&decided.source);
    let verb = if approve { "approved" } else { "rejected" };
    let fingerprint = decided.fingerprint.get(..16).unwrap_or(&decided.fingerprint);
    let detail = format!(
        "{verb} the {} {} of upstream {} (fingerprint {fingerprint})",
        decided.kind.as_str(),
        crate::untrusted::escaped(&decided.name, 200),
        decided.source
    );
    tracing::info!(upstream = %decided.source, subject = actor.subject(), "{detail}");
    actor.audit(&app, None, detail).await;
    let now = db::get(approvals.store(), &id).await.map_err(|e| Problem::database(&e))?;
    Ok(Json(now.as_ref().map_or(Value::Null, |row| item(row, None))))
}

/// One version as the API shows it.
fn item(row: &Row, approved: Option<&Row>) -> Value {
    let mut item = json!({
        "id": row.id,
        "source": row.source,
        "kind": row.kind,
        "name": row.name,
        "state": row.state,
        "fingerprint": row.fingerprint,
        "first_seen_ms": row.first_seen_ms,
        "decided_by": row.decided_by,
        "decided_ms": row.decided_ms,
        "entry": row.entry,
    });
    if let (Some(approved), Some(entry)) = (approved, &row.entry) {
        item["change"] = json!("changed");
        item["approved"] = json!({ "id": approved.id, "fingerprint": approved.fingerprint, "entry": approved.entry });
        item["diff"] = json!(diff::diff(row.kind, approved.entry.as_ref().unwrap_or(&Value::Null), entry));
    } else if matches!(row.state, EntryState::Pending | EntryState::Rejected) {
        item["change"] = json!("new");
    }
    item
}

/// `state` (default `pending`; `all` for every state), `source` and `limit` (1 to 1000,
/// default 200); any other parameter is refused.
fn filters(query: Option<&str>) -> Result<(Option<EntryState>, Option<String>, i64), Problem> {
    let (mut state, mut source, mut limit) = (Some(EntryState::Pending), None, DEFAULT_LIMIT);
    for (key, value) in url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        let bad = |message: String| Problem::bad_field(key.to_string(), message);
        match &*key {
            "state" if value == "all" => state = None,
            "state" => {
                state = Some(EntryState::parse(&value).ok_or_else(|| {
                    bad(format!(
                        "state must be pending, approved, rejected, superseded or all, not {:?}",
                        crate::untrusted::escaped(&value, 40).to_string()
                    ))
                })?);
            }
            "source" => source = Some(value.into_owned()),
            "limit" => {
                limit = value
                    .parse::<i64>()
                    .ok()
                    .filter(|l| (1..=MAX_LIMIT).contains(l))
                    .ok_or_else(|| bad(format!("limit must be a whole number from 1 to {MAX_LIMIT}")))?;
            }
            _ => {
                return Err(bad(format!(
                    "unknown query parameter {:?}; state, source and limit are read",
                    crate::untrusted::escaped(&key, 40).to_string()
                )));
            }
        }
    }
    Ok((state, source, limit))
}
