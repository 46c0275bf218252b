//! Request templates: the RFC 6570 URL template (via `iri-string`), `{field}` text templates
//! for query values and body strings, and the typed JSON body template.
//!
//! Every template is parsed once at build time; the fields it uses are listed so the build
//! can refuse ones the input schema does not declare.

use iri_string::spec::UriSpec;
use iri_string::template::UriTemplateString;
use iri_string::template::simple_context::{SimpleContext, Value as TemplateValue};
use serde_json::{Map, Value};
use url::Url;

/// A URL template whose scheme, host and port are fixed: expressions may only follow the
/// authority (`https://api.github.com/repos/{owner}/{repo}/issues{?state,per_page}`).
#[derive(Clone, Debug)]
pub struct UrlTemplate {
    template: UriTemplateString,
    /// The fixed `scheme://host[:port]` every expansion must keep.
    origin: url::Origin,
    /// The fixed origin as a URL (scheme, host, port), for checks and messages.
    base: Url,
    /// Variables expanded with `{+...}` or `{#...}` (reserved expansion), whose `%` signs are
    /// escaped first unless they start a percent-encoded triplet (see [`reserved_safe_value`]).
    reserved: Vec<String>,
}

impl UrlTemplate {
    pub fn parse(text: &str) -> Result<Self, String> {
        // A URI is ASCII; iri-string 0.7 also panics on some non-ASCII template text (found by
        // fuzz/url_template), so it never sees any.
        if !text.is_ascii() {
            return Err("the URL must be ASCII: percent-encode other characters (é as %C3%A9)".into());
        }
        let lower = text.to_ascii_lowercase();
        let scheme_len = if lower.starts_with("https://") {
            8
        } else if lower.starts_with("http://") {
            7
        } else {
            return Err("the URL must start with http:// or https://".into());
        };
        let rest = &text[scheme_len..];
        let end = rest.find(['/', '?', '#', '{']).unwrap_or(rest.len());
        let authority = &rest[..end];
        if rest[end..].starts_with('{') && !rest[end + 1..].starts_with(['/', '?', '#']) {
            return Err("the host part of the URL must be fixed: only a {/...}, {?...} or {#...} expression may follow it directly".into());
        }
        if authority.is_empty() {
            return Err("the URL has no host".into());
        }
        if authority.contains(['}', '@']) {
            return Err(if authority.contains('@') {
                "credentials in the URL are refused: send them in a header read from `env` or `file`".into()
            } else {
                "the host part of the URL must be fixed (no template expressions in it)".into()
            });
        }
        let base = Url::parse(&format!("{}{authority}/", &text[..scheme_len]))
            .map_err(|e| format!("the host part `{authority}` is not valid: {e}"))?;
        if base.host_str().is_none_or(str::is_empty) {
            return Err("the URL has no host".into());
        }
        // Isolated like expansion below: iri-string panicked validating some template text.
        let validate =
            std::panic::AssertUnwindSafe(|| UriTemplateString::try_from(text.to_owned()).map_err(|e| e.validation_error().to_string()));
        let template = std::panic::catch_unwind(validate)
            .unwrap_or_else(|_| Err("the URL template library could not read it".into()))
            .map_err(|e| format!("not a valid URI template (RFC 6570): {e}"))?;
        let this = Self { template, origin: base.origin(), base, reserved: reserved_variables(text) };
        let bare = this.expand_raw(&Map::new()).map_err(|e| format!("not a valid URI template (RFC 6570): {e}"))?;
        let parsed = Url::parse(&bare).map_err(|e| format!("the URL is not valid without its optional parts: {e}"))?;
        if has_dot_segment(&bare) {
            return Err("the URL path must not contain `.` or `..` segments".into());
        }
        if parsed.origin() != this.origin {
            return Err("the host part of the URL must be fixed".into());
        }
        Ok(this)
    }

    /// The variable names the template uses.
    pub fn variables(&self) -> Vec<String> {
        let mut vars: Vec<String> = self.template.variables().map(|v| v.as_str().to_owned()).collect();
        vars.sort();
        vars.dedup();
        vars
    }

    /// The fixed origin, as a URL with an empty path.
    pub fn base(&self) -> &Url {
        &self.base
    }

