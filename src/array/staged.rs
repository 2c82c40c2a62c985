//! Appends whose superchunk files are written by other processes: the dataset's writer opens
//! a *staged write* ([`Dataset::begin_staged`]), any number of workers (other processes,
//! other hosts sharing the filesystem, no lock) each encode a chunk-aligned range of rows
//! into complete superchunk files in the session's directory ([`write_rows`]), and the writer
//! commits them all in one transaction ([`Dataset::commit_staged`]).
//!
//! ```no_run
//! use blz::{Dataset, DType};
//! use blz::array::staged;
//! # fn main() -> blz::Result<()> {
//! let mut ds = Dataset::open_rw("big.blz")?;
//! let session = ds.begin_staged(3_000_000)?;
//! // The client writes `session.head_rows()` rows itself (filling a partly filled last
//! // superchunk file); the workers write the rest, one region each:
//! for (start, rows) in session.regions(1) {
//!     let bytes = vec![0u8; (rows * 8) as usize];
//!     staged::write_rows(session.dir(), start, &bytes)?; // on any worker
//! }
//! ds.commit_staged(session, &[])?;
//! # Ok(()) }
//! ```
//!
//! The session directory is `<root>/staged/<id>/`, which no reader looks at; the files in it
//! become the dataset's only through the commit's journal (renames into `data/`), so a
//! failure or a kill at any moment leaves the dataset exactly as it was or with the whole
//! append. A session whose writer is gone is garbage: the next writer to open the dataset
//! removes every session directory (after bringing the dataset to its committed state), and
//! a session dropped without a commit removes its own directory at once. A worker's write is
//! idempotent: it builds its files under a temporary directory of its own and renames each
//! over its final name, so a retried or duplicated task leaves the same files. The bytes and
//! the rules are in `spec/dataset.md` §13.

use super::{rows_selection, Dataset};
use crate::dtype::DType;
use crate::engine::{make_core, ChunkWrites, Source};
use crate::engine::{CreateOptions, Mode};
use crate::error::{Error, Result};
use crate::meta::{self, ArrayStorage};
use crate::staging::Staging;
use crate::storage::{self, Bytes, OpenMode, SharedDir, Storage};
use crate::txn::Txn;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::engine::STAGED_DIR;

/// The file in a session directory that describes the session to its workers.
pub(crate) const SESSION_FILE: &str = "session.json";

/// Attempts at removing a session directory that workers still write into (20 ms apart).
const REMOVE_TRIES: u32 = 250;

/// Prefix of a worker's private directory inside a session directory.
const WORKER_TMP_PREFIX: &str = "tmp-";

/// `<session>/session.json`: what a worker needs to write its rows exactly as the dataset's
/// own writer would, without opening the dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionDoc {
    /// Always `"blz-staged"`.
    pub format: String,
    /// Version of this document (1).
    pub version: u32,
    /// The session's id (the directory's name).
    pub session: String,
    /// The dataset's `meta/storage` document (its `id` is what the files record).
    pub storage: ArrayStorage,
    /// The dataset's extent on every axis but the first.
    pub row_shape: Vec<u64>,
    /// The first row the workers write (rows before it are the committing client's).
    pub start: u64,
    /// The dataset's extent along axis 0 after the commit.
    pub end: u64,
    /// Rows per unit: a worker's range starts at a multiple of it and spans a multiple of
    /// it (or ends at `end`); a unit is a whole number of superchunk files and of chunk-rows.
    pub unit: u64,
}

impl SessionDoc {
    fn row_chunks(&self) -> u64 {
        self.row_shape
            .iter()
            .zip(self.storage.chunkshape.iter().skip(1))
            .map(|(&n, &c)| n.div_ceil(c))
            .product()
    }

    fn row_bytes(&self) -> u64 {
        self.row_shape.iter().product::<u64>() * self.storage.dtype.itemsize() as u64
    }

    fn shape(&self, rows: u64) -> Vec<u64> {
        let mut s = vec![rows];
        s.extend_from_slice(&self.row_shape);
        s
    }

    /// The first chunk of row `row` (a multiple of the chunk's first extent).
    fn chunk_of_row(&self, row: u64) -> u64 {
        row / self.storage.chunkshape[0] * self.row_chunks()
    }

