//! `[servers.<name>]`: virtual servers, each a complete MCP endpoint at its own path serving a
//! curated part of the catalog under names the team chose (`src/virtual_servers`). The
//! default endpoint (`server.mcp_path`) keeps serving everything.
//!
//! ```toml
//! [servers.data]
//! path = "/teams/data/mcp"
//! title = "Data team"
//! instructions = "Tools for the data platform."
//! tools = ["wiki_*", "upstream:warehouse", "source:file"]
//! prompts = ["upstream:warehouse"]
//! scopes = ["team:data"]
//! overrides.wiki_search = { name = "search", description = "Search the data team's wiki" }
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Paths a virtual server may not take: toolgate's own routes.
const RESERVED: [&str; 6] = ["/sse", "/messages", "/.well-known", "/oauth", "/healthz", "/readyz"];
/// Longest path and most selectors or overrides: operator input, but also admin API input.
const MAX_PATH: usize = 200;
const MAX_ENTRIES: usize = 1000;
/// Longest selector (a glob's cost grows with its length and the name's).
const MAX_SELECTOR: usize = 128;
/// Most scopes or audiences of one server (the verifier reads the audiences on every token).
const MAX_SCOPES: usize = 32;
/// Most virtual servers in all, settings and admin API together.
pub const MAX_SERVERS: usize = 200;

/// One virtual server.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct VirtualServerSettings {
    /// Where it is served, e.g. `/teams/data/mcp`.
    pub path: String,
    /// Shown to clients as `serverInfo.title`.
    pub title: Option<String>,
    /// Sent to clients as `instructions`.
    pub instructions: Option<String>,
    /// Which tools it serves: a name, a glob on the name (`wiki_*`, `?`), `upstream:<name>`
    /// (every tool of that upstream), `source:<code|file|database|upstream>`, or `*`.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Which resources and templates it serves (by name, the same selectors).
    #[serde(default)]
    pub resources: Vec<String>,
    /// Which prompts it serves (by name, the same selectors).
    #[serde(default)]
    pub prompts: Vec<String>,
    /// Per tool (by the name `/mcp` serves it under): the name, title, description and hints
    /// served here. An override selects its tool.
    #[serde(default)]
    pub overrides: BTreeMap<String, ServedAs>,
    /// Scopes every request to this server needs, besides `auth.required_scopes`.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Audiences accepted besides this server's own resource URI (the origin of
    /// `auth.resource` with `path`).
    #[serde(default)]
    pub audiences: Vec<String>,
}

/// How one tool is served on a virtual server.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ServedAs {
    pub name: Option<String>,
    pub title: Option<String>,
    pub description: Option<String>,
    pub read_only_hint: Option<bool>,
    pub destructive_hint: Option<bool>,
    pub idempotent_hint: Option<bool>,
    pub open_world_hint: Option<bool>,
}

/// A selector, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selector {
    /// `*`, a name, or a glob on the name.
    Name(String),
    /// `upstream:<name>`.
    Upstream(String),
    /// `source:<origin>`.
    Source(String),
}

impl Selector {
    /// Parses one selector; the error says what the grammar is.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let ok = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'*' | b'?'));
        match raw.split_once(':') {
            Some(("upstream", name)) if ok(name) && !name.contains(['*', '?']) => Ok(Self::Upstream(name.to_owned())),
            Some(("source", origin)) if matches!(origin, "code" | "file" | "database" | "upstream") => Ok(Self::Source(origin.to_owned())),
            None if ok(raw) => Ok(Self::Name(raw.to_owned())),
            _ => Err(format!(
                "{raw:?} is not a selector: use a name, a glob on the name (`wiki_*`), `*`, `upstream:<name>` or `source:<code|file|database|upstream>`"
            )),
        }
    }
}

