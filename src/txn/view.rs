//! A read-only view of a dataset as its committed journal will leave it, for readers that
//! cannot replay the journal themselves (a read-only filesystem, or no write permission on
//! the dataset) after a writer crashed between its commit point and the end of applying it.
//!
//! The view replays the journal in memory, with the same steps and in the same order as
//! [`crate::txn::apply`]: patches and truncations per file in journal order, then renames
//! (only while the old path exists and the new one does not), then replaced meta files,
//! then removals. Whatever part of the journal already reached the disk, the view shows the
//! state a writer's recovery would produce. The journal file itself is hidden.

use super::Entry;
use crate::error::{Error, Result};
use crate::storage::{atomic_tmp_path, OpenMode, Storage, StorageFile};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A patch or truncation of one file, in journal order.
#[derive(Debug)]
enum Op {
    Patch { offset: u64, data: Vec<u8> },
    SetLen(u64),
}

/// See the module documentation.
#[derive(Debug)]
pub(crate) struct JournalView {
    inner: Arc<dyn Storage>,
    /// Absolute path of a file on `inner` -> its patches and truncations.
    ops: BTreeMap<PathBuf, Arc<Vec<Op>>>,
    /// Renames that take effect, in order (absolute paths).
    renames: Vec<(PathBuf, PathBuf)>,
    /// Files replaced whole (absolute path as seen in the view).
    metas: BTreeMap<PathBuf, Arc<Vec<u8>>>,
    /// Files and directories removed, and the journal itself (absolute paths).
    removed: Vec<PathBuf>,
}

fn read_only(path: &Path) -> Error {
    Error::io(
        "write",
        path,
        std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "read-only view of a dataset whose last commit is not applied yet",
        ),
    )
}

fn not_found(path: &Path) -> Error {
    Error::io(
        "open",
        path,
        std::io::Error::from(std::io::ErrorKind::NotFound),
    )
}

impl JournalView {
    /// The view of the dataset at `root` on `inner` once `entries` (its committed journal,
    /// stored at `journal`) are applied.
    ///
    /// # Errors
    /// An I/O error naming a file the journal patches that does not exist (a writer's
    /// recovery would fail on it too).
    pub(crate) fn new(
        inner: Arc<dyn Storage>,
        root: &Path,
        journal: &Path,
        entries: Vec<Entry>,
    ) -> Result<JournalView> {
        let mut ops: BTreeMap<PathBuf, Vec<Op>> = BTreeMap::new();
        let mut renames = Vec::new();
        let mut metas = BTreeMap::new();
        // Replaying a journal consumes the temporary files of the journal and of the meta
        // files it replaces, which a crash may have left behind.
        let mut removed: Vec<PathBuf> = vec![journal.to_path_buf()];
        removed.extend(atomic_tmp_path(journal));
        for e in entries {
            match e {
                Entry::Patch { path, offset, data } => {
                    ops.entry(root.join(path))
                        .or_default()
                        .push(Op::Patch { offset, data });
                }
                Entry::SetLen { path, len } => {
                    ops.entry(root.join(path))
                        .or_default()
                        .push(Op::SetLen(len));
                }
                Entry::Rename { from, to } => renames.push((root.join(from), root.join(to))),
                Entry::Meta { path, data } => {
                    let path = root.join(path);
                    removed.extend(atomic_tmp_path(&path));
                    metas.insert(path, Arc::new(data));
                }
                Entry::Remove { path } | Entry::RemoveDir { path } => removed.push(root.join(path)),
            }
        }
        for path in ops.keys() {
            if !inner.exists(path) {
                return Err(not_found(path));
            }
        }
        let mut view = JournalView {
            inner,
            ops: ops.into_iter().map(|(p, o)| (p, Arc::new(o))).collect(),
            renames: Vec::new(),
            metas,
            removed,
        };
        // A rename takes effect when, at its turn, its source exists and its target does not.
        for (from, to) in renames {
            if view.exists_before_metas(&from) && !view.exists_before_metas(&to) {
                view.renames.push((from, to));
            }
        }
        Ok(view)
    }

    fn is_removed(&self, path: &Path) -> bool {
        self.removed.iter().any(|r| path.starts_with(r))
    }

    /// The path on `inner` that holds what the view shows at `path` after the renames so
    /// far, or `None` when a rename moved it away.
    fn underlying(&self, path: &Path) -> Option<PathBuf> {
        let mut p = path.to_path_buf();
        for (from, to) in self.renames.iter().rev() {
            if let Ok(rest) = p.strip_prefix(to) {
                // (Joining an empty rest would add a trailing separator, which a file's
                // path must not have.)
                p = if rest.as_os_str().is_empty() {
                    from.clone()
                } else {
                    from.join(rest)
                };
            } else if p.starts_with(from) {
                return None;
            }
        }
        Some(p)
    }

    /// Where `path` ends up in the view once the renames from the `first`-th on have moved
    /// the directories above it.
    fn carried(&self, path: &Path, first: usize) -> PathBuf {
        let mut p = path.to_path_buf();
        for (from, to) in self.renames.iter().skip(first) {
            if let Ok(rest) = p.strip_prefix(from) {
                p = if rest.as_os_str().is_empty() {
                    to.clone()
                } else {
                    to.join(rest)
                };
            }
        }
        p
    }

    /// Existence after the patches and renames, before meta files and removals (used while
    /// deciding which renames take effect).
    fn exists_before_metas(&self, path: &Path) -> bool {
        self.underlying(path).is_some_and(|u| self.inner.exists(&u))
    }
}

/// A file of the view: the file on disk with the journal's patches and truncations laid
/// over it.
struct PatchedFile {
    inner: Box<dyn StorageFile>,
    ops: Arc<Vec<Op>>,
    len: u64,
}