    /// Superchunk files `first..last` (0-based) the workers write.
    fn files(&self) -> (u64, u64) {
        let s = self.storage.superchunksize.max(1);
        let first = self.chunk_of_row(self.start) / s;
        let last = self
            .chunk_of_row(self.end.next_multiple_of(self.storage.chunkshape[0]))
            .div_ceil(s);
        (first, last.max(first))
    }

    /// Chunks file `f` holds once the session is committed.
    fn chunks_in_file(&self, f: u64) -> u64 {
        let s = self.storage.superchunksize.max(1);
        let total = self.chunk_of_row(self.end.next_multiple_of(self.storage.chunkshape[0]));
        total.saturating_sub(f * s).min(s)
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// A staged write opened on a dataset by [`Dataset::begin_staged`]: its session directory
/// and geometry. Committed by [`Dataset::commit_staged`]; dropped uncommitted (or given to
/// [`Dataset::abort_staged`]), it removes its directory.
#[derive(Debug)]
pub struct StagedWrite {
    storage: Arc<dyn Storage>,
    root: PathBuf,
    /// Where the workers write: the session directory, or the shared directory's location.
    dir: PathBuf,
    /// On a backend whose files no other process sees before a commit (an object store):
    /// the shared directory the workers put their files into ([`Storage::shared_dir`]).
    shared: Option<Arc<dyn SharedDir>>,
    /// Where the commit finds the session's files in the dataset's storage:
    /// `<root>/staged/<id>` (the session directory itself, on a filesystem; on an object
    /// store, where the commit adopts the workers' objects, [`Storage::adopt`]).
    files_dir: PathBuf,
    /// The shared directory's files the commit made the dataset's: never removed here.
    adopted: Vec<String>,
    doc: SessionDoc,
    /// The dataset's rows when the session began.
    old_rows: u64,
    /// The dataset's commit generation when the session began.
    generation: u64,
    finished: bool,
}

impl StagedWrite {
    /// The session directory (absolute when the dataset's path is), which workers pass to
    /// [`write_rows`].
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The session's id.
    pub fn id(&self) -> &str {
        &self.doc.session
    }

    /// The session document the workers read.
    pub fn doc(&self) -> &SessionDoc {
        &self.doc
    }

    /// Rows the committing client writes itself, from the dataset's current end: those that
    /// fill its partly filled last superchunk file (0 when it ends on a file boundary).
    pub fn head_rows(&self) -> u64 {
        self.doc.start - self.old_rows
    }

    /// The rows the workers write: `start..end`.
    pub fn worker_rows(&self) -> (u64, u64) {
        (self.doc.start, self.doc.end)
    }

    /// Rows per unit (see [`SessionDoc::unit`]).
    pub fn unit_rows(&self) -> u64 {
        self.doc.unit
    }

    /// The workers' rows cut into ranges of `units` units each (the last one shorter):
    /// `(first row, rows)`, one per worker task.
    pub fn regions(&self, units: u64) -> Vec<(u64, u64)> {
        let step = self.doc.unit * units.max(1);
        (self.doc.start..self.doc.end)
            .step_by(usize::try_from(step).unwrap_or(usize::MAX).max(1))
            .map(|r| (r, step.min(self.doc.end - r)))
            .collect()
    }

    fn remove_dir(&mut self) -> Result<()> {
        self.finished = true;
        let st = self.storage.as_ref();
        if let Some(shared) = &self.shared {
            // The session document goes first (a straggling worker then stops), then every
            // file the commit did not make the dataset's. The adopted ones stay even when the
            // commit failed (it may have taken effect with its answer lost): what no state
            // names, garbage collection removes.
            let _ = st.remove_dir_all(&self.files_dir);
            shared.remove(&[SESSION_FILE.to_string()])?;
            let rest: Vec<String> = shared
                .list()?
                .into_iter()
                .map(|(name, _)| name)
                .filter(|n| !self.adopted.contains(n))
                .collect();
            return shared.remove(&rest);
        }
        // A worker still writing (a straggler of a failed write) can add a file while the
        // directory is being removed, which then fails as "not empty"; the worker stops at
        // its next step (session.json is gone), so trying again for a while succeeds.
        let mut tries = 0;
        while st.exists(&self.dir) {
            match st.remove_dir_all(&self.dir) {
                Ok(()) => break,
                Err(_) if tries < REMOVE_TRIES && st.exists(&self.dir) => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(e) => return Err(e),
            }
        }
        // `staged/` goes with its last session (the writer holds the lock: no other session
        // appears meanwhile).
        let staged = self.root.join(STAGED_DIR);
        if st.is_dir(&staged) && st.list(&staged).is_ok_and(|l| l.is_empty()) {
            let _ = st.remove_dir_all(&staged);
        }
        Ok(())
    }
}

impl Drop for StagedWrite {
    /// A session never committed leaves nothing behind.
    fn drop(&mut self) {
        if !self.finished {
            let _ = self.remove_dir();
        }
    }
}

impl Dataset {
    /// Opens a staged write that will append `rows` rows along axis 0: makes the session
    /// directory `<root>/staged/<id>/` and its `session.json`. The dataset (this handle,
    /// which keeps the writer lock throughout) writes the first
    /// [`head_rows`](StagedWrite::head_rows) itself at the commit; workers write the rest
    /// with [`write_rows`].
    ///
    /// # Errors
    /// [`Error::ReadOnly`]; I/O errors making the directory.
    pub fn begin_staged(&mut self, rows: u64) -> Result<StagedWrite> {
        let _turn = self.turn()?;
        self.check_writable()?;
        let cs = &self.meta.chunkshape;
        let row_chunks: u64 = self.core.row_chunks(&self.sizes.shape).max(1);
        let s = self.meta.superchunksize.max(1);
        // Chunks per unit: whole files and whole chunk-rows.
        let unit_chunks = s / gcd(s, row_chunks) * row_chunks;
        let unit = unit_chunks / row_chunks * cs[0];
        let old = self.sizes.shape[0];
        let end = old + rows;
        let start = old.next_multiple_of(unit).min(end);
        let id = meta::new_id();
        let staged = self.root.join(STAGED_DIR);
        let files_dir = staged.join(&id);
        let shared = self.root.storage.shared_dir(&self.root, &id)?;
        let dir = shared
            .as_ref()
            .map_or_else(|| files_dir.clone(), |s| s.location().to_path_buf());
        let doc = SessionDoc {
            format: "blz-staged".into(),
            version: 1,
            session: id,
            storage: self.meta.clone(),
            row_shape: self.sizes.shape[1..].to_vec(),
            start,
            end,
            unit,
        };
        let st = self.root.storage.as_ref();
        let mut session = StagedWrite {
            storage: Arc::clone(&self.root.storage),
            root: self.root.to_path_buf(),
            dir,
            shared,
            files_dir,
            adopted: Vec::new(),
            doc,
            old_rows: old,
            generation: self.sizes.generation,
            finished: false,
        };
        if let Some(shared) = &session.shared {
            // Nothing in the dataset's own storage: the workers read the session's document
            // from the shared directory, and the files appear in the dataset at the commit.
            let put = shared.put(SESSION_FILE, Bytes::from(meta::to_json_bytes(&session.doc)));
            if put.is_err() {
                session.finished = true;
            }
            put?;
            return Ok(session);
        }
        let had_staged = st.exists(&staged);
        st.create_dir_all(&session.dir)?;
        storage::write_file_atomic(
            st,
            &session.dir.join(SESSION_FILE),
            &meta::to_json_bytes(&session.doc),
        )?;
        st.sync_dir(&staged)?;
        if !had_staged {
            st.sync_dir(&self.root)?;
        }
        Ok(session)
    }

    /// Commits a staged write in one transaction: checks that the session's directory holds
    /// exactly the superchunk files its rows need, each complete and bound to this dataset
    /// at its position, writes `head` (native-endian C-order bytes of
    /// [`head_rows`](StagedWrite::head_rows) rows) after the dataset's rows, and moves the
    /// files into `data/`. Afterwards the dataset has the rows of the session; on any error
    /// it has none of them, and the session's directory is removed either way (or, when a
    /// straggling worker keeps writing into it, by the next writer).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a session of another dataset or of another state of
    /// it, or a missing or unexpected file; [`Error::InvalidHeader`] for a file that is not
    /// a complete superchunk file of this dataset at its position; [`Error::Mismatch`] for a
    /// `head` of the wrong size; I/O errors.
    pub fn commit_staged(&mut self, mut session: StagedWrite, head: &[u8]) -> Result<()> {
        let result = self.commit_staged_inner(&mut session, head);
        // What cannot be removed now (a straggling worker), the next writer removes: the
        // commit's outcome is the result either way.
        let _ = session.remove_dir();
        result
    }

    /// Abandons a staged write: removes its directory (workers still writing then fail).
    ///
    /// # Errors
    /// I/O errors removing it.
    pub fn abort_staged(&mut self, mut session: StagedWrite) -> Result<()> {
        session.remove_dir()
    }

    fn commit_staged_inner(&mut self, session: &mut StagedWrite, head: &[u8]) -> Result<()> {
        let _turn = self.turn()?;
        self.check_writable()?;
        let doc = session.doc.clone();
        let doc = &doc;
        if session.root != *self.root.path()
            || session.generation != self.sizes.generation
            || session.old_rows != self.sizes.shape[0]
        {
            return Err(Error::InvalidArgument(format!(
                "{}: the staged write {} was opened on another dataset or another state of it",
                self.root.display(),
                doc.session
            )));
        }
        let row_bytes = doc.row_bytes();
        let head_rows = session.head_rows();
        if head.len() as u64 != head_rows * row_bytes {
            return Err(Error::Mismatch {
                dataset: self.root.to_path_buf(),
                reason: format!(
                    "the staged write's first {head_rows} rows are the client's: {} bytes given, \
                     {} needed",
                    head.len(),
                    head_rows * row_bytes
                ),
            });
        }
        let (first, last) = if doc.start < doc.end {
            doc.files()
        } else {
            (0, 0)
        };
        let staged = checked_files(session, first, last, self.core.store.io_threads())?;
        let rel_session = Path::new(STAGED_DIR).join(&doc.session);
        // Files at the names the session's files take are strays of an operation that never
        // committed (this handle holds the lock and removed them when it opened; nothing may
        // stand in the way of the renames).
        for f in first..last {
            let target = self.core.store.file_path(f);
            if self.root.storage.exists(&target) {
                self.root.storage.remove_file(&target)?;
            }
        }
        let old = self.sizes.shape[0];
        let cs0 = self.meta.chunkshape[0];
        let end = doc.end;
        let start = doc.start;
        let store_dir = self.core.store.dir().to_path_buf();
        self.run_to(false, |core, txn, old_shape| {
            let mut delta = 0i64;
            if head_rows > 0 {
                let committed = core.nchunks(old_shape);
                let rewrite_from =
                    (!old.is_multiple_of(cs0)).then(|| (old / cs0) * core.row_chunks(old_shape));
                let mut w = ChunkWrites::new(&core.store, committed, rewrite_from);
                let mut shape = old_shape.to_vec();
                shape[0] = start;
                let sel = rows_selection(old_shape, old, head_rows);
                core.write(txn, &mut w, committed, &sel, &shape, Source::Data(head))?;
                delta += w.finish(txn)?;
            }
            for (f, stored) in &staged {
                let name = crate::engine::superchunk_name(*f);
                txn.rename(&rel_session.join(&name), &store_dir.join(&name));
                delta += *stored as i64;
            }
            let mut shape = old_shape.to_vec();
            shape[0] = end;
            Ok((delta, shape))
        })
    }
}

/// A dataset being created by a staged write ([`Dataset::create_staged`]): built in the
/// create's staging directory (`<path>.tmp-build`), so nothing appears at the path until
/// [`commit`](Self::commit), and a failure, a drop or a kill leaves no dataset there.
#[derive(Debug)]
pub struct StagedCreate {
    session: Option<StagedWrite>,
    ds: Option<Dataset>,
    staging: Option<Staging>,
    storage: Arc<dyn Storage>,
    root: PathBuf,
}

impl StagedCreate {
    /// The staged write the workers write into (its [`head_rows`](StagedWrite::head_rows)
    /// are 0: a new dataset has no partly filled file).
    pub fn session(&self) -> Result<&StagedWrite> {
        self.session
            .as_ref()
            .ok_or_else(|| Error::InvalidArgument("the staged create is finished".into()))
    }

    /// Commits the workers' files and puts the dataset in place at its path; returns it
    /// open for writing (the writer lock never let go since the create began).
    ///
    /// # Errors
    /// As [`Dataset::commit_staged`]; as a create's publication (the path appeared
    /// meanwhile). On error nothing is left at the path (an existing dataset replaced with
    /// `overwrite` stays as it was).
    pub fn commit(mut self) -> Result<Dataset> {
        let (Some(session), Some(mut ds), Some(staging)) =
            (self.session.take(), self.ds.take(), self.staging.take())
        else {
            return Err(Error::InvalidArgument(
                "the staged create is finished".into(),
            ));
        };
        ds.commit_staged(session, &[])?;
        drop(ds);
        let lock = staging.publish()?;
        let mut ds =
            Dataset::open_with(Arc::clone(&self.storage), &self.root, Mode::ReadWrite, true)?;
        ds.root.hold(lock);
        Ok(ds)
    }
}

impl Dataset {
    /// Creates a dataset at `root` of `dtype`, `row_shape` on every axis but the first, whose
    /// `rows` rows the workers write ([`write_rows`] on the session of
    /// [`StagedCreate::session`]); [`StagedCreate::commit`] puts it in place.
    ///
    /// # Errors
    /// As [`Dataset::create_from`].
    pub fn create_staged(
        storage: Arc<dyn Storage>,
        root: &Path,
        dtype: DType,
        row_shape: &[u64],
        opts: &CreateOptions,
        rows: u64,
    ) -> Result<StagedCreate> {
        let mut shape = vec![0];
        shape.extend_from_slice(row_shape);
        let mut opts = opts.clone();
        opts.expectedlen = opts.expectedlen.or(Some(rows).filter(|&n| n > 0));
        let (staging, mut ds) = Self::begin_create(&storage, root, dtype, &shape, &opts)?;
        let session = ds.begin_staged(rows)?;
        Ok(StagedCreate {
            session: Some(session),
            ds: Some(ds),
            staging: Some(staging),
            storage,
            root: root.to_path_buf(),
        })
    }
}

/// What a worker's block index object is named by: its file's object name, then this.
const BLOCKS_SUFFIX: &str = ".blocks";

/// The number `n` of a superchunk file's name `__n__.bin`.
fn file_number(name: &str) -> Option<u64> {
    name.strip_prefix("__")
        .and_then(|s| s.strip_suffix("__.bin"))
        .and_then(|s| s.parse::<u64>().ok())
}

/// Makes the workers' files in the shared directory of `session` the files of its
/// `files_dir` in the dataset's storage ([`Storage::adopt`]: no bytes copied): for each of
/// files `first..last`, one of the objects a worker put for it (`__n__.bin.<tag>`; a
/// retried task puts another, with the same rows). Anything else there is an error.
fn adopt_shared(
    session: &mut StagedWrite,
    shared: &dyn SharedDir,
    first: u64,
    last: u64,
    threads: usize,
) -> Result<()> {
    let listed = shared.list()?;
    if !listed.iter().any(|(n, _)| n == SESSION_FILE) {
        return Err(Error::InvalidArgument(format!(
            "{}: the staged write's session is gone (removed by another writer?)",
            shared.location().display()
        )));
    }
    let mut picks: std::collections::BTreeMap<u64, (String, u64)> = Default::default();
    // The block indexes workers put beside their files (`<object>.blocks`).
    let mut indexes = std::collections::BTreeSet::new();
    for (name, size) in listed {
        if name == SESSION_FILE {
            continue;
        }
        let (object, index) = match name.strip_suffix(BLOCKS_SUFFIX) {
            Some(object) => (object, true),
            None => (name.as_str(), false),
        };
        let num = object
            .rsplit_once('.')
            .filter(|(_, tag)| !tag.is_empty() && tag.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|(file, _)| file_number(file));
        match num {
            Some(n) if n > first && n <= last && index => {
                indexes.insert(object.to_string());
            }
            Some(n) if n > first && n <= last => {
                picks.entry(n).or_insert((name, size));
            }
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "{}: not a file of this staged write (it writes files {} to {})",
                    shared.location().join(name).display(),
                    first + 1,
                    last
                )))
            }
        }
    }
    let mut taken = Vec::new();
    for f in first..last {
        let name = crate::engine::superchunk_name(f);
        let Some((object, size)) = picks.get(&(f + 1)) else {
            return Err(Error::InvalidArgument(format!(
                "{}: missing: the staged write's worker for it did not finish",
                shared.location().join(&name).display()
            )));
        };
        let blocks = indexes
            .contains(object.as_str())
            .then(|| format!("{object}{BLOCKS_SUFFIX}"));
        taken.push((session.files_dir.join(&name), object, *size, blocks));
    }
    // Each adoption reads its file's front (a request): `threads` of them at once.
    let storage = &session.storage;
    crate::engine::on_io_threads(&taken, threads, |(path, object, size, blocks)| {
        storage.adopt(shared, object, *size, blocks.as_deref(), path)
    })?;
    session
        .adopted
        .extend(taken.into_iter().map(|(_, object, _, _)| object.clone()));
    Ok(())
}

