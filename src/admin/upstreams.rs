//! `/admin/upstreams`: each upstream MCP server's state, and upstreams defined through the API
//! (stored in the database, applied on every replica). A definition is the JSON of one
//! `[upstreams.<name>]` table; it is checked completely before anything is stored.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::actor::Actor;
use super::extract::{IfMatch, JsonBody, ToolName, etag};
use super::problem::{Kind, Problem};
use super::state::AdminState;
use crate::tooldef::FieldError;
use crate::upstream::db::{self, StoredUpstream, WriteError};
use crate::upstream::stored::Refusal;

mod detail;

/// `GET /admin/upstreams`: every upstream's connection, tool count, last error and last sync.
pub async fn list(State(app): State<AdminState>) -> Json<Value> {
    Json(json!({ "upstreams": app.upstreams.statuses() }))
}

/// `GET /admin/upstreams/{name}`: its state, its stored definition when it has one, and (when
/// it runs here) its recent state changes, served tools and effective settings ([`detail`]).
pub async fn get(State(app): State<AdminState>, ToolName(name): ToolName) -> Result<Response, Problem> {
    let stored = db::get(&app.store, &name).await.map_err(|e| Problem::database(&e))?;
    let link = app.upstreams.link(&name);
    let status = link.as_ref().map(|l| json!(l.status()));
    let mut body = match (&stored, status) {
        (Some(stored), status) => stored_body(stored, status),
        (None, Some(status)) => json!({ "name": name, "status": status }),
        (None, None) => return Err(Problem::not_found(format!("no upstream called {name:?} is configured or stored"))),
    };
    if let Some(link) = link {
        for (key, member) in detail::members(&link, app.upstreams.served_by(&name)) {
            body[key] = member;
        }
    }
    Ok(match stored {
        Some(stored) => tagged(StatusCode::OK, body, stored.revision),
        None => Json(body).into_response(),
    })
}

/// `PUT /admin/upstreams/{name}`: creates (201) or replaces (200) a stored definition;
/// `If-Match: "<revision>"` makes a replace conditional (412 when another write came first).
pub async fn put(
    State(app): State<AdminState>,
    ToolName(name): ToolName,
    if_match: IfMatch,
    actor: Actor,
    JsonBody(body): JsonBody,
) -> Result<Response, Problem> {
    refuse_placeholder(&name, &body)?;
    let checked = {
        let (upstreams, name, body) = (app.upstreams.clone(), name.clone(), body.clone());
        // Checking resolves the program and reads secret files.
        tokio::task::spawn_blocking(move || upstreams.check(&name, &body).map(drop)).await
    };
    checked.map_err(|_| Problem::new(Kind::Internal, "the definition could not be checked"))?.map_err(|e| refusal(&name, e))?;
    let expected = if_match.expected();
    let (stored, created) = db::put(&app.store, &name, &body, expected, actor.subject()).await.map_err(|e| write_problem(&name, e))?;
    let verb = if created { "created" } else { "replaced" };
    applied(&app, &actor, &name, format!("{verb} upstream {name} (revision {})", stored.revision)).await;
    let status = app.upstreams.link(&name).map(|l| json!(l.status()));
    let mut res = one(if created { StatusCode::CREATED } else { StatusCode::OK }, &stored, status);
    if created && let Ok(location) = HeaderValue::from_str(&format!("/admin/upstreams/{name}")) {
        res.headers_mut().insert(header::LOCATION, location);
    }
    Ok(res)
}

/// `DELETE /admin/upstreams/{name}`: 204; its tools, resources and prompts are withdrawn.
pub async fn delete(State(app): State<AdminState>, ToolName(name): ToolName, if_match: IfMatch, actor: Actor) -> Result<Response, Problem> {
    if app.settings.upstreams.contains_key(&name) {
        return Err(refusal(&name, Refusal::DefinedInSettings(name.clone())));
    }
    let expected = if_match.expected();
    let deleted = db::delete(&app.store, &name, expected).await.map_err(|e| write_problem(&name, e))?;
    applied(&app, &actor, &name, format!("deleted upstream {name} (revision {})", deleted.revision)).await;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// After a write: this replica applies it now (so the answer shows the new state), every other
/// replica when the cluster event reaches it; then the audit record.
async fn applied(app: &AdminState, actor: &Actor, name: &str, detail: String) {
    app.cluster.publish(crate::cluster::ClusterEvent::UpstreamsChanged);
    match app.upstreams.reload_stored(&app.store).await {
        Ok(problems) if !problems.is_empty() => tracing::error!(upstream = name, "stored upstreams not applied: {problems:?}"),
        Ok(_) => {}
        Err(e) => tracing::error!(upstream = name, error = %e, "stored upstreams not reloaded after an admin change"),
    }
    tracing::info!(upstream = name, subject = actor.subject(), "{detail}");
    actor.audit(app, None, detail).await;
}

/// A definition read back carries `<redacted>` where a secret was: sent again, that would be
/// stored as the secret. Refused, naming the field.
fn refuse_placeholder(name: &str, body: &Value) -> Result<(), Problem> {
    let Some(field) = crate::redact::placeholder_at(body) else { return Ok(()) };
    let message = format!(
        "holds the placeholder {:?} of a redacted secret: send the secret again, or reference it by env/file",
        crate::redact::REDACTED
    );
    Err(refusal(name, Refusal::Invalid { field, message }))
}

fn one(status: StatusCode, stored: &StoredUpstream, state: Option<Value>) -> Response {
    tagged(status, stored_body(stored, state), stored.revision)
}

fn stored_body(stored: &StoredUpstream, state: Option<Value>) -> Value {
    json!({
        "name": stored.name,
        "revision": stored.revision,
        "updated_ms": stored.updated_ms,
        "updated_by": stored.updated_by,
        "definition": crate::redact::upstream(stored.definition.clone()),
        "status": state,
    })
}

/// `body` with the stored revision as its `ETag`.
fn tagged(status: StatusCode, body: Value, revision: i64) -> Response {
    let mut res = (status, Json(body)).into_response();
    if let Ok(tag) = HeaderValue::from_str(&etag(revision)) {
        res.headers_mut().insert(header::ETAG, tag);
    }
    res
}

fn refusal(name: &str, e: Refusal) -> Problem {
    match e {
        Refusal::Invalid { field, message } => {
            let error = FieldError::new(field, message);
            Problem::new(Kind::InvalidDefinition, format!("upstream {name:?}: {error}; nothing was changed")).with_errors(vec![error])
        }
        Refusal::DefinedInSettings(_) => Problem::new(Kind::DefinedElsewhere, e.to_string()).with_member("origin", json!("settings")),
        Refusal::CommandsDisabled => Problem::new(Kind::CommandToolsDisabled, e.to_string()),
        Refusal::NotAllowed(_) => Problem::new(Kind::OperatorOnly, e.to_string()),
    }
}

fn write_problem(name: &str, e: WriteError) -> Problem {
    match e {
        WriteError::NotFound => Problem::not_found(format!("no upstream called {name:?} is stored")),
        WriteError::RevisionMismatch { current } => Problem::stale_revision(&format!("upstream {name:?}"), current),
        WriteError::Database(e) => Problem::database(&e),
    }
}
