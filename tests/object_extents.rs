//! Files held in extents on an object store (`spec/object-store.md` §3, §4): a commit
//! uploads only the bytes a transaction wrote (and the file's front), the rest of each file
//! staying in the objects that held it; a file is rewritten whole when its extents grow past
//! `MAX_EXTENTS` or the objects it names hold more than twice its length. Everything reads
//! back equal to a plain model; garbage collection keeps every object an extent names. All
//! against the in-memory store, so these run every time, with no server.

mod common;
#[macro_use]
mod forward;

use blz::storage::object::{
    collect_garbage, StateFile, MAX_EXTENTS, STATE_KEY, STATE_VERSION_EXTENTS, STATE_VERSION_WHOLE,
};
use blz::storage::ObjectStorage;
use blz::{CreateOptions, DType, Dataset, Error, Mode};
use futures::executor::block_on;
use ndarray::{s, Array1};
use object_store::memory::InMemory;
use object_store::path::Path as OPath;
use object_store::{
    GetOptions, GetResult, ObjectMeta, ObjectStore, ObjectStoreExt, PutOptions, PutPayload,
    PutResult,
};
use proptest::prelude::*;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The in-memory store, counting the bytes PUT (the state object apart), with one dataset
/// at `prefix` (one per store: the writer lock is per process and path).
#[derive(Debug)]
struct Counting {
    prefix: String,
    inner: InMemory,
    data_bytes: AtomicU64,
    state_bytes: AtomicU64,
    /// The keys of the objects PUT (the state object apart), in order.
    data_keys: std::sync::Mutex<Vec<String>>,
    /// When set, a GET of the state is held until an object other than the state has been
    /// PUT (or 20 s have passed); `state_waited_for_put` then says which came first.
    hold_state: std::sync::atomic::AtomicBool,
    state_waited_for_put: std::sync::atomic::AtomicBool,
    /// When set, every PUT of an object other than the state is refused (and counted).
    refuse_data: std::sync::atomic::AtomicBool,
    refused: AtomicU64,
}

static STORES: AtomicU64 = AtomicU64::new(0);

impl Counting {
    fn new() -> Arc<Counting> {
        Arc::new(Counting {
            prefix: format!("runs/x{}.blz", STORES.fetch_add(1, Ordering::SeqCst)),
            inner: InMemory::new(),
            data_bytes: AtomicU64::new(0),
            state_bytes: AtomicU64::new(0),
            data_keys: std::sync::Mutex::default(),
            hold_state: Default::default(),
            state_waited_for_put: Default::default(),
            refuse_data: Default::default(),
            refused: AtomicU64::new(0),
        })
    }

    fn taken(&self) -> (u64, u64) {
        (
            self.data_bytes.swap(0, Ordering::SeqCst),
            self.state_bytes.swap(0, Ordering::SeqCst),
        )
    }
}

forwarding_object_store!(Counting {
    async fn put_opts(
        &self,
        location: &OPath,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let n = payload.content_length() as u64;
        if !location.as_ref().ends_with(STATE_KEY) && self.refuse_data.load(Ordering::SeqCst) {
            self.refused.fetch_add(1, Ordering::SeqCst);
            return Err(object_store::Error::Generic {
                store: "counting",
                source: Box::new(std::io::Error::other("access denied (test fault)")),
            });
        }
        if location.as_ref().ends_with(STATE_KEY) {
            self.state_bytes.fetch_add(n, Ordering::SeqCst);
        } else {
            self.data_bytes.fetch_add(n, Ordering::SeqCst);
        }
        let r = self.inner.put_opts(location, payload, opts).await;
        if !location.as_ref().ends_with(STATE_KEY) {
            self.data_keys.lock().unwrap().push(location.to_string());
        }
        r
    }

    async fn get_opts(
        &self,
        location: &OPath,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        if location.as_ref().ends_with(STATE_KEY) && self.hold_state.load(Ordering::SeqCst) {
            // Blocks the thread that reads the state (a create's own: blz's uploads run
            // elsewhere).
            let put = put_soon(self, "data/");
            self.state_waited_for_put.store(put, Ordering::SeqCst);
        }
        self.inner.get_opts(location, options).await
    }
});

fn handle(store: &Arc<Counting>) -> Arc<ObjectStorage> {
    let s: Arc<dyn ObjectStore> = Arc::clone(store) as Arc<dyn ObjectStore>;
    Arc::new(ObjectStorage::new(s, PathBuf::from("memory://"), &store.prefix).unwrap())
}

