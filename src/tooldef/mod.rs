//! Declarative tools: definitions written in a tools file or stored through the admin API,
//! validated completely, and compiled into ordinary [`Tool`](crate::tool::Tool)s. Three kinds:
//! [`http`] wraps a REST endpoint (SSRF-safe), [`command`] runs a fixed program without a
//! shell, [`builtin`] names a compiled-in tool.
//!
//! A definition is checked whole before anything is served: a tools file with one bad tool
//! changes nothing, and the error names the file, the tool and the field.

pub mod builtin;
mod check;
pub mod command;
mod compile;
pub mod db;
pub mod error;
pub mod http;
mod model;
pub mod openapi;
mod sources;
mod warnings;

use std::path::Path;

use serde_json::Value;

pub use compile::{
    Compiled, Format, RawDef, compile, compile_all, is_definition_file, parse_def, parse_file, parse_text, parse_text_as, read_path,
};
pub use error::{DefinitionErrors, FieldError, ToolErrors};
pub use model::{Annotations, AuditArguments, Kind, ResponseFormat, ToolDef, ToolsFile};
pub use sources::{Definitions, SourceStatus};
pub use warnings::{definition_warnings, warnings};

use crate::config::ToolSettings;

/// What a kind's compiler gets besides its own spec.
#[derive(Debug)]
pub struct BuildCtx<'a> {
    /// The tool's name (for messages and logs).
    pub tool: &'a str,
    /// The final input schema (with `response_format` added when offered), already compiled
    /// successfully: templates may check that the fields they use exist.
    pub input_schema: &'a Value,
    /// Whether the definition says the tool is idempotent (`annotations.idempotent_hint`).
    pub idempotent: bool,
    /// Relative paths in the definition (secret files, working directories) are resolved
    /// against this directory: the tools file's own, or the working directory.
    pub base_dir: &'a Path,
    pub settings: &'a ToolSettings,
}

impl BuildCtx<'_> {
    /// `path` resolved against [`base_dir`](Self::base_dir).
    pub fn resolve(&self, path: &Path) -> std::path::PathBuf {
        if path.is_absolute() { path.to_owned() } else { self.base_dir.join(path) }
    }

    /// Whether the input schema declares a top-level property `name`.
    pub fn has_property(&self, name: &str) -> bool {
        self.input_schema.get("properties").and_then(|p| p.get(name)).is_some()
    }
}
