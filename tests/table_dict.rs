//! Dictionary-encoded string columns (`spec/table.md` §3.6): a model-based property test
//! (random append / batches / resize / write / put / reopen / compact against a
//! `Vec<Option<String>>` per column), the dictionary's limit (a typed error naming the
//! column and the value, nothing written), codes and dictionary read back, schema changes,
//! and the format (keys, directories, row counts; tables without such columns unchanged).

mod common;

use blz::table::{ColumnOptions, Field, NullableValues, Table, TableOptions, Values};
use blz::{DType, Error};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    /// Rows, a seed, and one in how many rows is null (0: none).
    Append(usize, u8, u8),
    /// Batches of rows in one transaction.
    Batches(Vec<usize>, u8),
    Resize(usize),
    /// Start, rows, seed, null every how many.
    Write(usize, usize, u8, u8),
    /// Rows by index (taken modulo the length), seed.
    Put(Vec<usize>, u8),
    Reopen,
    Compact,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0usize..30, any::<u8>(), 0u8..4).prop_map(|(n, s, k)| Op::Append(n, s, k)),
        2 => (prop::collection::vec(0usize..9, 1..4), any::<u8>()).prop_map(|(b, s)| Op::Batches(b, s)),
        1 => (0usize..60).prop_map(Op::Resize),
        3 => (0usize..60, 1usize..12, any::<u8>(), 0u8..4)
            .prop_map(|(a, n, s, k)| Op::Write(a, n, s, k)),
        1 => (prop::collection::vec(0usize..100, 0..8), any::<u8>()).prop_map(|(i, s)| Op::Put(i, s)),
        1 => Just(Op::Reopen),
        1 => Just(Op::Compact),
    ]
}

/// The model: `c`, a nullable dictionary column; `d`, a dictionary column without nulls
/// whose fill is `"zz"`; `b`, an int8 column.
#[derive(Debug, Default, Clone, PartialEq)]
struct Model {
    c: Vec<Option<String>>,
    d: Vec<String>,
    b: Vec<i8>,
}

fn null_at(k: u8, j: usize, seed: u8) -> bool {
    k != 0 && (j + seed as usize).is_multiple_of(k as usize)
}

/// A few distinct strings per seed, so that dictionaries grow slowly and codes repeat.
fn word(seed: u8, j: usize) -> String {
    let w = ["", "a", "bb", "ccc", "zz", "é", "a b"];
    format!(
        "{}{}",
        w[(seed as usize + j) % w.len()],
        (seed % 5) as usize * (j % 2)
    )
}

fn gen(n: usize, seed: u8, k: u8) -> Model {
    Model {
        c: (0..n)
            .map(|j| (!null_at(k, j, seed)).then(|| word(seed, j)))
            .collect(),
        d: (0..n).map(|j| word(seed.wrapping_add(3), j * 2)).collect(),
        b: (0..n).map(|j| (seed as i8).wrapping_add(j as i8)).collect(),
    }
}

fn payload(m: &Model) -> Vec<(&'static str, NullableValues)> {
    let c: Vec<String> =
        m.c.iter()
            .map(|x| x.clone().unwrap_or_else(|| "garbage never stored".into()))
            .collect();
    let valid: Vec<bool> = m.c.iter().map(Option::is_some).collect();
    vec![
        ("c", NullableValues::new(Values::strings(&c), Some(valid))),
        ("d", Values::strings(&m.d).into()),
        ("b", Values::from_slice(&m.b).into()),
    ]
}

fn owned(m: &Model) -> Vec<(String, NullableValues)> {
    payload(m)
        .into_iter()
        .map(|(n, v)| (n.to_string(), v))
        .collect()
}

fn create(path: &std::path::Path) -> Table {
    let opts = |cl| ColumnOptions {
        chunklen: Some(cl),
        superchunksize: Some(2),
        ..Default::default()
    };
    Table::create(
        path,
        vec![
            Field::varstr("c")
                .with_options(opts(3))
                .dictionary()
                .nullable(),
            Field::varstr("d")
                .with_options(ColumnOptions {
                    fill: Some(serde_json::json!("zz")),
                    ..opts(4)
                })
                .dictionary(),
            Field::new("b", DType::I8).with_options(opts(5)),
        ],
        &TableOptions::default(),
    )
    .unwrap()
}

