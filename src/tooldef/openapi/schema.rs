//! OpenAPI schemas as JSON Schema 2020-12, the dialect input schemas are checked in.
//!
//! `$ref`s within the document are inlined, so each argument is described where it is used
//! (what a model reads); a reference to a schema that is still being expanded (a recursive
//! type) becomes `{"$ref": "#/$defs/Name"}` instead, and the definition is added once under
//! `$defs`. A reference to another document is refused: the importer reads one file.
//!
//! OpenAPI 3.0's own keywords are rewritten: `nullable: true` adds `"null"` to `type`, the
//! boolean `exclusiveMinimum`/`exclusiveMaximum` become the numbers 2020-12 expects, `example`
//! becomes `examples`. Extensions (`x-*`), `xml`, `externalDocs` and `discriminator` say
//! nothing to a validator and are left out. Properties marked `readOnly` are left out of what
//! a request sends.
//!
//! Inlining is where a document can make the importer do more than its size suggests, so the
//! converter spends from the operation's [`Spend`] as it goes (each schema node, and each value
//! it copies, measured before it is copied) and refuses to nest deeper than
//! [`Budgets::max_depth`](super::budget::Budgets) levels (each `$ref` followed is one): a
//! chain of references fails with the budget's name instead of overflowing the stack.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::budget::{Meter, Spend};

/// Keywords whose value is one schema.
const ONE_SCHEMA: &[&str] = &[
    "additionalProperties",
    "items",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contentSchema",
    "additionalItems",
];
/// Keywords whose value is a list of schemas.
const SCHEMA_LISTS: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems"];
/// Keywords whose value maps names to schemas.
const SCHEMA_MAPS: &[&str] = &["properties", "patternProperties", "dependentSchemas", "$defs", "definitions"];
/// Keywords dropped from every schema.
const DROPPED: &[&str] = &["xml", "externalDocs", "discriminator", "$schema", "$id", "$anchor", "$dynamicAnchor", "$comment"];

/// Converts the schemas of one operation, sharing the `$defs` that recursive types need.
pub(super) struct Converter<'a> {
    doc: &'a Value,
    meter: &'a Meter,
    /// What this operation's schemas have cost so far.
    spend: Spend,
    /// Schemas being converted, counting each reference followed.
    depth: usize,
    /// References being expanded, innermost last.
    stack: Vec<String>,
    /// Recursive references: reference → name under `$defs`.
    def_names: BTreeMap<String, String>,
    /// Definitions already converted, by name.
    defs: Map<String, Value>,
}

impl<'a> Converter<'a> {
    pub fn new(doc: &'a Value, meter: &'a Meter) -> Self {
        Self { doc, meter, spend: Spend::new(), depth: 0, stack: Vec::new(), def_names: BTreeMap::new(), defs: Map::new() }
    }

    /// `schema` as JSON Schema 2020-12, references inlined. `request` leaves out `readOnly`
    /// properties (a request body's or parameter's schema).
    pub fn convert(&mut self, schema: &Value, request: bool) -> Result<Value, String> {
        if self.depth >= self.meter.budgets.max_depth {
            return Err(self.meter.budgets.too_deep());
        }
        self.depth += 1;
        let converted = self.convert_here(schema, request);
        self.depth -= 1;
        converted
    }

    /// A copy of a value from the document, paid for before it is made.
    pub fn copy(&mut self, value: &Value) -> Result<Value, String> {
        self.spend.spend_copy(self.meter, value)?;
        Ok(value.clone())
    }

    /// A string from the document, paid for before it is copied.
    pub fn text(&mut self, text: &str) -> Result<Value, String> {
        self.spend.spend(self.meter, 1, text.len())?;
        Ok(Value::String(text.to_owned()))
    }

