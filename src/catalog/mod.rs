//! Resources and prompts the server offers besides tools, with keyset pagination shared by
//! every list method.

pub mod cursor;
pub mod prompts;
pub mod resources;

pub use prompts::{Prompt, PromptArgument, PromptCatalog};
pub use resources::{Resource, ResourceCatalog, ResourceTemplate};
