//! Static resources and URI templates, with `resources/read` resolution. Besides its own,
//! the catalog holds resources another MCP server serves (an upstream, `source`): listed as
//! that server lists them, read through it.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::future::BoxFuture;
use parking_lot::RwLock;
use serde_json::{Value, json};

use crate::bus::{Change, EventBus};
use crate::protocol::content::ResourceContents;
use crate::protocol::cursor;

type ReadFn = Arc<dyn Fn(&str) -> Vec<ResourceContents> + Send + Sync>;
type TemplateReadFn = Arc<dyn Fn(&str, &HashMap<String, String>) -> Vec<ResourceContents> + Send + Sync>;
/// Reads a URI through another server: its `contents` array, or why it could not.
pub type RemoteRead = Arc<dyn Fn(String) -> BoxFuture<'static, Result<Value, String>> + Send + Sync>;

/// Resources and templates of one other server, as it lists them (names already prefixed).
#[derive(Clone)]
pub struct RemoteResources {
    pub resources: Vec<Value>,
    pub templates: Vec<Value>,
    pub read: RemoteRead,
    /// Scopes a caller must hold to see and read them (the upstream's own `scopes`).
    pub scopes: Vec<String>,
}

/// Whether the caller may see and use an entry: it holds the entry's scopes (always, without
/// authentication), and the endpoint asked serves it (a virtual server serves a selection).
pub type MayUse<'a> = &'a dyn Fn(&Offer<'_>) -> bool;

/// What [`MayUse`] decides on.
pub struct Offer<'a> {
    /// Scopes a caller must hold (an upstream's own `scopes`; none for toolgate's own).
    pub scopes: &'a [String],
    /// The entry's name as listed.
    pub name: &'a str,
    /// The upstream MCP server it comes from; `None`: toolgate's own.
    pub source: Option<&'a str>,
}

impl<'a> Offer<'a> {
    /// A listed entry of `source` (its `name` field).
    pub fn listed(entry: &'a Value, scopes: &'a [String], source: Option<&'a str>) -> Self {
        Self { scopes, name: entry["name"].as_str().unwrap_or_default(), source }
    }
}

/// How a resource is read: already (own resources), or through another server.
pub enum Reading {
    /// The `contents` array.
    Done(Value),
    Remote(RemoteRead),
}

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
        template_matches(&self.uri_template, uri)
    }
}

/// Matches `uri` against an RFC 6570 level-1 template; each `{var}` matches one non-empty path
/// segment.
fn template_matches(template: &str, uri: &str) -> Option<HashMap<String, String>> {
    {
        let mut vars = HashMap::new();
        let mut rest = uri;
        let mut tpl = template;
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
    /// Other servers' resources, by source; a URI one of them lists is read through it.
    remote: RwLock<std::collections::BTreeMap<String, RemoteResources>>,
    /// Set when other servers may contribute resources: the capability is then offered even
    /// while none are listed yet.
    remote_expected: AtomicBool,
    bus: Arc<dyn EventBus>,
}

impl std::fmt::Debug for ResourceCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceCatalog").field("resources", &self.resources.read().len()).finish_non_exhaustive()
    }
}

