//! The process's own store (like the Prometheus recorder, one per process: tests that start
//! several servers in one process share it), the thread that closes its intervals, and the
//! slowest public-port request, which the overview clamps its HTTP estimate to.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use super::{INTERVAL_SECS, Store, unix_now};

/// The store of this process.
pub fn global() -> &'static Store {
    static STORE: OnceLock<Store> = OnceLock::new();
    STORE.get_or_init(|| Store::new(unix_now()))
}

/// Starts the thread that closes the global store's intervals. A plain thread, like the
/// recorder's upkeep: the store outlives any one runtime.
pub(in crate::metrics) fn spawn_sampler() {
    let spawned = std::thread::Builder::new().name("metrics-series".into()).spawn(|| {
        let store = global();
        let interval = INTERVAL_SECS as f64;
        loop {
            let wait = store.next_close() - unix_now();
            // More than an interval away: the clock was set back. Close every 10 s regardless.
            let set_back = wait > interval;
            std::thread::sleep(Duration::from_secs_f64(wait.clamp(0.0, interval)));
            let now = unix_now();
            if set_back || now >= store.next_close() {
                store.close(now);
            }
        }
    });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start the metrics series thread; the console's charts show only the open interval");
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
