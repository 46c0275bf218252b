//! A hostile OpenID provider on loopback: discovery, a JWKS and a token endpoint that answers
//! with whatever ID token the test put there, signed with EC P-256 keys made in the test (or
//! not signed at all). It records the token requests it receives.
//!
//! Its authorization endpoint signs the user in at once (no page): it puts a good ID token
//! for the request's `nonce` up for the next token request and sends the browser back to
//! `redirect_uri` with a code and the `state`.

use std::sync::Arc;

use axum::Json;
use axum::http::HeaderMap;
use axum::routing::{get, post};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use p256::pkcs8::EncodePrivateKey;
use parking_lot::Mutex;
use serde_json::{Value, json};

pub const CLIENT_ID: &str = "toolgate";
pub const CLIENT_SECRET: &str = "client-secret-of-toolgate";

/// An EC P-256 signing key and its public JWK.
pub struct Key {
    pub kid: String,
    encoding: EncodingKey,
    pub jwk: Value,
}

impl Key {
    pub fn generate(kid: &str) -> Self {
        let secret = p256::SecretKey::random(&mut rand_core::OsRng);
        let der = secret.to_pkcs8_der().expect("PKCS#8");
        let point = p256::elliptic_curve::sec1::ToEncodedPoint::to_encoded_point(&secret.public_key(), false);
        let jwk = json!({
            "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": kid,
            "x": URL_SAFE_NO_PAD.encode(point.x().expect("x")),
            "y": URL_SAFE_NO_PAD.encode(point.y().expect("y")),
        });
        Self { kid: kid.to_owned(), encoding: EncodingKey::from_ec_der(der.as_bytes()), jwk }
    }

    pub fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding).expect("signed token")
    }
}

/// How the provider describes itself.
#[derive(Clone, Default)]
pub struct Options {
    /// The issuer's path under the origin (`/organizations/v2.0`), empty for none.
    pub path: String,
    /// The `issuer` its metadata names, when not its own URL; `{origin}` stands for its origin.
    pub metadata_issuer: Option<String>,
    /// It promises the callback's `iss` parameter (RFC 9207).
    pub iss_parameter: bool,
}

#[derive(Default)]
struct State {
    /// Discovery answers 503 while set.
    down: bool,
    /// The token endpoint answers `invalid_grant` while set.
    refuse_codes: bool,
    jwks: Vec<Value>,
    id_token: String,
    token_requests: Vec<(HeaderMap, String)>,
}

pub struct MockIdp {
    /// The origin, `http://127.0.0.1:<port>`.
    pub origin: String,
    /// The issuer: the origin and the path.
    pub url: String,
    pub key: Arc<Key>,
    state: Arc<Mutex<State>>,
}

impl MockIdp {
    pub async fn start() -> Self {
        Self::start_with(Options::default()).await
    }

    pub async fn start_with(options: Options) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let origin = format!("http://127.0.0.1:{}", listener.local_addr().expect("addr").port());
        let url = format!("{origin}{}", options.path);
        let key = Arc::new(Key::generate("key-1"));
        let state = Arc::new(Mutex::new(State { jwks: vec![key.jwk.clone()], ..State::default() }));
        let metadata = metadata(&url, &options);
        let app = axum::Router::new()
            .route(
                &format!("{}/.well-known/openid-configuration", options.path),
                get({
                    let state = state.clone();
                    move || discovery(state, metadata)
                }),
            )
            .route(
                "/jwks",
                get({
                    let state = state.clone();
                    move || async move { Json(json!({"keys": state.lock().jwks.clone()})) }
                }),
            )
            .route(
                "/authorize",
                get({
                    let (state, key, url) = (state.clone(), key.clone(), url.clone());
                    move |query| authorize(state, key, url, query)
                }),
            )
            .route(
                "/token",
                post({
                    let state = state.clone();
                    move |headers, body| token(state, headers, body)
                }),
            );
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { origin, url, key, state }
    }

    /// The ID token the token endpoint answers with next.
    pub fn answer_with(&self, id_token: String) {
        self.state.lock().id_token = id_token;
    }

    /// Replaces the published keys (rotation at the provider).
    pub fn publish(&self, keys: Vec<Value>) {
        self.state.lock().jwks = keys;
    }

    /// Makes discovery fail (503) or work again.
    pub fn set_down(&self, down: bool) {
        self.state.lock().down = down;
    }

    /// Makes the token endpoint refuse every code (`invalid_grant`).
    pub fn refuse_codes(&self) {
        self.state.lock().refuse_codes = true;
    }

    /// The headers and form body of every token request so far.
    pub fn token_requests(&self) -> Vec<(HeaderMap, String)> {
        self.state.lock().token_requests.clone()
    }

    /// Claims the relying party accepts for `nonce`; tests change one thing at a time.
    pub fn claims(&self, nonce: &str) -> Value {
        claims_for(&self.url, nonce)
    }
}

