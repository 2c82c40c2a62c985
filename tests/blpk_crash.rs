//! Crash consistency of superchunk files written directly: a crash (the `n`-th write torn,
//! every later one failing) at any step of an append, replace or truncate leaves a file that
//! opens and whose chunks read as they were before or after the operation.

use blz::storage::{FaultyStorage, LocalStorage, OpenMode, Storage};
use blz_format::blosc::{self, CompressParams};
use blz_format::blpk::{SuperchunkFile, SuperchunkReader, WriterOptions};
use std::path::Path;
use std::sync::Arc;

fn chunk_of(fill: u8, n: usize) -> (Vec<u8>, Vec<u8>) {
    let plain: Vec<u8> = (0..n).map(|i| fill.wrapping_add((i / 8) as u8)).collect();
    let c = blosc::compress(&CompressParams::default(), &plain).unwrap();
    (c, plain)
}

/// Writes a file of `sizes.len()` chunks and returns their plain bytes.
fn make(path: &Path, sizes: &[usize], slack: u32) -> Vec<Vec<u8>> {
    let mut f = SuperchunkFile::create(
        LocalStorage.open(path, OpenMode::Create).unwrap(),
        &WriterOptions {
            max_app_chunks: 8,
            slack,
            ..Default::default()
        },
    )
    .unwrap();
    sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let (c, p) = chunk_of(i as u8 * 40, n);
            assert!(f.append_chunk(c).unwrap());
            p
        })
        .collect()
}

fn read_all(path: &Path) -> blz::Result<Vec<Vec<u8>>> {
    let r = SuperchunkReader::open(LocalStorage.open(path, OpenMode::Read)?)?;
    (0..r.nchunks()).map(|k| r.decompress_chunk(k)).collect()
}

/// Runs `op` on a fresh copy of the file with a crash at every step in turn; after each
/// crash the file must read as `before` or `after`.
fn crash_everywhere(
    name: &str,
    sizes: &[usize],
    slack: u32,
    op: impl Fn(&mut SuperchunkFile) -> blz::Result<()>,
    after: impl Fn(&[Vec<u8>]) -> Vec<Vec<u8>>,
) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("{name}.blp"));
    for fail_at in 0.. {
        let before = make(&path, sizes, slack);
        let expected = after(&before);
        let faulty = FaultyStorage::new(Arc::new(LocalStorage), fail_at);
        let file = faulty.open(&path, OpenMode::ReadWrite).unwrap();
        let result = SuperchunkFile::open(file, slack).and_then(|mut f| op(&mut f));
        let got = read_all(&path)
            .unwrap_or_else(|e| panic!("{name}: crash at step {fail_at}: file unreadable: {e}"));
        assert!(
            got == before || got == expected,
            "{name}: crash at step {fail_at}: {} chunks, neither before nor after",
            got.len()
        );
        if !faulty.crashed() {
            result.unwrap();
            assert_eq!(got, expected, "{name}: completed");
            break;
        }
    }
}

#[test]
fn truncate_survives_a_crash_at_every_step() {
    for keep in [0usize, 1, 3] {
        crash_everywhere(
            &format!("truncate-{keep}"),
            &[4000, 4000, 4000, 4000, 1000],
            0,
            |f| f.truncate(keep as u64),
            |b| b[..keep].to_vec(),
        );
    }
}

#[test]
fn append_survives_a_crash_at_every_step() {
    for slack in [0, 500] {
        crash_everywhere(
            &format!("append-{slack}"),
            &[4000, 4000, 1000],
            slack,
            |f| {
                assert!(f.append_chunk(chunk_of(200, 3000).0)?);
                Ok(())
            },
            |b| {
                let mut a = b.to_vec();
                a.push(chunk_of(200, 3000).1);
                a
            },
        );
    }
}

#[test]
fn relocating_replace_survives_a_crash_at_every_step() {
    // A chunk that grows does not fit in a plain file's slot, so it is relocated: the old
    // bytes stay valid until its offsets slot points at the new ones.
    for k in [0usize, 2] {
        let size = if k == 2 { 1000 } else { 4000 };
        let noisy = |n: usize| -> (Vec<u8>, Vec<u8>) {
            let plain: Vec<u8> = (0..n as u64)
                .map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8)
                .collect();
            (
                blosc::compress(&CompressParams::default(), &plain).unwrap(),
                plain,
            )
        };
        crash_everywhere(
            &format!("relocate-{k}"),
            &[4000, 4000, 1000],
            0,
            |f| f.replace_chunk(k as u64, noisy(size).0).map(|_| ()),
            |b| {
                let mut a = b.to_vec();
                a[k] = noisy(size).1;
                a
            },
        );
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Write(u64, usize),
    Sync,
}