impl VirtualServerSettings {
    /// Checks one server's settings beside the others' paths and the default endpoint's;
    /// `Err((key, reason))` names what to change.
    pub fn validate(&self, name: &str, mcp_path: &str, others: &BTreeMap<String, Self>) -> Result<(), (String, String)> {
        let key = |field: &str| format!("servers.{name}.{field}");
        let name_ok = !name.is_empty()
            && name.len() <= 32
            && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'-'));
        if !name_ok {
            return Err((format!("servers.{name}"), "a server's name uses 1 to 32 characters from a-z, 0-9, '_' and '-'".into()));
        }
        check_path(&self.path, mcp_path).map_err(|why| (key("path"), why))?;
        if let Some((other, _)) = others.iter().find(|(o, s)| o.as_str() != name && s.path == self.path) {
            return Err((key("path"), format!("{:?} is also servers.{other}.path; give each server its own path", self.path)));
        }
        for (field, list) in [("tools", &self.tools), ("resources", &self.resources), ("prompts", &self.prompts)] {
            if list.len() > MAX_ENTRIES {
                return Err((key(field), format!("at most {MAX_ENTRIES} selectors")));
            }
            for raw in list {
                if raw.len() > MAX_SELECTOR {
                    return Err((key(field), format!("a selector has at most {MAX_SELECTOR} characters")));
                }
                Selector::parse(raw).map_err(|why| (key(field), why))?;
            }
        }
        if self.overrides.len() > MAX_ENTRIES {
            return Err((key("overrides"), format!("at most {MAX_ENTRIES} overrides")));
        }
        for (tool, served) in &self.overrides {
            tool_name(tool).map_err(|why| (key(&format!("overrides.{tool}")), why))?;
            if let Some(new) = &served.name {
                tool_name(new).map_err(|why| (key(&format!("overrides.{tool}.name")), why))?;
            }
            if served.description.as_deref().is_some_and(|d| d.trim().is_empty()) {
                return Err((key(&format!("overrides.{tool}.description")), "must not be empty".into()));
            }
        }
        self.check_served_names().map_err(|(k, why)| (key(&k), why))?;
        if self.scopes.len() > MAX_SCOPES || self.audiences.len() > MAX_SCOPES {
            return Err((key("scopes"), format!("at most {MAX_SCOPES} scopes and {MAX_SCOPES} audiences")));
        }
        // RFC 6749 §3.3 scope tokens: they go into a WWW-Authenticate challenge as they are.
        let scope_token = |s: &str| {
            !s.is_empty() && s.len() <= 200 && s.bytes().all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b))
        };
        if let Some(bad) = self.scopes.iter().find(|s| !scope_token(s)) {
            return Err((key("scopes"), format!("{bad:?} is not a scope: use printable ASCII without spaces, '\"' or '\\'")));
        }
        if let Some(bad) = self.audiences.iter().find(|a| a.len() > 500 || url::Url::parse(a).is_err()) {
            return Err((
                key("audiences"),
                format!("{bad:?} is not an absolute URI (e.g. api://toolgate-data or https://mcp.example.com/teams/data/mcp)"),
            ));
        }
        if self.title.as_deref().is_some_and(|t| t.len() > 200) || self.instructions.as_deref().is_some_and(|i| i.len() > 16 * 1024) {
            return Err((key("title"), "a title has at most 200 bytes and instructions at most 16 KiB".into()));
        }
        Ok(())
    }

    /// Two tools served under one name on this server, as far as the settings alone tell: two
    /// overrides giving the same name, or an override giving the name of a tool this server
    /// selects by exactly that name (and does not rename).
    fn check_served_names(&self) -> Result<(), (String, String)> {
        let mut given: BTreeMap<&str, &str> = BTreeMap::new();
        for (tool, served) in &self.overrides {
            let Some(new) = served.name.as_deref() else { continue };
            if let Some(first) = given.insert(new, tool) {
                return Err((
                    format!("overrides.{tool}.name"),
                    format!("the tools {first:?} and {tool:?} would both be served as {new:?}; give one of them another name"),
                ));
            }
            let selected_as_is = self.tools.iter().any(|t| t == new) && self.overrides.get(new).is_none_or(|o| o.name.is_none());
            if selected_as_is && new != tool {
                return Err((
                    format!("overrides.{tool}.name"),
                    format!(
                        "the tool {tool:?} would be served as {new:?}, the name of the tool {new:?} this server also selects; rename one of them (overrides.{new}.name) or choose another name"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The tool name grammar (`tool::validate_name`, which this leaf cannot import).
fn tool_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty() && name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok { Ok(()) } else { Err(format!("{name:?} is not a tool name: use 1 to 64 characters from A-Z, a-z, 0-9, '_', '-' and '.'")) }
}

fn check_path(path: &str, mcp_path: &str) -> Result<(), String> {
    let chars_ok = path.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'_' | b'-' | b'.'));
    if !path.starts_with('/') || path.len() < 2 || path.ends_with('/') || path.contains("//") || path.len() > MAX_PATH || !chars_ok {
        return Err(format!(
            "{path:?} must start with '/', not end with '/', and use only A-Z, a-z, 0-9, '/', '_', '-' and '.' (at most {MAX_PATH})"
        ));
    }
    if path.split('/').any(|seg| seg == "." || seg == "..") {
        return Err(format!("{path:?} must not hold '.' or '..' segments"));
    }
    if path == mcp_path {
        return Err(format!("{path:?} is server.mcp_path, the default endpoint; give this server a path of its own"));
    }
    if let Some(taken) = RESERVED.iter().find(|r| path == **r || path.starts_with(&format!("{r}/"))) {
        return Err(format!("{path:?} is under {taken}, which toolgate serves itself"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(path: &str) -> VirtualServerSettings {
        VirtualServerSettings { path: path.into(), ..Default::default() }
    }

    #[test]
    fn selectors_parse_by_their_grammar() {
        assert_eq!(Selector::parse("wiki_*"), Ok(Selector::Name("wiki_*".into())));
        assert_eq!(Selector::parse("upstream:wiki"), Ok(Selector::Upstream("wiki".into())));
        assert_eq!(Selector::parse("source:file"), Ok(Selector::Source("file".into())));
        assert!(Selector::parse("source:disk").is_err());
        assert!(Selector::parse("upstream:w*").is_err());
        assert!(Selector::parse("a b").is_err());
    }

    #[test]
    fn a_path_toolgate_serves_itself_is_refused() {
        let none = BTreeMap::new();
        for path in ["/mcp", "/oauth/x", "/.well-known", "/a/../b", "/a/", "a", "/a//b", "/a?b"] {
            assert!(server(path).validate("s", "/mcp", &none).is_err(), "{path}");
        }
        assert!(server("/teams/data/mcp").validate("s", "/mcp", &none).is_ok());
    }

    #[test]
    fn two_servers_on_one_path_are_refused_naming_the_other() {
        let mut all = BTreeMap::new();
        all.insert("a".to_owned(), server("/x/mcp"));
        all.insert("b".to_owned(), server("/x/mcp"));
        let (key, why) = all["b"].validate("b", "/mcp", &all).expect_err("refused");
        assert_eq!(key, "servers.b.path");
        assert!(why.contains("servers.a.path"), "{why}");
    }

    #[test]
    fn two_overrides_giving_one_name_are_refused_naming_both() {
        let mut s = server("/x/mcp");
        s.overrides.insert("a".into(), ServedAs { name: Some("n".into()), ..Default::default() });
        s.overrides.insert("b".into(), ServedAs { name: Some("n".into()), ..Default::default() });
        let (key, why) = s.validate("x", "/mcp", &BTreeMap::new()).expect_err("refused");
        assert_eq!(key, "servers.x.overrides.b.name");
        assert!(why.contains("\"a\"") && why.contains("\"b\""), "{why}");
    }

    #[test]
    fn an_override_taking_a_selected_tools_name_is_refused() {
        let mut s = server("/x/mcp");
        s.tools = vec!["search".into()];
        s.overrides.insert("wiki_search".into(), ServedAs { name: Some("search".into()), ..Default::default() });
        let (key, why) = s.validate("x", "/mcp", &BTreeMap::new()).expect_err("refused");
        assert_eq!(key, "servers.x.overrides.wiki_search.name");
        assert!(why.contains("overrides.search.name"), "{why}");
    }
}
