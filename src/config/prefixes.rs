//! Upstream tool-name prefixes that can collide are refused when the settings are read (and
//! when the admin API defines an upstream, `upstream/stored.rs`): if one upstream's prefix
//! starts another's (`team_` and `team_wiki_`), `team_wiki_ok` could be either one's tool, and
//! which one served it would depend on listing order. An empty prefix starts every prefix, so
//! it is allowed only for the only upstream. What prefixes cannot rule out (an operator's
//! `tools.<name>.name` override, a tools file entry) is settled at run time: a served name
//! stays with its first owner (`upstream/names.rs`).

use super::upstreams::UpstreamSettings;

/// Why `a`'s and `b`'s tool names can collide (each `(name, effective prefix)`), or `None`.
pub fn clash(a: (&str, &str), b: (&str, &str)) -> Option<String> {
    let ((a, pa), (b, pb)) = (a, b);
    if !pa.starts_with(pb) && !pb.starts_with(pa) {
        return None;
    }
    if let Some(empty) = [a, b].into_iter().zip([pa, pb]).find_map(|(n, p)| p.is_empty().then_some(n)) {
        let other = if empty == a { b } else { a };
        return Some(format!(
            "the upstream {empty:?} has an empty prefix, so any of its tool names could be one of the upstream {other:?}'s; \
             an empty prefix works only for the only upstream"
        ));
    }
    let (short, long, short_p, long_p) = if pa.len() <= pb.len() { (a, b, pa, pb) } else { (b, a, pb, pa) };
    Some(format!(
        "the upstreams {short:?} (prefix {short_p:?}) and {long:?} (prefix {long_p:?}) can serve the same tool name: \
         {long_p}x could be {short:?}'s tool {:?} or {long:?}'s tool \"x\"",
        format!("{}x", &long_p[short_p.len()..])
    ))
}

/// Checks every pair of upstreams; `Err((key, reason))` names the prefix setting to change
/// (the later upstream's, by name), and the reason names both upstreams and both settings.
pub fn check(upstreams: &std::collections::BTreeMap<String, UpstreamSettings>) -> Result<(), (String, String)> {
    let prefixes: Vec<(&str, String)> = upstreams.iter().map(|(n, s)| (n.as_str(), s.prefix_for(n))).collect();
    for (i, (a, pa)) in prefixes.iter().enumerate() {
        for (b, pb) in &prefixes[i + 1..] {
            if let Some(why) = clash((a, pa), (b, pb)) {
                let (key_a, key_b) = (setting(a), setting(b));
                let reason = format!(
                    "{why}. Give one of them a prefix that neither starts nor is started by the other's: {key_b} or {key_a} \
                     (a prefix defaults to the upstream's name and '_')"
                );
                return Err((format!("upstreams.{b}.prefix"), reason));
            }
        }
    }
    Ok(())
}

/// `upstreams.<name>.prefix (TOOLGATE__UPSTREAMS__<NAME>__PREFIX)`.
fn setting(name: &str) -> String {
    format!("upstreams.{name}.prefix (TOOLGATE__UPSTREAMS__{}__PREFIX)", name.to_ascii_uppercase())
}

#[cfg(test)]
mod tests {
    use super::clash;

    #[test]
    fn a_prefix_that_starts_another_clashes_either_way_round() {
        assert!(clash(("team", "team_"), ("team_wiki", "team_wiki_")).is_some());
        assert!(clash(("team_wiki", "team_wiki_"), ("team", "team_")).is_some());
        assert!(clash(("a", "same_"), ("b", "same_")).is_some());
    }

    #[test]
    fn prefixes_that_only_share_a_start_do_not_clash() {
        assert_eq!(clash(("team", "team_"), ("teams", "teams_")), None);
        assert_eq!(clash(("wiki", "wiki."), ("wiki2", "wiki_")), None);
    }

    #[test]
    fn an_empty_prefix_clashes_with_any_other_and_is_named() {
        let why = clash(("all", ""), ("wiki", "wiki_")).expect("clash");
        assert!(why.contains("\"all\" has an empty prefix") && why.contains("\"wiki\""), "{why}");
    }
}