    /// The URL for these arguments. `Err` is a message for the model.
    pub fn expand(&self, args: &Map<String, Value>) -> Result<Url, String> {
        let text = self.expand_raw(args).map_err(|e| format!("the arguments do not fit the URL template: {e}"))?;
        if has_dot_segment(&text) {
            return Err("an argument used in the URL path is `.` or `..`, which is refused".into());
        }
        let url = Url::parse(&text).map_err(|e| format!("the arguments make an invalid URL: {e}"))?;
        if url.origin() != self.origin {
            return Err("the arguments would change the URL's host, which is refused".into());
        }
        Ok(url)
    }

    fn expand_raw(&self, args: &Map<String, Value>) -> Result<String, String> {
        let mut context = SimpleContext::new();
        for name in self.template.variables() {
            if let Some(value) = args.get(name.as_str()).and_then(template_value) {
                let value = if self.reserved.iter().any(|r| r == name.as_str()) { reserved_safe_value(value) } else { value };
                context.insert(name.as_str(), value);
            }
        }
        // iri-string 0.7.14 panics on some inputs to its percent-encoding writers (four kinds
        // found by fuzz/url_template; the ones we understand are made safe above). Whatever is
        // left is isolated here: a refused argument, never a panic in the caller.
        let expand = std::panic::AssertUnwindSafe(|| self.template.expand::<UriSpec, _>(&context).map(|e| e.to_string()));
        match std::panic::catch_unwind(expand) {
            Ok(expanded) => expanded.map_err(|e| e.to_string()),
            Err(_) => Err("the URL template library could not expand these arguments".into()),
        }
    }
}

/// The variables of the `{+...}` and `{#...}` expressions of a template text.
fn reserved_variables(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    for expression in text.split('{').skip(1).filter_map(|rest| rest.split_once('}').map(|(e, _)| e)) {
        let Some(list) = expression.strip_prefix(['+', '#']) else { continue };
        for spec in list.split(',') {
            let name = spec.trim_end_matches('*');
            let name = name.split_once(':').map_or(name, |(n, _)| n);
            names.push(name.to_owned());
        }
    }
    names
}

/// RFC 6570 reserved expansion keeps percent-encoded triplets as they are and encodes anything
/// else that may not stand in a URI: a lone `%`, and every non-ASCII character (as the
/// percent-encoded bytes of its UTF-8). Doing that first gives the same URL and keeps from
/// `iri-string` 0.7 the input it panics on (found by `fuzz/`'s `url_template`): non-ASCII
/// text, and triplets that do not decode to UTF-8. Those are kept as literal text instead
/// (every `%` escaped), which is what an argument meaning them as bytes cannot be anyway.
fn reserved_safe_value(value: TemplateValue) -> TemplateValue {
    match value {
        TemplateValue::String(s) => TemplateValue::String(reserved_safe(s)),
        TemplateValue::List(items) => TemplateValue::List(items.into_iter().map(reserved_safe).collect()),
        TemplateValue::Assoc(pairs) => TemplateValue::Assoc(pairs.into_iter().map(|(k, v)| (reserved_safe(k), reserved_safe(v))).collect()),
        TemplateValue::Undefined => TemplateValue::Undefined,
    }
}

/// See [`reserved_safe_value`].
fn reserved_safe(text: String) -> String {
    if text.is_ascii() && !text.contains('%') {
        return text;
    }
    let bytes = text.as_bytes();
    let is_triplet = |i: usize| bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit) && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit);
    let mut out = String::with_capacity(text.len() + 8);
    for (i, c) in text.char_indices() {
        if c == '%' && !is_triplet(i) {
            out.push_str("%25");
        } else if c.is_ascii() {
            out.push(c);
        } else {
            for byte in c.encode_utf8(&mut [0; 4]).bytes() {
                out.push_str(&format!("%{byte:02X}"));
            }
        }
    }
    if std::str::from_utf8(&percent_decode(&out)).is_err() {
        return out.replace('%', "%25");
    }
    out
}

