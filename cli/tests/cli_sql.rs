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
