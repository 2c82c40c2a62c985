//! Packing a byte stream into a superchunk file and unpacking it again, like bloscpack's own
//! `pack` and `unpack`, with chunks compressed and decompressed in parallel.

use super::reader::SuperchunkReader;
use super::writer::{SuperchunkFile, WriterOptions};
use crate::blosc::{self, CompressParams};
use crate::error::{Error, Result};
use crate::storage::StorageFile;
use rayon::prelude::*;
use std::io::{Read, Write};

/// bloscpack's default chunk size (1 MiB).
pub const DEFAULT_CHUNK_SIZE: usize = 1 << 20;

/// How to pack a stream.
#[derive(Debug, Clone)]
pub struct PackOptions {
    /// Uncompressed bytes per chunk (the last chunk may be shorter).
    pub chunk_size: usize,
    /// Blosc settings for every chunk.
    pub blosc: CompressParams,
    /// File layout (checksum, offsets, metadata, slack). `max_app_chunks` is taken as a
    /// multiple of the number of chunks written, like bloscpack (default 10).
    pub writer: WriterOptions,
    /// Offsets slots to reserve for appends, per chunk written.
    pub app_chunks_factor: u64,
}

impl Default for PackOptions {
    fn default() -> Self {
        PackOptions {
            chunk_size: DEFAULT_CHUNK_SIZE,
            blosc: CompressParams {
                codec: blosc::Codec::Blosclz,
                clevel: 7,
                filter: blosc::Filter::Shuffle,
                typesize: 8,
                blocksize: 0,
                nthreads: 1,
            },
            writer: WriterOptions::default(),
            app_chunks_factor: 10,
        }
    }
}

/// What was packed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackSummary {
    /// Uncompressed bytes read.
    pub nbytes: u64,
    /// Chunks written.
    pub nchunks: u64,
    /// Bytes of the file written.
    pub file_len: u64,
}