/// Checks that the session directory (on a filesystem) is there and holds no file but
/// files `first..last` (and the workers' private directories).
fn check_listing(session: &StagedWrite, first: u64, last: u64) -> Result<()> {
    let st = session.storage.as_ref();
    if !st.exists(&session.dir.join(SESSION_FILE)) {
        return Err(Error::InvalidArgument(format!(
            "{}: the staged write's directory is gone (removed by another writer?)",
            session.dir.display()
        )));
    }
    for name in st.list(&session.dir)? {
        if name == SESSION_FILE || name.starts_with(WORKER_TMP_PREFIX) {
            continue;
        }
        if !file_number(&name).is_some_and(|n| n > first && n <= last) {
            return Err(Error::InvalidArgument(format!(
                "{}: not a file of this staged write (it writes files {} to {})",
                session.dir.join(name).display(),
                first + 1,
                last
            )));
        }
    }
    Ok(())
}

/// Checks that the session directory holds exactly files `first..last`, each a complete
/// superchunk file of the dataset at its position; returns each file's stored bytes. The
/// files of a shared directory are adopted first, `threads` at once.
fn checked_files(
    session: &mut StagedWrite,
    first: u64,
    last: u64,
    threads: usize,
) -> Result<Vec<(u64, u64)>> {
    if let Some(shared) = session.shared.clone() {
        adopt_shared(session, shared.as_ref(), first, last, threads)?;
    } else {
        check_listing(session, first, last)?;
    }
    let doc = &session.doc;
    let st = session.storage.as_ref();
    let core = make_core(
        Arc::clone(&session.storage),
        &session.files_dir,
        PathBuf::new(),
        &doc.storage,
    )?;
    let chunk_bytes =
        doc.storage.chunkshape.iter().product::<u64>() * doc.storage.dtype.itemsize() as u64;
    let mut out = Vec::new();
    for f in first..last {
        let path = core.store.file_path(f);
        if !st.exists(&path) {
            return Err(Error::InvalidArgument(format!(
                "{}: missing: the staged write's worker for it did not finish",
                path.display()
            )));
        }
        // Header, offsets, metadata and identity (this dataset, this store, this position).
        let _ = core.store.reader(f)?;
        let file = st.open(&path, OpenMode::Read)?;
        let w = crate::blpk::SuperchunkWriter::open(file.as_ref(), doc.storage.slack)?;
        let want = doc.chunks_in_file(f);
        if w.nchunks() != want || w.uncompressed_bytes() != want * chunk_bytes {
            return Err(Error::header(
                &path,
                format!(
                    "holds {} chunks ({} bytes uncompressed), the staged write needs {want} \
                     ({} bytes)",
                    w.nchunks(),
                    w.uncompressed_bytes(),
                    want * chunk_bytes
                ),
            ));
        }
        out.push((f, w.stored_bytes()));
    }
    core.store.invalidate();
    Ok(out)
}