impl ResourceCatalog {
    pub fn new(bus: Arc<dyn EventBus>) -> Self {
        Self {
            resources: RwLock::new(Vec::new()),
            templates: RwLock::new(Vec::new()),
            remote: RwLock::default(),
            remote_expected: AtomicBool::new(false),
            bus,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.resources.read().is_empty() && self.templates.read().is_empty() && self.remote.read().is_empty()
    }

    /// Whether the resource methods are offered: something is listed, or may be.
    pub fn is_offered(&self) -> bool {
        self.remote_expected.load(Ordering::Relaxed) || !self.is_empty()
    }

    /// Other servers may contribute resources (upstreams are configured).
    pub fn expect_remote(&self) {
        self.remote_expected.store(true, Ordering::Relaxed);
    }

    /// Makes `remote` what `source` contributes (`None`: nothing); clients hear
    /// `list_changed` only when a listing changed.
    pub fn sync_source(&self, source: &str, remote: Option<RemoteResources>) {
        let mut all = self.remote.write();
        let before = all.get(source).map(|r| (r.resources.clone(), r.templates.clone()));
        let after = remote.as_ref().map(|r| (r.resources.clone(), r.templates.clone()));
        match remote {
            Some(r) => all.insert(source.to_owned(), r),
            None => all.remove(source),
        };
        drop(all);
        if before != after {
            self.bus.publish(Change::ResourcesListChanged);
        }
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

    /// One page of every listing, own and other servers', in one order by URI (a URI two
    /// sources list is listed once, as the first has it).
    pub fn list(&self, cursor: Option<&str>, size: usize, may: MayUse<'_>) -> Result<(Vec<Value>, Option<String>), String> {
        let list = self.merged(|r| r.resources.iter(), self.resources.read().iter().map(Resource::listing).collect(), "uri", may);
        let (page, next) = cursor::page(&list, |v| v["uri"].as_str().unwrap_or_default(), "resources", cursor, size)?;
        Ok((page.to_vec(), next))
    }

    pub fn list_templates(&self, cursor: Option<&str>, size: usize, may: MayUse<'_>) -> Result<(Vec<Value>, Option<String>), String> {
        let own = self.templates.read().iter().map(ResourceTemplate::listing).collect();
        let list = self.merged(|r| r.templates.iter(), own, "uriTemplate", may);
        let (page, next) = cursor::page(&list, |v| v["uriTemplate"].as_str().unwrap_or_default(), "templates", cursor, size)?;
        Ok((page.to_vec(), next))
    }

    fn merged(
        &self,
        of: impl Fn(&RemoteResources) -> std::slice::Iter<'_, Value>,
        mut own: Vec<Value>,
        key: &str,
        may: MayUse<'_>,
    ) -> Vec<Value> {
        let remote = self.remote.read();
        own.retain(|v| may(&Offer::listed(v, &[], None)));
        let mut seen: std::collections::HashSet<String> = own.iter().filter_map(|v| v[key].as_str().map(str::to_owned)).collect();
        for (source, entries) in remote.iter() {
            for entry in of(entries).filter(|e| may(&Offer::listed(e, &entries.scopes, Some(source)))) {
                if entry[key].as_str().is_some_and(|k| seen.insert(k.to_owned())) {
                    own.push(entry.clone());
                }
            }
        }
        own.sort_by(|a, b| a[key].as_str().cmp(&b[key].as_str()));
        own
    }

    /// Who reads `uri` for this caller: own resources, then own templates (read now), then the
    /// other server that lists the URI or a template matching it. `None`: nobody serves it.
    pub fn reader(&self, uri: &str, may: MayUse<'_>) -> Option<Reading> {
        let own = |name: &str| may(&Offer { scopes: &[], name, source: None });
        let read = self.resources.read().iter().find(|r| r.uri == uri && own(&r.name)).map(|r| r.read.clone());
        if let Some(read) = read {
            return Some(Reading::Done(json!(read(uri))));
        }
        let found = self.templates.read().iter().filter(|t| own(&t.name)).find_map(|t| t.matches(uri).map(|vars| (t.read.clone(), vars)));
        if let Some((read, vars)) = found {
            return Some(Reading::Done(json!(read(uri, &vars))));
        }
        self.remote_reader(uri, may).map(Reading::Remote)
    }

    /// The other server that serves `uri` to this caller: one that lists it, else one with a
    /// matching template.
    fn remote_reader(&self, uri: &str, may: MayUse<'_>) -> Option<RemoteRead> {
        let remote = self.remote.read();
        let may = |r: &RemoteResources, source: &str, entry: &Value| may(&Offer::listed(entry, &r.scopes, Some(source)));
        let listed = remote.iter().find(|(source, r)| r.resources.iter().any(|v| v["uri"] == uri && may(r, source, v)));
        let templated = || {
            remote.iter().find(|(source, r)| {
                r.templates
                    .iter()
                    .any(|t| t["uriTemplate"].as_str().is_some_and(|pattern| template_matches(pattern, uri).is_some()) && may(r, source, t))
            })
        };
        listed.or_else(templated).map(|(_, r)| r.read.clone())
    }

    /// Whether `uri` names something this catalog can read.
    pub fn exists(&self, uri: &str) -> bool {
        self.resources.read().iter().any(|r| r.uri == uri)
            || self.templates.read().iter().any(|t| t.matches(uri).is_some())
            || self.remote_reader(uri, &|_: &Offer<'_>| true).is_some()
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
