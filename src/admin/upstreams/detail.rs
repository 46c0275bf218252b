//! One upstream's detail for `GET /admin/upstreams/{name}`, beyond the status the list shows:
//! its recent state changes, the names its tools are served under, and its effective settings
//! as an operator may read them. Settings name their secrets (an environment variable, a
//! file) rather than hold them, except a stdio program's `env` values and what a URL can carry
//! (user and password, query values): those are shown as `<redacted>`.

use serde_json::{Value, json};

use crate::config::upstreams::UpstreamSettings;
use crate::upstream::Link;

/// What a redacted value shows.
const REDACTED: &str = "<redacted>";

/// The members the detail adds to an upstream's answer.
pub fn members(link: &Link, served: Vec<String>) -> [(&'static str, Value); 3] {
    let history = link.status().history;
    [("history", json!(history)), ("served", json!(served)), ("settings", shown(&link.settings))]
}

/// `settings` as JSON with every value that could be a secret redacted.
pub fn shown(settings: &UpstreamSettings) -> Value {
    let mut value = serde_json::to_value(settings).unwrap_or(Value::Null);
    if let Some(env) = value.pointer_mut("/stdio/env").and_then(Value::as_object_mut) {
        env.values_mut().for_each(|v| *v = json!(REDACTED));
    }
    if let Some(url) = settings.url.as_deref() {
        value["url"] = json!(url_shown(url));
    }
    value
}

/// `url` without its user and password, and with its query's values redacted (some APIs take
/// a key there).
fn url_shown(url: &str) -> String {
    let Ok(mut parsed) = url::Url::parse(url) else { return REDACTED.to_owned() };
    if !parsed.username().is_empty() || parsed.password().is_some() {
        // Both fail only for URLs that cannot have a user (no host), which have none.
        let _ = parsed.set_username(REDACTED);
        let _ = parsed.set_password(None);
    }
    if parsed.query().is_some() {
        let keys: Vec<String> = parsed.query_pairs().map(|(k, _)| k.into_owned()).collect();
        parsed.query_pairs_mut().clear().extend_pairs(keys.iter().map(|k| (k.as_str(), REDACTED)));
    }
    parsed.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(value: Value) -> UpstreamSettings {
        serde_json::from_value(value).expect("settings")
    }

    #[test]
    fn a_programs_environment_values_are_redacted_and_its_names_kept() {
        let s = settings(json!({"stdio": {"program": "python3", "env": {"API_KEY": "sk-live-123"}}}));
        let shown = shown(&s);
        assert_eq!(shown["stdio"]["env"], json!({"API_KEY": REDACTED}));
        assert!(!shown.to_string().contains("sk-live-123"));
    }

    #[test]
    fn a_urls_user_password_and_query_values_are_redacted() {
        let s = settings(json!({"url": "https://bob:hunter2@mcp.example.com/mcp?key=abc&team=x"}));
        let url = shown(&s)["url"].as_str().expect("url").to_owned();
        assert!(!url.contains("bob") && !url.contains("hunter2") && !url.contains("abc"), "{url}");
        assert!(url.contains("mcp.example.com/mcp") && url.contains("key=") && url.contains("team="), "{url}");
    }

    #[test]
    fn header_sources_are_shown_as_the_references_they_are() {
        let s = settings(
            json!({"url": "https://mcp.example.com/mcp", "headers": {"Authorization": {"env": "MCP_TOKEN", "prefix": "Bearer "}}}),
        );
        assert_eq!(shown(&s)["headers"]["Authorization"]["env"], "MCP_TOKEN");
        assert_eq!(shown(&s)["url"], "https://mcp.example.com/mcp");
    }
}