/// Writes rows `first_row..first_row + rows` of a staged write (native-endian C-order
/// `bytes`, whole rows) as the complete superchunk files that hold them, into the session
/// directory `session_dir`: encoded as the dataset's own writer does (chunks in parallel),
/// written and synced under a temporary directory of the worker's, then renamed to their
/// final names. Any process may call it, with no lock; calling it again for the same rows
/// (a retried task) replaces the files with the same content. Returns the files written
/// (0-based numbers).
///
/// `first_row` must start a unit of the session ([`SessionDoc::unit`]) at or after its
/// `start`, and the rows must be whole units or end at the session's `end`.
///
/// # Errors
/// [`Error::InvalidArgument`] when the session is gone (committed or abandoned) or the rows
/// are not a region of it; [`Error::Mismatch`] for bytes that are not the rows; I/O errors.
pub fn write_rows(session_dir: &Path, first_row: u64, bytes: &[u8]) -> Result<Vec<u64>> {
    if storage::is_url(session_dir) {
        return write_rows_shared(
            storage::shared_dir_at(session_dir)?.as_ref(),
            first_row,
            bytes,
        );
    }
    write_rows_in(storage::local(), session_dir, first_row, bytes)
}

/// As [`write_rows`], into the shared directory of a staged write on an object store (its
/// [`StagedWrite::dir`] is the directory's `s3://` location, which [`write_rows`] opens with
/// [`storage::shared_dir_at`]): the files are encoded under a private temporary directory
/// of this process and each put into the shared directory as one object,
/// `__n__.bin.<tag>`, `tag` drawn anew at every call. A retried task therefore adds objects
/// rather than replacing any; the commit takes one per file, and garbage collection removes
/// the others (`spec/object-store.md` §8).
///
/// # Errors
/// As [`write_rows`].
pub fn write_rows_shared(shared: &dyn SharedDir, first_row: u64, bytes: &[u8]) -> Result<Vec<u64>> {
    let location = shared.location();
    let session_doc = shared.get(SESSION_FILE, crate::meta::MAX_META_FILE)?;
    let doc = parse_session(
        session_doc.as_deref(),
        &location.join(SESSION_FILE),
        location,
    )?;
    let rows = check_region(&doc, location, first_row, bytes)?;
    let local = storage::local();
    let tmp = std::env::temp_dir().join(format!("blz-staged-{}", meta::new_id()));
    local.create_dir_all(&tmp)?;
    // The files are read back and uploaded here, then removed: nothing syncs them.
    let result = encode_into(&local, &tmp, &doc, first_row, rows, bytes, false).and_then(|files| {
        // A session committed or abandoned meanwhile takes no more files.
        if shared
            .get(SESSION_FILE, crate::meta::MAX_META_FILE)?
            .is_none()
        {
            return Err(Error::InvalidArgument(format!(
                "{}: the staged write was committed or abandoned while this worker wrote",
                location.display()
            )));
        }
        let tag = &meta::new_id()[..16];
        use rayon::prelude::*;
        files.par_iter().try_for_each(|&f| {
            let name = crate::engine::superchunk_name(f);
            let path = tmp.join(&name);
            let data = std::fs::read(&path).map_err(|e| Error::io("read", &path, e))?;
            let object = format!("{name}.{tag}");
            let data = Bytes::from(data);
            // Its block index beside it, so that the commit need not read the file's chunks
            // to make it (a file whose index is missing gets none).
            let index = || match blz_format::blpk::block_index_of_bytes(&data, &path) {
                Some(index) => {
                    let packed = blz_format::blosc::compress_index(&index);
                    shared.put(&format!("{object}{BLOCKS_SUFFIX}"), Bytes::from(packed))
                }
                None => Ok(()),
            };
            let (indexed, put) = rayon::join(index, || shared.put(&object, data.clone()));
            indexed.and(put)
        })?;
        Ok(files)
    });
    let _ = local.remove_dir_all(&tmp);
    result
}

