//! The HTTP layer of the public router: `toolgate_http_requests_total{route,method,status}`,
//! `toolgate_http_request_duration_seconds{route,method}` and
//! `toolgate_http_requests_in_flight`, recorded when the response head is ready (an SSE
//! stream counts until it opens, not for its lifetime).
//!
//! The route is the matched template (`MatchedPath`), "unmatched" without one, so a scan of
//! random paths adds no series. A hand-written layer rather than `from_fn`: no boxed future
//! and no clone of the inner service per request; the handles of each (route, method,
//! status) are resolved once and then read from a lock-free map.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{LazyLock, OnceLock};
use std::task::{Context, Poll};
use std::time::Instant;

use arc_swap::ArcSwap;
use axum::extract::MatchedPath;
use axum::http::{Method, Request, Response};
use metrics::{Counter, Gauge, Histogram};
use tower::{Layer, Service};

use crate::metrics::{HTTP_REQUEST_DURATION, HTTP_REQUESTS, HTTP_REQUESTS_IN_FLIGHT};

/// The label of requests that matched no route.
const UNMATCHED: &str = "unmatched";
/// Distinct route templates kept; the routers have a handful, so this is only a backstop.
const MAX_ROUTES: usize = 64;

/// Adds [`HttpMetrics`] to a service.
#[derive(Clone, Copy, Debug, Default)]
pub struct HttpMetricsLayer;

impl<S> Layer<S> for HttpMetricsLayer {
    type Service = HttpMetrics<S>;

    fn layer(&self, inner: S) -> HttpMetrics<S> {
        HttpMetrics { inner }
    }
}

/// Records every request's route, method, status and time to the response head.
#[derive(Clone, Debug)]
pub struct HttpMetrics<S> {
    inner: S,
}

impl<S, B, ResBody> Service<Request<B>> for HttpMetrics<S>
where
    S: Service<Request<B>, Response = Response<ResBody>>,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let route = req.extensions().get::<MatchedPath>().map_or(UNMATCHED, |p| intern_route(p.as_str()));
        let method = method_label(req.method());
        let in_flight = InFlight::enter();
        ResponseFuture { inner: self.inner.call(req), route, method, start: Instant::now(), in_flight: Some(in_flight) }
    }
}

pin_project_lite::pin_project! {
    /// The inner response future, timed.
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        route: &'static str,
        method: &'static str,
        start: Instant,
        // Dropped when the head is ready, or with the future when the client goes first.
        in_flight: Option<InFlight>,
    }
}

impl<F, ResBody, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<ResBody>, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let result = std::task::ready!(this.inner.poll(cx));
        // A service error never happens with axum's infallible routes; it would become a 500.
        let status = result.as_ref().map_or(500, |res| res.status().as_u16());
        record(this.route, this.method, status, this.start.elapsed().as_secs_f64());
        this.in_flight.take();
        Poll::Ready(result)
    }
}

/// One request not yet answered.
struct InFlight(&'static Gauge);

impl InFlight {
    fn enter() -> Self {
        static GAUGE: OnceLock<Gauge> = OnceLock::new();
        let gauge = GAUGE.get_or_init(|| metrics::gauge!(HTTP_REQUESTS_IN_FLIGHT));
        gauge.increment(1.0);
        Self(gauge)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

/// Methods with a label of their own; anything else is "other".
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        Method::HEAD => "HEAD",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        _ => "other",
    }
}

/// The route templates seen so far, each leaked once (bounded by the routers' routes).
static ROUTES: LazyLock<ArcSwap<Vec<&'static str>>> = LazyLock::new(|| ArcSwap::from_pointee(Vec::new()));

/// The `'static` copy of a route template, so the label and the cache key cost nothing.
fn intern_route(route: &str) -> &'static str {
    if let Some(known) = ROUTES.load().iter().find(|r| **r == route) {
        return known;
    }
    let mut interned = "other";
    ROUTES.rcu(|routes| {
        let mut routes = Vec::clone(routes);
        interned = match routes.iter().find(|r| **r == route) {
            Some(known) => known,
            None if routes.len() >= MAX_ROUTES => "other",
            None => {
                let leaked: &'static str = Box::leak(route.to_owned().into_boxed_str());
                routes.push(leaked);
                leaked
            }
        };
        routes
    });
    interned
}

/// The handles of one (route, method, status).
#[derive(Clone)]
struct Handles {
    requests: Counter,
    duration: Histogram,
}

type Key = (&'static str, &'static str, u16);

static HANDLES: LazyLock<ArcSwap<HashMap<Key, Handles>>> = LazyLock::new(|| ArcSwap::from_pointee(HashMap::new()));

fn record(route: &'static str, method: &'static str, status: u16, seconds: f64) {
    crate::metrics::series::observe_http(seconds);
    let key = (route, method, status);
    // The guard borrows the map without touching a shared reference count.
    if let Some(h) = HANDLES.load().get(&key) {
        h.requests.increment(1);
        h.duration.record(seconds);
        return;
    }
    let created = Handles {
        requests: metrics::counter!(HTTP_REQUESTS, "route" => route, "method" => method, "status" => status.to_string()),
        duration: metrics::histogram!(HTTP_REQUEST_DURATION, "route" => route, "method" => method),
    };
    created.requests.increment(1);
    created.duration.record(seconds);
    HANDLES.rcu(|map| {
        let mut map = HashMap::clone(map);
        map.entry(key).or_insert_with(|| created.clone());
        map
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_interned_once() {
        let a = intern_route("/test/route/{id}");
        let b = intern_route(&String::from("/test/route/{id}"));
        assert!(std::ptr::eq(a, b));
        assert_eq!(method_label(&Method::from_bytes(b"BREW").expect("method")), "other");
    }
}
