//! What a per-user upstream credential costs a call, measured (not tested): `tools/call` through
//! toolgate (in process, over loopback HTTP, one 2025-11-25 session, JWT bearer tokens of its
//! own authorization server) to an upstream MCP server on loopback (JSON answers, one tool that
//! echoes the `Authorization` it got), as `oauth.grant = "user"` (the caller's own token from
//! the vault: its row read and opened, the `use` event, the caller's cached connection) against
//! the same upstream with one shared static bearer (`headers`): same toolgate, caller, session
//! and tool, one call at a time, blocks of the two interleaved. Then the first call of fresh
//! users (their connection opened: the upstream's `initialize` handshake). Each with the audit
//! log at its default durability (`sync`) and off. The vault is seeded with each user's token
//! directly (`Vault::store_tokens`), so no browser is needed. Prints p50/p99 and per-user ÷ shared.
//!
//!     cargo bench --bench user_credentials

use std::path::Path;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde_json::{Value, json};
use toolgate::app::{self, AppState, Running};
use toolgate::authserver::now_ms;
use toolgate::config::Settings;
use toolgate::config::authserver::{IdentityProviderSettings, ScopeRule};
use toolgate::vault::authorization_server::TokenSet;

const WARMUP: usize = 300;
const BLOCKS: usize = 20;
const PER_BLOCK: usize = 200;
const FRESH_USERS: usize = 200;
/// Never reached: the per-user upstream's authorization server matters only for a refresh.
const UPSTREAM_AS: &str = "http://127.0.0.1:9";

/// The upstream: any bearer goes; `tools/call` answers with the `Authorization` it got.
async fn upstream() -> String {
    async fn answer(headers: HeaderMap, body: String) -> Response {
        let message: Value = serde_json::from_str(&body).unwrap_or_default();
        let reply = |result: Value| axum::Json(json!({"jsonrpc": "2.0", "id": message["id"], "result": result}));
        match message["method"].as_str().unwrap_or_default() {
            "initialize" => {
                let result =
                    json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "up", "version": "1"}});
                ([("mcp-session-id", "up-session")], reply(result)).into_response()
            }
            "tools/list" => {
                reply(json!({"tools": [{"name": "whoami", "description": "Echoes the credential.", "inputSchema": {"type": "object"}}]}))
                    .into_response()
            }
            "tools/call" => {
                let said = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or("none").to_owned();
                reply(json!({"content": [{"type": "text", "text": said}]})).into_response()
            }
            "ping" => reply(json!({})).into_response(),
            _ => StatusCode::ACCEPTED.into_response(),
        }
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    let app = axum::Router::new().route("/mcp", axum::routing::post(answer).delete(|| async { StatusCode::OK }));
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

struct Gate {
    running: Running,
    origin: String,
    key_pem: String,
    kid: String,
    http: reqwest::Client,
}

impl Gate {
    async fn start(files: &Path, upstream: &str, audit: bool) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        let origin = format!("http://127.0.0.1:{port}");
        let key_pem = std::fs::read_to_string(files.join("signing.pem")).expect("key");
        let mut s = Settings::default();
        s.storage.data_dir = files.join(format!("data-{port}"));
        s.limits.enabled = false;
        s.admin.enabled = false;
        s.tools.packs.examples = false;
        s.audit.enabled = audit;
        s.auth.mode = toolgate::auth::settings::AuthMode::Jwt;
        s.auth.resource = Some(format!("{origin}/mcp"));
        let a = &mut s.authorization_server;
        a.enabled = true;
        a.issuer = Some(origin.clone());
        a.signing_key_files = vec![files.join("signing.pem")];
        a.scope_rules = vec![ScopeRule { claim: None, values: vec![], scopes: vec!["mcp:tools".into()] }];
        a.identity_provider = IdentityProviderSettings { issuer: UPSTREAM_AS.into(), client_id: "toolgate".into(), ..Default::default() };
        s.vault = serde_json::from_value(json!({"keys": [{"id": "k1", "file": files.join("vault-key")}]})).expect("vault");
        let common = json!({"url": upstream, "allow_private": true, "approval": "off", "protocol": "legacy"});
        let mut user = common.clone();
        user["oauth"] = json!({"grant": "user", "client_id": "toolgate", "authorization_server": UPSTREAM_AS, "discovery": "none"});
        let mut shared = common;
        shared["headers"] = json!({"Authorization": {"file": files.join("shared-token"), "prefix": "Bearer "}});
        s.upstreams.insert("mine".into(), serde_json::from_value(user).expect("user upstream"));
        s.upstreams.insert("shared".into(), serde_json::from_value(shared).expect("shared upstream"));
        s.validate().expect("valid settings");
        let state = AppState::new(s).await.expect("state");
        let running = app::start(state, format!("127.0.0.1:{port}").parse().expect("addr")).await.expect("started");
        let http = reqwest::Client::new();
        let jwks: Value = http.get(format!("{origin}/oauth/jwks")).send().await.expect("JWKS").json().await.expect("JSON");
        let kid = jwks["keys"][0]["kid"].as_str().expect("kid").to_owned();
        let gate = Self { running, origin, key_pem, kid, http };
        for _ in 0..200 {
            let names: Vec<String> = gate.running.state.server.tools.snapshot().iter().map(|t| t.name().to_owned()).collect();
            if ["mine_whoami", "shared_whoami"].iter().all(|n| names.iter().any(|m| m == n)) {
                return gate;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the upstreams' tools were never served");
    }

    /// An access token of toolgate's own for `subject` (as its authorization server issues).
    fn token(&self, subject: &str) -> String {
        let now = now_ms() / 1000;
        let claims = json!({
            "iss": self.origin, "sub": subject, "aud": format!("{}/mcp", self.origin), "client_id": "bench", "scope": "mcp:tools",
            "iat": now, "exp": now + 3600, "jti": uuid::Uuid::new_v4().to_string(), "sid": uuid::Uuid::new_v4().to_string(),
        });
        let secret = <p256::SecretKey as p256::pkcs8::DecodePrivateKey>::from_pkcs8_pem(&self.key_pem).expect("EC key");
        let der = p256::pkcs8::EncodePrivateKey::to_pkcs8_der(&secret).expect("PKCS#8");
        let mut head = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        head.kid = Some(self.kid.clone());
        head.typ = Some("at+jwt".into());
        jsonwebtoken::encode(&head, &claims, &jsonwebtoken::EncodingKey::from_ec_der(der.as_bytes())).expect("signed")
    }

    /// Puts `subject`'s own token at the upstream into the vault, as a connect would.
    async fn seed(&self, subject: &str) {
        let vault = self.running.state.vault.as_ref().expect("vault");
        let tokens = TokenSet {
            access_token: format!("token-of-{subject}"),
            refresh_token: None,
            expires_ms: now_ms() + 3_600_000,
            scope: String::new(),
        };
        vault.store_tokens(&format!("{}\u{1f}{subject}", self.origin), "mine", UPSTREAM_AS, &tokens).await.expect("seeded");
    }

    async fn post(&self, token: &str, session: Option<&str>, body: Value) -> reqwest::Response {
        let mut req = self
            .http
            .post(format!("{}/mcp", self.origin))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("authorization", format!("Bearer {token}"));
        if let Some(session) = session {
            req = req.header("mcp-session-id", session);
        }
        req.body(body.to_string()).send().await.expect("POST /mcp")
    }

    /// A 2025-11-25 session of `token`'s holder.
    async fn session(&self, token: &str) -> String {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}});
        let res = self.post(token, None, init).await;
        let session = res.headers()["mcp-session-id"].to_str().expect("ascii").to_owned();
        self.post(token, Some(&session), json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        session
    }

    /// One call of `tool`: its time and the answer's body.
    async fn call(&self, token: &str, session: &str, tool: &str) -> (Duration, String) {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": {}}});
        let started = Instant::now();
        let text = self.post(token, Some(session), body).await.text().await.expect("body");
        (started.elapsed(), text)
    }
}

