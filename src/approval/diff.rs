//! What changed between an approved entry and the one waiting, for the operator who decides:
//! one item per top-level field that differs (`{field, before, after}`, a field absent on one
//! side is `null` there), and for schemas the JSON-pointer paths (RFC 6901) added, removed and
//! changed, so a new required property or a loosened pattern is seen without reading two
//! whole schemas. Written here rather than taken from a crate: ~80 lines, and the crates that
//! exist produce RFC 6902 patches (operations to apply), not what a reviewer reads.

use serde::Serialize;
use serde_json::Value;

use super::Kind;
use super::fingerprint::fields;

/// Paths listed per schema field at most (a rewritten schema needs no thousand-line list).
const MAX_PATHS: usize = 200;
/// Fields whose changes are also listed by path.
const STRUCTURED: &[&str] = &["inputSchema", "outputSchema", "arguments", "annotations"];

/// One top-level field that differs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldDiff {
    pub field: &'static str,
    pub before: Value,
    pub after: Value,
    /// For schemas: the paths added, removed and changed (leaves), each at most 200.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paths: Option<Paths>,
}

/// The JSON-pointer paths where two values differ.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Paths {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<String>,
}

/// The fields of `kind` that differ from `before` to `after`, in the fingerprint's order.
pub fn diff(kind: Kind, before: &Value, after: &Value) -> Vec<FieldDiff> {
    fields(kind)
        .iter()
        .filter_map(|&field| {
            let (b, a) = (before.get(field), after.get(field));
            if b == a {
                return None;
            }
            let paths = STRUCTURED.contains(&field).then(|| {
                let mut paths = Paths::default();
                walk(b, a, &mut String::new(), &mut paths);
                paths
            });
            Some(FieldDiff { field, before: b.cloned().unwrap_or(Value::Null), after: a.cloned().unwrap_or(Value::Null), paths })
        })
        .collect()
}

fn walk(before: Option<&Value>, after: Option<&Value>, path: &mut String, out: &mut Paths) {
    match (before, after) {
        (None, None) => {}
        (None, Some(_)) => push(&mut out.added, path),
        (Some(_), None) => push(&mut out.removed, path),
        (Some(Value::Object(b)), Some(Value::Object(a))) => {
            let mut keys: Vec<&String> = b.keys().chain(a.keys().filter(|k| !b.contains_key(*k))).collect();
            keys.sort_unstable();
            for key in keys {
                let len = path.len();
                path.push('/');
                // RFC 6901: `~` is `~0`, `/` is `~1`.
                path.push_str(&key.replace('~', "~0").replace('/', "~1"));
                walk(b.get(key), a.get(key), path, out);
                path.truncate(len);
            }
        }
        (Some(Value::Array(b)), Some(Value::Array(a))) => {
            for i in 0..b.len().max(a.len()) {
                let len = path.len();
                path.push('/');
                path.push_str(&i.to_string());
                walk(b.get(i), a.get(i), path, out);
                path.truncate(len);
            }
        }
        (Some(b), Some(a)) if b != a => push(&mut out.changed, path),
        _ => {}
    }
}

fn push(list: &mut Vec<String>, path: &str) {
    if list.len() < MAX_PATHS {
        list.push(if path.is_empty() { "/".to_owned() } else { path.to_owned() });
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_changed_description_is_one_field_with_both_texts() {
        let d = diff(Kind::Tool, &json!({"name": "t", "description": "old"}), &json!({"name": "t", "description": "new"}));
        assert_eq!(d, vec![FieldDiff { field: "description", before: json!("old"), after: json!("new"), paths: None }]);
    }

    #[test]
    fn a_schema_change_lists_the_paths_added_removed_and_changed() {
        let before = json!({"inputSchema": {"type": "object", "properties": {"a": {"type": "string"}, "b/c": {}}, "required": ["a"]}});
        let after = json!({"inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}, "x": {}}, "required": ["a", "x"]}});
        let d = diff(Kind::Tool, &before, &after);
        let paths = d[0].paths.clone().expect("paths");
        assert_eq!(paths.added, ["/properties/x", "/required/1"]);
        assert_eq!(paths.removed, ["/properties/b~1c"]);
        assert_eq!(paths.changed, ["/properties/a/type"]);
    }

    #[test]
    fn a_field_present_on_one_side_only_is_null_on_the_other() {
        let d = diff(Kind::Prompt, &json!({"name": "p"}), &json!({"name": "p", "title": "T"}));
        assert_eq!((d[0].field, &d[0].before, &d[0].after), ("title", &Value::Null, &json!("T")));
        assert!(diff(Kind::Prompt, &json!({"name": "p"}), &json!({"name": "p", "_meta": {}})).is_empty(), "not a field that counts");
    }
}
