//! `/admin/tools`: the tool definitions stored in the database, created, replaced, enabled,
//! disabled and deleted through the admin API. A definition has the shape of a tools-file
//! entry and is checked completely by the same compiler before anything is written; every
//! write is followed by a reload of the database source, which updates the registry and
//! sends `notifications/tools/list_changed`, and by an audit record.

use axum::Json;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::actor::Actor;
use super::extract::{IfMatch, JsonBody, ToolName, etag};
use super::problem::{Kind, Problem};
use super::state::AdminState;
use crate::tool::Origin;
use crate::tooldef::FieldError;
use crate::tooldef::db::{self, StoredTool, WriteError};

/// `GET /admin/tools[?origin=database|file|code]`: the stored definitions, and for context
/// the names of the tools the tools file and code serve (read-only here).
pub async fn list(State(app): State<AdminState>, RawQuery(query): RawQuery) -> Result<Response, Problem> {
    let origin = origin_filter(query.as_deref())?;
    let stored = if origin.is_none_or(|o| o == Origin::Database) {
        db::load_all(&app.store).await.map_err(|e| Problem::database(&e))?
    } else {
        Vec::new()
    };
    let read_only: Vec<Value> = app
        .server
        .tools
        .snapshot()
        .iter()
        .map(|t| (t.name(), t.tool.origin()))
        .filter(|(_, o)| *o != Origin::Database && origin.is_none_or(|want| want == *o))
        .map(|(name, o)| json!({"name": name, "origin": o.as_str()}))
        .collect();
    let tools: Vec<Value> = stored.iter().map(|t| view(&app, t)).collect();
    Ok(Json(json!({"tools": tools, "read_only": read_only})).into_response())
}

/// `GET /admin/tools/{name}`.
pub async fn get(State(app): State<AdminState>, ToolName(name): ToolName) -> Result<Response, Problem> {
    match db::get(&app.store, &name).await.map_err(|e| Problem::database(&e))? {
        Some(stored) => Ok(one(&app, StatusCode::OK, &stored)),
        None => Err(match app.definitions.origin_of(&name).filter(|o| *o != Origin::Database) {
            // Not a conflict on a read: it is simply not stored here, and the detail says where it is.
            Some(origin) => {
                Problem::not_found(format!("tool {name:?} is not stored in the database: it is served from {}", origin.as_str()))
                    .with_member("origin", json!(origin.as_str()))
            }
            None => Problem::not_found(format!("no tool definition called {name:?} is stored")),
        }),
    }
}

/// `POST /admin/tools`: 201 with `Location` and `ETag`.
pub async fn create(State(app): State<AdminState>, actor: Actor, JsonBody(body): JsonBody) -> Result<Response, Problem> {
    let def = prepare(&app, body, None).await?;
    if let Some(origin) = app.definitions.origin_of(&def.name).filter(|o| *o != Origin::Database) {
        return Err(defined_elsewhere(&def.name, origin));
    }
    let write = db::Write { name: &def.name, definition: &def.definition, enabled: def.enabled, by: actor.subject() };
    let stored = db::insert(&app.store, write).await.map_err(|e| match e {
        WriteError::Exists => Problem::new(
            Kind::NameTaken,
            format!("a tool called {:?} is already stored; replace it with PUT /admin/tools/{}", def.name, def.name),
        ),
        other => Problem::database(&other),
    })?;
    actor.changed(&app, &stored.name, format!("created tool {} (revision {})", stored.name, stored.revision)).await;
    let mut res = one(&app, StatusCode::CREATED, &stored);
    if let Ok(location) = HeaderValue::from_str(&format!("/admin/tools/{}", stored.name)) {
        res.headers_mut().insert(header::LOCATION, location);
    }
    Ok(res)
}

/// `PUT /admin/tools/{name}`: replaces a stored definition; `If-Match: "<revision>"` makes
/// it conditional (412 when another write came first).
pub async fn replace(
    State(app): State<AdminState>,
    ToolName(name): ToolName,
    if_match: IfMatch,
    actor: Actor,
    JsonBody(body): JsonBody,
) -> Result<Response, Problem> {
    if db::get(&app.store, &name).await.map_err(|e| Problem::database(&e))?.is_none() {
        return Err(absent(&app, &name));
    }
    let def = prepare(&app, body, Some(&name)).await?;
    let write = db::Write { name: &name, definition: &def.definition, enabled: def.enabled, by: actor.subject() };
    let stored = db::replace(&app.store, write, if_match.expected()).await.map_err(|e| write_problem(&app, &name, e))?;
    actor.changed(&app, &name, format!("replaced tool {name} (revision {})", stored.revision)).await;
    Ok(one(&app, StatusCode::OK, &stored))
}

