//! Reading superchunk files: random access to chunk `k` through the offsets table, with its
//! digest verified on every read.

use super::checksum::hex;
use super::header::{FileHeader, HEADER_LEN, OPT_METADATA, OPT_OFFSETS};
use super::metadata::{self, MetadataHeader, META_HEADER_LEN};
use super::seal::OFFSETS_ALGORITHM;
use crate::blosc::{self, ChunkHeader};
use crate::error::{Error, Result};
use crate::storage::StorageFile;
use std::path::{Path, PathBuf};

/// The parsed front matter of a superchunk file: header, metadata and where each chunk lives.
#[derive(Debug, Clone)]
pub struct Layout {
    /// The file header.
    pub header: FileHeader,
    /// The metadata section's header and document, if the file has one.
    pub metadata: Option<(MetadataHeader, serde_json::Value)>,
    /// File position of the offsets table (0 when the file has none).
    pub offsets_pos: u64,
    /// File position just after the offsets table: where chunk data may begin.
    pub data_start: u64,
    /// File position of each chunk's Blosc header, in chunk order.
    pub offsets: Vec<u64>,
    /// Length of the file when it was opened.
    pub file_len: u64,
    /// When the metadata document records an offsets digest (`{"blz": {"offsets": ..}}`,
    /// see [`offsets_digest`](super::offsets_digest)) that the offsets table does not match:
    /// the stored value and the digest computed from the table. Every chunk read then fails,
    /// since no chunk can be trusted to be the one its slot names.
    pub offsets_mismatch: Option<(String, String)>,
}

impl Layout {
    /// Reads and checks the header, metadata section and offsets of a file.
    ///
    /// Every size read from the file is checked against the file's length before it sizes an
    /// allocation, so a corrupt header cannot ask for terabytes.
    ///
    /// # Errors
    /// [`Error::InvalidHeader`], [`Error::InvalidMetadata`] or [`Error::ChecksumMismatch`]
    /// naming the file, or an I/O error.
    pub fn read(file: &dyn StorageFile) -> Result<Layout> {
        let path = file.path().to_path_buf();
        let file_len = file.len()?;
        let mut hbuf = [0u8; HEADER_LEN];
        let n = file_len.min(HEADER_LEN as u64) as usize;
        file.read_at(0, &mut hbuf[..n])?;
        let header = FileHeader::decode(&hbuf[..n], &path)?;
        let mut pos = HEADER_LEN as u64;
        let metadata = if header.has(OPT_METADATA) {
            let (mh, doc) = read_metadata(file, &path, pos, file_len)?;
            pos += mh.section_len();
            Some((mh, doc))
        } else {
            None
        };
        let nchunks = header.nchunks as u64;
        let digest_len = header.checksum.len() as u64;
        // Every chunk takes at least a Blosc header and a digest.
        if nchunks > file_len.saturating_sub(pos) / (blosc::HEADER_LEN as u64 + digest_len) {
            return Err(Error::header(
                &path,
                format!("{nchunks} chunks cannot fit in a {file_len}-byte file"),
            ));
        }
        let chunks = Chunks {
            path: &path,
            pos,
            nchunks,
            digest_len,
            file_len,
        };
        let (offsets_pos, data_start, offsets) = if header.has(OPT_OFFSETS) {
            let (data_start, offsets) = chunks.read_offsets(file, header.offset_slots())?;
            (pos, data_start, offsets)
        } else {
            (0, pos, chunks.walk_headers(file)?)
        };
        // Only a file with an offsets table keeps the digest current (`spec/blpk.md`).
        let offsets_mismatch = match &metadata {
            Some((_, doc)) if header.has(OPT_OFFSETS) => {
                super::seal::stored_digest(doc).and_then(|stored| {
                    let got = super::offsets_digest(&offsets);
                    match stored.as_str() {
                        Some(s) if s == got => None,
                        Some(s) => Some((s.to_string(), got)),
                        None => Some((stored.to_string(), got)),
                    }
                })
            }
            _ => None,
        };
        Ok(Layout {
            header,
            metadata,
            offsets_pos,
            data_start,
            offsets,
            file_len,
            offsets_mismatch,
        })
    }

    /// The error a read of chunk `k` of the file at `path` meets when the offsets table does
    /// not match its digest.
    pub(crate) fn misplaced(&self, path: &Path, k: u64) -> Option<Error> {
        self.offsets_mismatch
            .as_ref()
            .map(|(stored, got)| Error::ChecksumMismatch {
                path: path.to_path_buf(),
                chunk: k,
                algorithm: OFFSETS_ALGORITHM,
                expected: stored.clone(),
                got: got.clone(),
            })
    }

