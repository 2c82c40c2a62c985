//! `where` queries: random expressions over a random table checked against a row-by-row
//! evaluation of the same expression on the columns in memory; arrays against ndarray;
//! chunk statistics shown to spare reads (a corrupt chunk that a query's statistics rule out
//! is never decoded); parse and type errors point at their position.

mod common;
#[path = "where_ref/mod.rs"]
mod where_ref;

use blz::table::{ColumnOptions, Field, TableOptions, Values};
use blz::{CreateOptions, DType, Dataset, Error, Table};
use proptest::prelude::*;
use where_ref::Col;

const N_S: [&str; 4] = ["", "ab", "abc", "zz"];

#[derive(Debug, Clone)]
struct Rows {
    a: Vec<i32>,
    b: Vec<f64>,
    c: Vec<u8>,
    d: Vec<bool>,
    s: Vec<String>,
    f: Vec<String>,
}

fn rows() -> impl Strategy<Value = Rows> {
    (0usize..120).prop_flat_map(|n| {
        (
            proptest::collection::vec(-30i32..30, n),
            proptest::collection::vec(
                prop_oneof![
                    8 => (-50i32..50).prop_map(|x| x as f64 / 4.0),
                    1 => Just(f64::NAN),
                    1 => Just(f64::INFINITY),
                ],
                n,
            ),
            proptest::collection::vec(any::<u8>(), n),
            proptest::collection::vec(any::<bool>(), n),
            proptest::collection::vec(0usize..4, n),
            proptest::collection::vec(0usize..4, n),
        )
            .prop_map(|(a, b, c, d, s, f)| Rows {
                a,
                b,
                c,
                d,
                s: s.iter().map(|&i| N_S[i].to_string()).collect(),
                f: f.iter().map(|&i| N_S[i].to_string()).collect(),
            })
    })
}

/// A numeric expression, generated as a tree: printed for the library, evaluated row by row
/// by the reference (`tests/where_ref/`, written apart from the library's vectorised
/// evaluator, numpy's rules).
#[derive(Debug, Clone)]
enum N {
    A,
    B,
    C,
    Int(i64),
    Float(f64),
    Neg(Box<N>),
    Op(Box<N>, &'static str, Box<N>),
}

#[derive(Debug, Clone)]
enum B {
    Cmp(N, &'static str, N),
    Str(&'static str, bool, usize),
    D,
    DFalse,
    Not(Box<B>),
    Logic(Box<B>, bool, Box<B>),
}

impl std::fmt::Display for N {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            N::A => write!(f, "a"),
            N::B => write!(f, "p/b"),
            N::C => write!(f, "c"),
            N::Int(i) => write!(f, "{i}"),
            N::Float(x) => write!(f, "{x:?}"),
            N::Neg(e) => write!(f, "-({e})"),
            N::Op(l, o, r) => write!(f, "({l} {o} {r})"),
        }
    }
}

impl std::fmt::Display for B {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            B::Cmp(l, o, r) => write!(f, "({l} {o} {r})"),
            B::Str(c, eq, i) => write!(f, "({c} {} '{}')", if *eq { "==" } else { "!=" }, N_S[*i]),
            B::D => write!(f, "d"),
            B::DFalse => write!(f, "(d == False)"),
            B::Not(e) => write!(f, "~{e}"),
            B::Logic(l, and, r) => write!(f, "({l} {} {r})", if *and { "&" } else { "|" }),
        }
    }
}

/// The columns as the reference (`tests/where_ref/`, numpy's rules) takes them.
fn ref_cols(rows: &Rows) -> Vec<(&'static str, Col)> {
    vec![
        (
            "a",
            Col::Int(rows.a.iter().map(|&x| i128::from(x)).collect(), (32, true)),
        ),
        ("p/b", Col::Float(rows.b.clone())),
        (
            "c",
            Col::Int(rows.c.iter().map(|&x| i128::from(x)).collect(), (8, false)),
        ),
    ]
}

