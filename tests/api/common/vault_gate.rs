//! A toolgate with per-user upstream credentials on (its authorization server, the hostile
//! OpenID provider of [`super::mock_idp`] as identity provider, `[vault]` keys from files) in
//! front of upstream `notes` ([`super::upstream_mcp`], guarded by [`super::upstream_as`]) with
//! `oauth.grant = "user"`. It can be restarted on the same port and data directory with other
//! vault keys. MCP callers carry access tokens signed with toolgate's own key, so a test picks
//! the subject; the identity provider always signs the browser in as [`USER`].

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use toolgate::app::{self, AppState, Running};
use toolgate::config::authserver::{IdentityProviderSettings, RegistrationMode, ScopeRule};
use toolgate::config::{Secret, Settings};

use super::mock_idp::{self, MockIdp};
use super::upstream_as::{self, UpstreamAs};
use super::upstream_mcp::UpstreamMcp;
use super::{ACCEPT_BOTH, test_settings};

pub const UPSTREAM: &str = "notes";
pub const TOOL: &str = "notes_whoami";
/// Whom the identity provider signs every browser in as.
pub const USER: &str = "user-1";

pub struct Gate {
    running: Option<Running>,
    /// toolgate's origin, which is its issuer.
    pub origin: String,
    pub idp: MockIdp,
    pub upstream_as: UpstreamAs,
    pub mcp: UpstreamMcp,
    /// Follows no redirect and keeps no cookie.
    pub http: reqwest::Client,
    key_pem: String,
    kid: String,
    port: u16,
    /// Whether `unconnected = "hide"`.
    hide: bool,
    /// No `client_id`: toolgate registers itself at the upstream's server.
    register: bool,
    data: tempfile::TempDir,
    files: tempfile::TempDir,
}

impl Gate {
    /// Started with the vault key `k1`.
    pub async fn start() -> Self {
        Self::start_with(false).await
    }

    /// `hide`: the upstream's `unconnected = "hide"`.
    pub async fn start_with(hide: bool) -> Self {
        Self::start_full(hide, false).await
    }

    /// toolgate registers itself at the upstream's server (RFC 7591): no `client_id`.
    pub async fn start_registering() -> Self {
        Self::start_full(false, true).await
    }

