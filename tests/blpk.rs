//! Superchunk files: round trips, random access, appends, in-place and relocated
//! replacements, truncation, compaction, and corrupt input.

mod common;

use blz::storage::{LocalStorage, OpenMode, Storage, StorageFile};
use blz::Error;
use blz_format::blosc::{self, Codec, CompressParams, Filter};
use blz_format::blpk::{
    self, Checksum, PackOptions, Placement, SuperchunkFile, SuperchunkReader, WriterOptions,
    OPT_SCATTERED,
};
use common::walk as data;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

fn create(path: &Path) -> Box<dyn StorageFile> {
    LocalStorage.open(path, OpenMode::Create).unwrap()
}

fn open(path: &Path) -> Box<dyn StorageFile> {
    LocalStorage.open(path, OpenMode::Read).unwrap()
}

fn pack_bytes(path: &Path, bytes: &[u8], opts: &PackOptions) {
    blpk::pack(
        &mut &bytes[..],
        bytes.len() as u64,
        create(path),
        opts,
        |_| {},
    )
    .unwrap();
}

fn unpack_bytes(path: &Path) -> Result<Vec<u8>, Error> {
    let r = SuperchunkReader::open(open(path))?;
    let mut out = Vec::new();
    blpk::unpack(&r, &mut out, |_| {})?;
    Ok(out)
}

#[test]
fn pack_unpack_every_checksum_and_layout() {
    let dir = tempfile::tempdir().unwrap();
    let src = data(50_000);
    for checksum in Checksum::ALL {
        for offsets in [true, false] {
            for meta in [false, true] {
                let p = dir.path().join(format!("{checksum}-{offsets}-{meta}.blp"));
                let opts = PackOptions {
                    chunk_size: 65_536,
                    writer: WriterOptions {
                        checksum,
                        offsets,
                        metadata: meta.then(|| {
                            (
                                serde_json::json!({"who": "blz", "n": 50000}),
                                Default::default(),
                            )
                        }),
                        ..Default::default()
                    },
                    ..Default::default()
                };
                pack_bytes(&p, &src, &opts);
                let r = SuperchunkReader::open(open(&p)).unwrap();
                assert_eq!(r.nchunks(), (src.len() as u64).div_ceil(65_536));
                assert_eq!(r.header().chunk_size, 65_536);
                assert_eq!(r.header().last_chunk as usize, src.len() % 65_536);
                assert_eq!(r.metadata().is_some(), meta);
                if offsets {
                    assert_eq!(r.header().max_app_chunks, 10 * r.nchunks() as i64);
                }
                assert_eq!(
                    unpack_bytes(&p).unwrap(),
                    src,
                    "{checksum} {offsets} {meta}"
                );
            }
        }
    }
}

#[test]
fn empty_and_tiny_inputs() {
    let dir = tempfile::tempdir().unwrap();
    for len in [0usize, 1, 100] {
        let p = dir.path().join(format!("{len}.blp"));
        let src = vec![7u8; len];
        pack_bytes(&p, &src, &PackOptions::default());
        let r = SuperchunkReader::open(open(&p)).unwrap();
        assert_eq!(r.nchunks(), 1);
        assert_eq!(r.header().chunk_size as usize, len);
        assert_eq!(r.header().last_chunk as usize, len);
        assert_eq!(unpack_bytes(&p).unwrap(), src);
    }
}

/// A file that records every read it serves.
struct Recording {
    inner: Box<dyn StorageFile>,
    reads: Arc<Mutex<Vec<(u64, usize)>>>,
}