impl B {
    /// Row `r`: numeric comparisons by the reference; `Err`: numpy refuses the expression (a
    /// literal out of its column's dtype in arithmetic, whatever the row).
    fn eval(&self, rows: &Rows, cols: &[(&str, Col)], r: usize) -> Result<bool, where_ref::No> {
        Ok(match self {
            B::Cmp(l, o, rr) => {
                let e = blz::query::parse(&format!("({l} {o} {rr})"), &["a", "p/b", "c"]).unwrap();
                match where_ref::eval(&e, cols, r)? {
                    where_ref::Val::B(b) => b,
                    v => panic!("{v:?}"),
                }
            }
            B::Str(c, eq, i) => {
                let col = if *c == "s" { &rows.s } else { &rows.f };
                (col[r] == N_S[*i]) == *eq
            }
            B::D => rows.d[r],
            B::DFalse => !rows.d[r],
            B::Not(e) => !e.eval(rows, cols, r)?,
            B::Logic(l, and, rr) => {
                // Both sides: a refusal on either refuses the expression.
                let (x, y) = (l.eval(rows, cols, r)?, rr.eval(rows, cols, r)?);
                if *and {
                    x && y
                } else {
                    x || y
                }
            }
        })
    }

    /// Whether numpy refuses the expression (checked on a row of zeros: refusals do not
    /// depend on the values).
    fn refused(&self) -> bool {
        let none = Rows {
            a: vec![0],
            b: vec![0.0],
            c: vec![0],
            d: vec![false],
            s: vec![String::new()],
            f: vec![String::new()],
        };
        self.eval(&none, &ref_cols(&none), 0).is_err()
    }
}

fn num(depth: u32) -> BoxedStrategy<N> {
    let leaf = prop_oneof![
        Just(N::A),
        Just(N::B),
        Just(N::C),
        // Mostly non-negative: a negative one in arithmetic with uint8 `c` is refused
        // (numpy's OverflowError).
        prop_oneof![3 => 0i64..20, 1 => -20i64..0].prop_map(N::Int),
        (-40i32..40).prop_map(|i| N::Float(i as f64 / 8.0)),
    ];
    if depth == 0 {
        return leaf.boxed();
    }
    prop_oneof![
        3 => leaf,
        1 => num(depth - 1).prop_map(|e| N::Neg(Box::new(e))),
        2 => (num(depth - 1), prop_oneof![Just("+"), Just("-"), Just("*"), Just("/"), Just("%")], num(depth - 1))
            .prop_map(|(l, o, r)| N::Op(Box::new(l), o, Box::new(r))),
    ]
    .boxed()
}

fn cond(depth: u32) -> BoxedStrategy<B> {
    let ops = prop_oneof![
        Just("<"),
        Just("<="),
        Just(">"),
        Just(">="),
        Just("=="),
        Just("!=")
    ];
    let leaf = prop_oneof![
        4 => (num(1), ops, num(1)).prop_map(|(l, o, r)| B::Cmp(l, o, r)),
        2 => (prop_oneof![Just("s"), Just("f")], any::<bool>(), 0usize..4).prop_map(|(c, e, i)| B::Str(c, e, i)),
        1 => Just(B::D),
        1 => Just(B::DFalse),
    ];
    if depth == 0 {
        return leaf.boxed();
    }
    prop_oneof![
        2 => leaf,
        1 => cond(depth - 1).prop_map(|e| B::Not(Box::new(e))),
        2 => (cond(depth - 1), any::<bool>(), cond(depth - 1))
            .prop_map(|(l, a, r)| B::Logic(Box::new(l), a, Box::new(r))),
    ]
    .boxed()
}

