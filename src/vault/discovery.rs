//! Where an upstream's authorization server is and what it says about itself: configured, or
//! found the way MCP clients find it (the upstream's 401 `resource_metadata`, only on the
//! upstream's own origin, else its RFC 9728 well-known URL), then its RFC 8414 or OpenID
//! metadata, which must name exactly that issuer and advertise PKCE S256. Every fetch goes
//! through [`UpstreamAuthorization::check`]'s rules and the SSRF guard.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};
use url::Url;

use super::authorization_server::{AsError, AsMetadata, METADATA_TTL, UpstreamAuthorization, small_body, unavailable};

impl UpstreamAuthorization {
    /// The server's metadata, fetched once an hour; failures are not kept.
    pub async fn metadata(&self) -> Result<Arc<AsMetadata>, AsError> {
        let mut cached = self.metadata.lock().await;
        if let Some((metadata, at)) = cached.as_ref().filter(|(_, at)| at.elapsed() < METADATA_TTL) {
            let _ = at;
            return Ok(metadata.clone());
        }
        let issuer = match &self.settings.authorization_server {
            Some(issuer) => issuer.clone(),
            None => self.discover_issuer().await?,
        };
        let metadata = Arc::new(self.fetch_metadata(&issuer).await?);
        *cached = Some((metadata.clone(), Instant::now()));
        Ok(metadata)
    }

    /// RFC 9728 from the upstream: its 401's `resource_metadata`, else the well-known URL.
    async fn discover_issuer(&self) -> Result<String, AsError> {
        let upstream = Url::parse(&self.upstream_url).map_err(|_| unavailable("the upstream's url is not a URL"))?;
        let probe = self
            .http
            .post(upstream.clone())
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(json!({ "jsonrpc": "2.0", "id": 0, "method": "ping" }).to_string());
        let header = match probe.send().await {
            Ok(r) if r.status() == reqwest::StatusCode::UNAUTHORIZED => {
                r.headers().get("www-authenticate").and_then(|v| v.to_str().ok()).and_then(resource_metadata_param)
            }
            Ok(_) | Err(_) => None,
        };
        let mut candidates = Vec::new();
        if let Some(url) = header.and_then(|h: String| Url::parse(&h).ok()).filter(|u| u.origin() == upstream.origin()) {
            // Only from the upstream's own origin: its 401 does not get to send toolgate elsewhere.
            candidates.push(url);
        }
        let path = upstream.path().trim_end_matches('/');
        for suffix in [path, ""] {
            if let Ok(url) = upstream.join(&format!("/.well-known/oauth-protected-resource{suffix}")) {
                candidates.push(url);
            }
        }
        for url in candidates {
            let Ok(document) = self.get_json(&url).await else { continue };
            let issuer = document.get("authorization_servers").and_then(Value::as_array).and_then(|a| a.first()).and_then(Value::as_str);
            // The upstream's words: an issuer is a URL of reasonable length, or nothing.
            if let Some(issuer) = issuer.filter(|i| i.len() <= 512 && Url::parse(i).is_ok()) {
                return Ok(issuer.to_owned());
            }
        }
        Err(unavailable(
            "the upstream names no authorization server (no RFC 9728 protected-resource metadata); set oauth.authorization_server",
        ))
    }

    /// RFC 8414 then OpenID discovery, for an issuer with or without a path; the document
    /// must name exactly this issuer.
    async fn fetch_metadata(&self, issuer: &str) -> Result<AsMetadata, AsError> {
        let url = Url::parse(issuer).map_err(|_| unavailable("the authorization server's issuer is not a URL"))?;
        let path = url.path().trim_end_matches('/');
        let mut candidates = vec![
            url.join(&format!("/.well-known/oauth-authorization-server{path}")),
            url.join(&format!("/.well-known/openid-configuration{path}")),
        ];
        if !path.is_empty() {
            candidates.push(Url::parse(&format!("{}/.well-known/openid-configuration", issuer.trim_end_matches('/'))));
        }
        for candidate in candidates.into_iter().flatten() {
            let Ok(document) = self.get_json(&candidate).await else { continue };
            return metadata_from(&document, issuer);
        }
        Err(unavailable("the authorization server's metadata (RFC 8414 or OpenID discovery) could not be read"))
    }

