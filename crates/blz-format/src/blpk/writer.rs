//! Writing superchunk files. The writer keeps the file's layout in memory and turns each
//! operation (append, replace, truncate) into a list of positioned writes, so that the caller
//! decides how they reach the disk: directly and in a crash-safe order ([`SuperchunkFile`]),
//! or through a dataset's journal.
//!
//! Every plan lists its writes in the order they must reach the disk: a write that makes bytes
//! visible to readers (an offsets slot, the header) comes after the bytes it exposes, and must
//! not become durable before them. Writes past the allocation end touch nothing a reader can
//! reach and may go first in any order.

use super::header::{FileHeader, HEADER_LEN, OPT_METADATA, OPT_OFFSETS, OPT_SCATTERED, OPT_VARLEN};
use super::metadata::{self, MetadataHeader, MetadataParams};
use super::reader::Layout;
use super::seal::{self, OffsetsHasher};
use super::Checksum;
use crate::blosc;
use crate::error::{Error, Result};
use crate::storage::StorageFile;
use std::path::{Path, PathBuf};

/// One positioned write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    /// File position.
    pub offset: u64,
    /// Bytes to write there.
    pub data: Vec<u8>,
}

/// How a new superchunk file is laid out.
#[derive(Debug, Clone)]
pub struct WriterOptions {
    /// Digest stored after each chunk.
    pub checksum: Checksum,
    /// Element size recorded in the header.
    pub typesize: u8,
    /// Whether the file has an offsets table (needed to append, replace or read at random
    /// without scanning).
    pub offsets: bool,
    /// Offsets slots reserved for chunks appended later.
    pub max_app_chunks: u64,
    /// Bytes reserved after each chunk's digest so a modified chunk that grows a little can
    /// be rewritten in place. Non-zero slack makes the file scattered (option bit 3).
    pub slack: u32,
    /// Mark the file scattered from the start even without slack.
    pub scattered: bool,
    /// Mark the chunks as holding variable-length items (option bit 2, see
    /// `spec/varlen.md`); their uncompressed sizes then differ from chunk to chunk.
    pub varlen: bool,
    /// Optional metadata document and how to store it.
    pub metadata: Option<(serde_json::Value, MetadataParams)>,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            checksum: Checksum::Adler32,
            typesize: 8,
            offsets: true,
            max_app_chunks: 0,
            slack: 0,
            scattered: false,
            varlen: false,
            metadata: None,
        }
    }
}

/// Where a replaced chunk went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Rewritten over its old bytes (it fit in its slot).
    InPlace,
    /// Written at the end of the file; the old bytes are now dead space.
    Relocated,
}

/// The in-memory layout of a superchunk file being written.
#[derive(Debug, Clone)]
pub struct SuperchunkWriter {
    path: PathBuf,
    header: FileHeader,
    offsets_pos: u64,
    data_start: u64,
    /// Live chunks: offset and stored length (Blosc chunk + digest) of each.
    chunks: Vec<(u64, u64)>,
    /// Uncompressed size of each live chunk.
    nbytes: Vec<u64>,
    alloc_end: u64,
    slack: u64,
    /// The metadata section, when its document carries an offsets digest this writer keeps
    /// current (`spec/blpk.md`, "Offsets digest"). Boxed: most files have none, and the
    /// digest state is larger than the rest of the writer.
    seal: Option<Box<Seal>>,
}

/// A metadata section whose document records the offsets digest.
#[derive(Debug, Clone)]
struct Seal {
    /// The section's header as last written: its room bounds the rewritten document.
    header: MetadataHeader,
    doc: serde_json::Value,
    /// The digest over the first `len()` slots; `None` once a slot among them changed.
    hasher: Option<OffsetsHasher>,
    /// The table (or the chunk count) changed since the section was last planned.
    dirty: bool,
}

