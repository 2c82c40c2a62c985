//! The commit protocol (`publish_root`): upload what changed under new keys, then replace the state
//! object with one conditional write (`spec/object-store.md` §4).

use crate::client::runtime;
use crate::client::Client;
use crate::entry::StateFile;
use crate::extents::add_range;
use crate::extents::entry_of;
use crate::extents::join_pieces;
use crate::extents::pieces_of;
use crate::extents::slice_pieces;
use crate::extents::Piece;
use crate::file::ObjectFile;
use crate::front::base64_decode;
use crate::front::base64_encode;
use crate::front::Front;
use crate::front::FrontCopy;
use crate::handle::settle_probe;
use crate::handle::Committed;
use crate::handle::ObjectStorage;
use crate::handle::Upload;
use crate::handle::Written;
use crate::keys::ExtentObject;
use crate::keys::INLINE_MAX;
use crate::keys::MAX_EXTENTS;
use crate::keys::MAX_FRONT;
use crate::keys::MAX_STATE;
use crate::keys::PARALLEL;
use crate::keys::STATE_FORMAT;
use crate::keys::STATE_KEY;
use crate::manifest;
use crate::spool::budget_of;
use crate::spool::join_uploads;
use crate::spool::lock_data;
use crate::spool::node_bytes;
use crate::spool::upload_budget;
use crate::spool::Data;
use crate::spool::Node;
use crate::state::now_secs;
use crate::state::state_bytes;
use crate::state::Retired;
use crate::state::State;
use blz_format::blosc::BlockIndex;
use blz_format::error::Error;
use blz_format::error::Result;
use blz_format::storage::FrontRanges;
use blz_format::storage::SharedDir;
use blz_format::storage::StorageFile;
use bytes::Bytes;
use futures::StreamExt;
use futures::TryStreamExt;
use object_store::ObjectStore;
use object_store::PutMode;
use object_store::PutOptions;
use object_store::PutPayload;
use object_store::UpdateVersion;
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::collections::HashMap;
use std::collections::HashSet;
use std::io::ErrorKind;
use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
impl ObjectStorage {
    /// Uploads every file changed under the dataset root and commits the new state with a
    /// conditional write. On [`Error::Conflict`] (or any failure of the state write) the
    /// overlay is dropped: this handle shows the state it loaded, and must be reopened.
    pub(crate) fn publish_root(&self, front: &FrontRanges<'_>) -> Result<()> {
        // A create's handle commits only once it knows the dataset absent.
        settle_probe(&self.committed, &self.backend.root, true)?;
        // The manifests not loaded yet stay as they are: every change to a file one of them
        // may hold loaded them first.
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
        let (mut old, version, superseded, loaded_at, tag) = {
            let c = self.committed_lock();
            (
                c.state.clone(),
                c.version.clone(),
                c.superseded,
                c.stored_at,
                // The files that went up early named their objects with it.
                c.draft_tag.unwrap_or_else(rand::random),
            )
        };
        let generation = match &old {
            None => 1,
            Some(s) => s.generation.checked_add(1).ok_or_else(|| {
                Error::metadata(
                    self.root().join(STATE_KEY),
                    format!("its generation {} cannot advance", s.generation),
                )
            })?,
        };
        let mut new_files = BTreeMap::new();
        let mut uploads: Vec<Upload> = Vec::new();
        let mut changed = false;
        for (rel, node) in &files {
            let spooled = matches!(&*lock_data(node), Data::Spool(_));
            if spooled {
                changed = true;
                let key = self.commit_key(rel, node, generation, tag);
                let (entry, upload) = self.plan_spooled(rel, node, key, front)?;
                uploads.extend(upload);
                new_files.insert(rel.clone(), entry);
                continue;
            }
            let d = lock_data(node);
            let entry = match &*d {
                Data::Remote {
                    pieces, len, front, ..
                } => entry_of(pieces, *len, front.as_ref().map(|f| f.front.clone())),
                Data::Memory(b) => match std::str::from_utf8(b) {
                    Ok(t) => StateFile::Inline {
                        text: t.to_string(),
                    },
                    Err(_) => {
                        changed = true;
                        let key = self.commit_key(rel, node, generation, tag);
                        uploads.push(Upload {
                            rel: rel.clone(),
                            key: key.clone(),
                            node: Arc::clone(node),
                            ranges: None,
                        });
                        StateFile::Object {
                            key,
                            len: b.len() as u64,
                            front: None,
                        }
                    }
                },
                Data::Spool(_) => {
                    return Err(Error::io(
                        "commit",
                        self.backend.root.join(rel),
                        std::io::Error::other("the file was written while it was committed"),
                    ))
                }
            };
            new_files.insert(rel.clone(), entry);
        }
        // Every open reads the state whole: the block indexes it carries are bounded. Past
        // the bound, a file's index goes up as an object of its own, named for this commit.
        // The entries of a manifest the commit keeps (none of its files changed) are in the
        // manifest, not the state: they take none of the room (moving their indexes out
        // would change them, and rewrite their manifests for nothing).
        let sealed_as_is: HashSet<&str> = old.as_ref().map_or_else(HashSet::new, |o| {
            o.manifests
                .iter()
                .filter(|m| m.kept(&o.files, &new_files))
                .flat_map(|m| m.paths.iter().map(String::as_str))
                .collect()
        });
        let mut room = self.backend.inline_indexes.load(Ordering::Relaxed);
        let mut indexes: Vec<(String, Bytes)> = Vec::new();
        for (rel, f) in &mut new_files {
            if sealed_as_is.contains(rel.as_str()) {
                continue;
            }
            let Some(fr) = f.front_mut().and_then(Option::as_mut) else {
                continue;
            };
            let Some(b) = &fr.blocks else {
                continue;
            };
            match room.checked_sub(b.len() as u64) {
                Some(r) => room = r,
                None => {
                    let packed = base64_decode(b).unwrap_or_default();
                    fr.blocks = None;
                    if !packed.is_empty() {
                        let key = format!("{rel}.{generation}-{tag:016x}.blocks");
                        fr.blocks_object = Some(ExtentObject {
                            key: key.clone(),
                            size: packed.len() as u64,
                        });
                        indexes.push((key, Bytes::from(packed)));
                    }
                }
            }
        }
        if old.as_ref().is_some_and(|s| s.files == new_files) && !changed {
            return Ok(());
        }
        // The entries this commit left as they were go (or stay) in manifests of their own.
        let seal = self.backend.manifest_bytes.load(Ordering::Relaxed);
        let plan = |old: Option<&State>, files: &BTreeMap<String, StateFile>| {
            manifest::plan(
                old.map(|o| (&o.files, &o.manifests[..])),
                files,
                seal,
                generation,
                tag,
            )
            .map_err(|e| Error::metadata(self.state_path(), e))
        };
        let mut sealed = plan(old.as_ref(), &new_files)?;
        while !sealed.needs_load.is_empty() {
            // A merge takes in manifests not loaded: those (only) are read, and their files
            // join the commit's, unchanged. Each round loads at least one manifest, so this
            // ends (a merged manifest may complete a group of the next level).
            let wanted = std::mem::take(&mut sealed.needs_load);
            self.load_pending_where(|m| wanted.contains(&m.key))?;
            old = self.committed_lock().state.clone();
            if let Some(o) = &old {
                let loaded = o.manifests.iter().filter(|m| wanted.contains(&m.key));
                if loaded.clone().any(|m| !m.loaded) {
                    return Err(Error::metadata(
                        self.state_path(),
                        format!("the manifests {wanted:?} to merge were not read"),
                    ));
                }
                for rel in loaded.flat_map(|m| &m.paths) {
                    if let (false, Some(f)) = (new_files.contains_key(rel), o.files.get(rel)) {
                        new_files.insert(rel.clone(), f.clone());
                    }
                }
            }
            sealed = plan(old.as_ref(), &new_files)?;
        }
        indexes.extend(sealed.uploads);
        let result = if superseded {
            Err(Error::Conflict {
                path: self.backend.root.clone(),
            })
        } else {
            Ok(())
        };
        let result = result
            .and_then(|()| self.finish_early())
            .and_then(|()| self.localize(&uploads))
            .and_then(|()| self.upload(&uploads, &indexes))
            .and_then(|()| {
                let now = now_secs();
                let mut retired = old.as_ref().map(|s| s.retired.clone()).unwrap_or_default();
                // Everything retired so far was retired by the loaded state or before it: by the
                // time the store stored that state, by the store's clock.
                for r in &mut retired {
                    r.stored_by = r.stored_by.or(loaded_at);
                }
                if let Some(o) = &old {
                    // An object is retired only when no entry (whole, or by one extent) names it.
                    let still: HashSet<&str> =
                        new_files.values().flat_map(StateFile::keys).collect();
                    let mut gone = BTreeSet::new();
                    let manifests = sealed.retired.iter().map(String::as_str);
                    for key in o.files.values().flat_map(StateFile::keys).chain(manifests) {
                        if !still.contains(key) && gone.insert(key) {
                            retired.push(Retired {
                                key: key.to_string(),
                                at: now,
                                generation: Some(generation),
                                stored_by: None,
                            });
                        }
                    }
                }
                let mut state = State {
                    format: STATE_FORMAT.into(),
                    version: State::version_for(&new_files, &sealed.manifests),
                    generation,
                    committed_at: now,
                    files: new_files,
                    retired,
                    write_id: old.as_ref().and_then(|s| s.write_id.clone()),
                    earlier_write_ids: old
                        .as_ref()
                        .map(|s| s.earlier_write_ids.clone())
                        .unwrap_or_default(),
                    manifests: sealed.manifests,
                };
                state.stamp_write();
                let w = self.write_state(&mut state, version.as_ref())?;
                *self.committed_lock() = Committed::written(state, w);
                Ok(())
            });
        match result {
            Ok(()) => {
                // The written files are read from their objects from now on (the spool goes),
                // inline ones from memory.
                let uploaded: HashSet<&str> = uploads.iter().map(|u| u.rel.as_str()).collect();
                let committed = self.committed_lock();
                if let Some(state) = &committed.state {
                    for (rel, node) in &files {
                        let Some(entry) = state.files.get(rel) else {
                            continue;
                        };
                        let mut d = lock_data(node);
                        if !matches!(&*d, Data::Spool(_)) && !uploaded.contains(rel.as_str()) {
                            continue;
                        }
                        *d = match entry {
                            StateFile::Inline { text } => {
                                Data::Memory(Bytes::from(text.clone().into_bytes()))
                            }
                            StateFile::Object { len, front, .. }
                            | StateFile::Extents { len, front, .. } => Data::Remote {
                                pieces: pieces_of(entry),
                                len: *len,
                                head: None,
                                front: front.clone().map(FrontCopy::new),
                            },
                        };
                    }
                }
                Ok(())
            }
            Err(e) => {
                self.reset_tree();
                self.forget_draft();
                Err(e)
            }
        }
    }