/// The rows of a region `first_row..` of `bytes` of the session `doc` (at `place`, for
/// messages), checked: whole rows, whole units inside the workers' rows.
fn check_region(doc: &SessionDoc, place: &Path, first_row: u64, bytes: &[u8]) -> Result<u64> {
    let row_bytes = doc.row_bytes();
    if row_bytes == 0 || !(bytes.len() as u64).is_multiple_of(row_bytes) {
        return Err(Error::Mismatch {
            dataset: place.to_path_buf(),
            reason: format!(
                "{} bytes are not whole rows of {row_bytes} bytes",
                bytes.len()
            ),
        });
    }
    let rows = bytes.len() as u64 / row_bytes;
    let end_row = first_row + rows;
    let unit = doc.unit.max(1);
    if rows == 0
        || first_row < doc.start
        || end_row > doc.end
        || !first_row.is_multiple_of(unit)
        || !(rows.is_multiple_of(unit) || end_row == doc.end)
    {
        return Err(Error::InvalidArgument(format!(
            "{}: rows {first_row}..{end_row} are not a region of the staged write (rows {}..{} \
             in units of {unit})",
            place.display(),
            doc.start,
            doc.end
        )));
    }
    Ok(rows)
}

/// As [`write_rows`], on a given storage backend.
///
/// # Errors
/// As [`write_rows`].
pub(crate) fn write_rows_in(
    storage: Arc<dyn Storage>,
    session_dir: &Path,
    first_row: u64,
    bytes: &[u8],
) -> Result<Vec<u64>> {
    let st = storage.as_ref();
    let doc = read_session(st, session_dir)?;
    let rows = check_region(&doc, session_dir, first_row, bytes)?;
    let tmp = session_dir.join(format!("{WORKER_TMP_PREFIX}{}", meta::new_id()));
    read_session(st, session_dir)?;
    st.create_dir_all(&tmp)?;
    let written = encode_into(&storage, &tmp, &doc, first_row, rows, bytes, true)
        .and_then(|files| move_into_session(st, session_dir, &tmp, &files).map(|()| files));
    let cleaned = st.remove_dir_all(&tmp);
    if !st.exists(&session_dir.join(SESSION_FILE)) {
        // The session ended while this worker wrote (a straggler of a failed or committed
        // write): what `create_dir_all` may have made again is no one's.
        let _ = st.remove_dir_all(session_dir);
    }
    let files = written?;
    cleaned?;
    Ok(files)
}