impl StorageFile for Recording {
    fn len(&self) -> blz::Result<u64> {
        self.inner.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> blz::Result<()> {
        self.reads.lock().unwrap().push((offset, buf.len()));
        self.inner.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> blz::Result<()> {
        self.inner.write_at(offset, data)
    }
    fn set_len(&self, len: u64) -> blz::Result<()> {
        self.inner.set_len(len)
    }
    fn sync(&self) -> blz::Result<()> {
        self.inner.sync()
    }
    fn path(&self) -> &Path {
        self.inner.path()
    }
}

#[test]
fn reading_chunk_k_reads_only_chunk_k() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("many.blp");
    let src = data(1000 * 512);
    pack_bytes(
        &p,
        &src,
        &PackOptions {
            chunk_size: 4096,
            ..Default::default()
        },
    );
    let reads = Arc::new(Mutex::new(Vec::new()));
    let r = SuperchunkReader::open(Box::new(Recording {
        inner: open(&p),
        reads: reads.clone(),
    }))
    .unwrap();
    assert_eq!(r.nchunks(), 1000);
    reads.lock().unwrap().clear();
    let k = 777;
    let chunk = r.decompress_chunk(k).unwrap();
    assert_eq!(chunk, &src[k as usize * 4096..(k as usize + 1) * 4096]);
    let info = r.chunk_info(k).unwrap();
    let seen = reads.lock().unwrap().clone();
    let (start, end) = (info.offset, info.offset + u64::from(info.header.cbytes) + 4);
    // The read for the chunk (the chunk_info read comes after it).
    let chunk_reads = &seen[..seen.len() - 1];
    assert!(!chunk_reads.is_empty());
    for &(o, l) in chunk_reads {
        assert!(
            o >= start && o + l as u64 <= end,
            "read {o}+{l} outside {start}..{end}"
        );
    }
}

fn writer_opts(slack: u32, slots: u64) -> WriterOptions {
    WriterOptions {
        checksum: Checksum::Crc32,
        max_app_chunks: slots,
        slack,
        ..Default::default()
    }
}

fn compress(bytes: &[u8]) -> Vec<u8> {
    blosc::compress(
        &CompressParams {
            codec: Codec::Lz4,
            filter: Filter::Shuffle,
            ..Default::default()
        },
        bytes,
    )
    .unwrap()
}

#[test]
fn append_until_full_then_refuse() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.blp");
    let mut f = SuperchunkFile::create(create(&p), &writer_opts(0, 3)).unwrap();
    let chunks: Vec<Vec<u8>> = (0..3).map(|i| data(1000 + i)).collect();
    for c in &chunks {
        assert!(f.append_chunk(compress(c)).unwrap());
    }
    assert!(!f.append_chunk(compress(&chunks[0])).unwrap());
    drop(f);
    let r = SuperchunkReader::open(open(&p)).unwrap();
    assert_eq!(r.nchunks(), 3);
    assert_eq!(r.header().max_app_chunks, 0);
    assert_eq!(
        r.header().chunk_size,
        -1,
        "sizes differ, so chunk_size is unknown"
    );
    for (k, c) in chunks.iter().enumerate() {
        assert_eq!(&r.decompress_chunk(k as u64).unwrap(), c);
    }
    // Reopen and append more after a truncate.
    let mut f =
        SuperchunkFile::open(LocalStorage.open(&p, OpenMode::ReadWrite).unwrap(), 0).unwrap();
    f.truncate(1).unwrap();
    assert!(f.append_chunk(compress(&chunks[2])).unwrap());
    drop(f);
    let r = SuperchunkReader::open(open(&p)).unwrap();
    assert_eq!(r.nchunks(), 2);
    assert_eq!(r.decompress_chunk(1).unwrap(), chunks[2]);
    assert_eq!(r.header().options & OPT_SCATTERED, 0);
}

