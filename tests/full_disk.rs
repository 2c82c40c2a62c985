//! A full disk in the middle of a change: the change fails with the system's error, the
//! dataset keeps its last committed state, and nothing blz wrote for the change stays behind
//! to keep the disk full.

mod common;

use blz::storage::{LocalStorage, OpenMode, Storage, StorageFile};
use blz::{CreateOptions, DType, Dataset, Mode};
use ndarray::{s, Array1};
use std::path::Path;
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

impl StorageFile for SmallFile {
    fn len(&self) -> blz::Result<u64> {
        self.inner.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> blz::Result<()> {
        self.inner.read_at(offset, buf)
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
    fn set_len(&self, len: u64) -> blz::Result<()> {
        self.inner.set_len(len)
    }
    fn sync(&self) -> blz::Result<()> {
        self.inner.sync()
    }
    fn path(&self) -> &Path {
        self.inner.path()
    }
}

impl Storage for SmallDisk {
    fn open(&self, path: &Path, mode: OpenMode) -> blz::Result<Box<dyn StorageFile>> {
        Ok(Box::new(SmallFile {
            inner: LocalStorage.open(path, mode)?,
            free: Arc::clone(&self.free),
        }))
    }
    fn list(&self, dir: &Path) -> blz::Result<Vec<String>> {
        LocalStorage.list(dir)
    }
    fn rename(&self, from: &Path, to: &Path) -> blz::Result<()> {
        LocalStorage.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> blz::Result<()> {
        LocalStorage.remove_file(path)
    }
    fn remove_dir_all(&self, path: &Path) -> blz::Result<()> {
        LocalStorage.remove_dir_all(path)
    }
    fn create_dir_all(&self, path: &Path) -> blz::Result<()> {
        LocalStorage.create_dir_all(path)
    }
    fn lock(&self, path: &Path) -> blz::Result<blz::storage::LockGuard> {
        LocalStorage.lock(path)
    }
    fn exists(&self, path: &Path) -> bool {
        LocalStorage.exists(path)
    }
    fn is_dir(&self, path: &Path) -> bool {
        LocalStorage.is_dir(path)
    }
    fn sync_dir(&self, dir: &Path) -> blz::Result<()> {
        LocalStorage.sync_dir(dir)
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
