//! Per-chunk statistics (`spec/dataset.md` §14): after random sequences of append / modify /
//! resize / reopen / compact they bound the values read back (and equal them for chunks
//! written since the last shrink cut into them); a crash at every step of an operation
//! leaves statistics that match the data recovered; datasets whose `meta/sizes` does not
//! vouch for them, or whose files carry none, report them unknown.

mod common;

use blz::stats::{ChunkStats, StatValue};
use blz::storage::{FaultyStorage, LocalStorage, Storage};
use blz::table::{ColumnOptions, Field, TableOptions, Values};
use blz::{CreateOptions, DType, Dataset, Mode, Table};
use ndarray::{s, Array2, ArrayD};
use proptest::prelude::*;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

const C0: usize = 3;
const C1: usize = 4;
const W: usize = 7;

/// Exact statistics of floats.
fn float_stats(v: impl IntoIterator<Item = f64>) -> ChunkStats {
    let (mut lo, mut hi, mut nan, mut any) = (f64::INFINITY, f64::NEG_INFINITY, 0, false);
    for x in v {
        if x.is_nan() {
            nan += 1;
        } else {
            lo = lo.min(x);
            hi = hi.max(x);
            any = true;
        }
    }
    ChunkStats {
        min: any.then_some(StatValue::Float(lo)),
        max: any.then_some(StatValue::Float(hi)),
        nan_count: nan,
        sum: None,
    }
}

fn f(v: Option<StatValue>) -> Option<f64> {
    v.map(StatValue::as_f64)
}

/// `got` bounds `want` (and equals it when `exact`).
fn check(got: &ChunkStats, want: &ChunkStats, exact: bool, what: &str) {
    if exact {
        // The sums are checked by tests/reduce_stats.rs (and bit for bit by `verify`).
        let got = ChunkStats { sum: None, ..*got };
        assert_eq!(&got, want, "{what}");
        return;
    }
    assert!(
        got.nan_count >= want.nan_count,
        "{what}: {got:?} vs {want:?}"
    );
    if let (Some(w), Some(g)) = (f(want.min), f(got.min)) {
        assert!(g <= w, "{what}: {got:?} vs {want:?}");
    }
    if let (Some(w), Some(g)) = (f(want.max), f(got.max)) {
        assert!(g >= w, "{what}: {got:?} vs {want:?}");
    }
    assert!(want.min.is_none() || got.min.is_some(), "{what}");
}

/// Checks every chunk's statistics of a 2-d f64 dataset against its data.
fn check_array(ds: &Dataset, inexact: &BTreeSet<usize>) {
    let data: ArrayD<f64> = ds.read().unwrap();
    let rows = ds.shape()[0] as usize;
    let stats = ds.chunk_stats().unwrap();
    let g1 = W.div_ceil(C1);
    assert_eq!(stats.len(), rows.div_ceil(C0) * g1);
    for (k, st) in stats.iter().enumerate() {
        let (c0, c1) = (k / g1, k % g1);
        let st = st.unwrap_or_else(|| panic!("chunk {k}: no statistics"));
        let r = c0 * C0..(c0 * C0 + C0).min(rows);
        let c = c1 * C1..(c1 * C1 + C1).min(W);
        let want = float_stats(data.slice(s![r, c]).iter().copied());
        check(&st, &want, !inexact.contains(&c0), &format!("chunk {k}"));
    }
    // `verify` checks the same against the data it decodes.
    let problems = ds.verify(|_, _| {});
    assert!(problems.is_empty(), "{problems:?}");
}

#[derive(Debug, Clone)]
enum Op {
    Append(usize, u64),
    Resize(usize),
    Write(usize, usize, u64),
    Reopen,
    Compact,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0usize..10, any::<u64>()).prop_map(|(n, s)| Op::Append(n, s)),
        2 => (0usize..25).prop_map(Op::Resize),
        3 => (0usize..25, 0usize..6, any::<u64>()).prop_map(|(a, n, s)| Op::Write(a, n, s)),
        1 => Just(Op::Reopen),
        1 => Just(Op::Compact),
    ]
}

/// Values with NaNs and infinities among them.
fn values(rows: usize, seed: u64) -> Array2<f64> {
    Array2::from_shape_fn((rows, W), |(i, j)| {
        let h = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(((i * W + j) as u64).wrapping_mul(1442695040888963407));
        match h >> 60 {
            0 => f64::NAN,
            1 => f64::INFINITY,
            _ => ((h >> 20) % 2001) as f64 / 10.0 - 100.0,
        }
    })
}