/// A file that logs its writes and syncs.
struct Logged {
    inner: Box<dyn blz::storage::StorageFile>,
    log: Arc<std::sync::Mutex<Vec<Op>>>,
}

impl blz::storage::StorageFile for Logged {
    fn len(&self) -> blz::Result<u64> {
        self.inner.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> blz::Result<()> {
        self.inner.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> blz::Result<()> {
        self.log.lock().unwrap().push(Op::Write(offset, data.len()));
        self.inner.write_at(offset, data)
    }
    fn set_len(&self, len: u64) -> blz::Result<()> {
        self.inner.set_len(len)
    }
    fn sync(&self) -> blz::Result<()> {
        self.log.lock().unwrap().push(Op::Sync);
        self.inner.sync()
    }
    fn path(&self) -> &Path {
        self.inner.path()
    }
}

#[test]
fn durable_writes_are_synced_before_the_writes_that_expose_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("durable.blp");
    make(&path, &[4000, 4000, 1000], 0);
    // Stale bytes past the last chunk (bloscpack's append leaves such): the next chunk is
    // then written below the file's length, over them.
    let mut bytes = std::fs::read(&path).unwrap();
    let end = bytes.len() as u64;
    bytes.extend_from_slice(&[0xee; 3000]);
    std::fs::write(&path, &bytes).unwrap();

    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let file = Logged {
        inner: LocalStorage.open(&path, OpenMode::ReadWrite).unwrap(),
        log: log.clone(),
    };
    let mut f = SuperchunkFile::open(Box::new(file), 0).unwrap();
    let (c, _) = chunk_of(9, 2000);
    let clen = c.len() + 4;
    assert!(f.append_chunk(c).unwrap());
    let ops = std::mem::take(&mut *log.lock().unwrap());
    let writes: Vec<(u64, usize)> = ops
        .iter()
        .filter_map(|o| match *o {
            Op::Write(a, b) => Some((a, b)),
            Op::Sync => None,
        })
        .collect();
    assert_eq!(writes.len(), 3, "{ops:?}");
    assert_eq!(
        writes[0],
        (end, clen),
        "the chunk goes over the stale bytes"
    );
    assert_eq!(writes[1].1, 8, "then its offsets slot");
    assert_eq!(writes[2], (0, 32), "then the header");
    let expected = [
        Op::Write(writes[0].0, writes[0].1),
        Op::Sync,
        Op::Write(writes[1].0, writes[1].1),
        Op::Sync,
        Op::Write(0, 32),
        Op::Sync,
    ];
    assert_eq!(ops, expected);

    // Truncate: the header (new count) is durable before the dropped slots are cleared.
    f.truncate(1).unwrap();
    let ops = std::mem::take(&mut *log.lock().unwrap());
    assert_eq!(ops.len(), 4, "{ops:?}");
    assert_eq!(ops[0], Op::Write(0, 32));
    assert_eq!(ops[1], Op::Sync);
    assert!(matches!(ops[2], Op::Write(_, 24)), "{ops:?}");
    assert_eq!(ops[3], Op::Sync);
    drop(f);
    let got = read_all(&path).unwrap();
    assert_eq!(got.len(), 1);
}

#[test]
fn in_place_replace_in_a_scattered_file_survives_a_crash_at_every_step() {
    // With slack every replacement fits in place. The chunk is overwritten, so a crash in the
    // middle of that write tears it (its digest then reports it); a crash at any other step
    // leaves the old or the new chunk, and the header always agrees with both.
    for (k, size) in [(2usize, 3000usize), (2, 500), (0, 4000)] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("inplace.blp");
        for fail_at in 0.. {
            let before = make(&path, &[4000, 4000, 1000], 5000);
            let (c, plain) = chunk_of(99, size);
            let faulty = FaultyStorage::new(Arc::new(LocalStorage), fail_at);
            let file = faulty.open(&path, OpenMode::ReadWrite).unwrap();
            let placement =
                SuperchunkFile::open(file, 5000).and_then(|mut f| f.replace_chunk(k as u64, c));
            let r =
                SuperchunkReader::open(LocalStorage.open(&path, OpenMode::Read).unwrap()).unwrap();
            for j in 0..3 {
                if j == k {
                    match r.decompress_chunk(j as u64) {
                        Ok(got) => assert!(got == before[k] || got == plain, "step {fail_at}"),
                        Err(e) => assert!(
                            matches!(e, blz::Error::ChecksumMismatch { .. }),
                            "step {fail_at}: {e}"
                        ),
                    }
                } else {
                    assert_eq!(r.decompress_chunk(j as u64).unwrap(), before[j]);
                }
            }
            if !faulty.crashed() {
                assert_eq!(placement.unwrap(), blz_format::blpk::Placement::InPlace);
                assert_eq!(r.decompress_chunk(k as u64).unwrap(), plain);
                break;
            }
        }
    }
}

