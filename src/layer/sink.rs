//! Writing a sequence of chunks into a directory of superchunk files, every byte once.
//!
//! Chunk `k` goes to file `__{k/S + 1}__.bin` (S chunks per file), as for array and table
//! columns. The front of each file (header, metadata section with the offsets digest, and
//! offsets table) is kept in memory while its chunks are written after it, and written once
//! when the file is full or the sequence ends; the file is then synced. Until the dataset's final rename nobody reads these files,
//! so a front written last is never seen half-done.

use crate::blpk::{Checksum, SuperchunkWriter, WriterOptions};
use crate::engine::{identity_doc, identity_params, superchunk_name};
use crate::error::Result;
use crate::storage::{OpenMode, Storage, StorageFile};
use std::path::{Path, PathBuf};
use std::sync::Arc;

struct OpenSuper {
    file: Box<dyn StorageFile>,
    writer: SuperchunkWriter,
    front: Vec<u8>,
}

/// An append-only sequence of chunks in one directory.
pub(crate) struct ChunkSink {
    storage: Arc<dyn Storage>,
    dir: PathBuf,
    superchunksize: u64,
    opts: WriterOptions,
    /// The dataset's identity and this sequence's store key, recorded in every file.
    identity: Option<(String, String)>,
    cur: Option<OpenSuper>,
    /// Chunks appended so far.
    pub(crate) nchunks: u64,
    /// Stored bytes (compressed chunks plus digests) so far.
    pub(crate) stored: u64,
    /// Uncompressed bytes so far.
    pub(crate) nbytes: u64,
}

impl ChunkSink {
    /// Starts a sequence in `dir` (created now). With `binding` (the dataset's identity and
    /// root), each file records the identity, with `dir` relative to the root as its store.
    pub(crate) fn new(
        storage: Arc<dyn Storage>,
        dir: PathBuf,
        superchunksize: u64,
        checksum: Checksum,
        typesize: u8,
        varlen: bool,
        binding: Option<(&str, &Path)>,
    ) -> Result<ChunkSink> {
        storage.create_dir_all(&dir)?;
        let identity = binding.map(|(id, root)| {
            let store = dir.strip_prefix(root).unwrap_or(&dir);
            (id.to_string(), store.to_string_lossy().into_owned())
        });
        let superchunksize = superchunksize.max(1);
        Ok(ChunkSink {
            storage,
            dir,
            superchunksize,
            opts: WriterOptions {
                checksum,
                typesize,
                offsets: true,
                max_app_chunks: superchunksize,
                slack: 0,
                scattered: false,
                varlen,
                metadata: None,
            },
            identity,
            cur: None,
            nchunks: 0,
            stored: 0,
            nbytes: 0,
        })
    }

    /// Appends one compressed chunk.
    pub(crate) fn append(&mut self, chunk: Vec<u8>) -> Result<()> {
        if self.cur.is_none() {
            let f = self.nchunks / self.superchunksize;
            let path = self.dir.join(superchunk_name(f));
            let file = self.storage.open(&path, OpenMode::Create)?;
            let mut opts = self.opts.clone();
            opts.metadata = self
                .identity
                .as_ref()
                .map(|(id, store)| (identity_doc(id, store, f), identity_params()));
            let (writer, writes) = SuperchunkWriter::create(&path, &opts)?;
            let front = writes
                .into_iter()
                .next()
                .map(|w| w.data)
                .unwrap_or_default();
            self.cur = Some(OpenSuper {
                file,
                writer,
                front,
            });
        }
        let Some(cur) = self.cur.as_mut() else {
            return Ok(());
        };
        let before = cur.writer.stored_bytes();
        let nbefore = cur.writer.uncompressed_bytes();
        let writes = cur.writer.plan_append(chunk)?.unwrap_or_default();
        for w in writes {
            let end = w.offset as usize + w.data.len();
            if end <= cur.front.len() {
                cur.front[w.offset as usize..end].copy_from_slice(&w.data);
            } else {
                cur.file.write_at(w.offset, &w.data)?;
            }
        }
        self.stored += cur.writer.stored_bytes() - before;
        self.nbytes += cur.writer.uncompressed_bytes() - nbefore;
        self.nchunks += 1;
        if self.nchunks.is_multiple_of(self.superchunksize) {
            self.close()?;
        }
        Ok(())
    }

    /// Writes the front of the open file (with its offsets digest) and syncs it.
    pub(crate) fn close(&mut self) -> Result<()> {
        if let Some(mut cur) = self.cur.take() {
            if let Some(w) = cur.writer.plan_seal()? {
                let end = w.offset as usize + w.data.len();
                if let Some(dst) = cur.front.get_mut(w.offset as usize..end) {
                    dst.copy_from_slice(&w.data);
                }
            }
            cur.file.write_at(0, &cur.front)?;
            cur.file.sync()?;
        }
        Ok(())
    }
}
