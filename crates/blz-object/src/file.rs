//! A file opened through an [`ObjectStorage`](crate::ObjectStorage): reads from the overlay, the
//! front or the objects; writes into the spool.

use crate::client::eof;
use crate::client::range_len;
use crate::client::runtime;
use crate::client::Backend;
use crate::extents::add_range;
use crate::extents::clip_ranges;
use crate::extents::slice_pieces;
use crate::handle::lock_committed;
use crate::handle::settle_probe;
use crate::handle::Committed;
use crate::keys::HEAD_BLOCK;
use crate::keys::INLINE_MAX;
use crate::spool::budget_of;
use crate::spool::front_bytes;
use crate::spool::join_uploads;
use crate::spool::lock_data;
use crate::spool::materialize;
use crate::spool::upload_budget;
use crate::spool::Data;
use crate::spool::Early;
use crate::spool::Node;
use crate::spool::Spool;
use blz_format::error::Error;
use blz_format::error::Result;
use blz_format::storage::StorageFile;
use blz_format::storage::STAGING_SUFFIX;
use bytes::Bytes;
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
pub(crate) struct ObjectFile {
    pub(crate) node: Arc<Node>,
    pub(crate) backend: Arc<Backend>,
    pub(crate) path: PathBuf,
    pub(crate) writable: bool,
    /// The committed state of the handle that opened it: the generation and tag its early
    /// upload is named by.
    pub(crate) committed: Arc<Mutex<Committed>>,
}

impl ObjectFile {
    /// Starts uploading the file now, whole, under the name its commit would give it
    /// (`<file path>.<generation>-<tag>`, the tag drawn for this handle's next commit), if
    /// it is new since the last commit, longer than an inline document, and not uploaded
    /// early already. The commit names the object if the file was not written again since
    /// (else it uploads the file as usual, after this upload ended); it waits for the
    /// upload, and fails with its error. Holds at most [`UPLOAD_BUDGET_MIB`] of this
    /// process's upload bytes in memory: waits here for room.
    pub(crate) fn upload_early(&self) -> Result<()> {
        let Some(rel) = self.early_rel() else {
            return Ok(());
        };
        // Called inside the runtime (no caller does), it could not wait for room: the
        // commit uploads the file instead.
        if tokio::runtime::Handle::try_current().is_ok() {
            return Ok(());
        }
        // A create that found the dataset there uploads nothing more (the sync's error is
        // the create's).
        settle_probe(&self.committed, &self.backend.root, false)?;
        // An earlier early upload that failed fails this sync: the writer stops at its next
        // file instead of encoding the rest for a commit that cannot succeed.
        self.early_failure()?;
        let eligible =
            |sp: &Spool| sp.base.is_empty() && sp.len > INLINE_MAX as u64 && sp.early.is_none();
        let (version, len) = match &*lock_data(&self.node) {
            Data::Spool(sp) if eligible(sp) => (sp.version, sp.len),
            _ => return Ok(()),
        };
        let rt = runtime()?;
        let permit = rt
            .block_on(Arc::clone(upload_budget()).acquire_many_owned(budget_of(len)))
            .map_err(|e| Error::io("upload", &self.path, std::io::Error::other(e)))?;
        // The node's lock and the draft's are never held together (a commit takes the
        // draft's, then nodes').
        let key = {
            let mut c = lock_committed(&self.committed);
            let tag = *c.draft_tag.get_or_insert_with(rand::random);
            let generation = c.state.as_ref().map_or(1, |s| s.generation + 1);
            let key = format!("{rel}.{generation}-{tag:016x}");
            if !c.draft_keys.insert(key.clone()) {
                // Another file went up early under this name (it was written here, then
                // renamed): this one goes up with the commit, under a tag of its own.
                return Ok(());
            }
            key
        };
        let bytes = match &mut *lock_data(&self.node) {
            Data::Spool(sp) if sp.version == version && eligible(sp) => sp.bytes_of(
                &self.backend,
                std::slice::from_ref(&(0..sp.len)),
                &self.path,
            )?,
            // Written meanwhile: the commit uploads it (under the key just claimed).
            _ => return Ok(()),
        };
        let (backend, path, k) = (Arc::clone(&self.backend), self.path.clone(), key.clone());
        // The commit names the object with the file's block index: worked out now, beside
        // the upload, rather than on the commit's path.
        let index = {
            let (bytes, path) = (bytes.clone(), path.clone());
            rt.spawn_blocking(move || blz_format::blpk::block_index_of_bytes(&bytes, &path))
        };
        let task = rt.spawn(async move {
            let _room = permit;
            backend.upload(&k, &path, bytes).await
        });
        lock_committed(&self.committed).draft_tasks.push(task);
        // The bytes that went up are the file's at `version`: the commit names the object
        // while the file is still so (else it uploads the file after this upload ended).
        if let Data::Spool(sp) = &mut *lock_data(&self.node) {
            sp.early = Some(Early {
                key,
                version,
                index: Some(index),
            });
        }
        Ok(())
    }

