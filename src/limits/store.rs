//! A governor keyed state store with a hard cap on distinct keys and a dry-run lookup.
//!
//! governor's own `DashMapStateStore` grows with every key it sees and offers no way to ask
//! "is this key tracked?" or "would this key be admitted?" without consuming a cell. Owning
//! the store gives us both: a key table that never exceeds `cap` (see [`Overflow`] for the
//! keys that come later) and exact, non-consuming checks for the auth-failure limiter.

use std::convert::Infallible;
use std::fmt;
use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use dashmap::DashMap;
use dashmap::mapref::entry::Entry;
use governor::nanos::Nanos;
use governor::state::keyed::ShrinkableKeyedStateStore;
use governor::state::{InMemoryState, NotKeyed, StateStore};

/// The key the rate limiter passes to the store: the real key plus whether the decision may
/// be written back (`commit`) or only computed (`dry run`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Lookup<K> {
    pub key: K,
    pub commit: bool,
}

impl<K> Lookup<K> {
    pub fn commit(key: K) -> Self {
        Self { key, commit: true }
    }

    pub fn dry_run(key: K) -> Self {
        Self { key, commit: false }
    }
}

/// What happens to a key that arrives while the table is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Overflow {
    /// Every such key is charged to one shared bucket. New identities then compete for one
    /// bucket instead of being refused outright: a flood of fresh keys throttles itself,
    /// while known clients keep their own buckets untouched.
    Shared,
    /// Such keys are neither tracked nor limited. For limits whose refusal locks people out
    /// (failed authentication): a shared bucket there would let anyone who fills the table
    /// stop every new address from logging in.
    Untracked,
}

/// One GCRA state (a theoretical arrival time) per key, at most `cap` keys.
pub(crate) struct CappedStore<K> {
    map: DashMap<K, InMemoryState>,
    /// Entries in `map`, maintained exactly on insert and removal: `DashMap::len` locks every
    /// shard, too slow to consult on each request.
    len: AtomicUsize,
    cap: usize,
    policy: Overflow,
    /// The bucket of [`Overflow::Shared`].
    overflow: InMemoryState,
    /// Decisions taken for keys that found the table full; shared with the owner, which reports it (the
    /// rate limiter owns the store and does not hand it back).
    overflowed: Arc<AtomicU64>,
}

impl<K: Hash + Eq> CappedStore<K> {
    pub fn new(cap: usize, policy: Overflow, overflowed: Arc<AtomicU64>) -> Self {
        let len = AtomicUsize::new(0);
        Self { map: DashMap::new(), len, cap, policy, overflow: InMemoryState::default(), overflowed }
    }

    /// Decides for a key that finds the table full.
    fn measure_overflow<T, E, F>(&self, commit: bool, f: F) -> Result<T, E>
    where
        F: Fn(Option<Nanos>) -> Result<(T, Nanos), E>,
    {
        match self.policy {
            Overflow::Shared => measure(&self.overflow, commit, f),
            // Decided as for a fresh key, and nothing is stored.
            Overflow::Untracked => f(None).map(|(outcome, _)| outcome),
        }
    }

    /// Claims a slot for a new key, or reports that the table is full.
    fn reserve(&self) -> bool {
        self.len.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < self.cap).then_some(n + 1)).is_ok()
    }
}

/// Runs a GCRA decision on `state`; a dry run computes it but keeps the state as it was.
fn measure<T, E, F>(state: &InMemoryState, commit: bool, f: F) -> Result<T, E>
where
    F: Fn(Option<Nanos>) -> Result<(T, Nanos), E>,
{
    if commit {
        return state.measure_and_replace(&NotKeyed::NonKey, f);
    }
    // Returning the decision as an error makes InMemoryState skip its compare-and-swap.
    match state.measure_and_replace(&NotKeyed::NonKey, |tat| Err::<(Infallible, Nanos), _>(f(tat))) {
        Ok(never) => match never {},
        Err(decision) => decision.map(|(outcome, _)| outcome),
    }
}

/// The stored theoretical arrival time (`None` for a fresh state), read without changing it.
fn tat(state: &InMemoryState) -> Option<Nanos> {
    match state.measure_and_replace(&NotKeyed::NonKey, Err::<(Infallible, Nanos), _>) {
        Ok(never) => match never {},
        Err(tat) => tat,
    }
}

impl<K: Hash + Eq + Clone> StateStore for CappedStore<K> {
    type Key = Lookup<K>;

    fn measure_and_replace<T, F, E>(&self, lookup: &Lookup<K>, f: F) -> Result<T, E>
    where
        F: Fn(Option<Nanos>) -> Result<(T, Nanos), E>,
    {
        if let Some(state) = self.map.get(&lookup.key) {
            return measure(&state, lookup.commit, f);
        }
        if !lookup.commit {
            // Answer as a committing call would find things, without creating an entry.
            return if self.len.load(Ordering::Acquire) >= self.cap {
                self.measure_overflow(false, f)
            } else {
                f(None).map(|(outcome, _)| outcome)
            };
        }
        if !self.reserve() {
            self.overflowed.fetch_add(1, Ordering::Relaxed);
            return self.measure_overflow(true, f);
        }
        match self.map.entry(lookup.key.clone()) {
            // Another thread inserted the key since our lookup: give the slot back.
            Entry::Occupied(entry) => {
                self.len.fetch_sub(1, Ordering::AcqRel);
                measure(entry.get(), true, f)
            }
            Entry::Vacant(entry) => measure(&entry.insert(InMemoryState::default()), true, f),
        }
    }
}

