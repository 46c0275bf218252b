//! The authorization server's clients against real servers and databases: Client ID Metadata
//! Documents fetched over real https from loopback servers started here (the SSRF guard,
//! redirects, size, time, content, caching; BBX-44..50), and dynamic registration stored in
//! SQLite and Postgres.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};
use toolgate::authserver::clients::{AuthMethod, ClientError, ClientKind, Clients};
use toolgate::config::Secret;
use toolgate::config::authserver::{AuthServerSettings, RegistrationMode};
use toolgate::store::Store;

use crate::audit_support::{PgDb, pg_settings, sqlite_settings};
use crate::common::cimd::HttpsServer;

const PATH: &str = "/oauth/client.json";

/// A server answering `PATH` with what `answer` makes of the request count (1, 2, ...),
/// counting requests to every path.
async fn document_server(answer: impl Fn(usize, String) -> Response + Clone + Send + Sync + 'static) -> (HttpsServer, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    let port = Arc::new(std::sync::OnceLock::<u16>::new());
    let port_in = port.clone();
    let router = Router::new().fallback(get(move |uri: axum::http::Uri| {
        let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
        let url = format!("https://127.0.0.1:{}{}", port_in.get().copied().unwrap_or_default(), uri.path());
        let answer = answer.clone();
        async move { if uri.path() == PATH { answer(n, url) } else { StatusCode::NOT_FOUND.into_response() } }
    }));
    let server = HttpsServer::start(router).await;
    port.set(server.addr.port()).expect("port set once");
    (server, hits)
}

fn document(client_id: &str) -> Value {
    json!({"client_id": client_id, "client_name": "Loopback Client", "redirect_uris": ["http://localhost/callback"]})
}

fn json_response(value: &Value) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], value.to_string()).into_response()
}

/// Settings that trust the server's CA and exempt its loopback address from the SSRF guard.
fn settings_for(server: &HttpsServer) -> AuthServerSettings {
    let mut settings = AuthServerSettings::default();
    settings.metadata_documents.ca_file = Some(server.ca_file.clone());
    settings.metadata_documents.private_hosts = vec![server.host_port()];
    settings
}

async fn clients(settings: AuthServerSettings) -> (Clients, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::connect(&sqlite_settings(dir.path())).await.expect("store");
    (Clients::new(Arc::new(settings), store).expect("clients"), dir)
}

fn refusal(result: Result<Arc<toolgate::authserver::clients::Client>, ClientError>) -> String {
    match result {
        Err(ClientError::Document(reason)) => reason,
        other => panic!("expected a refused document, got {other:?}"),
    }
}

