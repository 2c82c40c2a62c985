//! `where` against a row-at-a-time reference (`tests/where_ref/`) on columns of every
//! numeric dtype holding extremes (MIN, MAX, -0.0, NaN, inf, 2^53 + 1) in small chunks: a
//! chunk whose statistics wrongly prove that no row matches (skipped) or that every row
//! matches (taken whole) shows as rows that differ from the reference. Also the limits on
//! an expression's size, on a small stack, through the public API.

mod common;
#[path = "where_ref/mod.rs"]
mod where_ref;

use blz::query::{parse, MAX_DEPTH};
use blz::table::{ColumnOptions, Field, TableOptions, Values};
use blz::{CreateOptions, DType, Dataset, Error, Table};
use proptest::prelude::*;
use where_ref::Col;

const DTYPES: [DType; 10] = [
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::U64,
    DType::F32,
    DType::F64,
];

/// A cell before its column's dtype is known.
#[derive(Debug, Clone, Copy)]
enum Cell {
    /// One of the dtype's extremes (MIN, MIN + 1, -1, 0, MAX - 1, MAX; for floats -MAX,
    /// -inf, NaN, -0.0, inf, MAX, 2^53 + 1).
    Extreme(usize),
    /// A small value.
    Small(i8),
    /// Bits, cut to the dtype's width.
    Bits(u64),
}

fn cell() -> impl Strategy<Value = Cell> {
    prop_oneof![
        3 => (0usize..7).prop_map(Cell::Extreme),
        4 => (-4i8..5).prop_map(Cell::Small),
        1 => any::<u64>().prop_map(Cell::Bits),
    ]
}

/// The native-order bytes of `cells` as `dtype`.
fn bytes(dtype: DType, cells: &[Cell]) -> Vec<u8> {
    macro_rules! int {
        ($t:ty) => {
            cells
                .iter()
                .flat_map(|c| {
                    let v: $t = match *c {
                        Cell::Extreme(k) => [
                            <$t>::MIN,
                            <$t>::MIN + 1,
                            (0 as $t).wrapping_sub(1),
                            0,
                            <$t>::MAX - 1,
                            <$t>::MAX,
                            1,
                        ][k],
                        // Negative ones wrap to near MAX for unsigned dtypes.
                        Cell::Small(s) => s as $t,
                        Cell::Bits(b) => b as $t,
                    };
                    v.to_ne_bytes()
                })
                .collect()
        };
    }
    macro_rules! float {
        ($t:ty) => {
            cells
                .iter()
                .flat_map(|c| {
                    let v: $t = match *c {
                        Cell::Extreme(k) => [
                            -<$t>::MAX,
                            <$t>::NEG_INFINITY,
                            <$t>::NAN,
                            -0.0,
                            <$t>::INFINITY,
                            <$t>::MAX,
                            9_007_199_254_740_993u64 as $t,
                        ][k],
                        Cell::Small(s) => <$t>::from(s) / 2.0,
                        Cell::Bits(b) => <$t>::from_bits(b as _),
                    };
                    v.to_ne_bytes()
                })
                .collect()
        };
    }
    match dtype {
        DType::I8 => int!(i8),
        DType::I16 => int!(i16),
        DType::I32 => int!(i32),
        DType::I64 => int!(i64),
        DType::U8 => int!(u8),
        DType::U16 => int!(u16),
        DType::U32 => int!(u32),
        DType::U64 => int!(u64),
        DType::F32 => float!(f32),
        _ => float!(f64),
    }
}

