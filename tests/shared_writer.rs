//! Writer handles of one process share one writer (`engine::shared`): two handles written
//! in turn each see the other's commits (arrays and tables), threads each with a handle of
//! their own append without losing or mixing a batch, the writer lock is held while any
//! handle lives and released with the last, and another process is refused with
//! `Error::Locked` naming this process. The other process is this test binary run again
//! (an ignored test that does nothing unless `BLZ_SHARED_CHILD` is set).

mod common;

use blz::table::{Field, Table, Values};
use blz::{DType, Dataset, Error};
use common::Dir;
use ndarray::{s, Array1};
use std::path::Path;
use std::process::Command;

const CHILD_ENV: &str = "BLZ_SHARED_CHILD";

fn arr(v: &[i64]) -> ndarray::ArrayD<i64> {
    Array1::from_vec(v.to_vec()).into_dyn()
}

fn contents(ds: &mut Dataset) -> Vec<i64> {
    ds.refresh().unwrap();
    ds.read::<i64>().unwrap().iter().copied().collect()
}

fn opts(chunk: u64) -> blz::CreateOptions {
    blz::CreateOptions {
        chunkshape: Some(vec![chunk]),
        superchunksize: Some(4),
        ..Default::default()
    }
}

/// A fixed-seed generator (xorshift), so the interleaving is the same on every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// Appends, modifies, resizes (both ways) and attribute changes through two handles in
/// turn, against a plain vector: after every write both handles show the model, and a
/// read through the handle that did not write fails with `Changed` until it is refreshed.
#[test]
fn two_handles_interleaved_see_each_other() {
    let d = Dir::new();
    let p = d.p("a.blz");
    let mut a = Dataset::create_with(&p, DType::I64, &[0], &opts(7)).unwrap();
    let mut b = Dataset::open_rw(&p).unwrap();
    let mut model: Vec<i64> = Vec::new();
    let mut rng = Rng(0x5eed_1234_abcd);
    for step in 0..120i64 {
        let (w, other) = if rng.below(2) == 0 {
            (&mut a, &mut b)
        } else {
            (&mut b, &mut a)
        };
        let len = model.len() as u64;
        match rng.below(5) {
            0 | 1 => {
                let n = rng.below(25) as i64;
                let v: Vec<i64> = (0..n).map(|i| step * 1000 + i).collect();
                w.append(&arr(&v).view()).unwrap();
                model.extend(v);
            }
            2 if len > 0 => {
                let start = rng.below(len);
                let end = start + 1 + rng.below(len - start);
                let v: Vec<i64> = (start..end).map(|i| -(step * 1000 + i as i64)).collect();
                w.write_slice(s![start as isize..end as isize], &arr(&v).view())
                    .unwrap();
                model[start as usize..end as usize].copy_from_slice(&v);
            }
            3 => {
                let n = rng.below(len + 20);
                w.resize(n).unwrap();
                model.resize(n as usize, 0);
            }
            _ => {
                w.set_attr("step", step.into()).unwrap();
            }
        }
        assert_eq!(w.shape(), &[model.len() as u64], "step {step}");
        // The handle that did not write is behind: its reads say so, a refresh catches up.
        if other.refresh().unwrap() {
            assert_eq!(other.shape(), &[model.len() as u64], "step {step}");
        }
        assert_eq!(contents(w), model, "step {step}");
        assert_eq!(contents(other), model, "step {step}");
    }
    let attrs = b.attrs().unwrap();
    assert!(attrs.contains_key("step") || a.attrs().unwrap().is_empty());
    // A read through a handle left behind fails with `Changed` (one commit per read).
    a.append(&arr(&[1, 2, 3]).view()).unwrap();
    model.extend([1, 2, 3]);
    let err = b.read::<i64>().unwrap_err();
    assert!(matches!(err, Error::Changed { .. }), "{err}");
    assert!(b.refresh().unwrap());
    assert!(!b.refresh().unwrap(), "nothing new: no change");
    assert_eq!(contents(&mut b), model);
    // A write needs no refresh: it catches up first (the append lands after a's rows).
    a.append(&arr(&[4]).view()).unwrap();
    b.append(&arr(&[5]).view()).unwrap();
    model.extend([4, 5]);
    assert_eq!(contents(&mut a), model);
    drop((a, b));
    assert_eq!(contents(&mut Dataset::open(&p).unwrap()), model);
    assert!(Dataset::open(&p).unwrap().verify(|_, _| {}).is_empty());
}

