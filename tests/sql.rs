//! SQL over tables and layer datasets (`blz::sql`, feature `sql`), checked against the same
//! answers computed directly from the rows.

mod common;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type};
use arrow_array::RecordBatch;
use blz::layer::{ColumnDef, LayerSchema, LayerWriter, LeafKind, Value};
use blz::sql::SqlContext;
use blz::table::{ColumnOptions, Field, Table, TableOptions, Values};
use blz::{DType, Error};
use std::path::Path;

/// Rows of the test table: `k` sorted (3 * i), `x` a float of i, `g` = i % 7, `s` a string.
struct Rows {
    k: Vec<i64>,
    x: Vec<f64>,
    g: Vec<i64>,
    s: Vec<String>,
}

fn rows(n: usize) -> Rows {
    let k: Vec<i64> = (0..n as i64).map(|i| 3 * i).collect();
    let x: Vec<f64> = (0..n).map(|i| ((i * 7919) % 1000) as f64 / 8.0).collect();
    let g: Vec<i64> = (0..n as i64).map(|i| (i * 31) % 7).collect();
    let s: Vec<String> = (0..n).map(|i| format!("s{}", i % 13)).collect();
    Rows { k, x, g, s }
}

/// A table of `r` in chunks of 100 rows (so that a range of k covers a few chunks).
fn make_table(path: &Path, r: &Rows) -> Table {
    let small = ColumnOptions {
        chunklen: Some(100),
        ..Default::default()
    };
    let fields = vec![
        Field::new("k", DType::I64).with_options(small.clone()),
        Field::new("x", DType::F64).with_options(small.clone()),
        Field::new("g", DType::I64).with_options(small.clone()),
        Field::varstr("s").with_options(small),
    ];
    let mut t = Table::create(path, fields, &TableOptions::default()).unwrap();
    t.append(&[
        ("k", Values::from_slice(&r.k)),
        ("x", Values::from_slice(&r.x)),
        ("g", Values::from_slice(&r.g)),
        ("s", Values::strings(&r.s)),
    ])
    .unwrap();
    t
}

fn one_f64(b: &[RecordBatch]) -> f64 {
    let b = b.iter().find(|b| b.num_rows() > 0).expect("a row");
    b.column(0).as_primitive::<Float64Type>().value(0)
}

fn one_i64(b: &[RecordBatch]) -> i64 {
    let b = b.iter().find(|b| b.num_rows() > 0).expect("a row");
    b.column(0).as_primitive::<Int64Type>().value(0)
}

fn total_rows(b: &[RecordBatch]) -> usize {
    b.iter().map(RecordBatch::num_rows).sum()
}

#[test]
fn aggregates_filters_and_groups_match_the_rows() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.blz");
    let r = rows(2_345);
    make_table(&p, &r);
    let ctx = SqlContext::new().unwrap();
    ctx.register_path("t", p.to_str().unwrap()).unwrap();

    let got = one_f64(&ctx.collect("SELECT sum(x) FROM t").unwrap());
    let want: f64 = r.x.iter().sum();
    assert!(
        (got - want).abs() < 1e-6 * want.abs().max(1.0),
        "{got} vs {want}"
    );

    for (a, b) in [
        (0, 0),
        (10, 400),
        (299, 301),
        (1500, 7000),
        (7000, 8000),
        (-50, 2),
    ] {
        let q = format!("SELECT sum(x), count(*) FROM t WHERE k BETWEEN {a} AND {b}");
        let out = ctx.collect(&q).unwrap();
        let b0 = out.iter().find(|b| b.num_rows() > 0).unwrap();
        let count = b0.column(1).as_primitive::<Int64Type>().value(0);
        let sel: Vec<usize> = (0..r.k.len())
            .filter(|&i| r.k[i] >= a && r.k[i] <= b)
            .collect();
        assert_eq!(count as usize, sel.len(), "{q}");
        if !sel.is_empty() {
            let s = b0.column(0).as_primitive::<Float64Type>().value(0);
            let want: f64 = sel.iter().map(|&i| r.x[i]).sum();
            assert!((s - want).abs() < 1e-6, "{q}: {s} vs {want}");
        }
    }

    let out = ctx
        .collect("SELECT g, count(*) AS n, avg(x) AS m FROM t GROUP BY g ORDER BY g")
        .unwrap();
    let mut seen = 0;
    for b in &out {
        for row in 0..b.num_rows() {
            let g = b.column(0).as_primitive::<Int64Type>().value(row);
            let n = b.column(1).as_primitive::<Int64Type>().value(row);
            let m = b.column(2).as_primitive::<Float64Type>().value(row);
            let idx: Vec<usize> = (0..r.g.len()).filter(|&i| r.g[i] == g).collect();
            assert_eq!(n as usize, idx.len());
            let want = idx.iter().map(|&i| r.x[i]).sum::<f64>() / idx.len() as f64;
            assert!((m - want).abs() < 1e-9, "group {g}: {m} vs {want}");
            seen += 1;
        }
    }
    assert_eq!(seen, 7);

    // Strings compare, and a LIMIT returns that many rows.
    let n = one_i64(
        &ctx.collect("SELECT count(*) FROM t WHERE s = 's3'")
            .unwrap(),
    );
    assert_eq!(n as usize, r.s.iter().filter(|s| *s == "s3").count());
    let out = ctx.collect("SELECT k, s FROM t LIMIT 5").unwrap();
    assert_eq!(total_rows(&out), 5);
}

