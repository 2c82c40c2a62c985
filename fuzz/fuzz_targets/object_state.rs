//! One object of a small dataset on an object store edited by arbitrary bytes: the state
//! (`meta/state`), a manifest, a block-index object or a superchunk object
//! (`spec/object-store.md`). Opening, reading whole and in a few places, verifying and
//! appending must each return a value or an error: never crash, never allocate what a
//! field claims, never run long, and never read values other than the dataset's without
//! an error.
//!
//! The first byte picks the object (its number, modulo their count, in key order); the
//! rest are edits, each replacing a run of its bytes ([`edit`]). `tests/object_hostile_meta.rs` runs an enumerated cousin of this
//! target in `cargo test`.

#![no_main]

#[path = "../common/mod.rs"]
mod common;

use blz::storage::ObjectStorage;
use blz::{CreateOptions, DType, Dataset, Mode};
use futures::executor::block_on;
use libfuzzer_sys::fuzz_target;
use object_store::memory::InMemory;
use object_store::path::Path as OPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

const PREFIX: &str = "f/x.blz";
const ROWS: u64 = 1400;

fn value(i: u64) -> f64 {
    (i as f64) * 0.5 - 7.0
}

/// Every object of the dataset, by key: five superchunk files of three 100-element chunks
/// over four appends, sealed into manifests at every commit, the block indexes of the last
/// files in objects of their own, one file made of two objects' extents.
fn pristine() -> &'static BTreeMap<String, Vec<u8>> {
    static P: OnceLock<BTreeMap<String, Vec<u8>>> = OnceLock::new();
    P.get_or_init(|| {
        let store = Arc::new(InMemory::new());
        let s: Arc<dyn ObjectStore> = store.clone();
        let h = ObjectStorage::new(s, PathBuf::from("memory://"), PREFIX).unwrap();
        h.set_manifest_bytes(1);
        h.set_inline_block_indexes(300);
        let h = Arc::new(h);
        let root = h.root().to_path_buf();
        let opts = CreateOptions {
            chunkshape: Some(vec![100]),
            superchunksize: Some(3),
            ..Default::default()
        };
        let mut ds = Dataset::create_in(h, &root, DType::F64, &[0], &opts).unwrap();
        for a in 0..4u64 {
            let v: Vec<f64> = (a * 350..(a + 1) * 350).map(value).collect();
            ds.append(&ndarray::Array1::from(v).into_dyn().view()).unwrap();
        }
        drop(ds);
        use futures::TryStreamExt;
        let metas: Vec<_> = block_on(store.list(None).try_collect::<Vec<_>>()).unwrap();
        metas
            .into_iter()
            .map(|m| {
                let b = block_on(async { store.get(&m.location).await?.bytes().await }).unwrap();
                (m.location.to_string(), b.to_vec())
            })
            .collect()
    })
}

/// Each object unedited, and with its first byte, a middle byte and its last byte cut:
/// the starting inputs.
fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for (i, (_, v)) in pristine().iter().enumerate() {
        out.push((format!("{i}"), vec![i as u8]));
        for (name, at) in [("first", 0), ("middle", v.len() / 2), ("last", v.len() - 1)] {
            let at = at as u16;
            out.push((format!("{i}-{name}"), vec![i as u8, (at >> 8) as u8, at as u8, 1, 0]));
        }
    }
    out
}

/// Applies the edits `[at: u16 big-endian][cut: u8][n: u8][n bytes]...` to `bytes` in
/// turn: each replaces the `cut` bytes from `at` (modulo the length plus one) with its
/// `n` bytes. Edits, not whole objects, so that an input means the same in every run
/// (the dataset's objects carry random ids and tags, drawn anew by each process).
fn edit(bytes: &mut Vec<u8>, mut edits: &[u8]) {
    while let [a, b, cut, n, rest @ ..] = edits {
        let at = usize::from(u16::from_be_bytes([*a, *b])) % (bytes.len() + 1);
        let end = (at + usize::from(*cut)).min(bytes.len());
        let n = usize::from(*n).min(rest.len());
        bytes.splice(at..end, rest[..n].iter().copied());
        edits = &rest[n..];
    }
}

fn check(objects: &BTreeMap<String, Vec<u8>>) {
    let store = Arc::new(InMemory::new());
    for (k, v) in objects {
        block_on(store.put(&OPath::from(k.as_str()), PutPayload::from(v.clone()))).unwrap();
    }
    let s: Arc<dyn ObjectStore> = store;
    let Ok(h) = ObjectStorage::new(s, PathBuf::from("memory://"), PREFIX) else {
        return;
    };
    let h = Arc::new(h);
    let root = h.root().to_path_buf();
    let Ok(ds) = Dataset::open_in(h.clone(), &root, Mode::ReadOnly) else {
        return;
    };
    let rows = ds.shape()[0];
    if let Ok(all) = ds.read::<f64>() {
        for (i, &x) in all.iter().enumerate().take(ROWS as usize) {
            assert_eq!(x.to_bits(), value(i as u64).to_bits(), "element {i} read as {x}");
        }
    }
    for i in [0, 99, 100, 777, ROWS - 1] {
        if i < rows.min(ROWS) {
            if let Ok(x) = ds.get::<f64>(&[i]) {
                assert_eq!(x.to_bits(), value(i).to_bits(), "element {i} read as {x}");
            }
        }
    }
    let _ = ds.verify(|_, _| {});
    drop(ds);
    if let Ok(mut ds) = Dataset::open_in(h, &root, Mode::ReadWrite) {
        let more = ndarray::Array1::from(vec![1.5f64; 150]).into_dyn();
        let _ = ds.append(&more.view());
    }
}

fuzz_target!(|data: &[u8]| {
    common::write_seeds(seeds);
    let Some((&which, edits)) = data.split_first() else {
        return;
    };
    let mut objects = pristine().clone();
    let n = objects.len();
    if let Some(bytes) = objects.values_mut().nth(usize::from(which) % n) {
        edit(bytes, edits);
    }
    check(&objects);
});
