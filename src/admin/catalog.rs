//! `GET /admin/catalog`: every tool the registry serves now, whatever its source, with what the
//! console needs to show it and to build its try-out form: the `tools/list` entry (title,
//! description, input schema, annotations), its origin, where calls really go, and the scopes a
//! token needs to call it. `GET /admin/tools` lists only the stored definitions (and names for
//! the rest); this is the served side.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::state::AdminState;

/// `GET /admin/catalog`.
pub async fn list(State(app): State<AdminState>) -> Json<Value> {
    let auth = &app.settings.auth;
    let auth_on = app.auth.is_some();
    let tools: Vec<Value> = app
        .server
        .tools
        .snapshot()
        .iter()
        .map(|t| {
            let tool = &t.tool;
            // What a token needs for `tools/call` of this tool: every MCP request's scopes,
            // the method's, then the tool's own (configured and declared).
            let mut scopes: Vec<String> = Vec::new();
            if auth_on {
                let tool_scopes = auth.tool_scopes.get(tool.name()).into_iter().flatten();
                for s in auth.required_scopes.iter().chain(auth.scopes_for_method("tools/call")).chain(tool_scopes).chain(tool.scopes()) {
                    if !scopes.contains(s) {
                        scopes.push(s.clone());
                    }
                }
            }
            json!({
                "name": tool.name(),
                "origin": tool.origin().as_str(),
                "provenance": tool.provenance(),
                "scopes": scopes,
                "listing": t.listing.as_ref(),
            })
        })
        .collect();
    Json(json!({ "tools": tools }))
}