/// `DELETE /admin/tools/{name}`: 204; honours `If-Match` like `PUT`.
pub async fn delete(State(app): State<AdminState>, ToolName(name): ToolName, if_match: IfMatch, actor: Actor) -> Result<Response, Problem> {
    let deleted = db::delete(&app.store, &name, if_match.expected()).await.map_err(|e| write_problem(&app, &name, e))?;
    actor.changed(&app, &name, format!("deleted tool {name} (revision {})", deleted.revision)).await;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `POST /admin/tools/{name}/enable`.
pub async fn enable(state: State<AdminState>, name: ToolName, actor: Actor) -> Result<Response, Problem> {
    set_enabled(state, name, actor, true).await
}

/// `POST /admin/tools/{name}/disable`.
pub async fn disable(state: State<AdminState>, name: ToolName, actor: Actor) -> Result<Response, Problem> {
    set_enabled(state, name, actor, false).await
}

/// Idempotent: setting the state a tool already has changes nothing (no new revision, no
/// reload, no audit record) and answers 200 with the row.
async fn set_enabled(State(app): State<AdminState>, ToolName(name): ToolName, actor: Actor, enabled: bool) -> Result<Response, Problem> {
    if enabled && !app.settings.admin.allow_command_tools {
        // A command tool stored while they were allowed stays off once they no longer are.
        let stored = db::get(&app.store, &name).await.map_err(|e| Problem::database(&e))?;
        if stored.as_ref().is_some_and(|s| is_command(&s.definition)) {
            return Err(command_tools_disabled());
        }
    }
    let (stored, changed) =
        db::set_enabled(&app.store, &name, enabled, actor.subject()).await.map_err(|e| write_problem(&app, &name, e))?;
    if changed {
        let verb = if enabled { "enabled" } else { "disabled" };
        actor.changed(&app, &name, format!("{verb} tool {name} (revision {})", stored.revision)).await;
    }
    Ok(one(&app, StatusCode::OK, &stored))
}

/// A definition ready to store.
struct Prepared {
    name: String,
    /// Without `enabled`.
    definition: Value,
    enabled: Option<bool>,
}

/// Checks a submitted definition completely (the compiler's field errors, 422), refuses
/// command tools unless allowed (403), and splits off `enabled`.
async fn prepare(app: &AdminState, body: Value, path_name: Option<&str>) -> Result<Prepared, Problem> {
    let Value::Object(definition) = body else {
        return Err(invalid(FieldError::new("definition", "must be a JSON object: one tool definition, as in a tools file")));
    };
    if is_command_map(&definition) && !app.settings.admin.allow_command_tools {
        return Err(command_tools_disabled());
    }
    let name = match definition.get("name") {
        Some(Value::String(name)) => name.clone(),
        Some(_) => return Err(invalid(FieldError::new("name", "must be a string"))),
        None => return Err(invalid(FieldError::new("name", "is required: the tool's name, unique across every source"))),
    };
    if let Some(path_name) = path_name
        && name != path_name
    {
        return Err(invalid(FieldError::new(
            "name",
            format!("must equal the name in the path ({path_name:?}); a tool cannot be renamed, create a new one"),
        )));
    }
    if let Some(field) = nul_path(&definition, String::new()) {
        return Err(invalid(FieldError::new(field, "must not contain the NUL character (\\u0000)")));
    }
    // Compiling may touch the file system (secret files, working directories, programs).
    let definitions = app.definitions.clone();
    let (checked, mut definition) = tokio::task::spawn_blocking(move || {
        let definition = Value::Object(definition);
        (definitions.check(&definition).map(drop), definition)
    })
    .await
    .map_err(|e| {
        tracing::error!(error = %e, "admin API: the definition check failed");
        Problem::new(Kind::Internal, "the definition could not be checked; the server logged the details")
    })?;
    checked.map_err(|e| Problem::invalid_definition(&e))?;
    // The column holds it; the check above made sure it is a boolean when present.
    let enabled = definition.as_object_mut().and_then(|d| d.remove("enabled")).and_then(|v| v.as_bool());
    Ok(Prepared { name, definition, enabled })
}

fn invalid(error: FieldError) -> Problem {
    Problem::new(Kind::InvalidDefinition, format!("{error}; nothing was changed")).with_errors(vec![error])
}

fn is_command(definition: &Value) -> bool {
    definition.as_object().is_some_and(is_command_map)
}

fn is_command_map(definition: &Map<String, Value>) -> bool {
    definition.get("command").is_some_and(|v| !v.is_null())
}

fn command_tools_disabled() -> Problem {
    Problem::new(
        Kind::CommandToolsDisabled,
        "`command` tools run programs on this host, so the admin API may not define or enable them unless `admin.allow_command_tools = true`; define them in the tools file instead",
    )
}

/// The first string value (or key) holding NUL, as a field path: Postgres cannot store it in
/// JSONB, and no definition needs it.
fn nul_path(map: &Map<String, Value>, prefix: String) -> Option<String> {
    map.iter().find_map(|(k, v)| {
        let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
        if k.contains('\0') { Some(path) } else { nul_in(v, path) }
    })
}

fn nul_in(value: &Value, path: String) -> Option<String> {
    match value {
        Value::String(s) if s.contains('\0') => Some(path),
        Value::Object(map) => nul_path(map, path),
        Value::Array(items) => items.iter().enumerate().find_map(|(i, v)| nul_in(v, format!("{path}[{i}]"))),
        _ => None,
    }
}

/// `?origin=` as a source, or none.
fn origin_filter(query: Option<&str>) -> Result<Option<Origin>, Problem> {
    let mut origin = None;
    for (key, value) in url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        let bad = |message: String| Problem::bad_field(key.to_string(), message);
        if key != "origin" {
            return Err(bad(format!("unknown query parameter {key:?}; only `origin` is read")));
        }
        origin = Some(match value.as_ref() {
            "database" => Origin::Database,
            "file" => Origin::File,
            "code" => Origin::Code,
            "upstream" => Origin::Upstream,
            other => return Err(bad(format!("unknown origin {other:?}; one of: database, file, code, upstream"))),
        });
    }
    Ok(origin)
}

