//! Reading client metadata fields (RFC 7591 §2) that metadata documents and registrations
//! share. All of it is written by whoever controls the client, so every text that reaches a
//! page or a log is cleaned and capped here, and links are kept only when they are `https` to
//! a host that is not a literal private address.

use serde_json::{Map, Value};

use crate::tooldef::http::is_denied as is_denied_ip;
use crate::untrusted::text::needs_escape;

/// The longest client name kept, in characters: enough for any real product name.
pub const NAME_MAX_CHARS: usize = 200;
/// The longest link (`logo_uri`, `client_uri`) kept.
pub const LINK_MAX: usize = 2000;
/// The longest other short text kept (`software_id`, `software_version`, `scope`).
pub const TEXT_MAX_CHARS: usize = 1000;

/// `value` with characters that could change a line's layout or reading order (controls,
/// bidi overrides) turned into spaces, trimmed, and cut to `max_chars` characters.
pub fn display_text(value: &str, max_chars: usize) -> String {
    let cleaned: String = value.chars().map(|c| if needs_escape(c) { ' ' } else { c }).collect();
    cleaned.trim().chars().take(max_chars).collect::<String>().trim_end().to_owned()
}

/// A required or optional string field; `Err` names the field.
pub fn string<'a>(object: &'a Map<String, Value>, field: &str) -> Result<Option<&'a str>, String> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("{field} must be a string")),
    }
}

/// An optional array of strings; `Err` names the field.
pub fn strings(object: &Map<String, Value>, field: &str) -> Result<Option<Vec<String>>, String> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned).ok_or_else(|| format!("{field} must be an array of strings")))
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(format!("{field} must be an array of strings")),
    }
}

/// A link worth keeping: `https`, only characters RFC 3986 allows, no user info, and a host that is not a
/// literal private or local address. Anything else is dropped, not refused: a bad logo is no
/// reason to turn a client away.
pub fn link(value: Option<&str>) -> Option<String> {
    let value = value?;
    if value.len() > LINK_MAX || !value.bytes().all(super::redirect::uri_byte) {
        return None;
    }
    let url = url::Url::parse(value).ok()?;
    let private = match url.host()? {
        url::Host::Ipv4(ip) => is_denied_ip(ip.into()),
        url::Host::Ipv6(ip) => is_denied_ip(ip.into()),
        url::Host::Domain(_) => false,
    };
    (url.scheme() == "https" && url.username().is_empty() && url.password().is_none() && !private).then(|| value.to_owned())
}

/// `grant_types` (default `authorization_code`): must include `authorization_code`; may
/// include `refresh_token`; nothing else is offered here.
pub fn grant_types(object: &Map<String, Value>) -> Result<Vec<String>, String> {
    let grants = strings(object, "grant_types")?.unwrap_or_else(|| vec!["authorization_code".into()]);
    if !grants.iter().any(|g| g == "authorization_code") {
        return Err("grant_types must include authorization_code".into());
    }
    if let Some(other) = grants.iter().find(|g| !matches!(g.as_str(), "authorization_code" | "refresh_token")) {
        return Err(format!("grant_types: {} is not supported (only authorization_code and refresh_token)", display_text(other, 100)));
    }
    Ok(grants)
}

/// `response_types` (default `code`): `code` only.
pub fn response_types(object: &Map<String, Value>) -> Result<Vec<String>, String> {
    let types = strings(object, "response_types")?.unwrap_or_else(|| vec!["code".into()]);
    if types.is_empty() || types.iter().any(|t| t != "code") {
        return Err("response_types must be [\"code\"] (the authorization code flow only)".into());
    }
    Ok(types)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().cloned().expect("an object")
    }

    #[test]
    fn display_text_removes_controls_and_bidi_overrides_and_caps_length() {
        assert_eq!(display_text(" Good\napp\u{202e}x ", 200), "Good app x");
        assert_eq!(display_text(&"é".repeat(300), 200).chars().count(), 200);
    }

    #[test]
    fn links_are_kept_only_when_https_to_a_public_host() {
        assert_eq!(link(Some("https://cdn.example.com/logo.png")).as_deref(), Some("https://cdn.example.com/logo.png"));
        for bad in [
            "http://cdn.example.com/logo.png",
            "https://127.0.0.1/logo.png",
            "https://[::1]/l",
            "https://169.254.169.254/x",
            "javascript:alert(1)",
            "https://u@cdn.example.com/l",
        ] {
            assert_eq!(link(Some(bad)), None, "{bad}");
        }
    }

    #[test]
    fn grant_types_default_to_authorization_code_and_must_include_it() {
        assert_eq!(grant_types(&object(json!({}))), Ok(vec!["authorization_code".to_owned()]));
        assert!(grant_types(&object(json!({"grant_types": ["refresh_token"]}))).is_err());
        assert!(grant_types(&object(json!({"grant_types": ["authorization_code", "implicit"]}))).is_err());
    }

    #[test]
    fn response_types_must_be_code() {
        assert_eq!(response_types(&object(json!({}))), Ok(vec!["code".to_owned()]));
        assert!(response_types(&object(json!({"response_types": ["token"]}))).is_err());
    }
}
