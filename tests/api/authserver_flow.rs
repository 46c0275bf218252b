//! The built-in authorization server attacked end to end over real HTTP (spec
//! `authorization-server.md` §7, rows BBX-n): a toolgate server on loopback whose issuer is
//! its own origin, the hostile OpenID provider of [`crate::common::mock_idp`] as identity provider, and a
//! "browser" driven by hand (reqwest, no redirects followed, the binding cookie carried in a
//! `Cookie` header). One rule per test; each names its BBX row.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use reqwest::{Response, StatusCode};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use toolgate::app::{self, AppState};
use toolgate::config::Secret;
use toolgate::config::authserver::{IdentityProviderSettings, RegistrationMode, ScopeRule};

use crate::common::mock_idp::{CLIENT_ID, CLIENT_SECRET, MockIdp};
use crate::common::{ACCEPT_BOTH, MODERN, TestServer, test_settings};

/// The redirect URI every client registers (`C` of the matrix).
const REDIRECT: &str = "http://127.0.0.1/cb";
const STATE: &str = "client-state-1";

/// A toolgate with its authorization server on, and the identity provider it trusts.
struct As {
    _server: TestServer,
    idp: MockIdp,
    /// The signing key (PEM), to forge tokens with toolgate's own key.
    key_pem: String,
    /// The issuer: `http://127.0.0.1:<port>`.
    origin: String,
    /// Follows no redirect and keeps no cookie: the tests carry the cookie by hand.
    http: reqwest::Client,
    _keys: tempfile::TempDir,
}

/// A PKCE verifier and its S256 challenge.
struct Pkce {
    verifier: String,
    challenge: String,
}

fn pkce() -> Pkce {
    let verifier = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>());
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    Pkce { verifier, challenge }
}

/// What a whole sign-in gives.
struct Tokens {
    client_id: String,
    code: String,
    verifier: String,
    access: String,
    refresh: String,
}

/// The browser after `/oauth/authorize`: its binding cookie (`name=value`) and where it was
/// sent (the identity provider).
struct Began {
    cookie: String,
    idp_url: String,
}

fn header(res: &Response, name: &str) -> String {
    res.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned()
}

fn query_of(url: &str) -> Vec<(String, String)> {
    url::Url::parse(url).expect("absolute URL").query_pairs().into_owned().collect()
}

fn param(url: &str, name: &str) -> Option<String> {
    query_of(url).into_iter().find(|(k, _)| k == name).map(|(_, v)| v)
}

/// A hidden input's value in a page.
fn hidden(page: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = page.find(&marker).unwrap_or_else(|| panic!("no {name} in the page: {page}")) + marker.len();
    page[start..].split('"').next().expect("closed attribute").to_owned()
}

/// The `Return to the application` link of a refusal page, unescaped.
fn back_link(page: &str) -> String {
    assert!(page.contains("Return to the application"), "no link back: {page}");
    let start = page.find("id=\"back\" href=\"").expect("the back link") + "id=\"back\" href=\"".len();
    page[start..].split('"').next().expect("closed").replace("&amp;", "&")
}

/// The claims of a JWT, unverified.
fn claims_of(jwt: &str) -> Value {
    let payload = jwt.split('.').nth(1).expect("a JWT");
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).expect("base64url")).expect("JSON claims")
}