/// Chunk-rows written since a shrink last cut into them are exact; the last one may not be.
fn touch(inexact: &mut BTreeSet<usize>, rows: std::ops::Range<usize>) {
    if !rows.is_empty() {
        for c in rows.start / C0..=(rows.end - 1) / C0 {
            inexact.remove(&c);
        }
    }
}

proptest! {
    #![proptest_config(common::config(48))]

    #[test]
    fn array_stats_follow_the_data(ops in proptest::collection::vec(op(), 1..14)) {
        let dir = common::Dir::new();
        let path = dir.p("a");
        let opts = CreateOptions {
            chunkshape: Some(vec![C0 as u64, C1 as u64]),
            superchunksize: Some(2),
            fill: serde_json::json!("nan"),
            ..Default::default()
        };
        let mut ds = Dataset::create_with(&path, DType::F64, &[0, W as u64], &opts).unwrap();
        let mut inexact = BTreeSet::new();
        for op in ops {
            let rows = ds.shape()[0] as usize;
            match op {
                Op::Append(n, seed) => {
                    ds.append(&values(n, seed).into_dyn().view()).unwrap();
                    if n > 0 {
                        touch(&mut inexact, rows.saturating_sub(1)..rows + n);
                    }
                }
                Op::Resize(n) => {
                    ds.resize(n as u64).unwrap();
                    if n < rows {
                        inexact.retain(|&c| c < n.div_ceil(C0));
                        if n % C0 != 0 {
                            inexact.insert(n / C0);
                        }
                    } else if n > rows {
                        touch(&mut inexact, rows.saturating_sub(1)..n);
                    }
                }
                Op::Write(a, n, seed) => {
                    let a = a.min(rows);
                    let b = (a + n).min(rows);
                    let v = values(b - a, seed);
                    ds.write_slice(s![a..b, ..], &v.into_dyn().view()).unwrap();
                    touch(&mut inexact, a..b);
                }
                Op::Reopen => {
                    drop(ds);
                    ds = Dataset::open_rw(&path).unwrap();
                }
                Op::Compact => {
                    ds.compact().unwrap();
                }
            }
            check_array(&ds, &inexact);
        }
        check_array(&Dataset::open(&path).unwrap(), &inexact);
    }
}

fn table_fields() -> Vec<Field> {
    let opts = ColumnOptions {
        chunklen: Some(4),
        superchunksize: Some(3),
        ..Default::default()
    };
    vec![
        Field::new("i", DType::I64).with_options(opts.clone()),
        Field::structure(
            "p",
            vec![
                Field::new("x", DType::F32).with_options(opts.clone()),
                Field::new("b", DType::Bool).with_options(opts.clone()),
            ],
        ),
        Field::new("u", DType::U16).with_options(opts.clone()),
        Field::varstr("s").with_options(opts),
    ]
}

fn table_rows(n: usize, seed: i64) -> Vec<(&'static str, Values)> {
    let i: Vec<i64> = (0..n as i64).map(|r| (r * 37 + seed) % 101 - 50).collect();
    let x: Vec<f32> = (0..n)
        .map(|r| {
            if (r as i64 + seed) % 5 == 0 {
                f32::NAN
            } else {
                r as f32 * 0.5 - seed as f32
            }
        })
        .collect();
    let b: Vec<bool> = (0..n).map(|r| (r as i64 + seed) % 3 == 0).collect();
    let u: Vec<u16> = (0..n).map(|r| (r as u16).wrapping_mul(977)).collect();
    let s: Vec<String> = (0..n).map(|r| format!("s{r}")).collect();
    vec![
        ("i", Values::from_slice(&i)),
        ("p/x", Values::from_slice(&x)),
        ("p/b", Values::from_slice(&b)),
        ("u", Values::from_slice(&u)),
        ("s", Values::strings(&s)),
    ]
}

