//! Per-user upstream credentials (issue 29) over real HTTP: a toolgate with its authorization
//! server and vault ([`crate::common::vault_gate`]) in front of an upstream MCP server that
//! takes only tokens of its own authorization server, both in the test
//! ([`crate::common::upstream_as`], [`crate::common::upstream_mcp`]). The "browser" is driven
//! by hand (no redirect followed, the binding cookie carried in a `Cookie` header) through the
//! connect link an elicitation carries, toolgate's identity provider, the confirmation page,
//! the upstream's authorization server and the vault's callback. One rule per test.

use reqwest::{Response, StatusCode};
use serde_json::{Value, json};

use crate::common::upstream_as::{self, DEFAULT_USER};
use crate::common::vault_gate::{Gate, TOOL, UPSTREAM, USER};

/// A client that can open URLs (URL-mode elicitation).
fn url_caps() -> Value {
    json!({"elicitation": {"url": {}}})
}

fn header(res: &Response, name: &str) -> String {
    res.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned()
}

/// A hidden input's value in a page.
fn hidden(page: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = page.find(&marker).unwrap_or_else(|| panic!("no {name} in the page: {page}")) + marker.len();
    page[start..].split('"').next().expect("closed attribute").to_owned()
}

fn text(answer: &Value) -> String {
    answer["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

fn now_ms() -> i64 {
    i64::try_from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_millis()).expect("ms")
}

/// The connect link of a `-32042` answer.
fn link_of(answer: &Value) -> String {
    assert_eq!(answer["error"]["code"], -32042, "{answer}");
    answer["error"]["data"]["elicitations"][0]["url"].as_str().expect("a URL").to_owned()
}

impl Gate {
    /// A browser GET (`url` absolute, or a path on toolgate) with `cookie` if any.
    async fn browse(&self, url: &str, cookie: Option<&str>) -> Response {
        let url = if url.starts_with('/') { self.url(url) } else { url.to_owned() };
        let mut req = self.http.get(url);
        if let Some(cookie) = cookie {
            req = req.header("cookie", cookie);
        }
        req.send().await.expect("GET")
    }

    /// A browser form POST to a path on toolgate.
    async fn submit(&self, path: &str, form: &[(&str, &str)], cookie: &str) -> Response {
        let body = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(form).finish();
        let req = self.http.post(self.url(path)).header("content-type", "application/x-www-form-urlencoded").header("cookie", cookie);
        req.body(body).send().await.expect("POST")
    }

    /// A connect link for MCP caller `subject` (a 2025-11-25 session that can open URLs).
    async fn link_for(&self, subject: &str) -> String {
        let token = self.token(subject, "mcp:tools");
        let session = self.session(&token, url_caps()).await;
        link_of(&self.call(&token, &session, 1).await)
    }

    /// Follows `url` (a connect link or the connections page) in a new browser and signs in at
    /// the identity provider: the browser's cookie and toolgate's answer to the provider's
    /// callback.
    async fn sign_in(&self, url: &str) -> (String, Response) {
        let res = self.browse(url, None).await;
        assert_eq!(res.status(), StatusCode::SEE_OTHER, "follow: {}", res.text().await.unwrap_or_default());
        let cookie = header(&res, "set-cookie").split(';').next().expect("name=value").to_owned();
        assert!(cookie.starts_with("toolgate-signin="), "{cookie}");
        let to_idp = header(&res, "location");
        assert!(to_idp.starts_with(&format!("{}/authorize?", self.idp.origin)), "{to_idp}");
        let res = self.browse(&to_idp, None).await;
        let back = header(&res, "location");
        assert!(back.starts_with(&self.url("/oauth/callback?")), "{back}");
        let res = self.browse(&back, Some(&cookie)).await;
        (cookie, res)
    }

    /// The confirmation page answered `decision`: toolgate's answer.
    async fn decide(&self, confirm: &str, cookie: &str, decision: &str) -> Response {
        let res = self.browse(confirm, Some(cookie)).await;
        assert_eq!(res.status(), StatusCode::OK);
        let page = res.text().await.expect("page");
        assert!(page.contains(&format!("Connect your account at {UPSTREAM}")) && page.contains("id=\"approve\""), "{page}");
        let (id, csrf) = (hidden(&page, "id"), hidden(&page, "csrf"));
        self.submit("/oauth/vault/confirm", &[("id", &id), ("csrf", &csrf), ("decision", decision)], cookie).await
    }

    /// From the confirmation page to the upstream's answer: the browser's cookie and the
    /// vault callback URL the upstream's authorization server sent it to.
    async fn to_callback(&self, link: &str) -> (String, String) {
        let (cookie, res) = self.sign_in(link).await;
        assert_eq!(res.status(), StatusCode::SEE_OTHER, "callback: {}", res.text().await.unwrap_or_default());
        let confirm = header(&res, "location");
        assert!(confirm.starts_with("/oauth/vault/confirm?id="), "{confirm}");
        self.approve(&confirm, &cookie).await
    }

    /// Approves on the confirmation page and signs in at the upstream: the browser's new
    /// cookie (set anew right before it leaves for the upstream) and the callback URL.
    async fn approve(&self, confirm: &str, cookie: &str) -> (String, String) {
        let res = self.decide(confirm, cookie, "approve").await;
        assert_eq!(res.status(), StatusCode::SEE_OTHER);
        let renewed = header(&res, "set-cookie").split(';').next().expect("a new binding cookie").to_owned();
        assert!(renewed.starts_with("toolgate-signin=") && renewed != cookie, "{renewed}");
        let authorize = header(&res, "location");
        assert!(authorize.starts_with(&format!("{}/authorize?", self.upstream_as.issuer)), "{authorize}");
        let res = self.browse(&authorize, None).await;
        assert_eq!(res.status(), StatusCode::FOUND);
        let callback = header(&res, "location");
        assert!(callback.starts_with(&self.url(&format!("/oauth/vault/callback/{UPSTREAM}?"))), "{callback}");
        (renewed, callback)
    }

    /// The whole connect of `link`: the last page.
    async fn connect(&self, link: &str) -> Response {
        let (cookie, callback) = self.to_callback(link).await;
        self.browse(&callback, Some(&cookie)).await
    }

    /// Connects `USER` (a link, the browser steps); their token and session.
    async fn connected(&self) -> (String, String) {
        let token = self.token(USER, "mcp:tools");
        let session = self.session(&token, url_caps()).await;
        let link = link_of(&self.call(&token, &session, 1).await);
        let res = self.connect(&link).await;
        assert_eq!(res.status(), StatusCode::OK);
        (token, session)
    }
}

// ---------------------------------------------------------------------------------------------
// Asking to connect
// ---------------------------------------------------------------------------------------------

/// A 2025-11-25 client that can open URLs gets -32042 with one URL elicitation: a connect link
/// on toolgate's origin whose only parameter is a random id (never a token); nothing reached
/// the upstream.
#[tokio::test]
async fn a_session_that_can_open_urls_gets_32042_with_a_connect_link() {
    let g = Gate::start().await;
    let token = g.token(USER, "mcp:tools");
    let session = g.session(&token, url_caps()).await;
    let answer = g.call(&token, &session, 1).await;
    assert_eq!(answer["error"]["code"], -32042, "{answer}");
    let elicitation = &answer["error"]["data"]["elicitations"][0];
    assert_eq!(elicitation["mode"], "url");
    assert!(elicitation["elicitationId"].as_str().is_some_and(|id| !id.is_empty()), "{elicitation}");
    assert!(elicitation["message"].as_str().is_some_and(|m| m.contains(UPSTREAM)), "{elicitation}");
    let link = elicitation["url"].as_str().expect("url");
    assert!(link.starts_with(&g.url(&format!("/oauth/connect/{UPSTREAM}?c="))), "{link}");
    let pairs: Vec<(String, String)> = url::Url::parse(link).expect("URL").query_pairs().into_owned().collect();
    assert_eq!(pairs.len(), 1, "{link}");
    assert_eq!(pairs[0].1.len(), 43, "a random id: {link}");
    assert!(!link.contains(&token) && !token.contains(&pairs[0].1), "the link carries no token");
    assert!(g.mcp.authorizations("tools/call").is_empty());
}

/// A 2026-07-28 request that can open URLs gets `input_required` with the link as an
/// `elicitation/create` request (never -32042); declining ends the call with a tool error.
#[tokio::test]
async fn a_modern_request_gets_input_required_and_a_decline_ends_the_call() {
    let g = Gate::start().await;
    let token = g.token(USER, "mcp:tools");
    let answer = g.modern(&token, 1, "tools/call", json!({"name": TOOL, "arguments": {}}), url_caps()).await;
    assert!(answer.get("error").is_none(), "{answer}");
    assert_eq!(answer["result"]["resultType"], "input_required", "{answer}");
    let request = &answer["result"]["inputRequests"][format!("connect_{UPSTREAM}")];
    assert_eq!(request["method"], "elicitation/create", "{answer}");
    assert_eq!(request["params"]["mode"], "url");
    assert!(
        request["params"]["url"].as_str().is_some_and(|u| u.starts_with(&g.url(&format!("/oauth/connect/{UPSTREAM}?c=")))),
        "{request}"
    );

    let mut retry = json!({"name": TOOL, "arguments": {}, "inputResponses": {format!("connect_{UPSTREAM}"): {"action": "decline"}}});
    if let Some(state) = answer["result"].get("requestState") {
        retry["requestState"] = state.clone();
    }
    let answer = g.modern(&token, 2, "tools/call", retry, url_caps()).await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(text(&answer).contains("did not connect"), "{answer}");
    assert!(g.mcp.authorizations("tools/call").is_empty());
}

/// The modern retry that accepts, after the user connected in the browser, runs the tool.
#[tokio::test]
async fn a_modern_retry_after_connecting_runs_the_tool() {
    let g = Gate::start().await;
    let token = g.token(USER, "mcp:tools");
    let answer = g.modern(&token, 1, "tools/call", json!({"name": TOOL, "arguments": {}}), url_caps()).await;
    let link = answer["result"]["inputRequests"][format!("connect_{UPSTREAM}")]["params"]["url"].as_str().expect("a link").to_owned();
    assert_eq!(g.connect(&link).await.status(), StatusCode::OK);
    let mut retry = json!({"name": TOOL, "arguments": {}, "inputResponses": {format!("connect_{UPSTREAM}"): {"action": "accept"}}});
    if let Some(state) = answer["result"].get("requestState") {
        retry["requestState"] = state.clone();
    }
    let answer = g.modern(&token, 2, "tools/call", retry, url_caps()).await;
    assert_eq!(text(&answer), DEFAULT_USER, "{answer}");
}

/// A client that cannot open URLs gets a tool error naming the connections page.
#[tokio::test]
async fn a_client_without_url_elicitation_is_sent_to_the_connections_page() {
    let g = Gate::start().await;
    let token = g.token(USER, "mcp:tools");
    let session = g.session(&token, json!({"elicitation": {}})).await;
    let answer = g.call(&token, &session, 1).await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(text(&answer).contains(&g.url("/oauth/connections")), "{answer}");
}

// ---------------------------------------------------------------------------------------------
// Connecting
// ---------------------------------------------------------------------------------------------

/// The whole connect stores one grant for the caller; the next call runs at the upstream with
/// the user's own token from the upstream's server, never with toolgate's MCP bearer, and the
/// upstream was asked with PKCE S256, the resource and the registered redirect URI.
#[tokio::test]
async fn a_whole_connect_stores_a_grant_and_calls_go_out_with_the_users_upstream_token() {
    let g = Gate::start().await;
    let token = g.token(USER, "mcp:tools");
    let session = g.session(&token, url_caps()).await;
    let link = link_of(&g.call(&token, &session, 1).await);
    let res = g.connect(&link).await;
    assert_eq!(res.status(), StatusCode::OK);
    let page = res.text().await.expect("page");
    assert!(page.contains("connected") && page.contains("return to your application"), "{page}");
    let issued = g.upstream_as.user_access_tokens();
    assert_eq!(issued.len(), 1);
    assert!(!page.contains(&issued[0]), "the page shows no token");

    let grants = g.grants().await;
    assert_eq!(grants.len(), 1);
    assert_eq!(grants[0].1, g.principal(USER));
    assert!(!grants[0].3.contains(&issued[0]), "sealed, not stored in the clear");

    let answer = g.call(&token, &session, 2).await;
    assert_eq!(text(&answer), DEFAULT_USER, "{answer}");
    assert_eq!(g.mcp.authorizations("tools/call"), [format!("Bearer {}", issued[0])]);
    assert!(g.mcp.all_authorizations().iter().all(|a| !a.contains(&token)), "toolgate's MCP bearer reached the upstream");

    let asked = &g.upstream_as.authorize_requests()[0];
    assert_eq!(asked["code_challenge_method"], "S256");
    assert_eq!(asked["resource"], g.mcp.url);
    assert_eq!(asked["scope"], "notes");
    assert_eq!(asked["redirect_uri"], g.url(&format!("/oauth/vault/callback/{UPSTREAM}")));
}

/// Cancelling on the confirmation page connects nothing and never reaches the upstream's
/// authorization server.
#[tokio::test]
async fn cancelling_on_the_confirmation_page_connects_nothing() {
    let g = Gate::start().await;
    let link = g.link_for(USER).await;
    let (cookie, res) = g.sign_in(&link).await;
    let res = g.decide(&header(&res, "location"), &cookie, "deny").await;
    assert_eq!(res.status(), StatusCode::OK);
    assert!(res.text().await.expect("page").contains("Nothing was connected"));
    assert!(g.upstream_as.authorize_requests().is_empty());
    assert!(g.grants().await.is_empty());
}

/// A link made for one user and opened by a browser signed in as another: 403 "another user",
/// nothing stored, the link spent, and the caller is still asked to connect.
#[tokio::test]
async fn a_link_opened_by_another_user_is_refused_and_stores_nothing() {
    let g = Gate::start().await;
    // The caller is user-2; the identity provider signs the browser in as user-1.
    let token = g.token("user-2", "mcp:tools");
    let session = g.session(&token, url_caps()).await;
    let link = link_of(&g.call(&token, &session, 1).await);
    let (_, res) = g.sign_in(&link).await;
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    assert!(res.text().await.expect("page").contains("another user"));
    assert!(g.grants().await.is_empty());
    assert!(g.upstream_as.authorize_requests().is_empty());
    assert_eq!(g.browse(&link, None).await.status(), StatusCode::BAD_REQUEST, "the link is spent");
    assert_eq!(g.call(&token, &session, 2).await["error"]["code"], -32042);
}

// ---------------------------------------------------------------------------------------------
// Links and callbacks that must not work
// ---------------------------------------------------------------------------------------------

/// A vault callback whose state matches no connect in progress: 400, nothing exchanged.
#[tokio::test]
async fn a_forged_callback_state_is_refused() {
    let g = Gate::start().await;
    let link = g.link_for(USER).await;
    let (cookie, _) = g.to_callback(&link).await;
    let forged = g.url(&format!("/oauth/vault/callback/{UPSTREAM}?code=x&state=forged-state&iss={}", g.upstream_as.issuer));
    assert_eq!(g.browse(&forged, Some(&cookie)).await.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        g.browse(&g.url(&format!("/oauth/vault/callback/{UPSTREAM}?code=x")), Some(&cookie)).await.status(),
        StatusCode::BAD_REQUEST
    );
    assert!(g.upstream_as.token_requests("authorization_code").is_empty());
    assert!(g.grants().await.is_empty());
}

/// The callback with the right state, in a browser without the cookie or with another one:
/// 403, and the state still works in the browser that started (the refusals spent nothing).
#[tokio::test]
async fn a_callback_from_another_browser_is_refused() {
    let g = Gate::start().await;
    let link = g.link_for(USER).await;
    let (cookie, callback) = g.to_callback(&link).await;
    assert_eq!(g.browse(&callback, None).await.status(), StatusCode::FORBIDDEN);
    let other = format!("toolgate-signin={}", "A".repeat(43));
    assert_eq!(g.browse(&callback, Some(&other)).await.status(), StatusCode::FORBIDDEN);
    assert!(g.grants().await.is_empty());
    assert_eq!(g.browse(&callback, Some(&cookie)).await.status(), StatusCode::OK);
    assert_eq!(g.grants().await.len(), 1);
}

/// A callback replayed (same browser, same state and code): 400, one exchange, one grant.
#[tokio::test]
async fn a_replayed_callback_is_refused() {
    let g = Gate::start().await;
    let link = g.link_for(USER).await;
    let (cookie, callback) = g.to_callback(&link).await;
    assert_eq!(g.browse(&callback, Some(&cookie)).await.status(), StatusCode::OK);
    let id = g.grants().await[0].0.clone();
    assert_eq!(g.browse(&callback, Some(&cookie)).await.status(), StatusCode::BAD_REQUEST);
    assert_eq!(g.upstream_as.token_requests("authorization_code").len(), 1);
    let grants = g.grants().await;
    assert_eq!((grants.len(), grants[0].0.as_str()), (1, id.as_str()));
}

/// A link past its time (`connect_ttl_secs`): 400, and it leads nowhere.
#[tokio::test]
async fn an_expired_connect_link_is_refused() {
    let g = Gate::start().await;
    let link = g.link_for(USER).await;
    g.sql(format!("UPDATE vault_connects SET expires_ms = {}", now_ms() - 1)).await;
    let res = g.browse(&link, None).await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    assert!(header(&res, "location").is_empty());
}

/// The confirmation form answered without this browser's CSRF token, or from another
/// browser: 403, and the browser is never sent to the upstream's server.
#[tokio::test]
async fn a_confirmation_without_this_browsers_csrf_token_is_refused() {
    let g = Gate::start().await;
    let link = g.link_for(USER).await;
    let (cookie, res) = g.sign_in(&link).await;
    let confirm = header(&res, "location");
    let page = g.browse(&confirm, Some(&cookie)).await.text().await.expect("page");
    let (id, csrf) = (hidden(&page, "id"), hidden(&page, "csrf"));
    let forged =
        g.submit("/oauth/vault/confirm", &[("id", &id), ("csrf", &"x".repeat(csrf.len())), ("decision", "approve")], &cookie).await;
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    let other = format!("toolgate-signin={}", "C".repeat(43));
    let elsewhere = g.submit("/oauth/vault/confirm", &[("id", &id), ("csrf", &csrf), ("decision", "approve")], &other).await;
    assert_eq!(elsewhere.status(), StatusCode::FORBIDDEN);
    assert!(g.upstream_as.authorize_requests().is_empty());
    // The real form still works: the refusals changed nothing.
    let res = g.submit("/oauth/vault/confirm", &[("id", &id), ("csrf", &csrf), ("decision", "approve")], &cookie).await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
}

/// A callback whose `iss` is not the upstream's authorization server (RFC 9207): 400, no code
/// exchanged, nothing stored.
#[tokio::test]
async fn a_callback_naming_another_issuer_is_refused() {
    let g = Gate::start().await;
    let link = g.link_for(USER).await;
    let (cookie, callback) = g.to_callback(&link).await;
    let mut url = url::Url::parse(&callback).expect("URL");
    let pairs: Vec<(String, String)> =
        url.query_pairs().into_owned().map(|(k, v)| if k == "iss" { (k, "https://evil.example".into()) } else { (k, v) }).collect();
    url.query_pairs_mut().clear().extend_pairs(pairs);
    assert_eq!(g.browse(url.as_str(), Some(&cookie)).await.status(), StatusCode::BAD_REQUEST);
    assert!(g.upstream_as.token_requests("authorization_code").is_empty());
    assert!(g.grants().await.is_empty());
}

/// Unknown links, a link under another upstream's path, and a link followed twice: 400.
#[tokio::test]
async fn an_unknown_or_used_connect_link_is_refused() {
    let g = Gate::start().await;
    let unknown = g.url(&format!("/oauth/connect/{UPSTREAM}?c={}", "B".repeat(43)));
    assert_eq!(g.browse(&unknown, None).await.status(), StatusCode::BAD_REQUEST);
    assert_eq!(g.browse(&g.url(&format!("/oauth/connect/{UPSTREAM}")), None).await.status(), StatusCode::BAD_REQUEST);
    let link = g.link_for(USER).await;
    let elsewhere = link.replace(&format!("/oauth/connect/{UPSTREAM}?"), "/oauth/connect/other?");
    assert_eq!(g.browse(&elsewhere, None).await.status(), StatusCode::BAD_REQUEST);
    let (cookie, _) = g.sign_in(&link).await;
    assert_eq!(g.browse(&link, Some(&cookie)).await.status(), StatusCode::BAD_REQUEST);
    assert_eq!(g.browse(&link, None).await.status(), StatusCode::BAD_REQUEST);
}

// ---------------------------------------------------------------------------------------------
// Sealed records
// ---------------------------------------------------------------------------------------------

/// A grant whose sealed value was altered in the database is never used: the next call asks
/// to connect again, nothing reaches the upstream, and a `failure` connection record says so.
#[tokio::test]
async fn an_altered_sealed_record_is_refused() {
    let g = Gate::start().await;
    let (token, session) = g.connected().await;
    let (id, _, _, sealed) = g.grants().await.remove(0);
    // One character of the ciphertext's tail changed.
    let last = sealed.chars().last().expect("sealed");
    let altered = format!("{}{}", &sealed[..sealed.len() - 1], if last == 'A' { 'B' } else { 'A' });
    g.sql(format!("UPDATE vault_grants SET sealed = '{altered}' WHERE id = '{id}'")).await;
    assert_eq!(g.call(&token, &session, 2).await["error"]["code"], -32042);
    assert!(g.mcp.authorizations("tools/call").is_empty());
    let records = g.connection_audit(&format!("failure {UPSTREAM}")).await;
    assert!(
        records.iter().any(|(outcome, d)| outcome == "denied" && d.starts_with("failure notes") && d.contains("does not open")),
        "{records:?}"
    );
}

/// A sealed value copied into another user's row does not open there: that user is asked to
/// connect, never served with the first user's account.
#[tokio::test]
async fn a_sealed_record_copied_to_another_users_row_is_refused() {
    let g = Gate::start().await;
    g.connected().await;
    let other = g.principal("user-2");
    // The whole row copied (whatever columns it has), then made user-2's.
    g.sql(format!(
        "CREATE TEMP TABLE copy AS SELECT * FROM vault_grants; UPDATE copy SET id = 'copied', principal = '{other}'; \
         INSERT INTO vault_grants SELECT * FROM copy; DROP TABLE copy"
    ))
    .await;
    g.sql("UPDATE vault_grants SET subject = 'user-2' WHERE id = 'copied'".into()).await;
    assert_eq!(g.grants().await.len(), 2);
    let token = g.token("user-2", "mcp:tools");
    let session = g.session(&token, url_caps()).await;
    assert_eq!(g.call(&token, &session, 1).await["error"]["code"], -32042);
    assert!(g.mcp.authorizations("tools/call").is_empty(), "user-2 was served with user-1's account");
}

// ---------------------------------------------------------------------------------------------
// Refresh and keys
// ---------------------------------------------------------------------------------------------

/// An access token about to expire is refreshed before the call, once for two concurrent
/// calls: the upstream's server sees the refresh token spent exactly once and both calls run
/// with the new access token.
#[tokio::test]
async fn concurrent_calls_refresh_an_expiring_token_once() {
    let g = Gate::start().await;
    let (token, session) = g.connected().await;
    assert_eq!(text(&g.call(&token, &session, 2).await), DEFAULT_USER);
    let first = g.upstream_as.user_access_tokens();
    g.sql(format!("UPDATE vault_grants SET expires_ms = {}", now_ms())).await;

    let call = |id: i64| g.modern(&token, id, "tools/call", json!({"name": TOOL, "arguments": {}}), url_caps());
    let (a, b) = tokio::join!(call(3), call(4));
    assert_eq!((text(&a), text(&b)), (DEFAULT_USER.to_owned(), DEFAULT_USER.to_owned()), "{a} {b}");

    assert_eq!(g.upstream_as.token_requests("refresh_token").len(), 1, "one refresh for two calls");
    let spends = g.upstream_as.refresh_spends();
    assert_eq!(spends.values().filter(|n| **n == 1).count(), 1, "{spends:?}");
    assert!(spends.values().all(|n| *n <= 1), "a refresh token was spent twice: {spends:?}");
    let new: Vec<String> = g.upstream_as.user_access_tokens().into_iter().filter(|t| !first.contains(t)).collect();
    assert_eq!(new.len(), 1);
    let calls = g.mcp.authorizations("tools/call");
    assert_eq!(calls[1..], [format!("Bearer {}", new[0]), format!("Bearer {}", new[0])]);
}

/// Key rotation: restarted with `[k2, k1]`, a grant sealed with k1 still serves, and the
/// start-up pass re-seals it with k2.
#[tokio::test]
async fn after_a_key_rotation_old_records_serve_and_are_resealed() {
    let mut g = Gate::start().await;
    g.connected().await;
    let (id, _, key_id, sealed) = g.grants().await.remove(0);
    assert_eq!(key_id, "k1");
    g.restart(&["k2", "k1"]).await;
    let token = g.token(USER, "mcp:tools");
    let session = g.session(&token, url_caps()).await;
    assert_eq!(text(&g.call(&token, &session, 1).await), DEFAULT_USER);
    for _ in 0..100 {
        let grants = g.grants().await;
        if grants[0].2 == "k2" {
            assert_eq!(grants[0].0, id);
            assert_ne!(grants[0].3, sealed);
            // Sealed with k2 and still opening.
            assert_eq!(text(&g.call(&token, &session, 2).await), DEFAULT_USER);
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the grant was never re-sealed with k2: {:?}", g.grants().await);
}

/// With only k2 listed, a grant sealed with k1 is not used (the user is asked again) and is
/// left as it is.
#[tokio::test]
async fn a_record_sealed_with_a_key_no_longer_listed_is_refused() {
    let mut g = Gate::start().await;
    g.connected().await;
    let before = g.grants().await;
    g.restart(&["k2"]).await;
    let token = g.token(USER, "mcp:tools");
    let session = g.session(&token, url_caps()).await;
    assert_eq!(g.call(&token, &session, 1).await["error"]["code"], -32042);
    assert!(g.mcp.authorizations("tools/call").is_empty());
    assert_eq!(g.grants().await, before);
}

/// The upstream's server refusing a refresh (`invalid_grant`): the connection is forgotten, the
/// user is asked to connect again, and a `failure` connection record says why.
#[tokio::test]
async fn a_refused_refresh_forgets_the_connection() {
    let g = Gate::start().await;
    let (token, session) = g.connected().await;
    g.upstream_as.fail_refreshes(Some((StatusCode::BAD_REQUEST, "invalid_grant")));
    g.sql(format!("UPDATE vault_grants SET expires_ms = {}", now_ms())).await;
    assert_eq!(g.call(&token, &session, 2).await["error"]["code"], -32042);
    assert!(g.grants().await.is_empty());
    assert!(g.mcp.authorizations("tools/call").is_empty());
    let records = g.connection_audit("failure notes: the refresh was refused").await;
    assert!(records.iter().any(|(o, d)| o == "denied" && d.contains("invalid_grant")), "{records:?}");
}

/// While the upstream's server cannot refresh, calls go on with the access token that is still
/// valid, each without waiting for the failed refresh's lease to run out.
#[tokio::test]
async fn an_unavailable_refresh_does_not_stall_calls_on_a_still_valid_token() {
    let g = Gate::start().await;
    let (token, session) = g.connected().await;
    let issued = g.upstream_as.user_access_tokens();
    g.upstream_as.fail_refreshes(Some((StatusCode::SERVICE_UNAVAILABLE, "temporarily_unavailable")));
    // Due for renewal (an hour-long token within 30 s of expiry) but still valid for 20 s.
    g.sql(format!("UPDATE vault_grants SET expires_ms = {}, updated_ms = {}", now_ms() + 20_000, now_ms() - 3_600_000)).await;
    for id in 2..5 {
        let answer = tokio::time::timeout(std::time::Duration::from_secs(5), g.call(&token, &session, id)).await;
        let answer = answer.unwrap_or_else(|_| panic!("call {id} waited more than 5 s"));
        assert_eq!(text(&answer), DEFAULT_USER, "{answer}");
    }
    assert!(g.mcp.authorizations("tools/call").iter().all(|a| a == &format!("Bearer {}", issued[0])));
    assert!(!g.upstream_as.token_requests("refresh_token").is_empty(), "a refresh was tried");
}

/// Without `client_id`, toolgate registers itself at the upstream's server (RFC 7591) once:
/// a web client whose one redirect is the vault's callback (client credentials too, to list
/// the tools); the secret it gets is kept sealed, calls and connects use that client, and a
/// restart uses the stored registration instead of registering again.
#[tokio::test]
async fn without_a_client_id_toolgate_registers_once_and_keeps_the_secret_sealed() {
    let mut g = Gate::start_registering().await;
    let registrations = g.upstream_as.registrations();
    assert_eq!(registrations.len(), 1, "{registrations:?}");
    let asked = &registrations[0];
    assert_eq!(asked["redirect_uris"], json!([g.url(&format!("/oauth/vault/callback/{UPSTREAM}"))]));
    assert_eq!(asked["grant_types"], json!(["authorization_code", "refresh_token", "client_credentials"]));
    let (token, session) = g.connected().await;
    assert_eq!(text(&g.call(&token, &session, 2).await), DEFAULT_USER);
    let stored: Vec<(String, Option<String>)> =
        sqlx::query_as("SELECT client_id, sealed_secret FROM vault_clients").fetch_all(&g.pool()).await.expect("clients");
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].0, upstream_as::CLIENT_ID);
    let sealed = stored[0].1.clone().expect("the secret is kept");
    assert!(!sealed.contains(upstream_as::CLIENT_SECRET), "sealed, not in the clear");
    g.restart(&["k1"]).await;
    assert_eq!(g.upstream_as.registrations().len(), 1, "the stored registration is used after a restart");
    assert_eq!(text(&g.call(&token, &g.session(&token, url_caps()).await, 3).await), DEFAULT_USER);
}

// ---------------------------------------------------------------------------------------------
// Operators, listing
// ---------------------------------------------------------------------------------------------

/// `GET /admin/connections` lists the connection without any token; `DELETE` revokes it at
/// the upstream's server (the refresh token) and the next call asks to connect again.
#[tokio::test]
async fn an_operator_revoke_revokes_at_the_upstream_and_the_user_is_asked_again() {
    let g = Gate::start().await;
    let (token, session) = g.connected().await;
    let admin = format!("Bearer {}", g.token("operator", "toolgate:admin"));
    let res = g.http.get(g.admin_url("/admin/connections")).header("authorization", &admin).send().await.expect("list");
    assert_eq!(res.status(), StatusCode::OK);
    let body = res.text().await.expect("body");
    let listed: Value = serde_json::from_str(&body).expect("JSON");
    let connection = &listed["connections"][0];
    assert_eq!((connection["user"].as_str(), connection["upstream"].as_str()), (Some(USER), Some(UPSTREAM)), "{listed}");
    let (id, _, _, sealed) = g.grants().await.remove(0);
    assert_eq!(connection["id"], id);
    let refresh: Vec<String> = g.upstream_as.refresh_spends().into_keys().collect();
    for secret in g.upstream_as.user_access_tokens().iter().chain(&refresh).chain([&sealed]) {
        assert!(!body.contains(secret.as_str()), "the listing shows a token: {body}");
    }

    let url = g.admin_url(&format!("/admin/connections/{id}"));
    let res = g.http.delete(&url).header("authorization", &admin).send().await.expect("delete");
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    let revoked = g.upstream_as.revoked();
    assert!(revoked.iter().any(|(t, hint)| t == &refresh[0] && hint == "refresh_token"), "{revoked:?}");
    assert!(g.grants().await.is_empty());
    assert_eq!(g.call(&token, &session, 2).await["error"]["code"], -32042);
    let again = g.http.delete(&url).header("authorization", &admin).send().await.expect("delete");
    assert_eq!(again.status(), StatusCode::NOT_FOUND);
}

/// The user's connections page: Disconnect (with this browser's CSRF token) revokes at the
/// upstream's server and the next call asks to connect again; a forged form changes nothing.
#[tokio::test]
async fn a_user_disconnects_on_the_connections_page() {
    let g = Gate::start().await;
    let (token, session) = g.connected().await;
    let (cookie, res) = g.sign_in(&g.url("/oauth/connections")).await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let page = g.browse(&header(&res, "location"), Some(&cookie)).await.text().await.expect("page");
    assert!(page.contains(&format!("id=\"disconnect-{UPSTREAM}\"")), "{page}");
    let id = g.grants().await[0].0.clone();
    let (s, csrf) = (hidden(&page, "s"), hidden(&page, "csrf"));
    let forged = g.submit("/oauth/connections", &[("s", &s), ("csrf", "forged"), ("action", "disconnect"), ("target", &id)], &cookie).await;
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    assert_eq!(g.grants().await.len(), 1);
    assert!(g.upstream_as.revoked().is_empty());

    let res = g.submit("/oauth/connections", &[("s", &s), ("csrf", &csrf), ("action", "disconnect"), ("target", &id)], &cookie).await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert!(g.grants().await.is_empty());
    assert!(g.upstream_as.revoked().iter().any(|(_, hint)| hint == "refresh_token"));
    assert_eq!(g.call(&token, &session, 2).await["error"]["code"], -32042);
}

/// Every step is counted: `toolgate_vault_events_total` has the elicitation, the connect and
/// the use of the connection.
#[tokio::test]
async fn vault_events_are_counted() {
    let g = Gate::start().await;
    let (token, session) = g.connected().await;
    g.call(&token, &session, 2).await;
    let metrics = g.http.get(g.admin_url("/metrics")).send().await.expect("scrape").text().await.expect("text");
    for event in ["elicit", "connect", "use"] {
        let line = metrics.lines().find(|l| l.starts_with("toolgate_vault_events_total") && l.contains(&format!("event=\"{event}\"")));
        let line = line.unwrap_or_else(|| panic!("no {event} in the metrics:\n{metrics}"));
        assert!(line.contains("upstream=\"notes\"") && line.contains("outcome=\"ok\""), "{line}");
    }
}

/// `unconnected = "hide"`: a user without a connection does not see the upstream's tools;
/// once connected (on the connections page) they do.
#[tokio::test]
async fn hidden_tools_are_listed_once_the_user_connects() {
    let g = Gate::start_with(true).await;
    let token = g.token(USER, "mcp:tools");
    let listed = |answer: Value| answer["result"]["tools"].as_array().expect("tools").iter().any(|t| t["name"] == TOOL);
    assert!(!listed(g.modern(&token, 1, "tools/list", json!({}), url_caps()).await));
    let session = g.session(&token, url_caps()).await;
    assert!(!listed(g.in_session(&token, &session, 1, "tools/list", json!({})).await));

    // The connections page: sign in, then Connect on the upstream's row.
    let (cookie, res) = g.sign_in(&g.url("/oauth/connections")).await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let page = g.browse(&header(&res, "location"), Some(&cookie)).await.text().await.expect("page");
    assert!(page.contains(&format!("id=\"connect-{UPSTREAM}\"")), "{page}");
    let form = [("s", hidden(&page, "s")), ("csrf", hidden(&page, "csrf")), ("action", "connect".into()), ("target", UPSTREAM.into())];
    let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let res = g.submit("/oauth/connections", &form, &cookie).await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let (cookie, callback) = g.approve(&header(&res, "location"), &cookie).await;
    assert_eq!(g.browse(&callback, Some(&cookie)).await.status(), StatusCode::OK);

    assert!(listed(g.modern(&token, 2, "tools/list", json!({}), url_caps()).await));
    let session = g.session(&token, url_caps()).await;
    assert!(listed(g.in_session(&token, &session, 1, "tools/list", json!({})).await));
    assert_eq!(text(&g.call(&token, &session, 2).await), DEFAULT_USER);
}

// ---------------------------------------------------------------------------------------------
// Settings
// ---------------------------------------------------------------------------------------------

/// `grant = "user"` without `[vault] keys`, or without the authorization server, is refused at
/// start with the setting named.
#[tokio::test]
async fn a_user_grant_without_vault_keys_or_the_authorization_server_is_refused() {
    let g = Gate::start().await;
    let no_keys = g.settings(&[]);
    let error = no_keys.validate().expect_err("no vault keys").to_string();
    assert!(error.contains("upstreams.notes.oauth.grant") && error.contains("[vault] keys"), "{error}");
    let mut no_as = g.settings(&["k1"]);
    no_as.authorization_server.enabled = false;
    no_as.auth.mode = toolgate::auth::settings::AuthMode::Off;
    let error = no_as.validate().expect_err("no authorization server").to_string();
    assert!(error.contains("upstreams.notes.oauth.grant") && error.contains("[authorization_server] enabled"), "{error}");

    let toml = "[upstreams.notes]\nurl = \"http://127.0.0.1:9/mcp\"\n[upstreams.notes.oauth]\ngrant = \"user\"\n";
    let error = crate::common::load_toml(toml).expect_err("refused");
    assert!(error.contains("upstreams.notes.oauth.grant") && error.contains("[authorization_server]"), "{error}");
}