/// Threads, each with its own handle, append batches of their own numbers: every batch is
/// in the dataset once, whole and in order, and nothing else is.
#[test]
fn threads_with_their_own_handles_append() {
    const THREADS: i64 = 4;
    const BATCHES: i64 = 25;
    let d = Dir::new();
    let p = d.p("t.blz");
    let first = Dataset::create_with(&p, DType::I64, &[0], &opts(16)).unwrap();
    std::thread::scope(|sc| {
        for t in 0..THREADS {
            let p = p.clone();
            sc.spawn(move || {
                let mut h = Dataset::open_rw(&p).unwrap();
                for b in 0..BATCHES {
                    let n = 1 + (t * 7 + b * 3) % 11;
                    let v: Vec<i64> = (0..n).map(|i| t * 1_000_000 + b * 1000 + i).collect();
                    h.append(&arr(&v).view()).unwrap();
                    if b % 5 == 0 {
                        h.set_attr(&format!("t{t}"), b.into()).unwrap();
                    }
                }
            });
        }
    });
    drop(first);
    let all: Vec<i64> = Dataset::open(&p)
        .unwrap()
        .read::<i64>()
        .unwrap()
        .iter()
        .copied()
        .collect();
    // Cut the result into batches: each starts at i == 0 and runs on consecutively.
    let mut seen = std::collections::BTreeSet::new();
    let mut i = 0;
    while i < all.len() {
        let start = all[i];
        assert_eq!(start % 1000, 0, "a batch starts at {i}");
        let (t, b) = (start / 1_000_000, (start / 1000) % 1000);
        let n = 1 + (t * 7 + b * 3) % 11;
        let want: Vec<i64> = (0..n).map(|k| start + k).collect();
        assert_eq!(&all[i..i + n as usize], want.as_slice(), "batch {t}/{b}");
        assert!(seen.insert((t, b)), "batch {t}/{b} twice");
        i += n as usize;
    }
    assert_eq!(seen.len() as i64, THREADS * BATCHES);
    let ds = Dataset::open(&p).unwrap();
    assert!(ds.verify(|_, _| {}).is_empty());
    assert_eq!(ds.attrs().unwrap().len(), THREADS as usize);
}

/// Tables share the writer the same way: appends, a new column and a resize through two
/// handles, each seeing the other's.
#[test]
fn two_table_handles_see_each_other() {
    let d = Dir::new();
    let p = d.p("t.blz");
    let mut a = Table::create(&p, vec![Field::new("x", DType::I32)], &Default::default()).unwrap();
    let mut b = Table::open_rw(&p).unwrap();
    a.append(&[("x", Values::from_slice(&[1i32, 2]))]).unwrap();
    b.append(&[("x", Values::from_slice(&[3i32]))]).unwrap();
    b.add_column(Field::new("y", DType::I64)).unwrap();
    a.append(&[
        ("x", Values::from_slice(&[4i32])),
        ("y", Values::from_slice(&[7i64])),
    ])
    .unwrap();
    b.refresh().unwrap();
    assert_eq!(
        b.column("x").unwrap().to_vec::<i32>().unwrap(),
        [1, 2, 3, 4]
    );
    assert_eq!(
        b.column("y").unwrap().to_vec::<i64>().unwrap(),
        [0, 0, 0, 7]
    );
    b.resize(2).unwrap();
    a.refresh().unwrap();
    assert_eq!(a.nrows(), 2);
    assert_eq!(a.column_names(), ["x", "y"]);
}

/// Runs this test binary again as another process that tries to write the dataset at `p`;
/// what it printed.
fn other_process(p: &Path) -> String {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_writes_once",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, p)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The other process: opens the dataset for writing, appends one row, prints the outcome.
#[test]
#[ignore = "run by lock_is_held_while_a_handle_lives as a child process"]
fn child_writes_once() {
    let Some(p) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    match Dataset::open_rw(&p).and_then(|mut ds| ds.append(&arr(&[42]).view())) {
        Ok(()) => println!("CHILD wrote"),
        Err(e) => println!("CHILD refused: {e}"),
    }
}

/// The writer lock stays with the process while any of its writing handles lives (another
/// process is refused, told which process holds it, and writes nothing), and is released
/// when the last is dropped.
#[test]
fn lock_is_held_while_a_handle_lives() {
    let d = Dir::new();
    let p = d.p("l.blz");
    let a = Dataset::create(&p, DType::I64, &[0]).unwrap();
    let b = Dataset::open_rw(&p).unwrap();
    let pid = format!("(process {})", std::process::id());
    let out = other_process(&p);
    assert!(
        out.contains("CHILD refused")
            && out.contains("locked by another writer")
            && out.contains(&pid),
        "{out}"
    );
    drop(a);
    let out = other_process(&p);
    assert!(out.contains("CHILD refused") && out.contains(&pid), "{out}");
    drop(b);
    let out = other_process(&p);
    assert!(out.contains("CHILD wrote"), "{out}");
    assert_eq!(contents(&mut Dataset::open(&p).unwrap()), [42]);
    // And the handles of this process share the lock again afterwards.
    let mut c = Dataset::open_rw(&p).unwrap();
    let mut e = Dataset::open_rw(&p).unwrap();
    c.append(&arr(&[1]).view()).unwrap();
    e.append(&arr(&[2]).view()).unwrap();
    assert_eq!(contents(&mut c), [42, 1, 2]);
}

/// A write through one handle started inside a write through another on the same thread
/// (an append's batches written by the other handle) would wait for itself: refused.
#[test]
fn a_write_inside_another_handles_write_is_refused() {
    let d = Dir::new();
    let p = d.p("n.blz");
    let mut a = Dataset::create(&p, DType::I64, &[0]).unwrap();
    let mut b = Dataset::open_rw(&p).unwrap();
    let mut inner = None;
    let batches = std::iter::once_with(|| {
        inner = Some(b.append(&arr(&[9]).view()));
        Ok::<_, Error>(1i64.to_ne_bytes().to_vec())
    });
    a.append_batches(batches).unwrap();
    let err = inner.unwrap().unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert_eq!(contents(&mut a), [1]);
}
