//! SQL filters on a layer's first column are pushed down to its key seeks (the value index,
//! the membership filter); these tests check that a pushed-down query returns exactly the
//! rows DataFusion's own evaluation of the same predicate returns, for the keys where the
//! layer's order and SQL's comparisons can part: -0.0 and 0.0, NaNs of either sign, the
//! infinities, and integers at the ends of their types against literals out of range or of
//! another type. Also: a weight may not share a key column's name.

#![cfg(feature = "sql")]

mod common;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type, UInt64Type};
use arrow_array::RecordBatch;
use arrow_schema::DataType;
use blz::layer::{ColumnDef, Layer, LayerSchema, LayerWriter, LeafKind, Value};
use blz::sql::SqlContext;
use blz::DType;
use proptest::prelude::*;
use std::path::Path;

/// Weights are row numbers, all below this: `OR w > NO_WEIGHT` adds no row, but keeps the
/// predicate from being pushed down.
const NO_WEIGHT: i64 = 1_000_000;

/// One output row: the key's bits (floats by `to_bits`, so -0.0, 0.0 and each NaN differ),
/// the second column and the weight.
type Row = (u64, i64, i64);

/// Builds a layer of key column `k` (of `dtype`), column `v` (int64) and weight `w` (int64)
/// from `keys`, each key with `fanout` values of `v`. Chunks of 2 values and an index
/// fan-out of 2 make every seek cross index levels and chunks.
fn make_layer(path: &Path, dtype: DType, mut keys: Vec<Value>, fanout: i64) {
    keys.sort();
    keys.dedup();
    let schema = LayerSchema::new(vec![
        ColumnDef::new("k", LeafKind::Fixed(dtype))
            .with_chunklen(2)
            .with_fanout(2),
        ColumnDef::new("v", LeafKind::Fixed(DType::I64)).with_chunklen(2),
    ])
    .with_weight("w", DType::I64);
    let mut w = LayerWriter::create(path, schema).unwrap();
    let mut n = 0i64;
    for k in keys {
        for v in 0..fanout {
            w.push(&[k.clone(), Value::Int(v)], Some(Value::Int(n)))
                .unwrap();
            n += 1;
        }
    }
    w.finish().unwrap();
}

fn rows(out: &[RecordBatch]) -> Vec<Row> {
    let mut r = Vec::new();
    for b in out {
        let k = b.column(0);
        let v = b.column(1).as_primitive::<Int64Type>();
        let w = b.column(2).as_primitive::<Int64Type>();
        for i in 0..b.num_rows() {
            let bits = match k.data_type() {
                DataType::Float64 => k.as_primitive::<Float64Type>().value(i).to_bits(),
                DataType::Int64 => k.as_primitive::<Int64Type>().value(i) as u64,
                DataType::UInt64 => k.as_primitive::<UInt64Type>().value(i),
                other => panic!("key of type {other}"),
            };
            r.push((bits, v.value(i), w.value(i)));
        }
    }
    r.sort_unstable();
    r
}

/// The rows of `pred`, pushed down to the layer's scan where it can be.
fn pushed(ctx: &SqlContext, pred: &str) -> blz::Result<Vec<Row>> {
    Ok(rows(
        &ctx.collect(&format!("SELECT k, v, w FROM l WHERE {pred}"))?,
    ))
}

/// The rows of `pred` as DataFusion evaluates it over every row: a filter is never pushed
/// below a limit.
fn evaluated(ctx: &SqlContext, pred: &str) -> blz::Result<Vec<Row>> {
    Ok(rows(&ctx.collect(&format!(
        "SELECT k, v, w FROM (SELECT k, v, w FROM l LIMIT 1000000000) AS s WHERE {pred}"
    ))?))
}

fn context(path: &Path) -> SqlContext {
    let ctx = SqlContext::new().unwrap();
    ctx.register_path("l", path.to_str().unwrap()).unwrap();
    ctx
}

/// The keys whose bits are among `out`'s rows.
fn key_bits(out: &[Row]) -> Vec<u64> {
    let mut k: Vec<u64> = out.iter().map(|r| r.0).collect();
    k.dedup();
    k
}