/// The bytes an ASCII text with percent-encoded triplets stands for.
fn percent_decode(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        match (bytes[i], bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(hi), Some(lo)) => {
                out.push(u8::try_from(hi * 16 + lo).unwrap_or(0));
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// An argument as an RFC 6570 value: strings as they are, numbers and booleans as JSON text,
/// arrays as lists, objects as associative arrays (nested values as JSON text), null as
/// undefined.
fn template_value(value: &Value) -> Option<TemplateValue> {
    match value {
        Value::Null => None,
        Value::Array(items) => Some(TemplateValue::List(items.iter().map(scalar_text).collect())),
        Value::Object(map) => Some(TemplateValue::Assoc(map.iter().map(|(k, v)| (k.clone(), scalar_text(v))).collect())),
        other => Some(TemplateValue::String(scalar_text(other))),
    }
}

/// A JSON value as text: strings unquoted, everything else as compact JSON.
pub(crate) fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Whether the path of an absolute URL string has a `.` or `..` segment (also percent-encoded:
/// URL parsers resolve `%2e%2e` like `..`).
fn has_dot_segment(url: &str) -> bool {
    let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    let path_and_more = after_scheme.find('/').map_or("", |i| &after_scheme[i..]);
    let path = path_and_more.split(['?', '#']).next().unwrap_or("");
    path.split('/').any(|segment| {
        let s = segment.to_ascii_lowercase().replace("%2e", ".");
        s == "." || s == ".."
    })
}

/// A string with `{field}` placeholders; `{{` and `}}` are literal braces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TextTemplate {
    parts: Vec<Part>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Literal(String),
    Field(String),
}

impl TextTemplate {
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        let mut literal = String::new();
        let mut chars = text.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            match c {
                '{' if chars.peek().is_some_and(|&(_, n)| n == '{') => {
                    chars.next();
                    literal.push('{');
                }
                '}' if chars.peek().is_some_and(|&(_, n)| n == '}') => {
                    chars.next();
                    literal.push('}');
                }
                '{' => {
                    let Some(len) = text[i + 1..].find('}') else {
                        return Err(format!("`{{` at byte {i} is not closed (write `{{{{` for a literal brace)"));
                    };
                    let name = &text[i + 1..i + 1 + len];
                    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                        return Err(format!(
                            "`{{{name}}}` is not a placeholder: use `{{field}}` with a field name of letters, digits, `_` or `-` (write `{{{{` for a literal brace)"
                        ));
                    }
                    if !literal.is_empty() {
                        parts.push(Part::Literal(std::mem::take(&mut literal)));
                    }
                    parts.push(Part::Field(name.to_owned()));
                    for _ in 0..=len {
                        chars.next();
                    }
                }
                '}' => return Err(format!("`}}` at byte {i} has no opening `{{` (write `}}}}` for a literal brace)")),
                c => literal.push(c),
            }
        }
        if !literal.is_empty() {
            parts.push(Part::Literal(literal));
        }
        Ok(Self { parts })
    }

    /// The fields the template uses.
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Field(f) => Some(f.as_str()),
            Part::Literal(_) => None,
        })
    }

    /// The field when the whole template is exactly one `{field}`.
    pub fn exact_field(&self) -> Option<&str> {
        match self.parts.as_slice() {
            [Part::Field(f)] => Some(f),
            _ => None,
        }
    }

    /// The text, or `None` when a field it uses is absent (or null).
    pub fn render(&self, args: &Map<String, Value>) -> Option<String> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Literal(s) => out.push_str(s),
                Part::Field(f) => out.push_str(&scalar_text(args.get(f).filter(|v| !v.is_null())?)),
            }
        }
        Some(out)
    }
}

/// A JSON body template: a string that is exactly `"{field}"` becomes the argument's typed
/// value; other strings interpolate fields as text; an entry whose fields are absent is
/// dropped; everything else passes through.
#[derive(Clone, Debug)]
pub(crate) enum BodyTemplate {
    Literal(Value),
    Text(TextTemplate),
    Array(Vec<BodyTemplate>),
    Object(Vec<(String, BodyTemplate)>),
}

impl BodyTemplate {
    /// Parses `value`; errors carry the path inside the body (`.labels[1]`).
    pub fn parse(value: &Value) -> Result<Self, Vec<(String, String)>> {
        let mut errors = Vec::new();
        let this = Self::parse_at(value, String::new(), &mut errors);
        if errors.is_empty() { Ok(this) } else { Err(errors) }
    }