    /// The key the commit uploads the file `rel` (held by `node`) under:
    /// `<rel>.<generation>-<tag>`, unless an early upload of another file (written at `rel`,
    /// renamed since) holds that key, when a second tag is drawn for this file alone.
    pub(crate) fn commit_key(&self, rel: &str, node: &Node, generation: u64, tag: u64) -> String {
        let key = format!("{rel}.{generation}-{tag:016x}");
        let own = match &*lock_data(node) {
            Data::Spool(sp) => sp.early.as_ref().is_some_and(|e| e.key == key),
            _ => false,
        };
        if !own && self.committed_lock().draft_keys.contains(&key) {
            return format!("{rel}.{generation}-{:016x}", rand::random::<u64>());
        }
        key
    }

    /// Drops the commit being prepared: the files that went up early are orphans now (gc
    /// collects them), and the next commit draws a new tag.
    pub(crate) fn forget_draft(&self) {
        let mut c = self.committed_lock();
        c.draft_tag = None;
        c.draft_keys.clear();
        c.draft_tasks.clear();
        c.draft_failed = None;
    }

    /// Waits for every early upload of the commit being prepared still running
    /// ([`ObjectFile::upload_early`]), all at once, before anything else goes up (a file
    /// the commit uploads may take a key an outdated early upload had); the first failure
    /// is the error.
    pub(crate) fn finish_early(&self) -> Result<()> {
        let (tasks, failed) = {
            let mut c = self.committed_lock();
            (std::mem::take(&mut c.draft_tasks), c.draft_failed.clone())
        };
        let waited = join_uploads(&self.backend.root, tasks);
        match failed {
            Some(why) => Err(Error::io(
                "upload",
                &self.backend.root,
                std::io::Error::other(why),
            )),
            None => waited,
        }
    }

