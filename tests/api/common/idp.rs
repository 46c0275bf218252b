//! A real (if small) token issuer on loopback for auth tests: OpenID discovery and a JWKS
//! served over HTTP, an RSA key made at test time, and tokens signed with it.

use std::sync::Arc;

use axum::Json;
use axum::routing::get;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use parking_lot::RwLock;
use rsa::pkcs1::EncodeRsaPrivateKey;
use rsa::traits::PublicKeyParts;
use serde_json::{Value, json};

pub const RESOURCE: &str = "http://127.0.0.1/mcp";

/// A signing key and its public JWK.
pub struct Key {
    pub kid: String,
    encoding: EncodingKey,
    pub jwk: Value,
}

/// One RSA key per test process: generating one is slow in a debug build, and tests need
/// distinct issuers, not distinct keys.
fn shared_private_key() -> &'static rsa::RsaPrivateKey {
    static KEY: std::sync::OnceLock<rsa::RsaPrivateKey> = std::sync::OnceLock::new();
    KEY.get_or_init(|| rsa::RsaPrivateKey::new(&mut rand_core::OsRng, 2048).expect("RSA key"))
}

impl Key {
    pub fn generate(kid: &str) -> Self {
        let private = shared_private_key().clone();
        let der = private.to_pkcs1_der().expect("DER");
        let encoding = EncodingKey::from_rsa_der(der.as_bytes());
        let public = private.to_public_key();
        let jwk = json!({
            "kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid,
            "n": URL_SAFE_NO_PAD.encode(public.n().to_bytes_be()),
            "e": URL_SAFE_NO_PAD.encode(public.e().to_bytes_be()),
        });
        Self { kid: kid.to_owned(), encoding, jwk }
    }
}

/// The issuer: its URL, its current keys, and a way to mint tokens.
pub struct Issuer {
    pub url: String,
    pub key: Key,
    keys: Arc<RwLock<Vec<Value>>>,
}

impl Issuer {
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://127.0.0.1:{}", listener.local_addr().expect("addr").port());
        let key = Key::generate("key-1");
        let keys = Arc::new(RwLock::new(vec![key.jwk.clone()]));
        let (issuer, jwks) = (url.clone(), keys.clone());
        let app = axum::Router::new()
            .route(
                "/.well-known/openid-configuration",
                get(move || {
                    let issuer = issuer.clone();
                    async move { Json(json!({"issuer": issuer, "jwks_uri": format!("{issuer}/jwks")})) }
                }),
            )
            .route(
                "/jwks",
                get(move || {
                    let keys = jwks.read().clone();
                    async move { Json(json!({"keys": keys})) }
                }),
            );
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, key, keys }
    }

    /// Claims for a token that toolgate accepts; tests change one thing at a time.
    pub fn claims(&self, subject: &str, scope: &str) -> Value {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs();
        json!({"iss": self.url, "sub": subject, "aud": RESOURCE, "exp": now + 600, "iat": now, "scope": scope, "client_id": "test-client"})
    }

    pub fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some(self.key.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.key.encoding).expect("signed token")
    }

    pub fn token(&self, subject: &str, scope: &str) -> String {
        self.sign(&self.claims(subject, scope))
    }

    /// Settings that accept this issuer's tokens: JWT mode, [`RESOURCE`], this issuer alone.
    pub fn trust(&self, c: &mut toolgate::config::Settings) {
        c.auth.mode = toolgate::auth::settings::AuthMode::Jwt;
        c.auth.resource = Some(RESOURCE.into());
        c.auth.issuers = vec![serde_json::from_value(json!({ "issuer": self.url })).expect("issuer")];
    }

    /// Replaces the published keys (rotation at the issuer).
    pub fn publish(&self, keys: Vec<Value>) {
        *self.keys.write() = keys;
    }
}
