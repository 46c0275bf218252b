//! Request extractors: the [`Caller`] of an MCP request, built once from what the layers in
//! front put into the request (the bearer gate's principal, the connection's peer address,
//! the trace) and the trusted-proxy settings, instead of by hand in every handler.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::{FromRef, FromRequestParts};
use axum::http::HeaderName;
use axum::http::request::Parts;

use super::headers;
use super::state::McpState;
use crate::admission::Caller;
use crate::principal::Principal;
use crate::telemetry::TraceContext;

static REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

impl<S> FromRequestParts<S> for Caller
where
    McpState: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Infallible> {
        let app = McpState::from_ref(state);
        Ok(Caller {
            principal: parts.extensions.get::<Arc<Principal>>().cloned(),
            request_id: headers::get(&parts.headers, &REQUEST_ID).map(Arc::from),
            ip: app.proxies.client_of(&parts.extensions, &parts.headers),
            trace: parts.extensions.get::<TraceContext>().copied(),
        })
    }
}
