//! Reading the merged settings (defaults, file, environment) with every problem reported, not
//! only the first, as `toolgate tools validate` reads a tools file: serde stops at the first
//! value that does not fit, so each one found (an unknown key, a wrong type, a value outside its
//! set) is noted with its key and where it was set, removed, and the settings read again, until
//! they read. The checks of values that read but cannot work are `checks.rs`.

use config::{Map, Value, ValueKind};
use serde_path_to_error::{Path, Segment};

use super::{ConfigError, Settings, explain};

/// Values reported before the rest is not worth reading (each costs one more pass).
const MAX_PROBLEMS: usize = 32;

/// What the `config` crate's environment source gives as the origin of its values.
const FROM_ENVIRONMENT: &str = "the environment";

/// The settings, and every value that did not fit (left out, so the settings hold the default
/// there); `None` when reading never succeeded within [`MAX_PROBLEMS`].
pub(super) fn deserialize(table: Map<String, Value>) -> (Option<Settings>, Vec<ConfigError>) {
    let mut root = Value::new(None, ValueKind::Table(table));
    let mut problems: Vec<(String, ConfigError)> = Vec::new();
    let mut settings = None;
    // The indices taken out of each list so far (by the list's key, as first read): a later
    // mistake in the same list is reported at its index in the file, not the shifted one.
    let mut taken: Vec<(String, Vec<usize>)> = Vec::new();
    for _ in 0..MAX_PROBLEMS {
        let error = match serde_path_to_error::deserialize::<_, Settings>(root.clone()) {
            Ok(read) => {
                settings = Some(read);
                break;
            }
            Err(e) => e,
        };
        let path = keys(error.path());
        let reported = as_written(&path, &taken);
        let key = reported.join(".");
        let inner = innermost(error.inner());
        // A table whose member was left out now misses it: nothing new to report. Only that
        // member: a table missing a member never set is reported even if others were left out.
        let consequence = match inner {
            config::ConfigError::NotFound(field) => {
                let field = field.rsplit('.').next().unwrap_or(field);
                let member = if key.is_empty() { field.to_owned() } else { format!("{key}.{field}") };
                problems.iter().any(|(k, _)| *k == member)
            }
            _ => false,
        };
        let removed = remove_at(&mut root, &path);
        if removed.is_some()
            && let Some((list, index)) = reported.last().and_then(|last| index_of(last))
        {
            let list = reported[..reported.len() - 1].iter().map(String::as_str).chain([list]).collect::<Vec<_>>().join(".");
            match taken.iter_mut().find(|(k, _)| *k == list) {
                Some((_, indices)) => indices.push(index),
                None => taken.push((list, vec![index])),
            }
        }
        if !consequence {
            let reason = reason(inner);
            let problem = match removed.as_ref().and_then(|v| v.origin()) {
                Some(origin) => ConfigError::Value { key: key.clone(), from: from(origin, &path), reason },
                None => ConfigError::InvalidAt { key: key.clone(), reason },
            };
            problems.push((key, problem));
        }
        if removed.is_none() {
            break;
        }
    }
    // Tables are maps without order: sorted, the report is the same on every run.
    problems.sort_by(|a, b| a.0.cmp(&b.0));
    (settings, problems.into_iter().map(|(_, p)| p).collect())
}

/// The keys of a path (an index into a list stays with its list's key: `allowed_hosts[1]`).
fn keys(path: &Path) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for segment in path.iter() {
        match segment {
            Segment::Map { key } => keys.push(key.clone()),
            Segment::Seq { index } => match keys.last_mut() {
                Some(last) => last.push_str(&format!("[{index}]")),
                None => keys.push(format!("[{index}]")),
            },
            Segment::Enum { variant } => keys.push(variant.clone()),
            Segment::Unknown => {}
        }
    }
    keys
}