fn read_full(input: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match input.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Packs `input` (of `len` bytes, needed up front to size the offsets table as bloscpack
/// does) into `out`. Empty input gives one empty chunk, as bloscpack writes it.
///
/// # Errors
/// [`Error::InvalidArgument`] for a zero or too large chunk size or a short input, and I/O
/// or compression errors.
pub fn pack(
    input: &mut dyn Read,
    len: u64,
    out: Box<dyn StorageFile>,
    opts: &PackOptions,
    mut progress: impl FnMut(u64),
) -> Result<PackSummary> {
    if opts.chunk_size == 0 || opts.chunk_size > blosc::MAX_BUFFERSIZE {
        return Err(Error::InvalidArgument(format!(
            "chunk size {} out of range 1..={}",
            opts.chunk_size,
            blosc::MAX_BUFFERSIZE
        )));
    }
    let cs = opts.chunk_size as u64;
    let nchunks = len.div_ceil(cs).max(1);
    let mut wopts = opts.writer.clone();
    let mut sink = if wopts.offsets {
        wopts.max_app_chunks = nchunks + nchunks.saturating_mul(opts.app_chunks_factor);
        let mut f = SuperchunkFile::create(out, &wopts)?;
        f.set_durable(false);
        Sink::Indexed(f)
    } else {
        Sink::Sequential(SequentialWriter::start(out, &wopts, len, cs, nchunks)?)
    };
    let batch = rayon::current_num_threads().max(1) * 2;
    let mut bufs: Vec<Vec<u8>> = Vec::new();
    let mut done = 0u64;
    let mut k = 0u64;
    while k < nchunks {
        let n = batch.min((nchunks - k) as usize);
        bufs.resize_with(n, Vec::new);
        for (i, b) in bufs.iter_mut().enumerate() {
            let want = len.saturating_sub((k + i as u64) * cs).min(cs) as usize;
            b.resize(want, 0);
            let got = read_full(input, b).map_err(|e| Error::io("read", "input", e))?;
            if got != want {
                return Err(Error::InvalidArgument(format!(
                    "input ended after {} of {len} bytes",
                    (k + i as u64) * cs + got as u64
                )));
            }
        }
        let chunks: Vec<Vec<u8>> = bufs
            .par_iter()
            .map(|b| blosc::compress(&opts.blosc, b))
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| Error::Compress(e.0))?;
        for c in chunks {
            sink.push(c)?;
        }
        done += bufs.iter().map(|b| b.len() as u64).sum::<u64>();
        progress(done);
        k += n as u64;
    }
    let file_len = sink.finish()?;
    Ok(PackSummary {
        nbytes: len,
        nchunks,
        file_len,
    })
}

enum Sink {
    Indexed(SuperchunkFile),
    Sequential(SequentialWriter),
}

impl Sink {
    fn push(&mut self, chunk: Vec<u8>) -> Result<()> {
        match self {
            Sink::Indexed(f) => {
                if f.append_chunk(chunk)? {
                    Ok(())
                } else {
                    Err(Error::InvalidArgument(format!(
                        "{}: offsets table full",
                        f.writer().path().display()
                    )))
                }
            }
            Sink::Sequential(w) => w.push(&chunk),
        }
    }

    fn finish(self) -> Result<u64> {
        match self {
            Sink::Indexed(f) => {
                f.sync()?;
                Ok(f.writer().alloc_end())
            }
            Sink::Sequential(w) => {
                w.file.sync()?;
                Ok(w.pos)
            }
        }
    }
}

/// Writes a file without an offsets table front to back: the header (with the final counts,
/// known from the input length) and metadata, then each chunk and its digest.
struct SequentialWriter {
    file: Box<dyn StorageFile>,
    checksum: super::Checksum,
    pos: u64,
}

impl SequentialWriter {
    fn start(
        file: Box<dyn StorageFile>,
        opts: &WriterOptions,
        len: u64,
        cs: u64,
        nchunks: u64,
    ) -> Result<SequentialWriter> {
        let mut options = 0u8;
        let meta = match &opts.metadata {
            Some((doc, p)) => {
                options |= super::OPT_METADATA;
                super::metadata::encode_section(doc, p)?
            }
            None => Vec::new(),
        };
        let chunk_size = cs.min(len);
        let header = super::FileHeader {
            options,
            checksum: opts.checksum,
            typesize: opts.typesize,
            chunk_size: chunk_size as i32,
            last_chunk: (len - (nchunks - 1) * cs) as i32,
            nchunks: nchunks as i64,
            max_app_chunks: 0,
        };
        let mut front = header.encode().to_vec();
        front.extend_from_slice(&meta);
        file.set_len(0)?;
        file.write_at(0, &front)?;
        Ok(SequentialWriter {
            file,
            checksum: opts.checksum,
            pos: front.len() as u64,
        })
    }

    fn push(&mut self, chunk: &[u8]) -> Result<()> {
        self.file.write_at(self.pos, chunk)?;
        self.pos += chunk.len() as u64;
        let d = self.checksum.digest(chunk);
        self.file.write_at(self.pos, d.as_slice())?;
        self.pos += d.as_slice().len() as u64;
        Ok(())
    }
}

/// Decompresses every chunk of `reader` in order into `out`, verifying each digest.
/// Returns the number of bytes written.
///
/// # Errors
/// The first corrupt chunk ([`Error::ChecksumMismatch`], [`Error::InvalidChunk`]) or I/O
/// error.
pub fn unpack(
    reader: &SuperchunkReader,
    out: &mut dyn Write,
    mut progress: impl FnMut(u64),
) -> Result<u64> {
    let n = reader.nchunks();
    let batch = (rayon::current_num_threads().max(1) * 2) as u64;
    // One (compressed, uncompressed) buffer pair per chunk of a batch, reused from batch to
    // batch: decompressing into memory already touched is much cheaper than into fresh
    // pages, and nothing is zero-filled before c-blosc writes it.
    let mut slots: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut written = 0u64;
    let mut k = 0;
    while k < n {
        let end = (k + batch).min(n);
        slots.resize_with((end - k) as usize, Default::default);
        slots
            .par_iter_mut()
            .enumerate()
            .try_for_each(|(j, (scratch, plain))| -> Result<()> {
                let i = k + j as u64;
                reader.read_chunk_into(i, scratch)?;
                blosc::decompress_to_vec(scratch, plain, 1)
                    .map_err(|e| Error::chunk(reader.path(), i, e.0))
            })?;
        for (_, p) in &slots {
            out.write_all(p)
                .map_err(|e| Error::io("write", "output", e))?;
            written += p.len() as u64;
        }
        progress(written);
        k = end;
    }
    Ok(written)
}

/// Rewrites the chunks of `src`, in index order and without dead space, into `dst`, keeping
/// its checksum, typesize, metadata and free offsets slots, with `slack` bytes reserved after
/// each chunk (0 gives a plain file bloscpack can read). Every chunk's digest is verified on
/// the way. The caller renames `dst` over the original once it is synced.
///
/// # Errors
/// The first corrupt chunk of `src`, and I/O errors.
pub fn compact(src: &SuperchunkReader, dst: Box<dyn StorageFile>, slack: u32) -> Result<u64> {
    let h = src.header();
    let layout = src.layout();
    let opts = WriterOptions {
        checksum: h.checksum,
        typesize: h.typesize,
        offsets: true,
        max_app_chunks: h.offset_slots().max(src.nchunks()),
        slack,
        scattered: false,
        varlen: h.has(super::OPT_VARLEN),
        metadata: layout.metadata.as_ref().map(|(mh, doc)| {
            (
                doc.clone(),
                super::MetadataParams {
                    checksum: mh.checksum,
                    codec: mh.codec,
                    level: mh.level,
                    growth_factor: if mh.meta_size == 0 {
                        1
                    } else {
                        mh.max_meta_size.div_ceil(mh.meta_size).max(1)
                    },
                },
            )
        }),
    };
    let mut out = SuperchunkFile::create(dst, &opts)?;
    out.set_durable(false);
    let mut buf = Vec::new();
    for k in 0..src.nchunks() {
        src.read_chunk_into(k, &mut buf)?;
        out.append_chunk(std::mem::take(&mut buf))?;
    }
    out.sync()?;
    Ok(out.writer().alloc_end())
}
