//! numpy's datetime64, timedelta64 and float16 columns in SQL (`blz::sql`, feature `sql`):
//! DATE and TIMESTAMP columns, NaT as NULL, date literals, EXTRACT, interval arithmetic,
//! pruning by the chunk statistics, float16 aggregates; every answer computed from the rows.

mod common;

use arrow_array::cast::AsArray;
use arrow_array::types::{Date32Type, Float64Type, Int64Type, TimestampNanosecondType};
use arrow_array::{Array, RecordBatch};
use blz::datetime::{format_datetime, parse_datetime};
use blz::dtype::{TimeUnit, NAT};
use blz::sql::SqlContext;
use blz::table::{ColumnOptions, Field, Table, TableOptions, Values};
use blz::DType;
use std::path::Path;

const N: i64 = 1_000;

struct Rows {
    /// datetime64[D]: day 9000 + 3 i (1994-08-23 onwards), NaT every 97th row.
    d: Vec<i64>,
    /// datetime64[ns]: 1999-12-31T12:00 plus i hours.
    ts: Vec<i64>,
    /// timedelta64[s]: i * 60 seconds, NaT every 101st row.
    dur: Vec<i64>,
    /// float16: (i % 50) / 4.
    h: Vec<half::f16>,
}

fn rows() -> Rows {
    let base = parse_datetime("1999-12-31T12:00", TimeUnit::Nanosecond).unwrap();
    Rows {
        d: (0..N)
            .map(|i| if i % 97 == 5 { NAT } else { 9_000 + 3 * i })
            .collect(),
        ts: (0..N).map(|i| base + i * 3_600_000_000_000).collect(),
        dur: (0..N)
            .map(|i| if i % 101 == 7 { NAT } else { i * 60 })
            .collect(),
        h: (0..N)
            .map(|i| half::f16::from_f64((i % 50) as f64 / 4.0))
            .collect(),
    }
}

fn raw(dtype: DType, v: &[i64]) -> Values {
    Values::Fixed {
        dtype,
        data: v.iter().flat_map(|x| x.to_ne_bytes()).collect(),
    }
}

fn make_table(path: &Path, r: &Rows) -> Table {
    let small = ColumnOptions {
        chunklen: Some(100),
        ..Default::default()
    };
    let day = DType::DateTime(TimeUnit::Day);
    let ns = DType::DateTime(TimeUnit::Nanosecond);
    let sec = DType::TimeDelta(TimeUnit::Second);
    let fields = vec![
        Field::new("d", day).with_options(small.clone()),
        Field::new("ts", ns).with_options(small.clone()),
        Field::new("dur", sec).with_options(small.clone()),
        Field::new("h", DType::F16).with_options(small),
    ];
    let mut t = Table::create(path, fields, &TableOptions::default()).unwrap();
    t.append(&[
        ("d", raw(day, &r.d)),
        ("ts", raw(ns, &r.ts)),
        ("dur", raw(sec, &r.dur)),
        ("h", Values::from_slice(&r.h)),
    ])
    .unwrap();
    t
}

fn first(b: &[RecordBatch]) -> &RecordBatch {
    b.iter().find(|b| b.num_rows() > 0).expect("a row")
}

fn count(ctx: &SqlContext, sql: &str) -> i64 {
    first(&ctx.collect(sql).unwrap())
        .column(0)
        .as_primitive::<Int64Type>()
        .value(0)
}

fn day(s: &str) -> i64 {
    parse_datetime(s, TimeUnit::Day).unwrap()
}

