//! One upstream's life: connect, list and serve its tools, follow its `list_changed`, check it
//! answers (`ping`), and when the connection is lost withdraw its tools, then reconnect with
//! exponential backoff and jitter, until toolgate shuts down.

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use tokio_util::sync::CancellationToken;

use serde_json::Value;

use super::connect::{Handshake, Open, connect};
use super::link::{HeldEntry, SkippedTool};
use super::peer::Peer;
use super::{Link, Upstreams, catalog, now_ms};
use crate::approval::{Kind, Why};
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
    // Its held gauge exists before the first listing.
    record::catalog_held(&link.name, 0);
    while !stop.is_cancelled() {
        link.set_state("connecting", Some("reconnecting after the backoff"));
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
                link.set_disconnected(&reason);
                record::upstream_state(&link.name, false, 0);
                if stop.is_cancelled() {
                    break;
                }
                tracing::warn!(upstream = %link.name, %reason, "upstream disconnected; its tools are withdrawn until it is back");
            }
            Err(e) => {
                tracing::warn!(upstream = %link.name, error = %e, "cannot connect to the upstream");
                let error = e.to_string();
                link.set_disconnected(&error);
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
            // An operator approved or rejected one of its entries: the listing is reviewed again.
            () = link.resync.notified() => changed = true,
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

/// Lists the upstream's tools, resources and prompts, passes them through the approved
/// catalog and publishes what it lets serve; a listing that fails is recorded as the last
/// error and closes the connection (the supervisor reconnects).
async fn sync(link: &Arc<Link>, upstreams: &Upstreams, peer: &Peer, capabilities: &serde_json::Value) {
    let timeout = Duration::from_millis(link.settings.connect_timeout_ms.max(5_000));
    match catalog::list_tools(peer, timeout).await {
        Ok(listed) => {
            catalog::warn_unmatched_filters(link, &listed);
            // What the allow and deny lists leave out is neither reviewed nor served.
            let listed: Vec<Value> =
                listed.into_iter().filter(|t| t.get("name").and_then(Value::as_str).is_none_or(|n| catalog::is_offered(link, n))).collect();
            let offered = super::offerings::list(link, peer, capabilities).await;
            let (gated, held) = approved(link, upstreams, &listed, offered.resources, offered.prompts).await;
            let (tools, invalid) = catalog::build(link, &gated.tools);
            let offerings = super::offerings::build(link, gated.resources, gated.prompts);
            // An upstream chooses how many bad entries it lists, and lists them again at every
            // list_changed: the log gets the first few and a count, the status all of them.
            let invalid_lines: Vec<String> = invalid.iter().map(SkippedTool::line).collect();
            let problems: Vec<&String> = invalid_lines.iter().chain(&offered.problems).collect();
            for why in problems.iter().take(LOGGED_PROBLEMS) {
                tracing::warn!(upstream = %link.name, skipped = %why, "upstream tool not served");
            }
            if problems.len() > LOGGED_PROBLEMS {
                let more = problems.len() - LOGGED_PROBLEMS;
                tracing::warn!(upstream = %link.name, more, "{more} more upstream entries not served; GET /admin/upstreams lists them all");
            }
            link.update(|s| {
                s.invalid_tools = invalid.len();
                s.listing_skipped = invalid_lines.into_iter().chain(offered.problems).chain(held.unserved_why).collect();
                s.listing_skipped_tools = invalid.into_iter().chain(held.not_approved).collect();
                s.held = held.pending;
                s.approval_error = held.degraded;
            });
            // Publishing counts what is served and lists the skipped in the status.
            upstreams.restore(link, tools, held.stand_ins, offerings.resources, offerings.prompts);
            // The last error stays: what went wrong before this connection is still worth
            // reading (it has its time; the state says it is over).
            let count = link.update(|s| {
                s.last_sync_ms = Some(now_ms());
                s.move_to("connected", Some(&format!("tools listed: {} served", s.tools)));
                s.tools
            });
            record::upstream_state(&link.name, true, count);
            tracing::info!(upstream = %link.name, tools = count, "upstream tools listed");
        }
        Err(e) => {
            tracing::warn!(upstream = %link.name, error = %e, "cannot list the upstream's tools");
            link.set_error(&format!("tools/list: {e}"));
            peer.close(format!("tools/list failed: {e}"));
        }
    }
}

/// A listing as the approved catalog lets it serve.
struct Gated {
    tools: Vec<Value>,
    resources: Option<(Vec<Value>, Vec<Value>)>,
    prompts: Option<Vec<Value>>,
}

/// What the approved catalog held back of a listing, for the status and for callers.
struct HeldBack {
    /// Waiting for an operator (the status's `held`).
    pending: Vec<HeldEntry>,
    /// Entries not served at all, with why (the status's `skipped`).
    unserved_why: Vec<String>,
    /// The tools among them, for the status's `skipped_tools`.
    not_approved: Vec<SkippedTool>,
    /// Stand-ins for unserved tools, so a call is told why.
    stand_ins: Vec<(crate::tool::Tool, String)>,
    degraded: Option<String>,
}

/// Passes the listing through the approved catalog (`approval`): each entry is served as
/// listed, as its approved version, or not at all.
async fn approved(
    link: &Arc<Link>,
    upstreams: &Upstreams,
    tools: &[Value],
    resources: Option<(Vec<Value>, Vec<Value>)>,
    prompts: Option<Vec<Value>>,
) -> (Gated, HeldBack) {
    let (listed_resources, listed_templates) = resources.as_ref().map_or((&[][..], &[][..]), |(r, t)| (&r[..], &t[..]));
    let entries: Vec<(Kind, &Value)> = tools
        .iter()
        .map(|t| (Kind::Tool, t))
        .chain(listed_resources.iter().map(|r| (Kind::Resource, r)))
        .chain(listed_templates.iter().map(|t| (Kind::Template, t)))
        .chain(prompts.iter().flatten().map(|p| (Kind::Prompt, p)))
        .collect();
    let review = upstreams.approvals.review(&link.name, link.settings.approval, &entries).await;
    // `served` is in the order of `entries`: tools, resources, templates, prompts.
    let mut served = review.served.into_iter();
    let mut take = |n: usize| served.by_ref().take(n).flatten().collect::<Vec<Value>>();
    let gated = Gated {
        tools: take(tools.len()),
        resources: resources.as_ref().map(|(r, t)| (take(r.len()), take(t.len()))),
        prompts: prompts.as_ref().map(|p| take(p.len())),
    };
    let mut back = HeldBack {
        pending: Vec::new(),
        unserved_why: Vec::new(),
        not_approved: Vec::new(),
        stand_ins: Vec::new(),
        degraded: review.degraded,
    };
    for held in &review.held {
        let why = held.explain(&link.name);
        if held.is_pending() {
            let change = if held.why == Why::New { "new" } else { "changed" };
            back.pending.push(HeldEntry { kind: held.kind.as_str(), name: held.name.clone(), change });
        }
        if held.is_unserved() {
            if held.kind == Kind::Tool
                && let Some(stand_in) = catalog::stand_in(link, &held.name, why.clone())
            {
                back.stand_ins.push(stand_in);
            }
            // A pending one is listed as held already.
            if !held.is_pending() {
                if held.kind == Kind::Tool {
                    let tool = crate::untrusted::escaped(&held.name, 200).to_string();
                    back.not_approved.push(SkippedTool { tool, reason: "not_approved", detail: why.clone() });
                }
                back.unserved_why.push(why);
            }
        }
    }
    record::catalog_held(&link.name, back.pending.len());
    (gated, back)
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
