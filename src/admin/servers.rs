//! `/admin/servers`: the virtual servers (`[servers.<name>]`), those of the settings and those
//! defined through the API (stored in the database, applied on every replica), each with the
//! tools it serves now, under which names and from which sources. A definition is the JSON of
//! one `[servers.<name>]` table; it is checked completely (including the names it would serve
//! today) before anything is stored.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::actor::Actor;
use super::extract::{IfMatch, JsonBody, ToolName, etag};
use super::problem::{Kind, Problem};
use super::state::AdminState;
use crate::store::definitions::{self, Table, WriteError};
use crate::tooldef::FieldError;
use crate::virtual_servers::stored::Refusal;
use crate::virtual_servers::{VirtualServer, source_of};

/// `GET /admin/servers`: every virtual server, with its path, source and tool count.
pub async fn list(State(app): State<AdminState>) -> Json<Value> {
    let tools = app.server.tools.snapshot();
    let servers: Vec<Value> = app.server.servers.all().iter().map(|s| summary(&app, s, &s.view(&tools))).collect();
    Json(json!({ "default_path": app.settings.server.mcp_path, "servers": servers }))
}

/// `GET /admin/servers/{name}`: its settings and every tool it serves now.
pub async fn get(State(app): State<AdminState>, ToolName(name): ToolName) -> Result<Response, Problem> {
    let server = app.server.servers.get(&name).ok_or_else(|| Problem::not_found(format!("no virtual server called {name:?}")))?;
    let view = server.view(&app.server.tools.snapshot());
    let mut body = summary(&app, &server, &view);
    body["definition"] = json!(server.settings);
    body["tools"] = view
        .tools
        .iter()
        .map(|t| json!({ "name": t.name(), "served_from": t.canonical_name(), "source": source_of(t), "description": t.tool.descriptor().description }))
        .collect();
    let mut res = Json(body).into_response();
    if let Some(revision) = app.server.servers.revision(&name)
        && let Ok(tag) = HeaderValue::from_str(&etag(revision))
    {
        res.headers_mut().insert(header::ETAG, tag);
    }
    Ok(res)
}

fn summary(app: &AdminState, server: &VirtualServer, view: &crate::virtual_servers::View) -> Value {
    let origin = if app.server.servers.is_configured(&server.name) { "settings" } else { "admin" };
    json!({
        "name": server.name,
        "path": server.settings.path,
        "title": server.settings.title,
        "resource": server.resource,
        "scopes": server.settings.scopes,
        "origin": origin,
        "revision": app.server.servers.revision(&server.name),
        "tool_count": view.tools.len(),
        "collisions": view.collisions,
    })
}

/// `PUT /admin/servers/{name}`: creates (201) or replaces (200) a stored definition;
/// `If-Match: "<revision>"` makes a replace conditional (412 when another write came first).
pub async fn put(
    State(app): State<AdminState>,
    ToolName(name): ToolName,
    if_match: IfMatch,
    actor: Actor,
    JsonBody(body): JsonBody,
) -> Result<Response, Problem> {
    app.server.servers.check(&name, &body, &app.server.tools.snapshot()).map_err(|e| refusal(&name, e))?;
    let expected = if_match.expected();
    let (stored, created) =
        definitions::put(&app.store, Table::Servers, &name, &body, expected, actor.subject()).await.map_err(|e| write_problem(&name, e))?;
    let verb = if created { "created" } else { "replaced" };
    applied(&app, &actor, &name, format!("{verb} virtual server {name} (revision {})", stored.revision)).await;
    let server = app.server.servers.get(&name).ok_or_else(|| Problem::new(Kind::Internal, "the stored server was not applied"))?;
    let mut body = summary(&app, &server, &server.view(&app.server.tools.snapshot()));
    body["definition"] = stored.definition;
    let mut res = (if created { StatusCode::CREATED } else { StatusCode::OK }, Json(body)).into_response();
    if let Ok(tag) = HeaderValue::from_str(&etag(stored.revision)) {
        res.headers_mut().insert(header::ETAG, tag);
    }
    if created && let Ok(location) = HeaderValue::from_str(&format!("/admin/servers/{name}")) {
        res.headers_mut().insert(header::LOCATION, location);
    }
    Ok(res)
}

/// `DELETE /admin/servers/{name}`: 204; its path answers 404 from then on.
pub async fn delete(State(app): State<AdminState>, ToolName(name): ToolName, if_match: IfMatch, actor: Actor) -> Result<Response, Problem> {
    if app.server.servers.is_configured(&name) {
        return Err(refusal(&name, Refusal::DefinedInSettings(name.clone())));
    }
    let expected = if_match.expected();
    let deleted = definitions::delete(&app.store, Table::Servers, &name, expected).await.map_err(|e| write_problem(&name, e))?;
    applied(&app, &actor, &name, format!("deleted virtual server {name} (revision {})", deleted.revision)).await;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// After a write: this replica applies it now (so the answer shows the new state), every other
/// replica when the cluster event reaches it; listeners of a changed server are told; then
/// the audit record.
async fn applied(app: &AdminState, actor: &Actor, name: &str, detail: String) {
    app.cluster.publish(crate::cluster::ClusterEvent::ServersChanged);
    if let Err(e) = app.server.servers.reload_stored(&app.store, &app.server.tools.snapshot()).await {
        tracing::error!(server = name, error = %e, "stored servers not reloaded after an admin change");
    }
    app.server.bus.publish(crate::bus::Change::ToolsListChanged);
    tracing::info!(server = name, subject = actor.subject(), "{detail}");
    actor.audit(app, None, detail).await;
}

fn refusal(name: &str, e: Refusal) -> Problem {
    match e {
        Refusal::Invalid { field, message } => {
            let error = FieldError::new(field, message);
            Problem::new(Kind::InvalidDefinition, format!("server {name:?}: {error}; nothing was changed")).with_errors(vec![error])
        }
        Refusal::DefinedInSettings(_) => Problem::new(Kind::DefinedElsewhere, e.to_string()).with_member("origin", json!("settings")),
    }
}

fn write_problem(name: &str, e: WriteError) -> Problem {
    match e {
        WriteError::NotFound => Problem::not_found(format!("no virtual server called {name:?} is stored")),
        WriteError::RevisionMismatch { current } => Problem::stale_revision(&format!("server {name:?}"), current),
        WriteError::Database(e) => Problem::database(&e),
    }
}