impl SuperchunkWriter {
    /// Lays out a new file with no chunks; returns the writer and the writes that create the
    /// header, metadata section and an offsets table of `max_app_chunks` empty slots.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for inconsistent options.
    pub fn create(path: &Path, opts: &WriterOptions) -> Result<(SuperchunkWriter, Vec<Write>)> {
        let scattered = opts.scattered || opts.slack > 0;
        if !opts.offsets && (scattered || opts.max_app_chunks > 0) {
            return Err(Error::InvalidArgument(
                "slack, scattered chunks and appends need an offsets table".into(),
            ));
        }
        let mut options = 0u8;
        if opts.offsets {
            options |= OPT_OFFSETS;
        }
        if scattered {
            options |= OPT_SCATTERED;
        }
        if opts.varlen {
            options |= OPT_VARLEN;
        }
        // A document that carries the offsets digest starts with the empty table's.
        let mut seal = None;
        let meta_section = match &opts.metadata {
            Some((doc, p)) => {
                options |= OPT_METADATA;
                let mut doc = doc.clone();
                let sealed = opts.offsets && seal::set_digest(&mut doc, seal::offsets_digest(&[]));
                let section = metadata::encode_section(&doc, p)?;
                if sealed {
                    seal = Some(Box::new(Seal {
                        header: MetadataHeader::decode(&section, path)?,
                        doc,
                        hasher: Some(OffsetsHasher::default()),
                        dirty: false,
                    }));
                }
                section
            }
            None => Vec::new(),
        };
        let header = FileHeader {
            options,
            checksum: opts.checksum,
            typesize: opts.typesize,
            chunk_size: 0,
            last_chunk: 0,
            nchunks: 0,
            max_app_chunks: i64::try_from(opts.max_app_chunks)
                .map_err(|_| Error::InvalidArgument("max_app_chunks too large".into()))?,
        };
        let offsets_pos = (HEADER_LEN + meta_section.len()) as u64;
        let table_len = if opts.offsets {
            opts.max_app_chunks * 8
        } else {
            0
        };
        let mut front = Vec::with_capacity(offsets_pos as usize + table_len as usize);
        front.extend_from_slice(&header.encode());
        front.extend_from_slice(&meta_section);
        front.resize((offsets_pos + table_len) as usize, 0xff);
        let data_start = offsets_pos + table_len;
        let w = SuperchunkWriter {
            path: path.to_path_buf(),
            header,
            offsets_pos: if opts.offsets { offsets_pos } else { 0 },
            data_start,
            chunks: Vec::new(),
            nbytes: Vec::new(),
            alloc_end: data_start,
            slack: u64::from(opts.slack),
            seal,
        };
        Ok((
            w,
            vec![Write {
                offset: 0,
                data: front,
            }],
        ))
    }

    /// Takes up an existing file for writing. `slack` is the space to reserve after chunks
    /// written from now on (0 keeps a plain file plain).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the file has no offsets table; [`Error::InvalidChunk`]
    /// when a chunk's header claims more bytes than lie before the next chunk;
    /// [`Error::ChecksumMismatch`] when the offsets table does not match its digest (writing
    /// would record a digest of the damaged table); otherwise as [`Layout::read`].
    pub fn open(file: &dyn StorageFile, slack: u32) -> Result<SuperchunkWriter> {
        let layout = Layout::read(file)?;
        Self::from_layout(file, layout, slack)
    }

