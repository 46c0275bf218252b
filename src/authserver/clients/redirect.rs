//! Redirect URI rules (CLR-24, AUZ-04), the same for every kind of client.
//!
//! Registration: `https`; `http` only on a loopback host written `127.0.0.1`, `[::1]` or
//! `localhost` (RFC 8252 §7.3; `localhost` because Claude Code's document lists it); a
//! private-use scheme only when the operator listed its `scheme://host`
//! (`redirect_schemes`). Never a fragment, user info, `*`, or anything but printable ASCII:
//! the URI is compared as a string later, and whatever a parser would quietly drop or
//! rewrite (a tab, a newline) would make the string that matched differ from the one used.
//!
//! A request's redirect URI then matches a registered one byte for byte, except the port of a
//! loopback `http` URI, which native clients choose at run time. Both sides are split as raw
//! text, never through a URL parser, so no spelling that a parser normalizes (`0x7f.1`,
//! `LOCALHOST`, `%2e`) can match by accident.

/// The longest redirect URI accepted.
pub const MAX_LEN: usize = 2000;

const LOOPBACK_HOSTS: [&str; 3] = ["127.0.0.1", "[::1]", "localhost"];
const NEVER: [&str; 5] = ["javascript", "data", "file", "vbscript", "blob"];

/// What kind of redirect a valid URI is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedirectKind {
    Https,
    /// `http` on a loopback host: any port matches.
    Loopback,
    /// An operator-listed private-use scheme (a native app).
    AppScheme,
}

/// Checks a redirect URI for registration; `Err` says why, naming no field.
pub fn check(uri: &str, schemes: &[String]) -> Result<RedirectKind, String> {
    if uri.len() > MAX_LEN {
        return Err(format!("a redirect URI is longer than {MAX_LEN} bytes"));
    }
    if !uri.bytes().all(uri_byte) {
        return Err(
            "a redirect URI may hold only the characters RFC 3986 allows (percent-encode the rest; no spaces, backslashes or quotes)"
                .into(),
        );
    }
    if uri.contains('#') {
        return Err(format!("{uri} has a fragment, which a redirect URI must not have"));
    }
    if uri.contains('*') {
        return Err(format!("{uri} has a wildcard: redirect URIs are matched exactly"));
    }
    let Some((scheme, rest)) = uri.split_once("://") else {
        return Err(format!("{uri} is not an absolute URI"));
    };
    if NEVER.contains(&scheme.to_ascii_lowercase().as_str()) {
        return Err(format!("{uri}: the {scheme} scheme is never a redirect URI"));
    }
    let authority = authority(rest);
    if authority.contains('@') {
        return Err(format!("{uri} has user info, which a redirect URI must not have"));
    }
    let parsed = url::Url::parse(uri).map_err(|e| format!("{uri} is not a URI: {e}"))?;
    match scheme {
        "https" if parsed.host_str().is_some_and(|h| !h.is_empty()) => Ok(RedirectKind::Https),
        "http" if loopback_host(authority).is_some() => Ok(RedirectKind::Loopback),
        "http" => Err(format!("{uri}: http is allowed only on 127.0.0.1, [::1] or localhost; use https")),
        _ if listed_scheme(uri, schemes) => Ok(RedirectKind::AppScheme),
        _ => Err(format!(
            "{uri}: redirect URIs must be https, or http on a loopback host; an app scheme only when the operator lists its scheme://host"
        )),
    }
}

/// Whether a request's `requested` redirect URI matches the registered `registered`.
pub fn matches(registered: &str, requested: &str) -> bool {
    if registered == requested {
        return true;
    }
    let (Some(reg), Some(req)) = (registered.strip_prefix("http://"), requested.strip_prefix("http://")) else {
        return false;
    };
    let (reg_authority, req_authority) = (authority(reg), authority(req));
    let (Some(reg_host), Some(req_host)) = (loopback_host(reg_authority), loopback_host(req_authority)) else {
        return false;
    };
    reg_host == req_host && reg[reg_authority.len()..] == req[req_authority.len()..]
}

