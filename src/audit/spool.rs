//! The local spool: an append-only JSON-lines file that holds records the database could not
//! take (queue full, database unreachable, shutdown past its deadline).
//!
//! Appends are fsynced per batch. Replay never deletes a record that was not confirmed
//! written: the writer renames the spool to `<spool>.replaying` (new appends go to a fresh
//! spool), inserts it batch by batch (`ON CONFLICT (id) DO NOTHING` makes re-inserts after a
//! crash harmless), and deletes it only after its last batch committed. A `.replaying` file
//! found at start-up is finished first. Lines that do not parse (a torn final write after a
//! crash) are moved to `<spool>.rejected`, never silently dropped.
//!
//! Every method does blocking file I/O: call them from `spawn_blocking`.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use super::record::AuditRecord;

pub(crate) struct Spool {
    path: PathBuf,
    replaying: PathBuf,
    rejected: PathBuf,
    active: Mutex<Active>,
    /// Bytes not yet confirmed in the database (both files; a replay in progress still counts).
    pending_bytes: AtomicU64,
}

struct Active {
    file: Option<File>,
    /// Whether the file may end in a torn line (after a crash or a failed write): checked and
    /// terminated before the next append, so that line cannot swallow a good record.
    check_tail: bool,
}

/// A replay in progress: the reader of `.replaying` and the batch read but not yet confirmed.
pub(crate) struct Replay {
    reader: BufReader<File>,
    carry: Vec<AuditRecord>,
    bytes: u64,
}

impl Spool {
    pub(crate) fn open(path: PathBuf) -> io::Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let replaying = sibling(&path, "replaying");
        let rejected = sibling(&path, "rejected");
        let pending = file_len(&path)? + file_len(&replaying)?;
        Ok(Self {
            path,
            replaying,
            rejected,
            active: Mutex::new(Active { file: None, check_tail: true }),
            pending_bytes: AtomicU64::new(pending),
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn pending_bytes(&self) -> u64 {
        self.pending_bytes.load(Ordering::Relaxed)
    }

    pub(crate) fn has_pending(&self) -> bool {
        self.pending_bytes() > 0
    }

    /// Appends `records` as JSON lines and fsyncs before returning.
    pub(crate) fn append(&self, records: &[AuditRecord]) -> io::Result<()> {
        let mut buf = Vec::with_capacity(records.len() * 512);
        for r in records {
            serde_json::to_writer(&mut buf, r).map_err(io::Error::other)?;
            buf.push(b'\n');
        }
        self.write(&buf)
    }

    /// Appends JSON lines written elsewhere (the journal's leftovers) as they are, ending with
    /// a newline, and fsyncs. Lines that do not parse are rejected at replay, as any other.
    pub(crate) fn adopt(&self, lines: &[u8]) -> io::Result<()> {
        let mut buf = lines.to_vec();
        if buf.last() != Some(&b'\n') {
            buf.push(b'\n');
        }
        self.write(&buf)
    }

    fn write(&self, buf: &[u8]) -> io::Result<()> {
        let mut active = self.active.lock();
        match append_locked(&mut active, &self.path, buf) {
            Ok(written) => {
                self.pending_bytes.fetch_add(written, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                // Reopen next time and check the tail: part of `buf` may be on disk.
                active.file = None;
                active.check_tail = true;
                Err(e)
            }
        }
    }

    /// Starts (or resumes) a replay: an existing `.replaying` file first, else the current
    /// spool renamed to `.replaying`. `None` when nothing waits.
    pub(crate) fn begin_replay(&self) -> io::Result<Option<Replay>> {
        let mut active = self.active.lock();
        if !self.replaying.exists() {
            if file_len(&self.path)? == 0 {
                // Nothing waits: also clears any drift in the byte count.
                self.pending_bytes.store(0, Ordering::Relaxed);
                return Ok(None);
            }
            // Close our handle first so the next append creates a fresh spool.
            active.file = None;
            std::fs::rename(&self.path, &self.replaying)?;
            sync_dir(&self.path)?;
            active.check_tail = true;
        }
        drop(active);
        let file = File::open(&self.replaying)?;
        let bytes = file.metadata()?.len();
        Ok(Some(Replay { reader: BufReader::new(file), carry: Vec::new(), bytes }))
    }

    /// The next batch of up to `n` records, or an empty batch when the file is done. The same
    /// batch is returned again until [`Replay::confirm`] is called.
    pub(crate) fn next_batch(&self, replay: &mut Replay, n: usize) -> io::Result<Vec<AuditRecord>> {
        if replay.carry.is_empty() {
            let mut line = String::new();
            while replay.carry.len() < n {
                line.clear();
                if replay.reader.read_line(&mut line)? == 0 {
                    break;
                }
                let text = line.trim_end_matches('\n');
                if text.trim().is_empty() {
                    continue;
                }
                match serde_json::from_str::<AuditRecord>(text) {
                    Ok(record) => replay.carry.push(record),
                    Err(e) => {
                        tracing::warn!(spool = %self.replaying.display(), error = %e, "unreadable audit spool line moved to the rejected file");
                        self.reject(text)?;
                    }
                }
            }
        }
        Ok(replay.carry.clone())
    }

    /// Removes the finished `.replaying` file; every record in it is in the database.
    pub(crate) fn finish_replay(&self, replay: Replay) -> io::Result<()> {
        drop(replay.reader);
        std::fs::remove_file(&self.replaying)?;
        sync_dir(&self.replaying)?;
        self.pending_bytes.fetch_sub(replay.bytes.min(self.pending_bytes()), Ordering::Relaxed);
        Ok(())
    }

    fn reject(&self, line: &str) -> io::Result<()> {
        let mut f = OpenOptions::new().create(true).append(true).open(&self.rejected)?;
        f.write_all(line.as_bytes())?;
        f.write_all(b"\n")?;
        f.sync_data()
    }
}

impl Replay {
    /// The batch last returned by [`Spool::next_batch`] is in the database.
    pub(crate) fn confirm(&mut self) {
        self.carry.clear();
    }
}

fn append_locked(active: &mut Active, path: &Path, buf: &[u8]) -> io::Result<u64> {
    if active.file.is_none() {
        active.file = Some(OpenOptions::new().create(true).append(true).read(true).open(path)?);
    }
    let Some(file) = active.file.as_mut() else { return Err(io::Error::other("spool file not open")) };
    let mut written = 0;
    if active.check_tail {
        let len = file.metadata()?.len();
        if len > 0 {
            let mut last = [0u8; 1];
            file.seek(SeekFrom::Start(len - 1))?;
            file.read_exact(&mut last)?;
            if last[0] != b'\n' {
                file.write_all(b"\n")?;
                written += 1;
            }
        }
        active.check_tail = false;
    }
    file.write_all(buf)?;
    file.sync_data()?;
    Ok(written + buf.len() as u64)
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".");
    name.push(suffix);
    path.with_file_name(name)
}

fn file_len(path: &Path) -> io::Result<u64> {
    match std::fs::metadata(path) {
        Ok(m) => Ok(m.len()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e),
    }
}

/// Makes a rename or delete in the spool's directory durable.
fn sync_dir(path: &Path) -> io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    File::open(dir)?.sync_all()
}
