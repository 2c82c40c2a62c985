//! The object-store backend (the `s3` feature): one dataset on an S3-compatible object store,
//! seen by the rest of blz as a directory tree.
//!
//! Objects are never modified in place. The dataset's committed state is one small object,
//! `<root>/meta/state`, that lists every file of the dataset (the object holding it and its
//! length, or its text inline for small meta documents). [`ObjectStorage`] loads that state
//! once, when it is made: a reader keeps reading that snapshot (immutable objects) whatever
//! writers commit meanwhile.
//!
//! Everything written through it (the transaction's positioned writes, atomic replacements,
//! renames, removals, whole staged creates) changes only a local overlay: new or changed
//! files are spooled to anonymous temporary files (an existing object is fetched whole into
//! the spool on its first write). [`Storage::publish`] of the dataset root uploads every
//! spooled file whole under a new, writer-unique key, in parallel, then replaces the state
//! object with a conditional write (If-Match on the ETag it loaded, or create-if-absent for a
//! new dataset): that write is the commit. A writer that lost the race gets
//! [`Error::Conflict`]; its uploads are orphans that [`collect_garbage`] removes. The state
//! object and the collection rule are described in `spec/object-store.md`.

use super::{LockGuard, OpenMode, Storage, StorageFile};
use crate::error::{Error, Result};
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as OPath;
use object_store::{
    GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload,
    UpdateVersion,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The `format` value of a state object.
pub const STATE_FORMAT: &str = "blz-object-state";
/// The state object's layout version this build writes and reads.
pub const STATE_VERSION: u32 = 1;
/// Where the state object lives, relative to the dataset's prefix.
pub const STATE_KEY: &str = "meta/state";
/// The first bytes of an object read (and kept) on its first read: a superchunk's header,
/// metadata and offsets table come with one request.
const HEAD_BLOCK: u64 = 64 << 10;
/// Meta documents up to this size are kept inline in the state object.
const INLINE_MAX: usize = 16 << 10;
/// Uploads (and deletions) in flight at once.
const PARALLEL: usize = 8;
/// Ranged GETs the engine keeps in flight where it reads many chunks.
const CONCURRENT_READS: usize = 16;
/// Largest state object blz reads.
const MAX_STATE: u64 = 64 << 20;

/// One file of a committed state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum StateFile {
    /// Held by an object: its key relative to the dataset's prefix, and its length.
    Object {
        /// The object's key below the dataset's prefix.
        key: String,
        /// The file's length in bytes (the object's size).
        len: u64,
    },
    /// A small meta document kept in the state itself.
    Inline {
        /// The file's whole content (UTF-8).
        text: String,
    },
}

/// An object a commit stopped using, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retired {
    /// The object's key below the dataset's prefix.
    pub key: String,
    /// When the commit that stopped using it was made (seconds since the Unix epoch).
    pub at: u64,
}

/// The state object, `<root>/meta/state` (`spec/object-store.md`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// Always [`STATE_FORMAT`].
    pub format: String,
    /// Always [`STATE_VERSION`].
    pub version: u32,
    /// 1 for a new dataset, one more at every commit.
    pub generation: u64,
    /// When this state was committed (seconds since the Unix epoch).
    pub committed_at: u64,
    /// Every file of the dataset, by its path relative to the dataset root (`/`-separated).
    pub files: BTreeMap<String, StateFile>,
    /// Objects no longer used, not yet collected.
    #[serde(default)]
    pub retired: Vec<Retired>,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The tokio runtime every object-store call runs on, made on first use.
fn runtime() -> Result<&'static tokio::runtime::Runtime> {
    static RT: OnceLock<std::result::Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("blz-object-store")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|e| {
        Error::io(
            "start the object-store runtime",
            "s3://",
            std::io::Error::other(e.clone()),
        )
    })
}

fn store_error(op: &'static str, path: &Path, e: object_store::Error) -> Error {
    let kind = match &e {
        object_store::Error::NotFound { .. } => ErrorKind::NotFound,
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => ErrorKind::PermissionDenied,
        _ => ErrorKind::Other,
    };
    Error::io(op, path, std::io::Error::new(kind, e))
}

fn not_found(op: &'static str, path: &Path) -> Error {
    Error::io(
        op,
        path,
        std::io::Error::new(ErrorKind::NotFound, "no such file"),
    )
}

/// The object store and what every file handle needs of it.
#[derive(Debug)]
struct Backend {
    store: Arc<dyn ObjectStore>,
    /// The key prefix of the dataset root (no trailing `/`).
    prefix: String,
    /// The dataset root as callers name it (`s3://bucket/prefix`).
    root: PathBuf,
    requests: AtomicU64,
}

