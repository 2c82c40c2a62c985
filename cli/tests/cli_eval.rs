//! `blz eval`, run as a user would: an expression over datasets made by `blz create`, written
//! to a new dataset and read back, reduced whole and along an axis, and the errors a user can
//! provoke (unknown names, an existing output), which leave no output behind.

mod common;

use common::{fails, ok, Dir};
use ndarray::Array1;
use ndarray_npy::read_npy;

const N: i64 = 50_000;

/// `a` = 0..N and `b` = 0..N as int64 datasets with chunks of 4096, made by `blz create`.
fn operands(d: &Dir) -> (String, String) {
    let (a, b) = (d.s("a.blz"), d.s("b.blz"));
    for p in [&a, &b] {
        ok(&[
            "create",
            p,
            "--arange",
            &N.to_string(),
            "--chunkshape",
            "4096",
        ]);
    }
    (a, b)
}

#[test]
fn an_expression_into_a_new_dataset_reads_back_as_computed() {
    let d = Dir::new();
    let (a, b) = operands(&d);
    let out = d.s("r.blz");
    ok(&[
        "eval",
        "a * b + sin(a) - 2",
        "--var",
        &format!("a={a}"),
        "--var",
        &format!("b={b}"),
        "--out",
        &out,
        "--chunkshape",
        "1000",
    ]);
    ok(&["get", &out, "--out", &d.s("r.npy")]);
    let r: Array1<f64> = read_npy(d.p("r.npy")).expect("read");
    assert_eq!(r.len(), N as usize);
    for (i, got) in r.iter().enumerate() {
        let x = i as f64;
        let want = x * x + x.sin() - 2.0;
        assert!(
            (got - want).abs() <= 1e-9 * want.abs().max(1.0),
            "row {i}: {got} vs {want}"
        );
    }
}

#[test]
fn a_reduction_prints_its_value() {
    let d = Dir::new();
    let (a, b) = operands(&d);
    let out = ok(&[
        "eval",
        "a * b",
        "--var",
        &format!("a={a}"),
        "--var",
        &format!("b={b}"),
        "--reduce",
        "sum",
    ]);
    // int64 arithmetic as numpy's: the sum of squares 0..N.
    let want: i64 = (0..N).map(|x| x * x).sum();
    assert_eq!(out.trim(), want.to_string(), "output: {out}");
}

#[test]
fn errors_name_the_problem_and_leave_no_output() {
    let d = Dir::new();
    let (a, _) = operands(&d);
    let out = d.s("r.blz");
    let err = fails(&["eval", "a * q", "--var", &format!("a={a}"), "--out", &out]);
    assert!(err.contains("unknown name \"q\""), "{err}");
    assert!(!d.p("r.blz").exists());
    // An existing output is refused, and left as it was.
    let err = fails(&["eval", "a + 1", "--var", &format!("a={a}"), "--out", &a]);
    assert!(err.contains("exists"), "{err}");
    ok(&["get", &a, "--out", &d.s("a.npy")]);
    let back: Array1<i64> = read_npy(d.p("a.npy")).expect("read");
    assert_eq!(back, Array1::from_iter(0..N));
}
