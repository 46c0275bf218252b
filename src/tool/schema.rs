//! JSON Schema compilation and validation for tool inputs and outputs.
//!
//! The dialect is 2020-12 unless `$schema` names another one the `jsonschema` crate knows
//! (draft-07 and friends). The crate is built without its HTTP and file resolvers, so a `$ref`
//! to anything outside the schema itself fails at registration, never at call time.

use std::fmt::Write as _;

use jsonschema::Validator;
use serde_json::Value;

/// Most validation errors reported back to the model for one call.
const MAX_REPORTED_ERRORS: usize = 5;

/// Compiles a schema, naming the problem when it cannot be used.
pub fn compile(schema: &Value) -> Result<Validator, String> {
    if let Some(dialect) = schema.get("$schema") {
        let known = dialect.as_str().is_some_and(is_known_dialect);
        if !known {
            return Err(format!(
                "unsupported JSON Schema dialect {dialect}; use https://json-schema.org/draft/2020-12/schema (the default) or http://json-schema.org/draft-07/schema#"
            ));
        }
    }
    jsonschema::options().build(schema).map_err(|e| format!("invalid JSON Schema: {e}"))
}

fn is_known_dialect(uri: &str) -> bool {
    let uri = uri.trim_end_matches('#');
    [
        "https://json-schema.org/draft/2020-12/schema",
        "https://json-schema.org/draft/2019-09/schema",
        "http://json-schema.org/draft-07/schema",
        "http://json-schema.org/draft-06/schema",
        "http://json-schema.org/draft-04/schema",
    ]
    .contains(&uri)
}

/// Requires an object schema at the root, as tool schemas must be (TL-06).
pub fn require_object_root(schema: &Value, what: &str) -> Result<(), String> {
    match schema.get("type") {
        Some(Value::String(t)) if t == "object" => Ok(()),
        _ => Err(format!("{what} must be a JSON Schema object with \"type\": \"object\" at the root")),
    }
}

/// Validates `instance`, returning a message that names each failing path.
pub fn check(validator: &Validator, instance: &Value) -> Result<(), String> {
    // The common case is valid input: `is_valid` stops at the first failure and builds no
    // error values; details are only gathered for the report.
    if validator.is_valid(instance) {
        return Ok(());
    }
    let errors = validator.iter_errors(instance);
    let mut message = String::new();
    for (i, error) in errors.enumerate() {
        if i == MAX_REPORTED_ERRORS {
            message.push_str("; …");
            break;
        }
        if i > 0 {
            message.push_str("; ");
        }
        let path = error.instance_path().as_str();
        let path = if path.is_empty() { "(root)" } else { path };
        let _ = write!(message, "{path}: {error}");
    }
    Err(message)
}

/// The properties of an input schema marked `x-mcp-header` (SEP-2243), with the header
/// suffix each names: a modern request carries each one's value in `Mcp-Param-<suffix>`.
pub fn header_params(input_schema: &Value) -> Vec<(String, String)> {
    input_schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(property, schema)| Some((property.clone(), schema.get("x-mcp-header")?.as_str()?.to_owned())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn errors_name_the_failing_path() {
        let v = compile(&json!({"type":"object","properties":{"a":{"type":"number"}},"required":["a"]}));
        let v = v.expect("schema compiles");
        let err = check(&v, &json!({"a":"x"})).err().unwrap_or_default();
        assert!(err.starts_with("/a:"), "{err}");
        let err = check(&v, &json!({})).err().unwrap_or_default();
        assert!(err.contains("(root)") && err.contains("\"a\""), "{err}");
    }

    #[test]
    fn draft07_is_honoured_and_unknown_dialects_refused() {
        // draft-07 ignores `prefixItems`-era keywords differently: `items` as an array is a tuple.
        let v = compile(&json!({"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
            "properties":{"t":{"items":[{"type":"string"}]}}}))
        .expect("draft-07 compiles");
        assert!(check(&v, &json!({"t":[1]})).is_err());
        assert!(compile(&json!({"$schema":"https://example.com/my-dialect","type":"object"})).is_err());
    }

    #[test]
    fn remote_refs_are_not_fetched() {
        let err = compile(&json!({"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}));
        assert!(err.is_err());
    }

    #[test]
    fn root_must_be_object() {
        assert!(require_object_root(&json!({"type":"string"}), "inputSchema").is_err());
        assert!(require_object_root(&json!({"type":"object"}), "inputSchema").is_ok());
    }
}
