//! Request headers, and the credentials among them: never written inline in a definition,
//! read from an environment variable or a file at call time (so rotated files work), and kept
//! in a type whose `Debug` is redacted. A [`Redactor`] removes their values from anything the
//! upstream sends back.

use std::fmt;
use std::path::{Path, PathBuf};

use http::{HeaderMap, HeaderName, HeaderValue};
use serde::Deserialize;
use serde::de::{self, MapAccess, Visitor};
use serde_json::Value;

/// The value of one header in a definition: a literal non-secret string (with `{field}`
/// placeholders filled from the call's arguments), or a secret read at call time
/// (`{ env = "GITHUB_TOKEN", prefix = "Bearer " }`, `{ file = "/run/secrets/t" }`).
#[derive(Clone, Debug)]
pub enum HeaderSpec {
    Literal(String),
    Secret(SecretSpec),
}

/// Where a secret header value comes from, and the text put before it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretSpec {
    /// An environment variable of the server process.
    pub env: Option<String>,
    /// A file (relative paths resolve against the tools file's directory); a trailing newline
    /// is removed.
    pub file: Option<PathBuf>,
    /// Put before the value, e.g. `"Bearer "`.
    #[serde(default)]
    pub prefix: String,
}

impl<'de> Deserialize<'de> for HeaderSpec {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct HeaderVisitor;

        impl<'de> Visitor<'de> for HeaderVisitor {
            type Value = HeaderSpec;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a literal string, or a table { env = \"VAR\" } or { file = \"/path\" } with an optional prefix")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<HeaderSpec, E> {
                Ok(HeaderSpec::Literal(v.to_owned()))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<HeaderSpec, A::Error> {
                SecretSpec::deserialize(de::value::MapAccessDeserializer::new(map)).map(HeaderSpec::Secret)
            }
        }

        deserializer.deserialize_any(HeaderVisitor)
    }
}

/// Header names whose value is a credential whatever it looks like.
pub(crate) fn is_sensitive_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    matches!(lower.as_str(), "authorization" | "proxy-authorization" | "cookie")
        || ["key", "token", "secret", "auth"].iter().any(|w| lower.contains(w))
}

/// A secret's source, resolved at build time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SecretSource {
    Env(String),
    File(PathBuf),
}

impl SecretSource {
    /// For logs and the operator: names the variable or file, never the value.
    pub fn describe(&self) -> String {
        match self {
            Self::Env(name) => format!("environment variable {name}"),
            Self::File(path) => format!("file {}", path.display()),
        }
    }

    /// Whether the secret could be read now (for a build-time warning only).
    pub fn available_now(&self) -> bool {
        match self {
            Self::Env(name) => std::env::var_os(name).is_some_and(|v| !v.is_empty()),
            Self::File(path) => path.is_file(),
        }
    }

    /// The secret's current value, trailing newline removed; `None` when unavailable or empty.
    pub async fn read(&self) -> Option<Secret> {
        let raw = match self {
            Self::Env(name) => std::env::var(name).ok()?,
            Self::File(path) => tokio::fs::read_to_string(path).await.ok()?,
        };
        let value = raw.trim_end_matches(['\n', '\r']);
        (!value.is_empty()).then(|| Secret(value.to_owned()))
    }
}