#[test]
fn dates_are_sql_dates_and_nat_is_null() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.blz");
    let r = rows();
    drop(make_table(&p, &r));
    let ctx = SqlContext::new().unwrap();
    ctx.register_path("t", p.to_str().unwrap()).unwrap();

    // The types as Arrow's.
    let out = ctx.collect("SELECT d, ts, dur, h FROM t LIMIT 3").unwrap();
    let s = first(&out).schema();
    assert_eq!(s.field(0).data_type().to_string(), "Date32");
    assert_eq!(s.field(1).data_type().to_string(), "Timestamp(ns)");
    assert_eq!(s.field(2).data_type().to_string(), "Duration(s)");

    let valid_d: Vec<i64> = r.d.iter().copied().filter(|&x| x != NAT).collect();
    let nat_d = (r.d.len() - valid_d.len()) as i64;
    assert_eq!(count(&ctx, "SELECT count(*) FROM t WHERE d IS NULL"), nat_d);
    assert_eq!(count(&ctx, "SELECT count(d) FROM t"), N - nat_d);
    let since = day("1995-01-01");
    assert_eq!(
        count(&ctx, "SELECT count(*) FROM t WHERE d >= DATE '1995-01-01'"),
        valid_d.iter().filter(|&&x| x >= since).count() as i64
    );
    // NaT compares as NULL: neither side of a comparison.
    assert_eq!(
        count(&ctx, "SELECT count(*) FROM t WHERE d < DATE '1995-01-01'")
            + count(&ctx, "SELECT count(*) FROM t WHERE d >= DATE '1995-01-01'"),
        N - nat_d
    );

    // min and max skip NULLs: numpy's nanmin/nanmax of the column.
    let out = ctx.collect("SELECT min(d), max(d) FROM t").unwrap();
    let b = first(&out);
    let lo = i64::from(b.column(0).as_primitive::<Date32Type>().value(0));
    let hi = i64::from(b.column(1).as_primitive::<Date32Type>().value(0));
    assert_eq!(lo, *valid_d.iter().min().unwrap());
    assert_eq!(hi, *valid_d.iter().max().unwrap());

    // Date arithmetic.
    let plus = day("1998-06-01");
    assert_eq!(
        count(
            &ctx,
            "SELECT count(*) FROM t WHERE d + INTERVAL '30' DAY < DATE '1998-06-01'"
        ),
        valid_d.iter().filter(|&&x| x + 30 < plus).count() as i64
    );

    // Timestamps in nanoseconds compare with timestamp literals.
    let noon = parse_datetime("2000-01-10T00:00", TimeUnit::Nanosecond).unwrap();
    assert_eq!(
        count(
            &ctx,
            "SELECT count(*) FROM t WHERE ts < TIMESTAMP '2000-01-10 00:00:00'"
        ),
        r.ts.iter().filter(|&&x| x < noon).count() as i64
    );
    let out = ctx.collect("SELECT max(ts) FROM t").unwrap();
    assert_eq!(
        first(&out)
            .column(0)
            .as_primitive::<TimestampNanosecondType>()
            .value(0),
        *r.ts.iter().max().unwrap()
    );

    // Durations: NaT is NULL, the rest compare with intervals.
    let nat_dur = r.dur.iter().filter(|&&x| x == NAT).count() as i64;
    assert_eq!(count(&ctx, "SELECT count(dur) FROM t"), N - nat_dur);

    // float16 aggregates (as float32 or wider): min, max, avg.
    let out = ctx
        .collect(
            "SELECT CAST(min(h) AS DOUBLE), CAST(max(h) AS DOUBLE), CAST(avg(h) AS DOUBLE) FROM t",
        )
        .unwrap();
    let b = first(&out);
    let f = |i: usize| b.column(i).as_primitive::<Float64Type>().value(0);
    let hs: Vec<f64> = r.h.iter().map(|x| x.to_f64()).collect();
    assert_eq!(f(0), hs.iter().cloned().fold(f64::INFINITY, f64::min));
    assert_eq!(f(1), hs.iter().cloned().fold(f64::NEG_INFINITY, f64::max));
    let mean = hs.iter().sum::<f64>() / hs.len() as f64;
    assert!((f(2) - mean).abs() < 1e-3, "{} {mean}", f(2));
}