/// Integer and float literals of extreme and small values, as the text of the expression.
fn literal() -> impl Strategy<Value = String> {
    let ints = [
        "(-9223372036854775808)",
        "(-9223372036854775807)",
        "9223372036854775807",
        "9223372036854775808",
        "18446744073709551615",
        "9007199254740993",
        "(-1)",
        "0",
        "1",
        "2",
        "127",
        "(-128)",
        "255",
        "65535",
        "4294967295",
        "(-2147483648)",
        // Past int64 and uint64: exact, Python's ints.
        "18446744073709551616",
        "(-9223372036854775809)",
        "170141183460469231731687303715884105727",
        "(-170141183460469231731687303715884105728)",
        // Past i128: a float.
        "340282366920938463463374607431768211456",
    ];
    let floats = [
        "nan",
        "inf",
        "(-inf)",
        "(-0.0)",
        "0.0",
        "0.5",
        "(-1.5)",
        "1e300",
        "(-1.7976931348623157e308)",
        "9007199254740992.0",
        "1.8446744073709552e19",
    ];
    // Small integers most often: an extreme one in arithmetic with a small dtype is refused
    // (numpy's OverflowError), which ends that expression's test early.
    prop_oneof![
        2 => proptest::sample::select(ints.to_vec()).prop_map(str::to_string),
        1 => proptest::sample::select(floats.to_vec()).prop_map(str::to_string),
        4 => (-5i32..6).prop_map(|i| if i < 0 { format!("({i})") } else { i.to_string() }),
    ]
}

/// A numeric expression over columns `cols`.
fn num(cols: &'static [&'static str], depth: u32) -> BoxedStrategy<String> {
    let leaf = prop_oneof![
        3 => proptest::sample::select(cols.to_vec()).prop_map(str::to_string),
        2 => literal(),
    ];
    if depth == 0 {
        return leaf.boxed();
    }
    prop_oneof![
        3 => leaf,
        1 => num(cols, depth - 1).prop_map(|e| format!("-({e})")),
        3 => (num(cols, depth - 1), proptest::sample::select(vec!["+", "-", "*", "+", "-", "*", "/", "%"]), num(cols, depth - 1))
            .prop_map(|(l, o, r)| format!("({l} {o} {r})")),
    ]
    .boxed()
}

/// A condition over numeric columns `cols` (and bool column `d` when `bools`).
fn cond(cols: &'static [&'static str], bools: bool, depth: u32) -> BoxedStrategy<String> {
    let ops = proptest::sample::select(vec!["<", "<=", ">", ">=", "==", "!="]);
    let leaf = prop_oneof![
        5 => (num(cols, 2), ops, num(cols, 2)).prop_map(|(l, o, r)| format!("({l} {o} {r})")),
        1 => proptest::sample::select(if bools {
            vec!["d", "(d == True)", "(d != False)", "True", "False"]
        } else {
            vec!["True", "False"]
        })
        .prop_map(str::to_string),
    ];
    if depth == 0 {
        return leaf.boxed();
    }
    prop_oneof![
        3 => leaf,
        1 => cond(cols, bools, depth - 1).prop_map(|e| format!("~({e})")),
        2 => (cond(cols, bools, depth - 1), proptest::sample::select(vec!["&", "|"]), cond(cols, bools, depth - 1))
            .prop_map(|(l, o, r)| format!("({l} {o} {r})")),
    ]
    .boxed()
}

#[derive(Debug, Clone)]
struct Case {
    da: DType,
    db: DType,
    a: Vec<Cell>,
    b: Vec<Cell>,
    d: Vec<bool>,
    chunklen: u64,
}

fn case() -> impl Strategy<Value = Case> {
    (0usize..10, 0usize..10, 0usize..24, 1u64..6).prop_flat_map(|(ia, ib, n, chunklen)| {
        (
            proptest::collection::vec(cell(), n),
            proptest::collection::vec(cell(), n),
            proptest::collection::vec(any::<bool>(), n),
        )
            .prop_map(move |(a, b, d)| Case {
                da: DTYPES[ia],
                db: DTYPES[ib],
                a,
                b,
                d,
                chunklen,
            })
    })
}