fn ms(sorted: &[Duration], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1e3
}

/// Prints a row; its p50.
fn row(audit: &str, what: &str, mut times: Vec<Duration>, against: Option<f64>) -> f64 {
    times.sort_unstable();
    let (p50, p99) = (ms(&times, 0.5), ms(&times, 0.99));
    let ratio = against.map_or("".into(), |a| format!("{:.2}", p50 / a));
    println!("| {audit} | {what} | {} | {p50:.3} ms | {p99:.3} ms | {ratio} |", times.len());
    p50
}

async fn measure(files: &Path, upstream: &str, audit: bool) {
    let label = if audit { "on (sync)" } else { "off" };
    let gate = Gate::start(files, upstream, audit).await;
    gate.seed("u0").await;
    let token = gate.token("u0");
    let session = gate.session(&token).await;
    // Each path does what it says: the user's own token, or the shared one, reaches the upstream.
    let (_, mine) = gate.call(&token, &session, "mine_whoami").await;
    let (_, shared) = gate.call(&token, &session, "shared_whoami").await;
    assert!(mine.contains("Bearer token-of-u0") && shared.contains("Bearer shared-secret"), "{mine}\n{shared}");
    for _ in 0..WARMUP {
        gate.call(&token, &session, "mine_whoami").await;
        gate.call(&token, &session, "shared_whoami").await;
    }
    let (mut user_times, mut shared_times) = (Vec::new(), Vec::new());
    for block in 0..BLOCKS {
        // Alternate which goes first, so neither always follows the other.
        for tool in if block % 2 == 0 { ["shared_whoami", "mine_whoami"] } else { ["mine_whoami", "shared_whoami"] } {
            let into = if tool == "mine_whoami" { &mut user_times } else { &mut shared_times };
            for _ in 0..PER_BLOCK {
                into.push(gate.call(&token, &session, tool).await.0);
            }
        }
    }
    let base = row(label, "shared static bearer (cached connection)", shared_times, None);
    row(label, "per-user, steady (cached connection)", user_times, Some(base));
    let mut first = Vec::with_capacity(FRESH_USERS);
    for i in 0..FRESH_USERS {
        let subject = format!("fresh-{i}");
        gate.seed(&subject).await;
        let token = gate.token(&subject);
        let session = gate.session(&token).await;
        first.push(gate.call(&token, &session, "mine_whoami").await.0);
    }
    row(label, "per-user, a user's first call (opens it)", first, Some(base));
    gate.running.stop().await.expect("stopped");
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let files = tempfile::tempdir().expect("temp dir");
        let key = base64::engine::general_purpose::STANDARD.encode(rand::random::<[u8; 32]>());
        std::fs::write(files.path().join("vault-key"), key).expect("vault key");
        std::fs::write(files.path().join("shared-token"), "shared-secret").expect("shared token");
        std::fs::write(files.path().join("signing.pem"), toolgate::authserver::keys::generate_pem().expect("key")).expect("key file");
        let upstream = upstream().await;
        println!("| audit | call | n | p50 | p99 | ÷ shared p50 |\n| --- | --- | --- | --- | --- | --- |");
        for audit in [true, false] {
            measure(files.path(), &upstream, audit).await;
        }
    });
}
