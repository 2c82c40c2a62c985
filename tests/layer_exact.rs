//! Exact (Roaring bitmap) filters of integer columns: against a `BTreeSet` model for every
//! integer width, extremes included (no false positive, no false negative, no data chunk
//! read); the automatic choice between exact and Bloom filters; refusals; damaged filter
//! bytes give typed errors naming the file and chunk, never a panic.

mod common;

use blz::blpk::Checksum;
use blz::layer::{
    ColumnDef, FilterKind, FilterSetting, Layer, LayerSchema, LayerWriter, LeafKind, Value,
};
use blz::storage::{LocalStorage, OpenMode, Storage};
use blz::{DType, Error};
use blz_format::blpk::SuperchunkReader;
use proptest::prelude::*;
use std::collections::BTreeSet;
use std::path::Path;

const INTS: [DType; 8] = [
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::U64,
];

fn signed(d: DType) -> bool {
    matches!(d, DType::I8 | DType::I16 | DType::I32 | DType::I64)
}

/// A model value of dtype `d` from raw bits: signed values as i128 in range, unsigned too.
fn fit(d: DType, x: u64) -> i128 {
    let bits = 8 * d.itemsize() as u32;
    if signed(d) {
        i128::from((x as i64) >> (64 - bits))
    } else {
        i128::from(x >> (64 - bits))
    }
}

fn extremes(d: DType) -> [i128; 5] {
    let bits = 8 * d.itemsize() as u32;
    if signed(d) {
        let max = (1i128 << (bits - 1)) - 1;
        [-max - 1, -max, -1, 0, max]
    } else {
        let max = (1i128 << bits) - 1;
        [0, 1, max / 2, max - 1, max]
    }
}

fn value(d: DType, x: i128) -> Value {
    if signed(d) {
        Value::Int(x as i64)
    } else {
        Value::UInt(x as u64)
    }
}

fn build(path: &Path, kind: LeafKind, fk: FilterKind, values: &[Value], chunklen: u64) -> Layer {
    let schema = LayerSchema::new(vec![ColumnDef::new("k", kind)
        .with_chunklen(chunklen)
        .with_filter_kind(fk)]);
    let mut w = LayerWriter::create(path, schema).unwrap();
    for v in values {
        w.push(std::slice::from_ref(v), None).unwrap();
    }
    w.finish().unwrap();
    Layer::open(path).unwrap()
}

proptest! {
    #![proptest_config(common::config(48))]

    /// Exact filters answer membership exactly, from the index and the filter alone.
    #[test]
    fn exact_filters_match_a_btreeset(
        d in 0usize..8,
        raw in prop::collection::vec(any::<u64>(), 0..200),
        run in (any::<u64>(), 0u64..600),
        with_extremes in any::<bool>(),
        probes in prop::collection::vec(any::<u64>(), 0..200),
        chunklen in prop::sample::select(vec![7u64, 64, 8192]),
    ) {
        let d = INTS[d];
        let mut set: BTreeSet<i128> = raw.iter().map(|&x| fit(d, x)).collect();
        let start = fit(d, run.0);
        let hi = extremes(d)[4];
        set.extend((0..run.1 as i128).map(|i| start + i).filter(|&v| v <= hi));
        if with_extremes {
            set.extend(extremes(d));
        }
        let dir = tempfile::tempdir().unwrap();
        let values: Vec<Value> = set.iter().map(|&x| value(d, x)).collect();
        let layer = build(&dir.path().join("l.blz"), LeafKind::Fixed(d), FilterKind::Exact, &values, chunklen);
        let info = layer.info();
        let f = &info["columns"][0]["filter"];
        prop_assert_eq!(f["kind"].as_str(), Some("exact"));
        prop_assert_eq!(&f["exact_chunks"], &f["chunks"]);
        let mut asks: BTreeSet<i128> = probes.iter().map(|&x| fit(d, x)).collect();
        asks.extend(extremes(d));
        for &x in &set {
            asks.extend([x - 1, x, x + 1].into_iter().filter(|v| (extremes(d)[0]..=hi).contains(v)));
        }
        layer.reset_stats();
        for &x in &asks {
            let v = value(d, x);
            let want = set.contains(&x);
            prop_assert_eq!(layer.may_contain(&v).unwrap(), want, "may_contain {}", x);
            prop_assert_eq!(layer.contains(&v).unwrap(), want, "contains {}", x);
        }
        prop_assert_eq!(layer.stats().data_chunks, 0);
        prop_assert!(layer.verify().is_empty());
    }
}

