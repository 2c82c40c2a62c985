//! Datasets on an S3-compatible object store (`tests/s3/run.sh` runs these against a local
//! moto server; without one they are skipped, saying so): round trips of arrays, tables and
//! layers through `s3://` URLs, the requests a small read costs (of the library, and of a
//! `blz` process through its request log: two, the state and the chunk), snapshots kept by readers, the conditional commit
//! refusing a stale writer, two `blz` processes racing, kills of real `blz` processes at
//! random moments, and garbage collection that spares what a reader of the previous state
//! needs. The `_in_memory` tests run the same dataset code on an in-memory object store
//! (`ObjectStorage::in_memory`) in every run, server or not.

mod common;

use blz::layer::{ColumnDef, Layer, LayerSchema, LayerWriter, LeafKind, Value};
use blz::storage::object::{collect_garbage, StateFile};
use blz::storage::{ObjectStorage, Storage};
use blz::table::{Field, Table, TableOptions, Values};
use blz::{CreateOptions, DType, Dataset, Error, Mode};
use common::{raw_npy, s3_url};
use ndarray::{s, Array1, ArrayD};
use object_store::memory::InMemory;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn opts(chunk: u64, per_file: u64) -> CreateOptions {
    CreateOptions {
        chunkshape: Some(vec![chunk]),
        superchunksize: Some(per_file),
        ..Default::default()
    }
}

fn read_all(url: &str) -> Vec<i64> {
    let ds = Dataset::open(url).unwrap();
    ds.read::<i64>().unwrap().into_iter().collect()
}

/// Where a test's dataset lives: on the test S3 server (by URL), or in an in-memory object
/// store (`ObjectStorage::in_memory`) that needs no server and runs every time. Each
/// [`Place::storage`] is a new handle, as another process would open the dataset: it loads
/// the state committed now.
struct Place {
    root: PathBuf,
    memory: Option<(Arc<InMemory>, String)>,
}

impl Place {
    /// A fresh dataset on the test S3 server, or `None` (skipped) without one.
    fn s3(name: &str) -> Option<Place> {
        s3_url(name).map(|url| Place {
            root: PathBuf::from(url),
            memory: None,
        })
    }

    /// A dataset in a new in-memory object store.
    fn memory(name: &str) -> Place {
        let store = Arc::new(InMemory::new());
        let root = ObjectStorage::in_memory(&store, name)
            .unwrap()
            .root()
            .to_path_buf();
        Place {
            root,
            memory: Some((store, name.to_string())),
        }
    }

    fn storage(&self) -> Arc<ObjectStorage> {
        Arc::new(match &self.memory {
            Some((store, prefix)) => ObjectStorage::in_memory(store, prefix).unwrap(),
            None => ObjectStorage::open_url(&self.root.to_string_lossy()).unwrap(),
        })
    }

    fn open(&self) -> Dataset {
        Dataset::open_in(self.storage(), &self.root, Mode::ReadOnly).unwrap()
    }

    fn open_rw(&self) -> Dataset {
        Dataset::open_in(self.storage(), &self.root, Mode::ReadWrite).unwrap()
    }

    fn read_all(&self) -> Vec<i64> {
        self.open().read::<i64>().unwrap().into_iter().collect()
    }
}

/// An array's life: create, append, write a slice, attributes, resize, reopen, verify,
/// compact, create again (refused, then with overwrite).
fn array_life(place: &Place) {
    let root = &place.root;
    let mut ds =
        Dataset::create_in(place.storage(), root, DType::F64, &[0], &opts(1000, 4)).unwrap();
    assert_eq!(ds.path(), root.as_path());
    let a = Array1::linspace(0.0, 1.0, 12_345);
    ds.append(&a.view().into_dyn()).unwrap();
    ds.append(&a.view().into_dyn()).unwrap();
    assert_eq!(ds.shape(), &[24_690]);
    ds.write_slice(s![5..15], &Array1::from_elem(10, -1.0).into_dyn().view())
        .unwrap();
    ds.set_attr("units", serde_json::json!("m")).unwrap();
    ds.resize(20_000).unwrap();
    drop(ds);
    let ds = place.open();
    assert_eq!(ds.shape(), &[20_000]);
    let all: ArrayD<f64> = ds.read().unwrap();
    assert_eq!(all[[4]], a[4]);
    assert_eq!(all[[7]], -1.0);
    assert_eq!(all.slice(s![15..12_345]), a.slice(s![15..]));
    assert_eq!(all.slice(s![12_345..20_000]), a.slice(s![..7_655]));
    assert_eq!(ds.attrs().unwrap()["units"], "m");
    assert!(ds.verify(|_, _| {}).is_empty());
    // Compaction rewrites objects; the dataset reads the same.
    drop(ds);
    let mut w = place.open_rw();
    w.compact().unwrap();
    drop(w);
    let again: ArrayD<f64> = place.open().read().unwrap();
    assert_eq!(again, all);
    // A create of an existing dataset is refused; with overwrite it replaces it.
    let e = Dataset::create_in(place.storage(), root, DType::I64, &[3], &opts(1000, 4))
        .err()
        .unwrap();
    assert!(e.to_string().contains("already exists"), "{e}");
    let o = CreateOptions {
        overwrite: true,
        ..Default::default()
    };
    Dataset::create_in(place.storage(), root, DType::I64, &[3], &o).unwrap();
    assert_eq!(place.read_all(), vec![0, 0, 0]);
}

#[test]
fn array_round_trip() {
    let Some(place) = Place::s3("a.blz") else {
        return;
    };
    array_life(&place);
    // The URL opens what the handles made.
    assert_eq!(read_all(&place.root.to_string_lossy()), vec![0, 0, 0]);
}

#[test]
fn array_round_trip_in_memory() {
    array_life(&Place::memory("runs/a.blz"));
}

