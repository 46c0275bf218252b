//! The admin listener: a separate port (never the public one by default) for operators.
//! (The REST API for tool definitions is being built: see the admin helper's task.)

mod settings;

use axum::Router;

pub use settings::AdminSettings;

use crate::app::AppState;

/// The admin router.
pub fn router(state: AppState) -> Router {
    Router::new().with_state(state)
}
