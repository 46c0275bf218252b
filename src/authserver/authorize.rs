//! The checks of an authorization request (`/oauth/authorize`), in the order that never
//! sends a browser to an unverified URI (AUZ-01): first `client_id` and `redirect_uri`, whose
//! failures are shown on an error page, then everything else, whose failures go back to the
//! client's redirect URI with `error`, `state` and `iss`.

use std::sync::Arc;

use super::clients::{Client, ClientError, Clients};

/// A request that passed every check: what the transaction keeps until the code is issued.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct ValidRequest {
    pub client_id: String,
    pub redirect_uri: String,
    pub code_challenge: String,
    pub resource: String,
    /// The scopes asked for; `None`: everything the user may have.
    pub scope: Option<Vec<String>>,
    pub state: Option<String>,
    /// `prompt=consent`: ask even when consent is remembered.
    pub force_consent: bool,
}

/// Why a request was refused.
#[derive(Debug)]
pub enum Refused {
    /// Shown on an error page; the browser stays here (unknown client, bad redirect URI).
    Page(String),
    /// Sent back to the client's verified redirect URI.
    Redirect { redirect_uri: String, error: &'static str, description: String, state: Option<String>, trusted: bool },
}

/// The request's parameters, repeated ones kept so they can be refused.
pub struct Params<'a>(pub &'a [(String, String)]);

impl Params<'_> {
    /// A parameter's value: `Ok(None)` when absent or empty (OA21 §3.1), `Err` when repeated.
    fn one(&self, name: &str) -> Result<Option<&str>, String> {
        let mut found = self.0.iter().filter(|(k, v)| k == name && !v.is_empty());
        match (found.next(), found.next()) {
            (Some(_), Some(_)) => Err(format!("the {name} parameter is repeated")),
            (first, _) => Ok(first.map(|(_, v)| v.as_str())),
        }
    }
}

/// Checks a request against the clients and this server's resources.
/// Longest `state` and `scope` accepted: both are stored with the transaction, before the
/// user has done anything, so their size is the attacker's to choose otherwise.
pub const MAX_STATE_BYTES: usize = 1024;
pub const MAX_SCOPE_BYTES: usize = 1024;

pub async fn check(
    params: Params<'_>,
    clients: &Clients,
    resources: &[String],
    issuer: &str,
) -> Result<(ValidRequest, Arc<Client>), Refused> {
    let client_id =
        params.one("client_id").map_err(Refused::Page)?.ok_or_else(|| Refused::Page("the client_id parameter is missing".into()))?;
    let client = clients.resolve(client_id).await.map_err(|e| match e {
        ClientError::Unknown => Refused::Page("this application (client_id) is not known to this server; it must register first".into()),
        ClientError::Document(why) => {
            // The reason stays in the log: on the page it would tell anyone which internal
            // names exist (a private address versus a name that does not resolve).
            tracing::info!(client_id, reason = %why, "authorization server: a client metadata document was refused");
            Refused::Page("this application's metadata document could not be fetched or is not valid (the server logged why)".into())
        }
        ClientError::Database(_) => Refused::Page("the server cannot look up this application right now; try again".into()),
    })?;
    let redirect_uri = match params.one("redirect_uri").map_err(Refused::Page)? {
        Some(uri) => uri.to_owned(),
        // OA21 §2.3.2: may be omitted only when exactly one is registered.
        None if client.redirect_uris.len() == 1 => client.redirect_uris[0].clone(),
        None => return Err(Refused::Page("the redirect_uri parameter is missing".into())),
    };
    if !client.redirect_allowed(&redirect_uri) {
        return Err(Refused::Page("the redirect_uri is not one this application registered".into()));
    }
    // A redirect back into this server would make its own pages navigate same-origin and so
    // pass for a request the user started (CON-05).
    if url::Url::parse(&redirect_uri).is_ok_and(|u| url::Url::parse(issuer).is_ok_and(|i| i.origin() == u.origin())) {
        return Err(Refused::Page("the redirect_uri points at this server itself, which is not allowed".into()));
    }
    if params.one("state").ok().flatten().is_some_and(|s| s.len() > MAX_STATE_BYTES) {
        return Err(Refused::Page(format!("the state parameter is longer than {MAX_STATE_BYTES} bytes")));
    }
    let state = params.one("state").ok().flatten().map(str::to_owned);
    // AUZ-11: only the operator's own clients are sent back without the user's say.
    let trusted = client.kind == super::clients::ClientKind::Settings;
    let redirect = |error: &'static str, description: String| Refused::Redirect {
        redirect_uri: redirect_uri.clone(),
        error,
        description,
        state: state.clone(),
        trusted,
    };
    let rest = rest_of_request(&params, resources).map_err(|(error, why)| redirect(error, why))?;
    let valid = ValidRequest {
        client_id: client.client_id.clone(),
        redirect_uri: redirect_uri.clone(),
        code_challenge: rest.challenge,
        resource: rest.resource,
        scope: rest.scope,
        state: state.clone(),
        force_consent: rest.force_consent,
    };
    Ok((valid, client))
}

struct Rest {
    challenge: String,
    resource: String,
    scope: Option<Vec<String>>,
    force_consent: bool,
}

