//! Connections of their own for the callers of a token-exchange or per-user upstream: each
//! caller's token is exchanged for one meant for the upstream (or the user's own token comes
//! from the vault), and calls go over a connection opened with it (its own MCP session),
//! cached by the token's digest until it is due for renewal. A connection made with one
//! caller's token never carries another's call.

use std::sync::Arc;
use std::time::{Duration, Instant};

use moka::Expiry;

use super::Link;
use super::connect::{Open, connect};
use super::credentials::{Minted, token_key};
use super::error::UpstreamError;
use super::peer::Peer;
use crate::principal::BearerToken;

/// Callers with a connection kept at once; the least recently used goes first.
const MAX_USERS: u64 = 10_000;
/// An evicted connection is closed once no call holds it (checked this often), or after
/// [`CLOSE_AT_MOST`] whatever holds it.
const CLOSE_CHECK: Duration = Duration::from_secs(5);
const CLOSE_AT_MOST: Duration = Duration::from_secs(3600);

#[derive(Clone)]
pub(super) struct UserPeer {
    peer: Arc<Peer>,
    renew_at: Instant,
}

pub(super) type Users = moka::future::Cache<[u8; 32], UserPeer>;

pub(super) fn cache() -> Users {
    moka::future::Cache::builder()
        .max_capacity(MAX_USERS)
        .expire_after(Renewal)
        .eviction_listener(|_key, user: UserPeer, _cause| {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    let since = Instant::now();
                    // Calls hold a clone of the connection; this task holds one more.
                    while Arc::strong_count(&user.peer) > 1 && since.elapsed() < CLOSE_AT_MOST {
                        tokio::time::sleep(CLOSE_CHECK).await;
                    }
                    user.peer.close("the caller's exchanged token is due for renewal");
                });
            }
        })
        .build()
}

struct Renewal;

impl Expiry<[u8; 32], UserPeer> for Renewal {
    fn expire_after_create(&self, _key: &[u8; 32], user: &UserPeer, now: std::time::Instant) -> Option<Duration> {
        Some(user.renew_at.saturating_duration_since(now))
    }
}

/// The connection for the caller whose token is `token`, made (exchange, then handshake) if
/// there is none yet; concurrent first calls of one caller share one exchange.
pub(super) async fn peer_for(link: &Arc<Link>, users: &Users, token: &BearerToken) -> Result<Arc<Peer>, UpstreamError> {
    cached(link, users, token_key(token), async {
        let oauth = link.oauth.as_ref().ok_or_else(|| UpstreamError::Exchange("no oauth settings".into()))?;
        let exchanged = oauth.exchange(token).await;
        crate::metrics::record::upstream_token_exchange(&link.name, exchanged.is_ok());
        exchanged
    })
    .await
}

/// The connection that carries a per-user upstream's calls with `minted` (the user's own
/// token, from the vault), made if there is none yet.
pub(super) async fn peer_with(link: &Arc<Link>, users: &Users, minted: Minted) -> Result<Arc<Peer>, UpstreamError> {
    let key = token_key(&BearerToken::new(minted.token.as_ref()));
    cached(link, users, key, async { Ok(minted) }).await
}

/// The live connection under `key`, or one opened with the token `minted` yields (shared by
/// concurrent first calls), kept until that token's renewal time; the token is never sent
/// once it is about to expire (so neither is a late-closed session's DELETE).
async fn cached(
    link: &Arc<Link>,
    users: &Users,
    key: [u8; 32],
    minted: impl std::future::Future<Output = Result<Minted, UpstreamError>>,
) -> Result<Arc<Peer>, UpstreamError> {
    if let Some(user) = users.get(&key).await {
        if !user.peer.is_closed() {
            return Ok(user.peer);
        }
        users.invalidate(&key).await;
    }
    let made = users
        .try_get_with(key, async {
            let minted = minted.await?;
            let open = Open { bearer: minted.bearer(), listen: false, client: Some(link.callers_client()?), stderr: None };
            let (peer, _) = connect(&link.name, &link.settings, &link.tool_settings, open).await?;
            Ok::<_, UpstreamError>(UserPeer { peer: Arc::new(peer), renew_at: minted.renew_at })
        })
        .await;
    made.map(|u| u.peer).map_err(|e| (*e).clone())
}