fn open(store: &Arc<Counting>, mode: Mode) -> Dataset {
    let s = handle(store);
    let root = s.root().to_path_buf();
    Dataset::open_in(s, &root, mode).unwrap()
}

fn read(store: &Arc<Counting>) -> Vec<i64> {
    open(store, Mode::ReadOnly)
        .read::<i64>()
        .unwrap()
        .into_iter()
        .collect()
}

/// Values that do not compress much (a linear congruential walk).
fn noisy(start: u64, n: usize) -> Vec<i64> {
    let mut x = start.wrapping_mul(6364136223846793005).wrapping_add(1);
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 11) as i64
        })
        .collect()
}

fn data_files(store: &Arc<Counting>) -> Vec<(String, StateFile)> {
    handle(store)
        .state()
        .unwrap()
        .unwrap()
        .files
        .into_iter()
        .filter(|(rel, _)| rel.starts_with("data/"))
        .collect()
}

/// The length of a file entry, the count of its extents and the bytes of the objects it
/// names.
fn shape_of(f: &StateFile) -> (u64, usize, u64) {
    match f {
        StateFile::Object { len, .. } => (*len, 1, *len),
        StateFile::Extents {
            len,
            objects,
            extents,
            ..
        } => (*len, extents.len(), objects.iter().map(|o| o.size).sum()),
        StateFile::Inline { text } => (text.len() as u64, 0, 0),
    }
}

/// Appending one chunk to a dataset whose last superchunk file is nearly full uploads that
/// chunk and the file's front, not the file.
#[test]
fn an_append_uploads_only_the_new_bytes() {
    let chunk: usize = 256 << 10; // elements: 2 MiB a chunk
    let store = Counting::new();
    let s = handle(&store);
    let root = s.root().to_path_buf();
    let o = CreateOptions {
        chunkshape: Some(vec![chunk as u64]),
        superchunksize: Some(8),
        ..Default::default()
    };
    let mut ds = Dataset::create_in(s, &root, DType::I64, &[0], &o).unwrap();
    let first = noisy(1, chunk * 7);
    ds.append(&Array1::from(first.clone()).into_dyn().view())
        .unwrap();
    drop(ds);
    let before = data_files(&store);
    assert_eq!(before.len(), 1, "{before:?}");
    let file_before = shape_of(&before[0].1).0;
    store.taken();

    let mut ds = open(&store, Mode::ReadWrite);
    let more = noisy(2, chunk);
    ds.append(&Array1::from(more.clone()).into_dyn().view())
        .unwrap();
    drop(ds);
    let (data, state) = store.taken();
    let after = data_files(&store);
    let (len, extents, _) = shape_of(&after[0].1);
    let compressed = len - file_before;
    eprintln!(
        "append of one chunk ({compressed} bytes compressed) to a file of {file_before} bytes: \
         {data} bytes of objects uploaded (the whole file: {len}), state {state} bytes"
    );
    assert!(
        data <= 3 * compressed,
        "uploaded {data} bytes for a chunk of {compressed}"
    );
    assert!(matches!(after[0].1, StateFile::Extents { .. }), "{after:?}");
    assert!(extents <= 3, "{after:?}");
    assert_eq!(
        handle(&store).state().unwrap().unwrap().version,
        STATE_VERSION_EXTENTS
    );
    let mut want = first;
    want.extend(more);
    assert_eq!(read(&store), want);
}

