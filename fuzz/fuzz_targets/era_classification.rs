//! The era decision for a Streamable HTTP POST. The input is what the transport sees: an HTTP
//! header block, an empty line, then the JSON body. The two header facts are read with the
//! transport's own helpers, so odd header values (non-ASCII, repeated, empty) reach the rule
//! exactly as they would in production.

#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use toolgate::protocol::era::is_modern;
use toolgate::protocol::jsonrpc::Incoming;
use toolgate::transport::headers;

fuzz_target!(|data: &[u8]| {
    let (header_map, body) = common::header_block(data);
    let Ok(body) = serde_json::from_slice::<Value>(body) else { return };
    let has_session = header_map.contains_key(headers::SESSION_ID);
    let version = headers::get(&header_map, &headers::PROTOCOL_VERSION);
    // Only classified messages reach the era decision; a batch is decided per message.
    let messages = match body {
        Value::Array(batch) => batch,
        single => vec![single],
    };
    for message in messages.into_iter().filter_map(|m| Incoming::from_value(m).ok()) {
        let modern = is_modern(has_session, version, &message);
        // The two rules that keep a legacy session's traffic in its session.
        assert!(!(modern && has_session), "a request of a legacy session was classified modern");
        assert!(!(modern && matches!(message, Incoming::Response(_))), "a response was classified modern");
    }
});
