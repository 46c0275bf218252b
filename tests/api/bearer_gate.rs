//! The bearer gate, in process, against a real issuer on loopback: what a request without a
//! usable token gets (RFC 6750 challenges pointing at the RFC 9728 metadata), what a token
//! without the scopes gets, and the failed-authentication lockout per address. The rules
//! that need sessions and streams are in `auth_http` and `limits_http`.

use crate::common;

use common::idp::Issuer;
use common::in_process::{INIT, InProcess, header, json};

/// A JWT-protected server trusting `idp`, and one that locks an address out after three
/// failed authentications.
async fn secured(idp: &Issuer) -> InProcess {
    InProcess::with(|c| idp.trust(c)).await
}

async fn locking(idp: &Issuer) -> InProcess {
    InProcess::with(|c| {
        idp.trust(c);
        c.limits.enabled = true;
        c.limits.auth_failures_per_minute = 1;
        c.limits.auth_failure_burst = 3;
    })
    .await
}

#[tokio::test]
async fn no_token_gets_401_with_metadata_and_scope_but_no_error() {
    let idp = Issuer::start().await;
    let s = secured(&idp).await;
    let res = s.post(INIT, &[]).await;
    assert_eq!(res.status(), 401);
    let c = header(&res, "www-authenticate");
    assert!(c.starts_with("Bearer "), "{c}");
    assert!(c.contains(r#"resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource/mcp""#), "{c}");
    assert!(c.contains(r#"scope="mcp:tools""#), "{c}");
    assert!(!c.contains("error="), "no error code when no token was sent: {c}");
}

#[tokio::test]
async fn a_garbage_token_gets_401_invalid_token() {
    let idp = Issuer::start().await;
    let s = secured(&idp).await;
    let res = s.post(INIT, &[("authorization", "Bearer abc.def.ghi")]).await;
    assert_eq!(res.status(), 401);
    assert!(header(&res, "www-authenticate").contains(r#"error="invalid_token""#));
}

#[tokio::test]
async fn a_malformed_authorization_header_gets_400_invalid_request() {
    let idp = Issuer::start().await;
    let s = secured(&idp).await;
    for bad in ["Basic dXNlcjpwYXNz", "Bearer", "Bearer a b"] {
        let res = s.post(INIT, &[("authorization", bad)]).await;
        assert_eq!(res.status(), 400, "{bad}");
        assert!(header(&res, "www-authenticate").contains(r#"error="invalid_request""#), "{bad}");
    }
}

#[tokio::test]
async fn a_token_in_the_query_string_is_never_accepted() {
    let idp = Issuer::start().await;
    let s = secured(&idp).await;
    let token = idp.token("alice", "mcp:tools");
    let request = http::Request::post(format!("/mcp?access_token={token}"))
        .header("host", "127.0.0.1")
        .header("content-type", "application/json")
        .header("accept", common::ACCEPT_BOTH)
        .body(axum::body::Body::from(INIT))
        .expect("request");
    assert_eq!(s.send(request).await.status(), 401);
}

#[tokio::test]
async fn a_token_without_the_required_scope_gets_403_naming_needed_and_held_scopes() {
    let idp = Issuer::start().await;
    let s = secured(&idp).await;
    let res = s.post(INIT, &[("authorization", &format!("Bearer {}", idp.token("alice", "profile")))]).await;
    assert_eq!(res.status(), 403);
    let c = header(&res, "www-authenticate");
    assert!(c.contains(r#"error="insufficient_scope""#) && c.contains("mcp:tools") && c.contains("profile"), "{c}");
}

#[tokio::test]
async fn a_valid_token_passes() {
    let idp = Issuer::start().await;
    let s = secured(&idp).await;
    assert_eq!(s.post(INIT, &[("authorization", &format!("Bearer {}", idp.token("alice", "mcp:tools")))]).await.status(), 200);
}

#[tokio::test]
async fn a_preflight_needs_no_token() {
    let idp = Issuer::start().await;
    let s = secured(&idp).await;
    let request = http::Request::options("/mcp")
        .header("host", "127.0.0.1")
        .header("origin", "http://localhost:3000")
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "authorization, content-type")
        .body(axum::body::Body::empty())
        .expect("request");
    let res = s.send(request).await;
    assert!(res.status().is_success(), "{}", res.status());
}

#[tokio::test]
async fn repeated_failed_authentication_locks_the_address_out_with_a_retry_hint() {
    let idp = Issuer::start().await;
    let s = locking(&idp).await;
    for _ in 0..3 {
        assert_eq!(s.post(INIT, &[("authorization", "Bearer not.a.token")]).await.status(), 401);
    }
    let opaque = s.post(INIT, &[("authorization", "Bearer opaque-token-guess")]).await;
    assert_eq!(opaque.status(), 429, "a token that would need verification elsewhere waits out the lockout");
    assert!(!header(&opaque, "retry-after").is_empty());
    assert_eq!(json(opaque).await["error"]["data"]["limit"], "auth_failures");
}

#[tokio::test]
async fn a_valid_jwt_is_admitted_from_a_locked_out_address() {
    // A neighbour behind the same address (one NAT, one proxy) locks it out with bad tokens.
    let idp = Issuer::start().await;
    let s = locking(&idp).await;
    for _ in 0..4 {
        s.post(INIT, &[("authorization", "Bearer not.a.token")]).await;
    }
    let valid = format!("Bearer {}", idp.token("alice", "mcp:tools"));
    assert_eq!(s.post(INIT, &[("authorization", &valid)]).await.status(), 200);
}

#[tokio::test]
async fn the_lockout_is_per_address() {
    let idp = Issuer::start().await;
    let mut s = locking(&idp).await;
    for _ in 0..4 {
        s.post(INIT, &[("authorization", "Bearer not.a.token")]).await;
    }
    s.peer = "127.0.0.2:50000".parse().expect("addr");
    assert_eq!(s.post(INIT, &[("authorization", "Bearer opaque-token-guess")]).await.status(), 401, "another address is not locked out");
}