    fn parse_at(value: &Value, path: String, errors: &mut Vec<(String, String)>) -> Self {
        match value {
            Value::String(s) if s.contains(['{', '}']) => match TextTemplate::parse(s) {
                Ok(t) => Self::Text(t),
                Err(e) => {
                    errors.push((path, e));
                    Self::Literal(Value::Null)
                }
            },
            Value::Array(items) => {
                Self::Array(items.iter().enumerate().map(|(i, v)| Self::parse_at(v, format!("{path}[{i}]"), errors)).collect())
            }
            Value::Object(map) => {
                Self::Object(map.iter().map(|(k, v)| (k.clone(), Self::parse_at(v, format!("{path}.{k}"), errors))).collect())
            }
            other => Self::Literal(other.clone()),
        }
    }

    /// Every field used anywhere in the body.
    pub fn fields(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.collect_fields(&mut out);
        out.sort();
        out.dedup();
        out
    }

    fn collect_fields(&self, out: &mut Vec<String>) {
        match self {
            Self::Literal(_) => {}
            Self::Text(t) => out.extend(t.fields().map(str::to_owned)),
            Self::Array(items) => items.iter().for_each(|i| i.collect_fields(out)),
            Self::Object(entries) => entries.iter().for_each(|(_, v)| v.collect_fields(out)),
        }
    }

