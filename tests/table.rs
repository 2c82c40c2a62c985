//! Tables: column-wise storage, nested fields, variable-length values, schema changes.

use blz::table::{ColumnOptions, Field, Table, TableOptions, Values};
use blz::DType;

fn fields() -> Vec<Field> {
    vec![
        Field::new("id", DType::I64),
        Field::varstr("name"),
        Field::structure(
            "pos",
            vec![Field::new("x", DType::F32), Field::new("y", DType::F32)],
        ),
        Field::varbytes("blob").with_options(ColumnOptions {
            chunklen: Some(3),
            ..Default::default()
        }),
    ]
}

fn rows(n: usize, base: i64) -> Vec<(&'static str, Values)> {
    let ids: Vec<i64> = (0..n as i64).map(|i| base + i).collect();
    let names: Vec<String> = ids
        .iter()
        .map(|i| format!("name-{i}-{}", "x".repeat((*i % 7) as usize)))
        .collect();
    let xs: Vec<f32> = ids.iter().map(|&i| i as f32 * 0.5).collect();
    let ys: Vec<f32> = ids.iter().map(|&i| -(i as f32)).collect();
    let blobs: Vec<Vec<u8>> = ids
        .iter()
        .map(|&i| vec![i as u8; (i % 5) as usize])
        .collect();
    vec![
        ("id", Values::from_slice(&ids)),
        ("name", Values::strings(&names)),
        ("pos/x", Values::from_slice(&xs)),
        ("pos/y", Values::from_slice(&ys)),
        ("blob", Values::bytes(&blobs)),
    ]
}

#[test]
fn create_append_read_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.blz");
    let mut t = Table::create(&p, fields(), &TableOptions::default()).unwrap();
    assert_eq!(
        t.column_names(),
        vec!["id", "name", "pos/x", "pos/y", "blob"]
    );
    t.append(&rows(10, 0)).unwrap();
    t.append(&rows(7, 10)).unwrap();
    assert_eq!(t.nrows(), 17);
    drop(t);
    let t = Table::open(&p).unwrap();
    assert_eq!(
        t.column("id").unwrap().to_vec::<i64>().unwrap(),
        (0..17).collect::<Vec<_>>()
    );
    assert_eq!(
        t.column("name").unwrap().to_strings().unwrap()[12],
        "name-12-xxxxx"
    );
    assert_eq!(t.column_array::<f32>("pos/x").unwrap()[4], 2.0);
    let r = t.rows(3, 6, Some(&["blob", "pos/y"])).unwrap();
    assert_eq!(r[0].1, Values::bytes(&[vec![3u8; 3], vec![4u8; 4], vec![]]));
    assert_eq!(r[1].1.to_vec::<f32>().unwrap(), vec![-3.0, -4.0, -5.0]);
    let tk = t.take(&[16, 0, 5, 5], Some(&["name", "id"])).unwrap();
    assert_eq!(
        tk[0].1.to_strings().unwrap(),
        vec!["name-16-xx", "name-0-", "name-5-xxxxx", "name-5-xxxxx"]
    );
    assert_eq!(tk[1].1.to_vec::<i64>().unwrap(), vec![16, 0, 5, 5]);
    assert!(t.verify(|_, _| {}).is_empty());
    let s = t.sizes();
    assert_eq!(s.nrows, Some(17));
    let cols = s.columns.as_ref().unwrap();
    assert_eq!(cols["id"].nbytes, 17 * 8);
    assert!(cols["name"].cbytes > 0);
    assert_eq!(s.cbytes, cols.values().map(|c| c.cbytes).sum::<u64>());
}

#[test]
fn reading_one_column_touches_no_other_column() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.blz");
    let mut t = Table::create(&p, fields(), &TableOptions::default()).unwrap();
    t.append(&rows(50, 0)).unwrap();
    drop(t);
    // Destroy every other column's files: reads of `name` must not notice.
    for other in ["id", "pos", "blob"] {
        std::fs::remove_dir_all(p.join("data").join(other)).unwrap();
    }
    let t = Table::open(&p).unwrap();
    assert_eq!(t.column("name").unwrap().len(), 50);
    assert!(t.column("id").is_err());
}

