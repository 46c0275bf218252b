//! One operation of an OpenAPI document as one `http` definition: its parameters and JSON
//! body as the input schema (each argument named, placed in the path, query, headers or body),
//! its security schemes as secret headers or query values, its method's hints, and its path as
//! a URL template. What cannot be expressed is an `Err` with the reason, and the operation is
//! skipped.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::{
    Context, ImportedAnnotations, ImportedHttp, ImportedTool, MAX_DESCRIPTION, MAX_TITLE, budget, is_absolute, names, schema, server_url,
    text,
};

/// One operation being imported.
pub(super) struct Operation<'a> {
    pub path: &'a str,
    pub method: &'a str,
    pub item: &'a Map<String, Value>,
    pub op: &'a Map<String, Value>,
    pub tags: &'a [&'a str],
}

/// Where a parameter goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum In {
    Path,
    Query,
    Header,
    Cookie,
}

impl In {
    fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "path" => Self::Path,
            "query" => Self::Query,
            "header" => Self::Header,
            "cookie" => Self::Cookie,
            _ => return None,
        })
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Path => "path",
            Self::Query => "query",
            Self::Header => "header",
            Self::Cookie => "cookie",
        }
    }
}

/// What a schema holds, for the serialization rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Scalar,
    Array,
    Object,
}

fn shape(schema: &Value) -> Shape {
    let has = |t: &str| match schema.get("type") {
        Some(Value::String(s)) => s == t,
        Some(Value::Array(types)) => types.iter().any(|v| v == t),
        _ => false,
    };
    if has("object") || schema.get("properties").is_some() {
        Shape::Object
    } else if has("array") || schema.get("items").is_some() {
        Shape::Array
    } else {
        Shape::Scalar
    }
}

/// Where the parameters went: path placeholders (parameter → argument), query and headers.
struct Placed {
    path_args: BTreeMap<String, String>,
    query: BTreeMap<String, Value>,
    headers: BTreeMap<String, Value>,
}

/// The arguments of one tool as they are collected.
#[derive(Default)]
struct Arguments {
    properties: Map<String, Value>,
    required: Vec<String>,
    /// `<argument>_<where>` → the next number to try after it, so many parameters cleaned to
    /// one argument name are numbered in linear time.
    next: BTreeMap<String, usize>,
}

impl Arguments {
    /// A free argument name for `wanted` (`wanted_<where>` or a number when it is taken).
    fn name_for(&mut self, wanted: &str, place: &str) -> String {
        let base = names::argument(wanted);
        if !self.properties.contains_key(&base) {
            return base;
        }
        let stem = format!("{base}_{place}");
        if !self.properties.contains_key(&stem) {
            return stem;
        }
        let n = self.next.entry(stem.clone()).or_insert(2);
        while self.properties.contains_key(&format!("{stem}_{n}")) {
            *n += 1;
        }
        format!("{stem}_{n}")
    }

    fn add(&mut self, name: &str, schema: Value, required: bool) {
        self.properties.insert(name.to_owned(), schema);
        if required {
            self.required.push(name.to_owned());
        }
    }
}