impl Backend {
    fn key(&self, rel_key: &str) -> OPath {
        if self.prefix.is_empty() {
            OPath::from(rel_key)
        } else {
            OPath::from(format!("{}/{rel_key}", self.prefix))
        }
    }

    fn count(&self, n: u64) {
        self.requests.fetch_add(n, Ordering::Relaxed);
    }

    /// A ranged GET of an object the state names. A missing object was collected after a
    /// later commit: the dataset changed under this reader.
    fn get_range(&self, key: &str, range: std::ops::Range<u64>, path: &Path) -> Result<Bytes> {
        let rt = runtime()?;
        let loc = self.key(key);
        self.count(1);
        rt.block_on(async {
            let opts = GetOptions {
                range: Some(GetRange::Bounded(range)),
                ..GetOptions::default()
            };
            self.store.get_opts(&loc, opts).await?.bytes().await
        })
        .map_err(|e| match e {
            object_store::Error::NotFound { .. } => Error::Changed {
                path: self.root.clone(),
            },
            e => store_error("read", path, e),
        })
    }
}

/// What a file's bytes are.
enum Data {
    /// An object of the committed state, not written since; its first block once read.
    Remote {
        key: String,
        len: u64,
        head: Option<Bytes>,
    },
    /// Bytes known in memory (an inline meta document).
    Memory(Bytes),
    /// Written since the last commit: a local spool file.
    Spool { file: std::fs::File },
}

struct Node {
    data: Mutex<Data>,
    /// Held while the first block is fetched, so that readers racing for it (parallel
    /// chunk reads right after open) make one request, not one each.
    head_fetch: Mutex<()>,
}

fn lock_data(node: &Node) -> MutexGuard<'_, Data> {
    node.data
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Node {
    fn new(data: Data) -> Arc<Node> {
        Arc::new(Node {
            data: Mutex::new(data),
            head_fetch: Mutex::new(()),
        })
    }

    fn spool(path: &Path) -> Result<Arc<Node>> {
        let file =
            tempfile::tempfile().map_err(|e| Error::io("create a spool file for", path, e))?;
        Ok(Node::new(Data::Spool { file }))
    }
}

/// The whole bytes of a spooled (or in-memory) file, for its upload.
fn node_bytes(node: &Node, path: &Path) -> Result<Bytes> {
    match &*lock_data(node) {
        Data::Spool { file } => {
            let len = file
                .metadata()
                .map_err(|e| Error::io("stat", path, e))?
                .len();
            let len = usize::try_from(len).map_err(|_| {
                Error::io(
                    "read",
                    path,
                    std::io::Error::other("larger than memory can hold"),
                )
            })?;
            let mut buf = vec![0u8; len];
            file.read_exact_at(&mut buf, 0)
                .map_err(|e| Error::io("read", path, e))?;
            Ok(Bytes::from(buf))
        }
        Data::Memory(b) => Ok(b.clone()),
        Data::Remote { .. } => Err(Error::io(
            "upload",
            path,
            std::io::Error::other("the file is not spooled"),
        )),
    }
}

/// Turns a file's data into a spool file (fetching its object whole), for writing.
fn materialize(backend: &Backend, data: &mut Data, path: &Path) -> Result<()> {
    let bytes = match data {
        Data::Spool { .. } => return Ok(()),
        Data::Memory(b) => b.clone(),
        Data::Remote { key, len, .. } => {
            if *len == 0 {
                Bytes::new()
            } else {
                backend.get_range(key, 0..*len, path)?
            }
        }
    };
    let file = tempfile::tempfile().map_err(|e| Error::io("create a spool file for", path, e))?;
    file.write_all_at(&bytes, 0)
        .map_err(|e| Error::io("write a spool file for", path, e))?;
    *data = Data::Spool { file };
    Ok(())
}

struct ObjectFile {
    node: Arc<Node>,
    backend: Arc<Backend>,
    path: PathBuf,
    writable: bool,
}

fn eof(path: &Path) -> Error {
    Error::io(
        "read",
        path,
        std::io::Error::new(ErrorKind::UnexpectedEof, "read past the end of the file"),
    )
}

impl ObjectFile {
    fn check_writable(&self) -> Result<()> {
        if self.writable {
            Ok(())
        } else {
            Err(Error::io(
                "write",
                &self.path,
                std::io::Error::new(ErrorKind::PermissionDenied, "the file is open to read"),
            ))
        }
    }
}