#[test]
fn write_resize_add_drop_rename() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.blz");
    let mut t = Table::create(&p, fields(), &TableOptions::default()).unwrap();
    t.append(&rows(20, 0)).unwrap();
    t.write_rows(
        5,
        &[
            ("name", Values::strings(&["five", "six"])),
            ("id", Values::from_slice(&[-5i64, -6])),
        ],
    )
    .unwrap();
    assert_eq!(
        t.column_rows("name", 4, 8).unwrap().to_strings().unwrap(),
        vec!["name-4-xxxx", "five", "six", "name-7-"]
    );
    assert!(t
        .write_rows(19, &[("id", Values::from_slice(&[1i64, 2]))])
        .is_err());
    t.resize(8).unwrap();
    t.resize(12).unwrap();
    assert_eq!(
        t.column("id").unwrap().to_vec::<i64>().unwrap()[7..],
        [7, 0, 0, 0, 0]
    );
    assert_eq!(t.column("name").unwrap().to_strings().unwrap()[9], "");
    t.add_column(Field::new("score", DType::F64).with_options(ColumnOptions {
        fill: Some(serde_json::json!(1.5)),
        ..Default::default()
    }))
    .unwrap();
    assert_eq!(
        t.column("score").unwrap().to_vec::<f64>().unwrap(),
        vec![1.5; 12]
    );
    t.rename_column("pos/x", "east").unwrap();
    t.rename_column("name", "label").unwrap();
    t.drop_column("blob").unwrap();
    assert!(t.drop_column("pos/y").is_ok());
    assert!(
        t.drop_column("pos/east").is_err(),
        "the last field of a structure"
    );
    drop(t);
    let t = Table::open(&p).unwrap();
    assert_eq!(t.column_names(), vec!["id", "label", "pos/east", "score"]);
    assert_eq!(
        t.column("pos/east").unwrap().to_vec::<f32>().unwrap()[3],
        1.5
    );
    assert_eq!(t.column("label").unwrap().to_strings().unwrap()[6], "six");
    assert!(!p.join("data/blob").exists());
    assert!(p.join("data/pos/east").is_dir());
    let cols = t.sizes().columns.clone().unwrap();
    assert_eq!(
        cols.keys().cloned().collect::<Vec<_>>(),
        vec!["id", "label", "pos/east", "score"]
    );
    assert!(t.verify(|_, _| {}).is_empty());
}

#[test]
fn bad_names_and_values_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for bad in ["", "..", ".", "a/b", "a\\b", "__1__.bin", "x\0y"] {
        let r = Table::create(
            dir.path().join("bad"),
            vec![Field::new(bad, DType::I8)],
            &TableOptions::default(),
        );
        assert!(r.is_err(), "{bad:?} accepted");
    }
    let dup = Table::create(
        dir.path().join("dup"),
        vec![Field::new("a", DType::I8), Field::varstr("a")],
        &TableOptions::default(),
    );
    assert!(dup.is_err());
    assert!(!dir.path().join("bad").join("meta").exists());
    let mut t = Table::create(dir.path().join("ok"), fields(), &TableOptions::default()).unwrap();
    // Missing columns, unequal lengths, wrong types, invalid UTF-8.
    assert!(t.append(&rows(3, 0)[..4]).is_err());
    let mut r = rows(3, 0);
    r[0].1 = Values::from_slice(&[1i64, 2]);
    assert!(t.append(&r).is_err());
    let mut r = rows(3, 0);
    r[2].1 = Values::from_slice(&[1.0f64, 2.0, 3.0]);
    assert!(t.append(&r).is_err());
    let mut r = rows(3, 0);
    r[1].1 = Values::bytes(&[vec![0xffu8], vec![], vec![]]);
    assert!(t.append(&r).is_err());
    assert!(t.rename_column("id", "../x").is_err());
    assert!(t.rename_column("id", "name").is_err());
    assert_eq!(t.nrows(), 0);
    assert!(!dir.path().join("x").exists());
}