#[test]
fn auto_picks_exact_for_dense_keys_and_bloom_for_sparse_ones() {
    let dir = tempfile::tempdir().unwrap();
    let dense: Vec<Value> = (0..100_000i64).map(Value::Int).collect();
    let mut sparse: Vec<u64> = (0..100_000u64)
        .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i << 7))
        .collect();
    sparse.sort_unstable();
    sparse.dedup();
    let sparse: Vec<Value> = sparse.into_iter().map(Value::UInt).collect();
    let kind = LeafKind::Fixed;
    let filter_of = |l: &Layer| l.info()["columns"][0]["filter"].clone();

    let l = build(
        &dir.path().join("d"),
        kind(DType::I64),
        FilterKind::Auto,
        &dense,
        8192,
    );
    let f = filter_of(&l);
    assert_eq!(f["kind"], "auto");
    assert_eq!(f["chunks"], 2);
    assert_eq!(f["exact_chunks"], 2);
    let exact_bytes = f["bytes"].as_u64().unwrap();
    // Two runs of 65536 and 34464 values: a few dozen bytes, plus blosc headers and digests.
    assert!(exact_bytes < 200, "{f}");
    let lb = build(
        &dir.path().join("db"),
        kind(DType::I64),
        FilterKind::Bloom,
        &dense,
        8192,
    );
    let fb = filter_of(&lb);
    assert_eq!(fb["kind"], "bloom");
    assert_eq!(fb["exact_chunks"], 0);
    assert!(fb["bytes"].as_u64().unwrap() > 250_000, "{fb}");

    let l = build(
        &dir.path().join("s"),
        kind(DType::U64),
        FilterKind::Auto,
        &sparse,
        8192,
    );
    let f = filter_of(&l);
    assert_eq!(f["exact_chunks"], 0, "{f}");
    assert_eq!(f["chunks"], 2);
    // Forced, the sparse keys still give an exact filter, just a larger one.
    let le = build(
        &dir.path().join("se"),
        kind(DType::U64),
        FilterKind::Exact,
        &sparse,
        8192,
    );
    let fe = filter_of(&le);
    assert_eq!(fe["exact_chunks"], 2);
    assert!(fe["bytes"].as_u64() > f["bytes"].as_u64(), "{fe} vs {f}");
    for v in sparse.iter().step_by(997) {
        assert!(le.contains(v).unwrap() && l.contains(v).unwrap());
    }
    assert!(!le.may_contain(&Value::UInt(1)).unwrap());

    // Auto on a column that is not an integer is Bloom; exact is refused.
    let schema = |fk| {
        LayerSchema::new(vec![
            ColumnDef::new("s", LeafKind::VarStr).with_filter_kind(fk)
        ])
    };
    let l = LayerWriter::create(dir.path().join("t"), schema(FilterKind::Auto)).unwrap();
    assert_eq!(
        l.storage_meta().columns[0].filter.unwrap().kind,
        FilterKind::Bloom
    );
    drop(l);
    let e = LayerWriter::create(dir.path().join("u"), schema(FilterKind::Exact))
        .err()
        .unwrap();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("exact filter needs an integer column")),
        "{e}"
    );
    let e = LayerSchema::new(vec![
        ColumnDef::new("f", kind(DType::F64)).with_filter_kind(FilterKind::Exact)
    ])
    .to_storage()
    .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)));
    // Off stays off whatever the kind.
    let m = LayerSchema::new(vec![ColumnDef::new("k", kind(DType::I64))
        .with_filter(FilterSetting::Off)
        .with_filter_kind(FilterKind::Exact)])
    .to_storage()
    .unwrap();
    assert!(m.columns[0].filter.is_none());
}

