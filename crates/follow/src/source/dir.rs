//! The directory source: every `*.yaml`, `*.yml` and `*.json` file under a directory
//! (recursively), watched with inotify.
//!
//! The directory is the truth: after each quiet spell of changes the source lists it again
//! and sends the difference from what it sent before (texts new or changed, texts gone).
//! What makes this safe while files change under it:
//!
//! - **Only finished files are read.** A regular file that is being written in place (a
//!   data-modify or create event and no close-after-write yet) keeps its previous text
//!   until its writer closes it; files renamed into place are read at once.
//! - **An unreadable text keeps its objects.** A file emptied, not UTF-8, larger than
//!   [`MAX_FILE_BYTES`], or unreadable is sent as [`Event::Unreadable`]; only a file that
//!   is gone removes its objects.
//! - **A missing directory removes nothing.** If the directory is moved, deleted or cannot
//!   be listed, the source reports [`Event::Health`] with the reason, keeps everything in
//!   force, and checks every [`POLL`] until it is back (re-arming the watch on a new
//!   directory of the same path).
//! - **Hidden paths are not texts.** Any name starting with `.` is skipped, so a
//!   ConfigMap or Secret volume (`..data` → `..<timestamp>/`, visible files symlinked
//!   through `..data`) is read through its visible names only; swapping `..data` re-reads
//!   them.
//! - Only regular files (after following symlinks) are read: FIFOs, sockets and devices
//!   are skipped with a notice. A directory reached twice through symlinks is read once,
//!   and a symlink loop is reported.
//!
//! The root is canonicalized once, so a relative `dir:PATH` names each file one way.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use notify::event::{AccessKind, AccessMode, CreateKind, ModifyKind};
use notify::{EventKind, RecursiveMode, Watcher};

use palisade_model::tree::{TreeEntry, manifest_tree};

use super::{Content, Event, Sender, Text};

/// How long the directory must stay quiet before it is listed again.
pub const DEBOUNCE: Duration = Duration::from_millis(50);
/// The longest a listing waits while changes keep coming.
pub const MAX_DELAY: Duration = Duration::from_millis(250);
/// How often a directory that is missing (or was replaced) is looked for.
pub const POLL: Duration = Duration::from_secs(1);
/// The most bytes read from one file (as the offline loader reads from one source).
pub const MAX_FILE_BYTES: u64 = palisade_model::MAX_SOURCE_BYTES;
/// The most bytes read in one listing of the directory.
pub const MAX_LISTING_BYTES: u64 = palisade_model::MAX_TOTAL_BYTES;

/// Why the directory cannot be followed at start.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    /// The directory could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// inotify could not watch it.
    #[error("{path}: cannot watch: {source}")]
    Watch {
        /// The path.
        path: PathBuf,
        /// The watcher's error.
        #[source]
        source: notify::Error,
    },
}

/// A running directory source; dropping it stops the watch.
pub struct DirSource {
    stop: Arc<AtomicBool>,
}

impl Drop for DirSource {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Sends every manifest under `root` (then [`Event::Synced`]) and keeps sending changes.
pub fn watch(root: &Path, tx: Sender) -> Result<DirSource, DirError> {
    let read_error = |source| DirError::Read {
        path: root.to_path_buf(),
        source,
    };
    let root = std::fs::canonicalize(root).map_err(read_error)?;
    let meta = std::fs::metadata(&root).map_err(read_error)?;
    if !meta.is_dir() {
        return Err(read_error(std::io::Error::new(
            std::io::ErrorKind::NotADirectory,
            "not a directory",
        )));
    }
    let (raw_tx, raw_rx) = mpsc::channel::<notify::Result<notify::Event>>();
    let mut follower = Follower {
        root: root.clone(),
        raw_tx,
        watcher: None,
        root_identity: None,
        available: true,
        sent: BTreeMap::new(),
        writing: HashSet::new(),
        notified: HashSet::new(),
        tx,
    };
    // Watch first, then list: a change between the two is seen twice, never missed.
    follower.arm().map_err(|source| DirError::Watch {
        path: root.clone(),
        source,
    })?;
    follower.sync();
    let _ = follower.tx.send(Event::Synced);
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    std::thread::Builder::new()
        .name("dir-source".into())
        .spawn(move || follower.run(&raw_rx, &stopped))
        .map_err(read_error)?;
    Ok(DirSource { stop })
}

/// What was sent for one text: the file's identity when read, to skip re-reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Sent {
    /// Its body, read from the file with this identity.
    Text(FileIdentity),
    /// Reported unreadable for this reason.
    Unreadable(String),
}

