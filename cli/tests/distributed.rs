//! blz on a distributed filesystem: create, append, read, modify, shrink and verify arrays
//! and tables, build, read, seek in, replace and verify layer datasets, locate their
//! superchunk files, scan them, and run `blz locate`/`blz scan`/`blz layer`.
//!
//! The same test body runs twice:
//! * on a local temporary directory (always), where every file is on one local device;
//! * on a GlusterFS mount named by the environment variable `BLZ_GLUSTER_MOUNT`, where the
//!   superchunk files must be spread over all three bricks of the test volume. When the
//!   variable is unset that test prints a note and passes without doing anything.
//!   `tests/gluster/run.sh` (called by `.ci/run`) always sets it, after
//!   `tests/gluster/setup.sh` has brought the volume up, so in CI it always runs.
//!
//! When `BLZ_GLUSTER_MOUNT2` names a second client mount of the same volume, every state is
//! also read back through that mount right after it is written, which checks that another
//! client never sees stale data (see the README section "Running on a distributed filesystem" for the mount options this
//! needs).

mod common;

use blz::layer::{
    ColumnDef, Cursor, FilterSetting, Layer, LayerSchema, LayerSizes, LayerWriter, Value,
};
use blz::locate::{group_by_location, locate_dataset, locate_file, LocationKind};
use blz::scan::{reduce, reduce_column, scan, Reduction, Scalar, ScanOptions};
use blz::table::{ColumnOptions, Field, LeafKind, Table, TableOptions, Values};
use blz::{CreateOptions, DType, Dataset, Error};
use common::{flip_byte_in_chunk, ok as blz, run};
use ndarray::{s, Array1, Array2, ArrayD, Axis};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A small deterministic generator (no external randomness in tests).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
    fn f64(&mut self) -> f64 {
        self.next() as f64 / (1u64 << 31) as f64 - 0.5
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * (1.0 + a.abs().max(b.abs()))
}

/// Where a second client sees `p` (same relative path under `BLZ_GLUSTER_MOUNT2`).
fn second_view(p: &Path) -> Option<PathBuf> {
    let m1 = PathBuf::from(std::env::var_os("BLZ_GLUSTER_MOUNT")?);
    let m2 = std::env::var_os("BLZ_GLUSTER_MOUNT2")?;
    Some(PathBuf::from(m2).join(p.strip_prefix(m1).ok()?))
}

/// Checks the plain dataset at `p` (and through the second mount) against the model.
fn check_plain(p: &Path, model: &[f64], what: &str) {
    let mut paths = vec![p.to_path_buf()];
    paths.extend(second_view(p));
    for q in paths {
        let ds = Dataset::open(&q).unwrap_or_else(|e| panic!("{what}: open {}: {e}", q.display()));
        assert_eq!(ds.shape(), &[model.len() as u64], "{what}: {}", q.display());
        let a = ds
            .read::<f64>()
            .unwrap_or_else(|e| panic!("{what}: read {}: {e}", q.display()));
        assert!(
            a.iter().eq(model.iter()),
            "{what}: contents differ at {}",
            q.display()
        );
    }
}

fn check_spread(root: &Path, gluster: bool, min_files: usize) {
    let locs = locate_dataset(root).unwrap();
    assert!(
        locs.len() >= min_files,
        "{}: {} files",
        root.display(),
        locs.len()
    );
    let kind = if gluster {
        LocationKind::Gluster
    } else {
        LocationKind::Local
    };
    assert!(locs.iter().all(|l| l.kind == kind), "{locs:#?}");
    let bricks: BTreeSet<&str> = locs.iter().map(|l| l.location.as_str()).collect();
    if gluster {
        assert_eq!(bricks.len(), 3, "files on bricks {bricks:?}");
        for l in &locs {
            // pathinfo names the brick file, which holds the same bytes as the mount
            assert!(l.detail.starts_with(&l.location), "{l:?}");
            assert!(l
                .detail
                .ends_with(l.path.strip_prefix(root.parent().unwrap()).unwrap()));
        }
    } else {
        assert_eq!(bricks.len(), 1);
    }
    let groups = group_by_location(&locs);
    assert_eq!(groups.len(), bricks.len());
    println!(
        "{}: {} files over {}",
        root.display(),
        locs.len(),
        groups
            .iter()
            .map(|(k, v)| format!("{k} ({})", v.len()))
            .collect::<Vec<_>>()
            .join(", ")
    );
}

fn check_reductions(ds: &Dataset, model: &[f64]) {
    let sum: f64 = model.iter().sum();
    let min = model.iter().copied().fold(f64::INFINITY, f64::min);
    let max = model.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    for threads in [1, 2] {
        let opts = ScanOptions::with_threads(threads);
        let r = reduce(ds, &opts, Reduction::Sum).unwrap();
        assert_eq!(r.count, model.len() as u64);
        assert!(close(r.value.unwrap().as_f64(), sum), "{r:?} vs {sum}");
        let r = reduce(ds, &opts, Reduction::Min).unwrap();
        assert_eq!(r.value, Some(Scalar::Float(min)));
        let r = reduce(ds, &opts, Reduction::Max).unwrap();
        assert_eq!(r.value, Some(Scalar::Float(max)));
        let r = reduce(ds, &opts, Reduction::Count).unwrap();
        assert_eq!(r.value, Some(Scalar::UInt(model.len() as u128)));
        let r = reduce(ds, &opts, Reduction::Mean).unwrap();
        assert!(close(r.value.unwrap().as_f64(), sum / model.len() as f64));
        let pos = scan::<f64, u64>(
            ds,
            &opts,
            || 0,
            |a, v| a + v.iter().filter(|&&x| x > 0.0).count() as u64,
            |a, b| a + b,
        )
        .unwrap();
        assert_eq!(pos, model.iter().filter(|&&x| x > 0.0).count() as u64);
    }
}

