//! The refusals of TLS files name the setting to fix: each case of `load` on real files,
//! certificates made with rcgen.

use std::path::{Path, PathBuf};

use rcgen::{CertificateParams, KeyPair};

use super::load::{Files, LoadError};
use crate::config::tls::TlsSettings;

/// A self-signed certificate and its key, written as `tls.crt` and `tls.key` in `dir`.
fn write_pair(dir: &Path) -> TlsSettings {
    let key = KeyPair::generate().expect("key");
    let cert = CertificateParams::new(vec!["localhost".to_owned()]).expect("params").self_signed(&key).expect("cert");
    std::fs::write(dir.join("tls.crt"), cert.pem()).expect("write");
    std::fs::write(dir.join("tls.key"), key.serialize_pem()).expect("write");
    TlsSettings { cert_file: Some(dir.join("tls.crt")), key_file: Some(dir.join("tls.key")), client_ca_file: None }
}

fn load(settings: &TlsSettings) -> Result<(), LoadError> {
    Files::read(settings, "server.tls")?.expect("TLS on").build().map(|_| ())
}

fn refusal(settings: &TlsSettings) -> LoadError {
    load(settings).expect_err("refused")
}

fn dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("dir")
}

#[test]
fn a_certificate_and_its_key_load() {
    let d = dir();
    assert!(load(&write_pair(d.path())).is_ok());
}

#[test]
fn a_missing_certificate_file_names_cert_file() {
    let d = dir();
    let settings = TlsSettings { cert_file: Some(d.path().join("absent.crt")), ..write_pair(d.path()) };
    let e = refusal(&settings);
    assert_eq!(e.setting, "server.tls.cert_file");
    assert!(e.reason.contains("no such file"), "{e}");
}

#[test]
fn an_unreadable_key_file_names_key_file() {
    let d = dir();
    // A directory cannot be read as a file, whoever runs the test (root reads any mode).
    let settings = TlsSettings { key_file: Some(d.path().to_owned()), ..write_pair(d.path()) };
    let e = refusal(&settings);
    assert_eq!(e.setting, "server.tls.key_file");
    assert!(e.reason.contains("cannot read it"), "{e}");
}

#[test]
fn a_file_without_a_certificate_names_cert_file() {
    let d = dir();
    let settings = write_pair(d.path());
    // The key file holds no certificate.
    let settings = TlsSettings { cert_file: settings.key_file.clone(), ..settings };
    let e = refusal(&settings);
    assert_eq!(e.setting, "server.tls.cert_file");
    assert!(e.reason.contains("no certificate in it"), "{e}");
}

#[test]
fn a_file_without_a_key_names_key_file() {
    let d = dir();
    let settings = write_pair(d.path());
    let settings = TlsSettings { key_file: settings.cert_file.clone(), ..settings };
    let e = refusal(&settings);
    assert_eq!(e.setting, "server.tls.key_file");
    assert!(e.reason.contains("no private key in it"), "{e}");
}

#[test]
fn a_key_that_does_not_match_the_certificate_names_key_file() {
    let d = dir();
    let settings = write_pair(d.path());
    std::fs::write(d.path().join("other.key"), KeyPair::generate().expect("key").serialize_pem()).expect("write");
    let e = refusal(&TlsSettings { key_file: Some(d.path().join("other.key")), ..settings });
    assert_eq!(e.setting, "server.tls.key_file");
    assert!(e.reason.contains("does not match the certificate"), "{e}");
}

#[test]
fn a_client_ca_file_without_certificates_names_client_ca_file() {
    let d = dir();
    let settings = write_pair(d.path());
    let empty: PathBuf = d.path().join("ca.crt");
    std::fs::write(&empty, "").expect("write");
    let e = refusal(&TlsSettings { client_ca_file: Some(empty), ..settings });
    assert_eq!(e.setting, "server.tls.client_ca_file");
    assert!(e.reason.contains("no certificate in it"), "{e}");
}

#[test]
fn a_refusal_names_the_environment_variable_too() {
    let d = dir();
    let settings = TlsSettings { cert_file: Some(d.path().join("absent.crt")), ..write_pair(d.path()) };
    assert!(refusal(&settings).to_string().contains("TOOLGATE__SERVER__TLS__CERT_FILE"));
}

#[test]
fn the_served_certificate_is_reported_with_its_expiry() {
    let d = dir();
    let (_, served) = Files::read(&write_pair(d.path()), "server.tls").expect("read").expect("on").build().expect("built");
    // rcgen's default validity ends in 4096.
    assert!(served.not_after > 4_000_000_000, "{served:?}");
}
