//! Dynamic client registration (RFC 7591; CLR-20..26). Everything in a registration is
//! self-asserted: the client chooses its name, so the consent page labels it unverified, and
//! its `logo_uri` is not kept at all (a copied logo is the cheapest impersonation). A
//! client-supplied `client_id` or `client_secret` is ignored (RFC 9700 §4.15.1).
//!
//! Defaults follow RFC 7591 §2, except that a registration naming no authentication method
//! whose redirect URIs are all loopback or app schemes is registered as public (`none`): a
//! native app cannot keep a secret, and the response says what was registered (§3.2.1).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::db::StoredClient;
use super::metadata::{self, NAME_MAX_CHARS, TEXT_MAX_CHARS, display_text};
use super::redirect::{self, RedirectKind};
use super::{AuthMethod, Client, ClientKind, RegistrationError, SecretHash};
use crate::config::authserver::{AuthServerSettings, RegistrationMode, RegistrationSettings};

/// The largest registration body read (the HTTP layer caps it too).
pub const MAX_BODY: usize = 16 * 1024;
const ID_PREFIX: &str = "tgc_";
/// 16 random bytes, base64url: 22 characters.
const ID_RANDOM_LEN: usize = 22;
const DEFAULT_NAME: &str = "Unnamed client";

/// The metadata registered and stored (the `metadata` column), echoed in the response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(super) struct Registered {
    pub redirect_uris: Vec<String>,
    pub token_endpoint_auth_method: AuthMethod,
    pub grant_types: Vec<String>,
    pub response_types: Vec<String>,
    pub client_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub application_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_uri: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub software_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub software_version: Option<String>,
}

/// A registration with its new id and, for a confidential client, its secret (returned once).
pub(super) struct Issued {
    pub client_id: String,
    pub secret: Option<String>,
    pub metadata: Registered,
}

