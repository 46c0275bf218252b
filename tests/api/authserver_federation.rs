//! toolgate as a relying party against a hostile OpenID provider on loopback
//! ([`mock_idp`](crate::common::mock_idp)): a good sign-in maps to an identity and scopes; every bad ID token of the
//! spec's BBX-56, a mix-up (`iss`) and a provider that is down are refused or unavailable;
//! a provider that rotates its key is followed.

use std::collections::HashMap;

use serde_json::{Value, json};
use toolgate::authserver::federation::{FederationError, IdentityProvider, PendingLogin};
use toolgate::config::Secret;
use toolgate::config::authserver::{IdentityProviderSettings, Preset, ScopeRule};

use crate::common::mock_idp::{self, CLIENT_ID, CLIENT_SECRET, Key, MockIdp, Options, now};

const CALLBACK: &str = "http://127.0.0.1:9/oauth/callback";

fn settings(issuer: &str) -> IdentityProviderSettings {
    IdentityProviderSettings {
        issuer: issuer.to_owned(),
        client_id: CLIENT_ID.into(),
        client_secret: Some(Secret::new(CLIENT_SECRET.into())),
        ..Default::default()
    }
}

fn rules() -> Vec<ScopeRule> {
    vec![
        ScopeRule { claim: None, values: vec![], scopes: vec!["mcp:tools".into()] },
        ScopeRule { claim: Some("groups".into()), values: vec!["engineering".into()], scopes: vec!["mcp:deploy".into()] },
        ScopeRule { claim: Some("groups".into()), values: vec!["admins".into()], scopes: vec!["mcp:admin".into()] },
    ]
}

fn provider_for(settings: IdentityProviderSettings) -> IdentityProvider {
    IdentityProvider::new(settings, rules(), CALLBACK.into(), reqwest::Client::new()).expect("provider")
}

fn provider(idp: &MockIdp) -> IdentityProvider {
    provider_for(settings(&idp.url))
}

/// Begins a sign-in, has the provider answer with the token `make` builds from the nonce,
/// and completes it with the callback's `iss`.
async fn sign_in_with(
    idp: &MockIdp,
    provider: &IdentityProvider,
    iss: Option<&str>,
    make: impl FnOnce(&PendingLogin) -> String,
) -> Result<toolgate::authserver::Identity, FederationError> {
    let (_, pending) = provider.begin("state-1").await.expect("begin");
    idp.answer_with(make(&pending));
    provider.complete(&pending, "code-1", iss).await
}

/// A sign-in whose ID token is the good one with `change` applied.
async fn sign_in(idp: &MockIdp, change: impl FnOnce(&mut Value)) -> Result<toolgate::authserver::Identity, FederationError> {
    sign_in_with(idp, &provider(idp), None, |pending| {
        let mut claims = idp.claims(&pending.nonce);
        change(&mut claims);
        idp.key.sign(&claims)
    })
    .await
}

fn assert_refused(result: Result<toolgate::authserver::Identity, FederationError>) {
    assert!(matches!(result, Err(FederationError::Refused(_))), "expected Refused, got {result:?}");
}

#[tokio::test]
async fn a_good_sign_in_yields_the_identity_with_the_mapped_scopes() {
    let idp = MockIdp::start().await;
    let identity = sign_in(&idp, |_| {}).await.expect("signed in");
    assert_eq!((identity.issuer.as_str(), identity.subject.as_str()), (idp.url.as_str(), "user-1"));
    assert_eq!((identity.email.as_deref(), identity.name.as_deref()), (Some("ada@example.com"), Some("Ada")));
    assert_eq!(identity.groups, ["engineering", "everyone"]);
    assert_eq!(identity.scopes, ["mcp:tools", "mcp:deploy"]);
}

#[tokio::test]
async fn the_authorization_url_carries_state_nonce_pkce_s256_and_no_resource() {
    let idp = MockIdp::start().await;
    let (url, pending) = provider(&idp).begin("state-1").await.expect("begin");
    let url = url::Url::parse(&url).expect("url");
    let query: HashMap<String, String> = url.query_pairs().into_owned().collect();
    assert_eq!(url.as_str().split('?').next(), Some(format!("{}/authorize", idp.origin).as_str()));
    assert_eq!(query.get("state").map(String::as_str), Some("state-1"));
    assert_eq!(query.get("nonce"), Some(&pending.nonce));
    assert_eq!(query.get("code_challenge_method").map(String::as_str), Some("S256"));
    assert_eq!(query.get("scope").map(String::as_str), Some("openid email profile"));
    assert_eq!(query.get("redirect_uri").map(String::as_str), Some(CALLBACK));
    assert!(!query.contains_key("resource"));
}

