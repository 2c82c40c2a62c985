//! The handle: [`ObjectStorage`](crate::ObjectStorage), its committed snapshot and overlay tree,
//! how it is made and how paths map to keys.

use crate::client::read_slots;
use crate::client::Backend;
use crate::client::ReadTuning;
use crate::keys::STATE_KEY;
use crate::spool::node_of;
use crate::spool::Node;
use crate::state::State;
use blz_format::error::Error;
use blz_format::error::Result;
use object_store::ObjectStore;
use object_store::UpdateVersion;
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::collections::HashSet;
use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::MutexGuard;
/// Settles a create's [`Probe`] (waiting for its GET when `wait`, else only if the GET is
/// done): an error when the dataset turned out to be there (or its state could not be
/// read); `Ok` when it is absent, as assumed, or not known yet and `!wait`.
pub(crate) fn settle_probe(c: &Mutex<Committed>, root: &Path, wait: bool) -> Result<()> {
    let exists = || {
        Error::InvalidArgument(format!(
            "{} already exists (use overwrite to replace it)",
            root.display()
        ))
    };
    let failed = |why: &str| {
        Error::io(
            "read",
            root.join(STATE_KEY),
            std::io::Error::other(format!("whether the dataset exists is unknown: {why}")),
        )
    };
    let pending = {
        let mut g = lock_committed(c);
        match &g.probe {
            Some(Probe::Exists) => return Err(exists()),
            Some(Probe::Failed(why)) => return Err(failed(why)),
            Some(Probe::Pending(h)) if wait || h.is_finished() => {}
            // Settled absent, or not known yet and not to be waited for.
            _ => return Ok(()),
        }
        let Some(Probe::Pending(h)) = g.probe.take() else {
            return Ok(());
        };
        h
    };
    let got = pending
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    let (settled, result) = match got {
        Ok(false) => (None, Ok(())),
        Ok(true) => (Some(Probe::Exists), Err(exists())),
        Err(e) => {
            let why = e.to_string();
            (Some(Probe::Failed(why.clone())), Err(failed(&why)))
        }
    };
    lock_committed(c).probe = settled;
    result
}

pub(crate) fn lock_committed(c: &Mutex<Committed>) -> MutexGuard<'_, Committed> {
    c.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The files and directories as this handle sees them (committed state plus overlay).
#[derive(Default)]
pub(crate) struct Tree {
    /// Files by key relative to the bucket (`prefix/name.blz/meta/sizes`).
    pub(crate) files: BTreeMap<String, Arc<Node>>,
    /// Directories made explicitly (others exist because files lie below them).
    pub(crate) dirs: BTreeSet<String>,
}

impl Tree {
    pub(crate) fn is_dir(&self, key: &str) -> bool {
        if key.is_empty() || self.dirs.contains(key) {
            return true;
        }
        let p = format!("{key}/");
        self.files
            .range(p.clone()..)
            .next()
            .is_some_and(|(k, _)| k.starts_with(&p))
            || self
                .dirs
                .range(p.clone()..)
                .next()
                .is_some_and(|k| k.starts_with(&p))
    }
}

#[derive(Default)]
pub(crate) struct Committed {
    /// The state; its manifests not [`loaded`](manifest::Manifest::loaded) yet are read
    /// when first needed ([`ObjectStorage::load_pending`]): an open reads the state object
    /// alone.
    pub(crate) state: Option<State>,
    pub(crate) version: Option<UpdateVersion>,
    /// The tag of the commit this handle prepares, drawn by the first file that went up
    /// before it ([`ObjectFile::sync`]): the commit names all its uploads with it.
    pub(crate) draft_tag: Option<u64>,
    /// The keys the early uploads of that commit claimed: one upload a key, so no two
    /// files' bytes ever race for one object.
    pub(crate) draft_keys: HashSet<String>,
    /// Those uploads, each until the commit waits for it ([`ObjectStorage::finish_early`]).
    pub(crate) draft_tasks: Vec<tokio::task::JoinHandle<Result<()>>>,
    /// The error of one of them found ended before the commit ([`ObjectFile::sync`]): the
    /// commit fails with it (its file's entry would name an object that is not there).
    pub(crate) draft_failed: Option<String>,
    /// This handle's last commit took effect, but its answer was lost and another writer's
    /// commit replaced it before it was read back: `version` is unknown, and the next
    /// commit of this handle is refused ([`Error::Conflict`]) without a request.
    pub(crate) superseded: bool,
    /// When the store stored `state` (its Last-Modified, by the store's clock), when this
    /// handle read it.
    pub(crate) stored_at: Option<u64>,
    /// For a handle made to create a dataset ([`ObjectStorage::open_url_to_create`]): the
    /// read of the state that tells whether the dataset is there after all, until the
    /// commit (or an early upload finding it done) has settled it.
    pub(crate) probe: Option<Probe>,
}