impl StorageFile for ObjectFile {
    fn len(&self) -> Result<u64> {
        match &*lock_data(&self.node) {
            Data::Remote { len, .. } => Ok(*len),
            Data::Memory(b) => Ok(b.len() as u64),
            Data::Spool { file } => Ok(file
                .metadata()
                .map_err(|e| Error::io("stat", &self.path, e))?
                .len()),
        }
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let end = offset
            .checked_add(buf.len() as u64)
            .ok_or_else(|| eof(&self.path))?;
        let (key, len) = {
            let data = lock_data(&self.node);
            match &*data {
                Data::Spool { file } => {
                    return file
                        .read_exact_at(buf, offset)
                        .map_err(|e| Error::io("read", &self.path, e));
                }
                Data::Memory(b) => {
                    let src = b
                        .get(offset as usize..end as usize)
                        .filter(|_| end <= b.len() as u64)
                        .ok_or_else(|| eof(&self.path))?;
                    buf.copy_from_slice(src);
                    return Ok(());
                }
                Data::Remote { key, len, head } => {
                    if end > *len {
                        return Err(eof(&self.path));
                    }
                    if let Some(h) = head.as_ref().filter(|h| end <= h.len() as u64) {
                        buf.copy_from_slice(&h[offset as usize..end as usize]);
                        return Ok(());
                    }
                    (key.clone(), *len)
                }
            }
        };
        if buf.is_empty() {
            return Ok(());
        }
        let head_len = HEAD_BLOCK.min(len);
        if end <= head_len {
            let _fetching = self
                .node
                .head_fetch
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Data::Remote { head: Some(h), .. } = &*lock_data(&self.node) {
                if end <= h.len() as u64 {
                    buf.copy_from_slice(&h[offset as usize..end as usize]);
                    return Ok(());
                }
            }
            let head = self.backend.get_range(&key, 0..head_len, &self.path)?;
            if head.len() as u64 != head_len {
                return Err(eof(&self.path));
            }
            buf.copy_from_slice(&head[offset as usize..end as usize]);
            if let Data::Remote { head: h, .. } = &mut *lock_data(&self.node) {
                *h = Some(head);
            }
            return Ok(());
        }
        let got = self.backend.get_range(&key, offset..end, &self.path)?;
        if got.len() != buf.len() {
            return Err(eof(&self.path));
        }
        buf.copy_from_slice(&got);
        Ok(())
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.check_writable()?;
        let mut d = lock_data(&self.node);
        materialize(&self.backend, &mut d, &self.path)?;
        if let Data::Spool { file } = &*d {
            file.write_all_at(data, offset)
                .map_err(|e| Error::io("write", &self.path, e))?;
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.check_writable()?;
        let mut d = lock_data(&self.node);
        materialize(&self.backend, &mut d, &self.path)?;
        if let Data::Spool { file } = &*d {
            file.set_len(len)
                .map_err(|e| Error::io("truncate", &self.path, e))?;
        }
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        // Durability comes from the upload at publish; a spool file dies with the process.
        Ok(())
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn small_reads_are_cheap(&self) -> bool {
        false
    }
}

/// The files and directories as this handle sees them (committed state plus overlay).
#[derive(Default)]
struct Tree {
    /// Files by key relative to the bucket (`prefix/name.blz/meta/sizes`).
    files: BTreeMap<String, Arc<Node>>,
    /// Directories made explicitly (others exist because files lie below them).
    dirs: BTreeSet<String>,
}

impl Tree {
    fn is_dir(&self, key: &str) -> bool {
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

struct Committed {
    state: Option<State>,
    version: Option<UpdateVersion>,
}

/// A dataset on an object store (see the module documentation).
pub struct ObjectStorage {
    backend: Arc<Backend>,
    /// The bucket as callers name it: paths are `<base>/<key>`.
    base: PathBuf,
    tree: Mutex<Tree>,
    committed: Mutex<Committed>,
}

impl std::fmt::Debug for ObjectStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectStorage")
            .field("root", &self.backend.root)
            .finish_non_exhaustive()
    }
}

/// Locks held in this process, by lock path.
fn held_locks() -> MutexGuard<'static, HashSet<PathBuf>> {
    static HELD: OnceLock<Mutex<HashSet<PathBuf>>> = OnceLock::new();
    HELD.get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

struct HeldLock(PathBuf);

impl Drop for HeldLock {
    fn drop(&mut self) {
        held_locks().remove(&self.0);
    }
}

/// Splits `s3://bucket/key...` into the bucket and the key (without slashes at its ends).
///
/// # Errors
/// [`Error::InvalidArgument`] for anything else.
pub fn parse_s3_url(url: &str) -> Result<(String, String)> {
    let rest = url
        .strip_prefix("s3://")
        .ok_or_else(|| Error::InvalidArgument(format!("{url} is not an s3:// URL")))?;
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    let key = key.trim_matches('/');
    if bucket.is_empty()
        || key.is_empty()
        || key
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err(Error::InvalidArgument(format!(
            "{url}: an object-store dataset is named s3://BUCKET/KEY, with a key of plain \
             /-separated names"
        )));
    }
    Ok((bucket.to_string(), key.to_string()))
}

/// The S3 client for `bucket`, configured from the standard AWS environment variables
/// (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
/// `AWS_ALLOW_HTTP`, ...).
///
/// # Errors
/// [`Error::InvalidArgument`] when the configuration is incomplete or malformed.
pub fn s3_store(bucket: &str) -> Result<Arc<dyn ObjectStore>> {
    let store = object_store::aws::AmazonS3Builder::from_env()
        .with_bucket_name(bucket)
        .build()
        .map_err(|e| Error::InvalidArgument(format!("s3://{bucket}: {e}")))?;
    Ok(Arc::new(store))
}

impl ObjectStorage {
    /// The dataset `s3://bucket/key` (which need not exist yet), its state loaded now.
    ///
    /// # Errors
    /// As [`parse_s3_url`], [`s3_store`] and [`ObjectStorage::new`].
    pub fn open_url(url: &str) -> Result<ObjectStorage> {
        let (bucket, key) = parse_s3_url(url)?;
        let store = s3_store(&bucket)?;
        ObjectStorage::new(store, PathBuf::from(format!("s3://{bucket}")), &key)
    }