impl<'a> Operation<'a> {
    /// The definition (without its final name) and the secrets it reads, or why there is none.
    pub(super) fn build(
        &self,
        cx: &Context<'a>,
        meter: &budget::Meter,
        warnings: &mut Vec<String>,
    ) -> Result<(ImportedTool, BTreeMap<String, String>), String> {
        let method = self.method.to_ascii_uppercase();
        if matches!(self.method, "options" | "trace") {
            return Err(format!("http tools send GET, HEAD, POST, PUT, PATCH or DELETE, not {method}"));
        }
        let mut converter = schema::Converter::new(cx.doc, meter);
        let mut args = Arguments::default();
        let mut query = BTreeMap::new();
        let mut headers: BTreeMap<String, Value> = BTreeMap::new();
        let mut comments = Vec::new();

        let (auth, secrets) = self.security(cx)?;
        for (place, name, spec, note) in auth {
            comments.push(note);
            match place {
                In::Query => query.insert(name, spec),
                _ => headers.insert(name, spec),
            };
        }

        let mut placed = Placed { path_args: BTreeMap::new(), query, headers };
        for param in self.parameters(cx.doc)? {
            self.parameter(param, &mut converter, &mut args, &mut placed, warnings)?;
        }
        let Placed { path_args, query, mut headers } = placed;
        let url = url_template(self.path, &path_args)?;
        let body = self.body(cx.doc, &mut converter, &mut args, &mut headers)?;

        let mut input_schema = json!({"type": "object", "properties": args.properties, "additionalProperties": false});
        if !args.required.is_empty() {
            input_schema["required"] = json!(args.required);
        }
        if let Some(defs) = converter.finish(true)? {
            input_schema["$defs"] = Value::Object(defs);
        }

        let base_url = match server_url(self.op.get("servers")).or_else(|| server_url(self.item.get("servers"))) {
            Some(own) if is_absolute(&own) && own != cx.root_server => Value::String(own),
            _ => json!({"env": cx.base_env, "default": cx.root_server}),
        };
        let mut labels = BTreeMap::new();
        let operation_id = self.op.get("operationId").and_then(Value::as_str);
        labels.insert("openapi_operation".to_owned(), operation_id.map_or_else(|| format!("{method} {}", self.path), str::to_owned));
        if !self.tags.is_empty() {
            labels.insert("openapi_tags".to_owned(), self.tags.join(","));
        }
        let (title, description) = self.describe(&method);
        let tool = ImportedTool {
            name: String::new(),
            title,
            description,
            annotations: annotations(self.method),
            labels,
            input_schema,
            http: ImportedHttp { method, base_url, url, query, headers, body },
            comments,
        };
        Ok((tool, secrets))
    }

