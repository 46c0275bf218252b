//! The admin listener: a separate port (never the public one by default) for operators. It
//! serves the REST API for tool definitions stored in the database (`deploy/admin/openapi.yaml`
//! describes it):
//!
//! ```text
//! GET    /admin/tools[?origin=]          stored definitions (+ names served by file/code)
//! POST   /admin/tools                    create            201, Location, ETag
//! GET    /admin/tools/{name}             one               ETag
//! PUT    /admin/tools/{name}             replace           If-Match: "<revision>" → 412 when stale
//! DELETE /admin/tools/{name}             delete            204
//! POST   /admin/tools/{name}/enable      enabled = true    idempotent
//! POST   /admin/tools/{name}/disable     enabled = false   idempotent
//! GET    /admin/sources                  each source's last reload and error
//! GET    /admin/upstreams                each upstream MCP server's state
//! GET    /admin/upstreams/{name}         one, with its stored definition
//! PUT    /admin/upstreams/{name}         store a definition (create 201 / replace 200), If-Match
//! DELETE /admin/upstreams/{name}         delete a stored definition   204
//! POST   /admin/reload                   reload the tools file and the database now
//! ```
//!
//! Request path, outermost first: request id and trace (in `app::start_admin`), panics to
//! 500, the admin gate ([`auth`]: bearer token with `admin.scope` when auth is on), the body
//! limit, the handler. Every error is an RFC 9457 problem document ([`problem`]).

mod actor;
mod auth;
mod extract;
pub mod metrics;
mod problem;
mod sources;
mod state;
mod tools;
mod upstreams;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::Method;
use axum::response::IntoResponse as _;
use axum::routing::{get, post};
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;

pub use crate::config::admin::AdminSettings;
pub use state::{AdminShared, AdminState};

use self::problem::Problem;

/// The admin router.
pub fn router(state: AdminState) -> Router {
    let limit = state.settings.admin.max_body_bytes;
    Router::new()
        .route("/admin/tools", get(tools::list).post(tools::create))
        .route("/admin/tools/{name}", get(tools::get).put(tools::replace).delete(tools::delete))
        .route("/admin/tools/{name}/enable", post(tools::enable))
        .route("/admin/tools/{name}/disable", post(tools::disable))
        .route("/admin/sources", get(sources::status))
        .route("/admin/upstreams", get(upstreams::list))
        .route("/admin/upstreams/{name}", get(upstreams::get).put(upstreams::put).delete(upstreams::delete))
        .route("/admin/reload", post(sources::reload))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        // Outermost first: a panic becomes a 500 problem (and is logged by the panic hook);
        // the gate also covers unknown routes, so without a token nothing about the API's
        // shape is revealed; then the body limit.
        .layer(
            ServiceBuilder::new()
                .layer(CatchPanicLayer::custom(|_| {
                    Problem::new(problem::Kind::Internal, "internal error; the server logged the details").into_response()
                }))
                .layer(axum::middleware::from_fn_with_state(state.clone(), auth::require_admin))
                .layer(DefaultBodyLimit::max(limit)),
        )
        .with_state(state)
}

async fn not_found() -> Problem {
    Problem::not_found("no such admin resource; see deploy/admin/openapi.yaml")
}

/// axum adds the `Allow` header to this answer.
async fn method_not_allowed(method: Method) -> Problem {
    Problem::new(problem::Kind::MethodNotAllowed, format!("{method} is not allowed here; the Allow header lists what is"))
}