fn fields(chunklen: u64) -> Vec<Field> {
    let o = ColumnOptions {
        chunklen: Some(chunklen),
        superchunksize: Some(2),
        ..Default::default()
    };
    vec![
        Field::new("a", DType::I32).with_options(o.clone()),
        Field::structure(
            "p",
            vec![Field::new("b", DType::F64).with_options(o.clone())],
        ),
        Field::new("c", DType::U8).with_options(o.clone()),
        Field::new("d", DType::Bool).with_options(o.clone()),
        Field::varstr("s").with_options(o.clone()),
        Field::new("f", DType::Bytes(3)).with_options(o),
    ]
}

fn make_table(path: &std::path::Path, rows: &Rows, chunklen: u64) -> Table {
    let mut t = Table::create(path, fields(chunklen), &TableOptions::default()).unwrap();
    let f: Vec<u8> = rows
        .f
        .iter()
        .flat_map(|s| {
            let mut b = s.as_bytes().to_vec();
            b.resize(3, 0);
            b
        })
        .collect();
    t.append(&[
        ("a", Values::from_slice(&rows.a)),
        ("p/b", Values::from_slice(&rows.b)),
        ("c", Values::from_slice(&rows.c)),
        ("d", Values::from_slice(&rows.d)),
        ("s", Values::strings(&rows.s)),
        (
            "f",
            Values::Fixed {
                dtype: DType::Bytes(3),
                data: f,
            },
        ),
    ])
    .unwrap();
    t
}

proptest! {
    #![proptest_config(common::config(64))]

    #[test]
    fn table_where_matches_a_row_by_row_evaluation(
        rows in rows(),
        exprs in proptest::collection::vec(cond(2), 1..6),
        chunklen in 3u64..20,
    ) {
        let dir = common::Dir::new();
        let path = dir.p("t");
        let t = make_table(&path, &rows, chunklen);
        let cols = ref_cols(&rows);
        for b in &exprs {
            let e = &b.to_string();
            if b.refused() {
                // numpy's OverflowError: a literal out of uint8's range in arithmetic with c.
                let r = t.where_rows(e, &[]);
                prop_assert!(
                    matches!(&r, Err(Error::InvalidExpression { reason, .. }) if reason.contains("out of range")),
                    "{}: {:?}", e, r
                );
                continue;
            }
            let want: Vec<u64> = (0..rows.a.len())
                .filter(|&r| b.eval(&rows, &cols, r).unwrap())
                .map(|r| r as u64)
                .collect();
            let got = t.where_rows(e, &["a", "s"]).unwrap();
            prop_assert_eq!(&got.rows, &want, "{}", e);
            let a: Vec<i32> = want.iter().map(|&r| rows.a[r as usize]).collect();
            prop_assert_eq!(got.columns[0].1.to_vec::<i32>().unwrap(), a);
            let s: Vec<String> = want.iter().map(|&r| rows.s[r as usize].clone()).collect();
            prop_assert_eq!(got.columns[1].1.to_strings().unwrap(), s);
            let mut batched = Vec::new();
            for b in t.where_batches(e, &[], 2 * chunklen).unwrap() {
                batched.extend(b.unwrap().rows);
            }
            prop_assert_eq!(&batched, &want, "batches of {}", e);
        }
    }
}

#[test]
fn array_where_matches_ndarray() {
    let dir = common::Dir::new();
    let opts = CreateOptions {
        chunkshape: Some(vec![3, 4]),
        ..Default::default()
    };
    let data =
        ndarray::Array2::<i64>::from_shape_fn((10, 7), |(i, j)| (i as i64 * 7 + j as i64) % 13 - 4);
    let mut ds = Dataset::create_with(dir.p("a"), DType::I64, &[0, 7], &opts).unwrap();
    ds.append(&data.view().into_dyn()).unwrap();
    let mask = ds.where_mask("(x > 2) & (x % 2 == 0) | (x == -4)").unwrap();
    let want = data.mapv(|x| x > 2 && x % 2 == 0 || x == -4).into_dyn();
    assert_eq!(mask, want);
    let m = ds.where_elements("x >= 7").unwrap();
    let flat: Vec<i64> = data.iter().copied().collect();
    let idx: Vec<u64> = (0..flat.len() as u64)
        .filter(|&i| flat[i as usize] >= 7)
        .collect();
    assert_eq!(m.indices, idx);
    assert_eq!(
        m.values.to_vec::<i64>().unwrap(),
        idx.iter().map(|&i| flat[i as usize]).collect::<Vec<_>>()
    );
    assert!(ds.where_mask("y > 1").is_err());
}

