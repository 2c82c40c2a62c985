//! blz's layer datasets against Feldera's own layer files (the `dbsp` crate's
//! `storage::file`), on the same sorted data, in one process, one after the other:
//!
//! - WSet `(u64 key -> i64 weight)`: keys `3i`, weights `i % 7 - 3`, `--rows` rows;
//! - IndexedZSet `(u64 key) -> (u64 value, i64 weight)`: `--rows / 4` keys `3i`, each owning
//!   4 values `5j + i % 5` (`--rows` rows in column 2).
//!
//! For each: build throughput (rows/s, the file closed and on disk), bytes per row, 1e5
//! random seeks (half present keys, half absent ones, each from a fresh cursor), 1e5
//! membership questions through the filter (the absent keys' false positives counted), a
//! full scan summing the weights, and a consolidating merge of two such files (for dbsp: a
//! merge of its two cursors into a new `Writer1`/`Writer2`, adding weights, as its merger
//! does; for blz: `blz::layer::merge`). Prints one JSON object per line.
//!
//!   cargo run --release --manifest-path benches/dbsp_peer/Cargo.toml -- --rows 10000000

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use blz::DType;
use blz::layer::{FilterSetting, Layer, LayerSchema, LayerWriter, Numbers, Value};
use dbsp::dynamic::{DowncastTrait, DynData, Erase};
use dbsp::storage::backend::StorageBackend;
use dbsp::storage::buffer_cache::BufferCache;
use dbsp::storage::file::format::BatchMetadata;
use dbsp::storage::file::reader::Reader;
use dbsp::storage::file::writer::{Parameters, Writer1, Writer2};
use dbsp::storage::file::{Factories, FilterPlan};
use dbsp::trace::BatchFilters;
use feldera_types::config::{StorageConfig, StorageOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const PROBES: usize = 100_000;
const GROUP: u64 = 4;
/// Paths per `push_columns` call in blz's builds.
const BATCH: usize = 65536;

fn cache() -> Option<Arc<BufferCache>> {
    thread_local! {
        static CACHE: Arc<BufferCache> = Arc::new(BufferCache::new(256 << 20));
    }
    Some(CACHE.with(|c| c.clone()))
}

fn dir_bytes(p: &Path) -> u64 {
    let mut total = 0;
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let m = e.metadata().unwrap();
            total += if m.is_dir() {
                dir_bytes(&e.path())
            } else {
                m.len()
            };
        }
    }
    total
}

fn backend(dir: &Path) -> Arc<dyn StorageBackend> {
    <dyn StorageBackend>::new(
        &StorageConfig {
            path: dir.to_string_lossy().to_string(),
            cache: Default::default(),
        },
        &StorageOptions::default(),
    )
    .unwrap()
}

fn weight(i: u64) -> i64 {
    (i % 7) as i64 - 3
}

/// Probe keys: even probes present (`3j`), odd ones absent (`3j + 1`).
fn probes(nkeys: u64) -> Vec<u64> {
    let mut rng = StdRng::seed_from_u64(26);
    (0..PROBES)
        .map(|p| 3 * rng.gen_range(0..nkeys) + (p % 2) as u64)
        .collect()
}

