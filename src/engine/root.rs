//! Opening a dataset root: bringing it to its committed state (a pending journal replayed or
//! viewed), checking its kind, reading `meta/storage` and `meta/attributes`.

use super::lock::{Mode, WriterLock};
use super::shared::{new_handle_id, SharedWriter, Turn};
use crate::error::{Error, Result};
use crate::meta::{self, Kind, MetaPaths};
use crate::storage::Storage;
use crate::txn::{self, Txn};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The directory, under a dataset's root, that holds the sessions of staged writes
/// (`blz::array::staged`); no reader looks in it.
pub(crate) const STAGED_DIR: &str = "staged";

/// Refuses a directory that is a dataset still being built (or whose build was killed).
fn refuse_building(storage: &dyn Storage, root: &Path) -> Result<()> {
    let marker = MetaPaths::new(root).building();
    if storage.exists(&marker) {
        return Err(Error::metadata(
            marker,
            "a dataset still being created (or whose creation was interrupted): it does not \
             open; create it again to replace it",
        ));
    }
    Ok(())
}

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

/// Removes what a writer stopped before its commit point left in `meta/`: the temporary
/// file of an atomic replacement (`sizes.tmp`, `storage.tmp`, `attributes.tmp`) or of a
/// journal never renamed into place (`journal.tmp`). Nothing reads them; only the holder of
/// the writer lock calls this, once the dataset is settled (no journal pending).
fn remove_meta_leftovers(storage: &dyn Storage, mp: &MetaPaths) -> Result<()> {
    for name in ["sizes.tmp", "storage.tmp", "attributes.tmp", "journal.tmp"] {
        let p = mp.dir.join(name);
        if storage.entry_kind(&p) == Some(crate::storage::EntryKind::File) {
            storage.remove_file(&p)?;
        }
    }
    Ok(())
}

/// How long a reader waits for a live writer to finish applying its commit before it gives
/// up with [`Error::Locked`] (only a writer stopped in the middle of applying takes that long).
const LIVE_APPLY_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

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

/// What [`open_root`] found: the writer (writing) with the handle's turn, held until the
/// handle is built, the `meta/storage` document, the storage to read through, and the kind.
type Settled = (
    Option<(Arc<SharedWriter>, Turn)>,
    serde_json::Value,
    Arc<dyn Storage>,
    Kind,
);

/// The first step of opening any dataset at `root`: checks that it has a meta directory
/// (and, writing, that its kind is `expect` before the writer lock is taken, so the wrong
/// kind leaves no `meta/lock` behind), brings the dataset to its committed state
/// ([`settle`]), then reads `meta/storage` once: its kind, checked against `expect`
/// (`None`: any kind, [`crate::open`]), and the document for the kind to interpret, with
/// the storage to read the dataset through ([`settle`]).
///
/// `building`: the dataset is being created in a staging directory whose lock the caller
/// holds ([`crate::staging`]); it opens read-write without taking the lock. Otherwise a
/// staging directory is refused.
///
/// Writing, the handle (numbered `handle`) joins the writer this process has for the
/// dataset (`rejoin` when it opens again), or a new one that takes the writer lock
/// ([`SharedWriter::join`]); it opens during its turn, so no other handle of the process
/// writes meanwhile. Only a new writer removes the sessions of staged writes (those of
/// the other handles are alive).
pub(crate) fn open_root(
    storage: &Arc<dyn Storage>,
    root: &Path,
    mode: Mode,
    expect: Option<Kind>,
    building: bool,
    handle: u64,
    rejoin: Option<&Arc<SharedWriter>>,
) -> Result<Settled> {
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
        return Err(Error::NotBlz {
            path: mp.dir.clone(),
            reason: "no meta directory".into(),
        });
    }
    if !building {
        refuse_building(storage.as_ref(), root)?;
    }
    let lock = match mode {
        Mode::ReadWrite if !building => {
            // Only a writer leaves something behind (its lock file): the kind is checked
            // before, from the document as it is now (an unreadable one is left to the
            // read below, once the dataset is settled).
            if let Ok(raw) = meta::read_json::<serde_json::Value>(storage.as_ref(), &mp.storage()) {
                kind_to_open(&raw, root, mode, expect)?;
            }
            let (writer, first) = match rejoin {
                Some(w) => (Arc::clone(w), false),
                None => SharedWriter::join(storage.as_ref(), root)?,
            };
            let turn = writer.turn(handle)?;
            Some((writer, turn, first))
        }
        _ => None,
    };
    let storage = settle(storage, root, mode)?.unwrap_or_else(|| Arc::clone(storage));
    if let Some((_, _, first)) = &lock {
        if *first {
            remove_abandoned_sessions(storage.as_ref(), root)?;
        }
        remove_meta_leftovers(storage.as_ref(), &mp)?;
    }
    let raw = meta::read_json(storage.as_ref(), &mp.storage())?;
    let kind = kind_to_open(&raw, root, mode, expect)?;
    Ok((lock.map(|(w, t, _)| (w, t)), raw, storage, kind))
}