impl PatchedFile {
    fn new(inner: Box<dyn StorageFile>, ops: Arc<Vec<Op>>) -> Result<PatchedFile> {
        let mut len = inner.len()?;
        for op in ops.iter() {
            len = match op {
                // Writing nothing does not extend a file.
                Op::Patch { data, .. } if data.is_empty() => len,
                Op::Patch { offset, data } => len.max(offset.saturating_add(data.len() as u64)),
                Op::SetLen(l) => *l,
            };
        }
        Ok(PatchedFile { inner, ops, len })
    }
}

impl StorageFile for PatchedFile {
    fn len(&self) -> Result<u64> {
        Ok(self.len)
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let end = offset.saturating_add(buf.len() as u64);
        if end > self.len {
            return Err(Error::io(
                "read",
                self.inner.path(),
                std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
            ));
        }
        // The bytes on disk, zeros past their end.
        let on_disk = self.inner.len()?;
        let have = on_disk.clamp(offset, end) - offset;
        self.inner.read_at(offset, &mut buf[..have as usize])?;
        buf[have as usize..].fill(0);
        // Then each step in order: a truncation drops the bytes past it (a later write past
        // the end leaves zeros there), a patch overwrites its range.
        for op in self.ops.iter() {
            match op {
                Op::SetLen(l) => {
                    let from = (*l).clamp(offset, end) - offset;
                    buf[from as usize..].fill(0);
                }
                Op::Patch { offset: at, data } => {
                    let a = (*at).clamp(offset, end);
                    let b = at.saturating_add(data.len() as u64).clamp(offset, end);
                    if a < b {
                        buf[(a - offset) as usize..(b - offset) as usize]
                            .copy_from_slice(&data[(a - at) as usize..(b - at) as usize]);
                    }
                }
            }
        }
        Ok(())
    }

    fn write_at(&self, _offset: u64, _data: &[u8]) -> Result<()> {
        Err(read_only(self.inner.path()))
    }

    fn set_len(&self, _len: u64) -> Result<()> {
        Err(read_only(self.inner.path()))
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }

    fn path(&self) -> &Path {
        self.inner.path()
    }
}

/// A meta file the journal replaces, served from memory.
struct MemFile {
    data: Arc<Vec<u8>>,
    path: PathBuf,
}

impl StorageFile for MemFile {
    fn len(&self) -> Result<u64> {
        Ok(self.data.len() as u64)
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let src = usize::try_from(offset)
            .ok()
            .and_then(|o| self.data.get(o..)?.get(..buf.len()))
            .ok_or_else(|| {
                Error::io(
                    "read",
                    &self.path,
                    std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
                )
            })?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn write_at(&self, _offset: u64, _data: &[u8]) -> Result<()> {
        Err(read_only(&self.path))
    }

    fn set_len(&self, _len: u64) -> Result<()> {
        Err(read_only(&self.path))
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

impl Storage for JournalView {
    fn open(&self, path: &Path, mode: OpenMode) -> Result<Box<dyn StorageFile>> {
        if mode != OpenMode::Read {
            return Err(read_only(path));
        }
        if self.is_removed(path) {
            return Err(not_found(path));
        }
        if let Some(data) = self.metas.get(path) {
            return Ok(Box::new(MemFile {
                data: Arc::clone(data),
                path: path.to_path_buf(),
            }));
        }
        let u = self.underlying(path).ok_or_else(|| not_found(path))?;
        let file = self.inner.open(&u, OpenMode::Read)?;
        match self.ops.get(&u) {
            Some(ops) => Ok(Box::new(PatchedFile::new(file, Arc::clone(ops))?)),
            None => Ok(file),
        }
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        if self.is_removed(dir) {
            return Err(not_found(dir));
        }
        let u = self.underlying(dir).ok_or_else(|| not_found(dir))?;
        let mut names: Vec<String> = if self.inner.is_dir(&u) {
            self.inner.list(&u)?
        } else {
            Vec::new()
        };
        let here = |p: &PathBuf| p.parent() == Some(dir);
        let name = |p: &PathBuf| p.file_name().map(|n| n.to_string_lossy().into_owned());
        // A rename's target may itself have been carried elsewhere by a later rename of a
        // directory above it (`a -> e/w`, then `e -> y` shows `w` in `y`).
        names.extend(
            self.renames
                .iter()
                .enumerate()
                .map(|(i, (_, to))| self.carried(to, i + 1))
                .filter(here)
                .filter_map(|p| name(&p)),
        );
        names.extend(self.metas.keys().filter(|p| here(p)).filter_map(name));
        names.sort();
        names.dedup();
        // Drops what was renamed away or removed (and the journal).
        names.retain(|n| self.exists(&dir.join(n)));
        Ok(names)
    }

    fn rename(&self, from: &Path, _to: &Path) -> Result<()> {
        Err(read_only(from))
    }

    fn exchange(&self, a: &Path, _b: &Path) -> Result<()> {
        Err(read_only(a))
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        Err(read_only(path))
    }

    fn remove_dir_all(&self, path: &Path) -> Result<()> {
        Err(read_only(path))
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        Err(read_only(path))
    }

    fn lock(&self, path: &Path) -> Result<crate::storage::LockGuard> {
        Err(read_only(path))
    }

    fn exists(&self, path: &Path) -> bool {
        !self.is_removed(path)
            && (self.metas.contains_key(path)
                || self.underlying(path).is_some_and(|u| self.inner.exists(&u)))
    }

    fn is_dir(&self, path: &Path) -> bool {
        !self.is_removed(path)
            && !self.metas.contains_key(path)
            && self.underlying(path).is_some_and(|u| self.inner.is_dir(&u))
    }

    fn sync_dir(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }
}