fn read(t: &Table) -> Model {
    let n = t.nrows();
    let c = t.column_rows_nullable("c", 0, n).unwrap();
    let strings = c.values.to_strings().unwrap();
    Model {
        c: strings
            .into_iter()
            .enumerate()
            .map(|(j, s)| match &c.validity {
                Some(f) if !f[j] => {
                    // A null reads as the fill value.
                    assert_eq!(s, "");
                    None
                }
                _ => Some(s),
            })
            .collect(),
        d: t.column("d").unwrap().to_strings().unwrap(),
        b: t.column("b").unwrap().to_vec().unwrap(),
    }
}

/// The codes and dictionary agree with the strings; entries are distinct; the dictionary
/// only grew since `before`.
fn check_codes(t: &Table, m: &Model, before: &mut [Vec<String>]) {
    let n = t.nrows();
    for (i, name) in ["c", "d"].iter().enumerate() {
        let dict = t.dictionary(name).unwrap();
        let mut seen = std::collections::HashSet::new();
        assert!(dict.iter().all(|e| seen.insert(e)), "{name}: {dict:?}");
        assert!(
            dict.starts_with(&before[i]),
            "{name}: {dict:?} after {:?}",
            before[i]
        );
        before[i] = dict;
        let coded = t.column_codes(name, 0, n).unwrap();
        let strings: Vec<String> = coded
            .codes
            .iter()
            // −1 at a null row (whose string reads as the fill value, "").
            .map(|&k| usize::try_from(k).map_or(String::new(), |k| coded.dictionary[k].clone()))
            .collect();
        let want: Vec<String> = if *name == "c" {
            m.c.iter().map(|x| x.clone().unwrap_or_default()).collect()
        } else {
            m.d.clone()
        };
        assert_eq!(strings, want, "{name}");
    }
}

proptest! {
    #![proptest_config(common::config(40))]

    #[test]
    fn dictionary_columns_follow_the_model(ops in prop::collection::vec(op(), 1..14)) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.blz");
        let mut t = create(&p);
        let mut m = Model::default();
        let mut dicts = vec![Vec::new(), Vec::new()];
        for o in ops {
            match o {
                Op::Append(n, seed, k) => {
                    let add = gen(n, seed, k);
                    t.append(&payload(&add)).unwrap();
                    m.c.extend(add.c);
                    m.d.extend(add.d);
                    m.b.extend(add.b);
                }
                Op::Batches(sizes, seed) => {
                    let parts: Vec<Model> = sizes
                        .iter()
                        .enumerate()
                        .map(|(i, &n)| gen(n, seed.wrapping_add(i as u8), 3))
                        .collect();
                    t.append_batches(parts.iter().map(|p| Ok(owned(p)))).unwrap();
                    for add in parts {
                        m.c.extend(add.c);
                        m.d.extend(add.d);
                        m.b.extend(add.b);
                    }
                }
                Op::Resize(n) => {
                    t.resize(n as u64).unwrap();
                    // Rows a grow adds are null in a nullable column, the fill value in
                    // the others.
                    m.c.resize(n, None);
                    m.d.resize(n, "zz".into());
                    m.b.resize(n, 0);
                }
                Op::Write(a, n, seed, k) => {
                    let len = m.b.len();
                    if a >= len {
                        continue;
                    }
                    let n = n.min(len - a);
                    let w = gen(n, seed, k);
                    t.write_rows(a as u64, &payload(&w)).unwrap();
                    m.c.splice(a..a + n, w.c);
                    m.d.splice(a..a + n, w.d);
                    m.b.splice(a..a + n, w.b);
                }
                Op::Put(idx, seed) => {
                    let len = m.b.len();
                    if len == 0 {
                        continue;
                    }
                    let idx: Vec<u64> = idx.iter().map(|&j| (j % len) as u64).collect();
                    let w = gen(idx.len(), seed, 2);
                    t.put(&idx, &payload(&w)).unwrap();
                    for (j, &r) in idx.iter().enumerate() {
                        let r = r as usize;
                        m.c[r] = w.c[j].clone();
                        m.d[r] = w.d[j].clone();
                        m.b[r] = w.b[j];
                    }
                }
                Op::Reopen => {
                    drop(t);
                    t = Table::open_rw(&p).unwrap();
                }
                Op::Compact => {
                    t.compact().unwrap();
                }
            }
            prop_assert_eq!(read(&t), m.clone());
            check_codes(&t, &m, &mut dicts);
        }
        drop(t);
        let t = Table::open(&p).unwrap();
        prop_assert_eq!(read(&t), m.clone());
        let problems = t.verify(|_, _| {});
        prop_assert!(problems.is_empty(), "{:?}", problems);
        // Rows by index.
        let n = m.b.len() as u64;
        let idx: Vec<u64> = (0..n).rev().collect();
        let got = t.take(&idx, Some(&["d"])).unwrap();
        let want: Vec<String> = idx.iter().map(|&r| m.d[r as usize].clone()).collect();
        prop_assert_eq!(got[0].1.to_strings().unwrap(), want);
    }
}

