//! `blz scan --axis`: reductions along axes through `blz::scan::reduce_axis`, and the
//! reductions numpy has that `blz scan` gained with it (var, std, argmin, argmax, any, all,
//! count_nonzero).

mod common;

use common::{fails, json_of, ok, Dir};
use ndarray::Array2;
use ndarray_npy::write_npy;
use serde_json::json;

fn matrix(d: &Dir) -> String {
    // 5 x 4, values r * 10 + c, chunks of 2 x 3.
    let a = Array2::from_shape_fn((5, 4), |(r, c)| (r * 10 + c) as i32);
    let npy = d.s("m.npy");
    write_npy(&npy, &a).unwrap();
    let p = d.s("m.blz");
    ok(&["create", &p, "--npy", &npy, "--chunkshape", "2x3"]);
    p
}

#[test]
fn sums_along_each_axis() {
    let d = Dir::new();
    let p = matrix(&d);
    let j = json_of(&["scan", &p, "--op", "sum", "--axis", "0", "--json"]);
    assert_eq!(j["dtype"], json!("int64"));
    assert_eq!(j["shape"], json!([4]));
    assert_eq!(j["values"], json!([100, 105, 110, 115]));
    let j = json_of(&["scan", &p, "--op", "argmax", "--axis", "1", "--json"]);
    assert_eq!(j["values"], json!([3, 3, 3, 3, 3]));
    let j = json_of(&[
        "scan", &p, "--op", "max", "--axis", "0", "--axis", "1", "--json",
    ]);
    assert_eq!(j["shape"], json!([]));
    assert_eq!(j["values"], json!([43]));
    let out = ok(&["scan", &p, "--op", "count-nonzero", "--axis", "1"]);
    assert!(out.contains("[3, 4, 4, 4, 4]"), "{out}");
}

#[test]
fn new_reductions_without_an_axis_keep_the_old_output() {
    let d = Dir::new();
    let p = matrix(&d);
    let out = ok(&["scan", &p, "--op", "argmin"]);
    assert!(out.starts_with("argmin: 0\n"), "{out}");
    let j = json_of(&["scan", &p, "--op", "var", "--json"]);
    let xs: Vec<f64> = (0..5)
        .flat_map(|r| (0..4).map(move |c| f64::from(r * 10 + c)))
        .collect();
    let m = xs.iter().sum::<f64>() / 20.0;
    let var = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / 20.0;
    assert!((j["value"].as_f64().unwrap() - var).abs() < 1e-9, "{j}");
    let err = fails(&["scan", &p, "--op", "sum", "--axis", "2"]);
    assert!(err.contains("axis 2 is out of bounds"), "{err}");
}
