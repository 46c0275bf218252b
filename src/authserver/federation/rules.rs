//! From verified ID token claims to what toolgate keeps: the scope rules (FED-21: scopes come
//! from local policy, never from the provider's `scp`/`scope`), the groups, and the display
//! text, each capped because the provider's directory is outside toolgate's control.

use serde_json::Value;

use crate::config::authserver::ScopeRule;

/// Longest email, name or group kept, in characters.
pub const MAX_TEXT: usize = 256;
/// Most groups kept; Entra ID itself stops at 200 in a token.
pub const MAX_GROUPS: usize = 200;

/// The claim at a dotted path (`realm_access.roles`); a claim whose own name contains dots
/// (Auth0's namespaced `https://example.com/roles`) is found by its whole name first.
pub fn claim<'a>(claims: &'a Value, path: &str) -> Option<&'a Value> {
    if let Some(value) = claims.get(path) {
        return Some(value);
    }
    path.split('.').try_fold(claims, |value, key| value.get(key))
}

/// Whether the claim holds one of `values`: a string equal to one, or a list containing one.
fn holds_one_of(value: &Value, values: &[String]) -> bool {
    match value {
        Value::String(s) => values.iter().any(|v| v == s),
        Value::Array(items) => items.iter().filter_map(Value::as_str).any(|s| values.iter().any(|v| v == s)),
        _ => false,
    }
}

fn matches(rule: &ScopeRule, claims: &Value) -> bool {
    match &rule.claim {
        None => true,
        Some(path) => claim(claims, path).is_some_and(|value| holds_one_of(value, &rule.values)),
    }
}

/// The union of the scopes of every rule that matches, in rule order, each once.
pub fn scopes(rules: &[ScopeRule], claims: &Value) -> Vec<String> {
    let mut granted: Vec<String> = Vec::new();
    for scope in rules.iter().filter(|rule| matches(rule, claims)).flat_map(|rule| &rule.scopes) {
        if !granted.contains(scope) {
            granted.push(scope.clone());
        }
    }
    granted
}

/// The groups or roles in any of `paths`, each once; over-long names are dropped rather than
/// cut (a cut name could equal another group's).
pub fn groups(claims: &Value, paths: &[String]) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let values = paths.iter().filter_map(|path| claim(claims, path)).flat_map(|value| match value {
        Value::Array(items) => items.iter().collect(),
        single => vec![single],
    });
    for group in values.filter_map(Value::as_str).filter(|g| !g.is_empty() && g.chars().count() <= MAX_TEXT) {
        if found.len() == MAX_GROUPS {
            break;
        }
        if !found.iter().any(|f| f == group) {
            found.push(group.to_owned());
        }
    }
    found
}

/// A string claim for display, cut to [`MAX_TEXT`] characters.
pub fn display_text(claims: &Value, name: &str) -> Option<String> {
    let text = claims.get(name)?.as_str()?.trim();
    (!text.is_empty()).then(|| text.chars().take(MAX_TEXT).collect())
}

/// The verified email, when the claims say it is verified and it is short enough to be real.
/// Entra ID sends no `email_verified`; its `xms_edov` says the domain's owner verified it.
pub fn verified_email(claims: &Value, entra: bool) -> Option<String> {
    let verified = claims.get("email_verified").and_then(Value::as_bool).unwrap_or(false)
        || entra && claims.get("xms_edov").and_then(Value::as_bool).unwrap_or(false);
    let email = claims.get("email")?.as_str()?;
    (verified && email.chars().count() <= MAX_TEXT).then(|| email.to_owned())
}

/// The domain of an email address, lowercased.
pub fn email_domain(email: &str) -> Option<String> {
    let (local, domain) = email.rsplit_once('@')?;
    (!local.is_empty() && !domain.is_empty()).then(|| domain.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rule(claim: Option<&str>, values: &[&str], scopes: &[&str]) -> ScopeRule {
        ScopeRule {
            claim: claim.map(str::to_owned),
            values: values.iter().map(|v| (*v).to_owned()).collect(),
            scopes: scopes.iter().map(|v| (*v).to_owned()).collect(),
        }
    }

    #[test]
    fn a_string_claim_equal_to_a_value_matches() {
        let rules = [rule(Some("department"), &["eng"], &["mcp:tools"])];
        assert_eq!(scopes(&rules, &json!({"department": "eng"})), ["mcp:tools"]);
    }

    #[test]
    fn an_array_claim_containing_a_value_matches() {
        let rules = [rule(Some("groups"), &["admins"], &["mcp:admin"])];
        assert_eq!(scopes(&rules, &json!({"groups": ["users", "admins"]})), ["mcp:admin"]);
    }

    #[test]
    fn a_dotted_path_reaches_a_nested_claim() {
        let rules = [rule(Some("realm_access.roles"), &["ops"], &["mcp:ops"])];
        assert_eq!(scopes(&rules, &json!({"realm_access": {"roles": ["ops"]}})), ["mcp:ops"]);
    }

    #[test]
    fn a_claim_named_with_dots_is_found_by_its_whole_name() {
        let rules = [rule(Some("https://example.com/roles"), &["r"], &["mcp:r"])];
        assert_eq!(scopes(&rules, &json!({"https://example.com/roles": ["r"]})), ["mcp:r"]);
    }

    #[test]
    fn a_rule_without_a_claim_matches_everyone() {
        assert_eq!(scopes(&[rule(None, &[], &["mcp:tools"])], &json!({})), ["mcp:tools"]);
    }

    #[test]
    fn no_matching_rule_grants_no_scopes() {
        let rules = [rule(Some("groups"), &["admins"], &["mcp:admin"])];
        assert!(scopes(&rules, &json!({"groups": ["users"]})).is_empty());
    }

    #[test]
    fn matching_rules_grant_the_union_once_each() {
        let rules = [rule(None, &[], &["a", "b"]), rule(Some("g"), &["x"], &["b", "c"])];
        assert_eq!(scopes(&rules, &json!({"g": "x"})), ["a", "b", "c"]);
    }

    #[test]
    fn the_providers_scope_claims_grant_nothing() {
        let rules = [rule(Some("groups"), &["admins"], &["mcp:admin"])];
        assert!(scopes(&rules, &json!({"scp": "mcp:admin", "scope": "mcp:admin"})).is_empty());
    }

    #[test]
    fn a_non_string_claim_does_not_match() {
        let rules = [rule(Some("admin"), &["true"], &["mcp:admin"])];
        assert!(scopes(&rules, &json!({"admin": true})).is_empty());
    }

    #[test]
    fn groups_are_capped_in_number() {
        let many: Vec<String> = (0..500).map(|i| format!("g{i}")).collect();
        assert_eq!(groups(&json!({ "groups": many }), &["groups".into()]).len(), MAX_GROUPS);
    }

    #[test]
    fn an_over_long_group_is_dropped() {
        let long = "g".repeat(MAX_TEXT + 1);
        assert_eq!(groups(&json!({"groups": [long, "ok"]}), &["groups".into()]), ["ok"]);
    }

    #[test]
    fn display_text_is_cut() {
        let name = "n".repeat(1000);
        assert_eq!(display_text(&json!({ "name": name }), "name").map(|n| n.chars().count()), Some(MAX_TEXT));
    }

    #[test]
    fn an_unverified_email_is_not_used() {
        assert_eq!(verified_email(&json!({"email": "a@b.c", "email_verified": false}), false), None);
    }

    #[test]
    fn entra_domain_owner_verification_counts() {
        assert_eq!(verified_email(&json!({"email": "a@b.c", "xms_edov": true}), true).as_deref(), Some("a@b.c"));
    }
}
