//! Which era a Streamable HTTP POST speaks, decided from the request alone: the two header
//! facts the transport has already read and the classified JSON-RPC message. Kept free of
//! HTTP types so the rule can be unit-tested and fuzzed on its own.
//!
//! A message is modern unless it belongs to a legacy session (it carries `Mcp-Session-Id`),
//! or it is a response (a reply to a server request only exists inside a legacy stream), or
//! it shows no sign of the modern era: neither a modern `_meta` key (one starting with
//! `io.modelcontextprotocol/`) nor an `MCP-Protocol-Version` header that is not a legacy
//! version. An absent header or a known legacy version is legacy; any other value (the
//! modern version, or one this server does not know) is not.

use serde_json::Value;

use super::jsonrpc::Incoming;
use super::version::{Era, ProtocolVersion};

/// The prefix of the `_meta` keys only modern clients send.
const MODERN_META_PREFIX: &str = "io.modelcontextprotocol/";

/// Whether the message is served statelessly (modern era) rather than in a legacy session.
///
/// `has_session_header`: the request carries `Mcp-Session-Id`. `version_header`: the
/// `MCP-Protocol-Version` header, when present and printable.
pub fn is_modern(has_session_header: bool, version_header: Option<&str>, message: &Incoming) -> bool {
    if has_session_header {
        return false;
    }
    let params = match message {
        Incoming::Request(r) => &r.params,
        Incoming::Notification(n) => &n.params,
        Incoming::Response(_) => return false,
    };
    let modern_meta = params.get("_meta").and_then(Value::as_object).is_some_and(|m| m.keys().any(|k| k.starts_with(MODERN_META_PREFIX)));
    let legacy_header = version_header.is_none_or(|v| v.parse::<ProtocolVersion>().is_ok_and(|v| v.era() == Era::Legacy));
    modern_meta || !legacy_header
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn message(value: Value) -> Incoming {
        Incoming::from_value(value).unwrap_or_else(|m| panic!("not a message: {}", m.error))
    }

    fn plain_request() -> Incoming {
        message(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
    }

    fn modern_meta_request() -> Incoming {
        message(json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/list",
            "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}
        }))
    }

    #[test]
    fn a_session_header_makes_it_legacy_whatever_else_it_carries() {
        assert!(!is_modern(true, Some("2026-07-28"), &modern_meta_request()));
    }

    #[test]
    fn a_response_is_never_modern() {
        let response = message(json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
        assert!(!is_modern(false, Some("2026-07-28"), &response));
    }

    #[test]
    fn no_header_and_no_modern_meta_is_legacy() {
        assert!(!is_modern(false, None, &plain_request()));
    }

    #[test]
    fn a_legacy_version_header_alone_is_legacy() {
        for version in ProtocolVersion::legacy_strings() {
            assert!(!is_modern(false, Some(version), &plain_request()), "{version}");
        }
    }

    #[test]
    fn the_modern_version_header_makes_it_modern() {
        assert!(is_modern(false, Some(ProtocolVersion::LATEST_MODERN.as_str()), &plain_request()));
    }

    #[test]
    fn an_unknown_version_header_is_not_legacy() {
        assert!(is_modern(false, Some("1999-01-01"), &plain_request()));
    }

    #[test]
    fn a_modern_meta_key_makes_it_modern_even_with_a_legacy_header() {
        assert!(is_modern(false, Some("2025-06-18"), &modern_meta_request()));
        assert!(is_modern(false, None, &modern_meta_request()));
    }

    #[test]
    fn other_meta_keys_do_not_count() {
        let request = message(json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/list",
            "params": {"_meta": {"progressToken": 1, "io.modelcontextprotocol": true}}
        }));
        assert!(!is_modern(false, None, &request));
    }

    #[test]
    fn a_meta_that_is_not_an_object_does_not_count() {
        let request = message(json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": ["io.modelcontextprotocol/x"]}
        }));
        assert!(!is_modern(false, None, &request));
    }

    #[test]
    fn a_notification_follows_the_same_rules_as_a_request() {
        let plain = message(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        assert!(!is_modern(false, None, &plain));
        assert!(is_modern(false, Some("2026-07-28"), &plain));
        assert!(!is_modern(true, Some("2026-07-28"), &plain));
    }
}