#[test]
fn small_strings_cost_a_few_bytes_each() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = Table::create(
        dir.path().join("s"),
        vec![Field::varstr("s")],
        &TableOptions::default(),
    )
    .unwrap();
    let mut x = 12345u64;
    let strings: Vec<String> = (0..100_000)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let len = 5 + (x >> 59) as usize * 45 / 32;
            (0..len)
                .map(|i| (b'a' + ((x >> (i % 50)) % 26) as u8) as char)
                .collect()
        })
        .collect();
    let raw: u64 = strings.iter().map(|s| s.len() as u64).sum();
    t.append(&[("s", Values::strings(&strings))]).unwrap();
    let cbytes = t.sizes().cbytes;
    let per_item = (cbytes as f64 - raw as f64) / strings.len() as f64;
    assert!(per_item < 4.0, "{per_item} bytes of overhead per string");
    assert_eq!(t.column("s").unwrap().to_strings().unwrap(), strings);
}

#[test]
fn rename_over_a_leftover_directory_keeps_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.blz");
    let mut t = Table::create(
        &p,
        vec![Field::new("a", DType::I32), Field::new("z", DType::I8)],
        &TableOptions::default(),
    )
    .unwrap();
    t.append(&[
        ("a", Values::from_slice(&[1i32, 2, 3])),
        ("z", Values::from_slice(&[0i8; 3])),
    ])
    .unwrap();
    // A failed add_column("b") could leave data/b behind.
    std::fs::create_dir_all(p.join("data/b")).unwrap();
    std::fs::write(p.join("data/b/__1__.bin"), b"leftover").unwrap();
    t.rename_column("a", "b").unwrap();
    drop(t);
    let t = Table::open(&p).unwrap();
    assert_eq!(
        t.column("b").unwrap().to_vec::<i32>().unwrap(),
        vec![1, 2, 3]
    );
    assert!(!p.join("data/a").exists());
}

#[test]
fn writer_open_removes_stray_files_in_every_column() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.blz");
    let mut t = Table::create(&p, fields(), &TableOptions::default()).unwrap();
    t.append(&rows(20, 0)).unwrap();
    let before = t.rows(0, 20, None).unwrap();
    drop(t);
    // Each column holds one committed file; plant what a crashed writer leaves behind: files
    // past the committed ones and compaction temporaries, in plain, nested and
    // variable-length columns.
    let cols = ["id", "name", "pos/x", "pos/y", "blob"];
    let strays = [
        "__2__.bin",
        "__7__.bin",
        "__0__.bin",
        "__1__.bin.tmp",
        "x.tmp",
    ];
    for c in cols {
        let d = p.join("data").join(c);
        assert!(d.join("__1__.bin").is_file(), "{c} has no first file");
        for s in strays {
            std::fs::write(d.join(s), b"stray").unwrap();
        }
        std::fs::write(d.join("notes.txt"), b"not blz's").unwrap();
    }
    let planted = |c: &str, s: &str| p.join("data").join(c).join(s).exists();

    // Readers leave the files alone.
    let t = Table::open(&p).unwrap();
    assert_eq!(t.rows(0, 20, None).unwrap(), before);
    drop(t);
    for c in cols {
        for s in strays {
            assert!(planted(c, s), "a reader removed {c}/{s}");
        }
    }

    // A writer removes them, and only them.
    let t = Table::open_rw(&p).unwrap();
    for c in cols {
        for s in strays {
            assert!(!planted(c, s), "{c}/{s} survived a writer's open");
        }
        assert!(planted(c, "__1__.bin"));
        assert!(planted(c, "notes.txt"));
    }
    assert_eq!(t.rows(0, 20, None).unwrap(), before);
    assert!(t.verify(|_, _| {}).is_empty());
    drop(t);
    let t = Table::open(&p).unwrap();
    assert_eq!(t.rows(0, 20, None).unwrap(), before);
}

/// What `meta/sizes` must say a variable-length column holds: the payloads of its chunks
/// holding exactly its rows (`spec/varlen.md` §2), counts and lengths included.
fn varlen_nbytes<B: AsRef<[u8]>>(items: &[B], chunklen: usize) -> u64 {
    items
        .chunks(chunklen)
        .map(|c| 4 + 4 * c.len() as u64 + c.iter().map(|b| b.as_ref().len() as u64).sum::<u64>())
        .sum()
}