#[test]
fn replace_in_place_with_slack_and_relocate_without() {
    let dir = tempfile::tempdir().unwrap();
    let smooth = vec![0u8; 80_000];
    let noisy = data(10_000);
    for slack in [0u32, 200_000] {
        let p = dir.path().join(format!("r{slack}.blp"));
        let mut f = SuperchunkFile::create(create(&p), &writer_opts(slack, 4)).unwrap();
        for _ in 0..3 {
            f.append_chunk(compress(&smooth)).unwrap();
        }
        let before = f.writer().alloc_end();
        let placement = f.replace_chunk(1, compress(&noisy)).unwrap();
        if slack == 0 {
            assert_eq!(placement, Placement::Relocated);
            assert!(f.writer().alloc_end() > before);
        } else {
            assert_eq!(placement, Placement::InPlace);
            assert_eq!(f.writer().alloc_end(), before);
        }
        // Shrinking back fits in place either way now.
        let p2 = f.replace_chunk(1, compress(&smooth)).unwrap();
        assert_eq!(p2, Placement::InPlace);
        f.replace_chunk(2, compress(&noisy)).unwrap();
        drop(f);
        let r = SuperchunkReader::open(open(&p)).unwrap();
        assert_ne!(r.header().options & OPT_SCATTERED, 0);
        assert_eq!(r.decompress_chunk(0).unwrap(), smooth);
        assert_eq!(r.decompress_chunk(1).unwrap(), smooth);
        assert_eq!(r.decompress_chunk(2).unwrap(), noisy);
        // Compaction gives a plain file with the same chunks and no dead space.
        let c = dir.path().join(format!("c{slack}.blp"));
        let len = blpk::compact(&r, create(&c), 0).unwrap();
        assert_eq!(std::fs::metadata(&c).unwrap().len(), len);
        let rc = SuperchunkReader::open(open(&c)).unwrap();
        assert_eq!(rc.header().options & OPT_SCATTERED, 0);
        assert_eq!(rc.header().max_app_chunks, 1);
        for k in 0..3 {
            assert_eq!(
                rc.decompress_chunk(k).unwrap(),
                r.decompress_chunk(k).unwrap()
            );
        }
        assert!(len < std::fs::metadata(&p).unwrap().len());
    }
}

fn packed(dir: &Path, checksum: Checksum) -> (PathBuf, Vec<u8>) {
    let p = dir.join(format!("corrupt-{checksum}.blp"));
    let src = data(30_000);
    pack_bytes(
        &p,
        &src,
        &PackOptions {
            chunk_size: 32_768,
            writer: WriterOptions {
                checksum,
                metadata: Some((serde_json::json!({"k": "v"}), Default::default())),
                ..Default::default()
            },
            ..Default::default()
        },
    );
    (p, src)
}

fn flip(path: &Path, at: u64) {
    let mut b = std::fs::read(path).unwrap();
    b[at as usize] ^= 0x5a;
    std::fs::write(path, b).unwrap();
}

#[test]
fn flipped_bytes_are_reported_with_file_and_chunk() {
    let dir = tempfile::tempdir().unwrap();
    for checksum in [Checksum::Adler32, Checksum::Crc32, Checksum::Sha256] {
        let (p, _) = packed(dir.path(), checksum);
        let r = SuperchunkReader::open(open(&p)).unwrap();
        let info = r.chunk_info(3).unwrap();
        let cb = u64::from(info.header.cbytes);
        drop(r);
        // A byte in the middle of chunk 3's compressed data.
        flip(&p, info.offset + cb / 2);
        let e = unpack_bytes(&p).unwrap_err();
        match &e {
            Error::ChecksumMismatch { chunk, path, .. } => {
                assert_eq!(*chunk, 3);
                assert_eq!(path, &p);
            }
            other => panic!("expected a checksum error, got {other}"),
        }
        assert!(e.to_string().contains("chunk 3"), "{e}");
        flip(&p, info.offset + cb / 2);
        // A byte of the digest.
        flip(&p, info.offset + cb + 1);
        assert!(matches!(
            unpack_bytes(&p),
            Err(Error::ChecksumMismatch { chunk: 3, .. })
        ));
    }
}

