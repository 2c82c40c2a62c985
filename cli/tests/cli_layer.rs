//! `blz layer build/seek/contains/info/verify` end to end.

mod common;

use common::{ok, run};
use std::path::Path;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn build_seek_contains_info_verify() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("in.csv");
    let mut text = String::from("user,item,w\n");
    for u in 0..300 {
        for i in 0..(u % 4 + 1) {
            text.push_str(&format!("{},item-{i:02},{}\n", u * 3, u + i));
        }
    }
    std::fs::write(&csv, text).unwrap();
    let out = dir.path().join("l.blz");
    let msg = ok(&[
        "layer",
        "build",
        "--columns",
        "user:int64,item:varstr",
        "--weight",
        "w:int64",
        "--header",
        "--chunklen",
        "16",
        s(&csv),
        s(&out),
    ]);
    assert!(msg.contains("column rows 300 / 750"), "{msg}");

    let o = ok(&["layer", "seek", s(&out), "10"]);
    assert!(o.starts_with("12 (row 4 "), "{o}");
    let o = ok(&["layer", "seek", s(&out), "--le", "10", "--json"]);
    let j: serde_json::Value = serde_json::from_str(&o).unwrap();
    assert_eq!(j["value"], 9);
    assert_eq!(j["children"], 4);
    assert_eq!(j["reads"]["data"], 1);
    let o = ok(&[
        "layer",
        "seek",
        s(&out),
        "--column",
        "item",
        "--in",
        "9",
        "item-02",
    ]);
    assert!(o.contains("item-02") && o.contains("weight 5"), "{o}");
    let o = ok(&["layer", "seek", s(&out), "--in", "9", "item-9"]);
    assert!(o.starts_with("none"), "{o}");

    let o = ok(&["layer", "contains", s(&out), "897"]);
    assert!(o.starts_with("yes"), "{o}");
    let o = ok(&["layer", "contains", s(&out), "898"]);
    assert!(o.starts_with("no"), "{o}");
    assert!(
        o.contains("0 data chunks") || o.contains("false positive"),
        "{o}"
    );
    let o = ok(&["layer", "contains", s(&out), "--in", "3", "item-01"]);
    assert!(o.starts_with("yes"), "{o}");

    let o = ok(&["layer", "info", s(&out)]);
    assert!(o.contains("column 2 item (varstr): 750 rows"), "{o}");
    let o = ok(&["info", s(&out), "--json"]);
    assert!(o.contains("\"kind\": \"layer\""), "{o}");
    let o = ok(&["layer", "verify", s(&out)]);
    assert!(o.contains("ok (300 / 750 rows)"), "{o}");
    // The general command understands layer datasets too.
    let o = ok(&["verify", s(&out)]);
    assert!(o.contains("ok (300 / 750 rows)"), "{o}");

    // Corrupt a data chunk: verify fails with a checksum error.
    let f = out.join("data/item/__1__.bin");
    let mut b = std::fs::read(&f).unwrap();
    let n = b.len();
    b[n - 20] ^= 0xff;
    std::fs::write(&f, b).unwrap();
    let o = run(&["layer", "verify", s(&out)]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("checksum"));
    let o = run(&["verify", s(&out)]);
    assert!(!o.status.success());
}