/// A table's life: create, appends, attributes, resize, compact, reopen, verify.
fn table_life(place: &Place) {
    let root = &place.root;
    let fields = vec![Field::new("id", DType::I64), Field::varstr("name")];
    let mut t = Table::create_in(place.storage(), root, fields, &TableOptions::default()).unwrap();
    for base in [0i64, 10] {
        let ids: Vec<i64> = (base..base + 10).collect();
        let names: Vec<String> = ids.iter().map(|i| format!("n{i}")).collect();
        t.append(&[
            ("id", Values::from_slice(&ids)),
            ("name", Values::strings(&names)),
        ])
        .unwrap();
    }
    drop(t);
    let t = Table::open_in(place.storage(), root, Mode::ReadOnly).unwrap();
    assert_eq!(t.nrows(), 20);
    assert_eq!(
        t.column("id").unwrap().to_vec::<i64>().unwrap(),
        (0..20).collect::<Vec<_>>()
    );
    assert_eq!(t.column("name").unwrap().to_strings().unwrap()[13], "n13");
    assert!(t.verify(|_, _| {}).is_empty());
    drop(t);
    let mut t = Table::open_in(place.storage(), root, Mode::ReadWrite).unwrap();
    let mut attrs = serde_json::Map::new();
    attrs.insert("source".into(), serde_json::json!("test"));
    t.set_attrs(attrs).unwrap();
    t.resize(15).unwrap();
    t.compact().unwrap();
    drop(t);
    let t = Table::open_in(place.storage(), root, Mode::ReadOnly).unwrap();
    assert_eq!(t.nrows(), 15);
    assert_eq!(t.attrs().unwrap()["source"], "test");
    assert_eq!(t.column("name").unwrap().to_strings().unwrap()[14], "n14");
    assert!(t.verify(|_, _| {}).is_empty());
}

#[test]
fn table_round_trip() {
    let Some(place) = Place::s3("t.blz") else {
        return;
    };
    table_life(&place);
    assert_eq!(Table::open(&place.root).unwrap().nrows(), 15);
}

#[test]
fn table_round_trip_in_memory() {
    table_life(&Place::memory("runs/t.blz"));
}

/// A layer dataset written and read back.
fn layer_life(place: &Place) {
    let root = &place.root;
    let schema = LayerSchema::new(vec![
        ColumnDef::new("k", LeafKind::Fixed(DType::I64)),
        ColumnDef::new("v", LeafKind::VarStr),
    ]);
    let mut w = LayerWriter::create_in(place.storage(), root, schema).unwrap();
    for k in 0..1000i64 {
        w.push(&[Value::Int(2 * k), format!("v{k}").as_str().into()], None)
            .unwrap();
    }
    w.finish().unwrap();
    let s = place.storage();
    assert_eq!(
        blz::meta::dataset_kind(s.as_ref(), root),
        Some(blz::Kind::Layer)
    );
    let l = Layer::open_in(s, root).unwrap();
    assert_eq!(l.rows(0), 1000);
    assert!(l.contains(&Value::Int(1998)).unwrap());
    assert!(!l.contains(&Value::Int(7)).unwrap());
    assert!(l.verify().is_empty());
}

#[test]
fn layer_round_trip() {
    let Some(place) = Place::s3("l.blz") else {
        return;
    };
    layer_life(&place);
    assert!(blz::layer::is_layer(&place.root));
}

#[test]
fn layer_round_trip_in_memory() {
    layer_life(&Place::memory("runs/l.blz"));
}

/// Opening a dataset and reading ten elements costs the state object (which holds a copy of
/// every superchunk file's header, metadata and offsets: its front) and the one chunk: two
/// requests. A whole read costs one request per chunk.
fn ten_elements_cost_two_requests(place: &Place) {
    let mut ds = Dataset::create_in(
        place.storage(),
        &place.root,
        DType::I64,
        &[0],
        &opts(10_000, 64),
    )
    .unwrap();
    // Values that do not compress much: a chunk is larger than the first block read.
    let v = noise(1_000_000);
    ds.append(&Array1::from(v.clone()).into_dyn().view())
        .unwrap();
    drop(ds);
    let s = place.storage();
    let ds = Dataset::open_in(s.clone(), &place.root, Mode::ReadOnly).unwrap();
    let ten = ds.slice::<i64, _>(s![654_321..654_331]).unwrap();
    assert_eq!(ten.into_iter().collect::<Vec<_>>(), &v[654_321..654_331]);
    assert_eq!(s.requests(), 2, "requests to open and read ten elements");
    // Ten more in another chunk of the same superchunk (or of another): one request.
    ds.slice::<i64, _>(s![640_000..640_010]).unwrap();
    assert_eq!(s.requests(), 3);
    ds.slice::<i64, _>(s![5..15]).unwrap();
    assert_eq!(s.requests(), 4);
    // A whole read, right after open: the chunks of each superchunk file (100 chunks, 64 to
    // a file: 2 files) in one request, and nothing else.
    let s = place.storage();
    let ds = Dataset::open_in(s.clone(), &place.root, Mode::ReadOnly).unwrap();
    let all: Vec<i64> = ds.read::<i64>().unwrap().into_iter().collect();
    assert_eq!(all, v);
    assert_eq!(s.requests(), 1 + 2);
    // Every superchunk file of the state carries its front.
    let state = s.state().unwrap().unwrap();
    let fronts = state
        .files
        .iter()
        .filter(|(rel, _)| rel.starts_with("data/"))
        .map(|(_, f)| matches!(f, StateFile::Object { front: Some(_), .. }))
        .collect::<Vec<_>>();
    assert_eq!(fronts, vec![true, true], "{state:?}");
}

#[test]
fn ten_elements_after_open_cost_two_requests() {
    let Some(place) = Place::s3("r.blz") else {
        return;
    };
    ten_elements_cost_two_requests(&place);
}

#[test]
fn ten_elements_after_open_cost_two_requests_in_memory() {
    ten_elements_cost_two_requests(&Place::memory("runs/r.blz"));
}

/// `n` values that hardly compress (a fixed seed).
fn noise(n: usize) -> Vec<i64> {
    let mut rng = SplitMix(7);
    (0..n).map(|_| rng.next() as i64).collect()
}

/// On one store: a reader keeps the state it opened while a writer commits; a writer whose
/// handle loaded a state before another's commit gets `Conflict`, and nothing of its change
/// lands; reopened, it goes on from the new state.
#[test]
fn snapshots_and_a_stale_writer_in_memory() {
    let place = Place::memory("runs/c.blz");
    let mut ds = Dataset::create_in(
        place.storage(),
        &place.root,
        DType::I64,
        &[0],
        &opts(100, 4),
    )
    .unwrap();
    let first: Vec<i64> = (0..1000).collect();
    ds.append(&Array1::from(first.clone()).into_dyn().view())
        .unwrap();
    drop(ds);
    let reader = place.open();
    // A handle that loads the state now, used to write after the commit below.
    let stale_storage = place.storage();
    let mut writer = place.open_rw();
    writer
        .write_slice(s![0..10], &Array1::from_elem(10, -5i64).into_dyn().view())
        .unwrap();
    writer
        .append(&Array1::from(vec![7i64; 50]).into_dyn().view())
        .unwrap();
    drop(writer);
    assert_eq!(reader.shape(), &[1000]);
    let seen: Vec<i64> = reader.read::<i64>().unwrap().into_iter().collect();
    assert_eq!(seen, first);
    let mut stale = Dataset::open_in(stale_storage, &place.root, Mode::ReadWrite).unwrap();
    assert_eq!(stale.shape(), &[1000]);
    let e = stale
        .append(&Array1::from(vec![9i64; 5]).into_dyn().view())
        .unwrap_err();
    assert!(
        matches!(&e, Error::Conflict { path } if path == &place.root),
        "{e}"
    );
    drop(stale);
    let now = place.read_all();
    assert_eq!(now.len(), 1050);
    assert_eq!(&now[..10], &[-5; 10]);
    assert_eq!(&now[1000..], &[7; 50]);
    let mut w = place.open_rw();
    w.append(&Array1::from(vec![9i64; 5]).into_dyn().view())
        .unwrap();
    drop(w);
    assert_eq!(place.read_all()[1050..], [9; 5]);
}