fn rest_of_request(params: &Params<'_>, resources: &[String]) -> Result<Rest, (&'static str, String)> {
    let invalid = |why: String| ("invalid_request", why);
    for name in ["response_type", "code_challenge", "code_challenge_method", "resource", "scope", "prompt", "state"] {
        params.one(name).map_err(invalid)?;
    }
    match params.one("response_type").map_err(invalid)? {
        Some("code") => {}
        None => return Err(invalid("the response_type parameter is missing; it must be code".into())),
        Some(_) => return Err(("unsupported_response_type", "only response_type=code is supported".into())),
    }
    let challenge = params
        .one("code_challenge")
        .map_err(invalid)?
        .ok_or_else(|| invalid("PKCE is required: send code_challenge with code_challenge_method=S256".into()))?;
    if params.one("code_challenge_method").map_err(invalid)? != Some("S256") {
        return Err(invalid("code_challenge_method must be S256 (plain, or none given, is not supported)".into()));
    }
    if !(43..=128).contains(&challenge.len()) || !challenge.bytes().all(super::tokens::pkce_char) {
        return Err(invalid("code_challenge must be 43 to 128 characters of A-Z a-z 0-9 - . _ ~".into()));
    }
    let resource = match params.one("resource").map_err(invalid)? {
        Some(asked) => canonical_resource(asked, resources)
            .ok_or_else(|| ("invalid_target", "resource does not name an MCP endpoint of this server".into()))?,
        // AUZ-08: clients without resource indicators get the default endpoint (the first;
        // virtual servers' tokens are asked for by their resource).
        None => resources
            .first()
            .cloned()
            .ok_or_else(|| ("invalid_target", "send resource: the URL of the MCP endpoint the token is for".into()))?,
    };
    let scope = params.one("scope").map_err(invalid)?;
    if scope.is_some_and(|s| s.len() > MAX_SCOPE_BYTES) {
        return Err(invalid(format!("the scope parameter is longer than {MAX_SCOPE_BYTES} bytes")));
    }
    let scope = scope.map(|s| s.split(' ').filter(|s| !s.is_empty()).map(str::to_owned).collect());
    let force_consent = match params.one("prompt").map_err(invalid)? {
        Some(p) if p.split(' ').any(|p| p == "none") => {
            return Err(("interaction_required", "this server always signs the user in at the identity provider".into()));
        }
        Some(p) => p.split(' ').any(|p| p == "consent"),
        None => false,
    };
    Ok(Rest { challenge: challenge.to_owned(), resource, scope, force_consent })
}

/// The resource of this server that `asked` names, in its canonical form: scheme and host
/// compare case-insensitively, and an origin-only resource matches with or without its `/`
/// (AUZ-05); the path otherwise compares exactly.
pub fn canonical_resource(asked: &str, resources: &[String]) -> Option<String> {
    let asked = url::Url::parse(asked).ok().filter(|u| u.fragment().is_none())?;
    resources
        .iter()
        .find(|r| {
            url::Url::parse(r)
                .is_ok_and(|mine| mine.origin() == asked.origin() && mine.path() == asked.path() && mine.query() == asked.query())
        })
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resources() -> Vec<String> {
        vec!["https://mcp.example.com/mcp".into()]
    }

    #[test]
    fn a_resource_differing_only_in_the_case_of_its_host_is_the_same() {
        assert_eq!(canonical_resource("HTTPS://MCP.Example.com/mcp", &resources()).as_deref(), Some("https://mcp.example.com/mcp"));
    }

    #[test]
    fn an_origin_resource_matches_with_its_trailing_slash() {
        let origin = vec!["https://mcp.example.com".to_owned()];
        assert_eq!(canonical_resource("https://mcp.example.com/", &origin).as_deref(), Some("https://mcp.example.com"));
    }

    #[test]
    fn another_path_or_host_is_not_this_server() {
        for other in ["https://mcp.example.com/mcp/", "https://other.example/mcp", "https://mcp.example.com/mcp#f", "not a url"] {
            assert_eq!(canonical_resource(other, &resources()), None, "{other}");
        }
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

    #[test]
    fn plain_pkce_is_refused() {
        let p = pairs(&[("response_type", "code"), ("code_challenge", CHALLENGE), ("code_challenge_method", "plain")]);
        assert_eq!(rest_of_request(&Params(&p), &resources()).err().map(|e| e.0), Some("invalid_request"));
    }

    #[test]
    fn an_omitted_method_means_plain_and_is_refused() {
        let p = pairs(&[("response_type", "code"), ("code_challenge", CHALLENGE)]);
        assert_eq!(rest_of_request(&Params(&p), &resources()).err().map(|e| e.0), Some("invalid_request"));
    }

    #[test]
    fn a_repeated_challenge_is_refused() {
        let p = pairs(&[
            ("response_type", "code"),
            ("code_challenge", CHALLENGE),
            ("code_challenge", CHALLENGE),
            ("code_challenge_method", "S256"),
        ]);
        assert_eq!(rest_of_request(&Params(&p), &resources()).err().map(|e| e.0), Some("invalid_request"));
    }

    #[test]
    fn a_foreign_resource_is_invalid_target() {
        let p = pairs(&[
            ("response_type", "code"),
            ("code_challenge", CHALLENGE),
            ("code_challenge_method", "S256"),
            ("resource", "https://other.example/mcp"),
        ]);
        assert_eq!(rest_of_request(&Params(&p), &resources()).err().map(|e| e.0), Some("invalid_target"));
    }

    #[test]
    fn a_missing_resource_defaults_to_the_only_endpoint() {
        let p = pairs(&[("response_type", "code"), ("code_challenge", CHALLENGE), ("code_challenge_method", "S256")]);
        assert_eq!(rest_of_request(&Params(&p), &resources()).ok().map(|r| r.resource), Some(resources()[0].clone()));
    }
}
