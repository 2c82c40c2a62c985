//! Transactions over a dataset directory: every mutating operation (append, shrink, modify,
//! resize, attribute change, column add/drop) goes through a [`Txn`].
//!
//! Writes into space no committed state uses (past a file's allocation end, or into a file
//! the operation creates) go straight to disk. Writes over committed bytes (a header, an
//! offsets slot, a chunk rewritten in place), file truncations and removals, and the new meta
//! files are collected in a redo journal. Commit syncs the new bytes, then writes the journal
//! to `meta/journal.tmp`, syncs it and renames it to `meta/journal`: that rename is the
//! commit point. The journal is then applied (idempotently), `meta/` files are replaced
//! atomically, and the journal is removed. An operation that overwrites nothing committed and
//! changes only `meta/sizes` skips the journal: the atomic replacement of `meta/sizes` is then
//! its commit point. After a crash, [`recover`] replays a committed journal and discards an
//! uncommitted one, so a dataset always opens in its last committed state.
//!
//! A transaction that ends before its commit point (an error anywhere, or its value dropped
//! without [`Txn::commit`]) gives back the space it took: files it grew are truncated to the
//! length they had before its first write to them, files and directories it created are
//! removed, and the temporary file of its commit step goes. Only bytes past the committed
//! state are touched, so this is best effort: an error while undoing leaves dead bytes that
//! no committed state refers to, never a damaged dataset.
//!
//! The journal's bytes are described in `spec/journal.md`.

use crate::error::{Error, Result};
use crate::storage::{
    atomic_tmp_path, read_small_file, write_file_atomic, OpenMode, Storage, StorageFile,
};
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

mod journal;
mod view;
#[cfg(test)]
mod view_props;

// `pub` (the module is not) so that the `fuzzing` feature can reach the journal parser.
pub use journal::{decode, encode, Entry};
pub(crate) use view::JournalView;

/// Largest journal blz will read back.
const MAX_JOURNAL: u64 = 1 << 40;

struct OpenFile {
    /// Shared with the background syncer once the file is handed to it; `None` while closed
    /// to bound the descriptors a transaction holds (its fresh bytes are synced then).
    file: Option<Arc<dyn StorageFile>>,
    /// When it was last used (the transaction's clock), to close the least recent first.
    last_use: u64,
    /// Writes at or past this position touch no committed byte.
    boundary: u64,
    fresh_writes: bool,
    /// Writeback has been started for fresh bytes up to here.
    hinted_to: u64,
}

/// Fresh bytes written to a file before blz asks the system to start writing them back, so
/// that the sync at commit overlaps with encoding instead of following it.
const WRITEBACK_STEP: u64 = 8 << 20;

/// Files a transaction keeps open at once (fewer when the process may open few, see
/// `storage::descriptor_budget`); past this the least recently used is synced and closed
/// (and reopened if written again), so a table of 20,000 columns does not run out of
/// descriptors.
const MAX_OPEN_FILES: usize = 256;

/// How to give back what a transaction took from one file, should it not commit.
#[derive(Debug, Clone, Copy)]
enum Undo {
    /// An existing file: truncate it back to this length (its length before the
    /// transaction's first write to it, at or past every committed byte).
    Truncate(u64),
    /// A file the transaction created: remove it.
    Remove,
}

/// A transaction being prepared on the dataset at `root`. Dropped before its commit point,
/// it gives back the space it took (see the module documentation).
pub(crate) struct Txn<'a> {
    storage: &'a dyn Storage,
    root: PathBuf,
    files: BTreeMap<PathBuf, OpenFile>,
    /// Entries of `files` that are open.
    open_count: usize,
    clock: u64,
    entries: Vec<Entry>,
    created_dirs: Vec<PathBuf>,
    syncer: Option<Syncer>,
    /// What to undo, file by file (relative paths), if the transaction does not commit.
    undo: BTreeMap<PathBuf, Undo>,
    /// Temporary files of the commit step (absolute paths), removed if it fails.
    commit_tmp: Vec<PathBuf>,
    /// True until the commit point has passed (or the commit had nothing to do): while
    /// true, dropping the transaction undoes its writes.
    undo_on_drop: bool,
    /// False for files nobody needs after a crash ([`Txn::skip_syncs`]): nothing is synced.
    durable: bool,
}

