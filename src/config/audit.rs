//! `[audit]` settings.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// When `record()` may return, and so when the answer of an audited call may leave.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// The default: once the record is committed to the database (or, while the database is
    /// away, appended to the fsynced spool). No acknowledged call loses its record, even to
    /// `kill -9`. Concurrent callers share one statement and one commit (group commit: one
    /// fsync per batch), so the cost per call falls as the load rises.
    #[default]
    Sync,
    /// Opt-in, lossy: as soon as the record is queued (or spooled when the queue is full). A
    /// `kill -9` loses what is queued and not yet committed: about
    /// `min(flush_interval_ms, batch_size / rate)` plus one write's worth of records (measured
    /// with the defaults: 15–111 ms at 2000/s), at most `queue_capacity` when the database is
    /// slow.
    Batched,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuditSettings {
    /// Off: `record()` drops records (nothing is written, not even the spool).
    pub enabled: bool,
    pub durability: Durability,
    /// Records waiting for the writer; beyond this, `record()` appends to the spool itself.
    pub queue_capacity: usize,
    /// Most records per insert (one multi-row statement in one transaction).
    pub batch_size: usize,
    /// Longest a queued record waits for its batch to fill before it is written (batched
    /// mode; in sync mode on SQLite, a journaled record before its database insert, cut short
    /// when the admin API reads the log).
    pub flush_interval_ms: u64,
    /// A write that takes longer counts as failed: the batch goes to the spool.
    pub write_timeout_ms: u64,
    /// How often to retry the database while records wait in the spool.
    pub retry_interval_ms: u64,
    /// Spool file (JSON lines). Unset: `audit-spool.jsonl` in `storage.data_dir`.
    pub spool_path: Option<PathBuf>,
    /// Identifies this process in every record. Unset: the host name, else a random id.
    pub replica_id: Option<String>,
    /// Also write every record as a JSON line to `"stdout"` or to this file (SIEM shipping).
    pub jsonl: Option<String>,
    /// Delete records older than this many days (hourly, and `toolgate audit prune`); 0 keeps
    /// everything.
    pub retention_days: u32,
    /// Argument names whose values are redacted when arguments are kept (case-insensitive).
    pub redact_fields: Vec<String>,
}

impl Default for AuditSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            durability: Durability::Sync,
            queue_capacity: 8192,
            batch_size: 256,
            flush_interval_ms: 100,
            write_timeout_ms: 5_000,
            retry_interval_ms: 1_000,
            spool_path: None,
            replica_id: None,
            jsonl: None,
            retention_days: 90,
            redact_fields: [
                "password",
                "passwd",
                "secret",
                "token",
                "access_token",
                "refresh_token",
                "api_key",
                "apikey",
                "authorization",
                "cookie",
            ]
            .map(String::from)
            .to_vec(),
        }
    }
}

impl AuditSettings {
    pub fn validate(&self) -> Result<(), String> {
        if self.queue_capacity == 0 {
            return Err("audit.queue_capacity must be at least 1".into());
        }
        // Bounded so one batch stays one short transaction (and one SQLite statement chunk list).
        if self.batch_size == 0 || self.batch_size > 3000 {
            return Err("audit.batch_size must be between 1 and 3000".into());
        }
        if self.write_timeout_ms == 0 || self.retry_interval_ms == 0 {
            return Err("audit.write_timeout_ms and audit.retry_interval_ms must be at least 1".into());
        }
        if self.jsonl.as_deref().is_some_and(str::is_empty) {
            return Err("audit.jsonl must be \"stdout\" or a file path".into());
        }
        if self.replica_id.as_deref().is_some_and(|r| r.trim().is_empty()) {
            return Err("audit.replica_id must not be blank".into());
        }
        Ok(())
    }

    pub fn flush_interval(&self) -> Duration {
        Duration::from_millis(self.flush_interval_ms)
    }

    pub fn write_timeout(&self) -> Duration {
        Duration::from_millis(self.write_timeout_ms)
    }

    pub fn retry_interval(&self) -> Duration {
        Duration::from_millis(self.retry_interval_ms)
    }

    /// The redaction list in the form [`super::redact`] takes.
    pub fn redact_field_refs(&self) -> Vec<&str> {
        self.redact_fields.iter().map(String::as_str).collect()
    }

    /// `audit.replica_id`, else `HOSTNAME`, else the kernel's host name, else random.
    pub fn resolved_replica_id(&self) -> String {
        let configured = self.replica_id.clone().or_else(|| std::env::var("HOSTNAME").ok());
        let from_kernel = || std::fs::read_to_string("/proc/sys/kernel/hostname").ok();
        configured
            .or_else(from_kernel)
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| format!("replica-{:016x}", rand::random::<u64>()))
    }
}
