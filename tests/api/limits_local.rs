//! `LocalLimiter` behaviour on a fake clock: per-client, per-tool, global and auth-failure
//! limits, what the key is made of, and that Retry-After is exactly when admission resumes.
//! Time only moves when a test advances `FakeRelativeClock`; nothing sleeps.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use governor::clock::FakeRelativeClock;
use toolgate::auth::principal::Principal;
use toolgate::limits::{Check, ClientKey, LimitSettings, Limiter, LocalLimiter, Reason, ToolLimit};

const NS: Duration = Duration::from_nanos(1);

fn settings() -> LimitSettings {
    LimitSettings {
        requests_per_minute: 60,
        request_burst: 3,
        tool_units_per_minute: 60,
        tool_burst: 10,
        global_per_second: 1_000_000,
        global_burst: 1_000_000,
        auth_failures_per_minute: 6,
        auth_failure_burst: 3,
        ..LimitSettings::default()
    }
}

fn limiter(settings: &LimitSettings) -> (LocalLimiter<FakeRelativeClock>, FakeRelativeClock) {
    let clock = FakeRelativeClock::default();
    (LocalLimiter::with_clock(settings, clock.clone()).expect("valid settings"), clock)
}

fn ip(s: &str) -> IpAddr {
    s.parse().expect("ip")
}

fn principal(issuer: &str, subject: &str, client_id: Option<&str>, scope: &str, expires_at: u64) -> Principal {
    Principal {
        issuer: issuer.into(),
        subject: subject.into(),
        client_id: client_id.map(Into::into),
        scopes: [scope.to_owned()].into(),
        expires_at,
        default_audience: true,
        server_audiences: Vec::new(),
    }
}

fn exhaust_requests(lim: &LocalLimiter<FakeRelativeClock>, key: &ClientKey, burst: u32) {
    for i in 0..burst {
        assert!(lim.check_request(key).is_ok(), "request {i} of the burst is admitted");
    }
}

#[test]
fn per_client_limit_holds_and_recovers_after_the_advertised_retry_after() {
    let (lim, clock) = limiter(&settings());
    let key = ClientKey::from_ip(ip("192.0.2.1"));
    exhaust_requests(&lim, &key, 3);
    let rejection = lim.check_request(&key).expect_err("over the burst");
    assert_eq!(rejection.reason, Reason::Client);
    // 60/min: one cell per second; the bucket was just drained, so exactly 1 s.
    assert_eq!(rejection.retry_after, Duration::from_secs(1));
    // Still refused one nanosecond early, and repeated refusals do not push the time back.
    clock.advance(rejection.retry_after - NS);
    assert_eq!(lim.check_request(&key).expect_err("1 ns early").retry_after, NS);
    clock.advance(NS);
    assert!(lim.check_request(&key).is_ok(), "admitted exactly at retry_after");
    assert!(lim.check_request(&key).is_err(), "and only one cell came back");
    // A long idle period refills the whole burst, no more.
    clock.advance(Duration::from_secs(3600));
    exhaust_requests(&lim, &key, 3);
    assert!(lim.check_request(&key).is_err());
}

#[test]
fn two_clients_are_independent() {
    let (lim, _clock) = limiter(&settings());
    let a = ClientKey::from_ip(ip("192.0.2.1"));
    let b = ClientKey::from_ip(ip("192.0.2.2"));
    exhaust_requests(&lim, &a, 3);
    assert!(lim.check_request(&a).is_err());
    exhaust_requests(&lim, &b, 3);
    assert!(lim.check_request(&b).is_err());
    assert_eq!(lim.tracked_keys(), 2);
}

