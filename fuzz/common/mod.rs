//! Shared by the fuzz targets that open whole datasets: an in-memory [`Storage`] loaded from
//! a directory written by blz, and the writing of a target's own starting inputs.

#![allow(dead_code)]

use blz::storage::{OpenMode, Storage, StorageFile};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A file may not grow past this; only a bug would plan such a write on the targets' small
/// datasets.
const MAX_FILE: u64 = 64 << 20;

type Bytes = Arc<Mutex<Vec<u8>>>;

/// A directory tree held in memory.
#[derive(Debug, Default)]
pub struct MemStorage {
    files: Mutex<BTreeMap<PathBuf, Bytes>>,
    dirs: Mutex<BTreeSet<PathBuf>>,
    locks: Arc<Mutex<BTreeSet<PathBuf>>>,
}

fn not_found(op: &'static str, path: &Path) -> blz::Error {
    blz::Error::io(op, path, std::io::Error::from(std::io::ErrorKind::NotFound))
}

impl MemStorage {
    /// Loads every file below `dir` (paths keep the `dir` prefix).
    pub fn load(dir: &Path) -> MemStorage {
        let m = MemStorage::default();
        fn walk(m: &MemStorage, d: &Path) {
            m.dirs.lock().unwrap().insert(d.to_path_buf());
            for e in std::fs::read_dir(d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    walk(m, &p);
                } else {
                    m.put(&p, std::fs::read(&p).unwrap());
                }
            }
        }
        walk(&m, dir);
        m
    }

    /// A deep copy.
    pub fn snapshot(&self) -> MemStorage {
        let files = self
            .files
            .lock()
            .unwrap()
            .iter()
            .map(|(p, b)| (p.clone(), Arc::new(Mutex::new(b.lock().unwrap().clone()))))
            .collect();
        MemStorage {
            files: Mutex::new(files),
            dirs: Mutex::new(self.dirs.lock().unwrap().clone()),
            locks: Arc::default(),
        }
    }

    /// Replaces (or creates) a file.
    pub fn put(&self, path: &Path, data: Vec<u8>) {
        let mut dirs = self.dirs.lock().unwrap();
        for a in path.ancestors().skip(1) {
            dirs.insert(a.to_path_buf());
        }
        self.files
            .lock()
            .unwrap()
            .insert(path.to_path_buf(), Arc::new(Mutex::new(data)));
    }

    /// The content of a file.
    pub fn get(&self, path: &Path) -> Option<Vec<u8>> {
        self.files
            .lock()
            .unwrap()
            .get(path)
            .map(|b| b.lock().unwrap().clone())
    }

    /// Every file, sorted.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.files.lock().unwrap().keys().cloned().collect()
    }
}

struct MemFile {
    bytes: Bytes,
    path: PathBuf,
    writable: bool,
}

