//! Model-based property test for tables: random append / shrink / grow / write / add / drop
//! / rename / reopen, against a Vec per column; and crash consistency of multi-column
//! operations.

mod common;

use blz::storage::{FaultyStorage, LocalStorage, OpenMode, Storage};
use blz::table::{ColumnOptions, Field, Table, TableOptions, Values};
use blz::{DType, Mode};
use blz_format::blpk::SuperchunkReader;
use common::copy_dir;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

#[derive(Debug, Clone)]
enum Op {
    Append(usize, u8),
    Resize(usize),
    Write(usize, usize, u8),
    AddColumn(bool),
    Drop(usize),
    Rename(usize),
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0usize..30, any::<u8>()).prop_map(|(n, s)| Op::Append(n, s)),
        1 => (0usize..60).prop_map(Op::Resize),
        3 => (0usize..60, 1usize..12, any::<u8>()).prop_map(|(a, n, s)| Op::Write(a, n, s)),
        1 => any::<bool>().prop_map(Op::AddColumn),
        1 => (0usize..8).prop_map(Op::Drop),
        1 => (0usize..8).prop_map(Op::Rename),
        1 => Just(Op::Reopen),
    ]
}

#[derive(Debug, Clone, PartialEq)]
enum Col {
    I(Vec<i32>),
    S(Vec<String>),
}

fn gen_i(n: usize, seed: u8, off: usize) -> Vec<i32> {
    (0..n)
        .map(|i| seed as i32 * 1000 + (i + off) as i32)
        .collect()
}
fn gen_s(n: usize, seed: u8, off: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("{seed}:{}", "z".repeat((i + off) % 9)))
        .collect()
}

fn values(c: &Col) -> Values {
    match c {
        Col::I(v) => Values::from_slice(v),
        Col::S(v) => Values::strings(v),
    }
}

fn check(t: &Table, model: &BTreeMap<String, Col>, nrows: usize) {
    assert_eq!(t.nrows() as usize, nrows);
    let mut names: Vec<&str> = t.column_names();
    names.sort();
    assert_eq!(names, model.keys().map(String::as_str).collect::<Vec<_>>());
    let sizes = t.sizes().columns.clone().unwrap();
    for (name, col) in model {
        let got = t.column(name).unwrap();
        match col {
            Col::I(v) => assert_eq!(&got.to_vec::<i32>().unwrap(), v, "{name}"),
            Col::S(v) => assert_eq!(&got.to_strings().unwrap(), v, "{name}"),
        }
        // nbytes is the size of the rows: 4 bytes per element, or the payloads of chunks
        // holding exactly the rows (spec/varlen.md §2).
        let want = match col {
            Col::I(v) => 4 * v.len() as u64,
            Col::S(v) => {
                let leaf = t.leaves().into_iter().find(|l| l.path == *name).unwrap();
                v.chunks(leaf.storage.chunklen as usize)
                    .map(|c| 4 + c.iter().map(|s| 4 + s.len() as u64).sum::<u64>())
                    .sum::<u64>()
            }
        };
        assert_eq!(sizes[name].nbytes, want, "nbytes of {name}");
    }
    assert_eq!(
        t.sizes().nbytes,
        sizes.values().map(|c| c.nbytes).sum::<u64>()
    );
    for name in t.column_names() {
        for f in t.column_files(name).unwrap() {
            check_chunk_sizes(&f);
        }
    }
}

/// A superchunk header's `chunk_size` and `last_chunk` tell the truth about its chunks
/// (spec/blpk.md, "Chunk sizes"), variable-length columns included: blz's reader bounds
/// every chunk by them.
fn check_chunk_sizes(path: &Path) {
    let r = SuperchunkReader::open(LocalStorage.open(path, OpenMode::Read).unwrap()).unwrap();
    let h = *r.header();
    let sizes: Vec<i32> = (0..r.nchunks())
        .map(|k| r.chunk_info(k).unwrap().header.nbytes as i32)
        .collect();
    let Some((&last, rest)) = sizes.split_last() else {
        return;
    };
    let at = path.display();
    if h.last_chunk >= 0 {
        assert_eq!(h.last_chunk, last, "last_chunk of {at} ({sizes:?})");
    }
    if h.chunk_size >= 0 {
        assert!(
            rest.iter().all(|&s| s == h.chunk_size) && last <= h.chunk_size,
            "chunk_size {} of {at} does not fit its chunks {sizes:?}",
            h.chunk_size
        );
    }
}