impl As {
    async fn start() -> Self {
        let idp = MockIdp::start().await;
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        let origin = format!("http://127.0.0.1:{port}");
        let keys = tempfile::tempdir().expect("key dir");
        let key_pem = toolgate::authserver::keys::generate_pem().expect("a signing key");
        let key_file = keys.path().join("signing.pem");
        std::fs::write(&key_file, &key_pem).expect("key written");

        let data = tempfile::tempdir().expect("data dir");
        let mut settings = test_settings(data.path());
        settings.auth.mode = toolgate::auth::settings::AuthMode::Jwt;
        settings.auth.resource = Some(format!("{origin}/mcp"));
        // A scope this server knows but the rules grant nobody: what an escalation asks for.
        settings.auth.tool_scopes.insert("admin_only".into(), vec!["mcp:admin".into()]);
        let a = &mut settings.authorization_server;
        a.enabled = true;
        a.issuer = Some(origin.clone());
        a.signing_key_files = vec![key_file];
        a.requests_per_minute = 1000;
        a.scope_rules = vec![ScopeRule { claim: None, values: vec![], scopes: vec!["mcp:tools".into()] }];
        a.registration.mode = RegistrationMode::Open;
        a.identity_provider = IdentityProviderSettings {
            issuer: idp.url.clone(),
            client_id: CLIENT_ID.into(),
            client_secret: Some(Secret::new(CLIENT_SECRET.into())),
            ..Default::default()
        };
        settings.validate().expect("valid settings");
        let state = AppState::new(settings).await.expect("state");
        let running = app::start(state, format!("127.0.0.1:{port}").parse().expect("addr")).await.expect("server starts");
        let client = reqwest::Client::builder().timeout(std::time::Duration::from_secs(30)).build().expect("client");
        let server = TestServer { running, data, client, base: origin.clone() };
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .expect("client");
        Self { _server: server, idp, key_pem, origin, http, _keys: keys }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.origin)
    }

    fn resource(&self) -> String {
        self.url("/mcp")
    }

    /// `POST /oauth/register` with `body`.
    async fn register_raw(&self, body: &Value) -> Response {
        self.http.post(self.url("/oauth/register")).json(body).send().await.expect("register")
    }

    /// Registers a public client (DCR) with [`REDIRECT`] and refresh tokens; its id.
    async fn register(&self) -> String {
        let body = json!({
            "client_name": "Battery", "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
        });
        let res = self.register_raw(&body).await;
        assert_eq!(res.status(), StatusCode::CREATED);
        let registered: Value = res.json().await.expect("JSON");
        registered["client_id"].as_str().expect("client_id").to_owned()
    }

    /// A good authorization request of `client_id`, as pairs a test may change.
    fn request(&self, client_id: &str, pkce: &Pkce) -> Vec<(String, String)> {
        [
            ("response_type", "code"),
            ("client_id", client_id),
            ("redirect_uri", REDIRECT),
            ("code_challenge", pkce.challenge.as_str()),
            ("code_challenge_method", "S256"),
            ("resource", self.resource().as_str()),
            ("scope", "mcp:tools"),
            ("state", STATE),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
    }

    /// `GET /oauth/authorize` with `params`, as a browser the user typed the URL into.
    async fn authorize(&self, params: &[(String, String)]) -> Response {
        let mut url = url::Url::parse(&self.url("/oauth/authorize")).expect("url");
        url.query_pairs_mut().extend_pairs(params);
        self.http.get(url).header("sec-fetch-site", "none").send().await.expect("authorize")
    }

    /// Authorize, expecting the way to the identity provider.
    async fn begin(&self, params: &[(String, String)]) -> Began {
        let res = self.authorize(params).await;
        assert_eq!(res.status(), StatusCode::FOUND, "authorize: {}", res.text().await.unwrap_or_default());
        let idp_url = header(&res, "location");
        assert!(idp_url.starts_with(&format!("{}/authorize?", self.idp.origin)), "{idp_url}");
        let set_cookie = header(&res, "set-cookie");
        let cookie = set_cookie.split(';').next().expect("name=value").to_owned();
        assert!(cookie.starts_with("toolgate-signin="), "{set_cookie}");
        Began { cookie, idp_url }
    }

    /// The identity provider signs the user in: the callback URL it sends the browser to.
    async fn at_idp(&self, idp_url: &str) -> String {
        let res = self.http.get(idp_url).send().await.expect("identity provider");
        assert_eq!(res.status(), StatusCode::FOUND);
        let back = header(&res, "location");
        assert!(back.starts_with(&self.url("/oauth/callback?")), "{back}");
        back
    }

    /// A browser GET with `cookie` (`name=value`) if any.
    async fn get(&self, url: &str, cookie: Option<&str>) -> Response {
        let url = if url.starts_with('/') { self.url(url) } else { url.to_owned() };
        let mut req = self.http.get(url);
        if let Some(cookie) = cookie {
            req = req.header("cookie", cookie);
        }
        req.send().await.expect("GET")
    }

    /// The callback in the browser that began; the consent page's URL it leads to.
    async fn callback_to_consent(&self, began: &Began) -> String {
        let back = self.at_idp(&began.idp_url).await;
        let res = self.get(&back, Some(&began.cookie)).await;
        assert_eq!(res.status(), StatusCode::SEE_OTHER, "callback: {}", res.text().await.unwrap_or_default());
        let consent = header(&res, "location");
        assert!(consent.starts_with("/oauth/consent?tx="), "{consent}");
        consent
    }

    /// The consent page's `(tx, csrf)`.
    async fn consent_form(&self, consent_url: &str, cookie: &str) -> (String, String) {
        let res = self.get(consent_url, Some(cookie)).await;
        assert_eq!(res.status(), StatusCode::OK);
        let page = res.text().await.expect("page");
        (hidden(&page, "tx"), hidden(&page, "csrf"))
    }

    /// `POST /oauth/consent`.
    async fn answer(&self, tx: &str, csrf: &str, decision: &str, cookie: Option<&str>) -> Response {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("tx", tx)
            .append_pair("csrf", csrf)
            .append_pair("decision", decision)
            .finish();
        let mut req = self.http.post(self.url("/oauth/consent")).header("content-type", "application/x-www-form-urlencoded").body(body);
        if let Some(cookie) = cookie {
            req = req.header("cookie", cookie);
        }
        req.send().await.expect("consent answer")
    }

    /// A whole sign-in of `client_id` up to the client's redirect URI (with the code).
    async fn code_redirect(&self, client_id: &str, pkce: &Pkce) -> String {
        let began = self.begin(&self.request(client_id, pkce)).await;
        let consent = self.callback_to_consent(&began).await;
        let (tx, csrf) = self.consent_form(&consent, &began.cookie).await;
        let res = self.answer(&tx, &csrf, "approve", Some(&began.cookie)).await;
        assert_eq!(res.status(), StatusCode::SEE_OTHER);
        let to_client = header(&res, "location");
        assert!(to_client.starts_with(&format!("{REDIRECT}?")), "{to_client}");
        to_client
    }

    /// `POST /oauth/token` with a form.
    async fn token(&self, form: &[(&str, &str)]) -> Response {
        let body = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(form).finish();
        self.http
            .post(self.url("/oauth/token"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .expect("token")
    }

    /// Redeems `code` with `verifier` (and the request's redirect URI and resource).
    async fn redeem(&self, client_id: &str, code: &str, verifier: &str) -> Response {
        let resource = self.resource();
        self.token(&[
            ("grant_type", "authorization_code"),
            ("client_id", client_id),
            ("code", code),
            ("code_verifier", verifier),
            ("redirect_uri", REDIRECT),
            ("resource", &resource),
        ])
        .await
    }

    async fn refresh(&self, client_id: &str, refresh_token: &str) -> Response {
        self.token(&[("grant_type", "refresh_token"), ("client_id", client_id), ("refresh_token", refresh_token)]).await
    }

    async fn revoke(&self, client_id: &str, token: &str) -> Response {
        let body =
            url::form_urlencoded::Serializer::new(String::new()).append_pair("client_id", client_id).append_pair("token", token).finish();
        self.http
            .post(self.url("/oauth/revoke"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .expect("revoke")
    }

    /// A whole sign-in by a new client: register, authorize, the identity provider, callback,
    /// consent, code, tokens.
    async fn sign_in(&self) -> Tokens {
        let client_id = self.register().await;
        let pkce = pkce();
        let to_client = self.code_redirect(&client_id, &pkce).await;
        let code = param(&to_client, "code").expect("a code");
        let res = self.redeem(&client_id, &code, &pkce.verifier).await;
        assert_eq!(res.status(), StatusCode::OK);
        let body: Value = res.json().await.expect("JSON");
        Tokens {
            client_id,
            code,
            verifier: pkce.verifier,
            access: body["access_token"].as_str().expect("access token").to_owned(),
            refresh: body["refresh_token"].as_str().expect("refresh token").to_owned(),
        }
    }

    /// A modern `tools/list` on `/mcp` with `Authorization: Bearer <token>`.
    async fn tools_list(&self, token: &str) -> Response {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "battery", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }}});
        self.http
            .post(self.resource())
            .header("content-type", "application/json")
            .header("accept", ACCEPT_BOTH)
            .header("mcp-protocol-version", MODERN)
            .header("mcp-method", "tools/list")
            .header("authorization", format!("Bearer {token}"))
            .body(body.to_string())
            .send()
            .await
            .expect("tools/list")
    }

    /// `claims` signed with toolgate's own signing key (its published `kid`), with `typ`.
    async fn sign_as_toolgate(&self, typ: Option<&str>, claims: &Value) -> String {
        let jwks: Value = self.get("/oauth/jwks", None).await.json().await.expect("JWKS");
        let kid = jwks["keys"][0]["kid"].as_str().expect("kid");
        let secret = <p256::SecretKey as p256::pkcs8::DecodePrivateKey>::from_pkcs8_pem(&self.key_pem).expect("EC key");
        let der = p256::pkcs8::EncodePrivateKey::to_pkcs8_der(&secret).expect("PKCS#8");
        let key = jsonwebtoken::EncodingKey::from_ec_der(der.as_bytes());
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = Some(kid.to_owned());
        header.typ = typ.map(str::to_owned);
        jsonwebtoken::encode(&header, claims, &key).expect("signed")
    }

    async fn mcp_status(&self, token: &str) -> StatusCode {
        self.tools_list(token).await.status()
    }
}

async fn error_of(res: Response) -> String {
    let body: Value = res.json().await.expect("JSON error");
    body["error"].as_str().unwrap_or_default().to_owned()
}

