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
//! Each file is written full of zeros once ([`PREALLOCATED`]) and then overwritten in place:
//! an `fdatasync` of blocks that already exist flushes the data alone, while one that grows
//! the file also commits its new size through the filesystem's own journal. Measured on the
//! benchmark's VM: 144 µs against 333 µs per sync, and 57 against 99 µs of the core's time.
//! Clearing a file writes zeros over what it held, so the zeros mark where records end; a JSON
//! line never holds a NUL byte (serde_json escapes it), so a reader splits on both.
//!
//! Every method does blocking file I/O: call them from `spawn_blocking`.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use super::record::AuditRecord;
use super::spool::Spool;

/// The size each journal file is written to with zeros before its first append: more than
/// the records of one insert cycle at the default batch size (256 records of ~600 bytes), so
/// in steady state no sync grows a file. A cycle that holds more grows it, and it stays grown.
pub(crate) const PREALLOCATED: u64 = 4 << 20;

/// The zeros written when preallocating or clearing, a block at a time.
static ZEROS: [u8; 64 << 10] = [0; 64 << 10];

pub(crate) struct Journal {
    paths: [PathBuf; 2],
    active: Mutex<Active>,
}

struct Active {
    index: usize,
    file: Option<File>,
    /// Where the next append goes in the active file.
    offset: u64,
    /// How far each file holds records (or the fragments of failed writes): what a clear zeroes.
    used: [u64; 2],
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
            // Created and preallocated now, with the directory synced once, so that no later
            // append depends on a directory entry or a file size that a crash could lose.
            preallocate(&OpenOptions::new().create(true).truncate(false).write(true).open(path)?)?;
        }
        File::open(dir)?.sync_all()?;
        Ok(Self { paths, active: Mutex::new(Active { index: 0, file: None, offset: 0, used: [0; 2], torn: false }) })
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
        let (index, offset) = (active.index, active.offset);
        if active.file.is_none() {
            active.file = Some(OpenOptions::new().write(true).open(&self.paths[index])?);
        }
        let Some(file) = active.file.as_ref() else { return Err(io::Error::other("journal file not open")) };
        let written = file.write_all_at(&buf, offset).and_then(|()| file.sync_data());
        // Past this write either way: after a failure part of it may be on disk, and the next
        // append starts a new line beyond it rather than overwrite a fragment of unknown length.
        active.offset = offset + buf.len() as u64;
        active.used[index] = active.offset;
        match written {
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
        active.offset = 0;
        active.torn = false;
        sealed
    }

    /// Empties a sealed file whose records are all in the database (or in the spool) by
    /// writing zeros over them, keeping its blocks. Not fsynced here (the next append to the
    /// file flushes it): if a crash undoes it, recovery re-inserts records the database skips.
    pub(crate) fn clear(&self, index: usize) -> io::Result<()> {
        let used = self.active.lock().used[index];
        zero(&OpenOptions::new().write(true).open(&self.paths[index])?, used)?;
        self.active.lock().used[index] = 0;
        Ok(())
    }

    /// At start-up, before anything is appended: moves what an earlier run left in either file
    /// into `spool` (fsynced there), then empties the file. Returns the bytes moved.
    pub(crate) fn recover(&self, spool: &Spool) -> io::Result<u64> {
        let mut moved = 0;
        for path in &self.paths {
            let (lines, end) = read_leftovers(path)?;
            if !lines.is_empty() {
                spool.adopt(&lines)?;
                moved += lines.len() as u64;
            }
            zero(&OpenOptions::new().write(true).open(path)?, end)?;
        }
        Ok(moved)
    }

    #[cfg(test)]
    fn path(&self, index: usize) -> &Path {
        &self.paths[index]
    }
}

