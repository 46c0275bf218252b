//! An upstream's own OAuth authorization server on loopback, for the vault tests: RFC 8414
//! metadata (PKCE S256 only, RFC 9207 `iss`), an authorization endpoint that signs the user in
//! at once (the `login` query parameter names them, else [`DEFAULT_USER`]) and sends the
//! browser back with a code, a token endpoint (authorization code with a PKCE check, refresh
//! with rotation that counts every spend of every refresh token, client credentials), and a
//! revocation endpoint that records what it was given, and an RFC 7591 registration endpoint
//! that hands out its one client ([`CLIENT_ID`], [`CLIENT_SECRET`], HTTP Basic) and records
//! each registration request.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Form, Query};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use parking_lot::Mutex;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

pub const CLIENT_ID: &str = "toolgate-notes";
pub const CLIENT_SECRET: &str = "notes-client-secret";
pub const DEFAULT_USER: &str = "alice-at-notes";
/// The user client-credentials tokens act as.
pub const SERVICE_USER: &str = "toolgate-service";

type Pairs = HashMap<String, String>;

struct Code {
    user: String,
    challenge: String,
    redirect_uri: String,
}

#[derive(Default)]
pub struct State {
    counter: u64,
    codes: HashMap<String, Code>,
    /// Live access tokens and whose they are.
    access: HashMap<String, String>,
    /// Every refresh token issued: whose, and how many times it was presented.
    refresh: HashMap<String, (String, u32)>,
    /// `(token, token_type_hint)` of each revocation request.
    revoked: Vec<(String, String)>,
    /// Each authorization request's query.
    authorize_requests: Vec<Pairs>,
    /// Each token request's form.
    token_requests: Vec<Pairs>,
    /// Each registration request's body.
    registrations: Vec<Value>,
    expires_in: u64,
    /// What every refresh is answered with instead of tokens, when set.
    refresh_failure: Option<(StatusCode, &'static str)>,
}

/// The server; cheap to clone.
#[derive(Clone)]
pub struct UpstreamAs {
    /// Its origin, which is also its issuer.
    pub issuer: String,
    state: Arc<Mutex<State>>,
}

impl UpstreamAs {
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let issuer = format!("http://127.0.0.1:{}", listener.local_addr().expect("addr").port());
        let state = Arc::new(Mutex::new(State { expires_in: 3600, ..State::default() }));
        let this = Self { issuer: issuer.clone(), state };
        let metadata = json!({
            "issuer": issuer,
            "authorization_endpoint": format!("{issuer}/authorize"),
            "token_endpoint": format!("{issuer}/token"),
            "revocation_endpoint": format!("{issuer}/revoke"),
            "registration_endpoint": format!("{issuer}/register"),
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic"],
            "authorization_response_iss_parameter_supported": true,
        });
        let app = axum::Router::new()
            .route("/.well-known/oauth-authorization-server", get(move || async move { Json(metadata) }))
            .route(
                "/authorize",
                get({
                    let this = this.clone();
                    move |Query(q): Query<Pairs>| async move { this.authorize(q) }
                }),
            )
            .route(
                "/token",
                post({
                    let this = this.clone();
                    move |headers: HeaderMap, Form(f): Form<Pairs>| async move { this.token(&headers, f) }
                }),
            )
            .route(
                "/register",
                post({
                    let this = this.clone();
                    move |Json(body): Json<Value>| async move {
                        this.state.lock().registrations.push(body);
                        (StatusCode::CREATED, Json(json!({"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET})))
                    }
                }),
            )
            .route(
                "/revoke",
                post({
                    let this = this.clone();
                    move |Form(f): Form<Pairs>| async move { this.revoke(f) }
                }),
            );
        tokio::spawn(async move { axum::serve(listener, app).await });
        this
    }

    /// The body of every registration request so far.
    pub fn registrations(&self) -> Vec<Value> {
        self.state.lock().registrations.clone()
    }

    /// `host:port`, for `oauth.private_hosts`.
    pub fn host_port(&self) -> String {
        self.issuer.trim_start_matches("http://").to_owned()
    }

    /// The user a live access token acts for.
    pub fn user_of(&self, access_token: &str) -> Option<String> {
        self.state.lock().access.get(access_token).cloned()
    }

    /// The `expires_in` of the tokens issued from now on.
    pub fn set_expires_in(&self, secs: u64) {
        self.state.lock().expires_in = secs;
    }

    /// Answers every refresh with `status` and OAuth error `error` (`None`: works again).
    pub fn fail_refreshes(&self, failure: Option<(StatusCode, &'static str)>) {
        self.state.lock().refresh_failure = failure;
    }

    /// How many times each refresh token issued so far was presented.
    pub fn refresh_spends(&self) -> HashMap<String, u32> {
        self.state.lock().refresh.iter().map(|(t, (_, n))| (t.clone(), *n)).collect()
    }

    /// The access tokens issued by the authorization-code and refresh grants.
    pub fn user_access_tokens(&self) -> Vec<String> {
        self.state.lock().access.iter().filter(|(_, u)| *u != SERVICE_USER).map(|(t, _)| t.clone()).collect()
    }

    /// The tokens revoked, with their hints.
    pub fn revoked(&self) -> Vec<(String, String)> {
        self.state.lock().revoked.clone()
    }

    pub fn authorize_requests(&self) -> Vec<Pairs> {
        self.state.lock().authorize_requests.clone()
    }

    /// The forms of the token requests with this `grant_type`.
    pub fn token_requests(&self, grant_type: &str) -> Vec<Pairs> {
        self.state.lock().token_requests.iter().filter(|f| f.get("grant_type").is_some_and(|g| g == grant_type)).cloned().collect()
    }

    fn authorize(&self, q: Pairs) -> Response {
        let mut state = self.state.lock();
        state.authorize_requests.push(q.clone());
        let field = |k: &str| q.get(k).cloned().unwrap_or_default();
        let (Some(redirect_uri), Some(challenge)) = (q.get("redirect_uri"), q.get("code_challenge")) else {
            return (StatusCode::BAD_REQUEST, "redirect_uri and code_challenge are required").into_response();
        };
        if field("response_type") != "code" || field("code_challenge_method") != "S256" || field("client_id") != CLIENT_ID {
            return (StatusCode::BAD_REQUEST, "bad authorization request").into_response();
        }
        state.counter += 1;
        let code = format!("uc-{}-{}", state.counter, URL_SAFE_NO_PAD.encode(rand::random::<[u8; 16]>()));
        let user = q.get("login").cloned().unwrap_or_else(|| DEFAULT_USER.to_owned());
        state.codes.insert(code.clone(), Code { user, challenge: challenge.clone(), redirect_uri: redirect_uri.clone() });
        let mut back = url::Url::parse(redirect_uri).expect("redirect_uri is a URL");
        back.query_pairs_mut().append_pair("code", &code).append_pair("state", &field("state")).append_pair("iss", &self.issuer);
        (StatusCode::FOUND, [(header::LOCATION, back.to_string())]).into_response()
    }

    fn token(&self, headers: &HeaderMap, form: Pairs) -> (StatusCode, Json<Value>) {
        let refuse = |status: StatusCode, error: &str| (status, Json(json!({"error": error})));
        let mut state = self.state.lock();
        state.token_requests.push(form.clone());
        if !basic_auth_is_ours(headers) {
            return refuse(StatusCode::UNAUTHORIZED, "invalid_client");
        }
        let field = |k: &str| form.get(k).cloned().unwrap_or_default();
        let user = match field("grant_type").as_str() {
            "authorization_code" => {
                let Some(code) = state.codes.remove(&field("code")) else { return refuse(StatusCode::BAD_REQUEST, "invalid_grant") };
                let verified = URL_SAFE_NO_PAD.encode(Sha256::digest(field("code_verifier").as_bytes())) == code.challenge;
                if !verified || code.redirect_uri != field("redirect_uri") {
                    return refuse(StatusCode::BAD_REQUEST, "invalid_grant");
                }
                code.user
            }
            "refresh_token" => {
                if let Some((status, error)) = state.refresh_failure {
                    return refuse(status, error);
                }
                let Some((user, spends)) = state.refresh.get_mut(&field("refresh_token")) else {
                    return refuse(StatusCode::BAD_REQUEST, "invalid_grant");
                };
                *spends += 1;
                if *spends > 1 {
                    // A rotated refresh token presented again: refused (a real server would
                    // revoke the whole grant).
                    return refuse(StatusCode::BAD_REQUEST, "invalid_grant");
                }
                user.clone()
            }
            "client_credentials" => SERVICE_USER.to_owned(),
            _ => return refuse(StatusCode::BAD_REQUEST, "unsupported_grant_type"),
        };
        state.counter += 1;
        let n = state.counter;
        let access = format!("ua-{n}-{}", URL_SAFE_NO_PAD.encode(rand::random::<[u8; 16]>()));
        state.access.insert(access.clone(), user.clone());
        let mut answer = json!({"access_token": access, "token_type": "Bearer", "expires_in": state.expires_in, "scope": "notes"});
        if user != SERVICE_USER {
            let refresh = format!("ur-{n}-{}", URL_SAFE_NO_PAD.encode(rand::random::<[u8; 16]>()));
            state.refresh.insert(refresh.clone(), (user, 0));
            answer["refresh_token"] = json!(refresh);
        }
        (StatusCode::OK, Json(answer))
    }

    fn revoke(&self, form: Pairs) -> StatusCode {
        let mut state = self.state.lock();
        let token = form.get("token").cloned().unwrap_or_default();
        state.access.remove(&token);
        state.revoked.push((token, form.get("token_type_hint").cloned().unwrap_or_default()));
        StatusCode::OK
    }
}

fn basic_auth_is_ours(headers: &HeaderMap) -> bool {
    let Some(basic) = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Basic ")) else {
        return false;
    };
    let decoded = STANDARD.decode(basic).ok().and_then(|b| String::from_utf8(b).ok()).unwrap_or_default();
    decoded == format!("{CLIENT_ID}:{CLIENT_SECRET}")
}
