//! Crash consistency of superchunk files written directly: a crash (the `n`-th write torn,
//! every later one failing) at any step of an append, replace or truncate leaves a file that
//! opens and whose chunks read as they were before or after the operation.

use blz::blosc::{self, CompressParams};
use blz::blpk::{SuperchunkFile, SuperchunkReader, WriterOptions};
use blz::storage::{FaultyStorage, LocalStorage, OpenMode, Storage};
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