#[tokio::test]
async fn the_code_is_redeemed_with_the_pkce_verifier_and_basic_authentication() {
    let idp = MockIdp::start().await;
    sign_in(&idp, |_| {}).await.expect("signed in");
    let (headers, body) = idp.token_requests().pop().expect("a token request");
    let form: HashMap<String, String> = url::form_urlencoded::parse(body.as_bytes()).into_owned().collect();
    assert!(form.get("code_verifier").is_some_and(|v| v.len() >= 43));
    assert!(headers.get("authorization").and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("Basic ")));
}

#[tokio::test]
async fn a_code_the_provider_refuses_is_refused() {
    let idp = MockIdp::start().await;
    idp.refuse_codes();
    assert_refused(sign_in(&idp, |_| {}).await);
}

#[tokio::test]
async fn a_wrong_nonce_is_refused() {
    let idp = MockIdp::start().await;
    assert_refused(sign_in(&idp, |c| c["nonce"] = json!("another-nonce")).await);
}

#[tokio::test]
async fn a_missing_nonce_is_refused() {
    let idp = MockIdp::start().await;
    assert_refused(
        sign_in(&idp, |c| {
            c.as_object_mut().expect("object").remove("nonce");
        })
        .await,
    );
}

#[tokio::test]
async fn another_audience_is_refused() {
    let idp = MockIdp::start().await;
    assert_refused(sign_in(&idp, |c| c["aud"] = json!("another-client")).await);
}

#[tokio::test]
async fn a_second_audience_without_azp_is_refused() {
    let idp = MockIdp::start().await;
    assert_refused(sign_in(&idp, |c| c["aud"] = json!([CLIENT_ID, "another-client"])).await);
}

#[tokio::test]
async fn a_second_audience_with_azp_naming_another_client_is_refused() {
    let idp = MockIdp::start().await;
    assert_refused(
        sign_in(&idp, |c| {
            c["aud"] = json!([CLIENT_ID, "another-client"]);
            c["azp"] = json!("another-client");
        })
        .await,
    );
}

#[tokio::test]
async fn azp_naming_another_client_is_refused() {
    let idp = MockIdp::start().await;
    assert_refused(sign_in(&idp, |c| c["azp"] = json!("another-client")).await);
}

#[tokio::test]
async fn another_issuer_is_refused() {
    let idp = MockIdp::start().await;
    assert_refused(sign_in(&idp, |c| c["iss"] = json!("https://evil.example.com")).await);
}

#[tokio::test]
async fn an_expired_id_token_is_refused() {
    let idp = MockIdp::start().await;
    assert_refused(
        sign_in(&idp, |c| {
            c["exp"] = json!(now() - 60);
            c["iat"] = json!(now() - 360);
        })
        .await,
    );
}

#[tokio::test]
async fn an_unsigned_id_token_is_refused() {
    let idp = MockIdp::start().await;
    assert_refused(sign_in_with(&idp, &provider(&idp), None, |p| mock_idp::unsigned(&idp.claims(&p.nonce))).await);
}

#[tokio::test]
async fn an_id_token_signed_with_the_client_secret_is_refused() {
    let idp = MockIdp::start().await;
    assert_refused(sign_in_with(&idp, &provider(&idp), None, |p| mock_idp::signed_with_client_secret(&idp.claims(&p.nonce))).await);
}

#[tokio::test]
async fn an_id_token_signed_by_a_key_not_published_is_refused() {
    let idp = MockIdp::start().await;
    let intruder = Key::generate("intruder");
    assert_refused(sign_in_with(&idp, &provider(&idp), None, |p| intruder.sign(&idp.claims(&p.nonce))).await);
}

#[tokio::test]
async fn an_id_token_signed_by_another_key_under_the_published_kid_is_refused() {
    let idp = MockIdp::start().await;
    let forger = Key::generate(&idp.key.kid);
    assert_refused(sign_in_with(&idp, &provider(&idp), None, |p| forger.sign(&idp.claims(&p.nonce))).await);
}

#[tokio::test]
async fn a_rotated_key_is_fetched_and_accepted() {
    let idp = MockIdp::start().await;
    let provider = provider(&idp);
    let (_, pending) = provider.begin("state-1").await.expect("begin: keys cached");
    let next = Key::generate("key-2");
    idp.publish(vec![next.jwk.clone()]);
    idp.answer_with(next.sign(&idp.claims(&pending.nonce)));
    assert!(provider.complete(&pending, "code-1", None).await.is_ok());
}