/// Many appends to one superchunk file: the extents stay within the bound, the file is
/// rewritten whole when they would pass it, and garbage collection keeps every object an
/// extent names while it collects those no entry names any more.
#[test]
fn many_appends_compact_and_gc_keeps_named_objects() {
    let store = Counting::new();
    let s = handle(&store);
    let root = s.root().to_path_buf();
    let o = CreateOptions {
        chunkshape: Some(vec![1000]),
        superchunksize: Some(64),
        ..Default::default()
    };
    let mut ds = Dataset::create_in(s, &root, DType::I64, &[0], &o).unwrap();
    let mut want = Vec::new();
    let (mut saw_extents, mut compactions) = (false, 0);
    for i in 0..40u64 {
        let v = noisy(i, 1000);
        ds.append(&Array1::from(v.clone()).into_dyn().view())
            .unwrap();
        want.extend(v);
        let files = data_files(&store);
        let (len, extents, named) = shape_of(&files[0].1);
        assert!(extents <= MAX_EXTENTS, "append {i}: {files:?}");
        assert!(named <= 2 * len, "append {i}: {files:?}");
        match &files[0].1 {
            StateFile::Extents { .. } => saw_extents = true,
            StateFile::Object { .. } if saw_extents => {
                compactions += 1;
                saw_extents = false;
            }
            _ => {}
        }
        if i % 7 == 3 {
            // Collecting at once (no grace): every object still named stays. The collector
            // rewrites the state, so the writer opens the dataset again after it.
            drop(ds);
            let h = handle(&store);
            collect_garbage(&h, Duration::ZERO).unwrap();
            assert_eq!(read(&store), want, "after gc at append {i}");
            let st = handle(&store).state().unwrap().unwrap();
            let listed = list_keys(&store);
            for f in st.files.values() {
                for k in f.keys() {
                    assert!(
                        listed.contains(&format!("{}/{k}", store.prefix)),
                        "{k} collected"
                    );
                }
            }
            ds = open(&store, Mode::ReadWrite);
        }
    }
    drop(ds);
    assert!(compactions >= 1, "no compaction in 40 appends");
    assert_eq!(read(&store), want);
    // Everything not named is collected: the objects left are the state and the named ones.
    let h = handle(&store);
    collect_garbage(&h, Duration::ZERO).unwrap();
    let st = handle(&store).state().unwrap().unwrap();
    let mut named: Vec<String> = st
        .files
        .values()
        .flat_map(|f| f.keys())
        .map(|k| format!("{}/{k}", store.prefix))
        .collect();
    named.push(format!("{}/{STATE_KEY}", store.prefix));
    named.sort();
    named.dedup();
    let mut listed = list_keys(&store);
    listed.sort();
    assert_eq!(listed, named);
    assert_eq!(read(&store), want);
}

fn list_keys(store: &Counting) -> Vec<String> {
    use futures::TryStreamExt;
    let p = OPath::from(store.prefix.as_str());
    let metas: Vec<ObjectMeta> = block_on(store.inner.list(Some(&p)).try_collect()).unwrap();
    metas.into_iter().map(|m| m.location.to_string()).collect()
}