#[test]
fn one_principal_through_two_sessions_shares_one_quota() {
    let (lim, _clock) = limiter(&settings());
    // Two sessions of the same user and client, each with its own token: different scopes and
    // expiry (a refresh), same issuer, subject and client id. The session is not an input.
    let session_one = ClientKey::from_principal(&principal("https://idp", "alice", Some("app"), "tools", 100));
    let session_two = ClientKey::from_principal(&principal("https://idp", "alice", Some("app"), "admin", 999));
    assert_eq!(session_one, session_two);
    assert!(lim.check_request(&session_one).is_ok());
    assert!(lim.check_request(&session_two).is_ok());
    assert!(lim.check_request(&session_one).is_ok());
    assert_eq!(lim.check_request(&session_two).expect_err("shared quota is spent").reason, Reason::Client);

    // Any of issuer, subject or client id differing makes another client.
    for other in [
        principal("https://idp", "alice", Some("other-app"), "tools", 100),
        principal("https://idp", "alice", None, "tools", 100),
        principal("https://idp", "bob", Some("app"), "tools", 100),
        principal("https://other-idp", "alice", Some("app"), "tools", 100),
    ] {
        assert!(lim.check_request(&ClientKey::from_principal(&other)).is_ok(), "{other:?} has its own quota");
    }
}

#[test]
fn tool_overrides_have_their_own_bucket_and_costs_consume_n_cells() {
    let mut s = settings();
    s.tools.insert("search".into(), ToolLimit { per_minute: Some(6), burst: Some(2), cost: 1 });
    s.tools.insert("report".into(), ToolLimit { cost: 5, ..ToolLimit::default() });
    s.tools.insert("heavy".into(), ToolLimit { per_minute: Some(60), burst: Some(6), cost: 3 });
    let (lim, clock) = limiter(&s);
    let key = ClientKey::from_ip(ip("192.0.2.1"));

    // search: own bucket of 2, one call per 10 s.
    assert!(lim.check_tool(&key, "search").is_ok());
    assert!(lim.check_tool(&key, "search").is_ok());
    let r = lim.check_tool(&key, "search").expect_err("own burst of 2");
    assert_eq!((r.reason, r.retry_after), (Reason::Tool, Duration::from_secs(10)));

    // report: cost 5 from the shared budget of 10 (1 unit/s): two calls, then 5 s for a third.
    assert!(lim.check_tool(&key, "report").is_ok());
    assert!(lim.check_tool(&key, "report").is_ok());
    let r = lim.check_tool(&key, "report").expect_err("10 units spent");
    assert_eq!((r.reason, r.retry_after), (Reason::Tool, Duration::from_secs(5)));
    // Tools without a rule spend 1 unit of the same shared budget, also empty now.
    assert_eq!(lim.check_tool(&key, "echo").expect_err("shared budget spent").retry_after, Duration::from_secs(1));
    // The own bucket of "heavy" is untouched by all that: cost 3 of 6.
    assert!(lim.check_tool(&key, "heavy").is_ok());
    assert!(lim.check_tool(&key, "heavy").is_ok());
    assert_eq!(lim.check_tool(&key, "heavy").expect_err("6 spent").retry_after, Duration::from_secs(3));

    // The shared budget refills at 1 unit/s: after 1 s echo fits, report (5) does not.
    clock.advance(Duration::from_secs(1));
    assert!(lim.check_tool(&key, "echo").is_ok());
    assert!(lim.check_tool(&key, "report").is_err());
    clock.advance(Duration::from_secs(5));
    assert!(lim.check_tool(&key, "report").is_ok());

    // Tool budgets do not touch the request budget, and other clients are unaffected.
    exhaust_requests(&lim, &key, 3);
    let other = ClientKey::from_ip(ip("192.0.2.2"));
    assert!(lim.check_tool(&other, "search").is_ok());
    assert!(lim.check_tool(&other, "report").is_ok());
}

