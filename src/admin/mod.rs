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
//! GET    /admin/approvals                upstream catalog changes held for approval (diff)
//! POST   /admin/approvals/{id}/approve   serve a held version (every replica)   409 if decided
//! POST   /admin/approvals/{id}/reject    never serve it; the approved version stays
//! POST   /admin/reload                   reload the tools file and the database now
//! GET    /admin/catalog                  every served tool: listing, origin, scopes a call needs
//! POST   /admin/tools/{name}/call        try a tool: an MCP tools/call with the admin's token
//!                                        (`Accept: text/event-stream`: progress as it comes)
//! GET    /admin/sessions                 live legacy sessions and their open streams
//! GET    /admin/audit                    audit records, filtered, newest first
//! GET    /admin/audit/export             the same as a JSON-lines or CSV download
//! GET    /admin/overview                 key figures (requests, calls, latency, queues)
//! GET    /admin/series                   calls, errors, rate, latency over time (charts)
//! GET    /admin/grants                   sign-ins granted by the built-in authorization server
//! DELETE /admin/grants/{id}              revoke one (its refresh and access tokens)
//! GET    /admin/connections              users' accounts at per-user upstreams (the vault)
//! DELETE /admin/connections/{id}         revoke one
//! GET    /admin/tasks                    every owner's tasks, filtered, newest first
//! POST   /admin/tasks/{id}/cancel        cancel one (as tasks/cancel does)   409 if it ended
//! GET    /admin/console[/{asset}]        the admin console (static; outside the gate, see console)
//! ```
//!
//! Request path, outermost first: request id and trace (in `app::start_admin`), panics to
//! 500, the admin gate ([`auth`]: bearer token with `admin.scope` when auth is on), the body
//! limit, the handler. Every error is an RFC 9457 problem document ([`problem`]). The console's
//! static files ([`console`]) are the only routes outside the gate: they hold no data.

mod actor;
mod approvals;
mod audit;
mod auth;
mod catalog;
mod connections;
pub mod console;
mod extract;
mod grants;
pub mod metrics;
mod overview;
mod problem;
mod prom;
mod series;
mod servers;
mod sessions;
mod sources;
mod state;
mod tasks;
mod tools;
mod try_call;
mod try_stream;
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
        .route("/admin/approvals", get(approvals::list))
        .route("/admin/approvals/{id}/approve", post(approvals::approve))
        .route("/admin/approvals/{id}/reject", post(approvals::reject))
        .route("/admin/servers", get(servers::list))
        .route("/admin/servers/{name}", get(servers::get).put(servers::put).delete(servers::delete))
        .route("/admin/reload", post(sources::reload))
        .route("/admin/catalog", get(catalog::list))
        .route("/admin/tools/{name}/call", post(try_call::call))
        .route("/admin/sessions", get(sessions::list))
        .route("/admin/audit", get(audit::list))
        .route("/admin/audit/export", get(audit::export))
        .route("/admin/overview", get(overview::overview))
        .route("/admin/series", get(series::series))
        .route("/admin/connections", get(connections::list))
        .route("/admin/connections/{id}", axum::routing::delete(connections::revoke))
        .route("/admin/grants", get(grants::list))
        .route("/admin/grants/{id}", axum::routing::delete(grants::revoke))
        .route("/admin/tasks", get(tasks::list))
        .route("/admin/tasks/{id}/cancel", post(tasks::cancel))
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
        // Added after the gate's layer, so outside it: the console's static shell, which a
        // browser loads without a token (see `console`).
        .merge(console_router())
        .with_state(state)
}

/// The console's page and files: no data, the same bytes for everyone.
fn console_router() -> Router<AdminState> {
    Router::new()
        .route("/admin/console", get(console::page))
        .route("/admin/console/boot.json", get(console::boot))
        .route("/admin/console/{asset}", get(console::asset))
}

async fn not_found() -> Problem {
    Problem::not_found("no such admin resource; see deploy/admin/openapi.yaml")
}

/// axum adds the `Allow` header to this answer.
async fn method_not_allowed(method: Method) -> Problem {
    Problem::new(problem::Kind::MethodNotAllowed, format!("{method} is not allowed here; the Allow header lists what is"))
}
