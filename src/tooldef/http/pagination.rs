//! Pagination pass-through: the `limit`/`offset`/`cursor` arguments become upstream query
//! parameters, and the result says whether there is more and where it starts.

use http::HeaderMap;
use serde_json::{Map, Value, json};

use super::spec::PaginationSpec;
use crate::tooldef::{BuildCtx, FieldError};

/// A validated [`PaginationSpec`].
#[derive(Clone, Debug)]
pub(crate) struct Pagination {
    spec: PaginationSpec,
}

impl Pagination {
    pub fn build(spec: &PaginationSpec, cx: &BuildCtx<'_>) -> Result<Self, Vec<FieldError>> {
        let mut errors = Vec::new();
        let field = |name: &str| format!("http.pagination.{name}");
        let params = [
            ("limit", &spec.limit, "limit"),
            ("offset", &spec.offset, "offset"),
            ("page", &spec.page, "offset"),
            ("cursor", &spec.cursor, "cursor"),
        ];
        for (key, param, argument) in params {
            match param {
                Some(p) if p.trim().is_empty() => errors.push(FieldError::new(field(key), "name the upstream query parameter")),
                Some(_) if !cx.has_property(argument) => errors.push(FieldError::new(
                    field(key),
                    format!("the input schema must declare the `{argument}` property that this passes through"),
                )),
                _ => {}
            }
        }
        if spec.offset.is_some() && spec.page.is_some() {
            errors.push(FieldError::new(field("page"), "give `offset` or `page`, not both"));
        }
        if spec.page.is_some() && spec.limit.is_none() && spec.default_limit.is_none() {
            errors.push(FieldError::new(field("page"), "page numbers are computed from the limit: set `limit` or `default_limit`"));
        }
        if spec.default_limit == Some(0) {
            errors.push(FieldError::new(field("default_limit"), "must be at least 1"));
        }
        let pointers = [
            ("has_more", &spec.has_more),
            ("next_offset", &spec.next_offset),
            ("next_cursor", &spec.next_cursor),
            ("total_count", &spec.total_count),
        ];
        for (key, pointer) in pointers {
            if let Some(p) = pointer
                && !is_pointer(p)
            {
                errors.push(FieldError::new(field(key), "a JSON pointer starts with `/` (e.g. \"/meta/total\")"));
            }
        }
        if errors.is_empty() { Ok(Self { spec: spec.clone() }) } else { Err(errors) }
    }

    fn limit(&self, args: &Map<String, Value>) -> Option<u64> {
        args.get("limit").and_then(Value::as_u64).or(self.spec.default_limit)
    }

    fn offset(args: &Map<String, Value>) -> u64 {
        args.get("offset").and_then(Value::as_u64).unwrap_or(0)
    }

    /// The upstream query parameters for these arguments. `Err` is a message for the model.
    pub fn query(&self, args: &Map<String, Value>) -> Result<Vec<(String, String)>, String> {
        let mut out = Vec::new();
        let limit = self.limit(args);
        if let (Some(param), Some(limit)) = (&self.spec.limit, limit) {
            out.push((param.clone(), limit.to_string()));
        }
        if let (Some(param), Some(offset)) = (&self.spec.offset, args.get("offset").and_then(Value::as_u64)) {
            out.push((param.clone(), offset.to_string()));
        }
        if let Some(param) = &self.spec.page {
            let offset = Self::offset(args);
            match limit {
                Some(0) => return Err("`limit` must be at least 1".into()),
                Some(limit) if !offset.is_multiple_of(limit) => {
                    return Err(format!("`offset` must be a multiple of `limit` ({limit}) for this tool: it pages by page number"));
                }
                Some(limit) => out.push((param.clone(), (offset / limit + 1).to_string())),
                None if offset == 0 => {}
                None => return Err("`offset` needs `limit` for this tool".into()),
            }
        }
        if let (Some(param), Some(cursor)) = (&self.spec.cursor, args.get("cursor").and_then(Value::as_str)) {
            out.push((param.clone(), cursor.to_owned()));
        }
        Ok(out)
    }

    /// The result envelope: the items plus `count`, `has_more`, `next_offset`, `next_cursor`
    /// and `total_count` (those known).
    pub fn envelope(&self, items: Value, body: &Value, headers: &HeaderMap, args: &Map<String, Value>) -> Value {
        let count = items.as_array().map(|a| a.len() as u64);
        let at = |p: &Option<String>| p.as_deref().and_then(|p| body.pointer(p)).filter(|v| !v.is_null());
        let total = at(&self.spec.total_count).and_then(Value::as_u64);
        let next_cursor = at(&self.spec.next_cursor).map(super::template::scalar_text).filter(|c| !c.is_empty());
        let offset = Self::offset(args);
        let has_more = if let Some(flag) = at(&self.spec.has_more).and_then(Value::as_bool) {
            flag
        } else if self.spec.next_cursor.is_some() {
            next_cursor.is_some()
        } else if let Some(next) = link_has_next(headers) {
            next
        } else if let (Some(total), Some(count)) = (total, count) {
            offset + count < total
        } else {
            matches!((self.limit(args), count), (Some(limit), Some(count)) if count >= limit && count > 0)
        };
        let next_offset = at(&self.spec.next_offset)
            .and_then(Value::as_u64)
            .or_else(|| (has_more && (self.spec.offset.is_some() || self.spec.page.is_some())).then(|| offset + count.unwrap_or(0)));
        let mut out = Map::new();
        out.insert("items".into(), items);
        if let Some(count) = count {
            out.insert("count".into(), json!(count));
        }
        out.insert("has_more".into(), json!(has_more));
        if let Some(next) = next_offset.filter(|_| has_more) {
            out.insert("next_offset".into(), json!(next));
        }
        if let Some(cursor) = next_cursor.filter(|_| has_more) {
            out.insert("next_cursor".into(), json!(cursor));
        }
        if let Some(total) = total {
            out.insert("total_count".into(), json!(total));
        }
        Value::Object(out)
    }
}