    fn describe(&self, method: &str) -> (Option<String>, String) {
        let text = |key: &str| self.op.get(key).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty());
        let summary = text("summary").map(|s| s.lines().next().unwrap_or(s).chars().take(MAX_TITLE).collect::<String>());
        let mut description = match (summary.as_deref(), text("description")) {
            (Some(s), Some(d)) if d.starts_with(s) => d.to_owned(),
            (Some(s), Some(d)) => format!("{s}\n\n{d}"),
            (Some(s), None) => s.to_owned(),
            (None, Some(d)) => d.to_owned(),
            (None, None) => format!("{method} {}", self.path),
        };
        if self.op.get("deprecated") == Some(&Value::Bool(true)) {
            description = format!("Deprecated. {description}");
        }
        if description.chars().count() > MAX_DESCRIPTION {
            description = description.chars().take(MAX_DESCRIPTION - 1).collect::<String>() + "…";
        }
        (summary, description)
    }

    /// The path item's parameters, then the operation's (which replace same-named ones), as
    /// they are in the document: references to one parameter are not copied.
    fn parameters(&self, doc: &'a Value) -> Result<Vec<&'a Map<String, Value>>, String> {
        let mut out: Vec<Option<&Map<String, Value>>> = Vec::new();
        let mut at: BTreeMap<(Option<&str>, Option<&str>), usize> = BTreeMap::new();
        for list in [self.item.get("parameters"), self.op.get("parameters")] {
            for param in list.and_then(Value::as_array).into_iter().flatten() {
                let param = match param.get("$ref").and_then(Value::as_str) {
                    Some(r) => schema::resolve(doc, r)?,
                    None => param,
                };
                let Some(param) = param.as_object() else { continue };
                let key = (param.get("name").and_then(Value::as_str), param.get("in").and_then(Value::as_str));
                if let Some(replaced) = at.insert(key, out.len()) {
                    out[replaced] = None;
                }
                out.push(Some(param));
            }
        }
        Ok(out.into_iter().flatten().collect())
    }

    fn parameter(
        &self,
        param: &Map<String, Value>,
        converter: &mut schema::Converter<'_>,
        args: &mut Arguments,
        placed: &mut Placed,
        warnings: &mut Vec<String>,
    ) -> Result<(), String> {
        let name = param.get("name").and_then(Value::as_str).unwrap_or_default();
        let Some(place) = param.get("in").and_then(Value::as_str).and_then(In::parse) else {
            return Err(format!("parameter `{name}` has no valid `in`"));
        };
        let required = place == In::Path || param.get("required") == Some(&Value::Bool(true));
        // OpenAPI says these header parameters are ignored: the request's own headers say it.
        if place == In::Header && ["accept", "content-type", "authorization"].contains(&name.to_ascii_lowercase().as_str()) {
            return Ok(());
        }
        let mut unsupported = |why: String| {
            if required {
                Err(format!("required {} parameter `{name}`: {why}", place.as_str()))
            } else {
                warnings.push(format!("optional {} parameter `{name}` left out: {why}", place.as_str()));
                Ok(())
            }
        };
        if name.is_empty() {
            return unsupported("it has no name".into());
        }
        if place == In::Cookie {
            return unsupported("http tools send no cookies".into());
        }
        if let Some(content) = param.get("content").and_then(Value::as_object) {
            let types: Vec<&str> = content.keys().map(String::as_str).collect();
            return unsupported(format!("it is serialized as {} content, which the templates cannot write", types.join(", ")));
        }
        let mut schema = match param.get("schema") {
            Some(s) => converter.convert(s, true)?,
            None => json!({"type": "string"}),
        };
        let shape = shape(&schema);
        let style = param.get("style").and_then(Value::as_str);
        let explode = param.get("explode").and_then(Value::as_bool);
        let why_not = match place {
            In::Path if !matches!(style, None | Some("simple")) => Some(format!("the {} style", style.unwrap_or_default())),
            In::Path if explode == Some(true) && shape == Shape::Object => Some("an exploded object".into()),
            In::Query if shape == Shape::Object => Some(format!("an object in the query ({} style)", style.unwrap_or("form"))),
            In::Query if shape == Shape::Array && !matches!(style, None | Some("form")) => {
                Some(format!("an array in the {} style", style.unwrap_or_default()))
            }
            In::Query if shape == Shape::Array && explode == Some(false) => {
                Some("an array written comma-separated (explode: false); the tool repeats the parameter instead".into())
            }
            In::Header if shape != Shape::Scalar => Some("a header holds one value here, not an array or object".into()),
            In::Header if crate::tooldef::http::is_sensitive_name(name) => {
                Some("its name says it is a credential: http tools read those from secrets, so declare it as a security scheme".into())
            }
            In::Header if placed.headers.keys().any(|h| h.eq_ignore_ascii_case(name)) => {
                Some("the security scheme sets this header".into())
            }
            In::Query if placed.query.contains_key(name) => Some("the security scheme sets this parameter".into()),
            _ => None,
        };
        if let Some(why) = why_not {
            return unsupported(why);
        }
        let arg = args.name_for(name, place.as_str());
        if let Value::Object(s) = &mut schema {
            if !s.contains_key("description")
                && let Some(d) = param.get("description").and_then(Value::as_str).filter(|d| !d.trim().is_empty())
            {
                s.insert("description".into(), converter.text(d.trim())?);
            }
            if param.get("deprecated") == Some(&Value::Bool(true)) {
                s.insert("deprecated".into(), json!(true));
            }
            if let Some(example) = param.get("example")
                && !s.contains_key("examples")
            {
                s.insert("examples".into(), json!([converter.copy(example)?]));
            }
        }
        args.add(&arg, schema, required);
        let placeholder = format!("{{{arg}}}");
        match place {
            In::Path => {
                placed.path_args.insert(name.to_owned(), arg);
            }
            In::Query => {
                placed.query.insert(name.to_owned(), Value::String(placeholder));
            }
            In::Header => {
                placed.headers.insert(name.to_owned(), Value::String(placeholder));
            }
            In::Cookie => {}
        }
        Ok(())
    }

    /// The JSON body template; its properties (or the whole body) become arguments.
    fn body(
        &self,
        doc: &Value,
        converter: &mut schema::Converter<'_>,
        args: &mut Arguments,
        headers: &mut BTreeMap<String, Value>,
    ) -> Result<Option<Value>, String> {
        let Some(body) = self.op.get("requestBody") else { return Ok(None) };
        let body = match body.get("$ref").and_then(Value::as_str) {
            Some(r) => schema::resolve(doc, r)?,
            None => body,
        };
        let Some(content) = body.get("content").and_then(Value::as_object).filter(|c| !c.is_empty()) else { return Ok(None) };
        let Some((media_type, media)) = content.iter().find(|(t, _)| is_json(t)) else {
            let types: Vec<&str> = content.keys().map(String::as_str).collect();
            return Err(format!("the request body is {}: http tools send JSON bodies only", types.join(" or ")));
        };
        if matches!(self.method, "get" | "head") {
            return Err(format!(
                "a {} request with a body: http tools send bodies with POST, PUT, PATCH and DELETE only",
                self.method.to_ascii_uppercase()
            ));
        }
        let base_type = media_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
        if base_type != "application/json" && base_type != "*/*" {
            headers.insert("Content-Type".into(), Value::String(base_type));
        }
        let required = body.get("required") == Some(&Value::Bool(true));
        let schema = match media.get("schema") {
            Some(s) => converter.convert(s, true)?,
            None => json!({}),
        };
        if let Some((properties, own_required)) = object_parts(&schema).filter(|(p, _)| !p.is_empty()) {
            let mut template = Map::new();
            for (key, property) in properties {
                let arg = args.name_for(&key, "body");
                args.add(&arg, property, required && own_required.contains(&key));
                template.insert(key, Value::String(format!("{{{arg}}}")));
            }
            return Ok(Some(Value::Object(template)));
        }
        let arg = args.name_for("body", "request");
        let mut schema = schema;
        if let Value::Object(s) = &mut schema
            && !s.contains_key("description")
            && let Some(d) = body.get("description").and_then(Value::as_str)
        {
            s.insert("description".into(), converter.text(d.trim())?);
        }
        args.add(&arg, schema, required);
        Ok(Some(Value::String(format!("{{{arg}}}"))))
    }

    /// The headers (and query parameters) the operation's security needs: the first
    /// alternative toolgate can send (or none when an alternative needs nothing), each read
    /// from an environment variable.
    fn security(&self, cx: &Context<'_>) -> Result<(Vec<Credential>, BTreeMap<String, String>), String> {
        let requirements = self.op.get("security").or_else(|| cx.doc.get("security"));
        let Some(alternatives) = requirements.and_then(Value::as_array).filter(|a| !a.is_empty()) else {
            return Ok((Vec::new(), BTreeMap::new()));
        };
        let schemes = cx.doc.pointer("/components/securitySchemes").and_then(Value::as_object);
        let mut refusals = Vec::new();
        'alternatives: for alternative in alternatives {
            let Some(alternative) = alternative.as_object() else { continue };
            if alternative.is_empty() {
                return Ok((Vec::new(), BTreeMap::new()));
            }
            let mut headers: Vec<Credential> = Vec::new();
            let mut secrets = BTreeMap::new();
            for name in alternative.keys() {
                let scheme = schemes.and_then(|s| s.get(name)).map(|s| match s.get("$ref").and_then(Value::as_str) {
                    Some(r) => schema::resolve(cx.doc, r).unwrap_or(&Value::Null),
                    None => s,
                });
                let Some(scheme) = scheme.and_then(Value::as_object) else {
                    refusals.push(format!("security scheme `{name}` is not declared in components.securitySchemes"));
                    continue 'alternatives;
                };
                match secret_header(cx, name, scheme) {
                    Ok((place, header, spec, holds)) => {
                        if headers.iter().any(|(p, h, _, _)| *p == place && h.eq_ignore_ascii_case(&header)) {
                            refusals.push(format!(
                                "security schemes {} both need the {header} {}",
                                alternative.keys().cloned().collect::<Vec<_>>().join(" and "),
                                if place == In::Query { "query parameter" } else { "header" }
                            ));
                            continue 'alternatives;
                        }
                        let var = spec["env"].as_str().unwrap_or_default().to_owned();
                        // The scheme's name is the document's text: quoted, so a comment holding it
                        // stays one line.
                        let scheme = text::quote(name);
                        let note =
                            format!("secret: set {var} to {holds} (security scheme {scheme}), and allow it with tools.http.secret_env");
                        secrets.insert(var, format!("{holds} (security scheme {scheme})"));
                        headers.push((place, header, spec, note));
                    }
                    Err(why) => {
                        refusals.push(format!("security scheme `{name}`: {why}"));
                        continue 'alternatives;
                    }
                }
            }
            return Ok((headers, secrets));
        }
        Err(refusals.join("; "))
    }
}