#[test]
fn varlen_nbytes_is_exact_after_every_operation() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.blz");
    let mut t = Table::create(&p, fields(), &TableOptions::default()).unwrap();
    // `blob` has chunks of 3 items, `name` of 8192: shrinks cut both inside a chunk.
    let mut names: Vec<String> = Vec::new();
    let mut blobs: Vec<Vec<u8>> = Vec::new();
    let check = |t: &Table, names: &[String], blobs: &[Vec<u8>], when: &str| {
        let cols = t.sizes().columns.clone().unwrap();
        assert_eq!(
            cols["name"].nbytes,
            varlen_nbytes(names, 8192),
            "name, {when}"
        );
        assert_eq!(cols["blob"].nbytes, varlen_nbytes(blobs, 3), "blob, {when}");
        assert_eq!(cols["id"].nbytes, 8 * names.len() as u64, "id, {when}");
        assert_eq!(
            t.sizes().nbytes,
            cols.values().map(|c| c.nbytes).sum::<u64>(),
            "total, {when}"
        );
    };
    let append = |t: &mut Table, names: &mut Vec<String>, blobs: &mut Vec<Vec<u8>>, n| {
        let r = rows(n, names.len() as i64);
        names.extend(r[1].1.to_strings().unwrap());
        if let Values::Var(b) = &r[4].1 {
            blobs.extend(b.iter().cloned());
        }
        t.append(&r).unwrap();
    };
    append(&mut t, &mut names, &mut blobs, 20);
    check(&t, &names, &blobs, "append");
    t.resize(10).unwrap();
    names.truncate(10);
    blobs.truncate(10);
    check(&t, &names, &blobs, "shrink inside a chunk");
    t.write_rows(
        9,
        &[
            ("name", Values::strings(&["a much longer name than before"])),
            ("blob", Values::bytes(&[b"0123456789"])),
        ],
    )
    .unwrap();
    names[9] = "a much longer name than before".into();
    blobs[9] = b"0123456789".to_vec();
    check(&t, &names, &blobs, "write into the last chunk");
    t.resize(7).unwrap();
    names.truncate(7);
    blobs.truncate(7);
    check(&t, &names, &blobs, "second shrink");
    append(&mut t, &mut names, &mut blobs, 4);
    check(&t, &names, &blobs, "append after a shrink");
    t.resize(6).unwrap();
    names.truncate(6);
    blobs.truncate(6);
    check(&t, &names, &blobs, "shrink to a chunk boundary");
    t.resize(8).unwrap();
    names.resize(8, String::new());
    blobs.resize(8, Vec::new());
    check(&t, &names, &blobs, "grow");
    t.resize(1).unwrap();
    names.truncate(1);
    blobs.truncate(1);
    check(&t, &names, &blobs, "shrink to one row");
    t.write_rows(0, &[("blob", Values::bytes(&[b"xyz"]))])
        .unwrap();
    blobs[0] = b"xyz".to_vec();
    check(&t, &names, &blobs, "write the only row");
    drop(t);
    let t = Table::open_rw(&p).unwrap();
    check(&t, &names, &blobs, "reopen");
    assert_eq!(t.column("name").unwrap().to_strings().unwrap(), names);
    assert_eq!(t.column("blob").unwrap(), Values::bytes(&blobs));
    assert!(t.verify(|_, _| {}).is_empty());
}

/// Bytes on disk of every column's superchunk files.
fn file_bytes(t: &Table) -> u64 {
    t.column_names()
        .iter()
        .flat_map(|c| t.column_files(c).unwrap())
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum()
}

#[test]
fn compact_drops_dead_space_and_keeps_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.blz");
    let mut t = Table::create(&p, fields(), &TableOptions::default()).unwrap();
    t.append(&rows(40, 0)).unwrap();
    // Rewrites whose chunks change size are moved to the end of their files, leaving their
    // old bytes behind as dead space.
    for round in 0..5 {
        let mut r = rows(10, 1000 * (round + 1));
        r[1].1 = Values::strings(&vec!["longer and longer ".repeat(round as usize + 2); 10]);
        t.write_rows(5 + round as u64 * 3, &r).unwrap();
    }
    let data = t.rows(0, 40, None).unwrap();
    let sizes = t.sizes().clone();
    let before = file_bytes(&t);
    let saved = t.compact().unwrap();
    let after = file_bytes(&t);
    assert!(saved > 0, "nothing to compact");
    assert_eq!(before - after, saved);
    assert_eq!(t.rows(0, 40, None).unwrap(), data);
    // A commit like any other: a new generation, and no size the table reports changes.
    let mut expected = sizes.clone();
    expected.generation += 1;
    // The statistics stay current: their generation follows.
    expected.stats = Some(expected.generation);
    assert_eq!(
        t.sizes(),
        &expected,
        "compaction changes no size the table reports"
    );
    // Compacting again finds nothing left to save.
    assert_eq!(t.compact().unwrap(), 0);
    drop(t);
    let t = Table::open(&p).unwrap();
    assert_eq!(t.rows(0, 40, None).unwrap(), data);
    assert!(t.verify(|_, _| {}).is_empty());
    assert_eq!(file_bytes(&t), after);
    // A reader may not compact.
    let mut ro = Table::open(&p).unwrap();
    assert!(matches!(ro.compact(), Err(blz::Error::ReadOnly { .. })));
}