#[test]
fn the_global_ceiling_holds_across_many_clients() {
    let mut s = settings();
    s.global_per_second = 10;
    s.global_burst = 10;
    let (lim, clock) = limiter(&s);
    let client = |i: u32| ClientKey::from_ip(IpAddr::V4(Ipv4Addr::from(0x0a00_0000u32 + i)));
    for i in 0..10 {
        assert!(lim.check_request(&client(i)).is_ok());
    }
    let r = lim.check_request(&client(10)).expect_err("ceiling reached by other clients");
    assert_eq!((r.reason, r.retry_after), (Reason::Global, Duration::from_millis(100)));
    clock.advance(Duration::from_millis(100));
    assert!(lim.check_request(&client(11)).is_ok());
    assert!(lim.check_request(&client(12)).is_err());

    // A client over its own limit is refused before the ceiling is charged, so it cannot
    // drain the ceiling for everyone else.
    clock.advance(Duration::from_secs(1));
    let noisy = client(100);
    exhaust_requests(&lim, &noisy, 3);
    for _ in 0..1000 {
        assert_eq!(lim.check_request(&noisy).expect_err("own limit").reason, Reason::Client);
    }
    for i in 200..207 {
        assert!(lim.check_request(&client(i)).is_ok(), "ceiling still has 7 of 10 left");
    }
    assert_eq!(lim.check_request(&client(300)).expect_err("now it is spent").reason, Reason::Global);
}

#[test]
fn auth_failures_are_limited_per_ip_and_checking_consumes_nothing() {
    let (lim, clock) = limiter(&settings());
    let attacker = ip("198.51.100.7");
    // Checks alone (e.g. requests whose tokens verify) never use up the allowance.
    for _ in 0..100 {
        assert!(lim.check_auth_failure_allowed(attacker).is_ok());
    }
    assert_eq!(lim.tracked_keys(), 0, "a check creates no entry");
    for _ in 0..3 {
        assert!(lim.check_auth_failure_allowed(attacker).is_ok());
        lim.record_auth_failure(attacker);
    }
    // Refused before any token is verified, with the exact time one failure is allowed again.
    let r = lim.check_auth_failure_allowed(attacker).expect_err("3 failures is the burst");
    assert_eq!((r.reason, r.retry_after), (Reason::AuthFailures, Duration::from_secs(10)));
    assert!(lim.check_auth_failure_allowed(ip("198.51.100.8")).is_ok(), "other addresses are unaffected");
    // The other client limits are separate tables.
    assert!(lim.check_request(&ClientKey::from_ip(attacker)).is_ok());

    clock.advance(Duration::from_secs(10) - NS);
    assert!(lim.check_auth_failure_allowed(attacker).is_err());
    clock.advance(NS);
    assert!(lim.check_auth_failure_allowed(attacker).is_ok());
    // One more failure and the address is refused again at once: the bucket tells exactly,
    // so no extra verification slips through.
    lim.record_auth_failure(attacker);
    assert_eq!(lim.check_auth_failure_allowed(attacker).expect_err("spent again").retry_after, Duration::from_secs(10));

    // IPv6 hosts are counted per /64, so rotating the interface id does not help.
    for n in 1..=3 {
        lim.record_auth_failure(ip(&format!("2001:db8:aa:bb::{n}")));
    }
    assert!(lim.check_auth_failure_allowed(ip("2001:db8:aa:bb::ffff")).is_err());
    assert!(lim.check_auth_failure_allowed(ip("2001:db8:aa:cc::1")).is_ok());
}

#[test]
fn a_full_auth_failure_table_never_locks_new_addresses_out() {
    let mut s = settings();
    s.max_keys = 2;
    let (lim, _clock) = limiter(&s);
    let addresses = [ip("203.0.113.1"), ip("203.0.113.2"), ip("203.0.113.3")];
    for address in addresses {
        for _ in 0..3 {
            lim.record_auth_failure(address);
        }
    }
    // The first two addresses fill the table and are locked out; the third is not tracked,
    // and neither is a newcomer: a shared bucket here would refuse every new address.
    assert!(lim.check_auth_failure_allowed(addresses[0]).is_err());
    assert!(lim.check_auth_failure_allowed(addresses[1]).is_err());
    assert!(lim.check_auth_failure_allowed(addresses[2]).is_ok());
    assert!(lim.check_auth_failure_allowed(ip("203.0.113.4")).is_ok());
    assert_eq!(lim.tracked_keys(), 2);
}

