//! One audit record, its vocabulary (event kinds, outcomes), the canonical argument digest
//! and redaction.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::principal::Principal;

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    ToolCall,
    AuthFailure,
    AuthzDenied,
    RateLimited,
    RegistryChange,
    /// A change made through the admin API (a tool definition created, replaced, enabled,
    /// disabled or deleted; a reload requested).
    AdminChange,
    /// A task changed state: created, completed, failed (its replica stopped included), or
    /// cancelled; one record per change, the task id in the detail.
    TaskChange,
    /// An event of the built-in authorization server: a sign-in, consent, token issued,
    /// refresh, revocation, registration or refusal; the detail says which and why.
    Oauth,
    /// An event of a user's connection to an upstream (`oauth.grant = "user"`): a connect
    /// link sent (elicit), an account connected, its tokens used, refreshed or revoked, or a
    /// failure; the detail starts with the event and the upstream's name. Never a token.
    Connection,
}

/// How it ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    ToolError,
    Timeout,
    Cancelled,
    Denied,
    RateLimited,
    InvalidInput,
    InternalError,
}

impl Outcome {
    /// Every outcome, in declaration order (`outcome as usize` indexes it).
    pub const ALL: [Self; 8] = [
        Self::Ok,
        Self::ToolError,
        Self::Timeout,
        Self::Cancelled,
        Self::Denied,
        Self::RateLimited,
        Self::InvalidInput,
        Self::InternalError,
    ];
}

macro_rules! wire_names {
    ($ty:ty { $($variant:ident => $name:literal),* $(,)? }) => {
        impl $ty {
            /// The name stored in the database and printed by the CLI.
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $name),* }
            }
        }
        impl std::str::FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($name => Ok(Self::$variant),)*
                    other => Err(format!("unknown {} \"{other}\"; one of: {}", stringify!($ty), [$($name),*].join(", "))),
                }
            }
        }
        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

wire_names!(EventKind {
    ToolCall => "tool_call",
    AuthFailure => "auth_failure",
    AuthzDenied => "authz_denied",
    RateLimited => "rate_limited",
    RegistryChange => "registry_change",
    AdminChange => "admin_change",
    TaskChange => "task_change",
    Oauth => "oauth",
    Connection => "connection",
});

wire_names!(Outcome {
    Ok => "ok",
    ToolError => "tool_error",
    Timeout => "timeout",
    Cancelled => "cancelled",
    Denied => "denied",
    RateLimited => "rate_limited",
    InvalidInput => "invalid_input",
    InternalError => "internal_error",
});

/// One audit record. Build it with [`AuditRecord::new`] and the `with_*` helpers; the id
/// (UUIDv7, time-ordered) is the idempotency key: replaying a record never duplicates it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    pub id: Uuid,
    #[serde(with = "time::serde::rfc3339")]
    pub time: OffsetDateTime,
    pub request_id: Option<String>,
    /// Legacy (2025-11-25 and older) session id, when the request had one.
    pub session_id: Option<String>,
    pub issuer: Option<String>,
    pub subject: Option<String>,
    pub client_id: Option<String>,
    pub client_ip: Option<String>,
    pub kind: EventKind,
    pub tool: Option<String>,
    /// Lower-case hex SHA-256 of the canonical JSON of the arguments (see [`canonical_json`]).
    pub args_sha256: Option<String>,
    /// The arguments themselves, only when asked for, already redacted.
    pub arguments: Option<Value>,
    pub outcome: Outcome,
    /// A short reason for security events ("token expired", "missing scope mcp:tools").
    /// Never a token or a secret.
    pub detail: Option<String>,
    pub duration_ms: Option<u64>,
    pub result_bytes: Option<u64>,
    /// Set by [`super::AuditLog::record`] from `audit.replica_id`.
    pub replica_id: String,
    pub trace_id: Option<String>,
    /// The virtual server the request was sent to (`None`: the default endpoint).
    #[serde(default)]
    pub server: Option<String>,
}

impl AuditRecord {
    /// A record stamped now with a fresh UUIDv7 and nothing else filled in.
    pub fn new(kind: EventKind, outcome: Outcome) -> Self {
        Self {
            id: Uuid::now_v7(),
            time: now_micros(),
            request_id: None,
            session_id: None,
            issuer: None,
            subject: None,
            client_id: None,
            client_ip: None,
            kind,
            tool: None,
            args_sha256: None,
            arguments: None,
            outcome,
            detail: None,
            duration_ms: None,
            result_bytes: None,
            replica_id: String::new(),
            trace_id: None,
            server: None,
        }
    }