impl StorageFile for MemFile {
    fn len(&self) -> blz::Result<u64> {
        Ok(self.bytes.lock().unwrap().len() as u64)
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> blz::Result<()> {
        let b = self.bytes.lock().unwrap();
        let src = usize::try_from(offset)
            .ok()
            .and_then(|s| Some(s..s.checked_add(buf.len())?))
            .and_then(|r| b.get(r))
            .ok_or_else(|| {
                blz::Error::io(
                    "read",
                    &self.path,
                    std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
                )
            })?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> blz::Result<()> {
        assert!(
            self.writable,
            "write to {} opened read-only",
            self.path.display()
        );
        let end = offset + data.len() as u64;
        assert!(
            end <= MAX_FILE,
            "write to {} up to {end}",
            self.path.display()
        );
        let mut b = self.bytes.lock().unwrap();
        if (b.len() as u64) < end {
            b.resize(end as usize, 0);
        }
        b[offset as usize..end as usize].copy_from_slice(data);
        Ok(())
    }
    fn set_len(&self, len: u64) -> blz::Result<()> {
        assert!(
            self.writable,
            "set_len on {} opened read-only",
            self.path.display()
        );
        assert!(
            len <= MAX_FILE,
            "set_len of {} to {len}",
            self.path.display()
        );
        self.bytes.lock().unwrap().resize(len as usize, 0);
        Ok(())
    }
    fn sync(&self) -> blz::Result<()> {
        Ok(())
    }
    fn path(&self) -> &Path {
        &self.path
    }
}

impl Storage for MemStorage {
    fn open(&self, path: &Path, mode: OpenMode) -> blz::Result<Box<dyn StorageFile>> {
        let bytes = match mode {
            OpenMode::Create => {
                self.put(path, Vec::new());
                self.files.lock().unwrap()[path].clone()
            }
            _ => self
                .files
                .lock()
                .unwrap()
                .get(path)
                .cloned()
                .ok_or_else(|| not_found("open", path))?,
        };
        Ok(Box::new(MemFile {
            bytes,
            path: path.to_path_buf(),
            writable: mode != OpenMode::Read,
        }))
    }
    fn list(&self, dir: &Path) -> blz::Result<Vec<String>> {
        if !self.is_dir(dir) {
            return Err(not_found("list", dir));
        }
        let mut names = BTreeSet::new();
        let files = self.files.lock().unwrap();
        let dirs = self.dirs.lock().unwrap();
        for p in files.keys().chain(dirs.iter()) {
            if p.parent() == Some(dir) {
                if let Some(n) = p.file_name() {
                    names.insert(n.to_string_lossy().into_owned());
                }
            }
        }
        Ok(names.into_iter().collect())
    }
    fn rename(&self, from: &Path, to: &Path) -> blz::Result<()> {
        let mut files = self.files.lock().unwrap();
        let b = files
            .remove(from)
            .ok_or_else(|| not_found("rename", from))?;
        files.insert(to.to_path_buf(), b);
        Ok(())
    }
    fn remove_file(&self, path: &Path) -> blz::Result<()> {
        self.files.lock().unwrap().remove(path);
        Ok(())
    }
    fn remove_dir_all(&self, path: &Path) -> blz::Result<()> {
        self.files
            .lock()
            .unwrap()
            .retain(|p, _| !p.starts_with(path));
        self.dirs.lock().unwrap().retain(|p| !p.starts_with(path));
        Ok(())
    }
    fn create_dir_all(&self, path: &Path) -> blz::Result<()> {
        let mut dirs = self.dirs.lock().unwrap();
        for a in path.ancestors() {
            dirs.insert(a.to_path_buf());
        }
        Ok(())
    }
    fn exists(&self, path: &Path) -> bool {
        self.files.lock().unwrap().contains_key(path) || self.is_dir(path)
    }
    fn is_dir(&self, path: &Path) -> bool {
        self.dirs.lock().unwrap().contains(path)
    }
    fn sync_dir(&self, _dir: &Path) -> blz::Result<()> {
        Ok(())
    }
    fn lock(&self, path: &Path) -> blz::Result<blz::storage::LockGuard> {
        // One holder at a time in this process, as blz's own storages: a second writer
        // handle on the same dataset is refused.
        if !self.locks.lock().unwrap().insert(path.to_path_buf()) {
            return Err(blz::Error::Locked {
                path: path.to_path_buf(),
                holder: Some(std::process::id()),
            });
        }
        Ok(Box::new(Held(Arc::clone(&self.locks), path.to_path_buf())))
    }
}

/// A lock of [`MemStorage`], released when dropped.
struct Held(Arc<Mutex<BTreeSet<PathBuf>>>, PathBuf);

impl Drop for Held {
    fn drop(&mut self) {
        if let Ok(mut held) = self.0.lock() {
            held.remove(&self.1);
        }
    }
}

/// When `BLZ_FUZZ_SEEDS` names a directory, writes a target's starting inputs there (once
/// per process): `fuzz/seed.sh` runs each target that builds its own inputs this way.
pub fn write_seeds(seeds: impl FnOnce() -> Vec<(String, Vec<u8>)>) {
    static DONE: std::sync::Once = std::sync::Once::new();
    if let Some(dir) = std::env::var_os("BLZ_FUZZ_SEEDS") {
        DONE.call_once(|| {
            let dir = PathBuf::from(dir);
            std::fs::create_dir_all(&dir).unwrap();
            for (name, bytes) in seeds() {
                std::fs::write(dir.join(name), bytes).unwrap();
            }
        });
    }
}

/// Writes a small layer dataset at `path`: an int64 column (data chunks of 4 rows, index
/// fan-out 2, so three index levels, and a filter), a varstr column (3 rows a chunk, a
/// filter) and an int64 weight.
pub fn write_layer(path: &Path) {
    use blz::layer::{ColumnDef, FilterSetting, LayerSchema, LayerWriter, LeafKind, Value};
    use blz::DType;
    let schema = LayerSchema::new(vec![
        ColumnDef::new("k", LeafKind::Fixed(DType::I64))
            .with_chunklen(4)
            .with_fanout(2)
            .with_filter(FilterSetting::BitsPerValue(10)),
        ColumnDef::new("v", LeafKind::VarStr)
            .with_chunklen(3)
            .with_fanout(2)
            .with_filter(FilterSetting::Fpr(0.01)),
    ])
    .with_weight("w", DType::I64);
    let mut w = LayerWriter::create(path, schema).unwrap();
    for k in 0..23i64 {
        for j in 0..(k % 3 + 1) {
            let v = format!("v{j}-{}", "x".repeat((k % 4) as usize));
            w.push(&[Value::Int(k * 3 - 20), v.into()], Some(Value::Int(k * j)))
                .unwrap();
        }
    }
    w.finish().unwrap();
}
