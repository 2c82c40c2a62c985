//! In-memory datasets (`memory://name` URLs, `blz::storage::memory`): every kind created,
//! appended to, modified, resized and read in memory through the same entrances as on disk;
//! saved to disk and reopened equal; loaded from disk into memory; and the errors: an
//! unknown name, a save over an existing path (which writes nothing).

use blz::expr::{Expression, Operand};
use blz::layer::{ColumnDef, LayerSchema, LayerWriter, LeafKind, Value};
use blz::storage::memory;
use blz::table::{Field, TableOptions, Values};
use blz::{AnyDataset, CreateOptions, DType, Dataset, Error, Layer, Mode, Table};
use ndarray::{s, Array1, Array2, ArrayD, IxDyn};
use std::path::Path;

fn opts(chunks: &[u64]) -> CreateOptions {
    CreateOptions {
        chunkshape: Some(chunks.to_vec()),
        superchunksize: Some(4),
        ..CreateOptions::default()
    }
}

/// The relative paths and bytes of every file below `dir` on disk, sorted.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

fn not_found(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
}

#[test]
fn an_array_lives_in_memory_and_saves_to_disk() {
    let url = "memory://tests/array.blz";
    let mut model = Array2::<f64>::from_shape_fn((0, 3), |_| 0.0);
    let mut ds = Dataset::create_with(url, DType::F64, &[0, 3], &opts(&[7, 3])).unwrap();
    assert_eq!(ds.path(), Path::new(url));
    for round in 0..5 {
        let rows = Array2::from_shape_fn((13, 3), |(i, j)| (round * 100 + i * 3 + j) as f64);
        ds.append(&rows.view().into_dyn()).unwrap();
        model.append(ndarray::Axis(0), rows.view()).unwrap();
    }
    // Another handle, opened by the URL, sees the same dataset (and the writers share).
    let other = Dataset::open(url).unwrap();
    assert_eq!(other.shape(), &[65, 3]);
    let patch = Array2::from_elem((4, 2), -1.5);
    ds.write_slice(s![10..14, 1..3], &patch.view().into_dyn())
        .unwrap();
    model.slice_mut(s![10..14, 1..3]).assign(&patch);
    ds.resize(50).unwrap();
    model = model.slice(s![..50, ..]).to_owned();
    ds.set_attr("unit", serde_json::json!("m")).unwrap();
    assert_eq!(ds.read::<f64>().unwrap(), model.clone().into_dyn());
    assert_eq!(
        ds.slice::<f64, _>(s![3..40;7, 1]).unwrap(),
        model.slice(s![3..40;7, 1]).to_owned().into_dyn()
    );
    let mut other = other;
    assert!(other.refresh().unwrap());
    assert_eq!(other.read::<f64>().unwrap(), model.clone().into_dyn());
    assert!(ds.verify(|_, _| {}).is_empty());
    // The memory it holds is its files: compressed chunks, plus headers and meta.
    let held = memory::bytes_held(Path::new(url));
    assert!(
        held >= ds.sizes().cbytes && held < ds.sizes().cbytes + 64 * 1024,
        "{held}"
    );
    // Queries and expressions read it as any dataset.
    let mask = ds.where_mask("x < 0").unwrap();
    assert_eq!(mask.iter().filter(|&&m| m).count(), 8);
    let e = Expression::new("x * 2 + 1", vec![("x", Operand::Array(&ds))]).unwrap();
    let doubled = e
        .compute(
            "memory://tests/array-doubled.blz",
            &CreateOptions::default(),
        )
        .unwrap();
    assert_eq!(
        doubled.read::<f64>().unwrap(),
        model.mapv(|x| x * 2.0 + 1.0).into_dyn()
    );

    // Saved to disk (while the handle is open for writing: the copy takes its turn), equal.
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("saved.blz");
    blz::copy::copy_dataset(Path::new(url), &saved, false).unwrap();
    let back = Dataset::open(&saved).unwrap();
    assert_eq!(back.read::<f64>().unwrap(), model.clone().into_dyn());
    assert_eq!(back.attrs().unwrap()["unit"], "m");
    // And loaded into memory again under another name.
    blz::copy::copy_dataset(&saved, Path::new("memory://tests/array-again.blz"), false).unwrap();
    let again = blz::open("memory://tests/array-again.blz")
        .unwrap()
        .into_array()
        .unwrap();
    assert_eq!(again.read::<f64>().unwrap(), model.into_dyn());

    // Saving over what exists is refused before anything is written.
    let before = files(&saved);
    let e = blz::copy::copy_dataset(Path::new(url), &saved, false).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("already exists")),
        "{e}"
    );
    assert_eq!(files(&saved), before);
    assert!(!dir.path().join("saved.blz.tmp-build").exists());

    // Removed: the name is free, and opening it says where in-memory datasets live.
    drop((ds, other, doubled, again));
    for u in [
        url,
        "memory://tests/array-again.blz",
        "memory://tests/array-doubled.blz",
    ] {
        memory::remove(Path::new(u)).unwrap();
        let e = blz::open(u).unwrap_err();
        assert!(
            not_found(&e) && e.to_string().contains("in this process"),
            "{e}"
        );
    }
}

