//! `builtin` tools: a compiled-in tool referenced by id, with its settings. The definition may
//! rename it and replace its description, title, annotations and limits; its input schema is
//! the built-in's own, because its handler reads exactly those arguments.

use std::path::PathBuf;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::FieldError;
use crate::config::Settings;
use crate::packs::examples;
use crate::tool::Tool;

/// `[tools.builtin]`: `id` and the built-in's own settings.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuiltinSpec {
    pub id: String,
    #[serde(default)]
    pub settings: Map<String, Value>,
}

/// The built-ins a definition can name, with the settings each accepts.
pub const BUILTINS: &[(&str, &[&str])] = &[("analyze_csv", &["dir"]), ("calculate_sum", &[]), ("echo", &[]), ("get_current_time", &[])];

/// The built-in `spec` names, configured.
pub fn tool(spec: &BuiltinSpec, settings: &Settings) -> Result<Tool, FieldError> {
    let Some((id, accepted)) = BUILTINS.iter().find(|(id, _)| *id == spec.id) else {
        let known: Vec<&str> = BUILTINS.iter().map(|(id, _)| *id).collect();
        return Err(FieldError::new("builtin.id", format!("unknown built-in {:?}; known: {}", spec.id, known.join(", "))));
    };
    if let Some(key) = spec.settings.keys().find(|k| !accepted.contains(&k.as_str())) {
        let accepted = if accepted.is_empty() { "none".to_owned() } else { accepted.join(", ") };
        return Err(FieldError::new(format!("builtin.settings.{key}"), format!("not a setting of {id:?} (accepted: {accepted})")));
    }
    Ok(match *id {
        "analyze_csv" => {
            let dir = match spec.settings.get("dir") {
                None => settings.tools.csv_dir.clone(),
                Some(Value::String(dir)) if !dir.is_empty() => PathBuf::from(dir),
                Some(_) => return Err(FieldError::new("builtin.settings.dir", "must be a directory path (a non-empty string)")),
            };
            examples::analyze_csv(dir)
        }
        "calculate_sum" => examples::calculate_sum(),
        "echo" => examples::echo(),
        _ => examples::get_current_time(),
    })
}
