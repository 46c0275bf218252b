//! Reading a listener's PEM files into a rustls `ServerConfig`. Every refusal names the
//! setting to fix and its environment variable, since the same code checks the files at
//! start-up, in `toolgate check-config`, and on every reload.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use sha2::{Digest, Sha256};

use crate::config::tls::TlsSettings;

/// A file that cannot serve, and the setting that names it.
#[derive(Debug, thiserror::Error)]
#[error("invalid setting {setting} ({env}): {reason}")]
pub struct LoadError {
    pub setting: String,
    env: String,
    pub reason: String,
}

impl LoadError {
    fn new(setting: &str, reason: String) -> Self {
        let env = format!("TOOLGATE__{}", setting.to_ascii_uppercase().replace('.', "__"));
        Self { setting: setting.to_owned(), env, reason }
    }
}

/// What a listener serves, for the log and the expiry metric.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served {
    /// The leaf certificate's subject (RFC 4514).
    pub subject: String,
    /// Its serial number, hex.
    pub serial: String,
    /// Its `notAfter`, in seconds since the Unix epoch.
    pub not_after: u64,
}

/// The files' bytes as read, before anything is checked.
pub(super) struct Files {
    section: String,
    cert: (PathBuf, Vec<u8>),
    key: (PathBuf, Vec<u8>),
    client_ca: Option<(PathBuf, Vec<u8>)>,
}

impl Files {
    /// Reads the files `settings` names; `None` when TLS is off.
    pub(super) fn read(settings: &TlsSettings, section: &str) -> Result<Option<Self>, LoadError> {
        let (Some(cert), Some(key)) = (&settings.cert_file, &settings.key_file) else { return Ok(None) };
        let setting = |name: &str| format!("{section}.{name}");
        let client_ca = match &settings.client_ca_file {
            Some(path) => Some(read(path, &setting("client_ca_file"))?),
            None => None,
        };
        Ok(Some(Self {
            section: section.to_owned(),
            cert: read(cert, &setting("cert_file"))?,
            key: read(key, &setting("key_file"))?,
            client_ca,
        }))
    }

    /// A digest of every byte read: an event in the directory that changed none of them (another
    /// file, a touch) is not a reload.
    pub(super) fn digest(&self) -> [u8; 32] {
        let mut hash = Sha256::new();
        for bytes in [Some(&self.cert.1), Some(&self.key.1), self.client_ca.as_ref().map(|c| &c.1)].into_iter().flatten() {
            hash.update((bytes.len() as u64).to_be_bytes());
            hash.update(bytes);
        }
        hash.finalize().into()
    }

    fn setting(&self, name: &str) -> String {
        format!("{}.{name}", self.section)
    }

    /// The server configuration these files make, or what is wrong with them.
    pub(super) fn build(&self) -> Result<(Arc<ServerConfig>, Served), LoadError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain = self.chain()?;
        let served = served(&chain[0]).map_err(|reason| LoadError::new(&self.setting("cert_file"), reason))?;
        let key = self.private_key()?;
        let certified = CertifiedKey::from_der(chain, key, &provider).map_err(|e| self.key_refusal(e))?;
        let verifier = match &self.client_ca {
            Some(ca) => self.client_verifier(ca, provider.clone())?,
            None => WebPkiClientVerifier::no_client_auth(),
        };
        let mut config = ServerConfig::builder_with_provider(provider)
            // TLS 1.2 and 1.3 only: rustls has nothing older.
            .with_safe_default_protocol_versions()
            .map_err(|e| LoadError::new(&self.setting("cert_file"), format!("cannot build the TLS configuration: {e}")))?
            .with_client_cert_verifier(verifier)
            .with_cert_resolver(Arc::new(SingleCertAndKey::from(certified)));
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok((Arc::new(config), served))
    }

    fn chain(&self) -> Result<Vec<CertificateDer<'static>>, LoadError> {
        let (path, bytes) = &self.cert;
        certificates(path, bytes).map_err(|reason| LoadError::new(&self.setting("cert_file"), reason))
    }

    fn private_key(&self) -> Result<PrivateKeyDer<'static>, LoadError> {
        let (path, bytes) = &self.key;
        PrivateKeyDer::from_pem_slice(bytes).map_err(|e| {
            let reason = match e {
                pem::Error::NoItemsFound => {
                    "no private key in it (expected PEM: PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY)".to_owned()
                }
                other => format!("not a valid PEM private key ({other})"),
            };
            LoadError::new(&self.setting("key_file"), format!("{}: {reason}", path.display()))
        })
    }

    fn key_refusal(&self, e: rustls::Error) -> LoadError {
        let (cert, key) = (self.cert.0.display(), self.key.0.display());
        match e {
            rustls::Error::InconsistentKeys(_) => {
                LoadError::new(&self.setting("key_file"), format!("{key}: the key does not match the certificate in {cert}"))
            }
            rustls::Error::InvalidCertificate(e) => {
                LoadError::new(&self.setting("cert_file"), format!("{cert}: the certificate cannot be read ({e})"))
            }
            other => LoadError::new(&self.setting("key_file"), format!("{key}: the key cannot be used ({other})")),
        }
    }

    fn client_verifier(
        &self,
        (path, bytes): &(PathBuf, Vec<u8>),
        provider: Arc<CryptoProvider>,
    ) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, LoadError> {
        let refuse = |reason: String| LoadError::new(&self.setting("client_ca_file"), reason);
        let mut roots = RootCertStore::empty();
        for cert in certificates(path, bytes).map_err(refuse)? {
            roots.add(cert).map_err(|e| refuse(format!("{}: not a usable CA certificate ({e})", path.display())))?;
        }
        WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| refuse(format!("{}: cannot verify client certificates with it ({e})", path.display())))
    }
}

/// Reads one file, naming `setting` when it cannot.
fn read(path: &Path, setting: &str) -> Result<(PathBuf, Vec<u8>), LoadError> {
    std::fs::read(path).map(|bytes| (path.to_owned(), bytes)).map_err(|e| {
        let reason = match e.kind() {
            std::io::ErrorKind::NotFound => format!("{}: no such file", path.display()),
            _ => format!("{}: cannot read it ({e})", path.display()),
        };
        LoadError::new(setting, reason)
    })
}

/// Every `CERTIFICATE` block of a PEM file; at least one.
fn certificates(path: &Path, bytes: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: not a valid PEM file ({e})", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no certificate in it (expected PEM: -----BEGIN CERTIFICATE-----)", path.display()));
    }
    Ok(certs)
}

/// The subject, serial and expiry of `cert`.
fn served(cert: &CertificateDer<'_>) -> Result<Served, String> {
    use x509_cert::der::Decode as _;
    let cert = x509_cert::Certificate::from_der(cert.as_ref()).map_err(|e| format!("the first certificate is not X.509 ({e})"))?;
    let tbs = &cert.tbs_certificate;
    let serial = tbs.serial_number.as_bytes().iter().map(|b| format!("{b:02x}")).collect();
    Ok(Served { subject: tbs.subject.to_string(), serial, not_after: tbs.validity.not_after.to_unix_duration().as_secs() })
}