#[test]
fn retry_after_rounds_up_to_whole_seconds_and_matches_the_clock() {
    let mut s = settings();
    s.requests_per_minute = 40; // one cell every 1.5 s
    s.request_burst = 1;
    let (lim, clock) = limiter(&s);
    let key = ClientKey::from_ip(ip("192.0.2.1"));
    assert!(lim.check_request(&key).is_ok());
    let r = lim.check_request(&key).expect_err("burst of 1");
    assert_eq!(r.retry_after, Duration::from_millis(1500));
    assert_eq!(r.retry_after_secs(), 2);
    assert_eq!(r.retry_after_ms(), 1500);
    assert_eq!(r.retry_after_header().1, "2");

    clock.advance(Duration::from_millis(1499));
    let r = lim.check_request(&key).expect_err("1 ms early");
    assert_eq!((r.retry_after_secs(), r.retry_after_ms()), (1, 1), "never 0, even 1 ms before");
    clock.advance(Duration::from_millis(1));
    assert!(lim.check_request(&key).is_ok());
}

#[test]
fn disabled_limiting_admits_everything_and_tracks_nothing() {
    let mut s = settings();
    s.enabled = false;
    let (lim, _clock) = limiter(&s);
    let key = ClientKey::from_ip(ip("192.0.2.1"));
    for _ in 0..1000 {
        assert!(lim.check_request(&key).is_ok());
        assert!(lim.check_tool(&key, "anything").is_ok());
        lim.record_auth_failure(ip("192.0.2.1"));
        assert!(lim.check_auth_failure_allowed(ip("192.0.2.1")).is_ok());
    }
    assert_eq!(lim.tracked_keys(), 0);
}

#[test]
fn invalid_settings_are_refused_by_the_constructor() {
    let mut s = settings();
    s.tools.insert("x".into(), ToolLimit { cost: 11, ..ToolLimit::default() });
    let err = LocalLimiter::new(&s).err().unwrap_or_default();
    assert!(err.contains("limits.tools.x.cost"), "{err}");
}

#[test]
fn concurrent_callers_never_exceed_the_burst_or_the_key_cap() {
    let mut s = settings();
    s.request_burst = 100;
    s.max_keys = 1_000;
    let (lim, _clock) = limiter(&s);
    let lim = Arc::new(lim);
    let admitted = Arc::new(AtomicUsize::new(0));
    let shared = ClientKey::from_ip(ip("192.0.2.1"));
    let threads: Vec<_> = (0..8u32)
        .map(|t| {
            let (lim, admitted) = (lim.clone(), admitted.clone());
            std::thread::spawn(move || {
                for i in 0..1_000u32 {
                    if lim.check_request(&shared).is_ok() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                    // Distinct keys racing for the last free slots of the table.
                    let _ = lim.check_request(&ClientKey::from_ip(IpAddr::V4(Ipv4Addr::from(t << 16 | i))));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread");
    }
    assert_eq!(admitted.load(Ordering::Relaxed), 100, "the clock is frozen: exactly the burst");
    assert_eq!(lim.tracked_keys(), 1_000, "the table stops exactly at max_keys");
}

#[test]
fn the_trait_object_is_the_seam() {
    let (lim, _clock) = limiter(&settings());
    let lim: Arc<dyn Limiter> = Arc::new(lim);
    let key = ClientKey::from_ip(ip("192.0.2.1"));
    assert!(matches!(lim.check(&key, None), Check::Ready(Ok(()))), "the local limiter decides inline");
    assert!(matches!(lim.check(&key, Some("echo")), Check::Ready(Ok(()))));
    assert_eq!(lim.tracked_keys(), 2, "the client's request and shared tool buckets");
}
