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
    for _ in 0..MAX_PROBLEMS {
        let error = match serde_path_to_error::deserialize::<_, Settings>(root.clone()) {
            Ok(read) => {
                settings = Some(read);
                break;
            }
            Err(e) => e,
        };
        let path = keys(error.path());
        let key = path.join(".");
        let inner = innermost(error.inner());
        // A table whose member was left out now misses it: nothing new to report.
        let consequence = matches!(inner, config::ConfigError::NotFound(_)) && problems.iter().any(|(k, _)| k.starts_with(&key));
        let removed = remove_at(&mut root, &path);
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
    explain::reason_for(&text).or_else(|| unknown_key(&text)).unwrap_or(text)
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