    /// For each chunk, the bytes from its start to the next chunk in file order (or the end
    /// of the file): an upper bound on what reading it needs.
    pub fn extents(&self) -> Vec<u64> {
        let mut order: Vec<usize> = (0..self.offsets.len()).collect();
        order.sort_by_key(|&k| self.offsets[k]);
        let mut ext = vec![0u64; self.offsets.len()];
        let mut next = self.file_len;
        for &k in order.iter().rev() {
            let off = self.offsets[k];
            ext[k] = next.saturating_sub(off);
            if off < next {
                next = off;
            }
        }
        ext
    }
}

/// Reads the metadata section that starts at `pos`: its header and its document.
fn read_metadata(
    file: &dyn StorageFile,
    path: &Path,
    pos: u64,
    file_len: u64,
) -> Result<(MetadataHeader, serde_json::Value)> {
    let mut mb = [0u8; META_HEADER_LEN];
    if pos + META_HEADER_LEN as u64 > file_len {
        return Err(Error::metadata(
            path,
            "file ends inside the metadata header",
        ));
    }
    file.read_at(pos, &mut mb)?;
    let mh = MetadataHeader::decode(&mb, path)?;
    let body_len = mh.section_len() - META_HEADER_LEN as u64;
    if pos + mh.section_len() > file_len {
        return Err(Error::metadata(
            path,
            format!(
                "metadata section of {} bytes runs past the end of the {file_len}-byte file",
                mh.section_len()
            ),
        ));
    }
    let mut body = vec![0u8; body_len as usize];
    file.read_at(pos + META_HEADER_LEN as u64, &mut body)?;
    let doc = metadata::decode_body(&mh, &body, path)?;
    Ok((mh, doc))
}

/// Where a file's chunks are: what finding them needs from the header.
struct Chunks<'p> {
    path: &'p Path,
    /// File position after the header and metadata section.
    pos: u64,
    nchunks: u64,
    digest_len: u64,
    file_len: u64,
}

impl Chunks<'_> {
    /// Reads the offsets table of `slots` slots at `pos`, checking that every chunk starts
    /// inside the chunk area; returns where that area begins and the offsets.
    fn read_offsets(&self, file: &dyn StorageFile, slots: u64) -> Result<(u64, Vec<u64>)> {
        let (path, pos, file_len) = (self.path, self.pos, self.file_len);
        let table_len = slots
            .checked_mul(8)
            .filter(|&l| l <= file_len.saturating_sub(pos))
            .ok_or_else(|| {
                Error::header(
                    path,
                    format!(
                        "offsets table of {slots} slots runs past the end of the {file_len}-byte file"
                    ),
                )
            })?;
        let data_start = pos + table_len;
        let mut raw = vec![0u8; (self.nchunks * 8) as usize];
        file.read_at(pos, &mut raw)?;
        let mut offsets = Vec::with_capacity(self.nchunks as usize);
        for (k, c) in raw.chunks_exact(8).enumerate() {
            let mut a = [0u8; 8];
            a.copy_from_slice(c);
            let off = i64::from_le_bytes(a);
            if off < data_start as i64
                || (off as u64).saturating_add(blosc::HEADER_LEN as u64 + self.digest_len)
                    > file_len
            {
                return Err(Error::header(
                    path,
                    format!(
                        "offset of chunk {k} ({off}) lies outside the chunk area {data_start}..{file_len}"
                    ),
                ));
            }
            offsets.push(off as u64);
        }
        Ok((data_start, offsets))
    }

    /// With no offsets table, chunks follow each other from `pos`: walks their headers.
    fn walk_headers(&self, file: &dyn StorageFile) -> Result<Vec<u64>> {
        let mut offsets = Vec::with_capacity(self.nchunks as usize);
        let mut at = self.pos;
        for k in 0..self.nchunks {
            if at + blosc::HEADER_LEN as u64 > self.file_len {
                return Err(Error::chunk(self.path, k, "file ends before this chunk"));
            }
            let mut b = [0u8; blosc::HEADER_LEN];
            file.read_at(at, &mut b)?;
            let ch = ChunkHeader::parse(&b).map_err(|e| Error::chunk(self.path, k, e.0))?;
            offsets.push(at);
            at += u64::from(ch.cbytes) + self.digest_len;
        }
        Ok(offsets)
    }
}