fn claims_for(issuer: &str, nonce: &str) -> Value {
    let now = now();
    json!({
            "iss": issuer, "sub": "user-1", "aud": CLIENT_ID, "exp": now + 300, "iat": now, "nonce": nonce,
            "email": "ada@example.com", "email_verified": true, "name": "Ada",
            "groups": ["engineering", "everyone"], "scp": "admin", "scope": "admin",
    })
}

pub fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs()
}

/// A token with `alg: none` and no signature.
pub fn unsigned(claims: &Value) -> String {
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#);
    format!("{header}.{}.", URL_SAFE_NO_PAD.encode(claims.to_string()))
}

/// A token signed with HS256 keyed by the client secret (what a confused verifier accepts).
pub fn signed_with_client_secret(claims: &Value) -> String {
    let key = EncodingKey::from_secret(CLIENT_SECRET.as_bytes());
    jsonwebtoken::encode(&Header::new(Algorithm::HS256), claims, &key).expect("HS256 token")
}

fn metadata(url: &str, options: &Options) -> Value {
    let origin = url.strip_suffix(options.path.as_str()).unwrap_or(url);
    json!({
        "issuer": options.metadata_issuer.as_ref().map_or_else(|| url.to_owned(), |i| i.replace("{origin}", origin)),
        "authorization_endpoint": format!("{origin}/authorize"),
        "token_endpoint": format!("{origin}/token"),
        "jwks_uri": format!("{origin}/jwks"),
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["ES256", "RS256", "HS256", "none"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        "code_challenge_methods_supported": ["S256"],
        "authorization_response_iss_parameter_supported": options.iss_parameter,
    })
}

async fn discovery(state: Arc<Mutex<State>>, metadata: Value) -> Result<Json<Value>, axum::http::StatusCode> {
    if state.lock().down { Err(axum::http::StatusCode::SERVICE_UNAVAILABLE) } else { Ok(Json(metadata)) }
}

/// The authorization endpoint: the user is signed in at once; the good ID token for the
/// request's nonce answers the next token request.
async fn authorize(
    state: Arc<Mutex<State>>,
    key: Arc<Key>,
    issuer: String,
    axum::extract::Query(query): axum::extract::Query<std::collections::HashMap<String, String>>,
) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    let (Some(redirect_uri), Some(nonce)) = (query.get("redirect_uri"), query.get("nonce")) else {
        return (axum::http::StatusCode::BAD_REQUEST, "redirect_uri and nonce are required").into_response();
    };
    state.lock().id_token = key.sign(&claims_for(&issuer, nonce));
    let Ok(mut back) = url::Url::parse(redirect_uri) else {
        return (axum::http::StatusCode::BAD_REQUEST, "bad redirect_uri").into_response();
    };
    back.query_pairs_mut().append_pair("code", "idp-code-1");
    if let Some(s) = query.get("state") {
        back.query_pairs_mut().append_pair("state", s);
    }
    (axum::http::StatusCode::FOUND, [(axum::http::header::LOCATION, back.to_string())]).into_response()
}

async fn token(state: Arc<Mutex<State>>, headers: HeaderMap, body: String) -> (axum::http::StatusCode, Json<Value>) {
    let mut state = state.lock();
    state.token_requests.push((headers, body));
    if state.refuse_codes {
        return (axum::http::StatusCode::BAD_REQUEST, Json(json!({"error": "invalid_grant"})));
    }
    let answer = json!({"access_token": "provider-access-token", "token_type": "Bearer", "expires_in": 300, "id_token": state.id_token});
    (axum::http::StatusCode::OK, Json(answer))
}