// ---------------------------------------------------------------------------------------------
// The happy path
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_whole_sign_in_gives_an_access_token_that_lists_tools() {
    let a = As::start().await;
    let tokens = a.sign_in().await;
    let claims = claims_of(&tokens.access);
    assert_eq!(claims["aud"], json!(a.resource()));
    assert_eq!(claims["client_id"], json!(tokens.client_id));
    assert_eq!(claims["scope"], json!("mcp:tools"));
    let res = a.tools_list(&tokens.access).await;
    assert_eq!(res.status(), StatusCode::OK);
    let answer = crate::common::response_json(res).await;
    assert!(answer["result"]["tools"].is_array(), "{answer}");
}

// ---------------------------------------------------------------------------------------------
// Metadata and iss (BBX-1, BBX-3, BBX-33)
// ---------------------------------------------------------------------------------------------

/// BBX-1 and BBX-3: the metadata's shape; the issuer is the same string in the protected
/// resource metadata, the metadata, the `iss` response parameter and the token's `iss`.
#[tokio::test]
async fn bbx1_bbx3_metadata_shape_and_one_issuer_string_everywhere() {
    let a = As::start().await;
    let res = a.get("/.well-known/oauth-authorization-server", None).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert!(header(&res, "content-type").starts_with("application/json"));
    let meta: Value = res.json().await.expect("JSON");
    let has = |key: &str, value: &str| meta[key].as_array().is_some_and(|l| l.iter().any(|v| v == value));
    assert!(has("code_challenge_methods_supported", "S256") && !has("code_challenge_methods_supported", "plain"));
    assert!(has("response_types_supported", "code"));
    assert!(has("grant_types_supported", "authorization_code") && has("grant_types_supported", "refresh_token"));
    assert!(has("token_endpoint_auth_methods_supported", "none"));
    assert_eq!(meta["authorization_response_iss_parameter_supported"], json!(true));
    assert_eq!(meta["registration_endpoint"], json!(a.url("/oauth/register")));

    let prm: Value = a.get("/.well-known/oauth-protected-resource/mcp", None).await.json().await.expect("PRM");
    assert_eq!(prm["authorization_servers"][0], meta["issuer"]);
    assert_eq!(meta["issuer"], json!(a.origin));

    let tokens = a.sign_in().await;
    assert_eq!(claims_of(&tokens.access)["iss"], meta["issuer"]);
    let to_client = a.code_redirect(&a.register().await, &pkce()).await;
    assert_eq!(param(&to_client, "iss").as_deref(), meta["issuer"].as_str());
}

/// BBX-33 (and BBX-17): `iss` and `state` on the success redirect and on an error redirect
/// (the user denies at consent).
#[tokio::test]
async fn bbx33_iss_and_state_in_success_and_error_redirects() {
    let a = As::start().await;
    let client_id = a.register().await;
    let to_client = a.code_redirect(&client_id, &pkce()).await;
    assert_eq!(param(&to_client, "iss"), Some(a.origin.clone()));
    assert_eq!(param(&to_client, "state").as_deref(), Some(STATE));

    let other = a.register().await;
    let began = a.begin(&a.request(&other, &pkce())).await;
    let consent = a.callback_to_consent(&began).await;
    let (tx, csrf) = a.consent_form(&consent, &began.cookie).await;
    let res = a.answer(&tx, &csrf, "deny", Some(&began.cookie)).await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let denied = header(&res, "location");
    assert!(denied.starts_with(&format!("{REDIRECT}?")), "{denied}");
    assert_eq!(param(&denied, "error").as_deref(), Some("access_denied"));
    assert_eq!(param(&denied, "iss"), Some(a.origin.clone()));
    assert_eq!(param(&denied, "state").as_deref(), Some(STATE));
    assert_eq!(param(&denied, "code"), None);
}

// ---------------------------------------------------------------------------------------------
// PKCE (BBX-4, 5, 6, 8, 9)
// ---------------------------------------------------------------------------------------------

/// The refusal page a DCR client gets (AUZ-11: no automatic redirect to a redirect URI the
/// operator did not vouch for): 400 HTML, no `Location`, a link back carrying the error,
/// `state` and `iss`.
async fn assert_refusal_page(res: Response, a: &As, error: &str) {
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    assert!(header(&res, "location").is_empty(), "redirected: {}", header(&res, "location"));
    assert!(header(&res, "content-type").starts_with("text/html"));
    let link = back_link(&res.text().await.expect("page"));
    assert!(link.starts_with(&format!("{REDIRECT}?")), "{link}");
    assert_eq!(param(&link, "error").as_deref(), Some(error), "{link}");
    assert_eq!(param(&link, "iss"), Some(a.origin.clone()), "{link}");
    assert_eq!(param(&link, "state").as_deref(), Some(STATE), "{link}");
    assert_eq!(param(&link, "code"), None);
}

/// BBX-4: no `code_challenge`.
#[tokio::test]
async fn bbx4_missing_pkce_is_refused_on_a_page_with_a_link_back() {
    let a = As::start().await;
    let client_id = a.register().await;
    let mut params = a.request(&client_id, &pkce());
    params.retain(|(k, _)| k != "code_challenge");
    assert_refusal_page(a.authorize(&params).await, &a, "invalid_request").await;
}

/// BBX-5 and BBX-6: `plain`, and no method (which means plain).
#[tokio::test]
async fn bbx5_bbx6_plain_or_omitted_pkce_method_is_refused_on_a_page() {
    let a = As::start().await;
    let client_id = a.register().await;
    let mut plain = a.request(&client_id, &pkce());
    plain.iter_mut().filter(|(k, _)| k == "code_challenge_method").for_each(|(_, v)| *v = "plain".into());
    assert_refusal_page(a.authorize(&plain).await, &a, "invalid_request").await;
    let mut omitted = a.request(&client_id, &pkce());
    omitted.retain(|(k, _)| k != "code_challenge_method");
    assert_refusal_page(a.authorize(&omitted).await, &a, "invalid_request").await;
}

/// BBX-8 (and BBX-9): a wrong verifier, or none, is `invalid_grant`, with `no-store`.
#[tokio::test]
async fn bbx8_bbx9_a_wrong_or_missing_verifier_is_invalid_grant() {
    let a = As::start().await;
    let client_id = a.register().await;
    let right = pkce();
    let code = param(&a.code_redirect(&client_id, &right).await, "code").expect("code");
    let res = a.redeem(&client_id, &code, &pkce().verifier).await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    assert_eq!(header(&res, "cache-control"), "no-store");
    assert_eq!(error_of(res).await, "invalid_grant");
    let res = a.token(&[("grant_type", "authorization_code"), ("client_id", &client_id), ("code", &code)]).await;
    assert_eq!(error_of(res).await, "invalid_grant");
    // Neither attempt used the code up.
    assert_eq!(a.redeem(&client_id, &code, &right.verifier).await.status(), StatusCode::OK);
}

// ---------------------------------------------------------------------------------------------
// Code replay (BBX-10, BBX-11)
// ---------------------------------------------------------------------------------------------

