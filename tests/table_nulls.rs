//! Nulls in tables (`spec/table.md` §3.5): a model-based property test of nullable columns
//! (random append / resize / write / put / reopen against a `Vec<Option<T>>` per column),
//! the errors for nulls a column cannot hold, what a null reads as, null counts, and the
//! format (a table without nullable columns is written as before).

use blz::table::{ColumnOptions, Field, NullableValues, Table, TableOptions, Values};
use blz::{DType, Error};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    /// Rows, a seed, and one in how many rows is null (0: none).
    Append(usize, u8, u8),
    Resize(usize),
    /// Start, rows, seed, null every how many.
    Write(usize, usize, u8, u8),
    /// Rows by index (taken modulo the length), seed.
    Put(Vec<usize>, u8),
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0usize..30, any::<u8>(), 0u8..4).prop_map(|(n, s, k)| Op::Append(n, s, k)),
        1 => (0usize..60).prop_map(Op::Resize),
        3 => (0usize..60, 1usize..12, any::<u8>(), 0u8..4)
            .prop_map(|(a, n, s, k)| Op::Write(a, n, s, k)),
        1 => (prop::collection::vec(0usize..100, 0..8), any::<u8>()).prop_map(|(i, s)| Op::Put(i, s)),
        1 => Just(Op::Reopen),
    ]
}

/// The model: a nullable int32, a nullable varstr, a nullable float64 with chunks of
/// different lengths, and an int8 column that holds no nulls.
#[derive(Debug, Default, Clone, PartialEq)]
struct Model {
    i: Vec<Option<i32>>,
    s: Vec<Option<String>>,
    f: Vec<Option<f64>>,
    b: Vec<i8>,
}

fn null_at(k: u8, j: usize, seed: u8) -> bool {
    k != 0 && (j + seed as usize).is_multiple_of(k as usize)
}

fn gen(n: usize, seed: u8, k: u8) -> Model {
    Model {
        i: (0..n)
            .map(|j| (!null_at(k, j, seed)).then_some(seed as i32 * 1000 + j as i32))
            .collect(),
        s: (0..n)
            .map(|j| (!null_at(k, j + 1, seed)).then(|| format!("{seed}:{}", "z".repeat(j % 7))))
            .collect(),
        f: (0..n)
            .map(|j| (!null_at(k, j + 2, seed)).then_some(seed as f64 + j as f64 / 4.0))
            .collect(),
        b: (0..n).map(|j| (seed as i8).wrapping_add(j as i8)).collect(),
    }
}

fn nullable<T: Clone>(v: &[Option<T>], fill: T, make: impl Fn(&[T]) -> Values) -> NullableValues {
    let vals: Vec<T> = v
        .iter()
        .map(|x| x.clone().unwrap_or(fill.clone()))
        .collect();
    let validity: Vec<bool> = v.iter().map(Option::is_some).collect();
    // Garbage where a row is null must not matter: blz stores the fill value there.
    NullableValues::new(make(&vals), Some(validity))
}

fn payload(m: &Model) -> Vec<(&'static str, NullableValues)> {
    vec![
        ("i", nullable(&m.i, -77, Values::from_slice)),
        (
            "s",
            nullable(&m.s, "garbage".to_string(), |v: &[String]| {
                Values::strings(v)
            }),
        ),
        ("f", nullable(&m.f, f64::NAN, Values::from_slice)),
        ("b", Values::from_slice(&m.b).into()),
    ]
}

fn create(path: &std::path::Path) -> Table {
    let opts = |cl| ColumnOptions {
        chunklen: Some(cl),
        superchunksize: Some(2),
        ..Default::default()
    };
    Table::create(
        path,
        vec![
            Field::new("i", DType::I32).with_options(opts(4)).nullable(),
            Field::varstr("s").with_options(opts(3)).nullable(),
            Field::new("f", DType::F64).with_options(opts(5)).nullable(),
            Field::new("b", DType::I8).with_options(opts(4)),
        ],
        &TableOptions::default(),
    )
    .unwrap()
}