/// The answer for a write that changed nothing.
fn write_problem(app: &AdminState, name: &str, e: WriteError) -> Problem {
    match e {
        WriteError::NotFound => absent(app, name),
        WriteError::RevisionMismatch { current } => Problem::stale_revision(&format!("tool {name:?}"), current),
        WriteError::Exists => Problem::new(Kind::NameTaken, format!("a tool called {name:?} is already stored")),
        WriteError::Database(e) => Problem::database(&e),
    }
}

/// 404 for a name not stored; 409 when the tools file or code serves it (it cannot be
/// managed here).
fn absent(app: &AdminState, name: &str) -> Problem {
    match app.definitions.origin_of(name).filter(|o| *o != Origin::Database) {
        Some(origin) => defined_elsewhere(name, origin),
        None => Problem::not_found(format!("no tool definition called {name:?} is stored")),
    }
}

fn defined_elsewhere(name: &str, origin: Origin) -> Problem {
    let detail = match origin {
        Origin::File => format!("tool {name:?} is defined in the tools file; edit the file"),
        _ => format!("tool {name:?} is built into the server (code); it cannot be changed through the admin API"),
    };
    Problem::new(Kind::DefinedElsewhere, detail).with_member("origin", json!(origin.as_str()))
}

/// One row as JSON, with its `ETag`.
fn one(app: &AdminState, status: StatusCode, stored: &StoredTool) -> Response {
    let mut res = (status, Json(view(app, stored))).into_response();
    if let Ok(tag) = HeaderValue::from_str(&etag(stored.revision)) {
        res.headers_mut().insert(header::ETAG, tag);
    }
    res
}

/// A row as the API shows it. `served`: whether the registry serves it right now (false when
/// disabled, or when the stored definition no longer compiles; `GET /admin/sources` says why).
/// `warnings`: what `toolgate tools validate` would warn about (valid, but probably unwanted).
fn view(app: &AdminState, t: &StoredTool) -> Value {
    json!({
        "name": t.name,
        "enabled": t.enabled,
        "revision": t.revision,
        "created_at": rfc3339(t.created_at),
        "updated_at": rfc3339(t.updated_at),
        "updated_by": t.updated_by,
        "served": app.definitions.origin_of(&t.name) == Some(Origin::Database),
        "definition": t.definition,
        "warnings": crate::tooldef::definition_warnings(&t.definition, "database", &t.name),
    })
}

pub(super) fn rfc3339(t: time::OffsetDateTime) -> String {
    t.format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}
