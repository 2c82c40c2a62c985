//! One read shows one commit whole: a writer rewrites every element in place, over and over
//! (`x[i] = k + i % 3` in commit `k`), while readers on other handles read the whole array
//! (or table). Every read either returns one commit's values, all with the same `k`, or
//! fails with `Error::Changed` (and the reader refreshes and reads again); a read holding
//! chunks of two commits is a failure. Without the check, reads mixing two commits were
//! seen split at chunk boundaries (in-place rewrites are applied chunk by chunk).

use blz::table::{Field, TableOptions, Values};
use blz::{CreateOptions, DType, Dataset, Error, Mode, Table};
use ndarray::{s, Array1};
use std::sync::atomic::{AtomicBool, Ordering};

const N: usize = 400_000;
const COMMITS: i64 = 40;

fn values(k: i64) -> Array1<i64> {
    Array1::from_iter((0..N as i64).map(|i| k + i % 3))
}

/// The `k` every element of `v` says, or `None` when they disagree (a mixed read).
fn one_k(v: &[i64]) -> Option<i64> {
    let k = v[0];
    v.iter()
        .enumerate()
        .all(|(i, &x)| x - (i as i64 % 3) == k)
        .then_some(k)
}

/// Runs `reader` on two threads while `writer(k)` commits `k = 1..=COMMITS`; returns the
/// (whole reads, reads that met a commit) the readers counted.
fn race(
    writer: impl FnMut(i64) + Send,
    reader: impl Fn() -> Result<Option<i64>, Error> + Sync,
) -> (u64, u64) {
    let done = AtomicBool::new(false);
    let counts = std::thread::scope(|s| {
        let readers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let (mut whole, mut changed) = (0u64, 0u64);
                    while !done.load(Ordering::SeqCst) {
                        match reader() {
                            Ok(Some(_)) => whole += 1,
                            Ok(None) => panic!("a read held values of two commits"),
                            Err(Error::Changed { .. }) => changed += 1,
                            Err(e) => panic!("read failed: {e}"),
                        }
                    }
                    (whole, changed)
                })
            })
            .collect();
        let mut writer = writer;
        for k in 1..=COMMITS {
            writer(k);
        }
        done.store(true, Ordering::SeqCst);
        readers
            .into_iter()
            .map(|r| r.join().unwrap())
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    });
    assert!(counts.0 > 0, "no read completed");
    counts
}

#[test]
fn array_reads_never_mix_two_in_place_commits() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.blz");
    let opts = CreateOptions {
        chunkshape: Some(vec![10_000]),
        superchunksize: Some(8),
        ..Default::default()
    };
    let mut w = Dataset::create_with(&p, DType::I64, &[0], &opts).unwrap();
    w.append(&values(0).view().into_dyn()).unwrap();
    let (whole, changed) = race(
        |k| w.write_slice(s![..], &values(k).view().into_dyn()).unwrap(),
        || {
            // A fresh handle for each read, as a process that opens and reads would.
            let r = Dataset::open_in(blz::storage::local(), &p, Mode::ReadOnly)?;
            let v = r.read::<i64>()?;
            Ok(one_k(v.as_slice().unwrap()))
        },
    );
    eprintln!("{whole} whole reads, {changed} met a commit");
    drop(w);
    // A long-lived handle: refreshed after each read that met a commit, and at each call.
    let r = std::sync::Mutex::new(Dataset::open(&p).unwrap());
    let mut w = Dataset::open_rw(&p).unwrap();
    race(
        |k| {
            w.write_slice(s![..], &values(100 + k).view().into_dyn())
                .unwrap()
        },
        || {
            let mut r = r.lock().unwrap();
            r.refresh()?;
            let v = r.read::<i64>()?;
            Ok(one_k(v.as_slice().unwrap()))
        },
    );
}

#[test]
fn table_reads_never_mix_two_in_place_commits() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.blz");
    let mut opts = TableOptions::default();
    opts.defaults.chunklen = Some(10_000);
    opts.defaults.superchunksize = Some(8);
    let mut w = Table::create(
        &p,
        vec![Field::new("a", DType::I64), Field::new("b", DType::I64)],
        &opts,
    )
    .unwrap();
    let v0 = values(0);
    let col = |v: &Array1<i64>| Values::from_slice(v.as_slice().unwrap());
    w.append(&[("a", col(&v0)), ("b", col(&v0))]).unwrap();
    race(
        |k| {
            let v = values(k);
            w.write_rows(0, &[("a", col(&v)), ("b", col(&v))]).unwrap();
        },
        || {
            let r = Table::open_in(blz::storage::local(), &p, Mode::ReadOnly)?;
            let cols = r.rows(0, N as u64, None)?;
            let a = cols[0].1.to_vec::<i64>()?;
            let b = cols[1].1.to_vec::<i64>()?;
            // Both columns and every chunk of each: one commit.
            Ok(match (one_k(&a), one_k(&b)) {
                (Some(x), Some(y)) if x == y => Some(x),
                _ => None,
            })
        },
    );
}

/// The local storage, running `hook` once, the first time anyone asks whether a superchunk
/// file exists: a writer that commits just then, between a reader's read of `meta/sizes`
/// and its look for the last file that sizes names.
struct CommitWhileOpening {
    inner: std::sync::Arc<dyn blz::storage::Storage>,
    hook: std::sync::Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl std::fmt::Debug for CommitWhileOpening {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CommitWhileOpening")
    }
}

impl blz::storage::StorageWrapper for CommitWhileOpening {
    fn inner(&self) -> &dyn blz::storage::Storage {
        &*self.inner
    }
    fn exists(&self, path: &std::path::Path) -> bool {
        if path.extension().is_some_and(|e| e == "bin") {
            if let Some(hook) = self.hook.lock().unwrap().take() {
                hook();
            }
        }
        self.inner.exists(path)
    }
}

/// A reader opening an array while a writer's shrink commits (the shrink removes the files
/// past the new end after `meta/sizes` was read) is told the dataset changed, not that it
/// is damaged; opening again shows the shrunk dataset.
#[test]
fn an_open_that_meets_a_shrink_is_told_the_dataset_changed() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.blz");
    let o = CreateOptions {
        chunkshape: Some(vec![1000]),
        superchunksize: Some(2),
        ..Default::default()
    };
    let mut ds = Dataset::create_with(&a, DType::I64, &[0], &o).unwrap();
    ds.append(&values(0).into_dyn().view()).unwrap();
    drop(ds);
    let path = a.clone();
    let hook: Box<dyn FnOnce() + Send> = Box::new(move || {
        Dataset::open_rw(&path).unwrap().resize(1500).unwrap();
    });
    let s = std::sync::Arc::new(CommitWhileOpening {
        inner: blz::storage::local(),
        hook: std::sync::Mutex::new(Some(hook)),
    });
    match Dataset::open_in(s, &a, Mode::ReadOnly) {
        Err(Error::Changed { .. }) => {}
        Err(e) => panic!("{e}"),
        Ok(d) => panic!("opened with shape {:?}", d.shape()),
    }
    assert_eq!(Dataset::open(&a).unwrap().shape(), &[1500]);
}
