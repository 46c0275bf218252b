//! The user's own connections page (`/oauth/connections`): the browser signs in at the identity
//! provider (the connect flow's steps 2–3, without a link), then sees its connections,
//! disconnects one (revoked at the upstream's server too) or connects an upstream (the connect
//! flow's confirmation, then the upstream's authorization). Forms carry a CSRF token derived
//! from the browser's binding cookie.

use super::connect::{ConnectNext, MANAGE, db_error, display, identity_of};
use super::{Vault, db, user_keys};
use crate::authserver::flow::{PageError, constant_time_eq, csrf_token};
use crate::authserver::now_ms;
use crate::authserver::tokens::{hash, random_secret};

/// What the connections page shows.
pub struct ManageView {
    pub id: String,
    pub csrf: String,
    pub user: String,
    pub connections: Vec<super::grants::ConnectionView>,
    /// Upstreams with `grant = "user"` the user has not connected.
    pub unconnected: Vec<String>,
}

impl Vault {
    /// `GET /oauth/connections` without a signed-in page: a transaction of its own, signed in.
    pub async fn manage_begin(&self) -> Result<ConnectNext, PageError> {
        let id = hash(&random_secret());
        let row = db::ConnectRow {
            id: id.clone(),
            principal: None,
            upstream: MANAGE.into(),
            stage: "new".into(),
            browser_hash: None,
            state_hash: None,
            pending: None,
            identity: None,
            expires_ms: now_ms() + self.ttl_ms(),
        };
        db::connect_insert(&self.store, &row, now_ms()).await.map_err(db_error)?;
        self.sign_in(&id, "new").await
    }

    /// The connections page's content.
    pub async fn manage_view(&self, id: &str, cookie: Option<&str>, per_user: &[String]) -> Result<ManageView, PageError> {
        let row = self.bound(id, cookie, "manage").await?;
        let identity = identity_of(&row)?;
        let keys = user_keys(self.auth_server.issuer(), &identity);
        let connections = self.connections_of(&keys).await.map_err(|_| PageError::new(503, "the vault cannot be read right now"))?;
        let unconnected = per_user.iter().filter(|u| !connections.iter().any(|c| &&c.upstream == u)).cloned().collect();
        Ok(ManageView {
            id: id.to_owned(),
            csrf: csrf_token(cookie.unwrap_or_default(), id),
            user: display(&identity),
            connections,
            unconnected,
        })
    }

    /// A connections-page action: `disconnect` a connection of this user, or `connect` an
    /// upstream (then the confirmation page).
    pub async fn manage_action(
        &self,
        id: &str,
        csrf: &str,
        action: &str,
        target: &str,
        cookie: Option<&str>,
    ) -> Result<ConnectNext, PageError> {
        let row = self.bound(id, cookie, "manage").await?;
        if !constant_time_eq(csrf, &csrf_token(cookie.unwrap_or_default(), id)) {
            return Err(PageError::new(403, "this form is not from this browser's connections page; start again"));
        }
        let identity = identity_of(&row)?;
        let keys = user_keys(self.auth_server.issuer(), &identity);
        match action {
            "disconnect" => {
                self.revoke(target, Some(&keys), "the user")
                    .await
                    .map_err(|_| PageError::new(503, "the vault cannot be written right now"))?;
                Ok(ConnectNext::Manage { id: id.to_owned() })
            }
            "connect" if self.authorization(target).is_some() => {
                let new_id = hash(&random_secret());
                let identity_json = row.identity.clone();
                let new = db::ConnectRow {
                    id: new_id.clone(),
                    principal: Some(keys[0].clone()),
                    upstream: target.to_owned(),
                    stage: "confirm".into(),
                    browser_hash: row.browser_hash.clone(),
                    state_hash: None,
                    pending: None,
                    identity: identity_json,
                    expires_ms: now_ms() + self.ttl_ms(),
                };
                db::connect_insert(&self.store, &new, now_ms()).await.map_err(db_error)?;
                Ok(ConnectNext::Confirm { id: new_id })
            }
            _ => Err(PageError::new(400, "unknown action")),
        }
    }
}
