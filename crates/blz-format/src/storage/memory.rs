//! The in-memory backend: a file tree held in this process's memory, with the semantics of
//! the local backend (positional reads and writes, atomic renames and swaps, an exclusive
//! lock per file), so that a dataset built here is byte for byte the dataset a local
//! directory would hold: its chunks stay compressed, and the memory it takes is what its
//! files (mostly the compressed chunks) take.
//!
//! Datasets are named by `memory://name` URLs ([`for_url`], reached through
//! `blz::storage::for_path` by every open and create of the library, the CLI's library calls and
//! the Python package). Named ones live in one process-wide tree until removed ([`remove`]),
//! as files on a tmpfs would; an anonymous one ([`anonymous`]) lives in a tree of its own
//! that goes when the last handle on it is dropped. Nothing here is seen by another process
//! (a forked child sees a copy of its parent's memory as it was at the fork).

use super::{EntryKind, LockGuard, OpenMode, Storage, StorageFile};
use crate::error::{Error, Result};
use bytes::Bytes;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsString;
use std::io::ErrorKind;
use std::ops::Range;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, RwLock, Weak};

/// The URL scheme of in-memory datasets.
pub(crate) const SCHEME: &str = "memory://";

/// Numbers files, directories and storages: what a [`Storage::stamp`] tells apart.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// A file's bytes and how many times they changed.
#[derive(Debug)]
struct MemFile {
    id: u64,
    data: RwLock<Vec<u8>>,
    version: AtomicU64,
}

impl MemFile {
    fn new() -> Arc<MemFile> {
        Arc::new(MemFile {
            id: next_id(),
            data: RwLock::new(Vec::new()),
            version: AtomicU64::new(0),
        })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<u8>> {
        self.data.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Vec<u8>> {
        self.version.fetch_add(1, Ordering::SeqCst);
        self.data.write().unwrap_or_else(PoisonError::into_inner)
    }
}

#[derive(Debug)]
enum Node {
    Dir {
        id: u64,
        entries: BTreeMap<OsString, Node>,
    },
    File(Arc<MemFile>),
}

impl Node {
    fn dir() -> Node {
        Node::Dir {
            id: next_id(),
            entries: BTreeMap::new(),
        }
    }

    fn kind(&self) -> EntryKind {
        match self {
            Node::Dir { .. } => EntryKind::Dir,
            Node::File(_) => EntryKind::File,
        }
    }

    /// Bytes held by the files at and below this node.
    fn bytes(&self) -> u64 {
        match self {
            Node::Dir { entries, .. } => entries.values().map(Node::bytes).sum(),
            Node::File(f) => f.read().len() as u64,
        }
    }
}

/// A file tree in memory: see the module documentation. `MemoryStorage::new()` is a private
/// tree (a test's, or a dataset opened with [`crate::storage::Storage`] handed over
/// directly); `memory://` URLs reach the process-wide ones.
#[derive(Debug)]
pub struct MemoryStorage {
    id: u64,
    /// The root directory (every path's components, `memory:` included, are names in it).
    tree: Mutex<Node>,
    /// Ids of the files whose lock is held.
    locks: Arc<Mutex<HashSet<u64>>>,
}

impl Default for MemoryStorage {
    fn default() -> Self {
        MemoryStorage::new()
    }
}

fn io_err(op: &'static str, path: &Path, kind: ErrorKind, what: &str) -> Error {
    Error::io(op, path, std::io::Error::new(kind, what.to_string()))
}

fn not_found(op: &'static str, path: &Path) -> Error {
    io_err(
        op,
        path,
        ErrorKind::NotFound,
        "no such file or directory in memory",
    )
}

/// The names a path walks through; `..` is refused (nothing blz writes has one).
fn names(path: &Path) -> Result<Vec<OsString>> {
    let mut out = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(n) => out.push(n.to_os_string()),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                return Err(Error::InvalidArgument(format!(
                    "{}: an in-memory path may not hold `..`",
                    path.display()
                )))
            }
        }
    }
    Ok(out)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl MemoryStorage {
    /// An empty private tree.
    pub fn new() -> MemoryStorage {
        MemoryStorage {
            id: next_id(),
            tree: Mutex::new(Node::dir()),
            locks: Arc::new(Mutex::new(HashSet::new())),
        }
    }

    /// The bytes of the files at and below `path` (a dataset's root: the memory its files
    /// take, compressed chunks, superchunk headers and meta documents), 0 when nothing is
    /// there.
    fn bytes_below(&self, path: &Path) -> u64 {
        let Ok(names) = names(path) else { return 0 };
        let tree = lock(&self.tree);
        find(&tree, &names).map_or(0, Node::bytes)
    }

    fn with_node<T>(&self, path: &Path, f: impl FnOnce(Option<&Node>) -> T) -> T {
        match names(path) {
            Ok(n) => f(find(&lock(&self.tree), &n)),
            Err(_) => f(None),
        }
    }
}