/// `path` (of the settings as they are now) as written in the file: each list index moved past
/// the elements `taken` out before it.
fn as_written(path: &[String], taken: &[(String, Vec<usize>)]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(path.len());
    for key in path {
        let Some((name, index)) = index_of(key) else {
            out.push(key.clone());
            continue;
        };
        let list = out.iter().map(String::as_str).chain([name]).collect::<Vec<_>>().join(".");
        let mut original = index;
        if let Some((_, removed)) = taken.iter().find(|(k, _)| *k == list) {
            let mut removed = removed.clone();
            removed.sort_unstable();
            for r in removed {
                if r <= original {
                    original += 1;
                }
            }
        }
        out.push(format!("{name}[{original}]"));
    }
    out
}

/// Whether `key` is `of` or a key under it, segment by segment (`upstreams.ab` is not under
/// `upstreams.a`; `server.allowed_hosts[1]` is under `server.allowed_hosts`).
pub(super) fn is_within(key: &str, of: &str) -> bool {
    of.is_empty() || key == of || key.strip_prefix(of).is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
}

/// The error where it happened: the `config` crate wraps it once per table on the way out.
fn innermost(error: &config::ConfigError) -> &config::ConfigError {
    match error {
        config::ConfigError::At { error, .. } => innermost(error),
        other => other,
    }
}

/// What is wrong with the value, without the key and origin (reported beside it).
fn reason(error: &config::ConfigError) -> String {
    let text = match error {
        config::ConfigError::Type { unexpected, expected, .. } => format!("invalid type: {unexpected}, expected {expected}"),
        config::ConfigError::NotFound(key) => return format!("`{}` is required here", key.rsplit('.').next().unwrap_or(key)),
        other => other.to_string(),
    };
    let text = redact_strings(&text);
    // Bounded and escaped: whatever serde quoted came from the file or the environment. A
    // reworded reason holds the list of valid keys or values (ours), so it may be longer.
    let escaped = crate::untrusted::text::escaped;
    if let Some(reworded) = explain::reason_for(&text).or_else(|| unknown_key(&text)) {
        return escaped(&reworded, REWORDED_MAX).to_string();
    }
    let bounded = escaped(&text, REASON_MAX).to_string();
    if text.contains("expected struct HeaderSource") {
        return format!(
            "{bounded}: a secret is never written in the settings; write {{ env = \"VAR\" }} (a variable holding it) or {{ file = \"path\" }} (a file holding it)"
        );
    }
    bounded
}

/// A reason's longest text (bytes) of what serde said, before it is cut.
const REASON_MAX: usize = 200;
/// A reworded reason's longest text (bytes): it may list every key of a section.
const REWORDED_MAX: usize = 1024;

/// serde's and `config`'s echo of a string value (`string "s3cr3t"`, Rust-escaped) as
/// `a string (6 characters)`: a value in the wrong place is often a secret (a literal
/// `client_secret` where a `{ env = ... }` belongs), and a report must never show it.
fn redact_strings(text: &str) -> String {
    const QUOTED: &str = "string \"";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(QUOTED) {
        out.push_str(&rest[..at]);
        let body = &rest[at + QUOTED.len()..];
        let (mut count, mut escape, mut end) = (0usize, false, None);
        for (i, c) in body.char_indices() {
            match (escape, c) {
                (true, _) => escape = false,
                (false, '\\') => {
                    escape = true;
                    count += 1;
                }
                (false, '"') => {
                    end = Some(i);
                    break;
                }
                _ => count += 1,
            }
        }
        let noun = if count == 1 { "character" } else { "characters" };
        out.push_str(&format!("a string ({count} {noun})"));
        // An unterminated quote: everything after it is the value.
        rest = end.map_or("", |i| &body[i + 1..]);
    }
    out.push_str(rest);
    out
}

/// serde's "unknown field `bnd`, expected one of `bind`, ..." as what to change.
fn unknown_key(text: &str) -> Option<String> {
    let (given, rest) = text.strip_prefix("unknown field `")?.split_once('`')?;
    let valid: Vec<&str> = rest.split('`').skip(1).step_by(2).collect();
    let near = valid.iter().copied().filter(|v| distance(v, given) <= 2).min_by_key(|v| distance(v, given));
    let hint = near.map(|n| format!(" (did you mean `{n}`?)")).unwrap_or_default();
    Some(format!("unknown field `{given}`{hint}; the settings here are: {}", valid.join(", ")))
}