fn read_session(st: &dyn Storage, session_dir: &Path) -> Result<SessionDoc> {
    let path = session_dir.join(SESSION_FILE);
    let bytes = if st.exists(&path) {
        Some(storage::read_small_file(
            st,
            &path,
            crate::meta::MAX_META_FILE,
        )?)
    } else {
        None
    };
    parse_session(bytes.as_deref(), &path, session_dir)
}

/// The session document `bytes` (of the file `path`; `None` when there is none) of the
/// session at `session_dir`, checked.
fn parse_session(bytes: Option<&[u8]>, path: &Path, session_dir: &Path) -> Result<SessionDoc> {
    let Some(bytes) = bytes else {
        return Err(Error::InvalidArgument(format!(
            "{}: no staged write there (it was committed or abandoned)",
            session_dir.display()
        )));
    };
    let path = path.to_path_buf();
    let doc: SessionDoc =
        serde_json::from_slice(bytes).map_err(|e| Error::metadata(&path, e.to_string()))?;
    if doc.format != "blz-staged" || doc.version != 1 {
        return Err(Error::metadata(
            &path,
            format!(
                "not a blz staged write session (format {:?}, version {})",
                doc.format, doc.version
            ),
        ));
    }
    crate::engine::validate_storage_meta(&doc.storage, &path)?;
    if doc.storage.chunkshape.len() != doc.row_shape.len() + 1
        || doc.start > doc.end
        || doc.unit == 0
        || !doc.unit.is_multiple_of(doc.storage.chunkshape[0])
    {
        return Err(Error::metadata(&path, "inconsistent session geometry"));
    }
    Ok(doc)
}

