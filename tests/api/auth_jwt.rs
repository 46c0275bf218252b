//! The JWT access-token verifier against a real identity provider: an axum server on
//! 127.0.0.1:0 serving a JWK Set and metadata documents, with RSA and EC keys generated at test
//! time (nothing private is stored in the repository). One test per rejection class.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use toolgate::auth::jwt::{IssuerSettings, JwtVerifier};
use toolgate::auth::principal::{Principal, TokenError};

const RESOURCE: &str = "https://mcp.example.com/mcp";

// ---------------------------------------------------------------------------------------------
// The identity provider
// ---------------------------------------------------------------------------------------------

#[derive(Default)]
struct IdpState {
    jwks: Mutex<Value>,
    /// Other JSON documents by path (metadata).
    documents: Mutex<HashMap<String, Value>>,
    jwks_fetches: AtomicUsize,
    /// Every path requested, in order.
    requests: Mutex<Vec<String>>,
    /// Answer the JWKS with 500.
    failing: AtomicBool,
}

struct Idp {
    base: String,
    state: Arc<IdpState>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Idp {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn idp_serve(State(state): State<Arc<IdpState>>, uri: Uri) -> Response {
    let path = uri.path().to_owned();
    state.requests.lock().expect("lock").push(path.clone());
    if path == "/jwks" {
        state.jwks_fetches.fetch_add(1, Ordering::SeqCst);
        if state.failing.load(Ordering::SeqCst) {
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
        let body = state.jwks.lock().expect("lock").clone();
        return axum::Json(body).into_response();
    }
    match state.documents.lock().expect("lock").get(&path) {
        Some(doc) => axum::Json(doc.clone()).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

impl Idp {
    async fn start(keys: &[Value]) -> Idp {
        let state = Arc::new(IdpState::default());
        *state.jwks.lock().expect("lock") = json!({ "keys": keys });
        let app = Router::new().fallback(idp_serve).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("local addr"));
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Idp { base, state, server }
    }

    /// The issuer identifier of this IdP.
    fn issuer(&self) -> String {
        self.base.clone()
    }

    fn jwks_uri(&self) -> String {
        format!("{}/jwks", self.base)
    }

    fn set_keys(&self, keys: &[Value]) {
        *self.state.jwks.lock().expect("lock") = json!({ "keys": keys });
    }

    fn set_document(&self, path: &str, doc: Value) {
        self.state.documents.lock().expect("lock").insert(path.to_owned(), doc);
    }

    fn jwks_fetches(&self) -> usize {
        self.state.jwks_fetches.load(Ordering::SeqCst)
    }

    fn requests(&self) -> Vec<String> {
        self.state.requests.lock().expect("lock").clone()
    }
}

// ---------------------------------------------------------------------------------------------
// Keys and tokens
// ---------------------------------------------------------------------------------------------

struct RsaKey {
    kid: String,
    private: rsa::RsaPrivateKey,
}

impl RsaKey {
    fn generate(kid: &str) -> Self {
        // 2048 bits: the verifier refuses weaker RSA keys.
        let private = rsa::RsaPrivateKey::new(&mut rand_core::OsRng, 2048).expect("RSA key generation");
        Self { kid: kid.into(), private }
    }

    fn jwk(&self) -> Value {
        use rsa::traits::PublicKeyParts as _;
        let public = self.private.to_public_key();
        json!({
            "kty": "RSA", "kid": self.kid, "use": "sig", "alg": "RS256",
            "n": URL_SAFE_NO_PAD.encode(public.n().to_bytes_be()),
            "e": URL_SAFE_NO_PAD.encode(public.e().to_bytes_be()),
        })
    }

    fn encoding_key(&self) -> EncodingKey {
        use rsa::pkcs1::EncodeRsaPrivateKey as _;
        EncodingKey::from_rsa_der(self.private.to_pkcs1_der().expect("PKCS#1 DER").as_bytes())
    }

    fn sign(&self, claims: &Value) -> String {
        sign(Algorithm::RS256, Some(&self.kid), &self.encoding_key(), claims)
    }
}

/// RSA key generation takes seconds in debug builds: one key per test process.
static RSA_KEY: LazyLock<RsaKey> = LazyLock::new(|| RsaKey::generate("rsa-1"));

struct EcKey {
    kid: String,
    signing: p256::ecdsa::SigningKey,
}

impl EcKey {
    fn generate(kid: &str) -> Self {
        Self { kid: kid.into(), signing: p256::ecdsa::SigningKey::random(&mut rand_core::OsRng) }
    }

    fn jwk(&self) -> Value {
        let point = self.signing.verifying_key().to_encoded_point(false);
        json!({
            "kty": "EC", "crv": "P-256", "kid": self.kid, "use": "sig", "alg": "ES256",
            "x": URL_SAFE_NO_PAD.encode(point.x().expect("x")),
            "y": URL_SAFE_NO_PAD.encode(point.y().expect("y")),
        })
    }

    fn encoding_key(&self) -> EncodingKey {
        use p256::pkcs8::EncodePrivateKey as _;
        EncodingKey::from_ec_der(self.signing.to_pkcs8_der().expect("PKCS#8 DER").as_bytes())
    }

    fn sign(&self, claims: &Value) -> String {
        self.sign_as(&self.kid, claims)
    }

    /// Signs with this key but names another `kid` in the header.
    fn sign_as(&self, kid: &str, claims: &Value) -> String {
        sign(Algorithm::ES256, Some(kid), &self.encoding_key(), claims)
    }
}

fn sign(alg: Algorithm, kid: Option<&str>, key: &EncodingKey, claims: &Value) -> String {
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_owned);
    jsonwebtoken::encode(&header, claims, key).expect("signing")
}

/// A token assembled by hand (for headers the library would not produce).
fn raw_token(header: &Value, claims: &Value, signature: &[u8]) -> String {
    format!(
        "{}.{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string()),
        URL_SAFE_NO_PAD.encode(signature)
    )
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_secs()
}

/// Claims of a good token from `iss`.
fn claims(iss: &str) -> Value {
    json!({
        "iss": iss, "sub": "user-1", "aud": RESOURCE, "exp": now() + 600, "iat": now(), "nbf": now() - 5,
        "client_id": "client-a", "scope": "mcp:tools files:read",
    })
}

fn with(mut claims: Value, key: &str, value: Value) -> Value {
    claims[key] = value;
    claims
}

fn without(mut claims: Value, key: &str) -> Value {
    claims.as_object_mut().expect("object").remove(key);
    claims
}

fn settings(value: Value) -> IssuerSettings {
    serde_json::from_value(value).expect("issuer settings")
}

fn verifier(issuers: Vec<IssuerSettings>) -> JwtVerifier {
    JwtVerifier::new(issuers, RESOURCE.into(), reqwest::Client::new()).expect("verifier")
}

/// A verifier for one IdP, keys at its `/jwks`.
fn verifier_for(idp: &Idp) -> JwtVerifier {
    verifier(vec![settings(json!({ "issuer": idp.issuer(), "jwks_uri": idp.jwks_uri() }))])
}

#[track_caller]
fn assert_invalid(result: Result<Principal, TokenError>, needle: &str) {
    match result {
        Err(TokenError::Invalid(why)) => assert!(why.contains(needle), "expected a rejection mentioning {needle:?}, got {why:?}"),
        other => panic!("expected Invalid({needle:?}), got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Acceptance
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn valid_token_is_accepted_with_the_right_principal() {
    let ec = EcKey::generate("ec-1");
    let idp = Idp::start(&[RSA_KEY.jwk(), ec.jwk()]).await;
    let v = verifier_for(&idp);
    let iss = idp.issuer();

    let token_claims = claims(&iss);
    let p = v.verify(&RSA_KEY.sign(&token_claims)).await.expect("RS256 token accepted");
    assert_eq!(p.issuer, iss);
    assert_eq!(p.subject, "user-1");
    assert_eq!(p.client_id.as_deref(), Some("client-a"));
    assert_eq!(p.scopes.iter().map(String::as_str).collect::<Vec<_>>(), ["files:read", "mcp:tools"]);
    assert!(p.has_scope("mcp:tools") && p.has_scope("files:read") && !p.has_scope("mcp"));
    assert_eq!(p.expires_at, token_claims["exp"].as_u64().expect("exp"));
    assert_eq!(p.key(), format!("{iss}\u{1f}user-1"));

    // ES256, `scp` as an array, `azp` instead of `client_id`, `aud` as an array.
    let ec_claims = json!({
        "iss": iss, "sub": "svc-7", "aud": ["https://other.example", RESOURCE], "exp": now() + 60,
        "azp": "client-b", "scp": ["mcp:tools", "admin"],
    });
    let p = v.verify(&ec.sign(&ec_claims)).await.expect("ES256 token accepted");
    assert_eq!((p.subject.as_str(), p.client_id.as_deref()), ("svc-7", Some("client-b")));
    assert!(p.has_scope("admin") && p.has_scope("mcp:tools") && p.scopes.len() == 2);

    // `scp` as a space-separated string; no client id at all.
    let p = v.verify(&ec.sign(&with(without(without(claims(&iss), "scope"), "client_id"), "scp", json!("a b")))).await.expect("accepted");
    assert!(p.has_scope("a") && p.has_scope("b") && p.client_id.is_none());
    assert_eq!(idp.jwks_fetches(), 1, "one fetch serves every key of the set");
}

#[tokio::test]
async fn hmac_issuer_with_a_secret_accepts_hs256() {
    let secret = "an-hmac-secret-that-is-at-least-32-bytes-long";
    let v = verifier(vec![settings(json!({ "issuer": "https://hmac.example", "hmac_secret": secret }))]);
    let token = sign(Algorithm::HS256, None, &EncodingKey::from_secret(secret.as_bytes()), &claims("https://hmac.example"));
    let p = v.verify(&token).await.expect("HS256 with the configured secret");
    assert_eq!(p.issuer, "https://hmac.example");
    let forged =
        sign(Algorithm::HS256, None, &EncodingKey::from_secret(b"another-secret-another-secret-another"), &claims("https://hmac.example"));
    assert_invalid(v.verify(&forged).await, "signature does not verify");
}

// ---------------------------------------------------------------------------------------------
// Rejection classes
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn garbage_token_is_invalid() {
    let ec = EcKey::generate("ec-1");
    let idp = Idp::start(&[ec.jwk()]).await;
    let v = verifier_for(&idp);
    let good = ec.sign(&claims(&idp.issuer()));
    let two_parts = good.rsplit_once('.').expect("header.payload.signature").0.to_owned();
    for garbage in ["", "garbage", "a.b.c", "...", "a.b", "a.b.c.d.e", "!!!.???.***", &two_parts, &format!("{good}.extra")] {
        assert!(matches!(v.verify(garbage).await, Err(TokenError::Invalid(_))), "{garbage:?} must be refused");
    }
    // Valid base64, but not JSON.
    let not_json = format!("{}.{}.c2ln", URL_SAFE_NO_PAD.encode("not json"), URL_SAFE_NO_PAD.encode("{}"));
    assert_invalid(v.verify(&not_json).await, "malformed token header");
    assert_eq!(idp.jwks_fetches(), 0, "garbage never reaches the IdP");
}

#[tokio::test]
async fn wrong_signature_is_invalid() {
    let published = EcKey::generate("ec-1");
    let attacker = EcKey::generate("attacker");
    let idp = Idp::start(&[published.jwk()]).await;
    let v = verifier_for(&idp);
    let iss = idp.issuer();

    // Signed by another key, claiming the published kid.
    assert_invalid(v.verify(&attacker.sign_as("ec-1", &claims(&iss))).await, "signature does not verify");

    // A genuine signature over different claims (payload swapped after signing).
    let genuine = published.sign(&claims(&iss));
    let mut parts: Vec<&str> = genuine.split('.').collect();
    let tampered_payload = URL_SAFE_NO_PAD.encode(with(claims(&iss), "sub", json!("admin")).to_string());
    parts[1] = &tampered_payload;
    assert_invalid(v.verify(&parts.join(".")).await, "signature does not verify");
}

#[tokio::test]
async fn alg_none_is_refused() {
    let ec = EcKey::generate("ec-1");
    let idp = Idp::start(&[ec.jwk()]).await;
    let v = verifier_for(&idp);
    for alg in ["none", "None", "NONE"] {
        let token = raw_token(&json!({ "alg": alg, "typ": "JWT", "kid": "ec-1" }), &claims(&idp.issuer()), b"");
        assert_invalid(v.verify(&token).await, "alg none");
        let token = raw_token(&json!({ "alg": alg }), &claims(&idp.issuer()), b"");
        assert_invalid(v.verify(&token).await, "alg none");
    }
    let unknown = raw_token(&json!({ "alg": "ES512", "kid": "ec-1" }), &claims(&idp.issuer()), b"sig");
    assert_invalid(v.verify(&unknown).await, "unsupported signing algorithm");
    assert_eq!(idp.jwks_fetches(), 0, "refused from the header alone");
}

#[tokio::test]
async fn hs256_signed_with_the_rsa_public_key_is_refused() {
    use rsa::pkcs1::EncodeRsaPublicKey as _;
    use rsa::pkcs8::EncodePublicKey as _;
    use rsa::traits::PublicKeyParts as _;

    let idp = Idp::start(&[RSA_KEY.jwk()]).await;
    let iss = idp.issuer();
    let public = RSA_KEY.private.to_public_key();
    // Everything an attacker might use as "the public key" when forging an HMAC token.
    let secrets: Vec<Vec<u8>> = vec![
        public.to_public_key_pem(rsa::pkcs8::LineEnding::LF).expect("SPKI PEM").into_bytes(),
        public.to_pkcs1_pem(rsa::pkcs8::LineEnding::LF).expect("PKCS#1 PEM").into_bytes(),
        public.to_pkcs1_der().expect("PKCS#1 DER").as_bytes().to_vec(),
        public.n().to_bytes_be(),
        RSA_KEY.jwk().to_string().into_bytes(),
    ];
    let forge = |secret: &[u8]| sign(Algorithm::HS256, Some(&RSA_KEY.kid), &EncodingKey::from_secret(secret), &claims(&iss));

    // An issuer without hmac_secret does not accept HMAC algorithms at all.
    let v = verifier_for(&idp);
    assert!(v.verify(&RSA_KEY.sign(&claims(&iss))).await.is_ok(), "the genuine RS256 token works");
    for secret in &secrets {
        assert_invalid(v.verify(&forge(secret)).await, "not allowed for this issuer");
    }

    // An issuer that does allow HS256 checks it only against its own secret, never a JWKS key.
    let mixed = verifier(vec![settings(json!({
        "issuer": iss, "jwks_uri": idp.jwks_uri(), "algorithms": ["RS256", "HS256"],
        "hmac_secret": "the-real-shared-secret-of-this-issuer-0123456789",
    }))]);
    assert!(mixed.verify(&RSA_KEY.sign(&claims(&iss))).await.is_ok());
    for secret in &secrets {
        assert_invalid(mixed.verify(&forge(secret)).await, "signature does not verify");
    }
}

#[tokio::test]
async fn alg_must_fit_the_key() {
    let ec = EcKey::generate("ec-1");
    let idp = Idp::start(&[RSA_KEY.jwk(), ec.jwk()]).await;
    let v = verifier_for(&idp);
    let iss = idp.issuer();
    // PS256 with a key whose JWK pins RS256.
    let ps256 = sign(Algorithm::PS256, Some(&RSA_KEY.kid), &RSA_KEY.encoding_key(), &claims(&iss));
    assert_invalid(v.verify(&ps256).await, "no signing key");
    // An RS256 header naming the EC key.
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some("ec-1".into());
    let rs_on_ec = jsonwebtoken::encode(&header, &claims(&iss), &RSA_KEY.encoding_key()).expect("sign");
    assert_invalid(v.verify(&rs_on_ec).await, "no signing key");
    // An algorithm the issuer does not allow.
    let only_es = verifier(vec![settings(json!({ "issuer": iss, "jwks_uri": idp.jwks_uri(), "algorithms": ["ES256"] }))]);
    assert_invalid(only_es.verify(&RSA_KEY.sign(&claims(&iss))).await, "not allowed for this issuer");
    assert!(only_es.verify(&ec.sign(&claims(&iss))).await.is_ok());
}

#[tokio::test]
async fn keys_without_kid_are_used_only_when_unambiguous() {
    let ec = EcKey::generate("unused");
    let mut jwk = ec.jwk();
    jwk.as_object_mut().expect("object").remove("kid");
    let idp = Idp::start(&[jwk.clone()]).await;
    let v = verifier_for(&idp);
    let iss = idp.issuer();
    let no_kid = sign(Algorithm::ES256, None, &ec.encoding_key(), &claims(&iss));
    assert!(v.verify(&no_kid).await.is_ok(), "no kid anywhere, one key: used");
    assert!(v.verify(&ec.sign_as("some-kid", &claims(&iss))).await.is_ok(), "the only key has no kid: used for any kid");

    let other = EcKey::generate("other");
    let mut other_jwk = other.jwk();
    other_jwk.as_object_mut().expect("object").remove("kid");
    let idp = Idp::start(&[jwk, other_jwk]).await;
    let v = verifier_for(&idp);
    let iss = idp.issuer();
    let no_kid = sign(Algorithm::ES256, None, &ec.encoding_key(), &claims(&iss));
    assert_invalid(v.verify(&no_kid).await, "several issuer keys fit");
}

#[tokio::test]
async fn expired_token_is_invalid() {
    let ec = EcKey::generate("ec-1");
    let idp = Idp::start(&[ec.jwk()]).await;
    let v = verifier_for(&idp);
    let iss = idp.issuer();
    assert_invalid(v.verify(&ec.sign(&with(claims(&iss), "exp", json!(now() - 120)))).await, "expired");
    // Within the default 30 s leeway.
    assert!(v.verify(&ec.sign(&with(claims(&iss), "exp", json!(now() - 10)))).await.is_ok(), "leeway applies to exp");
    assert_invalid(v.verify(&ec.sign(&with(claims(&iss), "exp", json!("tomorrow")))).await, "malformed");
}

#[tokio::test]
async fn not_yet_valid_token_is_invalid() {
    let ec = EcKey::generate("ec-1");
    let idp = Idp::start(&[ec.jwk()]).await;
    let v = verifier_for(&idp);
    let iss = idp.issuer();
    assert_invalid(v.verify(&ec.sign(&with(claims(&iss), "nbf", json!(now() + 300)))).await, "not valid yet");
    assert!(v.verify(&ec.sign(&with(claims(&iss), "nbf", json!(now() + 10)))).await.is_ok(), "leeway applies to nbf");
    assert_invalid(v.verify(&ec.sign(&with(claims(&iss), "iat", json!(now() + 300)))).await, "issued in the future");
}

#[tokio::test]
async fn wrong_iss_is_invalid() {
    let ec = EcKey::generate("ec-1");
    let idp = Idp::start(&[ec.jwk()]).await;
    let v = verifier_for(&idp);
    let iss = idp.issuer();
    for wrong in [json!("https://evil.example"), json!(format!("{iss}/")), json!(iss.to_uppercase()), json!([iss.clone()])] {
        let result = v.verify(&ec.sign(&with(claims(&iss), "iss", wrong.clone()))).await;
        assert!(matches!(result, Err(TokenError::Invalid(_))), "iss {wrong} must be refused, got {result:?}");
    }
    assert_invalid(v.verify(&ec.sign(&without(claims(&iss), "iss"))).await, "iss");
    assert_eq!(idp.jwks_fetches(), 0, "an untrusted issuer never causes a fetch");
}

#[tokio::test]
async fn wrong_aud_is_invalid() {
    let ec = EcKey::generate("ec-1");
    let idp = Idp::start(&[ec.jwk()]).await;
    let v = verifier_for(&idp);
    let iss = idp.issuer();
    for wrong in [json!("https://other.example/mcp"), json!(format!("{RESOURCE}/")), json!(["a", "b"]), json!([]), json!("api://toolgate")]
    {
        assert_invalid(v.verify(&ec.sign(&with(claims(&iss), "aud", wrong))).await, "audience");
    }
}

#[tokio::test]
async fn missing_aud_is_invalid() {
    let ec = EcKey::generate("ec-1");
    let idp = Idp::start(&[ec.jwk()]).await;
    let v = verifier_for(&idp);
    assert_invalid(v.verify(&ec.sign(&without(claims(&idp.issuer()), "aud"))).await, "required claim aud");
}

#[tokio::test]
async fn missing_exp_is_invalid() {
    let ec = EcKey::generate("ec-1");
    let idp = Idp::start(&[ec.jwk()]).await;
    let v = verifier_for(&idp);
    assert_invalid(v.verify(&ec.sign(&without(claims(&idp.issuer()), "exp"))).await, "required claim exp");
}

#[tokio::test]
async fn missing_or_bad_sub_is_invalid() {
    let ec = EcKey::generate("ec-1");
    let idp = Idp::start(&[ec.jwk()]).await;
    let v = verifier_for(&idp);
    let iss = idp.issuer();
    assert_invalid(v.verify(&ec.sign(&without(claims(&iss), "sub"))).await, "required claim sub");
    assert_invalid(v.verify(&ec.sign(&with(claims(&iss), "sub", json!("")))).await, "subject");
    assert_invalid(v.verify(&ec.sign(&with(claims(&iss), "sub", json!("a\u{1f}b")))).await, "subject");
}

#[tokio::test]
async fn unknown_kid_refreshes_once_then_is_invalid() {
    let ec = EcKey::generate("ec-1");
    let idp = Idp::start(&[ec.jwk()]).await;
    let v = verifier_for(&idp).with_min_refresh_interval(Duration::from_millis(500));
    let iss = idp.issuer();
    v.verify(&ec.sign(&claims(&iss))).await.expect("warm-up");
    assert_eq!(idp.jwks_fetches(), 1);
    tokio::time::sleep(Duration::from_millis(600)).await;

    assert_invalid(v.verify(&ec.sign_as("bogus-1", &claims(&iss))).await, "no signing key");
    assert_eq!(idp.jwks_fetches(), 2, "an unknown kid causes exactly one refresh");
    assert_invalid(v.verify(&ec.sign_as("bogus-2", &claims(&iss))).await, "no signing key");
    assert_eq!(idp.jwks_fetches(), 2, "and no second one within the interval");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn burst_of_unknown_kids_fetches_at_most_once() {
    let ec = EcKey::generate("ec-1");
    let idp = Idp::start(&[ec.jwk()]).await;
    let v = verifier_for(&idp); // default 30 s interval
    let iss = idp.issuer();
    let tokens: Vec<String> = (0..20).map(|i| ec.sign_as(&format!("bogus-{i}"), &claims(&iss))).collect();
    let results = futures_util::future::join_all(tokens.iter().map(|t| v.verify(t))).await;
    for result in results {
        assert_invalid(result, "no signing key");
    }
    assert_eq!(idp.jwks_fetches(), 1, "20 concurrent unknown kids: one fetch");
    for token in &tokens {
        assert_invalid(v.verify(token).await, "no signing key");
    }
    assert_eq!(idp.jwks_fetches(), 1, "and none for the next 20 either");
    assert!(v.verify(&ec.sign(&claims(&iss))).await.is_ok(), "the real key still works");
}

#[tokio::test]
async fn jwks_unreachable_is_unavailable() {
    let ec = EcKey::generate("ec-1");
    // A port nothing listens on.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let dead = format!("http://{}", closed.local_addr().expect("addr"));
    drop(closed);
    let v = verifier(vec![settings(json!({ "issuer": dead, "jwks_uri": format!("{dead}/jwks") }))]);
    match v.verify(&ec.sign(&claims(&dead))).await {
        Err(TokenError::Unavailable(why)) => assert!(why.contains("/jwks"), "{why}"),
        other => panic!("expected Unavailable, got {other:?}"),
    }
    // Still rate-limited and still unavailable: 503, not 401.
    assert!(matches!(v.verify(&ec.sign(&claims(&dead))).await, Err(TokenError::Unavailable(_))));

    // An IdP that answered once and then fails: cached keys keep working, unknown kids are 503.
    let idp = Idp::start(&[ec.jwk()]).await;
    let v = verifier_for(&idp).with_min_refresh_interval(Duration::from_millis(200));
    let iss = idp.issuer();
    v.verify(&ec.sign(&claims(&iss))).await.expect("warm-up");
    idp.state.failing.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert!(matches!(v.verify(&ec.sign_as("new-key", &claims(&iss))).await, Err(TokenError::Unavailable(_))));
    let fresh = with(claims(&iss), "jti", json!("not-cached"));
    assert!(v.verify(&ec.sign(&fresh)).await.is_ok(), "a cached key still verifies while the IdP is down");
}

#[tokio::test]
async fn rotated_key_at_the_idp_is_picked_up_without_restart() {
    let old = EcKey::generate("key-2024");
    let new = EcKey::generate("key-2025");
    let idp = Idp::start(&[old.jwk()]).await;
    let v = verifier_for(&idp).with_min_refresh_interval(Duration::from_millis(200));
    let iss = idp.issuer();
    let old_token = old.sign(&claims(&iss));
    v.verify(&old_token).await.expect("old key works");

    idp.set_keys(&[new.jwk()]);
    tokio::time::sleep(Duration::from_millis(250)).await;
    let p = v.verify(&new.sign(&claims(&iss))).await.expect("the new key is fetched on its first use");
    assert_eq!(p.subject, "user-1");
    assert_eq!(idp.jwks_fetches(), 2);
    // The IdP withdrew the old key: even the token verified (and cached) under it is refused now.
    assert_invalid(v.verify(&old_token).await, "no signing key");
}

#[tokio::test]
async fn oversized_token_is_invalid() {
    let ec = EcKey::generate("ec-1");
    let idp = Idp::start(&[ec.jwk()]).await;
    let v = verifier_for(&idp);
    let iss = idp.issuer();
    let big = ec.sign(&with(claims(&iss), "pad", json!("x".repeat(5500))));
    assert!((7000..=8192).contains(&big.len()), "{}", big.len());
    assert!(v.verify(&big).await.is_ok(), "a large token within 8 KiB is fine");
    let huge = ec.sign(&with(claims(&iss), "pad", json!("x".repeat(9000))));
    assert!(huge.len() > 8192);
    assert_invalid(v.verify(&huge).await, "too large");
    assert_invalid(v.verify(&"a".repeat(1 << 20)).await, "too large");
}

#[tokio::test]
async fn extra_audience_is_accepted() {
    let ec = EcKey::generate("ec-1");
    let idp = Idp::start(&[ec.jwk()]).await;
    let iss = idp.issuer();
    let v = verifier(vec![settings(json!({ "issuer": iss, "jwks_uri": idp.jwks_uri(), "audiences": ["api://toolgate"] }))]);
    assert!(v.verify(&ec.sign(&with(claims(&iss), "aud", json!("api://toolgate")))).await.is_ok());
    assert!(v.verify(&ec.sign(&with(claims(&iss), "aud", json!(["x", "api://toolgate"])))).await.is_ok());
    assert!(v.verify(&ec.sign(&claims(&iss))).await.is_ok(), "the canonical resource is still accepted");
    assert_invalid(v.verify(&ec.sign(&with(claims(&iss), "aud", json!("api://other")))).await, "audience");
}

#[tokio::test]
async fn two_issuers_at_once() {
    let key_a = EcKey::generate("a-1");
    let key_b = EcKey::generate("b-1");
    let idp_a = Idp::start(&[key_a.jwk()]).await;
    let idp_b = Idp::start(&[key_b.jwk()]).await;
    let (iss_a, iss_b) = (idp_a.issuer(), idp_b.issuer());
    let v = verifier(vec![
        settings(json!({ "issuer": iss_a, "jwks_uri": idp_a.jwks_uri() })),
        settings(json!({ "issuer": iss_b, "jwks_uri": idp_b.jwks_uri(), "audiences": ["api://b"] })),
    ]);
    let a = v.verify(&key_a.sign(&claims(&iss_a))).await.expect("issuer A");
    let b = v.verify(&key_b.sign(&with(claims(&iss_b), "aud", json!("api://b")))).await.expect("issuer B");
    assert_eq!((a.issuer.as_str(), b.issuer.as_str()), (iss_a.as_str(), iss_b.as_str()));
    assert_ne!(a.key(), b.key(), "same sub, different issuers: different principals");

    // B's key cannot sign for A (its kid is unknown at A), and B's extra audience is B's only.
    assert_invalid(v.verify(&key_b.sign(&claims(&iss_a))).await, "no signing key");
    assert_invalid(v.verify(&key_b.sign_as("a-1", &claims(&iss_a))).await, "signature does not verify");
    assert_invalid(v.verify(&key_a.sign(&with(claims(&iss_a), "aud", json!("api://b")))).await, "audience");
    assert_eq!((idp_a.jwks_fetches(), idp_b.jwks_fetches()), (1, 1), "each issuer's keys come from its own IdP");
}

#[tokio::test]
async fn discovery_via_openid_configuration() {
    let ec = EcKey::generate("ec-1");
    let idp = Idp::start(&[ec.jwk()]).await;
    let iss = idp.issuer();
    // No RFC 8414 document (404): the OpenID Connect one is used.
    idp.set_document("/.well-known/openid-configuration", json!({ "issuer": iss, "jwks_uri": idp.jwks_uri() }));
    let v = verifier(vec![settings(json!({ "issuer": iss }))]);
    assert!(v.verify(&ec.sign(&claims(&iss))).await.is_ok());
    assert_eq!(idp.requests(), ["/.well-known/oauth-authorization-server", "/.well-known/openid-configuration", "/jwks"]);
}

#[tokio::test]
async fn discovery_inserts_the_issuer_path_per_rfc8414() {
    let ec = EcKey::generate("ec-1");
    let idp = Idp::start(&[ec.jwk()]).await;
    let iss = format!("{}/tenant1", idp.base);
    idp.set_document("/.well-known/oauth-authorization-server/tenant1", json!({ "issuer": iss, "jwks_uri": idp.jwks_uri() }));
    let v = verifier(vec![settings(json!({ "issuer": iss }))]);
    assert!(v.verify(&ec.sign(&claims(&iss))).await.is_ok());
    assert_eq!(idp.requests(), ["/.well-known/oauth-authorization-server/tenant1", "/jwks"]);
}

#[tokio::test]
async fn discovery_refuses_metadata_of_another_issuer() {
    let ec = EcKey::generate("ec-1");
    let idp = Idp::start(&[ec.jwk()]).await;
    let iss = idp.issuer();
    idp.set_document(
        "/.well-known/oauth-authorization-server",
        json!({ "issuer": "https://elsewhere.example", "jwks_uri": idp.jwks_uri() }),
    );
    let v = verifier(vec![settings(json!({ "issuer": iss }))]);
    assert!(matches!(v.verify(&ec.sign(&claims(&iss))).await, Err(TokenError::Unavailable(_))));
    assert_eq!(idp.jwks_fetches(), 0);
}

#[tokio::test]
async fn cache_hit_does_not_refetch_and_is_fast() {
    let ec = EcKey::generate("ec-1");
    let idp = Idp::start(&[ec.jwk()]).await;
    let iss = idp.issuer();
    let token = ec.sign(&claims(&iss));

    // The cost of a full verification (signature included), measured without the cache.
    let uncached = verifier_for(&idp).with_token_cache_capacity(0);
    uncached.verify(&token).await.expect("accepted");
    let started = Instant::now();
    for _ in 0..20 {
        uncached.verify(&token).await.expect("accepted");
    }
    let full = started.elapsed() / 20;

    let v = verifier_for(&idp);
    let first = v.verify(&token).await.expect("accepted");
    let fetches = idp.jwks_fetches();
    let started = Instant::now();
    for _ in 0..20 {
        assert_eq!(v.verify(&token).await.expect("cached"), first);
    }
    let hit = started.elapsed() / 20;
    assert_eq!(idp.jwks_fetches(), fetches, "cache hits never fetch");
    assert!(hit * 5 < full, "a cache hit ({hit:?}) should be far cheaper than a verification ({full:?})");
}

#[tokio::test]
async fn expired_cached_token_is_rejected() {
    let ec = EcKey::generate("ec-1");
    let idp = Idp::start(&[ec.jwk()]).await;
    let iss = idp.issuer();
    let v = verifier(vec![settings(json!({ "issuer": iss, "jwks_uri": idp.jwks_uri(), "leeway_secs": 0 }))]);
    let token = ec.sign(&with(claims(&iss), "exp", json!(now() + 2)));
    v.verify(&token).await.expect("valid now");
    v.verify(&token).await.expect("cached");
    tokio::time::sleep(Duration::from_millis(3100)).await;
    assert_invalid(v.verify(&token).await, "expired");
}

// ---------------------------------------------------------------------------------------------
// Settings and background refresh
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn unsafe_settings_are_refused_at_startup() {
    let secret = "0123456789abcdef0123456789abcdef";
    let bad = [
        json!({ "issuer": "https://a.example", "algorithms": ["none"] }),
        json!({ "issuer": "https://a.example", "algorithms": ["HS256"] }),
        json!({ "issuer": "https://a.example", "hmac_secret": "short" }),
        json!({ "issuer": "https://a.example", "hmac_secret": secret, "algorithms": ["RS256"] }),
        json!({ "issuer": "https://a.example", "jwks_uri": "http://idp.example/jwks" }),
        json!({ "issuer": "http://idp.example" }),
        json!({ "issuer": "https://a.example", "leeway_secs": 3600 }),
        json!({ "issuer": "" }),
    ];
    for settings_json in bad {
        let result = JwtVerifier::new(vec![settings(settings_json.clone())], RESOURCE.into(), reqwest::Client::new());
        assert!(result.is_err(), "{settings_json} must be refused");
    }
    let twice = vec![settings(json!({ "issuer": "https://a.example" })), settings(json!({ "issuer": "https://a.example" }))];
    assert!(JwtVerifier::new(twice, RESOURCE.into(), reqwest::Client::new()).is_err());
    assert!(JwtVerifier::new(vec![], RESOURCE.into(), reqwest::Client::new()).is_err());
    assert!(JwtVerifier::new(vec![settings(json!({ "issuer": "https://a.example" }))], String::new(), reqwest::Client::new()).is_err());
    assert!(serde_json::from_value::<IssuerSettings>(json!({ "issuer": "https://a.example", "jwks": "x" })).is_err(), "unknown fields");
    let defaults = settings(json!({ "issuer": "https://a.example" }));
    assert_eq!(defaults.leeway_secs, 30);
    assert!(format!("{:?}", settings(json!({ "issuer": "https://a.example", "hmac_secret": secret }))).contains("redacted"));
}

#[tokio::test]
async fn background_refresh_fetches_keys_and_stops() {
    let ec = EcKey::generate("ec-1");
    let idp = Idp::start(&[ec.jwk()]).await;
    let v = Arc::new(verifier_for(&idp).with_min_refresh_interval(Duration::from_millis(100)));
    let stop = tokio_util::sync::CancellationToken::new();
    // Ticks at 0 s, 2 s, 4 s…; each check sits about a second away from the nearest tick.
    v.spawn_refresh(Duration::from_secs(2), stop.clone());
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(idp.jwks_fetches(), 1, "keys are fetched at once, before any token arrives");
    assert!(v.verify(&ec.sign(&claims(&idp.issuer()))).await.is_ok());
    assert_eq!(idp.jwks_fetches(), 1, "and the first token needs no fetch");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(idp.jwks_fetches(), 2, "then again every interval");
    stop.cancel();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(idp.jwks_fetches(), 2, "and not after stop");
}