/// Statistics spare reads: with column `k` sorted, chunk 5 of `k` corrupt (decoding it
/// fails), queries whose statistics rule chunk 5 out (`k < 200`), or prove that it matches
/// whole (`k >= 0`, no need to read `k`) succeed; one that must read it fails.
#[test]
fn statistics_skip_chunks_that_cannot_match() {
    let dir = common::Dir::new();
    let path = dir.p("sorted");
    let o = ColumnOptions {
        chunklen: Some(100),
        superchunksize: Some(4),
        ..Default::default()
    };
    let mut t = Table::create(
        &path,
        vec![
            Field::new("k", DType::I64).with_options(o.clone()),
            Field::new("v", DType::F64).with_options(o),
        ],
        &TableOptions::default(),
    )
    .unwrap();
    let k: Vec<i64> = (0..1000).collect();
    let v: Vec<f64> = (0..1000).map(|i| i as f64 * 0.5).collect();
    t.append(&[("k", Values::from_slice(&k)), ("v", Values::from_slice(&v))])
        .unwrap();
    drop(t);
    let files = Table::open(&path).unwrap().column_files("k").unwrap();
    // Chunk 5 is entry 1 of file 1 (4 chunks per file).
    common::flip_byte_in_chunk(&files[1], 1);
    let t = Table::open(&path).unwrap();
    assert!(t.column("k").is_err(), "the corruption is seen when read");
    let m = t.where_rows("(k < 200) & (v >= 10)", &["k", "v"]).unwrap();
    assert_eq!(m.rows, (20..200).collect::<Vec<u64>>());
    assert_eq!(
        m.columns[0].1.to_vec::<i64>().unwrap(),
        (20..200).collect::<Vec<i64>>()
    );
    // Every row matches: `k` is never read, only the output column `v`.
    assert_eq!(t.where_rows("k >= 0", &["v"]).unwrap().rows.len(), 1000);
    assert_eq!(t.where_count("(k > 900) | (k < -5)").unwrap(), 99);
    assert!(t.where_rows("k == 550", &[]).is_err());
    assert!(t.where_rows("v == 275", &["k"]).is_err());
}

#[test]
fn errors_name_the_position() {
    let dir = common::Dir::new();
    let rows = Rows {
        a: vec![1, 2],
        b: vec![1.0, 2.0],
        c: vec![3, 4],
        d: vec![true, false],
        s: vec!["ab".into(), "zz".into()],
        f: vec!["ab".into(), "".into()],
    };
    let t = make_table(&dir.p("t"), &rows, 4);
    let pos = |e: &str| match t.where_rows(e, &[]) {
        Err(Error::InvalidExpression { position, .. }) => position,
        other => panic!("{e}: {other:?}"),
    };
    // `a > (1 & p/b)`: `&` binds tighter than `>`, as in numexpr.
    assert_eq!(pos("a > 1 & p/b"), 6);
    assert_eq!(pos("a > 1 & p/b < 2"), 12);
    assert_eq!(pos("(a > 1) & (nope < 2)"), 11);
    assert_eq!(pos("s > 'x'"), 2);
    assert_eq!(pos("a + 1"), 0);
    assert_eq!(pos("~a"), 0);
    assert_eq!(pos("(a == 'x')"), 3);
    let msg = t.where_rows("a >", &[]).unwrap_err().to_string();
    assert!(
        msg.contains("position 3") && msg.contains("a >\n     ^"),
        "{msg}"
    );
    assert!(t.where_rows("a > 1", &["nope"]).is_err());
    assert_eq!(
        t.where_rows("(s == 'ab') | (f == 'ab')", &[]).unwrap().rows,
        vec![0]
    );
    assert_eq!(t.where_rows("`p/b` * 2 == 4", &[]).unwrap().rows, vec![1]);
}

