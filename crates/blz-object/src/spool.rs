//! The local overlay: a file written through a handle lives in a spool file (its new bytes) over
//! its committed objects (the rest), until a commit uploads it.

use crate::client::eof;
use crate::client::runtime;
use crate::client::Backend;
use crate::entry::StateFile;
use crate::extents::add_range;
use crate::extents::pieces_of;
use crate::extents::Piece;
use crate::front::FrontCopy;
use crate::keys::STATE_KEY;
use crate::keys::UPLOAD_BUDGET_MIB;
use blz_format::blosc::BlockIndex;
use blz_format::error::Error;
use blz_format::error::Result;
use bytes::Bytes;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::MutexGuard;
/// A node showing the committed file `f`.
pub(crate) fn node_of(f: &StateFile) -> Arc<Node> {
    Node::new(match f {
        StateFile::Object { len, front, .. } | StateFile::Extents { len, front, .. } => {
            Data::Remote {
                pieces: pieces_of(f),
                len: *len,
                head: None,
                front: front.clone().map(FrontCopy::new),
            }
        }
        StateFile::Inline { text } => Data::Memory(Bytes::from(text.clone().into_bytes())),
    })
}

/// What a file's bytes are.
pub(crate) enum Data {
    /// A file of the committed state, not written since; its first block once read.
    Remote {
        /// The object pieces holding it, in order.
        pieces: Vec<Piece>,
        len: u64,
        head: Option<Bytes>,
        /// The copy of its first-read bytes the state keeps, if any.
        front: Option<Arc<FrontCopy>>,
    },
    /// Bytes known in memory (an inline meta document).
    Memory(Bytes),
    /// Written since the last commit.
    Spool(Spool),
}

/// A file written since the last commit: the bytes written are in a local (sparse) spool
/// file, the others are still those of the committed file, read from its objects when asked
/// for. Every byte below `len` is in `written` or below the end of `base`.
pub(crate) struct Spool {
    pub(crate) file: std::fs::File,
    pub(crate) len: u64,
    /// The committed file's pieces, cut where the file was shrunk.
    pub(crate) base: Vec<Piece>,
    /// The byte ranges written (grown bytes count as written: zeros), sorted and apart.
    pub(crate) written: Vec<std::ops::Range<u64>>,
    /// The committed file's front copy: it answers reads of bytes not written.
    pub(crate) front: Option<Arc<FrontCopy>>,
    /// Counts the writes and length changes: an early upload is current while it holds
    /// the count it was read at.
    pub(crate) version: u64,
    /// The file as it went up before the commit ([`ObjectFile::sync`]), if it did.
    pub(crate) early: Option<Early>,
    /// Whether bytes of `file` were handed out mapped ([`Spool::bytes_of`]: an upload may
    /// still be reading them). A mapped spool file is never written again: the next write
    /// moves the bytes to a fresh spool file first ([`Spool::file_to_write`]).
    pub(crate) mapped: bool,
}

/// A spooled file uploaded before its commit, whole, under `key`, as it was at `version`
/// ([`Spool::version`]). The upload itself is the draft's ([`Committed::draft_tasks`]).
pub(crate) struct Early {
    pub(crate) key: String,
    pub(crate) version: u64,
    /// The block index of the bytes that went up, worked out beside the upload.
    pub(crate) index: Option<tokio::task::JoinHandle<Option<BlockIndex>>>,
}

/// Spool files made by this process (for tests: a file written many times has one).
pub(crate) static SPOOL_FILES: AtomicU64 = AtomicU64::new(0);

impl Spool {
    pub(crate) fn new(path: &Path) -> Result<Spool> {
        let file =
            tempfile::tempfile().map_err(|e| Error::io("create a spool file for", path, e))?;
        SPOOL_FILES.fetch_add(1, Ordering::Relaxed);
        Ok(Spool {
            file,
            len: 0,
            base: Vec::new(),
            written: Vec::new(),
            front: None,
            version: 0,
            early: None,
            mapped: false,
        })
    }

    /// The spool file, to write: a fresh copy of it if its bytes were handed out mapped
    /// (the mapping keeps the old one, unchanged, as long as it lives).
    pub(crate) fn file_to_write(&mut self, path: &Path) -> Result<&std::fs::File> {
        if self.mapped {
            use std::io::{Seek, SeekFrom};
            let err = |e| Error::io("copy a spool file for", path, e);
            let mut fresh = tempfile::tempfile().map_err(err)?;
            let mut old = &self.file;
            old.seek(SeekFrom::Start(0)).map_err(err)?;
            std::io::copy(&mut std::io::Read::take(old, self.len), &mut fresh).map_err(err)?;
            fresh.set_len(self.len).map_err(err)?;
            SPOOL_FILES.fetch_add(1, Ordering::Relaxed);
            self.file = fresh;
            self.mapped = false;
        }
        Ok(&self.file)
    }

