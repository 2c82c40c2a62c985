//! The `blz` table commands, run as a user would: create a table from a CSV file (inferred
//! types, `--schema` with nested paths), `info` (text and JSON), `get` with `--columns` to
//! standard output, to CSV and to a directory of `.npy` files, `append --csv`, `resize`,
//! `attrs`, `verify`, `compact`, and the errors a user can provoke.

mod common;

use common::{fails, json_of, ok, raw_npy, run, text, Dir};
use ndarray::{array, Array1};
use ndarray_npy::read_npy;
use serde_json::{json, Value};
use std::path::Path;

const PEOPLE: &str = "\
id,price,name,ok,score
1,2.5,\"Smith, John\",true,3.5
2,3.25,\"say \"\"hi\"\"\",false,
3,-0.001,plain,true,7.25
4,100.0,,false,0.5
";

/// The cells of the named columns of a CSV file, header included.
fn csv_columns(path: &Path, names: &[&str]) -> Vec<Vec<String>> {
    let mut r = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_path(path)
        .expect("csv");
    let recs: Vec<csv::StringRecord> = r.records().map(|x| x.expect("record")).collect();
    let idx: Vec<usize> = names
        .iter()
        .map(|n| recs[0].iter().position(|h| h == *n).expect("column"))
        .collect();
    recs.iter()
        .map(|rec| idx.iter().map(|&i| rec[i].to_string()).collect())
        .collect()
}