fn run(ops: Vec<Op>) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t");
    let small = ColumnOptions {
        chunklen: Some(4),
        superchunksize: Some(2),
        ..Default::default()
    };
    let mut t = Table::create(
        &p,
        vec![
            Field::new("a", DType::I32).with_options(small.clone()),
            Field::varstr("s").with_options(ColumnOptions {
                chunklen: Some(3),
                superchunksize: Some(2),
                ..Default::default()
            }),
            Field::structure(
                "n",
                vec![
                    Field::new("b", DType::I32).with_options(small.clone()),
                    Field::varstr("t"),
                ],
            ),
        ],
        &TableOptions::default(),
    )
    .unwrap();
    let mut model: BTreeMap<String, Col> = BTreeMap::new();
    model.insert("a".into(), Col::I(vec![]));
    model.insert("s".into(), Col::S(vec![]));
    model.insert("n/b".into(), Col::I(vec![]));
    model.insert("n/t".into(), Col::S(vec![]));
    let mut fills: BTreeMap<String, (i32, String)> = BTreeMap::new();
    let mut nrows = 0usize;
    let mut added = 0;
    for o in ops {
        match o {
            Op::Append(n, seed) => {
                let cols: Vec<(String, Col)> = model
                    .iter()
                    .map(|(k, c)| {
                        let v = match c {
                            Col::I(_) => Col::I(gen_i(n, seed, nrows)),
                            Col::S(_) => Col::S(gen_s(n, seed, nrows)),
                        };
                        (k.clone(), v)
                    })
                    .collect();
                let vals: Vec<(&str, Values)> =
                    cols.iter().map(|(k, c)| (k.as_str(), values(c))).collect();
                t.append(&vals).unwrap();
                for (k, c) in cols {
                    match (model.get_mut(&k).unwrap(), c) {
                        (Col::I(m), Col::I(v)) => m.extend(v),
                        (Col::S(m), Col::S(v)) => m.extend(v),
                        _ => unreachable!(),
                    }
                }
                nrows += n;
            }
            Op::Resize(n) => {
                t.resize(n as u64).unwrap();
                for (k, c) in model.iter_mut() {
                    let (fi, fs) = fills.get(k).cloned().unwrap_or_default();
                    match c {
                        Col::I(v) => v.resize(n, fi),
                        Col::S(v) => v.resize(n, fs),
                    }
                }
                nrows = n;
            }
            Op::Write(a, n, seed) => {
                if nrows == 0 {
                    continue;
                }
                let a = a % nrows;
                let n = n.min(nrows - a);
                // Write every other column.
                let keys: Vec<String> = model.keys().step_by(2).cloned().collect();
                let mut vals = Vec::new();
                for k in &keys {
                    let c = match &model[k] {
                        Col::I(_) => Col::I(gen_i(n, seed, 77)),
                        Col::S(_) => Col::S(gen_s(n, seed, 77)),
                    };
                    vals.push((k.clone(), c));
                }
                let v: Vec<(&str, Values)> =
                    vals.iter().map(|(k, c)| (k.as_str(), values(c))).collect();
                t.write_rows(a as u64, &v).unwrap();
                for (k, c) in vals {
                    match (model.get_mut(&k).unwrap(), c) {
                        (Col::I(m), Col::I(v)) => m[a..a + n].copy_from_slice(&v),
                        (Col::S(m), Col::S(v)) => m[a..a + n].clone_from_slice(&v),
                        _ => unreachable!(),
                    }
                }
            }
            Op::AddColumn(var) => {
                added += 1;
                let name = format!("c{added}");
                if var {
                    t.add_column(Field::varstr(&name).with_options(ColumnOptions {
                        fill: Some(serde_json::json!("f")),
                        chunklen: Some(5),
                        ..Default::default()
                    }))
                    .unwrap();
                    fills.insert(name.clone(), (0, "f".into()));
                    model.insert(name, Col::S(vec!["f".into(); nrows]));
                } else {
                    t.add_column(Field::new(&name, DType::I32).with_options(ColumnOptions {
                        fill: Some(serde_json::json!(-1)),
                        chunklen: Some(6),
                        ..Default::default()
                    }))
                    .unwrap();
                    fills.insert(name.clone(), (-1, String::new()));
                    model.insert(name, Col::I(vec![-1; nrows]));
                }
            }
            Op::Drop(i) => {
                let top: Vec<String> = model.keys().filter(|k| !k.contains('/')).cloned().collect();
                if top.len() > 1 {
                    let k = &top[i % top.len()];
                    t.drop_column(k).unwrap();
                    model.remove(k);
                }
            }
            Op::Rename(i) => {
                let keys: Vec<String> = model.keys().cloned().collect();
                let k = &keys[i % keys.len()];
                let (parent, _) = k.rsplit_once('/').unwrap_or(("", k));
                added += 1;
                let new = format!("r{added}");
                t.rename_column(k, &new).unwrap();
                let v = model.remove(k).unwrap();
                let newk = if parent.is_empty() {
                    new
                } else {
                    format!("{parent}/{new}")
                };
                if let Some(f) = fills.remove(k) {
                    fills.insert(newk.clone(), f);
                }
                model.insert(newk, v);
            }
            Op::Reopen => {
                drop(t);
                t = Table::open_rw(&p).unwrap();
            }
        }
        check(&t, &model, nrows);
    }
    drop(t);
    let t = Table::open(&p).unwrap();
    check(&t, &model, nrows);
    assert!(t.verify(|_, _| {}).is_empty());
}