/// Exact statistics of a table column, chunk by chunk, from its values.
fn table_want(t: &Table, col: &str) -> Vec<ChunkStats> {
    let cl = t.column_chunklen(col).unwrap() as usize;
    let v = t.column(col).unwrap();
    let n = v.len();
    let as_f64: Vec<f64> = match col {
        "i" => v
            .to_vec::<i64>()
            .unwrap()
            .iter()
            .map(|&x| x as f64)
            .collect(),
        "p/x" => v
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|&x| f64::from(x))
            .collect(),
        "p/b" => v
            .to_vec::<bool>()
            .unwrap()
            .iter()
            .map(|&x| f64::from(u8::from(x)))
            .collect(),
        "u" => v
            .to_vec::<u16>()
            .unwrap()
            .iter()
            .map(|&x| f64::from(x))
            .collect(),
        _ => unreachable!(),
    };
    (0..n.div_ceil(cl))
        .map(|k| float_stats(as_f64[k * cl..((k + 1) * cl).min(n)].iter().copied()))
        .collect()
}

/// Checks a table's statistics against its data; `exact` false after a shrink.
fn check_table(t: &Table, exact: bool) {
    for col in ["i", "p/x", "p/b", "u"] {
        let got = t.column_stats(col).unwrap();
        let want = table_want(t, col);
        assert_eq!(got.len(), want.len(), "{col}");
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            let g = g.unwrap_or_else(|| panic!("{col} chunk {k}: no statistics"));
            let mut g2 = g;
            // Compare as floats: the kinds are checked below.
            g2.min = g.min.map(|v| StatValue::Float(v.as_f64()));
            g2.max = g.max.map(|v| StatValue::Float(v.as_f64()));
            let last = k + 1 == want.len();
            check(&g2, w, exact || !last, &format!("{col} chunk {k}"));
            let kind_ok = matches!(
                (col, g.min),
                ("i", Some(StatValue::Int(_)))
                    | ("p/x", Some(StatValue::Float(_)))
                    | ("p/b", Some(StatValue::Bool(_)))
                    | ("u", Some(StatValue::UInt(_)))
                    | (_, None)
            );
            assert!(kind_ok, "{col}: {g:?}");
        }
    }
    assert!(t.column_stats("s").unwrap().iter().all(Option::is_none));
    let problems = t.verify(|_, _| {});
    assert!(problems.is_empty(), "{problems:?}");
    assert!(t.column_stats("nope").is_err());
}

#[test]
fn table_stats_follow_appends_writes_resizes_and_column_changes() {
    let dir = common::Dir::new();
    let path = dir.p("t");
    let mut t = Table::create(&path, table_fields(), &TableOptions::default()).unwrap();
    assert_eq!(t.column_chunklen("p/x").unwrap(), 4);
    t.append(&table_rows(10, 3)).unwrap();
    check_table(&t, true);
    t.append(&table_rows(7, -4)).unwrap();
    check_table(&t, true);
    t.write_rows(5, &[("i", Values::from_slice(&[1000i64, -1000]))])
        .unwrap();
    check_table(&t, true);
    t.resize(14).unwrap();
    check_table(&t, false);
    t.resize(30).unwrap();
    check_table(&t, true);
    t.add_column(Field::new("c", DType::U8)).unwrap();
    let c = t.column_stats("c").unwrap();
    assert!(c
        .iter()
        .all(|s| s.is_some_and(|s| s.min == Some(StatValue::UInt(0)))));
    t.compact().unwrap();
    check_table(&Table::open(&path).unwrap(), true);
}

/// A crash at every step of each operation: whatever state the table recovers to, its
/// statistics match its data.
#[test]
fn stats_match_the_data_after_a_crash_at_every_step() {
    let dir = common::Dir::new();
    let base = dir.p("base");
    {
        let mut t = Table::create(&base, table_fields(), &TableOptions::default()).unwrap();
        t.append(&table_rows(9, 1)).unwrap();
    }
    type TableOp = Box<dyn Fn(&mut Table) -> blz::Result<()>>;
    let ops: Vec<TableOp> = vec![
        Box::new(|t| t.append(&table_rows(6, 8))),
        Box::new(|t| {
            t.write_rows(
                2,
                &[
                    ("i", Values::from_slice(&[-7777i64, 7777, 5])),
                    ("p/x", Values::from_slice(&[f32::NAN, 1e9, -1e9])),
                ],
            )
        }),
        Box::new(|t| t.resize(20)),
    ];
    for (i, op) in ops.iter().enumerate() {
        let clean = dir.p(&format!("clean{i}"));
        common::copy_dir(&base, &clean);
        let counter = Arc::new(FaultyStorage::new(Arc::new(LocalStorage), u64::MAX));
        {
            let mut t = Table::open_in(counter.clone(), &clean, Mode::ReadWrite).unwrap();
            op(&mut t).unwrap();
        }
        let steps = counter.operations();
        let mut states = BTreeSet::new();
        for k in 0..steps {
            let d = dir.p(&format!("op{i}-k{k}"));
            common::copy_dir(&base, &d);
            let faulty: Arc<dyn Storage> = Arc::new(FaultyStorage::new(Arc::new(LocalStorage), k));
            if let Ok(mut t) = Table::open_in(faulty, &d, Mode::ReadWrite) {
                assert!(op(&mut t).is_err());
            }
            // Recovery (a writer's open replays a committed journal).
            let t = Table::open_rw(&d).unwrap();
            states.insert(t.sizes().generation);
            check_table(&t, true);
            drop(t);
            std::fs::remove_dir_all(&d).unwrap();
        }
        assert_eq!(
            states.len(),
            2,
            "op {i}: both the old and the new state were met"
        );
    }
}