fn read(t: &Table) -> Model {
    let n = t.nrows();
    let get = |name: &str| t.column_rows_nullable(name, 0, n).unwrap();
    fn opt<T: Clone>(v: Vec<T>, valid: &Option<Vec<bool>>) -> Vec<Option<T>> {
        v.into_iter()
            .enumerate()
            .map(|(j, x)| match valid {
                Some(f) if !f[j] => None,
                _ => Some(x),
            })
            .collect()
    }
    let i = get("i");
    let s = get("s");
    let f = get("f");
    // A null reads as the column's fill value.
    let iv = i.values.to_vec::<i32>().unwrap();
    let sv = s.values.to_strings().unwrap();
    let fv = f.values.to_vec::<f64>().unwrap();
    for j in 0..n as usize {
        if i.is_null(j) {
            assert_eq!(iv[j], 0);
        }
        if s.is_null(j) {
            assert_eq!(sv[j], "");
        }
        if f.is_null(j) {
            assert_eq!(fv[j], 0.0);
        }
    }
    Model {
        i: opt(iv, &i.validity),
        s: opt(sv, &s.validity),
        f: opt(fv, &f.validity),
        b: t.column("b").unwrap().to_vec::<i8>().unwrap(),
    }
}

fn check_counts(t: &Table, m: &Model) {
    for (name, cl, valid) in [
        (
            "i",
            4usize,
            m.i.iter().map(Option::is_some).collect::<Vec<_>>(),
        ),
        ("s", 3, m.s.iter().map(Option::is_some).collect()),
        ("f", 5, m.f.iter().map(Option::is_some).collect()),
    ] {
        let counts = t.column_null_counts(name).unwrap();
        assert_eq!(counts.len(), valid.len().div_ceil(cl));
        for (k, c) in counts.iter().enumerate() {
            let want = valid[k * cl..((k + 1) * cl).min(valid.len())]
                .iter()
                .filter(|&&v| !v)
                .count() as u64;
            if let Some(c) = c {
                assert_eq!(*c, want, "column {name} chunk {k}");
            }
        }
    }
    assert!(t
        .column_null_counts("b")
        .unwrap()
        .iter()
        .all(|c| *c == Some(0)));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn nullable_columns_follow_the_model(ops in prop::collection::vec(op(), 1..14)) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.blz");
        let mut t = create(&p);
        let mut m = Model::default();
        for o in ops {
            match o {
                Op::Append(n, seed, k) => {
                    let add = gen(n, seed, k);
                    t.append(&payload(&add)).unwrap();
                    m.i.extend(add.i);
                    m.s.extend(add.s);
                    m.f.extend(add.f);
                    m.b.extend(add.b);
                }
                Op::Resize(n) => {
                    t.resize(n as u64).unwrap();
                    // Rows a grow adds are null in a nullable column, the fill value in
                    // the others.
                    m.i.resize(n, None);
                    m.s.resize(n, None);
                    m.f.resize(n, None);
                    m.b.resize(n, 0);
                }
                Op::Write(a, n, seed, k) => {
                    let len = m.b.len();
                    if a >= len {
                        continue;
                    }
                    let n = n.min(len - a);
                    let w = gen(n, seed, k);
                    t.write_rows(a as u64, &payload(&w)).unwrap();
                    m.i.splice(a..a + n, w.i);
                    m.s.splice(a..a + n, w.s);
                    m.f.splice(a..a + n, w.f);
                    m.b.splice(a..a + n, w.b);
                }
                Op::Put(idx, seed) => {
                    let len = m.b.len();
                    if len == 0 {
                        continue;
                    }
                    let idx: Vec<u64> = idx.iter().map(|&j| (j % len) as u64).collect();
                    let w = gen(idx.len(), seed, 2);
                    t.put(&idx, &payload(&w)).unwrap();
                    for (j, &r) in idx.iter().enumerate() {
                        let r = r as usize;
                        m.i[r] = w.i[j];
                        m.s[r] = w.s[j].clone();
                        m.f[r] = w.f[j];
                        m.b[r] = w.b[j];
                    }
                }
                Op::Reopen => {
                    drop(t);
                    t = Table::open_rw(&p).unwrap();
                }
            }
            prop_assert_eq!(read(&t), m.clone());
            check_counts(&t, &m);
        }
        drop(t);
        let t = Table::open(&p).unwrap();
        prop_assert_eq!(read(&t), m.clone());
        let problems = t.verify(|_, _| {});
        prop_assert!(problems.is_empty(), "{:?}", problems);
        // Rows by index carry their validity.
        let n = m.b.len() as u64;
        let idx: Vec<u64> = (0..n).rev().collect();
        let v = t.take_validity(&idx, "i").unwrap();
        let want: Vec<bool> = idx.iter().map(|&r| m.i[r as usize].is_some()).collect();
        prop_assert_eq!(v.unwrap_or_else(|| vec![true; idx.len()]), want);
    }
}

