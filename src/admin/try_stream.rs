//! A tool try-out answered as it runs (`POST /admin/tools/{name}/call` with
//! `Accept: text/event-stream`): the console shows a long call's progress live and can cancel
//! it. Events, each with one line of JSON as `data`:
//!
//! ```text
//! event: progress       {"progress": 3, "total": 10, "message": "Step 3 of 10"}   (as they come)
//! event: notification   any other notification the tool sent (a log message), as sent
//! event: dropped        {"kept": 100}: later notifications are not sent (once, at the cap)
//! event: result         the JSON answer (`try_call`), last
//! event: problem        instead of `result`: the problem document a JSON answer would carry
//! ```
//!
//! A tool's text is bounded on the way: a progress message is clipped, and only the
//! notifications the JSON answer keeps are sent (its `notifications_dropped` counts the rest).
//! Refusals before the call starts (the body, scopes, rate limits) are plain problem answers.
//! The admin closing the stream cancels the call as any dropped MCP request is: the call's token
//! is cancelled, and the tool stops. A console that closes its own connection is noticed at
//! once; one behind a proxy that keeps its connection to toolgate open (or one that vanished)
//! only when a write fails, so the stream writes a keep-alive every [`KEEP_ALIVE`]: a quiet
//! tool is stopped within seconds of the console leaving, not after `sse.keep_alive_secs`.

use std::time::Duration;

use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse as _, Response};
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::problem::Problem;
use super::state::AdminState;
use super::try_call::{Notes, Running, answer as final_answer, ended_without_answer};
use crate::caller::Caller;
use crate::transport::exchange::Frame;
use crate::transport::sse;

/// The largest problem document read back into an event (ours are a few hundred bytes).
const MAX_PROBLEM_BYTES: usize = 64 * 1024;
/// How often the stream writes a comment, so that a console that left is noticed (and its
/// call cancelled) this soon, whatever the tool sends and whatever sits in between. One
/// stream per admin's try-out: the traffic is nothing.
const KEEP_ALIVE: Duration = Duration::from_secs(1);
/// The bytes of a progress message sent on (a tool or an upstream wrote it).
const MAX_PROGRESS_MESSAGE: usize = 1000;

/// Whether `Accept` names `text/event-stream` itself: a wildcard is not enough, so a client
/// that sends `*/*` (as most HTTP clients do) keeps getting the one JSON answer.
pub fn wanted(headers: &HeaderMap) -> bool {
    let mut ranges = headers.get_all(header::ACCEPT).into_iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(','));
    ranges.any(|range| {
        let mut parts = range.split(';');
        let stream = parts.next().is_some_and(|media| media.trim().eq_ignore_ascii_case("text/event-stream"));
        let refused = parts.any(|p| p.trim().strip_prefix("q=").and_then(|q| q.trim().parse::<f32>().ok()).is_some_and(|q| q <= 0.0));
        stream && !refused
    })
}

/// Answers the running call as an event stream.
pub fn answer(app: AdminState, name: String, caller: Caller, running: Running) -> Response {
    let (tx, rx) = mpsc::channel(app.settings.sse.stream_buffer.max(1));
    tokio::spawn(relay(app, name, caller, running, tx).in_current_span());
    // The body ends when the relay drops its sender, after the last event.
    sse::response(sse::body(rx, KEEP_ALIVE, CancellationToken::new(), sse::BodyOptions::default()))
}

/// Sends the call's notifications as they come, then its answer. Returns early when the stream
/// is gone: `running` is dropped unanswered, which cancels the call.
async fn relay(app: AdminState, name: String, caller: Caller, mut running: Running, tx: mpsc::Sender<Bytes>) {
    let (mut notes, mut capped) = (Notes::default(), false);
    let last = loop {
        let frame = tokio::select! {
            frame = running.frames.recv() => frame,
            () = tx.closed() => return,
        };
        match frame {
            Some(Frame::Final { json, .. }) => {
                running.answered();
                break final_answer(&app, &name, &caller, &json, notes, running.started);
            }
            Some(Frame::Message(json)) => {
                let message = serde_json::from_str(&json).unwrap_or(Value::String(json));
                let frame = match progress(&message) {
                    Some(progress) => Some(event("progress", &progress)),
                    None if notes.has_room() => Some(event("notification", &message)),
                    // The first one past the cap says so; the rest are only counted (the
                    // answer's `notifications_dropped`).
                    None if !capped => {
                        capped = true;
                        Some(event("dropped", &json!({"kept": notes.kept.len()})))
                    }
                    None => None,
                };
                notes.push(message);
                if let Some(frame) = frame
                    && tx.send(frame).await.is_err()
                {
                    return;
                }
            }
            Some(Frame::Detach) => {}
            None => break Err(ended_without_answer()),
        }
    };
    let frame = match last {
        Ok(answer) => event("result", &answer),
        Err(problem) => event("problem", &document(problem).await),
    };
    let _ = tx.send(frame).await;
}

/// `notifications/progress` as the console draws it, bounded: numbers, and the message
/// clipped; `None` for any other message.
fn progress(message: &Value) -> Option<Value> {
    if message.get("method").and_then(Value::as_str) != Some("notifications/progress") {
        return None;
    }
    let params = message.get("params")?;
    let number = |key: &str| params.get(key).and_then(Value::as_f64);
    let text = params.get("message").and_then(Value::as_str).map(|m| crate::untrusted::text::clip(m, MAX_PROGRESS_MESSAGE).0);
    Some(json!({"progress": number("progress"), "total": number("total"), "message": text}))
}

/// One event; compact JSON has no line breaks, so `data` is one line.
fn event(name: &str, data: &Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

/// The problem document exactly as a JSON answer would carry it.
async fn document(problem: Problem) -> Value {
    let body = problem.into_response().into_body();
    let bytes = axum::body::to_bytes(body, MAX_PROBLEM_BYTES).await.unwrap_or_default();
    serde_json::from_slice(&bytes).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, value.parse().expect("header value"));
        headers
    }

    #[test]
    fn only_an_accept_naming_event_streams_asks_for_one() {
        assert!(wanted(&accept("text/event-stream")));
        assert!(wanted(&accept("application/json, text/event-stream;q=0.5")));
        assert!(!wanted(&accept("*/*")));
        assert!(!wanted(&accept("application/json")));
        assert!(!wanted(&accept("text/event-stream;q=0")));
        assert!(!wanted(&HeaderMap::new()));
    }

    #[test]
    fn progress_notifications_become_progress_events_and_others_do_not() {
        let note =
            json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "t", "progress": 2, "total": 5}});
        assert_eq!(progress(&note), Some(json!({"progress": 2.0, "total": 5.0, "message": null})));
        assert_eq!(progress(&json!({"method": "notifications/message", "params": {"level": "info"}})), None);
    }

    #[test]
    fn a_progress_event_carries_numbers_and_a_clipped_message_only() {
        let long = "é".repeat(MAX_PROGRESS_MESSAGE);
        let note =
            json!({"method": "notifications/progress", "params": {"progress": {"huge": [1, 2, 3]}, "total": "ten", "message": long}});
        let drawn = progress(&note).expect("a progress event");
        assert_eq!((&drawn["progress"], &drawn["total"]), (&Value::Null, &Value::Null), "not numbers: nothing");
        let message = drawn["message"].as_str().expect("the message");
        assert!(message.len() <= MAX_PROGRESS_MESSAGE && long.starts_with(message) && !message.is_empty(), "clipped on a character");
    }
}