    /// Reads the file bytes from `offset` into `buf`: written ones from the spool file, the
    /// others from the front copy or the committed file's objects.
    pub(crate) fn read_at(
        &self,
        backend: &Backend,
        offset: u64,
        buf: &mut [u8],
        path: &Path,
    ) -> Result<()> {
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&e| e <= self.len)
            .ok_or_else(|| eof(path))?;
        let mut pos = offset;
        while pos < end {
            let next = self.written.iter().find(|r| r.end > pos);
            let (written, seg_end) = match next {
                Some(r) if r.start <= pos => (true, r.end.min(end)),
                Some(r) => (false, r.start.min(end)),
                None => (false, end),
            };
            let dst = &mut buf[(pos - offset) as usize..(seg_end - offset) as usize];
            if written {
                self.file
                    .read_exact_at(dst, pos)
                    .map_err(|e| Error::io("read", path, e))?;
            } else if let Some(at) = self.front.as_ref().and_then(|f| f.find(pos, seg_end)) {
                let b = front_bytes(backend, self.front.as_deref(), path)?;
                dst.copy_from_slice(&b[at..at + dst.len()]);
            } else {
                let got = backend.read_pieces(&self.base, pos..seg_end, path)?;
                dst.copy_from_slice(&got);
            }
            pos = seg_end;
        }
        Ok(())
    }

    /// Brings the file bytes `ranges` into the spool file (those not written are read from
    /// the front copy or the objects, 8 MiB at a time), so that reading them needs no
    /// request: an upload reads them inside the runtime, where no request can block.
    pub(crate) fn localize(
        &mut self,
        backend: &Backend,
        ranges: &[std::ops::Range<u64>],
        path: &Path,
    ) -> Result<()> {
        const STEP: u64 = 8 << 20;
        for r in ranges {
            let mut pos = r.start;
            while pos < r.end {
                let next = self.written.iter().find(|w| w.end > pos).cloned();
                let gap_end = match next {
                    Some(w) if w.start <= pos => {
                        pos = w.end.min(r.end);
                        continue;
                    }
                    Some(w) => w.start.min(r.end),
                    None => r.end,
                };
                let end = gap_end.min(pos + STEP);
                let mut buf = vec![0u8; (end - pos) as usize];
                self.read_at(backend, pos, &mut buf, path)?;
                self.file_to_write(path)?
                    .write_all_at(&buf, pos)
                    .map_err(|e| Error::io("write a spool file for", path, e))?;
                add_range(&mut self.written, pos..end);
                pos = end;
            }
        }
        Ok(())
    }

    /// The file bytes `ranges`, concatenated. One range written whole (a new file, or the
    /// bytes appended to one) is mapped from the spool file, not copied: an upload sends it
    /// from the page cache. The spool file is then never written in place again.
    pub(crate) fn bytes_of(
        &mut self,
        backend: &Backend,
        ranges: &[std::ops::Range<u64>],
        path: &Path,
    ) -> Result<Bytes> {
        if let [r] = ranges {
            let written = self
                .written
                .iter()
                .any(|w| w.start <= r.start && r.end <= w.end);
            // The mapping never reaches past the spool file's end (a read there would fault).
            let held = self.file.metadata().is_ok_and(|m| m.len() >= r.end);
            if written && held && r.start < r.end && r.end <= self.len {
                let len = usize::try_from(r.end).map_err(|_| eof(path))?;
                // SAFETY: the spool file is this process's own unnamed temporary file, and
                // `mapped` keeps every later write away from it (`file_to_write`), so the
                // mapped bytes never change and the file never shrinks under the mapping.
                let map = unsafe { memmap2::MmapOptions::new().len(len).map(&self.file) }
                    .map_err(|e| Error::io("map a spool file for", path, e))?;
                self.mapped = true;
                return Ok(Bytes::from_owner(map).slice(r.start as usize..));
            }
        }
        let total: u64 = ranges.iter().map(|r| r.end - r.start).sum();
        let total = usize::try_from(total).map_err(|_| {
            Error::io(
                "read",
                path,
                std::io::Error::other("larger than memory can hold"),
            )
        })?;
        let mut buf = vec![0u8; total];
        let mut at = 0usize;
        for r in ranges {
            let n = (r.end - r.start) as usize;
            self.read_at(backend, r.start, &mut buf[at..at + n], path)?;
            at += n;
        }
        Ok(Bytes::from(buf))
    }
}

