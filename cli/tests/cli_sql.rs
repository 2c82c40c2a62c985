//! `blz sql`, run as a user would: a table made from a CSV file, queried with `--table
//! NAME=PATH` and by its quoted path, its rows printed as a table, CSV and JSON lines, and
//! the errors a user can provoke. The answers are computed here from the rows written.

mod common;

use common::{fails, fails_with, ok, Dir};
use serde_json::Value;
use std::collections::BTreeMap;

const ROWS: i64 = 5000;

/// Row `i` of the table: a sorted key, a float, a group, a name.
fn row(i: i64) -> (i64, f64, i64, String) {
    (
        3 * i,
        (i % 17) as f64 * 0.5 - 2.0,
        (i * 7) % 10,
        format!("n{}", i % 13),
    )
}

/// The table at `d/pts.blz`, made from a CSV file with `blz create --csv`.
fn make_table(d: &Dir) -> String {
    let mut csv = String::from("k,x,g,name\n");
    for i in 0..ROWS {
        let (k, x, g, name) = row(i);
        csv.push_str(&format!("{k},{x},{g},{name}\n"));
    }
    let src = d.write("pts.csv", &csv);
    let t = d.s("pts.blz");
    ok(&["create", &t, "--csv", &src]);
    t
}

#[test]
fn group_by_as_csv_matches_the_rows() {
    let d = Dir::new();
    let t = make_table(&d);
    let table = format!("t={t}");
    let out = ok(&[
        "sql",
        "SELECT g, count(*) AS n, sum(k) AS s, max(x) AS m FROM t GROUP BY g ORDER BY g",
        "--table",
        &table,
        "--format",
        "csv",
    ]);
    let mut want: BTreeMap<i64, (i64, i64, f64)> = BTreeMap::new();
    for i in 0..ROWS {
        let (k, x, g, _) = row(i);
        let e = want.entry(g).or_insert((0, 0, f64::NEG_INFINITY));
        e.0 += 1;
        e.1 += k;
        e.2 = e.2.max(x);
    }
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("g,n,s,m"), "{out}");
    let got: Vec<(i64, i64, i64, f64)> = lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (
                f[0].parse().expect("g"),
                f[1].parse().expect("n"),
                f[2].parse().expect("s"),
                f[3].parse().expect("m"),
            )
        })
        .collect();
    let want: Vec<(i64, i64, i64, f64)> = want
        .into_iter()
        .map(|(g, (n, s, m))| (g, n, s, m))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn a_filtered_projection_as_json_lines_and_as_a_table() {
    let d = Dir::new();
    let t = make_table(&d);
    let table = format!("pts={t}");
    let (lo, hi) = (3 * 1200, 3 * 1210);
    let q = format!("SELECT k, name FROM pts WHERE k BETWEEN {lo} AND {hi} ORDER BY k DESC");
    let out = ok(&["sql", &q, "-t", &table, "--format", "json"]);
    let got: Vec<(i64, String)> = out
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            (
                v["k"].as_i64().expect("k"),
                v["name"].as_str().expect("name").to_string(),
            )
        })
        .collect();
    let want: Vec<(i64, String)> = (1200..=1210)
        .rev()
        .map(|i| {
            let (k, _, _, name) = row(i);
            (k, name)
        })
        .collect();
    assert_eq!(got, want);

    // The default format: an aligned table with a header and every value.
    let out = ok(&["sql", &q, "-t", &table]);
    assert!(out.contains("| k ") && out.contains("| name"), "{out}");
    for (k, name) in &want {
        assert!(out.contains(&format!("| {k} ")), "{k} missing: {out}");
        assert!(out.contains(name.as_str()), "{name} missing: {out}");
    }
}

#[test]
fn a_table_named_by_its_path_and_an_empty_answer() {
    let d = Dir::new();
    let t = make_table(&d);
    let q = format!("SELECT count(*) AS n, min(k) AS lo FROM \"{t}\" WHERE g = 3");
    let out = ok(&["sql", &q, "--format", "csv"]);
    let n = (0..ROWS).filter(|&i| row(i).2 == 3).count();
    let lo = (0..ROWS).find(|&i| row(i).2 == 3).map(|i| row(i).0);
    assert_eq!(
        out,
        format!("n,lo\n{n},{}\n", lo.expect("a row of group 3"))
    );

    // No row matches: CSV still has its header.
    let q = format!("SELECT k FROM \"{t}\" WHERE k < 0");
    assert_eq!(ok(&["sql", &q, "--format", "csv"]), "k\n");
}