    /// The copy of the first-read bytes of the spooled file `rel` (held by `node`) that
    /// `front` asks for, if it asks for one within [`MAX_FRONT`] bytes.
    pub(crate) fn front_of(
        &self,
        rel: &str,
        node: &Arc<Node>,
        front: &FrontRanges<'_>,
    ) -> Option<Front> {
        self.read_front(&self.backend.root.join(rel), node, front)
            .ok()
            .flatten()
    }

    /// The block index of the spooled file `rel` (held by `node`) at this commit
    /// ([`blz_format::blpk::block_index`]: `written`, the ranges written, `None` for a new file;
    /// `old`, the committed file's index).
    pub(crate) fn blocks_of(
        &self,
        rel: &str,
        node: &Arc<Node>,
        written: Option<&[std::ops::Range<u64>]>,
        old: Option<&BlockIndex>,
    ) -> Option<BlockIndex> {
        let file = self.view(&self.backend.root.join(rel), node);
        blz_format::blpk::block_index(&file, written, old)
    }

    /// The copy of `front` (of the file held by `node`, named `path`, `size` bytes long,
    /// whose front the node holds) with the block index its worker put as `name` in `dir`,
    /// when that fits the file: it decodes, and every record lies at an offset of the file's
    /// offsets table, its chunk inside its place. `None` otherwise.
    pub(crate) fn worker_index(
        &self,
        dir: &dyn SharedDir,
        name: &str,
        path: &Path,
        node: &Arc<Node>,
        front: Front,
        size: u64,
    ) -> Result<Option<Arc<FrontCopy>>> {
        let Some(packed) = dir.get(name, MAX_FRONT)? else {
            return Ok(None);
        };
        let copy = FrontCopy::new(Front {
            blocks: Some(base64_encode(&packed)),
            ..front
        });
        // Read from the front the node holds: no request.
        let (Ok(Some(index)), Ok(layout)) = (
            copy.block_index(),
            blz_format::blpk::Layout::read(&self.view(path, node)),
        ) else {
            return Ok(None);
        };
        // Each offset's room (the largest, should a table name an offset twice).
        let mut room: HashMap<u64, u64> = HashMap::new();
        for (&o, e) in layout.offsets.iter().zip(layout.extents()) {
            let r = room.entry(o).or_default();
            *r = (*r).max(e);
        }
        let fits = index.iter().all(|(off, cb)| {
            room.get(off)
                .is_some_and(|&e| cb.cbytes() as u64 <= e && off + e <= size)
        });
        Ok(fits.then_some(copy))
    }