/// Whether an object whose key holds `part` was PUT, waiting up to 20 s for it.
fn put_soon(store: &Counting, part: &str) -> bool {
    let until = std::time::Instant::now() + Duration::from_secs(20);
    while std::time::Instant::now() < until {
        if store
            .data_keys
            .lock()
            .unwrap()
            .iter()
            .any(|k| k.contains(part))
        {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

/// A superchunk file that fills up goes up at once, while the rows of the next files are
/// still coming (the upload overlaps their encoding): the first file's object is in the
/// store before the append has taken its last batch. The commit names the objects as they
/// went up, one per file, all with the commit's one tag, and uploads nothing twice.
#[test]
fn full_files_go_up_before_the_commit() {
    let chunk = 4096usize;
    let store = Counting::new();
    let s = handle(&store);
    let root = s.root().to_path_buf();
    let o = CreateOptions {
        chunkshape: Some(vec![chunk as u64]),
        superchunksize: Some(4),
        ..Default::default()
    };
    let mut ds = Dataset::create_in(s, &root, DType::I64, &[0], &o).unwrap();
    store.taken();
    store.data_keys.lock().unwrap().clear();
    let want = noisy(7, chunk * 13);
    let mut first_up_early = false;
    let batches = want.chunks(chunk).enumerate().map(|(i, b)| {
        if i == 12 {
            // Files 1 and 2 are full: the first is up (or going) by now.
            first_up_early = put_soon(&store, "data/__1__.bin");
        }
        Ok(b.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>())
    });
    ds.append_batches(batches).unwrap();
    drop(ds);
    assert!(first_up_early, "{:?}", store.data_keys.lock().unwrap());
    let files = data_files(&store);
    assert_eq!(files.len(), 4, "{files:?}");
    let (data, _) = store.taken();
    let lens: u64 = files.iter().map(|(_, f)| shape_of(f).0).sum();
    assert_eq!(data, lens, "each file uploaded once, whole");
    let mut tags = std::collections::BTreeSet::new();
    for (rel, f) in &files {
        let StateFile::Object { key, .. } = f else {
            panic!("{rel}: {f:?}");
        };
        let (name, tag) = key.rsplit_once('-').unwrap();
        assert!(name.starts_with(rel.as_str()), "{rel}: {key}");
        assert_eq!(name, format!("{rel}.2"), "the dataset's second commit");
        tags.insert(tag.to_string());
    }
    assert_eq!(tags.len(), 1, "one tag a commit: {files:?}");
    assert_eq!(read(&store), want);
}

/// A file written again after it went up early is uploaded again by its commit (after
/// the early upload ended): the object the state names holds the file as committed.
#[test]
fn a_file_written_after_its_early_upload_goes_up_again() {
    use blz::storage::{OpenMode, Storage};
    let store = Counting::new();
    let s = handle(&store);
    let root = s.root().to_path_buf();
    let path = root.join("data/x.bin");
    let mut bytes: Vec<u8> = noisy(3, 8192)
        .iter()
        .flat_map(|x| x.to_ne_bytes())
        .collect();
    let f = s.open(&path, OpenMode::Create).unwrap();
    f.write_at(0, &bytes).unwrap();
    f.sync().unwrap();
    assert!(put_soon(&store, "data/x.bin"));
    f.write_at(1000, b"written again").unwrap();
    bytes[1000..1013].copy_from_slice(b"written again");
    drop(f);
    s.publish(&root).unwrap();
    let (data, _) = store.taken();
    assert_eq!(data, 2 * bytes.len() as u64, "up early, then again");
    let again = handle(&store);
    let f = again.open(&path, OpenMode::Read).unwrap();
    let mut got = vec![0u8; bytes.len()];
    f.read_at(0, &mut got).unwrap();
    assert!(got == bytes, "the committed file reads back");
}

/// A file that went up early and was then renamed (as an atomic replace does), with a new
/// file written and synced at its old path: the commit names the renamed file's early
/// object where it lies, uploads the new file once under a tag of its own (the old path's
/// key is taken), and each reads back as written.
#[test]
fn a_renamed_early_file_and_its_successor_keep_their_own_bytes() {
    use blz::storage::{OpenMode, Storage};
    let store = Counting::new();
    let s = handle(&store);
    let root = s.root().to_path_buf();
    let (x, y) = (root.join("data/x.bin"), root.join("data/y.bin"));
    let first: Vec<u8> = noisy(5, 8192)
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect();
    let second: Vec<u8> = noisy(6, 6000)
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect();
    let f = s.open(&x, OpenMode::Create).unwrap();
    f.write_at(0, &first).unwrap();
    f.sync().unwrap();
    assert!(put_soon(&store, "data/x.bin"));
    drop(f);
    s.rename(&x, &y).unwrap();
    let f = s.open(&x, OpenMode::Create).unwrap();
    f.write_at(0, &second).unwrap();
    f.sync().unwrap();
    drop(f);
    store.taken();
    s.publish(&root).unwrap();
    let (data, _) = store.taken();
    assert_eq!(
        data,
        second.len() as u64,
        "only the new file goes up at the commit"
    );
    let again = handle(&store);
    for (path, want) in [(&y, &first), (&x, &second)] {
        let f = again.open(path, OpenMode::Read).unwrap();
        let mut got = vec![0u8; f.len().unwrap() as usize];
        f.read_at(0, &mut got).unwrap();
        assert!(&got == want, "{}", path.display());
    }
    let state = again.state().unwrap().unwrap();
    let key = |rel: &str| match &state.files[rel] {
        StateFile::Object { key, .. } => key.clone(),
        other => panic!("{other:?}"),
    };
    assert!(key("data/y.bin").starts_with("data/x.bin.1-"), "{state:?}");
    assert!(key("data/x.bin").starts_with("data/x.bin.1-"), "{state:?}");
    assert_ne!(key("data/x.bin"), key("data/y.bin"));
}

/// A create killed before its commit leaves the files that went up early and no state:
/// gc takes them (a first commit's uploads, `<path>.1-<tag>`) and then finds nothing left.
#[test]
fn gc_collects_early_uploads_of_a_create_that_never_committed() {
    use blz::storage::{OpenMode, Storage};
    let store = Counting::new();
    let s = handle(&store);
    let root = s.root().to_path_buf();
    let staging = root.with_file_name(format!(
        "{}.tmp-build",
        root.file_name().unwrap().to_str().unwrap()
    ));
    let f = s
        .open(&staging.join("data/__1__.bin"), OpenMode::Create)
        .unwrap();
    let bytes: Vec<u8> = noisy(4, 4096)
        .iter()
        .flat_map(|x| x.to_ne_bytes())
        .collect();
    f.write_at(0, &bytes).unwrap();
    f.sync().unwrap();
    // The writer dies here: its upload lands, its commit never comes.
    assert!(put_soon(&store, "data/__1__.bin.1-"));
    drop(f);
    drop(s);
    let keys = list_keys(&store);
    assert_eq!(keys.len(), 1, "{keys:?}");
    let got = collect_garbage(&handle(&store), Duration::ZERO).unwrap();
    assert_eq!(got.deleted.len(), 1, "{got:?}");
    assert!(list_keys(&store).is_empty());
    let e = collect_garbage(&handle(&store), Duration::ZERO).unwrap_err();
    assert!(e.to_string().contains("no dataset there"), "{e}");
}

/// A state of version 1 may not hold extents, and a version this build does not know is
/// refused, naming the state object.
#[test]
fn extents_need_version_two() {
    let store = Counting::new();
    let s = handle(&store);
    let root = s.root().to_path_buf();
    let o = CreateOptions {
        chunkshape: Some(vec![100]),
        superchunksize: Some(8),
        ..Default::default()
    };
    let mut ds = Dataset::create_in(s, &root, DType::I64, &[0], &o).unwrap();
    ds.append(&Array1::from(noisy(0, 300)).into_dyn().view())
        .unwrap();
    assert_eq!(
        handle(&store).state().unwrap().unwrap().version,
        STATE_VERSION_WHOLE
    );
    ds.append(&Array1::from(noisy(1, 100)).into_dyn().view())
        .unwrap();
    drop(ds);
    let loc = OPath::from(format!("{}/{STATE_KEY}", store.prefix));
    let raw = block_on(async { store.inner.get(&loc).await.unwrap().bytes().await.unwrap() });
    let raw: serde_json::Value = serde_json::from_slice(&raw).unwrap();
    assert_eq!(raw["version"], 2, "{raw}");
    for (version, why) in [(1, "cannot hold"), (4, "version 4")] {
        let mut bad = raw.clone();
        bad["version"] = version.into();
        block_on(
            store
                .inner
                .put(&loc, serde_json::to_vec(&bad).unwrap().into()),
        )
        .unwrap();
        let e = ObjectStorage::new(
            Arc::clone(&store) as Arc<dyn ObjectStore>,
            PathBuf::from("memory://"),
            &store.prefix,
        )
        .unwrap_err();
        assert!(
            matches!(&e, Error::InvalidMetadata { .. }) && e.to_string().contains(why),
            "{e}"
        );
        assert!(e.to_string().contains("meta/state"), "{e}");
    }
}

#[derive(Debug, Clone)]
enum Op {
    Append(usize),
    Modify { at: usize, n: usize },
    Shrink(usize),
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1usize..400).prop_map(Op::Append),
        3 => (0usize..1000, 1usize..150).prop_map(|(at, n)| Op::Modify { at, n }),
        1 => (0usize..1000).prop_map(Op::Shrink),
        1 => Just(Op::Reopen),
    ]
}

proptest! {
    #![proptest_config(common::config(12))]

    /// Appends, modifies, shrinks and reopenings read back equal to a plain vector, and no
    /// file entry passes the fragmentation bounds.
    #[test]
    fn edits_read_back_as_the_model(ops in proptest::collection::vec(op(), 1..24)) {
        let store = Counting::new();
        let s = handle(&store);
        let root = s.root().to_path_buf();
        let o = CreateOptions {
            chunkshape: Some(vec![50]),
            superchunksize: Some(4),
            ..Default::default()
        };
        let mut ds = Dataset::create_in(s, &root, DType::I64, &[0], &o).unwrap();
        let mut model: Vec<i64> = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            match *op {
                Op::Append(n) => {
                    let v = noisy(i as u64, n);
                    ds.append(&Array1::from(v.clone()).into_dyn().view()).unwrap();
                    model.extend(v);
                }
                Op::Modify { at, n } => {
                    if model.is_empty() {
                        continue;
                    }
                    let at = at % model.len();
                    let n = n.min(model.len() - at);
                    let v = noisy(1000 + i as u64, n);
                    ds.write_slice(s![at..at + n], &Array1::from(v.clone()).into_dyn().view())
                        .unwrap();
                    model[at..at + n].copy_from_slice(&v);
                }
                Op::Shrink(n) => {
                    let n = n.min(model.len());
                    ds.resize(n as u64).unwrap();
                    model.truncate(n);
                }
                Op::Reopen => {
                    drop(ds);
                    ds = open(&store, Mode::ReadWrite);
                }
            }
            prop_assert_eq!(&read(&store), &model, "after {:?} (op {})", op, i);
            for (rel, f) in data_files(&store) {
                let (len, extents, named) = shape_of(&f);
                prop_assert!(extents <= MAX_EXTENTS, "{}: {:?}", rel, f);
                prop_assert!(named <= 2 * len.max(1), "{}: {:?}", rel, f);
            }
        }
    }
}