/// BBX-10: a code redeemed twice: the second is `invalid_grant` and what the first gave is
/// revoked: its refresh token fails, its access token is refused at once.
#[tokio::test]
async fn bbx10_code_replay_revokes_the_first_grant() {
    let a = As::start().await;
    let tokens = a.sign_in().await;
    assert_eq!(a.mcp_status(&tokens.access).await, StatusCode::OK);
    let again = a.redeem(&tokens.client_id, &tokens.code, &tokens.verifier).await;
    assert_eq!(again.status(), StatusCode::BAD_REQUEST);
    assert_eq!(error_of(again).await, "invalid_grant");
    assert_eq!(error_of(a.refresh(&tokens.client_id, &tokens.refresh).await).await, "invalid_grant");
    assert_eq!(a.mcp_status(&tokens.access).await, StatusCode::UNAUTHORIZED);
}

/// BBX-11: a replay with a wrong verifier (an attacker's) is `invalid_grant` and revokes
/// nothing.
#[tokio::test]
async fn bbx11_a_replay_with_a_bad_verifier_leaves_the_first_tokens_valid() {
    let a = As::start().await;
    let tokens = a.sign_in().await;
    let replay = a.redeem(&tokens.client_id, &tokens.code, &pkce().verifier).await;
    assert_eq!(error_of(replay).await, "invalid_grant");
    assert_eq!(a.mcp_status(&tokens.access).await, StatusCode::OK);
    assert_eq!(a.refresh(&tokens.client_id, &tokens.refresh).await.status(), StatusCode::OK);
}

// ---------------------------------------------------------------------------------------------
// Redirect URI and resource (BBX-14, 21, 27, 28)
// ---------------------------------------------------------------------------------------------

/// BBX-14 (and BBX-19, BBX-21): a redirect URI the client did not register: an error page,
/// never a `Location`.
#[tokio::test]
async fn bbx14_a_redirect_uri_mismatch_is_an_error_page_without_location() {
    let a = As::start().await;
    let client_id = a.register().await;
    for bad in [
        "http://127.0.0.1/cb2",
        "http://127.0.0.1/cb/",
        "http://127.0.0.1/cb?x=1",
        "http://127.0.0.1:54321/cb2",
        "http://localhost/cb",
        "http://127.0.0.1.evil.com/cb",
        "https://evil.example/cb",
    ] {
        let mut params = a.request(&client_id, &pkce());
        params.iter_mut().filter(|(k, _)| k == "redirect_uri").for_each(|(_, v)| *v = bad.into());
        let res = a.authorize(&params).await;
        assert_eq!(res.status(), StatusCode::BAD_REQUEST, "{bad}");
        assert!(header(&res, "location").is_empty(), "{bad} redirected");
        assert!(header(&res, "set-cookie").is_empty(), "{bad} began a sign-in");
        let page = res.text().await.expect("page");
        assert!(!page.contains("Return to the application") && !page.contains(bad), "{bad}: {page}");
    }
}

/// BBX-27: a resource that is not this server's: `invalid_target` (on the page, for a DCR
/// client).
#[tokio::test]
async fn bbx27_a_foreign_resource_is_invalid_target() {
    let a = As::start().await;
    let client_id = a.register().await;
    for foreign in ["https://other.example/mcp", &a.url("/mcp/other"), &a.url("/")] {
        let mut params = a.request(&client_id, &pkce());
        params.iter_mut().filter(|(k, _)| k == "resource").for_each(|(_, v)| *v = foreign.to_owned());
        assert_refusal_page(a.authorize(&params).await, &a, "invalid_target").await;
    }
}

/// BBX-28: the code redeemed for another resource than it was asked for.
#[tokio::test]
async fn bbx28_resource_drift_at_the_token_endpoint_is_invalid_target() {
    let a = As::start().await;
    let client_id = a.register().await;
    let pkce = pkce();
    let code = param(&a.code_redirect(&client_id, &pkce).await, "code").expect("code");
    let other = a.url("/mcp2");
    let res = a
        .token(&[
            ("grant_type", "authorization_code"),
            ("client_id", &client_id),
            ("code", &code),
            ("code_verifier", &pkce.verifier),
            ("resource", &other),
        ])
        .await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    assert_eq!(error_of(res).await, "invalid_target");
}

// ---------------------------------------------------------------------------------------------
// Refresh tokens (BBX-39, BBX-40) and revocation (BBX-42)
// ---------------------------------------------------------------------------------------------

/// BBX-39: a refresh gives a new refresh token and a working access token.
#[tokio::test]
async fn bbx39_refresh_rotates_the_refresh_token() {
    let a = As::start().await;
    let tokens = a.sign_in().await;
    let res = a.refresh(&tokens.client_id, &tokens.refresh).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(header(&res, "cache-control"), "no-store");
    let body: Value = res.json().await.expect("JSON");
    let rt2 = body["refresh_token"].as_str().expect("a new refresh token");
    assert_ne!(rt2, tokens.refresh);
    assert_eq!(a.mcp_status(body["access_token"].as_str().expect("access token")).await, StatusCode::OK);
}

/// BBX-40: the rotated refresh token presented again: `invalid_grant`, and the whole grant is
/// revoked: the newer refresh token fails and its access token is refused at once (this
/// replica's deny list learns its own revocations immediately).
#[tokio::test]
async fn bbx40_refresh_token_reuse_revokes_the_grant() {
    let a = As::start().await;
    let tokens = a.sign_in().await;
    let body: Value = a.refresh(&tokens.client_id, &tokens.refresh).await.json().await.expect("JSON");
    let (rt2, at2) = (body["refresh_token"].as_str().expect("rt2"), body["access_token"].as_str().expect("at2"));
    assert_eq!(a.mcp_status(at2).await, StatusCode::OK);

    let reuse = a.refresh(&tokens.client_id, &tokens.refresh).await;
    assert_eq!(reuse.status(), StatusCode::BAD_REQUEST);
    assert_eq!(error_of(reuse).await, "invalid_grant");
    assert_eq!(error_of(a.refresh(&tokens.client_id, rt2).await).await, "invalid_grant");
    assert_eq!(a.mcp_status(at2).await, StatusCode::UNAUTHORIZED);
    assert_eq!(a.mcp_status(&tokens.access).await, StatusCode::UNAUTHORIZED);
}

/// BBX-42: revocation of the client's own token (200, the grant ends), of garbage (200), and
/// of another client's token (refused; that token keeps working).
#[tokio::test]
async fn bbx42_revocation_of_another_clients_token_is_refused_and_the_token_still_works() {
    let a = As::start().await;
    let victim = a.sign_in().await;
    let attacker = a.sign_in().await;
    for token in [&victim.refresh, &victim.access] {
        let res = a.revoke(&attacker.client_id, token).await;
        assert_eq!(res.status(), StatusCode::BAD_REQUEST);
        assert_eq!(error_of(res).await, "unauthorized_client");
    }
    assert_eq!(a.mcp_status(&victim.access).await, StatusCode::OK);
    let refreshed = a.refresh(&victim.client_id, &victim.refresh).await;
    assert_eq!(refreshed.status(), StatusCode::OK);

    assert_eq!(a.revoke(&attacker.client_id, "garbage-token").await.status(), StatusCode::OK);
    assert_eq!(a.revoke(&attacker.client_id, &attacker.refresh).await.status(), StatusCode::OK);
    assert_eq!(error_of(a.refresh(&attacker.client_id, &attacker.refresh).await).await, "invalid_grant");
    assert_eq!(a.mcp_status(&attacker.access).await, StatusCode::UNAUTHORIZED);
}

