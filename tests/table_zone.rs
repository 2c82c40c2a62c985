//! Time-zone-aware `datetime64` columns (`spec/table.md` §2.3): the zone recorded in the
//! field and read back, checked when the table is made, old tables unaffected; Arrow
//! timestamps with the zone; SQL over them (TIMESTAMP WITH TIME ZONE: comparisons with
//! literals, EXTRACT and date_trunc in the zone, pruning by the UTC statistics), every
//! answer computed from the rows.

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, TimestampNanosecondType};
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType, TimeUnit as ArrowUnit};
use blz::datetime::parse_datetime;
use blz::dtype::{TimeUnit, NAT};
use blz::sql::SqlContext;
use blz::table::{ColumnOptions, Field, NullableValues, Table, TableOptions, Values};
use blz::DType;
use std::path::Path;

const N: i64 = 500;
const NS: DType = DType::DateTime(TimeUnit::Nanosecond);
const US: DType = DType::DateTime(TimeUnit::Microsecond);

fn raw(dtype: DType, v: &[i64]) -> Values {
    Values::Fixed {
        dtype,
        data: v.iter().flat_map(|x| x.to_ne_bytes()).collect(),
    }
}

/// `utc`: 2020-03-28T00:00Z plus 37 minutes a row (across Paris's spring change), NaT every
/// 53rd row; `off`: the same instants in microseconds, null every 41st row.
fn values() -> (Vec<i64>, Vec<i64>, Vec<bool>) {
    let base = parse_datetime("2020-03-28T00:00", TimeUnit::Nanosecond).unwrap();
    let utc: Vec<i64> = (0..N)
        .map(|i| {
            if i % 53 == 3 {
                NAT
            } else {
                base + i * 37 * 60_000_000_000
            }
        })
        .collect();
    let off: Vec<i64> = utc
        .iter()
        .map(|&v| if v == NAT { NAT } else { v / 1000 })
        .collect();
    let valid = (0..N).map(|i| i % 41 != 2).collect();
    (utc, off, valid)
}

fn make(path: &Path) -> Table {
    let small = ColumnOptions {
        chunklen: Some(64),
        ..Default::default()
    };
    let fields = vec![
        Field::new("t", NS)
            .with_options(small.clone())
            .with_timezone("Europe/Paris"),
        Field::new("u", US)
            .with_options(small.clone())
            .with_timezone("+05:30")
            .nullable(),
        Field::new("plain", NS).with_options(small),
    ];
    let mut t = Table::create(path, fields, &TableOptions::default()).unwrap();
    let (utc, off, valid) = values();
    t.append(&[
        ("t", NullableValues::from(raw(NS, &utc))),
        ("u", NullableValues::new(raw(US, &off), Some(valid))),
        ("plain", NullableValues::from(raw(NS, &utc))),
    ])
    .unwrap();
    t
}

#[test]
fn the_zone_is_recorded_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("z.blz");
    drop(make(&p));
    let t = Table::open(&p).unwrap();
    assert_eq!(t.timezone("t").unwrap(), Some("Europe/Paris"));
    assert_eq!(t.timezone("u").unwrap(), Some("+05:30"));
    assert_eq!(t.timezone("plain").unwrap(), None);
    assert!(t.timezone("nope").is_err());
    // The values are the UTC instants, as given.
    let (utc, _, _) = values();
    assert_eq!(t.column("t").unwrap(), raw(NS, &utc));
    // The key in meta/storage, only on the zoned leaves.
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(p.join("meta/storage")).unwrap()).unwrap();
    let f = meta["dtype"].as_array().unwrap();
    assert_eq!(f[0]["timezone"], "Europe/Paris");
    assert_eq!(f[0]["dtype"], "datetime64[ns]");
    assert_eq!(f[1]["timezone"], "+05:30");
    assert!(f[2].get("timezone").is_none());
}

#[test]
fn bad_zones_are_refused_naming_the_column() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            Field::new("t", NS).with_timezone("Mars/Olympus"),
            "Mars/Olympus",
        ),
        (
            Field::new("d", DType::DateTime(TimeUnit::Day)).with_timezone("UTC"),
            "datetime64[D]",
        ),
        (Field::new("x", DType::I64).with_timezone("UTC"), "int64"),
        (Field::varstr("s").with_timezone("UTC"), "varstr"),
    ];
    for (i, (f, what)) in cases.into_iter().enumerate() {
        let name = f.name.clone();
        let p = dir.path().join(format!("bad{i}.blz"));
        let e = Table::create(&p, vec![f], &TableOptions::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("column {name}")) && e.contains(what),
            "{e}"
        );
        assert!(!p.exists(), "nothing is written");
    }
    // add_column checks it too.
    let p = dir.path().join("ok.blz");
    let mut t = Table::create(&p, vec![Field::new("x", NS)], &TableOptions::default()).unwrap();
    assert!(t
        .add_column(Field::new("y", NS).with_timezone("Nowhere/Else"))
        .is_err());
    t.add_column(Field::new("y", NS).with_timezone("America/New_York"))
        .unwrap();
    assert_eq!(t.timezone("y").unwrap(), Some("America/New_York"));
}

#[test]
fn a_zone_edited_into_meta_storage_is_checked_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("z.blz");
    drop(make(&p));
    let path = p.join("meta/storage");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("Europe/Paris", "Europe/Nowhere")).unwrap();
    let e = Table::open(&p).unwrap_err().to_string();
    assert!(e.contains("Europe/Nowhere"), "{e}");
}

fn first(b: &[RecordBatch]) -> &RecordBatch {
    b.iter().find(|b| b.num_rows() > 0).expect("a row")
}