/// Edits (insert, delete, replace a character) from `a` to `b`.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (row[j + 1] + 1).min(row[j] + 1).min(diagonal + usize::from(ca != *cb));
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// Where a value was set: the file, or the variable (`TOOLGATE__SERVER__BINDD`).
fn from(origin: &str, path: &[String]) -> String {
    if origin != FROM_ENVIRONMENT {
        return format!("set in {origin}");
    }
    let keys: Vec<&str> = path.iter().map(|k| k.split('[').next().unwrap_or(k)).collect();
    let wanted = format!("TOOLGATE__{}", keys.join("__")).to_uppercase();
    // The source lowercases names; the variable as the operator wrote it, when there is one.
    let name = std::env::vars_os().filter_map(|(name, _)| name.into_string().ok()).find(|n| n.to_uppercase() == wanted);
    format!("set by the environment variable {}", name.unwrap_or(wanted))
}

/// Removes the value at `path` from `root`; the value removed, or `None` when there is none.
fn remove_at(root: &mut Value, path: &[String]) -> Option<Value> {
    let (last, parents) = path.split_last()?;
    let mut at = root;
    for key in parents {
        at = child(at, key)?;
    }
    match (&mut at.kind, index_of(last)) {
        (ValueKind::Table(table), None) => table.remove(last.as_str()),
        (ValueKind::Table(table), Some((key, index))) => match &mut table.get_mut(key)?.kind {
            ValueKind::Array(items) if index < items.len() => Some(items.remove(index)),
            _ => None,
        },
        _ => None,
    }
}

fn child<'a>(value: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    let ValueKind::Table(table) = &mut value.kind else { return None };
    match index_of(key) {
        None => table.get_mut(key),
        Some((key, index)) => match &mut table.get_mut(key)?.kind {
            ValueKind::Array(items) => items.get_mut(index),
            _ => None,
        },
    }
}

/// `allowed_hosts[1]` as (`allowed_hosts`, 1).
fn index_of(key: &str) -> Option<(&str, usize)> {
    let (name, index) = key.strip_suffix(']')?.split_once('[')?;
    Some((name, index.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_string_value_is_never_echoed() {
        let text = r#"invalid type: string "sk-\"live\"-123", expected struct HeaderSource"#;
        let redacted = redact_strings(text);
        assert_eq!(redacted, "invalid type: a string (13 characters), expected struct HeaderSource");
        assert_eq!(
            redact_strings(r#"invalid value: string "x", expected a u16 and string "yz""#),
            "invalid value: a string (1 character), expected a u16 and a string (2 characters)"
        );
        assert_eq!(redact_strings(r#"invalid type: string "open"#), "invalid type: a string (4 characters)");
        assert_eq!(redact_strings("invalid type: integer `7`, expected a string"), "invalid type: integer `7`, expected a string");
    }

    #[test]
    fn a_reason_is_bounded_and_escaped() {
        let long = config::ConfigError::Message(format!("unknown thing {}\n", "x".repeat(2000)));
        let text = reason(&long);
        assert!(text.len() < REASON_MAX + 32 && !text.contains('\n') && text.contains("bytes)"), "{text}");
    }

    #[test]
    fn a_near_miss_is_suggested() {
        let text = "unknown field `bnd`, expected one of `bind`, `mcp_path`";
        let reason = unknown_key(text).expect("reworded");
        assert!(reason.contains("did you mean `bind`?") && reason.contains("bind, mcp_path"), "{reason}");
        assert!(!unknown_key("unknown field `zzzzzz`, expected `bind`").expect("reworded").contains("did you mean"));
    }

    #[test]
    fn distances_count_single_edits() {
        assert_eq!(distance("bnd", "bind"), 1);
        assert_eq!(distance("bind", "bind"), 0);
        assert_eq!(distance("mcp_pth", "mcp_path"), 1);
        assert_eq!(distance("", "ab"), 2);
    }
}
