//! The manifests under a directory, found the same way by every reader (the offline
//! loader, the agent's directory source): `*.yaml`, `*.yml` and `*.json`, recursively, in
//! name order.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// One entry found under a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeEntry {
    /// A manifest to read: a regular file, a symlink to one, or a dangling symlink (reading
    /// it reports the error).
    File(PathBuf),
    /// A directory symlink that leads back to a directory being listed.
    Loop(PathBuf),
    /// A manifest name that is not a regular file (a FIFO, socket or device: never opened).
    NotRegular(PathBuf),
}

/// Every manifest under `dir`. Hidden names (a leading `.`: `.git`, editors' swap files,
/// a ConfigMap volume's `..data`) are skipped with all they contain; symlinks are followed,
/// and a directory reached twice is listed once. An error names the directory that could
/// not be listed.
pub fn manifest_tree(dir: &Path) -> Result<Vec<TreeEntry>, (PathBuf, std::io::Error)> {
    let mut out = Vec::new();
    visit(dir, &mut Vec::new(), &mut HashSet::new(), &mut out)?;
    Ok(out)
}

/// Whether a name is a manifest's: `*.yaml`, `*.yml` or `*.json`, not hidden.
pub fn is_manifest(path: &Path) -> bool {
    !hidden(path)
        && path
            .extension()
            .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
}

fn hidden(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with('.'))
}

fn visit(
    dir: &Path,
    ancestors: &mut Vec<(u64, u64)>,
    visited: &mut HashSet<(u64, u64)>,
    out: &mut Vec<TreeEntry>,
) -> Result<(), (PathBuf, std::io::Error)> {
    let io = |e| (dir.to_path_buf(), e);
    let meta = std::fs::metadata(dir).map_err(io)?;
    let identity = (meta.dev(), meta.ino());
    if ancestors.contains(&identity) {
        out.push(TreeEntry::Loop(dir.to_path_buf()));
        return Ok(());
    }
    if !visited.insert(identity) {
        return Ok(());
    }
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| !hidden(p))
        .collect();
    names.sort();
    ancestors.push(identity);
    for path in names {
        match std::fs::metadata(&path) {
            // A subdirectory that cannot be listed is an error, never taken as empty.
            Ok(m) if m.is_dir() => visit(&path, ancestors, visited, out)?,
            Ok(m) if is_manifest(&path) && !m.is_file() => out.push(TreeEntry::NotRegular(path)),
            _ if is_manifest(&path) => out.push(TreeEntry::File(path)),
            _ => {}
        }
    }
    ancestors.pop();
    Ok(())
}