impl<K: Hash + Eq + Clone> ShrinkableKeyedStateStore<Lookup<K>> for CappedStore<K> {
    /// Drops keys whose state is indistinguishable from a fresh one (governor computes
    /// `drop_below` from the quota), counting each removal so `len` stays exact.
    fn retain_recent(&self, drop_below: Nanos) {
        self.map.retain(|_, state| {
            let keep = tat(state).is_some_and(|tat| tat > drop_below);
            if !keep {
                self.len.fetch_sub(1, Ordering::AcqRel);
            }
            keep
        });
    }

    fn shrink_to_fit(&self) {
        self.map.shrink_to_fit();
    }

    fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<K> fmt::Debug for CappedStore<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CappedStore").field("len", &self.len.load(Ordering::Relaxed)).field("cap", &self.cap).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU32;
    use std::time::Duration;

    use governor::clock::FakeRelativeClock;
    use governor::middleware::NoOpMiddleware;
    use governor::{Quota, RateLimiter};

    use super::*;

    type Limiter = RateLimiter<Lookup<u32>, CappedStore<u32>, FakeRelativeClock, NoOpMiddleware<Nanos>>;

    fn limiter(burst: u32, cap: usize, clock: &FakeRelativeClock) -> Limiter {
        let burst = NonZeroU32::new(burst).expect("burst");
        RateLimiter::new(Quota::per_second(burst), CappedStore::new(cap, Overflow::Shared, Arc::default()), clock.clone())
    }

    #[test]
    fn keys_beyond_the_cap_share_the_overflow_bucket() {
        let clock = FakeRelativeClock::default();
        let lim = limiter(2, 2, &clock);
        assert!(lim.check_key(&Lookup::commit(1)).is_ok());
        assert!(lim.check_key(&Lookup::commit(2)).is_ok());
        // Keys 3, 4 and 5 all land in the overflow bucket (burst 2), so the third is refused.
        assert!(lim.check_key(&Lookup::commit(3)).is_ok());
        assert!(lim.check_key(&Lookup::commit(4)).is_ok());
        assert!(lim.check_key(&Lookup::commit(5)).is_err());
        assert_eq!(lim.len(), 2);
        // Tracked keys keep their own buckets.
        assert!(lim.check_key(&Lookup::commit(1)).is_ok());
    }

    #[test]
    fn dry_runs_neither_consume_nor_insert() {
        let clock = FakeRelativeClock::default();
        let lim = limiter(1, 10, &clock);
        for _ in 0..5 {
            assert!(lim.check_key(&Lookup::dry_run(7)).is_ok());
        }
        assert_eq!(lim.len(), 0);
        assert!(lim.check_key(&Lookup::commit(7)).is_ok());
        assert!(lim.check_key(&Lookup::dry_run(7)).is_err());
        clock.advance(Duration::from_secs(1));
        assert!(lim.check_key(&Lookup::dry_run(7)).is_ok());
        assert!(lim.check_key(&Lookup::commit(7)).is_ok());
    }

    #[test]
    fn the_counter_matches_the_map_through_inserts_and_removals() {
        let store = CappedStore::new(100, Overflow::Shared, Arc::default());
        let admit_until = |tat: u64| move |_: Option<Nanos>| Ok::<_, ()>(((), Nanos::from(tat)));
        for k in 0..50u32 {
            assert!(store.measure_and_replace(&Lookup::commit(k), admit_until(10 + u64::from(k))).is_ok());
        }
        // Re-measuring known keys adds nothing.
        assert!(store.measure_and_replace(&Lookup::commit(3), admit_until(100)).is_ok());
        assert_eq!((ShrinkableKeyedStateStore::len(&store), store.map.len()), (50, 50));
        // Keys 0..=29 have tat 10..=39 (key 3 moved to 100): dropping tat <= 39 keeps 21.
        store.retain_recent(Nanos::from(39u64));
        assert_eq!((ShrinkableKeyedStateStore::len(&store), store.map.len()), (21, 21));
    }

    #[test]
    fn untracked_overflow_neither_limits_nor_stores() {
        let clock = FakeRelativeClock::default();
        let burst = NonZeroU32::new(1).expect("burst");
        let store = CappedStore::new(1, Overflow::Untracked, Arc::default());
        let lim: Limiter = RateLimiter::new(Quota::per_second(burst), store, clock);
        assert!(lim.check_key(&Lookup::commit(1)).is_ok());
        assert!(lim.check_key(&Lookup::commit(1)).is_err(), "tracked keys are limited");
        for _ in 0..10 {
            assert!(lim.check_key(&Lookup::commit(2)).is_ok());
            assert!(lim.check_key(&Lookup::dry_run(2)).is_ok());
        }
        assert_eq!(lim.len(), 1);
    }
}
