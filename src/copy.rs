//! Copying a whole dataset between storages: a local directory to an object store (upload),
//! an object store to a local directory (download), memory to either (saving an in-memory
//! dataset) or either to memory (loading one), or any to the same kind. What
//! `blz copy SRC DST` does.
//!
//! The copy is built like a create (`staging::Staging`): under `<dst>.tmp-build`, renamed
//! into place when complete, so the destination appears whole or not at all. On an object
//! store the build lives in the local overlay and appears with one conditional write of the
//! destination's state object (`spec/object-store.md` §7).

use crate::engine::{new_handle_id, SharedWriter};
use crate::error::{Error, Result};
use crate::staging::Staging;
use crate::storage::{for_path, EntryKind, OpenMode, Storage};
use rayon::prelude::*;
use std::path::{Path, PathBuf};

/// Bytes moved per read and write.
const PIECE: u64 = 8 << 20;

/// What [`copy_dataset`] copied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Copied {
    /// Files copied.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// The dataset's files below `dir` (relative to `root`), depth first, sorted, bookkeeping
/// left out. Only regular files and real directories are a dataset's own: anything else
/// (a symbolic link, to a file or a directory, inside the dataset or out of it; a FIFO, a
/// socket, a device) is refused by name, before anything is copied, so a copy never
/// carries a file from outside the dataset nor waits on a FIFO.
fn walk(storage: &dyn Storage, root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for name in storage.list(&root.join(dir))? {
        let rel = dir.join(&name);
        if is_bookkeeping(&rel) {
            continue;
        }
        let path = root.join(&rel);
        match storage.entry_kind(&path) {
            Some(EntryKind::Dir) => walk(storage, root, &rel, out)?,
            Some(EntryKind::File) => out.push(rel),
            Some(kind) => {
                return Err(Error::unsupported(
                    &path,
                    format!(
                        "{kind} inside the dataset: a copy copies only the dataset's own \
                         regular files and directories (remove it, or put the file it \
                         stands for in its place)"
                    ),
                ))
            }
            None => {
                return Err(Error::io(
                    "stat",
                    &path,
                    std::io::Error::from(std::io::ErrorKind::NotFound),
                ))
            }
        }
    }
    Ok(())
}

/// Files of a dataset that are the writer's bookkeeping, not its content.
fn is_bookkeeping(rel: &Path) -> bool {
    let Ok(m) = rel.strip_prefix("meta") else {
        return false;
    };
    let name = m.to_string_lossy();
    name == "lock" || name.starts_with("journal") || name.ends_with(".tmp")
}

/// Copies the dataset (array, table or layer) at `src` to `dst`, each a local path or an
/// `s3://bucket/key` URL. The source's writer lock is held meanwhile (on an object store a
/// reader's snapshot cannot change anyway); the destination appears whole when the copy is
/// complete, replacing an existing dataset there only with `overwrite`.
///
/// # Errors
/// [`Error::InvalidArgument`] when `src` is not a blz dataset or `dst` exists (without
/// `overwrite`); [`Error::Unsupported`] naming an entry of `src` that is not a regular file
/// or a directory (a symbolic link, a FIFO, ...), before anything is written; [`Error::Locked`] while a writer works on `src`; [`Error::Conflict`] when
/// another writer committed to an object-store `dst` meanwhile; I/O errors.
pub fn copy_dataset(src: &Path, dst: &Path, overwrite: bool) -> Result<Copied> {
    let (ss, sroot) = for_path(src)?;
    let (ds, droot) = for_path(dst)?;
    copy_between(&ss, &sroot, &ds, &droot, src, overwrite)
}

/// [`copy_dataset`] into the dataset root `droot` of the storage `ds` (a private
/// [`MemoryStorage`](crate::storage::MemoryStorage), an anonymous in-memory dataset's
/// storage from [`memory::anonymous`](crate::storage::memory::anonymous), ...).
///
/// # Errors
/// As [`copy_dataset`].
pub fn copy_into(
    src: &Path,
    ds: &std::sync::Arc<dyn Storage>,
    droot: &Path,
    overwrite: bool,
) -> Result<Copied> {
    let (ss, sroot) = for_path(src)?;
    copy_between(&ss, &sroot, ds, droot, src, overwrite)
}

fn copy_between(
    ss: &std::sync::Arc<dyn Storage>,
    sroot: &Path,
    ds: &std::sync::Arc<dyn Storage>,
    droot: &Path,
    src: &Path,
    overwrite: bool,
) -> Result<Copied> {
    let (sroot, droot) = (sroot.to_path_buf(), droot.to_path_buf());
    if crate::meta::dataset_kind(ss.as_ref(), &sroot).is_none() {
        let described = crate::meta::MetaPaths::new(&sroot).storage();
        if ss.entry_kind(&described).is_some() {
            // There but unreadable (not a regular file, not JSON): that error names it.
            crate::meta::read_json::<serde_json::Value>(ss.as_ref(), &described)?;
        }
        return Err(Error::InvalidArgument(format!(
            "{}: not a blz dataset (no readable meta/storage)",
            src.display()
        )));
    }
    // No write meanwhile: the writer lock, or, when this process writes the dataset through
    // open handles, a turn of their shared writer (saving a dataset open for writing).
    let (writer, _) = SharedWriter::join(ss.as_ref(), &sroot)?;
    let _turn = writer.turn(new_handle_id())?;
    // A committed journal not yet applied (a writer was killed) is applied first.
    crate::txn::recover(ss.as_ref(), &sroot)?;
    let mut files = Vec::new();
    walk(ss.as_ref(), &sroot, Path::new(""), &mut files)?;
    let is_dataset = |p: &Path| crate::meta::dataset_kind(ds.as_ref(), p).is_some();
    let staging = Staging::begin(ds, &droot, overwrite, &is_dataset, "a blz dataset")?;
    let tmp = staging.dir().to_path_buf();
    // Built through the staging's storage: every file is synced at once when it publishes.
    let build = std::sync::Arc::clone(staging.build_storage());
    let mut dirs: Vec<PathBuf> = files
        .iter()
        .filter_map(|f| f.parent().map(Path::to_path_buf))
        .collect();
    dirs.sort();
    dirs.dedup();
    for d in dirs {
        build.create_dir_all(&tmp.join(d))?;
    }
    let bytes = files
        .par_iter()
        .map(|rel| {
            copy_file(
                ss.as_ref(),
                &sroot.join(rel),
                build.as_ref(),
                &tmp.join(rel),
            )
        })
        .try_reduce(|| 0, |a, b| Ok(a + b))?;
    staging.publish()?;
    Ok(Copied {
        files: files.len() as u64,
        bytes,
    })
}

fn copy_file(ss: &dyn Storage, from: &Path, ds: &dyn Storage, to: &Path) -> Result<u64> {
    let src = ss.open(from, OpenMode::Read)?;
    let len = src.len()?;
    let dst = ds.open(to, OpenMode::Create)?;
    let mut buf = Vec::new();
    let mut at = 0;
    while at < len {
        let n = (len - at).min(PIECE);
        buf.resize(n as usize, 0);
        src.read_at(at, &mut buf)?;
        dst.write_at(at, &buf)?;
        at += n;
    }
    dst.sync()?;
    Ok(len)
}
