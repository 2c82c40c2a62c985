//! The library's CSV ingestion: type inference over a whole file, tables created and appended
//! in one transaction, one column as a 1-d dataset, and errors naming the file, line and
//! column.
#![cfg(feature = "csv")]

use blz::csv::{self, ColumnReader, ColumnSpec};
use blz::table::{LeafKind, TableOptions, Values};
use blz::{CreateOptions, DType, Dataset};

const TRADES: &str = "\
id,sym,price,ok,pos/x,note
1,AAPL,10.5,true,1,
2,MSFT,,false,2,hi
3,IBM,7,TRUE,3.5,x
";

#[test]
fn infers_column_types_over_the_whole_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.csv");
    std::fs::write(&p, TRADES).unwrap();
    let types = csv::infer_types(&p).unwrap();
    assert_eq!(
        types,
        [
            ("id".to_string(), LeafKind::Fixed(DType::I64)),
            ("sym".to_string(), LeafKind::VarStr),
            // An empty cell is a null; the other cells make the type.
            ("price".to_string(), LeafKind::Fixed(DType::F64)),
            ("ok".to_string(), LeafKind::Fixed(DType::Bool)),
            // 3.5 on the last line makes the column float.
            ("pos/x".to_string(), LeafKind::Fixed(DType::F64)),
            ("note".to_string(), LeafKind::VarStr),
        ]
    );
}

#[test]
fn creates_and_appends_tables() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.csv");
    std::fs::write(&p, TRADES).unwrap();
    let root = dir.path().join("t.blz");
    let mut t = csv::create_table(&p, &root, &TableOptions::default()).unwrap();
    assert_eq!(t.nrows(), 3);
    assert_eq!(
        t.column_names(),
        ["id", "sym", "price", "ok", "pos/x", "note"]
    );
    assert_eq!(t.column("id").unwrap(), Values::from_slice(&[1i64, 2, 3]));
    assert_eq!(
        t.column("ok").unwrap(),
        Values::from_slice(&[true, false, true])
    );
    // Empty fields are nulls (the column's fill value underneath).
    let price = t.column("price").unwrap().to_vec::<f64>().unwrap();
    assert!(price[0] == 10.5 && price[2] == 7.0);
    assert_eq!(
        t.column_validity("price", 0, 3).unwrap(),
        Some(vec![true, false, true])
    );
    assert_eq!(
        t.column("note").unwrap().to_strings().unwrap(),
        ["", "hi", "x"]
    );
    assert_eq!(
        t.column_validity("note", 0, 3).unwrap(),
        Some(vec![false, true, true])
    );
    assert_eq!(t.column_validity("id", 0, 3).unwrap(), None);

    // Appending takes the header's columns in any order.
    let more = dir.path().join("more.csv");
    std::fs::write(&more, "note,pos/x,ok,price,sym,id\nz,9,false,1,GE,4\n").unwrap();
    assert_eq!(csv::append_table(&mut t, &more).unwrap(), 1);
    assert_eq!(t.nrows(), 4);
    assert_eq!(
        t.column_rows("sym", 3, 4).unwrap().to_strings().unwrap(),
        ["GE"]
    );

    // A bad cell fails the whole append, naming file, line and column; nothing is kept.
    std::fs::write(
        &more,
        "id,sym,price,ok,pos/x,note\n5,A,1,true,1,a\n6,B,1,maybe,1,b\n",
    )
    .unwrap();
    let e = csv::append_table(&mut t, &more).unwrap_err();
    assert!(
        matches!(e, blz::Error::InvalidInput { ref path, .. } if path == &more),
        "{e}"
    );
    let m = e.to_string();
    assert!(
        m.contains("line 3, column ok") && m.contains("maybe"),
        "{m}"
    );
    assert_eq!(t.nrows(), 4);
    // So does a header that lacks a column.
    std::fs::write(&more, "id,sym\n7,C\n").unwrap();
    let m = csv::append_table(&mut t, &more).unwrap_err().to_string();
    assert!(m.contains("lacks columns") && m.contains("price"), "{m}");
}

#[test]
fn a_schema_overrides_inference_and_checks_values() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.csv");
    std::fs::write(&p, TRADES).unwrap();
    let schema = [
        ("id".to_string(), LeafKind::Fixed(DType::I8)),
        ("sym".to_string(), LeafKind::Fixed(DType::Bytes(4))),
    ];
    let plan = csv::scan_table(&p, b',', &schema).unwrap();
    assert_eq!(plan.rows(), 3);
    assert_eq!(plan.leaves()[1].1, LeafKind::Fixed(DType::Bytes(4)));
    let schema = [("sym".to_string(), LeafKind::Fixed(DType::Bytes(3)))];
    let m = csv::scan_table(&p, b',', &schema).unwrap_err().to_string();
    assert!(
        m.contains("line 2, column sym") && m.contains("AAPL"),
        "{m}"
    );
}

#[test]
fn one_column_becomes_a_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.csv");
    std::fs::write(&p, TRADES).unwrap();
    let spec = ColumnSpec {
        path: p.clone(),
        column: "pos/x".into(),
        delimiter: b',',
        no_header: false,
    };
    let plan = csv::scan_column(&spec, None).unwrap();
    assert_eq!(
        (plan.dtype(), plan.rows(), plan.has_header()),
        (DType::F64, 3, true)
    );
    let root = dir.path().join("x.blz");
    let mut progress = 0;
    let ds = ColumnReader::new(plan)
        .unwrap()
        .create_dataset(
            blz::storage::local(),
            &root,
            &CreateOptions::default(),
            16,
            |n| progress += n,
        )
        .unwrap();
    assert_eq!(progress, 3);
    assert_eq!(
        ds.read::<f64>().unwrap().into_raw_vec_and_offset().0,
        [1.0, 2.0, 3.5]
    );
    // By index, read as the dataset's dtype: a float column does not fit int32.
    let mut ints = Dataset::create(dir.path().join("i.blz"), DType::I32, &[0]).unwrap();
    let spec = ColumnSpec {
        column: "0".into(),
        ..spec
    };
    let plan = csv::scan_column(&spec, Some(DType::I32)).unwrap();
    assert_eq!(
        ColumnReader::new(plan)
            .unwrap()
            .append_to(&mut ints, 1 << 20, |_| {})
            .unwrap(),
        3
    );
    assert_eq!(
        ints.read::<i32>().unwrap().into_raw_vec_and_offset().0,
        [1, 2, 3]
    );
    let spec = ColumnSpec {
        column: "price".into(),
        ..spec
    };
    let m = csv::scan_column(&spec, Some(DType::I32))
        .unwrap_err()
        .to_string();
    assert!(
        m.contains("line 2, column price") && m.contains("whole number"),
        "{m}"
    );
}