/// What changes when a file is replaced or rewritten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileIdentity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl FileIdentity {
    fn of(meta: &std::fs::Metadata) -> Self {
        FileIdentity {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            ctime_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
        }
    }
}

/// The source's state between listings.
struct Follower {
    root: PathBuf,
    raw_tx: mpsc::Sender<notify::Result<notify::Event>>,
    watcher: Option<notify::RecommendedWatcher>,
    /// (device, inode) of the directory the watch is on.
    root_identity: Option<(u64, u64)>,
    /// Whether the directory could be listed last time.
    available: bool,
    /// Every text sent and not removed since.
    sent: BTreeMap<String, Sent>,
    /// Regular files opened for writing and not yet closed (as inotify reported them).
    writing: HashSet<PathBuf>,
    /// Paths already reported as skipped (not regular files), to say so once.
    notified: HashSet<String>,
    tx: Sender,
}

impl Follower {
    /// Watches the directory now at the root path (again, if it was replaced).
    fn arm(&mut self) -> Result<(), notify::Error> {
        self.watcher = None;
        let mut watcher = notify::recommended_watcher(self.raw_tx.clone())?;
        watcher.watch(&self.root, RecursiveMode::Recursive)?;
        self.watcher = Some(watcher);
        self.root_identity = directory_identity(&self.root);
        Ok(())
    }

    /// Follows inotify events (debounced) and the poll until the receiver or the
    /// [`DirSource`] is dropped.
    fn run(mut self, raw: &mpsc::Receiver<notify::Result<notify::Event>>, stop: &AtomicBool) {
        loop {
            if stop.load(Ordering::Relaxed) || self.tx.is_closed() {
                return;
            }
            let first = match raw.recv_timeout(POLL) {
                Ok(e) => e,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    self.poll();
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            };
            let mut changed = self.note(first);
            let start = Instant::now();
            while start.elapsed() < MAX_DELAY {
                match raw.recv_timeout(DEBOUNCE) {
                    Ok(e) => changed |= self.note(e),
                    Err(mpsc::RecvTimeoutError::Timeout) => break,
                    Err(mpsc::RecvTimeoutError::Disconnected) => return,
                }
            }
            if changed {
                self.sync();
            }
        }
    }

