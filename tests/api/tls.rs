//! TLS on the listeners, with certificates made in the test: HTTPS with HTTP/1.1 and HTTP/2 by
//! ALPN, plain HTTP refused on the TLS port, the handshake bounded by the header read timeout,
//! client certificates (mTLS), and the admin listener on TLS too.

use std::time::{Duration, Instant};

use crate::common::TestServer;
use crate::common::certs::{self, Ca, Leaf};
use tokio::io::AsyncReadExt;
use toolgate::config::Settings;
use toolgate::config::tls::TlsSettings;

/// A server whose public listener serves `leaf` from files in `dir`.
pub async fn tls_server(dir: &std::path::Path, leaf: &Leaf, adjust: impl FnOnce(&mut Settings)) -> TestServer {
    leaf.write(dir);
    let tls = TlsSettings { cert_file: Some(dir.join("tls.crt")), key_file: Some(dir.join("tls.key")), client_ca_file: None };
    TestServer::with(move |s| {
        s.server.tls = tls;
        adjust(s);
    })
    .await
}

fn https(s: &TestServer, path: &str) -> String {
    format!("https://127.0.0.1:{}{path}", s.running.addr.port())
}

#[tokio::test]
async fn https_serves_http_1_1_and_http_2_by_alpn() {
    let (ca, dir) = (Ca::new("test CA"), tempfile::tempdir().expect("dir"));
    let s = tls_server(dir.path(), &ca.server(1), |_| {}).await;
    let h1 = certs::client(&ca).http1_only().build().expect("client").get(https(&s, "/healthz")).send().await.expect("HTTP/1.1");
    assert_eq!((h1.status().as_u16(), h1.version()), (200, reqwest::Version::HTTP_11));
    let h2 = certs::client(&ca).build().expect("client").get(https(&s, "/healthz")).send().await.expect("HTTP/2");
    assert_eq!((h2.status().as_u16(), h2.version()), (200, reqwest::Version::HTTP_2));
}

#[tokio::test]
async fn plain_http_to_the_tls_port_fails() {
    let (ca, dir) = (Ca::new("test CA"), tempfile::tempdir().expect("dir"));
    let s = tls_server(dir.path(), &ca.server(1), |_| {}).await;
    let plain = format!("http://127.0.0.1:{}/healthz", s.running.addr.port());
    assert!(s.client.get(plain).send().await.is_err(), "no HTTP answer on the TLS port");
}

#[tokio::test]
async fn a_client_that_never_sends_its_hello_is_closed_after_the_header_read_timeout() {
    let (ca, dir) = (Ca::new("test CA"), tempfile::tempdir().expect("dir"));
    let s = tls_server(dir.path(), &ca.server(1), |s| s.server.header_read_timeout_ms = 300).await;
    let mut tcp = tokio::net::TcpStream::connect(s.running.addr).await.expect("connect");
    let started = Instant::now();
    let read = tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut [0u8; 16])).await.expect("closed by the server");
    assert!(matches!(read, Ok(0) | Err(_)), "closed without a byte: {read:?}");
    assert!(started.elapsed() >= Duration::from_millis(250), "closed by the timeout, not at once");
}

/// A server that asks for client certificates signed by `client_ca`.
async fn mutual(ca: &Ca, client_ca: &Ca, dir: &std::path::Path) -> TestServer {
    std::fs::write(dir.join("client-ca.crt"), &client_ca.pem).expect("write the CA");
    let ca_file = dir.join("client-ca.crt");
    tls_server(dir, &ca.server(1), move |s| s.server.tls.client_ca_file = Some(ca_file)).await
}

#[tokio::test]
async fn mtls_refuses_a_client_without_a_certificate() {
    let (ca, dir) = (Ca::new("test CA"), tempfile::tempdir().expect("dir"));
    let s = mutual(&ca, &ca, dir.path()).await;
    let res = certs::client(&ca).build().expect("client").get(https(&s, "/healthz")).send().await;
    assert!(res.is_err(), "refused at the handshake: {res:?}");
}

#[tokio::test]
async fn mtls_accepts_a_client_certificate_signed_by_the_client_ca() {
    let (ca, dir) = (Ca::new("test CA"), tempfile::tempdir().expect("dir"));
    let s = mutual(&ca, &ca, dir.path()).await;
    let client = certs::client(&ca).identity(ca.client("balancer").identity()).build().expect("client");
    let res = client.get(https(&s, "/healthz")).send().await.expect("accepted");
    assert_eq!(res.status(), 200);
}

#[tokio::test]
async fn mtls_refuses_a_client_certificate_from_another_ca() {
    let (ca, dir) = (Ca::new("test CA"), tempfile::tempdir().expect("dir"));
    let s = mutual(&ca, &ca, dir.path()).await;
    let stranger = Ca::new("another CA").client("balancer");
    let client = certs::client(&ca).identity(stranger.identity()).build().expect("client");
    assert!(client.get(https(&s, "/healthz")).send().await.is_err(), "refused at the handshake");
}

