//! W3C Trace Context: the `traceparent` a request arrives with, from its HTTP header or, for
//! an MCP request, from `params._meta.traceparent` (SEP-414 keeps that key unprefixed), or a
//! fresh random trace id when it has none. Parsed without OpenTelemetry, so every build puts a
//! trace id on its logs and audit records.

use std::fmt;

use serde_json::{Map, Value};

/// Where a request's trace came from. Copied into logs (`trace_id`), audit records and, with
/// the `otel` feature, used as the remote parent of the request's spans.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceContext {
    /// 128 bits, never zero.
    pub trace_id: u128,
    /// The caller's span (`parent-id`); `None` when this server started the trace.
    pub parent_id: Option<u64>,
    /// The `sampled` flag of `trace-flags`.
    pub sampled: bool,
}

impl TraceContext {
    /// A new trace started here: random id, no parent, sampled (the sampler decides for real).
    pub fn generate() -> Self {
        // ThreadRng: a userspace CSPRNG, no syscall per request.
        let trace_id = loop {
            let id = rand::random::<u128>();
            if id != 0 {
                break id;
            }
        };
        Self { trace_id, parent_id: None, sampled: true }
    }

    /// Parses a `traceparent` value (`00-<32 hex>-<16 hex>-<2 hex>`). Future versions are read
    /// as version 00 as the specification asks; anything malformed, the invalid version `ff`
    /// and all-zero ids give `None` (the request then starts its own trace).
    pub fn parse(value: &str) -> Option<Self> {
        let value = value.trim();
        let b = value.as_bytes();
        // ASCII only, so the byte offsets below are character boundaries.
        if !value.is_ascii() || b.len() < 55 || (b.len() > 55 && b[55] != b'-') {
            return None;
        }
        let version = hex(&value[0..2])?;
        if version == 0xff || (version == 0 && b.len() != 55) {
            return None;
        }
        if b[2] != b'-' || b[35] != b'-' || b[52] != b'-' {
            return None;
        }
        let trace_id = u128::from_str_radix(checked_hex(&value[3..35])?, 16).ok()?;
        let parent_id = u64::from_str_radix(checked_hex(&value[36..52])?, 16).ok()?;
        let flags = hex(&value[53..55])?;
        if trace_id == 0 || parent_id == 0 {
            return None;
        }
        Some(Self { trace_id, parent_id: Some(parent_id), sampled: flags & 1 == 1 })
    }

    /// `params._meta.traceparent` of an MCP request, when present and valid.
    pub fn from_meta(params: &Map<String, Value>) -> Option<Self> {
        params.get("_meta")?.get("traceparent")?.as_str().and_then(Self::parse)
    }

    /// The trace id as 32 lower-case hex digits, the form logs, audit records and tracing
    /// back ends use.
    pub fn trace_id_hex(&self) -> TraceIdHex {
        TraceIdHex(self.trace_id)
    }
}

/// Displays a trace id as 32 lower-case hex digits without allocating.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceIdHex(pub u128);

impl fmt::Display for TraceIdHex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

/// Lower-case hex only: the specification does not allow upper case.
fn checked_hex(s: &str) -> Option<&str> {
    s.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)).then_some(s)
}

fn hex(s: &str) -> Option<u8> {
    u8::from_str_radix(checked_hex(s)?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_is_read() {
        let t = TraceContext::parse(VALID).expect("valid");
        assert_eq!(t.trace_id_hex().to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(t.parent_id, Some(0x00f0_67aa_0ba9_02b7));
        assert!(t.sampled);
        let unsampled = TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").expect("valid");
        assert!(!unsampled.sampled);
    }

    #[test]
    fn malformed_values_are_ignored() {
        for bad in [
            "",
            "garbage",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceContext::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn future_versions_may_carry_more_fields() {
        let t = TraceContext::parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes-next");
        assert_eq!(t.map(|t| t.trace_id), TraceContext::parse(VALID).map(|t| t.trace_id));
    }

    #[test]
    fn meta_carries_traceparent_unprefixed() {
        let params = json!({"name": "x", "_meta": {"traceparent": VALID, "tracestate": "a=b"}});
        let t = TraceContext::from_meta(params.as_object().expect("object")).expect("found");
        assert_eq!(t.trace_id_hex().to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(TraceContext::from_meta(json!({"_meta": {"traceparent": 5}}).as_object().expect("object")), None);
    }

    #[test]
    fn generated_ids_are_distinct_and_never_zero() {
        let a = TraceContext::generate();
        let b = TraceContext::generate();
        assert_ne!(a.trace_id, b.trace_id);
        assert_ne!(a.trace_id, 0);
        assert_eq!(a.parent_id, None);
    }
}