/// The kind that the `meta/storage` document `raw` of the dataset at `root` names, checked
/// against `expect` (`None`: any kind); a layer, written once and then only read, is refused
/// for writing.
fn kind_to_open(
    raw: &serde_json::Value,
    root: &Path,
    mode: Mode,
    expect: Option<Kind>,
) -> Result<Kind> {
    let path = MetaPaths::new(root).storage();
    let kind = match expect {
        Some(k) => {
            meta::check_dataset_kind(raw, &path, k)?;
            k
        }
        None => Kind::of_storage_doc(raw, &path)?,
    };
    if mode == Mode::ReadWrite && kind == Kind::Layer {
        return Err(Error::ReadOnly {
            path: root.to_path_buf(),
        });
    }
    Ok(kind)
}

/// Reads `meta/attributes` of the dataset at `root`.
fn read_attrs(
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

/// The one place where a change reaches the store: after a transaction committed on the
/// storage's files ([`Root::commit`]), or a staged create was renamed into place
/// ([`crate::staging`]), the backend makes it visible to every other reader in its own
/// atomic step ([`Storage::publish`]: nothing on a filesystem, where the journal rename
/// already was that step; the conditional write of the state object on an object store).
/// Nothing else in blz calls [`Storage::publish`] (`tests/one_door.rs` checks it).
pub(crate) fn commit_point(storage: &dyn Storage, root: &Path) -> Result<()> {
    // The front matter of superchunk files is what an object store keeps beside its state,
    // so that a chunk read is one request.
    storage.publish_with_front(root, &crate::blpk::front_ranges)
}

/// A dataset's root, as every kind of dataset holds it: where it is, the storage it is
/// read through, the writer lock of a writing handle, and what a read-only handle knows of
/// the commit it shows. It owns the lifecycle every kind shares: opening ([`Root::open`]:
/// settling a pending journal, the kind read once), the one commit door
/// ([`Root::commit`]), attributes, and telling a read that met another commit
/// ([`Root::unless_changed`]) or a handle that needs reopening ([`Root::stale`]).
///
/// It dereferences to the root's path.
#[derive(Debug)]
pub(crate) struct Root {
    path: PathBuf,
    /// The storage the dataset is read through (a view of a pending journal over `base`
    /// for a reader that cannot apply it).
    pub(crate) storage: Arc<dyn Storage>,
    /// The storage it was opened through, to open it again on a refresh.
    pub(crate) base: Arc<dyn Storage>,
    pub(crate) mode: Mode,
    /// The writer a writing handle shares with the other writing handles of this process
    /// on the dataset (holding the writer lock).
    writer: Option<Arc<SharedWriter>>,
    /// This handle's number, for the writer's turns.
    handle: u64,
    /// The writer's commit count ([`SharedWriter::commits`]) of the state this handle shows.
    seen: AtomicU64,
    /// The turn held while the handle opens (a writing handle is built from the dataset's
    /// files while no other handle writes); the kind drops it once built ([`Root::opened`]).
    opening: Option<Turn>,
    /// Being created in a staging directory: its commits stay there until the create
    /// publishes the whole dataset ([`crate::staging`]).
    building: bool,
    /// `meta/sizes`' [`Storage::stamp`] when [`Root::stale`] last found it current.
    sizes_stamp: Option<[u64; 4]>,
    /// A read-only handle's stamp of the `meta/sizes` it shows (taken before reading it), to
    /// tell a read that met a commit ([`meta::whole_unless_committed`]); `None` for a
    /// writing handle (nothing commits under it) or one opened through a journal view.
    read_stamp: meta::ReadSnapshot,
}

impl std::ops::Deref for Root {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for Root {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl Root {
    /// Opens the root at `path` ([`open_root`]): the root, its kind, and its `meta/storage`
    /// document for the kind to interpret. Nothing has read `meta/sizes` yet: the kind reads
    /// it next (a read-only handle's stamp of it is taken here, before).
    ///
    /// # Errors
    /// As [`open_root`].
    pub(crate) fn open(
        storage: &Arc<dyn Storage>,
        path: &Path,
        mode: Mode,
        expect: Option<Kind>,
        building: bool,
    ) -> Result<(Root, Kind, serde_json::Value)> {
        let base = Arc::clone(storage);
        let handle = new_handle_id();
        let (writer, raw, storage, kind) =
            open_root(&base, path, mode, expect, building, handle, None)?;
        let read_stamp = meta::ReadSnapshot::new(
            (mode == Mode::ReadOnly && Arc::ptr_eq(&storage, &base))
                .then(|| meta::sizes_stamp(base.as_ref(), path))
                .flatten(),
        );
        let root = Root {
            path: path.to_path_buf(),
            storage,
            base,
            mode,
            seen: AtomicU64::new(writer.as_ref().map_or(0, |(w, _)| w.commits())),
            handle,
            opening: None,
            writer: None,
            building,
            sizes_stamp: None,
            read_stamp,
        }
        .with_writer(writer);
        Ok((root, kind, raw))
    }

    /// This root with `writer` (the shared writer and the turn held while opening).
    fn with_writer(mut self, writer: Option<(Arc<SharedWriter>, Turn)>) -> Root {
        if let Some((w, t)) = writer {
            self.writer = Some(w);
            self.opening = Some(t);
        }
        self
    }

    /// A writing handle's root opened again (the same writer, the same handle, in its
    /// turn until [`Root::opened`]), to catch up with commits other handles of this
    /// process made; with its `meta/storage` document, checked to be of kind `expect`.
    ///
    /// # Errors
    /// As [`Root::open`].
    pub(crate) fn reopen(&self, expect: Kind) -> Result<(Root, serde_json::Value)> {
        let Some(w) = &self.writer else {
            return Err(Error::ReadOnly {
                path: self.path.clone(),
            });
        };
        let (writer, raw, storage, _) = open_root(
            &self.base,
            &self.path,
            Mode::ReadWrite,
            Some(expect),
            false,
            self.handle,
            Some(w),
        )?;
        let root = Root {
            path: self.path.clone(),
            storage,
            base: Arc::clone(&self.base),
            mode: Mode::ReadWrite,
            seen: AtomicU64::new(w.commits()),
            handle: self.handle,
            opening: None,
            writer: None,
            building: false,
            sizes_stamp: None,
            read_stamp: meta::ReadSnapshot::new(None),
        }
        .with_writer(writer);
        Ok((root, raw))
    }

    /// Ends the turn a writing handle held while it opened (the kind built it).
    pub(crate) fn opened(&mut self) {
        self.opening = None;
    }

    /// This handle's turn to write, when it shares a writer ([`SharedWriter::turn`]):
    /// held until dropped. `None` for a handle that writes alone (a dataset being built)
    /// or reads.
    ///
    /// # Errors
    /// As [`SharedWriter::turn`].
    pub(crate) fn turn(&self) -> Result<Option<Turn>> {
        self.writer
            .as_ref()
            .map(|w| w.turn(self.handle))
            .transpose()
    }

    /// Whether another writing handle of this process committed since this handle last
    /// read the dataset's state: it must catch up ([`Root::reopen`]) before it writes, and
    /// a read through it fails with [`Error::Changed`]. One atomic load.
    pub(crate) fn behind(&self) -> bool {
        self.writer
            .as_ref()
            .is_some_and(|w| w.commits() != self.seen.load(Ordering::SeqCst))
    }

    /// The root's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Hands this handle the writer lock of the dataset a create just published (opened
    /// without taking it, the create holding it): from now on it commits as any writer.
    pub(crate) fn hold(&mut self, lock: WriterLock) {
        let w = SharedWriter::adopt(self.base.as_ref(), &self.path, lock);
        self.seen.store(w.commits(), Ordering::SeqCst);
        self.writer = Some(w);
        self.building = false;
    }

    /// [`Error::ReadOnly`] unless this handle writes.
    pub(crate) fn check_writable(&self) -> Result<()> {
        match self.mode {
            Mode::ReadWrite => Ok(()),
            Mode::ReadOnly => Err(Error::ReadOnly {
                path: self.path.clone(),
            }),
        }
    }

    /// Commits `txn` (opened on this root's storage): its files first (the journal and
    /// its rename on a filesystem), then the backend's [`commit_point`]. The one door every
    /// change of an open dataset goes through. A dataset being built publishes nothing
    /// until its create does, whole.
    ///
    /// # Errors
    /// As [`Txn::commit_files`] and [`Storage::publish`] ([`Error::Conflict`] on an object
    /// store when another writer committed first).
    pub(crate) fn commit(&self, txn: Txn<'_>) -> Result<()> {
        // Within the handle's turn (its write took it already: this is the same turn).
        let _turn = self.turn()?;
        let before = self.writer.as_ref().map(|w| {
            let n = w.commits();
            w.count_commit();
            n
        });
        let r = (|| -> Result<()> {
            if txn.commit_files()? && !self.building {
                commit_point(self.storage.as_ref(), &self.path)?;
            }
            Ok(())
        })();
        // This handle shows its own commit (the caller takes its new state), unless it
        // was behind already: then it still has to catch up.
        if let Some(n) = before {
            let _ = self
                .seen
                .compare_exchange(n, n + 1, Ordering::SeqCst, Ordering::SeqCst);
        }
        r
    }

    /// Runs one transaction on this root: `f` writes the change into it (new meta
    /// documents included) and returns what the caller keeps of it; then the commit, through
    /// [`Root::commit`]. Nothing is committed when `f` fails (the transaction gives back
    /// what it took).
    ///
    /// # Errors
    /// [`Error::ReadOnly`] for a read-only handle; `f`'s errors; as [`Root::commit`].
    pub(crate) fn transact<T>(&self, f: impl FnOnce(&mut Txn<'_>) -> Result<T>) -> Result<T> {
        self.check_writable()?;
        let storage = Arc::clone(&self.storage);
        let mut txn = Txn::new(storage.as_ref(), &self.path);
        let out = f(&mut txn)?;
        self.commit(txn)?;
        Ok(out)
    }

    /// The user attributes (`meta/attributes`).
    ///
    /// # Errors
    /// [`Error::InvalidMetadata`] when the file is not a JSON object; I/O errors.
    pub(crate) fn attrs(&self) -> Result<serde_json::Map<String, serde_json::Value>> {
        read_attrs(self.storage.as_ref(), &self.path)
    }

    /// Replaces the user attributes: a transaction like any other.
    ///
    /// # Errors
    /// [`Error::ReadOnly`], I/O errors.
    pub(crate) fn set_attrs(
        &self,
        attrs: serde_json::Map<String, serde_json::Value>,
    ) -> Result<()> {
        self.transact(|txn| {
            txn.put_meta(
                Path::new("meta/attributes"),
                meta::to_json_bytes(&serde_json::Value::Object(attrs)),
            );
            Ok(())
        })
    }

    /// Whether a read-only handle showing commit `generation` of the dataset with identity
    /// `id` must open again to show the latest commit ([`needs_reopen`]): `None` for a
    /// writing handle (nothing commits under it) and when it is current (its stamps
    /// renewed); otherwise the stamp of `meta/sizes` to give the handle opened again
    /// ([`Root::set_seen`]), taken before it opens, so a commit in between is seen by the
    /// next refresh. A reopen that fails leaves this handle as it was.
    pub(crate) fn stale(
        &mut self,
        generation: u64,
        id: &Option<String>,
    ) -> Option<Option<[u64; 4]>> {
        if self.mode == Mode::ReadWrite {
            return None;
        }
        let via_view = !Arc::ptr_eq(&self.storage, &self.base);
        let (reopen, stamp) = needs_reopen(
            self.base.as_ref(),
            &self.path,
            via_view,
            self.sizes_stamp,
            generation,
            id,
        );
        if reopen {
            return Some(stamp);
        }
        self.sizes_stamp = stamp;
        // The same commit, its `meta/sizes` written again (the same generation).
        self.read_stamp.renew(stamp);
        None
    }

    /// Takes over the stamp [`Root::stale`] gave for the handle this one replaces.
    pub(crate) fn set_seen(&mut self, stamp: Option<[u64; 4]>) {
        self.sizes_stamp = stamp;
    }

    /// `r`, a read through a handle showing commit `generation` of the dataset with
    /// identity `id`: an error it met becomes [`Error::Changed`] when a writer committed
    /// since ([`meta::unless_changed`]), and so does a success that met another commit
    /// ([`meta::whole_unless_committed`]).
    pub(crate) fn unless_changed<T>(
        &self,
        generation: u64,
        id: &Option<String>,
        r: Result<T>,
    ) -> Result<T> {
        let r = meta::unless_changed(self.storage.as_ref(), &self.path, generation, r);
        let r = meta::whole_unless_committed(
            self.base.as_ref(),
            &self.path,
            &self.read_stamp,
            generation,
            id,
            r,
        );
        // Another writing handle of this process committed (or began to) since this one
        // caught up: what it read may mix the two states.
        if self.behind() {
            return Err(Error::Changed {
                path: self.path.clone(),
            });
        }
        r
    }

    /// The problems a verification found, with the attributes checked too (every meta file
    /// is part of the dataset; storage and sizes were read to open it), or one
    /// [`Error::Changed`] when a writer committed since `generation`.
    pub(crate) fn verified(&self, generation: u64, mut errors: Vec<Error>) -> Vec<Error> {
        if let Err(e) = self.attrs() {
            errors.push(e);
        }
        meta::verified_unless_changed(self.storage.as_ref(), &self.path, generation, errors)
    }

    /// After a commit failed: brings the dataset to its committed state again (a journal
    /// left behind is applied) and reads `meta/sizes` of it, for the handle to stay
    /// truthful; `None` when that cannot be done now.
    pub(crate) fn resettle<T: serde::de::DeserializeOwned>(&self) -> Option<T> {
        if self.mode != Mode::ReadWrite {
            return None;
        }
        match settle(&self.storage, &self.path, Mode::ReadWrite) {
            Ok(None) => {
                meta::read_json::<T>(self.storage.as_ref(), &MetaPaths::new(&self.path).sizes())
                    .ok()
            }
            _ => None,
        }
    }
}

/// What a read-only handle that opened generation `generation` of the dataset with identity
/// `id` at `root`, and then saw `meta/sizes` with stamp `seen` (through `base`, the storage
/// it was opened with; `via_view` when it opened through a view of a pending journal), must
/// do to show the latest commit: `(true, stamp)` to open again, `(false, stamp)` when it is
/// current, with the stamp of `meta/sizes` to remember either way (taken before anything is
/// read, so a commit in between is seen by the next call).
fn needs_reopen(
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