fn table(path: &std::path::Path, c: &Case) -> Table {
    let o = ColumnOptions {
        chunklen: Some(c.chunklen),
        superchunksize: Some(2),
        ..Default::default()
    };
    let fields = vec![
        Field::new("a", c.da).with_options(o.clone()),
        Field::new("b", c.db).with_options(o.clone()),
        Field::new("d", DType::Bool).with_options(o),
    ];
    let mut t = Table::create(path, fields, &TableOptions::default()).unwrap();
    t.append(&[
        (
            "a",
            Values::Fixed {
                dtype: c.da,
                data: bytes(c.da, &c.a),
            },
        ),
        (
            "b",
            Values::Fixed {
                dtype: c.db,
                data: bytes(c.db, &c.b),
            },
        ),
        ("d", Values::from_slice(&c.d)),
    ])
    .unwrap();
    t
}

/// The rows the reference finds for `text` over columns `names` = `cols`; `None`: numpy
/// refuses it (a literal out of its column's dtype's range in arithmetic).
fn reference(text: &str, cols: &[(&str, Col)], n: usize) -> Option<Vec<u64>> {
    let names: Vec<&str> = cols.iter().map(|c| c.0).collect();
    let e = parse(text, &names).unwrap();
    match where_ref::outcome(&e, cols, n) {
        Ok(rows) => Some(rows),
        Err(where_ref::No::Overflow) => None,
        Err(no) => panic!("{text}: {no:?}"),
    }
}

/// `got` is refused as numpy refuses the expression: a literal out of range.
fn refused<T: std::fmt::Debug>(got: Result<T, Error>) -> Result<(), String> {
    match got {
        Err(Error::InvalidExpression { reason, .. }) if reason.contains("out of range") => Ok(()),
        other => Err(format!("{other:?}")),
    }
}

proptest! {
    #![proptest_config(common::config(96))]

    /// Tables: two numeric columns of random dtypes and a bool column.
    #[test]
    fn table_where_agrees_with_the_reference_on_extremes(
        c in case(),
        exprs in proptest::collection::vec(cond(&["a", "b"], true, 2), 1..8),
    ) {
        let dir = common::Dir::new();
        let t = table(&dir.p("t"), &c);
        let n = c.a.len();
        let cols = [
            ("a", Col::from_bytes(c.da, &bytes(c.da, &c.a))),
            ("b", Col::from_bytes(c.db, &bytes(c.db, &c.b))),
            ("d", Col::Bool(c.d.clone())),
        ];
        for e in &exprs {
            let Some(want) = reference(e, &cols, n) else {
                let r = refused(t.where_rows(e, &[]));
                prop_assert!(r.is_ok(), "{} over {:?}: {:?}", e, cols, r);
                continue;
            };
            let got = t.where_rows(e, &[]).unwrap();
            prop_assert_eq!(&got.rows, &want, "{} over {:?}", e, cols);
        }
    }

    /// Arrays: the elements `x` of one random dtype, in chunks of a few.
    #[test]
    fn array_where_agrees_with_the_reference_on_extremes(
        c in case(),
        exprs in proptest::collection::vec(cond(&["x"], false, 2), 1..8),
    ) {
        let dir = common::Dir::new();
        let n = c.a.len() as u64;
        let opts = CreateOptions {
            chunkshape: Some(vec![c.chunklen]),
            ..Default::default()
        };
        let mut ds = Dataset::create_with(dir.p("a"), c.da, &[0], &opts).unwrap();
        let data = bytes(c.da, &c.a);
        if n > 0 {
            ds.append_bytes(&data, n).unwrap();
        }
        let cols = [("x", Col::from_bytes(c.da, &data))];
        for e in &exprs {
            let Some(want) = reference(e, &cols, n as usize) else {
                let r = refused(ds.where_elements(e)).and(refused(ds.where_mask(e)));
                prop_assert!(r.is_ok(), "{} over {:?}: {:?}", e, cols, r);
                continue;
            };
            let got = ds.where_elements(e).unwrap();
            prop_assert_eq!(&got.indices, &want, "{} over {:?}", e, cols);
            let mask: Vec<u64> = ds
                .where_mask(e)
                .unwrap()
                .iter()
                .enumerate()
                .filter_map(|(i, &m)| m.then_some(i as u64))
                .collect();
            prop_assert_eq!(&mask, &want, "mask of {} over {:?}", e, cols);
        }
    }
}

