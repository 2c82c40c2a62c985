//! Creates are one step: every dataset is built in `<path>.tmp-build`, under that
//! directory's writer lock, and renamed into place when complete.

mod common;

use blz::storage::LocalStorage;
use blz::table::{Field, Table, Values};
use blz::{CreateOptions, DType, Dataset, Error};
use std::sync::Arc;

fn bytes(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

#[test]
fn a_second_create_of_one_path_is_refused_while_the_first_runs() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.blz");
    let _live = common::OtherWriter::lock(&dir.path().join("a.blz.tmp-build"));
    let err = Dataset::create(&p, DType::F64, &[0]).unwrap_err();
    assert!(matches!(err, Error::Locked { .. }), "{err}");
    assert!(err.to_string().contains("a.blz.tmp-build"), "{err}");
    // The command line says so too, for every kind of create.
    let csv = dir.path().join("in.csv");
    std::fs::write(&csv, "1,2\n3,4\n").unwrap();
    let ps = p.to_str().unwrap();
    for args in [
        vec!["create", ps, "--arange", "10"],
        vec!["create", ps, "--csv", csv.to_str().unwrap()],
        vec![
            "layer",
            "build",
            csv.to_str().unwrap(),
            ps,
            "--columns",
            "a:int64,b:int64",
        ],
    ] {
        let out = common::fails(&args);
        assert!(out.contains("locked"), "{args:?}: {out}");
    }
    assert!(!p.exists());
}

#[test]
fn a_killed_create_leaves_nothing_that_opens_and_the_next_one_cleans_up() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.blz");
    // What a killed build leaves: a staging directory with its marker and some files.
    let tmp = dir.path().join("a.blz.tmp-build");
    drop(common::OtherWriter::lock(&tmp));
    std::fs::create_dir_all(tmp.join("data")).unwrap();
    std::fs::write(tmp.join("data").join("__1__.bin"), b"half").unwrap();
    std::fs::write(tmp.join("meta").join("building"), b"").unwrap();
    std::fs::write(tmp.join("meta").join("storage"), b"{}").unwrap();
    let err = Dataset::open(&tmp).unwrap_err().to_string();
    assert!(err.contains("still being created"), "{err}");
    assert!(Table::open(&tmp).is_err() && blz::layer::Layer::open(&tmp).is_err());
    assert!(Dataset::open(&p).is_err());
    // Creating again works and leaves no staging directory.
    let ds = Dataset::create_from(
        Arc::new(LocalStorage),
        &p,
        DType::F64,
        &[0],
        &CreateOptions::default(),
        [Ok(bytes(&[1.0, 2.0]))],
    )
    .unwrap();
    assert_eq!(ds.shape(), &[2]);
    assert!(!tmp.exists());
}

#[test]
fn a_failed_create_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.blz");
    let batches: Vec<blz::Result<Vec<(String, Values)>>> = vec![
        Ok(vec![("a".into(), Values::from_slice(&[1i32, 2]))]),
        Err(Error::InvalidArgument("line 3: not a number".into())),
    ];
    let err = Table::create_from(
        Arc::new(LocalStorage),
        &p,
        vec![Field::new("a", DType::I32)],
        &Default::default(),
        batches,
    )
    .unwrap_err();
    assert!(err.to_string().contains("line 3"), "{err}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn overwrite_replaces_a_dataset_of_its_kind_only() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.blz");
    let opts = CreateOptions {
        overwrite: true,
        ..Default::default()
    };
    let s = Arc::new(LocalStorage);
    Dataset::create_from(s.clone(), &p, DType::F64, &[0], &opts, [Ok(bytes(&[1.0]))]).unwrap();
    let ds = Dataset::create_from(
        s.clone(),
        &p,
        DType::F64,
        &[0],
        &opts,
        [Ok(bytes(&[7.0, 8.0]))],
    )
    .unwrap();
    assert_eq!(ds.get::<f64>(&[1]).unwrap(), 8.0);
    // Not while another writer works on it.
    let err = Dataset::create_from(s.clone(), &p, DType::F64, &[0], &opts, [Ok(bytes(&[0.0]))])
        .unwrap_err();
    assert!(matches!(err, Error::Locked { .. }), "{err}");
    drop(ds);
    assert_eq!(Dataset::open(&p).unwrap().shape(), &[2]);
    // A table is not replaced by an array, nor anything that is not a dataset.
    let t = dir.path().join("t.blz");
    Table::create(&t, vec![Field::new("a", DType::I32)], &Default::default()).unwrap();
    let err = Dataset::create_with(&t, DType::F64, &[0], &opts).unwrap_err();
    assert!(err.to_string().contains("is not an array dataset"), "{err}");
    let f = dir.path().join("file.txt");
    std::fs::write(&f, b"keep me").unwrap();
    assert!(Dataset::create_with(&f, DType::F64, &[0], &opts).is_err());
    assert_eq!(std::fs::read(&f).unwrap(), b"keep me");
    // Replacements in quick succession: each replaced dataset is removed in the background,
    // and the next replacement waits for the one before.
    for k in 0..4 {
        let vals: Vec<f64> = (0..1000).map(|i| f64::from(i + k)).collect();
        Dataset::create_from(s.clone(), &p, DType::F64, &[0], &opts, [Ok(bytes(&vals))]).unwrap();
        assert_eq!(
            Dataset::open(&p).unwrap().get::<f64>(&[999]).unwrap(),
            f64::from(999 + k)
        );
    }
    blz::finish_removals();
    let leftovers: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
