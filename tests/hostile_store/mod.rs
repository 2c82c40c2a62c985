//! A small dataset on the in-memory object store, every object of it, and what a reader
//! does with a copy of them that may be damaged: shared by `tests/object_hostile_meta.rs`
//! and the fuzz target `fuzz/fuzz_targets/object_state.rs`.
#![allow(dead_code)]

use blz::meta::Compression;
use blz::storage::ObjectStorage;
use blz::{CreateOptions, DType, Dataset, Mode};
use futures::executor::block_on;
use object_store::memory::InMemory;
use object_store::path::Path as OPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// The dataset's prefix in the store.
pub const PREFIX: &str = "h/x.blz";
pub const CHUNK: u64 = 500;
pub const ROWS: u64 = 7 * CHUNK * 2;

pub fn value(i: u64) -> f64 {
    (i as f64) * 0.5 - 7.0
}

/// Every object of a small dataset written as blz writes it: five superchunk files of
/// three 500-element chunks (of eight Blosc blocks each) over four appends, sealed into manifests at every commit, the
/// block indexes of the last files in objects of their own (the rest inline), one file
/// made of two objects' extents.
pub fn pristine() -> &'static BTreeMap<String, Vec<u8>> {
    static P: std::sync::OnceLock<BTreeMap<String, Vec<u8>>> = std::sync::OnceLock::new();
    P.get_or_init(|| {
        let store = Arc::new(InMemory::new());
        let s: Arc<dyn ObjectStore> = store.clone();
        let h = ObjectStorage::new(s, PathBuf::from("memory://"), PREFIX).unwrap();
        h.set_manifest_bytes(1);
        h.set_inline_block_indexes(300);
        let h = Arc::new(h);
        let root = h.root().to_path_buf();
        let opts = CreateOptions {
            chunkshape: Some(vec![CHUNK]),
            superchunksize: Some(3),
            // Eight Blosc blocks a chunk, so that short reads read blocks.
            compression: Compression {
                blocksize: 512,
                ..Default::default()
            },
            ..Default::default()
        };
        let mut ds = Dataset::create_in(h, &root, DType::F64, &[0], &opts).unwrap();
        for a in 0..4u64 {
            let n = ROWS / 4;
            let v: Vec<f64> = (a * n..(a + 1) * n).map(value).collect();
            ds.append(&ndarray::Array1::from(v).into_dyn().view())
                .unwrap();
        }
        drop(ds);
        let objects = all_objects(&store);
        let state = String::from_utf8(objects[&format!("{PREFIX}/meta/state")].clone()).unwrap();
        // The layout the mutations are meant to reach.
        assert!(state.contains("\"manifests\""), "{state}");
        assert!(state.contains("\"extents\""), "{state}");
        assert!(state.contains("\"blocks_object\""), "{state}");
        assert!(objects.keys().any(|k| k.ends_with(".blocks")));
        objects
    })
}

fn all_objects(store: &InMemory) -> BTreeMap<String, Vec<u8>> {
    use futures::TryStreamExt;
    let metas: Vec<_> = block_on(store.list(None).try_collect::<Vec<_>>()).unwrap();
    metas
        .into_iter()
        .map(|m| {
            let b = block_on(async { store.get(&m.location).await?.bytes().await }).unwrap();
            (m.location.to_string(), b.to_vec())
        })
        .collect()
}

/// How far a case got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The dataset did not open.
    RefusedAtOpen,
    /// It opened; the whole read failed.
    FailedLater,
    /// It opened and read whole.
    ReadWhole,
}

/// Puts `objects` in a fresh in-memory store, opens the dataset they hold, reads it whole
/// and at a few elements, verifies it and appends to it. Panics when values read without
/// an error are not the dataset's, or (with `must_read`) when a read fails.
pub fn exercise(objects: &BTreeMap<String, Vec<u8>>, must_read: bool) -> Outcome {
    let store = Arc::new(InMemory::new());
    for (k, v) in objects {
        block_on(store.put(&OPath::from(k.as_str()), PutPayload::from(v.clone()))).unwrap();
    }
    let s: Arc<dyn ObjectStore> = store.clone();
    let h = match ObjectStorage::new(s, PathBuf::from("memory://"), PREFIX) {
        Ok(h) => Arc::new(h),
        Err(_) => return Outcome::RefusedAtOpen,
    };
    let root = h.root().to_path_buf();
    let Ok(ds) = Dataset::open_in(h.clone(), &root, Mode::ReadOnly) else {
        return Outcome::RefusedAtOpen;
    };
    let mut n = Outcome::FailedLater;
    let rows = ds.shape()[0];
    let all = ds.read::<f64>();
    assert!(!must_read || all.is_ok(), "the read failed: {all:?}");
    if let Ok(all) = all {
        for (i, &x) in all.iter().enumerate().take(ROWS as usize) {
            assert!(
                x.to_bits() == value(i as u64).to_bits(),
                "element {i} read as {x} without an error, not {}",
                value(i as u64)
            );
        }
        n = Outcome::ReadWhole;
    }
    for i in [
        0,
        CHUNK - 1,
        CHUNK,
        7 * CHUNK + 77,
        ROWS - 1,
        rows.saturating_sub(1),
    ] {
        if i < rows.min(ROWS) {
            let x = ds.get::<f64>(&[i]);
            assert!(!must_read || x.is_ok(), "element {i} failed: {x:?}");
            if let Ok(x) = x {
                assert!(
                    x.to_bits() == value(i).to_bits(),
                    "element {i} read as {x} without an error"
                );
            }
        }
    }
    let _ = ds.verify(|_, _| {});
    drop(ds);
    if let Ok(mut ds) = Dataset::open_in(h, &root, Mode::ReadWrite) {
        let more = ndarray::Array1::from(vec![1.5f64; 150]).into_dyn();
        let _ = ds.append(&more.view());
    }
    n
}