/// The decoded bytes of a front copy, or the error naming the state object and the file.
pub(crate) fn front_bytes<'f>(
    backend: &Backend,
    front: Option<&'f FrontCopy>,
    path: &Path,
) -> Result<&'f Bytes> {
    let f = front.ok_or_else(|| eof(path))?;
    f.bytes().map_err(|why| {
        Error::metadata(
            backend.root.join(STATE_KEY),
            format!("file {}: {why}", path.display()),
        )
    })
}

pub(crate) struct Node {
    pub(crate) data: Mutex<Data>,
    /// Held while the first block is fetched, so that readers racing for it (parallel
    /// chunk reads right after open) make one request, not one each.
    pub(crate) head_fetch: Mutex<()>,
}

/// The room for upload bytes in memory ([`UPLOAD_BUDGET_MIB`] permits of 1 MiB).
pub(crate) fn upload_budget() -> &'static Arc<tokio::sync::Semaphore> {
    // One per process: a forked child never gets back the permits its parent's uploads held.
    static BUDGET: blz_format::process::PerProcess<Arc<tokio::sync::Semaphore>> =
        blz_format::process::PerProcess::new();
    BUDGET.get_or_init(|| Arc::new(tokio::sync::Semaphore::new(UPLOAD_BUDGET_MIB as usize)))
}

/// The permits of [`upload_budget`] an upload of `len` bytes takes.
pub(crate) fn budget_of(len: u64) -> u32 {
    len.div_ceil(1 << 20).clamp(1, u64::from(UPLOAD_BUDGET_MIB)) as u32
}

/// Waits for the uploads `tasks` (of the dataset at `root`), all at once; the first
/// failure is the error.
pub(crate) fn join_uploads(
    root: &Path,
    tasks: Vec<tokio::task::JoinHandle<Result<()>>>,
) -> Result<()> {
    if tasks.is_empty() {
        return Ok(());
    }
    runtime()?
        .block_on(futures::future::join_all(tasks))
        .into_iter()
        .try_for_each(|r| {
            r.unwrap_or_else(|e| Err(Error::io("upload", root, std::io::Error::other(e))))
        })
}

pub(crate) fn lock_data(node: &Node) -> MutexGuard<'_, Data> {
    node.data
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Node {
    pub(crate) fn new(data: Data) -> Arc<Node> {
        Arc::new(Node {
            data: Mutex::new(data),
            head_fetch: Mutex::new(()),
        })
    }

    pub(crate) fn spool(path: &Path) -> Result<Arc<Node>> {
        Ok(Node::new(Data::Spool(Spool::new(path)?)))
    }
}

/// The bytes of a spooled (or in-memory) file to upload: `ranges` of it, concatenated, or
/// the whole file.
pub(crate) fn node_bytes(
    backend: &Backend,
    node: &Node,
    path: &Path,
    ranges: Option<&[std::ops::Range<u64>]>,
) -> Result<Bytes> {
    match &mut *lock_data(node) {
        Data::Spool(sp) => match ranges {
            Some(r) => sp.bytes_of(backend, r, path),
            None => sp.bytes_of(backend, std::slice::from_ref(&(0..sp.len)), path),
        },
        Data::Memory(b) => Ok(b.clone()),
        Data::Remote { .. } => Err(Error::io(
            "upload",
            path,
            std::io::Error::other("the file is not spooled"),
        )),
    }
}

/// Turns a file's data into a spool for writing. The committed bytes stay where they are:
/// only what is later read of them is fetched.
pub(crate) fn materialize(data: &mut Data, path: &Path) -> Result<()> {
    if let Data::Spool(_) = data {
        return Ok(());
    }
    let mut sp = Spool::new(path)?;
    match data {
        Data::Spool(_) => {}
        Data::Memory(b) => {
            sp.file
                .write_all_at(b, 0)
                .map_err(|e| Error::io("write a spool file for", path, e))?;
            sp.len = b.len() as u64;
            add_range(&mut sp.written, 0..sp.len);
        }
        Data::Remote {
            pieces, len, front, ..
        } => {
            sp.file
                .set_len(*len)
                .map_err(|e| Error::io("write a spool file for", path, e))?;
            sp.len = *len;
            sp.base = pieces.clone();
            sp.front = front.clone();
        }
    }
    *data = Data::Spool(sp);
    Ok(())
}