/// A reader keeps the state it opened while a writer commits; the conditional commit of a
/// writer whose state is stale is refused, and nothing of it lands.
#[test]
fn snapshots_and_conflicts() {
    let Some(url) = s3_url("c.blz") else { return };
    let mut ds = Dataset::create_with(&url, DType::I64, &[0], &opts(100, 4)).unwrap();
    let first: Vec<i64> = (0..1000).collect();
    ds.append(&Array1::from(first.clone()).into_dyn().view())
        .unwrap();
    drop(ds);
    let reader = Dataset::open(&url).unwrap();
    let mut writer = Dataset::open_rw(&url).unwrap();
    writer
        .write_slice(s![0..10], &Array1::from_elem(10, -5i64).into_dyn().view())
        .unwrap();
    writer
        .append(&Array1::from(vec![7i64; 50]).into_dyn().view())
        .unwrap();
    // The reader still sees what it opened, whole.
    assert_eq!(reader.shape(), &[1000]);
    let seen: Vec<i64> = reader.read::<i64>().unwrap().into_iter().collect();
    assert_eq!(seen, first);
    // A second writer (another process: here a handle of its own storage) that opened
    // before the commits below loses the race.
    let (s2, root) = blz::storage::for_path(Path::new(&url)).unwrap();
    drop(writer);
    let mut stale = Dataset::open_in(s2, &root, Mode::ReadWrite).unwrap();
    // `stale`'s lock is in this process; another process commits meanwhile.
    let out = Command::new(env!("CARGO_BIN_EXE_blz"))
        .args(["resize", &url, "1020"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let e = stale
        .append(&Array1::from(vec![9i64; 5]).into_dyn().view())
        .unwrap_err();
    assert!(
        matches!(&e, Error::Conflict { path } if path == &root),
        "{e}"
    );
    drop(stale);
    let now = read_all(&url);
    assert_eq!(now.len(), 1020);
    assert_eq!(&now[..10], &[-5; 10]);
    assert_eq!(&now[1000..1020], &[7; 20]);
    // Reopened, the writer goes on from the new state.
    let mut w = Dataset::open_rw(&url).unwrap();
    w.append(&Array1::from(vec![9i64; 5]).into_dyn().view())
        .unwrap();
    drop(w);
    assert_eq!(read_all(&url).len(), 1025);
}

/// Collection removes retired objects and orphans older than the grace period, never
/// younger ones: a reader of the previous state reads on within the grace; past it, a read
/// of a collected object is `Changed` (open again), never wrong data.
#[test]
fn garbage_collection_spares_readers_within_the_grace() {
    let Some(url) = s3_url("g.blz") else { return };
    let mut ds = Dataset::create_with(&url, DType::I64, &[0], &opts(100, 2)).unwrap();
    let first: Vec<i64> = (0..1000).collect();
    ds.append(&Array1::from(first.clone()).into_dyn().view())
        .unwrap();
    drop(ds);
    // Two readers of this state; neither has read a chunk yet.
    let old = Dataset::open(&url).unwrap();
    let late = Dataset::open(&url).unwrap();
    let mut w = Dataset::open_rw(&url).unwrap();
    for k in 0..3i64 {
        w.write_slice(s![0..1000], &Array1::from_elem(1000, k).into_dyn().view())
            .unwrap();
    }
    drop(w);
    let s = ObjectStorage::open_url(&url).unwrap();
    let retired = s.state().unwrap().unwrap().retired.len();
    assert!(retired >= 5, "{retired} objects retired");
    let kept = collect_garbage(&s, Duration::from_secs(3600)).unwrap();
    assert!(kept.deleted.is_empty(), "{kept:?}");
    assert!(kept.kept >= retired);
    // Within the grace, a reader of the first state reads all of it.
    let seen: Vec<i64> = old.read::<i64>().unwrap().into_iter().collect();
    assert_eq!(seen, first);
    // Past it, everything unused goes; the current state reads whole.
    std::thread::sleep(Duration::from_millis(1100));
    let s = ObjectStorage::open_url(&url).unwrap();
    let gone = collect_garbage(&s, Duration::ZERO).unwrap();
    assert!(gone.deleted.len() >= retired, "{gone:?}");
    let state = ObjectStorage::open_url(&url)
        .unwrap()
        .state()
        .unwrap()
        .unwrap();
    assert!(state.retired.is_empty(), "{state:?}");
    assert_eq!(read_all(&url), vec![2; 1000]);
    // A reader of a state older than the collection meets Changed, never wrong data.
    let e = late.read::<i64>().unwrap_err();
    assert!(matches!(e, Error::Changed { .. }), "{e}");
}

fn blz_cmd(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_blz"));
    c.args(args)
        .env("BLZ_BATCH_BYTES", "262144")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c
}

/// A small deterministic generator (the kill delays, the race offsets).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

fn npy_i64(dir: &Path, name: &str, v: &[i64]) -> String {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    let p = dir.join(name);
    std::fs::write(&p, raw_npy("<i8", &format!("({},)", v.len()), &bytes)).unwrap();
    p.to_string_lossy().into_owned()
}

/// Two `blz append` processes on one dataset at once, again and again: each either commits
/// or fails with the conflict (exit 75, saying so); the dataset is the start plus the
/// appends that committed, in the order they committed, nothing lost or mixed.
#[test]
fn two_processes_racing() {
    let Some(url) = s3_url("race.blz") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut ds = Dataset::create_with(&url, DType::I64, &[0], &opts(1000, 8)).unwrap();
    ds.append(&Array1::from(vec![0i64; 500]).into_dyn().view())
        .unwrap();
    drop(ds);
    let a = npy_i64(dir.path(), "a.npy", &vec![1; 3000]);
    let b = npy_i64(dir.path(), "b.npy", &vec![2; 4000]);
    let mut conflicts = 0;
    for _ in 0..4 {
        let before = read_all(&url);
        let pa = blz_cmd(&["append", &url, "--npy", &a]).spawn().unwrap();
        let pb = blz_cmd(&["append", &url, "--npy", &b]).spawn().unwrap();
        let (oa, ob) = (
            pa.wait_with_output().unwrap(),
            pb.wait_with_output().unwrap(),
        );
        let mut committed = Vec::new();
        for (o, what) in [(&oa, 1i64), (&ob, 2)] {
            match o.status.code() {
                Some(0) => committed.push(what),
                Some(75) => {
                    conflicts += 1;
                    let msg = String::from_utf8_lossy(&o.stderr);
                    assert!(msg.contains("another writer committed first"), "{msg}");
                }
                c => panic!("{c:?}: {}", String::from_utf8_lossy(&o.stderr)),
            }
        }
        assert!(!committed.is_empty(), "neither append committed");
        let after = read_all(&url);
        assert_eq!(&after[..before.len()], &before[..]);
        let tail = &after[before.len()..];
        let runs: Vec<i64> = tail
            .chunk_by(|x, y| x == y)
            .map(|r| {
                let expect = if r[0] == 1 { 3000 } else { 4000 };
                assert_eq!(r.len() % expect, 0, "a partial append");
                r[0]
            })
            .collect();
        let mut sorted = runs.clone();
        sorted.sort_unstable();
        committed.sort_unstable();
        if runs.len() == committed.len() {
            assert_eq!(sorted, committed);
        } else {
            // Two runs of one value would merge: only possible if both were that value.
            assert_eq!(
                tail.len(),
                committed
                    .iter()
                    .map(|c| if *c == 1 { 3000 } else { 4000 })
                    .sum::<usize>()
            );
        }
    }
    eprintln!("{conflicts} conflicts in 4 races");
}

/// Kills (SIGKILL or SIGTERM) of a real `blz create` and `blz append` on an `s3://` URL at
/// random moments (fixed seed): afterwards the dataset is exactly the state before or after.
#[test]
fn kills_leave_the_old_or_the_new_state() {
    let Some(url) = s3_url("k.blz") else { return };
    let dir = tempfile::tempdir().unwrap();
    let big: Vec<i64> = (0..400_000).collect();
    let npy = npy_i64(dir.path(), "big.npy", &big);
    let mut rng = SplitMix(0x5eed_0b1e);
    // Eight chunks a file: seven files.
    let create = |u: &str| {
        blz_cmd(&[
            "create",
            u,
            "--npy",
            &npy,
            "--chunkshape",
            "8192",
            "--superchunk-size",
            "8",
        ])
    };
    // A clean run's duration bounds the delays.
    let t = Instant::now();
    let o = create(&url).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let clean = t.elapsed().as_micros() as u64;
    let mut seen = [0u32; 2];
    for trial in 0..8u32 {
        let before = read_all(&url);
        // Half the appends seal every file they leave unchanged into a manifest (merging
        // them four by four), so the kills land in those commits too.
        let seal = if trial % 4 < 2 { "1" } else { "" };
        let mut child = blz_cmd(&["append", &url, "--npy", &npy])
            .env("BLZ_S3_MANIFEST_BYTES", seal)
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_micros(rng.next() % (clean * 3 / 2 + 1)));
        let sig = if trial % 2 == 0 {
            libc::SIGKILL
        } else {
            libc::SIGTERM
        };
        // SAFETY: the child's pid, which has not been waited for yet.
        unsafe { libc::kill(child.id() as i32, sig) };
        child.wait().unwrap();
        let after = read_all(&url);
        if after == before {
            seen[0] += 1;
        } else {
            assert_eq!(after.len(), before.len() + big.len(), "trial {trial}");
            assert_eq!(&after[..before.len()], &before[..]);
            assert_eq!(&after[before.len()..], &big[..]);
            seen[1] += 1;
        }
    }
    // One more append, sealing, not killed: the dataset names manifests, and reads whole.
    let before = read_all(&url);
    let o = blz_cmd(&["append", &url, "--npy", &npy])
        .env("BLZ_S3_MANIFEST_BYTES", "1")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let state = ObjectStorage::open_url(&url)
        .unwrap()
        .state()
        .unwrap()
        .unwrap();
    assert!(!state.manifests.is_empty(), "{:?}", state.files.keys());
    let after = read_all(&url);
    assert_eq!(&after[..before.len()], &before[..]);
    assert_eq!(&after[before.len()..], &big[..]);
    // Creates killed: nothing that opens, or the whole dataset. The seven files are each
    // uploaded as soon as it is full, before the commit; what a killed create uploaded, gc
    // removes.
    let (mut absent, mut collected) = (0, 0);
    for trial in 0..6u32 {
        let Some(u) = s3_url(&format!("kc{trial}.blz")) else {
            return;
        };
        let mut child = create(&u).spawn().unwrap();
        std::thread::sleep(Duration::from_micros(rng.next() % (clean * 3 / 2 + 1)));
        let sig = if trial % 2 == 0 {
            libc::SIGKILL
        } else {
            libc::SIGTERM
        };
        // SAFETY: as above.
        unsafe { libc::kill(child.id() as i32, sig) };
        child.wait().unwrap();
        match Dataset::open(&u) {
            Err(_) => {
                assert!(!ObjectStorage::open_url(&u).unwrap().exists(Path::new(&u)));
                // The uploads it left (if any) go; after that there is nothing of blz's.
                absent += 1;
                let o = blz_cmd(&["gc", &u, "--grace", "0"]).output().unwrap();
                let err = String::from_utf8_lossy(&o.stderr);
                assert!(
                    o.status.success() || err.contains("no dataset there"),
                    "{err}"
                );
                collected += usize::from(o.status.success());
                let o = blz_cmd(&["gc", &u, "--grace", "0"]).output().unwrap();
                let err = String::from_utf8_lossy(&o.stderr);
                assert!(
                    !o.status.success() && err.contains("no dataset there"),
                    "{err}"
                );
                let o = create(&u).output().unwrap();
                assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            }
            Ok(ds) => assert!(ds.verify(|_, _| {}).is_empty()),
        }
        assert_eq!(read_all(&u), big);
    }
    eprintln!(
        "appends killed: {} left the old state, {} the new; creates killed: {absent} left \
         no dataset ({collected} of them uploads that gc removed)",
        seen[0], seen[1]
    );
}

/// A local dataset uploaded, downloaded and copied within the store reads the same at each
/// place; an existing destination is replaced only with overwrite.
#[test]
fn copy_up_down_and_across() {
    let Some(up) = s3_url("up.blz") else { return };
    let Some(across) = s3_url("across.blz") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("a.blz");
    let down = dir.path().join("down.blz");
    let fields = vec![Field::new("id", DType::I64), Field::varstr("name")];
    let mut t = Table::create(&local, fields, &TableOptions::default()).unwrap();
    let ids: Vec<i64> = (0..5000).collect();
    let names: Vec<String> = ids.iter().map(|i| format!("n{i}")).collect();
    t.append(&[
        ("id", Values::from_slice(&ids)),
        ("name", Values::strings(&names)),
    ])
    .unwrap();
    drop(t);
    let c = blz::copy::copy_dataset(&local, Path::new(&up), false).unwrap();
    assert!(c.files >= 4 && c.bytes > 0, "{c:?}");
    blz::copy::copy_dataset(Path::new(&up), &down, false).unwrap();
    blz::copy::copy_dataset(Path::new(&up), Path::new(&across), false).unwrap();
    let e = blz::copy::copy_dataset(&local, Path::new(&across), false).unwrap_err();
    assert!(e.to_string().contains("already exists"), "{e}");
    blz::copy::copy_dataset(&down, Path::new(&across), true).unwrap();
    for p in [
        local.to_string_lossy().into_owned(),
        up,
        down.to_string_lossy().into_owned(),
        across,
    ] {
        let t = Table::open(&p).unwrap();
        assert_eq!(t.column("id").unwrap().to_vec::<i64>().unwrap(), ids, "{p}");
        assert_eq!(
            t.column("name").unwrap().to_strings().unwrap()[4321],
            "n4321"
        );
        assert!(t.verify(|_, _| {}).is_empty(), "{p}");
    }
}

/// Two threads of one process writing one dataset: the in-process writer lock keeps them
/// apart as on a filesystem (the second gets `Locked`), and the dataset holds the first's
/// append whole.
#[test]
fn two_threads_racing() {
    let Some(url) = s3_url("threads.blz") else {
        return;
    };
    Dataset::create_with(&url, DType::I64, &[0], &opts(1000, 8)).unwrap();
    let barrier = std::sync::Barrier::new(2);
    let results: Vec<blz::Result<()>> = std::thread::scope(|sc| {
        let hs: Vec<_> = (1..=2i64)
            .map(|v| {
                let (url, barrier) = (&url, &barrier);
                sc.spawn(move || {
                    barrier.wait();
                    let mut ds = Dataset::open_rw(url)?;
                    // Hold the handle a moment so the two overlap.
                    std::thread::sleep(Duration::from_millis(200));
                    ds.append(&Array1::from(vec![v; 3000]).into_dyn().view())
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let ok: Vec<usize> = (0..2).filter(|&i| results[i].is_ok()).collect();
    assert_eq!(ok.len(), 1, "{results:?}");
    let other = &results[1 - ok[0]];
    assert!(matches!(other, Err(Error::Locked { .. })), "{other:?}");
    assert_eq!(read_all(&url), vec![ok[0] as i64 + 1; 3000]);
}

#[test]
fn locate_on_a_url_is_a_clear_error() {
    let Some(url) = s3_url("where.blz") else {
        return;
    };
    let mut ds = Dataset::create_with(&url, DType::F64, &[0], &opts(1000, 4)).unwrap();
    ds.append(&Array1::linspace(0.0, 1.0, 3000).view().into_dyn())
        .unwrap();
    drop(ds);
    let err = blz::locate::locate_dataset(&url).unwrap_err();
    assert!(matches!(err, blz::Error::Unsupported { .. }), "{err}");
    let out = blz_cmd(&["locate", &url]).output().unwrap();
    assert!(!out.status.success());
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(msg.contains("object store") && msg.contains(&url), "{msg}");
}

/// Removes `keys` (relative to the dataset's prefix) of the dataset at `url` behind blz's
/// back, or every object under the prefix when `keys` is `None`.
fn remove_objects(url: &str, keys: Option<&[String]>) {
    use object_store::{path::Path as OPath, ObjectStore, ObjectStoreExt};
    let (bucket, prefix) = blz::storage::object::parse_s3_url(url).unwrap();
    let store = blz::storage::object::s3_store(&bucket).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let locs: Vec<OPath> = match keys {
            Some(keys) => keys
                .iter()
                .map(|k| OPath::from(format!("{prefix}/{k}")))
                .collect(),
            None => {
                use futures::TryStreamExt;
                let listed: Vec<object_store::ObjectMeta> = store
                    .list(Some(&OPath::from(prefix.as_str())))
                    .try_collect()
                    .await
                    .unwrap();
                listed.into_iter().map(|m| m.location).collect()
            }
        };
        for l in locs {
            store.delete(&l).await.unwrap();
        }
    });
}

/// An object that the dataset's current state still names but the store lost is `NotFound`
/// naming the object, not `Changed`: reopening would meet the same state, so a retry loop
/// (exit 75) would never end. The command line exits 1 saying which object.
#[test]
fn a_lost_object_is_not_found_naming_it() {
    let Some(url) = s3_url("lost.blz") else {
        return;
    };
    let mut ds = Dataset::create_with(&url, DType::I64, &[0], &opts(100, 2)).unwrap();
    ds.append(
        &Array1::from((0..1000i64).collect::<Vec<_>>())
            .into_dyn()
            .view(),
    )
    .unwrap();
    drop(ds);
    let state = ObjectStorage::open_url(&url)
        .unwrap()
        .state()
        .unwrap()
        .unwrap();
    let key = state
        .files
        .iter()
        .find_map(|(rel, f)| match f {
            blz::storage::object::StateFile::Object { key, .. } if rel.starts_with("data/") => {
                Some(key.clone())
            }
            _ => None,
        })
        .unwrap();
    remove_objects(&url, Some(std::slice::from_ref(&key)));
    let e = Dataset::open(&url).unwrap().read::<i64>().unwrap_err();
    let object = format!("{url}/{key}");
    assert!(
        matches!(&e, Error::Io { path, source, .. }
            if source.kind() == std::io::ErrorKind::NotFound && path == Path::new(&object)),
        "{e}"
    );
    assert!(e.to_string().contains("damaged"), "{e}");
    let out = blz_cmd(&["get", &url]).output().unwrap();
    let msg = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{msg}");
    assert!(msg.contains(&object), "{msg}");
    // `verify` (which starts again after a commit) reports it at once, too.
    let out = blz_cmd(&["verify", &url]).output().unwrap();
    assert_ne!(out.status.code(), Some(75));
}

/// A dataset removed (its state object and every object gone) under an open handle: the
/// handle's next read is `NotFound` naming the dataset, not `Changed` nor corruption.
#[test]
fn a_removed_dataset_is_not_found() {
    let Some(url) = s3_url("gone.blz") else {
        return;
    };
    let mut ds = Dataset::create_with(&url, DType::I64, &[0], &opts(100, 2)).unwrap();
    ds.append(
        &Array1::from((0..1000i64).collect::<Vec<_>>())
            .into_dyn()
            .view(),
    )
    .unwrap();
    drop(ds);
    let reader = Dataset::open(&url).unwrap();
    remove_objects(&url, None);
    let e = reader.read::<i64>().unwrap_err();
    assert!(
        matches!(&e, Error::Io { path, source, .. }
            if source.kind() == std::io::ErrorKind::NotFound && path == Path::new(&url)),
        "{e}"
    );
    assert!(e.to_string().contains("removed"), "{e}");
}

/// Runs `blz args` with `BLZ_S3_REQUEST_LOG` naming a fresh file, expecting success;
/// returns its stdout and the requests it made to the store, one line each (`METHOD URL`,
/// then `bytes=A-B` for a ranged read, `if-match`/`if-none-match` for a conditional write).
fn blz_requests(args: &[&str]) -> (String, Vec<String>) {
    blz_requests_with(args, &[])
}

/// [`blz_requests`] with the environment variables `vars` set too.
fn blz_requests_with(args: &[&str], vars: &[(&str, &str)]) -> (String, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests");
    let out = Command::new(env!("CARGO_BIN_EXE_blz"))
        .args(args)
        .env("BLZ_S3_REQUEST_LOG", &log)
        .envs(vars.iter().copied())
        .output()
        .unwrap();
    let logged: Vec<String> = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    assert!(
        out.status.success(),
        "blz {args:?}: {}\nrequests:\n{}",
        String::from_utf8_lossy(&out.stderr),
        logged.join("\n")
    );
    (String::from_utf8(out.stdout).unwrap(), logged)
}

/// An array of `v` at `url` in superchunk files of 64 chunks of 10,000 elements.
fn noise_array(url: &str, v: &[i64]) {
    let mut ds = Dataset::create_with(url, DType::I64, &[0], &opts(10_000, 64)).unwrap();
    ds.append(&Array1::from(v.to_vec()).into_dyn().view())
        .unwrap();
}

/// A table of one column `id` holding `v` at `url`, laid out as [`noise_array`]'s.
fn noise_table(url: &str, v: &[i64]) {
    let o = TableOptions {
        defaults: blz::table::ColumnOptions {
            chunklen: Some(10_000),
            superchunksize: Some(64),
            ..Default::default()
        },
        ..Default::default()
    };
    let mut t = Table::create(url, vec![Field::new("id", DType::I64)], &o).unwrap();
    t.append(&[("id", Values::from_slice(v))]).unwrap();
}

/// The requests of an open and a read of ten elements of the first chunk: the state, then
/// the chunk, a range of a data object that does not start at its first byte (the header,
/// metadata and offsets table come with the state).
fn state_then_chunk(url: &str, log: &[String]) -> bool {
    log.len() == 2
        && log[0] == format!("GET {url}/meta/state")
        && log[1].starts_with(&format!("GET {url}/data/"))
        && log[1].contains(" bytes=")
        && !log[1].contains(" bytes=0-")
}

/// `blz get s3://… 0:10` of an array and of a table costs two requests
/// (`spec/object-store.md` §4): the state object and the chunk. The request log is printed
/// when it is not so.
#[test]
fn blz_get_of_ten_elements_costs_two_requests() {
    let v = noise(200_000);
    let mut wrong = Vec::new();
    for (name, make) in [
        ("cli-get.blz", noise_array as fn(&str, &[i64])),
        ("cli-get-table.blz", noise_table),
    ] {
        let Some(url) = s3_url(name) else { return };
        make(&url, &v);
        let (out, log) = blz_requests(&["get", &url, "0:10"]);
        assert!(out.contains(&v[9].to_string()), "{out}");
        if !state_then_chunk(&url, &log) {
            wrong.push(format!(
                "blz get {url} 0:10 made {} requests, not the state and the chunk:\n{}",
                log.len(),
                log.join("\n")
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

/// `blz get` of ten elements of a large chunk (2 MiB of noise, 16 Blosc blocks) fetches,
/// after the state, just the Blosc blocks holding them (the state's block index says where
/// they lie, `spec/object-store.md` §3), not the chunk; an append after it fetches nothing
/// (the chunks' headers are in the index too).
#[test]
fn blz_get_of_ten_elements_fetches_only_their_blocks() {
    let Some(url) = s3_url("cli-blocks.blz") else {
        return;
    };
    // Noise of 40 bits: it compresses a little, into Blosc blocks.
    let v: Vec<i64> = noise(3 << 18).into_iter().map(|x| x >> 24).collect();
    let mut ds = Dataset::create_with(&url, DType::I64, &[0], &opts(1 << 18, 64)).unwrap();
    ds.append(&Array1::from(v.clone()).into_dyn().view())
        .unwrap();
    drop(ds);
    let (out, log) = blz_requests(&["get", &url, "300000:300010"]);
    assert!(out.contains(&v[300_009].to_string()), "{out}");
    assert!(state_then_chunk(&url, &log), "{log:?}");
    let asked = asked_bytes(&log[1]);
    // One block of 128 KiB of noise (the ten lie in one), with Blosc's framing.
    assert!(asked < 140 << 10, "{} bytes: {log:?}", asked);
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("more.csv");
    std::fs::write(&csv, "1\n2\n3\n").unwrap();
    let csv = csv.to_str().unwrap();
    let (_, log) = blz_requests(&["append", "--csv", csv, "--column", "0", "--no-header", &url]);
    let gets: Vec<_> = log.iter().filter(|l| l.starts_with("GET ")).collect();
    assert_eq!(gets.len(), 1, "only the state: {log:?}");
}

/// The bytes a ranged GET of the request log (`GET URL bytes=A-B`) asked.
fn asked_bytes(line: &str) -> u64 {
    let range = line.split(" bytes=").nth(1).unwrap();
    let (a, b) = range.split_once('-').unwrap();
    b.parse::<u64>().unwrap() + 1 - a.parse::<u64>().unwrap()
}

/// A commit past `BLZ_S3_INLINE_INDEXES` bytes of block indexes puts the file's index in an
/// object of its own, which the state names: `blz get` of ten elements then reads the
/// state, that object (whole), and the one block; `blz gc` keeps the object. A value that
/// is not a number is an error naming the variable.
#[test]
fn blz_reads_a_block_index_kept_out_of_the_state() {
    let Some(url) = s3_url("cli-index-object.blz") else {
        return;
    };
    let v: Vec<i64> = noise(3 << 18).into_iter().map(|x| x >> 24).collect();
    let mut ds = Dataset::create_with(&url, DType::I64, &[0], &opts(1 << 18, 64)).unwrap();
    ds.append(&Array1::from(v[..2 << 18].to_vec()).into_dyn().view())
        .unwrap();
    drop(ds);
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("more.csv");
    let text: String = v[2 << 18..].iter().map(|x| format!("{x}\n")).collect();
    std::fs::write(&csv, text).unwrap();
    let csv = csv.to_str().unwrap();
    let append = ["append", "--csv", csv, "--column", "0", "--no-header", &url];
    let (_, log) = blz_requests_with(&append, &[("BLZ_S3_INLINE_INDEXES", "0")]);
    let index = log
        .iter()
        .filter_map(|l| l.strip_prefix(&format!("PUT {url}/")))
        .find(|k| k.ends_with(".blocks"))
        .unwrap_or_else(|| panic!("no index object went up: {log:?}"))
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    for at in [300_000usize, 700_000] {
        let (out, log) = blz_requests(&["get", &url, &format!("{at}:{}", at + 10)]);
        assert!(out.contains(&v[at + 9].to_string()), "{out}");
        assert_eq!(log.len(), 3, "{log:?}");
        assert_eq!(log[0], format!("GET {url}/meta/state"));
        assert!(
            log[1].starts_with(&format!("GET {url}/{index} bytes=0-")),
            "{log:?}"
        );
        let asked = asked_bytes(&log[2]);
        assert!(asked < 140 << 10, "{} bytes: {log:?}", asked);
    }
    let (_, log) = blz_requests(&["gc", &url, "--grace", "0"]);
    assert!(
        !log.iter()
            .any(|l| l.contains(&index) && l.starts_with("DELETE")),
        "gc removed the live index: {log:?}"
    );
    let (_, log) = blz_requests(&["get", &url, "300000:300010"]);
    assert_eq!(log.len(), 3, "{log:?}");
    let out = Command::new(env!("CARGO_BIN_EXE_blz"))
        .args(append)
        .env("BLZ_S3_INLINE_INDEXES", "lots")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("BLZ_S3_INLINE_INDEXES"), "{err}");
}

/// The request log of a `blz` process lists every request it makes: `blz gc` of a dataset
/// with nothing to collect reads the state, writes its clock probe, lists the prefix and
/// deletes the probe; `blz get` of ten elements
/// reads the state and then the chunk; a commit ends with the conditional write of the
/// state. A log file that cannot be
/// opened is an error naming the variable.
#[test]
fn the_request_log_counts_a_blz_process() {
    let Some(url) = s3_url("cli-log.blz") else {
        return;
    };
    let v = noise(200_000);
    noise_array(&url, &v);
    let (_, log) = blz_requests(&["gc", &url]);
    let probe = log
        .get(1)
        .and_then(|l| l.strip_prefix(&format!("PUT {url}/")))
        .filter(|p| p.starts_with("gc-clock."))
        .unwrap_or_else(|| panic!("no clock probe written:\n{}", log.join("\n")));
    assert_eq!(
        log,
        vec![
            format!("GET {url}/meta/state"),
            format!("PUT {url}/{probe}"),
            format!("LIST {url}/"),
            format!("DELETE {url}/{probe}"),
        ]
    );
    let (out, log) = blz_requests(&["get", &url, "0:10"]);
    assert!(out.contains(&v[9].to_string()), "{out}");
    assert!(state_then_chunk(&url, &log), "{}", log.join("\n"));
    let (_, log) = blz_requests(&["resize", &url, "150000"]);
    assert_eq!(
        log.last(),
        Some(&format!("PUT {url}/meta/state if-match")),
        "{}",
        log.join("\n")
    );
    let out = Command::new(env!("CARGO_BIN_EXE_blz"))
        .args(["get", &url, "0:10"])
        .env("BLZ_S3_REQUEST_LOG", "/nonexistent/dir/requests")
        .output()
        .unwrap();
    let msg = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{msg}");
    assert!(msg.contains("BLZ_S3_REQUEST_LOG"), "{msg}");
}

/// The worker of [`staged_writes_from_many_processes`]: this test binary run again with
/// `BLZ_TEST_STAGED_WORKER=<session URL>|<first row>|<rows>`, writing those rows (of
/// `0..`, as i64) into the staged write's session; without the variable, nothing.
#[test]
fn staged_worker_process() {
    let Ok(job) = std::env::var("BLZ_TEST_STAGED_WORKER") else {
        return;
    };
    let parts: Vec<&str> = job.split('|').collect();
    let (first, rows): (u64, u64) = (parts[1].parse().unwrap(), parts[2].parse().unwrap());
    let bytes: Vec<u8> = (first as i64..(first + rows) as i64)
        .flat_map(|i| i.to_ne_bytes())
        .collect();
    if std::env::var_os("BLZ_TEST_STAGED_HANG").is_some() {
        // Killed before it uploads anything.
        std::thread::sleep(Duration::from_secs(600));
    }
    blz::array::staged::write_rows(Path::new(parts[0]), first, &bytes).unwrap();
}

fn staged_worker(dir: &Path, first: u64, rows: u64, hang: bool) -> std::process::Child {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([
        "--exact",
        "staged_worker_process",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(
        "BLZ_TEST_STAGED_WORKER",
        format!("{}|{first}|{rows}", dir.display()),
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    if hang {
        c.env("BLZ_TEST_STAGED_HANG", "1");
    }
    c.spawn().unwrap()
}

/// A staged append to an `s3://` dataset whose regions are written by separate worker
/// processes (one of them killed and its region written again by another), committed once
/// by this process; a second one whose writer gives up leaves the dataset as it was, and
/// gc removes its uploads.
#[test]
fn staged_writes_from_many_processes() {
    let Some(url) = s3_url("staged.blz") else {
        return;
    };
    let mut ds = Dataset::create_with(&url, DType::I64, &[0], &opts(1000, 4)).unwrap();
    ds.append(
        &Array1::from((0..2_500i64).collect::<Vec<_>>())
            .into_dyn()
            .view(),
    )
    .unwrap();
    let s = ds.begin_staged(40_000).unwrap();
    assert!(s
        .dir()
        .to_str()
        .unwrap()
        .starts_with(&format!("{url}/staged/")));
    let regions = s.regions(1);
    assert_eq!(regions.len(), 10);
    let mut killed = staged_worker(s.dir(), regions[0].0, regions[0].1, true);
    let workers: Vec<_> = regions
        .iter()
        .map(|&(first, rows)| staged_worker(s.dir(), first, rows, false))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    killed.kill().unwrap();
    killed.wait().unwrap();
    for w in workers {
        let out = w.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Nothing is visible before the commit.
    assert_eq!(read_all(&url), (0..2_500).collect::<Vec<i64>>());
    let head: Vec<u8> = (2_500i64..(2_500 + s.head_rows() as i64))
        .flat_map(|i| i.to_ne_bytes())
        .collect();
    ds.commit_staged(s, &head).unwrap();
    drop(ds);
    let want: Vec<i64> = (0..42_500).collect();
    assert_eq!(read_all(&url), want);

    // A writer that gives up after its workers uploaded: the dataset is as it was.
    let mut ds = Dataset::open_rw(&url).unwrap();
    let s = ds.begin_staged(8_000).unwrap();
    for (first, rows) in s.regions(1) {
        let out = staged_worker(s.dir(), first, rows, false)
            .wait_with_output()
            .unwrap();
        assert!(out.status.success());
    }
    std::mem::forget(s);
    drop(ds);
    assert_eq!(read_all(&url), want);
    let s = ObjectStorage::open_url(&url).unwrap();
    let c = collect_garbage(&s, Duration::ZERO).unwrap();
    assert!(c.deleted.iter().any(|k| k.starts_with("staged/")), "{c:?}");
    assert_eq!(read_all(&url), want);
}

/// A dataset whose early files' entries are in manifests (40 appends of one file each,
/// sealing at 512 bytes): `blz get` of its last ten elements costs the state and the chunk,
/// as for a dataset with no manifest (the state holds the last files); of its first ten,
/// the state, the manifest holding the first file (no other), then the chunk. `blz append`
/// reads no manifest.
#[test]
fn blz_get_of_the_last_ten_elements_and_append_read_no_manifest() {
    let Some(url) = s3_url("cli-get-manifests.blz") else {
        return;
    };
    let v = noise(40 * 100);
    let storage = |create: bool| {
        let s = if create {
            ObjectStorage::open_url_to_create(&url)
        } else {
            ObjectStorage::open_url(&url)
        }
        .unwrap();
        s.set_manifest_bytes(512);
        Arc::new(s)
    };
    let s = storage(true);
    let root = s.root().to_path_buf();
    drop(Dataset::create_in(s, &root, DType::I64, &[0], &opts(100, 1)).unwrap());
    for part in v.chunks(100) {
        let mut ds = Dataset::open_in(storage(false), &root, Mode::ReadWrite).unwrap();
        ds.append(&Array1::from(part.to_vec()).into_dyn().view())
            .unwrap();
    }
    let state = storage(false).state().unwrap().unwrap();
    assert!(!state.manifests.is_empty(), "{state:?}");

    let (out, log) = blz_requests(&["get", &url, "3990:4000"]);
    assert!(out.contains(&v[3999].to_string()), "{out}");
    assert!(state_then_chunk(&url, &log), "{log:#?}");

    let (out, log) = blz_requests(&["get", &url, "0:10"]);
    assert!(out.contains(&v[9].to_string()), "{out}");
    let holding: Vec<_> = state
        .manifests
        .iter()
        .filter(|m| m.may_hold("data/__1__.bin"))
        .collect();
    assert!(holding.len() < state.manifests.len(), "{state:?}");
    let k = holding.len();
    assert_eq!(log.len(), k + 2, "{log:#?}");
    assert_eq!(log[0], format!("GET {url}/meta/state"));
    for m in &state.manifests {
        let n = log.iter().filter(|l| l.contains(&m.key)).count();
        assert_eq!(n, usize::from(m.may_hold("data/__1__.bin")), "{log:#?}");
    }
    assert!(
        log[k + 1].starts_with(&format!("GET {url}/data/")),
        "{log:#?}"
    );

    // `blz append` of one chunk: the state, the new file's upload, the state's write; no
    // manifest (the new file is past every manifest's names).
    let dir = tempfile::tempdir().unwrap();
    let more: Vec<i64> = (7..107).collect();
    let npy = npy_i64(dir.path(), "more.npy", &more);
    let (_, log) = blz_requests(&["append", &url, "--npy", &npy]);
    assert_eq!(log.len(), 3, "{log:#?}");
    assert_eq!(log[0], format!("GET {url}/meta/state"));
    assert!(log[1].starts_with(&format!("PUT {url}/data/")), "{log:#?}");
    assert!(
        log[2].starts_with(&format!("PUT {url}/meta/state")),
        "{log:#?}"
    );
    let (out, _) = blz_requests(&["get", &url, "4095:4100"]);
    assert!(out.contains("106"), "{out}");
}

/// A table on the object store named in a query by its quoted `s3://` URL, as the README
/// shows, answers as one named with `--table`.
#[test]
fn sql_over_a_table_named_by_its_quoted_url() {
    let Some(url) = s3_url("q.blz") else { return };
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("q.csv");
    let mut text = String::from("k,x\n");
    for i in 0..500 {
        text.push_str(&format!("{i},{}\n", i as f64 / 2.0));
    }
    std::fs::write(&csv, text).unwrap();
    let blz = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_blz"))
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "blz {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    blz(&["create", &url, "--csv", csv.to_str().unwrap()]);
    let quoted = format!("SELECT count(*) AS n, sum(k) AS s FROM \"{url}\" WHERE k >= 100");
    let by_name = "SELECT count(*) AS n, sum(k) AS s FROM t WHERE k >= 100";
    let a = blz(&["sql", &quoted, "--format", "csv"]);
    let b = blz(&[
        "sql",
        by_name,
        "--table",
        &format!("t={url}"),
        "--format",
        "csv",
    ]);
    assert_eq!(a, b);
    assert_eq!(a.lines().nth(1), Some("400,119800"), "{a}");
}