#[test]
fn corrupt_headers_offsets_metadata_and_truncation_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (p, src) = packed(dir.path(), Checksum::Adler32);
    let good = std::fs::read(&p).unwrap();
    let r = SuperchunkReader::open(open(&p)).unwrap();
    let offsets_pos = r.layout().offsets_pos;
    drop(r);
    let check = |bytes: Vec<u8>, what: &str| {
        let q = dir.path().join("mut.blp");
        std::fs::write(&q, bytes).unwrap();
        let e = unpack_bytes(&q).expect_err(what);
        let msg = e.to_string();
        assert!(
            msg.contains("mut.blp"),
            "{what}: error does not name the file: {msg}"
        );
    };
    // Header: magic, version, options, checksum id.
    for (i, v) in [(0usize, b'X'), (4, 9), (5, 0x70), (6, 42)] {
        let mut b = good.clone();
        b[i] = v;
        check(b, &format!("header byte {i}"));
    }
    // nchunks asking for terabytes, max_app_chunks past the end.
    let mut b = good.clone();
    b[16..24].copy_from_slice(&(1i64 << 40).to_le_bytes());
    check(b, "huge nchunks");
    let mut b = good.clone();
    b[24..32].copy_from_slice(&(1i64 << 50).to_le_bytes());
    check(b, "huge max_app_chunks");
    // Metadata: its size fields and its bytes.
    let mut b = good.clone();
    b[32 + 16..32 + 20].copy_from_slice(&u32::MAX.to_le_bytes());
    check(b, "huge metadata");
    let mut b = good.clone();
    b[32 + 33] ^= 0xff;
    check(b, "metadata bytes");
    // Offsets: an offset pointing past the end, or into the header.
    for bad in [i64::MAX, 1 << 40, 3, -5] {
        let mut b = good.clone();
        let at = offsets_pos as usize + 8;
        b[at..at + 8].copy_from_slice(&bad.to_le_bytes());
        check(b, &format!("offset {bad}"));
    }
    // An offset pointing at another chunk's position minus a few bytes.
    let mut b = good.clone();
    let at = offsets_pos as usize + 8;
    let mut o = [0u8; 8];
    o.copy_from_slice(&b[at..at + 8]);
    let moved = i64::from_le_bytes(o) + 3;
    b[at..at + 8].copy_from_slice(&moved.to_le_bytes());
    check(b, "shifted offset");
    // Truncated files.
    for cut in [10usize, 40, good.len() / 2, good.len() - 1] {
        check(good[..cut].to_vec(), &format!("truncated at {cut}"));
    }
    // And the intact file still reads.
    assert_eq!(unpack_bytes(&p).unwrap(), src);
}

#[test]
fn replacing_with_other_sizes_keeps_the_header_truthful() {
    let dir = tempfile::tempdir().unwrap();
    let header_after = |slack: u32, k: u64, n: usize| {
        let p = dir.path().join(format!("sizes-{slack}-{k}-{n}.blp"));
        let mut f = SuperchunkFile::create(create(&p), &writer_opts(slack, 4)).unwrap();
        for len in [4096, 4096, 1000] {
            f.append_chunk(compress(&data(len / 8))).unwrap();
        }
        f.replace_chunk(k, compress(&data(n / 8))).unwrap();
        drop(f);
        let r = SuperchunkReader::open(open(&p)).unwrap();
        for j in 0..3 {
            r.decompress_chunk(j).unwrap();
        }
        (r.header().chunk_size, r.header().last_chunk)
    };
    for slack in [0, 10_000] {
        // Same sizes: nothing changes.
        assert_eq!(header_after(slack, 0, 4096), (4096, 1000));
        assert_eq!(header_after(slack, 2, 1000), (4096, 1000));
        // The last chunk may shrink or grow up to chunk_size.
        assert_eq!(header_after(slack, 2, 800), (4096, 800));
        assert_eq!(header_after(slack, 2, 4096), (4096, 4096));
        // Past chunk_size, or a middle chunk of another size: sizes are no longer uniform.
        assert_eq!(header_after(slack, 2, 8192), (-1, 8192));
        assert_eq!(header_after(slack, 1, 2048), (-1, 1000));
    }
    // A single chunk: chunk_size grows with it and never shrinks below the old chunk.
    let p = dir.path().join("single.blp");
    let mut f = SuperchunkFile::create(create(&p), &writer_opts(0, 4)).unwrap();
    f.append_chunk(compress(&data(100))).unwrap();
    assert_eq!(f.writer().header().chunk_size, 800);
    f.replace_chunk(0, compress(&data(200))).unwrap();
    assert_eq!(f.writer().header().chunk_size, 1600);
    assert_eq!(f.writer().header().last_chunk, 1600);
    f.replace_chunk(0, compress(&data(50))).unwrap();
    assert_eq!(f.writer().header().chunk_size, 1600);
    assert_eq!(f.writer().header().last_chunk, 400);
}

