//! RFC 9728 Protected Resource Metadata: where clients learn which authorization servers
//! issue tokens for this server (the document; `transport::metadata` serves it).

use serde_json::json;

use super::settings::AuthSettings;

/// The metadata URL for a resource: the well-known path inserted before the resource's path
/// (`https://h/mcp` → `https://h/.well-known/oauth-protected-resource/mcp`).
pub fn metadata_url(resource: &str) -> String {
    match url::Url::parse(resource) {
        Ok(mut u) => {
            let path = u.path().trim_end_matches('/').to_owned();
            u.set_path(&format!("/.well-known/oauth-protected-resource{path}"));
            u.set_query(None);
            u.to_string()
        }
        Err(_) => resource.to_owned(),
    }
}

/// The metadata document. `own_issuer`: the built-in authorization server's issuer, when it
/// is on; it is listed first (ASM-08), before any configured one.
pub fn document(settings: &AuthSettings, own_issuer: Option<&str>) -> serde_json::Value {
    let mut servers: Vec<String> = own_issuer.map(str::to_owned).into_iter().collect();
    let configured = if own_issuer.is_some() { settings.authorization_servers.clone() } else { settings.announced_servers() };
    servers.extend(configured.into_iter().filter(|s| Some(s.as_str()) != own_issuer));
    let mut doc = json!({
        "resource": settings.resource,
        "authorization_servers": servers,
        "scopes_supported": settings.scopes_supported(),
        "bearer_methods_supported": ["header"],
    });
    if let Some(docs) = &settings.resource_documentation {
        doc["resource_documentation"] = json!(docs);
    }
    doc
}

/// The metadata document of a virtual server: its own resource, and its scopes among those
/// supported.
pub fn server_document(settings: &AuthSettings, own_issuer: Option<&str>, resource: &str, scopes: &[String]) -> serde_json::Value {
    let mut doc = document(settings, own_issuer);
    doc["resource"] = json!(resource);
    if let Some(supported) = doc["scopes_supported"].as_array_mut() {
        for scope in scopes {
            if !supported.iter().any(|s| s == scope) {
                supported.push(json!(scope));
            }
        }
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_url_inserts_the_well_known_path() {
        assert_eq!(metadata_url("https://mcp.example.com/mcp"), "https://mcp.example.com/.well-known/oauth-protected-resource/mcp");
        assert_eq!(metadata_url("https://mcp.example.com/"), "https://mcp.example.com/.well-known/oauth-protected-resource");
        assert_eq!(metadata_url("http://127.0.0.1:8080/a/mcp"), "http://127.0.0.1:8080/.well-known/oauth-protected-resource/a/mcp");
    }
}
