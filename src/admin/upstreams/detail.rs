//! One upstream's detail for `GET /admin/upstreams/{name}`, beyond the status the list shows:
//! its recent state changes, the names its tools are served under, and its effective settings
//! as an operator may read them. Settings name their secrets (an environment variable, a
//! file) rather than hold them; whatever may still be one is shown as `<redacted>` by
//! [`crate::redact::upstream`]: a stdio program's `env` values, its arguments that hold a
//! credential (a secret flag's value, a URL's user, password and query), and in every URL
//! its user, password, query and fragment. A key embedded in a URL's path is not redacted.

use serde_json::{Value, json};

use crate::config::upstreams::UpstreamSettings;
use crate::upstream::Link;

/// The members the detail adds to an upstream's answer.
pub fn members(link: &Link, served: Vec<String>) -> [(&'static str, Value); 3] {
    let history = link.status().history;
    [("history", json!(history)), ("served", json!(served)), ("settings", shown(&link.settings))]
}

/// `settings` as JSON with every value that could be a secret redacted.
pub fn shown(settings: &UpstreamSettings) -> Value {
    crate::redact::upstream(serde_json::to_value(settings).unwrap_or(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redact::REDACTED;

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
    fn a_urls_user_password_and_query_are_redacted() {
        let s = settings(json!({"url": "https://bob:hunter2@mcp.example.com/mcp?key=abc&team=x"}));
        let url = shown(&s)["url"].as_str().expect("url").to_owned();
        assert!(!url.contains("bob") && !url.contains("hunter2") && !url.contains("abc"), "{url}");
        assert_eq!(url, "https://mcp.example.com/mcp?<redacted>");
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