fn find<'a>(mut node: &'a Node, names: &[OsString]) -> Option<&'a Node> {
    for n in names {
        match node {
            Node::Dir { entries, .. } => node = entries.get(n)?,
            Node::File(_) => return None,
        }
    }
    Some(node)
}

/// The directory holding `path`'s last name, and that name.
fn parent_dir<'a>(
    root: &'a mut Node,
    names: &[OsString],
    op: &'static str,
    path: &Path,
) -> Result<(&'a mut BTreeMap<OsString, Node>, OsString)> {
    let Some((last, dirs)) = names.split_last() else {
        return Err(io_err(
            op,
            path,
            ErrorKind::InvalidInput,
            "the root of the tree",
        ));
    };
    let mut node = root;
    for n in dirs {
        node = match node {
            Node::Dir { entries, .. } => entries.get_mut(n).ok_or_else(|| not_found(op, path))?,
            Node::File(_) => {
                return Err(io_err(
                    op,
                    path,
                    ErrorKind::NotADirectory,
                    "not a directory",
                ))
            }
        };
    }
    match node {
        Node::Dir { entries, .. } => Ok((entries, last.clone())),
        Node::File(_) => Err(io_err(
            op,
            path,
            ErrorKind::NotADirectory,
            "not a directory",
        )),
    }
}

struct MemHandle {
    file: Arc<MemFile>,
    path: PathBuf,
    writable: bool,
}

impl MemHandle {
    fn check_writable(&self) -> Result<()> {
        if self.writable {
            Ok(())
        } else {
            Err(io_err(
                "write",
                &self.path,
                ErrorKind::PermissionDenied,
                "opened to read",
            ))
        }
    }

    fn range(&self, len: usize, offset: u64, n: usize) -> Result<Range<usize>> {
        let start = usize::try_from(offset).ok().filter(|&s| s <= len);
        match start.and_then(|s| Some(s..s.checked_add(n)?)) {
            Some(r) if r.end <= len => Ok(r),
            _ => Err(io_err(
                "read",
                &self.path,
                ErrorKind::UnexpectedEof,
                "read past the end of the file",
            )),
        }
    }
}

impl StorageFile for MemHandle {
    fn len(&self) -> Result<u64> {
        Ok(self.file.read().len() as u64)
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let data = self.file.read();
        let r = self.range(data.len(), offset, buf.len())?;
        if let Some(src) = data.get(r) {
            buf.copy_from_slice(src);
        }
        Ok(())
    }