fn array_i64(dir: &common::Dir, name: &str, v: &[i64], chunk: u64) -> Dataset {
    let opts = CreateOptions {
        chunkshape: Some(vec![chunk]),
        ..Default::default()
    };
    let mut ds = Dataset::create_with(dir.p(name), DType::I64, &[0], &opts).unwrap();
    let b: Vec<u8> = v.iter().flat_map(|x| x.to_ne_bytes()).collect();
    ds.append_bytes(&b, v.len() as u64).unwrap();
    ds
}

/// The case: `-x` wraps for int64::MIN (numpy's, and the evaluator's), so the
/// chunk of MINs matches `-x < 0`; the statistics mirrored its interval to [MAX + 1] and
/// skipped it.
#[test]
fn a_negated_int64_min_wraps_in_the_statistics_as_in_the_evaluator() {
    let dir = common::Dir::new();
    let ds = array_i64(
        &dir,
        "a",
        &[i64::MIN, i64::MIN, i64::MIN, i64::MIN, 5, 5, 5, 5],
        4,
    );
    assert_eq!(
        ds.where_elements("-x < 0").unwrap().indices,
        (0..8).collect::<Vec<u64>>()
    );
    // A sum that wraps whole is shifted, not skipped; one that wraps in part is read.
    let ds = array_i64(&dir, "b", &[i64::MAX - 1, i64::MAX, 3, 4], 2);
    assert_eq!(ds.where_elements("x + 2 < 0").unwrap().indices, vec![0, 1]);
    assert_eq!(ds.where_elements("x * 2 < 0").unwrap().indices, vec![0, 1]);
    // The first chunk wraps whole (to MIN, MIN + 1); 4 - -2 is 6 (numpy's answer: [3]).
    assert_eq!(ds.where_elements("x - -2 > 5").unwrap().indices, vec![3]);
    let ds = array_i64(&dir, "c", &[i64::MAX - 1, 0, i64::MAX, 1], 2);
    assert_eq!(ds.where_elements("x + 1 < 0").unwrap().indices, vec![2]);
}

/// The case: uint64 2^53 and 2^53 + 1 are one float64, but not one integer.
#[test]
fn uint64_compares_exactly_with_integers() {
    let dir = common::Dir::new();
    let o = ColumnOptions {
        chunklen: Some(1),
        ..Default::default()
    };
    let mut t = Table::create(
        dir.p("t"),
        vec![
            Field::new("u", DType::U64).with_options(o.clone()),
            Field::new("i", DType::I64).with_options(o),
        ],
        &TableOptions::default(),
    )
    .unwrap();
    let u: Vec<u64> = vec![1 << 53, (1 << 53) + 1, u64::MAX, 0];
    let i: Vec<i64> = vec![1 << 53, (1 << 53) + 1, -1, i64::MIN];
    t.append(&[("u", Values::from_slice(&u)), ("i", Values::from_slice(&i))])
        .unwrap();
    let rows = |e: &str| t.where_rows(e, &[]).unwrap().rows;
    assert_eq!(rows("u == 9007199254740993"), vec![1]);
    assert_eq!(rows("u == 9007199254740992"), vec![0]);
    assert_eq!(rows("u == 18446744073709551615"), vec![2]);
    assert_eq!(rows("u == 18446744073709551614"), Vec::<u64>::new());
    assert_eq!(rows("u > -1"), vec![0, 1, 2, 3]);
    // uint64 with int64: exact, as numpy compares them.
    assert_eq!(rows("u == i"), vec![0, 1]);
    assert_eq!(rows("u > i"), vec![2, 3]);
    assert_eq!(rows("i == -9223372036854775808"), vec![3]);
    // uint64 with a literal stays uint64 (numpy 2, NEP 50); with an int64 column, or a
    // float, it is float64.
    assert_eq!(rows("u + 0 == 9007199254740992"), vec![0]);
    assert_eq!(rows("u + i == 18014398509481984"), vec![0, 1]);
    assert_eq!(rows("u * 1.0 == 9007199254740992"), vec![0, 1]);
    // Arrays too.
    let opts = CreateOptions {
        chunkshape: Some(vec![1]),
        ..Default::default()
    };
    let mut ds = Dataset::create_with(dir.p("a"), DType::U64, &[0], &opts).unwrap();
    let b: Vec<u8> = u.iter().flat_map(|x| x.to_ne_bytes()).collect();
    ds.append_bytes(&b, 4).unwrap();
    assert_eq!(
        ds.where_elements("x == 9007199254740993").unwrap().indices,
        vec![1]
    );
    assert_eq!(
        ds.where_elements("x >= 9007199254740993").unwrap().indices,
        vec![1, 2]
    );
}

