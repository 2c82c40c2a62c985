//! Creating a dataset as one step: every kind of dataset (array, table, layer, bcolz import)
//! is built under a staging directory beside its path, `<path>.tmp-build`, and renamed into
//! place when it is complete. Until then nothing at `<path>` changes, so a create that is
//! killed leaves no half-made dataset there, and running it again works.
//!
//! The builder holds the staging directory's writer lock (`meta/lock`) from before it
//! touches anything there until the rename (handles that build inside it take no lock of
//! their own), so two creates of one path cannot mix their
//! files: the second gets [`Error::Locked`]. A staging directory carries `meta/building`,
//! which makes every open refuse it. A staging directory whose lock is free is what a killed
//! create left: the next create of that path removes it.
//!
//! Replacing an existing dataset (`overwrite`) takes that dataset's writer lock first, then
//! swaps the two directories in one atomic exchange where the filesystem offers one
//! (`renameat2(RENAME_EXCHANGE)` on Linux), so a kill leaves exactly the old or the new
//! dataset; where it does not, the old one is renamed aside to `<path>.tmp-old` and the new
//! one renamed in, and a kill between the two renames leaves the old dataset at
//! `<path>.tmp-old` (the next create of that path removes it). See `spec/dataset.md`.
//!
//! The replaced dataset is renamed to `<path>.tmp-old` and its files are removed by a
//! background thread (holding its writer lock), so that a create returns as soon as the new
//! dataset is in place: freeing the old files' pages costs about as much as writing a
//! quarter of the new ones. [`finish_removals`] waits for them (clients call it before
//! their process exits); a process that exits first leaves `<path>.tmp-old`, which the
//! next create of that path removes, as after a kill.

use super::WriterLock;
use crate::error::{Error, Result};
use crate::meta::MetaPaths;
use crate::storage::{sync_tree, Deferred, EntryKind, OpenMode, Storage};
use blz_format::process::PerProcess;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Replaced datasets being removed in the background: their `<path>.tmp-old` and the thread.
/// One list per process: a forked child has none of its parent's removal threads to wait for.
static REMOVALS: PerProcess<Mutex<Removals>> = PerProcess::new();

/// Each removal's directory and thread.
type Removals = Vec<(PathBuf, JoinHandle<()>)>;

fn removals() -> &'static Mutex<Removals> {
    REMOVALS.get_or_init(Mutex::default)
}

/// Waits until the datasets that creates with `overwrite` replaced are removed (they are
/// removed in the background, see [`crate::Dataset::create_with`]). Call it before the
/// process exits, or a replaced dataset stays on disk at `<path>.tmp-old` until the next
/// create of that path. Removal errors are ignored here as they would be after a kill:
/// the next create of the path removes what is left.
pub fn finish_removals() {
    wait_removals(|_| true);
}

/// Waits for the background removals whose directory satisfies `which` (and collects the
/// finished ones, so a long-lived process does not pile them up).
fn wait_removals(which: impl Fn(&Path) -> bool) {
    let mine: Vec<JoinHandle<()>> = match removals().lock() {
        Ok(mut list) => {
            let (take, keep) = std::mem::take(&mut *list)
                .into_iter()
                .partition(|(p, h)| which(p) || h.is_finished());
            *list = keep;
            take.into_iter().map(|(_, h)| h).collect()
        }
        Err(_) => return,
    };
    for h in mine {
        // A removal thread only calls `remove_dir_all`; should it panic, what it left is
        // removed by the next create, as after a kill.
        let _ = h.join();
    }
}

/// Removes the replaced dataset `tmp` (holding its writer lock `lock`): renamed to
/// `<path>.tmp-old` and removed by a background thread, or removed here when that name is
/// taken or the rename fails.
fn retire(storage: &Arc<dyn Storage>, tmp: &Path, path: &Path, lock: WriterLock) -> Result<()> {
    let old = sibling(path, ".tmp-old")?;
    wait_removals(|p| p == old);
    if storage.entry_kind(&old).is_some() || storage.rename(tmp, &old).is_err() {
        drop(lock);
        return storage.remove_dir_all(tmp);
    }
    let s = Arc::clone(storage);
    let dir = old.clone();
    let spawned = std::thread::Builder::new()
        .name("blz-remove".into())
        .spawn(move || {
            // An error leaves files that the next create of the path removes.
            let _ = s.remove_dir_all(&dir);
            drop(lock);
        });
    match spawned {
        Ok(h) => match removals().lock() {
            Ok(mut list) => list.push((old, h)),
            Err(_) => {
                let _ = h.join();
            }
        },
        // No thread to be had: remove it now.
        Err(_) => storage.remove_dir_all(&old)?,
    }
    Ok(())
}

