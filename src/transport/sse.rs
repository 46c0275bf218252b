//! The Server-Sent Events response body (the framing is [`crate::protocol::sse`]): keep-alive comments, an end
//! on shutdown (with a last frame such as a `retry` hint), and an optional guard that
//! cancels work when the client goes away.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, Response, StatusCode, header};
use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::time::{Instant, interval_at};
use tokio_util::sync::CancellationToken;

pub use crate::protocol::sse::{KEEP_ALIVE, endpoint_event, message_event, priming_event, retry_hint};

/// How an SSE body ends besides its channel closing.
#[derive(Default)]
pub struct BodyOptions {
    /// Frames sent before anything from the channel.
    pub preamble: Vec<Bytes>,
    /// Frame sent when the server shuts down or the owner closes (e.g. a `retry` hint).
    pub on_close: Option<Bytes>,
    /// Dropped with the body, i.e. when the client disconnects: a `DropGuard` that cancels
    /// the request (modern era), or a guard that unregisters a listener.
    pub guard: Option<Box<dyn std::any::Any + Send + Sync>>,
    /// Counts the stream in `toolgate_sse_streams_open{kind}` while the body lives.
    pub kind: Option<crate::metrics::SseKind>,
}

/// Boxes what a stream holds until it ends (a cap permit, a listener registration).
pub fn guard(held: impl std::any::Any + Send + Sync) -> Box<dyn std::any::Any + Send + Sync> {
    Box::new(held)
}

struct State {
    rx: mpsc::Receiver<Bytes>,
    preamble: std::vec::IntoIter<Bytes>,
    keep_alive: tokio::time::Interval,
    close: CancellationToken,
    on_close: Option<Bytes>,
    done: bool,
    _guard: Option<Box<dyn std::any::Any + Send + Sync>>,
    _open: Option<crate::metrics::record::SseOpen>,
}

/// Streams `rx` as an SSE body until the channel closes or `close` fires.
pub fn body(rx: mpsc::Receiver<Bytes>, keep_alive: Duration, close: CancellationToken, options: BodyOptions) -> Body {
    let state = State {
        rx,
        preamble: options.preamble.into_iter(),
        keep_alive: interval_at(Instant::now() + keep_alive, keep_alive),
        close,
        on_close: options.on_close,
        done: false,
        _guard: options.guard,
        _open: options.kind.map(crate::metrics::record::SseOpen::new),
    };
    let stream = futures_util::stream::unfold(state, |mut s| async move {
        if s.done {
            return None;
        }
        if let Some(frame) = s.preamble.next() {
            return Some((Ok::<_, Infallible>(frame), s));
        }
        let frame = tokio::select! {
            biased;
            msg = s.rx.recv() => match msg {
                Some(frame) => frame,
                // The producer is gone. If that is because the owner closed the stream
                // (shutdown, session end), still send the closing frame.
                None => {
                    s.done = true;
                    match s.on_close.take().filter(|_| s.close.is_cancelled()) {
                        Some(frame) => frame,
                        None => return None,
                    }
                }
            },
            () = s.close.cancelled() => {
                s.done = true;
                match s.on_close.take() {
                    Some(frame) => frame,
                    None => return None,
                }
            }
            _ = s.keep_alive.tick() => Bytes::from_static(KEEP_ALIVE),
        };
        Some((Ok(frame), s))
    });
    Body::from_stream(stream)
}

/// A 200 `text/event-stream` response with the headers proxies need to pass it through.
pub fn response(body: Body) -> Response<Body> {
    let mut res = Response::new(body);
    *res.status_mut() = StatusCode::OK;
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, no-transform"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_well_formed() {
        assert_eq!(&message_event(Some("1_2"), "{}")[..], b"id: 1_2\nevent: message\ndata: {}\n\n");
        assert_eq!(&message_event(None, "{}")[..], b"event: message\ndata: {}\n\n");
        assert_eq!(&priming_event("1_0", 3000)[..], b"id: 1_0\nretry: 3000\ndata: \n\n");
        assert_eq!(&endpoint_event("/messages?sessionId=a")[..], b"event: endpoint\ndata: /messages?sessionId=a\n\n");
    }
}