/// A handle made to create the store's dataset ([`ObjectStorage::to_create`]: its state's
/// GET runs meanwhile).
fn to_create(store: &Arc<Counting>) -> Arc<ObjectStorage> {
    let s: Arc<dyn ObjectStore> = Arc::clone(store) as Arc<dyn ObjectStore>;
    Arc::new(ObjectStorage::to_create(s, PathBuf::from("memory://"), &store.prefix).unwrap())
}

/// Chunks of `chunk` elements, `per_file` to a superchunk file.
fn create_options(chunk: usize, per_file: u64) -> CreateOptions {
    CreateOptions {
        chunkshape: Some(vec![chunk as u64]),
        superchunksize: Some(per_file),
        ..Default::default()
    }
}

fn bytes_of(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

/// A create does not wait for the state's GET before it builds: its first full file goes
/// up while that GET is still unanswered (one round trip less before a create starts), and
/// the commit, which waits for the GET, finds the dataset absent and commits.
#[test]
fn a_create_builds_while_the_state_is_read() {
    // Files of 4 chunks of 512 KiB: large enough for a create to send them up early.
    let chunk = 1usize << 16;
    let store = Counting::new();
    store.hold_state.store(true, Ordering::SeqCst);
    let s = to_create(&store);
    let root = s.root().to_path_buf();
    let o = create_options(chunk, 4);
    let want = noisy(3, chunk * 9);
    let batches = want.chunks(chunk).map(|b| Ok(bytes_of(b)));
    let ds = Dataset::create_from(s, &root, DType::I64, &[0], &o, batches).unwrap();
    drop(ds);
    store.hold_state.store(false, Ordering::SeqCst);
    assert!(
        store.state_waited_for_put.load(Ordering::SeqCst),
        "no object went up while the state was read: {:?}",
        store.data_keys.lock().unwrap()
    );
    assert_eq!(read(&store), want);
}

/// A create made without waiting for the state (as `blz.create` without overwrite makes
/// it) over a dataset that is there is refused, and the dataset keeps its data.
#[test]
fn a_create_over_an_existing_dataset_is_refused() {
    let chunk = 512usize;
    let store = Counting::new();
    let s = handle(&store);
    let root = s.root().to_path_buf();
    let o = create_options(chunk, 2);
    let old = noisy(1, chunk * 5);
    let mut ds = Dataset::create_in(s, &root, DType::I64, &[0], &o).unwrap();
    ds.append(&ndarray::ArrayView1::from(&old[..]).into_dyn())
        .unwrap();
    drop(ds);
    let again = to_create(&store);
    let new = noisy(2, chunk * 9);
    let batches = new.chunks(chunk).map(|b| Ok(bytes_of(b)));
    let err = Dataset::create_from(again, &root, DType::I64, &[0], &o, batches).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("already exists")),
        "{err}"
    );
    assert_eq!(read(&store), old);
}

