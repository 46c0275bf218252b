//! Server-Sent Events framing (the WHATWG event-stream format as MCP uses it): message events
//! with one compact JSON `data:` line, the 2025-11-25 priming event and `retry` hint, and the
//! 2024-11-05 `endpoint` event. Bytes only: the streaming body is the transport's.

use bytes::{BufMut, Bytes, BytesMut};

/// Comment line that keeps idle proxies from closing the connection.
pub const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";

/// A `message` event with compact JSON on one `data:` line (T-28).
pub fn message_event(id: Option<&str>, json: &str) -> Bytes {
    let mut b = BytesMut::with_capacity(json.len() + 40);
    if let Some(id) = id {
        b.put_slice(b"id: ");
        b.put_slice(id.as_bytes());
        b.put_u8(b'\n');
    }
    b.put_slice(b"event: message\ndata: ");
    b.put_slice(json.as_bytes());
    b.put_slice(b"\n\n");
    b.freeze()
}

/// The priming event of 2025-11-25: an id, a reconnection delay, and empty data (T-20, T-22).
pub fn priming_event(id: &str, retry_ms: u64) -> Bytes {
    Bytes::from(format!("id: {id}\nretry: {retry_ms}\ndata: \n\n"))
}

/// A bare `retry` field: sent before the server closes a stream it expects to be resumed.
pub fn retry_hint(retry_ms: u64) -> Bytes {
    Bytes::from(format!("retry: {retry_ms}\n\n"))
}

/// The first event of the 2024-11-05 transport: where to POST messages.
pub fn endpoint_event(uri: &str) -> Bytes {
    Bytes::from(format!("event: endpoint\ndata: {uri}\n\n"))
}