/// What a create's handle knows of a dataset it assumed absent ([`Committed::probe`]).
pub(crate) enum Probe {
    /// The state's GET, still on its way: whether the state is there.
    Pending(std::thread::JoinHandle<Result<bool>>),
    /// The state is there: the create must not commit.
    Exists,
    /// The state could not be read: why.
    Failed(String),
}

/// What a conditional write of the state did.
pub(crate) enum Written {
    /// It took effect and the state object is it, at this version.
    Current(UpdateVersion),
    /// It took effect (its answer was lost), and another writer's commit has replaced it.
    Superseded,
}

impl Committed {
    /// The committed state after `state` was written.
    pub(crate) fn written(state: State, w: Written) -> Committed {
        match w {
            Written::Current(v) => Committed {
                state: Some(state),
                version: Some(v),
                ..Committed::default()
            },
            Written::Superseded => Committed {
                state: Some(state),
                superseded: true,
                ..Committed::default()
            },
        }
    }
}

/// What a commit uploads of one file: under `key`, the bytes `ranges` of it concatenated,
/// or the whole file.
pub(crate) struct Upload {
    pub(crate) rel: String,
    pub(crate) key: String,
    pub(crate) node: Arc<Node>,
    pub(crate) ranges: Option<Vec<std::ops::Range<u64>>>,
}

/// A dataset on an object store (see the module documentation).
pub struct ObjectStorage {
    pub(crate) backend: Arc<Backend>,
    /// The bucket as callers name it: paths are `<base>/<key>`.
    pub(crate) base: PathBuf,
    pub(crate) tree: Mutex<Tree>,
    /// Shared with the files it opened, which name their early uploads by it.
    pub(crate) committed: Arc<Mutex<Committed>>,
}

impl std::fmt::Debug for ObjectStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectStorage")
            .field("root", &self.backend.root)
            .finish_non_exhaustive()
    }
}

/// Locks held in this process, by lock path.
pub(crate) fn held_locks() -> MutexGuard<'static, HashSet<PathBuf>> {
    // One per process: a forked child holds none of its parent's locks.
    static HELD: blz_format::process::PerProcess<Mutex<HashSet<PathBuf>>> =
        blz_format::process::PerProcess::new();
    HELD.get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(crate) struct HeldLock(pub(crate) PathBuf);

impl Drop for HeldLock {
    fn drop(&mut self) {
        held_locks().remove(&self.0);
    }
}

impl ObjectStorage {
    /// The dataset `s3://bucket/key` (which need not exist yet), its state loaded now.
    ///
    /// # Errors
    /// As [`parse_s3_url`](crate::parse_s3_url), [`s3_store`](crate::s3_store) and
    /// [`ObjectStorage::new`].
    pub fn open_url(url: &str) -> Result<ObjectStorage> {
        let (backend, bucket) = Backend::for_url(url)?;
        ObjectStorage::with_backend(backend, PathBuf::from(format!("s3://{bucket}")))
    }

    /// The dataset whose files lie under `prefix` in `store` (which need not exist yet),
    /// named `<base>/<prefix>` in paths and messages. Loads its state (one GET).
    ///
    /// # Errors
    /// I/O errors from the store; [`Error::InvalidMetadata`] for a malformed state object.
    pub fn new(store: Arc<dyn ObjectStore>, base: PathBuf, prefix: &str) -> Result<ObjectStorage> {
        ObjectStorage::with_backend(Backend::in_store(store, &base, prefix), base)
    }