    /// Records one inotify event; true if the directory may now read differently.
    fn note(&mut self, event: notify::Result<notify::Event>) -> bool {
        let event = match event {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(error = %e, "directory watch error; listing again");
                return true;
            }
        };
        if event.need_rescan() {
            return true;
        }
        match event.kind {
            // Written to (or truncated) in place: wait for the writer to close it.
            EventKind::Modify(ModifyKind::Data(_) | ModifyKind::Any) => {
                for p in &event.paths {
                    if is_regular_file(p) {
                        self.writing.insert(p.clone());
                    }
                }
                false
            }
            // A new regular file is written after its creation: wait for the close.
            EventKind::Create(CreateKind::File | CreateKind::Any) => {
                for p in &event.paths {
                    // (A hard link to an existing file is complete: it has more than one.)
                    if std::fs::symlink_metadata(p)
                        .is_ok_and(|m| m.file_type().is_file() && m.nlink() == 1)
                    {
                        self.writing.insert(p.clone());
                    }
                }
                true
            }
            EventKind::Access(AccessKind::Close(AccessMode::Write)) => {
                for p in &event.paths {
                    self.writing.remove(p);
                }
                true
            }
            // Reading a file (ours included) is not a change.
            EventKind::Access(_) => false,
            // Removed or renamed away: no writer can finish it under this name.
            EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(_)) => {
                for p in &event.paths {
                    if !p.exists() {
                        self.writing.remove(p);
                    }
                }
                true
            }
            _ => true,
        }
    }

    /// Between events: looks for a directory that went missing or was replaced.
    fn poll(&mut self) {
        if !self.available || directory_identity(&self.root) != self.root_identity {
            self.sync();
        }
    }

    /// Lists the directory and sends the difference from what was sent before.
    fn sync(&mut self) {
        let meta = match std::fs::metadata(&self.root) {
            Ok(m) if m.is_dir() => m,
            Ok(_) => return self.unavailable("is no longer a directory".into()),
            Err(e) => return self.unavailable(e.to_string()),
        };
        if Some((meta.dev(), meta.ino())) != self.root_identity || self.watcher.is_none() {
            // A new directory at the root path: watch it, then let writers that were under
            // way when it appeared be seen before it is read.
            if let Err(e) = self.arm() {
                return self.unavailable(format!("cannot watch: {e}"));
            }
            std::thread::sleep(MAX_DELAY);
        }
        self.sync_listed();
    }

    /// [`Follower::sync`] once the root is known to be a directory.
    fn sync_listed(&mut self) {
        let listing = match Listing::of(&self.root) {
            Ok(listing) => listing,
            Err((dir, e)) => {
                return self.unavailable(format!("cannot list {}: {e}", dir.display()));
            }
        };
        let mut put = Vec::new();
        let mut events = Vec::new();
        let mut budget = MAX_LISTING_BYTES;
        for (id, entry) in &listing.entries {
            let previous = self.sent.get(id).cloned();
            let now = match entry {
                Entry::File(path) => {
                    if self.being_written(path) {
                        continue;
                    }
                    match std::fs::metadata(path) {
                        Ok(meta) if meta.is_file() => {
                            let identity = FileIdentity::of(&meta);
                            if previous == Some(Sent::Text(identity)) {
                                budget = budget.saturating_sub(identity.size);
                                continue;
                            }
                            match read(path, budget) {
                                Ok((body, identity)) => {
                                    budget = budget.saturating_sub(identity.size);
                                    put.push(Text {
                                        id: id.clone(),
                                        body: Content::Text(body),
                                    });
                                    Sent::Text(identity)
                                }
                                Err(reason) => Sent::Unreadable(reason),
                            }
                        }
                        Ok(_) => {
                            self.skip_notice(id, "not a regular file");
                            match previous {
                                // It held objects: they stay until the file is removed.
                                Some(_) => Sent::Unreadable("is no longer a regular file".into()),
                                None => continue,
                            }
                        }
                        Err(e) => Sent::Unreadable(e.to_string()),
                    }
                }
                Entry::Loop(target) => Sent::Unreadable(format!(
                    "symbolic link loop: leads back to {}",
                    target.display()
                )),
            };
            if let Sent::Unreadable(reason) = &now
                && previous.as_ref() != Some(&now)
            {
                tracing::error!(file = %id, %reason, "cannot read; what it held stays in force");
                events.push(Event::Unreadable {
                    id: id.clone(),
                    reason: reason.clone(),
                });
            }
            self.sent.insert(id.clone(), now);
        }
        let gone: Vec<String> = self
            .sent
            .keys()
            .filter(|id| !listing.entries.contains_key(*id))
            .cloned()
            .collect();
        for id in &gone {
            self.sent.remove(id);
        }
        self.notified.retain(|id| listing.skipped.contains(id));
        for id in listing.skipped {
            self.skip_notice(&id, "not a regular file");
        }
        let mut out = Vec::new();
        if !self.available {
            self.available = true;
            tracing::info!(dir = %self.root.display(), "directory readable again");
            out.push(Event::Health {
                part: self.part(),
                problem: None,
            });
        }
        if !gone.is_empty() {
            out.push(Event::Remove(gone));
        }
        if !put.is_empty() {
            out.push(Event::Put(put));
        }
        out.extend(events);
        for event in out {
            if self.tx.send(event).is_err() {
                return;
            }
        }
    }

    /// Whether a writer still has `path` (or the file it leads to) open.
    fn being_written(&self, path: &Path) -> bool {
        // (Resolving the path costs system calls: only while something is being written.)
        !self.writing.is_empty()
            && (self.writing.contains(path)
                || std::fs::canonicalize(path).is_ok_and(|real| self.writing.contains(&real)))
    }

    /// The directory cannot be read: keep everything, say so once.
    fn unavailable(&mut self, problem: String) {
        if self.available {
            self.available = false;
            tracing::error!(
                dir = %self.root.display(),
                %problem,
                "cannot read the directory; every object stays in force until it is back"
            );
            let _ = self.tx.send(Event::Health {
                part: self.part(),
                problem: Some(format!("{}: {problem}", self.root.display())),
            });
        }
    }

    fn skip_notice(&mut self, id: &str, why: &str) {
        if self.notified.insert(id.to_string()) {
            tracing::warn!(file = %id, "{why}; skipped");
        }
    }

    fn part(&self) -> String {
        format!("dir:{}", self.root.display())
    }
}