fn ints(ctx: &SqlContext, sql: &str) -> Vec<Option<i64>> {
    let out = ctx.collect(sql).unwrap();
    let mut v = Vec::new();
    for b in &out {
        let c = b.column(0).as_primitive::<Int64Type>();
        v.extend((0..c.len()).map(|i| c.is_valid(i).then(|| c.value(i))));
    }
    v
}

#[test]
fn arrow_and_sql_see_timestamps_with_the_zone() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("z.blz");
    let t = make(&p);
    let (utc, _, valid) = values();

    let export = blz::arrow::Export::of(&t);
    let s = export.schema();
    assert_eq!(
        s.field(0).data_type(),
        &DataType::Timestamp(ArrowUnit::Nanosecond, Some("Europe/Paris".into()))
    );
    assert_eq!(
        s.field(1).data_type(),
        &DataType::Timestamp(ArrowUnit::Microsecond, Some("+05:30".into()))
    );
    assert_eq!(
        s.field(2).data_type(),
        &DataType::Timestamp(ArrowUnit::Nanosecond, None)
    );
    let b = export.read(&t, 0, N as u64).unwrap();
    let col = b.column(0).as_primitive::<TimestampNanosecondType>();
    for (i, &v) in utc.iter().enumerate() {
        assert_eq!(col.is_valid(i), v != NAT);
        if v != NAT {
            assert_eq!(col.value(i), v, "the UTC instant, row {i}");
        }
    }
    let u = b.column(1);
    for i in 0..N as usize {
        assert_eq!(u.is_valid(i), valid[i] && utc[i] != NAT, "row {i}");
    }
    drop(t);

    let ctx = SqlContext::new().unwrap();
    ctx.register_path("t", p.to_str().unwrap()).unwrap();
    let describe = ctx.collect("SELECT t, u FROM t LIMIT 1").unwrap();
    assert_eq!(
        first(&describe).schema().field(0).data_type(),
        &DataType::Timestamp(ArrowUnit::Nanosecond, Some("Europe/Paris".into()))
    );

    // Comparisons with zoned and UTC literals: the instants compared.
    let cut = parse_datetime("2020-03-29T01:30", TimeUnit::Nanosecond).unwrap();
    let want = utc.iter().filter(|&&v| v != NAT && v >= cut).count() as i64;
    for lit in [
        "'2020-03-29T03:30:00+02:00'",
        "'2020-03-29T01:30:00Z'",
        "arrow_cast('2020-03-29T01:30:00Z', 'Timestamp(Nanosecond, Some(\"UTC\"))')",
    ] {
        let q = format!("SELECT count(*) FROM t WHERE t >= {lit}");
        assert_eq!(ints(&ctx, &q), vec![Some(want)], "{q}");
    }
    // A literal without an offset is a local time of the column's zone (as a TIMESTAMP
    // meets a TIMESTAMPTZ in PostgreSQL and duckdb, the zone being the session's there):
    // 01:30 in Paris on 2020-03-29 is 00:30 UTC.
    let local = cut - 3_600_000_000_000;
    let want_local = utc.iter().filter(|&&v| v != NAT && v >= local).count() as i64;
    assert_ne!(want_local, want);
    for lit in ["'2020-03-29T01:30:00'", "TIMESTAMP '2020-03-29T01:30:00'"] {
        let q = format!("SELECT count(*) FROM t WHERE t >= {lit}");
        assert_eq!(ints(&ctx, &q), vec![Some(want_local)], "{q}");
    }
    // The plain column, compared with the same UTC literal, agrees.
    assert_eq!(
        ints(
            &ctx,
            "SELECT count(*) FROM t WHERE plain >= TIMESTAMP '2020-03-29T01:30:00'"
        ),
        vec![Some(want)]
    );

    // EXTRACT(hour) in the column's zone: Paris is UTC+1 before 2020-03-29T01:00Z and
    // UTC+2 from then on.
    let change = parse_datetime("2020-03-29T01:00", TimeUnit::Nanosecond).unwrap();
    let paris_hour = |v: i64| {
        let off = if v >= change { 2 } else { 1 };
        ((v.div_euclid(3_600_000_000_000) + off).rem_euclid(24)) as i64
    };
    let got = ints(
        &ctx,
        "SELECT CAST(EXTRACT(hour FROM t) AS BIGINT) FROM t ORDER BY plain",
    );
    let want: Vec<Option<i64>> = {
        let mut rows: Vec<i64> = utc.clone();
        rows.sort_by_key(|&v| if v == NAT { i64::MAX } else { v });
        rows.iter()
            .map(|&v| (v != NAT).then(|| paris_hour(v)))
            .collect()
    };
    assert_eq!(got, want);
    // date_trunc('day') in Paris: the number of Paris days the rows fall in.
    let days = ints(
        &ctx,
        "SELECT count(DISTINCT date_trunc('day', t)) FROM t WHERE t IS NOT NULL",
    );
    let mut want_days: Vec<i64> = utc
        .iter()
        .filter(|&&v| v != NAT)
        .map(|&v| {
            let off = if v >= change { 2 } else { 1 };
            (v + off * 3_600_000_000_000).div_euclid(86_400_000_000_000)
        })
        .collect();
    want_days.dedup();
    assert_eq!(days, vec![Some(want_days.len() as i64)]);
    // Nulls of the nullable zoned column.
    let nulls = valid
        .iter()
        .zip(&utc)
        .filter(|(&ok, &v)| !ok || v == NAT)
        .count() as i64;
    assert_eq!(
        ints(&ctx, "SELECT count(*) FROM t WHERE u IS NULL"),
        vec![Some(nulls)]
    );
}
