//! The authorization server's HTTP side ([`crate::authserver`] is the service): its
//! endpoints, pages, cookies and rate limits.
//!
//! ```text
//! GET  /.well-known/oauth-authorization-server   RFC 8414 metadata (also as openid-configuration)
//! GET  /oauth/jwks                               the signing keys' public halves
//! GET  /oauth/authorize                          starts a sign-in (browser)
//! GET  /oauth/callback                           the identity provider's answer (browser)
//! GET  /oauth/consent?tx=   POST /oauth/consent  the consent page and its answer (browser)
//! POST /oauth/token   POST /oauth/revoke         codes, refresh, revocation (clients)
//! POST /oauth/register                           dynamic registration, when enabled
//! ```
//!
//! With the vault (`[vault]`), the pages where users connect their own accounts at
//! per-user upstreams too ([`connect`]).
//!
//! The machine endpoints answer any origin (CORS, for browser-based clients); the browser
//! pages answer none (OA21 §3.1). Every endpoint is rate limited per client address.

mod browser;
mod connect;
mod connect_pages;
mod machine;
pub mod pages;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderMap, HeaderName, Method, header};
use axum::routing::{get, post};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use tower_http::cors::{Any, CorsLayer};

use crate::authserver::AuthServer;
use crate::transport::client_ip::TrustedProxies;

/// Largest form or registration body read.
const MAX_BODY: usize = 16 * 1024;

/// What the handlers share.
#[derive(Clone)]
pub struct SignIn {
    server: Arc<AuthServer>,
    /// Per-user upstream connections, when the vault is on.
    vault: Option<Arc<crate::vault::Vault>>,
    /// The upstreams with `oauth.grant = "user"`, for the connections page.
    per_user: Arc<dyn Fn() -> Vec<String> + Send + Sync>,
    proxies: TrustedProxies,
    per_minute: Arc<DefaultKeyedRateLimiter<IpAddr>>,
    /// The token endpoint's own budget: every signed-in client refreshes there, many behind
    /// one NAT address.
    tokens: Arc<DefaultKeyedRateLimiter<IpAddr>>,
    registrations: Arc<DefaultKeyedRateLimiter<IpAddr>>,
    /// All registrations together, whatever their addresses (an IPv6 block has many).
    registrations_total: Arc<governor::DefaultDirectRateLimiter>,
}

/// Which endpoint's budget a request spends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Budget {
    Browser,
    Token,
    Register,
}

impl SignIn {
    /// Whether `ip` may make one more request of this kind.
    fn admit(&self, ip: Option<IpAddr>, budget: Budget) -> bool {
        if budget == Budget::Register && self.registrations_total.check().is_err() {
            return false;
        }
        let Some(ip) = ip.map(network_of) else { return true };
        for limiter in [&self.per_minute, &self.tokens, &self.registrations] {
            // The keyed state grows with every address seen; drop idle ones now and then.
            if limiter.len() > 50_000 {
                limiter.retain_recent();
            }
        }
        match budget {
            Budget::Browser => self.per_minute.check_key(&ip).is_ok(),
            Budget::Token => self.tokens.check_key(&ip).is_ok(),
            Budget::Register => self.per_minute.check_key(&ip).is_ok() && self.registrations.check_key(&ip).is_ok(),
        }
    }

    fn client_ip(&self, extensions: &axum::http::Extensions, headers: &HeaderMap) -> Option<IpAddr> {
        self.proxies.client_of(extensions, headers)
    }

    /// The browser-binding cookie's name: `__Host-` (only this origin, only https) when
    /// the issuer is https (CON-03).
    fn per_user_upstreams(&self) -> Vec<String> {
        (self.per_user)()
    }

    fn cookie_name(&self) -> &'static str {
        if self.server.secure_cookies() { "__Host-toolgate-signin" } else { "toolgate-signin" }
    }

    fn cookie(&self, headers: &HeaderMap) -> Option<String> {
        let name = self.cookie_name();
        headers.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(';')).find_map(|pair| {
            let (k, v) = pair.trim().split_once('=')?;
            (k == name).then(|| v.to_owned())
        })
    }
}