#[tokio::test]
async fn an_unreachable_provider_is_unavailable() {
    let provider = provider_for(settings("http://127.0.0.1:9"));
    assert!(matches!(provider.begin("state-1").await, Err(FederationError::Unavailable(_))));
}

#[tokio::test]
async fn a_failed_discovery_is_retried_at_the_next_sign_in() {
    let idp = MockIdp::start().await;
    let provider = provider(&idp);
    idp.set_down(true);
    assert!(matches!(provider.begin("state-1").await, Err(FederationError::Unavailable(_))));
    idp.set_down(false);
    assert!(provider.begin("state-2").await.is_ok());
}

#[tokio::test]
async fn metadata_naming_another_issuer_is_unavailable() {
    let idp = MockIdp::start_with(Options { metadata_issuer: Some("https://evil.example.com".into()), ..Options::default() }).await;
    assert!(matches!(provider(&idp).begin("state-1").await, Err(FederationError::Unavailable(_))));
}

#[tokio::test]
async fn a_callback_iss_naming_another_provider_is_refused() {
    let idp = MockIdp::start().await;
    let result = sign_in_with(&idp, &provider(&idp), Some("https://evil.example.com"), |p| idp.key.sign(&idp.claims(&p.nonce))).await;
    assert_refused(result);
}

#[tokio::test]
async fn a_callback_without_the_promised_iss_is_refused() {
    let idp = MockIdp::start_with(Options { iss_parameter: true, ..Options::default() }).await;
    assert_refused(sign_in_with(&idp, &provider(&idp), None, |p| idp.key.sign(&idp.claims(&p.nonce))).await);
}

#[tokio::test]
async fn a_callback_with_the_promised_iss_signs_in() {
    let idp = MockIdp::start_with(Options { iss_parameter: true, ..Options::default() }).await;
    let iss = idp.url.clone();
    assert!(sign_in_with(&idp, &provider(&idp), Some(&iss), |p| idp.key.sign(&idp.claims(&p.nonce))).await.is_ok());
}

#[tokio::test]
async fn a_transaction_started_at_another_provider_is_refused() {
    let idp = MockIdp::start().await;
    let provider = provider(&idp);
    let (_, mut pending) = provider.begin("state-1").await.expect("begin");
    pending.issuer = "https://other-idp.example.com".into();
    idp.answer_with(idp.key.sign(&idp.claims(&pending.nonce)));
    assert_refused(provider.complete(&pending, "code-1", None).await);
}

#[tokio::test]
async fn an_unverified_email_is_refused_when_domains_are_required() {
    let idp = MockIdp::start().await;
    let mut settings = settings(&idp.url);
    settings.email_domains = vec!["example.com".into()];
    let result = sign_in_with(&idp, &provider_for(settings), None, |p| {
        let mut claims = idp.claims(&p.nonce);
        claims["email_verified"] = json!(false);
        idp.key.sign(&claims)
    })
    .await;
    assert_refused(result);
}

/// Entra ID multi-tenant: the metadata names the `{tenantid}` template, tokens the tenant.
async fn entra_idp() -> MockIdp {
    let template = Some("{origin}/{tenantid}/v2.0".to_owned());
    MockIdp::start_with(Options { path: "/organizations/v2.0".into(), metadata_issuer: template, ..Options::default() }).await
}

async fn entra_sign_in(tenant: &str) -> Result<toolgate::authserver::Identity, FederationError> {
    let idp = entra_idp().await;
    let mut settings = settings(&idp.url);
    (settings.preset, settings.tenants) = (Preset::EntraId, vec!["tenant-a".into()]);
    let issuer = format!("{}/{tenant}/v2.0", idp.origin);
    sign_in_with(&idp, &provider_for(settings), None, |p| {
        let mut claims = idp.claims(&p.nonce);
        (claims["iss"], claims["tid"]) = (json!(issuer), json!(tenant));
        idp.key.sign(&claims)
    })
    .await
}

#[tokio::test]
async fn entra_multi_tenant_signs_in_an_allowed_tenant_and_records_it() {
    let identity = entra_sign_in("tenant-a").await.expect("signed in");
    assert_eq!(identity.tenant.as_deref(), Some("tenant-a"));
    assert!(identity.issuer.ends_with("/tenant-a/v2.0"));
}

#[tokio::test]
async fn entra_multi_tenant_refuses_a_tenant_not_allowed() {
    assert_refused(entra_sign_in("tenant-b").await);
}
