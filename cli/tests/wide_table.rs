//! A table far wider than the process may hold files open: 600 columns created, appended
//! to, read and verified by a `blz` limited to 200 descriptors (a 20,000-column CSV under
//! the usual limits is the same case). Transactions, journal replay and the reader cache
//! bound the files they keep open.

mod common;

use std::fmt::Write as _;
use std::process::Command;

const COLS: usize = 600;

fn csv(rows: std::ops::Range<usize>) -> String {
    let mut s = (0..COLS)
        .map(|i| format!("c{i}"))
        .collect::<Vec<_>>()
        .join(",");
    s.push('\n');
    for r in rows {
        let line: Vec<String> = (0..COLS).map(|i| (r * 1000 + i).to_string()).collect();
        writeln!(s, "{}", line.join(",")).unwrap();
    }
    s
}

/// Runs blz with at most 200 open files.
fn limited(args: &[&str]) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 200 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_blz"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "blz {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn six_hundred_columns_in_two_hundred_descriptors() {
    let d = common::Dir::new();
    let a = d.write("a.csv", &csv(0..3));
    let b = d.write("b.csv", &csv(3..5));
    let t = d.s("t.blz");
    limited(&["create", &t, "--csv", &a]);
    limited(&["append", &t, "--csv", &b]);
    let got = limited(&["get", &t, "--columns", "c599"]);
    for r in 0..5 {
        assert!(got.contains(&(r * 1000 + 599).to_string()), "{got}");
    }
    let out = limited(&["verify", &t]);
    assert!(out.contains("all intact"), "{out}");
    let out = d.s("all.csv");
    limited(&["get", &t, "--out", &out]);
    let rows = std::fs::read_to_string(&out).unwrap();
    assert_eq!(rows.lines().count(), 1 + 5);
    assert!(rows.lines().last().unwrap().ends_with(",4599"), "{rows}");
}