    /// The dataset whose files lie under `prefix` in `store` (which need not exist yet),
    /// named `<base>/<prefix>` in paths and messages. Loads its state (one GET).
    ///
    /// # Errors
    /// I/O errors from the store; [`Error::InvalidMetadata`] for a malformed state object.
    pub fn new(store: Arc<dyn ObjectStore>, base: PathBuf, prefix: &str) -> Result<ObjectStorage> {
        let prefix = prefix.trim_matches('/').to_string();
        let backend = Arc::new(Backend {
            store,
            root: base.join(&prefix),
            prefix,
            requests: AtomicU64::new(0),
        });
        let s = ObjectStorage {
            backend,
            base,
            tree: Mutex::default(),
            committed: Mutex::new(Committed {
                state: None,
                version: None,
            }),
        };
        let (state, version) = s.load_state()?;
        *s.committed_lock() = Committed { state, version };
        s.reset_tree();
        Ok(s)
    }

    /// The dataset root, as paths name it (`s3://bucket/prefix`).
    pub fn root(&self) -> &Path {
        &self.backend.root
    }

    /// Requests made to the object store through this handle so far.
    pub fn requests(&self) -> u64 {
        self.backend.requests.load(Ordering::Relaxed)
    }

    /// The committed state this handle works on (`None` before the dataset's first commit).
    pub fn state(&self) -> Option<State> {
        self.committed_lock().state.clone()
    }

    fn committed_lock(&self) -> MutexGuard<'_, Committed> {
        self.committed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn tree(&self) -> MutexGuard<'_, Tree> {
        self.tree
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn state_path(&self) -> PathBuf {
        self.backend.root.join("meta").join("state")
    }