#[test]
fn nulls_in_a_column_that_is_not_nullable_are_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.blz");
    let mut t = create(&p);
    let mut pl = payload(&gen(4, 1, 0));
    pl[3].1.validity = Some(vec![true, false, true, true]);
    let e = t.append(&pl).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)));
    let msg = e.to_string();
    assert!(
        msg.contains("column b is not nullable") && msg.contains("row 1"),
        "{msg}"
    );
    assert_eq!(t.nrows(), 0);
    // Flags of another length than the values.
    let mut pl = payload(&gen(4, 1, 0));
    pl[0].1.validity = Some(vec![true; 3]);
    assert!(t.append(&pl).unwrap_err().to_string().contains("column i"));
    // All-valid flags for a column that is not nullable are fine.
    let mut pl = payload(&gen(4, 1, 0));
    pl[3].1.validity = Some(vec![true; 4]);
    t.append(&pl).unwrap();
    assert_eq!(t.nrows(), 4);
}

#[test]
fn a_table_without_nullable_columns_is_written_as_before_and_hides_validity_columns() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("plain.blz");
    let mut t = Table::create(
        &p,
        vec![Field::new("x", DType::I64)],
        &TableOptions::default(),
    )
    .unwrap();
    t.append(&[("x", Values::from_slice(&[1i64, 2]))]).unwrap();
    let storage = std::fs::read_to_string(p.join("meta/storage")).unwrap();
    assert!(
        !storage.contains("validity") && !storage.contains("pandas"),
        "{storage}"
    );
    assert!(!t.is_nullable("x").unwrap());
    assert_eq!(t.column_validity("x", 0, 2).unwrap(), None);

    let q = dir.path().join("nulls.blz");
    let mut t = create(&q);
    t.append(&payload(&gen(10, 3, 2))).unwrap();
    assert_eq!(t.column_names(), vec!["i", "s", "f", "b"]);
    assert!(t.leaves().iter().all(|l| !l.path.contains("__")));
    assert!(t.column("i/__validity__").is_err());
    let storage: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(q.join("meta/storage")).unwrap()).unwrap();
    let i = &storage["dtype"][0];
    assert_eq!(i["validity"]["compression"]["filters"][0], "bitshuffle");
    assert_eq!(i["validity"]["chunklen"], 4);
    assert_eq!(i["validity"]["dflt"], false);
    assert!(storage["dtype"][3].get("validity").is_none());
    assert!(q.join("data/i/__validity__/__1__.bin").exists());
    let sizes: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(q.join("meta/sizes")).unwrap()).unwrap();
    assert_eq!(sizes["columns"]["i/__validity__"]["nbytes"], 10);

    // Schema changes carry the validity column.
    t.rename_column("i", "j").unwrap();
    t.add_column(Field::new("n", DType::U16).nullable())
        .unwrap();
    let v = t.column_rows_nullable("n", 0, 10).unwrap();
    assert_eq!(
        v.validity,
        Some(vec![false; 10]),
        "a column added is null in every row"
    );
    t.drop_column("s").unwrap();
    drop(t);
    let t = Table::open(&q).unwrap();
    assert_eq!(t.column_names(), vec!["j", "f", "b", "n"]);
    let j = t.column_rows_nullable("j", 0, 10).unwrap();
    assert_eq!(j.null_count(), 5);
    assert!(!q.join("data/s").exists());
    assert!(t.verify(|_, _| {}).is_empty());
}