/// A thread that syncs files the transaction has finished writing while the rest is still
/// being encoded and written, so that the commit waits only for the last ones.
struct Syncer {
    tx: mpsc::Sender<Arc<dyn StorageFile>>,
    worker: JoinHandle<Result<()>>,
    /// Raised by the worker at its first failure: the writer stops at its next file
    /// instead of encoding the rest of the operation for a commit that will fail.
    failed: Arc<std::sync::atomic::AtomicBool>,
}

impl Syncer {
    fn start() -> Syncer {
        let (tx, rx) = mpsc::channel::<Arc<dyn StorageFile>>();
        let failed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let raise = Arc::clone(&failed);
        // After an error, later files are still received (and dropped) so senders never
        // block; the first error is the transaction's (at its next file, or at commit).
        let worker = std::thread::spawn(move || {
            let mut first = Ok(());
            for f in rx {
                if first.is_ok() {
                    first = f.sync();
                    if first.is_err() {
                        raise.store(true, std::sync::atomic::Ordering::Release);
                    }
                }
            }
            first
        });
        Syncer { tx, worker, failed }
    }

    /// Waits for every file handed over so far to be synced.
    fn finish(self) -> Result<()> {
        drop(self.tx);
        self.worker
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }
}

fn journal_path(root: &Path) -> PathBuf {
    root.join("meta").join("journal")
}

pub(crate) fn check_relative(path: &Path) -> Result<()> {
    if path.as_os_str().is_empty() || !path.components().all(|c| matches!(c, Component::Normal(_)))
    {
        return Err(Error::InvalidArgument(format!(
            "{} is not a plain path inside the dataset",
            path.display()
        )));
    }
    Ok(())
}

/// Refuses to write under `root` through a symbolic link: none of the directories from
/// `root` down to `rel` (nor `rel` itself) may be one, so nothing a transaction writes lands
/// outside the dataset.
fn refuse_links(storage: &dyn Storage, root: &Path, rel: &Path) -> Result<()> {
    for part in rel.ancestors().filter(|a| !a.as_os_str().is_empty()) {
        let p = root.join(part);
        if storage.is_symlink(&p) {
            return Err(Error::Unsupported {
                path: p,
                reason: "a symbolic link inside the dataset: blz writes nothing through links"
                    .into(),
            });
        }
    }
    Ok(())
}

impl<'a> Txn<'a> {
    /// Starts a transaction on the dataset at `root`.
    pub(crate) fn new(storage: &'a dyn Storage, root: &Path) -> Txn<'a> {
        Txn {
            storage,
            root: root.to_path_buf(),
            files: BTreeMap::new(),
            open_count: 0,
            clock: 0,
            entries: Vec::new(),
            created_dirs: Vec::new(),
            syncer: None,
            undo: BTreeMap::new(),
            commit_tmp: Vec::new(),
            undo_on_drop: true,
            durable: true,
        }
    }

    /// Makes the transaction sync nothing: for files its caller reads back and removes
    /// (a staged worker's files on their way to an object store), which a crash makes
    /// useless anyway.
    pub(crate) fn skip_syncs(&mut self) {
        self.durable = false;
    }

    /// The storage the transaction writes to.
    pub(crate) fn storage(&self) -> &'a dyn Storage {
        self.storage
    }

    /// Registers an existing file whose committed bytes all lie before `boundary`.
    ///
    /// # Errors
    /// I/O errors opening it.
    pub(crate) fn open_existing(&mut self, rel: &Path, boundary: u64) -> Result<()> {
        check_relative(rel)?;
        refuse_links(self.storage, &self.root, rel)?;
        if !self.files.contains_key(rel) {
            self.make_room()?;
            let file = Arc::from(
                self.storage
                    .open(&self.root.join(rel), OpenMode::ReadWrite)?,
            );
            self.clock += 1;
            self.open_count += 1;
            self.files.insert(
                rel.to_path_buf(),
                OpenFile {
                    file: Some(file),
                    last_use: self.clock,
                    boundary,
                    fresh_writes: false,
                    hinted_to: boundary,
                },
            );
        }
        Ok(())
    }