/// One listed path.
#[derive(Debug)]
enum Entry {
    /// A manifest file (or a symlink to one).
    File(PathBuf),
    /// A directory symlink that leads back to this directory (where it leads).
    Loop(PathBuf),
}

/// The manifests under a directory, by id.
#[derive(Debug, Default)]
struct Listing {
    entries: BTreeMap<String, Entry>,
    /// Manifest names that are not regular files (FIFOs, sockets, devices).
    skipped: BTreeSet<String>,
}

impl Listing {
    /// The manifests under `dir`, found as every reader finds them
    /// ([`palisade_model::tree::manifest_tree`]).
    fn of(dir: &Path) -> Result<Listing, (PathBuf, std::io::Error)> {
        let mut listing = Listing::default();
        for entry in manifest_tree(dir)? {
            match entry {
                // A dangling symlink or an unreadable entry that looks like a manifest is
                // a text that cannot be read (what it held stays).
                TreeEntry::File(path) => {
                    listing.entries.insert(id(&path), Entry::File(path));
                }
                TreeEntry::Loop(path) => {
                    let target = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
                    listing.entries.insert(id(&path), Entry::Loop(target));
                }
                TreeEntry::NotRegular(path) => {
                    listing.skipped.insert(id(&path));
                }
            }
        }
        Ok(listing)
    }
}

/// Reads a regular file of at most [`MAX_FILE_BYTES`] (and `budget`) as UTF-8 text
/// without blocking (a FIFO swapped in is not waited on); an empty text is unreadable.
fn read(path: &Path, budget: u64) -> Result<(String, FileIdentity), String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(|e| e.to_string())?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("is not a regular file".into());
    }
    let limit = MAX_FILE_BYTES.min(budget);
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > limit {
        return Err(if limit < MAX_FILE_BYTES {
            format!(
                "the directory holds more than {} MiB, the most one listing reads",
                MAX_LISTING_BYTES >> 20
            )
        } else {
            format!(
                "larger than {} MiB, the most read from one file",
                MAX_FILE_BYTES >> 20
            )
        });
    }
    let body = String::from_utf8(bytes).map_err(|e| {
        format!(
            "not UTF-8 text (byte {} is not valid UTF-8)",
            e.utf8_error().valid_up_to()
        )
    })?;
    if body.trim().is_empty() {
        return Err("empty (its objects stay in force until the file is deleted)".into());
    }
    Ok((body, FileIdentity::of(&meta)))
}

fn id(path: &Path) -> String {
    path.display().to_string()
}

/// (device, inode) of the directory at `path`, if one is there.
fn directory_identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path)
        .ok()
        .filter(std::fs::Metadata::is_dir)
        .map(|m| (m.dev(), m.ino()))
}

fn is_regular_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
}
