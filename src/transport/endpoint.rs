//! Which MCP endpoint a request is for, decided once, outermost on the MCP routes: the default
//! endpoint (`server.mcp_path`, and the 2024-11-05 `/sse` + `/messages`), a virtual server by
//! its path (its [`VirtualServer`] goes into the request for the bearer gate, the `Caller`
//! and every method after it), or none: 404 before any other work, so a mistyped path is
//! told it is wrong instead of being asked for a token.

use std::future::{Ready, ready};
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{Response, StatusCode};
use futures_util::future::Either;
use tower::{Layer, Service};

use crate::server::McpServer;
use crate::virtual_servers::VirtualServer;

/// See the module docs.
#[derive(Clone)]
pub struct EndpointLayer {
    server: Arc<McpServer>,
    /// The default endpoint's paths.
    own: Arc<[String]>,
}

impl EndpointLayer {
    pub fn new(server: Arc<McpServer>, mcp_path: &str, legacy_sse: bool) -> Self {
        let mut own = vec![mcp_path.to_owned()];
        if legacy_sse {
            own.extend(["/sse".to_owned(), "/messages".to_owned()]);
        }
        Self { server, own: own.into() }
    }
}

impl<S> Layer<S> for EndpointLayer {
    type Service = Endpoint<S>;

    fn layer(&self, inner: S) -> Endpoint<S> {
        Endpoint { inner, layer: self.clone() }
    }
}

/// See [`EndpointLayer`].
#[derive(Clone)]
pub struct Endpoint<S> {
    inner: S,
    layer: EndpointLayer,
}

impl<S> Service<Request> for Endpoint<S>
where
    S: Service<Request, Response = Response<Body>>,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = Either<Ready<Result<Response<Body>, S::Error>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request) -> Self::Future {
        let path = request.uri().path();
        if self.layer.own.iter().any(|p| p == path) {
            return Either::Right(self.inner.call(request));
        }
        match self.layer.server.servers.by_path(path) {
            Some(server) => {
                // Its view as of now is what this client may see: the baseline its listeners
                // are compared with (cached; rebuilt only after the registry changed).
                server.view(&self.layer.server.tools.snapshot());
                server.requests.increment(1);
                request.extensions_mut().insert::<Arc<VirtualServer>>(server);
                Either::Right(self.inner.call(request))
            }
            None => Either::Left(ready(Ok(super::headers::transport_error(
                StatusCode::NOT_FOUND,
                "Not Found: no MCP endpoint has this path; the MCP endpoint is server.mcp_path (default /mcp), or a virtual server's path",
            )))),
        }
    }
}
