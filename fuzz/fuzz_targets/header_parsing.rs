//! The /mcp front door: the Host/Origin guard (DNS-rebinding protection) with the default
//! allow-lists, and Accept/Content-Type negotiation. Input: an optional request line
//! (`POST http://host/mcp HTTP/1.1`, whose authority is the Host fallback), then an HTTP
//! header block. Every header value is also fed to the guard as a bare string, since a
//! misconfigured proxy can forward anything.

#![no_main]

mod common;

use axum::body::Body;
use libfuzzer_sys::fuzz_target;
use toolgate::config::ServerSettings;
use toolgate::transport::guard::{HostGuard, refusal};
use toolgate::transport::headers::{accepts, is_json_body};

fuzz_target!(|data: &[u8]| {
    let defaults = ServerSettings::default();
    let guard = HostGuard::new(&defaults.allowed_hosts, &defaults.allowed_origins);

    let (uri, data) = request_line(data);
    let (header_map, _) = common::header_block(data);
    let _ = accepts(&header_map);
    let _ = is_json_body(&header_map);

    for value in header_map.values() {
        let text = String::from_utf8_lossy(value.as_bytes());
        // Host names and schemes are case-insensitive; the guard must agree with itself.
        assert_eq!(guard.host_allowed(&text), guard.host_allowed(&text.to_ascii_uppercase()));
        assert_eq!(guard.origin_allowed(&text), guard.origin_allowed(&text.to_ascii_uppercase()));
    }

    // The whole middleware decision, as it runs on a real request.
    let mut request = axum::extract::Request::new(Body::empty());
    *request.uri_mut() = uri;
    *request.headers_mut() = header_map;
    let _ = refusal(&guard, &request);
});

/// A first line whose first space comes before any colon is a request line; its target
/// becomes the URI (when it parses) and the header block follows.
fn request_line(data: &[u8]) -> (http::Uri, &[u8]) {
    let (line, rest) = common::split_line(data);
    let space = line.iter().position(|&b| b == b' ');
    let colon = line.iter().position(|&b| b == b':');
    let is_request_line = space.is_some_and(|s| colon.is_none_or(|c| s < c));
    let target = line.split(|&b| b == b' ').nth(1).unwrap_or_default();
    match (is_request_line, http::Uri::try_from(target)) {
        (true, Ok(uri)) => (uri, rest),
        (true, Err(_)) => (http::Uri::from_static("/mcp"), rest),
        (false, _) => (http::Uri::from_static("/mcp"), data),
    }
}