#[test]
fn a_table_lives_in_memory() {
    let url = "memory://tests/table.blz";
    let fields = vec![Field::new("id", DType::I64), Field::varstr("name")];
    let mut t = Table::create(url, fields, &TableOptions::default()).unwrap();
    for base in [0i64, 10] {
        let ids: Vec<i64> = (base..base + 10).collect();
        let names: Vec<String> = ids.iter().map(|i| format!("n{i}")).collect();
        t.append(&[
            ("id", Values::from_slice(&ids)),
            ("name", Values::strings(&names)),
        ])
        .unwrap();
    }
    t.resize(15).unwrap();
    let mut attrs = serde_json::Map::new();
    attrs.insert("source".into(), serde_json::json!("test"));
    t.set_attrs(attrs).unwrap();
    let r = match blz::open(url).unwrap() {
        AnyDataset::Table(r) => r,
        other => panic!("{:?}", other.kind()),
    };
    assert_eq!(r.nrows(), 15);
    assert_eq!(
        r.column("id").unwrap().to_vec::<i64>().unwrap(),
        (0..15).collect::<Vec<_>>()
    );
    assert_eq!(r.column("name").unwrap().to_strings().unwrap()[13], "n13");
    assert!(r.verify(|_, _| {}).is_empty());
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("t.blz");
    blz::copy::copy_dataset(Path::new(url), &saved, false).unwrap();
    let back = Table::open(&saved).unwrap();
    assert_eq!(back.nrows(), 15);
    assert_eq!(back.attrs().unwrap()["source"], "test");
    assert_eq!(
        back.column("name").unwrap().to_strings().unwrap()[14],
        "n14"
    );
    drop((t, r));
    memory::remove(Path::new(url)).unwrap();
    assert!(not_found(&Table::open(url).unwrap_err()));
}

#[test]
fn a_layer_lives_in_memory() {
    let url = "memory://tests/layer.blz";
    let schema = LayerSchema::new(vec![
        ColumnDef::new("k", LeafKind::Fixed(DType::I64)),
        ColumnDef::new("v", LeafKind::VarStr),
    ]);
    let mut w = LayerWriter::create(url, schema).unwrap();
    for k in 0..1000i64 {
        w.push(&[Value::Int(2 * k), format!("v{k}").as_str().into()], None)
            .unwrap();
    }
    w.finish().unwrap();
    let l = Layer::open(url).unwrap();
    assert_eq!(l.rows(0), 1000);
    assert!(l.contains(&Value::Int(1998)).unwrap());
    assert!(!l.contains(&Value::Int(7)).unwrap());
    let dir = tempfile::tempdir().unwrap();
    blz::copy::copy_dataset(Path::new(url), &dir.path().join("l.blz"), false).unwrap();
    let back = Layer::open(dir.path().join("l.blz")).unwrap();
    assert_eq!(back.rows(0), 1000);
    assert!(back.contains(&Value::Int(1000)).unwrap());
    memory::remove(Path::new(url)).unwrap();
}

#[test]
fn an_anonymous_dataset_lives_as_long_as_its_handles() {
    let (storage, root) = memory::anonymous();
    assert!(root.to_string_lossy().starts_with("memory://anon-"));
    let mut ds = Dataset::create_in(storage, &root, DType::I32, &[0], &opts(&[100])).unwrap();
    let v = Array1::from_iter(0..1000i32);
    ds.append(&v.view().into_dyn()).unwrap();
    // Opened again by its URL while a handle holds it.
    let r = Dataset::open(&root).unwrap();
    assert_eq!(r.read::<i32>().unwrap(), v.clone().into_dyn());
    let rw = blz::open_rw(&root).unwrap().into_array().unwrap();
    drop((ds, r, rw));
    // Gone with the last handle: the URL names nothing now.
    let e = blz::open(&root).unwrap_err();
    assert!(not_found(&e), "{e}");

    // Loading a dataset from disk into an anonymous one.
    let dir = tempfile::tempdir().unwrap();
    let disk = dir.path().join("d.blz");
    let mut d = Dataset::create_with(&disk, DType::I32, &[0], &opts(&[64])).unwrap();
    d.append(&v.view().into_dyn()).unwrap();
    let (storage, root) = memory::anonymous();
    blz::copy::copy_into(&disk, &storage, &root, false).unwrap();
    let m = Dataset::open_in(storage, &root, Mode::ReadWrite).unwrap();
    assert_eq!(m.read::<i32>().unwrap(), v.into_dyn());
    assert_eq!(m.sizes(), d.sizes());
}

#[test]
fn malformed_memory_urls_are_refused() {
    for url in [
        "memory://",
        "memory:///",
        "memory://a//b",
        "memory://a/../b",
    ] {
        let e = Dataset::create(url, DType::F64, &[1]).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{url}: {e}");
    }
    let e = blz::open("memory://tests/never-made.blz").unwrap_err();
    assert!(not_found(&e), "{e}");
    assert!(
        e.to_string().contains("memory://tests/never-made.blz"),
        "{e}"
    );
    // A create that fails leaves nothing under its name.
    let bad = CreateOptions {
        chunkshape: Some(vec![0]),
        ..CreateOptions::default()
    };
    assert!(Dataset::create_with("memory://tests/bad.blz", DType::F64, &[4], &bad).is_err());
    assert!(!memory::exists(Path::new("memory://tests/bad.blz")));
    assert!(!memory::exists(Path::new(
        "memory://tests/bad.blz.tmp-build"
    )));
    let _ = ArrayD::<f64>::zeros(IxDyn(&[1]));
}