/// Whether `id` has the shape of an id this server generates (never `https://...`, CLR-03).
pub(super) fn is_generated_id(id: &str) -> bool {
    id.strip_prefix(ID_PREFIX)
        .is_some_and(|rest| rest.len() == ID_RANDOM_LEN && rest.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
}

/// Checks that registration is open to this caller: `token` mode wants the configured
/// initial access token as the bearer (compared as hashes, in constant time).
pub(super) fn authorize(settings: &RegistrationSettings, bearer: Option<&str>) -> Result<(), RegistrationError> {
    match settings.mode {
        RegistrationMode::Open => Ok(()),
        RegistrationMode::Off => {
            Err(RegistrationError { error: "access_denied", description: "dynamic client registration is turned off".into() })
        }
        RegistrationMode::Token => {
            let expected = settings.initial_access_token.as_ref().map(|t| SecretHash::of(t.expose()));
            let presented = bearer.map(SecretHash::of);
            match (expected, presented) {
                (Some(expected), Some(presented)) if expected.matches(&presented) => Ok(()),
                _ => Err(RegistrationError {
                    error: "invalid_token",
                    description: "registration requires a valid initial access token".into(),
                }),
            }
        }
    }
}

fn metadata_error(description: String) -> RegistrationError {
    RegistrationError { error: "invalid_client_metadata", description }
}

fn redirect_error(description: String) -> RegistrationError {
    RegistrationError { error: "invalid_redirect_uri", description }
}

/// Reads and checks a registration request body.
pub(super) fn parse(body: &[u8], settings: &AuthServerSettings) -> Result<Registered, RegistrationError> {
    if body.len() > MAX_BODY {
        return Err(metadata_error(format!("the registration body is larger than {MAX_BODY} bytes")));
    }
    let Ok(Value::Object(request)) = serde_json::from_slice::<Value>(body) else {
        return Err(metadata_error("the registration body must be a JSON object".into()));
    };
    let application_type = match metadata::string(&request, "application_type").map_err(metadata_error)? {
        None => None,
        Some(t @ ("web" | "native")) => Some(t.to_owned()),
        Some(_) => return Err(metadata_error("application_type must be web or native".into())),
    };
    let redirect_uris = redirect_uris(&request, settings, application_type.as_deref())?;
    let token_endpoint_auth_method = auth_method(&request, &redirect_uris, &settings.redirect_schemes)?;
    let text = |field: &str, max: usize| -> Result<Option<String>, RegistrationError> {
        let value = metadata::string(&request, field).map_err(metadata_error)?;
        Ok(value.map(|v| display_text(v, max)).filter(|v| !v.is_empty()))
    };
    Ok(Registered {
        grant_types: metadata::grant_types(&request).map_err(metadata_error)?,
        response_types: metadata::response_types(&request).map_err(metadata_error)?,
        client_name: text("client_name", NAME_MAX_CHARS)?.unwrap_or_else(|| DEFAULT_NAME.into()),
        client_uri: metadata::link(metadata::string(&request, "client_uri").map_err(metadata_error)?),
        scope: text("scope", TEXT_MAX_CHARS)?,
        software_id: text("software_id", NAME_MAX_CHARS)?,
        software_version: text("software_version", NAME_MAX_CHARS)?,
        redirect_uris,
        token_endpoint_auth_method,
        application_type,
    })
}

fn redirect_uris(
    request: &Map<String, Value>,
    settings: &AuthServerSettings,
    application_type: Option<&str>,
) -> Result<Vec<String>, RegistrationError> {
    let uris = metadata::strings(request, "redirect_uris").map_err(redirect_error)?;
    let uris = uris.filter(|u| !u.is_empty()).ok_or_else(|| redirect_error("redirect_uris is required (at least one)".into()))?;
    let max = settings.registration.max_redirect_uris;
    if uris.len() > max {
        return Err(redirect_error(format!("redirect_uris: at most {max} are accepted")));
    }
    for (i, uri) in uris.iter().enumerate() {
        let kind =
            redirect::check(uri, &settings.redirect_schemes).map_err(|reason| redirect_error(format!("redirect_uris[{i}]: {reason}")))?;
        if application_type == Some("web") && kind != RedirectKind::Https {
            return Err(redirect_error(format!(
                "redirect_uris[{i}]: a web application may register https redirect URIs only; register as application_type native for loopback or app schemes"
            )));
        }
    }
    Ok(uris)
}

fn auth_method(request: &Map<String, Value>, redirect_uris: &[String], schemes: &[String]) -> Result<AuthMethod, RegistrationError> {
    match metadata::string(request, "token_endpoint_auth_method").map_err(metadata_error)? {
        None if redirect::all_native(redirect_uris, schemes) => Ok(AuthMethod::None),
        None | Some("client_secret_basic") => Ok(AuthMethod::ClientSecretBasic),
        Some("client_secret_post") => Ok(AuthMethod::ClientSecretPost),
        Some("none") => Ok(AuthMethod::None),
        Some(_) => Err(metadata_error("token_endpoint_auth_method must be none, client_secret_basic or client_secret_post".into())),
    }
}

/// A new id (and secret, for a confidential client) for a checked registration.
pub(super) fn issue(metadata: Registered) -> Issued {
    let client_id = format!("{ID_PREFIX}{}", URL_SAFE_NO_PAD.encode(rand::random::<[u8; 16]>()));
    let secret = (metadata.token_endpoint_auth_method != AuthMethod::None).then(|| URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>()));
    Issued { client_id, secret, metadata }
}

impl Issued {
    /// The `metadata` column: what was registered, without id or secret.
    pub fn stored_metadata(&self) -> String {
        serde_json::to_string(&self.metadata).unwrap_or_default()
    }

    pub fn name(&self) -> &str {
        &self.metadata.client_name
    }

    /// The 201 body (RFC 7591 §3.2.1): the id, the secret if one was issued (never expiring),
    /// and every registered field.
    pub fn response(&self, now_ms: i64) -> Value {
        let mut body = serde_json::to_value(&self.metadata).unwrap_or_else(|_| json!({}));
        if let Some(fields) = body.as_object_mut() {
            fields.insert("client_id".into(), json!(self.client_id));
            fields.insert("client_id_issued_at".into(), json!(now_ms / 1000));
            if let Some(secret) = &self.secret {
                fields.insert("client_secret".into(), json!(secret));
                fields.insert("client_secret_expires_at".into(), json!(0));
            }
        }
        body
    }
}