/// A create whose early upload is refused stops at a later file, not after encoding all of
/// its rows for a commit that cannot succeed, and reports the upload's error; nothing is
/// committed.
#[test]
fn a_refused_early_upload_stops_the_create() {
    let chunk = 1usize << 16;
    let store = Counting::new();
    store.refuse_data.store(true, Ordering::SeqCst);
    let s = to_create(&store);
    let root = s.root().to_path_buf();
    let o = create_options(chunk, 4);
    // 24 files of 4 chunks. Once a PUT has been refused, the rows come slowly (20 ms a
    // chunk): the background sync that meets the failure has seconds to raise it before
    // the rows run out.
    let total = 24 * 4;
    let rows = noisy(5, chunk * total);
    let pulled = std::sync::atomic::AtomicUsize::new(0);
    let batches = rows.chunks(chunk).map(|b| {
        pulled.fetch_add(1, Ordering::SeqCst);
        if store.refused.load(Ordering::SeqCst) > 0 {
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(bytes_of(b))
    });
    let err = Dataset::create_from(s, &root, DType::I64, &[0], &o, batches).unwrap_err();
    assert!(err.to_string().contains("access denied"), "{err}");
    let n = pulled.load(Ordering::SeqCst);
    assert!(n < total, "the create took all {n} chunks");
    assert!(
        handle(&store).state().unwrap().is_none(),
        "nothing committed"
    );
}
