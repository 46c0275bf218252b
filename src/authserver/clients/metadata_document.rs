//! Client ID Metadata Documents (CLR-10, CLR-12): which client ids are document URLs, and
//! what a fetched document must say. The fetch itself is `fetch.rs`.
//!
//! A document URL must be in canonical form (what the URL parser would write back), so one
//! client has exactly one id: no second spelling of the same document (`HTTPS://`, `:443`,
//! `%7E`) gets a consent of its own.

use serde_json::{Map, Value};

use super::metadata::{self, NAME_MAX_CHARS, display_text};
use super::redirect;
use super::{AuthMethod, Client, ClientKind};
use crate::config::authserver::MetadataDocumentSettings;

/// The longest document URL accepted.
const URL_MAX: usize = 2000;
/// The most redirect URIs a document may list (a real client lists a handful).
const MAX_REDIRECT_URIS: usize = 20;

/// Whether `client_id` is meant as a document URL: it names an `http` or `https` scheme
/// (`http` only to be refused with a reason rather than as unknown).
pub fn is_url_form(client_id: &str) -> bool {
    let lower = client_id.get(..8).unwrap_or(client_id).to_ascii_lowercase();
    lower.starts_with("https://") || lower.starts_with("http://")
}

/// Checks a document URL's shape before anything is fetched; `Err` says why.
pub fn check_url(client_id: &str, settings: &MetadataDocumentSettings) -> Result<url::Url, String> {
    if !settings.enabled {
        return Err("client metadata documents are turned off on this server".into());
    }
    if client_id.len() > URL_MAX {
        return Err(format!("the client_id URL is longer than {URL_MAX} bytes"));
    }
    let Some(rest) = client_id.strip_prefix("https://") else {
        return Err("a client_id URL must use https".into());
    };
    let raw_path = rest.find('/').map_or("", |at| &rest[at..]);
    if rest[..rest.len() - raw_path.len()].contains('@') {
        return Err("a client_id URL must not have user info".into());
    }
    if client_id.contains('#') || client_id.contains('?') {
        return Err("a client_id URL must not have a query or fragment".into());
    }
    if raw_path.split('/').any(dot_segment) {
        return Err("a client_id URL must not have . or .. path segments".into());
    }
    let url = url::Url::parse(client_id).map_err(|_| "the client_id is not a valid URL".to_owned())?;
    if url.as_str() != client_id {
        return Err(
            "the client_id URL is not in canonical form (lower-case host, no default port, percent-encoded as a URL parser writes it)"
                .into(),
        );
    }
    if url.path() == "/" {
        return Err("a client_id URL must have a path (e.g. /oauth/client.json)".into());
    }
    let host = url.host_str().unwrap_or_default();
    if !settings.hosts.iter().any(|h| h == "*" || h.eq_ignore_ascii_case(host)) {
        return Err("this server does not accept client metadata documents from that host".into());
    }
    Ok(url)
}

fn dot_segment(segment: &str) -> bool {
    let decoded = segment.to_ascii_lowercase().replace("%2e", ".");
    decoded == "." || decoded == ".."
}

/// Validates a fetched document for `client_id` and makes the client it describes.
pub fn parse(client_id: &str, body: &[u8], redirect_schemes: &[String]) -> Result<Client, String> {
    let value: Value = serde_json::from_slice(body).map_err(|_| "the document is not valid JSON".to_owned())?;
    let Value::Object(doc) = value else {
        return Err("the document is not a JSON object".into());
    };
    if metadata::string(&doc, "client_id")? != Some(client_id) {
        return Err("the document's client_id is not exactly the URL it was fetched from".into());
    }
    check_auth_method(&doc)?;
    let name = metadata::string(&doc, "client_name")?.map(|n| display_text(n, NAME_MAX_CHARS)).filter(|n| !n.is_empty());
    let name = name.ok_or("the document has no client_name")?;
    let redirect_uris = redirect_uris(&doc, redirect_schemes)?;
    let grants = metadata::grant_types(&doc)?;
    metadata::response_types(&doc)?;
    // No grant_types: RFC 7591's default is authorization_code alone, but documents rarely
    // say, and refusing refresh tokens would send every such client back to sign in hourly.
    let refresh_tokens = doc.get("grant_types").is_none() || grants.iter().any(|g| g == "refresh_token");
    Ok(Client {
        client_id: client_id.to_owned(),
        name,
        kind: ClientKind::MetadataDocument,
        redirect_uris,
        auth_method: AuthMethod::None,
        scopes: Vec::new(),
        logo_uri: metadata::link(metadata::string(&doc, "logo_uri").ok().flatten()),
        client_uri: metadata::link(metadata::string(&doc, "client_uri").ok().flatten()),
        refresh_tokens,
        fingerprint: String::new(),
        secret_hash: None,
    }
    .sealed())
}