/// Dates and durations in `where`, with numpy's semantics: strings and `datetime64(...)`
/// literals against a column of another unit compare by instant; NaT matches only `!=`;
/// `date - date` is a duration. Chunk statistics of a sorted date column spare the chunks
/// outside the range (a corrupt one is never decoded).
#[test]
fn dates_and_durations_compare_as_numpy_and_prune() {
    use blz::datetime::{parse_datetime, TimeUnit, NAT};
    let dir = common::Dir::new();
    let path = dir.p("dates");
    let o = ColumnOptions {
        chunklen: Some(100),
        superchunksize: Some(4),
        ..Default::default()
    };
    let mut t = Table::create(
        &path,
        vec![
            Field::new("day", DType::DateTime(TimeUnit::Day)).with_options(o.clone()),
            Field::new("at", DType::DateTime(TimeUnit::Second)).with_options(o.clone()),
            Field::new("took", DType::TimeDelta(TimeUnit::Minute)).with_options(o),
        ],
        &TableOptions::default(),
    )
    .unwrap();
    let first = parse_datetime("2020-01-01", TimeUnit::Day).unwrap();
    // 1000 days from 2020-01-01; `at` is noon of the day, NaT every 97th row.
    let day: Vec<i64> = (0..1000).map(|i| first + i).collect();
    let at: Vec<i64> = (0..1000)
        .map(|i| {
            if i % 97 == 5 {
                NAT
            } else {
                (first + i) * 86_400 + 43_200
            }
        })
        .collect();
    let took: Vec<i64> = (0..1000).map(|i| i % 180).collect();
    let of = |unit, delta: bool, v: &[i64]| Values::Fixed {
        dtype: if delta {
            DType::TimeDelta(unit)
        } else {
            DType::DateTime(unit)
        },
        data: v.iter().flat_map(|x| x.to_ne_bytes()).collect(),
    };
    t.append(&[
        ("day", of(TimeUnit::Day, false, &day)),
        ("at", of(TimeUnit::Second, false, &at)),
        ("took", of(TimeUnit::Minute, true, &took)),
    ])
    .unwrap();
    drop(t);
    let t = Table::open(&path).unwrap();
    let rows = |e: &str| t.where_rows(e, &[]).unwrap().rows;
    let want =
        |f: &dyn Fn(usize) -> bool| (0..1000u64).filter(|&i| f(i as usize)).collect::<Vec<_>>();
    // 2020-03-01 is day 60 (2020 is a leap year).
    assert_eq!(rows("day >= '2020-03-01'"), want(&|i| i >= 60));
    assert_eq!(rows("day < datetime64('2020-03-01')"), want(&|i| i < 60));
    // Finer than the column: noon of day 60 lies between days 60 and 61.
    assert_eq!(rows("day >= '2020-03-01T12:00'"), want(&|i| i >= 61));
    assert_eq!(
        rows("day <= datetime64('2020-03-01T12', 'h')"),
        want(&|i| i <= 60)
    );
    assert_eq!(rows("day == '2020-03-01T12:00'"), Vec::<u64>::new());
    // NaT: false, but for `!=`.
    let nat = |i: usize| i % 97 == 5;
    assert_eq!(rows("at > day"), want(&|i| !nat(i)));
    assert_eq!(rows("at != at"), want(&nat));
    assert_eq!(rows("~(at == at)"), want(&nat));
    assert_eq!(rows("at == datetime64('NaT')"), Vec::<u64>::new());
    assert_eq!(rows("isnull(at)"), want(&nat));
    assert_eq!(
        rows("notnull(at) & (day < '2020-01-07')"),
        want(&|i| i < 6 && !nat(i))
    );
    // Arithmetic: date - date is a duration, date + duration a date.
    assert_eq!(rows("at - day == timedelta64(12, 'h')"), want(&|i| !nat(i)));
    assert_eq!(
        rows("day + timedelta64(30, 'D') < '2020-02-01'"),
        want(&|i| i < 1)
    );
    assert_eq!(
        rows("took >= timedelta64(2, 'h')"),
        want(&|i| i % 180 >= 120)
    );
    assert_eq!(
        rows("-took < timedelta64(-90, 'm')"),
        want(&|i| i % 180 > 90)
    );
    // Type errors say what is allowed.
    for bad in [
        "day > 5",
        "day > took",
        "day + day > '2020-01-01'",
        "day > 'yesterday'",
        "took > timedelta64(1, 'M')",
        "day > datetime64('2020-13-01')",
    ] {
        assert!(
            matches!(t.where_rows(bad, &[]), Err(Error::InvalidExpression { .. })),
            "{bad}"
        );
    }
    drop(t);
    // Chunk 5 (days 500..600) is entry 1 of file 1: a range the statistics rule out is never
    // decoded.
    let files = Table::open(&path).unwrap().column_files("day").unwrap();
    common::flip_byte_in_chunk(&files[1], 1);
    let t = Table::open(&path).unwrap();
    let m = t
        .where_rows("(day >= '2020-01-10') & (day < '2021-01-01')", &[])
        .unwrap();
    assert_eq!(m.rows, (9..366).collect::<Vec<u64>>());
    assert!(t.where_rows("day == '2021-06-01'", &[]).is_err());
}

