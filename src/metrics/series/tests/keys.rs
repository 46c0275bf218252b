//! Keys: the cap and its overflow key, which no real name shares, and the release of keys no
//! handle holds that were idle for the hour.

use super::*;

#[test]
fn names_past_the_cap_share_the_overflow_key_read_as_other() {
    let (s, clock) = store();
    let handles: Vec<Handle> = (0..MAX_KEYS).map(|i| s.handle(Scope::Tool, &format!("t{i}"))).collect();
    s.handle(Scope::Tool, "late").record(secs(0.1), false);
    s.handle(Scope::Upstream, "late_upstream").record(secs(0.1), false);
    clock.to(T0 + 1.0);
    assert!(s.chart(Query::Tool("late"), Window::Hour).points.is_empty());
    assert_eq!(s.chart(Query::Tool(OTHER), Window::Hour).points[0].calls, 1);
    assert_eq!(s.chart(Query::Upstream(OTHER), Window::Hour).points[0].calls, 1);
    assert_eq!(s.chart(Query::All, Window::Hour).points[0].calls, 1, "still counted in all");
    drop(handles);
}

#[test]
fn a_tool_named_other_is_its_own_key() {
    let (s, clock) = store();
    s.handle(Scope::Tool, "other").record(secs(0.1), false);
    s.handle(Scope::Tool, OTHER).record(secs(0.1), true);
    clock.to(T0 + 1.0);
    let open = |name| s.chart(Query::Tool(name), Window::Hour).points.last().map(|p| (p.calls, p.errors));
    assert_eq!(open("other"), Some((1, 0)));
    assert_eq!(open(OTHER), Some((1, 1)), "the reserved name is the overflow key");
}

#[test]
fn the_same_name_gets_the_same_key() {
    let (s, clock) = store();
    s.handle(Scope::Tool, "echo").record(secs(0.1), false);
    s.handle(Scope::Tool, "echo").record(secs(0.1), false);
    s.handle(Scope::Upstream, "echo").record(secs(0.1), false);
    clock.to(T0 + 1.0);
    assert_eq!(s.chart(Query::Tool("echo"), Window::Hour).points[0].calls, 2);
}

/// Tools renamed away: once no handle holds their key and it had no call for the hour, the key
/// and its points go and its slot is free, so the cap does not fill for good.
#[test]
fn a_key_no_handle_holds_and_idle_for_the_hour_is_released() {
    let (s, clock) = store();
    let kept = s.handle(Scope::Tool, "kept");
    let gone: Vec<Handle> = (0..MAX_KEYS - 1).map(|i| s.handle(Scope::Tool, &format!("old{i}"))).collect();
    gone[0].record(secs(0.1), false);
    assert_eq!(s.keys.read().named(), MAX_KEYS);
    close_at(&s, &clock, T0 + 10.0);
    drop(gone);
    close_at(&s, &clock, T0 + 3_000.0);
    assert_eq!(s.keys.read().named(), MAX_KEYS, "not yet idle for the hour");
    close_at(&s, &clock, T0 + 3_620.0);
    assert_eq!(s.keys.read().named(), 1, "only the key a handle holds is left");
    assert!(s.chart(Query::Tool("old0"), Window::Start).points.is_empty());
    let state = s.state.lock();
    assert!(state.rings.start.iter().all(|f| f.points.iter().all(|(k, _)| *k == ALL)), "its points went too");
    drop(state);
    assert_eq!(s.since_start().count, 1, "all calls still count it");
    s.handle(Scope::Tool, "new").record(secs(0.2), false);
    clock.to(T0 + 3_621.0);
    assert_eq!(s.chart(Query::Tool("new"), Window::Hour).points.last().map(|p| p.calls), Some(1), "a key of its own");
    kept.record(secs(0.1), false);
}

#[test]
fn a_key_with_a_call_since_the_last_close_is_not_released() {
    let (s, clock) = store();
    let h = s.handle(Scope::Tool, "a");
    close_at(&s, &clock, T0 + 3_700.0);
    h.record(secs(0.1), false);
    drop(h);
    assert!(!s.keys.write().release(2), "a counted call keeps it");
    close_at(&s, &clock, T0 + 3_710.0);
    assert_eq!(s.chart(Query::Tool("a"), Window::Hour).points.iter().map(|p| p.calls).sum::<u64>(), 1);
}