/// The routes, when the authorization server is on.
pub fn router(
    server: Arc<AuthServer>,
    proxies: TrustedProxies,
    vault: Option<Arc<crate::vault::Vault>>,
    per_user: Arc<dyn Fn() -> Vec<String> + Send + Sync>,
) -> Router {
    let settings = server.settings();
    let per_minute = Quota::per_minute(std::num::NonZeroU32::new(settings.requests_per_minute).unwrap_or(std::num::NonZeroU32::MIN));
    let per_hour = Quota::per_hour(std::num::NonZeroU32::new(settings.registration.per_hour).unwrap_or(std::num::NonZeroU32::MIN));
    let registration = settings.registration.mode != crate::config::authserver::RegistrationMode::Off;
    let tokens =
        Quota::per_minute(std::num::NonZeroU32::new(settings.requests_per_minute.saturating_mul(10)).unwrap_or(std::num::NonZeroU32::MIN));
    let total =
        Quota::per_hour(std::num::NonZeroU32::new(settings.registration.per_hour.saturating_mul(50)).unwrap_or(std::num::NonZeroU32::MIN));
    let state = SignIn {
        server,
        vault,
        per_user,
        proxies,
        per_minute: Arc::new(RateLimiter::keyed(per_minute)),
        tokens: Arc::new(RateLimiter::keyed(tokens)),
        registrations: Arc::new(RateLimiter::keyed(per_hour)),
        registrations_total: Arc::new(RateLimiter::direct(total)),
    };
    let mut machine = Router::new()
        .route("/.well-known/oauth-authorization-server", get(machine::metadata))
        .route("/.well-known/openid-configuration", get(machine::metadata))
        .route("/oauth/jwks", get(machine::jwks))
        .route("/oauth/token", post(machine::token))
        .route("/oauth/revoke", post(machine::revoke));
    if registration {
        machine = machine.route("/oauth/register", post(machine::register));
    }
    let cors = CorsLayer::new()
        .allow_origin(Any)
        .allow_methods([Method::GET, Method::POST])
        .allow_headers([header::CONTENT_TYPE, header::AUTHORIZATION, HeaderName::from_static("mcp-protocol-version")])
        .max_age(Duration::from_secs(600));
    let browser = Router::new()
        .route("/oauth/authorize", get(browser::authorize))
        .route("/oauth/callback", get(browser::callback))
        .route("/oauth/consent", get(browser::consent_page).post(browser::consent_answer))
        .route("/oauth/connect/{upstream}", get(connect::follow))
        .route("/oauth/vault/confirm", get(connect::confirm_page).post(connect::confirm_answer))
        .route("/oauth/vault/callback/{upstream}", get(connect::callback))
        .route("/oauth/vault/client/{upstream}", get(connect::metadata_document))
        .route("/oauth/connections", get(connect::connections).post(connect::connections_action));
    machine.layer(cors).merge(browser).layer(DefaultBodyLimit::max(MAX_BODY)).with_state(state)
}

/// The unit a rate limit counts: an IPv4 address, or an IPv6 /64 (one subscriber's usual
/// allocation: every address in it belongs to the same party).
fn network_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
        v4 => v4,
    }
}

/// `name=value&…` pairs of a query string or form body, decoded, repeats kept.
fn pairs(raw: &[u8]) -> Vec<(String, String)> {
    url::form_urlencoded::parse(raw).take(64).map(|(k, v)| (k.into_owned(), v.into_owned())).collect()
}

#[cfg(test)]
mod tests {
    use super::network_of;

    #[test]
    fn every_address_of_an_ipv6_64_counts_as_one_client() {
        let a: std::net::IpAddr = "2001:db8:1:2:aaaa::1".parse().expect("ip");
        let b: std::net::IpAddr = "2001:db8:1:2:ffff:1:2:3".parse().expect("ip");
        assert_eq!(network_of(a), network_of(b));
        let other: std::net::IpAddr = "2001:db8:1:3::1".parse().expect("ip");
        assert_ne!(network_of(a), network_of(other));
    }

    #[test]
    fn an_ipv4_mapped_address_counts_as_its_ipv4_address() {
        let mapped: std::net::IpAddr = "::ffff:192.0.2.7".parse().expect("ip");
        assert_eq!(network_of(mapped), "192.0.2.7".parse::<std::net::IpAddr>().expect("ip"));
    }
}