    /// Each range copied once, straight from the file's bytes.
    fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let data = self.file.read();
        ranges
            .iter()
            .map(|r| {
                let n = usize::try_from(r.end.saturating_sub(r.start)).unwrap_or(usize::MAX);
                let r = self.range(data.len(), r.start, n)?;
                Ok(data.get(r).map(Bytes::copy_from_slice).unwrap_or_default())
            })
            .collect()
    }

    fn write_at(&self, offset: u64, bytes: &[u8]) -> Result<()> {
        self.check_writable()?;
        let too_big = || {
            io_err(
                "write",
                &self.path,
                ErrorKind::OutOfMemory,
                "a file larger than memory",
            )
        };
        let start = usize::try_from(offset).map_err(|_| too_big())?;
        let end = start.checked_add(bytes.len()).ok_or_else(too_big)?;
        let mut data = self.file.write();
        if start == data.len() {
            // The usual write: appended, nothing zeroed first.
            data.try_reserve(bytes.len()).map_err(|_| too_big())?;
            data.extend_from_slice(bytes);
        } else {
            if end > data.len() {
                let more = end - data.len();
                data.try_reserve(more).map_err(|_| too_big())?;
                data.resize(end, 0);
            }
            if let Some(dst) = data.get_mut(start..end) {
                dst.copy_from_slice(bytes);
            }
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.check_writable()?;
        let len = usize::try_from(len).map_err(|_| {
            io_err(
                "truncate",
                &self.path,
                ErrorKind::OutOfMemory,
                "a file larger than memory",
            )
        })?;
        self.file.write().resize(len, 0);
        Ok(())
    }

    /// Nothing to make durable; spare capacity the file grew into is given back (the memory
    /// a dataset holds is its bytes, not what its vectors reserved while they grew).
    fn sync(&self) -> Result<()> {
        if self.writable {
            let mut data = self
                .file
                .data
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            if data.capacity() > data.len() + data.len() / 64 + 4096 {
                data.shrink_to_fit();
            }
        }
        Ok(())
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

/// Holds a lock of [`MemoryStorage::lock`].
struct HeldLock {
    locks: Arc<Mutex<HashSet<u64>>>,
    id: u64,
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        lock(&self.locks).remove(&self.id);
    }
}

impl Storage for MemoryStorage {
    fn open(&self, path: &Path, mode: OpenMode) -> Result<Box<dyn StorageFile>> {
        let n = names(path)?;
        let mut tree = lock(&self.tree);
        let file = if mode == OpenMode::Create {
            let (dir, last) = parent_dir(&mut tree, &n, "open", path)?;
            match dir
                .entry(last)
                .or_insert_with(|| Node::File(MemFile::new()))
            {
                Node::File(f) => {
                    f.write().clear();
                    Arc::clone(f)
                }
                Node::Dir { .. } => return Err(not_regular(path)),
            }
        } else {
            match find(&tree, &n) {
                Some(Node::File(f)) => Arc::clone(f),
                Some(Node::Dir { .. }) => return Err(not_regular(path)),
                None => return Err(not_found("open", path)),
            }
        };
        Ok(Box::new(MemHandle {
            file,
            path: path.to_path_buf(),
            writable: mode != OpenMode::Read,
        }))
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let n = names(dir)?;
        let tree = lock(&self.tree);
        match find(&tree, &n) {
            Some(Node::Dir { entries, .. }) => Ok(entries
                .keys()
                .map(|k| k.to_string_lossy().into_owned())
                .collect()),
            Some(Node::File(_)) => Err(io_err(
                "list",
                dir,
                ErrorKind::NotADirectory,
                "not a directory",
            )),
            None => Err(not_found("list", dir)),
        }
    }

    /// POSIX's rename: a file replaces a file; a directory takes the place of nothing or
    /// of an empty directory.
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let (nf, nt) = (names(from)?, names(to)?);
        if nt.starts_with(&nf) && nt.len() > nf.len() {
            return Err(io_err(
                "rename",
                from,
                ErrorKind::InvalidInput,
                "into itself",
            ));
        }
        if nf == nt {
            return match find(&lock(&self.tree), &nf) {
                Some(_) => Ok(()),
                None => Err(not_found("rename", from)),
            };
        }
        let mut tree = lock(&self.tree);
        // Checked before anything moves, so a refused rename changes nothing.
        let moving = find(&tree, &nf)
            .ok_or_else(|| not_found("rename", from))?
            .kind();
        match (moving, find(&tree, &nt)) {
            (_, None) => {}
            (EntryKind::File, Some(Node::File(_))) => {}
            (EntryKind::Dir, Some(Node::Dir { entries, .. })) if entries.is_empty() => {}
            (_, Some(_)) => {
                return Err(io_err(
                    "rename",
                    to,
                    ErrorKind::AlreadyExists,
                    "something of another kind, or a directory not empty, is there",
                ))
            }
        }
        parent_dir(&mut tree, &nt, "rename", to)?;
        let (dir, last) = parent_dir(&mut tree, &nf, "rename", from)?;
        let node = dir.remove(&last).ok_or_else(|| not_found("rename", from))?;
        let (dir, last) = parent_dir(&mut tree, &nt, "rename", to)?;
        dir.insert(last, node);
        Ok(())
    }

    fn exchange(&self, a: &Path, b: &Path) -> Result<()> {
        let (na, nb) = (names(a)?, names(b)?);
        if na.starts_with(&nb) || nb.starts_with(&na) {
            return Err(io_err(
                "exchange",
                a,
                ErrorKind::InvalidInput,
                "one path holds the other",
            ));
        }
        let mut tree = lock(&self.tree);
        if find(&tree, &na).is_none() {
            return Err(not_found("exchange", a));
        }
        if find(&tree, &nb).is_none() {
            return Err(not_found("exchange", b));
        }
        let (dir, last) = parent_dir(&mut tree, &na, "exchange", a)?;
        let node_a = dir.remove(&last).ok_or_else(|| not_found("exchange", a))?;
        let (dir, last) = parent_dir(&mut tree, &nb, "exchange", b)?;
        let node_b = dir
            .insert(last, node_a)
            .ok_or_else(|| not_found("exchange", b))?;
        let (dir, last) = parent_dir(&mut tree, &na, "exchange", a)?;
        dir.insert(last, node_b);
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        let n = names(path)?;
        let mut tree = lock(&self.tree);
        let Ok((dir, last)) = parent_dir(&mut tree, &n, "remove", path) else {
            return Ok(());
        };
        match dir.get(&last) {
            Some(Node::Dir { .. }) => Err(io_err(
                "remove",
                path,
                ErrorKind::IsADirectory,
                "a directory",
            )),
            Some(Node::File(_)) => {
                dir.remove(&last);
                Ok(())
            }
            None => Ok(()),
        }
    }

    fn remove_dir_all(&self, path: &Path) -> Result<()> {
        let n = names(path)?;
        let mut tree = lock(&self.tree);
        if let Ok((dir, last)) = parent_dir(&mut tree, &n, "remove", path) {
            dir.remove(&last);
        }
        Ok(())
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        let n = names(path)?;
        let mut tree = lock(&self.tree);
        let mut node = &mut *tree;
        for name in &n {
            node = match node {
                Node::Dir { entries, .. } => entries.entry(name.clone()).or_insert_with(Node::dir),
                Node::File(_) => {
                    return Err(io_err(
                        "mkdir",
                        path,
                        ErrorKind::NotADirectory,
                        "a file is in the way",
                    ))
                }
            };
        }
        match node {
            Node::Dir { .. } => Ok(()),
            Node::File(_) => Err(io_err(
                "mkdir",
                path,
                ErrorKind::AlreadyExists,
                "a file is there",
            )),
        }
    }

    fn create_dir_new(&self, path: &Path) -> Result<()> {
        let n = names(path)?;
        let mut tree = lock(&self.tree);
        let (dir, last) = parent_dir(&mut tree, &n, "mkdir", path)?;
        if dir.contains_key(&last) {
            return Err(io_err(
                "mkdir",
                path,
                ErrorKind::AlreadyExists,
                "already exists",
            ));
        }
        dir.insert(last, Node::dir());
        Ok(())
    }

    fn exists(&self, path: &Path) -> bool {
        self.with_node(path, |n| n.is_some())
    }

    fn is_dir(&self, path: &Path) -> bool {
        self.with_node(path, |n| matches!(n, Some(Node::Dir { .. })))
    }

    fn entry_kind(&self, path: &Path) -> Option<EntryKind> {
        self.with_node(path, |n| n.map(Node::kind))
    }

    /// `[storage, file or directory, changes, length]`: a file rewritten in place or
    /// replaced by a rename gets another stamp.
    fn stamp(&self, path: &Path) -> Option<[u64; 4]> {
        self.with_node(path, |n| match n? {
            Node::Dir { id, .. } => Some([self.id, *id, 0, 0]),
            Node::File(f) => Some([
                self.id,
                f.id,
                f.version.load(Ordering::SeqCst),
                f.read().len() as u64,
            ]),
        })
    }

    fn sync_dir(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }

    /// The lock goes with the file (as flock's with an inode): a lock file renamed into
    /// place stays locked.
    fn lock(&self, path: &Path) -> Result<LockGuard> {
        let n = names(path)?;
        let id = {
            let mut tree = lock(&self.tree);
            let (dir, last) = parent_dir(&mut tree, &n, "lock", path)?;
            match dir
                .entry(last)
                .or_insert_with(|| Node::File(MemFile::new()))
            {
                Node::File(f) => f.id,
                Node::Dir { .. } => return Err(not_regular(path)),
            }
        };
        if !lock(&self.locks).insert(id) {
            return Err(Error::Locked {
                path: path.to_path_buf(),
                holder: Some(std::process::id()),
            });
        }
        Ok(Box::new(HeldLock {
            locks: Arc::clone(&self.locks),
            id,
        }))
    }
}