    /// Closes the least recently used files (syncing what was written to them) until one
    /// more can be opened within [`MAX_OPEN_FILES`].
    fn make_room(&mut self) -> Result<()> {
        while self.open_count >= crate::storage::descriptor_budget(MAX_OPEN_FILES) {
            let Some(f) = self
                .files
                .values_mut()
                .filter(|f| f.file.is_some())
                .min_by_key(|f| f.last_use)
            else {
                break;
            };
            if let Some(file) = f.file.take() {
                if f.fresh_writes {
                    file.sync()?;
                    f.fresh_writes = false;
                }
            }
            self.open_count -= 1;
        }
        Ok(())
    }

    /// The open handle of `rel`, reopened if it was closed to make room.
    fn handle(&mut self, rel: &Path) -> Result<&mut OpenFile> {
        let closed = self
            .files
            .get(rel)
            .ok_or_else(|| Error::InvalidArgument(format!("{} not open", rel.display())))?
            .file
            .is_none();
        if closed {
            self.make_room()?;
            let file = Arc::from(
                self.storage
                    .open(&self.root.join(rel), OpenMode::ReadWrite)?,
            );
            self.open_count += 1;
            if let Some(f) = self.files.get_mut(rel) {
                f.file = Some(file);
            }
        }
        self.clock += 1;
        let now = self.clock;
        let f = self
            .files
            .get_mut(rel)
            .ok_or_else(|| Error::InvalidArgument(format!("{} not open", rel.display())))?;
        f.last_use = now;
        Ok(f)
    }

    /// Creates a file no committed state refers to (any leftover of an earlier failed
    /// operation at that path is discarded).
    ///
    /// # Errors
    /// I/O errors creating it.
    pub(crate) fn create(&mut self, rel: &Path) -> Result<()> {
        check_relative(rel)?;
        refuse_links(self.storage, &self.root, rel)?;
        let path = self.root.join(rel);
        if let Some(dir) = path.parent() {
            if !self.storage.exists(dir) {
                // Every directory created here must have its entry synced in its parent.
                let mut missing = Vec::new();
                let mut d = Some(dir);
                while let Some(x) =
                    d.filter(|x| !x.as_os_str().is_empty() && !self.storage.exists(x))
                {
                    missing.push(x.to_path_buf());
                    d = x.parent();
                }
                self.storage.create_dir_all(dir)?;
                self.created_dirs.extend(missing);
            }
        }
        self.make_room()?;
        // Recorded first: a create that fails midway may still leave a file.
        self.undo.entry(rel.to_path_buf()).or_insert(Undo::Remove);
        let file = Arc::from(self.storage.open(&path, OpenMode::Create)?);
        self.clock += 1;
        self.open_count += 1;
        if let Some(old) = self.files.insert(
            rel.to_path_buf(),
            OpenFile {
                file: Some(file),
                last_use: self.clock,
                boundary: 0,
                fresh_writes: true,
                hinted_to: 0,
            },
        ) {
            if old.file.is_some() {
                self.open_count -= 1;
            }
        }
        Ok(())
    }

    /// Reads from a file the transaction has open (sees its fresh writes, not its pending
    /// patches).
    ///
    /// # Errors
    /// I/O errors; [`Error::InvalidArgument`] when the file is not open in this transaction.
    pub(crate) fn file(&mut self, rel: &Path) -> Result<Arc<dyn StorageFile>> {
        self.handle(rel)?
            .file
            .clone()
            .ok_or_else(|| Error::InvalidArgument(format!("{} not open", rel.display())))
    }

    /// Writes `data` at `offset`: directly where it touches no committed byte, through the
    /// journal where it does.
    ///
    /// # Errors
    /// I/O errors; [`Error::InvalidArgument`] when the file is not open in this transaction.
    pub(crate) fn write(&mut self, rel: &Path, offset: u64, data: Vec<u8>) -> Result<()> {
        let split = self.write_fresh(rel, offset, &data)?;
        if split > 0 {
            let mut head = data;
            head.truncate(split);
            self.entries.push(Entry::Patch {
                path: rel.to_path_buf(),
                offset,
                data: head,
            });
        }
        Ok(())
    }