#[test]
fn a_value_past_the_dictionary_limit_is_refused_naming_column_and_value() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.blz");
    let mut t = Table::create(
        &p,
        vec![
            Field::varstr("city")
                .with_options(ColumnOptions {
                    dictionary_limit: Some(3),
                    ..Default::default()
                })
                .dictionary(),
            Field::new("n", DType::I32),
        ],
        &TableOptions::default(),
    )
    .unwrap();
    let rows = |s: &[&str]| {
        vec![
            ("city", Values::strings(s)),
            ("n", Values::from_slice(&vec![1i32; s.len()])),
        ]
    };
    t.append(&rows(&["Oslo", "Lima", "Oslo"])).unwrap();
    let e = t.append(&rows(&["Lima", "Pune", "Kyiv"])).unwrap_err();
    match &e {
        Error::DictionaryFull {
            column,
            value,
            limit,
            ..
        } => {
            assert_eq!(
                (column.as_str(), value.as_str(), *limit),
                ("city", "Kyiv", 3)
            );
        }
        other => panic!("{other}"),
    }
    let text = e.to_string();
    assert!(text.contains("city") && text.contains("Kyiv"), "{text}");
    // Nothing written: neither rows nor entries.
    assert_eq!(t.nrows(), 3);
    assert_eq!(t.dictionary("city").unwrap(), vec!["Oslo", "Lima"]);
    // Over batches of one transaction, the same.
    let batch = |s: &[&str]| -> blz::Result<Vec<(String, Values)>> {
        Ok(rows(s)
            .into_iter()
            .map(|(n, v)| (n.to_string(), v))
            .collect())
    };
    let e = t
        .append_batches(vec![batch(&["Pune"]), batch(&["Lima", "Kyiv"])])
        .unwrap_err();
    assert!(matches!(e, Error::DictionaryFull { .. }), "{e}");
    assert_eq!(t.nrows(), 3);
    // A write of rows too.
    let e = t
        .write_rows(0, &[("city", Values::strings(&["A", "B"]))])
        .unwrap_err();
    assert!(matches!(e, Error::DictionaryFull { .. }), "{e}");
    drop(t);
    let mut t = Table::open_rw(&p).unwrap();
    assert_eq!(t.dictionary("city").unwrap(), vec!["Oslo", "Lima"]);
    assert!(t.verify(|_, _| {}).is_empty());
    // The one entry left fits.
    t.append(&rows(&["Pune", "Oslo"])).unwrap();
    assert_eq!(
        t.column("city").unwrap().to_strings().unwrap(),
        vec!["Oslo", "Lima", "Oslo", "Pune", "Oslo"]
    );
}

#[test]
fn bad_values_and_bad_declarations_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.blz");
    let e = Table::create(
        &p,
        vec![Field::new("x", DType::I32).dictionary()],
        &TableOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("column x"), "{e}");
    let e = Table::create(
        &p,
        vec![Field::varstr("x").with_options(ColumnOptions {
            dictionary: Some(true),
            dictionary_limit: Some(0),
            ..Default::default()
        })],
        &TableOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("limit"), "{e}");
    let mut t = Table::create(
        &p,
        vec![Field::varstr("x").dictionary()],
        &TableOptions::default(),
    )
    .unwrap();
    // Codes are not strings: the column takes strings only.
    let e = t
        .append(&[("x", Values::from_slice(&[0i32, 1]))])
        .unwrap_err();
    assert!(e.to_string().contains("column x"), "{e}");
    let e = t
        .append(&[("x", Values::Var(vec![vec![0xff]]))])
        .unwrap_err();
    assert!(e.to_string().contains("UTF-8"), "{e}");
    assert_eq!(t.nrows(), 0);
    assert!(t.dictionary("x").unwrap().is_empty());
}