#[test]
fn a_range_query_decodes_only_the_chunks_its_range_needs() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.blz");
    let r = rows(1_000);
    let t = make_table(&p, &r);
    // Corrupt chunk 8 of k and of x (rows 800..900, k 2400..2697): a query whose range of
    // k lies elsewhere never decodes them, because the statistics of k rule them out.
    for col in ["k", "x"] {
        let files = t.column_files(col).unwrap();
        common::flip_byte_in_chunk(&files[0], 8);
    }
    drop(t);
    let ctx = SqlContext::new().unwrap();
    ctx.register_path("t", p.to_str().unwrap()).unwrap();
    let out = ctx
        .collect("SELECT count(*), sum(x) FROM t WHERE k BETWEEN 300 AND 600")
        .unwrap();
    let b = out.iter().find(|b| b.num_rows() > 0).unwrap();
    assert_eq!(b.column(0).as_primitive::<Int64Type>().value(0), 101);
    // The whole column does reach the corrupt chunk, and says where it is.
    let err = ctx.collect("SELECT sum(x) FROM t").unwrap_err();
    assert!(
        matches!(
            err,
            Error::ChecksumMismatch { .. } | Error::InvalidChunk { .. }
        ),
        "{err:?}"
    );
}

#[test]
fn tables_are_named_by_path_and_errors_are_typed() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("pts.blz");
    let r = rows(500);
    make_table(&p, &r);
    let ctx = SqlContext::new().unwrap();
    let q = format!("SELECT count(*) FROM \"{}\" WHERE g = 3", p.display());
    let n = one_i64(&ctx.collect(&q).unwrap());
    assert_eq!(n as usize, r.g.iter().filter(|&&g| g == 3).count());

    assert!(matches!(
        ctx.collect("SELECT * FROM nowhere").unwrap_err(),
        Error::Sql(_)
    ));
    assert!(matches!(ctx.collect("SELEC 1").unwrap_err(), Error::Sql(_)));
    ctx.register_path("t", p.to_str().unwrap()).unwrap();
    assert!(matches!(
        ctx.collect("SELECT nope FROM t").unwrap_err(),
        Error::Sql(_)
    ));
    // A name is given once.
    assert!(matches!(
        ctx.register_path("t", p.to_str().unwrap()).unwrap_err(),
        Error::Sql(_)
    ));
    // An N-d array is not a table.
    let a = dir.path().join("a.blz");
    blz::Dataset::create(&a, DType::F64, &[4, 4]).unwrap();
    assert!(matches!(
        ctx.register_path("a", a.to_str().unwrap()).unwrap_err(),
        Error::InvalidArgument(_)
    ));
    // A missing dataset says so.
    assert!(ctx
        .register_path("m", dir.path().join("missing.blz").to_str().unwrap())
        .is_err());
}