    /// Reads the state object: the state and its version, or none when it is absent.
    fn load_state(&self) -> Result<(Option<State>, Option<UpdateVersion>)> {
        let rt = runtime()?;
        let loc = self.backend.key(STATE_KEY);
        let path = self.state_path();
        self.backend.count(1);
        let got = rt.block_on(async {
            let r = self
                .backend
                .store
                .get_opts(&loc, GetOptions::default())
                .await?;
            let version = UpdateVersion {
                e_tag: r.meta.e_tag.clone(),
                version: r.meta.version.clone(),
            };
            if r.meta.size > MAX_STATE {
                return Ok((None, version));
            }
            Ok::<_, object_store::Error>((Some(r.bytes().await?), version))
        });
        let (bytes, version) = match got {
            Ok(x) => x,
            Err(object_store::Error::NotFound { .. }) => return Ok((None, None)),
            Err(e) => return Err(store_error("read", &path, e)),
        };
        let bytes = bytes.ok_or_else(|| {
            Error::metadata(
                &path,
                format!("the state object is larger than {MAX_STATE} bytes"),
            )
        })?;
        let state: State =
            serde_json::from_slice(&bytes).map_err(|e| Error::metadata(&path, e.to_string()))?;
        if state.format != STATE_FORMAT || state.version != STATE_VERSION {
            return Err(Error::metadata(
                &path,
                format!(
                    "format {:?} version {}, where blz reads {STATE_FORMAT:?} version {STATE_VERSION}",
                    state.format, state.version
                ),
            ));
        }
        for (rel, f) in &state.files {
            let bad = |k: &str| {
                k.is_empty() || k.split('/').any(|c| c.is_empty() || c == "." || c == "..")
            };
            if bad(rel) || matches!(f, StateFile::Object { key, .. } if bad(key)) {
                return Err(Error::metadata(
                    &path,
                    format!("file {rel:?} is not a plain path inside the dataset"),
                ));
            }
        }
        Ok((Some(state), Some(version)))
    }

    /// Makes the visible tree the committed state again (no overlay).
    fn reset_tree(&self) {
        let committed = self.committed_lock();
        let mut tree = Tree::default();
        if let Some(state) = &committed.state {
            for (rel, f) in &state.files {
                let data = match f {
                    StateFile::Object { key, len } => Data::Remote {
                        key: key.clone(),
                        len: *len,
                        head: None,
                    },
                    StateFile::Inline { text } => {
                        Data::Memory(Bytes::from(text.clone().into_bytes()))
                    }
                };
                tree.files.insert(self.rel_to_bucket(rel), Node::new(data));
            }
        }
        *self.tree() = tree;
    }

    fn rel_to_bucket(&self, rel: &str) -> String {
        if self.backend.prefix.is_empty() {
            rel.to_string()
        } else {
            format!("{}/{rel}", self.backend.prefix)
        }
    }