/// The client a stored registration describes; `None` if the row cannot be read.
pub(super) fn client(client_id: &str, stored: &StoredClient) -> Option<Client> {
    let metadata: Registered = serde_json::from_str(&stored.metadata).ok()?;
    let secret_hash = match &stored.secret_hash {
        Some(hex) => Some(SecretHash::from_hex(hex)?),
        None => None,
    };
    Some(
        Client {
            client_id: client_id.to_owned(),
            name: metadata.client_name,
            kind: ClientKind::Registered,
            refresh_tokens: metadata.grant_types.iter().any(|g| g == "refresh_token"),
            redirect_uris: metadata.redirect_uris,
            auth_method: metadata.token_endpoint_auth_method,
            scopes: Vec::new(),
            logo_uri: None,
            client_uri: metadata.client_uri,
            fingerprint: String::new(),
            secret_hash,
        }
        .sealed(),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::config::Secret;

    fn settings() -> AuthServerSettings {
        AuthServerSettings { redirect_schemes: vec!["cursor://anysphere.cursor-mcp".into()], ..Default::default() }
    }

    fn register(body: Value) -> Result<Registered, RegistrationError> {
        parse(body.to_string().as_bytes(), &settings())
    }

    fn error_of(body: Value) -> &'static str {
        register(body).expect_err("refused").error
    }

    #[test]
    fn a_public_native_registration_is_accepted_with_defaults() {
        let r = register(json!({"redirect_uris": ["http://127.0.0.1/cb"], "client_name": "CLI", "token_endpoint_auth_method": "none"}))
            .expect("valid");
        assert_eq!(r.token_endpoint_auth_method, AuthMethod::None);
        assert_eq!((r.grant_types, r.response_types), (vec!["authorization_code".to_owned()], vec!["code".to_owned()]));
    }

    #[test]
    fn no_auth_method_with_only_native_redirects_is_public() {
        let r = register(json!({"redirect_uris": ["http://localhost/cb", "cursor://anysphere.cursor-mcp/oauth/callback"]})).expect("valid");
        assert_eq!(r.token_endpoint_auth_method, AuthMethod::None);
    }

    #[test]
    fn no_auth_method_with_an_https_redirect_defaults_to_client_secret_basic() {
        let r = register(json!({"redirect_uris": ["https://app.example.com/cb"]})).expect("valid");
        assert_eq!(r.token_endpoint_auth_method, AuthMethod::ClientSecretBasic);
    }

    #[test]
    fn a_missing_name_gets_a_default() {
        let r = register(json!({"redirect_uris": ["http://127.0.0.1/cb"]})).expect("valid");
        assert_eq!(r.client_name, DEFAULT_NAME);
    }

    #[test]
    fn bad_redirect_uris_are_invalid_redirect_uri() {
        for uri in ["http://evil.example/cb", "javascript:alert(1)", "https://a/cb#f", "https://*.a/cb"] {
            assert_eq!(error_of(json!({"redirect_uris": [uri]})), "invalid_redirect_uri", "{uri}");
        }
        assert_eq!(error_of(json!({})), "invalid_redirect_uri");
        assert_eq!(error_of(json!({"redirect_uris": "https://a/cb"})), "invalid_redirect_uri");
    }

    #[test]
    fn too_many_redirect_uris_are_refused() {
        let uris: Vec<String> = (0..500).map(|i| format!("https://a.example/cb{i}")).collect();
        let refused = register(json!({"redirect_uris": uris})).expect_err("refused");
        assert_eq!(refused.error, "invalid_redirect_uri");
        assert!(refused.description.contains("at most 10"), "{}", refused.description);
    }

    #[test]
    fn a_web_application_must_use_https_and_a_native_one_may_use_loopback() {
        assert_eq!(error_of(json!({"application_type": "web", "redirect_uris": ["http://localhost/cb"]})), "invalid_redirect_uri");
        assert!(register(json!({"application_type": "native", "redirect_uris": ["http://localhost/cb"]})).is_ok());
        assert_eq!(error_of(json!({"application_type": "desktop", "redirect_uris": ["http://localhost/cb"]})), "invalid_client_metadata");
    }

    #[test]
    fn an_unsupported_auth_method_is_invalid_client_metadata() {
        let refused = register(json!({"redirect_uris": ["https://a.example/cb"], "token_endpoint_auth_method": "private_key_jwt"}))
            .expect_err("refused");
        assert_eq!(refused.error, "invalid_client_metadata");
        assert!(refused.description.contains("token_endpoint_auth_method"));
    }

    #[test]
    fn a_body_that_is_not_an_object_or_too_large_is_refused() {
        assert_eq!(parse(b"[]", &settings()).expect_err("refused").error, "invalid_client_metadata");
        let huge = vec![b' '; MAX_BODY + 1];
        assert_eq!(parse(&huge, &settings()).expect_err("refused").error, "invalid_client_metadata");
    }

    #[test]
    fn a_client_supplied_id_and_logo_are_not_registered() {
        let r =
            register(json!({"client_id": "admin", "logo_uri": "https://cdn.example.com/l.png", "redirect_uris": ["http://127.0.0.1/cb"]}))
                .expect("valid");
        let response = issue(r).response(0);
        assert_ne!(response["client_id"], "admin");
        assert!(response.get("logo_uri").is_none());
    }

    #[test]
    fn generated_ids_have_the_tgc_shape_and_never_a_url_shape() {
        let issued = issue(register(json!({"redirect_uris": ["http://127.0.0.1/cb"]})).expect("valid"));
        assert!(is_generated_id(&issued.client_id) && !issued.client_id.starts_with("https://"), "{}", issued.client_id);
        assert!(!is_generated_id("tgc_short") && !is_generated_id("https://a/b"));
    }

    #[test]
    fn a_confidential_registration_gets_a_never_expiring_secret() {
        let issued = issue(
            register(json!({"redirect_uris": ["https://a.example/cb"], "token_endpoint_auth_method": "client_secret_post"}))
                .expect("valid"),
        );
        let response = issued.response(1_700_000_000_000);
        assert_eq!(response["client_secret_expires_at"], 0);
        assert_eq!(response["client_id_issued_at"], 1_700_000_000);
        assert_eq!(response["client_secret"].as_str().map(str::len), Some(43));
    }

    #[test]
    fn a_public_registration_gets_no_secret() {
        let issued = issue(register(json!({"redirect_uris": ["http://127.0.0.1/cb"]})).expect("valid"));
        let response = issued.response(0);
        assert!(response.get("client_secret").is_none() && response.get("client_secret_expires_at").is_none());
        assert_eq!(response["redirect_uris"], json!(["http://127.0.0.1/cb"]));
        assert_eq!(response["token_endpoint_auth_method"], "none");
    }

    #[test]
    fn registration_off_is_refused() {
        let off = RegistrationSettings { mode: RegistrationMode::Off, ..Default::default() };
        assert_eq!(authorize(&off, None).expect_err("refused").error, "access_denied");
    }

    #[test]
    fn token_mode_requires_the_exact_initial_access_token() {
        let token = RegistrationSettings {
            mode: RegistrationMode::Token,
            initial_access_token: Some(Secret::new("s3cret-initial-token".into())),
            ..Default::default()
        };
        assert!(authorize(&token, Some("s3cret-initial-token")).is_ok());
        for bad in [None, Some("s3cret-initial-toke"), Some("")] {
            assert_eq!(authorize(&token, bad).expect_err("refused").error, "invalid_token");
        }
    }

    #[test]
    fn a_stored_registration_reads_back_as_the_same_client() {
        let issued = issue(
            register(json!({"redirect_uris": ["https://a.example/cb"], "grant_types": ["authorization_code", "refresh_token"]}))
                .expect("valid"),
        );
        let secret = issued.secret.clone().expect("a secret");
        let stored = StoredClient { metadata: issued.stored_metadata(), secret_hash: Some(SecretHash::of(&secret).to_hex()) };
        let client = client(&issued.client_id, &stored).expect("readable");
        assert!(client.secret_matches(&secret) && !client.secret_matches("other"));
        assert!(client.refresh_tokens && client.kind == ClientKind::Registered);
    }
}