// ---------------------------------------------------------------------------------------------
// The browser binding (BBX-51, BBX-53, BBX-55)
// ---------------------------------------------------------------------------------------------

/// BBX-51: the consent form posted with a foreign CSRF token, or without the browser's
/// cookie: 403, no redirect; the real browser can still answer.
#[tokio::test]
async fn bbx51_consent_without_the_right_csrf_or_cookie_is_403() {
    let a = As::start().await;
    let client_id = a.register().await;
    let began = a.begin(&a.request(&client_id, &pkce())).await;
    let consent = a.callback_to_consent(&began).await;
    let (tx, csrf) = a.consent_form(&consent, &began.cookie).await;

    let foreign = URL_SAFE_NO_PAD.encode(Sha256::digest(b"another browser's csrf"));
    for (csrf, cookie) in [(foreign.as_str(), Some(began.cookie.as_str())), (csrf.as_str(), None), ("", Some(&began.cookie))] {
        let res = a.answer(&tx, csrf, "approve", cookie).await;
        assert_eq!(res.status(), StatusCode::FORBIDDEN, "csrf {csrf:?}, cookie {cookie:?}");
        assert!(header(&res, "location").is_empty());
    }
    // Another browser's cookie (it began its own sign-in) does not do either.
    let other = a.begin(&a.request(&client_id, &pkce())).await;
    let res = a.answer(&tx, &csrf, "approve", Some(&other.cookie)).await;
    assert_eq!(res.status(), StatusCode::FORBIDDEN);

    let res = a.answer(&tx, &csrf, "approve", Some(&began.cookie)).await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert!(param(&header(&res, "location"), "code").is_some());
}

/// BBX-53: the identity provider's answer replayed in another browser (no cookie, or its
/// own): 403, no code.
#[tokio::test]
async fn bbx53_the_callback_in_another_browser_is_403() {
    let a = As::start().await;
    let client_id = a.register().await;
    let began = a.begin(&a.request(&client_id, &pkce())).await;
    let back = a.at_idp(&began.idp_url).await;
    let other = a.begin(&a.request(&client_id, &pkce())).await;
    for cookie in [None, Some(other.cookie.as_str())] {
        let res = a.get(&back, cookie).await;
        assert_eq!(res.status(), StatusCode::FORBIDDEN, "cookie {cookie:?}");
        assert!(header(&res, "location").is_empty());
    }
    // The right browser still signs in.
    assert_eq!(a.get(&back, Some(&began.cookie)).await.status(), StatusCode::SEE_OTHER);
}

/// BBX-55: a callback with an unknown `state`, or one already used: 4xx, no redirect.
#[tokio::test]
async fn bbx55_unknown_or_reused_state_at_the_callback_is_refused() {
    let a = As::start().await;
    let client_id = a.register().await;
    let began = a.begin(&a.request(&client_id, &pkce())).await;
    let back = a.at_idp(&began.idp_url).await;

    let unknown = a.url(&format!("/oauth/callback?code=idp-code-1&state={}", URL_SAFE_NO_PAD.encode([7u8; 32])));
    for url in [unknown, a.url("/oauth/callback?code=idp-code-1&state=short"), a.url("/oauth/callback?code=idp-code-1")] {
        let res = a.get(&url, Some(&began.cookie)).await;
        assert!(res.status().is_client_error(), "{url}: {}", res.status());
        assert!(header(&res, "location").is_empty());
    }

    assert_eq!(a.get(&back, Some(&began.cookie)).await.status(), StatusCode::SEE_OTHER);
    let reused = a.get(&back, Some(&began.cookie)).await;
    assert!(reused.status().is_client_error(), "{}", reused.status());
    assert!(header(&reused, "location").is_empty());
}

// ---------------------------------------------------------------------------------------------
// Tokens at the resource (BBX-32)
// ---------------------------------------------------------------------------------------------

/// BBX-32: the identity provider's ID token, and a JWT signed by toolgate's own key that is not
/// an access token (no `typ: at+jwt`), are refused at the MCP endpoint.
#[tokio::test]
async fn bbx32_an_id_token_or_a_non_access_token_jwt_is_refused_at_mcp() {
    let a = As::start().await;
    let tokens = a.sign_in().await;
    assert_eq!(a.mcp_status(&tokens.access).await, StatusCode::OK);

    let mut id_claims = a.idp.claims("n");
    id_claims["aud"] = json!(a.resource());
    for id_token in [a.idp.key.sign(&a.idp.claims("n")), a.idp.key.sign(&id_claims)] {
        assert_eq!(a.mcp_status(&id_token).await, StatusCode::UNAUTHORIZED);
    }

    // The access token's own claims, re-signed with toolgate's key without `typ: at+jwt`.
    let forged = a.sign_as_toolgate(None, &claims_of(&tokens.access)).await;
    assert_eq!(a.mcp_status(&forged).await, StatusCode::UNAUTHORIZED);
    // The same with the right type is accepted: the type alone made the difference.
    let typed = a.sign_as_toolgate(Some("at+jwt"), &claims_of(&tokens.access)).await;
    assert_eq!(a.mcp_status(&typed).await, StatusCode::OK);
}

// ---------------------------------------------------------------------------------------------
// Headers (BBX-36, 37, 57, 59)
// ---------------------------------------------------------------------------------------------

/// BBX-37: every token response, success or error: `no-store`, JSON.
#[tokio::test]
async fn bbx37_token_responses_are_no_store_json() {
    let a = As::start().await;
    let client_id = a.register().await;
    let pkce = pkce();
    let code = param(&a.code_redirect(&client_id, &pkce).await, "code").expect("code");
    let ok = a.redeem(&client_id, &code, &pkce.verifier).await;
    let errors = [
        a.redeem(&client_id, "not-a-code", &pkce.verifier).await,
        a.token(&[("grant_type", "password")]).await,
        a.refresh(&client_id, "not-a-refresh-token").await,
    ];
    assert_eq!(ok.status(), StatusCode::OK);
    for res in std::iter::once(ok).chain(errors) {
        assert_eq!(header(&res, "cache-control"), "no-store", "{}", res.status());
        assert!(header(&res, "content-type").starts_with("application/json"), "{}", res.status());
    }
}