/// `<path><suffix>` beside `path`.
pub(crate) fn sibling(path: &Path, suffix: &str) -> Result<PathBuf> {
    let name = path
        .file_name()
        .ok_or_else(|| Error::InvalidArgument(format!("{} has no file name", path.display())))?;
    let mut n = name.to_os_string();
    n.push(suffix);
    Ok(path.with_file_name(n))
}

/// A dataset being built under `<path>.tmp-build`.
#[derive(Debug)]
pub(crate) struct Staging {
    storage: Arc<dyn Storage>,
    /// `storage` with its syncs put off: what the dataset is built through (nobody reads the
    /// staging directory, and a killed build is removed), made durable whole by
    /// [`publish`](Self::publish) before the rename.
    building: Arc<dyn Storage>,
    path: PathBuf,
    tmp: PathBuf,
    overwrite: bool,
    /// Held from [`begin`](Self::begin) until the staging directory is removed, or handed
    /// to the caller by [`publish`](Self::publish).
    lock: Option<WriterLock>,
    published: bool,
}

impl Staging {
    /// Starts building a dataset of `kind` (what `is_kind` recognises, named with its
    /// article: "a table") at `path`: refuses an
    /// existing path unless `overwrite` and it is a dataset of that kind, takes the staging
    /// directory's lock, and clears what a killed build left there.
    pub(crate) fn begin(
        storage: &Arc<dyn Storage>,
        path: &Path,
        overwrite: bool,
        is_kind: &dyn Fn(&Path) -> bool,
        kind: &str,
    ) -> Result<Staging> {
        if storage.exists(path) {
            let empty_dir = storage.is_dir(path) && storage.list(path)?.is_empty();
            let replaceable = overwrite && is_kind(path);
            if !(empty_dir || replaceable) {
                let what = if is_kind(path) {
                    " (use overwrite to replace it)".to_string()
                } else if storage.is_dir(&path.join("meta")) {
                    // Say why, when its description cannot be read (a FIFO, a link to a
                    // directory, a broken file there).
                    let storage_file = crate::meta::MetaPaths::new(path).storage();
                    match crate::meta::read_json::<serde_json::Value>(
                        storage.as_ref(),
                        &storage_file,
                    ) {
                        Err(e) => format!(" and is not {kind} ({e})"),
                        Ok(_) => format!(" and is not {kind}"),
                    }
                } else {
                    " and is not a blz dataset".to_string()
                };
                return Err(Error::InvalidArgument(format!(
                    "{} already exists{what}",
                    path.display()
                )));
            }
        }
        let tmp = sibling(path, crate::storage::STAGING_SUFFIX)?;
        let meta = tmp.join("meta");
        // The staging directory, made exclusively (or a killed build's, a real directory):
        // a link planted at its name is removed, never followed.
        if let Some(parent) = tmp.parent().filter(|p| !p.as_os_str().is_empty()) {
            storage.create_dir_all(parent)?;
        }
        let lost = |e: Error| lost_race(storage.as_ref(), e, path, &tmp, overwrite);
        real_dir(storage.as_ref(), &tmp).map_err(lost)?;
        real_dir(storage.as_ref(), &meta).map_err(lost)?;
        let lock = WriterLock::acquire(storage.as_ref(), &tmp).map_err(|e| match e {
            Error::Locked { holder, .. } => Error::Locked {
                path: tmp.join("meta").join("lock"),
                holder,
            },
            e => lost(e),
        })?;
        // The directory locked is the one at the name (not a link put there since).
        match storage.entry_kind(&tmp) {
            Some(EntryKind::Dir) => {}
            None => {
                return Err(lost(Error::io(
                    "lock",
                    &tmp,
                    std::io::Error::from(std::io::ErrorKind::NotFound),
                )))
            }
            Some(kind) => {
                return Err(Error::unsupported(
                    &tmp,
                    format!("{kind} took the staging directory's place while it was locked"),
                ))
            }
        }
        // What a killed build left: everything but the lock we hold.
        for name in storage.list(&tmp).map_err(lost)? {
            if name != "meta" {
                remove_any(storage.as_ref(), &tmp.join(name))?;
            }
        }
        for name in storage.list(&meta).map_err(lost)? {
            if name != "lock" {
                remove_any(storage.as_ref(), &meta.join(name))?;
            }
        }
        let old = sibling(path, ".tmp-old")?;
        wait_removals(|p| p == old);
        if storage.entry_kind(&old).is_some() && storage.exists(path) {
            remove_any(storage.as_ref(), &old)?;
        }
        storage.open(&MetaPaths::new(&tmp).building(), OpenMode::Create)?;
        Ok(Staging {
            storage: Arc::clone(storage),
            building: Arc::new(Deferred::new(Arc::clone(storage))),
            path: path.to_path_buf(),
            tmp,
            overwrite,
            lock: Some(lock),
            published: false,
        })
    }

    /// The directory to build in.
    pub(crate) fn dir(&self) -> &Path {
        &self.tmp
    }