#[test]
fn column_rows_into_a_callers_buffer() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.blz");
    let mut t = Table::create(&p, fields(), &TableOptions::default()).unwrap();
    t.append(&rows(50, 0)).unwrap();
    let mut out = vec![0u8; 10 * 4];
    t.column_rows_into("pos/x", 20, 30, &mut out).unwrap();
    let got: Vec<f32> = out
        .chunks_exact(4)
        .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    let want: Vec<f32> = (20..30).map(|i| i as f32 * 0.5).collect();
    assert_eq!(got, want);
    assert!(t.column_rows_into("pos/x", 20, 30, &mut [0u8; 3]).is_err());
    assert!(t.column_rows_into("name", 0, 1, &mut [0u8; 4]).is_err());
    assert!(t.column_rows_into("pos/x", 45, 51, &mut [0u8; 24]).is_err());
}

#[test]
fn read_columns_fills_buffers_and_returns_values_in_one_pass() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.blz");
    let opts = TableOptions {
        defaults: ColumnOptions {
            chunklen: Some(4),
            ..Default::default()
        },
        ..Default::default()
    };
    let mut t = Table::create(&p, fields(), &opts).unwrap();
    t.append(&rows(50, 0)).unwrap();
    let native = |v: Values| match v {
        Values::Fixed { data, .. } => data,
        Values::Var(_) => panic!("fixed-size column read as variable-length"),
    };
    let mut ids = vec![0u8; 30 * 8];
    let mut xs = vec![0u8; 30 * 4];
    let got = {
        let mut into: Vec<(&str, &mut [u8])> = vec![("id", &mut ids), ("pos/x", &mut xs)];
        t.read_columns(11, 41, &mut into, &["blob", "name", "pos/y"])
            .unwrap()
    };
    assert_eq!(ids, native(t.column_rows("id", 11, 41).unwrap()));
    assert_eq!(xs, native(t.column_rows("pos/x", 11, 41).unwrap()));
    for (v, name) in got.iter().zip(["blob", "name", "pos/y"]) {
        assert_eq!(*v, t.column_rows(name, 11, 41).unwrap(), "{name}");
    }
    // A buffer of the wrong size, or a variable-length column to fill, fails the read.
    let mut short = vec![0u8; 8];
    let mut into: Vec<(&str, &mut [u8])> = vec![("id", &mut short)];
    assert!(t.read_columns(11, 41, &mut into, &["name"]).is_err());
    let mut buf = vec![0u8; 30 * 8];
    let mut into: Vec<(&str, &mut [u8])> = vec![("name", &mut buf)];
    assert!(t.read_columns(11, 41, &mut into, &[]).is_err());
}

/// Issue 21: an append with a column the table lacks is refused, naming it, and appends
/// nothing (one batch or many, flat or nested).
#[test]
fn append_with_an_extra_column_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.blz");
    let mut t = Table::create(&p, fields(), &TableOptions::default()).unwrap();
    t.append(&rows(4, 0)).unwrap();
    for extra in ["extra", "pos/z"] {
        let mut cols = rows(3, 4);
        cols.push((extra, Values::from_slice(&[1i64, 2, 3])));
        let e = t.append(&cols).unwrap_err().to_string();
        assert!(e.contains(extra), "{e}");
        let batch: Vec<(String, Values)> =
            cols.into_iter().map(|(n, v)| (n.to_string(), v)).collect();
        let e = t.append_batches([Ok(batch)]).unwrap_err().to_string();
        assert!(e.contains(extra), "{e}");
    }
    assert_eq!(t.nrows(), 4);
    assert_eq!(Table::open(&p).unwrap().nrows(), 4);
}