/// `where` over nullable columns: a comparison with a null is neither true nor false (`~` of
/// it too), `&` / `|` are Kleene's, `isnull` / `notnull` test for nulls; checked against the
/// same logic over the model's `Option`s, in chunks with and without nulls.
#[test]
fn where_expressions_have_sql_null_semantics() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.blz");
    let mut t = create(&p);
    let mut m = gen(40, 5, 3);
    // Chunks 0..2 of `i` without nulls (their statistics may prove a comparison).
    for r in 0..8 {
        m.i[r] = Some(5000 + r as i32);
    }
    t.append(&payload(&m)).unwrap();
    let rows = |e: &str| t.where_rows(e, &[]).unwrap().rows;
    let want = |f: &dyn Fn(usize) -> Option<bool>| -> Vec<u64> {
        (0..40)
            .filter(|&r| f(r) == Some(true))
            .map(|r| r as u64)
            .collect()
    };
    let gt = |r: usize| m.i[r].map(|v| v > 5010);
    let fpos = |r: usize| m.f[r].map(|v| v > 7.0);
    assert_eq!(rows("i > 5010"), want(&gt));
    assert_eq!(rows("~(i > 5010)"), want(&|r| gt(r).map(|b| !b)));
    assert_eq!(rows("isnull(i)"), want(&|r| Some(m.i[r].is_none())));
    assert_eq!(rows("notnull(s)"), want(&|r| Some(m.s[r].is_some())));
    assert_eq!(rows("~isnull(f)"), want(&|r| Some(m.f[r].is_some())));
    let and = |a: Option<bool>, b: Option<bool>| match (a, b) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    };
    let or = |a: Option<bool>, b: Option<bool>| match (a, b) {
        (Some(true), _) | (_, Some(true)) => Some(true),
        (Some(false), Some(false)) => Some(false),
        _ => None,
    };
    assert_eq!(
        rows("(i > 5010) & (f > 7.0)"),
        want(&|r| and(gt(r), fpos(r)))
    );
    assert_eq!(
        rows("(i > 5010) | (f > 7.0)"),
        want(&|r| or(gt(r), fpos(r)))
    );
    assert_eq!(
        rows("~((i > 5010) | (f > 7.0))"),
        want(&|r| or(gt(r), fpos(r)).map(|b| !b))
    );
    assert_eq!(
        rows("(i + 1 > 0) | isnull(i)"),
        want(&|r| Some(true).filter(|_| r < 40))
    );
    assert_eq!(rows("b > -200"), (0..40).collect::<Vec<u64>>());
    assert!(t.where_rows("isnull(zz)", &[]).is_err());
    assert!(t.where_rows("isnull(i + 1)", &[]).is_err());
}

#[test]
fn reductions_refuse_a_column_holding_nulls() {
    use blz::scan::{reduce_column, Reduction, ScanOptions};
    let dir = tempfile::tempdir().unwrap();
    let mut t = create(&dir.path().join("t.blz"));
    t.append(&payload(&gen(9, 1, 0))).unwrap();
    // No nulls yet: reduced as before.
    assert!(reduce_column(&t, "i", &ScanOptions::default(), Reduction::Sum).is_ok());
    t.append(&payload(&gen(9, 1, 2))).unwrap();
    let e = reduce_column(&t, "i", &ScanOptions::default(), Reduction::Max).unwrap_err();
    assert!(
        e.to_string().contains("column i") && e.to_string().contains("nulls"),
        "{e}"
    );
    assert!(reduce_column(&t, "b", &ScanOptions::default(), Reduction::Sum).is_ok());
}
