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

/// Runs `op` on a copy of `base` with a crash at every step; returns the number of steps and
/// how many of them left a pending journal (checked through the read-only journal view).
fn crash_everywhere(base: &Path, op: &Op) -> (u64, u64) {
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
    let mut views = 0;
    for k in 0..steps {
        let dir = work.path().join(format!("k{k}"));
        copy_dir(base, &dir);
        let faulty: Arc<dyn Storage> = Arc::new(FaultyStorage::new(Arc::new(LocalStorage), k));
        if let Ok(mut ds) = Dataset::open_in(faulty, &dir, Mode::ReadWrite) {
            let r = op(&mut ds);
            assert!(r.is_err(), "step {k}: the crash was not reported");
        }
        // A reader that cannot write sees the recovered state through the journal view.
        let viewed = common::check_journal_view(&dir).map(|view| {
            let ds = Dataset::open_in(view, &dir, Mode::ReadOnly).unwrap();
            (ds.read::<i64>().unwrap(), ds.attrs().unwrap())
        });
        let got = snapshot(&dir);
        if let Some(v) = viewed {
            views += 1;
            assert!(
                v == got,
                "step {k}: the journal view differs from the recovered dataset"
            );
        }
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
    (steps, views)
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
    let (n, _) = crash_everywhere(&base, &|ds| {
        ds.append(&Array1::from_iter(1000..1420i64).into_dyn().view())
    });
    assert!(n > 10);
}

/// Many batches (of sizes that fall inside chunks, across files) appended as one
/// transaction: a crash anywhere leaves none or all of them.
#[test]
fn append_batches_commit_once() {
    let dir = tempfile::tempdir().unwrap();
    let base = base_1d(dir.path(), 0);
    let (n, _) = crash_everywhere(&base, &|ds| {
        let sizes = [7u64, 130, 1, 0, 299, 64];
        let mut next = 1000i64;
        let batches = sizes.iter().map(|&len| {
            let v: Vec<i64> = (next..next + len as i64).collect();
            next += len as i64;
            Ok(v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>())
        });
        ds.append_batches(batches).map(|_| ())
    });
    assert!(n > 10);
}

#[test]
fn shrink_and_grow() {
    let dir = tempfile::tempdir().unwrap();
    let base = base_1d(dir.path(), 0);
    let (_, views) = crash_everywhere(&base, &|ds| ds.resize(120));
    // Cutting a committed file goes through the journal.
    assert!(views > 0, "no crash left a pending journal");
    crash_everywhere(&base, &|ds| ds.resize(777));
}

#[test]
fn modify_relocating_and_in_place() {
    let dir = tempfile::tempdir().unwrap();
    for slack in [0u32, 4096] {
        let base = base_1d(&dir.path().join(format!("s{slack}")), slack);
        let (_, views) = crash_everywhere(&base, &|ds| {
            ds.write_slice(
                s![50..260;3],
                &Array1::from_elem(70, -7i64).into_dyn().view(),
            )
        });
        // Rewriting committed offsets goes through the journal.
        assert!(views > 0, "slack {slack}: no crash left a pending journal");
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

/// Makes `dir` read-only for this process: a read-only bind mount as root (whom file modes
/// do not stop), file modes otherwise. Returns a guard that undoes it, or `None` when the
/// system refuses (then the caller skips the check, saying so).
fn make_read_only(dir: &Path) -> Option<impl Drop> {
    struct Undo(std::path::PathBuf, bool);
    impl Drop for Undo {
        fn drop(&mut self) {
            if self.1 {
                let _ = std::process::Command::new("umount").arg(&self.0).status();
            } else {
                set_writable(&self.0, true);
            }
        }
    }
    fn set_writable(p: &Path, on: bool) {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(p).unwrap();
        let mode = meta.permissions().mode();
        let mode = if on { mode | 0o200 } else { mode & !0o222 };
        if meta.is_dir() && on {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        if meta.is_dir() {
            for e in std::fs::read_dir(p).unwrap() {
                set_writable(&e.unwrap().path(), on);
            }
        }
        if !(meta.is_dir() && on) {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let run = |args: &[&str]| {
            std::process::Command::new("mount")
                .args(args)
                .arg(dir)
                .arg(dir)
                .status()
                .is_ok_and(|s| s.success())
        };
        if !run(&["--bind"]) {
            return None;
        }
        let undo = Undo(dir.to_path_buf(), true);
        let remount = std::process::Command::new("mount")
            .args(["-o", "remount,bind,ro"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        remount.then_some(undo)
    } else {
        set_writable(dir, false);
        Some(Undo(dir.to_path_buf(), false))
    }
}

/// `base_1d` shrunk to 120 rows by a writer that crashed after its commit point, before
/// applying its journal: the dataset holds a pending committed journal.
fn pending_shrink(dir: &Path) -> std::path::PathBuf {
    let base = base_1d(dir, 0);
    for k in 0.. {
        let d = dir.join(format!("k{k}"));
        copy_dir(&base, &d);
        let faulty: Arc<dyn Storage> = Arc::new(FaultyStorage::new(Arc::new(LocalStorage), k));
        let mut ds = Dataset::open_in(faulty, &d, Mode::ReadWrite).unwrap();
        let done = ds.resize(120).is_ok();
        drop(ds);
        if blz::recovery::pending(&LocalStorage, &d) {
            return d;
        }
        assert!(!done, "no crash left a pending journal");
    }
    unreachable!()
}

/// One writer process at a time: another process gets a clear error naming the lock and
/// this process, a second writing handle of this process shares the writer, readers still
/// open and read the committed state, and the lock is free again once the writers are gone.
#[test]
fn second_writer_is_refused_readers_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let base = base_1d(dir.path(), 0);
    let mut w = Dataset::open_rw(&base).unwrap();
    let shared = Dataset::open_rw(&base).unwrap();
    // The command line (another process) is refused, told which process holds the lock,
    // and changes nothing.
    let p = base.to_str().unwrap();
    let out = common::fails(&["resize", p, "10"]);
    assert!(
        out.contains("meta/lock")
            && out.contains("locked by another writer")
            && out.contains(&format!("(process {})", std::process::id())),
        "{out}"
    );
    drop(shared);
    // Readers open while the writer works, and see what it has committed.
    let r = Dataset::open(&base).unwrap();
    assert_eq!(r.shape(), &[450]);
    w.append(&Array1::from_iter(450..500i64).into_dyn().view())
        .unwrap();
    assert_eq!(Dataset::open(&base).unwrap().shape(), &[500]);
    assert_eq!(
        r.slice::<i64, _>(s![440..450]).unwrap(),
        Array1::from_iter(440..450i64).into_dyn()
    );
    drop(w);
    let w2 = Dataset::open_rw(&base).unwrap();
    assert_eq!(w2.shape(), &[500]);
    drop(w2);
    // Tables share the rule.
    let t = dir.path().join("t.blz");
    let tw = blz::table::Table::create(
        &t,
        vec![blz::table::Field::new("a", DType::I32)],
        &Default::default(),
    )
    .unwrap();
    let p = t.to_str().unwrap();
    let out = common::fails(&["resize", p, "10"]);
    assert!(out.contains("locked by another writer"), "{out}");
    blz::table::Table::open(&t).unwrap();
    drop(tw);
    blz::table::Table::open_rw(&t).unwrap();
}

/// A reader that opens just after a live writer's commit point, while that writer is still
/// applying its journal, waits for it and then sees the new committed state.
#[test]
fn reader_waits_for_a_live_writer_to_apply_its_commit() {
    let dir = tempfile::tempdir().unwrap();
    let d = pending_shrink(dir.path());
    let writer = common::OtherWriter::lock(&d);
    let reader = {
        let d = d.clone();
        std::thread::spawn(move || {
            let t = std::time::Instant::now();
            let ds = Dataset::open(&d).unwrap();
            (t.elapsed(), ds.shape().to_vec(), ds.read::<i64>().unwrap())
        })
    };
    // The "writer" takes its time (as a large modification on a slow filesystem would),
    // then applies its journal and releases the lock.
    std::thread::sleep(std::time::Duration::from_millis(2500));
    assert!(
        !reader.is_finished(),
        "the reader did not wait for the writer"
    );
    assert!(blz::recovery::recover(&LocalStorage, &d).unwrap());
    drop(writer);
    let (waited, shape, data) = reader.join().unwrap();
    assert!(
        waited >= std::time::Duration::from_millis(2500),
        "{waited:?}"
    );
    assert_eq!(shape, [120]);
    assert_eq!(data, Array1::from_iter(0..120i64).into_dyn());
}

/// A writer crashed after its commit point, before applying its journal, and the dataset
/// is now where this reader cannot write (a read-only mount, or no permission): the reader
/// still opens it, and sees the committed state, without changing a byte.
#[test]
fn reader_that_cannot_write_sees_a_pending_commit() {
    let dir = tempfile::tempdir().unwrap();
    let d = pending_shrink(dir.path());
    let expect = Array1::from_iter(0..120i64).into_dyn();
    let before = common::tree(&LocalStorage, &d);
    {
        let Some(_ro) = make_read_only(&d) else {
            eprintln!("skipped: cannot make {} read-only here", d.display());
            return;
        };
        assert!(
            std::fs::File::create(d.join("meta").join("probe")).is_err(),
            "the directory is still writable"
        );
        let ds = Dataset::open(&d).unwrap();
        assert_eq!(ds.shape(), &[120]);
        assert_eq!(ds.read::<i64>().unwrap(), expect);
        assert_eq!(ds.attrs().unwrap()["unit"], serde_json::json!("m"));
        assert!(ds.verify(|_, _| {}).is_empty());
        // Writing is refused with the reason, not with a panic or a half-done change.
        let err = Dataset::open_rw(&d).unwrap_err().to_string();
        assert!(err.contains("meta/lock"), "{err}");
        // The command line reads it the same way.
        let out = common::ok(&["get", d.to_str().unwrap(), "115:120"]);
        assert!(out.contains("115") && out.contains("119"), "{out}");
    }
    assert!(
        common::tree(&LocalStorage, &d) == before,
        "a reader changed the dataset"
    );
    // Once writable again, the next open applies the journal for good.
    let ds = Dataset::open(&d).unwrap();
    assert!(!blz::recovery::pending(&LocalStorage, &d));
    assert_eq!(ds.read::<i64>().unwrap(), expect);
}