    /// The file held by `node` (named `path`), to read as this handle sees it.
    pub(crate) fn view(&self, path: &Path, node: &Arc<Node>) -> ObjectFile {
        ObjectFile {
            node: Arc::clone(node),
            backend: Arc::clone(&self.backend),
            path: path.to_path_buf(),
            writable: false,
            committed: Arc::clone(&self.committed),
        }
    }

    /// The front of the file held by `node` (named `path`): the ranges `front` asks for, if
    /// within [`MAX_FRONT`] bytes, read through the file. `Ok(None)` when it asks for none
    /// or too many; an error when reading them fails.
    pub(crate) fn read_front(
        &self,
        path: &Path,
        node: &Arc<Node>,
        front: &FrontRanges<'_>,
    ) -> Result<Option<Front>> {
        let file = self.view(path, node);
        let Some(ranges) = front(&file) else {
            return Ok(None);
        };
        let total: u64 = ranges.iter().map(|r| r.end.saturating_sub(r.start)).sum();
        if total == 0 || total > MAX_FRONT {
            return Ok(None);
        }
        let mut bytes = vec![0u8; total as usize];
        let mut at = 0usize;
        for r in &ranges {
            let n = (r.end - r.start) as usize;
            file.read_at(r.start, &mut bytes[at..at + n])?;
            at += n;
        }
        Ok(Front::new(&ranges, &bytes))
    }