    /// The first error of this commit's early uploads that have ended (those still running
    /// are left to run; those that succeeded need no more waiting).
    pub(crate) fn early_failure(&self) -> Result<()> {
        let done: Vec<tokio::task::JoinHandle<Result<()>>> = {
            let mut c = lock_committed(&self.committed);
            let (done, running) = std::mem::take(&mut c.draft_tasks)
                .into_iter()
                .partition(tokio::task::JoinHandle::is_finished);
            c.draft_tasks = running;
            done
        };
        if done.is_empty() {
            return Ok(());
        }
        let r = join_uploads(&self.backend.root, done);
        if let Err(e) = &r {
            lock_committed(&self.committed).draft_failed = Some(e.to_string());
        }
        r
    }

    /// The file's path relative to the dataset root: below the root, or below the staging
    /// directory a create builds in (`<root>.tmp-build`, renamed to the root before its
    /// commit); `None` for a file elsewhere.
    pub(crate) fn early_rel(&self) -> Option<String> {
        let root = &self.backend.root;
        let staging =
            root.with_file_name(format!("{}{STAGING_SUFFIX}", root.file_name()?.to_str()?));
        let rel = self
            .path
            .strip_prefix(root)
            .or_else(|_| self.path.strip_prefix(&staging))
            .ok()?
            .to_str()?;
        (!rel.is_empty()).then(|| rel.to_string())
    }