fn report(peer: &str, shape: &str, what: &str, rows: u64, secs: f64, extra: serde_json::Value) {
    let mut o = serde_json::json!({
        "peer": peer, "shape": shape, "what": what, "rows": rows, "secs": secs,
        "rows_per_sec": rows as f64 / secs,
    });
    if let (Some(o), Some(e)) = (o.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    println!("{o}");
}

// ---- dbsp -----------------------------------------------------------------------------------

type R1 = Reader<(&'static DynData, &'static DynData, ())>;
type R2 = Reader<(
    &'static DynData,
    &'static DynData,
    (&'static DynData, &'static DynData, ()),
)>;

struct DbspWset {
    reader: R1,
    filters: BatchFilters<DynData>,
    _keep: Box<dyn std::any::Any>,
}

fn dbsp_build_wset(
    dir: &Path,
    rows: impl Iterator<Item = (u64, i64)>,
    n: u64,
    filter: bool,
) -> (DbspWset, f64, u64) {
    let b = backend(dir);
    let factories = Factories::<DynData, DynData>::new::<u64, i64>();
    let t = Instant::now();
    let key_filter = if filter {
        FilterPlan::<DynData>::decide_filter(None, n as usize)
    } else {
        None
    };
    let mut w = Writer1::new(&factories, cache, &*b, Parameters::default(), key_filter).unwrap();
    for (k, r) in rows {
        w.write0((k.erase(), r.erase())).unwrap();
    }
    let (reader, filters) = w.into_reader(BatchMetadata::default()).unwrap();
    let secs = t.elapsed().as_secs_f64();
    let bytes = reader.byte_size().unwrap();
    (
        DbspWset {
            reader,
            filters,
            _keep: Box::new(b),
        },
        secs,
        bytes,
    )
}

fn dbsp_wset(dir: &Path, n: u64, filter: bool) {
    let name = if filter { "dbsp (filter)" } else { "dbsp" };
    let (f, secs, bytes) = dbsp_build_wset(dir, (0..n).map(|i| (3 * i, weight(i))), n, filter);
    report(
        name,
        "wset",
        "build",
        n,
        secs,
        serde_json::json!({"bytes": bytes, "bytes_per_row": bytes as f64 / n as f64}),
    );
    let rows = f.reader.rows();
    let keys = probes(n);
    let t = Instant::now();
    let mut found = 0u64;
    for k in &keys {
        let mut c = unsafe { rows.first() }.unwrap();
        unsafe { c.advance_to_value_or_larger(k.erase()) }.unwrap();
        if c.key().map(|x| *unsafe { x.downcast::<u64>() }) == Some(*k) {
            found += 1;
        }
    }
    report(
        name,
        "wset",
        "seek",
        keys.len() as u64,
        t.elapsed().as_secs_f64(),
        serde_json::json!({"found": found}),
    );
    if filter {
        let t = Instant::now();
        let mut pos = [0u64; 2];
        for (p, k) in keys.iter().enumerate() {
            if f.filters.maybe_contains_key(k.erase(), None) {
                pos[p % 2] += 1;
            }
        }
        report(
            name,
            "wset",
            "filter",
            keys.len() as u64,
            t.elapsed().as_secs_f64(),
            serde_json::json!({"present_passed": pos[0], "absent_passed": pos[1]}),
        );
    }
    let t = Instant::now();
    let mut c = unsafe { rows.first() }.unwrap();
    let (mut sum, mut count, mut w) = (0i64, 0u64, 0i64);
    while c.has_value() {
        unsafe { c.aux(w.erase_mut()) };
        sum += w;
        count += 1;
        unsafe { c.move_next() }.unwrap();
    }
    report(
        name,
        "wset",
        "scan",
        count,
        t.elapsed().as_secs_f64(),
        serde_json::json!({"weight_sum": sum}),
    );
    if filter {
        return;
    }
    // Merge with a second file: keys 3i + 1.5 steps apart overlap half of the first's.
    let (g, _, _) = dbsp_build_wset(
        &dir.join("b"),
        (0..n).map(|i| (3 * (i + n / 2), -weight(i + n / 2) + 1)),
        n,
        false,
    );
    let b = backend(&dir.join("m"));
    let factories = Factories::<DynData, DynData>::new::<u64, i64>();
    let t = Instant::now();
    let mut out = Writer1::new(&factories, cache, &*b, Parameters::default(), None).unwrap();
    let (ra, rb) = (f.reader.rows(), g.reader.rows());
    let mut a = unsafe { ra.first() }.unwrap();
    let mut bb = unsafe { rb.first() }.unwrap();
    let (mut wa, mut wb, mut written) = (0i64, 0i64, 0u64);
    loop {
        let ka = a.key().map(|x| *unsafe { x.downcast::<u64>() });
        let kb = bb.key().map(|x| *unsafe { x.downcast::<u64>() });
        let (k, r) = match (ka, kb) {
            (None, None) => break,
            (Some(x), Some(y)) if x == y => {
                unsafe { a.aux(wa.erase_mut()) };
                unsafe { bb.aux(wb.erase_mut()) };
                unsafe { a.move_next() }.unwrap();
                unsafe { bb.move_next() }.unwrap();
                (x, wa + wb)
            }
            (Some(x), y) if y.is_none_or(|y| x < y) => {
                unsafe { a.aux(wa.erase_mut()) };
                unsafe { a.move_next() }.unwrap();
                (x, wa)
            }
            (_, Some(y)) => {
                unsafe { bb.aux(wb.erase_mut()) };
                unsafe { bb.move_next() }.unwrap();
                (y, wb)
            }
            _ => unreachable!(),
        };
        if r != 0 {
            out.write0((k.erase(), r.erase())).unwrap();
            written += 1;
        }
    }
    let (m, _) = out.into_reader(BatchMetadata::default()).unwrap();
    report(
        name,
        "wset",
        "merge",
        2 * n,
        t.elapsed().as_secs_f64(),
        serde_json::json!({"rows_out": written, "bytes": m.byte_size().unwrap()}),
    );
}

fn dbsp_build_izset(dir: &Path, nkeys: u64, shift: u64) -> (R2, Box<dyn std::any::Any>, f64, u64) {
    let b = backend(dir);
    let f0 = Factories::<DynData, DynData>::new::<u64, ()>();
    let f1 = Factories::<DynData, DynData>::new::<u64, i64>();
    let t = Instant::now();
    let mut w = Writer2::new(&f0, &f1, cache, &*b, Parameters::default(), None).unwrap();
    for i in shift..shift + nkeys {
        for j in 0..GROUP {
            let (v, r) = (5 * j + i % 5, weight(i + j));
            w.write1((v.erase(), r.erase())).unwrap();
        }
        w.write0(((3 * i).erase(), ().erase())).unwrap();
    }
    let (reader, _) = w.into_reader(BatchMetadata::default()).unwrap();
    let secs = t.elapsed().as_secs_f64();
    let bytes = reader.byte_size().unwrap();
    (reader, Box::new(b), secs, bytes)
}

fn dbsp_izset(dir: &Path, n: u64) {
    let nkeys = n / GROUP;
    let (reader, _keep, secs, bytes) = dbsp_build_izset(dir, nkeys, 0);
    report(
        "dbsp",
        "indexed_zset",
        "build",
        n,
        secs,
        serde_json::json!({"bytes": bytes, "bytes_per_row": bytes as f64 / n as f64}),
    );
    let rows = reader.rows();
    let keys = probes(nkeys);
    let t = Instant::now();
    let (mut found, mut vals) = (0u64, 0u64);
    for k in &keys {
        let mut c = unsafe { rows.first() }.unwrap();
        unsafe { c.advance_to_value_or_larger(k.erase()) }.unwrap();
        if c.key().map(|x| *unsafe { x.downcast::<u64>() }) == Some(*k) {
            found += 1;
            let g = c.next_column().unwrap();
            vals += g.len();
        }
    }
    report(
        "dbsp",
        "indexed_zset",
        "seek",
        keys.len() as u64,
        t.elapsed().as_secs_f64(),
        serde_json::json!({"found": found, "values": vals}),
    );
    let t = Instant::now();
    let mut c = unsafe { rows.first() }.unwrap();
    let (mut sum, mut count, mut w, mut v) = (0i64, 0u64, 0i64, 0u64);
    while c.has_value() {
        let g = c.next_column().unwrap();
        let mut d = unsafe { g.first() }.unwrap();
        while d.has_value() {
            unsafe { d.item((v.erase_mut(), w.erase_mut())) };
            sum += w + v as i64;
            count += 1;
            unsafe { d.move_next() }.unwrap();
        }
        unsafe { c.move_next() }.unwrap();
    }
    report(
        "dbsp",
        "indexed_zset",
        "scan",
        count,
        t.elapsed().as_secs_f64(),
        serde_json::json!({"checksum": sum}),
    );
}

// ---- blz ------------------------------------------------------------------------------------

/// blz's name in the report: with its filters (the default) or without, as dbsp's default.
fn blz_name(filter: bool) -> &'static str {
    if filter { "blz" } else { "blz (no filter)" }
}

