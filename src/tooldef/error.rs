//! Validation errors for tool definitions: every problem names where it is (source, tool,
//! field) so an operator can fix a tools file or an admin request without guessing.

use serde::Serialize;

/// One problem in one field of one definition. `field` is a dotted path from the definition's
/// root (`http.url`, `input_schema.properties.owner`, `command.args[2]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self { field: field.into(), message: message.into() }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Every problem found in one tool's definition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ToolErrors {
    /// The tool's name, or `tools[<index>]` when the name itself is missing or unreadable.
    pub tool: String,
    /// The file the definition is in, when the source is a directory of tools files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    pub errors: Vec<FieldError>,
}

impl ToolErrors {
    pub fn new(tool: impl Into<String>, errors: Vec<FieldError>) -> Self {
        Self { tool: tool.into(), file: None, errors }
    }
}

/// Why a set of definitions (a tools file, an admin request) was refused. Nothing of a refused
/// set is applied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, thiserror::Error)]
pub struct DefinitionErrors {
    /// Where the definitions came from: a file path, `database`, or `request`.
    pub origin: String,
    /// A problem with the source as a whole (unreadable file, TOML syntax), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub general: Option<String>,
    pub tools: Vec<ToolErrors>,
}

impl DefinitionErrors {
    pub fn general(source: impl Into<String>, message: impl Into<String>) -> Self {
        Self { origin: source.into(), general: Some(message.into()), tools: Vec::new() }
    }

    pub fn field(source: impl Into<String>, tool: impl Into<String>, error: FieldError) -> Self {
        Self { origin: source.into(), general: None, tools: vec![ToolErrors::new(tool, vec![error])] }
    }

    /// Total number of problems (for logs and metrics).
    pub fn count(&self) -> usize {
        usize::from(self.general.is_some()) + self.tools.iter().map(|t| t.errors.len()).sum::<usize>()
    }
}

impl std::fmt::Display for DefinitionErrors {
    /// One line per problem: `tools.toml: tool "get_weather": http.url: ...`, naming the file
    /// of a directory the tool is in.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut first = true;
        let mut line = |f: &mut std::fmt::Formatter<'_>, text: String| {
            if !first {
                f.write_str("\n")?;
            }
            first = false;
            f.write_str(&text)
        };
        if let Some(general) = &self.general {
            line(f, format!("{}: {general}", self.origin))?;
        }
        for tool in &self.tools {
            let file = tool.file.as_deref().unwrap_or(&self.origin);
            for e in &tool.errors {
                line(f, format!("{file}: tool {:?}: {e}", tool.tool))?;
            }
        }
        Ok(())
    }
}
