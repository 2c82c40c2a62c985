//! Arbitrary bytes as one file of a bcolz carray or ctable (copies of the fixtures written
//! by bcolz 1.13, in a temporary directory): `meta/sizes`, `meta/storage`, `__attrs__`,
//! `__rootdirs__` (JSON with Python's bare `NaN`/`Infinity` tokens) or a chunk file
//! `data/__<i>.blp` (16-byte blpk v1 header and one Blosc chunk). Opening the carray or
//! ctable and reading every row, as `blz import` does, must return the rows or an error,
//! never crash or allocate what the files claim.
//!
//! The first byte picks the file (in sorted order); the rest replaces it.

#![no_main]

#[path = "../common/mod.rs"]
mod common;

use blz::bcolz::{CarrayReader, CtableReader};
use libfuzzer_sys::fuzz_target;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The fixtures copied: one ctable and carrays of several dtypes, shapes and byte orders.
const FIXTURES: [&str; 6] = [
    "ctable",
    "int32_leftover",
    "float64_2d",
    "int32_bigendian",
    "unicode_u5",
    "bool_lz4hc",
];

/// Rows read at a time stop short of this many bytes (as `blz import` reads in batches).
const BATCH_BYTES: u64 = 1 << 20;

struct Pristine {
    _dir: tempfile::TempDir,
    /// Every file, sorted, with its original content and the root of its carray or ctable.
    files: Vec<(PathBuf, Vec<u8>, PathBuf, bool)>,
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if src.is_dir() {
            copy_dir(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

fn list(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            list(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn pristine() -> &'static Pristine {
    static P: OnceLock<Pristine> = OnceLock::new();
    P.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/bcolz");
        let dir = tempfile::tempdir().unwrap();
        let mut files = Vec::new();
        for name in FIXTURES {
            let root = dir.path().join(name);
            copy_dir(&src.join(name), &root);
            let mut paths = Vec::new();
            list(&root, &mut paths);
            paths.sort();
            for p in paths {
                let bytes = std::fs::read(&p).unwrap();
                files.push((p, bytes, root.clone(), name == "ctable"));
            }
        }
        Pristine { _dir: dir, files }
    })
}

fn seeds() -> Vec<(String, Vec<u8>)> {
    let p = pristine();
    p.files
        .iter()
        .enumerate()
        .filter(|(i, _)| *i < 256)
        .map(|(i, (path, bytes, _, _))| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (
                format!("bcolz-{i}-{name}"),
                [&[i as u8][..], bytes].concat(),
            )
        })
        .collect()
}

fn read_all(r: &mut CarrayReader) {
    let _ = r.attrs();
    let m = r.meta().clone();
    let _ = m.cparams.to_compression(r.path());
    let rows = (BATCH_BYTES / m.row_bytes().max(1)).clamp(1, m.chunklen);
    let mut out = Vec::new();
    for _ in 0..64 {
        out.clear();
        match r.read_rows(rows, &mut out) {
            Ok(0) | Err(_) => break,
            Ok(n) => assert_eq!(out.len() as u64, n * m.row_bytes()),
        }
    }
    for i in [0, m.nchunks().saturating_sub(1), m.nchunks()] {
        if let Ok(b) = r.read_chunk(i) {
            assert_eq!(b.len() as u64, m.chunk_rows(i) * m.row_bytes());
        }
    }
}

fuzz_target!(|data: &[u8]| {
    common::write_seeds(seeds);
    let Some((&sel, bytes)) = data.split_first() else {
        return;
    };
    let p = pristine();
    let (path, original, root, ctable) = &p.files[usize::from(sel) % p.files.len()];
    std::fs::write(path, bytes).unwrap();
    if *ctable {
        if let Ok(mut t) = CtableReader::open(root) {
            let _ = (t.names().len(), t.len(), t.attrs());
            for c in t.columns_mut() {
                read_all(c);
            }
        }
    } else if let Ok(mut r) = CarrayReader::open(root) {
        read_all(&mut r);
    }
    std::fs::write(path, original).unwrap();
});