    /// The dataset under `prefix` of an in-memory object store, named `memory://<prefix>`
    /// in paths and messages (which need not exist yet; its state loaded now): the
    /// object-store backend with no server, for tests and experiments. Handles made over one
    /// store see each other's commits as two processes see them on one bucket; each keeps
    /// the state it loaded until it commits or is made again.
    ///
    /// ```
    /// # fn main() -> blz_format::error::Result<()> {
    /// use blz_format::storage::{write_file_atomic, OpenMode, Storage};
    /// use blz_object::ObjectStorage;
    /// use std::sync::Arc;
    /// let store = Arc::new(object_store::memory::InMemory::new());
    /// let s = ObjectStorage::in_memory(&store, "runs/x.blz")?;
    /// let root = s.root().to_path_buf();
    /// s.create_dir_all(&root)?;
    /// write_file_atomic(&s, &root.join("hello"), b"hi")?;
    /// // The commit (blz makes it through its one commit door): now every handle sees it.
    /// s.publish(&root)?;
    /// let again = ObjectStorage::in_memory(&store, "runs/x.blz")?;
    /// let mut buf = [0u8; 2];
    /// again.open(&root.join("hello"), OpenMode::Read)?.read_at(0, &mut buf)?;
    /// assert_eq!(&buf, b"hi");
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`ObjectStorage::new`].
    pub fn in_memory(
        store: &Arc<object_store::memory::InMemory>,
        prefix: &str,
    ) -> Result<ObjectStorage> {
        let store: Arc<dyn ObjectStore> = Arc::clone(store) as Arc<dyn ObjectStore>;
        ObjectStorage::new(store, PathBuf::from("memory://"), prefix)
    }

    /// The dataset `s3://bucket/key`, to be created there: made without waiting for its
    /// state, as if absent, while one GET of the state runs meanwhile (one round trip less
    /// before a create starts). Its commit (the first one: `If-None-Match`) first waits for
    /// that GET, and is refused with [`Error::InvalidArgument`] ("already exists") when the
    /// state was there (once the GET has found it, no file goes up early any more: its sync
    /// fails with that error). To replace a
    /// dataset, open it with [`ObjectStorage::open_url`] instead.
    ///
    /// # Errors
    /// As [`parse_s3_url`](crate::parse_s3_url) and [`s3_store`](crate::s3_store).
    pub fn open_url_to_create(url: &str) -> Result<ObjectStorage> {
        let (backend, bucket) = Backend::for_url(url)?;
        ObjectStorage::assumed_absent(backend, PathBuf::from(format!("s3://{bucket}")))
    }

    /// [`ObjectStorage::new`] for a dataset to be created (as
    /// [`open_url_to_create`](Self::open_url_to_create)): its state's GET runs meanwhile.
    ///
    /// # Errors
    /// As [`ObjectStorage::new`].
    pub fn to_create(
        store: Arc<dyn ObjectStore>,
        base: PathBuf,
        prefix: &str,
    ) -> Result<ObjectStorage> {
        ObjectStorage::assumed_absent(Backend::in_store(store, &base, prefix), base)
    }

    pub(crate) fn assumed_absent(backend: Backend, base: PathBuf) -> Result<ObjectStorage> {
        let backend = Arc::new(backend);
        let b = Arc::clone(&backend);
        let probe = std::thread::Builder::new()
            .name("blz-state-probe".into())
            // Whether a state exists: its manifests are not needed.
            .spawn(move || {
                b.fetch_state_with(false)
                    .map(|(state, _, _)| state.is_some())
            })
            .map_err(|e| Error::io("read the state of", &backend.root, e))?;
        let committed = Committed {
            probe: Some(Probe::Pending(probe)),
            ..Committed::default()
        };
        Ok(ObjectStorage::with_committed(backend, base, committed))
    }

    pub(crate) fn with_backend(backend: Backend, base: PathBuf) -> Result<ObjectStorage> {
        // The manifests wait until a file the state object does not hold is wanted: a read of
        // the files it holds (the last ones appended) costs no more requests.
        let (state, version, stored_at) = backend.fetch_state_with(false)?;
        let committed = Committed {
            state,
            version,
            stored_at,
            ..Committed::default()
        };
        Ok(ObjectStorage::with_committed(
            Arc::new(backend),
            base,
            committed,
        ))
    }

    /// A handle on `backend`'s dataset that shows `committed`.
    pub(crate) fn with_committed(
        backend: Arc<Backend>,
        base: PathBuf,
        committed: Committed,
    ) -> ObjectStorage {
        let s = ObjectStorage {
            backend,
            base,
            tree: Mutex::default(),
            committed: Arc::new(Mutex::new(committed)),
        };
        s.reset_tree();
        s
    }

    /// The dataset root, as paths name it (`s3://bucket/prefix`).
    pub fn root(&self) -> &Path {
        &self.backend.root
    }

    /// Requests made to the object store through this handle so far.
    pub fn requests(&self) -> u64 {
        self.backend.requests.load(Ordering::Relaxed)
    }

    /// How this handle turns reads of many ranges into requests ([`ReadTuning`]: from the
    /// environment for [`ObjectStorage::open_url`], the default otherwise).
    pub fn read_tuning(&self) -> ReadTuning {
        self.backend.read_tuning().0
    }

    /// Sets how this handle (and every file it opened) turns reads of many ranges into
    /// requests, from its next read on.
    pub fn set_read_tuning(&self, tuning: ReadTuning) {
        *self
            .backend
            .reads
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = (tuning, read_slots(&tuning));
    }

    /// Sets how many bytes of block indexes (as their fronts' `blocks` text) this handle's
    /// commits put in the state object, which every open reads whole: past them, in path
    /// order, a file's index goes up as an object of its own, read on the first short read
    /// of the file (`spec/object-store.md` §3). [`MAX_BLOCK_INDEXES`](crate::MAX_BLOCK_INDEXES)
    /// unless set, or the
    /// environment's [`INLINE_INDEXES_VAR`](crate::INLINE_INDEXES_VAR) for a handle made from an
    /// `s3://` URL.
    pub fn set_inline_block_indexes(&self, bytes: u64) {
        self.backend.inline_indexes.store(bytes, Ordering::Relaxed);
    }

    /// Sets the bytes of unchanged file entries this handle's commits gather in the state
    /// object before sealing them into a manifest (`spec/object-store.md` §3, "Manifests");
    /// 0 seals none. [`manifest::MANIFEST_BYTES`](crate::manifest::MANIFEST_BYTES) unless set, or
    /// the environment's
    /// [`manifest::MANIFEST_BYTES_VAR`](crate::manifest::MANIFEST_BYTES_VAR) for a handle made from
    /// an `s3://` URL.
    pub fn set_manifest_bytes(&self, bytes: u64) {
        self.backend.manifest_bytes.store(bytes, Ordering::Relaxed);
    }

    /// The committed state this handle works on (`None` before the dataset's first commit).
    ///
    /// # Errors
    /// As [`ObjectStorage::new`], for the manifests the state names, read now if not yet.
    pub fn state(&self) -> Result<Option<State>> {
        self.load_pending()?;
        Ok(self.committed_lock().state.clone())
    }
}