/// BBX-36: the token endpoint (and the metadata) answer other origins; the authorization
/// endpoint does not.
#[tokio::test]
async fn bbx36_cors_on_the_token_endpoint_but_not_on_authorize() {
    let a = As::start().await;
    let preflight = |path: &str| {
        a.http
            .request(reqwest::Method::OPTIONS, a.url(path))
            .header("origin", "https://app.example")
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type")
            .send()
    };
    let token = preflight("/oauth/token").await.expect("preflight");
    assert!(!header(&token, "access-control-allow-origin").is_empty(), "no ACAO on /oauth/token");
    let meta = a.http.get(a.url("/.well-known/oauth-authorization-server")).header("origin", "https://app.example").send().await;
    assert!(!header(&meta.expect("metadata"), "access-control-allow-origin").is_empty());

    let authorize = preflight("/oauth/authorize").await.expect("preflight");
    assert!(header(&authorize, "access-control-allow-origin").is_empty());
    let client_id = a.register().await;
    let mut url = url::Url::parse(&a.url("/oauth/authorize")).expect("url");
    url.query_pairs_mut().extend_pairs(a.request(&client_id, &pkce()));
    let get = a.http.get(url).header("origin", "https://app.example").send().await.expect("authorize");
    assert!(header(&get, "access-control-allow-origin").is_empty());
}

/// BBX-57: the consent page (and an error page) forbid framing.
#[tokio::test]
async fn bbx57_the_consent_page_forbids_framing() {
    let a = As::start().await;
    let client_id = a.register().await;
    let began = a.begin(&a.request(&client_id, &pkce())).await;
    let consent = a.callback_to_consent(&began).await;
    let page = a.get(&consent, Some(&began.cookie)).await;
    assert_eq!(page.status(), StatusCode::OK);
    let error = a.get("/oauth/consent?tx=nothing", Some(&began.cookie)).await;
    for res in [page, error] {
        assert!(header(&res, "content-security-policy").contains("frame-ancestors 'none'"));
        assert_eq!(header(&res, "x-frame-options"), "DENY");
        assert_eq!(header(&res, "cache-control"), "no-store");
    }
}

/// BBX-59: the browser's redirects are 302 (authorize, the GET) and 303 (callback, the
/// consent POST), never 307.
#[tokio::test]
async fn bbx59_no_307_anywhere_in_the_flow() {
    let a = As::start().await;
    let client_id = a.register().await;
    let authorize = a.authorize(&a.request(&client_id, &pkce())).await;
    assert_eq!(authorize.status(), StatusCode::FOUND);
    // code_redirect asserts 303 on the callback and on the consent POST.
    let to_client = a.code_redirect(&client_id, &pkce()).await;
    assert!(param(&to_client, "code").is_some());
    let began = a.begin(&a.request(&a.register().await, &pkce())).await;
    let consent = a.callback_to_consent(&began).await;
    let (tx, csrf) = a.consent_form(&consent, &began.cookie).await;
    assert_eq!(a.answer(&tx, &csrf, "deny", Some(&began.cookie)).await.status(), StatusCode::SEE_OTHER);
}

/// `params` with `name` set to `value` (added when absent).
fn with(mut params: Vec<(String, String)>, name: &str, value: &str) -> Vec<(String, String)> {
    match params.iter_mut().find(|(k, _)| k == name) {
        Some(pair) => pair.1 = value.to_owned(),
        None => params.push((name.to_owned(), value.to_owned())),
    }
    params
}

fn without(mut params: Vec<(String, String)>, name: &str) -> Vec<(String, String)> {
    params.retain(|(k, _)| k != name);
    params
}

// ---------------------------------------------------------------------------------------------
// More rows: discovery, PKCE syntax, codes, registration, consent memory, ID tokens
// ---------------------------------------------------------------------------------------------

/// BBX-2: the OpenID discovery URL answers with the same issuer.
#[tokio::test]
async fn bbx2_every_discovery_url_names_the_same_issuer() {
    let a = As::start().await;
    for path in ["/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"] {
        let res = a.get(path, None).await;
        assert_eq!(res.status(), StatusCode::OK, "{path}");
        let meta: Value = res.json().await.expect("JSON");
        assert_eq!(meta["issuer"], json!(a.origin), "{path}");
    }
}

/// BBX-7: a challenge of 42 characters, or with a character outside the PKCE set.
#[tokio::test]
async fn bbx7_a_challenge_of_bad_syntax_is_invalid_request() {
    let a = As::start().await;
    let client_id = a.register().await;
    let good = pkce().challenge;
    for bad in [good[..42].to_owned(), format!("{}+", &good[..42]), format!("{}=", &good[..43])] {
        let params = with(a.request(&client_id, &pkce()), "code_challenge", &bad);
        assert_refusal_page(a.authorize(&params).await, &a, "invalid_request").await;
    }
}

/// BBX-13: a code redeemed by another client (with the right verifier) is `invalid_grant`,
/// and the real client can still redeem it.
#[tokio::test]
async fn bbx13_a_code_redeemed_by_another_client_is_invalid_grant() {
    let a = As::start().await;
    let (client_id, thief) = (a.register().await, a.register().await);
    let pkce = pkce();
    let code = param(&a.code_redirect(&client_id, &pkce).await, "code").expect("code");
    let res = a.redeem(&thief, &code, &pkce.verifier).await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    assert_eq!(error_of(res).await, "invalid_grant");
    assert_eq!(a.redeem(&client_id, &code, &pkce.verifier).await.status(), StatusCode::OK);
}

/// BBX-15: an unregistered redirect URI and a bad scope: the redirect URI is checked first,
/// so an error page without a link back.
#[tokio::test]
async fn bbx15_a_bad_redirect_uri_is_reported_before_a_bad_scope() {
    let a = As::start().await;
    let client_id = a.register().await;
    let params = with(with(a.request(&client_id, &pkce()), "redirect_uri", "https://evil.example/cb"), "scope", "zzz");
    let res = a.authorize(&params).await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    assert!(header(&res, "location").is_empty());
    assert!(!res.text().await.expect("page").contains("Return to the application"));
}

/// BBX-18: a registered loopback redirect matches on any port.
#[tokio::test]
async fn bbx18_a_loopback_redirect_uri_matches_on_any_port() {
    let a = As::start().await;
    let client_id = a.register().await;
    let began = a.begin(&with(a.request(&client_id, &pkce()), "redirect_uri", "http://127.0.0.1:54321/cb")).await;
    let consent = a.callback_to_consent(&began).await;
    let (tx, csrf) = a.consent_form(&consent, &began.cookie).await;
    let res = a.answer(&tx, &csrf, "approve", Some(&began.cookie)).await;
    assert!(header(&res, "location").starts_with("http://127.0.0.1:54321/cb?code="), "{}", header(&res, "location"));
}

/// BBX-22: the token request names another redirect URI than the authorization request.
#[tokio::test]
async fn bbx22_another_redirect_uri_at_the_token_endpoint_is_invalid_grant() {
    let a = As::start().await;
    let client_id = a.register().await;
    let pkce = pkce();
    let code = param(&a.code_redirect(&client_id, &pkce).await, "code").expect("code");
    let res = a
        .token(&[
            ("grant_type", "authorization_code"),
            ("client_id", &client_id),
            ("code", &code),
            ("code_verifier", &pkce.verifier),
            ("redirect_uri", "http://127.0.0.1:9999/cb"),
        ])
        .await;
    assert_eq!(error_of(res).await, "invalid_grant");
}