#[test]
fn errors_name_what_is_wrong() {
    let d = Dir::new();
    let t = make_table(&d);
    let table = format!("t={t}");

    let err = fails(&["sql", "SELECT 1", "--table", "no-equals-sign"]);
    assert!(err.contains("NAME=PATH"), "{err}");

    let missing = d.s("missing.blz");
    let err = fails(&["sql", "SELECT 1", "--table", &format!("m={missing}")]);
    assert!(err.contains("missing.blz"), "{err}");

    let err = fails(&["sql", "SELECT nope FROM t", "--table", &table]);
    assert!(err.contains("nope"), "{err}");

    let err = fails(&["sql", "SELECT * FROM elsewhere", "--table", &table]);
    assert!(err.contains("elsewhere"), "{err}");

    let err = fails(&["sql", "SELEC k FROM t", "--table", &table]);
    assert!(err.to_lowercase().contains("sql"), "{err}");

    // An N-d array is not a table.
    let arr = d.s("arr.blz");
    ok(&["create", &arr, "--random-walk", "100", "--seed", "1"]);
    let err = fails(&["sql", "SELECT 1", "--table", &format!("a={arr}")]);
    assert!(err.contains("tables and layer datasets"), "{err}");

    // A bad --format is clap's usage error.
    fails_with(2, &["sql", "SELECT 1", "--format", "xml"]);
}

#[test]
fn statements_that_write_or_change_the_session_are_refused_and_touch_nothing() {
    let d = Dir::new();
    let t = make_table(&d);
    let table = format!("t={t}");
    let victim = d.write("existing.csv", "precious\n");
    let out = d.s("out.json");
    for q in [
        format!("COPY (SELECT 'x' AS a) TO '{victim}' STORED AS CSV"),
        format!("COPY (SELECT * FROM t) TO '{out}' STORED AS JSON"),
        format!("CREATE EXTERNAL TABLE pw (a VARCHAR) STORED AS CSV LOCATION '{victim}'"),
        "CREATE TABLE c AS SELECT * FROM t".to_string(),
        "DROP TABLE t".to_string(),
        "SET datafusion.execution.batch_size = 1".to_string(),
        format!("EXPLAIN COPY (SELECT 1) TO '{out}'"),
    ] {
        let err = fails(&["sql", &q, "--table", &table]);
        assert!(err.contains("queries only"), "{q}: {err}");
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert!(!std::path::Path::new(&out).exists());
    let n = ok(&[
        "sql",
        "SELECT count(*) AS n FROM t",
        "--table",
        &table,
        "--format",
        "csv",
    ]);
    assert_eq!(n.lines().nth(1), Some(ROWS.to_string().as_str()));
    // An error met while the rows are read is blz's, without Arrow's wrapping.
    let err = fails(&["sql", "SELECT CAST(name AS INT) FROM t", "--table", &table]);
    assert!(
        err.starts_with("blz: SQL: ") && !err.contains("External"),
        "{err}"
    );
}

#[test]
fn a_query_too_deep_is_an_error_not_a_crash() {
    let d = Dir::new();
    let t = make_table(&d);
    let table = format!("t={t}");
    // At the limit: `sum` of a chain of 999 operands nests 1000 deep.
    let terms = blz::sql::MAX_EXPRESSION_DEPTH - 1;
    let q = format!("SELECT sum({}) AS s FROM t", vec!["g"; terms].join(" + "));
    let got = ok(&["sql", &q, "--table", &table, "--format", "csv"]);
    let want: i64 = (0..ROWS).map(|i| row(i).2).sum::<i64>() * terms as i64;
    assert_eq!(got.lines().nth(1), Some(want.to_string().as_str()), "{got}");
    for terms in [blz::sql::MAX_EXPRESSION_DEPTH + 1, 3000, 20_000] {
        let q = format!("SELECT {} FROM t", vec!["k"; terms].join(" + "));
        let err = fails(&["sql", &q, "--table", &table]);
        assert!(err.contains("too deep"), "{terms}: {err}");
    }
}

#[test]
fn json_lines_keep_infinities_and_nan_apart_from_null() {
    let q = "SELECT * FROM (VALUES (1, CAST('inf' AS DOUBLE)), (2, CAST('-inf' AS DOUBLE)), \
             (3, CAST('NaN' AS DOUBLE)), (4, NULL), (5, 0.5), (6, CAST(CAST('NaN' AS DOUBLE) AS FLOAT)), \
             (7, CAST(0.25 AS FLOAT))) AS v(i, x) ORDER BY i";
    let out = ok(&["sql", q, "--format", "json"]);
    let xs: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| v.get("x").cloned().unwrap_or(Value::Null))
        .collect();
    assert_eq!(
        xs,
        vec![
            Value::from("inf"),
            Value::from("-inf"),
            Value::from("NaN"),
            Value::Null,
            Value::from(0.5),
            Value::from("NaN"),
            Value::from(0.25),
        ],
        "{out}"
    );
}