    fn convert_here(&mut self, schema: &Value, request: bool) -> Result<Value, String> {
        let Value::Object(object) = schema else { return self.copy(schema) };
        self.spend.spend(self.meter, 1, 0)?;
        if let Some(reference) = object.get("$ref").and_then(Value::as_str) {
            return self.reference(reference, object, request);
        }
        let mut out = Map::new();
        for (key, value) in object {
            if key.starts_with("x-") || DROPPED.contains(&key.as_str()) {
                continue;
            }
            self.spend.spend(self.meter, 0, key.len())?;
            let converted = if ONE_SCHEMA.contains(&key.as_str()) {
                self.convert(value, request)?
            } else if SCHEMA_LISTS.contains(&key.as_str()) {
                match value {
                    Value::Array(items) => Value::Array(items.iter().map(|s| self.convert(s, request)).collect::<Result<_, _>>()?),
                    other => self.copy(other)?,
                }
            } else if SCHEMA_MAPS.contains(&key.as_str()) {
                match value {
                    Value::Object(map) => {
                        let mut converted = Map::new();
                        for (name, s) in map {
                            if key == "properties" && request && is_read_only(self.doc, s) {
                                continue;
                            }
                            self.spend.spend(self.meter, 0, name.len())?;
                            converted.insert(name.clone(), self.convert(s, request)?);
                        }
                        Value::Object(converted)
                    }
                    other => self.copy(other)?,
                }
            } else {
                self.copy(value)?
            };
            out.insert(key.clone(), converted);
        }
        rewrite_openapi_30(&mut out);
        if request && let (Some(Value::Object(props)), Some(Value::Array(required))) = (out.get("properties"), out.get("required")) {
            // A read-only property left out above is no longer required of the caller.
            let kept: Vec<Value> = required.iter().filter(|r| r.as_str().is_some_and(|n| props.contains_key(n))).cloned().collect();
            out.insert("required".into(), Value::Array(kept));
        }
        Ok(Value::Object(out))
    }

    /// The definitions recursive references need (converted now), for the root's `$defs`.
    pub fn finish(mut self, request: bool) -> Result<Option<Map<String, Value>>, String> {
        loop {
            let pending: Vec<(String, String)> =
                self.def_names.iter().filter(|(_, name)| !self.defs.contains_key(*name)).map(|(r, n)| (r.clone(), n.clone())).collect();
            if pending.is_empty() {
                break;
            }
            for (reference, name) in pending {
                let doc = self.doc;
                let target = resolve(doc, &reference)?;
                // Expanding the definition itself: its own references to itself stay references.
                self.stack.push(reference.clone());
                let converted = self.convert(target, request);
                self.stack.pop();
                self.defs.insert(name, converted?);
            }
        }
        Ok((!self.defs.is_empty()).then_some(self.defs))
    }

    fn reference(&mut self, reference: &str, object: &Map<String, Value>, request: bool) -> Result<Value, String> {
        if self.stack.iter().any(|r| r == reference) {
            let taken: Vec<&String> = self.def_names.values().collect();
            let name = match self.def_names.get(reference) {
                Some(name) => name.clone(),
                None => {
                    let base = def_name(reference);
                    let mut name = base.clone();
                    let mut n = 2;
                    while taken.contains(&&name) {
                        name = format!("{base}_{n}");
                        n += 1;
                    }
                    self.def_names.insert(reference.to_owned(), name.clone());
                    name
                }
            };
            return Ok(json!({ "$ref": format!("#/$defs/{name}") }));
        }
        let target = resolve(self.doc, reference)?;
        self.stack.push(reference.to_owned());
        let converted = self.convert(target, request);
        self.stack.pop();
        let mut converted = converted?;
        // Beside `$ref`, a schema's own keywords (a description, a default) refine the target.
        let siblings: Vec<(&String, &Value)> = object.iter().filter(|(k, _)| *k != "$ref" && !k.starts_with("x-")).collect();
        if !siblings.is_empty() {
            let mut own = Map::new();
            for (k, v) in siblings {
                own.insert(k.clone(), self.copy(v)?);
            }
            let own = self.convert(&Value::Object(own), request)?;
            match (&mut converted, own) {
                (Value::Object(target), Value::Object(own)) => target.extend(own),
                (_, own) => converted = json!({ "allOf": [converted, own] }),
            }
        }
        Ok(converted)
    }
}

/// Whether a property's schema (or the schema it refers to) is `readOnly`.
fn is_read_only(doc: &Value, schema: &Value) -> bool {
    if schema.get("readOnly") == Some(&Value::Bool(true)) {
        return true;
    }
    schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| resolve(doc, r).ok())
        .is_some_and(|t| t.get("readOnly") == Some(&Value::Bool(true)))
}