/// `schema` with every column's filter off unless `filter`.
fn filtered(mut schema: LayerSchema, filter: bool) -> LayerSchema {
    if !filter {
        for c in &mut schema.columns {
            c.filter = FilterSetting::Off;
        }
    }
    schema
}

fn blz_wset_schema(filter: bool) -> LayerSchema {
    filtered(LayerSchema::wset(DType::U64, DType::I64), filter)
}

fn blz_build_wset(
    path: &Path,
    rows: impl Iterator<Item = (u64, i64)>,
    filter: bool,
) -> (f64, u64) {
    let t = Instant::now();
    let mut w = LayerWriter::create(path, blz_wset_schema(filter)).unwrap();
    // Typed columns of numbers, BATCH paths at a time (`push` takes one `Value` path).
    let (mut ks, mut rs) = (Vec::with_capacity(BATCH), Vec::with_capacity(BATCH));
    let mut flush = |ks: &mut Vec<u64>, rs: &mut Vec<i64>| {
        w.push_columns(&[Numbers::U64(ks)], Some(Numbers::I64(rs))).unwrap();
        ks.clear();
        rs.clear();
    };
    for (k, r) in rows {
        ks.push(k);
        rs.push(r);
        if ks.len() == BATCH {
            flush(&mut ks, &mut rs);
        }
    }
    flush(&mut ks, &mut rs);
    w.finish().unwrap();
    (t.elapsed().as_secs_f64(), dir_bytes(path))
}

