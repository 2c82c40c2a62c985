//! Corrupted superchunk files, in the spirit of the `superchunk_reader` fuzz target but run by
//! `cargo test`: valid files (every layout blz writes, and the files bloscpack wrote) have
//! bytes flipped, are cut short, or have header, metadata and offsets fields overwritten with
//! random or extreme values. Opening and unpacking must then return the data or a blz error,
//! never panic; and when only bytes a digest covers were changed, a file with checksums must
//! never unpack to different bytes.

mod common;

use blz::storage::{LocalStorage, OpenMode, Storage, StorageFile};
use blz_format::blosc::{Codec, CompressParams, Filter};
use blz_format::blpk::{self, Checksum, MetaCodec, MetadataParams, PackOptions, SuperchunkReader};
use blz_format::blpk::{SuperchunkWriter, WriterOptions};
use common::walk;
use proptest::prelude::*;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// A file held in memory.
struct MemFile {
    bytes: Arc<Mutex<Vec<u8>>>,
    path: PathBuf,
}

fn mem(bytes: Vec<u8>) -> Box<dyn StorageFile> {
    Box::new(MemFile {
        bytes: Arc::new(Mutex::new(bytes)),
        path: PathBuf::from("mutated.blp"),
    })
}

impl StorageFile for MemFile {
    fn len(&self) -> blz::Result<u64> {
        Ok(self.bytes.lock().unwrap().len() as u64)
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> blz::Result<()> {
        let b = self.bytes.lock().unwrap();
        let src = usize::try_from(offset)
            .ok()
            .and_then(|s| b.get(s..s.checked_add(buf.len())?))
            .ok_or_else(|| {
                blz::Error::io("read", &self.path, std::io::ErrorKind::UnexpectedEof.into())
            })?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> blz::Result<()> {
        let mut b = self.bytes.lock().unwrap();
        let end = offset as usize + data.len();
        if b.len() < end {
            b.resize(end, 0);
        }
        b[offset as usize..end].copy_from_slice(data);
        Ok(())
    }
    fn set_len(&self, len: u64) -> blz::Result<()> {
        self.bytes.lock().unwrap().resize(len as usize, 0);
        Ok(())
    }
    fn sync(&self) -> blz::Result<()> {
        Ok(())
    }
    fn path(&self) -> &Path {
        &self.path
    }
}

/// A valid file, what it unpacks to, and where its fields and digest-covered bytes lie.
struct Sample {
    name: String,
    bytes: Vec<u8>,
    raw: Vec<u8>,
    meta: Option<serde_json::Value>,
    checksum: Checksum,
    meta_checksum: Option<Checksum>,
    /// Positions of fixed-width fields: (offset, width) for header, metadata header and
    /// offsets slots.
    fields: Vec<(usize, usize)>,
    /// Byte ranges covered by a digest (each chunk with its digest; the stored metadata and
    /// its digest).
    covered: Vec<Range<usize>>,
    /// The covered ranges that belong to chunks.
    chunk_ranges: Vec<Range<usize>>,
}

fn unpack(bytes: Vec<u8>) -> blz::Result<(Vec<u8>, Option<serde_json::Value>)> {
    let r = SuperchunkReader::open(mem(bytes))?;
    let mut out = Vec::new();
    blpk::unpack(&r, &mut out, |_| {})?;
    Ok((out, r.metadata().cloned()))
}

fn describe(name: String, bytes: Vec<u8>) -> Sample {
    let r = SuperchunkReader::open(mem(bytes.clone())).unwrap();
    let mut raw = Vec::new();
    blpk::unpack(&r, &mut raw, |_| {}).unwrap();
    let layout = r.layout();
    let h = layout.header;
    let dlen = h.checksum.len();
    let mut fields = vec![
        (4, 1),
        (5, 1),
        (6, 1),
        (7, 1),
        (8, 4),
        (12, 4),
        (16, 8),
        (24, 8),
    ];
    let mut covered = Vec::new();
    let mut meta_checksum = None;
    if let Some((mh, _)) = &layout.metadata {
        for (o, w) in [(8, 1), (9, 1), (10, 1), (11, 1), (12, 4), (16, 4), (20, 4)] {
            fields.push((32 + o, w));
        }
        let stored = 64..64 + mh.meta_comp_size as usize;
        let digest = 64 + mh.max_meta_size as usize;
        covered.push(stored);
        covered.push(digest..digest + mh.checksum.len());
        meta_checksum = Some(mh.checksum);
    }
    if layout.offsets_pos > 0 {
        for k in 0..h.offset_slots() as usize {
            fields.push((layout.offsets_pos as usize + 8 * k, 8));
        }
    }
    let mut chunk_ranges = Vec::new();
    for k in 0..r.nchunks() {
        let info = r.chunk_info(k).unwrap();
        let o = info.offset as usize;
        chunk_ranges.push(o..o + info.header.cbytes as usize + dlen);
    }
    covered.extend(chunk_ranges.iter().cloned());
    Sample {
        name,
        bytes,
        raw,
        meta: r.metadata().cloned(),
        checksum: h.checksum,
        meta_checksum,
        fields,
        covered,
        chunk_ranges,
    }
}

/// The files the properties start from, built once.
fn samples() -> &'static [Sample] {
    static SAMPLES: OnceLock<Vec<Sample>> = OnceLock::new();
    SAMPLES.get_or_init(|| {
        let mut out = Vec::new();
        let src = walk(1500);
        let doc = serde_json::json!({"dtype": "<f8", "shape": [1500], "attrs": {"unit": "m"}});
        let cases = [
            (Checksum::Adler32, true, Some(MetaCodec::Zlib)),
            (Checksum::Crc32, false, Some(MetaCodec::None)),
            (Checksum::Sha256, true, None),
            (Checksum::Md5, false, None),
            (Checksum::None, true, Some(MetaCodec::Zlib)),
        ];
        for (checksum, offsets, meta) in cases {
            let opts = PackOptions {
                chunk_size: 2048,
                blosc: CompressParams {
                    codec: Codec::Lz4,
                    filter: Filter::Shuffle,
                    ..Default::default()
                },
                writer: WriterOptions {
                    checksum,
                    offsets,
                    metadata: meta.map(|codec| {
                        (
                            doc.clone(),
                            MetadataParams {
                                codec,
                                checksum: Checksum::Crc32,
                                ..Default::default()
                            },
                        )
                    }),
                    ..Default::default()
                },
                app_chunks_factor: 1,
            };
            let file = MemFile {
                bytes: Arc::new(Mutex::new(Vec::new())),
                path: PathBuf::from("sample.blp"),
            };
            let bytes = file.bytes.clone();
            blpk::pack(
                &mut &src[..],
                src.len() as u64,
                Box::new(file),
                &opts,
                |_| {},
            )
            .unwrap();
            let bytes = bytes.lock().unwrap().clone();
            out.push(describe(
                format!("pack {checksum} offsets={offsets} meta={meta:?}"),
                bytes,
            ));
        }
        // A scattered file: slack after each chunk and a relocated chunk.
        {
            let file = MemFile {
                bytes: Arc::new(Mutex::new(Vec::new())),
                path: PathBuf::from("scattered.blp"),
            };
            let bytes = file.bytes.clone();
            let mut f = blpk::SuperchunkFile::create(
                Box::new(file),
                &WriterOptions {
                    checksum: Checksum::Crc32,
                    max_app_chunks: 6,
                    slack: 64,
                    ..Default::default()
                },
            )
            .unwrap();
            let p = CompressParams::default();
            for part in src.chunks(2048) {
                f.append_chunk(blz_format::blosc::compress(&p, part).unwrap())
                    .unwrap();
            }
            let noisy: Vec<u8> = (0..2048u64)
                .map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8)
                .collect();
            f.replace_chunk(1, blz_format::blosc::compress(&p, &noisy).unwrap())
                .unwrap();
            drop(f);
            let bytes = bytes.lock().unwrap().clone();
            out.push(describe("scattered crc32".into(), bytes));
        }
        // Files bloscpack wrote.
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bloscpack");
        for name in [
            "meta-zlib.blp",
            "no-offsets.blp",
            "checksum-sha1.blp",
            "empty.blp",
            "append-trailing-bytes.blp",
        ] {
            out.push(describe(
                format!("bloscpack {name}"),
                std::fs::read(dir.join(name)).unwrap(),
            ));
        }
        out
    })
}