#[test]
fn a_query_sees_the_last_commit() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.blz");
    let r = rows(300);
    let mut t = make_table(&p, &r);
    let ctx = SqlContext::new().unwrap();
    ctx.register_path("t", p.to_str().unwrap()).unwrap();
    assert_eq!(
        one_i64(&ctx.collect("SELECT count(*) FROM t").unwrap()),
        300
    );
    let more = rows(50);
    t.append(&[
        ("k", Values::from_slice(&more.k)),
        ("x", Values::from_slice(&more.x)),
        ("g", Values::from_slice(&more.g)),
        ("s", Values::strings(&more.s)),
    ])
    .unwrap();
    assert_eq!(
        one_i64(&ctx.collect("SELECT count(*) FROM t").unwrap()),
        350
    );
}

/// A layer: key `a` (0..40), each with `a % 5 + 1` values of `b`, weight `a * 10 + b`.
fn make_layer(path: &Path) -> Vec<(i64, String, i64)> {
    let schema = LayerSchema::new(vec![
        ColumnDef::new("a", LeafKind::Fixed(DType::I64)).with_chunklen(8),
        ColumnDef::new("b", LeafKind::VarStr).with_chunklen(8),
    ])
    .with_weight("w", DType::I64);
    let mut w = LayerWriter::create(path, schema).unwrap();
    let mut model = Vec::new();
    for a in 0..40i64 {
        for j in 0..(a % 5 + 1) {
            let b = format!("v{j:02}");
            let weight = a * 10 + j;
            w.push(
                &[Value::Int(a), Value::Str(b.clone())],
                Some(Value::Int(weight)),
            )
            .unwrap();
            model.push((a, b, weight));
        }
    }
    w.finish().unwrap();
    model
}

fn layer_rows(out: &[RecordBatch]) -> Vec<(i64, String, i64)> {
    let mut v = Vec::new();
    for b in out {
        let a = b.column(0).as_primitive::<Int64Type>();
        let s = b.column(1).as_string::<i32>();
        let w = b.column(2).as_primitive::<Int64Type>();
        for i in 0..b.num_rows() {
            v.push((a.value(i), s.value(i).to_string(), w.value(i)));
        }
    }
    v
}

#[test]
fn layers_are_tables_of_their_paths_in_key_order() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("l.blz");
    let model = make_layer(&p);
    let ctx = SqlContext::new().unwrap();
    ctx.register_path("l", p.to_str().unwrap()).unwrap();

    assert_eq!(
        layer_rows(&ctx.collect("SELECT a, b, w FROM l").unwrap()),
        model
    );
    for q in [
        (
            "a = 17",
            Box::new(|a: i64| a == 17) as Box<dyn Fn(i64) -> bool>,
        ),
        ("a BETWEEN 5 AND 9", Box::new(|a| (5..=9).contains(&a))),
        ("a > 30", Box::new(|a| a > 30)),
        ("a < 3", Box::new(|a| a < 3)),
        ("a >= 39", Box::new(|a| a >= 39)),
        ("17 <= a AND a < 20", Box::new(|a| (17..20).contains(&a))),
        ("a = 1000", Box::new(|_| false)),
        ("a = 2.5", Box::new(|_| false)),
    ] {
        let sql = format!("SELECT a, b, w FROM l WHERE {}", q.0);
        let got = layer_rows(&ctx.collect(&sql).unwrap());
        let want: Vec<_> = model.iter().filter(|r| (q.1)(r.0)).cloned().collect();
        assert_eq!(got, want, "{sql}");
    }
    // The key order is declared: ORDER BY the keys needs no sort.
    let plan = ctx
        .collect("EXPLAIN SELECT a, b FROM l ORDER BY a, b")
        .unwrap();
    let text = format!("{:?}", plan);
    assert!(!text.contains("SortExec"), "{text}");
    let got = ctx.collect("SELECT a, b FROM l ORDER BY a, b").unwrap();
    assert_eq!(total_rows(&got), model.len());
    // Aggregates over the weights.
    let out = ctx.collect("SELECT sum(w) FROM l WHERE a < 10").unwrap();
    let b = out.iter().find(|b| b.num_rows() > 0).unwrap();
    let want: i64 = model.iter().filter(|r| r.0 < 10).map(|r| r.2).sum();
    assert_eq!(b.column(0).as_primitive::<Int64Type>().value(0), want);
    let n = one_i64(&ctx.collect("SELECT count(DISTINCT b) FROM l").unwrap());
    assert_eq!(n, 5);
}