#[test]
fn unsorted_csv_fails_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("in.csv");
    std::fs::write(&csv, "1,a\n1,c\n1,b\n").unwrap();
    let out = dir.path().join("l.blz");
    let o = run(&[
        "layer",
        "build",
        "--columns",
        "k:int32,v:varstr",
        s(&csv),
        s(&out),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("record 3") && err.contains("unsorted"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn a_weight_named_as_a_key_column_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("in.csv");
    std::fs::write(&csv, "1,2\n").unwrap();
    let out = dir.path().join("l.blz");
    let o = run(&[
        "layer",
        "build",
        "--columns",
        "k:int64",
        "--weight",
        "k:int64",
        s(&csv),
        s(&out),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("\"k\"") && err.contains("weight"), "{err}");
    assert!(!out.exists());
}

#[test]
fn negative_values_are_values_not_options() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("in.csv");
    std::fs::write(&csv, "-5,a,1.5\n-5,b,-2.5\n3,c,0\n").unwrap();
    let out = dir.path().join("l.blz");
    ok(&[
        "layer",
        "build",
        "--columns",
        "k:int64,v:varstr",
        "--weight",
        "w:float64",
        s(&csv),
        s(&out),
    ]);
    let o = ok(&["layer", "seek", s(&out), "-5"]);
    assert!(o.starts_with("-5 (row 0 "), "{o}");
    let o = ok(&["layer", "seek", s(&out), "--le", "-4", "--json"]);
    let j: serde_json::Value = serde_json::from_str(&o).unwrap();
    assert_eq!(j["value"], -5);
    let o = ok(&["layer", "seek", s(&out), "-1000"]);
    assert!(o.starts_with("-5 "), "{o}");
    let o = ok(&["layer", "seek", s(&out), "--in", "-5", "b", "--json"]);
    let j: serde_json::Value = serde_json::from_str(&o).unwrap();
    assert_eq!(j["weight"], -2.5);
    let o = ok(&["layer", "contains", s(&out), "-5"]);
    assert!(o.starts_with("yes"), "{o}");
    let o = ok(&["layer", "contains", s(&out), "-6"]);
    assert!(o.starts_with("no"), "{o}");
    let o = ok(&["layer", "contains", s(&out), "--in", "-5", "a"]);
    assert!(o.starts_with("yes"), "{o}");
    // Options still parse after a negative value.
    let o = ok(&["layer", "seek", s(&out), "-5", "--json"]);
    assert!(o.starts_with('{'), "{o}");
}

/// `blz layer merge`: weights of equal paths add up, zero sums and emptied keys go, the
/// result seeks and verifies; inputs that differ and an existing output are refused.
#[test]
fn merge_adds_weights_and_drops_zeros() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let build = |name: &str, text: &str, cols: &str| {
        std::fs::write(d.join(format!("{name}.csv")), text).unwrap();
        ok(&[
            "layer",
            "build",
            "--columns",
            cols,
            "--weight",
            "w:int64",
            s(&d.join(format!("{name}.csv"))),
            s(&d.join(name)),
        ]);
    };
    build("a", "1,x,2\n1,y,1\n2,x,5\n", "k:int64,v:varstr");
    build("b", "1,x,-2\n1,y,-1\n2,x,1\n3,z,4\n", "k:int64,v:varstr");
    let out = d.join("o.blz");
    let msg = ok(&[
        "layer",
        "merge",
        s(&d.join("a")),
        s(&d.join("b")),
        "-o",
        s(&out),
    ]);
    assert!(
        msg.contains("2 paths from 7 read in 2 dataset(s), 2 cancelled (2 / 2 rows)"),
        "{msg}"
    );
    let l = blz::layer::Layer::open(&out).unwrap();
    assert!(!l.contains(&blz::layer::Value::Int(1)).unwrap());
    let o = ok(&["layer", "seek", s(&out), "1"]);
    assert!(o.starts_with("2 (row 0 "), "{o}");
    assert!(ok(&["layer", "verify", s(&out)]).contains("ok (2 / 2 rows)"));
    // An existing output without --overwrite, and inputs with other columns.
    let e = run(&["layer", "merge", s(&d.join("a")), "-o", s(&out)]);
    assert!(!e.status.success());
    build("c", "1,2,3\n", "k:int64,v:int64");
    let e = run(&[
        "layer",
        "merge",
        s(&d.join("a")),
        s(&d.join("c")),
        "-o",
        s(&d.join("p.blz")),
    ]);
    assert!(!e.status.success());
    assert!(String::from_utf8_lossy(&e.stderr).contains("cannot be merged"));
    assert!(!d.join("p.blz").exists());
    // No inputs: clap's usage error.
    assert!(!run(&["layer", "merge", "-o", s(&d.join("p.blz"))])
        .status
        .success());
}

#[test]
fn filter_kinds_from_the_command_line_and_in_info() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("in.csv");
    let text: String = (0..20_000).map(|k| format!("{k},k{}\n", k % 3)).collect();
    std::fs::write(&csv, text).unwrap();
    let build = |filter: &str, name: &str| {
        let out = dir.path().join(name);
        let o = run(&[
            "layer",
            "build",
            "--columns",
            "k:int64,s:varstr",
            "--filter",
            filter,
            s(&csv),
            s(&out),
        ]);
        (out, o)
    };
    let (auto, o) = build("auto", "auto.blz");
    assert!(o.status.success(), "{o:?}");
    let info = ok(&["layer", "info", s(&auto)]);
    assert!(
        info.contains("filter auto: 1 exact chunks,"),
        "the int64 column's one block is exact: {info}"
    );
    // The varstr column under auto is Bloom.
    assert!(info.contains("filter bloom: 22 bits/value"), "{info}");
    let j: serde_json::Value =
        serde_json::from_str(&ok(&["layer", "info", s(&auto), "--json"])).unwrap();
    assert_eq!(j["columns"][0]["filter"]["kind"], "auto");
    assert_eq!(j["columns"][0]["filter"]["exact_chunks"], 1);
    assert!(j["columns"][0]["filter"]["bytes"].as_u64().unwrap() < 200);
    // Present and absent keys, answered without a data chunk.
    let o = ok(&["layer", "contains", s(&auto), "19999"]);
    assert!(o.starts_with("yes") && o.contains("0 data chunks"), "{o}");
    let o = ok(&["layer", "contains", s(&auto), "20000"]);
    assert!(o.starts_with("no ") && o.contains("0 data chunks"), "{o}");

    let (bloom, o) = build("bloom", "bloom.blz");
    assert!(o.status.success(), "{o:?}");
    let j: serde_json::Value =
        serde_json::from_str(&ok(&["layer", "info", s(&bloom), "--json"])).unwrap();
    assert_eq!(j["columns"][0]["filter"]["kind"], "bloom");
    assert_eq!(j["columns"][0]["filter"]["exact_chunks"], 0);
    assert!(j["columns"][0]["filter"]["bytes"].as_u64().unwrap() > 50_000);
    let o = ok(&["layer", "contains", s(&bloom), "19999"]);
    assert!(o.starts_with("yes") && o.contains("1 data chunks"), "{o}");

    let (off, o) = build("off", "off.blz");
    assert!(o.status.success(), "{o:?}");
    assert!(ok(&["layer", "info", s(&off)]).contains("filter off"));

    // Exact on a varstr column is refused, naming the column; nothing is left behind.
    let (bad, o) = build("exact", "exact.blz");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("column s: an exact filter needs an integer column"),
        "{err}"
    );
    assert!(!bad.exists());
    let o = run(&[
        "layer",
        "build",
        "--columns",
        "k:int64",
        "--filter",
        "exactly",
        s(&csv),
        s(&bad),
    ]);
    assert!(!o.status.success());
}

