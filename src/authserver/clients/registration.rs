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
mod tests {}