    /// The state entry of the spooled file `rel` (held by `node`) at this commit, and what
    /// to upload for it under `key`: the bytes the transaction wrote (with the file's new
    /// front, so that it is one piece), the rest of the file staying in the objects that
    /// held it; or the whole file when it has no committed bytes left, or when the entry
    /// would list more than [`MAX_EXTENTS`] extents or name objects of more than twice the
    /// file's length (the compaction, `spec/object-store.md` §4).
    pub(crate) fn plan_spooled(
        &self,
        rel: &str,
        node: &Arc<Node>,
        key: String,
        front: &FrontRanges<'_>,
    ) -> Result<(StateFile, Option<Upload>)> {
        let path = self.backend.root.join(rel);
        let len = match &*lock_data(node) {
            Data::Spool(sp) => sp.len,
            Data::Memory(b) => b.len() as u64,
            Data::Remote { len, .. } => *len,
        };
        if rel.starts_with("meta/") && len <= INLINE_MAX as u64 {
            let bytes = node_bytes(&self.backend, node, &path, None)?;
            if let Ok(text) = std::str::from_utf8(&bytes) {
                let text = text.to_string();
                return Ok((StateFile::Inline { text }, None));
            }
        }
        // Up already, whole, as it is now (under the key of the path it was written at,
        // if it was renamed since): the commit names that object.
        let early = match &mut *lock_data(node) {
            Data::Spool(sp) => {
                let version = sp.version;
                sp.early
                    .as_mut()
                    .filter(|e| e.version == version)
                    .map(|e| (e.key.clone(), e.index.take()))
            }
            _ => None,
        };
        if let Some((key, index)) = early {
            let front = self.front_of(rel, node, front).map(|f| {
                // Worked out beside the upload (it is done by now), else here.
                let index = match index {
                    Some(task) => runtime()
                        .ok()
                        .and_then(|rt| rt.block_on(task).ok().flatten()),
                    None => self.blocks_of(rel, node, None, None),
                };
                f.with_blocks(index.as_ref())
            });
            return Ok((StateFile::Object { key, len, front }, None));
        }
        // A file changed in part indexes the chunks written, and keeps the entries of the
        // chunks not touched; a new one indexes all.
        let (fresh, old_front) = match &*lock_data(node) {
            Data::Spool(sp) if !sp.base.is_empty() => (Some(sp.written.clone()), sp.front.clone()),
            _ => (None, None),
        };
        let new_front = self.front_of(rel, node, front).map(|f| {
            let old = old_front.as_ref().and_then(|o| {
                self.backend
                    .front_index(o, &self.backend.root.join(rel))
                    .ok()
                    .flatten()
            });
            let index = self.blocks_of(rel, node, fresh.as_deref(), old.as_deref());
            f.with_blocks(index.as_ref())
        });
        let upload = |ranges| Upload {
            rel: rel.to_string(),
            key: key.clone(),
            node: Arc::clone(node),
            ranges,
        };
        let whole = || {
            let entry = StateFile::Object {
                key: key.clone(),
                len,
                front: new_front.clone(),
            };
            Ok((entry, Some(upload(None))))
        };
        let d = lock_data(node);
        let Data::Spool(sp) = &*d else {
            return whole();
        };
        if sp.base.is_empty() {
            return whole();
        }
        let mut written = sp.written.clone();
        if let (false, Some(f)) = (written.is_empty(), &new_front) {
            for &[a, n] in &f.ranges {
                add_range(&mut written, a..a + n);
            }
        }
        let size: u64 = written.iter().map(|r| r.end - r.start).sum();
        let new_key: Arc<str> = Arc::from(key.as_str());
        let mut pieces = Vec::new();
        let (mut pos, mut at) = (0u64, 0u64);
        for w in &written {
            pieces.extend(slice_pieces(&sp.base, pos..w.start));
            pieces.push(Piece {
                key: Arc::clone(&new_key),
                size,
                at,
                len: w.end - w.start,
            });
            at += w.end - w.start;
            pos = w.end;
        }
        pieces.extend(slice_pieces(&sp.base, pos..len));
        let pieces = join_pieces(pieces);
        let covered: u64 = pieces.iter().map(|p| p.len).sum();
        let mut objects: BTreeMap<&str, u64> = BTreeMap::new();
        for p in &pieces {
            objects.insert(&*p.key, p.size);
        }
        let named: u64 = objects.values().sum();
        if covered != len || pieces.len() > MAX_EXTENTS || named > len.saturating_mul(2) {
            drop(d);
            return whole();
        }
        let entry = entry_of(&pieces, len, new_front);
        Ok((entry, (size > 0).then(|| upload(Some(written)))))
    }

    /// Brings every byte the uploads read into their spool files ([`Spool::localize`]).
    pub(crate) fn localize(&self, uploads: &[Upload]) -> Result<()> {
        for u in uploads {
            if let Data::Spool(sp) = &mut *lock_data(&u.node) {
                let whole = 0..sp.len;
                let ranges = u.ranges.as_deref().unwrap_or(std::slice::from_ref(&whole));
                sp.localize(&self.backend, ranges, &self.backend.root.join(&u.rel))?;
            }
        }
        Ok(())
    }

