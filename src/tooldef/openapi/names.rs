//! Names: tools (`^[A-Za-z0-9_.-]{1,64}$`, unique), arguments (letters, digits and `_`, so
//! they work in URL templates and `{field}` templates alike) and environment variables.

use std::collections::{BTreeMap, BTreeSet};

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

/// The tool names given so far, and for each stem the next number to try after it, so the
/// duplicates of a name cost one look-up each however many there are: numbering by trying
/// `_2`, `_3`, … from the start each time was quadratic (20,000 operations sharing one
/// `operationId` took half a minute). A number found taken is never tried again for its stem,
/// since names are only ever added. Operations are visited in a fixed order (paths, then
/// methods, as sorted), so the same document always gives the same names.
#[derive(Debug, Default)]
pub(super) struct Taken {
    names: BTreeSet<String>,
    /// Stem → the next number to try (`<stem>_<n>`).
    next: BTreeMap<String, usize>,
    /// Names looked up, to test that the work stays linear.
    #[cfg(test)]
    probes: usize,
}

impl Taken {
    /// `name` if no tool has it yet, else `name_2`, `name_3`, … (the stem cut so the whole
    /// stays within the length limit). Nothing is taken until [`Taken::claim`], so an
    /// operation that is skipped after all leaves its number to the next one.
    pub fn propose(&mut self, name: &str) -> String {
        if !self.has(name) {
            return name.to_owned();
        }
        let mut stem_len = name.len().min(MAX_TOOL_NAME - 2);
        let mut carry = 2;
        loop {
            let stem = truncate(name, stem_len);
            let mut n = self.next.get(stem).copied().unwrap_or(carry);
            loop {
                let candidate = format!("{stem}_{n}");
                if candidate.len() > MAX_TOOL_NAME {
                    break;
                }
                if !self.has(&candidate) {
                    self.next.insert(stem.to_owned(), n);
                    return candidate;
                }
                n += 1;
            }
            // The numbers no longer fit after this stem: a shorter one, numbered on from here.
            self.next.insert(stem.to_owned(), n);
            carry = n;
            stem_len = stem_len.saturating_sub(1);
        }
    }

    /// Takes `name` (as [`Taken::propose`] gave it).
    pub fn claim(&mut self, name: &str) {
        self.names.insert(name.to_owned());
    }

    fn has(&mut self, name: &str) -> bool {
        #[cfg(test)]
        {
            self.probes += 1;
        }
        self.names.contains(name)
    }
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
        let mut taken = Taken::default();
        for want in ["a", "a_2", "a_3"] {
            let name = taken.propose("a");
            taken.claim(&name);
            assert_eq!(name, want);
        }
        let long = "x".repeat(64);
        let names: Vec<String> = (0..12).map(|_| claim(&mut taken, &long)).collect();
        assert_eq!((names[1].len(), &names[1][60..]), (64, "xx_2"));
        assert_eq!((names[9].len(), &names[9][60..]), (64, "x_10"), "the numbers grow into the stem");
    }

    fn claim(taken: &mut Taken, name: &str) -> String {
        let name = taken.propose(name);
        taken.claim(&name);
        name
    }

    #[test]
    fn a_number_another_name_took_is_skipped_and_a_proposal_takes_nothing() {
        let mut taken = Taken::default();
        for name in ["a", "a_2"] {
            taken.claim(name);
        }
        assert_eq!(taken.propose("a"), "a_3");
        assert_eq!(taken.propose("a"), "a_3", "not claimed: still free");
    }

    #[test]
    fn twenty_thousand_duplicates_cost_a_bounded_number_of_look_ups() {
        let mut taken = Taken::default();
        for _ in 0..20_000 {
            claim(&mut taken, "op");
        }
        assert_eq!(taken.propose("op"), "op_20001");
        assert!(taken.probes <= 3 * 20_001, "{} look-ups: three a name", taken.probes);
    }

    #[test]
    fn long_names_that_share_their_cut_stem_cost_a_bounded_number_of_look_ups() {
        // 62 shared characters: every name's duplicates are numbered after the same stem.
        let mut taken = Taken::default();
        let stem = "s".repeat(62);
        for i in 0..2_000 {
            let name = format!("{stem}{:02}", i % 100);
            claim(&mut taken, &name);
        }
        assert_eq!(taken.names.len(), 2_000, "all different");
        assert!(taken.probes <= 4 * 2_000, "{} look-ups", taken.probes);
    }

    #[test]
    fn arguments_and_variables_are_plain_words() {
        assert_eq!(argument("filter[status]"), "filter_status");
        assert_eq!(argument("X-Request-Id"), "X_Request_Id");
        assert_eq!(env_var(&["Swagger Petstore", "api_key"]), "SWAGGER_PETSTORE_API_KEY");
        assert_eq!(env_var(&["3scale", "token"]), "API_3SCALE_TOKEN");
    }
}
