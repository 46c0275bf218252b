//! `[tasks]`: long-running tool calls kept in the database as tasks (both protocol eras).

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct TaskSettings {
    /// Offer tasks (the `tasks` capability in 2025-11-25, the tasks extension in 2026-07-28).
    /// Off: a `params.task` is ignored and task-only tools cannot be called.
    pub enabled: bool,
    /// How long a task and its result are kept when the client names no TTL, in seconds.
    pub default_ttl_secs: u64,
    /// The longest TTL a client may ask for, in seconds; longer requests are shortened to it
    /// and the task reports the TTL it got.
    pub max_ttl_secs: u64,
    /// The poll interval suggested to clients, in milliseconds.
    pub poll_interval_ms: u64,
    /// How long a replica's claim on a running task lasts without renewal, in seconds. A task
    /// whose replica stopped (crash, `kill -9`) turns `failed` once its lease lapses.
    pub lease_secs: u64,
    /// Most tasks one client (principal, or address without authentication) may have running.
    pub max_running_per_client: usize,
    /// Most tasks one client may have stored (running, or finished and kept until their TTL);
    /// at the cap new tasks are refused until old ones expire.
    pub max_stored_per_client: usize,
    /// How many `tasks/get` of one task may come faster than `poll_interval_ms` before the
    /// rest are refused until the interval passes (per replica). 0: no limit.
    pub poll_burst: u32,
}

impl Default for TaskSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            default_ttl_secs: 60 * 60,
            max_ttl_secs: 24 * 60 * 60,
            poll_interval_ms: 1000,
            lease_secs: 30,
            max_running_per_client: 32,
            max_stored_per_client: 1000,
            poll_burst: 10,
        }
    }
}

impl TaskSettings {
    /// What is wrong with these settings, naming the key.
    pub fn validate(&self) -> Result<(), (&'static str, &'static str)> {
        if self.default_ttl_secs == 0 || self.max_ttl_secs < self.default_ttl_secs {
            return Err(("tasks.default_ttl_secs", "must be at least 1 and at most tasks.max_ttl_secs"));
        }
        if self.poll_interval_ms < 10 {
            return Err(("tasks.poll_interval_ms", "must be at least 10"));
        }
        if self.lease_secs < 3 {
            return Err(("tasks.lease_secs", "must be at least 3 (the lease is renewed every third of it)"));
        }
        if self.max_running_per_client == 0 {
            return Err(("tasks.max_running_per_client", "must be at least 1"));
        }
        if self.max_stored_per_client < self.max_running_per_client {
            return Err(("tasks.max_stored_per_client", "must be at least tasks.max_running_per_client"));
        }
        Ok(())
    }

    pub fn lease_ms(&self) -> i64 {
        i64::try_from(self.lease_secs.saturating_mul(1000)).unwrap_or(i64::MAX)
    }

    /// The TTL a task gets when the client asked for `requested` milliseconds (or nothing).
    pub fn ttl_ms(&self, requested: Option<u64>) -> i64 {
        let max = self.max_ttl_secs.saturating_mul(1000);
        let ttl = requested.unwrap_or(self.default_ttl_secs.saturating_mul(1000)).clamp(1000, max.max(1000));
        i64::try_from(ttl).unwrap_or(i64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ttl_above_the_maximum_is_shortened_to_it() {
        let s = TaskSettings { max_ttl_secs: 60, default_ttl_secs: 30, ..TaskSettings::default() };
        assert_eq!(s.ttl_ms(Some(3_600_000)), 60_000);
        assert_eq!(s.ttl_ms(None), 30_000);
        assert_eq!(s.ttl_ms(Some(5_000)), 5_000);
    }

    #[test]
    fn the_defaults_are_valid() {
        assert!(TaskSettings::default().validate().is_ok());
    }
}