/// The non-blank lines of a journal file's bytes, each ended by a newline: lines end at a
/// newline or at a NUL (zeros that were never overwritten, or a clear a crash cut short).
fn leftover_lines(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    for line in bytes.split(|&b| b == b'\n' || b == 0).filter(|l| !l.iter().all(u8::is_ascii_whitespace)) {
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    out
}

/// What a journal file holds ([`leftover_lines`]) and where its last non-zero byte ends, read a
/// block at a time: the file is mostly zeros, and holding it whole (4 MiB a file) left the
/// allocator keeping that memory after start-up.
fn read_leftovers(path: &Path) -> io::Result<(Vec<u8>, u64)> {
    let mut file = File::open(path)?;
    let (mut block, mut kept) = (vec![0; ZEROS.len()], Vec::new());
    let (mut read, mut end) = (0u64, 0u64);
    loop {
        let n = file.read(&mut block)?;
        if n == 0 {
            break;
        }
        if let Some(last) = block[..n].iter().rposition(|&b| b != 0) {
            kept.extend_from_slice(&block[..n]);
            end = read + last as u64 + 1;
        } else {
            // A block of zeros left out still ends the line before it.
            kept.push(0);
        }
        read += n as u64;
    }
    Ok((leftover_lines(&kept), end))
}

/// Writes zeros up to [`PREALLOCATED`] past what the file holds, then syncs it, size included.
fn preallocate(file: &File) -> io::Result<()> {
    let len = file.metadata()?.len();
    if len >= PREALLOCATED {
        return Ok(());
    }
    write_zeros(file, len, PREALLOCATED)?;
    file.sync_all()
}

/// Writes zeros over the first `len` bytes of `file`.
fn zero(file: &File, len: u64) -> io::Result<()> {
    write_zeros(file, 0, len)
}

/// Writes zeros from byte `from` up to `to`, a block at a time.
fn write_zeros(file: &File, mut from: u64, to: u64) -> io::Result<()> {
    while from < to {
        let n = (to - from).min(ZEROS.len() as u64);
        file.write_all_at(&ZEROS[..n as usize], from)?;
        from += n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::record::{EventKind, Outcome};

    fn record() -> AuditRecord {
        AuditRecord::new(EventKind::ToolCall, Outcome::Ok)
    }

    fn lines(path: &Path) -> usize {
        leftover_lines(&std::fs::read(path).expect("read")).split(|&b| b == b'\n').filter(|l| !l.is_empty()).count()
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
        let fragment = b"{\"id\":\"torn";
        OpenOptions::new().write(true).open(journal.path(0)).expect("open").write_all_at(fragment, 0).expect("tear");
        {
            let mut active = journal.active.lock();
            (active.offset, active.used[0], active.torn) = (fragment.len() as u64, fragment.len() as u64, true);
        }
        let good = record();
        journal.append(std::slice::from_ref(&good)).expect("append");
        let text = String::from_utf8(leftover_lines(&std::fs::read(journal.path(0)).expect("read"))).expect("utf-8");
        let last = text.lines().last().expect("a line");
        assert_eq!(serde_json::from_str::<AuditRecord>(last).expect("parses").id, good.id);
    }

    #[test]
    fn the_files_keep_their_preallocated_size_through_appends_and_clears() {
        let dir = tempfile::tempdir().expect("tempdir");
        let journal = Journal::open(dir.path()).expect("open");
        let size = |i| std::fs::metadata(journal.path(i)).expect("stat").len();
        assert_eq!((size(0), size(1)), (PREALLOCATED, PREALLOCATED));
        for _ in 0..3 {
            journal.append(&[record(), record()]).expect("append");
            let sealed = journal.seal();
            journal.clear(sealed).expect("clear");
        }
        assert_eq!((size(0), size(1)), (PREALLOCATED, PREALLOCATED), "appends overwrite blocks already there");
    }

    #[test]
    fn a_cleared_file_holds_nothing_to_recover() {
        let dir = tempfile::tempdir().expect("tempdir");
        let journal = Journal::open(dir.path()).expect("open");
        journal.append(&[record(), record(), record()]).expect("append");
        journal.clear(journal.seal()).expect("clear");
        journal.append(&[record()]).expect("append");
        drop(journal);
        let spool = Spool::open(dir.path().join("spool.jsonl")).expect("spool");
        let journal = Journal::open(dir.path()).expect("reopen");
        journal.recover(&spool).expect("recover");
        let spooled = std::fs::read_to_string(spool.path()).expect("read spool");
        assert_eq!(spooled.lines().count(), 1, "only the record appended after the clear: {spooled}");
    }

    #[test]
    fn recovery_reads_records_across_blocks_and_past_a_gap_of_zeros() {
        let dir = tempfile::tempdir().expect("tempdir");
        let journal = Journal::open(dir.path()).expect("open");
        let first: Vec<AuditRecord> = (0..400).map(|_| record()).collect();
        journal.append(&first).expect("append");
        // A failed write's region left as zeros, then more records beyond it.
        journal.active.lock().offset += 100_000;
        journal.append(&[record()]).expect("append");
        drop(journal);
        let spool = Spool::open(dir.path().join("spool.jsonl")).expect("spool");
        Journal::open(dir.path()).expect("reopen").recover(&spool).expect("recover");
        let spooled = std::fs::read_to_string(spool.path()).expect("read spool");
        assert_eq!(spooled.lines().count(), 401);
        assert!(spooled.lines().all(|l| serde_json::from_str::<AuditRecord>(l).is_ok()));
    }
}
