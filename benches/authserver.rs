//! The built-in authorization server's token endpoint, measured (not tested): a code exchange
//! (look-up, single-use redemption, a new grant, a refresh token, an ES256 signature) and a
//! refresh (look-up, rotation, a new refresh token, a signature), one at a time, on SQLite
//! (a file, the default durability) and on Postgres (`TOOLGATE_TEST_PG_HOST`, default
//! 127.0.0.1:5432; a database made for the run and dropped after). Each step without the audit
//! log (as measured first, issue 27) and with it at its default durability (`sync`: the step
//! waits for its `oauth` record, as served). Against the nearest existing path: a `tools/call`
//! through the request path (`transport::exchange::start`, a trivial tool, no socket) on the
//! same store and audit log, which likewise answers only once its one durable row is written.
//! Prints p50/p99 per step and its p50 ÷ that call's.
//!
//!     cargo bench --bench authserver

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio_util::sync::CancellationToken;
use toolgate::audit::{AuditLog, AuditSettings};
use toolgate::authserver::token::Form;
use toolgate::authserver::{AuthServer, Parts, db, keys, now_ms, tokens};
use toolgate::caller::Caller;
use toolgate::config::authserver::{AuthServerSettings, ClientSettings, IdentityProviderSettings, ScopeRule};
use toolgate::principal::Principal;
use toolgate::protocol::jsonrpc::{Request, RequestId};
use toolgate::protocol::{CallToolResult, ProtocolVersion};
use toolgate::server::McpServer;
use toolgate::store::{StorageSettings, Store};
use toolgate::tool::{ClientCaps, Origin, Tool, ToolError};
use toolgate::transport::exchange::{self, Frame, Spec};

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

/// Prints a row; its p50.
fn report(backend: &str, step: &str, mut times: Vec<Duration>, against: Option<f64>) -> f64 {
    times.sort();
    let p50 = percentile(&times, 0.5);
    let ratio = against.map_or(String::new(), |a| format!("{:.1}", p50 / a));
    println!("| {backend} | {step} | {} | {p50:.3} ms | {:.3} ms | {ratio} |", times.len(), percentile(&times, 0.99));
    p50
}

/// The nearest existing path: `tools/call` of a tool that answers at once, its audit record
/// written at `audit`'s durability before the answer leaves.
async fn tools_call(backend: &str, audit: Arc<AuditLog>) -> f64 {
    let server = McpServer::new(Arc::new(toolgate::config::Settings::default()), Arc::new(toolgate::bus::LocalBus::default()));
    let tool = Tool::builder("calculate_sum", "Adds two numbers")
        .input_schema(json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}))
        .handler(|_| async { Ok::<_, ToolError>(CallToolResult::text("5")) });
    server.tools.sync_origin(Origin::Code, vec![tool]).expect("tool");
    let principal = Principal {
        issuer: "http://127.0.0.1:8080".into(),
        subject: "user".into(),
        client_id: Some("bench".into()),
        scopes: ["mcp:tools".to_owned()].into(),
        expires_at: u64::MAX,
        default_audience: true,
        server_audiences: vec![],
    };
    let caller = Caller { principal: Some(Arc::new(principal)), ip: Some([127, 0, 0, 1].into()), ..Caller::default() };
    let params = json!({"name": "calculate_sum", "arguments": {"a": 2, "b": 3}});
    let mut times = Vec::with_capacity(ROUNDS);
    for i in 0..ROUNDS {
        let request = Request {
            id: RequestId::Number(i as i64),
            method: "tools/call".into(),
            params: params.as_object().cloned().unwrap_or_default(),
        };
        let spec = Spec {
            version: ProtocolVersion::LATEST_LEGACY,
            session: None,
            caller: caller.clone(),
            caps: ClientCaps::default(),
            log_level: None,
            cancel: CancellationToken::new(),
            buffer: 4,
            client_timeout: Duration::from_secs(5),
            status_of: exchange::legacy_status,
            audit: Some(audit.clone()),
        };
        let started = Instant::now();
        let mut rx = exchange::start(server.clone(), request, spec);
        let Some(Frame::Final { .. }) = rx.recv().await else { panic!("no answer") };
        times.push(started.elapsed());
    }
    report(backend, "tools/call, its audit record (nearest path)", times, None)
}

async fn measure(backend: &str, store: Store, key_file: &std::path::Path, audit: Option<Arc<AuditLog>>, against: f64) {
    let audited = if audit.is_some() { ", audited" } else { "" };
    let http = reqwest::Client::new();
    let parts = Parts {
        resources: vec![RESOURCE.into()],
        servers: Default::default(),
        scopes_supported: vec!["mcp:tools".into()],
        store: store.clone(),
        audit,
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
    report(backend, &format!("code exchange{audited}"), exchange, Some(against));
    let mut refresh = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let params = pairs(&[("grant_type", "refresh_token"), ("refresh_token", &refresh_token), ("client_id", "bench")]);
        let started = Instant::now();
        let body = server.token(&Form { params: &params, basic: None }).await.expect("refresh");
        refresh.push(started.elapsed());
        refresh_token = body["refresh_token"].as_str().expect("rotated").to_owned();
    }
    report(backend, &format!("refresh (rotation){audited}"), refresh, Some(against));
}

/// Every step on `store`: the nearest path first, then the steps without and with the audit log.
async fn measure_all(backend: &str, store: &Store, key_file: &std::path::Path) {
    let audit = AuditLog::start(&AuditSettings { retention_days: 0, ..AuditSettings::default() }, store.clone()).expect("audit log");
    let against = tools_call(backend, audit.clone()).await;
    measure(backend, store.clone(), key_file, None, against).await;
    measure(backend, store.clone(), key_file, Some(audit.clone()), against).await;
    audit.shutdown(Duration::from_secs(5)).await;
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let dir = std::env::temp_dir().join(format!("toolgate-bench-as-{:x}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let key_file = dir.join("key.pem");
        std::fs::write(&key_file, keys::generate_pem().expect("key")).expect("key file");
        println!("| backend | step | n | p50 | p99 | ÷ tools/call p50 |\n| --- | --- | --- | --- | --- | --- |");
        let sqlite = StorageSettings { data_dir: dir.join("data"), ..StorageSettings::default() };
        measure_all("SQLite", &Store::connect(&sqlite).await.expect("sqlite"), &key_file).await;
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
                measure_all("Postgres", &store, &key_file).await;
                store.close().await;
                let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE {name}"))).execute(&pool).await;
            }
            Err(e) => println!("Postgres not measured: {e}"),
        }
        let _ = std::fs::remove_dir_all(&dir);
    });
}
