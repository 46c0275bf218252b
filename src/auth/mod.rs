//! The OAuth 2.1 resource server: bearer tokens checked on every MCP route (`bearer`), JWT
//! verification against the issuers' keys (`jwt`, `jwks`), opaque tokens by RFC 7662
//! introspection (`introspection`), who the caller is (`principal`), what a token lacks (`scopes`),
//! Protected Resource Metadata (`metadata`) and the `[auth]` settings (`settings`).
//! toolgate never issues tokens for real deployments and never forwards a client's token.

pub mod audiences;
pub mod bearer;
pub mod dev;
pub mod introspection;
pub mod jwks;
pub mod jwt;
pub mod metadata;
pub mod principal;
pub mod scopes;
pub use crate::config::auth as settings;
/// The `[auth]` settings (they live with the other settings, a leaf).
pub use audiences::ServerAudiences;
