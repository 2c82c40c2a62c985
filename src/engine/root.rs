//! Opening a dataset root: bringing it to its committed state (a pending journal replayed or
//! viewed), checking its kind, reading `meta/storage` and `meta/attributes`.

use super::lock::{Mode, WriterLock};
use crate::error::{Error, Result};
use crate::meta::{self, MetaPaths};
use crate::storage::Storage;
use crate::txn;
use std::path::Path;
use std::sync::Arc;

/// The directory, under a dataset's root, that holds the sessions of staged writes
/// (`blz::array::staged`); no reader looks in it.
pub const STAGED_DIR: &str = "staged";

/// Removes every staged-write session under the dataset at `root` (and `staged/` itself):
/// what writers that are gone left, since a session lives only while its writer holds the
/// lock. Only the holder of the writer lock may call this, and only once the dataset is in
/// its committed state (a committed journal may still rename files out of a session).
pub(crate) fn remove_abandoned_sessions(storage: &dyn Storage, root: &Path) -> Result<()> {
    let dir = root.join(STAGED_DIR);
    if storage.is_dir(&dir) && !storage.is_symlink(&dir) {
        storage.remove_dir_all(&dir)?;
        storage.sync_dir(root)?;
    }
    Ok(())
}

/// How long a reader waits for a live writer to finish applying its commit before it gives
/// up with [`Error::Locked`] (only a writer stopped in the middle of applying takes that long).
pub const LIVE_APPLY_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Brings a dataset to its committed state before it is read: replays a journal left by a
/// crashed writer (taking the writer lock to do so), or waits for a live writer to finish
/// applying one. A reader that cannot write to the dataset (read-only filesystem, no
/// permission) gets a read-only view that applies the journal in memory instead: the storage
/// to read through is returned, `None` meaning `storage` itself.
pub(crate) fn settle(
    storage: &Arc<dyn Storage>,
    root: &Path,
    mode: Mode,
) -> Result<Option<Arc<dyn Storage>>> {
    let start = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(5);
    loop {
        if !txn::pending(storage.as_ref(), root) {
            return Ok(None);
        }
        if mode == Mode::ReadWrite {
            txn::recover(storage.as_ref(), root)?;
            return Ok(None);
        }
        match WriterLock::acquire(storage.as_ref(), root) {
            Ok(_lock) => {
                txn::recover(storage.as_ref(), root)?;
                return Ok(None);
            }
            Err(Error::Locked { .. }) if start.elapsed() < LIVE_APPLY_WAIT => {
                // A live writer is applying its commit (a large modification on a slow
                // filesystem can take seconds): check again, less and less often.
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(100));
            }
            Err(Error::Io { source, .. })
                if matches!(
                    source.kind(),
                    std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
                ) =>
            {
                return txn::pending_view(storage, root);
            }
            Err(e) => return Err(e),
        }
    }
}

/// The first step of opening any dataset (array or table) at `root`: checks that it has a
/// meta directory and is of the `kind` the caller opens (`None`: an array) before taking the
/// writer lock in read-write mode, brings the dataset to its committed state ([`settle`]),
/// reads `meta/storage` and checks its kind again, and returns it for the caller to
/// interpret, with the storage to read the dataset through ([`settle`]).
///
/// `building`: the dataset is being created in a staging directory whose lock the caller
/// holds ([`crate::staging`]); it opens read-write without taking the lock. Otherwise a
/// staging directory is refused.
pub(crate) fn open_root(
    storage: &Arc<dyn Storage>,
    root: &Path,
    mode: Mode,
    kind: Option<&str>,
    building: bool,
) -> Result<(Option<WriterLock>, serde_json::Value, Arc<dyn Storage>)> {
    let mp = MetaPaths::new(root);
    // Nothing there (never was, or removed under a handle that refreshes): not found,
    // which no reopen changes, rather than a "corrupt" dataset.
    if !storage.exists(root) {
        return Err(Error::io(
            "open",
            root,
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such dataset"),
        ));
    }
    if !storage.is_dir(&mp.dir) {
        return Err(Error::metadata(
            &mp.dir,
            "not a blz dataset (no meta directory)",
        ));
    }
    if !building {
        crate::staging::refuse_building(storage.as_ref(), root)?;
    }
    meta::refuse_other_kind(storage.as_ref(), &mp, kind)?;
    let lock = match mode {
        Mode::ReadWrite if !building => Some(WriterLock::acquire(storage.as_ref(), root)?),
        _ => None,
    };
    let storage = settle(storage, root, mode)?.unwrap_or_else(|| Arc::clone(storage));
    if lock.is_some() {
        remove_abandoned_sessions(storage.as_ref(), root)?;
    }
    let raw = meta::read_json(storage.as_ref(), &mp.storage())?;
    meta::check_dataset_kind(&raw, &mp.storage(), kind)?;
    Ok((lock, raw, storage))
}

/// Reads `meta/attributes` of the dataset at `root`.
pub(crate) fn read_attrs(
    storage: &dyn Storage,
    root: &Path,
) -> Result<serde_json::Map<String, serde_json::Value>> {
    let p = MetaPaths::new(root).attributes();
    if !storage.exists(&p) {
        return Ok(serde_json::Map::new());
    }
    match meta::read_json::<serde_json::Value>(storage, &p)? {
        serde_json::Value::Object(m) => Ok(m),
        _ => Err(Error::metadata(&p, "attributes must be a JSON object")),
    }
}

/// Replaces a dataset's user attributes (`meta/attributes`, written atomically), and on an
/// object store commits that as a new state.
pub(crate) fn write_attrs(
    storage: &dyn Storage,
    root: &Path,
    attrs: serde_json::Map<String, serde_json::Value>,
) -> Result<()> {
    meta::write_json(
        storage,
        &MetaPaths::new(root).attributes(),
        &serde_json::Value::Object(attrs),
    )?;
    storage.publish(root)
}

/// What a read-only handle that opened generation `generation` of the dataset with identity
/// `id` at `root`, and then saw `meta/sizes` with stamp `seen` (through `base`, the storage
/// it was opened with; `via_view` when it opened through a view of a pending journal), must
/// do to show the latest commit: `(true, stamp)` to open again, `(false, stamp)` when it is
/// current, with the stamp of `meta/sizes` to remember either way (taken before anything is
/// read, so a commit in between is seen by the next call).
pub(crate) fn needs_reopen(
    base: &dyn Storage,
    root: &Path,
    via_view: bool,
    seen: Option<[u64; 4]>,
    generation: u64,
    id: &Option<String>,
) -> (bool, Option<[u64; 4]>) {
    // Every commit replaces `meta/sizes`: an unchanged file needs no reading, unless a
    // committed journal is being applied (its data is in place before `meta/sizes` is; the
    // handle is opened again through a view of it). A handle opened through such a view is
    // opened again once the journal is applied.
    let stamp = base.stamp(&MetaPaths::new(root).sizes());
    if !via_view && stamp.is_some() && stamp == seen && !txn::pending(base, root) {
        return (false, stamp);
    }
    // `meta/sizes` was replaced: by a commit (a new generation), or by a new create of the
    // path (another identity; its generation may be the same).
    let current = !via_view
        && meta::generation_now(base, root) == Some(generation)
        && meta::identity_now(base, root) == *id;
    (!current, stamp)
}