fn blz_wset(dir: &Path, n: u64, filter: bool) {
    let name = blz_name(filter);
    let path = dir.join("a.blz");
    let (secs, bytes) = blz_build_wset(&path, (0..n).map(|i| (3 * i, weight(i))), filter);
    report(
        name,
        "wset",
        "build",
        n,
        secs,
        serde_json::json!({"bytes": bytes, "bytes_per_row": bytes as f64 / n as f64}),
    );
    let layer = Layer::open(&path).unwrap();
    let keys = probes(n);
    let t = Instant::now();
    let mut found = 0u64;
    for k in &keys {
        let mut c = layer.cursor();
        if c.seek_ge(&Value::UInt(*k)).unwrap() && c.value().unwrap() == Some(Value::UInt(*k)) {
            found += 1;
        }
    }
    report(
        name,
        "wset",
        "seek",
        keys.len() as u64,
        t.elapsed().as_secs_f64(),
        serde_json::json!({"found": found}),
    );
    if filter {
        let t = Instant::now();
        let mut pos = [0u64; 2];
        for (p, k) in keys.iter().enumerate() {
            if layer.may_contain(&Value::UInt(*k)).unwrap() {
                pos[p % 2] += 1;
            }
        }
        report(
            name,
            "wset",
            "filter",
            keys.len() as u64,
            t.elapsed().as_secs_f64(),
            serde_json::json!({"present_passed": pos[0], "absent_passed": pos[1]}),
        );
    }
    let t = Instant::now();
    let mut c = layer.cursor();
    let (mut sum, mut count) = (0i64, 0u64);
    let mut ok = c.first();
    while ok {
        if let Some(Value::Int(w)) = c.weight().unwrap() {
            sum += w;
        }
        count += 1;
        ok = c.next();
    }
    report(
        name,
        "wset",
        "scan",
        count,
        t.elapsed().as_secs_f64(),
        serde_json::json!({"weight_sum": sum}),
    );
    let pb = dir.join("b.blz");
    blz_build_wset(
        &pb,
        (0..n).map(|i| (3 * (i + n / 2), -weight(i + n / 2) + 1)),
        filter,
    );
    let b = Layer::open(&pb).unwrap();
    let t = Instant::now();
    let rep =
        blz::layer::merge(&[&layer, &b], &dir.join("m.blz"), blz_wset_schema(filter)).unwrap();
    report(
        name,
        "wset",
        "merge",
        2 * n,
        t.elapsed().as_secs_f64(),
        serde_json::json!({"report": format!("{rep:?}"), "bytes": dir_bytes(&dir.join("m.blz"))}),
    );
}

