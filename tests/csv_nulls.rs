//! CSV files with missing values and dates (`blz::csv`): empty fields are nulls of nullable
//! columns whatever their type, ISO dates and timestamps are recognised (or not, on request)
//! with the unit their text needs and offsets as zoned UTC instants, declared schemas with
//! `not null` and zones, appends to nullable and older tables, and the statsmodels files.
#![cfg(feature = "csv")]

use blz::csv::{self, CsvOptions};
use blz::datetime::parse_datetime;
use blz::dtype::{TimeUnit, NAT};
use blz::table::{LeafKind, Table, TableOptions, Values};
use blz::DType;
use std::path::Path;

const MIXED: &str = "\
i,f,b,s,d,ts,z,empty
1,1.5,true,a,2020-01-31,2020-01-31 10:00:00.25,2020-01-31T10:00:00Z,
,,,,,,,
3,-2,false,,1999-12-31,2020-02-01T00:00:01.125,2020-01-31T12:00:00+02:00,
";

fn create(dir: &Path, text: &str, opts: &CsvOptions) -> blz::Result<Table> {
    let p = dir.join("in.csv");
    std::fs::write(&p, text).unwrap();
    let plan = csv::scan_table_with(&p, opts)?;
    let root = dir.join("t.blz");
    let _ = std::fs::remove_dir_all(&root);
    plan.create_table(
        blz::storage::local(),
        &root,
        &TableOptions::default(),
        2,
        |_| {},
    )
}

/// A 64-bit column's values (datetime64 counts included) as `i64`.
fn i64s(t: &Table, c: &str) -> Vec<i64> {
    match t.column(c).unwrap() {
        Values::Fixed { data, .. } => data
            .chunks_exact(8)
            .map(|b| i64::from_ne_bytes(b.try_into().unwrap()))
            .collect(),
        other => panic!("{c}: {other:?}"),
    }
}

#[test]
fn empty_fields_are_nulls_and_dates_are_recognised() {
    let dir = tempfile::tempdir().unwrap();
    let t = create(dir.path(), MIXED, &CsvOptions::default()).unwrap();
    let kinds: Vec<(String, String)> = t
        .leaves()
        .iter()
        .map(|l| (l.path.clone(), l.kind.name()))
        .collect();
    let want = [
        ("i", "int64"),
        ("f", "float64"),
        ("b", "bool"),
        ("s", "varstr"),
        ("d", "datetime64[D]"),
        ("ts", "datetime64[ms]"),
        ("z", "datetime64[s]"),
        ("empty", "varstr"),
    ];
    assert_eq!(
        kinds,
        want.map(|(a, b)| (a.to_string(), b.to_string())).to_vec()
    );
    for c in ["i", "f", "b", "d", "ts", "z", "empty"] {
        assert!(t.is_nullable(c).unwrap(), "{c}");
        let v = t.column_validity(c, 0, 3).unwrap().unwrap();
        if c == "empty" {
            assert_eq!(v, [false, false, false]);
        } else {
            assert_eq!(v, [true, false, true], "{c}");
        }
    }
    assert_eq!(
        t.column_validity("s", 0, 3).unwrap(),
        Some(vec![true, false, false])
    );
    assert_eq!(i64s(&t, "i"), [1, 0, 3]);
    let d = i64s(&t, "d");
    assert_eq!(
        [d[0], d[2]],
        [
            parse_datetime("2020-01-31", TimeUnit::Day).unwrap(),
            parse_datetime("1999-12-31", TimeUnit::Day).unwrap()
        ]
    );
    let ts = i64s(&t, "ts");
    assert_eq!(
        ts[2],
        parse_datetime("2020-02-01T00:00:01.125", TimeUnit::Millisecond).unwrap()
    );
    // Offsets: zoned UTC, the instants.
    assert_eq!(t.timezone("z").unwrap(), Some("UTC"));
    assert_eq!(t.timezone("ts").unwrap(), None);
    let z = i64s(&t, "z");
    let ten = parse_datetime("2020-01-31T10:00", TimeUnit::Second).unwrap();
    assert_eq!([z[0], z[2]], [ten, ten]);

    // Dates off: strings.
    let opts = CsvOptions {
        dates: false,
        ..CsvOptions::default()
    };
    let t = create(dir.path(), MIXED, &opts).unwrap();
    for c in ["d", "ts", "z"] {
        assert_eq!(
            t.leaves().iter().find(|l| l.path == c).unwrap().kind,
            LeafKind::VarStr
        );
    }
}

