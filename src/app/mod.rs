//! The assembly, the top layer: it builds the state from the settings ([`state`]), the router
//! and its layers ([`router`]), starts the background tasks ([`background`]) and the cluster
//! followers ([`follow`]), binds and serves ([`start`]), and runs the graceful shutdown
//! ([`shutdown`]). Nothing else in the crate imports it.

pub mod background;
pub mod follow;
pub mod router;
pub mod shutdown;
pub mod start;
pub mod state;

pub use router::router;
pub use start::{Running, start};
pub use state::{AppState, Shared};