/// Where a credential goes (a header, or a query parameter), its name there, its secret
/// reference, and a note saying which secret to set.
type Credential = (In, String, Value, String);

/// Where a security scheme's credential is sent, its secret reference, and what it holds.
fn secret_header(cx: &Context<'_>, name: &str, scheme: &Map<String, Value>) -> Result<(In, String, Value, String), String> {
    let var = names::env_var(&[&cx.env_prefix, name]);
    let kind = scheme.get("type").and_then(Value::as_str).unwrap_or_default();
    let bearer = |holds: &str| Ok((In::Header, "Authorization".to_owned(), json!({"env": var, "prefix": "Bearer "}), holds.to_owned()));
    match kind {
        "apiKey" => {
            let header = scheme.get("name").and_then(Value::as_str).unwrap_or_default();
            match scheme.get("in").and_then(Value::as_str) {
                Some("header") if !header.is_empty() => Ok((
                    In::Header,
                    header.to_owned(),
                    json!({"env": var}),
                    format!("the API key sent in the {} header", text::quote(header)),
                )),
                Some("query") if !header.is_empty() => Ok((
                    In::Query,
                    header.to_owned(),
                    json!({"env": var}),
                    format!("the API key sent as the {} query parameter", text::quote(header)),
                )),
                Some("cookie") => Err("an API key in a cookie: http tools send no cookies".into()),
                _ => Err("an apiKey scheme without `in` and `name`".into()),
            }
        }
        "http" => match scheme.get("scheme").and_then(Value::as_str).map(str::to_ascii_lowercase).as_deref() {
            Some("bearer") => bearer("a bearer token"),
            Some("basic") => Ok((
                In::Header,
                "Authorization".to_owned(),
                json!({"env": var, "prefix": "Basic "}),
                "base64 of user:password (HTTP Basic)".to_owned(),
            )),
            other => Err(format!("the HTTP {} scheme: http tools send Bearer or Basic credentials", other.unwrap_or("(unnamed)"))),
        },
        "oauth2" | "openIdConnect" => bearer("an access token obtained for this API (toolgate does not run the OAuth flow for http tools)"),
        "mutualTLS" => Err("mutual TLS: http tools present no client certificate".into()),
        other => Err(format!("the unknown scheme type `{other}`")),
    }
}

