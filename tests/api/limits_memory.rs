//! Memory stays bounded under millions of distinct keys: housekeeping drops idle keys, and
//! the `max_keys` cap holds while the table is full. Also the background housekeeping task.
//! Governor time is a `FakeRelativeClock`; tokio time is paused; nothing sleeps.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use governor::clock::FakeRelativeClock;
use tokio_util::sync::CancellationToken;
use toolgate::limits::{ClientKey, LimitSettings, Limiter, LocalLimiter, Reason, spawn_housekeeping};

const KEYS: u32 = 1_000_000;

fn settings(max_keys: usize) -> LimitSettings {
    LimitSettings {
        requests_per_minute: 600, // one cell per 100 ms
        request_burst: 100,
        global_per_second: u32::MAX,
        global_burst: u32::MAX,
        max_keys,
        ..LimitSettings::default()
    }
}

fn limiter(max_keys: usize) -> (LocalLimiter<FakeRelativeClock>, FakeRelativeClock) {
    let clock = FakeRelativeClock::default();
    (LocalLimiter::with_clock(&settings(max_keys), clock.clone()).expect("valid settings"), clock)
}

fn key(n: u32) -> ClientKey {
    ClientKey::from_ip(IpAddr::V4(Ipv4Addr::from(n)))
}

#[test]
fn a_million_idle_keys_are_dropped_by_housekeeping() {
    let (lim, clock) = limiter(KEYS as usize);
    let started = Instant::now();
    for n in 0..KEYS {
        assert!(lim.check_request(&key(n)).is_ok());
    }
    let inserted = started.elapsed();
    assert_eq!(lim.tracked_keys(), KEYS as usize);

    // Housekeeping right away keeps them all: every bucket is still short of a cell.
    lim.housekeep();
    assert_eq!(lim.tracked_keys(), KEYS as usize);

    // Once the buckets have refilled the keys are indistinguishable from new ones; keys
    // used since then stay.
    clock.advance(Duration::from_secs(1));
    for n in 0..10 {
        assert!(lim.check_request(&key(n)).is_ok());
    }
    let started = Instant::now();
    lim.housekeep();
    let housekept = started.elapsed();
    assert_eq!(lim.tracked_keys(), 10);
    eprintln!("memory test: {KEYS} keys inserted in {inserted:?}, housekept in {housekept:?}");
}

#[test]
fn the_key_cap_holds_and_later_keys_share_the_overflow_bucket() {
    let cap = 100_000;
    let (lim, clock) = limiter(cap);
    let started = Instant::now();
    let mut overflow_refusals = 0u32;
    for n in 0..KEYS {
        if let Err(r) = lim.check_request(&key(n)) {
            assert_eq!(r.reason, Reason::Client);
            overflow_refusals += 1;
        }
    }
    eprintln!("cap test: {KEYS} keys checked in {:?}", started.elapsed());
    assert_eq!(lim.tracked_keys(), cap, "never more than max_keys");
    // The first `cap` keys got their own buckets; the other 900,000 shared one bucket of 100.
    assert_eq!(overflow_refusals, KEYS - cap as u32 - 100);
    // Known clients keep their own quota while the table is full...
    assert!(lim.check_request(&key(0)).is_ok());
    // ...and new clients are refused together, not tracked.
    assert!(lim.check_request(&key(KEYS + 1)).is_err());
    assert_eq!(lim.tracked_keys(), cap);

    clock.advance(Duration::from_secs(60));
    lim.housekeep();
    assert_eq!(lim.tracked_keys(), 0);
    // Room again: a new client gets its own bucket.
    assert!(lim.check_request(&key(KEYS + 1)).is_ok());
    assert_eq!(lim.tracked_keys(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_housekeeping_task_runs_every_interval_until_cancelled() {
    let (lim, clock) = limiter(1_000);
    let lim = Arc::new(lim);
    for n in 0..100 {
        assert!(lim.check_request(&key(n)).is_ok());
    }
    clock.advance(Duration::from_secs(3600));
    let cancel = CancellationToken::new();
    let task = spawn_housekeeping(lim.clone() as Arc<dyn Limiter>, Duration::from_secs(60), cancel.clone());

    // Not before the first interval has passed.
    tokio::time::advance(Duration::from_secs(59)).await;
    settle().await;
    assert_eq!(lim.tracked_keys(), 100);
    tokio::time::advance(Duration::from_secs(1)).await;
    settle().await;
    assert_eq!(lim.tracked_keys(), 0);

    // And again at the next tick.
    assert!(lim.check_request(&key(1)).is_ok());
    clock.advance(Duration::from_secs(3600));
    tokio::time::advance(Duration::from_secs(60)).await;
    settle().await;
    assert_eq!(lim.tracked_keys(), 0);

    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(1), task).await.expect("stops on cancel").expect("no panic");
}

/// Lets the spawned task run what is ready (paused tokio time, so no real waiting).
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}
