//! Argument templates. Each `args` element is one template and yields at most one argv element,
//! except the explicit spread form:
//!
//! | template             | argv                                                              |
//! |----------------------|-------------------------------------------------------------------|
//! | `"log"`              | `log`                                                             |
//! | `"{limit}"`          | the value (numbers and booleans formatted); nothing when absent   |
//! | `"--max-count={n}"`  | one element with the value inside; nothing when a field is absent |
//! | `"{paths...}"`       | one element per array item; nothing when absent or empty         |
//!
//! `{{` and `}}` are literal braces. Field names are letters, digits, `_` and `-`.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

/// One parsed template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Template {
    /// Exactly `"{field}"`.
    Whole(String),
    /// Exactly `"{field...}"`.
    Spread(String),
    /// Literal text with zero or more placeholders.
    Mixed(Vec<Piece>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    Field(String),
}

/// Why a call's arguments cannot be rendered; the message is for the model.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    #[error("the value of `{0}` must not begin with \"-\": the program would read it as an option")]
    LeadingDash(String),
    #[error("the value of `{0}` contains a NUL character, which cannot be passed to a program")]
    Nul(String),
    #[error("`{0}` must be a string, number or boolean")]
    NotScalar(String),
}

// ===== impl Template =====

impl Template {
    /// Parses one template; the error says what is wrong and how to write it instead.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.contains('\0') {
            return Err("contains a NUL character".into());
        }
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        while let Some(at) = rest.find(['{', '}']) {
            literal.push_str(&rest[..at]);
            let tail = &rest[at..];
            if let Some(after) = tail.strip_prefix("{{") {
                literal.push('{');
                rest = after;
            } else if let Some(after) = tail.strip_prefix("}}") {
                literal.push('}');
                rest = after;
            } else if tail.starts_with('}') {
                return Err(format!("a lone `}}` at byte {at}; write `}}}}` for a literal brace"));
            } else {
                let Some(close) = tail.find('}') else {
                    return Err(format!("`{tail}` is not closed; write `{{{{` for a literal brace"));
                };
                if !literal.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut literal)));
                }
                pieces.push(Piece::Field(tail[1..close].to_owned()));
                rest = &tail[close + 1..];
            }
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            pieces.push(Piece::Text(literal));
        }
        Self::classify(pieces)
    }

    fn classify(mut pieces: Vec<Piece>) -> Result<Self, String> {
        for piece in &pieces {
            let Piece::Field(name) = piece else { continue };
            let bare = name.strip_suffix("...").unwrap_or(name);
            if !valid_field_name(bare) {
                return Err(format!("`{{{name}}}` is not a valid placeholder: name an input property (letters, digits, `_`, `-`)"));
            }
            if bare.len() != name.len() && pieces.len() != 1 {
                return Err(format!("`{{{name}}}` must be the whole element: a spread yields one argument per array item"));
            }
        }
        match pieces.as_mut_slice() {
            [Piece::Field(name)] => Ok(match name.strip_suffix("...") {
                Some(bare) => Self::Spread(bare.to_owned()),
                None => Self::Whole(std::mem::take(name)),
            }),
            _ => Ok(Self::Mixed(pieces)),
        }
    }

    /// The input properties this template reads, each once.
    pub(super) fn fields(&self) -> BTreeSet<&str> {
        match self {
            Self::Whole(name) | Self::Spread(name) => BTreeSet::from([name.as_str()]),
            Self::Mixed(pieces) => pieces
                .iter()
                .filter_map(|p| match p {
                    Piece::Field(name) => Some(name.as_str()),
                    Piece::Text(_) => None,
                })
                .collect(),
        }
    }

    /// Appends this template's argv elements for `args` to `argv`. A value that would start
    /// an element with `-` is refused unless `dash_ok(field)`.
    pub fn render_args(
        &self,
        args: &Map<String, Value>,
        dash_ok: &dyn Fn(&str) -> bool,
        argv: &mut Vec<String>,
    ) -> Result<(), RenderError> {
        let checked = |field: &str, value: String| {
            if value.contains('\0') {
                Err(RenderError::Nul(field.to_owned()))
            } else if value.starts_with('-') && !dash_ok(field) {
                Err(RenderError::LeadingDash(field.to_owned()))
            } else {
                Ok(value)
            }
        };
        match self {
            Self::Whole(field) => {
                if let Some(value) = present(args, field) {
                    argv.push(checked(field, scalar(field, value)?)?);
                }
            }
            Self::Spread(field) => match present(args, field) {
                None => {}
                Some(Value::Array(items)) => {
                    for item in items.iter().filter(|v| !v.is_null()) {
                        argv.push(checked(field, scalar(field, item)?)?);
                    }
                }
                Some(value) => argv.push(checked(field, scalar(field, value)?)?),
            },
            Self::Mixed(pieces) => {
                let mut element = String::new();
                for piece in pieces {
                    match piece {
                        Piece::Text(text) => element.push_str(text),
                        Piece::Field(field) => {
                            let Some(value) = present(args, field) else { return Ok(()) };
                            let value = scalar(field, value)?;
                            // Only a value that would begin the element can turn it into an option.
                            let value = if element.is_empty() { checked(field, value)? } else { value };
                            if value.contains('\0') {
                                return Err(RenderError::Nul(field.clone()));
                            }
                            element.push_str(&value);
                        }
                    }
                }
                argv.push(element);
            }
        }
        Ok(())
    }

    /// The text of a stdin template, or `None` when a field it reads is absent.
    pub fn render_text(&self, args: &Map<String, Value>) -> Result<Option<String>, RenderError> {
        let pieces = match self {
            Self::Whole(field) | Self::Spread(field) => return present(args, field).map(|v| scalar(field, v)).transpose(),
            Self::Mixed(pieces) => pieces,
        };
        let mut text = String::new();
        for piece in pieces {
            match piece {
                Piece::Text(literal) => text.push_str(literal),
                Piece::Field(field) => match present(args, field) {
                    Some(value) => text.push_str(&scalar(field, value)?),
                    None => return Ok(None),
                },
            }
        }
        Ok(Some(text))
    }
}