/// A dictionary-encoded column in `where` is compared by its codes, and answers as the same
/// strings stored plainly: `==` and `!=` with literals, with another column, with nulls,
/// the column as an output.
#[test]
fn dictionary_columns_answer_as_plain_strings() {
    use blz::table::NullableValues;
    let dir = common::Dir::new();
    let path = dir.p("dict");
    let o = ColumnOptions {
        chunklen: Some(64),
        ..Default::default()
    };
    let words = ["Oslo", "Lima", "", "Pune", "Oslo ", "oslo"];
    let n = 700usize;
    let city: Vec<String> = (0..n)
        .map(|i| words[(i * 5 + i / 9) % words.len()].to_string())
        .collect();
    let other: Vec<String> = (0..n)
        .map(|i| words[(i / 3) % words.len()].to_string())
        .collect();
    let valid: Vec<bool> = (0..n).map(|i| i % 13 != 4).collect();
    let mut t = Table::create(
        &path,
        vec![
            Field::varstr("city")
                .with_options(o.clone())
                .nullable()
                .dictionary(),
            Field::varstr("plain").with_options(o.clone()).nullable(),
            Field::varstr("other").with_options(o),
        ],
        &TableOptions::default(),
    )
    .unwrap();
    let v = |s: &[String], valid: Option<Vec<bool>>| NullableValues::new(Values::strings(s), valid);
    t.append(&[
        ("city", v(&city, Some(valid.clone()))),
        ("plain", v(&city, Some(valid.clone()))),
        ("other", v(&other, None)),
    ])
    .unwrap();
    for e in [
        "{c} == 'Oslo'",
        "{c} != 'Oslo'",
        "{c} == ''",
        "{c} == 'nowhere'",
        "'Lima' == {c}",
        "{c} == other",
        "({c} != other) & ~({c} == 'Pune')",
        "({c} == 'Lima') | isnull({c})",
        "notnull({c}) & ({c} != 'Oslo ')",
    ] {
        let want = t
            .where_rows(&e.replace("{c}", "plain"), &["plain"])
            .unwrap();
        let got = t.where_rows(&e.replace("{c}", "city"), &["city"]).unwrap();
        assert_eq!(got.rows, want.rows, "{e}");
        assert_eq!(got.columns[0].1, want.columns[0].1, "{e}");
    }
}
