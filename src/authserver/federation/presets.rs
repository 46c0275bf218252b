//! What each provider preset changes: the claims its groups or roles are in, the scopes it
//! accepts at sign-in, and which `iss` values its ID tokens may carry (spec §4.5). Everything
//! else is the same code path for every provider.

use crate::config::authserver::{IdentityProviderSettings, Preset};

/// The scopes asked for when the settings name none (FED-23: no API scopes at sign-in).
const DEFAULT_SCOPES: [&str; 3] = ["openid", "email", "profile"];

/// The path segments of Entra ID's multi-tenant issuers, whose metadata names a template.
const ENTRA_MULTI_TENANT: [&str; 3] = ["/common/", "/organizations/", "/consumers/"];

/// The claims (dotted paths) that hold a user's groups or roles, unless `groups_claim` says.
pub fn groups_claims(settings: &IdentityProviderSettings) -> Vec<String> {
    if let Some(claim) = &settings.groups_claim {
        return vec![claim.clone()];
    }
    let defaults: &[&str] = match settings.preset {
        // Object ids of security groups, or app roles when the app defines them.
        Preset::EntraId => &["groups", "roles"],
        // Realm roles come without a mapper; a `groups` mapper is optional.
        Preset::Keycloak => &["groups", "realm_access.roles"],
        Preset::Okta | Preset::Generic => &["groups"],
        // Google has no groups in ID tokens; Auth0 needs a namespaced claim named by the operator.
        Preset::Google | Preset::Auth0 => &[],
    };
    defaults.iter().map(|c| (*c).to_owned()).collect()
}

/// The scopes asked for at sign-in, `openid` first and never twice.
pub fn sign_in_scopes(settings: &IdentityProviderSettings) -> Vec<String> {
    let configured: Vec<&str> =
        if settings.scopes.is_empty() { DEFAULT_SCOPES.to_vec() } else { settings.scopes.iter().map(String::as_str).collect() };
    let mut scopes = vec!["openid".to_owned()];
    for scope in configured {
        // Google answers `invalid_scope` to `offline_access` (it wants `access_type=offline`).
        let refused = settings.preset == Preset::Google && scope == "offline_access";
        if !refused && !scopes.iter().any(|s| s == scope) {
            scopes.push(scope.to_owned());
        }
    }
    scopes
}

/// Whether the configured issuer is Entra ID's multi-tenant form (`/common`, `/organizations`).
pub fn is_entra_multi_tenant(settings: &IdentityProviderSettings) -> bool {
    let issuer = format!("{}/", settings.issuer);
    settings.preset == Preset::EntraId && ENTRA_MULTI_TENANT.iter().any(|t| issuer.contains(t))
}

/// The issuer the provider's metadata must name: the configured one, byte for byte (OIDC
/// Discovery §4.3), or for Entra multi-tenant the `{tenantid}` template it publishes instead.
pub fn expected_metadata_issuer(settings: &IdentityProviderSettings) -> String {
    if !is_entra_multi_tenant(settings) {
        return settings.issuer.clone();
    }
    let mut issuer = format!("{}/", settings.issuer);
    for segment in ENTRA_MULTI_TENANT {
        issuer = issuer.replace(segment, "/{tenantid}/");
    }
    issuer.trim_end_matches('/').to_owned()
}

/// How an ID token's `iss` is checked, from the metadata's issuer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IssuerPolicy {
    /// Exactly one of these strings; the first is the one toolgate records.
    Exact(Vec<String>),
    /// Entra ID multi-tenant: the template with the token's `tid`, which must be allowed.
    TenantTemplate { template: String, tenants: Vec<String> },
}

impl IssuerPolicy {
    pub fn new(settings: &IdentityProviderSettings, metadata_issuer: &str) -> Self {
        if is_entra_multi_tenant(settings) {
            return Self::TenantTemplate { template: metadata_issuer.to_owned(), tenants: settings.tenants.clone() };
        }
        let mut accepted = vec![metadata_issuer.to_owned()];
        // Google's older ID tokens carry the issuer without its scheme (spec §4.5).
        if settings.preset == Preset::Google
            && let Some(bare) = metadata_issuer.strip_prefix("https://")
        {
            accepted.push(bare.to_owned());
        }
        Self::Exact(accepted)
    }

    /// The issuer to record for a token's `iss` (and `tid`), or `None` when it is refused.
    /// Google's two spellings are recorded as one, so the user's key does not depend on it.
    pub fn accept(&self, iss: &str, tid: Option<&str>) -> Option<String> {
        match self {
            Self::Exact(accepted) => accepted.iter().any(|a| a == iss).then(|| accepted[0].clone()),
            Self::TenantTemplate { template, tenants } => {
                let tid = tid.filter(|t| tenants.iter().any(|allowed| allowed == t))?;
                (template.replace("{tenantid}", tid) == iss).then(|| iss.to_owned())
            }
        }
    }