#[test]
fn extract_year_of_dates() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.blz");
    let r = rows();
    drop(make_table(&p, &r));
    let ctx = SqlContext::new().unwrap();
    ctx.register_path("t", p.to_str().unwrap()).unwrap();
    let valid_d: Vec<i64> = r.d.iter().copied().filter(|&x| x != NAT).collect();
    let out = ctx
        .collect(
            "SELECT EXTRACT(YEAR FROM d) AS y, count(*) AS n FROM t WHERE d IS NOT NULL \
             GROUP BY y ORDER BY y",
        )
        .unwrap();
    let mut got = Vec::new();
    for b in &out {
        let y = arrow_cast_f64(b.column(0));
        let n = b.column(1).as_primitive::<Int64Type>();
        for (i, &year) in y.iter().enumerate().take(b.num_rows()) {
            got.push((year as i64, n.value(i)));
        }
    }
    let mut want = std::collections::BTreeMap::new();
    for &x in &valid_d {
        let year: i64 = format_datetime(x, TimeUnit::Day)[..4].parse().unwrap();
        *want.entry(year).or_insert(0i64) += 1;
    }
    assert_eq!(got, want.into_iter().collect::<Vec<_>>());
}

/// An Int or Float column of EXTRACT's result as f64 (its type varies across versions).
fn arrow_cast_f64(a: &dyn Array) -> Vec<f64> {
    use arrow_array::types::{Float64Type, Int32Type, Int64Type};
    use arrow_schema::DataType;
    match a.data_type() {
        DataType::Float64 => a.as_primitive::<Float64Type>().values().to_vec(),
        DataType::Int32 => a
            .as_primitive::<Int32Type>()
            .values()
            .iter()
            .map(|&x| f64::from(x))
            .collect(),
        DataType::Int64 => a
            .as_primitive::<Int64Type>()
            .values()
            .iter()
            .map(|&x| x as f64)
            .collect(),
        other => panic!("EXTRACT gave {other}"),
    }
}

#[test]
fn date_filters_prune_by_chunk_statistics() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.blz");
    let r = rows();
    let t = make_table(&p, &r);
    // Corrupt chunk 8 of d and of ts (rows 800..900: days 11400.., 2001): a query whose date
    // range lies elsewhere never decodes them, because the statistics of d rule them out.
    for col in ["d", "ts"] {
        let files = t.column_files(col).unwrap();
        common::flip_byte_in_chunk(&files[0], 8);
    }
    drop(t);
    let ctx = SqlContext::new().unwrap();
    ctx.register_path("t", p.to_str().unwrap()).unwrap();
    let (a, b) = (day("1995-01-01"), day("1996-01-01"));
    let want = r.d.iter().filter(|&&x| x != NAT && x >= a && x < b).count() as i64;
    assert!(want > 0);
    assert_eq!(
        count(
            &ctx,
            "SELECT count(ts) FROM t WHERE d >= DATE '1995-01-01' AND d < DATE '1996-01-01'"
        ),
        want
    );
    assert!(ctx.collect("SELECT max(ts) FROM t").is_err());
}

#[test]
fn finer_than_nanoseconds_is_refused_naming_the_column() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.blz");
    let ps = DType::DateTime(TimeUnit::Picosecond);
    let mut t = Table::create(&p, vec![Field::new("fine", ps)], &TableOptions::default()).unwrap();
    t.append(&[("fine", raw(ps, &[1, 2, 3]))]).unwrap();
    drop(t);
    let ctx = SqlContext::new().unwrap();
    ctx.register_path("t", p.to_str().unwrap()).unwrap();
    let e = ctx.collect("SELECT * FROM t").unwrap_err().to_string();
    assert!(e.contains("fine") && e.contains("datetime64[ps]"), "{e}");
    // A day past Date32's range names the column and the value.
    let p2 = dir.path().join("t2.blz");
    let y = DType::DateTime(TimeUnit::Year);
    let mut t = Table::create(&p2, vec![Field::new("far", y)], &TableOptions::default()).unwrap();
    t.append(&[("far", raw(y, &[10_000_000]))]).unwrap();
    drop(t);
    ctx.register_path("t2", p2.to_str().unwrap()).unwrap();
    let e = ctx.collect("SELECT * FROM t2").unwrap_err().to_string();
    assert!(e.contains("far") && e.contains("10001970"), "{e}");
}