    /// The key below the bucket that `path` names.
    fn key_of(&self, path: &Path) -> Result<String> {
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

    /// Uploads every file changed under the dataset root and commits the new state with a
    /// conditional write. On [`Error::Conflict`] (or any failure of the state write) the
    /// overlay is dropped: this handle shows the state it loaded, and must be reopened.
    fn publish_root(&self) -> Result<()> {
        let prefix_slash = format!("{}/", self.backend.prefix);
        let files: Vec<(String, Arc<Node>)> = self
            .tree()
            .files
            .iter()
            .filter_map(|(k, n)| {
                k.strip_prefix(&prefix_slash)
                    .map(|r| (r.to_string(), Arc::clone(n)))
            })
            .collect();
        let (old, version) = {
            let c = self.committed_lock();
            (c.state.clone(), c.version.clone())
        };
        let generation = old.as_ref().map_or(1, |s| s.generation + 1);
        let tag: u64 = rand::random();
        let mut new_files = BTreeMap::new();
        let mut uploads: Vec<(String, String, Arc<Node>)> = Vec::new();
        let mut changed = false;
        for (rel, node) in &files {
            let d = lock_data(node);
            let entry = match &*d {
                Data::Remote { key, len, .. } => StateFile::Object {
                    key: key.clone(),
                    len: *len,
                },
                Data::Memory(b) => match std::str::from_utf8(b) {
                    Ok(t) => StateFile::Inline {
                        text: t.to_string(),
                    },
                    Err(_) => {
                        changed = true;
                        let key = format!("{rel}.{generation}-{tag:016x}");
                        uploads.push((rel.clone(), key.clone(), Arc::clone(node)));
                        StateFile::Object {
                            key,
                            len: b.len() as u64,
                        }
                    }
                },
                Data::Spool { file } => {
                    changed = true;
                    let len = file
                        .metadata()
                        .map_err(|e| Error::io("stat", self.backend.root.join(rel), e))?
                        .len();
                    let inline = if rel.starts_with("meta/") && len <= INLINE_MAX as u64 {
                        let mut buf = vec![0u8; len as usize];
                        file.read_exact_at(&mut buf, 0)
                            .map_err(|e| Error::io("read", self.backend.root.join(rel), e))?;
                        String::from_utf8(buf).ok()
                    } else {
                        None
                    };
                    match inline {
                        Some(text) => StateFile::Inline { text },
                        None => {
                            let key = format!("{rel}.{generation}-{tag:016x}");
                            uploads.push((rel.clone(), key.clone(), Arc::clone(node)));
                            StateFile::Object { key, len }
                        }
                    }
                }
            };
            new_files.insert(rel.clone(), entry);
        }
        if old.as_ref().is_some_and(|s| s.files == new_files) && !changed {
            return Ok(());
        }
        let result = self.upload(&uploads).and_then(|()| {
            let now = now_secs();
            let mut retired = old.as_ref().map(|s| s.retired.clone()).unwrap_or_default();
            if let Some(o) = &old {
                let still: HashSet<&str> = new_files
                    .values()
                    .filter_map(|f| match f {
                        StateFile::Object { key, .. } => Some(key.as_str()),
                        StateFile::Inline { .. } => None,
                    })
                    .collect();
                for f in o.files.values() {
                    if let StateFile::Object { key, .. } = f {
                        if !still.contains(key.as_str()) {
                            retired.push(Retired {
                                key: key.clone(),
                                at: now,
                            });
                        }
                    }
                }
            }
            let state = State {
                format: STATE_FORMAT.into(),
                version: STATE_VERSION,
                generation,
                committed_at: now,
                files: new_files,
                retired,
            };
            let v = self.write_state(&state, version.as_ref())?;
            *self.committed_lock() = Committed {
                state: Some(state),
                version: Some(v),
            };
            Ok(())
        });
        match result {
            Ok(()) => {
                // The uploaded files are read from their objects from now on (the spool goes).
                for (_, key, node) in uploads {
                    let mut d = lock_data(&node);
                    let len = match &*d {
                        Data::Spool { file } => file.metadata().map(|m| m.len()).ok(),
                        Data::Memory(b) => Some(b.len() as u64),
                        Data::Remote { .. } => None,
                    };
                    if let Some(len) = len {
                        *d = Data::Remote {
                            key,
                            len,
                            head: None,
                        };
                    }
                }
                // Inline files become memory files.
                let committed = self.committed_lock();
                if let Some(state) = &committed.state {
                    for (rel, f) in &state.files {
                        if let (StateFile::Inline { text }, Some((_, node))) =
                            (f, files.iter().find(|(r, _)| r == rel))
                        {
                            *lock_data(node) = Data::Memory(Bytes::from(text.clone().into_bytes()));
                        }
                    }
                }
                Ok(())
            }
            Err(e) => {
                self.reset_tree();
                Err(e)
            }
        }
    }

    /// Uploads spooled files whole (one PUT each), [`PARALLEL`] at a time: at most that
    /// many files are held in memory at once.
    fn upload(&self, uploads: &[(String, String, Arc<Node>)]) -> Result<()> {
        let rt = runtime()?;
        let jobs: Vec<(PathBuf, OPath, Arc<Node>)> = uploads
            .iter()
            .map(|(rel, key, node)| {
                (
                    self.backend.root.join(rel),
                    self.backend.key(key),
                    Arc::clone(node),
                )
            })
            .collect();
        self.backend.count(jobs.len() as u64);
        let store = Arc::clone(&self.backend.store);
        rt.block_on(async move {
            futures::stream::iter(jobs)
                .map(|(path, loc, node)| {
                    let store = Arc::clone(&store);
                    async move {
                        let bytes = node_bytes(&node, &path)?;
                        store
                            .put(&loc, PutPayload::from_bytes(bytes))
                            .await
                            .map(drop)
                            .map_err(|e| store_error("upload", &path, e))
                    }
                })
                .buffer_unordered(PARALLEL)
                .try_collect::<Vec<()>>()
                .await
        })
        .map(drop)
    }

    /// Writes the state object: if-match `version`, or create-if-absent without one.
    fn write_state(&self, state: &State, version: Option<&UpdateVersion>) -> Result<UpdateVersion> {
        let rt = runtime()?;
        let path = self.state_path();
        let bytes = serde_json::to_vec(state).map_err(|e| Error::metadata(&path, e.to_string()))?;
        let mode = match version {
            Some(v) => PutMode::Update(v.clone()),
            None => PutMode::Create,
        };
        let loc = self.backend.key(STATE_KEY);
        self.backend.count(1);
        let r = rt.block_on(self.backend.store.put_opts(
            &loc,
            PutPayload::from(bytes),
            PutOptions {
                mode,
                ..PutOptions::default()
            },
        ));
        match r {
            Ok(r) => Ok(UpdateVersion {
                e_tag: r.e_tag,
                version: r.version,
            }),
            Err(
                object_store::Error::Precondition { .. }
                | object_store::Error::AlreadyExists { .. },
            ) => Err(Error::Conflict {
                path: self.backend.root.clone(),
            }),
            Err(e) => Err(store_error("commit", &path, e)),
        }
    }
}

impl Storage for ObjectStorage {
    fn open(&self, path: &Path, mode: OpenMode) -> Result<Box<dyn StorageFile>> {
        let key = self.key_of(path)?;
        let node = {
            let mut tree = self.tree();
            match mode {
                OpenMode::Read | OpenMode::ReadWrite => tree
                    .files
                    .get(&key)
                    .cloned()
                    .ok_or_else(|| not_found("open", path))?,
                OpenMode::Create => {
                    if tree.is_dir(&key) {
                        return Err(Error::io(
                            "create",
                            path,
                            std::io::Error::new(ErrorKind::IsADirectory, "a directory"),
                        ));
                    }
                    let node = Node::spool(path)?;
                    tree.files.insert(key, Arc::clone(&node));
                    node
                }
            }
        };
        Ok(Box::new(ObjectFile {
            node,
            backend: Arc::clone(&self.backend),
            path: path.to_path_buf(),
            writable: mode != OpenMode::Read,
        }))
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let key = self.key_of(dir)?;
        let tree = self.tree();
        if !tree.is_dir(&key) {
            return Err(not_found("list", dir));
        }
        let p = if key.is_empty() {
            String::new()
        } else {
            format!("{key}/")
        };
        let mut names = BTreeSet::new();
        let below = |k: &String| {
            k.strip_prefix(&p)
                .and_then(|r| r.split('/').next())
                .map(str::to_string)
        };
        for k in tree
            .files
            .range(p.clone()..)
            .map(|(k, _)| k)
            .take_while(|k| k.starts_with(&p))
        {
            names.extend(below(k));
        }
        for k in tree
            .dirs
            .range(p.clone()..)
            .take_while(|k| k.starts_with(&p))
        {
            names.extend(below(k));
        }
        // The state object is the commit, not a file of the dataset.
        if key == self.rel_to_bucket("meta") {
            names.remove("state");
        }
        Ok(names.into_iter().filter(|n| !n.is_empty()).collect())
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let (f, t) = (self.key_of(from)?, self.key_of(to)?);
        let mut tree = self.tree();
        if let Some(node) = tree.files.remove(&f) {
            tree.files.insert(t, node);
            return Ok(());
        }
        if !tree.is_dir(&f) || f.is_empty() {
            return Err(not_found("rename", from));
        }
        let (fp, tp) = (format!("{f}/"), format!("{t}/"));
        // A directory replaces a directory whole.
        tree.files.retain(|k, _| !k.starts_with(&tp));
        tree.dirs.retain(|k| !k.starts_with(&tp) && *k != t);
        let moved: Vec<String> = tree
            .files
            .keys()
            .filter(|k| k.starts_with(&fp))
            .cloned()
            .collect();
        for k in moved {
            if let Some(n) = tree.files.remove(&k) {
                tree.files.insert(format!("{tp}{}", &k[fp.len()..]), n);
            }
        }
        let dirs: Vec<String> = tree
            .dirs
            .iter()
            .filter(|k| k.starts_with(&fp) || **k == f)
            .cloned()
            .collect();
        for k in dirs {
            tree.dirs.remove(&k);
            let nk = if k == f {
                t.clone()
            } else {
                format!("{tp}{}", &k[fp.len()..])
            };
            tree.dirs.insert(nk);
        }
        tree.dirs.insert(t);
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        let key = self.key_of(path)?;
        self.tree().files.remove(&key);
        Ok(())
    }

