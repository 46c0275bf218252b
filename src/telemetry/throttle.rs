//! One log line per cause, not per event: the first event of a cause is logged at once, later
//! ones at most once per period, each such line saying how many were not logged since the
//! previous one. For events a client can repeat at will (a refused token), where every
//! occurrence is already counted by a metric and the log only has to say why.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// See the module docs. Causes are `&'static str` from a fixed set, so the table stays small.
#[derive(Debug)]
pub struct Throttle {
    every: Duration,
    causes: Mutex<Vec<(&'static str, Slot)>>,
}

#[derive(Debug)]
struct Slot {
    logged_at: Instant,
    suppressed: u64,
}

impl Throttle {
    pub const fn new(every: Duration) -> Self {
        Self { every, causes: Mutex::new(Vec::new()) }
    }

    /// Whether to log an event of `cause` now: `Some(events not logged since the last line)`,
    /// or `None` (counted) while the cause was logged less than a period ago.
    pub fn admit(&self, cause: &'static str) -> Option<u64> {
        self.admit_at(cause, Instant::now())
    }

    fn admit_at(&self, cause: &'static str, now: Instant) -> Option<u64> {
        let mut causes = self.causes.lock();
        let Some((_, slot)) = causes.iter_mut().find(|(c, _)| *c == cause) else {
            causes.push((cause, Slot { logged_at: now, suppressed: 0 }));
            return Some(0);
        };
        if now.saturating_duration_since(slot.logged_at) < self.every {
            slot.suppressed += 1;
            return None;
        }
        slot.logged_at = now;
        Some(std::mem::take(&mut slot.suppressed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cause_is_logged_first_then_once_a_period_with_the_count_left_out() {
        let throttle = Throttle::new(Duration::from_secs(60));
        let start = Instant::now();
        assert_eq!(throttle.admit_at("expired", start), Some(0));
        assert_eq!(throttle.admit_at("bad_signature", start), Some(0), "another cause has its own line");
        assert_eq!(throttle.admit_at("expired", start + Duration::from_secs(1)), None);
        assert_eq!(throttle.admit_at("expired", start + Duration::from_secs(59)), None);
        assert_eq!(throttle.admit_at("expired", start + Duration::from_secs(61)), Some(2));
        assert_eq!(throttle.admit_at("expired", start + Duration::from_secs(62)), None);
    }
}