#[test]
fn the_format_keys_directories_and_row_counts() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.blz");
    let mut t = Table::create(
        &p,
        vec![
            Field::varstr("s").dictionary().nullable(),
            Field::varstr("plain"),
        ],
        &TableOptions::default(),
    )
    .unwrap();
    let s = NullableValues::new(
        Values::strings(&["x", "y", "", "x"]),
        Some(vec![true, true, false, true]),
    );
    t.append(&[
        ("s", s),
        ("plain", Values::strings(&["1", "2", "3", "4"]).into()),
    ])
    .unwrap();
    let storage: serde_json::Value =
        serde_json::from_slice(&std::fs::read(p.join("meta/storage")).unwrap()).unwrap();
    let f = &storage["dtype"][0];
    assert_eq!(f["dtype"], "varstr");
    assert_eq!(f["dictionary"]["codes"], "int32");
    assert_eq!(f["dictionary"]["limit"], 2147483647u64);
    assert_eq!(f["dictionary"]["storage"]["dflt"], "");
    assert_eq!(f["storage"]["dflt"], -1);
    assert_eq!(
        f["storage"]["compression"]["filters"],
        serde_json::json!(["bitshuffle"])
    );
    assert!(f.get("validity").is_some());
    assert!(storage["dtype"][1].get("dictionary").is_none());
    let sizes: serde_json::Value =
        serde_json::from_slice(&std::fs::read(p.join("meta/sizes")).unwrap()).unwrap();
    let cols = &sizes["columns"];
    assert_eq!(cols["s/__dictionary__"]["rows"], 2);
    // 2 entries: a count, 2 lengths and 2 bytes.
    assert_eq!(cols["s/__dictionary__"]["nbytes"], 4 + 8 + 2);
    assert_eq!(cols["s"]["nbytes"], 16);
    assert!(cols["s"].get("rows").is_none());
    assert!(cols["plain"].get("rows").is_none());
    assert!(p.join("data/s/__dictionary__/__1__.bin").exists());
    assert!(p.join("data/s/__validity__/__1__.bin").exists());
    // The codes themselves: the null holds the fill code.
    assert_eq!(t.column_codes_raw("s", 0, 4).unwrap(), vec![0, 1, -1, 0]);
    assert_eq!(t.column_names(), vec!["s", "plain"]);
    let leaf = t.leaves()[0].clone();
    assert!(leaf.is_dictionary());
    assert_eq!(leaf.type_name(), "varstr (dictionary)");
    assert!(!t.leaves()[1].is_dictionary());
    // Codes and dictionary: −1 at the null row, as pandas has it.
    let coded = t.column_codes("s", 0, 4).unwrap();
    assert_eq!(coded.dictionary, vec!["x", "y"]);
    assert_eq!(coded.codes, vec![0, 1, -1, 0]);
    // A row that holds the fill value without being null (a grow of a column that is not
    // nullable) gets a code for it, and the fill joins the dictionary returned.
    drop(t);
    let mut t = Table::open_rw(&p).unwrap();
    t.add_column(Field::varstr("f").dictionary()).unwrap();
    t.write_rows(0, &[("f", Values::strings(&["k"]))]).unwrap();
    let coded = t.column_codes("f", 0, 4).unwrap();
    assert_eq!(coded.dictionary, vec!["k", ""]);
    assert_eq!(coded.codes, vec![0, 1, 1, 1]);
}

#[test]
fn schema_changes_carry_the_dictionary() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.blz");
    let mut t = Table::create(
        &p,
        vec![Field::new("n", DType::I64), Field::varstr("s").dictionary()],
        &TableOptions::default(),
    )
    .unwrap();
    t.append(&[
        ("n", Values::from_slice(&[1i64, 2, 3])),
        ("s", Values::strings(&["a", "b", "a"])),
    ])
    .unwrap();
    t.rename_column("s", "t").unwrap();
    assert_eq!(
        t.column("t").unwrap().to_strings().unwrap(),
        vec!["a", "b", "a"]
    );
    assert!(p.join("data/t/__dictionary__").exists());
    // A column added to rows: they hold its fill value; the dictionary starts empty.
    t.add_column(
        Field::varstr("u")
            .with_options(ColumnOptions {
                fill: Some(serde_json::json!("?")),
                ..Default::default()
            })
            .dictionary(),
    )
    .unwrap();
    assert_eq!(t.column("u").unwrap().to_strings().unwrap(), vec!["?"; 3]);
    assert!(t.dictionary("u").unwrap().is_empty());
    t.write_rows(1, &[("u", Values::strings(&["k"]))]).unwrap();
    assert_eq!(
        t.column("u").unwrap().to_strings().unwrap(),
        vec!["?", "k", "?"]
    );
    t.drop_column("t").unwrap();
    assert!(!p.join("data/t").exists());
    drop(t);
    let t = Table::open(&p).unwrap();
    assert_eq!(t.column_names(), vec!["n", "u"]);
    assert_eq!(t.dictionary("u").unwrap(), vec!["k"]);
    assert!(t.verify(|_, _| {}).is_empty());
}
