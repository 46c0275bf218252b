//! The `request` span around every HTTP request: method, path (never the query), the request
//! id (`x-request-id`, set by the layer before this one) and the trace id (the W3C
//! `traceparent` header's, else a new trace). The [`TraceContext`] goes into the request's
//! extensions for handlers and audit records. A tower layer rather than `from_fn`: no boxing on
//! the request path.

use std::task::{Context, Poll};

use http::Request;
use tracing::Span;
use tracing::field::{Empty, display};
use tracing::instrument::{Instrument as _, Instrumented};

use super::TraceContext;

/// Wraps a service in [`RequestSpan`].
#[derive(Clone, Copy, Debug, Default)]
pub struct RequestSpanLayer;

impl<S> tower::Layer<S> for RequestSpanLayer {
    type Service = RequestSpan<S>;

    fn layer(&self, inner: S) -> RequestSpan<S> {
        RequestSpan { inner }
    }
}

/// Runs the inner service inside the request's span.
#[derive(Clone, Debug)]
pub struct RequestSpan<S> {
    inner: S,
}

impl<S, B> tower::Service<Request<B>> for RequestSpan<S>
where
    S: tower::Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Instrumented<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok());
        let incoming = header("traceparent").and_then(TraceContext::parse);
        let span = tracing::info_span!(
            "request",
            method = %req.method(),
            path = %req.uri().path(),
            request_id = header("x-request-id").unwrap_or_default(),
            trace_id = Empty,
        );
        let trace = super::adopt(&span, incoming);
        span.record("trace_id", display(trace.trace_id_hex()));
        req.extensions_mut().insert(trace);
        // Entered while the inner service is called too: `TraceLayer` takes this span there.
        let future = span.in_scope(|| self.inner.call(req));
        future.instrument(span)
    }
}

/// `TraceLayer::make_span_with` inside [`RequestSpanLayer`]: the request span, so the
/// response and failure events (and the body's) land in it instead of a second span.
pub fn current_span<B>(_: &Request<B>) -> Span {
    Span::current()
}