/// The expressions, through the public API on a 256 KiB stack: at the limit they
/// run, past it they are refused, never a stack overflow.
#[test]
fn long_expressions_are_refused_not_a_stack_overflow() {
    let dir = common::Dir::new();
    let ds = array_i64(&dir, "a", &(0..40).collect::<Vec<_>>(), 8);
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || {
            let chain = |n: usize, op: &str| "x".to_string() + &format!(" {op} x").repeat(n);
            let at = format!("{} > 1", chain(MAX_DEPTH - 2, "+"));
            assert_eq!(
                ds.where_elements(&at).unwrap().indices,
                (1..40).collect::<Vec<_>>()
            );
            for text in [
                format!("{} > 1", chain(15_000, "+")),
                format!("{} > 1", chain(15_000, "*")),
                format!("{} > 1", chain(MAX_DEPTH - 1, "-")),
                chain(20_000, "|"),
                chain(20_000, "&"),
                (0..20_000)
                    .map(|i| format!("(x == {i})"))
                    .collect::<Vec<_>>()
                    .join(" | "),
            ] {
                for r in [
                    ds.where_elements(&text).map(|_| ()),
                    ds.where_mask(&text).map(|_| ()),
                ] {
                    match r {
                        Err(Error::InvalidExpression { reason, .. }) => {
                            assert!(reason.contains("too"), "{reason}")
                        }
                        other => panic!("{other:?}"),
                    }
                }
            }
            // A thousand alternatives are fine: `|` chains are balanced.
            let alts: Vec<String> = (0..1000).map(|i| format!("(x == {})", 3 * i)).collect();
            assert_eq!(
                ds.where_elements(&alts.join(" | ")).unwrap().indices,
                (0..40).filter(|i| i % 3 == 0).collect::<Vec<u64>>()
            );
        })
        .unwrap()
        .join()
        .unwrap();
}

/// A table of `cols` (name, dtype, native-order bytes), chunks of `chunk` rows.
fn table_of(dir: &common::Dir, name: &str, cols: &[(&str, DType, Vec<u8>)], chunk: u64) -> Table {
    let o = ColumnOptions {
        chunklen: Some(chunk),
        ..Default::default()
    };
    let fields = cols
        .iter()
        .map(|(n, d, _)| Field::new(n, *d).with_options(o.clone()))
        .collect();
    let mut t = Table::create(dir.p(name), fields, &TableOptions::default()).unwrap();
    let values: Vec<(&str, Values)> = cols
        .iter()
        .map(|(n, d, b)| {
            (
                *n,
                Values::Fixed {
                    dtype: *d,
                    data: b.clone(),
                },
            )
        })
        .collect();
    t.append(&values).unwrap();
    t
}