/// GET and HEAD read; PUT and DELETE may be repeated; DELETE destroys. Every tool calls an
/// API outside toolgate (open world).
fn annotations(method: &str) -> ImportedAnnotations {
    let mut a = ImportedAnnotations { open_world_hint: true, ..Default::default() };
    match method {
        "get" | "head" => a.read_only_hint = Some(true),
        "put" => a.idempotent_hint = Some(true),
        "delete" => {
            a.idempotent_hint = Some(true);
            a.destructive_hint = Some(true);
        }
        _ => {}
    }
    a
}

fn is_json(media_type: &str) -> bool {
    let base = media_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    base == "application/json" || base == "text/json" || base.ends_with("+json") || base == "*/*"
}

/// An object schema's properties and required names, through `allOf`; `None` for anything a
/// flat list of arguments cannot express (`oneOf`, `anyOf`, a non-object, a free-form map).
fn object_parts(schema: &Value) -> Option<(Map<String, Value>, Vec<String>)> {
    let object = schema.as_object()?;
    if ["oneOf", "anyOf", "not", "$ref", "if"].iter().any(|k| object.contains_key(*k)) {
        return None;
    }
    if let Some(t) = object.get("type")
        && t != "object"
    {
        return None;
    }
    let mut properties = object.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
    let mut required: Vec<String> =
        object.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(str::to_owned).collect();
    for member in object.get("allOf").and_then(Value::as_array).into_iter().flatten() {
        let (p, r) = object_parts(member)?;
        properties.extend(p);
        required.extend(r);
    }
    Some((properties, required))
}

