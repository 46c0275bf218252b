//! The optional JSON-lines copy of every record (`audit.jsonl`), for shipping to a SIEM.
//!
//! Each record is emitted once, when it is first persisted (database or spool); replays from
//! the spool are not emitted again. Write errors are logged and never stop the audit log:
//! the database is the record of truth.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use parking_lot::Mutex;

use super::record::AuditRecord;

pub(crate) enum Sink {
    Stdout,
    File { path: PathBuf, out: Mutex<BufWriter<File>> },
}

impl Sink {
    /// `"stdout"` or a file path (appended to, created if missing).
    pub(crate) fn open(target: &str) -> io::Result<Self> {
        if target == "stdout" {
            return Ok(Self::Stdout);
        }
        let path = PathBuf::from(target);
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        Ok(Self::File { path, out: Mutex::new(BufWriter::new(file)) })
    }

    /// Blocking: call from `spawn_blocking`.
    pub(crate) fn emit(&self, records: &[AuditRecord]) {
        let result = match self {
            Self::Stdout => write_lines(&mut io::stdout().lock(), records),
            Self::File { out, .. } => write_lines(&mut *out.lock(), records),
        };
        if let Err(e) = result {
            let target = match self {
                Self::Stdout => "stdout".to_owned(),
                Self::File { path, .. } => path.display().to_string(),
            };
            tracing::warn!(%target, error = %e, "cannot write the audit JSON-lines copy");
        }
    }
}

fn write_lines(out: &mut impl Write, records: &[AuditRecord]) -> io::Result<()> {
    for r in records {
        serde_json::to_writer(&mut *out, r).map_err(io::Error::other)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}