    /// As [`SuperchunkWriter::open`], from an already-read layout.
    ///
    /// # Errors
    /// As [`SuperchunkWriter::open`].
    fn from_layout(file: &dyn StorageFile, layout: Layout, slack: u32) -> Result<SuperchunkWriter> {
        let path = file.path().to_path_buf();
        if !layout.header.has(OPT_OFFSETS) {
            return Err(Error::InvalidArgument(format!(
                "{}: a file without an offsets table cannot be appended to or modified",
                path.display()
            )));
        }
        if let Some(e) = layout.misplaced(&path, 0) {
            return Err(e);
        }
        let seal = layout.metadata.as_ref().and_then(|(header, doc)| {
            seal::stored_digest(doc).map(|_| {
                Box::new(Seal {
                    header: *header,
                    doc: doc.clone(),
                    hasher: None,
                    dirty: false,
                })
            })
        });
        let dlen = layout.header.checksum.len() as u64;
        let extents = layout.extents();
        let mut chunks = Vec::with_capacity(layout.offsets.len());
        let mut nbytes = Vec::with_capacity(layout.offsets.len());
        for (k, (&off, &extent)) in layout.offsets.iter().zip(&extents).enumerate() {
            // The header as the storage's block index holds it (an object store: no
            // request), else read.
            let b = match file.chunk_blocks(off) {
                Ok(Some(cb)) => *cb.header(),
                _ => {
                    let mut b = [0u8; blosc::HEADER_LEN];
                    file.read_at(off, &mut b)?;
                    b
                }
            };
            let ch =
                blosc::ChunkHeader::parse(&b).map_err(|e| Error::chunk(&path, k as u64, e.0))?;
            let stored = u64::from(ch.cbytes) + dlen;
            // Where the space after each chunk is computed from, a chunk overrunning the next
            // one (or the file's end) would make the writer overwrite live bytes.
            if ch.cbytes < blosc::HEADER_LEN as u32 || stored > extent {
                return Err(Error::chunk(
                    &path,
                    k as u64,
                    format!(
                        "chunk claims {} bytes (with its digest) at offset {off}, but only {extent} lie before the next chunk or the end of the file",
                        stored
                    ),
                ));
            }
            chunks.push((off, stored));
            nbytes.push(u64::from(ch.nbytes));
        }
        let slack = u64::from(slack);
        let alloc_end = chunks
            .iter()
            .map(|&(o, l)| {
                o + l
                    + if layout.header.has(OPT_SCATTERED) {
                        slack
                    } else {
                        0
                    }
            })
            .max()
            .unwrap_or(layout.data_start)
            .max(layout.data_start);
        Ok(SuperchunkWriter {
            path,
            header: layout.header,
            offsets_pos: layout.offsets_pos,
            data_start: layout.data_start,
            chunks,
            nbytes,
            alloc_end,
            slack,
            seal,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The header as it stands after the planned operations.
    pub fn header(&self) -> &FileHeader {
        &self.header
    }

    /// Number of chunks.
    pub fn nchunks(&self) -> u64 {
        self.chunks.len() as u64
    }

    /// File position after the last allocated byte: new chunks go here, and every byte the
    /// committed layout uses lies before it.
    pub fn alloc_end(&self) -> u64 {
        self.alloc_end
    }

    /// File position and stored length (chunk + digest) of chunk `k`.
    fn chunk_extent(&self, k: u64) -> Option<(u64, u64)> {
        self.chunks.get(usize::try_from(k).ok()?).copied()
    }

    /// Sum of the uncompressed sizes of all chunks.
    pub fn uncompressed_bytes(&self) -> u64 {
        self.nbytes.iter().sum()
    }

    /// Sum of the stored lengths of all chunks (compressed bytes plus digests).
    pub fn stored_bytes(&self) -> u64 {
        self.chunks.iter().map(|&(_, l)| l).sum()
    }

    fn header_write(&self) -> Write {
        Write {
            offset: 0,
            data: self.header.encode().to_vec(),
        }
    }

    fn slot_write(&self, k: u64, value: i64) -> Write {
        Write {
            offset: self.offsets_pos + 8 * k,
            data: value.to_le_bytes().to_vec(),
        }
    }

    fn framed(&self, chunk: Vec<u8>, with_slack: bool) -> Vec<u8> {
        let digest = self.header.checksum.digest(&chunk);
        let mut data = chunk;
        data.extend_from_slice(digest.as_slice());
        if with_slack {
            data.resize(data.len() + self.slack as usize, 0);
        }
        data
    }

    fn check_chunk(&self, chunk: &[u8]) -> Result<blosc::ChunkHeader> {
        blosc::validate(chunk).map_err(|e| {
            Error::chunk(
                &self.path,
                self.nchunks(),
                format!("refusing to write: {}", e.0),
            )
        })
    }

    /// Notes a change of the offsets table or the chunk count; `rehash` when a slot already
    /// hashed changed or was dropped.
    fn table_changed(&mut self, rehash: bool) {
        if let Some(s) = &mut self.seal {
            s.dirty = true;
            if rehash {
                s.hasher = None;
            }
        }
    }

    /// The metadata document of a file that records an offsets digest (the one this writer
    /// rewrites with each seal); `None` for other files.
    pub fn document(&self) -> Option<&serde_json::Value> {
        self.seal.as_ref().map(|s| &s.doc)
    }

    /// Changes the metadata document of a file that records an offsets digest; the next
    /// [`plan_seal`](Self::plan_seal) writes it (with the digest), so the change reaches the
    /// file in the same write as the table's. `None` (and `edit` not called) for other files.
    /// The document must keep fitting its room: `plan_seal` fails otherwise.
    pub fn update_document<T>(
        &mut self,
        edit: impl FnOnce(&mut serde_json::Value) -> T,
    ) -> Option<T> {
        let s = self.seal.as_mut()?;
        s.dirty = true;
        Some(edit(&mut s.doc))
    }

    /// Plans writing the offsets digest of the table as it stands: one write at position 0
    /// of the file header followed by the whole metadata section (header, document with the
    /// new digest, reserved zeros and the section's digest), the same length as before.
    /// `None` when the file carries no digest or the table has not changed since the last
    /// call (or since the writer was created or opened).
    ///
    /// The digest covers what the plans of [`plan_append`](Self::plan_append),
    /// [`plan_replace`](Self::plan_replace) and [`plan_truncate`](Self::plan_truncate) made
    /// the table; the write must reach the file after theirs (a dataset journals it with them;
    /// [`SuperchunkFile`] folds it into each operation).
    ///
    /// # Errors
    /// [`Error::InvalidMetadata`] when the document no longer fits its room (only a document
    /// whose other keys changed could).
    pub fn plan_seal(&mut self) -> Result<Option<Write>> {
        let Some(s) = self.seal.as_mut().filter(|s| s.dirty) else {
            return Ok(None);
        };
        let mut h = s.hasher.take().unwrap_or_default();
        let from = usize::try_from(h.len()).unwrap_or(usize::MAX);
        for &(o, _) in self.chunks.get(from..).unwrap_or_default() {
            h.push(o);
        }
        seal::set_digest(&mut s.doc, h.digest());
        s.hasher = Some(h);
        let (mh, section) = metadata::reencode_section(&s.doc, &s.header, &self.path)?;
        s.header = mh;
        s.dirty = false;
        let mut data = self.header.encode().to_vec();
        data.extend_from_slice(&section);
        Ok(Some(Write { offset: 0, data }))
    }

    /// Plans appending a compressed chunk. Returns `Ok(None)` when no offsets slot is free
    /// (the caller starts a new file); otherwise the writes, in crash-safe order: chunk and
    /// digest (into free space past [`alloc_end`](Self::alloc_end)), then its offsets slot,
    /// then the header.
    ///
    /// # Errors
    /// [`Error::InvalidChunk`] when `chunk` is not a valid Blosc chunk.
    pub fn plan_append(&mut self, chunk: Vec<u8>) -> Result<Option<Vec<Write>>> {
        if self.header.max_app_chunks <= 0 {
            return Ok(None);
        }
        let ch = self.check_chunk(&chunk)?;
        let k = self.nchunks();
        let scattered = self.header.has(OPT_SCATTERED);
        let data = self.framed(chunk, scattered);
        let stored = data.len() as u64 - if scattered { self.slack } else { 0 };
        let offset = self.alloc_end;
        let nbytes = ch.nbytes as i32;
        // Keep chunk_size meaning "size of every chunk but the last": if the previous last
        // chunk differs from it, the sizes are no longer uniform.
        if k == 0 {
            self.header.chunk_size = nbytes;
        } else if self.header.last_chunk != self.header.chunk_size {
            self.header.chunk_size = -1;
        }
        if k > 0 && self.header.chunk_size >= 0 && nbytes > self.header.chunk_size {
            self.header.chunk_size = -1;
        }
        self.header.last_chunk = nbytes;
        self.header.nchunks += 1;
        self.header.max_app_chunks -= 1;
        self.chunks.push((offset, stored));
        self.nbytes.push(u64::from(ch.nbytes));
        self.alloc_end = offset + data.len() as u64;
        self.table_changed(false);
        Ok(Some(vec![
            Write { offset, data },
            self.slot_write(k, offset as i64),
            self.header_write(),
        ]))
    }

    /// Plans replacing chunk `k` with `chunk`. It is rewritten in place when it fits: in a
    /// plain file only a chunk of the same stored length does (anything else would leave a gap
    /// or overrun the next chunk, which a sequential reader cannot follow); in a scattered
    /// file, any chunk that fits in its slot (its old bytes plus any slack or dead space up to
    /// the next chunk in file order, or the allocation end). Otherwise it goes to the
    /// allocation end, its offsets slot is repointed, and the file is marked scattered
    /// (option bit 3).
    ///
    /// The header stays truthful about chunk sizes: a chunk whose uncompressed size breaks
    /// the rule "every chunk but the last holds `chunk_size` bytes, the last `last_chunk` <=
    /// `chunk_size`" turns `chunk_size` to -1 (unknown), as appends do. A header change is only
    /// ever a relaxation that holds for the old chunk as well as the new one, so it is written
    /// before the writes that make the new chunk visible.
    ///
    /// # Errors
    /// [`Error::ChunkOutOfRange`], or [`Error::InvalidChunk`] for a malformed chunk.
    pub fn plan_replace(&mut self, k: u64, chunk: Vec<u8>) -> Result<(Placement, Vec<Write>)> {
        let ch = self.check_chunk(&chunk)?;
        let (old_off, old_len) = self.chunk_extent(k).ok_or_else(|| Error::ChunkOutOfRange {
            path: self.path.clone(),
            chunk: k,
            nchunks: self.nchunks(),
        })?;
        let old_header = self.header;
        let scattered_before = self.header.has(OPT_SCATTERED);
        let new_len = (chunk.len() + self.header.checksum.len()) as u64;
        // The slot runs to the next chunk in file order, or to the allocation end.
        let slot_end = self
            .chunks
            .iter()
            .map(|&(o, _)| o)
            .filter(|&o| o > old_off)
            .min()
            .unwrap_or(self.alloc_end);
        let capacity = slot_end - old_off;
        let nbytes = ch.nbytes as i32;
        let last = k + 1 == self.nchunks();
        if last {
            if self.nchunks() == 1 {
                // With one chunk, chunk_size constrains nothing but last_chunk <= chunk_size;
                // growing it (never shrinking) keeps that true of the old chunk too.
                if self.header.chunk_size >= 0 {
                    self.header.chunk_size = self.header.chunk_size.max(nbytes);
                }
            } else if nbytes > self.header.chunk_size {
                self.header.chunk_size = -1;
            }
            self.header.last_chunk = nbytes;
        } else if nbytes != self.header.chunk_size {
            self.header.chunk_size = -1;
        }
        let in_place = new_len == old_len || (scattered_before && new_len <= capacity);
        if !in_place {
            self.header.options |= OPT_SCATTERED;
        }
        let mut writes = Vec::new();
        let placement = if in_place {
            if self.header != old_header {
                writes.push(self.header_write());
            }
            let data = self.framed(chunk, false);
            writes.push(Write {
                offset: old_off,
                data,
            });
            self.chunks[k as usize] = (old_off, new_len);
            self.nbytes[k as usize] = u64::from(ch.nbytes);
            Placement::InPlace
        } else {
            let data = self.framed(chunk, true);
            let offset = self.alloc_end;
            self.alloc_end += data.len() as u64;
            writes.push(Write { offset, data });
            if self.header != old_header {
                writes.push(self.header_write());
            }
            writes.push(self.slot_write(k, offset as i64));
            self.chunks[k as usize] = (offset, new_len);
            self.nbytes[k as usize] = u64::from(ch.nbytes);
            self.table_changed(true);
            Placement::Relocated
        };
        Ok((placement, writes))
    }

    /// Plans dropping every chunk from `n` on. Their slots become free again; the space they
    /// used is reclaimed when it lies at the end of the file (the caller may then truncate the
    /// file to [`alloc_end`](Self::alloc_end)).
    ///
    /// The header (with the new chunk count) is written first: once it is down, the dropped
    /// slots lie past `nchunks` and no reader looks at them, so clearing them to -1 afterwards
    /// is safe to interrupt.
    pub fn plan_truncate(&mut self, n: u64) -> Vec<Write> {
        let old = self.nchunks();
        if n >= old {
            return Vec::new();
        }
        self.chunks.truncate(n as usize);
        self.nbytes.truncate(n as usize);
        self.table_changed(true);
        self.header.nchunks = n as i64;
        self.header.max_app_chunks += (old - n) as i64;
        self.header.last_chunk = if n == 0 { 0 } else { self.header.chunk_size };
        let scattered = self.header.has(OPT_SCATTERED);
        self.alloc_end = self
            .chunks
            .iter()
            .map(|&(o, l)| o + l + if scattered { self.slack } else { 0 })
            .max()
            .unwrap_or(self.data_start)
            .max(self.data_start);
        // The dropped slots are contiguous: one write clears them all.
        let cleared = Write {
            offset: self.offsets_pos + 8 * n,
            data: vec![0xff; 8 * (old - n) as usize],
        };
        vec![self.header_write(), cleared]
    }
}

/// A superchunk file written directly (no journal): appends are crash-safe (a crash leaves
/// the file readable up to its last completed append); in-place replacements are not atomic
/// (a crash can tear the chunk, which its digest then reports).
pub struct SuperchunkFile {
    file: Box<dyn StorageFile>,
    writer: SuperchunkWriter,
    durable: bool,
}

impl SuperchunkFile {
    /// Creates a new file (the storage file must be empty or freshly created).
    ///
    /// # Errors
    /// As [`SuperchunkWriter::create`], and I/O errors.
    pub fn create(file: Box<dyn StorageFile>, opts: &WriterOptions) -> Result<SuperchunkFile> {
        let (writer, writes) = SuperchunkWriter::create(file.path(), opts)?;
        let mut f = SuperchunkFile {
            file,
            writer,
            durable: true,
        };
        f.file.set_len(0)?;
        f.apply(writes, 0)?;
        Ok(f)
    }

    /// Opens an existing file for appending and modifying.
    ///
    /// # Errors
    /// As [`SuperchunkWriter::open`].
    pub fn open(file: Box<dyn StorageFile>, slack: u32) -> Result<SuperchunkFile> {
        let writer = SuperchunkWriter::open(file.as_ref(), slack)?;
        Ok(SuperchunkFile {
            file,
            writer,
            durable: true,
        })
    }

    /// With `durable` (the default), every operation syncs its new bytes before the writes
    /// that expose them, and syncs again at its end, so it survives power loss; without it the
    /// same order is kept (it survives the process being killed) and [`sync`](Self::sync) is
    /// left to the caller, which is much faster for bulk writing.
    pub fn set_durable(&mut self, durable: bool) {
        self.durable = durable;
    }

    /// The layout being written.
    pub fn writer(&self) -> &SuperchunkWriter {
        &self.writer
    }

    /// Applies planned writes. Writes at or past `free_from` (the allocation end before the
    /// operation) land where no reader looks and go first. Every other write changes what a
    /// reader sees, so it is issued only after everything before it; in durable mode that
    /// means after a sync, so the disk cannot reorder it ahead of the bytes it exposes (a
    /// file with stale bytes past its last chunk can have a new chunk written below its
    /// length, and a slot must never become durable before the chunk it points at, nor a
    /// header before the slot it counts).
    fn apply(&mut self, writes: Vec<Write>, free_from: u64) -> Result<()> {
        let durable = self.durable;
        let (fresh, visible): (Vec<_>, Vec<_>) =
            writes.into_iter().partition(|w| w.offset >= free_from);
        let mut unsynced = false;
        for w in fresh.iter().chain(&visible) {
            if durable && unsynced && w.offset < free_from {
                self.file.sync()?;
            }
            self.file.write_at(w.offset, &w.data)?;
            unsynced = true;
        }
        if durable && unsynced {
            self.file.sync()?;
        }
        Ok(())
    }

    /// Appends a compressed chunk. Returns `false` (writing nothing) when no offsets slot is
    /// left.
    ///
    /// # Errors
    /// [`Error::InvalidChunk`] for a malformed chunk, and I/O errors.
    pub fn append_chunk(&mut self, chunk: Vec<u8>) -> Result<bool> {
        let free_from = self.writer.alloc_end();
        match self.writer.plan_append(chunk)? {
            Some(mut w) => {
                // The header, written last, and the new digest go down in one write.
                if let Some(front) = self.writer.plan_seal()? {
                    w.pop();
                    w.push(front);
                }
                self.apply(w, free_from)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Replaces chunk `k`.
    ///
    /// # Errors
    /// As [`SuperchunkWriter::plan_replace`], and I/O errors.
    pub fn replace_chunk(&mut self, k: u64, chunk: Vec<u8>) -> Result<Placement> {
        let free_from = self.writer.alloc_end();
        let (p, mut w) = self.writer.plan_replace(k, chunk)?;
        // A relocated chunk's new slot changes the digest, written after it.
        if let Some(front) = self.writer.plan_seal()? {
            w.push(front);
        }
        self.apply(w, free_from)?;
        Ok(p)
    }

    /// Drops every chunk from `n` on and truncates the file.
    ///
    /// # Errors
    /// I/O errors.
    pub fn truncate(&mut self, n: u64) -> Result<()> {
        let free_from = self.writer.alloc_end();
        let mut w = self.writer.plan_truncate(n);
        // The new count and its digest go down in one write, before the slots are cleared.
        if let (Some(front), Some(first)) = (self.writer.plan_seal()?, w.first_mut()) {
            *first = front;
        }
        self.apply(w, free_from)?;
        self.file.set_len(self.writer.alloc_end())
    }

    /// Makes everything written durable.
    ///
    /// # Errors
    /// I/O errors.
    pub fn sync(&self) -> Result<()> {
        self.file.sync()
    }
}