/// BBX-23, BBX-24, BBX-25: registration refuses bad redirect URIs; a good public one is
/// answered 201 with a generated id (a client-chosen one ignored), the redirect URIs echoed
/// and no secret.
#[tokio::test]
async fn bbx23_to_25_registration_over_http() {
    let a = As::start().await;
    for bad in ["http://evil.example/cb", "javascript:alert(1)", "https://a.example/cb#f", "https://*.a.example/cb"] {
        let res = a.register_raw(&json!({"redirect_uris": [bad], "token_endpoint_auth_method": "none"})).await;
        assert_eq!(res.status(), StatusCode::BAD_REQUEST, "{bad}");
        assert_eq!(error_of(res).await, "invalid_redirect_uri", "{bad}");
    }
    let body = json!({"client_id": "admin", "client_secret": "mine", "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"});
    let res = a.register_raw(&body).await;
    assert_eq!(res.status(), StatusCode::CREATED);
    assert_eq!(header(&res, "cache-control"), "no-store");
    let registered: Value = res.json().await.expect("JSON");
    let id = registered["client_id"].as_str().expect("client_id");
    assert!(id != "admin" && !id.starts_with("https://"), "{id}");
    assert_eq!(registered["redirect_uris"], json!([REDIRECT]));
    assert!(registered.get("client_secret").is_none(), "{registered}");
}

/// BBX-29 and BBX-30: the resource differing only in the case of its host is this server's
/// (the token's `aud` is the canonical form); no resource at all means the one endpoint.
#[tokio::test]
async fn bbx29_bbx30_resource_variants_and_omission_give_the_canonical_audience() {
    let a = As::start().await;
    let client_id = a.register().await;
    let upper = a.resource().replace("http://127.0.0.1", "HTTP://127.0.0.1");
    for params in [with(a.request(&client_id, &pkce()), "resource", &upper), without(a.request(&client_id, &pkce()), "resource")] {
        let pkce = pkce();
        let params = with(params, "code_challenge", &pkce.challenge);
        let began = a.begin(&params).await;
        let back = a.at_idp(&began.idp_url).await;
        let res = a.get(&back, Some(&began.cookie)).await;
        let mut to_client = header(&res, "location");
        if to_client.starts_with("/oauth/consent") {
            let (tx, csrf) = a.consent_form(&to_client, &began.cookie).await;
            to_client = header(&a.answer(&tx, &csrf, "approve", Some(&began.cookie)).await, "location");
        }
        let code = param(&to_client, "code").expect("code");
        let form = [("grant_type", "authorization_code"), ("client_id", &client_id), ("code", &code), ("code_verifier", &pkce.verifier)];
        let body: Value = a.token(&form).await.json().await.expect("JSON");
        assert_eq!(claims_of(body["access_token"].as_str().expect("access token"))["aud"], json!(a.resource()));
    }
}

/// BBX-34: `state` with `+/=%` characters is echoed byte for byte; without `state` the flow
/// works and the answer has none.
#[tokio::test]
async fn bbx34_state_is_echoed_exactly_and_absent_when_absent() {
    let a = As::start().await;
    let odd = "a+b/c=d%e f&g";
    for (state, client_id) in [(Some(odd), a.register().await), (None, a.register().await)] {
        let params = a.request(&client_id, &pkce());
        let params = match state {
            Some(s) => with(params, "state", s),
            None => without(params, "state"),
        };
        let began = a.begin(&params).await;
        let consent = a.callback_to_consent(&began).await;
        let (tx, csrf) = a.consent_form(&consent, &began.cookie).await;
        let to_client = header(&a.answer(&tx, &csrf, "approve", Some(&began.cookie)).await, "location");
        assert_eq!(param(&to_client, "state").as_deref(), state, "{to_client}");
        assert!(param(&to_client, "code").is_some());
    }
}

/// BBX-35: a repeated `code_challenge` is `invalid_request`; a repeated `redirect_uri` is an
/// error page without a link back.
#[tokio::test]
async fn bbx35_repeated_parameters_are_refused() {
    let a = As::start().await;
    let client_id = a.register().await;
    let mut twice = a.request(&client_id, &pkce());
    twice.push(("code_challenge".into(), pkce().challenge));
    assert_refusal_page(a.authorize(&twice).await, &a, "invalid_request").await;
    let mut two_redirects = a.request(&client_id, &pkce());
    two_redirects.push(("redirect_uri".into(), REDIRECT.into()));
    let res = a.authorize(&two_redirects).await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    assert!(header(&res, "location").is_empty());
    assert!(!res.text().await.expect("page").contains("Return to the application"));
}

/// BBX-38: a confidential client failing HTTP Basic authentication: 401 with
/// `WWW-Authenticate: Basic`.
#[tokio::test]
async fn bbx38_a_bad_basic_secret_is_401_with_a_basic_challenge() {
    let a = As::start().await;
    let res =
        a.register_raw(&json!({"redirect_uris": ["https://app.example/cb"], "token_endpoint_auth_method": "client_secret_basic"})).await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let registered: Value = res.json().await.expect("JSON");
    let id = registered["client_id"].as_str().expect("client_id");
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{id}:wrong-secret"));
    let res = a
        .http
        .post(a.url("/oauth/token"))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("authorization", format!("Basic {basic}"))
        .body("grant_type=authorization_code&code=x&code_verifier=y")
        .send()
        .await
        .expect("token");
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    assert!(header(&res, "www-authenticate").starts_with("Basic"), "{}", header(&res, "www-authenticate"));
    assert_eq!(error_of(res).await, "invalid_client");
}

/// BBX-41: a refresh asking for more scope, another resource, or by another client is
/// refused (`invalid_scope`, `invalid_target`, `invalid_grant`), and a refused refresh does
/// not use the refresh token up: the client's next, correct refresh works.
#[tokio::test]
async fn bbx41_refresh_escalation_is_refused_and_leaves_the_refresh_token_usable() {
    let a = As::start().await;
    let tokens = a.sign_in().await;
    let other = a.register().await;
    let rt = tokens.refresh.as_str();
    let more = a
        .token(&[
            ("grant_type", "refresh_token"),
            ("client_id", &tokens.client_id),
            ("refresh_token", rt),
            ("scope", "mcp:tools mcp:admin"),
        ])
        .await;
    assert_eq!(error_of(more).await, "invalid_scope");
    let elsewhere = a.url("/other");
    let resource = a
        .token(&[("grant_type", "refresh_token"), ("client_id", &tokens.client_id), ("refresh_token", rt), ("resource", &elsewhere)])
        .await;
    assert_eq!(error_of(resource).await, "invalid_target");
    assert_eq!(error_of(a.refresh(&other, rt).await).await, "invalid_grant");

    let res = a.refresh(&tokens.client_id, rt).await;
    assert_eq!(res.status(), StatusCode::OK, "a refused refresh used the token up: {}", res.text().await.unwrap_or_default());
    assert_eq!(a.mcp_status(&tokens.access).await, StatusCode::OK);
}

