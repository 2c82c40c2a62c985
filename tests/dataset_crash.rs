//! Crash consistency: every mutating operation is run with a simulated crash (a torn write,
//! then every later write failing) at each of its storage steps in turn. After each crash the
//! dataset must open with the real storage and hold exactly the state before the operation or
//! the state after it, with every chunk intact.

mod common;

use blz::storage::{FaultyStorage, LocalStorage, Storage};
use blz::{CreateOptions, DType, Dataset, Mode};
use common::copy_dir;
use ndarray::{s, Array1, Array2, ArrayD};
use std::path::Path;
use std::sync::Arc;

type Op = dyn Fn(&mut Dataset) -> blz::Result<()>;

fn snapshot(path: &Path) -> (ArrayD<i64>, serde_json::Map<String, serde_json::Value>) {
    let ds = Dataset::open(path).unwrap();
    assert!(
        ds.verify(|_, _| {}).is_empty(),
        "corrupt chunks after reopen"
    );
    (ds.read::<i64>().unwrap(), ds.attrs().unwrap())
}

/// Runs `op` on a copy of `base` with a crash at every step; returns the number of steps.
fn crash_everywhere(base: &Path, op: &Op) -> u64 {
    let work = tempfile::tempdir().unwrap();
    // The expected states: before, and after a clean run.
    let before = snapshot(base);
    let clean = work.path().join("clean");
    copy_dir(base, &clean);
    let counter = Arc::new(FaultyStorage::new(Arc::new(LocalStorage), u64::MAX));
    {
        let mut ds = Dataset::open_in(counter.clone(), &clean, Mode::ReadWrite).unwrap();
        op(&mut ds).unwrap();
    }
    let steps = counter.operations();
    let after = snapshot(&clean);
    assert_ne!(before, after, "the operation changed nothing");
    let mut saw_before = false;
    let mut saw_after = false;
    for k in 0..steps {
        let dir = work.path().join(format!("k{k}"));
        copy_dir(base, &dir);
        let faulty: Arc<dyn Storage> = Arc::new(FaultyStorage::new(Arc::new(LocalStorage), k));
        if let Ok(mut ds) = Dataset::open_in(faulty, &dir, Mode::ReadWrite) {
            let r = op(&mut ds);
            assert!(r.is_err(), "step {k}: the crash was not reported");
        }
        let got = snapshot(&dir);
        if got == before {
            saw_before = true;
        } else if got == after {
            saw_after = true;
        } else {
            panic!(
                "crash at step {k} of {steps}: the dataset holds neither the old nor the new state"
            );
        }
        // A writer can take over again and the dataset keeps working.
        let mut ds = Dataset::open_rw(&dir).unwrap();
        ds.append(
            &Array1::from_elem(ds.shape()[1..].iter().product::<u64>() as usize, 9i64)
                .into_shape_with_order(ndarray::IxDyn(
                    &[1].iter()
                        .chain(&ds.shape()[1..])
                        .map(|&x| x as usize)
                        .collect::<Vec<_>>(),
                ))
                .unwrap()
                .view(),
        )
        .unwrap();
        drop(ds);
        let _ = snapshot(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
    }
    assert!(
        saw_before && saw_after,
        "crashes should land on both sides of the commit"
    );
    steps
}

fn base_1d(dir: &Path, slack: u32) -> std::path::PathBuf {
    let p = dir.join("base1");
    let opts = CreateOptions {
        chunkshape: Some(vec![100]),
        superchunksize: Some(3),
        slack,
        ..Default::default()
    };
    let mut ds = Dataset::create_with(&p, DType::I64, &[0], &opts).unwrap();
    ds.append(&Array1::from_iter(0..450i64).into_dyn().view())
        .unwrap();
    ds.set_attr("unit", serde_json::json!("m")).unwrap();
    p
}

#[test]
fn append_into_partial_chunk_and_new_files() {
    let dir = tempfile::tempdir().unwrap();
    let base = base_1d(dir.path(), 0);
    let n = crash_everywhere(&base, &|ds| {
        ds.append(&Array1::from_iter(1000..1420i64).into_dyn().view())
    });
    assert!(n > 10);
}

#[test]
fn shrink_and_grow() {
    let dir = tempfile::tempdir().unwrap();
    let base = base_1d(dir.path(), 0);
    crash_everywhere(&base, &|ds| ds.resize(120));
    crash_everywhere(&base, &|ds| ds.resize(777));
}

#[test]
fn modify_relocating_and_in_place() {
    let dir = tempfile::tempdir().unwrap();
    for slack in [0u32, 4096] {
        let base = base_1d(&dir.path().join(format!("s{slack}")), slack);
        crash_everywhere(&base, &|ds| {
            ds.write_slice(
                s![50..260;3],
                &Array1::from_elem(70, -7i64).into_dyn().view(),
            )
        });
    }
}

#[test]
fn attributes() {
    let dir = tempfile::tempdir().unwrap();
    let base = base_1d(dir.path(), 0);
    crash_everywhere(&base, &|ds| ds.set_attr("unit", serde_json::json!("km")));
}

#[test]
fn two_d_append() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("b2");
    let opts = CreateOptions {
        chunkshape: Some(vec![4, 3]),
        superchunksize: Some(4),
        ..Default::default()
    };
    let mut ds = Dataset::create_with(&p, DType::I64, &[0, 7], &opts).unwrap();
    ds.append(
        &Array2::from_shape_fn((10, 7), |(i, j)| (i * 7 + j) as i64)
            .into_dyn()
            .view(),
    )
    .unwrap();
    drop(ds);
    crash_everywhere(&p, &|ds| {
        ds.append(
            &Array2::from_shape_fn((9, 7), |(i, j)| -((i * 7 + j) as i64))
                .into_dyn()
                .view(),
        )
    });
}
