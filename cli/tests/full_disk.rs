//! A full disk in the middle of a change: the change fails with the system's error, the
//! dataset keeps its last committed state, and nothing blz wrote for the change stays behind
//! to keep the disk full.

mod common;

use blz::storage::{
    FaultyStorage, FileWrapper, LocalStorage, OpenMode, Storage, StorageFile, StorageWrapper,
};
use blz::table::{ColumnOptions, Field, Table, TableOptions, Values};
use blz::{CreateOptions, DType, Dataset, Mode};
use common::{copy_dir, fails, ok, Dir};
use ndarray::{s, Array1};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Local storage on a disk with `free` bytes left for new writes.
#[derive(Debug)]
struct SmallDisk {
    free: Arc<AtomicU64>,
}

struct SmallFile {
    inner: Box<dyn StorageFile>,
    free: Arc<AtomicU64>,
}

impl FileWrapper for SmallFile {
    fn inner(&self) -> &dyn StorageFile {
        &*self.inner
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> blz::Result<()> {
        let n = data.len() as u64;
        let left = self.free.load(Ordering::SeqCst);
        if n > left {
            return Err(blz::Error::io(
                "write",
                self.inner.path(),
                std::io::Error::from(std::io::ErrorKind::StorageFull),
            ));
        }
        self.free.fetch_sub(n, Ordering::SeqCst);
        self.inner.write_at(offset, data)
    }
}

impl StorageWrapper for SmallDisk {
    fn inner(&self) -> &dyn Storage {
        &LocalStorage
    }
    fn open(&self, path: &Path, mode: OpenMode) -> blz::Result<Box<dyn StorageFile>> {
        Ok(Box::new(SmallFile {
            inner: LocalStorage.open(path, mode)?,
            free: Arc::clone(&self.free),
        }))
    }
}

#[test]
fn compaction_on_a_full_disk_removes_its_copy() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.blz");
    let opts = CreateOptions {
        chunkshape: Some(vec![1000]),
        superchunksize: Some(4),
        ..Default::default()
    };
    let mut ds = Dataset::create_with(&p, DType::F64, &[0], &opts).unwrap();
    let walk: Vec<f64> = common::walk(20_000)
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    ds.append(&Array1::from(walk.clone()).into_dyn().view())
        .unwrap();
    // Modifications that move chunks leave dead space for compaction to reclaim.
    for k in 0..5 {
        let at = k * 4000;
        ds.write_slice(
            s![at..at + 1000],
            &Array1::from_elem(1000, k as f64).into_dyn().view(),
        )
        .unwrap();
    }
    let want = ds.read::<f64>().unwrap();
    drop(ds);
    // Room for part of the first file's copy only.
    let disk = Arc::new(SmallDisk {
        free: Arc::new(AtomicU64::new(3_000)),
    });
    let mut ds = Dataset::open_in(disk, &p, Mode::ReadWrite).unwrap();
    let err = ds.compact().unwrap_err();
    assert!(err.to_string().contains("no storage space"), "{err}");
    drop(ds);
    // Files compacted before the disk filled stay compacted (each rename is atomic); the
    // copy that did not fit is gone.
    let left: Vec<String> = std::fs::read_dir(p.join("data"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "the copy was left behind: {left:?}");
    assert_eq!(Dataset::open(&p).unwrap().read::<f64>().unwrap(), want);
}

/// Every file under `root` with its length.
fn sizes(root: &Path) -> BTreeMap<PathBuf, u64> {
    fn walk_into(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, u64>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                walk_into(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_path_buf();
                out.insert(rel, e.metadata().unwrap().len());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk_into(root, root, &mut out);
    out
}

/// An operation on the dataset at a path, through a storage.
type Op<'a> = dyn Fn(Arc<dyn Storage>, &Path) -> blz::Result<()> + 'a;

/// Runs `op` on a copy of the dataset at `base` with the storage failing at each of its
/// steps in turn (one failure the process survives, every later step going through). After
/// each failure that left the last committed state, every file must have the size it had
/// before (no file added, none grown); a failure after the commit point must leave the new
/// state. Returns (steps, failures undone).
fn fail_at_every_step(base: &Path, op: &Op<'_>, state: &dyn Fn(&Path) -> String) -> (u64, u64) {
    let work = tempfile::tempdir().unwrap();
    let before_sizes = sizes(base);
    let before = state(base);
    let clean = work.path().join("clean");
    copy_dir(base, &clean);
    let counter = Arc::new(FaultyStorage::failing_once(
        Arc::new(LocalStorage),
        u64::MAX,
    ));
    op(counter.clone(), &clean).unwrap();
    let steps = counter.operations();
    let after = state(&clean);
    assert_ne!(before, after, "the operation changed nothing");
    let mut undone = 0;
    for k in 0..steps {
        let dir = work.path().join(format!("k{k}"));
        copy_dir(base, &dir);
        let faulty = Arc::new(FaultyStorage::failing_once(Arc::new(LocalStorage), k));
        if op(faulty, &dir).is_ok() {
            // The failing step was one whose error is not the operation's (none yet).
            assert_eq!(state(&dir), after, "step {k}");
            continue;
        }
        let got = state(&dir);
        if got == before {
            assert_eq!(
                sizes(&dir),
                before_sizes,
                "step {k} of {steps}: the failed operation left bytes behind"
            );
            undone += 1;
        } else {
            assert_eq!(got, after, "step {k} of {steps}: neither state");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
    (steps, undone)
}

#[test]
fn an_append_that_fails_at_any_step_gives_back_its_space() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("a.blz");
    let opts = CreateOptions {
        chunkshape: Some(vec![1000]),
        superchunksize: Some(4),
        ..Default::default()
    };
    // 10.5 chunks: the last file has room left and the last chunk is partial, so the append
    // rewrites committed bytes (through the journal), grows a file and creates new ones.
    let walk = |n: usize| -> Vec<f64> {
        common::walk(n)
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
            .collect()
    };
    let mut ds = Dataset::create_with(&base, DType::F64, &[0], &opts).unwrap();
    ds.append(&Array1::from(walk(10_500)).into_dyn().view())
        .unwrap();
    drop(ds);
    let more = walk(9_000);
    let op = |storage: Arc<dyn Storage>, p: &Path| {
        let mut ds = Dataset::open_in(storage, p, Mode::ReadWrite)?;
        ds.append(&Array1::from(more.clone()).into_dyn().view())
    };
    let state = |p: &Path| format!("{:?}", Dataset::open(p).unwrap().read::<f64>().unwrap());
    let (steps, undone) = fail_at_every_step(&base, &op, &state);
    assert!(
        undone * 2 > steps,
        "only {undone} of {steps} failures ended before the commit point"
    );
}

#[test]
fn a_table_append_that_fails_at_any_step_gives_back_its_space() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("t.blz");
    let small = ColumnOptions {
        chunklen: Some(100),
        superchunksize: Some(2),
        ..Default::default()
    };
    let fields = vec![
        Field::new("id", DType::I64).with_options(small.clone()),
        Field::varstr("name").with_options(small),
    ];
    let rows = |n: i64, from: i64| -> Vec<(&'static str, Values)> {
        let ids: Vec<i64> = (from..from + n).collect();
        let names: Vec<String> = ids.iter().map(|i| format!("row {i}")).collect();
        vec![
            ("id", Values::from_slice(&ids)),
            ("name", Values::strings(&names)),
        ]
    };
    let mut t = Table::create(&base, fields, &TableOptions::default()).unwrap();
    t.append(&rows(250, 0)).unwrap();
    drop(t);
    let op = |storage: Arc<dyn Storage>, p: &Path| {
        let mut t = Table::open_in(storage, p, Mode::ReadWrite)?;
        t.append(&rows(400, 250))
    };
    let state = |p: &Path| {
        let t = Table::open(p).unwrap();
        format!(
            "{:?} {:?}",
            t.column("id").unwrap().to_vec::<i64>().unwrap(),
            t.column("name").unwrap().to_strings().unwrap()
        )
    };
    let (steps, undone) = fail_at_every_step(&base, &op, &state);
    assert!(
        undone * 2 > steps,
        "only {undone} of {steps} failures ended before the commit point"
    );
}

/// A tmpfs of `size` mounted on a fresh directory for the test, unmounted when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// None (with the reason printed) where mounting is impossible (not root, no mount).
    fn mount(size: &str) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Tmpfs { dir }),
            Ok(o) => {
                eprintln!(
                    "skipped: cannot mount a tmpfs: {}",
                    String::from_utf8_lossy(&o.stderr)
                );
                None
            }
            Err(e) => {
                eprintln!("skipped: cannot run mount: {e}");
                None
            }
        }
    }
    fn p(&self, name: &str) -> String {
        self.dir.path().join(name).to_string_lossy().into_owned()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

/// `n` little-endian f64 that do not compress (a fixed-seed xorshift's bits, as numbers).
fn noise_npy(n: usize) -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut data = Vec::with_capacity(n * 8);
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Finite values: keep the exponent away from all ones.
        let v = f64::from_bits(x & !(0x400u64 << 52));
        data.extend_from_slice(&v.to_le_bytes());
    }
    common::raw_npy("<f8", &format!("({n},)"), &data)
}