    /// The storage to build through: the caller's, with every sync put off until
    /// [`publish`](Self::publish). Nothing built through it may outlive the build.
    pub(crate) fn build_storage(&self) -> &Arc<dyn Storage> {
        &self.building
    }

    /// Puts the built dataset in place: `<path>` holds it afterwards. (Handles on the staging
    /// directory should be dropped first: its paths change.) Returns the writer lock, which
    /// moved with the directory and now guards `<path>`: a caller that goes on writing keeps
    /// it, so no other writer can come between the rename and its next step (and no lock
    /// is released and taken again, which a child process forked at that moment, holding
    /// a copy of the lock's descriptor until it execs, could make fail).
    pub(crate) fn publish(mut self) -> Result<WriterLock> {
        let s = self.storage.as_ref();
        s.remove_file(&MetaPaths::new(&self.tmp).building())?;
        // Everything built, made durable at once: the one moment that must find it so is
        // the rename below.
        sync_tree(s, &self.tmp)?;
        let parent = self
            .path
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        if s.exists(&self.path) && !(s.is_dir(&self.path) && s.list(&self.path)?.is_empty()) {
            if !self.overwrite {
                return Err(Error::InvalidArgument(format!(
                    "{} already exists: another writer created it while this create was \
                     building",
                    self.path.display()
                )));
            }
            // No writer may be at work on the dataset being replaced.
            let old_lock = WriterLock::acquire(s, &self.path)?;
            match s.exchange(&self.tmp, &self.path) {
                Ok(()) => {
                    s.sync_dir(&parent)?;
                    self.published = true;
                    retire(&self.storage, &self.tmp, &self.path, old_lock)?;
                }
                Err(Error::Unsupported { .. }) => {
                    let old = sibling(&self.path, ".tmp-old")?;
                    wait_removals(|p| p == old);
                    remove_any(s, &old)?;
                    s.rename(&self.path, &old)?;
                    s.rename(&self.tmp, &self.path)?;
                    s.sync_dir(&parent)?;
                    self.published = true;
                    s.remove_dir_all(&old)?;
                }
                Err(e) => return Err(e),
            }
        } else {
            if s.is_dir(&self.path) {
                // An empty directory the user made for it.
                s.remove_dir_all(&self.path)?;
            }
            s.rename(&self.tmp, &self.path)?;
            s.sync_dir(&parent)?;
            self.published = true;
        }
        // On an object store, the commit: the new state replaces the old in one conditional
        // write (a filesystem is done already).
        super::commit_point(s, &self.path)?;
        self.lock
            .take()
            .ok_or_else(|| Error::InvalidArgument("the dataset was already published".into()))
    }
}

impl Drop for Staging {
    /// A build that failed (or was abandoned) leaves nothing behind.
    fn drop(&mut self) {
        if !self.published {
            let _ = self.storage.remove_dir_all(&self.tmp);
        }
    }
}

/// Removes what is at `path`: a directory with everything below it, anything else (a link
/// above all, whatever it points to) itself.
fn remove_any(storage: &dyn Storage, path: &Path) -> Result<()> {
    if storage.entry_kind(path) == Some(EntryKind::Dir) {
        storage.remove_dir_all(path)
    } else {
        storage.remove_file(path)
    }
}

/// Makes `dir` a real directory to build in: creates it exclusively, or keeps the real
/// directory already there (what a killed build left); a link, file, FIFO, ... at the name
/// is removed itself (what a link points to is never touched) and the directory made anew.
fn real_dir(storage: &dyn Storage, dir: &Path) -> Result<()> {
    for _ in 0..3 {
        match storage.create_dir_new(dir) {
            Ok(()) => return Ok(()),
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::AlreadyExists => {
            }
            Err(e) => return Err(e),
        }
        match storage.entry_kind(dir) {
            Some(EntryKind::Dir) => return Ok(()),
            Some(_) => storage.remove_file(dir)?,
            None => {}
        }
    }
    Err(Error::io(
        "mkdir",
        dir,
        std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            "something else keeps appearing at this name",
        ),
    ))
}

/// The error of a create whose staging directory `tmp` vanished under it (`e` says where
/// it noticed): another create of `path` published it (or is building it), so this one
/// lost the race. Other errors pass unchanged.
fn lost_race(storage: &dyn Storage, e: Error, path: &Path, tmp: &Path, overwrite: bool) -> Error {
    let vanished = matches!(&e, Error::Io { source, .. }
        if source.kind() == std::io::ErrorKind::NotFound);
    if !vanished {
        return e;
    }
    if !overwrite && storage.exists(path) {
        return Error::InvalidArgument(format!(
            "{} already exists: another writer created it meanwhile",
            path.display()
        ));
    }
    Error::Locked {
        path: tmp.join("meta").join("lock"),
        holder: None,
    }
}