fn plain_dataset(base: &Path, gluster: bool) {
    let p = base.join("plain.blz");
    let opts = CreateOptions {
        chunkshape: Some(vec![1000]),
        superchunksize: Some(2),
        overwrite: true,
        ..Default::default()
    };
    let mut ds = Dataset::create_with(&p, DType::F64, &[0], &opts).unwrap();
    let mut rng = Lcg(7);
    let mut model: Vec<f64> = Vec::new();
    // Uneven appends: partial chunks get rewritten, files get created one after another.
    while model.len() < 60_000 {
        let n = 7_777.min(60_000 - model.len());
        let block: Vec<f64> = (0..n).map(|_| rng.f64()).collect();
        ds.append(&Array1::from(block.clone()).into_dyn().view())
            .unwrap();
        model.extend(block);
    }
    assert_eq!(ds.nfiles(), 30);
    check_plain(&p, &model, "after appends");

    // Modify: a contiguous range across chunks and files, and a strided one.
    let patch: Vec<f64> = (0..4444).map(|i| i as f64 * 0.25).collect();
    ds.write_slice(
        s![1234..5678],
        &Array1::from(patch.clone()).into_dyn().view(),
    )
    .unwrap();
    model[1234..5678].copy_from_slice(&patch);
    let strided: Vec<f64> = (0..500).map(|i| -(i as f64)).collect();
    ds.write_slice(
        s![30_000..40_000;20],
        &Array1::from(strided.clone()).into_dyn().view(),
    )
    .unwrap();
    for (i, v) in strided.iter().enumerate() {
        model[30_000 + 20 * i] = *v;
    }
    check_plain(&p, &model, "after modify");

    // Shrink into the middle of a chunk (the last file is truncated, later ones removed).
    ds.resize(49_500).unwrap();
    model.truncate(49_500);
    assert_eq!(ds.nfiles(), 25);
    check_plain(&p, &model, "after shrink");
    assert!(ds.verify(|_, _| {}).is_empty());
    let data_files = std::fs::read_dir(p.join("data")).unwrap().count();
    assert_eq!(data_files, 25, "shrink left stray files");

    drop(ds);
    let ds = Dataset::open(&p).unwrap();
    assert!(ds.verify(|_, _| {}).is_empty());
    check_spread(&p, gluster, 25);
    let locs = locate_dataset(&p).unwrap();
    for (f, l) in locs.iter().enumerate() {
        assert_eq!(l.path, ds.superchunk_path(f as u64));
    }
    check_reductions(&ds, &model);
    // Host filter: all files are on this machine's host (the test volume is local).
    let host = locs[0].host.clone();
    let only = ScanOptions {
        threads: Some(2),
        hosts: Some(vec![host]),
        ..Default::default()
    };
    assert_eq!(reduce(&ds, &only, Reduction::Count).unwrap().count, 49_500);
    let none = ScanOptions {
        hosts: Some(vec!["no-such-host".into()]),
        ..Default::default()
    };
    // A host that holds nothing (a misspelt name) is an error, not an empty part.
    let err = reduce(&ds, &none, Reduction::Count)
        .unwrap_err()
        .to_string();
    assert!(err.contains("holds none of the files"), "{err}");

    // The command line on the same dataset.
    let out = blz(&["locate", "--json", p.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["files"].as_array().unwrap().len(), 25);
    assert_eq!(
        v["locations"].as_array().unwrap().len(),
        if gluster { 3 } else { 1 }
    );
    let text = blz(&["locate", p.to_str().unwrap()]);
    assert!(text.contains("data/__25__.bin"), "{text}");
    let out = blz(&[
        "scan",
        p.to_str().unwrap(),
        "--op",
        "sum",
        "--threads",
        "2",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["elements"], 49_500);
    assert!(close(v["value"].as_f64().unwrap(), model.iter().sum()));
    let out = blz(&["scan", p.to_str().unwrap(), "--op", "max"]);
    assert!(out.contains("max: "), "{out}");

    // Append after the shrink: the cut chunk and file are filled up again, new files follow.
    drop(ds);
    let mut ds = Dataset::open_rw(&p).unwrap();
    let block: Vec<f64> = (0..3_000).map(|_| rng.f64()).collect();
    ds.append(&Array1::from(block.clone()).into_dyn().view())
        .unwrap();
    model.extend(block);
    assert_eq!(ds.nfiles(), 27);
    drop(ds);
    check_plain(&p, &model, "after appending past the shrink");
    for q in std::iter::once(p.clone()).chain(second_view(&p)) {
        assert!(Dataset::open(&q).unwrap().verify(|_, _| {}).is_empty());
        let out = blz(&["verify", q.to_str().unwrap()]);
        assert!(
            out.contains("53 chunks in 27 files verified (crc32 digests), all intact"),
            "{out}"
        );
    }
    check_spread(&p, gluster, 27);
}

/// A 2-d dataset whose inner axis ends inside a chunk.
fn nd_dataset(base: &Path, gluster: bool) {
    let p = base.join("grid.blz");
    let opts = CreateOptions {
        chunkshape: Some(vec![64, 4]),
        superchunksize: Some(1),
        overwrite: true,
        ..Default::default()
    };
    let mut ds = Dataset::create_with(&p, DType::I32, &[0, 7], &opts).unwrap();
    let a = Array2::from_shape_fn((1000, 7), |(i, j)| (i as i32 * 7 + j as i32) - 3000);
    ds.append(&a.clone().into_dyn().view()).unwrap();
    let b = Array2::from_shape_fn((10, 3), |(i, j)| 100 * i as i32 + j as i32);
    ds.write_slice(s![500..510, 2..5], &b.clone().into_dyn().view())
        .unwrap();
    let mut model = a;
    model.slice_mut(s![500..510, 2..5]).assign(&b);
    ds.resize(930).unwrap();
    let model = model.slice(s![..930, ..]).to_owned();
    drop(ds);
    for q in std::iter::once(p.clone()).chain(second_view(&p)) {
        let ds = Dataset::open(&q).unwrap();
        assert_eq!(ds.shape(), &[930, 7]);
        let back: ArrayD<i32> = ds.read().unwrap();
        assert_eq!(back, model.clone().into_dyn(), "{}", q.display());
        assert!(ds.verify(|_, _| {}).is_empty());
    }
    let ds = Dataset::open(&p).unwrap();
    check_spread(&p, gluster, 24);
    for threads in [1, 2] {
        let opts = ScanOptions::with_threads(threads);
        let sum = reduce(&ds, &opts, Reduction::Sum).unwrap();
        assert_eq!(
            sum.value,
            Some(Scalar::Int(model.iter().map(|&x| i128::from(x)).sum()))
        );
        assert_eq!(sum.count, 930 * 7);
        let min = reduce(&ds, &opts, Reduction::Min).unwrap();
        assert_eq!(
            min.value,
            Some(Scalar::Int(i128::from(*model.iter().min().unwrap())))
        );
        let max = reduce(&ds, &opts, Reduction::Max).unwrap();
        assert_eq!(
            max.value,
            Some(Scalar::Int(i128::from(*model.iter().max().unwrap())))
        );
        // Row sums through the closure form match ndarray's.
        let col_sum = scan::<i32, i64>(
            &ds,
            &opts,
            || 0,
            |a, v| a + v.iter().map(|&x| i64::from(x)).sum::<i64>(),
            |a, b| a + b,
        )
        .unwrap();
        assert_eq!(
            col_sum,
            model
                .sum_axis(Axis(0))
                .iter()
                .map(|&x| i64::from(x))
                .sum::<i64>()
        );
    }
}

/// Checks the table at `p` (and through the second mount) against its columns' models.
fn check_table(p: &Path, ids: &[i64], names: &[String], xs: &[f32], what: &str) {
    for q in std::iter::once(p.to_path_buf()).chain(second_view(p)) {
        let t = Table::open(&q).unwrap_or_else(|e| panic!("{what}: open {}: {e}", q.display()));
        assert_eq!(t.nrows(), ids.len() as u64, "{what}: {}", q.display());
        assert_eq!(
            t.column("id").unwrap().to_vec::<i64>().unwrap(),
            ids,
            "{what}"
        );
        assert_eq!(
            t.column("name").unwrap().to_strings().unwrap(),
            names,
            "{what}"
        );
        assert_eq!(
            t.column("pos/x").unwrap().to_vec::<f32>().unwrap(),
            xs,
            "{what}"
        );
        assert!(t.verify(|_, _| {}).is_empty(), "{what}: {}", q.display());
    }
}

fn table_dataset(base: &Path, gluster: bool) {
    let p = base.join("table.blz");
    let small = ColumnOptions {
        chunklen: Some(500),
        superchunksize: Some(1),
        ..Default::default()
    };
    let fields = vec![
        Field::new("id", DType::I64),
        Field::varstr("name"),
        Field::structure("pos", vec![Field::new("x", DType::F32)]),
    ];
    let topts = TableOptions {
        defaults: small,
        overwrite: true,
        ..Default::default()
    };
    let mut t = Table::create(&p, fields, &topts).unwrap();
    let mut ids: Vec<i64> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    let mut xs: Vec<f32> = Vec::new();
    let batch = |start: usize, n: usize| {
        let i: Vec<i64> = (start..start + n).map(|i| i as i64 * 3 - 100).collect();
        let nm: Vec<String> = (start..start + n)
            .map(|i| format!("row {i} é{}", "ß".repeat(i % 5)))
            .collect();
        let x: Vec<f32> = (start..start + n).map(|i| i as f32 / 8.0).collect();
        (i, nm, x)
    };
    for n in [4321, 3333, 5000] {
        let (i, nm, x) = batch(ids.len(), n);
        t.append(&[
            ("id", Values::from_slice(&i)),
            ("name", Values::strings(&nm)),
            ("pos/x", Values::from_slice(&x)),
        ])
        .unwrap();
        ids.extend(i);
        names.extend(nm);
        xs.extend(x);
    }
    check_table(&p, &ids, &names, &xs, "after appends");
    // Modify rows across chunk and file boundaries, in two of the three columns.
    let new_names: Vec<String> = (0..1200).map(|i| format!("changed {i}")).collect();
    let new_ids: Vec<i64> = (0..1200).map(|i| -i).collect();
    t.write_rows(
        2900,
        &[
            ("name", Values::strings(&new_names)),
            ("id", Values::from_slice(&new_ids)),
        ],
    )
    .unwrap();
    names.splice(2900..4100, new_names);
    ids.splice(2900..4100, new_ids);
    check_table(&p, &ids, &names, &xs, "after modify");
    // Shrink into the middle of a chunk of every column.
    t.resize(12_100).unwrap();
    ids.truncate(12_100);
    names.truncate(12_100);
    xs.truncate(12_100);
    assert!(t.verify(|_, _| {}).is_empty());
    drop(t);
    check_table(&p, &ids, &names, &xs, "after shrink");

    let t = Table::open(&p).unwrap();
    // 25 files per column, in data/id, data/name, data/pos/x
    check_spread(&p, gluster, 75);
    let locs = locate_dataset(&p).unwrap();
    assert!(locs
        .iter()
        .any(|l| l.path.starts_with(p.join("data").join("pos").join("x"))));
    assert_eq!(locs.len(), 3 * t.column_files("id").unwrap().len());
    for threads in [1, 2] {
        let opts = ScanOptions::with_threads(threads);
        let r = reduce_column(&t, "id", &opts, Reduction::Sum).unwrap();
        assert_eq!(
            r.value,
            Some(Scalar::Int(ids.iter().map(|&x| i128::from(x)).sum()))
        );
        let r = reduce_column(&t, "pos/x", &opts, Reduction::Max).unwrap();
        assert_eq!(
            r.value,
            Some(Scalar::Float(f64::from(
                xs.iter().copied().fold(f32::MIN, f32::max)
            )))
        );
        assert!(reduce_column(&t, "name", &opts, Reduction::Count).is_err());
    }
    let out = blz(&["scan", p.to_str().unwrap(), "--column", "id", "--op", "min"]);
    let min = ids.iter().min().unwrap();
    assert!(out.contains(&format!("min: {min}")), "{out}");

    // Append after the shrink: the cut chunks are filled up again, new files follow.
    drop(t);
    let mut t = Table::open_rw(&p).unwrap();
    let (i, nm, x) = batch(ids.len(), 900);
    t.append(&[
        ("id", Values::from_slice(&i)),
        ("name", Values::strings(&nm)),
        ("pos/x", Values::from_slice(&x)),
    ])
    .unwrap();
    ids.extend(i);
    names.extend(nm);
    xs.extend(x);
    drop(t);
    check_table(&p, &ids, &names, &xs, "after appending past the shrink");
    check_spread(&p, gluster, 78);
    for q in std::iter::once(p.clone()).chain(second_view(&p)) {
        let out = blz(&["verify", q.to_str().unwrap()]);
        assert!(
            out.contains("78 chunks in 3 columns verified (crc32 digests), all intact"),
            "{out}"
        );
    }
}

/// A 3-column layer dataset in memory: user -> item -> price, and the weight of each price.
type LayerModel = BTreeMap<Value, BTreeMap<Value, BTreeMap<Value, Value>>>;

/// `users` users (int64, negative and positive), each with 1 to 4 items (strings, some
/// non-ASCII), each with 1 to 3 prices (float64) carrying an int64 weight.
fn layer_model(seed: u64, users: i64) -> LayerModel {
    let mut rng = Lcg(seed);
    let mut m = LayerModel::new();
    for u in 0..users {
        let items = m.entry(Value::Int(u * 7 - 6000)).or_default();
        let n = 1 + rng.next() % 4;
        while (items.len() as u64) < n {
            let name = format!(
                "item-{:03}{}",
                rng.next() % 400,
                "é".repeat((rng.next() % 3) as usize)
            );
            let prices = items.entry(Value::Str(name)).or_default();
            let k = 1 + rng.next() % 3;
            while (prices.len() as u64) < k {
                let price = (rng.next() % 4000) as f64 * 0.25 - 500.0;
                let w = rng.next() as i64 - (1 << 30);
                prices.insert(Value::Float(price), Value::Int(w));
            }
        }
    }
    m
}

/// Row counts of the model's three columns.
fn layer_rows(m: &LayerModel) -> Vec<u64> {
    let items: usize = m.values().map(BTreeMap::len).sum();
    let prices: usize = m
        .values()
        .flat_map(BTreeMap::values)
        .map(BTreeMap::len)
        .sum();
    vec![m.len() as u64, items as u64, prices as u64]
}

/// Small chunks, fan-out 4 (three index levels) and 4 chunks per file, so that every column
/// has many superchunk files; one column of each filter setting.
fn layer_schema(overwrite: bool) -> LayerSchema {
    let mut s = LayerSchema::new(vec![
        ColumnDef::new("user", LeafKind::Fixed(DType::I64))
            .with_chunklen(64)
            .with_fanout(4)
            .with_filter(FilterSetting::Fpr(1e-3)),
        ColumnDef::new("item", LeafKind::VarStr)
            .with_chunklen(128)
            .with_fanout(4)
            .with_filter(FilterSetting::BitsPerValue(12)),
        ColumnDef::new("price", LeafKind::Fixed(DType::F64))
            .with_chunklen(256)
            .with_fanout(4)
            .with_filter(FilterSetting::Off),
    ])
    .with_weight("w", DType::I64);
    s.superchunksize = 4;
    s.overwrite = overwrite;
    s
}

fn write_layer(p: &Path, m: &LayerModel, overwrite: bool) -> blz::Result<LayerSizes> {
    let mut w = LayerWriter::create(p, layer_schema(overwrite))?;
    for (u, items) in m {
        for (i, prices) in items {
            for (price, weight) in prices {
                w.push(&[u.clone(), i.clone(), price.clone()], Some(weight.clone()))?;
            }
        }
    }
    w.finish()
}

/// The superchunk files a layer dataset must have, from its meta files: data, row-group,
/// weight, index (every level) and filter chunks, `superchunksize` to a file.
fn layer_file_count(layer: &Layer) -> usize {
    let meta = layer.storage_meta();
    let mut n = 0;
    for (i, (c, s)) in meta.columns.iter().zip(&layer.sizes().columns).enumerate() {
        let files = |chunks: u64| chunks.div_ceil(c.superchunksize);
        let data = files(s.rows.div_ceil(c.chunklen));
        let last = i + 1 == meta.columns.len();
        n += data;
        if !last || meta.weight.is_some() {
            n += data; // row groups, or the weights of the last column
        }
        n += s.index_chunks.iter().map(|&k| files(k)).sum::<u64>();
        n += files(s.filter_chunks);
    }
    n as usize
}

/// Checks a row group's seeks and membership answers against its model `keys`.
fn check_group_seeks<T>(c: &mut Cursor<'_>, keys: &BTreeMap<Value, T>, probes: &[Value]) {
    for v in probes.iter().chain(keys.keys()) {
        let ge = keys.range(v.clone()..).next().map(|(k, _)| k);
        assert_eq!(c.seek_ge(v).unwrap(), ge.is_some(), "seek_ge {v}");
        assert_eq!(c.value().unwrap().as_ref(), ge, "seek_ge {v}");
        let le = keys.range(..=v.clone()).next_back().map(|(k, _)| k);
        assert_eq!(c.seek_le(v).unwrap(), le.is_some(), "seek_le {v}");
        assert_eq!(c.value().unwrap().as_ref(), le, "seek_le {v}");
        let present = keys.contains_key(v);
        assert_eq!(c.contains(v).unwrap(), present, "contains {v}");
        if present {
            assert!(c.may_contain(v).unwrap(), "the filter said no for {v}");
        }
    }
    if let Some((k, _)) = keys.last_key_value() {
        assert!(c.last());
        assert_eq!(c.value().unwrap().as_ref(), Some(k));
        assert!(!c.next());
        assert!(c.prev());
        assert_eq!(c.index(), Some(keys.len() as u64 - 1));
    }
}

/// Seeks, child row groups, weights and membership against the model.
fn check_layer_queries(layer: &Layer, m: &LayerModel) {
    let mut rng = Lcg(99);
    let (lo, hi) = (-6000 - 100, 7 * m.len() as i64 - 6000 + 100);
    let probes: Vec<Value> = (0..300)
        .map(|_| Value::Int(lo + (rng.next() as i64) % (hi - lo)))
        .chain([Value::Int(i64::MIN), Value::Int(i64::MAX)])
        .collect();
    check_group_seeks(&mut layer.cursor(), m, &probes);
    for v in &probes {
        assert_eq!(layer.contains(v).unwrap(), m.contains_key(v), "{v}");
        // A "no" from the filter or the fences reads no data chunk.
        layer.reset_stats();
        if !layer.may_contain(v).unwrap() {
            assert!(!m.contains_key(v), "{v}");
            assert_eq!(layer.stats().data_chunks, 0, "{v}");
        }
    }
    // Past either end the fences answer alone.
    layer.clear_cache();
    layer.reset_stats();
    assert!(!layer.may_contain(&Value::Int(lo - 1)).unwrap());
    assert!(!layer.may_contain(&Value::Int(hi + 1)).unwrap());
    assert_eq!(layer.stats().data_chunks, 0);
    assert_eq!(layer.stats().filter_chunks, 0);
    // A seek reads one data chunk.
    layer.clear_cache();
    layer.reset_stats();
    let mut c = layer.cursor();
    assert!(c.seek_ge(&Value::Int(0)).unwrap());
    c.value().unwrap();
    assert_eq!(layer.stats().data_chunks, 1);

    // Row groups of columns 2 and 3 under 60 users picked at random.
    let users: Vec<&Value> = m.keys().collect();
    for _ in 0..60 {
        let j = rng.next() % users.len() as u64;
        let mut uc = layer.cursor();
        assert!(uc.nth(j));
        let u = uc.value().unwrap().unwrap();
        assert_eq!(&u, users[j as usize]);
        let items = &m[&u];
        let mut ic = uc.child().unwrap().unwrap();
        assert_eq!(ic.count(), items.len() as u64);
        assert_eq!(layer.group(1, j).unwrap().rows(), ic.rows());
        let mut item_probes: Vec<Value> = (0..10)
            .map(|_| Value::Str(format!("item-{:03}", rng.next() % 400)))
            .collect();
        item_probes.extend(["".into(), "item-".into(), "zzz".into()]);
        check_group_seeks(&mut ic, items, &item_probes);
        for (i, prices) in items {
            assert!(ic.seek_ge(i).unwrap());
            let mut pc = ic.child().unwrap().unwrap();
            assert_eq!(pc.count(), prices.len() as u64);
            assert_eq!(layer.group(2, ic.row().unwrap()).unwrap().rows(), pc.rows());
            let price_probes: Vec<Value> = (0..5)
                .map(|_| Value::Float((rng.next() % 4000) as f64 * 0.25 - 500.0))
                .chain([Value::Float(-1e300), Value::Float(1e300)])
                .collect();
            check_group_seeks(&mut pc, prices, &price_probes);
            // An integer is taken as the float it equals.
            let ge = pc.seek_ge(&Value::Float(3.0)).unwrap().then(|| pc.row());
            assert_eq!(pc.seek_ge(&Value::Int(3)).unwrap().then(|| pc.row()), ge);
            for (price, weight) in prices {
                assert!(pc.seek_ge(price).unwrap());
                assert_eq!(pc.weight().unwrap().as_ref(), Some(weight));
                assert!(
                    pc.child().unwrap().is_none(),
                    "the last column has no children"
                );
            }
        }
    }
    // Values that do not fit a column are errors, not answers.
    assert!(layer.cursor().seek_ge(&Value::Str("x".into())).is_err());
    assert!(layer.contains(&Value::Float(0.5)).is_err());
    assert!(layer.cursor().weight().is_err());
}

/// Opens the layer dataset at `p` (and through the second mount), verifies it, walks every
/// row of every column against the model and checks the queries.
fn check_layer(p: &Path, m: &LayerModel, what: &str) {
    let mut paths = vec![p.to_path_buf()];
    paths.extend(second_view(p));
    for q in paths {
        let layer = Layer::open(&q).unwrap_or_else(|e| panic!("{what}: open {}: {e}", q.display()));
        let errs = layer.verify();
        assert!(errs.is_empty(), "{what}: {}: {errs:?}", q.display());
        let rows: Vec<u64> = (0..layer.ncolumns()).map(|c| layer.rows(c)).collect();
        assert_eq!(rows, layer_rows(m), "{what}: {}", q.display());
        assert_eq!(
            layer.index_levels(0),
            3,
            "{what}: fan-out 4 over 29 or more chunks"
        );
        let (mut item_row, mut price_row) = (0, 0);
        let mut uc = layer.cursor();
        for (u, items) in m {
            assert_eq!(uc.value().unwrap().as_ref(), Some(u), "{what}");
            let mut ic = uc.child().unwrap().unwrap();
            assert_eq!(ic.rows(), item_row..item_row + items.len() as u64);
            item_row += items.len() as u64;
            for (i, prices) in items {
                assert_eq!(ic.value().unwrap().as_ref(), Some(i), "{what}: {u}");
                let mut pc = ic.child().unwrap().unwrap();
                assert_eq!(pc.rows(), price_row..price_row + prices.len() as u64);
                price_row += prices.len() as u64;
                for (price, weight) in prices {
                    assert_eq!(pc.value().unwrap().as_ref(), Some(price), "{what}: {u} {i}");
                    assert_eq!(pc.weight().unwrap().as_ref(), Some(weight));
                    pc.next();
                }
                assert!(!pc.is_valid());
                ic.next();
            }
            assert!(!ic.is_valid());
            uc.next();
        }
        assert!(!uc.is_valid());
        check_layer_queries(&layer, m);
    }
}

/// Names of the entries of `dir` (sorted).
fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn layer_dataset(base: &Path, gluster: bool) {
    let p = base.join("layer.blz");
    let m = layer_model(11, 2500);
    let sizes = write_layer(&p, &m, false).unwrap();
    let rows: Vec<u64> = sizes.columns.iter().map(|c| c.rows).collect();
    assert_eq!(rows, layer_rows(&m));
    check_layer(&p, &m, "after the build");

    // Every data, row-group, weight, index and filter file is located, on all three bricks.
    let layer = Layer::open(&p).unwrap();
    let nfiles = layer_file_count(&layer);
    assert!(nfiles >= 80, "{nfiles} files");
    check_spread(&p, gluster, nfiles);
    let locs = locate_dataset(&p).unwrap();
    assert_eq!(locs.len(), nfiles);
    for sub in [
        "data/user/index/2",
        "data/user/rowgroups",
        "data/user/filter",
        "data/item",
        "data/price/weight",
    ] {
        assert!(
            locs.iter().any(|l| l.path.parent() == Some(&p.join(sub))),
            "no file in {sub}"
        );
    }
    assert!(!p.join("data/price/filter").exists(), "filter off");

    // The command line on the same dataset.
    let ps = p.to_str().unwrap();
    let out = blz(&["locate", "--json", ps]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["files"].as_array().unwrap().len(), nfiles);
    assert_eq!(
        v["locations"].as_array().unwrap().len(),
        if gluster { 3 } else { 1 }
    );
    let text = blz(&["locate", ps]);
    assert!(text.contains("data/user/index/0/__1__.bin"), "{text}");
    assert!(text.contains("data/price/weight/__1__.bin"), "{text}");
    // User 123 has a negative key, item names are non-ASCII for some.
    let (u, items) = m.iter().nth(123).unwrap();
    let (item, prices) = items.iter().next().unwrap();
    let (price, weight) = prices.iter().last().unwrap();
    let (us, is) = (u.to_string(), item.to_json().as_str().unwrap().to_string());
    let o = blz(&["layer", "seek", ps, &us]);
    assert!(us.starts_with('-'));
    assert!(o.starts_with(&format!("{us} (row 123 ")), "{o}");
    let o = blz(&[
        "layer",
        "seek",
        ps,
        "--le",
        &(7 * 123 - 6000 + 3).to_string(),
        "--json",
    ]);
    let j: serde_json::Value = serde_json::from_str(&o).unwrap();
    assert_eq!(j["value"], u.to_json());
    assert_eq!(j["row"], 123);
    assert_eq!(j["children"], items.len());
    assert_eq!(j["reads"]["data"], 1);
    let o = blz(&[
        "layer",
        "seek",
        ps,
        "--column",
        "price",
        "--in",
        &us,
        "--in",
        &is,
        &price.to_string(),
        "--json",
    ]);
    let j: serde_json::Value = serde_json::from_str(&o).unwrap();
    assert_eq!(j["value"], price.to_json());
    assert_eq!(j["weight"], weight.to_json());
    let o = blz(&["layer", "contains", ps, &us]);
    assert!(o.starts_with("yes"), "{o}");
    let o = blz(&["layer", "contains", ps, "-100000"]);
    assert!(o.starts_with("no") && o.contains(" 0 data chunks"), "{o}");
    let o = blz(&["layer", "contains", ps, "--in", &us, &is]);
    assert!(o.starts_with("yes"), "{o}");
    let o = blz(&["layer", "contains", ps, "--in", &us, "item-999"]);
    assert!(o.starts_with("no"), "{o}");
    let o = blz(&["layer", "info", ps, "--json"]);
    let j: serde_json::Value = serde_json::from_str(&o).unwrap();
    for (c, r) in layer_rows(&m).iter().enumerate() {
        assert_eq!(j["columns"][c]["rows"], *r);
    }
    assert_eq!(j["columns"][0]["index_levels"], 3);
    assert_eq!(j["weight"]["name"], "w");
    let o = blz(&["layer", "info", ps]);
    assert!(
        o.contains(&format!(
            "column 2 item (varstr): {} rows",
            layer_rows(&m)[1]
        )),
        "{o}"
    );
    let o = blz(&["info", ps, "--json"]);
    let j: serde_json::Value = serde_json::from_str(&o).unwrap();
    assert_eq!(j["kind"], "layer");
    let ok = format!(
        "ok ({} rows)",
        layer_rows(&m)
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(" / ")
    );
    for cmd in [&["layer", "verify", ps][..], &["verify", ps]] {
        let o = blz(cmd);
        assert!(o.contains(&ok), "{cmd:?}: {o}");
    }

    // A corrupt chunk in one superchunk file: verify names the file (through both
    // clients), queries that need the chunk fail, and the restored file is sound again.
    let rel = Path::new("data/item/__3__.bin");
    let file = p.join(rel);
    let original = std::fs::read(&file).unwrap();
    flip_byte_in_chunk(&file, 1);
    if gluster {
        println!(
            "corrupted {} on {}",
            rel.display(),
            locate_file(&file).unwrap().location
        );
    }
    let mut views = vec![p.clone()];
    views.extend(second_view(&p));
    for q in &views {
        let errs = Layer::open(q).unwrap().verify();
        assert!(
            errs.iter().any(|e| matches!(e,
                Error::ChecksumMismatch { path, chunk: 1, .. } if *path == q.join(rel))),
            "{}: {errs:?}",
            q.display()
        );
        let out = run(&["layer", "verify", q.to_str().unwrap()]);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(q.join(rel).to_str().unwrap()), "{err}");
        assert!(err.contains("checksum"), "{err}");
    }
    // Chunk 1 of file 3 is chunk 9 of column 2: reading a row of it is an error too.
    let layer = Layer::open(&p).unwrap();
    let row = 9 * 128;
    let j = (0..layer.rows(0))
        .find(|&j| layer.group(1, j).unwrap().rows().contains(&row))
        .unwrap();
    let mut g = layer.group(1, j).unwrap();
    assert!(g.nth(row - g.rows().start));
    assert!(matches!(g.value(), Err(Error::ChecksumMismatch { .. })));
    std::fs::write(&file, &original).unwrap();
    check_layer(&p, &m, "after restoring the corrupt file");

    // Layer datasets are write-once: the array, table and scan entry points refuse them
    // with a clear error and leave them as they are.
    let before = (locate_dataset(&p).unwrap(), listing(&p.join("meta")));
    for attempt in [
        Dataset::open_rw(&p).map(drop),
        Dataset::open(&p).map(drop),
        Table::open_rw(&p).map(drop),
        Table::open(&p).map(drop),
    ] {
        let e = attempt.unwrap_err();
        assert!(e.to_string().contains("layer"), "{e}");
    }
    for (cmd, why) in [
        (
            &["resize", ps, "10"][..],
            "this is a layer dataset, not an array",
        ),
        (
            &["attrs", ps, "--set", "a=1"],
            "this is a layer dataset, not an array",
        ),
        (&["compact", ps], "this is a layer dataset, not an array"),
        (&["get", ps], "this is a layer dataset, not an array"),
        (
            &["scan", ps, "--op", "sum"],
            "this is a layer dataset, not an array",
        ),
        (
            &["scan", ps, "--column", "user", "--op", "sum"],
            "this is a layer dataset, not a table",
        ),
        (&["create", ps, "--arange", "10"], "already exists"),
    ] {
        let out = run(cmd);
        assert_eq!(out.status.code(), Some(1), "blz {cmd:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with("blz: ") && err.contains(why) && err.lines().count() == 1,
            "{cmd:?}: {err}"
        );
    }
    assert_eq!(
        (locate_dataset(&p).unwrap(), listing(&p.join("meta"))),
        before
    );
    let e = write_layer(&p, &layer_model(12, 10), false).unwrap_err();
    assert!(e.to_string().contains("already exists"), "{e}");
    check_layer(&p, &m, "after refused changes");

    // Replacing: a new build over the old one (overwrite) appears whole to both clients,
    // and leaves no temporary directory behind.
    let m2 = layer_model(13, 1800);
    write_layer(&p, &m2, true).unwrap();
    check_layer(&p, &m2, "after the rebuild");
    // The replaced build is removed in the background, as a client waits for before it
    // exits (the blz command does): wait for it too, rather than race it.
    blz::finish_removals();
    assert_eq!(
        listing(base)
            .iter()
            .filter(|n| n.starts_with("layer.blz"))
            .count(),
        1
    );
    let layer = Layer::open(&p).unwrap();
    check_spread(&p, gluster, layer_file_count(&layer));
    assert_eq!(locate_dataset(&p).unwrap().len(), layer_file_count(&layer));
    // A failed rebuild (unsorted input) leaves the dataset as it was.
    let mut w = LayerWriter::create(&p, layer_schema(true)).unwrap();
    w.push(
        &[Value::Int(5), "b".into(), Value::Float(1.0)],
        Some(Value::Int(1)),
    )
    .unwrap();
    let e = w
        .push(
            &[Value::Int(4), "a".into(), Value::Float(1.0)],
            Some(Value::Int(1)),
        )
        .unwrap_err();
    assert!(e.to_string().contains("unsorted"), "{e}");
    assert!(w.finish().is_err());
    assert_eq!(
        listing(base)
            .iter()
            .filter(|n| n.starts_with("layer.blz"))
            .count(),
        1
    );
    check_layer(&p, &m2, "after a failed rebuild");

    // `blz layer build` from a sorted CSV on the same filesystem, replaced with --overwrite.
    let csv = base.join("pairs.csv");
    let mut text = String::from("k,v,w\n");
    for k in 0..500 {
        for v in 0..(k % 3 + 1) {
            text.push_str(&format!("{},v{v},{}\n", k * 2, k + v));
        }
    }
    std::fs::write(&csv, &text).unwrap();
    let out = base.join("cli-layer.blz");
    let (cs, os) = (csv.to_str().unwrap(), out.to_str().unwrap());
    let build = [
        "layer",
        "build",
        "--columns",
        "k:int32,v:varstr",
        "--weight",
        "w:int64",
    ];
    let o = blz(&[&build[..], &["--header", "--chunklen", "16", cs, os]].concat());
    assert!(o.contains("column rows 500 / 999"), "{o}");
    let o = blz(&[
        &build[..],
        &["--header", "--chunklen", "8", "--overwrite", cs, os],
    ]
    .concat());
    assert!(o.contains("column rows 500 / 999"), "{o}");
    let mut views = vec![out.clone()];
    views.extend(second_view(&out));
    for q in &views {
        let l = Layer::open(q).unwrap();
        assert!(l.verify().is_empty());
        assert_eq!(l.storage_meta().columns[0].chunklen, 8);
        let o = blz(&[
            "layer",
            "seek",
            q.to_str().unwrap(),
            "--in",
            "998",
            "v1",
            "--json",
        ]);
        let j: serde_json::Value = serde_json::from_str(&o).unwrap();
        assert_eq!(j["value"], "v1");
        assert_eq!(j["weight"], 500);
    }
    std::fs::remove_file(&csv).unwrap();
}

fn exercise(base: &Path, gluster: bool) {
    plain_dataset(base, gluster);
    nd_dataset(base, gluster);
    table_dataset(base, gluster);
    layer_dataset(base, gluster);
}

#[test]
fn local_directory() {
    let dir = tempfile::tempdir().unwrap();
    exercise(dir.path(), false);
}

#[test]
fn gluster_mount() {
    let Some(mount) = std::env::var_os("BLZ_GLUSTER_MOUNT") else {
        println!(
            "note: BLZ_GLUSTER_MOUNT is not set, so the GlusterFS test does nothing; \
             run tests/gluster/run.sh (as root) to run it on a real volume"
        );
        return;
    };
    let mount = PathBuf::from(mount);
    let base = mount.join(format!("blz-test-{}", std::process::id()));
    std::fs::create_dir_all(&base).unwrap();
    exercise(&base, true);
    std::fs::remove_dir_all(&base).unwrap();
}
