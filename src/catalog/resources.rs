//! Static resources and URI templates, with `resources/read` resolution.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;
use serde_json::{Value, json};

use crate::bus::{Change, EventBus};
use crate::protocol::content::ResourceContents;
use crate::protocol::cursor;

type ReadFn = Arc<dyn Fn(&str) -> Vec<ResourceContents> + Send + Sync>;
type TemplateReadFn = Arc<dyn Fn(&str, &HashMap<String, String>) -> Vec<ResourceContents> + Send + Sync>;

/// A concrete resource.
#[derive(Clone)]
pub struct Resource {
    pub uri: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime_type: Option<String>,
    pub read: ReadFn,
}

impl Resource {
    pub fn new(
        uri: impl Into<String>,
        name: impl Into<String>,
        read: impl Fn(&str) -> Vec<ResourceContents> + Send + Sync + 'static,
    ) -> Self {
        Self { uri: uri.into(), name: name.into(), title: None, description: None, mime_type: None, read: Arc::new(read) }
    }

    pub fn description(mut self, d: impl Into<String>) -> Self {
        self.description = Some(d.into());
        self
    }

    pub fn mime_type(mut self, m: impl Into<String>) -> Self {
        self.mime_type = Some(m.into());
        self
    }

    fn listing(&self) -> Value {
        let mut v = json!({ "uri": self.uri, "name": self.name });
        put_opt(&mut v, "title", &self.title);
        put_opt(&mut v, "description", &self.description);
        put_opt(&mut v, "mimeType", &self.mime_type);
        v
    }
}

/// A family of resources addressed by an RFC 6570 level-1 template such as `test://template/{id}/data`.
#[derive(Clone)]
pub struct ResourceTemplate {
    pub uri_template: String,
    pub name: String,
    pub description: Option<String>,
    pub mime_type: Option<String>,
    pub read: TemplateReadFn,
}

impl ResourceTemplate {
    pub fn new(
        uri_template: impl Into<String>,
        name: impl Into<String>,
        read: impl Fn(&str, &HashMap<String, String>) -> Vec<ResourceContents> + Send + Sync + 'static,
    ) -> Self {
        Self { uri_template: uri_template.into(), name: name.into(), description: None, mime_type: None, read: Arc::new(read) }
    }

    pub fn description(mut self, d: impl Into<String>) -> Self {
        self.description = Some(d.into());
        self
    }

    pub fn mime_type(mut self, m: impl Into<String>) -> Self {
        self.mime_type = Some(m.into());
        self
    }

    fn listing(&self) -> Value {
        let mut v = json!({ "uriTemplate": self.uri_template, "name": self.name });
        put_opt(&mut v, "description", &self.description);
        put_opt(&mut v, "mimeType", &self.mime_type);
        v
    }

    /// Matches `uri` against the template; each `{var}` matches one non-empty path segment.
    fn matches(&self, uri: &str) -> Option<HashMap<String, String>> {
        let mut vars = HashMap::new();
        let mut rest = uri;
        let mut tpl = self.uri_template.as_str();
        while let Some(open) = tpl.find('{') {
            let literal = &tpl[..open];
            rest = rest.strip_prefix(literal)?;
            let close = tpl[open..].find('}')? + open;
            let name = &tpl[open + 1..close];
            tpl = &tpl[close + 1..];
            let next_literal_start = tpl.find('{').unwrap_or(tpl.len());
            let next_literal = &tpl[..next_literal_start];
            let end = if next_literal.is_empty() { rest.find('/').unwrap_or(rest.len()) } else { rest.find(next_literal)? };
            let value = &rest[..end];
            if value.is_empty() || value.contains('/') {
                return None;
            }
            vars.insert(name.to_owned(), value.to_owned());
            rest = &rest[end..];
        }
        (rest == tpl).then_some(vars)
    }
}

fn put_opt(v: &mut Value, key: &str, value: &Option<String>) {
    if let Some(s) = value {
        v[key] = json!(s);
    }
}

/// All resources and templates.
pub struct ResourceCatalog {
    resources: RwLock<Vec<Resource>>,
    templates: RwLock<Vec<ResourceTemplate>>,
    bus: Arc<dyn EventBus>,
}

impl std::fmt::Debug for ResourceCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceCatalog").field("resources", &self.resources.read().len()).finish_non_exhaustive()
    }
}

impl ResourceCatalog {
    pub fn new(bus: Arc<dyn EventBus>) -> Self {
        Self { resources: RwLock::new(Vec::new()), templates: RwLock::new(Vec::new()), bus }
    }

    pub fn is_empty(&self) -> bool {
        self.resources.read().is_empty() && self.templates.read().is_empty()
    }

    pub fn add(&self, resource: Resource) {
        let mut list = self.resources.write();
        list.retain(|r| r.uri != resource.uri);
        list.push(resource);
        list.sort_by(|a, b| a.uri.cmp(&b.uri));
        drop(list);
        self.bus.publish(Change::ResourcesListChanged);
    }

    pub fn add_template(&self, template: ResourceTemplate) {
        let mut list = self.templates.write();
        list.retain(|t| t.uri_template != template.uri_template);
        list.push(template);
        list.sort_by(|a, b| a.uri_template.cmp(&b.uri_template));
    }

    /// Tells subscribers that a resource's content changed.
    pub fn notify_updated(&self, uri: &str) {
        self.bus.publish(Change::ResourceUpdated(uri.into()));
    }

    pub fn list(&self, cursor: Option<&str>, size: usize) -> Result<(Vec<Value>, Option<String>), String> {
        let list = self.resources.read();
        let (page, next) = cursor::page(&list, |r| r.uri.as_str(), "resources", cursor, size)?;
        Ok((page.iter().map(Resource::listing).collect(), next))
    }

    pub fn list_templates(&self, cursor: Option<&str>, size: usize) -> Result<(Vec<Value>, Option<String>), String> {
        let list = self.templates.read();
        let (page, next) = cursor::page(&list, |t| t.uri_template.as_str(), "templates", cursor, size)?;
        Ok((page.iter().map(ResourceTemplate::listing).collect(), next))
    }

    /// Reads a resource by URI, trying concrete resources before templates.
    pub fn read(&self, uri: &str) -> Option<Vec<ResourceContents>> {
        let read = self.resources.read().iter().find(|r| r.uri == uri).map(|r| r.read.clone());
        if let Some(read) = read {
            return Some(read(uri));
        }
        let found = self.templates.read().iter().find_map(|t| t.matches(uri).map(|vars| (t.read.clone(), vars)));
        found.map(|(read, vars)| read(uri, &vars))
    }

    /// Whether `uri` names something this catalog can read.
    pub fn exists(&self, uri: &str) -> bool {
        self.resources.read().iter().any(|r| r.uri == uri) || self.templates.read().iter().any(|t| t.matches(uri).is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_match_one_segment_per_variable() {
        let t = ResourceTemplate::new("test://template/{id}/data", "t", |_, _| Vec::new());
        assert_eq!(t.matches("test://template/123/data").and_then(|v| v.get("id").cloned()).as_deref(), Some("123"));
        assert!(t.matches("test://template//data").is_none());
        assert!(t.matches("test://template/1/2/data").is_none());
        assert!(t.matches("test://template/123/other").is_none());
        let t = ResourceTemplate::new("file:///{name}", "f", |_, _| Vec::new());
        assert!(t.matches("file:///a.csv").is_some());
    }
}