/// Encodes the rows into complete superchunk files under `tmp` (synced if `durable`); returns
/// their numbers.
fn encode_into(
    storage: &Arc<dyn Storage>,
    tmp: &Path,
    doc: &SessionDoc,
    first_row: u64,
    rows: u64,
    bytes: &[u8],
    durable: bool,
) -> Result<Vec<u64>> {
    let core = make_core(Arc::clone(storage), tmp, PathBuf::new(), &doc.storage)?;
    let end_row = first_row + rows;
    let shape = doc.shape(end_row);
    let k0 = doc.chunk_of_row(first_row);
    let mut txn = Txn::new(storage.as_ref(), tmp);
    if !durable {
        txn.skip_syncs();
    }
    // Chunks before `k0` count as committed (their files are not touched: the first file
    // written starts at `k0`, which begins a file), so the writes append from `k0`.
    let mut w = ChunkWrites::new(&core.store, k0, None);
    let sel = rows_selection(&shape, first_row, rows);
    core.write(&mut txn, &mut w, k0, &sel, &shape, Source::Data(bytes))?;
    w.finish(&mut txn)?;
    // Only fresh files: the commit syncs them and their directory (when durable), and
    // writes no journal.
    txn.commit_files()?;
    let s = doc.storage.superchunksize.max(1);
    let k1 = doc.chunk_of_row(end_row.next_multiple_of(doc.storage.chunkshape[0]));
    Ok((k0 / s..k1.div_ceil(s)).collect())
}

/// Renames the files from the worker's directory to their final names in the session.
fn move_into_session(
    st: &dyn Storage,
    session_dir: &Path,
    tmp: &Path,
    files: &[u64],
) -> Result<()> {
    for &f in files {
        let name = crate::engine::superchunk_name(f);
        if !st.exists(&session_dir.join(SESSION_FILE)) {
            return Err(Error::InvalidArgument(format!(
                "{}: the staged write was committed or abandoned while this worker wrote",
                session_dir.display()
            )));
        }
        st.rename(&tmp.join(&name), &session_dir.join(&name))?;
    }
    st.sync_dir(session_dir)
}