#[tokio::test]
async fn a_valid_document_is_fetched_over_https_and_cached() {
    let (server, hits) = document_server(|_, url| json_response(&document(&url))).await;
    let (clients, _dir) = clients(settings_for(&server)).await;
    let client = clients.resolve(&server.url(PATH)).await.expect("resolved");
    assert_eq!(
        (client.kind, client.auth_method, client.name.as_str()),
        (ClientKind::MetadataDocument, AuthMethod::None, "Loopback Client")
    );
    assert!(client.redirect_allowed("http://localhost:61234/callback"));
    clients.resolve(&server.url(PATH)).await.expect("cached");
    assert_eq!(hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_document_on_a_loopback_address_is_refused_unless_its_host_is_exempt() {
    let (server, hits) = document_server(|_, url| json_response(&document(&url))).await;
    let mut settings = settings_for(&server);
    settings.metadata_documents.private_hosts.clear();
    let (clients, _dir) = clients(settings).await;
    let reason = refusal(clients.resolve(&server.url(PATH)).await);
    assert!(reason.contains("private or local"), "{reason}");
    assert_eq!(hits.load(Ordering::SeqCst), 0, "no connection was made");
}

#[tokio::test]
async fn a_host_name_resolving_to_loopback_is_refused_by_the_resolver() {
    let (server, hits) = document_server(|_, url| json_response(&document(&url))).await;
    let (clients, _dir) = clients(settings_for(&server)).await;
    let reason = refusal(clients.resolve(&format!("https://localhost:{}{PATH}", server.addr.port())).await);
    assert!(reason.contains("private or local"), "{reason}");
    assert_eq!(hits.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_redirect_is_not_followed() {
    let (server, hits) = document_server(|_, _| (StatusCode::FOUND, [(header::LOCATION, "/elsewhere")]).into_response()).await;
    let (clients, _dir) = clients(settings_for(&server)).await;
    let reason = refusal(clients.resolve(&server.url(PATH)).await);
    assert!(reason.contains("302") && reason.contains("redirects are not followed"), "{reason}");
    assert_eq!(hits.load(Ordering::SeqCst), 1, "/elsewhere was never asked for");
}

#[tokio::test]
async fn a_document_larger_than_the_cap_is_refused_while_it_streams() {
    let (server, _) = document_server(|_, url| {
        let mut doc = document(&url);
        doc["padding"] = json!("x".repeat(6 * 1024));
        let chunks = doc.to_string().into_bytes().chunks(512).map(|c| Ok::<_, std::io::Error>(c.to_vec())).collect::<Vec<_>>();
        Body::from_stream(futures_util::stream::iter(chunks)).into_response()
    })
    .await;
    let (clients, _dir) = clients(settings_for(&server)).await;
    let reason = refusal(clients.resolve(&server.url(PATH)).await);
    assert!(reason.contains("larger than 5120 bytes"), "{reason}");
}

#[tokio::test]
async fn a_trickling_document_is_stopped_by_the_timeout() {
    let (server, _) = document_server(|_, _| {
        let trickle = futures_util::stream::unfold(0u32, |n| async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Some((Ok::<_, std::io::Error>(vec![b' ']), n + 1))
        });
        Body::from_stream(trickle).into_response()
    })
    .await;
    let mut settings = settings_for(&server);
    settings.metadata_documents.timeout_ms = 500;
    let (clients, _dir) = clients(settings).await;
    let started = Instant::now();
    let reason = refusal(clients.resolve(&server.url(PATH)).await);
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
    assert!(reason.contains("500 ms") || reason.contains("timed out"), "{reason}");
}

#[tokio::test]
async fn a_compressed_document_is_refused() {
    let (server, _) = document_server(|_, _| ([(header::CONTENT_ENCODING, "gzip")], vec![0x1f, 0x8b, 0, 0]).into_response()).await;
    let (clients, _dir) = clients(settings_for(&server)).await;
    assert!(refusal(clients.resolve(&server.url(PATH)).await).contains("compressed"));
}

#[tokio::test]
async fn an_answer_other_than_200_is_refused() {
    let (server, _) = document_server(|_, url| (StatusCode::ACCEPTED, document(&url).to_string()).into_response()).await;
    let (clients, _dir) = clients(settings_for(&server)).await;
    assert!(refusal(clients.resolve(&server.url(PATH)).await).contains("202"));
}

#[tokio::test]
async fn a_document_that_is_not_json_is_refused() {
    let (server, _) = document_server(|_, _| "<html>hello</html>".into_response()).await;
    let (clients, _dir) = clients(settings_for(&server)).await;
    assert!(refusal(clients.resolve(&server.url(PATH)).await).contains("not valid JSON"));
}

#[tokio::test]
async fn a_document_whose_client_id_differs_by_a_trailing_slash_is_refused() {
    let (server, _) = document_server(|_, url| json_response(&document(&format!("{url}/")))).await;
    let (clients, _dir) = clients(settings_for(&server)).await;
    assert!(refusal(clients.resolve(&server.url(PATH)).await).contains("client_id"));
}

#[tokio::test]
async fn a_failed_fetch_is_not_cached() {
    let (server, hits) =
        document_server(|n, url| if n == 1 { StatusCode::INTERNAL_SERVER_ERROR.into_response() } else { json_response(&document(&url)) })
            .await;
    let (clients, _dir) = clients(settings_for(&server)).await;
    assert!(clients.resolve(&server.url(PATH)).await.is_err());
    clients.resolve(&server.url(PATH)).await.expect("fetched again");
    assert_eq!(hits.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_badly_shaped_document_url_is_refused_without_a_fetch() {
    let (server, hits) = document_server(|_, url| json_response(&document(&url))).await;
    let (clients, _dir) = clients(settings_for(&server)).await;
    for bad in [
        server.url(PATH).replace("https", "http"),
        server.url("/a/../oauth/client.json"),
        server.url("/"),
        format!("{}#f", server.url(PATH)),
    ] {
        assert!(matches!(clients.resolve(&bad).await, Err(ClientError::Document(_))), "{bad}");
    }
    assert_eq!(hits.load(Ordering::SeqCst), 0);
}

fn registration(uri: &str) -> Vec<u8> {
    json!({"client_name": "Agent", "redirect_uris": [uri], "grant_types": ["authorization_code", "refresh_token"], "token_endpoint_auth_method": "none"})
        .to_string()
        .into_bytes()
}

#[tokio::test]
async fn a_registration_is_resolved_by_another_instance_on_the_same_database() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::connect(&sqlite_settings(dir.path())).await.expect("store");
    let one = Clients::new(Arc::new(AuthServerSettings::default()), store.clone()).expect("clients");
    let other = Clients::new(Arc::new(AuthServerSettings::default()), store).expect("clients");
    let response = one.register(&registration("http://127.0.0.1/cb"), None).await.expect("registered");
    let client_id = response["client_id"].as_str().expect("client_id");
    let client = other.resolve(client_id).await.expect("resolved");
    assert_eq!((client.kind, client.name.as_str(), client.refresh_tokens), (ClientKind::Registered, "Agent", true));
    assert!(client.redirect_allowed("http://127.0.0.1:50123/cb"));
}

#[tokio::test]
async fn a_confidential_registration_authenticates_with_the_secret_it_was_given() {
    let (clients, _dir) = clients(AuthServerSettings::default()).await;
    let body = json!({"redirect_uris": ["https://agent.example.com/cb"], "token_endpoint_auth_method": "client_secret_post"}).to_string();
    let response = clients.register(body.as_bytes(), None).await.expect("registered");
    let client = clients.resolve(response["client_id"].as_str().expect("id")).await.expect("resolved");
    assert!(client.secret_matches(response["client_secret"].as_str().expect("secret")));
    assert!(!client.secret_matches("guess"));
}

#[tokio::test]
async fn an_unknown_client_id_is_unknown() {
    let (clients, _dir) = clients(AuthServerSettings::default()).await;
    assert!(matches!(clients.resolve("tgc_AAAAAAAAAAAAAAAAAAAAAA").await, Err(ClientError::Unknown)));
    assert!(matches!(clients.resolve("admin").await, Err(ClientError::Unknown)));
}

#[tokio::test]
async fn token_mode_refuses_a_registration_without_the_initial_access_token() {
    let mut settings = AuthServerSettings::default();
    settings.registration.mode = RegistrationMode::Token;
    settings.registration.initial_access_token = Some(Secret::new("initial-access-token-1234".into()));
    let (clients, _dir) = clients(settings).await;
    let refused = clients.register(&registration("http://127.0.0.1/cb"), Some("wrong")).await.expect_err("refused");
    assert_eq!(refused.error, "invalid_token");
    assert!(clients.register(&registration("http://127.0.0.1/cb"), Some("initial-access-token-1234")).await.is_ok());
}

#[tokio::test]
async fn an_unused_registration_is_purged() {
    let mut settings = AuthServerSettings::default();
    settings.registration.unused_secs = 0;
    let (clients, _dir) = clients(settings).await;
    let unused = clients.register(&registration("http://127.0.0.1/cb"), None).await.expect("registered")["client_id"].clone();
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert_eq!(clients.purge().await.expect("purged"), 1);
    assert!(matches!(clients.resolve(unused.as_str().expect("id")).await, Err(ClientError::Unknown)));
}

#[tokio::test]
async fn a_registration_is_stored_and_resolved_on_postgres() {
    let db = PgDb::create().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::connect(&pg_settings(db.url(), dir.path())).await.expect("store");
    let clients = Clients::new(Arc::new(AuthServerSettings::default()), store.clone()).expect("clients");
    let response = clients.register(&registration("http://[::1]/cb"), None).await.expect("registered");
    let client_id = response["client_id"].as_str().expect("id");
    clients.touch(client_id).await;
    assert_eq!(clients.resolve(client_id).await.expect("resolved").redirect_uris, vec!["http://[::1]/cb".to_owned()]);
    assert_eq!(clients.purge().await.expect("purge"), 0, "used just now");
    store.close().await;
}
