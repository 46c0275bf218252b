//! YAML, read one way wherever toolgate reads it: tools files, the settings file and OpenAPI
//! documents. `serde-saphyr` parses without panicking and counts what it does against a
//! budget, so an alias bomb ("billion laughs") or a deeply nested document from a ConfigMap or
//! an admin's upload is refused with a message instead of exhausting memory or the stack
//! (ARCHITECTURE.md, "YAML").
//!
//! Documents are read into `serde_json::Value` and checked from there exactly as TOML and JSON
//! are, so the three formats mean the same thing. Booleans are YAML 1.2's (`true`/`false`):
//! `no`, `on` or `y` stay strings, so an enum of country codes keeps its `NO`.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// How much a document may make the parser do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Budget {
    /// Tools files and settings: written by people, small.
    Definitions,
    /// OpenAPI documents: GitHub's has millions of nodes, but is still read once, locally.
    Document,
}

impl Budget {
    fn options(self) -> serde_saphyr::Options {
        let budget = match self {
            Self::Definitions => serde_saphyr::budget! {
                max_depth: 64,
                max_nodes: 250_000,
                max_events: 1_000_000,
                max_aliases: 1_000,
                max_anchors: 1_000,
                max_total_scalar_bytes: 16 * 1024 * 1024,
                max_documents: 1,
            },
            Self::Document => serde_saphyr::budget! {
                max_depth: 256,
                max_nodes: 20_000_000,
                max_events: 50_000_000,
                max_aliases: 100_000,
                max_anchors: 100_000,
                max_total_scalar_bytes: 512 * 1024 * 1024,
                max_documents: 1,
            },
        };
        serde_saphyr::options! {
            budget: budget,
            strict_booleans: true,
        }
    }
}

/// Parses one YAML document. The error names the line and column (with the line itself and a
/// caret under the problem, shown as in `source`) or the budget that was exceeded.
pub fn from_str<T: DeserializeOwned>(text: &str, budget: Budget, source: &str) -> Result<T, String> {
    serde_saphyr::from_str_with_options(text, budget.options()).map_err(|e| {
        let message = e.to_string();
        let message = message.strip_prefix("error: ").unwrap_or(&message);
        message.replace("--> <input>:", &format!("--> {source}:")).trim_end().to_owned()
    })
}

/// Writes a value as YAML (block style, two-space indentation).
pub fn to_string<T: Serialize>(value: &T) -> Result<String, String> {
    serde_saphyr::to_string(value).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    #[test]
    fn yaml_reads_into_the_same_json_as_the_other_formats() {
        let v: Value =
            from_str("tools:\n  - name: t\n    timeout_secs: 5\n    enabled: true\n", Budget::Definitions, "t.yaml").expect("valid");
        assert_eq!(v, json!({"tools": [{"name": "t", "timeout_secs": 5, "enabled": true}]}));
    }

    #[test]
    fn yaml_1_1_booleans_stay_strings() {
        let v: Value = from_str("enum: [NO, yes, on, true]\n", Budget::Definitions, "t.yaml").expect("valid");
        assert_eq!(v, json!({"enum": ["NO", "yes", "on", true]}));
    }

    #[test]
    fn a_syntax_error_names_the_line_and_column() {
        let e = from_str::<Value>("tools:\n  - name: t\n   bad: [\n", Budget::Definitions, "t.yaml").expect_err("invalid");
        assert!(e.starts_with("line 3 column") && e.contains("--> t.yaml:3:"), "{e}");
    }

    #[test]
    fn an_alias_bomb_is_refused_by_the_budget() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..12 {
            let refs = vec![format!("*a{}", i - 1); 10].join(", ");
            text.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
        }
        let e = from_str::<Value>(&text, Budget::Definitions, "t.yaml").expect_err("refused");
        assert!(e.to_lowercase().contains("budget") || e.to_lowercase().contains("alias"), "{e}");
    }

    #[test]
    fn deep_nesting_is_refused_without_overflowing_the_stack() {
        let text = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(from_str::<Value>(&text, Budget::Definitions, "t.yaml").is_err());
    }

    #[test]
    fn values_write_back_as_yaml_that_reads_the_same() {
        let v = json!({"tools": [{"name": "t", "description": "a: b\nc", "enum": ["NO", 1, null]}]});
        let text = to_string(&v).expect("writes");
        assert_eq!(from_str::<Value>(&text, Budget::Definitions, "t.yaml").expect("reads"), v, "{text}");
    }
}