/// Issue 21, item 5: an append that fills the disk fails, and gives back what it wrote, so
/// that small changes and compaction work afterwards without freeing space elsewhere.
#[test]
fn cli_append_that_fills_a_tmpfs_gives_back_its_space() {
    let Some(fs) = Tmpfs::mount("64m") else {
        return;
    };
    let d = Dir::new();
    let a = fs.p("a.blz");
    ok(&["create", &a, "--random-walk", "1000000", "--seed", "7"]);
    let before = sizes(Path::new(&a));
    let big = d.p("big.npy");
    std::fs::write(&big, noise_npy(8_000_000)).unwrap();
    let err = fails(&["append", &a, "--npy", &big.to_string_lossy()]);
    assert!(
        err.contains("no storage space") || err.contains("No space"),
        "{err}"
    );
    assert_eq!(
        sizes(Path::new(&a)),
        before,
        "the failed append left bytes on the full disk"
    );
    ok(&["attrs", &a, "--set", "note=\"after the full disk\""]);
    let small = d.p("small.npy");
    std::fs::write(&small, noise_npy(1000)).unwrap();
    ok(&["append", &a, "--npy", &small.to_string_lossy()]);
    ok(&["compact", &a]);
    let info = common::json_of(&["info", &a, "--json"]);
    assert_eq!(info["shape"], serde_json::json!([1_001_000]), "{info}");
    ok(&["verify", &a]);
}