/// Shared secrets cannot be kept secret in a public document (CIMD-00 §4.1); `private_key_jwt`
/// is allowed by the draft but not implemented here, so it is refused rather than ignored.
fn check_auth_method(doc: &Map<String, Value>) -> Result<(), String> {
    if doc.contains_key("client_secret") || doc.contains_key("client_secret_expires_at") {
        return Err("the document must not contain client_secret or client_secret_expires_at".into());
    }
    match metadata::string(doc, "token_endpoint_auth_method")? {
        None | Some("none") => Ok(()),
        Some("client_secret_basic" | "client_secret_post" | "client_secret_jwt") => {
            Err("token_endpoint_auth_method must not be a shared-secret method in a metadata document; use none".into())
        }
        Some("private_key_jwt") => {
            Err("token_endpoint_auth_method private_key_jwt is not supported by this server; use none (PKCE)".into())
        }
        Some(_) => Err("token_endpoint_auth_method is not supported; use none".into()),
    }
}

fn redirect_uris(doc: &Map<String, Value>, schemes: &[String]) -> Result<Vec<String>, String> {
    let uris = metadata::strings(doc, "redirect_uris")?.filter(|u| !u.is_empty()).ok_or("the document has no redirect_uris")?;
    if uris.len() > MAX_REDIRECT_URIS {
        return Err(format!("the document lists more than {MAX_REDIRECT_URIS} redirect_uris"));
    }
    for uri in &uris {
        redirect::check(uri, schemes).map_err(|reason| format!("redirect_uris: {reason}"))?;
    }
    Ok(uris)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const ID: &str = "https://client.example.com/oauth/client.json";

    fn settings() -> MetadataDocumentSettings {
        MetadataDocumentSettings::default()
    }

    fn doc() -> Value {
        json!({"client_id": ID, "client_name": "Example", "redirect_uris": ["http://localhost/callback", "https://client.example.com/cb"]})
    }

    fn parse_value(value: &Value) -> Result<Client, String> {
        parse(ID, value.to_string().as_bytes(), &[])
    }

    fn without(field: &str) -> Value {
        let mut value = doc();
        value.as_object_mut().expect("object").remove(field);
        value
    }

    fn with(field: &str, extra: Value) -> Value {
        let mut value = doc();
        value.as_object_mut().expect("object").insert(field.into(), extra);
        value
    }

    #[test]
    fn an_https_url_with_a_path_is_a_document_url() {
        assert_eq!(check_url(ID, &settings()).map(String::from), Ok(ID.to_owned()));
        assert!(check_url("https://client.example.com:8443/c", &settings()).is_ok());
    }

    #[test]
    fn only_http_and_https_ids_are_taken_as_urls() {
        assert!(is_url_form(ID) && is_url_form("http://x/y") && is_url_form("HTTPS://x/y"));
        assert!(!is_url_form("tgc_abc") && !is_url_form("my-app") && !is_url_form("cursor://x"));
    }

    #[test]
    fn a_badly_shaped_document_url_is_refused() {
        for bad in [
            "http://client.example.com/c.json",
            "https://client.example.com",
            "https://client.example.com/",
            "https://client.example.com/c.json#f",
            "https://user@client.example.com/c.json",
            "https://client.example.com/a/../c.json",
            "https://client.example.com/a/./c.json",
            "https://client.example.com/a/%2E%2e/c.json",
            "https://client.example.com/c.json?x=1",
            "https://Client.example.com/c.json",
            "https://client.example.com:443/c.json",
        ] {
            assert!(check_url(bad, &settings()).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_host_outside_the_allowed_hosts_is_refused() {
        let mut s = settings();
        s.hosts = vec!["claude.ai".into()];
        assert!(check_url(ID, &s).is_err());
        assert!(check_url("https://claude.ai/oauth/claude-code-client-metadata", &s).is_ok());
    }

    #[test]
    fn documents_can_be_turned_off() {
        let mut s = settings();
        s.enabled = false;
        assert!(check_url(ID, &s).is_err());
    }

    #[test]
    fn a_valid_document_makes_a_public_client() {
        let client = parse_value(&doc()).expect("valid");
        assert_eq!((client.kind, client.auth_method, client.name.as_str()), (ClientKind::MetadataDocument, AuthMethod::None, "Example"));
        assert!(client.refresh_tokens && client.secret_hash.is_none() && !client.fingerprint.is_empty());
    }

    #[test]
    fn a_document_that_is_not_a_json_object_is_refused() {
        assert!(parse(ID, b"{not json", &[]).is_err());
        assert!(parse(ID, b"[1]", &[]).is_err());
    }

    #[test]
    fn a_client_id_differing_by_a_slash_or_case_is_refused() {
        for other in [format!("{ID}/"), ID.replace("client.example", "Client.example"), ID.replace("https", "http")] {
            assert!(parse_value(&with("client_id", json!(other))).is_err(), "{other}");
        }
    }

    #[test]
    fn a_missing_name_or_redirect_uris_is_refused() {
        assert!(parse_value(&without("client_name")).is_err());
        assert!(parse_value(&with("client_name", json!(" \n "))).is_err());
        assert!(parse_value(&without("redirect_uris")).is_err());
        assert!(parse_value(&with("redirect_uris", json!([]))).is_err());
    }

    #[test]
    fn shared_secret_methods_and_secrets_are_refused() {
        for method in ["client_secret_basic", "client_secret_post", "client_secret_jwt"] {
            assert!(parse_value(&with("token_endpoint_auth_method", json!(method))).is_err(), "{method}");
        }
        assert!(parse_value(&with("client_secret", json!("s"))).is_err());
        assert!(parse_value(&with("client_secret_expires_at", json!(0))).is_err());
    }

    #[test]
    fn private_key_jwt_is_refused_as_not_supported() {
        let reason = parse_value(&with("token_endpoint_auth_method", json!("private_key_jwt"))).expect_err("refused");
        assert!(reason.contains("not supported"), "{reason}");
        assert!(parse_value(&with("token_endpoint_auth_method", json!("none"))).is_ok());
    }

    #[test]
    fn a_bad_redirect_uri_in_the_document_is_refused() {
        assert!(parse_value(&with("redirect_uris", json!(["http://evil.example/cb"]))).is_err());
    }

    #[test]
    fn grant_and_response_types_must_allow_the_code_flow() {
        assert!(parse_value(&with("grant_types", json!(["client_credentials"]))).is_err());
        assert!(parse_value(&with("response_types", json!(["token"]))).is_err());
        let no_refresh = parse_value(&with("grant_types", json!(["authorization_code"]))).expect("valid");
        assert!(!no_refresh.refresh_tokens);
    }

    #[test]
    fn the_name_is_cleaned_and_capped() {
        let client = parse_value(&with("client_name", json!(format!("A\u{202e}B{}", "x".repeat(500))))).expect("valid");
        assert!(client.name.starts_with("A B") && client.name.chars().count() == 200);
    }

    #[test]
    fn a_logo_on_a_private_address_or_plain_http_is_dropped() {
        let logo = |uri: &str| parse_value(&with("logo_uri", json!(uri))).expect("valid").logo_uri;
        assert_eq!(logo("https://cdn.example.com/l.png").as_deref(), Some("https://cdn.example.com/l.png"));
        assert_eq!(logo("https://10.0.0.5/l.png"), None);
        assert_eq!(logo("http://cdn.example.com/l.png"), None);
    }

    #[test]
    fn a_request_redirect_not_listed_in_the_document_is_not_allowed() {
        let client = parse_value(&doc()).expect("valid");
        assert!(client.redirect_allowed("http://localhost:61234/callback"));
        assert!(!client.redirect_allowed("https://client.example.com/other"));
        assert!(!client.redirect_allowed("http://127.0.0.1:61234/callback"));
    }
}