    /// As [`Txn::write`], from borrowed bytes: only the part that goes through the journal
    /// is copied.
    ///
    /// # Errors
    /// As [`Txn::write`].
    pub(crate) fn write_slice(&mut self, rel: &Path, offset: u64, data: &[u8]) -> Result<()> {
        let split = self.write_fresh(rel, offset, data)?;
        if split > 0 {
            self.entries.push(Entry::Patch {
                path: rel.to_path_buf(),
                offset,
                data: data[..split].to_vec(),
            });
        }
        Ok(())
    }

    /// Writes the part of `data` at or past the file's boundary straight to the file, and
    /// returns the length of the part before it (which must go through the journal).
    fn write_fresh(&mut self, rel: &Path, offset: u64, data: &[u8]) -> Result<usize> {
        let boundary = self
            .files
            .get(rel)
            .ok_or_else(|| Error::InvalidArgument(format!("{} not open", rel.display())))?
            .boundary;
        let split = usize::try_from(boundary.saturating_sub(offset))
            .unwrap_or(usize::MAX)
            .min(data.len());
        if split < data.len() {
            let file = self.file(rel)?;
            if !self.undo.contains_key(rel) {
                // The first fresh write to an existing file: its length now is where an
                // abandoned transaction truncates it back to.
                let len = file.len()?;
                self.undo.insert(rel.to_path_buf(), Undo::Truncate(len));
            }
            file.write_at(offset + split as u64, &data[split..])?;
            let f = self.handle(rel)?;
            f.fresh_writes = true;
            let end = offset + data.len() as u64;
            if end >= f.hinted_to + WRITEBACK_STEP {
                file.start_sync(f.hinted_to, end - f.hinted_to)?;
                f.hinted_to = end;
            }
        }
        Ok(split)
    }

    /// Tells the transaction that `rel` gets no more writes for now: its fresh bytes start
    /// being synced in the background. A later write to it is synced at commit as usual.
    ///
    /// # Errors
    /// The error of a file synced earlier in the background (a failed fsync, a refused
    /// upload): the operation stops here rather than at its commit.
    pub(crate) fn done_with(&mut self, rel: &Path) -> Result<()> {
        let failed = |s: &mut Syncer| s.failed.load(std::sync::atomic::Ordering::Acquire);
        if let Some(s) = self.syncer.take_if(failed) {
            s.finish()?;
        }
        if !self.durable {
            return Ok(());
        }
        let Some(f) = self.files.get_mut(rel).filter(|f| f.fresh_writes) else {
            return Ok(());
        };
        let Some(file) = f.file.take() else {
            return Ok(());
        };
        // The syncer holds the file until it is synced; the transaction lets it go (and
        // reopens it should it be written again).
        self.open_count -= 1;
        f.fresh_writes = false;
        let syncer = self.syncer.get_or_insert_with(Syncer::start);
        if syncer.tx.send(Arc::clone(&file)).is_err() {
            // The worker is gone (it cannot panic short of a bug): sync at commit instead.
            f.fresh_writes = true;
            f.file = Some(file);
            self.open_count += 1;
        }
        Ok(())
    }

    /// Truncates a file to `len` once the transaction commits.
    pub(crate) fn set_len(&mut self, rel: &Path, len: u64) {
        self.entries.push(Entry::SetLen {
            path: rel.to_path_buf(),
            len,
        });
    }

    /// Removes a file once the transaction commits.
    pub(crate) fn remove(&mut self, rel: &Path) {
        if self.files.remove(rel).is_some_and(|f| f.file.is_some()) {
            self.open_count -= 1;
        }
        self.entries.push(Entry::Remove {
            path: rel.to_path_buf(),
        });
    }

    /// Removes a directory tree once the transaction commits.
    pub(crate) fn remove_dir(&mut self, rel: &Path) {
        self.files.retain(|p, _| !p.starts_with(rel));
        self.open_count = self.files.values().filter(|f| f.file.is_some()).count();
        self.entries.push(Entry::RemoveDir {
            path: rel.to_path_buf(),
        });
    }

    /// Renames a file or directory once the transaction commits.
    pub(crate) fn rename(&mut self, from: &Path, to: &Path) {
        self.entries.push(Entry::Rename {
            from: from.to_path_buf(),
            to: to.to_path_buf(),
        });
    }