/// Whether `uri` is an `http` redirect to a loopback host (any port).
pub fn is_loopback(uri: &str) -> bool {
    uri.strip_prefix("http://").is_some_and(|rest| loopback_host(authority(rest)).is_some())
}

/// Whether every one of `uris` is a loopback or app-scheme redirect (a native client's).
pub fn all_native(uris: &[String], schemes: &[String]) -> bool {
    uris.iter().all(|u| matches!(check(u, schemes), Ok(RedirectKind::Loopback | RedirectKind::AppScheme)))
}

/// A byte RFC 3986 allows in a URI (unreserved, reserved, `%`). Anything else (a backslash,
/// a quote, `<`) is read differently by different parsers, or breaks out of where a page
/// shows the URI.
pub(super) fn uri_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~:/?#[]@!$&'()*+,;=%".contains(&b)
}

/// The authority of `rest` (what follows `scheme://`): up to the first `/`, `?` or `#`.
fn authority(rest: &str) -> &str {
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    &rest[..end]
}

/// The loopback host of an authority written exactly `host` or `host:port` (port digits,
/// 1..=65535), or `None`.
fn loopback_host(authority: &str) -> Option<&'static str> {
    LOOPBACK_HOSTS.into_iter().find(|host| match authority.strip_prefix(host) {
        Some("") => true,
        Some(port) => port.strip_prefix(':').is_some_and(valid_port),
        None => false,
    })
}

fn valid_port(port: &str) -> bool {
    port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit()) && port.parse::<u16>().is_ok_and(|p| p > 0)
}

