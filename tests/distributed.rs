//! blz on a distributed filesystem: create, append, read, modify, shrink and verify arrays
//! and tables, locate their superchunk files, scan them, and run `blz locate`/`blz scan`.
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

use blz::locate::{group_by_location, locate_dataset, LocationKind};
use blz::scan::{reduce, reduce_column, scan, Reduction, Scalar, ScanOptions};
use blz::table::{ColumnOptions, Field, Table, TableOptions, Values};
use blz::{CreateOptions, DType, Dataset};
use ndarray::{s, Array1, Array2, ArrayD, Axis};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

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
    assert_eq!(reduce(&ds, &none, Reduction::Count).unwrap().count, 0);

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
    let ds = Dataset::open(&p).unwrap();
    let back: ArrayD<i32> = ds.read().unwrap();
    assert_eq!(back, model.clone().into_dyn());
    assert!(ds.verify(|_, _| {}).is_empty());
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
    t.resize(12_100).unwrap();
    ids.truncate(12_100);
    names.truncate(12_100);
    xs.truncate(12_100);
    assert!(t.verify(|_, _| {}).is_empty());
    drop(t);

    let mut paths = vec![p.clone()];
    paths.extend(second_view(&p));
    for q in &paths {
        let t = Table::open(q).unwrap();
        assert_eq!(t.nrows(), 12_100);
        assert_eq!(t.column("id").unwrap().to_vec::<i64>().unwrap(), ids);
        assert_eq!(t.column("name").unwrap().to_strings().unwrap(), names);
        assert_eq!(t.column("pos/x").unwrap().to_vec::<f32>().unwrap(), xs);
        assert!(t.verify(|_, _| {}).is_empty());
    }
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
}

fn blz(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_blz"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "blz {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn exercise(base: &Path, gluster: bool) {
    plain_dataset(base, gluster);
    nd_dataset(base, gluster);
    table_dataset(base, gluster);
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
