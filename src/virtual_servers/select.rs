//! Which tools, resources and prompts a virtual server serves: its selectors, parsed once
//! (`config/servers.rs` holds the grammar) and matched against an entry's name and source.

use wildmatch::WildMatch;

use crate::config::servers::Selector;

/// One kind's selectors (tools, resources or prompts).
#[derive(Debug, Default)]
pub struct Selection {
    names: Vec<WildMatch>,
    upstreams: Vec<String>,
    origins: Vec<String>,
}

/// What a selector is matched against.
pub struct Entry<'a> {
    pub name: &'a str,
    /// `code`, `file`, `database` or `upstream`.
    pub origin: &'a str,
    /// The upstream MCP server it comes from, if any.
    pub upstream: Option<&'a str>,
}

impl Selection {
    /// The selectors, already checked by the settings (an invalid one selects nothing).
    pub fn parse(raw: &[String]) -> Self {
        let mut selection = Self::default();
        for selector in raw.iter().filter_map(|r| Selector::parse(r).ok()) {
            match selector {
                Selector::Name(pattern) => selection.names.push(WildMatch::new(&pattern)),
                Selector::Upstream(name) => selection.upstreams.push(name),
                Selector::Source(origin) => selection.origins.push(origin),
            }
        }
        selection
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty() && self.upstreams.is_empty() && self.origins.is_empty()
    }

    pub fn matches(&self, entry: &Entry<'_>) -> bool {
        self.names.iter().any(|w| w.matches(entry.name))
            || entry.upstream.is_some_and(|u| self.upstreams.iter().any(|s| s == u))
            || self.origins.iter().any(|o| o == entry.origin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry<'a>(name: &'a str, upstream: Option<&'a str>) -> Entry<'a> {
        Entry { name, origin: if upstream.is_some() { "upstream" } else { "file" }, upstream }
    }

    #[test]
    fn names_globs_upstreams_and_sources_select() {
        let s = Selection::parse(&["wiki_*".into(), "echo".into(), "upstream:crm".into()]);
        assert!(s.matches(&entry("wiki_search", None)));
        assert!(s.matches(&entry("echo", None)));
        assert!(!s.matches(&entry("echo2", None)));
        assert!(s.matches(&entry("crm_find", Some("crm"))));
        assert!(!s.matches(&entry("crm_find", Some("crm2"))));
        let files = Selection::parse(&["source:file".into()]);
        assert!(files.matches(&entry("x", None)) && !files.matches(&entry("x", Some("a"))));
    }
}