    /// Replaces a meta file (relative to the root) once the transaction commits.
    pub(crate) fn put_meta(&mut self, rel: &Path, data: Vec<u8>) {
        self.entries.push(Entry::Meta {
            path: rel.to_path_buf(),
            data,
        });
    }

    /// Commits on the storage's files: syncs the new bytes, makes the change durable in one
    /// atomic step, then applies it; true when something was committed. The backend's own
    /// step that makes it visible elsewhere comes after, from the dataset's root
    /// ([`crate::engine::Root::commit`]); a transaction in a private directory (a staged
    /// worker's files) stops here.
    ///
    /// # Errors
    /// I/O errors. An error before the commit point leaves the last committed state (and
    /// gives back the space the transaction took); an error after it leaves a journal that
    /// the next [`recover`] applies.
    pub(crate) fn commit_files(mut self) -> Result<bool> {
        // On an error before the commit point, dropping `self` undoes the writes.
        self.commit_local()
    }

    /// The commit on the storage's files; true when something was committed. Clears
    /// `undo_on_drop` once the change is committed (or there was nothing to commit).
    fn commit_local(&mut self) -> Result<bool> {
        if let Some(syncer) = self.syncer.take() {
            syncer.finish()?;
        }
        if self.durable {
            for f in self.files.values() {
                if let (true, Some(file)) = (f.fresh_writes, &f.file) {
                    file.sync()?;
                }
            }
            for d in &self.created_dirs {
                if let Some(parent) = d.parent() {
                    self.storage.sync_dir(parent)?;
                }
            }
            let data_dirs: Vec<PathBuf> = self
                .files
                .iter()
                .filter(|(_, f)| f.boundary == 0)
                .filter_map(|(p, _)| self.root.join(p).parent().map(Path::to_path_buf))
                .collect();
            for d in dedup(data_dirs) {
                self.storage.sync_dir(&d)?;
            }
        } else if !self.entries.is_empty() {
            return Err(Error::InvalidArgument(
                "a transaction that skips syncs commits fresh files only".into(),
            ));
        }
        let only_one_meta =
            self.entries.len() == 1 && matches!(self.entries[0], Entry::Meta { .. });
        if self.entries.is_empty() {
            // Nothing refers to the fresh bytes but the caller (a staged worker's files):
            // they stay.
            self.undo_on_drop = false;
            return Ok(false);
        }
        // The journal and the meta files are written in `meta/`: not through a link.
        for e in &self.entries {
            if let Entry::Meta { path, .. } = e {
                refuse_links(self.storage, &self.root, path)?;
            }
        }
        refuse_links(self.storage, &self.root, Path::new("meta"))?;
        if only_one_meta {
            if let Some(Entry::Meta { path, data }) = self.entries.first() {
                check_relative(path)?;
                let (path, data) = (self.root.join(path), data.clone());
                self.replace_to_commit(&path, &data)?;
                return Ok(true);
            }
        }
        if self.storage.commits_by_publish() {
            // Nothing of the change is visible until the backend publishes it in one
            // step of its own: that is the commit point, and a journal would be a second.
            // The change is applied to the files as they are; should that fail, what was
            // applied is dropped and the last published state stays.
            self.undo_on_drop = false;
            self.files.clear();
            if let Err(e) = apply(self.storage, &self.root, &self.entries) {
                self.storage.discard_unpublished(&self.root);
                return Err(e);
            }
            return Ok(true);
        }
        let bytes = encode(&self.entries);
        let jp = journal_path(&self.root);
        self.replace_to_commit(&jp, &bytes)?;
        self.files.clear();
        apply(self.storage, &self.root, &self.entries)?;
        self.storage.remove_file(&jp)?;
        self.storage.sync_dir(&self.root.join("meta"))?;
        Ok(true)
    }
}