#[test]
fn both_zeros_answer_an_equality_and_a_range_on_zero() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("l.blz");
    make_layer(
        &p,
        DType::F64,
        vec![Value::Float(-0.0), Value::Float(0.0), Value::Float(1.0)],
        1,
    );
    let ctx = context(&p);
    let (neg, zero, one) = ((-0.0f64).to_bits(), 0.0f64.to_bits(), 1.0f64.to_bits());
    let mut zeros = vec![neg, zero];
    zeros.sort_unstable();
    let mut up = vec![neg, zero, one];
    up.sort_unstable();
    for (pred, keys) in [
        ("k = 0", &zeros),
        ("k = -0.0", &zeros),
        ("0 = k", &zeros),
        ("k BETWEEN 0 AND 0", &zeros),
        ("k BETWEEN -0.0 AND 0", &zeros),
        ("k <= 0", &zeros),
        ("k <= -0.0", &zeros),
        ("k >= 0", &up),
        ("k >= -0.0", &up),
        ("k > 0", &vec![one]),
        ("k > -0.0", &vec![one]),
        ("k < 0", &vec![]),
        ("k < -0.0", &vec![]),
    ] {
        let want = evaluated(&ctx, pred).unwrap();
        assert_eq!(&key_bits(&want), keys, "DataFusion's {pred}");
        assert_eq!(pushed(&ctx, pred).unwrap(), want, "{pred}");
        let or = format!("{pred} OR w > {NO_WEIGHT}");
        assert_eq!(pushed(&ctx, &or).unwrap(), want, "{or}");
    }
}

/// The float keys the property test draws from: both zeros, NaNs of both signs, the
/// infinities and the extremes, and a few ordinary numbers the literals also name.
fn float_key() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(-0.0),
        Just(0.0),
        Just(f64::NAN),
        Just(-f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(f64::MAX),
        Just(f64::MIN),
        Just(f64::MIN_POSITIVE),
        Just(1.0),
        Just(-1.0),
        Just(2.5),
        Just(-2.5),
        (-4i32..4).prop_map(f64::from),
    ]
}

const FLOAT_LITERALS: &[&str] = &[
    "0",
    "0.0",
    "-0.0",
    "CAST('-0' AS DOUBLE)",
    "CAST('NaN' AS DOUBLE)",
    "-CAST('NaN' AS DOUBLE)",
    "CAST('inf' AS DOUBLE)",
    "CAST('-inf' AS DOUBLE)",
    "1",
    "-1",
    "2.5",
    "-2.5",
    "3",
    "1.7976931348623157e308",
    "-1.7976931348623157e308",
    "1e-300",
];

fn int_key() -> impl Strategy<Value = i64> {
    prop_oneof![
        Just(i64::MIN),
        Just(i64::MIN + 1),
        Just(i64::MAX),
        Just(i64::MAX - 1),
        -3i64..3,
    ]
}

const INT_LITERALS: &[&str] = &[
    "0",
    "-1",
    "2",
    "9223372036854775807",
    "-9223372036854775808",
    "-9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "2.5",
    "-0.0",
    "9.3e18",
    "-9.3e18",
    "9.223372036854775807e18",
    "1e19",
    "CAST('NaN' AS DOUBLE)",
    "CAST('inf' AS DOUBLE)",
    "CAST(-1 AS TINYINT)",
];

fn uint_key() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(u64::MAX),
        Just(u64::MAX - 1),
        Just(1u64 << 63),
        Just((1u64 << 63) - 1),
        0u64..3,
    ]
}

const UINT_LITERALS: &[&str] = &[
    "0",
    "-1",
    "2",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775808",
    "2.5",
    "1.8446744073709552e19",
    "9.223372036854775808e18",
    "CAST(1 AS TINYINT UNSIGNED)",
];

/// A predicate on `k` with literals from `lits`.
fn predicate(lits: &'static [&'static str]) -> impl Strategy<Value = String> {
    let lit = proptest::sample::select(lits);
    let cmp = (
        proptest::sample::select(&["=", "<", "<=", ">", ">=", "<>"][..]),
        lit.clone(),
        any::<bool>(),
    )
        .prop_map(|(op, l, swap)| {
            if swap {
                format!("{l} {op} k")
            } else {
                format!("k {op} {l}")
            }
        });
    let between = (lit.clone(), lit.clone(), any::<bool>())
        .prop_map(|(a, b, not)| format!("k {}BETWEEN {a} AND {b}", if not { "NOT " } else { "" }));
    let list = (proptest::collection::vec(lit, 1..4), any::<bool>())
        .prop_map(|(l, not)| format!("k {}IN ({})", if not { "NOT " } else { "" }, l.join(", ")));
    let leaf = prop_oneof![3 => cmp, 1 => between, 1 => list];
    leaf.prop_recursive(2, 4, 2, |inner| {
        (inner.clone(), inner, any::<bool>())
            .prop_map(|(a, b, and)| format!("({a}) {} ({b})", if and { "AND" } else { "OR" }))
    })
}

