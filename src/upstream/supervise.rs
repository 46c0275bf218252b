//! One upstream's life: connect, list and serve its tools, follow its `list_changed`, check it
//! answers (`ping`), and when the connection is lost withdraw its tools, then reconnect with
//! exponential backoff and jitter, until toolgate shuts down.

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use tokio_util::sync::CancellationToken;

use super::connect::{Handshake, Open, connect};
use super::peer::Peer;
use super::{Link, Upstreams, catalog, now_ms};
use crate::metrics::record;

/// How often a connected upstream must answer a ping.
const PING_EVERY: Duration = Duration::from_secs(15);
const PING_TIMEOUT: Duration = Duration::from_secs(10);
/// Problems of one listing written to the log (the status keeps them all).
const LOGGED_PROBLEMS: usize = 10;
/// Backoff between connection attempts: doubling from the first to the last, with jitter.
const BACKOFF_FIRST: Duration = Duration::from_millis(500);
const BACKOFF_LAST: Duration = Duration::from_secs(30);
/// A connection that lasted this long starts the backoff over; one that failed sooner keeps it
/// growing (an upstream that crashes right after listing its tools is not restarted in a loop).
const STABLE_AFTER: Duration = Duration::from_secs(30);
/// `list_changed` notifications within this long of the first are answered by one resync.
const RESYNC_QUIET: Duration = Duration::from_millis(100);

pub(super) async fn run(link: Arc<Link>, upstreams: Arc<Upstreams>, stop: CancellationToken) {
    let mut failures: u32 = 0;
    let mut connected_before = false;
    while !stop.is_cancelled() {
        link.update(|s| s.state = "connecting");
        let attempt = tokio::select! {
            attempt = connect(&link.name, &link.settings, &link.tool_settings, Open { bearer: link.own_bearer(), listen: true, client: None, stderr: Some(link.stderr.clone()) }) => attempt,
            () = stop.cancelled() => break,
        };
        record::upstream_connect(&link.name, attempt.is_ok());
        match attempt {
            Ok((peer, handshake)) => {
                if connected_before {
                    link.update(|s| s.reconnects += 1);
                }
                connected_before = true;
                let up_since = std::time::Instant::now();
                serve(&link, &upstreams, peer.clone(), handshake, &stop).await;
                if up_since.elapsed() >= STABLE_AFTER {
                    failures = 0;
                }
                link.peer.store(None);
                let reason = peer.close_reason();
                upstreams.withdraw(&link, &reason);
                link.update(|s| {
                    s.state = "disconnected";
                    s.tools = 0;
                    s.last_error = Some(reason.clone());
                });
                record::upstream_state(&link.name, false, 0);
                if stop.is_cancelled() {
                    break;
                }
                tracing::warn!(upstream = %link.name, %reason, "upstream disconnected; its tools are withdrawn until it is back");
            }
            Err(e) => {
                tracing::warn!(upstream = %link.name, error = %e, "cannot connect to the upstream");
                link.update(|s| {
                    s.state = "disconnected";
                    s.last_error = Some(e.to_string());
                });
                record::upstream_state(&link.name, false, 0);
            }
        }
        failures = failures.saturating_add(1);
        tokio::select! {
            () = tokio::time::sleep(backoff(failures)) => {}
            () = stop.cancelled() => break,
        }
    }
    if let Some(peer) = link.peer.swap(None) {
        peer.close("toolgate is shutting down");
    }
}

/// Serves the upstream's tools while the connection lives.
async fn serve(link: &Arc<Link>, upstreams: &Upstreams, peer: Peer, handshake: Handshake, stop: &CancellationToken) {
    link.update(|s| {
        s.transport = peer.transport();
        s.protocol_version = Some(handshake.version.clone());
        s.server_info = handshake.server_info.clone();
    });
    link.peer.store(Some(Arc::new(peer.clone())));
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + PING_EVERY, PING_EVERY);
    let mut changed = true;
    loop {
        if changed {
            sync(link, upstreams, &peer, &handshake.capabilities).await;
            changed = false;
        }
        tokio::select! {
            () = peer.closed() => return,
            () = peer.changed() => {
                // A burst of notifications (one per tool an upstream adds) is one resync.
                tokio::time::sleep(RESYNC_QUIET).await;
                changed = true;
            }
            _ = ping.tick() => {
                if let Err(e) = peer.check(PING_TIMEOUT).await {
                    peer.close(format!("the upstream did not answer a ping: {e}"));
                }
            }
            () = stop.cancelled() => {
                peer.close("toolgate is shutting down");
                return;
            }
        }
    }
}

/// Lists the upstream's tools and publishes them; a listing that fails is recorded as the last
/// error and closes the connection (the supervisor reconnects).
async fn sync(link: &Arc<Link>, upstreams: &Upstreams, peer: &Peer, capabilities: &serde_json::Value) {
    let timeout = Duration::from_millis(link.settings.connect_timeout_ms.max(5_000));
    match catalog::list_tools(peer, timeout).await {
        Ok(listed) => {
            let (tools, invalid) = catalog::build(link, &listed);
            let offerings = super::offerings::list(link, peer, capabilities).await;
            // An upstream chooses how many bad entries it lists, and lists them again at every
            // list_changed: the log gets the first few and a count, the status all of them.
            let problems: Vec<&String> = invalid.iter().chain(&offerings.problems).collect();
            for why in problems.iter().take(LOGGED_PROBLEMS) {
                tracing::warn!(upstream = %link.name, skipped = %why, "upstream tool not served");
            }
            if problems.len() > LOGGED_PROBLEMS {
                let more = problems.len() - LOGGED_PROBLEMS;
                tracing::warn!(upstream = %link.name, more, "{more} more upstream entries not served; GET /admin/upstreams lists them all");
            }
            link.update(|s| {
                s.invalid_tools = invalid.len();
                s.listing_skipped = invalid.into_iter().chain(offerings.problems).collect();
            });
            // Publishing counts what is served and lists the skipped in the status.
            upstreams.restore(link, tools, offerings.resources, offerings.prompts);
            link.update(|s| {
                s.state = "connected";
                s.last_error = None;
                s.last_sync_ms = Some(now_ms());
            });
            let count = link.status().tools;
            record::upstream_state(&link.name, true, count);
            tracing::info!(upstream = %link.name, tools = count, "upstream tools listed");
        }
        Err(e) => {
            tracing::warn!(upstream = %link.name, error = %e, "cannot list the upstream's tools");
            link.update(|s| s.last_error = Some(format!("tools/list: {e}")));
            peer.close(format!("tools/list failed: {e}"));
        }
    }
}

/// The wait before attempt `n + 1` after `n` failures: doubling, capped, with half of it
/// random so replicas that lost the same upstream do not reconnect in step.
fn backoff(failures: u32) -> Duration {
    let full = BACKOFF_FIRST.saturating_mul(1 << failures.saturating_sub(1).min(10)).min(BACKOFF_LAST);
    let half = full / 2;
    half + half.mul_f64(rand::rng().random::<f64>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_cap_with_at_most_half_jitter() {
        for failures in 1..20 {
            let full = BACKOFF_FIRST.saturating_mul(1 << (failures - 1).min(10)).min(BACKOFF_LAST);
            let wait = backoff(failures);
            assert!(wait >= full / 2 && wait <= full, "{failures}: {wait:?} not within [{:?}, {full:?}]", full / 2);
        }
        assert!(backoff(30) <= BACKOFF_LAST);
    }
}