    /// The body for these arguments; `None` when the whole body depends on an absent field.
    pub fn render(&self, args: &Map<String, Value>) -> Option<Value> {
        match self {
            Self::Literal(v) => Some(v.clone()),
            Self::Text(t) => match t.exact_field() {
                Some(field) => args.get(field).filter(|v| !v.is_null()).cloned(),
                None => t.render(args).map(Value::String),
            },
            Self::Array(items) => Some(Value::Array(items.iter().filter_map(|i| i.render(args)).collect())),
            Self::Object(entries) => Some(Value::Object(entries.iter().filter_map(|(k, v)| Some((k.clone(), v.render(args)?))).collect())),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn url_templates_percent_encode_path_and_query_values() {
        let t = UrlTemplate::parse("https://api.example.com/repos/{owner}/{repo}/issues{?state,per_page}").expect("valid");
        assert_eq!(t.variables(), ["owner", "per_page", "repo", "state"]);
        let url = t.expand(&args(json!({"owner": "a b", "repo": "x/../y?z", "state": "open", "per_page": 5}))).expect("url");
        assert_eq!(url.as_str(), "https://api.example.com/repos/a%20b/x%2F..%2Fy%3Fz/issues?state=open&per_page=5");
        let url = t.expand(&args(json!({"owner": "zoë", "repo": "r"}))).expect("url");
        assert_eq!(url.as_str(), "https://api.example.com/repos/zo%C3%AB/r/issues");
    }

    #[test]
    fn a_lone_percent_in_a_reserved_expansion_is_encoded_not_a_panic() {
        // Found by fuzz/url_template: iri-string panicked on `%` before a non-ASCII character.
        let t = UrlTemplate::parse("https://api.example.com/raw/{+rest}").expect("valid");
        let url = t.expand(&args(json!({"rest": "%ƺ/a%2Fb"}))).expect("url");
        assert_eq!(url.as_str(), "https://api.example.com/raw/%25%C6%BA/a%2Fb");
    }

    #[test]
    fn non_ascii_text_in_a_reserved_expansion_is_percent_encoded() {
        let t = UrlTemplate::parse("https://api.example.com/raw/{+rest}").expect("valid");
        assert_eq!(t.expand(&args(json!({"rest": "ƺ"}))).expect("url").as_str(), "https://api.example.com/raw/%C6%BA");
    }

    #[test]
    fn triplets_that_are_not_utf8_stay_literal_text() {
        let t = UrlTemplate::parse("https://api.example.com/raw/{+rest}").expect("valid");
        let url = t.expand(&args(json!({"rest": "%E3%Ea-%2F"}))).expect("url");
        assert_eq!(url.as_str(), "https://api.example.com/raw/%25E3%25Ea-%252F");
        assert_eq!(t.expand(&args(json!({"rest": "a%2Fb"}))).expect("url").as_str(), "https://api.example.com/raw/a%2Fb");
    }

    #[test]
    fn a_template_with_non_ascii_text_is_refused() {
        let e = UrlTemplate::parse("https://ap/raw/{+rest}2%2E%2E2E%2ƺ").expect_err("refused");
        assert!(e.contains("ASCII"), "{e}");
    }

    #[test]
    fn a_lone_percent_in_a_fragment_expansion_is_encoded() {
        let t = UrlTemplate::parse("https://api.example.com/p{#frag}").expect("valid");
        assert_eq!(t.expand(&args(json!({"frag": "%é"}))).expect("url").as_str(), "https://api.example.com/p#%25%C3%A9");
    }

    #[test]
    fn a_percent_in_a_simple_expansion_is_encoded_once() {
        let t = UrlTemplate::parse("https://api.example.com/p/{v}").expect("valid");
        assert_eq!(t.expand(&args(json!({"v": "%ƺ"}))).expect("url").as_str(), "https://api.example.com/p/%25%C6%BA");
    }

    #[test]
    fn dot_segments_from_arguments_are_refused() {
        let t = UrlTemplate::parse("https://api.example.com/repos/{owner}/x").expect("valid");
        for owner in ["..", "."] {
            assert!(t.expand(&args(json!({"owner": owner}))).is_err(), "{owner}");
        }
        let encoded = t.expand(&args(json!({"owner": "%2e%2e"}))).expect("a literal percent sign is encoded");
        assert_eq!(encoded.path(), "/repos/%252e%252e/x");
        let t = UrlTemplate::parse("https://api.example.com/{+path}").expect("valid");
        assert!(t.expand(&args(json!({"path": "a/../../b"}))).is_err());
        assert!(t.expand(&args(json!({"path": "a/b"}))).is_ok());
        assert!(UrlTemplate::parse("https://api.example.com{+path}").is_err(), "reserved expansion right after the host could change it");
    }

    #[test]
    fn the_host_part_must_be_fixed_and_http() {
        for bad in [
            "ftp://example.com/x",
            "https://{host}/x",
            "https://api.{domain}/x",
            "https://example.com{path}",
            "https://user:pw@example.com/",
            "https:///x",
            "https://example.com/{unclosed",
            "https://example.com/a/../b",
        ] {
            assert!(UrlTemplate::parse(bad).is_err(), "{bad} should be refused");
        }
        assert!(UrlTemplate::parse("HTTPS://example.com:8443{/id}{?q}").is_ok());
    }

    #[test]
    fn text_templates_parse_fields_and_escapes() {
        let t = TextTemplate::parse("repo:{owner}/{repo} {{literal}}").expect("valid");
        assert_eq!(t.fields().collect::<Vec<_>>(), ["owner", "repo"]);
        assert_eq!(t.render(&args(json!({"owner": "o", "repo": 3}))).as_deref(), Some("repo:o/3 {literal}"));
        assert_eq!(t.render(&args(json!({"owner": "o"}))), None);
        assert_eq!(TextTemplate::parse("{x}").expect("valid").exact_field(), Some("x"));
        for bad in ["{", "}", "{a b}", "{}", "x{y"] {
            assert!(TextTemplate::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn body_templates_substitute_typed_values_and_drop_absent_ones() {
        let t = BodyTemplate::parse(&json!({
            "title": "{title}", "labels": "{labels}", "count": "{n}", "note": "by {user}", "fixed": {"a": [1, "{n}"]}, "opt": "{missing}"
        }))
        .expect("valid");
        assert_eq!(t.fields(), ["labels", "missing", "n", "title", "user"]);
        let body = t.render(&args(json!({"title": "T", "labels": ["a", "b"], "n": 2, "user": "u"}))).expect("body");
        assert_eq!(body, json!({"title": "T", "labels": ["a", "b"], "count": 2, "note": "by u", "fixed": {"a": [1, 2]}}));
        let errors = BodyTemplate::parse(&json!({"a": {"b": ["ok", "{bad field}"]}})).expect_err("invalid");
        assert_eq!(errors[0].0, ".a.b[1]");
    }
}
