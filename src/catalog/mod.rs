//! Resources and prompts the server offers besides tools, paginated with the protocol's keyset
//! cursors ([`crate::protocol::cursor`]).

/// The cursors, kept where older code finds them.
pub use crate::protocol::cursor;
pub mod prompts;
pub mod resources;

pub use prompts::{Prompt, PromptArgument, PromptCatalog};
pub use resources::{Resource, ResourceCatalog, ResourceTemplate};
