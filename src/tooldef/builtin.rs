//! `builtin` tools: a compiled-in tool referenced by id, with its settings.

use serde::Deserialize;
use serde_json::{Map, Value};

/// `[tools.builtin]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuiltinSpec {
    pub id: String,
    #[serde(default)]
    pub settings: Map<String, Value>,
}