    /// Uploads what the commit writes of each file (one PUT each), and the block indexes
    /// `indexes` (key, zlib stream) that the state names but does not carry, [`PARALLEL`]
    /// at a time, holding at most [`UPLOAD_BUDGET_MIB`] of files' bytes in memory (with the
    /// early uploads).
    pub(crate) fn upload(&self, uploads: &[Upload], indexes: &[(String, Bytes)]) -> Result<()> {
        use futures::future::Either;
        let rt = runtime()?;
        let jobs: Vec<(PathBuf, &Upload)> = uploads
            .iter()
            .map(|u| (self.backend.root.join(&u.rel), u))
            .collect();
        let backend = &self.backend;
        let index_puts = futures::stream::iter(indexes).map(|(key, bytes)| {
            Either::Right(async move {
                backend
                    .upload(key, &backend.root.join(key), bytes.clone())
                    .await
            })
        });
        rt.block_on(async move {
            futures::stream::iter(jobs)
                .map(|(path, u)| {
                    Either::Left(async move {
                        let (key, node) = (u.key.as_str(), &u.node);
                        let len = match (&u.ranges, &*lock_data(node)) {
                            (Some(r), _) => r.iter().map(|r| r.end - r.start).sum(),
                            (None, Data::Spool(sp)) => sp.len,
                            (None, Data::Memory(b)) => b.len() as u64,
                            (None, Data::Remote { len, .. }) => *len,
                        };
                        let _room = upload_budget()
                            .acquire_many(budget_of(len))
                            .await
                            .map_err(|e| Error::io("upload", &path, std::io::Error::other(e)))?;
                        let bytes = node_bytes(backend, node, &path, u.ranges.as_deref())?;
                        backend.upload(key, &path, bytes).await
                    })
                })
                .chain(index_puts)
                .buffer_unordered(PARALLEL)
                .try_collect::<Vec<()>>()
                .await
        })
        .map(drop)
    }

    /// Writes the state object (stamped with its write id, [`State::stamp_write`]):
    /// if-match `version`, or create-if-absent without one. When the write fails in any way
    /// (refused, an error, an answer lost to a timeout while a retry then finds the state
    /// changed: by this very write), the state object is read back: the write took effect
    /// if and only if the state there records its write id. Only a write that did not take
    /// effect is reported: [`Error::Conflict`] when the store refused it, else the error.
    ///
    /// A state longer than a reader reads ([`MAX_STATE`]) leaves files' fronts out first
    /// ([`state_bytes`]); one too long without them is not written.
    pub(crate) fn write_state(
        &self,
        state: &mut State,
        version: Option<&UpdateVersion>,
    ) -> Result<Written> {
        let rt = runtime()?;
        let path = self.state_path();
        let bytes = state_bytes(state, MAX_STATE, &path)?;
        let mode = match version {
            Some(v) => PutMode::Update(v.clone()),
            None => PutMode::Create,
        };
        let loc = self.backend.key(STATE_KEY);
        let condition = if version.is_some() {
            "if-match"
        } else {
            "if-none-match"
        };
        self.backend
            .note("PUT", STATE_KEY, format_args!("{condition}"));
        let started = std::time::Instant::now();
        let r = rt.block_on(self.backend.client(Client::Write).put_opts(
            &loc,
            PutPayload::from(bytes),
            PutOptions {
                mode,
                ..PutOptions::default()
            },
        ));
        let failure = match r {
            Ok(r) => {
                return Ok(Written::Current(UpdateVersion {
                    e_tag: r.e_tag,
                    version: r.version,
                }))
            }
            Err(
                object_store::Error::Precondition { .. }
                | object_store::Error::AlreadyExists { .. },
            ) => Error::Conflict {
                path: self.backend.root.clone(),
            },
            Err(e) => self
                .backend
                .error("commit", &path, Client::Write, started, e),
        };
        let Some(id) = state.write_id.as_deref() else {
            return Err(failure);
        };
        // The write ids are in the state object itself: its manifests are not needed.
        match self.backend.fetch_state_with(false) {
            Ok((Some(now), Some(v), _)) if now.records_write(id) => {
                if now.write_id.as_deref() == Some(id) {
                    Ok(Written::Current(v))
                } else {
                    Ok(Written::Superseded)
                }
            }
            Ok(_) => Err(failure),
            Err(again) => Err(Error::io(
                "commit",
                &path,
                std::io::Error::new(
                    match &failure {
                        Error::Io { source, .. } => source.kind(),
                        _ => ErrorKind::Other,
                    },
                    format!(
                        "the conditional write of the state failed ({failure}), and reading \
                         the state back to learn whether it took effect failed too ({again}): \
                         whether the commit took effect is unknown; open the dataset again to \
                         see"
                    ),
                ),
            )),
        }
    }
}