#[test]
fn chunk_headers_are_held_to_the_file_header() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bound.blp");
    let src = data(3 * 512);
    pack_bytes(
        &p,
        &src,
        &PackOptions {
            chunk_size: 4096,
            writer: WriterOptions {
                checksum: Checksum::None,
                ..Default::default()
            },
            ..Default::default()
        },
    );
    let good = std::fs::read(&p).unwrap();
    let r = SuperchunkReader::open(open(&p)).unwrap();
    let info = r.chunk_info(1).unwrap();
    drop(r);
    // A chunk claiming more uncompressed bytes than chunk_size is refused before it is
    // decompressed (no digest would catch it here).
    let mut b = good.clone();
    let at = info.offset as usize + 4;
    b[at..at + 4].copy_from_slice(&(1u32 << 30).to_le_bytes());
    std::fs::write(&p, &b).unwrap();
    let e = SuperchunkReader::open(open(&p))
        .unwrap()
        .decompress_chunk(1)
        .unwrap_err();
    assert!(
        matches!(e, Error::InvalidChunk { chunk: 1, .. }) && e.to_string().contains("file header"),
        "{e}"
    );
    // A chunk claiming to run over the next one: the writer refuses to take the file up.
    let mut b = good.clone();
    let at = info.offset as usize + 12;
    let cb = info.header.cbytes + 100;
    b[at..at + 4].copy_from_slice(&cb.to_le_bytes());
    std::fs::write(&p, &b).unwrap();
    let e = match SuperchunkFile::open(LocalStorage.open(&p, OpenMode::ReadWrite).unwrap(), 0) {
        Ok(_) => panic!("a chunk overrunning the next one was accepted"),
        Err(e) => e,
    };
    assert!(matches!(e, Error::InvalidChunk { chunk: 1, .. }), "{e}");
}

#[test]
fn short_reads_through_a_scratch_buffer_holding_other_chunks() {
    // Chunks of several Blosc blocks; once verified, a short read fills only the header, the
    // block starts and the blocks it needs into the caller's scratch buffer. Whatever an
    // earlier read (of another chunk, or garbage) left in the rest must not matter.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("short.blp");
    let src = data(3 * 262_144);
    pack_bytes(
        &p,
        &src,
        &PackOptions {
            chunk_size: 262_144,
            blosc: CompressParams {
                codec: Codec::Lz4,
                filter: Filter::Shuffle,
                typesize: 8,
                blocksize: 16_384,
                ..Default::default()
            },
            writer: WriterOptions {
                checksum: Checksum::Crc32,
                ..Default::default()
            },
            ..Default::default()
        },
    );
    let r = SuperchunkReader::open(open(&p)).unwrap();
    let mut scratch = vec![0xa5u8; 1 << 20];
    let mut state = 7u64;
    for i in 0..600 {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        let k = (state >> 33) % 3;
        let start = ((state >> 13) % (262_144 / 8 - 64)) as usize * 8;
        let len = 8 * (1 + (state >> 50) as usize % 64);
        let mut got = vec![0u8; len];
        r.getitem_into(k, start, &mut got, &mut scratch).unwrap();
        let at = k as usize * 262_144 + start;
        assert_eq!(
            got,
            src[at..at + len],
            "read {i}: chunk {k} bytes {start}+{len}"
        );
        if i % 50 == 0 {
            scratch.iter_mut().for_each(|b| *b ^= 0x3c);
        }
    }
}
