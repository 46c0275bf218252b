//! What a token lacks for a request ([`ScopeShortfall`]): the scopes missing, named first in
//! every refusal, and the scopes the token holds, which the challenge's `scope` hint keeps.
//! The held scopes are the token's claims: logs get only their count, and wherever they are
//! shown (the client's own 403) they pass [`scope_list`] and are capped.

use std::collections::BTreeSet;

/// The scopes a request needs that the token does not hold, and those it holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScopeShortfall {
    /// Needed and not held, in the order the settings list them.
    pub missing: Vec<String>,
    /// What the token holds.
    pub held: Vec<String>,
}

impl ScopeShortfall {
    /// The shortfall of a token holding `held` for a request needing `needed`; `None` when
    /// nothing is missing.
    pub fn of<'a>(held: &BTreeSet<String>, needed: impl IntoIterator<Item = &'a String>) -> Option<Self> {
        let mut missing: Vec<String> = Vec::new();
        for scope in needed {
            if !held.contains(scope) && !missing.contains(scope) {
                missing.push(scope.clone());
            }
        }
        (!missing.is_empty()).then(|| Self { missing, held: held.iter().cloned().collect() })
    }

    /// Only `missing` (a refusal that does not hint at the token's other scopes: the admin API).
    pub fn missing(missing: Vec<String>) -> Self {
        Self { missing, held: Vec::new() }
    }

    /// The challenge's `scope` (RFC 6750 §3.1): what the token holds and what it lacks, so a
    /// client that asks for exactly these keeps the scopes it had.
    pub fn requested(&self) -> Vec<String> {
        let mut scopes = self.held.clone();
        scopes.extend(self.missing.iter().filter(|s| !self.held.contains(s)).cloned());
        scopes
    }

    /// [`Self::requested`] as a hint of at most `max` bytes ([`scope_list`]): the missing
    /// scopes are kept first, then as many held ones as fit (listed before them, as above).
    pub fn hint(&self, max: usize) -> String {
        let missing = scope_list(&self.missing, max);
        let rest: Vec<String> = self.held.iter().filter(|s| !self.missing.contains(s)).cloned().collect();
        let held = scope_list(&rest, max.saturating_sub(missing.len() + 1));
        match (held.is_empty(), missing.is_empty()) {
            (true, _) => missing,
            (false, true) => held,
            (false, false) => format!("{held} {missing}"),
        }
    }

    /// For the log: the missing scopes only (operator configuration), never the token's own.
    pub fn describe_missing(&self) -> String {
        match self.missing.as_slice() {
            [] => "the token lacks a scope this request needs".to_owned(),
            [one] => format!("the token lacks the scope {}", scope_list(std::slice::from_ref(one), HELD_MAX)),
            many => format!("the token lacks the scopes {}", scope_list(many, HELD_MAX)),
        }
    }

    /// For the client whose token it is: the missing scopes first, then what the token has
    /// (filtered and capped at [`HELD_MAX`] bytes), labelled as such.
    pub fn describe(&self) -> String {
        let them = if self.missing.len() == 1 { "it" } else { "them" };
        let held = scope_list(&self.held, HELD_MAX);
        let has = if held.is_empty() { "no scopes".to_owned() } else { format!("the scopes {held}") };
        let more = self.held.len() - held.split(' ').filter(|s| !s.is_empty()).count();
        let more = if more > 0 { format!(" and {more} more") } else { String::new() };
        format!("{}; ask for a token with {them} (this token has {has}{more})", self.describe_missing())
    }
}

/// The longest list of a token's scopes (bytes) shown in a message.
pub const HELD_MAX: usize = 256;

/// Whether `s` is an RFC 6749 §3.3 scope token (printable ASCII without quotes or
/// backslashes), which fits a quoted-string and a log line as it is.
pub fn is_scope_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\')
}

/// The scope tokens of `scopes` joined by spaces, whole tokens only, at most `max` bytes (a
/// later token that does not fit is left out; an odd scope is always left out).
pub fn scope_list(scopes: &[String], max: usize) -> String {
    let mut out = String::new();
    for scope in scopes.iter().filter(|s| is_scope_token(s)) {
        let needed = scope.len() + usize::from(!out.is_empty());
        if out.len() + needed > max {
            continue;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(scope);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(scopes: &[&str]) -> BTreeSet<String> {
        scopes.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn only_what_is_not_held_is_missing() {
        let needed = ["mcp:tools".to_owned(), "foo".to_owned()];
        let shortfall = ScopeShortfall::of(&held(&["foo"]), &needed).expect("a shortfall");
        assert_eq!(shortfall.missing, ["mcp:tools"]);
        assert_eq!(shortfall.requested(), ["foo", "mcp:tools"]);
        assert_eq!(ScopeShortfall::of(&held(&["foo", "mcp:tools"]), &needed), None);
    }

    #[test]
    fn the_description_names_the_missing_scope_before_the_held_ones() {
        let needed = ["mcp:tools".to_owned()];
        let text = ScopeShortfall::of(&held(&["foo"]), &needed).expect("a shortfall").describe();
        assert_eq!(text, "the token lacks the scope mcp:tools; ask for a token with it (this token has the scopes foo)");
    }

    #[test]
    fn the_held_scopes_are_filtered_and_capped() {
        let many: Vec<String> = (0..200).map(|i| format!("scope-{i:03}")).chain(["bad\"one".to_owned(), "new\nline".to_owned()]).collect();
        let held: BTreeSet<String> = many.into_iter().collect();
        let shortfall = ScopeShortfall::of(&held, &["mcp:tools".to_owned()]).expect("a shortfall");
        let text = shortfall.describe();
        assert!(text.starts_with("the token lacks the scope mcp:tools;"), "{text}");
        assert!(!text.contains('"') && !text.contains('\n'), "{text}");
        assert!(text.len() < HELD_MAX + 150 && text.contains("more)"), "{} bytes: {text}", text.len());
        assert_eq!(shortfall.describe_missing(), "the token lacks the scope mcp:tools");
        let hint = shortfall.hint(64);
        assert!(hint.ends_with(" mcp:tools") && hint.starts_with("scope-000 ") && hint.len() <= 64, "{hint}");
    }

    #[test]
    fn a_shortfall_without_missing_scopes_reads_well() {
        let text = ScopeShortfall::default().describe();
        assert!(text.starts_with("the token lacks a scope this request needs;"), "{text}");
    }
}
