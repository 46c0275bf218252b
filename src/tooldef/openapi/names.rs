//! Names: tools (`^[A-Za-z0-9_.-]{1,64}$`, unique), arguments (letters, digits and `_`, so
//! they work in URL templates and `{field}` templates alike) and environment variables.

use std::collections::BTreeSet;

/// toolgate's longest tool name.
const MAX_TOOL_NAME: usize = 64;

/// The tool name for an operation: its `operationId`, or the method and path when it has none,
/// after `prefix`, with every other character replaced by `_`.
pub(super) fn tool_name(prefix: &str, operation_id: Option<&str>, method: &str, path: &str) -> String {
    let base = match operation_id.map(str::trim).filter(|id| !id.is_empty()) {
        Some(id) => id.to_owned(),
        None => {
            let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).map(|s| s.trim_matches(['{', '}'])).collect();
            if segments.is_empty() { format!("{method}_root") } else { format!("{method}_{}", segments.join("_")) }
        }
    };
    let cleaned = collapse(&format!("{prefix}{base}"), |c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    let cleaned = if cleaned.is_empty() { "operation".to_owned() } else { cleaned };
    shorten(&cleaned, MAX_TOOL_NAME)
}

/// `name` if no tool has it yet, else `name_2`, `name_3`, … (kept within the length limit);
/// `taken` gains the result. Operations are visited in a fixed order (paths, then methods, as
/// sorted), so the same document always gives the same names.
pub(super) fn unique(name: String, taken: &mut BTreeSet<String>) -> String {
    let mut candidate = name.clone();
    let mut n = 2;
    while taken.contains(&candidate) {
        let suffix = format!("_{n}");
        candidate = format!("{}{suffix}", truncate(&name, MAX_TOOL_NAME - suffix.len()));
        n += 1;
    }
    taken.insert(candidate.clone());
    candidate
}

/// An argument name for a parameter or body property: letters, digits and `_`.
pub(super) fn argument(name: &str) -> String {
    let cleaned = collapse(name, |c| c.is_ascii_alphanumeric() || c == '_');
    if cleaned.is_empty() { "value".to_owned() } else { cleaned }
}

/// An environment variable name: upper case letters, digits and `_`.
pub(super) fn env_var(parts: &[&str]) -> String {
    let joined = parts.iter().map(|p| collapse(p, |c| c.is_ascii_alphanumeric())).filter(|p| !p.is_empty()).collect::<Vec<_>>().join("_");
    let upper = joined.to_ascii_uppercase();
    if upper.starts_with(|c: char| c.is_ascii_digit()) { format!("API_{upper}") } else { upper }
}

/// Replaces runs of characters `keep` refuses with one `_`, trimming `_` at both ends.
fn collapse(text: &str, keep: impl Fn(char) -> bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if keep(c) {
            out.push(c);
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    out.trim_matches('_').to_owned()
}

/// `name` cut to `max` characters, ending in a digest of the whole so two long names that
/// share a beginning stay different.
fn shorten(name: &str, max: usize) -> String {
    if name.len() <= max {
        return name.to_owned();
    }
    let digest = format!("{:08x}", fnv1a(name) as u32);
    format!("{}_{digest}", truncate(name, max - digest.len() - 1))
}

fn truncate(name: &str, max: usize) -> &str {
    // Names are ASCII here.
    &name[..name.len().min(max)]
}

/// FNV-1a: a digest that is the same on every build and platform.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_ids_are_cleaned_and_missing_ones_generated() {
        assert_eq!(tool_name("", Some("repos/list-for-org"), "get", "/x"), "repos_list-for-org");
        assert_eq!(tool_name("gh_", Some("a b??c"), "get", "/x"), "gh_a_b_c");
        assert_eq!(tool_name("", None, "get", "/pets/{petId}/photos"), "get_pets_petId_photos");
        assert_eq!(tool_name("", None, "get", "/"), "get_root");
    }

    #[test]
    fn long_names_are_cut_with_a_digest_and_duplicates_numbered() {
        let long = tool_name("", Some(&"x".repeat(100)), "get", "/");
        assert_eq!(long.len(), 64);
        assert_ne!(long, tool_name("", Some(&format!("{}y", "x".repeat(100))), "get", "/"));
        let mut taken = BTreeSet::new();
        assert_eq!(unique("a".into(), &mut taken), "a");
        assert_eq!(unique("a".into(), &mut taken), "a_2");
        assert_eq!(unique("a".into(), &mut taken), "a_3");
    }

    #[test]
    fn arguments_and_variables_are_plain_words() {
        assert_eq!(argument("filter[status]"), "filter_status");
        assert_eq!(argument("X-Request-Id"), "X_Request_Id");
        assert_eq!(env_var(&["Swagger Petstore", "api_key"]), "SWAGGER_PETSTORE_API_KEY");
        assert_eq!(env_var(&["3scale", "token"]), "API_3SCALE_TOKEN");
    }
}