    /// Whether the callback's `iss` parameter (RFC 9207) names this provider: for the
    /// template, any allowed tenant's issuer.
    pub fn accepts_parameter(&self, iss: &str) -> bool {
        match self {
            Self::Exact(accepted) => accepted.iter().any(|a| a == iss),
            Self::TenantTemplate { template, tenants } => tenants.iter().any(|t| template.replace("{tenantid}", t) == iss),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(preset: Preset, issuer: &str) -> IdentityProviderSettings {
        IdentityProviderSettings { preset, issuer: issuer.into(), client_id: "tg".into(), ..Default::default() }
    }

    const ENTRA_TEMPLATE: &str = "https://login.microsoftonline.com/{tenantid}/v2.0";

    fn entra() -> IdentityProviderSettings {
        let mut s = settings(Preset::EntraId, "https://login.microsoftonline.com/organizations/v2.0");
        s.tenants = vec!["tenant-a".into()];
        s
    }

    #[test]
    fn keycloak_reads_groups_and_realm_roles_by_default() {
        assert_eq!(groups_claims(&settings(Preset::Keycloak, "https://kc")), ["groups", "realm_access.roles"]);
    }

    #[test]
    fn entra_reads_groups_and_roles_by_default() {
        assert_eq!(groups_claims(&settings(Preset::EntraId, "https://login.microsoftonline.com/t/v2.0")), ["groups", "roles"]);
    }

    #[test]
    fn groups_claim_overrides_the_preset() {
        let mut s = settings(Preset::Auth0, "https://x.auth0.com");
        s.groups_claim = Some("https://example.com/roles".into());
        assert_eq!(groups_claims(&s), ["https://example.com/roles"]);
    }

    #[test]
    fn the_default_scopes_are_openid_email_profile() {
        assert_eq!(sign_in_scopes(&settings(Preset::Okta, "https://o")), ["openid", "email", "profile"]);
    }

    #[test]
    fn google_never_asks_for_offline_access() {
        let mut s = settings(Preset::Google, "https://accounts.google.com");
        s.scopes = vec!["email".into(), "offline_access".into()];
        assert_eq!(sign_in_scopes(&s), ["openid", "email"]);
    }

    #[test]
    fn google_accepts_both_spellings_of_its_issuer_and_records_one() {
        let policy = IssuerPolicy::new(&settings(Preset::Google, "https://accounts.google.com"), "https://accounts.google.com");
        assert_eq!(policy.accept("accounts.google.com", None).as_deref(), Some("https://accounts.google.com"));
        assert_eq!(policy.accept("https://accounts.google.com", None).as_deref(), Some("https://accounts.google.com"));
    }

    #[test]
    fn a_generic_provider_accepts_only_the_exact_issuer() {
        let policy = IssuerPolicy::new(&settings(Preset::Generic, "https://idp.example.com"), "https://idp.example.com");
        assert_eq!(policy.accept("idp.example.com", None), None);
        assert_eq!(policy.accept("https://idp.example.com/", None), None);
    }

    #[test]
    fn entra_multi_tenant_metadata_names_the_template() {
        assert_eq!(expected_metadata_issuer(&entra()), ENTRA_TEMPLATE);
    }

    #[test]
    fn entra_single_tenant_metadata_names_the_configured_issuer() {
        let s = settings(Preset::EntraId, "https://login.microsoftonline.com/tenant-a/v2.0");
        assert_eq!(expected_metadata_issuer(&s), s.issuer);
    }

    #[test]
    fn entra_template_accepts_an_allowed_tenant_with_its_own_issuer() {
        let policy = IssuerPolicy::new(&entra(), ENTRA_TEMPLATE);
        let iss = "https://login.microsoftonline.com/tenant-a/v2.0";
        assert_eq!(policy.accept(iss, Some("tenant-a")).as_deref(), Some(iss));
    }

    #[test]
    fn entra_template_refuses_a_tenant_not_allowed() {
        let policy = IssuerPolicy::new(&entra(), ENTRA_TEMPLATE);
        assert_eq!(policy.accept("https://login.microsoftonline.com/tenant-b/v2.0", Some("tenant-b")), None);
    }

    #[test]
    fn entra_template_refuses_an_iss_of_another_tenant_than_tid() {
        let policy = IssuerPolicy::new(&entra(), ENTRA_TEMPLATE);
        assert_eq!(policy.accept("https://login.microsoftonline.com/tenant-b/v2.0", Some("tenant-a")), None);
    }

    #[test]
    fn entra_template_refuses_a_token_without_tid() {
        let policy = IssuerPolicy::new(&entra(), ENTRA_TEMPLATE);
        assert_eq!(policy.accept("https://login.microsoftonline.com/tenant-a/v2.0", None), None);
    }
}
