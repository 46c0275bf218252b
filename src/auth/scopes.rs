//! What a token lacks for a request ([`ScopeShortfall`]): the scopes missing, named first in
//! every refusal, and the scopes the token holds, which the challenge's `scope` hint keeps.

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

    /// For people: the missing scopes first, then what the token has, labelled as such.
    pub fn describe(&self) -> String {
        let (noun, them) = if self.missing.len() == 1 { ("scope", "it") } else { ("scopes", "them") };
        let has = if self.held.is_empty() { "no scopes".to_owned() } else { format!("the scopes {}", self.held.join(" ")) };
        format!("the token lacks the {noun} {}; ask for a token with {them} (this token has {has})", self.missing.join(" "))
    }
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
}