#[test]
fn build_sorts_unsorted_input() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Rows in no order, each (user, item) path several times, some weights cancelling.
    let mut text = String::new();
    let mut sums = std::collections::BTreeMap::new();
    for i in 0..3000i64 {
        let (u, item) = ((i * 37) % 101, (i * 11) % 7);
        let w = if i % 5 == 0 { -2 } else { 1 };
        text.push_str(&format!("{u},it{item},{w}\n"));
        *sums.entry((u, format!("it{item}"))).or_insert(0i64) += w;
    }
    std::fs::write(d.join("in.csv"), &text).unwrap();
    let out = d.join("s.blz");
    let args = |extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = [
            "layer",
            "build",
            "--columns",
            "user:int64,item:varstr",
            "--weight",
            "w:int64",
        ]
        .iter()
        .map(|x| x.to_string())
        .collect();
        a.extend(extra.iter().map(|x| x.to_string()));
        a.push(s(&d.join("in.csv")).to_string());
        a.push(s(&out).to_string());
        a
    };
    let run_args = |extra: &[&str]| {
        let a = args(extra);
        let r: Vec<&str> = a.iter().map(String::as_str).collect();
        run(&r)
    };
    // Without --sort the input is refused, and --sort-memory needs --sort.
    let e = run_args(&[]);
    assert!(!e.status.success());
    assert!(String::from_utf8_lossy(&e.stderr).contains("unsorted input"));
    assert!(!run_args(&["--sort-memory", "1K"]).status.success());
    assert!(!run_args(&["--sort", "--sort-memory", "lots"])
        .status
        .success());
    assert!(!out.exists());
    let o = run_args(&["--sort", "--sort-memory", "16K"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let msg = String::from_utf8_lossy(&o.stdout);
    assert!(msg.contains("3000 input rows"), "{msg}");
    let runs: u64 = msg
        .split(", ")
        .find_map(|p| p.strip_suffix(" sorted runs\n"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{msg}"));
    assert!(runs > 2, "{msg}");
    let want: Vec<(i64, String, i64)> = sums
        .into_iter()
        .filter(|(_, w)| *w != 0)
        .map(|((u, i), w)| (u, i, w))
        .collect();
    let got = user_item_paths(&out);
    assert_eq!(got, want);
    assert!(ok(&["layer", "verify", s(&out)]).contains("ok"));
    let left: Vec<_> = std::fs::read_dir(d).unwrap().collect();
    assert_eq!(left.len(), 2, "{left:?}");
    // The same input, fitting in memory: no run, the same dataset.
    std::fs::remove_dir_all(&out).unwrap();
    let o = run_args(&["--sort"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains(", 0 sorted runs"));
    assert_eq!(user_item_paths(&out), want);
}

/// The (int64, varstr) paths of a weighted two-column layer dataset, with their weights.
fn user_item_paths(path: &Path) -> Vec<(i64, String, i64)> {
    use blz::layer::Value;
    let l = blz::layer::Layer::open(path).unwrap();
    let mut got = Vec::new();
    let mut c = l.cursor();
    if !c.first() {
        return got;
    }
    loop {
        let Some(Value::Int(u)) = c.value().unwrap() else {
            panic!("not an int")
        };
        let mut ch = c.child().unwrap().unwrap();
        assert!(ch.first());
        loop {
            let (Some(Value::Str(i)), Some(Value::Int(w))) =
                (ch.value().unwrap(), ch.weight().unwrap())
            else {
                panic!("not a (string, weight) row")
            };
            got.push((u, i, w));
            if !ch.next() {
                break;
            }
        }
        if !c.next() {
            break;
        }
    }
    got
}

#[test]
fn tuple_columns_shapes_and_dump() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // An IndexedZSet (user, day) -> score with weights, in no order; a tuple column takes
    // one CSV field per leaf field; "a,b" days test quoting on the way out.
    let days = ["mon", "tue", "a,b"];
    let mut model = std::collections::BTreeMap::new();
    let mut text = String::new();
    for i in 0..400i64 {
        let (u, day, score) = ((i * 7) % 23, days[(i % 3) as usize], (i * 5) % 4);
        let w = if i % 9 == 0 { -1 } else { 1 };
        text.push_str(&format!("{u},\"{day}\",{score},{w}\n"));
        *model.entry(((u, day.to_string()), score)).or_insert(0i64) += w;
    }
    std::fs::write(d.join("in.csv"), &text).unwrap();
    let out = d.join("z.blz");
    let msg = ok(&[
        "layer",
        "build",
        "--columns",
        "k:(int64,varstr),v:float64",
        "--weight",
        "w:int64",
        "--shape",
        "indexed_zset",
        "--sort",
        "--chunklen",
        "8",
        s(&d.join("in.csv")),
        s(&out),
    ]);
    assert!(msg.contains("400 input rows"), "{msg}");
    let info = ok(&["layer", "info", s(&out)]);
    assert!(info.contains("shape: indexed_zset"), "{info}");
    assert!(info.contains("k ((int64,varstr))"), "{info}");
    assert!(d.join("z.blz/data/k/fields/1").is_dir());
    ok(&["layer", "verify", s(&out)]);

    // The dump is the model, in Rust's tuple order, as CSV that builds the same layer.
    let want: Vec<String> = model
        .iter()
        .filter(|(_, w)| **w != 0)
        .map(|(((u, day), score), w)| {
            let day = if day.contains(',') {
                format!("\"{day}\"")
            } else {
                day.clone()
            };
            format!("{u},{day},{score},{w}")
        })
        .collect();
    let dump = ok(&["layer", "dump", s(&out)]);
    assert_eq!(dump.lines().collect::<Vec<_>>(), want);
    std::fs::write(d.join("back.csv"), &dump).unwrap();
    let again = d.join("again.blz");
    ok(&[
        "layer",
        "build",
        "--columns",
        "k:(int64,varstr),v:float64",
        "--weight",
        "w:int64",
        s(&d.join("back.csv")),
        s(&again),
    ]);
    assert_eq!(ok(&["layer", "dump", s(&again)]), dump);
    let j = ok(&["layer", "dump", s(&out), "--json", "--limit", "2"]);
    let first: serde_json::Value = serde_json::from_str(j.lines().next().unwrap()).unwrap();
    assert_eq!(first[0][0], 0);
    assert_eq!(j.lines().count(), 2);

    // Seeks and membership with tuple values, as (a,b) or as JSON arrays.
    let (((u, day), _), _) = model.iter().find(|(_, w)| **w != 0).unwrap();
    let o = ok(&[
        "layer",
        "contains",
        s(&out),
        &serde_json::json!([u, day]).to_string(),
    ]);
    assert!(o.starts_with("yes"), "{o}");
    let o = ok(&["layer", "contains", s(&out), "(1, mon)"]);
    assert!(
        o.starts_with("yes")
            == model
                .iter()
                .any(|(((u, d), _), w)| *u == 1 && d == "mon" && *w != 0),
        "{o}"
    );
    let o = ok(&["layer", "contains", s(&out), "[99,\"mon\"]"]);
    assert!(o.starts_with("no"), "{o}");
    let o = ok(&["layer", "seek", s(&out), "(5,zzz)", "--json"]);
    let j: serde_json::Value = serde_json::from_str(&o).unwrap();
    assert_eq!(j["value"][0], 6);
    let o = ok(&["layer", "seek", s(&out), "--in", "(1,mon)", "--le", "2.5"]);
    assert!(
        o.starts_with('2') || o.starts_with("1") || o.starts_with("none"),
        "{o}"
    );

    // Bad types and values are errors, not panics.
    for (cols, file) in [
        ("k:(int64,varstr,v:float64", "in.csv"),
        ("k:(),v:float64", "in.csv"),
        ("k:(int64,bool),v:float64", "in.csv"),
    ] {
        let e = run(&[
            "layer",
            "build",
            "--columns",
            cols,
            "--weight",
            "w:int64",
            s(&d.join(file)),
            s(&d.join("bad.blz")),
        ]);
        assert_eq!(e.status.code(), Some(1), "{cols}");
        assert!(!d.join("bad.blz").exists());
    }
    for v in ["(1)", "(x,mon)", "[1]", "1", "(1,mon,2)"] {
        let e = run(&["layer", "contains", s(&out), v]);
        assert_eq!(e.status.code(), Some(1), "{v}");
        assert!(
            String::from_utf8_lossy(&e.stderr).starts_with("blz: "),
            "{v}"
        );
    }
    let e = run(&[
        "layer",
        "build",
        "--columns",
        "k:(int64,varstr)",
        "--weight",
        "w:int64",
        "--shape",
        "val_batch",
        s(&d.join("in.csv")),
        s(&d.join("bad.blz")),
    ]);
    assert!(String::from_utf8_lossy(&e.stderr).contains("a val_batch has 3 columns"));
}