#[test]
fn merges_choose_filters_the_same_way() {
    let dir = tempfile::tempdir().unwrap();
    let evens: Vec<Value> = (0..70_000i64).map(|i| Value::Int(2 * i)).collect();
    let odds: Vec<Value> = (0..70_000i64).map(|i| Value::Int(2 * i + 1)).collect();
    let k = LeafKind::Fixed(DType::I64);
    drop(build(
        &dir.path().join("a"),
        k,
        FilterKind::Auto,
        &evens,
        8192,
    ));
    drop(build(
        &dir.path().join("b"),
        k,
        FilterKind::Auto,
        &odds,
        8192,
    ));
    let out = dir.path().join("m");
    Layer::merge(&[dir.path().join("a"), dir.path().join("b")], &out, false).unwrap();
    let m = Layer::open(&out).unwrap();
    let f = &m.info()["columns"][0]["filter"];
    assert_eq!(f["kind"], "auto");
    assert_eq!(f["chunks"], 3);
    assert_eq!(f["exact_chunks"], 3, "{f}");
    m.reset_stats();
    for i in (0..140_000i64).step_by(101) {
        assert!(m.contains(&Value::Int(i)).unwrap());
    }
    assert!(!m.contains(&Value::Int(140_000)).unwrap());
    assert!(!m.contains(&Value::Int(-1)).unwrap());
    assert_eq!(m.stats().data_chunks, 0);
}

/// Stored bytes of chunk `k` of the superchunk file `file`: (offset of the payload, length).
/// Filter chunks are stored uncompressed (blosc's memcpy flag), so the payload follows the
/// 16-byte chunk header.
fn payload_span(file: &Path, k: u64) -> (u64, u64) {
    let r = SuperchunkReader::open(LocalStorage.open(file, OpenMode::Read).unwrap()).unwrap();
    let off = r.layout().offsets[k as usize];
    let len = u64::from(r.chunk_info(k).unwrap().header.cbytes);
    (off + 16, len - 16)
}

fn xor_at(file: &Path, at: u64, x: u8) {
    let f = LocalStorage.open(file, OpenMode::ReadWrite).unwrap();
    let mut b = [0u8];
    f.read_at(at, &mut b).unwrap();
    f.write_at(at, &[b[0] ^ x]).unwrap();
    f.sync().unwrap();
}

#[test]
fn damaged_exact_filters_are_typed_errors_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let clean = dir.path().join("clean");
    // No digests, so that damaged bytes reach the filter's parser.
    let values: Vec<Value> = (0..2000i64)
        .filter(|i| i % 3 != 0)
        .map(|i| Value::Int(i * 5))
        .chain((10_000..20_000).map(Value::Int))
        .collect();
    let mut c =
        ColumnDef::new("k", LeafKind::Fixed(DType::I64)).with_filter_kind(FilterKind::Exact);
    c.checksum = Checksum::None;
    let mut w = LayerWriter::create(&clean, LayerSchema::new(vec![c])).unwrap();
    for v in &values {
        w.push(std::slice::from_ref(v), None).unwrap();
    }
    w.finish().unwrap();
    let file = Path::new("data/k/filter/__1__.bin");
    let (_, len) = payload_span(&clean.join(file), 0);
    let mut typed = 0;
    // Every byte of the headers, then a sample of the containers.
    for pos in (0..len.min(64)).chain((64..len).step_by(97)) {
        for x in [0x01u8, 0x80, 0xff] {
            let copy = dir.path().join("copy");
            let _ = std::fs::remove_dir_all(&copy);
            common::copy_dir(&clean, &copy);
            let (at, _) = payload_span(&copy.join(file), 0);
            xor_at(&copy.join(file), at + pos, x);
            let layer = Layer::open(&copy).unwrap();
            let mut errs = layer.verify();
            for v in [0i64, 5, 10, 15, 9999, 10_000, 15_000, 19_999] {
                if let Err(e) = layer.contains(&Value::Int(v)) {
                    errs.push(e);
                }
            }
            for e in &errs {
                match e {
                    // The filter chunk, or (from verify) a data chunk the damaged filter
                    // no longer covers.
                    Error::InvalidChunk { path, chunk, .. } => {
                        if path.ends_with(file) {
                            assert_eq!(*chunk, 0, "{e}");
                        } else {
                            assert!(path.ends_with("data/k/__1__.bin"), "{e}");
                        }
                        typed += 1;
                    }
                    other => panic!("byte {pos} ^ {x:#x}: unexpected {other}"),
                }
            }
            // The header (mark, form, key count, base) and the Roaring cookie are always caught.
            if pos < 28 {
                assert!(!errs.is_empty(), "byte {pos} ^ {x:#x} went unnoticed");
            }
        }
    }
    assert!(typed > 0);
}
