//! Redaction of what may be a secret in an upstream's settings before an operator reads them
//! (the admin API's upstream detail and stored definitions). A leaf: it knows only JSON and
//! URLs, so any layer may use it (`check-config` could, too).
//!
//! What is redacted, everywhere in the settings' JSON:
//! - a stdio program's `env` values (the names are kept);
//! - a stdio program's `args` that hold a credential: the value of a flag whose name says
//!   key, token, secret, password, auth or credential (`--api-key=<redacted>`, or the argument
//!   after `--token`), the value of such a `NAME=value` argument, and what a URL in an
//!   argument carries (below);
//! - in every string that is a URL (`scheme://…`): its user and password (both dropped), its
//!   whole query (`?<redacted>`) and its fragment (dropped); a string with `://` and `@` that
//!   does not parse becomes `<redacted>`;
//! - a header source's `prefix` unless it is a scheme word (`Bearer `); its `env` and `file`
//!   are references to a secret, never the secret, and are kept.
//!
//! Not redacted: a key embedded in a URL's path (`/v1/sk-…/mcp`), and a secret passed as a
//! bare positional argument or behind a flag whose name does not say what it is. Settings
//! should name such secrets by an environment variable instead.

use serde_json::Value;

/// What a redacted value shows.
pub const REDACTED: &str = "<redacted>";

/// Words in a flag or variable name that say its value is a secret.
const SECRET_WORDS: [&str; 7] = ["key", "token", "secret", "password", "passwd", "auth", "credential"];

/// An upstream's settings (or a definition of one, the same shape) as JSON, with everything
/// that may be a secret redacted (see the module's documentation).
pub fn upstream(mut value: Value) -> Value {
    if let Some(env) = value.pointer_mut("/stdio/env").and_then(Value::as_object_mut) {
        env.values_mut().for_each(|v| *v = Value::from(REDACTED));
    }
    if let Some(args) = value.pointer_mut("/stdio/args").and_then(Value::as_array_mut) {
        redact_args(args);
    }
    if let Some(headers) = value.get_mut("headers").and_then(Value::as_object_mut) {
        headers.values_mut().for_each(header_source);
    }
    if let Some(secret) = value.pointer_mut("/oauth/client_secret") {
        header_source(secret);
    }
    urls(&mut value);
    value
}

/// The path (`stdio.args[2]`, `stdio.env.API_KEY`) of the first string holding the
/// [`REDACTED`] placeholder, as a definition read back and sent again would.
pub fn placeholder_at(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => s.contains(REDACTED).then(String::new),
        Value::Array(items) => items.iter().enumerate().find_map(|(i, v)| placeholder_at(v).map(|p| join(&format!("[{i}]"), &p))),
        Value::Object(map) => map.iter().find_map(|(k, v)| placeholder_at(v).map(|p| join(k, &p))),
        _ => None,
    }
}

fn join(head: &str, tail: &str) -> String {
    match tail {
        "" => head.to_owned(),
        t if t.starts_with('[') => format!("{head}{t}"),
        t => format!("{head}.{t}"),
    }
}

/// A program's arguments with every credential they hold redacted.
fn redact_args(args: &mut [Value]) {
    let mut value_follows = false;
    for arg in args.iter_mut() {
        let Some(text) = arg.as_str() else { continue };
        let (shown, flag_without_value) = if value_follows { (REDACTED.to_owned(), false) } else { one_arg(text) };
        value_follows = flag_without_value;
        *arg = Value::from(shown);
    }
}

/// One argument as shown, and whether it is a secret's flag whose value is the next argument.
fn one_arg(arg: &str) -> (String, bool) {
    if is_url(arg) {
        return (url(arg), false);
    }
    if let Some((name, value)) = arg.split_once('=') {
        let shown = if names_secret(name) { REDACTED.to_owned() } else { url_in(value) };
        return (format!("{name}={shown}"), false);
    }
    if arg.starts_with('-') && names_secret(arg) {
        return (arg.to_owned(), true);
    }
    (url_in(arg), false)
}

fn names_secret(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    SECRET_WORDS.iter().any(|w| name.contains(w))
}

/// A header source (`{ env | file, prefix }`) with a prefix that is more than a scheme word
/// redacted.
fn header_source(source: &mut Value) {
    let Some(prefix) = source.get_mut("prefix") else { return };
    let scheme = prefix.as_str().is_some_and(|p| {
        let word = p.strip_suffix(' ').unwrap_or(p);
        !word.is_empty() && word.len() <= 16 && word.chars().all(|c| c.is_ascii_alphabetic() || c == '-')
    });
    if !scheme && prefix.as_str().is_some_and(|p| !p.is_empty()) {
        *prefix = Value::from(REDACTED);
    }
}

