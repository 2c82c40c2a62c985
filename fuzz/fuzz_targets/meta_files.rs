//! Arbitrary bytes as one meta file (`meta/storage`, `meta/sizes` or `meta/attributes`) of a
//! small valid array, table or layer dataset held in memory: opening it must return the
//! dataset or an error, never crash or allocate what the JSON claims; a dataset that opens
//! must answer small reads, and verify whatever size it claims, without crashing or running long.
//!
//! The first byte picks the dataset (array, table, layer) and the file; the rest replaces
//! the file. A fourth choice of file replaces `meta/storage` and `meta/sizes` together (the
//! rest split at its first zero byte), so that a superchunk size and a shape crafted to agree
//! (files that all exist, but hold far fewer chunks than claimed) reach the walks too.

#![no_main]

#[path = "../common/mod.rs"]
mod common;

use blz::array::CreateOptions;
use blz::layer::{Layer, Value};
use blz::storage::Storage;
use blz::table::{ColumnOptions, Field, Table, TableOptions, Values};
use blz::{DType, Dataset, Mode};
use common::MemStorage;
use libfuzzer_sys::fuzz_target;
use ndarray::{Slice, SliceInfoElem};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

const KINDS: [&str; 3] = ["array", "table", "layer"];
const FILES: [&str; 3] = ["storage", "sizes", "attributes"];

struct Pristine {
    storage: MemStorage,
    roots: Vec<PathBuf>,
}

fn pristine() -> &'static Pristine {
    static P: OnceLock<Pristine> = OnceLock::new();
    P.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let roots: Vec<PathBuf> = KINDS.iter().map(|k| dir.path().join(k)).collect();
        let mut attrs = serde_json::Map::new();
        attrs.insert("unit".into(), "m".into());

        let opts = CreateOptions {
            chunkshape: Some(vec![4, 3]),
            superchunksize: Some(2),
            attributes: attrs.clone(),
            ..Default::default()
        };
        let mut ds = Dataset::create_with(&roots[0], DType::F64, &[0, 3], &opts).unwrap();
        let v: Vec<u8> = (0..30).flat_map(|i| f64::from(i).to_ne_bytes()).collect();
        ds.append_bytes(&v, 10).unwrap();
        drop(ds);

        let fields = vec![
            Field::new("id", DType::I64),
            Field::varstr("name").with_options(ColumnOptions {
                chunklen: Some(3),
                ..Default::default()
            }),
            Field::structure(
                "pos",
                vec![Field::new("x", DType::F32), Field::new("y", DType::U8)],
            ),
        ];
        let topts = TableOptions {
            attributes: attrs,
            defaults: ColumnOptions {
                chunklen: Some(4),
                superchunksize: Some(2),
                ..Default::default()
            },
            ..Default::default()
        };
        let mut t = Table::create(&roots[1], fields, &topts).unwrap();
        let ids: Vec<i64> = (0..11).collect();
        let names: Vec<String> = ids.iter().map(|i| format!("n{i}")).collect();
        let xs: Vec<f32> = ids.iter().map(|&i| i as f32 / 2.0).collect();
        let ys: Vec<u8> = ids.iter().map(|&i| i as u8).collect();
        t.append(&[
            ("id", Values::from_slice(&ids)),
            ("name", Values::strings(&names)),
            ("pos/x", Values::from_slice(&xs)),
            ("pos/y", Values::from_slice(&ys)),
        ])
        .unwrap();
        drop(t);

        common::write_layer(&roots[2]);
        let storage = MemStorage::load(dir.path());
        // The lock files blz leaves are not part of a dataset's content.
        for r in &roots {
            storage.remove_file(&r.join("meta").join("lock")).unwrap();
        }
        Pristine { storage, roots }
    })
}

fn seeds() -> Vec<(String, Vec<u8>)> {
    let p = pristine();
    let mut out = Vec::new();
    let stride = FILES.len() + 1;
    for (ki, kind) in KINDS.iter().enumerate() {
        let meta = p.roots[ki].join("meta");
        for (fi, file) in FILES.iter().enumerate() {
            if let Some(bytes) = p.storage.get(&meta.join(file)) {
                let sel = (ki * stride + fi) as u8;
                out.push((format!("{kind}-{file}"), [&[sel][..], &bytes].concat()));
            }
        }
        if let (Some(st), Some(sz)) = (
            p.storage.get(&meta.join("storage")),
            p.storage.get(&meta.join("sizes")),
        ) {
            let sel = (ki * stride + FILES.len()) as u8;
            out.push((
                format!("{kind}-storage+sizes"),
                [&[sel][..], &st, &[0], &sz].concat(),
            ));
        }
    }
    out
}

/// Up to two elements along each axis.
fn small_selection(shape: &[u64]) -> Vec<SliceInfoElem> {
    shape
        .iter()
        .map(|&n| SliceInfoElem::from(Slice::from(0..n.min(2) as isize)))
        .collect()
}

fn exercise_array(ds: &Dataset) {
    let _ = ds.attrs();
    if let Ok(sel) = ds.resolve(&small_selection(ds.shape())) {
        let _ = ds.read_bytes(&sel);
    }
    // Whatever size `meta/sizes` claims: verify walks the files a listing shows.
    let _ = ds.verify(|_, _| {});
    let _ = ds.present_files();
}

fn exercise_table(t: &Table) {
    let _ = t.attrs();
    let end = t.nrows().min(5);
    for name in t.column_names() {
        let _ = t.column_rows(name, 0, end);
    }
    let _ = t.take(&[0, t.nrows().saturating_sub(1)], None);
    let _ = t.verify(|_, _| {});
}

fn exercise_layer(l: &Layer) {
    let _ = l.info();
    let mut c = l.cursor();
    if c.first() {
        for _ in 0..8 {
            let _ = c.value();
            let _ = c.weight();
            if let Ok(Some(mut ch)) = c.child() {
                if ch.last() {
                    let _ = ch.value();
                    let _ = ch.weight();
                }
            }
            if !c.next() {
                break;
            }
        }
    }
    let _ = c.seek_ge(&Value::Int(4));
    let _ = l.may_contain(&Value::Int(7));
    let _ = l.contains(&Value::Int(-20));
    if (0..l.ncolumns()).all(|i| l.rows(i) <= 256) {
        let _ = l.verify();
    }
}

fuzz_target!(|data: &[u8]| {
    common::write_seeds(seeds);
    let Some((&sel, bytes)) = data.split_first() else {
        return;
    };
    let sel = usize::from(sel) % (KINDS.len() * (FILES.len() + 1));
    let (kind, file) = (sel / (FILES.len() + 1), sel % (FILES.len() + 1));
    let p = pristine();
    let storage = p.storage.snapshot();
    let root: &Path = &p.roots[kind];
    let meta = root.join("meta");
    if let Some(name) = FILES.get(file) {
        storage.put(&meta.join(name), bytes.to_vec());
    } else {
        let cut = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        storage.put(&meta.join("storage"), bytes[..cut].to_vec());
        storage.put(
            &meta.join("sizes"),
            bytes.get(cut + 1..).unwrap_or(&[]).to_vec(),
        );
    }
    let storage: Arc<dyn Storage> = Arc::new(storage);
    match kind {
        0 => {
            if let Ok(ds) = Dataset::open_in(storage, root, Mode::ReadOnly) {
                exercise_array(&ds);
            }
        }
        1 => {
            if let Ok(t) = Table::open_in(storage, root, Mode::ReadOnly) {
                exercise_table(&t);
            }
        }
        _ => {
            if let Ok(l) = Layer::open_in(storage, root) {
                exercise_layer(&l);
            }
        }
    }
});
