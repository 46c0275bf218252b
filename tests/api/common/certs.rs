//! Certificates made in the test with rcgen: a CA, server certificates for `127.0.0.1` and
//! `localhost`, client certificates; a directory laid out like a mounted Kubernetes Secret; and
//! reqwest clients that trust the test CA and report which certificate they were served.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SerialNumber};

/// A certificate authority.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pub pem: String,
}

/// A certificate signed by a [`Ca`], with its key.
pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
    pub der: Vec<u8>,
}

impl Ca {
    pub fn new(name: &str) -> Self {
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let pem = params.self_signed(&key).expect("CA certificate").pem();
        Self { issuer: Issuer::new(params, key), pem }
    }

    /// A server certificate for `127.0.0.1` and `localhost`, with `serial` as its serial number.
    pub fn server(&self, serial: u8) -> Leaf {
        let mut params = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).expect("params");
        params.distinguished_name.push(DnType::CommonName, format!("toolgate test server {serial}"));
        params.serial_number = Some(SerialNumber::from(vec![serial]));
        self.sign(&params)
    }

    /// A client certificate named `name`.
    pub fn client(&self, name: &str) -> Leaf {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.distinguished_name.push(DnType::CommonName, name);
        self.sign(&params)
    }

    fn sign(&self, params: &CertificateParams) -> Leaf {
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.issuer).expect("signed");
        Leaf { cert_pem: cert.pem(), key_pem: key.serialize_pem(), der: cert.der().to_vec() }
    }
}

impl Leaf {
    /// This certificate and key as a reqwest client identity.
    pub fn identity(&self) -> reqwest::Identity {
        reqwest::Identity::from_pem(format!("{}{}", self.cert_pem, self.key_pem).as_bytes()).expect("identity")
    }

    /// Writes `tls.crt` and `tls.key` into `dir`.
    pub fn write(&self, dir: &Path) {
        std::fs::write(dir.join("tls.crt"), &self.cert_pem).expect("write the certificate");
        std::fs::write(dir.join("tls.key"), &self.key_pem).expect("write the key");
    }
}

/// A directory laid out as Kubernetes mounts a Secret: `tls.crt -> ..data/tls.crt`,
/// `..data -> ..<generation>`; [`SecretDir::rotate`] swaps `..data` atomically, as the kubelet
/// does when cert-manager renews the certificate.
pub struct SecretDir {
    pub dir: tempfile::TempDir,
    generation: u32,
}

impl SecretDir {
    pub fn new(leaf: &Leaf) -> Self {
        let dir = tempfile::tempdir().expect("secret dir");
        for name in ["tls.crt", "tls.key"] {
            std::os::unix::fs::symlink(Path::new("..data").join(name), dir.path().join(name)).expect("file link");
        }
        let mut secret = Self { dir, generation: 0 };
        secret.rotate(leaf);
        secret
    }

    /// Writes `leaf` into a new generation directory and points `..data` at it in one rename.
    pub fn rotate(&mut self, leaf: &Leaf) {
        self.generation += 1;
        let generation = format!("..gen{}", self.generation);
        let root = self.dir.path();
        std::fs::create_dir(root.join(&generation)).expect("generation dir");
        leaf.write(&root.join(&generation));
        std::os::unix::fs::symlink(&generation, root.join("..data_tmp")).expect("data link");
        std::fs::rename(root.join("..data_tmp"), root.join("..data")).expect("swap");
        if self.generation > 1 {
            std::fs::remove_dir_all(root.join(format!("..gen{}", self.generation - 1))).expect("old generation");
        }
    }

    pub fn cert_file(&self) -> PathBuf {
        self.dir.path().join("tls.crt")
    }

    pub fn key_file(&self) -> PathBuf {
        self.dir.path().join("tls.key")
    }
}

/// A client that trusts `ca` and records the certificate each response came over.
pub fn client(ca: &Ca) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca.pem.as_bytes()).expect("CA"))
        .tls_info(true)
        .timeout(std::time::Duration::from_secs(10))
}

/// The certificate the server presented on the connection `res` came over.
pub fn served(res: &reqwest::Response) -> Vec<u8> {
    let info = res.extensions().get::<reqwest::tls::TlsInfo>().expect("TLS info");
    info.peer_certificate().expect("a peer certificate").to_vec()
}
