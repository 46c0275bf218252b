//! The built-in authorization server's token endpoint, measured (not tested): a code exchange
//! (look-up, single-use redemption, a new grant, a refresh token, an ES256 signature) and a
//! refresh (look-up, rotation, a new refresh token, a signature), one at a time, on SQLite
//! (a file, the default durability) and on Postgres (`TOOLGATE_TEST_PG_HOST`, default
//! 127.0.0.1:5432; a database made for the run and dropped after). Prints p50/p99 per step.
//!
//!     cargo bench --bench authserver

use std::time::{Duration, Instant};

use serde_json::json;
use toolgate::authserver::token::Form;
use toolgate::authserver::{AuthServer, Parts, db, keys, now_ms, tokens};
use toolgate::config::authserver::{AuthServerSettings, ClientSettings, IdentityProviderSettings, ScopeRule};
use toolgate::store::{StorageSettings, Store};

const ROUNDS: usize = 1000;
const RESOURCE: &str = "http://127.0.0.1:8080/mcp";
const REDIRECT: &str = "http://127.0.0.1/cb";
const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

fn settings(key_file: &std::path::Path) -> AuthServerSettings {
    AuthServerSettings {
        enabled: true,
        issuer: Some("http://127.0.0.1:8080".into()),
        signing_key_files: vec![key_file.to_owned()],
        identity_provider: IdentityProviderSettings {
            issuer: "http://127.0.0.1:9".into(),
            client_id: "toolgate".into(),
            ..Default::default()
        },
        scope_rules: vec![ScopeRule { claim: None, values: vec![], scopes: vec!["mcp:tools".into()] }],
        clients: vec![ClientSettings {
            client_id: "bench".into(),
            client_name: "bench".into(),
            redirect_uris: vec![REDIRECT.into()],
            client_secret: None,
            scopes: vec![],
        }],
        ..Default::default()
    }
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

fn report(backend: &str, step: &str, mut times: Vec<Duration>) {
    times.sort();
    println!("| {backend} | {step} | {} | {:.2} ms | {:.2} ms |", times.len(), percentile(&times, 0.5), percentile(&times, 0.99));
}

async fn measure(backend: &str, store: Store, key_file: &std::path::Path) {
    let http = reqwest::Client::new();
    let parts = Parts {
        resources: vec![RESOURCE.into()],
        servers: Default::default(),
        scopes_supported: vec!["mcp:tools".into()],
        store: store.clone(),
        audit: None,
        http,
    };
    let server = AuthServer::new(settings(key_file), parts).expect("authorization server");
    let details = json!({
        "client_id": "bench", "redirect_uri": REDIRECT, "code_challenge": CHALLENGE, "resource": RESOURCE,
        "scopes": ["mcp:tools"], "refresh": true,
        "identity": {"issuer": "http://idp", "subject": "user", "email": "user@example.com", "scopes": ["mcp:tools"]},
    })
    .to_string();
    let mut exchange = Vec::with_capacity(ROUNDS);
    let mut refresh_token = String::new();
    for _ in 0..ROUNDS {
        let code = tokens::random_secret();
        db::code_insert(&store, &tokens::hash(&code), &details, now_ms() + 60_000).await.expect("code");
        let params = pairs(&[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("code_verifier", VERIFIER),
            ("client_id", "bench"),
            ("redirect_uri", REDIRECT),
            ("resource", RESOURCE),
        ]);
        let started = Instant::now();
        let body = server.token(&Form { params: &params, basic: None }).await.expect("exchange");
        exchange.push(started.elapsed());
        refresh_token = body["refresh_token"].as_str().expect("refresh token").to_owned();
    }
    report(backend, "code exchange", exchange);
    let mut refresh = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let params = pairs(&[("grant_type", "refresh_token"), ("refresh_token", &refresh_token), ("client_id", "bench")]);
        let started = Instant::now();
        let body = server.token(&Form { params: &params, basic: None }).await.expect("refresh");
        refresh.push(started.elapsed());
        refresh_token = body["refresh_token"].as_str().expect("rotated").to_owned();
    }
    report(backend, "refresh (rotation)", refresh);
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let dir = std::env::temp_dir().join(format!("toolgate-bench-as-{:x}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let key_file = dir.join("key.pem");
        std::fs::write(&key_file, keys::generate_pem().expect("key")).expect("key file");
        println!("| backend | step | n | p50 | p99 |\n| --- | --- | --- | --- | --- |");
        let sqlite = StorageSettings { data_dir: dir.join("data"), ..StorageSettings::default() };
        measure("SQLite", Store::connect(&sqlite).await.expect("sqlite"), &key_file).await;
        let host = std::env::var("TOOLGATE_TEST_PG_HOST").unwrap_or_else(|_| "127.0.0.1:5432".into());
        let name = format!("toolgate_bench_{:x}", rand::random::<u32>());
        let admin = format!("postgres://postgres@{host}/postgres");
        match sqlx::PgPool::connect(&admin).await {
            Ok(pool) => {
                sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&pool).await.expect("create database");
                let pg = StorageSettings {
                    url: Some(toolgate::config::Secret::new(format!("postgres://postgres@{host}/{name}"))),
                    data_dir: dir.join("pg"),
                    ..StorageSettings::default()
                };
                let store = Store::connect(&pg).await.expect("postgres");
                measure("Postgres", store.clone(), &key_file).await;
                store.close().await;
                let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE {name}"))).execute(&pool).await;
            }
            Err(e) => println!("Postgres not measured: {e}"),
        }
        let _ = std::fs::remove_dir_all(&dir);
    });
}