#[test]
fn declared_columns_not_null_and_zones() {
    let dir = tempfile::tempdir().unwrap();
    // `not null`: an empty field is an error naming the column and the line...
    let opts = CsvOptions {
        schema: csv::parse_schema("i:int32 not null").unwrap(),
        ..CsvOptions::default()
    };
    let e = create(dir.path(), MIXED, &opts).unwrap_err().to_string();
    assert!(
        e.contains("line 3, column i") && e.contains("not nullable"),
        "{e}"
    );
    assert!(!dir.path().join("t.blz").exists());
    // ... but the empty string in a string column.
    let opts = CsvOptions {
        schema: csv::parse_schema(
            "s:varstr not null, f:float32 null, ts:datetime64[us, Europe/Paris]",
        )
        .unwrap(),
        ..CsvOptions::default()
    };
    let t = create(dir.path(), MIXED, &opts).unwrap();
    assert!(!t.is_nullable("s").unwrap());
    assert_eq!(t.column("s").unwrap().to_strings().unwrap(), ["a", "", ""]);
    assert_eq!(t.leaves()[1].kind, LeafKind::Fixed(DType::F32));
    assert_eq!(t.timezone("ts").unwrap(), Some("Europe/Paris"));
    let ts = i64s(&t, "ts");
    assert_eq!(
        ts[0],
        parse_datetime("2020-01-31T10:00:00.25", TimeUnit::Microsecond).unwrap()
    );
    // A declared column without empty fields and without `null` is not nullable.
    let opts = CsvOptions {
        schema: csv::parse_schema("d:datetime64[s]").unwrap(),
        ..CsvOptions::default()
    };
    let t = create(dir.path(), "d\n2020-01-01T00:00+01:00\n", &opts).unwrap();
    assert!(!t.is_nullable("d").unwrap());
    assert_eq!(
        i64s(&t, "d"),
        [parse_datetime("2019-12-31T23:00", TimeUnit::Second).unwrap()]
    );
}

#[test]
fn appends_follow_the_table_columns() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = create(dir.path(), "x,y\n1,2.5\n,\n", &CsvOptions::default()).unwrap();
    let more = dir.path().join("more.csv");
    std::fs::write(&more, "y,x\n,7\n1,\n").unwrap();
    assert_eq!(csv::append_table(&mut t, &more).unwrap(), 2);
    assert_eq!(
        t.column_validity("x", 0, 4).unwrap(),
        Some(vec![true, false, true, false])
    );
    assert_eq!(
        t.column_validity("y", 0, 4).unwrap(),
        Some(vec![true, false, false, true])
    );
    // A table whose columns are not nullable (made before CSV nulls) reads an empty field
    // as it did: NaN in a float column, NaT in a date column, an error in an integer one.
    let root = dir.path().join("old.blz");
    let fields = vec![
        blz::table::Field::new("f", DType::F64),
        blz::table::Field::new("d", DType::DateTime(TimeUnit::Day)),
        blz::table::Field::new("n", DType::I64),
    ];
    let mut old = Table::create(&root, fields, &TableOptions::default()).unwrap();
    std::fs::write(&more, "f,d,n\n,,1\n").unwrap();
    csv::append_table(&mut old, &more).unwrap();
    assert!(old.column("f").unwrap().to_vec::<f64>().unwrap()[0].is_nan());
    assert_eq!(i64s(&old, "d"), [NAT]);
    std::fs::write(&more, "f,d,n\n1,2020-01-01,\n").unwrap();
    let e = csv::append_table(&mut old, &more).unwrap_err().to_string();
    assert!(e.contains("line 2, column n"), "{e}");
    assert_eq!(old.nrows(), 1);
}

#[test]
fn every_statsmodels_file_imports() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/statsmodels");
    for (file, delimiter, rows, nullable) in [
        ("co2.csv", b',', 2284u64, Some("co2")),
        ("fertility.csv", b',', 219, Some("1960")),
        ("macrodata.csv", b',', 203, None),
        ("modechoice.csv", b';', 840, None),
    ] {
        let opts = CsvOptions {
            delimiter,
            ..CsvOptions::default()
        };
        let plan = csv::scan_table_with(&fixtures.join(file), &opts).unwrap();
        let root = dir.path().join(format!("{file}.blz"));
        let t = plan
            .create_table(
                blz::storage::local(),
                &root,
                &TableOptions::default(),
                1000,
                |_| {},
            )
            .unwrap();
        assert_eq!(t.nrows(), rows, "{file}");
        if let Some(c) = nullable {
            assert!(t.is_nullable(c).unwrap(), "{file}: {c}");
            assert!(
                t.column_null_counts(c)
                    .unwrap()
                    .iter()
                    .flatten()
                    .sum::<u64>()
                    > 0
            );
        }
    }
}