fn field_types(info: &Value) -> Vec<(String, String)> {
    info["fields"]
        .as_array()
        .expect("fields")
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap_or("").to_string(),
                f["type"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn create_infers_types_and_round_trips_through_csv() {
    let d = Dir::new();
    let csv = d.write("people.csv", PEOPLE);
    let t = d.s("people.blz");
    let out = ok(&["create", &t, "--csv", &csv]);
    assert!(out.contains("4 rows and 5 columns"), "{out}");

    let info = json_of(&["info", &t, "--json"]);
    assert_eq!(info["kind"], "table");
    assert_eq!(info["rows"], 4);
    let types = field_types(&info);
    let want = [
        ("id", "int64"),
        ("price", "float64"),
        ("name", "varstr"),
        ("ok", "bool"),
        ("score", "float64"),
    ];
    assert_eq!(
        types,
        want.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect::<Vec<_>>()
    );
    for f in info["fields"].as_array().expect("fields") {
        assert!(f["nbytes"].as_u64().expect("nbytes") > 0, "{f}");
        assert!(f["cbytes"].as_u64().expect("cbytes") > 0, "{f}");
        assert!(f["ratio"].as_f64().is_some(), "{f}");
    }
    assert_eq!(
        info["nbytes"],
        4 * 8 + 4 * 8 + 4 + 4 * 8 + info["fields"][2]["nbytes"].as_u64().unwrap_or(0)
            // name and score have an empty field: nullable, with a validity byte per row.
            + 2 * 4
    );

    let text_info = ok(&["info", &t]);
    for word in [
        "rows:",
        "price",
        "float64",
        "varstr",
        "ratio",
        "total",
        "attributes:",
    ] {
        assert!(text_info.contains(word), "{word}: {text_info}");
    }

    // Selected columns as aligned text.
    let shown = ok(&["get", &t, "--columns", "name,id"]);
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines.len(), 5, "{shown}");
    assert!(lines[0].starts_with("name"), "{shown}");
    assert!(lines[1].contains("Smith, John"), "{shown}");
    assert!(lines[2].contains("say \"hi\""), "{shown}");

    // JSON of a row range.
    let j = json_of(&["get", &t, "1:3", "--columns", "id,name,ok", "--json"]);
    assert_eq!(
        j,
        json!({"id": [2, 3], "name": ["say \"hi\"", "plain"], "ok": [false, true]})
    );
    let j = json_of(&["get", &t, "--rows", "3,0,-1", "--columns", "id", "--json"]);
    assert_eq!(j, json!({"id": [4, 1, 4]}));

    // CSV export equals the input for the chosen columns (NaN as an empty cell).
    let names = ["id", "name", "ok", "price", "score"];
    let out = d.s("out.csv");
    ok(&["get", &t, "--columns", &names.join(","), "--out", &out]);
    assert_eq!(
        csv_columns(&d.p("out.csv"), &names),
        csv_columns(&d.p("people.csv"), &names)
    );
}

#[test]
fn schema_with_nested_paths_and_npy_export() {
    let d = Dir::new();
    let csv = d.write(
        "pts.csv",
        "pos/x,id,pos/y,tag,label\n1.5,1,2,ab,one\n2.5,2,3,cd,two\n-4,3,5,ef,three\n",
    );
    let t = d.s("pts.blz");
    ok(&[
        "create",
        &t,
        "--csv",
        &csv,
        "--schema",
        "pos/x:float32,id:int32,tag:S8,pos/y:float64",
        "--codec",
        "zstd",
        "--clevel",
        "3",
    ]);
    let info = json_of(&["info", &t, "--json"]);
    let types = field_types(&info);
    let want = [
        ("pos/x", "float32"),
        ("pos/y", "float64"),
        ("id", "int32"),
        ("tag", "S8"),
        ("label", "varstr"),
    ];
    assert_eq!(
        types,
        want.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect::<Vec<_>>()
    );
    assert!(info["fields"]
        .as_array()
        .expect("fields")
        .iter()
        .all(|f| f["codec"] == "zstd" && f["clevel"] == 3));

    let dir = d.s("arrays");
    ok(&["get", &t, "--columns", "pos/x,id,pos/y", "--out-dir", &dir]);
    let x: Array1<f32> = read_npy(d.p("arrays/pos.x.npy")).expect("pos.x.npy");
    let y: Array1<f64> = read_npy(d.p("arrays/pos.y.npy")).expect("pos.y.npy");
    let id: Array1<i32> = read_npy(d.p("arrays/id.npy")).expect("id.npy");
    assert_eq!(x, array![1.5f32, 2.5, -4.0]);
    assert_eq!(y, array![2.0, 3.0, 5.0]);
    assert_eq!(id, array![1, 2, 3]);
    // A selection of rows, reversed.
    let dir2 = d.s("rev");
    ok(&["get", &t, "::-1", "--columns", "id", "--out-dir", &dir2]);
    let id: Array1<i32> = read_npy(d.p("rev/id.npy")).expect("id.npy");
    assert_eq!(id, array![3, 2, 1]);
    // Variable-length columns have no .npy form.
    let err = fails(&["get", &t, "--columns", "label", "--out-dir", &d.s("v")]);
    assert!(err.contains("variable-length"), "{err}");
    assert!(!d.p("v/label.npy").exists());
}

#[test]
fn append_with_reordered_header() {
    let d = Dir::new();
    let csv = d.write("people.csv", PEOPLE);
    let t = d.s("people.blz");
    ok(&["create", &t, "--csv", &csv]);
    let more = d.write(
        "more.csv",
        "score,ok,name,price,id\n9,false,\"new, one\",1.0,5\n,true,x,2,6\n",
    );
    let out = ok(&["append", &t, "--csv", &more]);
    assert!(out.contains("4 -> 6 rows"), "{out}");
    let j = json_of(&["get", &t, "4:", "--json"]);
    assert_eq!(j["id"], json!([5, 6]));
    assert_eq!(j["name"], json!(["new, one", "x"]));
    assert_eq!(j["ok"], json!([false, true]));
    assert_eq!(j["price"], json!([1.0, 2.0]));
    assert_eq!(j["score"][0], json!(9.0));
    assert_eq!(ok(&["verify", &t]).lines().count(), 1);
}

#[test]
fn bad_csv_is_refused_and_nothing_is_half_written() {
    let d = Dir::new();
    let csv = d.write("people.csv", PEOPLE);
    let t = d.s("people.blz");
    ok(&["create", &t, "--csv", &csv]);
    let rows = |t: &str| json_of(&["info", t, "--json"])["rows"].clone();

    // Unknown column in append.
    let bad = d.write(
        "unknown.csv",
        "id,price,name,ok,score,extra\n5,1,a,true,1,0\n",
    );
    let err = fails(&["append", &t, "--csv", &bad]);
    assert!(err.contains("no column \"extra\""), "{err}");
    // Missing column.
    let bad = d.write("missing.csv", "id,price,name,ok\n5,1,a,true\n");
    let err = fails(&["append", &t, "--csv", &bad]);
    assert!(err.contains("score"), "{err}");
    // A number that does not parse, after a good row: nothing is appended.
    let bad = d.write(
        "nan.csv",
        "id,price,name,ok,score\n5,1,a,true,1\n6,abc,b,true,2\n",
    );
    let err = fails(&["append", &t, "--csv", &bad]);
    assert!(err.contains("line 3") && err.contains("price"), "{err}");
    assert!(err.contains("\"abc\" is not a number"), "{err}");
    assert_eq!(rows(&t), 4);

    // A bad name in the header of a new table.
    let bad = d.write("badname.csv", "a/../b,c\n1,2\n");
    let err = fails(&["create", &d.s("bad.blz"), "--csv", &bad]);
    assert!(err.contains("a/../b"), "{err}");
    assert!(!d.p("bad.blz").exists());
    // A duplicate name.
    let bad = d.write("dup.csv", "a,b,a\n1,2,3\n");
    let err = fails(&["create", &d.s("dup.blz"), "--csv", &bad]);
    assert!(err.contains("twice"), "{err}");
    assert!(!d.p("dup.blz").exists());
    // A value that does not fit the --schema type.
    let bad = d.write("fit.csv", "a,b\n1,2\n300,3\n");
    let err = fails(&[
        "create",
        &d.s("fit.blz"),
        "--csv",
        &bad,
        "--schema",
        "a:int8",
    ]);
    assert!(err.contains("line 3") && err.contains("int8"), "{err}");
    assert!(!d.p("fit.blz").exists());
    // A --schema column that is not in the file.
    let err = fails(&[
        "create",
        &d.s("s.blz"),
        "--csv",
        &csv,
        "--schema",
        "nope:int8",
    ]);
    assert!(err.contains("nope"), "{err}");
    assert!(!d.p("s.blz").exists());
}

#[test]
fn resize_attrs_and_verify_a_table() {
    let d = Dir::new();
    let csv = d.write("people.csv", PEOPLE);
    let t = d.s("people.blz");
    ok(&["create", &t, "--csv", &csv, "--chunkshape", "2"]);
    ok(&["resize", &t, "6"]);
    let j = json_of(&["get", &t, "4:", "--columns", "id,name", "--json"]);
    // Grown rows hold the fill value, or null in a nullable column (name has an empty
    // field in the file).
    assert_eq!(j, json!({"id": [0, 0], "name": [null, null]}));
    ok(&["resize", &t, "4"]);
    ok(&["attrs", &t, "--set", "units=\"EUR\""]);
    assert_eq!(json_of(&["attrs", &t]), json!({"units": "EUR"}));
    assert_eq!(
        json_of(&["info", &t, "--json"])["attributes"],
        json!({"units": "EUR"})
    );

    let out = ok(&["verify", &t]);
    assert!(out.contains("all intact"), "{out}");
    // Flip a byte inside the price column's superchunk file.
    let file = d.p("people.blz/data/price/__1__.bin");
    let mut b = std::fs::read(&file).expect("read");
    let n = b.len();
    b[n - 20] ^= 0xff;
    std::fs::write(&file, b).expect("write");
    let o = run(&["verify", &t]);
    assert_eq!(o.status.code(), Some(1));
    let out = text(&o.stdout);
    assert!(
        out.contains("corrupt:") && out.contains("data/price/__1__.bin"),
        "{out}"
    );
    assert!(text(&o.stderr).contains("corrupt"), "{}", text(&o.stderr));
}

#[test]
fn array_from_one_csv_column_still_works() {
    let d = Dir::new();
    let csv = d.write("people.csv", PEOPLE);
    let a = d.s("ids.blz");
    ok(&["create", &a, "--csv", &csv, "--column", "id"]);
    assert_eq!(json_of(&["get", &a, "--json"]), json!([1, 2, 3, 4]));
    let err = fails(&["get", &a, "--columns", "id"]);
    assert!(err.contains("tables"), "{err}");
}

#[test]
fn compact_a_table() {
    let d = Dir::new();
    let csv = d.write("people.csv", PEOPLE);
    let t = d.s("people.blz");
    ok(&["create", &t, "--csv", &csv, "--chunkshape", "2"]);
    // Rewritten chunks of another size move to the end of their files and leave dead bytes.
    {
        let mut tb = blz::table::Table::open_rw(d.p("people.blz")).expect("open");
        tb.write_rows(
            0,
            &[
                (
                    "name",
                    blz::table::Values::strings(&["a much longer name than John's", "x"]),
                ),
                (
                    "id",
                    blz::table::Values::from_slice(&[7_000_000_000i64, -3]),
                ),
            ],
        )
        .expect("write");
    }
    let before = ok(&["get", &t, "--json"]);
    let out = ok(&["compact", &t]);
    assert!(out.contains("compacted") && out.contains("saved"), "{out}");
    let saved: u64 = out
        .split("saved ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert!(saved > 0, "{out}");
    assert_eq!(ok(&["get", &t, "--json"]), before);
    assert!(ok(&["verify", &t]).contains("all intact"));
    // Nothing is left to save the second time.
    assert!(ok(&["compact", &t]).contains("saved 0 bytes"));
    let err = fails(&["compact", &d.s("missing.blz")]);
    assert!(err.contains("missing.blz"), "{err}");
}

/// Records as numpy writes them: `[('id', '<i4'), ('pos', [('x', '>f8'), ('y', '<f4')]),
/// ('', '|V2'), ('tag', 'S3'), ('z', '<c16')]`, 33 bytes each with 2 of padding, rows `from..to`.
fn records(from: i32, to: i32) -> Vec<u8> {
    let mut b = Vec::new();
    for i in from..to {
        b.extend_from_slice(&i.to_le_bytes());
        b.extend_from_slice(&(f64::from(i) * 0.5).to_be_bytes());
        b.extend_from_slice(&(-(i as f32)).to_le_bytes());
        b.extend_from_slice(&[0xAA, 0xBB]);
        b.extend_from_slice(format!("t{:02}", i % 100).as_bytes());
        b.extend_from_slice(&f64::from(i).to_le_bytes());
        b.extend_from_slice(&(-f64::from(i)).to_le_bytes());
    }
    b
}

const RECORD_DESCR: &str =
    "[('id', '<i4'), ('pos', [('x', '>f8'), ('y', '<f4')]), ('', '|V2'), ('tag', 'S3'), ('z', '<c16')]";

#[test]
fn records_npy_makes_a_table_and_appends() {
    let d = Dir::new();
    let n = 50_000;
    std::fs::write(
        d.p("r.npy"),
        raw_npy(RECORD_DESCR, &format!("({n},)"), &records(0, n)),
    )
    .expect("write");
    let t = d.s("r.blz");
    ok(&["create", &t, "--npy", &d.s("r.npy"), "--chunkshape", "1000"]);
    let info = json_of(&["info", &t, "--json"]);
    let want = [
        ("id", "int32"),
        ("pos/x", "float64"),
        ("pos/y", "float32"),
        ("tag", "S3"),
        ("z", "complex128"),
    ];
    assert_eq!(
        field_types(&info),
        want.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect::<Vec<_>>()
    );
    // Append a partial chunk of records, then read rows across the boundary.
    std::fs::write(
        d.p("more.npy"),
        raw_npy(RECORD_DESCR, "(7,)", &records(n, n + 7)),
    )
    .expect("write");
    ok(&["append", &t, "--npy", &d.s("more.npy")]);
    ok(&["verify", &t]);
    let dir = d.s("out");
    ok(&["get", &t, "49990:", "--out-dir", &dir]);
    let id: Array1<i32> = read_npy(d.p("out/id.npy")).expect("id");
    let x: Array1<f64> = read_npy(d.p("out/pos.x.npy")).expect("pos.x");
    let y: Array1<f32> = read_npy(d.p("out/pos.y.npy")).expect("pos.y");
    let z: Array1<num_complex::Complex64> = read_npy(d.p("out/z.npy")).expect("z");
    let rows: Vec<i32> = (49_990..n + 7).collect();
    assert_eq!(id.to_vec(), rows);
    assert_eq!(
        x.to_vec(),
        rows.iter().map(|&i| f64::from(i) * 0.5).collect::<Vec<_>>()
    );
    assert_eq!(
        y.to_vec(),
        rows.iter().map(|&i| -(i as f32)).collect::<Vec<_>>()
    );
    let zs: Vec<_> = rows
        .iter()
        .map(|&i| num_complex::Complex64::new(f64::from(i), -f64::from(i)))
        .collect();
    assert_eq!(z.to_vec(), zs);
    // Short runs of rows in the middle of chunks (decoded through c-blosc's getitem).
    let s = ok(&[
        "get",
        &t,
        "--rows",
        "1234,49999,50006",
        "--columns",
        "tag,z",
    ]);
    let lines: Vec<String> = s
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        lines,
        [
            "t34 1234.0-1234.0j",
            "t99 49999.0-49999.0j",
            "t06 50006.0-50006.0j"
        ],
        "{s}"
    );
    // Back out as records (numpy's np.load reads them as a structured array) and in again.
    let back = d.s("back.npy");
    ok(&["get", &t, "::-9", "--out", &back]);
    ok(&["create", &d.s("again.blz"), "--npy", &back]);
    let json = |p: &str, sel: &str| ok(&["get", p, sel, "--json", "--all"]);
    assert_eq!(json(&d.s("again.blz"), ""), json(&t, "::-9"));
    let err = fails(&["get", &t, "--columns", "nope", "--out", &back]);
    assert!(err.contains("no column"), "{err}");
    // Columns scan on their own; a scan that needs numbers names the column it refuses.
    let sum: i64 = (0..i64::from(n) + 7).sum();
    let out = ok(&["scan", &t, "--column", "id", "--op", "sum"]);
    assert!(out.contains(&format!("sum: {sum}")), "{out}");
    let err = fails(&["scan", &t, "--column", "z", "--op", "sum"]);
    assert!(err.contains("r.blz/z holds complex128"), "{err}");
    let s = ok(&["get", &t, "1233:1235", "--columns", "id,tag,z"]);
    assert!(s.contains("1233  t33") && s.contains("1234  t34"), "{s}");
    assert!(s.contains("1234.0-1234.0j"), "{s}");
}

#[test]
fn records_npy_that_do_not_fit_are_refused() {
    let d = Dir::new();
    std::fs::write(d.p("r.npy"), raw_npy(RECORD_DESCR, "(4,)", &records(0, 4))).expect("write");
    let t = d.s("r.blz");
    ok(&["create", &t, "--npy", &d.s("r.npy")]);
    // Other fields, or the same names with other types.
    std::fs::write(d.p("other.npy"), raw_npy("[('q', '<f8')]", "(1,)", &[0; 8])).expect("w");
    let err = fails(&["append", &t, "--npy", &d.s("other.npy")]);
    assert!(
        err.contains("are not the columns of") && err.contains("q: float64"),
        "{err}"
    );
    let narrow = RECORD_DESCR.replace("'<i4'", "'<i2'");
    let mut bytes = records(0, 1);
    bytes.drain(2..4);
    std::fs::write(d.p("narrow.npy"), raw_npy(&narrow, "(1,)", &bytes)).expect("w");
    let err = fails(&["append", &t, "--npy", &d.s("narrow.npy")]);
    assert!(err.contains("id: int16"), "{err}");
    // A plain array is not records.
    std::fs::write(d.p("plain.npy"), raw_npy("<f8", "(1,)", &[0; 8])).expect("w");
    let err = fails(&["append", &t, "--npy", &d.s("plain.npy")]);
    assert!(err.contains("a table appends records"), "{err}");
    assert_eq!(ok(&["get", &t, "--columns", "id"]).lines().count(), 5);
    // Records to an array, sub-arrays, unsupported field types, truncated data.
    ok(&["create", &d.s("a.blz"), "--arange", "10"]);
    let err = fails(&["append", &d.s("a.blz"), "--npy", &d.s("r.npy")]);
    assert!(
        err.contains("structured (record) dtypes make tables"),
        "{err}"
    );
    std::fs::write(
        d.p("sub.npy"),
        raw_npy("[('v', '<f8', (3,))]", "(1,)", &[0; 24]),
    )
    .expect("w");
    let err = fails(&["create", &d.s("s.blz"), "--npy", &d.s("sub.npy")]);
    assert!(err.contains("subarray of shape (3)"), "{err}");
    std::fs::write(d.p("m.npy"), raw_npy("[('t', '<M8[2s]')]", "(1,)", &[0; 8])).expect("w");
    let err = fails(&["create", &d.s("m.blz"), "--npy", &d.s("m.npy")]);
    assert!(
        err.contains("field \"t\"") && err.contains("multiples"),
        "{err}"
    );
    std::fs::write(
        d.p("short.npy"),
        raw_npy(RECORD_DESCR, "(9,)", &records(0, 8)),
    )
    .expect("w");
    let err = fails(&["create", &d.s("short.blz"), "--npy", &d.s("short.npy")]);
    assert!(err.contains("truncated"), "{err}");
    for bad in ["s.blz", "m.blz", "short.blz"] {
        assert!(!d.p(bad).exists(), "{bad} was left behind");
    }
}

/// numpy writes format 1.0 and 2.0 headers in latin-1, field names included: a record
/// field named `été` is the bytes `\xe9t\xe9` there, and becomes column `été`.
#[test]
fn records_with_a_latin1_field_name() {
    let d = Dir::new();
    let dict = b"{'descr': [('\xe9t\xe9', '<i4')], 'fortran_order': False, 'shape': (3,), }";
    let pad = (64 - (10 + dict.len() + 1) % 64) % 64;
    let mut header = dict.to_vec();
    header.extend(std::iter::repeat_n(b' ', pad));
    header.push(b'\n');
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    npy.extend_from_slice(&(header.len() as u16).to_le_bytes());
    npy.extend_from_slice(&header);
    for v in [7i32, 8, 9] {
        npy.extend_from_slice(&v.to_le_bytes());
    }
    let f = d.p("latin1.npy");
    std::fs::write(&f, npy).unwrap();
    let t = d.s("t.blz");
    let out = ok(&["create", &t, "--npy", f.to_str().unwrap()]);
    assert!(out.contains("été"), "{out}");
    let got = ok(&["get", &t, "--columns", "été"]);
    assert!(got.contains('7') && got.contains('9'), "{got}");
}

/// Issue 21: `blz append --help` described table appends as separately committed batches;
/// an append is one transaction.
#[test]
fn append_help_says_one_transaction() {
    let help = ok(&["append", "--help"]);
    assert!(help.contains("one transaction"), "{help}");
    assert!(!help.contains("batches already committed"), "{help}");
    assert!(!help.contains("each committed"), "{help}");
}

#[test]
fn csv_nulls_dates_and_zones() {
    let d = Dir::new();
    let csv = d.write(
        "d.csv",
        "id,day,at,note\n1,2020-01-31,2020-01-31T10:00:00Z,a\n2,,,\n3,1999-12-31,2020-02-01T11:00:00+01:00,c\n",
    );
    let t = d.s("d.blz");
    let out = ok(&["create", &t, "--csv", &csv]);
    assert!(
        out.contains("day: datetime64[D] (nullable)")
            && out.contains("at: datetime64[s, UTC] (nullable)")
            && out.contains("id: int64\n"),
        "{out}"
    );
    let info = json_of(&["info", &t, "--json"]);
    assert_eq!(info["fields"][2]["timezone"], "UTC");
    assert_eq!(info["fields"][1]["timezone"], Value::Null);
    assert_eq!(info["fields"][1]["nullable"], true);
    assert_eq!(info["fields"][0]["nullable"], false);
    let text = ok(&["info", &t]);
    assert!(text.contains("datetime64[s, UTC]"), "{text}");
    // Nulls go out as empty fields again.
    let j = json_of(&["get", &t, "--columns", "day,note", "--json"]);
    assert_eq!(j["note"], json!(["a", null, "c"]), "{j}");
    assert_eq!(j["day"], json!(["2020-01-31", null, "1999-12-31"]), "{j}");
    let shown = ok(&["get", &t, "--columns", "id,at"]);
    assert!(
        shown.lines().nth(2).is_some_and(|l| l.contains("null")),
        "{shown}"
    );
    let back = d.s("back.csv");
    ok(&["get", &t, "--out", &back]);
    assert_eq!(
        std::fs::read_to_string(d.p("back.csv"))
            .unwrap()
            .lines()
            .nth(2),
        Some("2,,,")
    );
    // --no-dates: strings.
    let s = d.s("s.blz");
    ok(&["create", &s, "--csv", &csv, "--no-dates"]);
    let types = field_types(&json_of(&["info", &s, "--json"]));
    assert_eq!(types[1].1, "varstr");
    assert_eq!(types[2].1, "varstr");
    // A declared column that is not nullable refuses an empty field, naming line and column.
    let n = d.s("n.blz");
    let err = fails(&[
        "create",
        &n,
        "--csv",
        &csv,
        "--schema",
        "day:datetime64[D] not null",
    ]);
    assert!(err.contains("line 3, column day"), "{err}");
    assert!(!d.p("n.blz").exists());
    let z = d.s("z.blz");
    ok(&[
        "create",
        &z,
        "--csv",
        &csv,
        "--schema",
        "at:datetime64[ms, Europe/Paris]",
    ]);
    assert!(ok(&["info", &z]).contains("datetime64[ms, Europe/Paris]"));
}
