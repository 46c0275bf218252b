//! Text and data from outside the operator's own files: clients, upstream MCP servers, imported
//! documents, identity providers. The rule (ARCHITECTURE.md, "Untrusted input"): such text
//! reaches a log, a file, a name or memory only through this module's bounded, escaping code.
//!
//! - **Logs**: [`text::Escaped`] writes a string with every control and layout-changing
//!   character escaped and its length capped, so one value can never end a log line, forge
//!   another, move a terminal's cursor or fill the disk. The log formatters pass *every* field
//!   through it (`telemetry`), so a call site cannot forget.
//! - **Memory**: [`json::from_slice`] decodes JSON under a [`json::Budget`] (values and depth),
//!   counted while decoding, so a message's cost is bounded whatever its byte size: a few bytes
//!   per empty value would otherwise cost hundreds once decoded.
//! - **Files** are written through serializers (the OpenAPI importer re-reads what it wrote;
//!   an audit export's CSV cells go through [`text::spreadsheet_cell`]);
//!   **names** through each kind's name grammar (`tool::valid_name`).
//!
//! The bottom layer: it imports nothing from the crate, so every layer can use it.

pub mod json;
pub mod text;

pub use text::{Escaped, escaped};