proptest! {
    #![proptest_config(common::config(32))]
    #[test]
    fn table_against_model(ops in proptest::collection::vec(op(), 1..16)) {
        run(ops);
    }
}

type Snapshot = (u64, Vec<(String, Values)>);

fn snapshot(p: &Path) -> Snapshot {
    // A reader that cannot write sees the recovered state through the journal view.
    let viewed = common::check_journal_view(p)
        .map(|view| table_snapshot(&Table::open_in(view, p, Mode::ReadOnly).unwrap()));
    let t = Table::open(p).unwrap();
    let got = table_snapshot(&t);
    if let Some(v) = viewed {
        VIEWS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        assert!(
            v == got,
            "the journal view differs from the recovered table"
        );
    }
    got
}

/// Crashes that left a pending journal, checked through the journal view.
static VIEWS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn table_snapshot(t: &Table) -> Snapshot {
    assert!(t.verify(|_, _| {}).is_empty());
    let n = t.nrows();
    let lens: Vec<usize> = t
        .column_names()
        .iter()
        .map(|c| t.column(c).unwrap().len())
        .collect();
    assert!(
        lens.iter().all(|&l| l as u64 == n),
        "columns of unequal length"
    );
    (n, t.rows(0, n, None).unwrap())
}

#[test]
fn multi_column_operations_survive_a_crash_at_every_step() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    let opts = ColumnOptions {
        chunklen: Some(5),
        superchunksize: Some(2),
        ..Default::default()
    };
    let mut t = Table::create(
        &base,
        vec![
            Field::new("a", DType::I32).with_options(opts.clone()),
            Field::varstr("s").with_options(opts.clone()),
            Field::structure(
                "n",
                vec![Field::new("b", DType::F64).with_options(opts.clone())],
            ),
        ],
        &TableOptions::default(),
    )
    .unwrap();
    t.append(&[
        ("a", Values::from_slice(&(0..13).collect::<Vec<i32>>())),
        (
            "s",
            Values::strings(&(0..13).map(|i| format!("s{i}")).collect::<Vec<_>>()),
        ),
        (
            "n/b",
            Values::from_slice(&(0..13).map(f64::from).collect::<Vec<_>>()),
        ),
    ])
    .unwrap();
    drop(t);
    type TOp = dyn Fn(&mut Table) -> blz::Result<()>;
    let ops: Vec<Box<TOp>> = vec![
        Box::new(|t| {
            t.append(&[
                ("a", Values::from_slice(&[100i32; 9])),
                ("s", Values::strings(&["new"; 9])),
                ("n/b", Values::from_slice(&[0.5f64; 9])),
            ])
        }),
        Box::new(|t| t.resize(4)),
        Box::new(|t| {
            t.write_rows(
                3,
                &[
                    ("a", Values::from_slice(&[-1i32; 6])),
                    ("s", Values::strings(&["w"; 6])),
                ],
            )
        }),
        Box::new(|t| t.add_column(Field::new("c", DType::U8))),
        Box::new(|t| t.drop_column("s")),
        Box::new(|t| t.rename_column("n/b", "bb")),
    ];
    for (i, op) in ops.iter().enumerate() {
        let before = snapshot(&base);
        let clean = dir.path().join(format!("clean{i}"));
        copy_dir(&base, &clean);
        let counter = Arc::new(FaultyStorage::new(Arc::new(LocalStorage), u64::MAX));
        {
            let mut t = Table::open_in(counter.clone(), &clean, Mode::ReadWrite).unwrap();
            op(&mut t).unwrap();
        }
        let after = snapshot(&clean);
        let steps = counter.operations();
        for k in 0..steps {
            let d = dir.path().join(format!("op{i}-k{k}"));
            copy_dir(&base, &d);
            let faulty: Arc<dyn Storage> = Arc::new(FaultyStorage::new(Arc::new(LocalStorage), k));
            if let Ok(mut t) = Table::open_in(faulty, &d, Mode::ReadWrite) {
                assert!(op(&mut t).is_err());
            }
            let got = snapshot(&d);
            assert!(
                got == before || got == after,
                "op {i}, crash at step {k} of {steps}: neither state"
            );
            std::fs::remove_dir_all(&d).unwrap();
        }
    }
    // Dropping and renaming columns and rewriting rows go through the journal.
    assert!(
        VIEWS.load(std::sync::atomic::Ordering::Relaxed) > 0,
        "no crash left a pending journal"
    );
}