/// OpenAPI 3.0's schema keywords as 2020-12 has them.
fn rewrite_openapi_30(schema: &mut Map<String, Value>) {
    if let Some(nullable) = schema.remove("nullable")
        && nullable == Value::Bool(true)
    {
        match schema.get_mut("type") {
            Some(Value::String(t)) => {
                let t = std::mem::take(t);
                schema.insert("type".into(), json!([t, "null"]));
            }
            Some(Value::Array(types)) if !types.contains(&json!("null")) => types.push(json!("null")),
            _ => {}
        }
        if let Some(Value::Array(values)) = schema.get_mut("enum")
            && !values.contains(&Value::Null)
        {
            values.push(Value::Null);
        }
    }
    for (exclusive, inclusive) in [("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")] {
        match schema.get(exclusive) {
            Some(Value::Bool(true)) => {
                schema.remove(exclusive);
                if let Some(limit) = schema.remove(inclusive) {
                    schema.insert(exclusive.into(), limit);
                }
            }
            Some(Value::Bool(false)) => {
                schema.remove(exclusive);
            }
            _ => {}
        }
    }
    if let Some(example) = schema.remove("example")
        && !schema.contains_key("examples")
    {
        schema.insert("examples".into(), json!([example]));
    }
}

/// The value a local reference (`#/components/schemas/Pet`) points at.
pub(super) fn resolve<'d>(doc: &'d Value, reference: &str) -> Result<&'d Value, String> {
    let Some(fragment) = reference.strip_prefix('#') else {
        return Err(format!(
            "`$ref: {reference}` refers to another document; the importer reads one file: bundle the document first (for example with `redocly bundle`)"
        ));
    };
    let pointer = percent_decode(fragment);
    doc.pointer(&pointer).ok_or_else(|| format!("`$ref: {reference}` points at nothing in the document"))
}

/// `%7B` → `{` (references are URI fragments); invalid escapes are kept as they are.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = text.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A `$defs` name for a reference: its last segment, letters, digits, `_`, `-` and `.` only.
fn def_name(reference: &str) -> String {
    let last = reference.rsplit('/').next().unwrap_or(reference);
    let name: String =
        percent_decode(last).chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') { c } else { '_' }).collect();
    if name.is_empty() { "schema".into() } else { name }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::tooldef::openapi::budget::Budgets;

    fn meter() -> Meter {
        Meter::new(Budgets::default())
    }

    #[test]
    fn nullable_and_boolean_exclusive_limits_become_2020_12() {
        let doc = json!({});
        let meter = meter();
        let mut c = Converter::new(&doc, &meter);
        let out = c
            .convert(&json!({"type": "integer", "nullable": true, "minimum": 1, "exclusiveMinimum": true, "example": 3, "x-go": 1}), true)
            .expect("converts");
        assert_eq!(out, json!({"type": ["integer", "null"], "exclusiveMinimum": 1, "examples": [3]}));
    }

    #[test]
    fn a_recursive_reference_goes_to_defs_once() {
        let doc = json!({"components": {"schemas": {"Node": {"type": "object", "properties": {"child": {"$ref": "#/components/schemas/Node"}}}}}});
        let meter = meter();
        let mut c = Converter::new(&doc, &meter);
        let out = c.convert(&json!({"$ref": "#/components/schemas/Node"}), true).expect("converts");
        assert_eq!(out["properties"]["child"], json!({"$ref": "#/$defs/Node"}));
        let defs = c.finish(true).expect("defs").expect("some");
        assert_eq!(defs["Node"]["properties"]["child"], json!({"$ref": "#/$defs/Node"}));
    }

    #[test]
    fn references_are_percent_decoded_json_pointers() {
        let doc = json!({"paths": {"/a/{b}": {"x": 1}}});
        assert_eq!(resolve(&doc, "#/paths/~1a~1%7Bb%7D/x").expect("found"), &json!(1));
        assert!(resolve(&doc, "other.yaml#/x").expect_err("external").contains("another document"));
    }

    #[test]
    fn a_reference_chain_deeper_than_the_budget_is_refused_naming_it() {
        let schemas: Map<String, Value> =
            (0..100).map(|i| (format!("s{i}"), json!({"$ref": format!("#/components/schemas/s{}", i + 1)}))).collect();
        let doc = json!({"components": {"schemas": schemas}});
        let meter = Meter::new(Budgets { max_depth: 10, ..Budgets::default() });
        let e = Converter::new(&doc, &meter).convert(&json!({"$ref": "#/components/schemas/s0"}), true).expect_err("too deep");
        assert!(e.contains("deeper than 10 levels") && e.contains("depth budget"), "{e}");
    }

    #[test]
    fn copied_values_count_against_the_operation_budget_before_they_are_copied() {
        let doc = json!({"components": {"schemas": {"Big": {"type": "string", "enum": vec!["a"; 100]}}}});
        let meter = Meter::new(Budgets { operation_nodes: 50, ..Budgets::default() });
        let e = Converter::new(&doc, &meter).convert(&json!({"$ref": "#/components/schemas/Big"}), true).expect_err("over");
        assert!(e.contains("more than 50 nodes"), "{e}");
    }
}
