//! The directory source: every `*.yaml`, `*.yml` and `*.json` file under a directory
//! (recursively; names starting with `.` are skipped, as editors' swap files are), watched
//! with inotify. Changes are debounced so that an editor's write-rename-chmod sequence, or
//! `git checkout` of many files, arrives as one batch.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use notify::{RecursiveMode, Watcher};

use super::{Event, Sender, Text};

/// How long the directory must stay quiet before a batch is sent.
pub const DEBOUNCE: Duration = Duration::from_millis(50);
/// The longest a batch waits while changes keep coming.
pub const MAX_DELAY: Duration = Duration::from_millis(250);

/// Why the directory cannot be watched.
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
    _watcher: notify::RecommendedWatcher,
}

/// Sends every manifest under `root` (then [`Event::Synced`]) and keeps sending changes.
pub fn watch(root: &Path, tx: Sender) -> Result<DirSource, DirError> {
    let (raw_tx, raw_rx) = mpsc::channel::<notify::Result<notify::Event>>();
    let mut watcher = notify::recommended_watcher(raw_tx).map_err(|source| DirError::Watch {
        path: root.to_path_buf(),
        source,
    })?;
    // Watch first, then list: a change between the two is seen twice, never missed.
    watcher
        .watch(root, RecursiveMode::Recursive)
        .map_err(|source| DirError::Watch {
            path: root.to_path_buf(),
            source,
        })?;
    let texts = scan(root).map_err(|source| DirError::Read {
        path: root.to_path_buf(),
        source,
    })?;
    let _ = tx.send(Event::Put(texts));
    let _ = tx.send(Event::Synced);
    let root = root.to_path_buf();
    std::thread::Builder::new()
        .name("dir-source".into())
        .spawn(move || forward(&root, &raw_rx, &tx))
        .map_err(|source| DirError::Read {
            path: PathBuf::from("<thread>"),
            source,
        })?;
    Ok(DirSource { _watcher: watcher })
}

/// Turns raw inotify events into debounced batches until either channel closes.
fn forward(root: &Path, raw: &mpsc::Receiver<notify::Result<notify::Event>>, tx: &Sender) {
    loop {
        let Ok(first) = raw.recv() else { return };
        let mut paths = BTreeSet::new();
        let mut rescan = false;
        collect(first, &mut paths, &mut rescan);
        if paths.is_empty() && !rescan {
            continue;
        }
        let start = Instant::now();
        while start.elapsed() < MAX_DELAY {
            match raw.recv_timeout(DEBOUNCE) {
                Ok(e) => collect(e, &mut paths, &mut rescan),
                Err(mpsc::RecvTimeoutError::Timeout) => break,
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
        }
        let events = if rescan {
            vec![rescan_under(root)]
        } else {
            changes(&paths)
        };
        for event in events {
            if tx.send(event).is_err() {
                return;
            }
        }
    }
}

fn collect(event: notify::Result<notify::Event>, paths: &mut BTreeSet<PathBuf>, rescan: &mut bool) {
    match event {
        Ok(e) if e.need_rescan() => *rescan = true,
        // Reading a file (ours included) is not a change.
        Ok(e) if matches!(e.kind, notify::EventKind::Access(_)) => {}
        Ok(e) => paths.extend(e.paths),
        Err(e) => {
            tracing::warn!(error = %e, "directory watch error; rescanning");
            *rescan = true;
        }
    }
}

/// The events for a set of changed paths: files read or removed, directories rescanned.
fn changes(paths: &BTreeSet<PathBuf>) -> Vec<Event> {
    let mut put = Vec::new();
    let mut removed = Vec::new();
    let mut events = Vec::new();
    for path in paths {
        if path.is_dir() {
            events.push(rescan_under(path));
        } else if !path.exists() {
            removed.push(id(path));
            // It may have been a directory: whatever was under it is gone too.
            events.push(Event::Replace {
                prefix: format!("{}/", id(path)),
                texts: Vec::new(),
            });
        } else if is_manifest(path) {
            match read(path) {
                Ok(text) => put.push(text),
                Err(e) => tracing::warn!(
                    file = %path.display(),
                    error = %e,
                    "cannot read; its last version stays in force"
                ),
            }
        }
    }
    if !removed.is_empty() {
        events.insert(0, Event::Remove(removed));
    }
    if !put.is_empty() {
        events.push(Event::Put(put));
    }
    events
}

fn rescan_under(dir: &Path) -> Event {
    match scan(dir) {
        Ok(texts) => Event::Replace {
            prefix: format!("{}/", id(dir)),
            texts,
        },
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot rescan; nothing changed");
            Event::Put(Vec::new())
        }
    }
}

/// Every manifest under `dir`, in name order.
pub fn scan(dir: &Path) -> std::io::Result<Vec<Text>> {
    let mut out = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for path in entries {
        if hidden(&path) {
            continue;
        }
        if path.is_dir() {
            out.extend(scan(&path)?);
        } else if is_manifest(&path) {
            match read(&path) {
                Ok(text) => out.push(text),
                Err(e) => {
                    tracing::warn!(file = %path.display(), error = %e, "cannot read; skipped")
                }
            }
        }
    }
    Ok(out)
}

fn read(path: &Path) -> std::io::Result<Text> {
    let bytes = std::fs::read(path)?;
    let body = String::from_utf8(bytes).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "not UTF-8 text (byte {} is not valid UTF-8)",
                e.utf8_error().valid_up_to()
            ),
        )
    })?;
    Ok(Text { id: id(path), body })
}

fn id(path: &Path) -> String {
    path.display().to_string()
}

fn hidden(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with('.'))
}

fn is_manifest(path: &Path) -> bool {
    !hidden(path)
        && path
            .extension()
            .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
}
