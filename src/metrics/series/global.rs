//! The process's own store (like the Prometheus recorder, one per process: tests that start
//! several servers in one process share it), the thread that closes its intervals, and the
//! slowest public-port request, which the overview clamps its HTTP estimate to.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime};

use super::{Clock, Store};

/// The system's clocks: the wall clock (read once by the store) and [`Instant`], which the
/// wall clock's steps do not move.
#[derive(Debug)]
pub struct SystemClock(Instant);

impl SystemClock {
    pub fn new() -> Self {
        Self(Instant::now())
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn unix(&self) -> f64 {
        SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
    }

    fn elapsed(&self) -> Duration {
        self.0.elapsed()
    }
}

/// The store of this process.
pub fn global() -> &'static Store {
    static STORE: OnceLock<Store> = OnceLock::new();
    STORE.get_or_init(|| Store::new(SystemClock::new()))
}

/// Starts the thread that closes the global store's intervals. A plain thread, like the
/// recorder's upkeep: the store outlives any one runtime.
pub(in crate::metrics) fn spawn_sampler() {
    let spawned = std::thread::Builder::new().name("metrics-series".into()).spawn(|| {
        let store = global();
        // The store's time is monotonic, so the wait is never more than an interval, and a
        // close that finds its interval not yet ended (woken early) does nothing.
        loop {
            std::thread::sleep(store.until_close());
            store.close();
        }
    });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start the metrics series thread; intervals close only when the console reads them");
    }
}

/// The slowest public-port request since start, in µs: the overview clamps the HTTP latency
/// it estimates from the Prometheus buckets to it.
static HTTP_MAX: AtomicU64 = AtomicU64::new(0);

/// One public-port request's duration (read before written: after warm-up a plain load).
pub fn observe_http(seconds: f64) {
    let micros = (seconds.max(0.0) * 1e6) as u64;
    if micros > HTTP_MAX.load(Relaxed) {
        HTTP_MAX.fetch_max(micros, Relaxed);
    }
}

/// The slowest public-port request since start, in seconds, if any was served.
pub fn http_max() -> Option<f64> {
    let micros = HTTP_MAX.load(Relaxed);
    (micros > 0).then(|| micros as f64 / 1e6)
}
