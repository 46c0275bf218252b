//! The admin API's gate: with auth on, every request (unknown routes too, so the API's shape
//! stays private) needs a bearer token the [`Authenticator`] accepts that carries
//! `admin.scope`. The admin scope alone is enough: an operator's token need not carry the MCP
//! scopes (`auth.required_scopes`), and every refusal says so. Refusals keep the bearer gate's status and `WWW-Authenticate` challenge,
//! with a problem document as the body; failures count toward the per-address limit on
//! failed authentications and are audited. With auth off everything passes: configuration
//! validation keeps such an admin listener on loopback.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::problem::{Kind, Problem};
use super::state::AdminState;
use crate::audit::{AuditRecord, EventKind, Outcome};
use crate::auth::bearer::{Authenticator, Refusal};

/// The middleware; the [`Principal`](crate::principal::Principal) goes into the request's extensions as `Arc<Principal>`.
pub async fn require_admin(State(app): State<AdminState>, mut request: Request, next: Next) -> Response {
    let Some(auth) = app.auth.clone() else { return next.run(request).await };
    let caller = crate::transport::extract::caller(&app.proxies, request.extensions(), request.headers());
    let ip = caller.ip;
    // The same lockout as the MCP endpoint's gate.
    if let Some(rejection) = crate::transport::bearer::locked_out(app.limiter.as_ref(), &auth, ip, request.headers()) {
        let (name, value) = rejection.retry_after_header();
        return Problem::new(Kind::TooManyRequests, "too many failed authentication attempts from this address; retry later")
            .with_header(name, value)
            .into_response();
    }
    let scope = app.settings.admin.scope.as_str();
    // Only the admin scope: an operator's token need not also carry the MCP scopes.
    let refusal = match auth.identify(request.headers()).await {
        // A token issued for a virtual server (or an audience one lists) is that server's,
        // not the admin API's: only the default endpoint's audience is accepted here.
        Ok(principal) if !principal.default_audience => Refusal::Invalid("token audience does not include this resource".into()),
        Ok(principal) if principal.has_scope(scope) => {
            request.extensions_mut().insert(Arc::new(principal));
            return next.run(request).await;
        }
        // RFC 6750 §3.1: the scope the request needs, and only it: the token's other scopes
        // (the MCP ones, say) are neither needed here nor lost by asking for this one.
        Ok(_) | Err(Refusal::InsufficientScope(_)) => {
            Refusal::InsufficientScope(crate::auth::scopes::ScopeShortfall::missing(vec![scope.to_owned()]))
        }
        Err(refusal) => refusal,
    };
    if let (Some(limiter), Some(ip), Refusal::Invalid(_) | Refusal::Malformed(_)) = (&app.limiter, ip, &refusal) {
        limiter.record_auth_failure(ip);
    }
    if let (Some(audit), false) = (&app.audit, matches!(refusal, Refusal::Missing | Refusal::Unavailable)) {
        let kind = if matches!(refusal, Refusal::InsufficientScope(_)) { EventKind::AuthzDenied } else { EventKind::AuthFailure };
        // Off the request path: a flood of bad tokens must stay cheap to refuse.
        caller.audit_in_background(audit, AuditRecord::new(kind, Outcome::Denied).with_detail(format!("admin API: {}", refusal.kind())));
    }
    let refused = refuse(&auth, &refusal, &app.settings.auth.required_scopes, scope);
    crate::transport::bearer::discard_body(request, refused).await
}

/// The bearer gate's answer for `refusal` (status, challenge, `Retry-After`) with a problem
/// document as its body. The challenge's `scope` hint names the admin scope instead of the
/// MCP endpoint's.
fn refuse(auth: &Authenticator, refusal: &Refusal, required: &[String], admin_scope: &str) -> Response {
    let gate = crate::transport::bearer::challenge(auth, refusal);
    let status = gate.status();
    let (kind, detail) = match refusal {
        Refusal::Missing => (Kind::Unauthorized, format!("a bearer token with the scope {admin_scope} is required")),
        Refusal::Malformed(why) => (Kind::MalformedRequest, format!("Authorization: {why}")),
        Refusal::Invalid(why) => {
            let hint = auth.dev_hint(why).map(|h| format!("; {h}")).unwrap_or_default();
            (Kind::Unauthorized, format!("the access token is not valid for this server: {why}{hint}"))
        }
        Refusal::InsufficientScope(_) => {
            (Kind::InsufficientScope, format!("the admin API needs a token with the scope {admin_scope} (the MCP scopes are not needed)"))
        }
        Refusal::Unavailable => (Kind::Unavailable, "tokens cannot be verified right now; retry shortly".to_owned()),
    };
    let mut problem = Problem::new(kind, detail).with_status(status);
    if let Some(challenge) = gate.headers().get(header::WWW_AUTHENTICATE).and_then(|v| v.to_str().ok()) {
        let challenge = admin_scope_hint(challenge, required, admin_scope);
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            problem = problem.with_header(header::WWW_AUTHENTICATE, value);
        }
    }
    if let Some(retry) = gate.headers().get(header::RETRY_AFTER) {
        problem = problem.with_header(header::RETRY_AFTER, retry.clone());
    }
    problem.into_response()
}

/// `scope="<required>"` becomes `scope="<admin>"`: a client that starts the OAuth flow from
/// this challenge asks for a token the admin API accepts, and no more.
fn admin_scope_hint(challenge: &str, required: &[String], admin_scope: &str) -> String {
    let current = format!("scope=\"{}\"", required.join(" "));
    if !challenge.contains(&current) {
        return challenge.to_owned();
    }
    challenge.replacen(&current, &format!("scope=\"{admin_scope}\""), 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_challenge_scope_hint_names_the_admin_scope_alone() {
        let required = vec!["mcp:tools".to_owned()];
        let c = r#"Bearer resource_metadata="https://x/.well-known/oauth-protected-resource/mcp", scope="mcp:tools""#;
        assert_eq!(
            admin_scope_hint(c, &required, "toolgate:admin"),
            r#"Bearer resource_metadata="https://x/.well-known/oauth-protected-resource/mcp", scope="toolgate:admin""#
        );
    }

    #[test]
    fn an_insufficient_scope_challenge_keeps_its_list() {
        let required = vec!["mcp:tools".to_owned()];
        let insufficient = r#"Bearer error="insufficient_scope", scope="toolgate:admin""#;
        assert_eq!(admin_scope_hint(insufficient, &required, "toolgate:admin"), insufficient);
    }
}
