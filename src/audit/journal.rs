//! The write-ahead journal of `sync` durability on SQLite: each group of waiting callers'
//! records is appended to a local file and fsynced (one small sequential write) before they
//! are answered, and goes into the database afterwards in larger batches, off the answer's
//! path.
//!
//! Why: a SQLite commit writes whole pages of the table and of each of its indexes, so small
//! commits cost far more per record than large ones; an append to one file costs about the
//! same per record at any group size. The journal lives beside the spool, in the same
//! durability domain as the SQLite file itself (Postgres keeps committing directly: its
//! records belong on the database server, not on one replica's disk).
//!
//! Two files take turns. Appends go to the active one; [`Journal::seal`] makes the other
//! active and hands back the sealed one, whose records the writer inserts and then
//! [`Journal::clear`]s. A crash before the clear leaves records that are perhaps already in
//! the database: [`Journal::recover`] moves every leftover line into the spool, whose replay
//! skips ids already present, so nothing is lost and nothing doubles.
//!
//! Every method does blocking file I/O: call them from `spawn_blocking`.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use super::record::AuditRecord;
use super::spool::Spool;

pub(crate) struct Journal {
    paths: [PathBuf; 2],
    active: Mutex<Active>,
}

struct Active {
    index: usize,
    file: Option<File>,
    /// A failed write may have left part of a line: the next append starts a new line, so that
    /// fragment cannot swallow a good record.
    torn: bool,
}

impl Journal {
    /// The two files `audit-journal.0.jsonl` and `.1.jsonl` in `dir` (created if missing).
    pub(crate) fn open(dir: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let paths = [dir.join("audit-journal.0.jsonl"), dir.join("audit-journal.1.jsonl")];
        for path in &paths {
            // Created now, with the directory synced once, so that no later append depends on
            // a directory entry that a crash could lose.
            OpenOptions::new().create(true).append(true).open(path)?;
        }
        File::open(dir)?.sync_all()?;
        Ok(Self { paths, active: Mutex::new(Active { index: 0, file: None, torn: false }) })
    }

    /// The journal in the spool's directory, with what an earlier run left in it moved into the
    /// spool. Returns the bytes moved.
    pub(crate) fn open_beside(spool: &Spool) -> io::Result<(Self, u64)> {
        let dir = spool.path().parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let journal = Self::open(dir)?;
        let moved = journal.recover(spool)?;
        Ok((journal, moved))
    }

    /// Appends `records` as JSON lines to the active file and fsyncs before returning.
    pub(crate) fn append(&self, records: &[AuditRecord]) -> io::Result<()> {
        let mut buf = Vec::with_capacity(records.len() * 512 + 1);
        let mut active = self.active.lock();
        if active.torn {
            buf.push(b'\n');
        }
        for r in records {
            serde_json::to_writer(&mut buf, r).map_err(io::Error::other)?;
            buf.push(b'\n');
        }
        let index = active.index;
        if active.file.is_none() {
            active.file = Some(OpenOptions::new().append(true).open(&self.paths[index])?);
        }
        let Some(file) = active.file.as_mut() else { return Err(io::Error::other("journal file not open")) };
        match file.write_all(&buf).and_then(|()| file.sync_data()) {
            Ok(()) => {
                active.torn = false;
                Ok(())
            }
            Err(e) => {
                active.file = None;
                active.torn = true;
                Err(e)
            }
        }
    }

    /// Makes the other file active and returns the index of the one whose records are now to
    /// be inserted. The caller clears the sealed file before sealing again.
    pub(crate) fn seal(&self) -> usize {
        let mut active = self.active.lock();
        let sealed = active.index;
        active.index = 1 - sealed;
        active.file = None;
        active.torn = false;
        sealed
    }

    /// Empties a sealed file whose records are all in the database (or in the spool). Not
    /// fsynced: if a crash undoes it, recovery re-inserts records the database then skips.
    pub(crate) fn clear(&self, index: usize) -> io::Result<()> {
        OpenOptions::new().write(true).open(&self.paths[index])?.set_len(0)
    }

    /// At start-up, before anything is appended: moves what an earlier run left in either file
    /// into `spool` (fsynced there), then empties the file. Returns the bytes moved.
    pub(crate) fn recover(&self, spool: &Spool) -> io::Result<u64> {
        let mut moved = 0;
        for path in &self.paths {
            let mut bytes = Vec::new();
            File::open(path)?.read_to_end(&mut bytes)?;
            if bytes.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            spool.adopt(&bytes)?;
            moved += bytes.len() as u64;
            OpenOptions::new().write(true).open(path)?.set_len(0)?;
        }
        Ok(moved)
    }

    #[cfg(test)]
    fn path(&self, index: usize) -> &Path {
        &self.paths[index]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::record::{EventKind, Outcome};

    fn record() -> AuditRecord {
        AuditRecord::new(EventKind::ToolCall, Outcome::Ok)
    }

    fn lines(path: &Path) -> usize {
        std::fs::read_to_string(path).expect("read").lines().filter(|l| !l.is_empty()).count()
    }

    #[test]
    fn appends_go_to_the_active_file_until_it_is_sealed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let journal = Journal::open(dir.path()).expect("open");
        journal.append(&[record(), record()]).expect("append");
        assert_eq!(journal.seal(), 0);
        journal.append(&[record()]).expect("append");
        assert_eq!((lines(journal.path(0)), lines(journal.path(1))), (2, 1));
        journal.clear(0).expect("clear");
        assert_eq!(journal.seal(), 1);
        journal.append(&[record()]).expect("append");
        assert_eq!((lines(journal.path(0)), lines(journal.path(1))), (1, 1));
    }

    #[test]
    fn recovery_moves_leftover_records_into_the_spool_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let journal = Journal::open(dir.path()).expect("open");
        let (a, b) = (record(), record());
        journal.append(std::slice::from_ref(&a)).expect("append");
        journal.seal();
        journal.append(std::slice::from_ref(&b)).expect("append");
        drop(journal);

        let spool = Spool::open(dir.path().join("spool.jsonl")).expect("spool");
        let journal = Journal::open(dir.path()).expect("reopen");
        assert!(journal.recover(&spool).expect("recover") > 0);
        assert_eq!(journal.recover(&spool).expect("again"), 0, "the journal is empty after recovery");
        let spooled = std::fs::read_to_string(spool.path()).expect("read spool");
        let ids: Vec<String> = spooled.lines().map(|l| serde_json::from_str::<AuditRecord>(l).expect("record").id.to_string()).collect();
        assert_eq!(ids, [a.id.to_string(), b.id.to_string()]);
    }

    #[test]
    fn a_torn_line_cannot_swallow_the_next_record() {
        let dir = tempfile::tempdir().expect("tempdir");
        let journal = Journal::open(dir.path()).expect("open");
        std::fs::write(journal.path(0), b"{\"id\":\"torn").expect("tear");
        journal.active.lock().torn = true;
        let good = record();
        journal.append(std::slice::from_ref(&good)).expect("append");
        let text = std::fs::read_to_string(journal.path(0)).expect("read");
        let last = text.lines().last().expect("a line");
        assert_eq!(serde_json::from_str::<AuditRecord>(last).expect("parses").id, good.id);
    }
}