/// The OpenAPI path as a URL template path: `{param}` becomes `{argument}`, and characters a
/// URI template may not hold literally are percent-encoded.
fn url_template(path: &str, path_args: &BTreeMap<String, String>) -> Result<String, String> {
    let mut out = String::with_capacity(path.len());
    let mut rest = path;
    while let Some(start) = rest.find('{') {
        push_literal(&mut out, &rest[..start]);
        let Some(len) = rest[start + 1..].find('}') else {
            return Err(format!("the path `{path}` has an unclosed `{{`"));
        };
        let name = &rest[start + 1..start + 1 + len];
        let Some(arg) = path_args.get(name) else {
            return Err(format!("the path names `{{{name}}}`, which no path parameter declares"));
        };
        out.push_str(&format!("{{{arg}}}"));
        rest = &rest[start + len + 2..];
    }
    push_literal(&mut out, rest);
    if !out.starts_with('/') {
        out.insert(0, '/');
    }
    Ok(out)
}

fn push_literal(out: &mut String, text: &str) {
    for (i, c) in text.char_indices() {
        let escaped_percent = c == '%' && text.get(i + 1..i + 3).is_some_and(|h| h.chars().all(|c| c.is_ascii_hexdigit()));
        let plain = c.is_ascii_alphanumeric() || "-._~!$&()*+,;=:@/?#[]".contains(c) || escaped_percent;
        if plain {
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_parameters_become_template_variables_and_odd_characters_are_encoded() {
        let args = BTreeMap::from([("pet-id".to_owned(), "pet_id".to_owned())]);
        assert_eq!(url_template("/pets/{pet-id}/a b|c", &args).expect("ok"), "/pets/{pet_id}/a%20b%7Cc");
        assert!(url_template("/pets/{other}", &args).expect_err("undeclared").contains("{other}"));
    }

    #[test]
    fn arguments_cleaned_to_one_name_are_numbered_after_their_place() {
        let mut args = Arguments::default();
        let mut given = Vec::new();
        for wanted in ["a", "a!", "a?", "a#", "a_body_3"] {
            let name = args.name_for(wanted, "body");
            args.add(&name, json!({}), false);
            given.push(name);
        }
        assert_eq!(given, ["a", "a_body", "a_body_2", "a_body_3", "a_body_3_body"]);
        assert_eq!(args.name_for("a", "body"), "a_body_4", "a number taken is skipped");
    }

    #[test]
    fn all_of_objects_flatten_but_one_of_does_not() {
        let s = json!({"allOf": [{"type": "object", "properties": {"a": {}}, "required": ["a"]}, {"properties": {"b": {}}}]});
        let (props, required) = object_parts(&s).expect("flat");
        assert_eq!(props.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(required, ["a"]);
        assert!(object_parts(&json!({"oneOf": [{"type": "object"}]})).is_none());
        assert!(object_parts(&json!({"type": "array"})).is_none());
    }
}