    fn remove_dir_all(&self, path: &Path) -> Result<()> {
        let key = self.key_of(path)?;
        let p = format!("{key}/");
        let mut tree = self.tree();
        tree.files.retain(|k, _| !k.starts_with(&p));
        tree.dirs.retain(|k| !k.starts_with(&p) && *k != key);
        Ok(())
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        let key = self.key_of(path)?;
        let mut tree = self.tree();
        if tree.files.contains_key(&key) {
            return Err(Error::io(
                "create directory",
                path,
                std::io::Error::new(ErrorKind::AlreadyExists, "a file"),
            ));
        }
        if !key.is_empty() {
            tree.dirs.insert(key);
        }
        Ok(())
    }

    fn exists(&self, path: &Path) -> bool {
        let Ok(key) = self.key_of(path) else {
            return false;
        };
        let tree = self.tree();
        tree.files.contains_key(&key) || tree.is_dir(&key)
    }

    fn is_dir(&self, path: &Path) -> bool {
        self.key_of(path).is_ok_and(|k| self.tree().is_dir(&k))
    }

    fn sync_dir(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }

    fn lock(&self, path: &Path) -> Result<LockGuard> {
        // Only in this process: across processes, the conditional commit is what keeps two
        // writers apart (the second gets `Conflict`).
        let mut held = held_locks();
        if !held.insert(path.to_path_buf()) {
            return Err(Error::Locked {
                path: path.to_path_buf(),
            });
        }
        Ok(Box::new(HeldLock(path.to_path_buf())))
    }