/// Writes a file whose metadata records an offsets digest (as datasets' files do) with
/// chunks of `sizes`; returns their plain bytes.
fn make_sealed(path: &Path, sizes: &[usize]) -> Vec<Vec<u8>> {
    let doc = serde_json::json!({"blz": {"dataset": "d", "store": "data", "file": 1,
        "offsets": ""}});
    let params = blz_format::blpk::MetadataParams {
        checksum: blz_format::blpk::Checksum::Adler32,
        codec: blz_format::blpk::MetaCodec::None,
        level: 0,
        growth_factor: 1,
    };
    let mut f = SuperchunkFile::create(
        LocalStorage.open(path, OpenMode::Create).unwrap(),
        &WriterOptions {
            max_app_chunks: 8,
            metadata: Some((doc, params)),
            ..Default::default()
        },
    )
    .unwrap();
    sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let (c, p) = chunk_of(i as u8 * 40, n);
            assert!(f.append_chunk(c).unwrap());
            p
        })
        .collect()
}

#[test]
fn a_file_with_an_offsets_digest_never_reads_another_chunk_after_a_crash() {
    // Appends and truncations write the header and the digest in one write (within the
    // first sector, taken as atomic): a crash leaves the file before or after. Only when
    // that write is torn, or between a relocation's slot and its digest, does the table
    // disagree with the digest, and then every chunk read fails: never another chunk's data.
    type Op = Box<dyn Fn(&mut SuperchunkFile) -> blz::Result<()>>;
    type After = Box<dyn Fn(&[Vec<u8>]) -> Vec<Vec<u8>>>;
    let noisy = |n: usize| -> (Vec<u8>, Vec<u8>) {
        let plain: Vec<u8> = (0..n as u64)
            .map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8)
            .collect();
        (
            blosc::compress(&CompressParams::default(), &plain).unwrap(),
            plain,
        )
    };
    let cases: Vec<(&str, Op, After)> = vec![
        (
            "append",
            Box::new(|f| f.append_chunk(chunk_of(200, 3000).0).map(|_| ())),
            Box::new(|b| [b, &[chunk_of(200, 3000).1]].concat()),
        ),
        (
            "truncate",
            Box::new(|f| f.truncate(1)),
            Box::new(|b| b[..1].to_vec()),
        ),
        (
            "relocate",
            Box::new(move |f| f.replace_chunk(0, noisy(4000).0).map(|_| ())),
            Box::new(move |b| [&[noisy(4000).1][..], &b[1..]].concat()),
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (name, op, after) in cases {
        let path = dir.path().join(format!("sealed-{name}.blp"));
        let mut mismatches = 0;
        for fail_at in 0.. {
            let before = make_sealed(&path, &[4000, 4000, 1000]);
            let expected = after(&before);
            let faulty = FaultyStorage::new(Arc::new(LocalStorage), fail_at);
            let file = faulty.open(&path, OpenMode::ReadWrite).unwrap();
            let result = SuperchunkFile::open(file, 0).and_then(|mut f| op(&mut f));
            match read_all(&path) {
                Ok(got) => assert!(
                    got == before || got == expected,
                    "{name}: crash at step {fail_at}: neither before nor after"
                ),
                Err(blz::Error::ChecksumMismatch { algorithm, .. })
                    if algorithm == blz_format::blpk::OFFSETS_ALGORITHM =>
                {
                    mismatches += 1;
                }
                Err(e) => panic!("{name}: crash at step {fail_at}: {e}"),
            }
            if !faulty.crashed() {
                result.unwrap();
                assert_eq!(read_all(&path).unwrap(), expected, "{name}: completed");
                break;
            }
        }
        // Only a torn digest write (and, for a relocation, a torn slot or a crash between the
        // slot and the digest) leaves a mismatch.
        let windows = if name == "relocate" { 3 } else { 1 };
        assert!(
            mismatches <= windows,
            "{name}: {mismatches} mismatching states"
        );
    }
}