fn not_regular(path: &Path) -> Error {
    io_err(
        "open",
        path,
        ErrorKind::InvalidInput,
        "a directory, not a regular file: blz opens only regular files",
    )
}

// ---------------------------------------------------------------------------------------
// `memory://` URLs

/// The anonymous trees of this process, by the name of the dataset each holds: kept by
/// the handles on it alone.
fn anonymous_trees() -> MutexGuard<'static, HashMap<String, Weak<MemoryStorage>>> {
    static TREES: OnceLock<Mutex<HashMap<String, Weak<MemoryStorage>>>> = OnceLock::new();
    lock(TREES.get_or_init(|| Mutex::new(HashMap::new())))
}

/// The process-wide tree of named in-memory datasets.
pub fn shared() -> Arc<MemoryStorage> {
    static SHARED: OnceLock<Arc<MemoryStorage>> = OnceLock::new();
    Arc::clone(SHARED.get_or_init(|| Arc::new(MemoryStorage::new())))
}

/// True when `path` is a `memory://` URL.
pub fn is_memory_url(path: &Path) -> bool {
    path.to_str().is_some_and(|s| s.starts_with(SCHEME))
}

/// The dataset name of a `memory://name` URL, checked: not empty, no `..`, no empty
/// component, and trailing slashes dropped.
fn name_of(path: &Path) -> Result<String> {
    let bad = |why: &str| Error::InvalidArgument(format!("{}: {why}", path.display()));
    let s = path.to_str().ok_or_else(|| bad("not UTF-8"))?;
    let name = s
        .strip_prefix(SCHEME)
        .ok_or_else(|| bad("not a memory:// URL"))?
        .trim_end_matches('/');
    if name.is_empty() {
        return Err(bad("a memory:// URL that names no dataset (memory://name)"));
    }
    if name
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err(bad("a memory:// name of empty, `.` or `..` components"));
    }
    Ok(name.to_string())
}