impl ObjectStorage {
    pub(crate) fn committed_lock(&self) -> MutexGuard<'_, Committed> {
        lock_committed(&self.committed)
    }

    pub(crate) fn tree(&self) -> MutexGuard<'_, Tree> {
        self.tree
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn state_path(&self) -> PathBuf {
        self.backend.root.join(STATE_KEY)
    }

    /// Makes the visible tree the committed state again (no overlay).
    pub(crate) fn reset_tree(&self) {
        let committed = self.committed_lock();
        let mut tree = Tree::default();
        if let Some(state) = &committed.state {
            for (rel, f) in &state.files {
                tree.files.insert(self.rel_to_bucket(rel), node_of(f));
            }
        }
        *self.tree() = tree;
    }

    pub(crate) fn rel_to_bucket(&self, rel: &str) -> String {
        if self.backend.prefix.is_empty() {
            rel.to_string()
        } else {
            format!("{}/{rel}", self.backend.prefix)
        }
    }

    /// The key below the bucket that `path` names.
    pub(crate) fn key_of(&self, path: &Path) -> Result<String> {
        let rel = path.strip_prefix(&self.base).map_err(|_| {
            Error::InvalidArgument(format!(
                "{} is not on {}",
                path.display(),
                self.base.display()
            ))
        })?;
        let mut parts = Vec::new();
        for c in rel.components() {
            match c {
                std::path::Component::Normal(n) => parts.push(n.to_str().ok_or_else(|| {
                    Error::InvalidArgument(format!("{} is not UTF-8", path.display()))
                })?),
                _ => {
                    return Err(Error::InvalidArgument(format!(
                        "{} is not a plain path",
                        path.display()
                    )))
                }
            }
        }
        Ok(parts.join("/"))
    }
}