#[tokio::test]
async fn the_admin_listener_serves_https_and_reports_the_certificates_expiry() {
    let (ca, dir) = (Ca::new("test CA"), tempfile::tempdir().expect("dir"));
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    let s = tls_server(dir.path(), &ca.server(1), |s| {
        s.admin.tls = TlsSettings { cert_file: Some(cert), key_file: Some(key), client_ca_file: None };
    })
    .await;
    let admin = s.running.admin_addr.expect("admin listener");
    let url = format!("https://127.0.0.1:{}/metrics", admin.port());
    let res = certs::client(&ca).build().expect("client").get(url).send().await.expect("admin over TLS");
    assert_eq!(res.status(), 200);
    let text = res.text().await.expect("metrics");
    for listener in ["admin", "server"] {
        let line = format!("toolgate_tls_certificate_expiry_timestamp_seconds{{listener=\"{listener}\"}}");
        assert!(text.contains(&line), "{line} in:\n{text}");
    }
}

/// Runs the binary with `args` and only the `env` given of its `TOOLGATE__` variables.
async fn toolgate(args: &[&str], env: &[(&str, &std::path::Path)]) -> std::process::Output {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"));
    cmd.args(args).env_remove("TOOLGATE_CONFIG");
    for (name, _) in std::env::vars().filter(|(k, _)| k.starts_with("TOOLGATE__")) {
        cmd.env_remove(name);
    }
    cmd.envs(env.iter().map(|(k, v)| (*k, v.as_os_str()))).output().await.expect("toolgate runs")
}

/// `toolgate healthcheck` against `s`, with the TLS settings of `dir`'s files.
async fn healthcheck(s: &TestServer, dir: &std::path::Path, client_ca: bool) -> std::process::Output {
    let bind = std::path::PathBuf::from(s.running.addr.to_string());
    let (cert, key, ca) = (dir.join("tls.crt"), dir.join("tls.key"), dir.join("client-ca.crt"));
    let mut env = vec![
        ("TOOLGATE__SERVER__BIND", bind.as_path()),
        ("TOOLGATE__SERVER__TLS__CERT_FILE", cert.as_path()),
        ("TOOLGATE__SERVER__TLS__KEY_FILE", key.as_path()),
    ];
    if client_ca {
        env.push(("TOOLGATE__SERVER__TLS__CLIENT_CA_FILE", ca.as_path()));
    }
    toolgate(&["healthcheck"], &env).await
}

#[tokio::test]
async fn healthcheck_speaks_tls_to_a_tls_listener() {
    let (ca, dir) = (Ca::new("test CA"), tempfile::tempdir().expect("dir"));
    let s = tls_server(dir.path(), &ca.server(1), |_| {}).await;
    let out = healthcheck(&s, dir.path(), false).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[tokio::test]
async fn healthcheck_with_client_certificates_required_passes_on_the_handshake() {
    let (ca, dir) = (Ca::new("test CA"), tempfile::tempdir().expect("dir"));
    let s = mutual(&ca, &ca, dir.path()).await;
    let out = healthcheck(&s, dir.path(), true).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[tokio::test]
async fn check_config_names_the_tls_setting_to_fix() {
    let dir = tempfile::tempdir().expect("dir");
    let (cert, key) = (dir.path().join("absent.crt"), dir.path().join("absent.key"));
    let out = toolgate(
        &["check-config"],
        &[("TOOLGATE__SERVER__TLS__CERT_FILE", cert.as_path()), ("TOOLGATE__SERVER__TLS__KEY_FILE", key.as_path())],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("server.tls.cert_file") && stderr.contains("no such file"), "{stderr}");
}

#[tokio::test]
async fn the_peer_address_reaches_the_handlers_over_tls() {
    // Only a trusted peer (ConnectInfo) makes X-Forwarded-For count: two forwarded clients
    // then get a budget each.
    let (ca, dir) = (Ca::new("test CA"), tempfile::tempdir().expect("dir"));
    let s = tls_server(dir.path(), &ca.server(1), |s| {
        s.server.trusted_proxies = vec!["127.0.0.1".into()];
        (s.limits.enabled, s.limits.requests_per_minute, s.limits.request_burst) = (true, 3, 3);
    })
    .await;
    let client = certs::client(&ca).build().expect("client");
    for forwarded in ["203.0.113.1", "203.0.113.2"] {
        let mut admitted = 0;
        for id in 0..5 {
            let res = client
                .post(https(&s, "/mcp"))
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", "2025-06-18")
                .header("x-forwarded-for", forwarded)
                .body(format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#))
                .send()
                .await
                .expect("POST");
            admitted += usize::from(res.status() != 429);
        }
        assert_eq!(admitted, 3, "{forwarded} has its own budget");
    }
}

#[test]
fn the_tls_guides_settings_load() {
    // The files it names exist only in a deployment, so check-config cannot read this block.
    let guide = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/tls.md")).expect("guide");
    let settings = crate::common::load_toml(&crate::common::toml_block(&guide, "## Settings")).expect("the guide's settings load");
    assert!(settings.server.tls.enabled() && settings.admin.tls.enabled());
}