fn valid_field_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A field's value, with `null` counted as absent.
fn present<'a>(args: &'a Map<String, Value>, field: &str) -> Option<&'a Value> {
    args.get(field).filter(|v| !v.is_null())
}

fn scalar(field: &str, value: &Value) -> Result<String, RenderError> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Null | Value::Array(_) | Value::Object(_) => Err(RenderError::NotScalar(field.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn render(template: &str, args: Value) -> Result<Vec<String>, RenderError> {
        let Value::Object(args) = args else { panic!("object expected") };
        let mut argv = Vec::new();
        Template::parse(template).unwrap_or_else(|e| panic!("{template}: {e}")).render_args(&args, &|f| f == "rev", &mut argv)?;
        Ok(argv)
    }

    #[test]
    fn parses_each_form() {
        assert_eq!(Template::parse("{limit}"), Ok(Template::Whole("limit".into())));
        assert_eq!(Template::parse("{paths...}"), Ok(Template::Spread("paths".into())));
        assert_eq!(
            Template::parse("--n={limit}!"),
            Ok(Template::Mixed(vec![Piece::Text("--n=".into()), Piece::Field("limit".into()), Piece::Text("!".into())]))
        );
        assert_eq!(Template::parse("{{x}}"), Ok(Template::Mixed(vec![Piece::Text("{x}".into())])));
        assert_eq!(Template::parse(""), Ok(Template::Mixed(vec![])));
    }

    #[test]
    fn malformed_templates_are_refused_with_a_hint() {
        for (bad, hint) in [
            ("{limit", "not closed"),
            ("a}b", "lone `}`"),
            ("{}", "not a valid placeholder"),
            ("{a b}", "not a valid placeholder"),
            ("-x={paths...}", "whole element"),
            ("a\0b", "NUL"),
        ] {
            let err = Template::parse(bad).err().unwrap_or_default();
            assert!(err.contains(hint), "{bad:?}: {err}");
        }
    }

    #[test]
    fn values_render_one_element_each() {
        let args = json!({"limit": 5, "flag": true, "ratio": 1.5, "name": "a b;c", "paths": ["x", 2, null]});
        assert_eq!(render("{limit}", args.clone()), Ok(vec!["5".into()]));
        assert_eq!(render("{flag}", args.clone()), Ok(vec!["true".into()]));
        assert_eq!(render("--ratio={ratio}", args.clone()), Ok(vec!["--ratio=1.5".into()]));
        assert_eq!(render("{name}", args.clone()), Ok(vec!["a b;c".into()]));
        assert_eq!(render("{paths...}", args.clone()), Ok(vec!["x".into(), "2".into()]));
        assert_eq!(render("{limit}-{name}", args), Ok(vec!["5-a b;c".into()]));
    }

    #[test]
    fn absent_fields_drop_the_element() {
        let args = json!({"limit": null});
        assert_eq!(render("{limit}", args.clone()), Ok(vec![]));
        assert_eq!(render("--n={limit}", args.clone()), Ok(vec![]));
        assert_eq!(render("{paths...}", args.clone()), Ok(vec![]));
        assert_eq!(render("--", args), Ok(vec!["--".into()]));
    }

    #[test]
    fn leading_dash_is_refused_only_at_the_start() {
        let args = json!({"path": "--output=/etc/x", "empty": "", "rev": "-1", "n": -3, "list": ["ok", "-x"]});
        assert_eq!(render("{path}", args.clone()), Err(RenderError::LeadingDash("path".into())));
        assert_eq!(render("{n}", args.clone()), Err(RenderError::LeadingDash("n".into())));
        assert_eq!(render("{path}.txt", args.clone()), Err(RenderError::LeadingDash("path".into())));
        assert_eq!(render("{empty}{path}", args.clone()), Err(RenderError::LeadingDash("path".into())));
        assert_eq!(render("{list...}", args.clone()), Err(RenderError::LeadingDash("list".into())));
        assert_eq!(render("--file={path}", args.clone()), Ok(vec!["--file=--output=/etc/x".into()]));
        assert_eq!(render("{rev}", args), Ok(vec!["-1".into()]));
    }

    #[test]
    fn nul_and_structured_values_are_refused() {
        let args = json!({"s": "a\u{0}b", "o": {"a": 1}, "nested": [[1]]});
        assert_eq!(render("{s}", args.clone()), Err(RenderError::Nul("s".into())));
        assert_eq!(render("x{s}", args.clone()), Err(RenderError::Nul("s".into())));
        assert_eq!(render("{o}", args.clone()), Err(RenderError::NotScalar("o".into())));
        assert_eq!(render("{nested...}", args), Err(RenderError::NotScalar("nested".into())));
    }

    #[test]
    fn stdin_text_interpolates_without_dash_checks() {
        let Value::Object(args) = json!({"body": "-hello\n", "n": 2}) else { unreachable!() };
        let text = |t: &str| Template::parse(t).ok().and_then(|t| t.render_text(&args).ok().flatten());
        assert_eq!(text("{body}"), Some("-hello\n".into()));
        assert_eq!(text("n={n} {body}"), Some("n=2 -hello\n".into()));
        assert_eq!(text("{missing}"), None);
    }
}
