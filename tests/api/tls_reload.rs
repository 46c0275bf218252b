//! Certificate rotation on disk: new connections get the new certificate (files rewritten in
//! place, or a Kubernetes Secret's `..data` symlink swapped), connections opened before keep
//! working on the old one, and a broken file keeps the previous certificate in service.

use std::time::Duration;

use crate::common::certs::{self, Ca, SecretDir};
use crate::common::{SseReader, TestServer};
use crate::tls::tls_server;
use toolgate::config::tls::TlsSettings;

fn https(s: &TestServer, path: &str) -> String {
    format!("https://127.0.0.1:{}{path}", s.running.addr.port())
}

/// The certificate a new connection is served.
async fn served_to_a_new_connection(s: &TestServer, ca: &Ca) -> Vec<u8> {
    let res = certs::client(ca).build().expect("client").get(https(s, "/healthz")).send().await.expect("healthz");
    certs::served(&res)
}

/// Polls new connections until they are served `der`, for up to 5 s.
async fn becomes_served(s: &TestServer, ca: &Ca, der: &[u8]) {
    for _ in 0..100 {
        if served_to_a_new_connection(s, ca).await == der {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("new connections never got the new certificate");
}

#[tokio::test]
async fn rewritten_files_serve_new_connections_while_a_kept_alive_http2_connection_keeps_working() {
    let (ca, dir) = (Ca::new("test CA"), tempfile::tempdir().expect("dir"));
    let (first, second) = (ca.server(1), ca.server(2));
    let s = tls_server(dir.path(), &first, |_| {}).await;
    let kept = certs::client(&ca).build().expect("client");
    assert_eq!(certs::served(&kept.get(https(&s, "/healthz")).send().await.expect("before")), first.der);

    second.write(dir.path());
    becomes_served(&s, &ca, &second.der).await;

    let res = kept.get(https(&s, "/healthz")).send().await.expect("the old connection still serves");
    assert_eq!((res.status().as_u16(), res.version()), (200, reqwest::Version::HTTP_2));
    assert_eq!(certs::served(&res), first.der, "the same connection, still on the first certificate");
}

#[tokio::test]
async fn a_swapped_secret_symlink_serves_new_connections_while_an_open_sse_stream_keeps_working() {
    let ca = Ca::new("test CA");
    let (first, second) = (ca.server(1), ca.server(2));
    let mut secret = SecretDir::new(&first);
    let tls = TlsSettings { cert_file: Some(secret.cert_file()), key_file: Some(secret.key_file()), client_ca_file: None };
    let s = TestServer::with(move |c| c.server.tls = tls).await;
    let kept = certs::client(&ca).build().expect("client");
    let mut stream = SseReader::new(kept.get(https(&s, "/sse")).send().await.expect("GET /sse"));
    let endpoint = stream.next_event().await.expect("endpoint").data;

    secret.rotate(&second);
    becomes_served(&s, &ca, &second.der).await;

    let ping = r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;
    let posted = kept.post(https(&s, &endpoint)).header("content-type", "application/json").body(ping).send().await.expect("POST");
    assert_eq!(posted.status(), 202);
    let (_, answer) = stream.next_message_within(Duration::from_secs(5)).await.expect("the answer on the open stream");
    assert_eq!(answer["id"], 7);
}

#[tokio::test]
async fn a_broken_certificate_file_keeps_the_previous_certificate() {
    let (ca, dir) = (Ca::new("test CA"), tempfile::tempdir().expect("dir"));
    let first = ca.server(1);
    let s = tls_server(dir.path(), &first, |_| {}).await;
    std::fs::write(dir.path().join("tls.crt"), "-----BEGIN CERTIFICATE-----\nhalf writ").expect("break it");

    let metrics = s.admin_url("/metrics");
    let refused = "toolgate_tls_reloads_total{listener=\"server\",result=\"invalid\"} 1";
    let mut seen = String::new();
    for _ in 0..100 {
        seen = s.client.get(&metrics).send().await.expect("metrics").text().await.expect("text");
        if seen.contains(refused) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(seen.contains(refused), "the reload was refused:\n{seen}");
    assert_eq!(served_to_a_new_connection(&s, &ca).await, first.der, "the first certificate still serves");
}
