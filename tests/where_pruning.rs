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
    prop_oneof![
        2 => proptest::sample::select(ints.to_vec()).prop_map(str::to_string),
        1 => proptest::sample::select(floats.to_vec()).prop_map(str::to_string),
        2 => (-5i32..6).prop_map(|i| if i < 0 { format!("({i})") } else { i.to_string() }),
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

/// The rows the reference finds for `text` over columns `names` = `cols`.
fn reference(text: &str, cols: &[(&str, Col)], n: usize) -> Vec<u64> {
    let names: Vec<&str> = cols.iter().map(|c| c.0).collect();
    let e = parse(text, &names).unwrap();
    where_ref::rows(&e, cols, n).expect("a numeric condition")
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
            let want = reference(e, &cols, n);
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
            let want = reference(e, &cols, n as usize);
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
    assert_eq!(
        ds.where_elements("x - -2 > 5").unwrap().indices,
        Vec::<u64>::new()
    );
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
    // Arithmetic with a uint64 is float64 (numpy's for uint64 with int64).
    assert_eq!(rows("u + 0 == 9007199254740992"), vec![0, 1]);
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