/// A credential's value. `Debug` never shows it.
#[derive(Clone)]
pub(crate) struct Secret(String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

/// One header of a compiled tool.
#[derive(Clone, Debug)]
pub(crate) enum Header {
    Literal(HeaderName, HeaderValue),
    /// A value made from the call's arguments (`"{request_id}"`); left out when they are absent.
    Template(HeaderName, super::template::TextTemplate),
    Secret {
        name: HeaderName,
        source: SecretSource,
        prefix: String,
    },
}

/// A credential was unavailable at call time (the error names the source, not a value).
#[derive(Debug, thiserror::Error)]
#[error("{what} is unavailable or not a valid header value")]
pub(crate) struct Unavailable {
    pub what: String,
}

/// The request headers for one call, plus the secret values to redact from what comes back.
pub(crate) async fn resolve_headers(headers: &[Header]) -> Result<(HeaderMap, Redactor), Unavailable> {
    let mut map = HeaderMap::new();
    let mut redactor = Redactor::default();
    for header in headers {
        match header {
            Header::Literal(name, value) => {
                map.append(name.clone(), value.clone());
            }
            // Added by the call from its arguments (`HttpTool::argument_headers`).
            Header::Template(..) => {}
            Header::Secret { name, source, prefix } => {
                let unavailable = || Unavailable { what: source.describe() };
                let secret = source.read().await.ok_or_else(unavailable)?;
                let mut value = HeaderValue::try_from(format!("{prefix}{}", secret.expose())).map_err(|_| unavailable())?;
                value.set_sensitive(true);
                map.append(name.clone(), value);
                redactor.add(secret);
            }
        }
    }
    Ok((map, redactor))
}

/// Replaces every known secret value with `[redacted]`.
#[derive(Debug, Default)]
pub(crate) struct Redactor {
    secrets: Vec<Secret>,
}

pub(crate) const REDACTED: &str = "[redacted]";

impl Redactor {
    /// A secret sent in the query string: also redacted in its URL-encoded form (how it
    /// appears in a URL an error or a `Link` header carries back).
    pub(crate) fn add_query_value(&mut self, secret: Secret) {
        let encoded: String = url::form_urlencoded::byte_serialize(secret.expose().as_bytes()).collect();
        if encoded != secret.expose() {
            self.add(Secret(encoded));
        }
        self.add(secret);
    }

    fn add(&mut self, secret: Secret) {
        self.secrets.push(secret);
        // Longest first, so a secret that contains another is replaced whole.
        self.secrets.sort_by_key(|s| std::cmp::Reverse(s.0.len()));
    }

    pub fn text(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for s in &self.secrets {
            if out.contains(s.expose()) {
                out = out.replace(s.expose(), REDACTED);
            }
        }
        out
    }

    /// Redacts every string (and key) inside a JSON value.
    pub fn json(&self, value: &mut Value) {
        if self.secrets.is_empty() {
            return;
        }
        match value {
            Value::String(s) => *s = self.text(s),
            Value::Array(items) => items.iter_mut().for_each(|v| self.json(v)),
            Value::Object(map) => {
                let entries = std::mem::take(map);
                for (k, mut v) in entries {
                    self.json(&mut v);
                    map.insert(self.text(&k), v);
                }
            }
            _ => {}
        }
    }
}

/// Whether `path` is inside one of `dirs` (lexically, after resolving `..`).
pub(crate) fn is_under(path: &Path, dirs: &[PathBuf]) -> bool {
    let clean = lexical_clean(path);
    dirs.iter().any(|d| clean.starts_with(lexical_clean(d)))
}

fn lexical_clean(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Whether an environment variable name is allowed by `patterns` (`NAME` or `PREFIX_*`).
pub(crate) fn env_allowed(name: &str, patterns: &[String]) -> bool {
    patterns.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => p == name,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn header_specs_deserialize_literals_and_secret_tables_precisely() {
        let h: std::collections::BTreeMap<String, HeaderSpec> =
            serde_json::from_value(json!({"Accept": "application/json", "Authorization": {"env": "T", "prefix": "Bearer "}}))
                .expect("valid");
        assert!(matches!(&h["Accept"], HeaderSpec::Literal(v) if v == "application/json"));
        assert!(matches!(&h["Authorization"], HeaderSpec::Secret(s) if s.env.as_deref() == Some("T") && s.prefix == "Bearer "));
        let err = serde_json::from_value::<HeaderSpec>(json!({"envv": "T"})).expect_err("unknown field");
        assert!(err.to_string().contains("envv"), "{err}");
    }

    #[test]
    fn sensitive_header_names_are_recognized() {
        for n in ["Authorization", "proxy-authorization", "Cookie", "X-Api-Key", "X-Auth-User", "Private-Token", "client_secret"] {
            assert!(is_sensitive_name(n), "{n}");
        }
        for n in ["Accept", "User-Agent", "X-GitHub-Api-Version", "Content-Type"] {
            assert!(!is_sensitive_name(n), "{n}");
        }
    }

    #[test]
    fn secrets_never_show_in_debug_and_are_redacted_everywhere() {
        let secret = Secret("hunter2-token".into());
        assert!(!format!("{secret:?}").contains("hunter2"));
        let mut r = Redactor::default();
        r.add(secret);
        assert_eq!(r.text("token=hunter2-token!"), "token=[redacted]!");
        let mut v = json!({"echo": ["Bearer hunter2-token"], "hunter2-token": 1});
        r.json(&mut v);
        assert_eq!(v, json!({"echo": ["Bearer [redacted]"], "[redacted]": 1}));
    }

    #[test]
    fn secret_source_allow_lists_match() {
        assert!(env_allowed("GITHUB_TOKEN", &["GITHUB_TOKEN".into()]));
        assert!(env_allowed("TOOL_X", &["TOOL_*".into()]));
        assert!(!env_allowed("DATABASE_URL", &["TOOL_*".into()]));
        let dirs = [PathBuf::from("/run/secrets")];
        assert!(is_under(Path::new("/run/secrets/gh"), &dirs));
        assert!(!is_under(Path::new("/run/secrets/../../etc/shadow"), &dirs));
    }
}