/// Checks `pred`, alone and under an `OR` that keeps it from being pushed down, against
/// DataFusion's evaluation over every row.
fn check(ctx: &SqlContext, pred: &str) -> Result<(), TestCaseError> {
    // A predicate DataFusion refuses (a literal it cannot cast) says nothing here.
    let Ok(want) = evaluated(ctx, pred) else {
        return Ok(());
    };
    for q in [pred.to_string(), format!("({pred}) OR w > {NO_WEIGHT}")] {
        match pushed(ctx, &q) {
            Ok(got) => prop_assert_eq!(got, want.clone(), "WHERE {}", q),
            Err(e) => prop_assert!(false, "WHERE {q}: {e}"),
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(common::config(24))]

    #[test]
    fn float_key_seeks_agree_with_sql(
        keys in proptest::collection::vec(float_key(), 1..12),
        f32_column in any::<bool>(),
        preds in proptest::collection::vec(predicate(FLOAT_LITERALS), 1..12),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("l.blz");
        let (dtype, keys): (DType, Vec<Value>) = if f32_column {
            (DType::F32, keys.iter().map(|&k| Value::Float(f64::from(k as f32))).collect())
        } else {
            (DType::F64, keys.iter().map(|&k| Value::Float(k)).collect())
        };
        make_layer(&p, dtype, keys, 2);
        let ctx = context(&p);
        for pred in &preds {
            check(&ctx, pred)?;
        }
    }

    #[test]
    fn int_key_seeks_agree_with_sql(
        keys in proptest::collection::vec(int_key(), 1..10),
        preds in proptest::collection::vec(predicate(INT_LITERALS), 1..12),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("l.blz");
        make_layer(&p, DType::I64, keys.into_iter().map(Value::Int).collect(), 2);
        let ctx = context(&p);
        for pred in &preds {
            check(&ctx, pred)?;
        }
    }

    #[test]
    fn uint_key_seeks_agree_with_sql(
        keys in proptest::collection::vec(uint_key(), 1..10),
        preds in proptest::collection::vec(predicate(UINT_LITERALS), 1..12),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("l.blz");
        make_layer(&p, DType::U64, keys.into_iter().map(Value::UInt).collect(), 2);
        let ctx = context(&p);
        for pred in &preds {
            check(&ctx, pred)?;
        }
    }
}

#[test]
fn a_weight_named_as_a_key_column_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (cols, weight) in [
        (vec!["k"], "k"),
        (vec!["k", "v"], "k"),
        (vec!["k", "v"], "v"),
    ] {
        let schema = LayerSchema::new(
            cols.iter()
                .map(|c| ColumnDef::new(c, LeafKind::Fixed(DType::I64)))
                .collect(),
        )
        .with_weight(weight, DType::I64);
        let err = LayerWriter::create(dir.path().join("dup.blz"), schema)
            .err()
            .expect("a weight named as a column is refused");
        assert!(matches!(err, blz::Error::InvalidArgument(_)), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains(&format!("{weight:?}")), "{msg}");
        assert!(msg.contains("weight"), "{msg}");
        assert!(!dir.path().join("dup.blz").exists());
    }
}

#[test]
fn sql_over_an_old_layer_whose_weight_shares_a_key_name_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("l.blz");
    make_layer(&p, DType::I64, vec![Value::Int(1), Value::Int(2)], 1);
    // A layer written before the names were checked: its weight is named as its first column.
    let meta = p.join("meta").join("storage");
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meta).unwrap()).unwrap();
    doc["weight"]["name"] = "k".into();
    std::fs::write(&meta, serde_json::to_vec(&doc).unwrap()).unwrap();

    // The layer itself still reads.
    let layer = Layer::open(&p).unwrap();
    assert_eq!(layer.storage_meta().weight.as_ref().unwrap().name, "k");
    let mut c = layer.cursor();
    assert!(c.first());
    assert_eq!(c.value().unwrap(), Some(Value::Int(1)));

    let ctx = SqlContext::new().unwrap();
    let err = ctx
        .register_path("l", p.to_str().unwrap())
        .and_then(|()| ctx.collect("SELECT * FROM l"))
        .expect_err("SQL refuses two columns of one name");
    let msg = err.to_string();
    assert!(msg.contains("\"k\"") && msg.contains("weight"), "{msg}");
}