impl Txn<'_> {
    /// [`write_file_atomic`] for the file whose replacement is the commit point: once the
    /// rename has happened, the transaction is committed and no longer undone on drop.
    fn replace_to_commit(&mut self, path: &Path, data: &[u8]) -> Result<()> {
        let tmp = atomic_tmp_path(path).ok_or_else(|| {
            Error::InvalidArgument(format!("{} has no file name", path.display()))
        })?;
        self.commit_tmp.push(tmp.clone());
        self.storage.remove_file(&tmp)?;
        {
            let file = self.storage.open(&tmp, OpenMode::Create)?;
            file.write_at(0, data)?;
            file.sync()?;
        }
        if let Err(e) = self.storage.rename(&tmp, path) {
            // A rename that reports an error yet moved the file committed all the same:
            // only a temporary file still in place proves it did not.
            if !self.storage.exists(&tmp) {
                self.undo_on_drop = false;
            }
            return Err(e);
        }
        self.undo_on_drop = false;
        let dir = path.parent().unwrap_or_else(|| Path::new("."));
        self.storage.sync_dir(dir)
    }

    /// Gives back what the uncommitted transaction took: truncates the files it grew to
    /// their length before its first write, removes the files and directories it created
    /// and the temporary file of its commit step. Best effort (the first error is
    /// returned, the rest is still tried); touches no committed byte.
    fn undo(&mut self) -> Result<()> {
        let mut first = Ok(());
        let mut keep = |r: Result<()>| {
            if first.is_ok() {
                first = r;
            }
        };
        // The background syncer lets go of its files (its error no longer matters).
        if let Some(syncer) = self.syncer.take() {
            let _ = syncer.finish();
        }
        self.files.clear();
        self.open_count = 0;
        for (rel, undo) in std::mem::take(&mut self.undo) {
            let path = self.root.join(&rel);
            match undo {
                Undo::Remove => keep(self.storage.remove_file(&path)),
                Undo::Truncate(len) => keep(truncate_to(self.storage, &path, len)),
            }
        }
        // Directories created for new files held nothing before (outermost last, so the
        // inner ones go first).
        for d in std::mem::take(&mut self.created_dirs) {
            if self.storage.is_dir(&d) {
                keep(self.storage.remove_dir_all(&d));
            }
        }
        for tmp in std::mem::take(&mut self.commit_tmp) {
            keep(self.storage.remove_file(&tmp));
        }
        first
    }
}

impl Drop for Txn<'_> {
    fn drop(&mut self) {
        if self.undo_on_drop {
            // Nothing to report to: the error that ended the transaction is what the caller
            // sees, and what could not be undone is only dead space past the committed
            // state.
            let _ = self.undo();
        }
    }
}

/// Truncates the file at `path` to `len` when it is longer (a file that is gone or shorter
/// is left as it is).
fn truncate_to(storage: &dyn Storage, path: &Path, len: u64) -> Result<()> {
    if !storage.exists(path) {
        return Ok(());
    }
    let f = storage.open(path, OpenMode::ReadWrite)?;
    if f.len()? > len {
        f.set_len(len)?;
    }
    Ok(())
}

fn dedup(mut v: Vec<PathBuf>) -> Vec<PathBuf> {
    v.sort();
    v.dedup();
    v
}

/// Applies committed entries (idempotent: applying twice gives the same result).
///
/// # Errors
/// I/O errors.
pub(crate) fn apply(storage: &dyn Storage, root: &Path, entries: &[Entry]) -> Result<()> {
    // Patches and truncations, file by file (in journal order within each file): each file
    // is opened, changed, synced and closed before the next, so a journal that touches
    // thousands of files (a wide table) never holds thousands of descriptors.
    let mut by_file: BTreeMap<&Path, Vec<&Entry>> = BTreeMap::new();
    for e in entries {
        if let Entry::Patch { path, .. } | Entry::SetLen { path, .. } = e {
            by_file.entry(path.as_path()).or_default().push(e);
        }
    }
    for (path, ops) in by_file {
        let f = storage.open(&root.join(path), OpenMode::ReadWrite)?;
        for e in ops {
            match e {
                Entry::Patch { offset, data, .. } => f.write_at(*offset, data)?,
                Entry::SetLen { len, .. } => f.set_len(*len)?,
                _ => {}
            }
        }
        f.sync()?;
    }
    for e in entries {
        if let Entry::Rename { from, to } = e {
            let (f, t) = (root.join(from), root.join(to));
            if storage.exists(&f) && !storage.exists(&t) {
                storage.rename(&f, &t)?;
                if let Some(p) = t.parent() {
                    storage.sync_dir(p)?;
                }
            }
        }
    }
    for e in entries {
        if let Entry::Meta { path, data } = e {
            write_file_atomic(storage, &root.join(path), data)?;
        }
    }
    let mut dirs = Vec::new();
    for e in entries {
        match e {
            Entry::Remove { path } => {
                storage.remove_file(&root.join(path))?;
                if let Some(p) = root.join(path).parent() {
                    dirs.push(p.to_path_buf());
                }
            }
            Entry::RemoveDir { path } => {
                storage.remove_dir_all(&root.join(path))?;
                if let Some(p) = root.join(path).parent() {
                    dirs.push(p.to_path_buf());
                }
            }
            _ => {}
        }
    }
    for d in dedup(dirs) {
        if storage.exists(&d) {
            storage.sync_dir(&d)?;
        }
    }
    Ok(())
}