#[derive(Debug, Clone)]
enum Mutation {
    /// XOR a byte (anywhere, or in a digest-covered range).
    Flip { at: usize, mask: u8 },
    /// Cut the file short.
    Truncate { keep: usize },
    /// Overwrite a header, metadata header or offsets field.
    Field { which: usize, value: i64 },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let extreme = prop_oneof![
        Just(-1i64),
        Just(0),
        Just(1),
        Just(i64::MAX),
        Just(i64::MIN),
        Just(i32::MAX as i64),
        Just(u32::MAX as i64),
        Just(1 << 40),
        -64i64..4096,
        any::<i64>(),
    ];
    prop_oneof![
        3 => (any::<usize>(), 1u8..=255).prop_map(|(at, mask)| Mutation::Flip { at, mask }),
        1 => any::<usize>().prop_map(|keep| Mutation::Truncate { keep }),
        3 => (any::<usize>(), extreme).prop_map(|(which, value)| Mutation::Field { which, value }),
    ]
}

/// Applies mutations; returns the new bytes and whether only digest-covered bytes changed.
fn mutate(s: &Sample, muts: &[Mutation], pick_covered: bool) -> (Vec<u8>, bool) {
    let mut b = s.bytes.clone();
    let mut only_covered = true;
    let is_covered = |i: usize| s.covered.iter().any(|r| r.contains(&i));
    for m in muts {
        match *m {
            Mutation::Flip { at, mask } => {
                if b.is_empty() {
                    continue;
                }
                let at = if pick_covered && !s.chunk_ranges.is_empty() {
                    let r = &s.chunk_ranges[at % s.chunk_ranges.len()];
                    r.start + (at / 7) % r.len()
                } else {
                    at % b.len()
                };
                if at < b.len() {
                    b[at] ^= mask;
                    only_covered &= is_covered(at);
                }
            }
            Mutation::Truncate { keep } => {
                let keep = keep % (b.len() + 1);
                if keep < b.len() {
                    b.truncate(keep);
                    only_covered = false;
                }
            }
            Mutation::Field { which, value } => {
                let (at, width) = s.fields[which % s.fields.len()];
                if at + width <= b.len() {
                    let old = b[at..at + width].to_vec();
                    b[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
                    if b[at..at + width] != old[..] {
                        only_covered = false;
                    }
                }
            }
        }
    }
    (b, only_covered)
}

fn check(s: &Sample, bytes: Vec<u8>, only_covered: bool) -> Result<(), TestCaseError> {
    let changed = bytes != s.bytes;
    // Take the file up for writing too: planning must not panic either.
    if let Ok(mut w) = SuperchunkWriter::open(mem(bytes.clone()).as_ref(), 16) {
        let n = w.nchunks();
        let _ = w.plan_truncate(n / 2);
    }
    match unpack(bytes) {
        Err(e) => {
            prop_assert!(
                e.is_corruption() || matches!(e, blz::Error::Io { .. }),
                "{}: unexpected error kind: {e}",
                s.name
            );
        }
        Ok((out, meta)) => {
            if changed && only_covered {
                if s.checksum != Checksum::None {
                    prop_assert!(out == s.raw, "{}: chunk bytes changed silently", s.name);
                }
                if s.meta_checksum.is_some_and(|c| c != Checksum::None) {
                    prop_assert!(meta == s.meta, "{}: metadata changed silently", s.name);
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..common::config(1000)
    })]

    #[test]
    fn mutated_files_unpack_or_fail_cleanly(
        which in 0usize..64,
        muts in prop::collection::vec(mutation(), 1..5),
    ) {
        let s = &samples()[which % samples().len()];
        let (bytes, only_covered) = mutate(s, &muts, false);
        check(s, bytes, only_covered)?;
    }

    #[test]
    fn changed_chunk_bytes_never_unpack_silently(
        which in 0usize..64,
        flips in prop::collection::vec((any::<usize>(), 1u8..=255), 1..4),
    ) {
        let s = &samples()[which % samples().len()];
        let muts: Vec<Mutation> =
            flips.into_iter().map(|(at, mask)| Mutation::Flip { at, mask }).collect();
        let (bytes, only_covered) = mutate(s, &muts, true);
        prop_assert!(only_covered);
        if s.checksum != Checksum::None && bytes != s.bytes {
            prop_assert!(unpack(bytes).is_err(), "{}: a flipped chunk byte went unnoticed", s.name);
        } else {
            check(s, bytes, only_covered)?;
        }
    }
}

#[test]
fn every_bloscpack_fixture_unpacks() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bloscpack");
    let manifest = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
    let manifest: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    let files = manifest["files"].as_array().unwrap();
    assert!(files.len() > 20);
    for f in files {
        let name = f["name"].as_str().unwrap();
        let r = SuperchunkReader::open(LocalStorage.open(&dir.join(name), OpenMode::Read).unwrap())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut out = Vec::new();
        blpk::unpack(&r, &mut out, |_| {}).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(out.len() as u64, f["raw_len"].as_u64().unwrap(), "{name}");
    }
}