    pub fn with_principal(mut self, principal: &Principal) -> Self {
        self.issuer = Some(principal.issuer.clone());
        self.subject = Some(principal.subject.clone());
        self.client_id = principal.client_id.clone();
        self
    }

    /// The tool and the digest of its arguments; the arguments themselves are not kept.
    pub fn with_tool(mut self, name: &str, arguments: &Value) -> Self {
        self.tool = Some(name.to_owned());
        self.args_sha256 = Some(args_digest(arguments));
        self
    }

    /// Keeps the arguments too, with every field named in `sensitive` redacted (see [`redact`]).
    pub fn with_arguments(mut self, arguments: &Value, sensitive: &[&str]) -> Self {
        if self.args_sha256.is_none() {
            self.args_sha256 = Some(args_digest(arguments));
        }
        self.arguments = Some(redact(arguments, sensitive));
        self
    }

    pub fn with_request_id(mut self, id: impl Into<String>) -> Self {
        self.request_id = Some(id.into());
        self
    }

    pub fn with_session_id(mut self, id: impl Into<String>) -> Self {
        self.session_id = Some(id.into());
        self
    }

    pub fn with_client_ip(mut self, ip: std::net::IpAddr) -> Self {
        self.client_ip = Some(ip.to_string());
        self
    }

    pub fn with_trace_id(mut self, id: impl Into<String>) -> Self {
        self.trace_id = Some(id.into());
        self
    }

    pub fn with_server(mut self, name: impl Into<String>) -> Self {
        self.server = Some(name.into());
        self
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// How long the call took and how many bytes its result serialized to.
    pub fn with_timing(mut self, duration: std::time::Duration, result_bytes: Option<u64>) -> Self {
        self.duration_ms = Some(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX));
        self.result_bytes = result_bytes;
        self
    }
}

/// Now, truncated to microseconds: the precision both databases keep, so a record read back
/// equals the one written.
fn now_micros() -> OffsetDateTime {
    let now = OffsetDateTime::now_utc();
    now.replace_nanosecond(now.nanosecond() / 1000 * 1000).unwrap_or(now)
}

/// What replaces a redacted value.
pub const REDACTED: &str = "[REDACTED]";

/// A copy of `args` in which the value of every object member whose name matches one of
/// `sensitive` (ASCII case-insensitively, at any depth, inside arrays too) is replaced by
/// `"[REDACTED]"`.
pub fn redact(args: &Value, sensitive: &[&str]) -> Value {
    match args {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let hidden = sensitive.iter().any(|s| s.eq_ignore_ascii_case(k));
                    (k.clone(), if hidden { Value::String(REDACTED.into()) } else { redact(v, sensitive) })
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| redact(v, sensitive)).collect()),
        other => other.clone(),
    }
}

/// The canonical JSON text of a value: object members sorted by key (byte order), no
/// whitespace, strings and numbers as serde_json writes them. Written by hand so the digest
/// does not depend on whether some dependency turns on serde_json's `preserve_order`.
pub fn canonical_json(value: &Value) -> String {
    let mut out = Vec::with_capacity(64);
    write_canonical(value, &mut out);
    // serde_json writes UTF-8 and the punctuation added here is ASCII.
    String::from_utf8(out).unwrap_or_default()
}

/// Writes [`canonical_json`] of `value` into `out`, with no intermediate strings: this runs
/// on every audited call (the digest), so keys and scalars go straight into the buffer.
fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut members: Vec<_> = map.iter().collect();
            members.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (k, v)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_scalar(out, k);
                out.push(b':');
                write_canonical(v, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(v, out);
            }
            out.push(b']');
        }
        scalar => write_scalar(out, scalar),
    }
}

/// A key or a scalar as serde_json writes it (escaping included). Writing a string, number,
/// bool or null into a `Vec` cannot fail.
fn write_scalar(out: &mut Vec<u8>, value: &(impl Serialize + ?Sized)) {
    let _ = serde_json::to_writer(out, value);
}

/// Lower-case hex SHA-256 of [`canonical_json`]: equal arguments give equal digests whatever
/// order the client sent the keys in, so calls can be correlated without storing arguments.
pub fn args_digest(args: &Value) -> String {
    let mut text = Vec::with_capacity(64);
    write_canonical(args, &mut text);
    const HEX: &[u8; 16] = b"0123456789abcdef";
    Sha256::digest(&text).iter().flat_map(|b| [HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]).map(char::from).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_outcome_labels_follow_the_declaration_order() {
        let names: Vec<&str> = Outcome::ALL.iter().map(|o| o.as_str()).collect();
        assert_eq!(names, crate::metrics::record::TOOL_OUTCOMES);
        assert!(Outcome::ALL.iter().enumerate().all(|(i, o)| *o as usize == i));
    }
}
