//! Readiness over real HTTP: ready only when the database answers and tokens can be verified
//! (issuer keys fetched at least once), and it follows the database going away and back.

use crate::{audit_support, common};

use std::time::Duration;

use audit_support::{PgDb, Proxy, pg_settings};
use common::TestServer;
use common::idp::{Issuer, RESOURCE};
use serde_json::json;
use toolgate::auth::settings::AuthMode;

async fn readyz(s: &TestServer) -> (u16, String) {
    let res = s.client.get(s.url("/readyz")).send().await.expect("readyz");
    (res.status().as_u16(), res.text().await.unwrap_or_default())
}

/// Polls `/readyz` until it answers `status` (probes run every 2 s), for up to 10 s.
async fn becomes(s: &TestServer, status: u16) -> String {
    let mut last = (0, String::new());
    for _ in 0..100 {
        last = readyz(s).await;
        if last.0 == status {
            return last.1;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("/readyz stayed {} {:?}, wanted {status}", last.0, last.1);
}

#[tokio::test]
async fn not_ready_until_issuer_keys_can_be_fetched() {
    // An issuer nobody answers for: tokens cannot be verified, so the replica takes no traffic.
    let s = TestServer::with(|c| {
        c.auth.mode = AuthMode::Jwt;
        c.auth.resource = Some(RESOURCE.into());
        c.auth.issuers =
            vec![serde_json::from_value(json!({"issuer": "http://127.0.0.1:9", "jwks_uri": "http://127.0.0.1:9/jwks"})).expect("issuer")];
    })
    .await;
    let (status, body) = readyz(&s).await;
    assert_eq!(status, 503);
    assert!(body.contains("issuer keys"), "{body}");
    assert_eq!(s.client.get(s.url("/healthz")).send().await.expect("healthz").status(), 200, "alive all the same");

    let idp = Issuer::start().await;
    let url = idp.url.clone();
    let s = TestServer::with(move |c| {
        c.auth.mode = AuthMode::Jwt;
        c.auth.resource = Some(RESOURCE.into());
        c.auth.issuers = vec![serde_json::from_value(json!({ "issuer": url })).expect("issuer")];
    })
    .await;
    assert_eq!(becomes(&s, 200).await, "ready");
}

#[tokio::test]
async fn readiness_follows_the_database() {
    let db = PgDb::create().await;
    let proxy = Proxy::start(audit_support::pg_host()).await;
    let url = db.url_via(&proxy.addr.to_string());
    let s = TestServer::with(move |c| {
        let data = c.storage.data_dir.clone();
        c.storage = pg_settings(url, &data);
    })
    .await;
    assert_eq!(readyz(&s).await.0, 200);
    proxy.cut();
    assert!(becomes(&s, 503).await.contains("database"));
    proxy.restore();
    assert_eq!(becomes(&s, 200).await, "ready");
}

#[tokio::test]
async fn draining_is_not_ready() {
    let s = TestServer::start().await;
    assert_eq!(readyz(&s).await, (200, "ready".to_owned()));
    s.state().shutdown.cancel();
    assert_eq!(readyz(&s).await.0, 503);
}