    fn concurrent_reads(&self) -> Option<usize> {
        Some(CONCURRENT_READS)
    }

    fn publish(&self, root: &Path) -> Result<()> {
        if root == self.backend.root.as_path() {
            self.publish_root()
        } else {
            Ok(())
        }
    }
}

/// What [`collect_garbage`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Collected {
    /// Objects deleted: retired ones and orphans.
    pub deleted: Vec<String>,
    /// Objects left because they are younger than the grace period.
    pub kept: usize,
}

/// Removes the objects of the dataset at `storage`'s root that its current state no longer
/// uses: retired objects retired more than `grace` ago, and orphans (objects no state names:
/// uploads of a writer that lost a race or was killed) last modified more than `grace` ago.
/// Then records the pruned retired list with a conditional write. `grace` must exceed the
/// longest time a reader keeps reading a state after a newer one is committed, and the
/// longest write (from its first upload to its commit); see `spec/object-store.md`.
///
/// # Errors
/// I/O errors from the store; [`Error::Conflict`] when a writer committed meanwhile (what was
/// deleted was unused either way; run it again).
pub fn collect_garbage(storage: &ObjectStorage, grace: Duration) -> Result<Collected> {
    let rt = runtime()?;
    let backend = &storage.backend;
    let (state, version) = {
        let c = storage.committed_lock();
        (c.state.clone(), c.version.clone())
    };
    let Some(mut state) = state else {
        return Err(Error::InvalidArgument(format!(
            "{}: no dataset there",
            backend.root.display()
        )));
    };
    let now = SystemTime::now();
    let cutoff = now.checked_sub(grace).unwrap_or(UNIX_EPOCH);
    let cutoff_secs = cutoff.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let used: HashSet<String> = state
        .files
        .values()
        .filter_map(|f| match f {
            StateFile::Object { key, .. } => Some(key.clone()),
            StateFile::Inline { .. } => None,
        })
        .collect();
    let retired: BTreeMap<String, u64> = state
        .retired
        .iter()
        .map(|r| (r.key.clone(), r.at))
        .collect();
    let prefix = OPath::from(backend.prefix.as_str());
    backend.count(1);
    let listed: Vec<object_store::ObjectMeta> = rt
        .block_on(backend.store.list(Some(&prefix)).try_collect())
        .map_err(|e| store_error("list", &backend.root, e))?;
    let skip = backend.prefix.len() + 1;
    let mut doomed = Vec::new();
    let mut kept = 0;
    for m in listed {
        let full = m.location.to_string();
        let Some(rel) = full.get(skip..) else {
            continue;
        };
        if rel == STATE_KEY || used.contains(rel) {
            continue;
        }
        let old_enough = match retired.get(rel) {
            Some(at) => *at < cutoff_secs,
            None => SystemTime::from(m.last_modified) < cutoff,
        };
        if old_enough {
            doomed.push(rel.to_string());
        } else {
            kept += 1;
        }
    }
    backend.count(doomed.len() as u64);
    let locs: Vec<OPath> = doomed.iter().map(|k| backend.key(k)).collect();
    let store = Arc::clone(&backend.store);
    rt.block_on(async move {
        futures::stream::iter(locs)
            .map(|loc| {
                let store = Arc::clone(&store);
                async move {
                    match store.delete(&loc).await {
                        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                        Err(e) => Err(e),
                    }
                }
            })
            .buffer_unordered(PARALLEL)
            .try_collect::<Vec<()>>()
            .await
    })
    .map_err(|e| store_error("delete", &backend.root, e))?;
    let gone: HashSet<&str> = doomed.iter().map(String::as_str).collect();
    let before = state.retired.len();
    state.retired.retain(|r| !gone.contains(r.key.as_str()));
    if state.retired.len() != before {
        let v = storage.write_state(&state, version.as_ref())?;
        *storage.committed_lock() = Committed {
            state: Some(state),
            version: Some(v),
        };
    }
    Ok(Collected {
        deleted: doomed,
        kept,
    })
}