/// BBX-54 (and remembered consent, CON-05): a second sign-in of the same user and client,
/// started by the user, skips consent; one started from a cross-site page asks again.
#[tokio::test]
async fn bbx54_remembered_consent_is_not_used_for_a_cross_site_request() {
    let a = As::start().await;
    let client_id = a.register().await;
    a.code_redirect(&client_id, &pkce()).await;

    let began = a.begin(&a.request(&client_id, &pkce())).await;
    let res = a.get(&a.at_idp(&began.idp_url).await, Some(&began.cookie)).await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert!(param(&header(&res, "location"), "code").is_some(), "remembered consent: {}", header(&res, "location"));

    let mut url = url::Url::parse(&a.url("/oauth/authorize")).expect("url");
    url.query_pairs_mut().extend_pairs(a.request(&client_id, &pkce()));
    let res = a.http.get(url).header("sec-fetch-site", "cross-site").send().await.expect("authorize");
    assert_eq!(res.status(), StatusCode::FOUND);
    let cookie = header(&res, "set-cookie").split(';').next().expect("cookie").to_owned();
    let began = Began { cookie, idp_url: header(&res, "location") };
    a.callback_to_consent(&began).await;
}

/// BBX-56 over HTTP: the identity provider answers with a bad ID token (another nonce):
/// the callback is refused, no code, no redirect.
#[tokio::test]
async fn bbx56_a_bad_id_token_at_the_callback_gives_no_code() {
    let a = As::start().await;
    let client_id = a.register().await;
    let began = a.begin(&a.request(&client_id, &pkce())).await;
    let back = a.at_idp(&began.idp_url).await;
    a.idp.answer_with(a.idp.key.sign(&a.idp.claims("another-nonce")));
    let res = a.get(&back, Some(&began.cookie)).await;
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    assert!(header(&res, "location").is_empty());
}

/// BBX-58 (for an http issuer on loopback, where `__Host-` and `Secure` cannot apply): the
/// binding cookie is HttpOnly, SameSite=Lax, for the whole origin, and lives as long as a
/// transaction.
#[tokio::test]
async fn bbx58_the_binding_cookie_is_http_only_and_same_site_lax() {
    let a = As::start().await;
    let client_id = a.register().await;
    let res = a.authorize(&a.request(&client_id, &pkce())).await;
    let cookie = header(&res, "set-cookie");
    for attribute in ["HttpOnly", "SameSite=Lax", "Path=/", "Max-Age=600"] {
        assert!(cookie.split("; ").any(|a| a == attribute), "{attribute} missing: {cookie}");
    }
    assert_eq!(cookie.split(';').next().expect("pair").split_once('=').expect("=").1.len(), 43);
}

/// BBX-16: a registered redirect URI with a scope this server does not know: nothing goes
/// back to the client before the user signed in; the unknown scope is dropped (AUZ-06), so the
/// user is then asked to consent to what the rules grant, not sent to the client with a code.
#[tokio::test]
async fn bbx16_a_bad_scope_sends_the_user_to_sign_in_before_any_redirect_to_the_client() {
    let a = As::start().await;
    let client_id = a.register().await;
    let began = a.begin(&with(a.request(&client_id, &pkce()), "scope", "zzz")).await;
    let res = a.get(&a.at_idp(&began.idp_url).await, Some(&began.cookie)).await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let next = header(&res, "location");
    assert!(next.starts_with("/oauth/consent?tx="), "the consent page comes before anything reaches the client: {next}");
}

/// BBX-26: registrations per address per hour are limited (20 by default), and a huge body
/// is refused.
#[tokio::test]
async fn bbx26_registration_flood_and_size_are_limited() {
    let a = As::start().await;
    let big = json!({"redirect_uris": [REDIRECT], "client_name": "x".repeat(1024 * 1024)});
    let res = a.register_raw(&big).await;
    assert!(matches!(res.status(), StatusCode::BAD_REQUEST | StatusCode::PAYLOAD_TOO_LARGE), "{}", res.status());
    let many: Vec<String> = (0..500).map(|i| format!("http://127.0.0.1/cb{i}")).collect();
    assert_eq!(a.register_raw(&json!({"redirect_uris": many})).await.status(), StatusCode::BAD_REQUEST);
    let mut statuses = Vec::new();
    for _ in 0..21 {
        statuses.push(a.register_raw(&json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"})).await.status());
    }
    assert!(statuses.contains(&StatusCode::TOO_MANY_REQUESTS), "{statuses:?}");
}

/// BBX-31: a token of toolgate's own, well typed and signed, but for another resource: 401.
#[tokio::test]
async fn bbx31_a_token_for_another_resource_is_refused() {
    let a = As::start().await;
    let tokens = a.sign_in().await;
    let mut claims = claims_of(&tokens.access);
    claims["aud"] = json!(a.url("/mcp/other"));
    let elsewhere = a.sign_as_toolgate(Some("at+jwt"), &claims).await;
    let res = a.tools_list(&elsewhere).await;
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    assert!(header(&res, "www-authenticate").contains("invalid_token"), "{}", header(&res, "www-authenticate"));
}

/// BBX-52: consent given to one client is not consent for another: a new client gets the
/// consent page even though the user approved a different one.
#[tokio::test]
async fn bbx52_consent_is_per_client() {
    let a = As::start().await;
    a.code_redirect(&a.register().await, &pkce()).await;
    let began = a.begin(&a.request(&a.register().await, &pkce())).await;
    a.callback_to_consent(&began).await;
}

/// A redirect URI on this server's own origin is refused on a page: its pages would then
/// navigate same-origin and pass for a request the user started (remembered consent).
#[tokio::test]
async fn a_redirect_uri_on_this_servers_origin_is_refused_on_a_page() {
    let a = As::start().await;
    let own = format!("{}/oauth/authorize", a.origin);
    let res = a
        .http
        .post(a.url("/oauth/register"))
        .json(&serde_json::json!({"client_name": "loop", "redirect_uris": [own], "token_endpoint_auth_method": "none"}))
        .send()
        .await
        .expect("register");
    let body: serde_json::Value = res.json().await.expect("a registration (a loopback redirect URI)");
    let client_id = body["client_id"].as_str().expect("client_id");
    let mut request = a.request(client_id, &pkce());
    request.retain(|(k, _)| k != "redirect_uri");
    request.push(("redirect_uri".into(), own));
    let res = a.authorize(&request).await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    assert!(header(&res, "location").is_empty());
}

/// A `state` longer than 1 KiB is refused before anything is stored.
#[tokio::test]
async fn an_oversized_state_is_refused_on_a_page() {
    let a = As::start().await;
    let client_id = a.register().await;
    let res = a.authorize(&with(a.request(&client_id, &pkce()), "state", &"s".repeat(2000))).await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    assert!(header(&res, "location").is_empty());
    assert!(header(&res, "set-cookie").is_empty(), "no transaction was started");
}
