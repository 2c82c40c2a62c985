//! Arbitrary chunk payloads inside a small valid layer dataset held in memory: the data,
//! weight, row-group, index and filter chunks of the layer are replaced by fuzzer-chosen
//! bytes, compressed and stored with correct digests so that the reader's decoding (not the
//! digest check) meets them. Opening, walking, seeking, membership queries and verification
//! must return values or errors, never crash or allocate what a chunk claims.
//!
//! Input: edits `[file: u8][chunk: u8][len: u16 le][payload]`, repeated; bytes too few for
//! another edit are the query values.

#![no_main]

#[path = "../common/mod.rs"]
mod common;

use blz_format::blosc::{self, CompressParams};
use blz_format::blpk::{SuperchunkReader, SuperchunkWriter};
use blz::layer::{Layer, Value};
use blz::storage::{OpenMode, Storage};
use common::MemStorage;
use libfuzzer_sys::fuzz_target;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

struct Pristine {
    storage: MemStorage,
    root: PathBuf,
    /// The superchunk files under `data/`, sorted.
    files: Vec<PathBuf>,
}

fn pristine() -> &'static Pristine {
    static P: OnceLock<Pristine> = OnceLock::new();
    P.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("layer");
        common::write_layer(&root);
        let storage = MemStorage::load(dir.path());
        let files = storage
            .paths()
            .into_iter()
            .filter(|p| p.starts_with(root.join("data")))
            .collect();
        Pristine {
            storage,
            root,
            files,
        }
    })
}

/// Replaces chunk `k` (modulo the file's chunk count) of `path` by `payload`, compressed.
fn replace(storage: &MemStorage, path: &Path, k: u64, payload: &[u8]) -> Option<()> {
    let file = storage.open(path, OpenMode::ReadWrite).ok()?;
    let mut w = SuperchunkWriter::open(file.as_ref(), 0).ok()?;
    let n = w.nchunks();
    if n == 0 {
        return None;
    }
    let params = CompressParams {
        typesize: 1,
        ..CompressParams::default()
    };
    let chunk = blosc::compress(&params, payload).ok()?;
    let (_, writes) = w.plan_replace(k % n, chunk).ok()?;
    // A relocated chunk changes the offsets digest, written after its slot.
    let front = w.plan_seal().ok()?;
    for wr in writes.into_iter().chain(front) {
        file.write_at(wr.offset, &wr.data).unwrap();
    }
    Some(())
}

fn seeds() -> Vec<(String, Vec<u8>)> {
    // One edit per chunk: the chunk's own payload, so the starting inputs open cleanly and
    // the fuzzer mutates real index, filter and data chunks.
    let p = pristine();
    let mut out = Vec::new();
    for (fi, path) in p.files.iter().enumerate() {
        let file = p.storage.open(path, OpenMode::Read).unwrap();
        let r = SuperchunkReader::open(file).unwrap();
        for k in 0..r.nchunks() {
            let payload = r.decompress_chunk(k).unwrap();
            let mut input = vec![fi as u8, k as u8];
            input.extend_from_slice(&(payload.len() as u16).to_le_bytes());
            input.extend_from_slice(&payload);
            input.extend_from_slice(&(-11i64).to_le_bytes());
            out.push((format!("layer-{fi}-{k}"), input));
        }
    }
    out
}

fn queries(tail: &[u8]) -> Vec<Value> {
    let mut q = vec![Value::Int(-20), Value::Int(46), Value::Str("v1-x".into())];
    if let Some(b) = tail.get(..8) {
        let i = i64::from_le_bytes(b.try_into().unwrap());
        q.push(Value::Int(i));
        q.push(Value::UInt(i as u64));
        q.push(Value::Float(f64::from_bits(i as u64)));
    }
    q.push(Value::Str(String::from_utf8_lossy(tail).into_owned()));
    q.push(Value::Bytes(tail.to_vec()));
    q
}

fn walk(layer: &Layer, qs: &[Value]) {
    let mut c = layer.cursor();
    let mut steps = 0;
    if c.first() {
        loop {
            let _ = c.value();
            let _ = c.weight();
            if let Ok(Some(mut ch)) = c.child() {
                if ch.first() {
                    let _ = ch.value();
                    let _ = ch.weight();
                    let _ = ch.child();
                }
                if ch.last() {
                    let _ = ch.value();
                    let _ = ch.weight();
                }
                for q in qs {
                    let _ = ch.seek_ge(q);
                    let _ = ch.may_contain(q);
                    let _ = ch.contains(q);
                }
            }
            steps += 1;
            if steps > 64 || !c.next() {
                break;
            }
        }
    }
    if c.last() {
        let _ = c.value();
        let _ = c.prev();
        let _ = c.value();
    }
    for q in qs {
        let _ = c.seek_ge(q);
        let _ = c.value();
        let _ = c.seek_le(q);
        let _ = c.value();
        let _ = layer.may_contain(q);
        let _ = layer.contains(q);
    }
    for row in [0, 1, 7, 22, 40, u64::MAX] {
        if let Ok(mut g) = layer.group(1, row) {
            let _ = g.first();
            let _ = g.value();
        }
    }
}

fuzz_target!(|data: &[u8]| {
    common::write_seeds(seeds);
    let p = pristine();
    let storage = p.storage.snapshot();
    let mut rest = data;
    while rest.len() >= 4 {
        let (f, k) = (usize::from(rest[0]), u64::from(rest[1]));
        let len = usize::from(u16::from_le_bytes([rest[2], rest[3]]));
        let Some(payload) = rest.get(4..4 + len) else {
            break;
        };
        let _ = replace(&storage, &p.files[f % p.files.len()], k, payload);
        rest = &rest[4 + len..];
    }
    let storage: Arc<dyn Storage> = Arc::new(storage);
    let Ok(layer) = Layer::open_in(storage, &p.root) else {
        return;
    };
    let _ = layer.info();
    walk(&layer, &queries(rest));
    let _ = layer.verify();
    layer.clear_cache();
    walk(&layer, &queries(rest));
});