/// Every string in `value` that is a URL, as [`url`] shows it.
fn urls(value: &mut Value) {
    match value {
        Value::String(s) => *s = url_in(s),
        Value::Array(items) => items.iter_mut().for_each(urls),
        Value::Object(map) => map.values_mut().for_each(urls),
        _ => {}
    }
}

/// `text` as shown: [`url`] when it looks like a URL, unchanged otherwise.
fn url_in(text: &str) -> String {
    if text.contains("://") { url(text) } else { text.to_owned() }
}

/// Whether `text` starts with a URL scheme and `://`.
fn is_url(text: &str) -> bool {
    text.split_once("://")
        .is_some_and(|(scheme, _)| !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
}

/// A URL without its user and password, its query (`?<redacted>`) and its fragment; a string
/// with `@` that does not parse is [`REDACTED`] whole (it may hold a password).
pub fn url(text: &str) -> String {
    let Ok(mut parsed) = url::Url::parse(text) else {
        return if text.contains('@') { REDACTED.to_owned() } else { text.to_owned() };
    };
    // Both fail only for URLs that cannot have a user (no host), which have none.
    let _ = parsed.set_username("");
    let _ = parsed.set_password(None);
    parsed.set_fragment(None);
    let had_query = parsed.query().is_some();
    parsed.set_query(None);
    let mut shown = parsed.to_string();
    if had_query {
        shown.push('?');
        shown.push_str(REDACTED);
    }
    shown
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn args(list: Value) -> Value {
        upstream(json!({"stdio": {"program": "x", "args": list}}))["stdio"]["args"].clone()
    }

    #[test]
    fn a_secret_flags_value_is_redacted_in_both_forms() {
        let shown = args(json!(["--api-key=sk-1", "--token", "sk-2", "--verbose", "run", "DB_PASSWORD=pw3"]));
        assert_eq!(shown, json!(["--api-key=<redacted>", "--token", REDACTED, "--verbose", "run", "DB_PASSWORD=<redacted>"]));
    }

    #[test]
    fn a_url_in_an_argument_loses_its_credentials_query_and_fragment() {
        let shown = args(json!(["postgresql://user:pw@db/x", "--db=postgres://u:p2@h:5432/y?sslkey=k#frag", "https://h/x?key=abc"]));
        assert_eq!(shown, json!(["postgresql://db/x", "--db=postgres://h:5432/y?<redacted>", "https://h/x?<redacted>"]));
    }

    #[test]
    fn every_url_in_the_settings_is_redacted() {
        let shown = upstream(json!({
            "url": "https://bob:hunter2@mcp.example.com/mcp?sk_live_abc#t0k",
            "oauth": {"token_url": "https://as.example.com/token?key=abc", "resource": "https://r.example.com/#frag",
                      "authorization_server": "https://al:ice@as.example.com"},
        }));
        let text = shown.to_string();
        for secret in ["bob", "hunter2", "sk_live_abc", "t0k", "abc", "frag", "al:", "ice@"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        assert_eq!(shown["url"], "https://mcp.example.com/mcp?<redacted>");
        assert_eq!(shown["oauth"]["resource"], "https://r.example.com/");
    }

    #[test]
    fn a_url_without_secrets_is_unchanged_and_plain_text_is_kept() {
        let shown =
            upstream(json!({"url": "https://mcp.example.com/mcp", "prefix": "a_", "stdio": {"program": "npx", "args": ["-y", "pkg"]}}));
        assert_eq!(shown["url"], "https://mcp.example.com/mcp");
        assert_eq!(shown["stdio"]["args"], json!(["-y", "pkg"]));
    }

    #[test]
    fn header_sources_keep_their_references_and_lose_a_literal_prefix() {
        let shown = upstream(json!({"headers": {
            "Authorization": {"env": "MCP_TOKEN", "prefix": "Bearer "},
            "X-Key": {"file": "/run/key", "prefix": "sk-live-embedded:"},
        }}));
        assert_eq!(shown["headers"]["Authorization"], json!({"env": "MCP_TOKEN", "prefix": "Bearer "}));
        assert_eq!(shown["headers"]["X-Key"], json!({"file": "/run/key", "prefix": REDACTED}));
    }

    #[test]
    fn a_placeholder_is_found_with_its_path() {
        let definition = json!({"stdio": {"program": "x", "args": ["a", "--token=<redacted>"]}});
        assert_eq!(placeholder_at(&definition).as_deref(), Some("stdio.args[1]"));
        assert_eq!(placeholder_at(&json!({"url": "https://h/"})), None);
    }
}
