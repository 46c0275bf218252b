//! `/admin/sources` and `/admin/reload`: where the served tools come from, the last reload
//! of each source (with the tools file's last error, which an operator needs after a bad
//! edit), and a reload on demand.

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::actor::Actor;
use super::problem::{Kind, Problem};
use super::state::AdminState;
use super::tools::rfc3339;
use crate::tool::{Origin, SyncReport};
use crate::tooldef::{DefinitionErrors, FieldError, SourceStatus};

/// `GET /admin/sources`.
pub async fn status(State(app): State<AdminState>) -> Json<Value> {
    let defs = &app.definitions;
    let path = app.settings.tools.path.as_deref().map(|p| p.display().to_string());
    let mut file = source(&defs.status(Origin::File));
    file["configured"] = json!(path.is_some());
    file["path"] = json!(path);
    file["watch"] = json!(path.is_some() && app.settings.tools.watch);
    Json(json!({
        "file": file,
        "database": source(&defs.status(Origin::Database)),
        "code": {"tools": defs.status(Origin::Code).tools},
        "upstreams": app.upstreams.statuses(),
    }))
}

fn source(s: &SourceStatus) -> Value {
    let loaded_at = s.loaded_at.and_then(|secs| time::OffsetDateTime::from_unix_timestamp(i64::try_from(secs).ok()?).ok()).map(rfc3339);
    json!({"tools": s.tools, "loaded_at": loaded_at, "last_error": s.last_error})
}

/// `POST /admin/reload`: re-reads the tools file (when configured) and the database now.
/// 200 with what changed in each; 422 when a source was refused (its previous tools stay in
/// service), listing every problem.
pub async fn reload(State(app): State<AdminState>, actor: Actor) -> Result<Json<Value>, Response> {
    let file = if app.settings.tools.path.is_some() { Some(app.definitions.reload_file().await) } else { None };
    let database = app.definitions.reload_database().await;
    let outcome = |r: &Result<SyncReport, DefinitionErrors>| match r {
        Ok(report) => json!({"status": "ok", "report": report}),
        Err(errors) => json!({"status": "refused", "errors": errors}),
    };
    let sources = json!({
        "file": file.as_ref().map_or_else(|| json!({"status": "not_configured"}), outcome),
        "database": outcome(&database),
    });
    let refused: Vec<(&str, &DefinitionErrors)> =
        [("file", file.as_ref().and_then(|r| r.as_ref().err())), ("database", database.as_ref().err())]
            .into_iter()
            .filter_map(|(s, e)| Some((s, e?)))
            .collect();
    let summary = if refused.is_empty() {
        "ok".to_owned()
    } else {
        format!("refused: {}", refused.iter().map(|(s, _)| *s).collect::<Vec<_>>().join(", "))
    };
    actor.audit(&app, None, format!("reloaded tool definitions on request ({summary})")).await;
    if refused.is_empty() {
        return Ok(Json(sources));
    }
    // One entry per problem: the field is the source, the message the full line (origin,
    // tool, field path and why).
    let errors = refused
        .iter()
        .flat_map(|(source, e)| e.to_string().lines().map(|line| FieldError::new(*source, line)).collect::<Vec<_>>())
        .collect();
    Err(Problem::new(Kind::ReloadFailed, format!("{summary}; the refused sources keep their previous tools in service"))
        .with_errors(errors)
        .with_member("sources", sources)
        .into_response())
}