/// Read access to one superchunk file. Shareable across threads (`&self` reads).
pub struct SuperchunkReader {
    file: Box<dyn StorageFile>,
    path: PathBuf,
    layout: Layout,
    extents: Vec<u64>,
    /// The stored digest of each chunk (by file offset) whose whole compressed bytes this
    /// reader has checked against it: a later short read of such a chunk, whose stored
    /// digest is still the same, reads only the Blosc blocks it needs.
    verified: std::sync::Mutex<std::collections::HashMap<u64, Vec<u8>>>,
}

impl std::fmt::Debug for SuperchunkReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SuperchunkReader")
            .field("path", &self.path)
            .field("header", &self.layout.header)
            .finish()
    }
}

/// Where a chunk lives and how large it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkInfo {
    /// File position of the chunk's Blosc header.
    pub offset: u64,
    /// The chunk's Blosc header.
    pub header: ChunkHeader,
}

impl SuperchunkReader {
    /// Opens a superchunk file for reading.
    ///
    /// # Errors
    /// As [`Layout::read`].
    pub fn open(file: Box<dyn StorageFile>) -> Result<SuperchunkReader> {
        let layout = Layout::read(file.as_ref())?;
        let extents = layout.extents();
        Ok(SuperchunkReader {
            path: file.path().to_path_buf(),
            file,
            layout,
            extents,
            verified: std::sync::Mutex::default(),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file header.
    pub fn header(&self) -> &FileHeader {
        &self.layout.header
    }

    /// The parsed layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The metadata document, if the file has one.
    pub fn metadata(&self) -> Option<&serde_json::Value> {
        self.layout.metadata.as_ref().map(|(_, d)| d)
    }

    /// Number of chunks.
    pub fn nchunks(&self) -> u64 {
        self.layout.offsets.len() as u64
    }

    /// Where chunk `k` starts and its extent; every read of a chunk goes through here, so a
    /// table that does not match its digest fails every read, naming the chunk.
    fn offset(&self, k: u64) -> Result<(u64, u64)> {
        let i = usize::try_from(k).unwrap_or(usize::MAX);
        match (self.layout.offsets.get(i), self.extents.get(i)) {
            (Some(&o), Some(&e)) => match self.layout.misplaced(&self.path, k) {
                Some(err) => Err(err),
                None => Ok((o, e)),
            },
            _ => Err(Error::ChunkOutOfRange {
                path: self.path.clone(),
                chunk: k,
                nchunks: self.nchunks(),
            }),
        }
    }

    /// The most uncompressed bytes a chunk of this file may hold, when its header says:
    /// `max(chunk_size, last_chunk)` (both known), so that a corrupt chunk header cannot make
    /// a reader allocate more than the file header allows.
    fn max_nbytes(&self) -> Option<u32> {
        let h = &self.layout.header;
        (h.chunk_size >= 0).then(|| h.chunk_size.max(h.last_chunk) as u32)
    }

    /// Reads chunk `k`'s Blosc header only.
    ///
    /// # Errors
    /// [`Error::ChunkOutOfRange`], [`Error::InvalidChunk`] or an I/O error.
    pub fn chunk_info(&self, k: u64) -> Result<ChunkInfo> {
        let (offset, _) = self.offset(k)?;
        let mut b = [0u8; blosc::HEADER_LEN];
        self.file.read_at(offset, &mut b)?;
        let header = ChunkHeader::parse(&b).map_err(|e| Error::chunk(&self.path, k, e.0))?;
        Ok(ChunkInfo { offset, header })
    }

    /// Reads chunk `k`'s compressed bytes into `buf` (replacing its contents), after checking
    /// its digest and its Blosc header, and that it holds no more uncompressed bytes than the
    /// file header's `chunk_size` and `last_chunk` allow (when `chunk_size` is known). Only
    /// chunk `k`'s bytes are read.
    ///
    /// # Errors
    /// [`Error::ChecksumMismatch`] naming the file, chunk and both digests;
    /// [`Error::InvalidChunk`] for a malformed chunk; [`Error::ChunkOutOfRange`]; I/O errors.
    pub fn read_chunk_into(&self, k: u64, buf: &mut Vec<u8>) -> Result<()> {
        let (_, cbytes) = self.read_checked(k, buf)?;
        buf.truncate(cbytes);
        Ok(())
    }

    /// [`read_chunk_into`](Self::read_chunk_into) without the last step: `buf` keeps the
    /// stored digest after the chunk's bytes. Returns the chunk's offset and compressed size.
    fn read_checked(&self, k: u64, buf: &mut Vec<u8>) -> Result<(u64, usize)> {
        self.read_checked_from(k, None, buf)
    }

    /// How many bytes from its offset reading chunk `k` reads first: the whole chunk with
    /// its digest (and any slack up to the next chunk) where the file header bounds a
    /// chunk's size and the extent is within that bound, else its Blosc header alone.
    fn first_read_len(&self, extent: u64) -> usize {
        let dlen = self.layout.header.checksum.len();
        let hlen = blosc::HEADER_LEN;
        // The largest chunk this file's chunk size allows, with its digest.
        let max_chunk = (self
            .layout
            .header
            .chunk_size
            .max(self.layout.header.last_chunk))
        .max(0) as u64
            + hlen as u64
            + dlen as u64;
        let read_len = if self.layout.header.chunk_size >= 0 && extent <= max_chunk + 4096 {
            extent as usize
        } else {
            hlen
        };
        read_len.max(hlen.min(extent as usize))
    }

    /// The bytes of the file that reading chunk `k` reads first ([`read_chunk_into`]
    /// reads them in one read, and nothing more for a well-formed chunk of a file whose
    /// header bounds a chunk's size): what a caller fetching many chunks at once fetches,
    /// then gives to [`read_chunk_from`](Self::read_chunk_from).
    ///
    /// # Errors
    /// [`Error::ChunkOutOfRange`], or the error of a damaged offsets table naming the chunk.
    ///
    /// [`read_chunk_into`]: Self::read_chunk_into
    pub fn chunk_read_range(&self, k: u64) -> Result<std::ops::Range<u64>> {
        let (offset, extent) = self.offset(k)?;
        Ok(offset..offset + self.first_read_len(extent) as u64)
    }

    /// The bytes of [`chunk_read_range`](Self::chunk_read_range) of each chunk of `ks`
    /// (repeats and chunks out of range left out), asked of the file in one
    /// [`StorageFile::read_ranges`]: on an object store, one request per run of chunks
    /// lying close together, the requests in flight at once. Nothing is checked here:
    /// [`read_chunk_from`](Self::read_chunk_from) checks each chunk as it is used.
    ///
    /// # Errors
    /// The read's error, naming the file.
    pub fn fetch_chunks(&self, ks: &[u64]) -> Result<Vec<(u64, bytes::Bytes)>> {
        let (found, ranges) = self.chunk_ranges(ks);
        let got = crate::storage::in_order(ranges.len(), |each| {
            self.file.read_ranges_each(&ranges, each)
        })?;
        Ok(found.into_iter().zip(got).collect())
    }

    /// Reads byte ranges of the file (a plan of [`chunk_read_range`](Self::chunk_read_range)s
    /// and [`block_read_range`](Self::block_read_range)s), each handed to `each` with its
    /// index as soon as it is in ([`StorageFile::read_ranges_each`]). Nothing is checked
    /// here.
    ///
    /// # Errors
    /// The read's error, naming the file; ranges handed over before it stay so.
    pub fn fetch_ranges_each(
        &self,
        ranges: &[std::ops::Range<u64>],
        each: &(dyn Fn(usize, bytes::Bytes) + Sync),
    ) -> Result<()> {
        self.file.read_ranges_each(ranges, each)
    }

    /// The chunks of `ks` in order, repeats and chunks out of range left out, with their
    /// [`chunk_read_range`](Self::chunk_read_range)s.
    fn chunk_ranges(&self, ks: &[u64]) -> (Vec<u64>, Vec<std::ops::Range<u64>>) {
        let mut ks: Vec<u64> = ks.to_vec();
        ks.sort_unstable();
        ks.dedup();
        ks.into_iter()
            .filter_map(|k| self.chunk_read_range(k).ok().map(|r| (k, r)))
            .unzip()
    }

    /// [`read_chunk_into`](Self::read_chunk_into) with the bytes of
    /// [`chunk_read_range`](Self::chunk_read_range) already read (`first`): checked the
    /// same way, and read from the file only where they do not hold the whole chunk.
    ///
    /// # Errors
    /// As [`read_chunk_into`](Self::read_chunk_into).
    pub fn read_chunk_from(&self, k: u64, first: &[u8], buf: &mut Vec<u8>) -> Result<()> {
        let (_, cbytes) = self.read_checked_from(k, Some(first), buf)?;
        buf.truncate(cbytes);
        Ok(())
    }

    /// [`decompress_chunk_into`](Self::decompress_chunk_into) from the bytes `first` of
    /// [`chunk_read_range`](Self::chunk_read_range), already read.
    ///
    /// # Errors
    /// As [`decompress_chunk_into`](Self::decompress_chunk_into).
    pub fn decompress_chunk_from(
        &self,
        k: u64,
        first: &[u8],
        dst: &mut [u8],
        scratch: &mut Vec<u8>,
    ) -> Result<()> {
        let data = self.chunk_from(k, first, scratch)?;
        blosc::decompress_into(data, dst, 1).map_err(|e| Error::chunk(&self.path, k, e.0))
    }

    /// [`getitem_into`](Self::getitem_into) from the bytes `first` of
    /// [`chunk_read_range`](Self::chunk_read_range), already read (the chunk is verified
    /// whole, then only the blocks holding the bytes are decoded).
    ///
    /// # Errors
    /// As [`getitem_into`](Self::getitem_into).
    pub fn getitem_from(
        &self,
        k: u64,
        first: &[u8],
        byte_start: usize,
        dst: &mut [u8],
        scratch: &mut Vec<u8>,
    ) -> Result<()> {
        let data = self.chunk_from(k, first, scratch)?;
        blosc::getitem(data, byte_start, dst).map_err(|e| Error::chunk(&self.path, k, e.0))
    }

    /// [`read_checked`](Self::read_checked), the first read's bytes taken from `first` when
    /// given (they must be those of [`chunk_read_range`](Self::chunk_read_range)).
    fn read_checked_from(
        &self,
        k: u64,
        first: Option<&[u8]>,
        buf: &mut Vec<u8>,
    ) -> Result<(u64, usize)> {
        let (offset, extent) = self.offset(k)?;
        let read_len = self.first_read_len(extent);
        match first {
            Some(b) if b.len() == read_len => {
                buf.clear();
                buf.extend_from_slice(b);
            }
            _ => {
                // The read overwrites every byte, so only growth needs initialising (a
                // buffer reused across chunks keeps its length and is not cleared again).
                buf.resize(read_len, 0);
                self.file.read_at(offset, buf)?;
            }
        }
        let (cbytes, need) = self.chunk_extent(k, offset, extent, buf)?;
        if need > buf.len() {
            let have = buf.len();
            buf.resize(need, 0);
            self.file.read_at(offset + have as u64, &mut buf[have..])?;
        }
        // What follows the digest (slack) is not the chunk's.
        buf.truncate(need);
        self.verify_held(k, buf, cbytes)?;
        Ok((offset, cbytes))
    }

    /// Chunk `k`'s compressed bytes, checked: inside `first` (the bytes of
    /// [`chunk_read_range`](Self::chunk_read_range), already read) when it holds them whole,
    /// else read into `scratch` ([`read_chunk_from`](Self::read_chunk_from)).
    fn chunk_from<'a>(
        &self,
        k: u64,
        first: &'a [u8],
        scratch: &'a mut Vec<u8>,
    ) -> Result<&'a [u8]> {
        match self.held_chunk(k, first)? {
            Some(held) => Ok(held),
            None => {
                self.read_chunk_from(k, first, scratch)?;
                Ok(scratch)
            }
        }
    }

    /// Chunk `k`'s compressed bytes inside `first` (the bytes of
    /// [`chunk_read_range`](Self::chunk_read_range), already read), checked as
    /// [`read_chunk_from`](Self::read_chunk_from) checks them, without copying them; `None`
    /// when `first` does not hold the whole chunk and its digest (then the caller reads it
    /// with [`read_chunk_from`](Self::read_chunk_from)).
    fn held_chunk<'a>(&self, k: u64, first: &'a [u8]) -> Result<Option<&'a [u8]>> {
        let (offset, extent) = self.offset(k)?;
        if first.len() != self.first_read_len(extent) {
            return Ok(None);
        }
        let (cbytes, need) = self.chunk_extent(k, offset, extent, first)?;
        if need > first.len() {
            return Ok(None);
        }
        self.verify_held(k, &first[..need], cbytes)?;
        Ok(Some(&first[..cbytes]))
    }

    /// From the Blosc header at the start of `head` (chunk `k`, at `offset`, with `extent`
    /// bytes before the next chunk): its compressed size, and the bytes it takes with its
    /// digest; an error when the header is damaged or claims more than the extent.
    fn chunk_extent(
        &self,
        k: u64,
        offset: u64,
        extent: u64,
        head: &[u8],
    ) -> Result<(usize, usize)> {
        let dlen = self.layout.header.checksum.len();
        let hlen = blosc::HEADER_LEN;
        let ch = ChunkHeader::parse(head).map_err(|e| Error::chunk(&self.path, k, e.0))?;
        if let Some(max) = self.max_nbytes() {
            if ch.nbytes > max {
                return Err(Error::chunk(
                    &self.path,
                    k,
                    format!(
                        "chunk holds {} bytes uncompressed, more than the file header allows ({max})",
                        ch.nbytes
                    ),
                ));
            }
        }
        let cbytes = ch.cbytes as usize;
        let need = cbytes
            .checked_add(dlen)
            .filter(|&n| n as u64 <= extent && cbytes >= hlen)
            .ok_or_else(|| {
                Error::chunk(
                    &self.path,
                    k,
                    format!(
                        "chunk claims {cbytes} bytes but only {} are available at offset {offset}",
                        extent.saturating_sub(dlen as u64)
                    ),
                )
            })?;
        Ok((cbytes, need))
    }

    /// Checks chunk `k` held in `held` (its `cbytes` compressed bytes, then its digest):
    /// the digest, then the Blosc framing.
    fn verify_held(&self, k: u64, held: &[u8], cbytes: usize) -> Result<()> {
        let checksum = self.layout.header.checksum;
        let (data, rest) = held.split_at(cbytes);
        let stored = &rest[..checksum.len()];
        let got = checksum.digest(data);
        if got.as_slice() != stored {
            return Err(Error::ChecksumMismatch {
                path: self.path.clone(),
                chunk: k,
                algorithm: checksum.name(),
                expected: hex(stored),
                got: hex(got.as_slice()),
            });
        }
        blosc::validate(data).map_err(|e| Error::chunk(&self.path, k, e.0))?;
        Ok(())
    }

    /// Reads and verifies chunk `k`, returning its compressed bytes.
    ///
    /// # Errors
    /// As [`SuperchunkReader::read_chunk_into`].
    pub fn read_chunk(&self, k: u64) -> Result<Vec<u8>> {
        let mut buf = Vec::new();
        self.read_chunk_into(k, &mut buf)?;
        Ok(buf)
    }

    /// Reads, verifies and decompresses chunk `k` into `dst` (exactly its uncompressed size),
    /// using `scratch` for the compressed bytes.
    ///
    /// # Errors
    /// As [`SuperchunkReader::read_chunk_into`], and [`Error::InvalidChunk`] when it does not
    /// decompress into `dst`.
    pub fn decompress_chunk_into(
        &self,
        k: u64,
        dst: &mut [u8],
        scratch: &mut Vec<u8>,
        nthreads: usize,
    ) -> Result<()> {
        self.read_chunk_into(k, scratch)?;
        blosc::decompress_into(scratch, dst, nthreads).map_err(|e| Error::chunk(&self.path, k, e.0))
    }

    /// Decodes bytes `byte_start..byte_start + dst.len()` of chunk `k` into `dst`; c-blosc
    /// decodes only the blocks that hold them. The first read of a chunk reads and verifies
    /// all of its compressed bytes (in `scratch`); once this reader has verified a chunk,
    /// later reads of it whose stored digest is unchanged read just the Blosc header, the
    /// block starts and the blocks needed (a chunk rewritten in place has a new digest and
    /// is verified again). Chunks without a digest are always read that way.
    ///
    /// # Errors
    /// As [`SuperchunkReader::read_chunk_into`], and [`Error::InvalidChunk`] when the bytes
    /// do not decode.
    pub fn getitem_into(
        &self,
        k: u64,
        byte_start: usize,
        dst: &mut [u8],
        scratch: &mut Vec<u8>,
    ) -> Result<()> {
        if self.read_blocks(k, byte_start, dst, scratch)? {
            return Ok(());
        }
        if !self.file.small_reads_are_cheap() && !dst.is_empty() {
            // The block index only saves bytes: one that cannot be read or decoded leaves
            // the chunk to be read whole (and checked whole), as planned reads do.
            if let Some(r) = self
                .block_read_range(k, byte_start, dst.len())
                .ok()
                .flatten()
            {
                let mut bytes = vec![0u8; (r.end - r.start) as usize];
                self.file.read_at(r.start, &mut bytes)?;
                return self.getitem_blocks(k, r.start, &bytes, byte_start, dst, scratch);
            }
        }
        let (offset, cbytes) = self.read_checked(k, scratch)?;
        if cbytes < scratch.len() {
            // The digest just checked, still in `scratch` after the chunk's bytes.
            if let Ok(mut m) = self.verified.lock() {
                m.insert(offset, scratch[cbytes..].to_vec());
            }
        }
        scratch.truncate(cbytes);
        blosc::getitem(scratch, byte_start, dst).map_err(|e| Error::chunk(&self.path, k, e.0))
    }

    /// Where the storage keeps a block index for chunk `k` ([`StorageFile::chunk_blocks`]:
    /// an object store) and the Blosc blocks holding its uncompressed bytes
    /// `byte_start..byte_start + len` are at most half of its compressed bytes: the file's
    /// bytes of those blocks, which a caller fetches and gives to
    /// [`getitem_blocks`](Self::getitem_blocks). `None` when the chunk is better read
    /// whole.
    ///
    /// # Errors
    /// [`Error::ChunkOutOfRange`], a damaged offsets table, or a kept index that does not
    /// decode.
    pub fn block_read_range(
        &self,
        k: u64,
        byte_start: usize,
        len: usize,
    ) -> Result<Option<std::ops::Range<u64>>> {
        let (offset, _) = self.offset(k)?;
        let Some(cb) = self.file.chunk_blocks(offset)? else {
            return Ok(None);
        };
        Ok(cb
            .span(byte_start, len)
            .filter(|s| s.len() * 2 <= cb.cbytes())
            .map(|s| offset + s.start as u64..offset + s.end as u64))
    }

    /// Chunk `k`'s Blosc header as the storage's block index holds it (no read), when it
    /// holds one ([`StorageFile::chunk_blocks`]).
    pub fn indexed_header(&self, k: u64) -> Option<ChunkHeader> {
        let (offset, _) = self.offset(k).ok()?;
        let cb = self.file.chunk_blocks(offset).ok()??;
        ChunkHeader::parse(cb.header()).ok()
    }

    /// Decodes bytes `byte_start..byte_start + dst.len()` of chunk `k` from the file's bytes
    /// `bytes` read from `from` (a [`block_read_range`](Self::block_read_range)): each block
    /// is checked against its CRC-32 in the index, then decoded, as
    /// [`getitem_into`](Self::getitem_into) decodes (`scratch` holds the chunk laid out).
    ///
    /// # Errors
    /// [`Error::ChecksumMismatch`] (algorithm `crc32`) naming the file and chunk when a
    /// block's bytes are not those indexed; [`Error::InvalidChunk`] when the bytes do not
    /// hold the blocks or do not decode.
    pub fn getitem_blocks(
        &self,
        k: u64,
        from: u64,
        bytes: &[u8],
        byte_start: usize,
        dst: &mut [u8],
        scratch: &mut Vec<u8>,
    ) -> Result<()> {
        let (offset, _) = self.offset(k)?;
        let cb = self
            .file
            .chunk_blocks(offset)?
            .ok_or_else(|| Error::chunk(&self.path, k, "no block index for the chunk"))?;
        let at = from
            .checked_sub(offset)
            .and_then(|a| usize::try_from(a).ok())
            .ok_or_else(|| Error::chunk(&self.path, k, "blocks read from before the chunk"))?;
        cb.assemble(at, bytes, byte_start, dst.len(), scratch)
            .map_err(|f| match f {
                crate::blosc::BlockFault::Crc { expected, got } => Error::ChecksumMismatch {
                    path: self.path.clone(),
                    chunk: k,
                    algorithm: "crc32",
                    expected: format!("{expected:08x}"),
                    got: format!("{got:08x}"),
                },
                crate::blosc::BlockFault::Misfit(why) => Error::chunk(&self.path, k, why),
            })?;
        blosc::getitem(scratch, byte_start, dst).map_err(|e| Error::chunk(&self.path, k, e.0))
    }

    /// Whether reading a few bytes of the file costs little (a local file; not an object,
    /// where every read is a request): short reads of blocks are worth it only then.
    pub fn small_reads_are_cheap(&self) -> bool {
        self.file.small_reads_are_cheap()
    }

    /// The Blosc header of chunk `k` (its first 16 bytes, one small read): its sizes and
    /// block size, checked as far as 16 bytes allow. Nothing else of the chunk is read or
    /// verified.
    ///
    /// # Errors
    /// [`Error::ChunkOutOfRange`], a read error, or [`Error::InvalidChunk`] when the bytes
    /// are no Blosc header.
    pub fn chunk_header(&self, k: u64) -> Result<ChunkHeader> {
        let (offset, extent) = self.offset(k)?;
        if extent < blosc::HEADER_LEN as u64 {
            return Err(Error::chunk(&self.path, k, "chunk shorter than its header"));
        }
        let mut head = [0u8; blosc::HEADER_LEN];
        self.file.read_at(offset, &mut head)?;
        ChunkHeader::parse(&head).map_err(|e| Error::chunk(&self.path, k, e.0))
    }

    /// The short read of [`getitem_into`](Self::getitem_into) for a chunk already verified
    /// (or without digests): `false` when it does not apply and the whole chunk must be read.
    fn read_blocks(
        &self,
        k: u64,
        byte_start: usize,
        dst: &mut [u8],
        scratch: &mut Vec<u8>,
    ) -> Result<bool> {
        let hlen = blosc::HEADER_LEN;
        let (offset, extent) = self.offset(k)?;
        if dst.is_empty() || extent < hlen as u64 || !self.file.small_reads_are_cheap() {
            return Ok(false);
        }
        let mut head = [0u8; blosc::HEADER_LEN];
        self.file.read_at(offset, &mut head)?;
        let Ok(ch) = ChunkHeader::parse(&head) else {
            return Ok(false);
        };
        let cbytes = ch.cbytes as usize;
        let dlen = self.layout.header.checksum.len();
        if cbytes < hlen || (cbytes + dlen) as u64 > extent {
            return Ok(false);
        }
        if dlen > 0 {
            let mut stored = vec![0u8; dlen];
            self.file.read_at(offset + cbytes as u64, &mut stored)?;
            let seen = self
                .verified
                .lock()
                .ok()
                .is_some_and(|m| m.get(&offset).is_some_and(|d| *d == stored));
            if !seen {
                return Ok(false);
            }
        }
        // The chunk laid out in the caller's scratch buffer, of which only the header, the
        // block starts and the blocks needed are filled and read: the rest keeps whatever an
        // earlier read left there (a buffer reused across reads is not cleared again, only
        // what it grows by is zeroed).
        if scratch.len() < cbytes {
            scratch.resize(cbytes, 0);
        }
        let buf = &mut scratch[..cbytes];
        buf[..hlen].copy_from_slice(&head);
        let Some((from, to)) = block_span(
            &ch,
            byte_start,
            dst.len(),
            |at, out| self.file.read_at(offset + at as u64, out),
            buf,
        )?
        else {
            return Ok(false);
        };
        self.file
            .read_at(offset + from as u64, &mut buf[from..to])?;
        blosc::getitem(buf, byte_start, dst).map_err(|e| Error::chunk(&self.path, k, e.0))?;
        Ok(true)
    }

    /// Reads, verifies and decompresses chunk `k` into a new buffer.
    ///
    /// # Errors
    /// As [`SuperchunkReader::decompress_chunk_into`].
    pub fn decompress_chunk(&self, k: u64) -> Result<Vec<u8>> {
        let c = self.read_chunk(k)?;
        blosc::decompress(&c, 1).map_err(|e| Error::chunk(&self.path, k, e.0))
    }
}