/// Brings the dataset at `root` to its last committed state after a crash: replays a
/// committed journal and removes an uncommitted one. Returns true when a journal was replayed.
///
/// # Errors
/// I/O errors, and [`Error::InvalidHeader`] for a journal that is present but damaged (it was
/// committed, so blz refuses to guess).
pub fn recover(storage: &dyn Storage, root: &Path) -> Result<bool> {
    let jp = journal_path(root);
    let tmp = jp.with_file_name("journal.tmp");
    if storage.exists(&tmp) {
        storage.remove_file(&tmp)?;
    }
    if !storage.exists(&jp) {
        return Ok(false);
    }
    let bytes = read_small_file(storage, &jp, MAX_JOURNAL)?;
    let entries = decode(&bytes, &jp)?;
    apply(storage, root, &entries)?;
    storage.remove_file(&jp)?;
    storage.sync_dir(&root.join("meta"))?;
    Ok(true)
}

/// The dataset at `root` as its committed journal will leave it, as a read-only view over
/// `storage` that changes nothing on disk (for readers that cannot replay the journal).
/// `None` when no journal is pending (any more).
///
/// # Errors
/// I/O errors, and [`Error::InvalidHeader`] for a damaged journal, as [`recover`].
pub fn pending_view(storage: &Arc<dyn Storage>, root: &Path) -> Result<Option<Arc<dyn Storage>>> {
    let jp = journal_path(root);
    let bytes = match read_small_file(storage.as_ref(), &jp, MAX_JOURNAL) {
        Ok(b) => b,
        // A writer finished applying it meanwhile.
        Err(_) if !pending(storage.as_ref(), root) => return Ok(None),
        Err(e) => return Err(e),
    };
    let entries = decode(&bytes, &jp)?;
    let view = JournalView::new(Arc::clone(storage), root, &jp, entries)?;
    Ok(Some(Arc::new(view)))
}

/// True when the dataset at `root` has a committed journal not yet applied.
pub fn pending(storage: &dyn Storage, root: &Path) -> bool {
    storage.exists(&journal_path(root))
}

#[cfg(test)]
mod sync_tests {
    use super::*;
    use crate::storage::FaultyStorage;

    /// Writes two fresh files (one handed over as done) and commits; returns the mutating
    /// operations the storage saw.
    fn ops(durable: bool) -> u64 {
        let dir = tempfile::tempdir().unwrap();
        let st = FaultyStorage::new(crate::storage::local(), u64::MAX);
        let mut txn = Txn::new(&st, dir.path());
        if !durable {
            txn.skip_syncs();
        }
        for name in ["d/a.bin", "d/b.bin"] {
            let rel = Path::new(name);
            txn.create(rel).unwrap();
            txn.write_slice(rel, 0, &[7u8; 4096]).unwrap();
        }
        txn.done_with(Path::new("d/a.bin")).unwrap();
        assert!(!txn.commit_files().unwrap());
        assert_eq!(
            std::fs::read(dir.path().join("d/b.bin")).unwrap(),
            [7u8; 4096]
        );
        st.operations()
    }

    /// A transaction that skips syncs writes the same files with no sync of a file or a
    /// directory: two files and their directory fewer operations.
    #[test]
    fn skipping_syncs_syncs_nothing() {
        let durable = ops(true);
        let scratch = ops(false);
        assert!(
            scratch + 3 <= durable,
            "{scratch} operations against {durable}"
        );
    }
}
