//! Development tokens: `auth.mode = "dev"` trusts HS256 tokens signed with a local key that
//! only this machine has, and `toolgate dev-token` mints them. This gives a new user real
//! bearer-token behaviour on loopback without an identity provider. Dev mode refuses to
//! serve on a non-loopback address unless `auth.dev_allow_public_bind` says otherwise.

use std::io::Write as _;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::json;

use super::jwt::IssuerSettings;
use crate::config::{Secret, Settings};

/// The `iss` of development tokens; no real issuer can have it (it is not a URL).
pub const DEV_ISSUER: &str = "toolgate-dev";

/// The canonical resource for dev mode when none is configured: the local endpoint, `https`
/// when the public listener terminates TLS.
pub fn default_resource(settings: &Settings) -> String {
    let scheme = if settings.server.tls.enabled() { "https" } else { "http" };
    format!("{scheme}://{}{}", settings.server.bind, settings.server.mcp_path)
}

/// Reads the development key, creating it (32 random bytes, hex, mode 0600) on first use.
pub fn load_or_create_key(path: &Path) -> std::io::Result<Secret> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let key = text.trim().to_owned();
            if key.len() < 64 {
                return Err(std::io::Error::other(format!(
                    "{} is not a toolgate development key; delete it to make a new one",
                    path.display()
                )));
            }
            Ok(Secret::new(key))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)?;
            }
            let mut raw = [0u8; 32];
            rand::RngCore::fill_bytes(&mut rand::rng(), &mut raw);
            let key: String = raw.iter().map(|b| format!("{b:02x}")).collect();
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut file = options.open(path)?;
            file.write_all(key.as_bytes())?;
            Ok(Secret::new(key))
        }
        Err(e) => Err(e),
    }
}

/// The issuer entry that trusts development tokens.
pub fn issuer(key: Secret) -> IssuerSettings {
    IssuerSettings {
        issuer: DEV_ISSUER.to_owned(),
        jwks_uri: None,
        audiences: Vec::new(),
        algorithms: vec!["HS256".to_owned()],
        hmac_secret: Some(key),
        leeway_secs: 30,
    }
}

/// Mints a development token for `resource`.
pub fn mint(key: &Secret, resource: &str, subject: &str, scope: &str, ttl_secs: u64) -> Result<String, String> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let claims = json!({
        "iss": DEV_ISSUER,
        "sub": subject,
        "aud": resource,
        "iat": now,
        "exp": now + ttl_secs,
        "scope": scope,
        "client_id": "toolgate-dev-token",
    });
    let header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    jsonwebtoken::encode(&header, &claims, &jsonwebtoken::EncodingKey::from_secret(key.expose().as_bytes()))
        .map_err(|e| format!("cannot sign the token: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_resource_says_https_when_the_listener_terminates_tls() {
        let mut settings = Settings::default();
        assert_eq!(default_resource(&settings), "http://127.0.0.1:8080/mcp");
        settings.server.tls.cert_file = Some("tls.crt".into());
        assert_eq!(default_resource(&settings), "https://127.0.0.1:8080/mcp");
    }

    #[test]
    fn the_key_is_created_once_and_private() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sub").join("dev.key");
        let first = load_or_create_key(&path).expect("created");
        let second = load_or_create_key(&path).expect("read back");
        assert_eq!(first.expose(), second.expose());
        assert_eq!(first.expose().len(), 64);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).expect("metadata").permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        std::fs::write(&path, "short").expect("write");
        assert!(load_or_create_key(&path).is_err(), "a foreign file is not used as a key");
    }
}
