//! Request extractors: the [`Caller`] of an MCP request, built once from what the layers in
//! front put into the request (the bearer gate's principal, the connection's peer address,
//! the trace) and the trusted-proxy settings, instead of by hand in every handler.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{Extensions, HeaderMap, HeaderName};

use super::client_ip::TrustedProxies;
use super::headers;
use super::state::McpState;
use crate::caller::Caller;
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
        Ok(caller(&McpState::from_ref(state).proxies, &parts.extensions, &parts.headers))
    }
}

/// The caller of a request with these extensions and headers: the principal once the bearer
/// gate has put one there, the client address through `proxies`, the request id, the trace.
/// The gates use it before authentication; handlers get it as an extractor.
pub fn caller(proxies: &TrustedProxies, extensions: &Extensions, headers: &HeaderMap) -> Caller {
    Caller {
        principal: extensions.get::<Arc<Principal>>().cloned(),
        request_id: headers::get(headers, &REQUEST_ID).map(Arc::from),
        ip: proxies.client_of(extensions, headers),
        trace: extensions.get::<TraceContext>().copied(),
        token: extensions.get::<crate::principal::BearerToken>().cloned(),
        server: extensions.get::<Arc<crate::virtual_servers::VirtualServer>>().cloned(),
    }
}