/// Every `*.tmp` file under `dir`.
fn tmp_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(tmp_files(&p));
        } else if p.extension().is_some_and(|x| x == "tmp") {
            out.push(p);
        }
    }
    out
}

#[test]
fn compaction_survives_a_crash_at_every_step() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    let opts = ColumnOptions {
        chunklen: Some(4),
        superchunksize: Some(2),
        ..Default::default()
    };
    let mut t = Table::create(
        &base,
        vec![
            Field::new("a", DType::I64).with_options(opts.clone()),
            Field::structure("n", vec![Field::varstr("s").with_options(opts.clone())]),
        ],
        &TableOptions::default(),
    )
    .unwrap();
    t.append(&[
        ("a", Values::from_slice(&(0..12).collect::<Vec<i64>>())),
        (
            "n/s",
            Values::strings(&(0..12).map(|i| format!("s{i}")).collect::<Vec<_>>()),
        ),
    ])
    .unwrap();
    // Leave dead space in both columns' files.
    t.write_rows(
        1,
        &[
            ("a", Values::from_slice(&[i64::MAX, -7, 1 << 40])),
            ("n/s", Values::strings(&["a longer string", "x", "yy"])),
        ],
    )
    .unwrap();
    drop(t);
    let before = snapshot(&base);
    let counter = Arc::new(FaultyStorage::new(Arc::new(LocalStorage), u64::MAX));
    let clean = dir.path().join("clean");
    copy_dir(&base, &clean);
    {
        let mut t = Table::open_in(counter.clone(), &clean, Mode::ReadWrite).unwrap();
        assert!(t.compact().unwrap() > 0);
    }
    assert_eq!(snapshot(&clean), before);
    let steps = counter.operations();
    assert!(steps > 4);
    for k in 0..steps {
        let d = dir.path().join(format!("k{k}"));
        copy_dir(&base, &d);
        let faulty: Arc<dyn Storage> = Arc::new(FaultyStorage::new(Arc::new(LocalStorage), k));
        if let Ok(mut t) = Table::open_in(faulty, &d, Mode::ReadWrite) {
            assert!(t.compact().is_err(), "step {k}: the crash was not reported");
        }
        assert_eq!(snapshot(&d), before, "crash at step {k} of {steps}");
        // A writer's open removes a half-written copy; compaction then completes.
        let mut t = Table::open_rw(&d).unwrap();
        assert_eq!(tmp_files(&d), Vec::<std::path::PathBuf>::new(), "step {k}");
        t.compact().unwrap();
        drop(t);
        assert_eq!(snapshot(&d), before, "step {k}, compacted after the crash");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
