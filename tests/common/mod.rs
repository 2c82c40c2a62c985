//! Helpers shared by the integration tests of the library (here) and of the command line
//! (`cli/tests/common/mod.rs` includes this file and adds the helpers that run the `blz`
//! binary): scratch directories, copying directory trees, corrupting a superchunk file and
//! sample data. Each test binary uses its own subset, hence the `dead_code` allowance.

#![allow(
    dead_code,
    reason = "each test binary uses its own subset of these helpers"
)]

use blz::storage::{LocalStorage, OpenMode, Storage};
use blz_format::blpk::SuperchunkReader;
use std::path::{Path, PathBuf};

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A temporary directory, naming the files in it.
pub struct Dir(tempfile::TempDir);

impl Dir {
    pub fn new() -> Dir {
        Dir(tempfile::tempdir().expect("tempdir"))
    }
    pub fn p(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }
    pub fn s(&self, name: &str) -> String {
        self.p(name).to_string_lossy().into_owned()
    }
    /// Writes `content` to the file `name`; returns its path.
    pub fn write(&self, name: &str, content: &str) -> String {
        std::fs::write(self.p(name), content).expect("write");
        self.s(name)
    }
}

/// Copies the directory tree `from` to `to`.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
        }
    }
}

/// Flips one byte inside chunk `k` of the superchunk file `file`, past the chunk's blosc
/// header, and syncs the file.
pub fn flip_byte_in_chunk(file: &Path, k: u64) {
    let st = LocalStorage;
    let r = SuperchunkReader::open(st.open(file, OpenMode::Read).unwrap()).unwrap();
    let off = r.layout().offsets[k as usize];
    let len = u64::from(r.chunk_info(k).unwrap().header.cbytes);
    drop(r);
    let f = st.open(file, OpenMode::ReadWrite).unwrap();
    let at = off + 16 + (len - 16) / 2;
    let mut b = [0u8];
    f.read_at(at, &mut b).unwrap();
    f.write_at(at, &[b[0] ^ 0x5a]).unwrap();
    f.sync().unwrap();
}

/// `n` little-endian f64 of a bounded random walk: compressible, but not trivially.
pub fn walk(n: usize) -> Vec<u8> {
    let mut x = 0.0f64;
    (0..n)
        .flat_map(|i| {
            x += ((i * 7919) % 13) as f64 - 6.0;
            x.to_le_bytes()
        })
        .collect()
}

/// Every file under `root` as `storage` shows it: relative path -> bytes.
pub fn tree(storage: &dyn Storage, root: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    fn walk_into(
        storage: &dyn Storage,
        root: &Path,
        dir: &Path,
        out: &mut std::collections::BTreeMap<PathBuf, Vec<u8>>,
    ) {
        for name in storage.list(dir).expect("list") {
            let p = dir.join(&name);
            if storage.is_dir(&p) {
                walk_into(storage, root, &p, out);
            } else {
                let f = storage.open(&p, OpenMode::Read).expect("open");
                let mut buf = vec![0u8; f.len().expect("len") as usize];
                f.read_at(0, &mut buf).expect("read");
                out.insert(p.strip_prefix(root).expect("under root").to_path_buf(), buf);
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    walk_into(storage, root, root, &mut out);
    out
}

/// When a committed journal is pending at `dir` (a writer crashed while applying it):
/// checks that the read-only view of it shows exactly the files a writer's recovery leaves
/// (recovering a copy), changes nothing in `dir`, and returns the view.
pub fn check_journal_view(dir: &Path) -> Option<std::sync::Arc<dyn Storage>> {
    let local = blz::storage::local();
    if !blz::recovery::pending(local.as_ref(), dir) {
        return None;
    }
    let on_disk = tree(&LocalStorage, dir);
    let view = blz::recovery::pending_view(&local, dir)
        .expect("view of the pending journal")
        .expect("a journal is pending");
    let recovered = dir.with_extension("recovered");
    copy_dir(dir, &recovered);
    assert!(blz::recovery::recover(local.as_ref(), &recovered).expect("recover"));
    let want = tree(&LocalStorage, &recovered);
    let got = tree(view.as_ref(), dir);
    let names =
        |t: &std::collections::BTreeMap<PathBuf, Vec<u8>>| t.keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        names(&got),
        names(&want),
        "files in the view and after recovery"
    );
    for (p, bytes) in &want {
        assert!(
            got[p] == *bytes,
            "{}: the view's bytes differ from the recovered file",
            p.display()
        );
    }
    assert!(
        tree(&LocalStorage, dir) == on_disk,
        "the view changed files on disk"
    );
    std::fs::remove_dir_all(&recovered).expect("remove the recovered copy");
    Some(view)
}

/// The number of cases a property test runs: `PROPTEST_CASES` when set (for long soak runs,
/// e.g. `PROPTEST_CASES=2000 cargo test --release --test dataset_model`), otherwise
/// `default`, what the suite runs every time.
pub fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The seed every property test starts from unless `PROPTEST_RNG_SEED` names another: the
/// suite is deterministic, so a red run is a regression and never an unlucky draw. Soak
/// runs pass a random seed and many cases (README, "Testing").
pub const SEED: u64 = 0x0b12_5eed;

/// A property test's configuration: `cases(default)` cases from a fixed seed (see [`SEED`]).
pub fn config(default: u32) -> proptest::test_runner::Config {
    use proptest::test_runner::{Config, RngSeed};
    let mut c = Config {
        cases: cases(default),
        ..Config::default()
    };
    if c.rng_seed == RngSeed::Random {
        c.rng_seed = RngSeed::Fixed(SEED);
    }
    c
}

/// The bytes of a .npy file written by hand (for dtypes and byte orders ndarray-npy does not
/// write). `descr` is a type string such as `>f8`, or a record's list written as Python
/// does, `[('a', '<i4'), ('b', [('x', '>f8')])]`.
pub fn raw_npy(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
    let descr = if descr.starts_with('[') {
        descr.to_string()
    } else {
        format!("'{descr}'")
    };
    let dict = format!("{{'descr': {descr}, 'fortran_order': False, 'shape': {shape}, }}");
    let pad = (64 - (10 + dict.len() + 1) % 64) % 64;
    let header = format!("{dict}{}\n", " ".repeat(pad));
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

/// Holds the writer lock of the dataset (or staging directory) at `root` as another writer
/// would (`flock` on `meta/lock`, created if needed) until dropped.
pub struct OtherWriter {
    _file: std::fs::File,
}

impl OtherWriter {
    pub fn lock(root: &Path) -> OtherWriter {
        std::fs::create_dir_all(root.join("meta")).expect("meta directory");
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(root.join("meta").join("lock"))
            .expect("lock file");
        f.try_lock().expect("the lock is free");
        OtherWriter { _file: f }
    }
}

/// A fresh dataset URL on the test S3 server (`tests/s3/run.sh` sets `BLZ_S3_TEST_BUCKET`
/// and the AWS variables), or `None` (the test is skipped, saying so) when no server is set.
pub fn s3_url(name: &str) -> Option<String> {
    let Ok(bucket) = std::env::var("BLZ_S3_TEST_BUCKET") else {
        eprintln!("skipped: no S3 test server (run through tests/s3/run.sh)");
        return None;
    };
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    Some(format!(
        "s3://{bucket}/t{}-{nanos}-{n}/{name}",
        std::process::id()
    ))
}