fn blz_izset(dir: &Path, n: u64, filter: bool) {
    let name = blz_name(filter);
    let nkeys = n / GROUP;
    let path = dir.join("iz.blz");
    let schema = filtered(
        LayerSchema::indexed_zset(DType::U64, DType::U64, DType::I64),
        filter,
    );
    let t = Instant::now();
    let mut w = LayerWriter::create(&path, schema).unwrap();
    let (mut ks, mut vs, mut rs) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..nkeys {
        for j in 0..GROUP {
            ks.push(3 * i);
            vs.push(5 * j + i % 5);
            rs.push(weight(i + j));
        }
        if ks.len() >= BATCH || i + 1 == nkeys {
            w.push_columns(&[Numbers::U64(&ks), Numbers::U64(&vs)], Some(Numbers::I64(&rs)))
                .unwrap();
            ks.clear();
            vs.clear();
            rs.clear();
        }
    }
    w.finish().unwrap();
    let bytes = dir_bytes(&path);
    report(
        name,
        "indexed_zset",
        "build",
        n,
        t.elapsed().as_secs_f64(),
        serde_json::json!({"bytes": bytes, "bytes_per_row": bytes as f64 / n as f64}),
    );
    let layer = Layer::open(&path).unwrap();
    let keys = probes(nkeys);
    let t = Instant::now();
    let (mut found, mut vals) = (0u64, 0u64);
    for k in &keys {
        let mut c = layer.cursor();
        if c.seek_ge(&Value::UInt(*k)).unwrap() && c.value().unwrap() == Some(Value::UInt(*k)) {
            found += 1;
            vals += c.child().unwrap().map_or(0, |g| g.count());
        }
    }
    report(
        name,
        "indexed_zset",
        "seek",
        keys.len() as u64,
        t.elapsed().as_secs_f64(),
        serde_json::json!({"found": found, "values": vals}),
    );
    let t = Instant::now();
    let mut c = layer.cursor();
    let (mut sum, mut count) = (0i64, 0u64);
    let mut ok = c.first();
    while ok {
        let mut g = c.child().unwrap().expect("column 2");
        let mut more = g.first();
        while more {
            if let (Some(Value::UInt(v)), Some(Value::Int(w))) =
                (g.value().unwrap(), g.weight().unwrap())
            {
                sum += w + v as i64;
            }
            count += 1;
            more = g.next();
        }
        ok = c.next();
    }
    report(
        name,
        "indexed_zset",
        "scan",
        count,
        t.elapsed().as_secs_f64(),
        serde_json::json!({"checksum": sum}),
    );
}

fn main() {
    let mut n: u64 = 10_000_000;
    let mut only: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--rows" => n = args.next().and_then(|v| v.parse().ok()).expect("--rows N"),
            "--only" => only = args.next(),
            _ => panic!("usage: dbsp_peer [--rows N] [--only wset|indexed_zset]"),
        }
    }
    let base: PathBuf =
        std::env::var_os("BLZ_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
    let run = |what: &str| only.as_deref().is_none_or(|o| o == what);
    if run("wset") {
        for filter in [false, true] {
            let d = tempfile::tempdir_in(&base).unwrap();
            dbsp_wset(d.path(), n, filter);
        }
        for filter in [false, true] {
            let d = tempfile::tempdir_in(&base).unwrap();
            blz_wset(d.path(), n, filter);
        }
    }
    if run("indexed_zset") {
        let d = tempfile::tempdir_in(&base).unwrap();
        dbsp_izset(d.path(), n);
        for filter in [false, true] {
            let d = tempfile::tempdir_in(&base).unwrap();
            blz_izset(d.path(), n, filter);
        }
    }
}