    async fn start_full(hide: bool, register: bool) -> Self {
        let idp = MockIdp::start().await;
        let upstream_as = UpstreamAs::start().await;
        let mcp = UpstreamMcp::start(upstream_as.clone()).await;
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        let files = tempfile::tempdir().expect("files");
        for key in ["k1", "k2"] {
            std::fs::write(files.path().join(key), STANDARD.encode(rand::random::<[u8; 32]>())).expect("vault key");
        }
        std::fs::write(files.path().join("client-secret"), upstream_as::CLIENT_SECRET).expect("secret");
        let key_pem = toolgate::authserver::keys::generate_pem().expect("a signing key");
        std::fs::write(files.path().join("signing.pem"), &key_pem).expect("key written");
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(30))
            .build()
            .expect("client");
        let mut gate = Self {
            running: None,
            origin: format!("http://127.0.0.1:{port}"),
            idp,
            upstream_as,
            mcp,
            http,
            key_pem,
            kid: String::new(),
            port,
            hide,
            register,
            data: tempfile::tempdir().expect("data dir"),
            files,
        };
        gate.boot(&["k1"]).await;
        gate
    }

    /// The settings of this gate with vault keys `keys` (ids of the files made at start).
    pub fn settings(&self, keys: &[&str]) -> Settings {
        let mut settings = test_settings(self.data.path());
        settings.tools.packs.examples = false;
        settings.auth.mode = toolgate::auth::settings::AuthMode::Jwt;
        settings.auth.resource = Some(format!("{}/mcp", self.origin));
        let a = &mut settings.authorization_server;
        a.enabled = true;
        a.issuer = Some(self.origin.clone());
        a.signing_key_files = vec![self.files.path().join("signing.pem")];
        a.requests_per_minute = 1000;
        a.scope_rules = vec![ScopeRule { claim: None, values: vec![], scopes: vec!["mcp:tools".into()] }];
        a.registration.mode = RegistrationMode::Open;
        a.identity_provider = IdentityProviderSettings {
            issuer: self.idp.url.clone(),
            client_id: mock_idp::CLIENT_ID.into(),
            client_secret: Some(Secret::new(mock_idp::CLIENT_SECRET.into())),
            ..Default::default()
        };
        let keys: Vec<Value> = keys.iter().map(|k| json!({"id": k, "file": self.files.path().join(k)})).collect();
        settings.vault = serde_json::from_value(json!({"keys": keys})).expect("vault settings");
        let mut upstream = json!({
            "url": self.mcp.url, "allow_private": true, "approval": "off", "connect_timeout_ms": 3000,
            "oauth": {
                "grant": "user", "client_id": upstream_as::CLIENT_ID,
                "client_secret": {"file": self.files.path().join("client-secret")},
                "private_hosts": [self.upstream_as.host_port()], "scopes": ["notes"],
                "unconnected": if self.hide { "hide" } else { "list" },
            },
        });
        if self.register {
            let oauth = upstream["oauth"].as_object_mut().expect("oauth");
            oauth.remove("client_id");
            oauth.remove("client_secret");
        }
        settings.upstreams.insert(UPSTREAM.into(), serde_json::from_value(upstream).expect("upstream settings"));
        settings
    }

    /// Starts toolgate (on the same port and data every time) and waits for the upstream's tool.
    async fn boot(&mut self, keys: &[&str]) {
        let settings = self.settings(keys);
        settings.validate().expect("valid settings");
        let state = AppState::new(settings).await.expect("state");
        let running = app::start(state, format!("127.0.0.1:{}", self.port).parse().expect("addr")).await.expect("server starts");
        self.running = Some(running);
        let jwks: Value = self.http.get(format!("{}/oauth/jwks", self.origin)).send().await.expect("JWKS").json().await.expect("JSON");
        self.kid = jwks["keys"][0]["kid"].as_str().expect("kid").to_owned();
        for _ in 0..200 {
            if self.state().server.tools.snapshot().iter().any(|t| t.name() == TOOL) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{TOOL} was never served");
    }

    /// Stops toolgate and starts it again with vault keys `keys`.
    pub async fn restart(&mut self, keys: &[&str]) {
        if let Some(running) = self.running.take() {
            running.stop().await.expect("stopped");
        }
        self.boot(keys).await;
    }

    pub fn state(&self) -> &AppState {
        &self.running.as_ref().expect("running").state
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.origin)
    }

    pub fn admin_url(&self, path: &str) -> String {
        format!("http://{}{path}", self.running.as_ref().and_then(|r| r.admin_addr).expect("admin listener"))
    }

    /// The principal key of MCP caller `subject`.
    pub fn principal(&self, subject: &str) -> String {
        format!("{}\u{1f}{subject}", self.origin)
    }

    /// An access token of toolgate's own for `subject` with `scope`.
    pub fn token(&self, subject: &str, scope: &str) -> String {
        let now = mock_idp::now();
        let claims = json!({
            "iss": self.origin, "sub": subject, "aud": self.url("/mcp"), "client_id": "test-client", "scope": scope,
            "iat": now, "exp": now + 600, "jti": uuid::Uuid::new_v4().to_string(), "sid": uuid::Uuid::new_v4().to_string(),
        });
        let secret = <p256::SecretKey as p256::pkcs8::DecodePrivateKey>::from_pkcs8_pem(&self.key_pem).expect("EC key");
        let der = p256::pkcs8::EncodePrivateKey::to_pkcs8_der(&secret).expect("PKCS#8");
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        header.typ = Some("at+jwt".into());
        jsonwebtoken::encode(&header, &claims, &jsonwebtoken::EncodingKey::from_ec_der(der.as_bytes())).expect("signed")
    }

    /// A POST to `/mcp` as the holder of `token`; the JSON-RPC answer.
    pub async fn mcp(&self, token: &str, body: &Value, headers: &[(&str, &str)]) -> reqwest::Response {
        let mut req = self
            .http
            .post(self.url("/mcp"))
            .header("content-type", "application/json")
            .header("accept", ACCEPT_BOTH)
            .header("authorization", format!("Bearer {token}"))
            .body(body.to_string());
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req.send().await.expect("POST /mcp")
    }

    /// A 2025-11-25 session of `token`'s holder whose client declared `caps`.
    pub async fn session(&self, token: &str, caps: Value) -> String {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": caps, "clientInfo": {"name": "t", "version": "1"}}});
        let res = self.mcp(token, &init, &[]).await;
        assert_eq!(res.status(), 200);
        let session = res.headers()["mcp-session-id"].to_str().expect("ascii").to_owned();
        let done =
            self.mcp(token, &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), &[("mcp-session-id", &session)]).await;
        assert_eq!(done.status(), 202);
        session
    }

    /// `method` in a session.
    pub async fn in_session(&self, token: &str, session: &str, id: i64, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        super::response_json(self.mcp(token, &body, &[("mcp-session-id", session)]).await).await
    }

    /// A call of [`TOOL`] in a session.
    pub async fn call(&self, token: &str, session: &str, id: i64) -> Value {
        self.in_session(token, session, id, "tools/call", json!({"name": TOOL, "arguments": {}})).await
    }

    /// A 2026-07-28 request whose client declared `caps`.
    pub async fn modern(&self, token: &str, id: i64, method: &str, mut params: Value, caps: Value) -> Value {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": super::MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": caps,
        });
        let name = params["name"].as_str().unwrap_or_default().to_owned();
        let mut headers = vec![("mcp-protocol-version", super::MODERN), ("mcp-method", method)];
        if !name.is_empty() {
            headers.push(("mcp-name", &name));
        }
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        super::response_json(self.mcp(token, &body, &headers).await).await
    }

    /// The SQLite pool of the running toolgate.
    pub fn pool(&self) -> sqlx::SqlitePool {
        let toolgate::store::Backend::Sqlite(pool) = self.state().store.backend() else { panic!("SQLite") };
        pool.clone()
    }

    /// `(id, principal, key_id, sealed)` of every stored connection.
    pub async fn grants(&self) -> Vec<(String, String, String, String)> {
        sqlx::query_as("SELECT id, principal, key_id, sealed FROM vault_grants ORDER BY created_ms")
            .fetch_all(&self.pool())
            .await
            .expect("grants")
    }

    /// Runs one SQL statement on the database.
    pub async fn sql(&self, sql: String) {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&self.pool()).await.expect("SQL");
    }

    /// `(outcome, detail)` of the audit records of kind `connection` once one's detail starts
    /// with `prefix` (the audit log writes in the background).
    pub async fn connection_audit(&self, prefix: &str) -> Vec<(String, String)> {
        for _ in 0..100 {
            let rows: Vec<(String, String)> =
                sqlx::query_as("SELECT outcome, COALESCE(detail, '') FROM audit_log WHERE kind = 'connection'")
                    .fetch_all(&self.pool())
                    .await
                    .expect("audit");
            if rows.iter().any(|(_, d)| d.starts_with(prefix)) {
                return rows;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("no connection audit record starting with {prefix:?}");
    }
}