/// Only queries run: a statement that would write a file, read one the caller did not name,
/// or change the session is refused before anything runs, and the context is unchanged.
#[test]
fn statements_that_are_not_queries_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.blz");
    make_table(&path, &rows(300));
    let victim = dir.path().join("existing.csv");
    std::fs::write(&victim, "precious\n").unwrap();
    let out = dir.path().join("out.csv");
    let ctx = SqlContext::new().unwrap();
    ctx.register_path("t", path.to_str().unwrap()).unwrap();
    let (v, o) = (victim.display(), out.display());
    for q in [
        format!("COPY (SELECT 'x' AS a) TO '{v}' STORED AS CSV"),
        format!("COPY t TO '{o}' STORED AS CSV"),
        format!("CREATE EXTERNAL TABLE pw (a VARCHAR) STORED AS CSV LOCATION '{v}'"),
        "CREATE TABLE c AS SELECT * FROM t".into(),
        "CREATE VIEW w AS SELECT * FROM t".into(),
        "DROP TABLE t".into(),
        "INSERT INTO t (k) VALUES (1)".into(),
        "SET datafusion.execution.batch_size = 1".into(),
        "RESET datafusion.execution.batch_size".into(),
        "SELECT k INTO n FROM t".into(),
        format!("EXPLAIN COPY t TO '{o}'"),
        format!("EXPLAIN ANALYZE COPY t TO '{o}'"),
        "START TRANSACTION".into(),
    ] {
        let e = ctx.collect(&q).unwrap_err();
        assert!(
            matches!(&e, Error::Sql(m) if m.contains("queries only")),
            "{q}: {e}"
        );
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert!(!out.exists());
    assert_eq!(
        one_i64(&ctx.collect("SELECT count(*) FROM t").unwrap()),
        300
    );
    assert!(total_rows(&ctx.collect("EXPLAIN SELECT k FROM t").unwrap()) > 0);
    assert_eq!(total_rows(&ctx.collect("VALUES (1), (2), (3)").unwrap()), 3);
    assert_eq!(total_rows(&ctx.collect("DESCRIBE t").unwrap()), 4);
    assert_eq!(
        one_i64(
            &ctx.collect("WITH a AS (SELECT k FROM t WHERE k < 30) SELECT count(*) FROM a")
                .unwrap()
        ),
        10
    );
}

/// Expressions nested to the limit run, and past it are refused, from a thread whose stack
/// is far too small to plan them: the engine's threads parse, plan and run queries.
#[test]
fn deep_expressions_run_to_the_limit_on_a_small_stack_and_are_refused_past_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.blz");
    let r = rows(300);
    make_table(&path, &r);
    let p = path.to_str().unwrap().to_string();
    let limit = blz::sql::MAX_EXPRESSION_DEPTH;
    let small = std::thread::Builder::new().stack_size(256 * 1024);
    small
        .spawn(move || {
            let ctx = SqlContext::new().unwrap();
            ctx.register_path("t", &p).unwrap();
            let chain = |n: usize, op: &str| vec!["g"; n].join(op);
            // At the limit: `sum` and a chain of `limit - 1` operands under it.
            let q = format!("SELECT sum({}) FROM t", chain(limit - 1, " + "));
            let want: i64 = r.g.iter().sum::<i64>() * (limit - 1) as i64;
            assert_eq!(one_i64(&ctx.collect(&q).unwrap()), want);
            for q in [
                format!("SELECT {} FROM t", chain(limit + 1, " + ")),
                format!("SELECT {} FROM t", chain(15_000, " * ")),
                format!(
                    "SELECT k FROM t WHERE {}",
                    (0..20_000)
                        .map(|i| format!("k = {i}"))
                        .collect::<Vec<_>>()
                        .join(" OR ")
                ),
            ] {
                let e = ctx.collect(&q).unwrap_err();
                assert!(matches!(&e, Error::Sql(m) if m.contains("too deep")), "{e}");
            }
            // Parentheses are bounded by the parser itself.
            let q = format!("SELECT {}k{} FROM t", "(".repeat(5000), ")".repeat(5000));
            assert!(matches!(ctx.collect(&q), Err(Error::Sql(_))));
        })
        .unwrap()
        .join()
        .unwrap();
}