/// A dataset whose `meta/sizes` lacks the `stats` key (created by a blz that predates
/// statistics, or written to by one since) opens, reads, and reports every chunk unknown,
/// also after this blz writes to it.
#[test]
fn datasets_without_vouched_stats_report_none() {
    let dir = common::Dir::new();
    let path = dir.p("old");
    let opts = CreateOptions {
        chunkshape: Some(vec![4, 4]),
        ..Default::default()
    };
    let mut ds = Dataset::create_with(&path, DType::I32, &[0, 4], &opts).unwrap();
    ds.append(&ndarray::Array2::<i32>::ones((10, 4)).into_dyn().view())
        .unwrap();
    assert!(ds.chunk_stats().unwrap().iter().all(Option::is_some));
    drop(ds);
    strip_key(&path.join("meta/sizes"), "stats");
    let mut ds = Dataset::open_rw(&path).unwrap();
    assert_eq!(ds.read::<i32>().unwrap().sum(), 40);
    assert_eq!(ds.chunk_stats().unwrap(), vec![None; 3]);
    ds.append(&ndarray::Array2::<i32>::ones((5, 4)).into_dyn().view())
        .unwrap();
    assert_eq!(ds.chunk_stats().unwrap(), vec![None; 4]);
}

/// Files without records (a dataset made before files carried metadata: no `id`) report
/// unknown statistics for their chunks, while the dataset's `meta/sizes` vouches.
#[test]
fn files_without_records_report_none() {
    let dir = common::Dir::new();
    let path = dir.p("noid");
    let opts = CreateOptions {
        chunkshape: Some(vec![4]),
        ..Default::default()
    };
    drop(Dataset::create_with(&path, DType::F64, &[0], &opts).unwrap());
    strip_key(&path.join("meta/storage"), "id");
    let mut ds = Dataset::open_rw(&path).unwrap();
    ds.append(&ndarray::Array1::<f64>::zeros(9).into_dyn().view())
        .unwrap();
    assert!(ds.sizes().stats_current());
    assert_eq!(ds.chunk_stats().unwrap(), vec![None; 3]);
}

fn strip_key(file: &Path, key: &str) {
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    v.as_object_mut().unwrap().remove(key).unwrap();
    std::fs::write(file, serde_json::to_vec(&v).unwrap()).unwrap();
}

/// bloscpack's layout is unchanged: the statistics are one more key of the JSON metadata,
/// and a file with them reads chunk by chunk as any superchunk file.
#[test]
fn files_with_stats_are_plain_superchunk_files() {
    let dir = common::Dir::new();
    let path = dir.p("plain");
    let opts = CreateOptions {
        chunkshape: Some(vec![8]),
        superchunksize: Some(4),
        ..Default::default()
    };
    let mut ds = Dataset::create_with(&path, DType::U8, &[0], &opts).unwrap();
    ds.append(&ndarray::Array1::<u8>::from_iter(0..20).into_dyn().view())
        .unwrap();
    let file = LocalStorage
        .open(&ds.superchunk_path(0), blz::storage::OpenMode::Read)
        .unwrap();
    let r = blz_format::blpk::SuperchunkReader::open(file).unwrap();
    let doc = r.metadata().unwrap();
    let recs = doc["blz"]["stats"].as_str().unwrap();
    assert_eq!(recs.len(), 50 * 4);
    assert_eq!(&recs[..2], "03");
    assert_eq!(r.nchunks(), 3);
}