/// The storage holding the dataset at the `memory://name` URL `path`, and the root to give
/// it: the tree of the anonymous dataset of that name while a handle keeps it, else the
/// process-wide tree of named datasets (where a create makes it).
///
/// # Errors
/// [`Error::InvalidArgument`] for a malformed URL.
pub fn for_url(path: &Path) -> Result<(Arc<dyn Storage>, PathBuf)> {
    let name = name_of(path)?;
    let root = PathBuf::from(format!("{SCHEME}{name}"));
    let anon = anonymous_trees().get(&name).and_then(Weak::upgrade);
    Ok(match anon {
        Some(tree) => (tree as Arc<dyn Storage>, root),
        None => (shared() as Arc<dyn Storage>, root),
    })
}

/// A new anonymous dataset's storage and root (`memory://anon-N`): a tree of its own that
/// lives while something holds the storage (the handles opened on it; opening its URL
/// again finds it meanwhile) and is freed with the last of them.
pub fn anonymous() -> (Arc<dyn Storage>, PathBuf) {
    static COUNT: AtomicU64 = AtomicU64::new(1);
    let name = format!("anon-{}", COUNT.fetch_add(1, Ordering::Relaxed));
    let tree = Arc::new(MemoryStorage::new());
    let mut trees = anonymous_trees();
    trees.retain(|_, w| w.strong_count() > 0);
    trees.insert(name.clone(), Arc::downgrade(&tree));
    (tree, PathBuf::from(format!("{SCHEME}{name}")))
}

/// True when something (a dataset, a directory) is at the `memory://` URL `path`.
pub fn exists(path: &Path) -> bool {
    for_url(path).is_ok_and(|(s, root)| s.exists(&root))
}

/// The bytes the files of the in-memory dataset at `path` take (0 when there is none).
pub fn bytes_held(path: &Path) -> u64 {
    let Ok(name) = name_of(path) else { return 0 };
    let root = PathBuf::from(format!("{SCHEME}{name}"));
    match anonymous_trees().get(&name).and_then(Weak::upgrade) {
        Some(tree) => tree.bytes_below(&root),
        None => shared().bytes_below(&root),
    }
}

/// Removes the in-memory dataset (or directory) at `path`, as `rm -r` would on a tmpfs:
/// its memory is freed once no handle reads it any more (a handle that still has its
/// files open keeps them; one that opens them next finds nothing). An anonymous dataset's
/// name is forgotten. Removing what is not there is no error.
///
/// # Errors
/// [`Error::InvalidArgument`] for a malformed URL.
pub fn remove(path: &Path) -> Result<()> {
    let name = name_of(path)?;
    let root = PathBuf::from(format!("{SCHEME}{name}"));
    if let Some(tree) = anonymous_trees().remove(&name).and_then(|w| w.upgrade()) {
        return tree.remove_dir_all(&root);
    }
    shared().remove_dir_all(&root)
}

/// The error for a `memory://` URL where nothing is: a `NotFound` I/O error that says where
/// in-memory datasets live.
pub fn not_here(root: &Path) -> Error {
    io_err(
        "open",
        root,
        ErrorKind::NotFound,
        "no in-memory dataset of that name in this process (in-memory datasets live in the \
         process that made them, until removed)",
    )
}
