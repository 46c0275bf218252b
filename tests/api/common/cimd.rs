//! A loopback https server for client metadata documents: a CA and a certificate for
//! `localhost` and `127.0.0.1` made in the test (the CA written to a PEM file for
//! `metadata_documents.ca_file`), serving any axum router.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A running https server; stops with the test's runtime.
pub struct HttpsServer {
    pub addr: SocketAddr,
    /// The CA that signed its certificate, as PEM.
    pub ca_file: PathBuf,
    _dir: tempfile::TempDir,
}

impl HttpsServer {
    /// `https://127.0.0.1:<port><path>`
    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.addr.port())
    }

    /// `127.0.0.1:<port>`, for `metadata_documents.private_hosts`.
    pub fn host_port(&self) -> String {
        format!("127.0.0.1:{}", self.addr.port())
    }

    pub async fn start(router: axum::Router) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let (config, ca_pem) = certificates();
        let ca_file = dir.path().join("ca.pem");
        std::fs::write(&ca_file, ca_pem).expect("write CA");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        tokio::spawn(serve(listener, TlsAcceptor::from(Arc::new(config)), router));
        Self { addr, ca_file, _dir: dir }
    }
}

/// The server's TLS configuration and its CA's PEM.
fn certificates() -> (ServerConfig, String) {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("CA key")).expect("CA");
    let key = KeyPair::generate().expect("key");
    let leaf =
        CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).expect("params").signed_by(&key, &ca).expect("leaf");
    let chain = vec![CertificateDer::from(leaf.der().to_vec())];
    let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let config = ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .expect("server config");
    (config, ca.pem())
}

async fn serve(listener: TcpListener, acceptor: TlsAcceptor, router: axum::Router) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else { return };
        let (acceptor, router) = (acceptor.clone(), router.clone());
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else { return };
            let service = hyper_util::service::TowerToHyperService::new(router);
            let builder = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
            let _ = builder.serve_connection(hyper_util::rt::TokioIo::new(tls), service).await;
        });
    }
}
