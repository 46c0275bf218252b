//! `[server.tls]` and `[admin.tls]`: a listener that terminates TLS itself. Off unless
//! `cert_file` is set: usually a load balancer terminates TLS and the listeners speak plain
//! HTTP behind it. Only the shape is checked here (which settings go together); whether the
//! files hold a certificate and a matching key is checked where they are read, at start-up
//! and by `toolgate check-config` (`transport::tls`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// One listener's TLS: PEM files, re-read when they change (cert-manager's rotation).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct TlsSettings {
    /// The certificate chain, PEM, the listener's own certificate first. Set: the listener
    /// speaks only HTTPS (TLS 1.2 and 1.3; HTTP/2 and HTTP/1.1 through ALPN).
    pub cert_file: Option<PathBuf>,
    /// The certificate's private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub key_file: Option<PathBuf>,
    /// CA certificates, PEM. Set: a client must present a certificate signed by one of them,
    /// or the handshake fails (mutual TLS, e.g. from a load balancer to the pod).
    pub client_ca_file: Option<PathBuf>,
}

impl TlsSettings {
    /// Whether the listener terminates TLS.
    pub fn enabled(&self) -> bool {
        self.cert_file.is_some()
    }

    /// The settings that must go together; `section` is `server.tls` or `admin.tls`.
    pub fn validate(&self, section: &str) -> Result<(), ConfigError> {
        let invalid = |key: &str, reason: &str| Err(ConfigError::InvalidAt { key: format!("{section}.{key}"), reason: reason.to_owned() });
        match (&self.cert_file, &self.key_file) {
            (Some(_), None) => return invalid("key_file", "must be set with cert_file: the certificate's private key (PEM)"),
            (None, Some(_)) => return invalid("cert_file", "must be set with key_file: the certificate chain (PEM) the key belongs to"),
            _ => {}
        }
        if self.client_ca_file.is_some() && !self.enabled() {
            return invalid("client_ca_file", "needs cert_file and key_file: client certificates are only asked for over TLS");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(settings: &TlsSettings) -> String {
        settings.validate("server.tls").err().map(|e| e.to_string()).unwrap_or_default()
    }

    #[test]
    fn off_by_default() {
        assert!(!TlsSettings::default().enabled());
        assert!(TlsSettings::default().validate("server.tls").is_ok());
    }

    #[test]
    fn a_certificate_without_its_key_names_key_file() {
        let settings = TlsSettings { cert_file: Some("tls.crt".into()), ..Default::default() };
        assert!(message(&settings).contains("server.tls.key_file"), "{}", message(&settings));
    }

    #[test]
    fn a_key_without_its_certificate_names_cert_file() {
        let settings = TlsSettings { key_file: Some("tls.key".into()), ..Default::default() };
        assert!(message(&settings).contains("server.tls.cert_file"), "{}", message(&settings));
    }

    #[test]
    fn a_client_ca_without_tls_names_client_ca_file() {
        let settings = TlsSettings { client_ca_file: Some("ca.crt".into()), ..Default::default() };
        assert!(message(&settings).contains("server.tls.client_ca_file"), "{}", message(&settings));
    }
}
