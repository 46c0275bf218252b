//! The wire form of a refusal: the 429 pieces and the JSON-RPC error object, which must read
//! the same as an HTTP body and as an event in an already-open SSE stream.

use std::time::Duration;

use http_body_util::BodyExt;
use serde_json::{Value, json};
use toolgate::limits::{Reason, Rejection};
use toolgate::protocol::jsonrpc::RequestId;

fn rejection(ms: u64, reason: Reason) -> Rejection {
    Rejection::new(Duration::from_millis(ms), reason)
}

#[test]
fn the_jsonrpc_error_names_the_limit_and_the_wait() {
    let err = serde_json::to_value(rejection(1500, Reason::Client).rpc_error()).expect("serializes");
    assert_eq!(err["code"], -32000);
    assert_eq!(err["data"], json!({ "retryAfterMs": 1500, "limit": "client" }));
    let message = err["message"].as_str().expect("message");
    assert!(message.contains("per-client request limit") && message.contains("retry after 2 s"), "{message}");
    assert_eq!(err.as_object().map(|o| o.len()), Some(3), "code, message, data and nothing else");
}

#[test]
fn every_reason_has_its_limit_name() {
    for (reason, name) in
        [(Reason::Client, "client"), (Reason::Tool, "tool"), (Reason::Global, "global"), (Reason::AuthFailures, "auth_failures")]
    {
        assert_eq!(reason.as_str(), name);
        let err = serde_json::to_value(rejection(10, reason).rpc_error()).expect("serializes");
        assert_eq!(err["data"]["limit"], name);
    }
}

#[test]
fn the_response_envelope_echoes_the_id_or_omits_it() {
    let r = rejection(250, Reason::Tool);
    let with_id = r.jsonrpc_message(Some(&RequestId::Number(7)));
    assert_eq!(with_id["jsonrpc"], "2.0");
    assert_eq!(with_id["id"], 7);
    assert_eq!(with_id["error"]["data"]["retryAfterMs"], 250);
    let without = r.jsonrpc_message(None);
    assert!(without.get("id").is_none(), "unknown id is omitted, never null");
    assert_eq!(without["error"], with_id["error"]);
}

#[test]
fn retry_after_rounds_up_and_is_never_zero() {
    let cases = [(0, 1, 1), (1, 1, 1), (999, 1, 999), (1000, 1, 1000), (1001, 2, 1001), (59_500, 60, 59_500)];
    for (ms, secs, hint_ms) in cases {
        let r = rejection(ms, Reason::Global);
        assert_eq!((r.retry_after_secs(), r.retry_after_ms()), (secs, hint_ms), "{ms} ms");
    }
    // Sub-millisecond waits round up too.
    let r = Rejection::new(Duration::from_micros(1_000_001), Reason::Global);
    assert_eq!((r.retry_after_secs(), r.retry_after_ms()), (2, 1001));
}

#[tokio::test]
async fn the_http_response_is_a_429_with_retry_after_and_the_same_body() {
    let r = rejection(2_100, Reason::AuthFailures);
    let res = toolgate::transport::refusal::limited(&r, Some(&RequestId::String("a".into())));
    assert_eq!(res.status(), 429);
    assert_eq!(res.headers()["retry-after"], "3");
    assert_eq!(res.headers()["content-type"], "application/json");
    let (name, value) = r.retry_after_header();
    assert_eq!((name.as_str(), value.to_str().ok()), ("retry-after", Some("3")));
    let body = res.into_body().collect().await.expect("body").to_bytes();
    let body: Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(body, r.jsonrpc_message(Some(&RequestId::String("a".into()))));
    assert_eq!(body["error"]["data"], json!({ "retryAfterMs": 2100, "limit": "auth_failures" }));
}

#[test]
fn display_is_short_for_logs() {
    assert_eq!(rejection(1500, Reason::Client).to_string(), "rate limited by client limit for 1.5s");
}
