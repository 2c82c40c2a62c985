//! `min` and `max` over float columns through SQL (`blz::sql`, feature `sql`): the same
//! answer whatever the order of the rows, NaN above every number as in duckdb
//! (python/tests/test_sql_minmax.py checks the same against duckdb itself). DataFusion 55's
//! own grouped accumulators answer by the order of the rows (apache/datafusion#24432).

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Float64Type, Int64Type};
use arrow_array::{Array, RecordBatch};
use blz::sql::SqlContext;
use blz::table::{ColumnOptions, Field, Table, TableOptions, Values};
use blz::DType;
use std::cmp::Ordering;

/// A small deterministic generator (xorshift64*), so that every run checks the same tables.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A float of the kinds that break orders: NaN of either sign, zeros of either sign,
/// infinities, and ordinary numbers.
fn value(rng: &mut Rng, nan_per_mille: u64) -> f64 {
    if rng.below(1000) < nan_per_mille {
        return if rng.below(2) == 0 {
            f64::NAN
        } else {
            -f64::NAN
        };
    }
    match rng.below(20) {
        0 => 0.0,
        1 => -0.0,
        2 => f64::INFINITY,
        3 => f64::NEG_INFINITY,
        _ => (rng.below(2000) as f64 - 1000.0) / 4.0,
    }
}

/// duckdb's order of floats: every NaN above every number, numbers in IEEE total order.
fn order(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => a.total_cmp(&b),
    }
}

/// The expected `(min, max)` of each group 0..groups (None for a group without rows).
fn model(g: &[i64], x: &[f64], groups: i64) -> Vec<Option<(f64, f64)>> {
    (0..groups)
        .map(|k| {
            let vals: Vec<f64> = g
                .iter()
                .zip(x)
                .filter(|(gi, _)| **gi == k)
                .map(|(_, v)| *v)
                .collect();
            let min = vals.iter().copied().min_by(|a, b| order(*a, *b))?;
            let max = vals.iter().copied().max_by(|a, b| order(*a, *b))?;
            Some((min, max))
        })
        .collect()
}

/// The same value: both NaN, or the same bits (so `-0.0` is not `+0.0`).
fn same(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

fn make_table(path: &std::path::Path, g: &[i64], x: &[f64], chunklen: u64) -> Table {
    let opts = ColumnOptions {
        chunklen: Some(chunklen),
        ..Default::default()
    };
    let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
    let fields = vec![
        Field::new("g", DType::I64).with_options(opts.clone()),
        Field::new("x", DType::F64).with_options(opts.clone()),
        Field::new("y", DType::F32).with_options(opts),
    ];
    let mut t = Table::create(path, fields, &TableOptions::default()).unwrap();
    t.append(&[
        ("g", Values::from_slice(g)),
        ("x", Values::from_slice(x)),
        ("y", Values::from_slice(&x32)),
    ])
    .unwrap();
    t
}

/// `(group, min(x), max(x), min(y), max(y))` rows of a grouped query, by group.
fn grouped(batches: &[RecordBatch]) -> Vec<(i64, f64, f64, f64, f64)> {
    let mut out = Vec::new();
    for b in batches {
        for i in 0..b.num_rows() {
            out.push((
                b.column(0).as_primitive::<Int64Type>().value(i),
                b.column(1).as_primitive::<Float64Type>().value(i),
                b.column(2).as_primitive::<Float64Type>().value(i),
                f64::from(b.column(3).as_primitive::<Float32Type>().value(i)),
                f64::from(b.column(4).as_primitive::<Float32Type>().value(i)),
            ));
        }
    }
    out.sort_by_key(|r| r.0);
    out
}

#[test]
fn grouped_float_min_max_do_not_depend_on_row_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for seed in 1..=24u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let n = 50 + rng.below(3000) as usize;
        let groups = 1 + rng.below(40) as i64;
        // From no NaN to every value a NaN.
        let nan_per_mille = [0, 5, 50, 300, 900, 1000][(seed % 6) as usize];
        let g: Vec<i64> = (0..n).map(|_| rng.below(groups as u64) as i64).collect();
        let x: Vec<f64> = (0..n).map(|_| value(&mut rng, nan_per_mille)).collect();
        let chunklen = [7, 64, 1000][(seed % 3) as usize];
        let path = dir.path().join(format!("t{seed}.blz"));
        let t = make_table(&path, &g, &x, chunklen);
        let ctx = SqlContext::new().unwrap();
        ctx.register_table("t", t).unwrap();
        let got = grouped(
            &ctx.collect("SELECT g, min(x), max(x), min(y), max(y) FROM t GROUP BY g")
                .unwrap(),
        );
        let x32: Vec<f64> = x.iter().map(|&v| f64::from(v as f32)).collect();
        let want = model(&g, &x, groups);
        let want32 = model(&g, &x32, groups);
        let present: Vec<i64> = (0..groups)
            .filter(|k| want[*k as usize].is_some())
            .collect();
        assert_eq!(
            got.iter().map(|r| r.0).collect::<Vec<_>>(),
            present,
            "seed {seed}: the groups"
        );
        for (k, min, max, min32, max32) in got {
            let (wmin, wmax) = want[k as usize].unwrap();
            let (wmin32, wmax32) = want32[k as usize].unwrap();
            if !(same(min, wmin) && same(max, wmax) && same(min32, wmin32) && same(max32, wmax32)) {
                failures.push(format!(
                    "seed {seed} group {k}: min, max {min}, {max} (f32 {min32}, {max32}) \
                     where {wmin}, {wmax} (f32 {wmin32}, {wmax32})"
                ));
            }
        }

        // Without GROUP BY, and with a filter that leaves some groups out.
        let b = ctx.collect("SELECT min(x), max(x) FROM t").unwrap();
        let b = b.iter().find(|b| b.num_rows() > 0).unwrap();
        let (min, max) = (
            b.column(0).as_primitive::<Float64Type>().value(0),
            b.column(1).as_primitive::<Float64Type>().value(0),
        );
        let wmin = x.iter().copied().min_by(|a, b| order(*a, *b)).unwrap();
        let wmax = x.iter().copied().max_by(|a, b| order(*a, *b)).unwrap();
        if !(same(min, wmin) && same(max, wmax)) {
            failures.push(format!(
                "seed {seed} ungrouped: min, max {min}, {max} where {wmin}, {wmax}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} wrong answers:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn min_max_of_other_types_are_the_engines() {
    let dir = tempfile::tempdir().unwrap();
    let g = [0i64, 1, 0, 1];
    let x = [1.5, f64::NAN, -2.0, 3.0];
    let t = make_table(&dir.path().join("t.blz"), &g, &x, 2);
    let ctx = SqlContext::new().unwrap();
    ctx.register_table("t", t).unwrap();
    let b = ctx
        .collect("SELECT min(g), max(g), max(g * 10) FROM t")
        .unwrap();
    let b = b.iter().find(|b| b.num_rows() > 0).unwrap();
    assert_eq!(b.column(0).as_primitive::<Int64Type>().value(0), 0);
    assert_eq!(b.column(1).as_primitive::<Int64Type>().value(0), 1);
    assert_eq!(b.column(2).as_primitive::<Int64Type>().value(0), 10);
    // No row: NULL.
    let b = ctx.collect("SELECT max(x) FROM t WHERE g > 5").unwrap();
    let b = b.iter().find(|b| b.num_rows() > 0).unwrap();
    assert!(b.column(0).is_null(0));
}