/// Whether `uri` starts with a listed `scheme://host` followed by a path, query or nothing.
fn listed_scheme(uri: &str, schemes: &[String]) -> bool {
    schemes.iter().any(|entry| uri.strip_prefix(entry.as_str()).is_some_and(|rest| rest.is_empty() || rest.starts_with(['/', '?'])))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schemes() -> Vec<String> {
        vec!["cursor://anysphere.cursor-mcp".into()]
    }

    fn refused(uri: &str) -> bool {
        check(uri, &schemes()).is_err()
    }

    #[test]
    fn https_and_loopback_http_are_accepted() {
        assert_eq!(check("https://app.example.com/cb?x=1", &[]), Ok(RedirectKind::Https));
        for uri in ["http://127.0.0.1/cb", "http://[::1]:8080/cb", "http://localhost:3000/callback"] {
            assert_eq!(check(uri, &[]), Ok(RedirectKind::Loopback), "{uri}");
        }
    }

    #[test]
    fn http_off_loopback_is_refused() {
        for uri in ["http://evil.example/cb", "http://127.0.0.1.evil.com/cb", "http://localhost.evil.com/cb", "http://LOCALHOST/cb"] {
            assert!(refused(uri), "{uri}");
        }
    }

    #[test]
    fn dangerous_schemes_are_refused_even_when_listed() {
        let listed = vec!["javascript://x".to_owned()];
        for uri in ["javascript://x/alert(1)", "data://x/y", "file:///etc/passwd", "vbscript://x/y", "JavaScript://x/y"] {
            assert!(check(uri, &listed).is_err(), "{uri}");
        }
    }

    #[test]
    fn fragments_wildcards_and_user_info_are_refused() {
        for uri in [
            "https://a.example/cb#f",
            "https://a.example/cb#",
            "https://*.a.example/cb",
            "https://user@a.example/cb",
            "http://x@127.0.0.1/cb",
        ] {
            assert!(refused(uri), "{uri}");
        }
    }

    #[test]
    fn spaces_and_control_characters_are_refused() {
        assert!(refused("https://a.example/c b"));
        assert!(refused("https://a.example/c\tb"));
    }

    #[test]
    fn backslashes_quotes_and_angle_brackets_are_refused() {
        for uri in ["https://good.example\\.evil.example/cb", "https://a.example/c\"b", "https://a.example/<cb>", "https://a.example/c`b"] {
            assert!(refused(uri), "{uri}");
        }
    }

    #[test]
    fn an_app_scheme_is_accepted_only_when_its_scheme_and_host_are_listed() {
        assert_eq!(check("cursor://anysphere.cursor-mcp/oauth/callback", &schemes()), Ok(RedirectKind::AppScheme));
        assert!(refused("cursor://anysphere.cursor-mcp.evil/oauth/callback"));
        assert!(refused("cursor://other/oauth/callback"));
        assert!(refused("claude://claude.ai/cb"));
    }

    #[test]
    fn loopback_is_http_on_a_loopback_host_only() {
        assert!(is_loopback("http://localhost:8080/cb") && is_loopback("http://[::1]/cb"));
        assert!(!is_loopback("https://127.0.0.1/cb") && !is_loopback("http://127.0.0.1.evil.com/cb"));
    }

    #[test]
    fn the_same_string_matches() {
        assert!(matches("https://a.example/cb", "https://a.example/cb"));
    }

    #[test]
    fn a_different_path_query_host_or_scheme_case_does_not_match() {
        let registered = "https://a.example/cb";
        for requested in [
            "https://a.example/cb2",
            "https://a.example/cb/",
            "https://a.example/cb?x=1",
            "https://b.example/cb",
            "HTTPS://a.example/cb",
            "https://a.example:443/cb",
        ] {
            assert!(!matches(registered, requested), "{requested}");
        }
    }

    #[test]
    fn a_loopback_redirect_matches_any_port() {
        assert!(matches("http://127.0.0.1/cb", "http://127.0.0.1:54321/cb"));
        assert!(matches("http://127.0.0.1:3000/cb", "http://127.0.0.1:54321/cb"));
        assert!(matches("http://127.0.0.1:3000/cb", "http://127.0.0.1/cb"));
        assert!(matches("http://[::1]/cb?x=1", "http://[::1]:8080/cb?x=1"));
        assert!(matches("http://localhost/callback", "http://localhost:61234/callback"));
    }

    #[test]
    fn a_loopback_redirect_still_matches_path_and_query_exactly() {
        for requested in
            ["http://127.0.0.1:54321/cb2", "http://127.0.0.1:54321/cb/", "http://127.0.0.1:54321/cb?x=1", "http://127.0.0.1:54321/CB"]
        {
            assert!(!matches("http://127.0.0.1/cb", requested), "{requested}");
        }
    }

    #[test]
    fn loopback_hosts_do_not_match_each_other() {
        assert!(!matches("http://127.0.0.1/cb", "http://localhost:5000/cb"));
        assert!(!matches("http://localhost/cb", "http://127.0.0.1:5000/cb"));
        assert!(!matches("http://[::1]/cb", "http://127.0.0.1:5000/cb"));
    }

    #[test]
    fn look_alike_loopback_hosts_do_not_match() {
        for requested in [
            "http://127.0.0.1.evil.com/cb",
            "http://127.0.0.1.evil.com:5000/cb",
            "http://localhost.evil.com:5000/cb",
            "http://127.0.0.1:5000@evil.com/cb",
            "http://127.0.0.1:/cb",
            "http://127.0.0.1:99999/cb",
            "http://127.0.0.1:0x50/cb",
            "http://0x7f.1:5000/cb",
            "https://127.0.0.1:5000/cb",
        ] {
            assert!(!matches("http://127.0.0.1/cb", requested), "{requested}");
        }
    }

    #[test]
    fn the_port_rule_is_for_loopback_http_only() {
        assert!(!matches("https://a.example/cb", "https://a.example:8443/cb"));
        assert!(!matches("http://localhost/cb", "https://localhost:8443/cb"));
    }
}