fn ne<T: Copy, const N: usize>(v: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

/// The cases (numpy 2.4's answers): uint64 arithmetic wraps in uint64 when its
/// other side is uint64 or a literal (NEP 50: a Python int takes the array's dtype), and is
/// float64 with an int64 column; integer literals past int64 and uint64 compare exactly. In
/// chunks of 1, 2 and 4 rows, so the statistics' proofs are checked as well.
#[test]
fn uint64_wraps_with_literals_and_big_literals_compare_exactly() {
    let dir = common::Dir::new();
    let u: Vec<u64> = vec![1 << 53, (1 << 53) + 1, 0, u64::MAX, 1, 2, 3, 4];
    let x: Vec<i64> = vec![i64::MIN, i64::MIN, i64::MIN, i64::MIN, 5, 5, 5, 5];
    let all: Vec<u64> = (0..8).collect();
    let none: Vec<u64> = vec![];
    for chunk in [1, 2, 4] {
        let t = table_of(
            &dir,
            &format!("t{chunk}"),
            &[
                ("u", DType::U64, ne(&u, u64::to_ne_bytes)),
                ("x", DType::I64, ne(&x, i64::to_ne_bytes)),
            ],
            chunk,
        );
        let rows = |e: &str| t.where_rows(e, &[]).unwrap().rows;
        assert_eq!(rows("-u < 0"), none, "chunks of {chunk}");
        assert_eq!(rows("-u == 18446744073709551615"), vec![4]);
        assert_eq!(rows("u - 1 > 100"), vec![0, 1, 2, 3]);
        assert_eq!(rows("u * 2 == 18446744073709551614"), vec![3]);
        assert_eq!(rows("u * 2 < 5"), vec![2, 4, 5]);
        assert_eq!(rows("u % 3 == 0"), vec![1, 2, 3, 6]);
        assert_eq!(rows("u - u == 0"), all);
        assert_eq!(rows("u == 18446744073709551616"), none);
        assert_eq!(rows("u < 18446744073709551616"), all);
        assert_eq!(rows("u != -1"), all);
        assert_eq!(rows("x > -9223372036854775809"), all);
        assert_eq!(rows("x < 170141183460469231731687303715884105727"), all);
        assert_eq!(rows("x == -170141183460469231731687303715884105728"), none);
        assert_eq!(rows("x < 340282366920938463463374607431768211456"), all);
        // uint64 with an int64 column: float64.
        assert_eq!(rows("u + x == -9214364837600034816.0"), vec![0, 1]);
        assert_eq!(rows("u + x > 0"), vec![3, 4, 5, 6, 7]);
        // Literals among themselves: Python's ints, exact.
        assert_eq!(rows("u == 18446744073709551616 - 1"), vec![3]);
        assert_eq!(rows("x < 9223372036854775807 + 1"), all);
        // A literal against a float64 column is a float64 (numpy's), not exact (Python's):
        // 2^64 - 1 is 2^64 there, and -u / 1 of u = 1 is 2^64 too.
        assert_eq!(rows("18446744073709551615 < -u / 1"), none);
        // Two literals compare as Python does: exactly.
        assert_eq!(rows("18446744073709551615 < 18446744073709551616.0"), all);
        for bad in ["u + (-1)", "u * 18446744073709551616", "u % (-2)"] {
            let r = t.where_rows(&format!("{bad} > 0"), &[]);
            match r {
                Err(Error::InvalidExpression { reason, .. }) => {
                    assert!(reason.contains("out of range for uint64"), "{reason}")
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
        // An array of the uint64s.
        let opts = CreateOptions {
            chunkshape: Some(vec![chunk]),
            ..Default::default()
        };
        let mut ds =
            Dataset::create_with(dir.p(&format!("a{chunk}")), DType::U64, &[0], &opts).unwrap();
        ds.append_bytes(&ne(&u, u64::to_ne_bytes), 8).unwrap();
        assert_eq!(ds.where_elements("-x < 0").unwrap().indices, none);
        assert_eq!(
            ds.where_elements("x - 1 > 100").unwrap().indices,
            vec![0, 1, 2, 3]
        );
        assert_eq!(
            ds.where_elements("x == 18446744073709551616")
                .unwrap()
                .indices,
            none
        );
        let ds = array_i64(&dir, &format!("i{chunk}"), &x, chunk);
        assert_eq!(
            ds.where_elements("x > -9223372036854775809")
                .unwrap()
                .indices,
            all
        );
    }
}

/// int8 .. uint32 compute in their own dtype (numpy's), not in int64: uint8 + 1 wraps at
/// 256, int8 * 100 in int8; two columns in their promotion (uint8 with int8: int16); a
/// literal out of the dtype's range in arithmetic is refused (numpy 2 raises
/// OverflowError), in a comparison it compares exactly.
#[test]
fn small_integers_compute_in_their_dtype() {
    let dir = common::Dir::new();
    let a: Vec<u8> = vec![0, 1, 254, 255, 200, 7];
    let b: Vec<i8> = vec![5, -128, 2, 127, 100, -1];
    let c: Vec<u32> = vec![1, 70000, u32::MAX, 0, 5, 6];
    let s: Vec<i16> = vec![32767, -1, 0, 1, 2, 3];
    for chunk in [1, 2, 3] {
        let t = table_of(
            &dir,
            &format!("t{chunk}"),
            &[
                ("a", DType::U8, a.clone()),
                ("b", DType::I8, ne(&b, i8::to_ne_bytes)),
                ("c", DType::U32, ne(&c, u32::to_ne_bytes)),
                ("s", DType::I16, ne(&s, i16::to_ne_bytes)),
            ],
            chunk,
        );
        let rows = |e: &str| t.where_rows(e, &[]).unwrap().rows;
        assert_eq!(rows("a + 1 < 2"), vec![0, 3], "chunks of {chunk}");
        assert_eq!(rows("b * 100 > 0"), vec![4]);
        assert_eq!(rows("-b < 0"), vec![0, 1, 2, 3, 4]);
        assert_eq!(rows("-a > 200"), vec![1, 5]);
        assert_eq!(rows("b - 1 > 0"), vec![0, 1, 2, 3, 4]);
        assert_eq!(rows("a * a == 4"), vec![2]);
        assert_eq!(rows("a + b == 300"), vec![4]);
        assert_eq!(rows("b + s < 0"), vec![0, 1]);
        assert_eq!(rows("c * 2 == 4294967294"), vec![2]);
        assert_eq!(rows("c + b == 4294967294"), Vec::<u64>::new());
        assert_eq!(rows("a / 300 < 0.5"), vec![0, 1, 5]);
        assert_eq!(rows("a < 300"), (0..6).collect::<Vec<u64>>());
        assert_eq!(rows("a == -1"), Vec::<u64>::new());
        assert_eq!(rows("a + 1.5 > 255"), vec![2, 3]);
        for (bad, at, ty) in [
            ("a + 300 > 0", 4, "uint8"),
            ("a + (-1) > 0", 5, "uint8"),
            ("a % 300 > 0", 4, "uint8"),
            ("b * -129 > 0", 4, "int8"),
            ("b - 200 > 0", 4, "int8"),
            ("s + 100000 > 0", 4, "int16"),
            ("c - (-1) > 0", 5, "uint32"),
        ] {
            match t.where_rows(bad, &[]) {
                Err(Error::InvalidExpression {
                    position, reason, ..
                }) => {
                    assert!(
                        reason.contains(&format!("out of range for {ty}")),
                        "{reason}"
                    );
                    assert_eq!(position, at, "{bad}: {reason}");
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
    }
}