    /// A JSON document, over the guarded client.
    pub(super) async fn get_json(&self, url: &Url) -> Result<Value, AsError> {
        self.check(url)?;
        let response =
            self.http.get(url.clone()).header("accept", "application/json").send().await.map_err(|_| unavailable("unreachable"))?;
        if response.status() != reqwest::StatusCode::OK {
            return Err(unavailable("not found"));
        }
        let body = small_body(response).await.ok_or_else(|| unavailable("too large"))?;
        serde_json::from_slice(&body).map_err(|_| unavailable("not JSON"))
    }

    /// https, or http to an exempt host; and the SSRF policy's literal-address check.
    pub(super) fn check(&self, url: &Url) -> Result<(), AsError> {
        let exempt = url.host_str().is_some_and(|h| self.policy.is_allowed(h));
        if url.scheme() != "https" && !(url.scheme() == "http" && exempt) {
            return Err(unavailable("the authorization server must be reached over https"));
        }
        self.policy.check_url(url).map_err(|_| unavailable("the authorization server's address is not allowed (oauth.private_hosts)"))
    }
}

fn metadata_from(document: &Value, issuer: &str) -> Result<AsMetadata, AsError> {
    let text = |k: &str| document.get(k).and_then(Value::as_str).map(str::to_owned);
    let named = text("issuer").unwrap_or_default();
    if named.trim_end_matches('/') != issuer.trim_end_matches('/') {
        return Err(AsError::Unavailable(format!(
            "the authorization server's metadata names another issuer than {issuer} (RFC 8414 §3.3): not used"
        )));
    }
    let pkce = document.get("code_challenge_methods_supported").and_then(Value::as_array);
    if !pkce.is_some_and(|methods| methods.iter().any(|m| m == "S256")) {
        return Err(unavailable("the authorization server does not advertise PKCE S256 (code_challenge_methods_supported): not used"));
    }
    Ok(AsMetadata {
        issuer: named,
        authorization_endpoint: text("authorization_endpoint").ok_or_else(|| unavailable("no authorization_endpoint in the metadata"))?,
        token_endpoint: text("token_endpoint").ok_or_else(|| unavailable("no token_endpoint in the metadata"))?,
        registration_endpoint: text("registration_endpoint"),
        revocation_endpoint: text("revocation_endpoint"),
        metadata_documents: document.get("client_id_metadata_document_supported").and_then(Value::as_bool).unwrap_or(false),
        iss_parameter: document.get("authorization_response_iss_parameter_supported").and_then(Value::as_bool).unwrap_or(false),
    })
}

/// `resource_metadata="…"` of a `WWW-Authenticate: Bearer …` header.
fn resource_metadata_param(header: &str) -> Option<String> {
    let at = header.find("resource_metadata=")? + "resource_metadata=".len();
    let rest = &header[at..];
    let value = match rest.strip_prefix('"') {
        Some(quoted) => &quoted[..quoted.find('"')?],
        None => rest.split([',', ' ']).next()?,
    };
    Some(value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resource_metadata_parameter_is_read_quoted_or_bare() {
        let h = r#"Bearer error="invalid_token", resource_metadata="https://u.example/.well-known/oauth-protected-resource/mcp""#;
        assert_eq!(resource_metadata_param(h).as_deref(), Some("https://u.example/.well-known/oauth-protected-resource/mcp"));
        assert_eq!(
            resource_metadata_param("Bearer resource_metadata=https://u.example/x, scope=a").as_deref(),
            Some("https://u.example/x")
        );
        assert_eq!(resource_metadata_param("Bearer realm=x"), None);
    }

    #[test]
    fn metadata_for_another_issuer_is_not_used() {
        let doc = json!({"issuer": "https://evil.example", "authorization_endpoint": "https://a/x", "token_endpoint": "https://a/t",
                         "code_challenge_methods_supported": ["S256"]});
        assert!(metadata_from(&doc, "https://as.example").is_err());
    }

    #[test]
    fn metadata_without_pkce_s256_is_not_used() {
        let doc = json!({"issuer": "https://as.example", "authorization_endpoint": "https://a/x", "token_endpoint": "https://a/t"});
        assert!(metadata_from(&doc, "https://as.example").is_err());
    }
}