/// One Markdown line saying where the next page starts, for an envelope.
pub(crate) fn footer(envelope: &Value) -> String {
    let count = envelope.get("count").and_then(Value::as_u64);
    let total = envelope.get("total_count").and_then(Value::as_u64);
    let mut line = match (count, total) {
        (Some(c), Some(t)) => format!("Showing {c} of {t}."),
        (Some(c), None) => format!("Showing {c}."),
        _ => String::new(),
    };
    if envelope.get("has_more").and_then(Value::as_bool) == Some(true) {
        let how = if let Some(next) = envelope.get("next_cursor").and_then(Value::as_str) {
            format!(" More results: call again with cursor = \"{next}\".")
        } else if let Some(next) = envelope.get("next_offset").and_then(Value::as_u64) {
            format!(" More results: call again with offset = {next}.")
        } else {
            " More results are available.".to_owned()
        };
        line.push_str(&how);
    } else {
        line.push_str(" No more results.");
    }
    line.trim().to_owned()
}

/// `Some(true)` when a `Link` header has `rel="next"`, `Some(false)` when it has links but no
/// next, `None` without one.
fn link_has_next(headers: &HeaderMap) -> Option<bool> {
    let mut seen = false;
    for value in headers.get_all(http::header::LINK) {
        let Ok(value) = value.to_str() else { continue };
        seen = true;
        for link in value.split(',') {
            let has_next = link.split(';').skip(1).any(|param| {
                let Some((name, rel)) = param.split_once('=') else { return false };
                name.trim().eq_ignore_ascii_case("rel")
                    && rel.trim().trim_matches('"').split_whitespace().any(|r| r.eq_ignore_ascii_case("next"))
            });
            if has_next {
                return Some(true);
            }
        }
    }
    seen.then_some(false)
}

/// Whether `p` is a JSON pointer (RFC 6901): empty or starting with `/`.
pub(crate) fn is_pointer(p: &str) -> bool {
    p.is_empty() || p.starts_with('/')
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::ToolSettings;

    fn build(spec: PaginationSpec) -> Result<Pagination, Vec<FieldError>> {
        let schema = json!({"type": "object", "properties": {"limit": {"type": "integer"}, "offset": {"type": "integer"}}});
        let settings = ToolSettings::default();
        let cx = BuildCtx { tool: "t", input_schema: &schema, idempotent: false, base_dir: Path::new("."), settings: &settings };
        Pagination::build(&spec, &cx)
    }

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn page_style_computes_page_numbers_and_refuses_misaligned_offsets() {
        let p = build(PaginationSpec { limit: Some("per_page".into()), page: Some("page".into()), ..Default::default() }).expect("valid");
        assert_eq!(
            p.query(&args(json!({"limit": 10, "offset": 20}))),
            Ok(vec![("per_page".into(), "10".into()), ("page".into(), "3".into())])
        );
        assert!(p.query(&args(json!({"limit": 10, "offset": 5}))).is_err());
    }

    #[test]
    fn undeclared_arguments_and_bad_pointers_are_refused() {
        let errors = build(PaginationSpec { cursor: Some("c".into()), total_count: Some("total".into()), ..Default::default() })
            .expect_err("invalid");
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["http.pagination.cursor", "http.pagination.total_count"]);
    }

    #[test]
    fn has_more_comes_from_total_link_or_a_full_page() {
        let p = build(PaginationSpec {
            limit: Some("n".into()),
            offset: Some("o".into()),
            total_count: Some("/total".into()),
            ..Default::default()
        })
        .expect("valid");
        let e = p.envelope(json!([1, 2]), &json!({"total": 5}), &HeaderMap::new(), &args(json!({"limit": 2, "offset": 2})));
        assert_eq!(e, json!({"items": [1, 2], "count": 2, "has_more": true, "next_offset": 4, "total_count": 5}));
        let e = p.envelope(json!([1]), &json!({"total": 5}), &HeaderMap::new(), &args(json!({"limit": 2, "offset": 4})));
        assert_eq!(e["has_more"], false);
        assert!(e.get("next_offset").is_none());

        let p = build(PaginationSpec { limit: Some("n".into()), offset: Some("o".into()), ..Default::default() }).expect("valid");
        let mut h = HeaderMap::new();
        h.insert(http::header::LINK, r#"<https://x/?page=3>; rel="next", <https://x/?page=9>; rel="last""#.parse().expect("value"));
        assert_eq!(p.envelope(json!([1]), &Value::Null, &h, &args(json!({"limit": 5})))["has_more"], true);
        assert_eq!(p.envelope(json!([1, 2]), &Value::Null, &HeaderMap::new(), &args(json!({"limit": 2})))["has_more"], true);
        assert_eq!(p.envelope(json!([1]), &Value::Null, &HeaderMap::new(), &args(json!({"limit": 2})))["has_more"], false);
    }

    #[test]
    fn footers_say_how_to_get_the_next_page() {
        assert_eq!(
            footer(&json!({"count": 2, "total_count": 5, "has_more": true, "next_offset": 4})),
            "Showing 2 of 5. More results: call again with offset = 4."
        );
        assert_eq!(footer(&json!({"count": 1, "has_more": false})), "Showing 1. No more results.");
    }
}