    pub(crate) fn check_writable(&self) -> Result<()> {
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
            Data::Spool(sp) => Ok(sp.len),
        }
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let end = offset
            .checked_add(buf.len() as u64)
            .ok_or_else(|| eof(&self.path))?;
        let (pieces, len, has_front) = {
            let data = lock_data(&self.node);
            match &*data {
                Data::Spool(sp) => return sp.read_at(&self.backend, offset, buf, &self.path),
                Data::Memory(b) => {
                    let src = b
                        .get(offset as usize..end as usize)
                        .filter(|_| end <= b.len() as u64)
                        .ok_or_else(|| eof(&self.path))?;
                    buf.copy_from_slice(src);
                    return Ok(());
                }
                Data::Remote {
                    pieces,
                    len,
                    head,
                    front,
                } => {
                    if end > *len {
                        return Err(eof(&self.path));
                    }
                    if let Some(h) = head.as_ref().filter(|h| end <= h.len() as u64) {
                        buf.copy_from_slice(&h[offset as usize..end as usize]);
                        return Ok(());
                    }
                    if let Some(at) = front.as_ref().and_then(|f| f.find(offset, end)) {
                        let b = front_bytes(&self.backend, front.as_deref(), &self.path)?;
                        buf.copy_from_slice(&b[at..at + buf.len()]);
                        return Ok(());
                    }
                    (pieces.clone(), *len, front.is_some())
                }
            }
        };
        if buf.is_empty() {
            return Ok(());
        }
        // With its front matter known, a file is read exactly where asked: no first block.
        let head_len = if has_front { 0 } else { HEAD_BLOCK.min(len) };
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
            let head = self.backend.read_pieces(&pieces, 0..head_len, &self.path)?;
            buf.copy_from_slice(&head[offset as usize..end as usize]);
            if let Data::Remote { head: h, .. } = &mut *lock_data(&self.node) {
                *h = Some(head);
            }
            return Ok(());
        }
        let got = self.backend.read_pieces(&pieces, offset..end, &self.path)?;
        buf.copy_from_slice(&got);
        Ok(())
    }

    fn read_ranges(&self, ranges: &[std::ops::Range<u64>]) -> Result<Vec<Bytes>> {
        blz_format::storage::in_order(ranges.len(), |each| self.read_ranges_each(ranges, each))
    }

    fn read_ranges_each(
        &self,
        ranges: &[std::ops::Range<u64>],
        each: &(dyn Fn(usize, Bytes) + Sync),
    ) -> Result<()> {
        // The ranges left for the store: (index in `ranges`, range).
        let mut remote = Vec::new();
        // The ranges inside a front-less file's first block, not yet fetched.
        let mut in_head = Vec::new();
        let pieces = {
            let data = lock_data(&self.node);
            let Data::Remote {
                pieces,
                len,
                head,
                front,
            } = &*data
            else {
                drop(data);
                for (i, r) in ranges.iter().enumerate() {
                    let mut b = vec![0u8; range_len(r, &self.path)?];
                    self.read_at(r.start, &mut b)?;
                    each(i, Bytes::from(b));
                }
                return Ok(());
            };
            let head_len = if front.is_some() {
                0
            } else {
                HEAD_BLOCK.min(*len)
            };
            let mut here = Vec::new();
            for (i, r) in ranges.iter().enumerate() {
                if r.start > r.end || r.end > *len {
                    return Err(eof(&self.path));
                }
                if r.start == r.end {
                    here.push((i, Bytes::new()));
                } else if let Some(h) = head.as_ref().filter(|h| r.end <= h.len() as u64) {
                    here.push((i, h.slice(r.start as usize..r.end as usize)));
                } else if let Some(at) = front.as_ref().and_then(|f| f.find(r.start, r.end)) {
                    let b = front_bytes(&self.backend, front.as_deref(), &self.path)?;
                    here.push((i, b.slice(at..at + (r.end - r.start) as usize)));
                } else if r.end > head_len {
                    remote.push((i, r.clone()));
                } else {
                    in_head.push(i);
                }
            }
            let pieces = pieces.clone();
            drop(data);
            for (i, b) in here {
                each(i, b);
            }
            pieces
        };
        // What a front-less file's first block holds is read through it (one request, kept).
        for i in in_head {
            let r = &ranges[i];
            let mut b = vec![0u8; range_len(r, &self.path)?];
            self.read_at(r.start, &mut b)?;
            each(i, Bytes::from(b));
        }
        let asked: Vec<std::ops::Range<u64>> = remote.iter().map(|(_, r)| r.clone()).collect();
        self.backend
            .read_file_ranges_each(&pieces, &asked, &self.path, &|j, b| each(remote[j].0, b))
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.check_writable()?;
        let mut d = lock_data(&self.node);
        materialize(&mut d, &self.path)?;
        if let Data::Spool(sp) = &mut *d {
            let end = offset
                .checked_add(data.len() as u64)
                .ok_or_else(|| eof(&self.path))?;
            sp.version += 1;
            sp.file_to_write(&self.path)?
                .write_all_at(data, offset)
                .map_err(|e| Error::io("write", &self.path, e))?;
            if !data.is_empty() {
                // A gap left past the old end reads as zeros: written too.
                add_range(&mut sp.written, sp.len.min(offset)..end);
                sp.len = sp.len.max(end);
            }
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.check_writable()?;
        let mut d = lock_data(&self.node);
        materialize(&mut d, &self.path)?;
        if let Data::Spool(sp) = &mut *d {
            sp.version += 1;
            sp.file_to_write(&self.path)?
                .set_len(len)
                .map_err(|e| Error::io("truncate", &self.path, e))?;
            if len < sp.len {
                clip_ranges(&mut sp.written, len);
                sp.base = slice_pieces(&sp.base, 0..len);
            } else {
                add_range(&mut sp.written, sp.len..len);
            }
            sp.len = len;
        }
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        // Durability comes from the commit; a spool file dies with the process. A file
        // written whole since the last commit goes up now, though (its commit names the
        // object): the engine syncs a superchunk file once it is full, so the upload runs
        // while the next files are encoded.
        if self.writable {
            self.upload_early()?;
        }
        Ok(())
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn small_reads_are_cheap(&self) -> bool {
        false
    }

    fn chunk_blocks(&self, offset: u64) -> Result<Option<Arc<blz_format::blosc::ChunkBlocks>>> {
        // The committed file's index; for a file written since, its entries for chunks
        // none of whose bytes were written (or cut off).
        let (front, written, len) = match &*lock_data(&self.node) {
            Data::Remote { front: Some(f), .. } => (Arc::clone(f), None, u64::MAX),
            Data::Spool(Spool {
                front: Some(f),
                written,
                len,
                ..
            }) => (Arc::clone(f), Some(written.clone()), *len),
            _ => return Ok(None),
        };
        let index = self.backend.front_index(&front, &self.path)?;
        let Some(cb) = index.as_ref().and_then(|i| i.get(&offset)) else {
            return Ok(None);
        };
        let end = offset.saturating_add(cb.cbytes() as u64);
        let untouched = end <= len
            && written
                .iter()
                .flatten()
                .all(|w| w.end <= offset || end <= w.start);
        Ok(untouched.then(|| Arc::clone(cb)))
    }
}