/// The byte span `from..to` of a chunk that holds uncompressed bytes
/// `byte_start..byte_start + len`: for a chunk stored as is (memcpyed), those bytes after the
/// header; otherwise the Blosc blocks that hold them, found through the block starts, which
/// `read` fills into `buf` (laid out as the chunk). `None` when the chunk's block starts are
/// not in ascending order within it (the span would not be one run), and the caller reads the
/// whole chunk instead.
fn block_span(
    ch: &ChunkHeader,
    byte_start: usize,
    len: usize,
    read: impl Fn(usize, &mut [u8]) -> Result<()>,
    buf: &mut [u8],
) -> Result<Option<(usize, usize)>> {
    let hlen = blosc::HEADER_LEN;
    let cbytes = buf.len();
    let end = byte_start.saturating_add(len);
    if end > ch.nbytes as usize {
        return Ok(None);
    }
    if ch.flags & blosc::FLAG_MEMCPYED != 0 {
        return Ok((hlen + end <= cbytes).then_some((hlen + byte_start, hlen + end)));
    }
    let bs = ch.blocksize as usize;
    if bs == 0 {
        return Ok(None);
    }
    let nblocks = (ch.nbytes as usize).div_ceil(bs);
    let starts_end = hlen + 4 * nblocks;
    if starts_end > cbytes {
        return Ok(None);
    }
    read(hlen, &mut buf[hlen..starts_end])?;
    let starts = crate::blosc::blocks::u32s(&buf[hlen..starts_end]);
    if !crate::blosc::blocks::starts_fit(&starts, cbytes) {
        return Ok(None);
    }
    let run = crate::blosc::blocks::blocks_run(&starts, cbytes, byte_start / bs, (end - 1) / bs);
    Ok(run.map(|r| (r.start, r.end)))
}
