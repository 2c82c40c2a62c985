//! Manifests on an object store (`spec/object-store.md` §3, "Manifests"): the entries of
//! files a commit leaves unchanged are sealed into immutable manifest objects, so that a
//! commit to a dataset of many files uploads a state of bounded size and a few small
//! manifests, not every file's entry again; an open fetches the state alone, and the
//! manifests (at once) when a file the state object does not hold is first needed; garbage
//! collection keeps the manifests the state names; a damaged manifest is an error naming
//! it. All against the in-memory store, so these run every time, with no server.

mod recording;

use blz::storage::manifest::MANIFEST_DIR;
use blz::storage::object::{collect_garbage, State, STATE_KEY, STATE_VERSION};
use blz::storage::ObjectStorage;
use blz::{CreateOptions, DType, Dataset, Error, Mode};
use futures::executor::block_on;
use ndarray::{s, Array1};
use object_store::path::Path as OPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use recording::Recording;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The PUTs since the last call: bytes of the state, of manifests, of everything else.
fn taken_puts(store: &Recording) -> (u64, u64, u64) {
    let mut out = (0, 0, 0);
    for (k, n) in store.puts.lock().unwrap().drain(..) {
        if k.ends_with(STATE_KEY) {
            out.0 += n;
        } else if k.contains(&format!("/{MANIFEST_DIR}/")) {
            out.1 += n;
        } else {
            out.2 += n;
        }
    }
    out
}

fn key(store: &Recording, rel: &str) -> OPath {
    OPath::from(format!("{}/{rel}", store.prefix))
}

fn get_raw(store: &Recording, rel: &str) -> Vec<u8> {
    block_on(async { store.inner.get(&key(store, rel)).await?.bytes().await })
        .unwrap()
        .to_vec()
}

fn put_raw(store: &Recording, rel: &str, bytes: Vec<u8>) {
    block_on(store.inner.put(&key(store, rel), PutPayload::from(bytes))).unwrap();
}

/// Every object of the store's dataset, by key below its prefix.
fn keys(store: &Recording) -> Vec<String> {
    use futures::TryStreamExt;
    let skip = store.prefix.len() + 1;
    let mut keys: Vec<String> = block_on(
        store
            .inner
            .list(Some(&OPath::from(store.prefix.as_str())))
            .map_ok(|m| m.location.as_ref()[skip..].to_string())
            .try_collect(),
    )
    .unwrap();
    keys.sort();
    keys
}

/// A handle on the store's dataset, sealing at `seal` bytes.
fn handle(store: &Arc<Recording>, seal: u64) -> Arc<ObjectStorage> {
    let s: Arc<dyn ObjectStore> = Arc::clone(store) as Arc<dyn ObjectStore>;
    let h = ObjectStorage::new(s, PathBuf::from("memory://"), &store.prefix).unwrap();
    h.set_manifest_bytes(seal);
    Arc::new(h)
}

fn open(store: &Arc<Recording>, seal: u64, mode: Mode) -> Dataset {
    let s = handle(store, seal);
    let root = s.root().to_path_buf();
    Dataset::open_in(s, &root, mode).unwrap()
}

fn read(store: &Arc<Recording>) -> Vec<i64> {
    open(store, 0, Mode::ReadOnly)
        .read::<i64>()
        .unwrap()
        .into_iter()
        .collect()
}

fn values(start: i64, n: usize) -> Vec<i64> {
    (0..n as i64)
        .map(|i| (start + i) * 7919 % 100_003)
        .collect()
}

const CHUNK: usize = 100;
/// Chunks per superchunk file: a file every 4 appends below.
const PER_FILE: u64 = 4;

/// A dataset of `appends + 1` commits of one chunk each (a new file every [`PER_FILE`]),
/// its handles sealing at `seal` bytes, garbage collected every 10 appends (which keeps the
/// state's list of retired objects short); the state and manifest bytes each append PUT.
fn grow(store: &Arc<Recording>, seal: u64, appends: usize) -> (Vec<i64>, Vec<(u64, u64)>) {
    let s = handle(store, seal);
    let root = s.root().to_path_buf();
    let o = CreateOptions {
        chunkshape: Some(vec![CHUNK as u64]),
        superchunksize: Some(PER_FILE),
        ..Default::default()
    };
    let mut ds = Dataset::create_in(s, &root, DType::I64, &[0], &o).unwrap();
    let mut want = values(0, CHUNK);
    ds.append(&Array1::from(want.clone()).into_dyn().view())
        .unwrap();
    drop(ds);
    taken_puts(store);
    let mut per_commit = Vec::new();
    for i in 0..appends {
        let v = values(1000 * (i as i64 + 1), CHUNK);
        let mut ds = open(store, seal, Mode::ReadWrite);
        ds.append(&Array1::from(v.clone()).into_dyn().view())
            .unwrap();
        drop(ds);
        want.extend(v);
        let (state, manifests, _) = taken_puts(store);
        per_commit.push((state, manifests));
        if i % 10 == 9 {
            collect_garbage(&handle(store, seal), Duration::ZERO).unwrap();
            taken_puts(store);
        }
    }
    (want, per_commit)
}

/// Appends to a dataset of many files: with manifests, every commit's state stays under
/// the sealing size plus the entries it changed, and the manifests uploaded over all the
/// commits are a small multiple of the entries; without them (sealing off), the state
/// grows with every file. Everything reads back equal, and an open GETs the state, then
/// each manifest once.
#[test]
fn appends_to_many_files_upload_a_bounded_state() {
    let seal = 2048;
    let appends = 200;
    let store = Recording::new();
    let (want, per_commit) = grow(&store, seal, appends);
    let plain = Recording::new();
    let (want_plain, per_commit_plain) = grow(&plain, 0, appends);
    assert_eq!(want, want_plain);
    assert_eq!(read(&store), want);
    assert_eq!(read(&plain), want);

    let state = handle(&store, seal).state().unwrap().unwrap();
    let files = state
        .files
        .keys()
        .filter(|p| p.starts_with("data/"))
        .count();
    assert_eq!(files as u64, (appends as u64 + 1).div_ceil(PER_FILE));
    assert_eq!(state.version, STATE_VERSION);
    assert!(
        state.manifests.iter().any(|m| m.level >= 1),
        "no merge in {:?}",
        state.manifests
    );
    assert!(state.manifests.len() < 12, "{:?}", state.manifests);
    let held: usize = state.manifests.iter().map(|m| m.paths.len()).sum();

    assert!(held >= files - 3, "{held} of {files} files in manifests");

    let plain_state = handle(&plain, 0).state().unwrap().unwrap();
    assert!(plain_state.manifests.is_empty() && plain_state.version < STATE_VERSION);
    assert!(plain_state.files.keys().eq(state.files.keys()));

    // The entries' bytes, as the state without manifests holds them at the end.
    let entries = per_commit_plain.last().unwrap().0;
    let most_state = per_commit.iter().map(|c| c.0).max().unwrap();
    let manifest_total: u64 = per_commit.iter().map(|c| c.1).sum();
    eprintln!(
        "{files} files, {appends} appends: the state without manifests ends at {entries} bytes; \
         with them, the largest state PUT is {most_state} bytes, and the manifests PUT total \
         {manifest_total} bytes over all commits"
    );
    // Besides the tail: the meta documents, 32 write ids and the retired objects since the
    // last gc, about 3.5 KB here.
    assert!(
        most_state < seal + 4096,
        "a state of {most_state} bytes, sealing at {seal}"
    );
    assert!(most_state * 5 < entries, "{most_state} against {entries}");
    let plain_total: u64 = per_commit_plain.iter().map(|c| c.0).sum();
    let with_total: u64 = per_commit.iter().map(|c| c.0 + c.1).sum();
    assert!(
        with_total * 3 < plain_total,
        "state and manifests {with_total} bytes over all commits, {plain_total} without"
    );

    // An open: the state alone; a whole read: the manifests once each, then the data.
    std::mem::take(&mut *store.gets.lock().unwrap());
    let ds = open(&store, seal, Mode::ReadOnly);
    let gets = std::mem::take(&mut *store.gets.lock().unwrap());
    assert_eq!(gets.len(), 1, "{gets:?}");
    assert!(gets[0].0.ends_with(STATE_KEY), "{gets:?}");
    let got: Vec<i64> = ds.read::<i64>().unwrap().into_iter().collect();
    assert_eq!(got, want);
    let gets = std::mem::take(&mut *store.gets.lock().unwrap());
    for m in &state.manifests {
        let n = gets.iter().filter(|g| g.0.ends_with(&m.key)).count();
        assert_eq!(n, 1, "{gets:?}");
    }
}

/// A write to an early file retires the manifest holding its entry (its other entries go
/// back to the state, or into a new manifest); a shrink that removes files held by
/// manifests does the same. Garbage collection then removes the retired manifests and
/// keeps the named ones, and everything reads back equal.
#[test]
fn writes_to_sealed_files_retire_their_manifests_and_gc_keeps_the_named_ones() {
    let seal = 2048;
    let store = Recording::new();
    let (mut want, _) = grow(&store, seal, 60);
    let before = handle(&store, seal).state().unwrap().unwrap();
    assert!(!before.manifests.is_empty());

    let first = before
        .manifests
        .iter()
        .find(|m| m.paths.iter().any(|p| p == "data/__1__.bin"))
        .expect("the first file is in a manifest")
        .key
        .clone();

    let mut ds = open(&store, seal, Mode::ReadWrite);
    let patch = vec![-5i64; 30];
    ds.write_slice(s![10..40], &Array1::from(patch.clone()).into_dyn().view())
        .unwrap();
    drop(ds);
    want[10..40].copy_from_slice(&patch);
    assert_eq!(read(&store), want);
    let after = handle(&store, seal).state().unwrap().unwrap();
    assert!(after.manifests.iter().all(|m| m.key != first));
    assert!(after.retired.iter().any(|r| r.key == first));
    for m in &before.manifests {
        if m.paths.iter().all(|p| p != "data/__1__.bin") {
            assert!(after.manifests.contains(m), "{} was rewritten", m.key);
        }
    }

    // A shrink to two files and a half.
    let rows = (2 * PER_FILE as usize + 2) * CHUNK + 17;
    let mut ds = open(&store, seal, Mode::ReadWrite);
    ds.resize(rows as u64).unwrap();
    drop(ds);
    want.truncate(rows);
    assert_eq!(read(&store), want);
    let shrunk = handle(&store, seal).state().unwrap().unwrap();
    let files: Vec<&String> = shrunk
        .files
        .keys()
        .filter(|p| p.starts_with("data/"))
        .collect();
    assert_eq!(files.len(), 3, "{files:?}");
    for m in &shrunk.manifests {
        for p in &m.paths {
            assert!(shrunk.files.contains_key(p), "{} holds {p}", m.key);
        }
    }

    let h = handle(&store, seal);
    let gone = collect_garbage(&h, Duration::ZERO).unwrap();
    assert!(gone.deleted.contains(&first), "{gone:?}");
    let keys = keys(&store);
    let state = handle(&store, seal).state().unwrap().unwrap();
    for m in &state.manifests {
        assert!(keys.contains(&m.key), "{} collected", m.key);
    }
    let manifests_left = keys
        .iter()
        .filter(|k| k.starts_with(&format!("{MANIFEST_DIR}/")))
        .count();
    assert_eq!(manifests_left, state.manifests.len(), "{keys:?}");
    assert_eq!(read(&store), want);
}

/// The error a handle's open gives, or its first need of every file (the manifests are read
/// then), as text.
fn open_error(store: &Arc<Recording>) -> String {
    let s: Arc<dyn ObjectStore> = Arc::clone(store) as Arc<dyn ObjectStore>;
    match ObjectStorage::new(s, PathBuf::from("memory://"), &store.prefix).and_then(|h| h.state()) {
        Ok(_) => panic!("a damaged state opened"),
        Err(e @ Error::InvalidMetadata { .. }) => e.to_string(),
        Err(e) => panic!("not InvalidMetadata: {e}"),
    }
}

/// A manifest missing, of another size than the state says, not a manifest, or holding a
/// file the state holds too; a state of an earlier version naming manifests: each is
/// `InvalidMetadata` naming the object at fault, at the open (the state's own faults) or
/// when the manifests are first needed.
#[test]
fn damaged_manifests_are_errors_naming_them() {
    let seal = 2048;
    let store = Recording::new();
    grow(&store, seal, 30);
    let state = handle(&store, seal).state().unwrap().unwrap();
    let m = state.manifests[0].clone();
    let good = get_raw(&store, &m.key);
    let state_text = get_raw(&store, STATE_KEY);

    put_raw(&store, &m.key, good[..good.len() - 1].to_vec());
    let e = open_error(&store);
    assert!(e.contains(&m.key) && e.contains("bytes"), "{e}");

    let mut other = good.clone();
    let at = other.iter().position(|&b| b == b'{').unwrap() + 1;
    other[at] = b'X';
    put_raw(&store, &m.key, other);
    let e = open_error(&store);
    assert!(e.contains(&m.key), "{e}");

    let text = String::from_utf8(good.clone()).unwrap();
    put_raw(
        &store,
        &m.key,
        text.replacen("blz-object-manifest", "blz-object-manifesx", 1)
            .into_bytes(),
    );
    let e = open_error(&store);
    assert!(e.contains(&m.key) && e.contains("format"), "{e}");

    // A file in the manifest and in the state.
    let mut doc: serde_json::Value = serde_json::from_slice(&state_text).unwrap();
    let path = &m.paths[0];
    doc["files"][path] = serde_json::to_value(&state.files[path.as_str()]).unwrap();
    put_raw(&store, &m.key, good.clone());
    put_raw(&store, STATE_KEY, serde_json::to_vec(&doc).unwrap());
    let e = open_error(&store);
    assert!(e.contains(&m.key) && e.contains(path.as_str()), "{e}");

    let mut doc: serde_json::Value = serde_json::from_slice(&state_text).unwrap();
    doc["version"] = 2.into();
    put_raw(&store, STATE_KEY, serde_json::to_vec(&doc).unwrap());
    let e = open_error(&store);
    assert!(e.contains(STATE_KEY) && e.contains("version 2"), "{e}");

    // Manifests adding up to more than a reader reads: refused before any is fetched.
    let mut doc: serde_json::Value = serde_json::from_slice(&state_text).unwrap();
    let many: Vec<serde_json::Value> = (0..80)
        .map(|i| serde_json::json!({"key": format!("manifests/{i}"), "size": 60 << 20, "level": 3}))
        .collect();
    doc["manifests"] = many.into();
    put_raw(&store, STATE_KEY, serde_json::to_vec(&doc).unwrap());
    std::mem::take(&mut *store.gets.lock().unwrap());
    let e = open_error(&store);
    assert!(e.contains(STATE_KEY) && e.contains("in all"), "{e}");
    let gets = std::mem::take(&mut *store.gets.lock().unwrap());
    assert_eq!(gets.len(), 1, "{gets:?}");

    put_raw(&store, STATE_KEY, state_text.clone());
    block_on(store.inner.delete(&key(&store, &m.key))).unwrap();
    let e = open_error(&store);
    assert!(e.contains(&m.key) && e.contains("missing"), "{e}");

    put_raw(&store, &m.key, good);
    open(&store, seal, Mode::ReadOnly);
}

/// Sealing off (0), as blz wrote before manifests: no manifest, a state of an earlier
/// version; a dataset with manifests written on with sealing off keeps them while their
/// files stay as they are.
#[test]
fn sealing_off_writes_no_manifests() {
    let store = Recording::new();
    let (_, per_commit) = grow(&store, 0, 40);
    assert!(per_commit.iter().all(|c| c.1 == 0));
    let state = handle(&store, 0).state().unwrap().unwrap();
    assert!(state.manifests.is_empty() && state.version < STATE_VERSION);
    assert!(!keys(&store)
        .iter()
        .any(|k| k.starts_with(&format!("{MANIFEST_DIR}/"))));

    let sealed = Recording::new();
    let (w, _) = grow(&sealed, 2048, 40);
    let kept = handle(&sealed, 0).state().unwrap().unwrap().manifests;
    assert!(!kept.is_empty());
    let mut ds = open(&sealed, 0, Mode::ReadWrite);
    let v = values(-7, CHUNK);
    ds.append(&Array1::from(v.clone()).into_dyn().view())
        .unwrap();
    drop(ds);
    assert_eq!(handle(&sealed, 0).state().unwrap().unwrap().manifests, kept);
    let want = w.into_iter().chain(v).collect::<Vec<_>>();
    assert_eq!(read(&sealed), want);
}

/// A create over a dataset whose state names manifests is refused ("already exists") after
/// one GET, of the state: whether a state exists needs none of its manifests. The dataset
/// is left as it was.
#[test]
fn a_create_over_a_dataset_with_manifests_reads_only_its_state() {
    let store = Recording::new();
    let (want, _) = grow(&store, 2048, 30);
    assert!(!handle(&store, 2048)
        .state()
        .unwrap()
        .unwrap()
        .manifests
        .is_empty());
    std::mem::take(&mut *store.gets.lock().unwrap());
    let s: Arc<dyn ObjectStore> = Arc::clone(&store) as Arc<dyn ObjectStore>;
    let again =
        Arc::new(ObjectStorage::to_create(s, PathBuf::from("memory://"), &store.prefix).unwrap());
    let root = again.root().to_path_buf();
    let o = CreateOptions {
        chunkshape: Some(vec![CHUNK as u64]),
        superchunksize: Some(PER_FILE),
        ..Default::default()
    };
    let err = Dataset::create_in(again, &root, DType::I64, &[0], &o).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("already exists")),
        "{err}"
    );
    let gets = std::mem::take(&mut *store.gets.lock().unwrap());
    assert_eq!(gets.len(), 1, "{gets:?}");
    assert!(gets[0].0.ends_with(STATE_KEY), "{gets:?}");
    assert_eq!(read(&store), want);
}

/// The sealing size of [`sealed_dataset`].
const SEAL: u64 = 2048;

/// A dataset of 61 commits sealing at [`SEAL`] bytes, its values, and its state read whole
/// (naming manifests).
fn sealed_dataset() -> (Arc<Recording>, Vec<i64>, State) {
    let store = Recording::new();
    let (want, _) = grow(&store, SEAL, 60);
    let all = handle(&store, SEAL).state().unwrap().unwrap();
    assert!(!all.manifests.is_empty());
    (store, want, all)
}

/// An open GETs the state object alone. A read of the last file, which the state holds,
/// costs one GET more and no manifest; a read of the first file fetches the manifests whose
/// directories and first and last names may hold it (here, the one holding it), then its
/// data. A file that an open never saw is still there for a write: a removal
/// removes it, and a commit keeps every other file.
#[test]
fn an_open_reads_the_manifests_only_when_a_file_needs_them() {
    use blz::storage::Storage;
    let (store, want, all) = sealed_dataset();
    let in_manifest = |rel: &str| {
        all.manifests
            .iter()
            .any(|m| m.paths.iter().any(|p| p == rel))
    };
    assert!(in_manifest("data/__1__.bin"));
    let is_manifest = |k: &str| k.contains(&format!("/{MANIFEST_DIR}/"));

    store.take();
    let ds = open(&store, 0, Mode::ReadOnly);
    let gets = store.take();
    assert_eq!(gets.len(), 1, "{gets:?}");
    assert!(gets[0].0.ends_with(STATE_KEY), "{gets:?}");
    let n = want.len();
    let tail = recording::read_sel(&ds, &format!("{}:{n}", n - 10));
    assert_eq!(tail.as_slice().unwrap(), &want[n - 10..]);
    let gets = store.take();
    assert_eq!(gets.len(), 1, "{gets:?}");
    assert!(!is_manifest(&gets[0].0), "{gets:?}");
    let head = recording::read_sel(&ds, "5:15");
    assert_eq!(head.as_slice().unwrap(), &want[5..15]);
    let gets = store.take();
    let manifests = gets.iter().filter(|(k, _)| is_manifest(k)).count();
    let may_hold = all
        .manifests
        .iter()
        .filter(|m| m.may_hold("data/__1__.bin"))
        .count();
    assert!(all.manifests.len() > may_hold, "{:?}", all.manifests);
    assert_eq!(manifests, may_hold, "{gets:?}");
    assert_eq!(gets.len(), manifests + 1, "{gets:?}");
    drop(ds);

    // A write through a handle that has read nothing yet.
    let h = handle(&store, SEAL);
    let root = h.root().to_path_buf();
    h.remove_file(&root.join("data/__1__.bin")).unwrap();
    h.publish(&root).unwrap();
    let after = handle(&store, SEAL).state().unwrap().unwrap();
    let mut left: Vec<&String> = all
        .files
        .keys()
        .filter(|p| *p != "data/__1__.bin")
        .collect();
    left.sort();
    assert!(after.files.keys().eq(left), "{:?}", after.files.keys());
}

/// A manifest that cannot be read (missing here) fails what needs it, naming it, and
/// nothing else: the tail of the dataset, which the state holds, still reads; a file the
/// manifest may hold is not reported absent (`exists` says it may be there), and opening
/// it is the error.
#[test]
fn a_missing_manifest_fails_only_what_needs_it() {
    use blz::storage::{OpenMode, Storage};
    let (store, want, all) = sealed_dataset();
    let m = all
        .manifests
        .iter()
        .find(|m| m.paths.iter().any(|p| p == "data/__1__.bin"))
        .unwrap();
    block_on(store.inner.delete(&key(&store, &m.key))).unwrap();

    let ds = open(&store, 0, Mode::ReadOnly);
    let n = want.len();
    let tail = recording::read_sel(&ds, &format!("{}:{n}", n - 10));
    assert_eq!(tail.as_slice().unwrap(), &want[n - 10..]);
    let e = ds.read::<i64>().unwrap_err().to_string();
    assert!(e.contains(&m.key) && e.contains("damaged"), "{e}");

    let h = handle(&store, SEAL);
    let root = h.root().to_path_buf();
    let early = root.join("data/__1__.bin");
    assert!(h.exists(&early));
    assert!(!h.exists(&root.join("meta/no-such-file")));
    let e = h.open(&early, OpenMode::Read).err().unwrap().to_string();
    assert!(e.contains(&m.key), "{e}");
    let e = h.remove_file(&early).unwrap_err().to_string();
    assert!(e.contains(&m.key), "{e}");
}

/// The keys of the manifests the state object names, read raw (no handle, no request counted
/// by a handle).
fn named_manifests(store: &Recording) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_slice(&get_raw(store, STATE_KEY)).unwrap();
    v["manifests"]
        .as_array()
        .map(|ms| {
            ms.iter()
                .map(|m| m["key"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Checks the requests of the append `i` just made, given the manifests the state named
/// `before` it: one that kept them all read none (counted in `counts.0`), one that merged
/// read each once (in `counts.1`). With no manifest before, it counts nothing.
fn tally_append(store: &Recording, before: &[String], i: i64, counts: &mut (u32, u32, u32)) {
    let gets = store.take();
    let read = gets
        .iter()
        .filter(|(k, _)| k.contains(&format!("/{MANIFEST_DIR}/")))
        .count();
    let after = named_manifests(store);
    if before.is_empty() {
        return;
    }
    let merged = before.iter().filter(|k| !after.contains(k)).count();
    if merged == 0 {
        assert_eq!(read, 0, "append {i} kept every manifest, yet read {gets:?}");
        counts.0 += 1;
    } else {
        // Each manifest the merge took in, once; none of the others.
        assert_eq!(read, merged, "append {i} merged {merged}, reading {gets:?}");
        counts.1 += 1;
        if merged < before.len() {
            counts.2 += 1;
        }
    }
}

/// An append reads no manifest: the state object holds the last superchunk file it extends,
/// and each manifest's directories and first and last names tell that the next superchunk
/// file is not its. Only a commit that merges manifests reads them (each once, in one
/// round). Over appends that fill files, start new ones, seal and merge, everything reads
/// back equal, and a write to an early file still finds it.
#[test]
fn appends_read_no_manifest_but_to_merge() {
    let (store, mut want, _) = sealed_dataset();
    let mut counts = (0, 0, 0);
    for i in 0..100 {
        let before = named_manifests(&store);
        store.take();
        let mut ds = open(&store, SEAL, Mode::ReadWrite);
        let v = values(900_000 + 1000 * i, CHUNK);
        ds.append(&Array1::from(v.clone()).into_dyn().view())
            .unwrap();
        drop(ds);
        want.extend(v);
        tally_append(&store, &before, i, &mut counts);
    }
    let (quiet, merged, partly) = counts;
    assert!(
        quiet >= 30 && merged >= 2 && partly >= 1,
        "{quiet} appends read none, {merged} merged, {partly} of them with manifests left unread"
    );
    assert_eq!(read(&store), want);

    // A write to the second superchunk file, whose entry a manifest holds: that manifest
    // is read, not the others.
    let before = named_manifests(&store);
    store.take();
    let mut ds = open(&store, SEAL, Mode::ReadWrite);
    let at = (PER_FILE as usize) * CHUNK + 3;
    let patch = Array1::from(vec![-5i64; 7]).into_dyn();
    ds.write_slice(s![at..at + 7], &patch.view()).unwrap();
    drop(ds);
    let gets = store.take();
    let read_now: Vec<_> = gets
        .iter()
        .filter(|(k, _)| k.contains(&format!("/{MANIFEST_DIR}/")))
        .collect();
    assert!(before.len() >= 2, "{before:?}");
    assert_eq!(read_now.len(), 1, "{read_now:?} of {before:?}");
    want[at..at + 7].fill(-5);
    assert_eq!(read(&store), want);
}

/// The same for a table: each column's files lie in a directory of their own, named in the
/// manifests with their own first and last names, so an append to every column reads no
/// manifest (but to merge), and every column reads back equal.
#[test]
fn table_appends_read_no_manifest_but_to_merge() {
    use blz::table::{ColumnOptions, Field, Table, TableOptions, Values};
    let store = Recording::new();
    let open_table = |mode| {
        let s = handle(&store, SEAL);
        let root = s.root().to_path_buf();
        Table::open_in(s, &root, mode).unwrap()
    };
    let o = TableOptions {
        defaults: ColumnOptions {
            chunklen: Some(50),
            superchunksize: Some(2),
            ..Default::default()
        },
        ..Default::default()
    };
    let fields = vec![Field::new("x", DType::I64), Field::varstr("name")];
    let s = handle(&store, SEAL);
    let root = s.root().to_path_buf();
    drop(Table::create_in(s, &root, fields, &o).unwrap());
    let (mut xs, mut names) = (Vec::new(), Vec::new());
    let mut counts = (0, 0, 0);
    for i in 0..80i64 {
        let x: Vec<i64> = (0..50).map(|j| i * 1000 + j).collect();
        let n: Vec<String> = x.iter().map(|v| format!("row {v}")).collect();
        let before = named_manifests(&store);
        store.take();
        let mut t = open_table(Mode::ReadWrite);
        let refs: Vec<&str> = n.iter().map(String::as_str).collect();
        t.append(&[
            ("x", Values::from_slice(&x)),
            ("name", Values::strings(&refs)),
        ])
        .unwrap();
        drop(t);
        xs.extend(x);
        names.extend(n);
        tally_append(&store, &before, i, &mut counts);
    }
    let (quiet, merged, _) = counts;
    assert!(
        quiet >= 20 && merged >= 1,
        "{quiet} appends read none, {merged} merged"
    );
    let t = open_table(Mode::ReadOnly);
    assert_eq!(t.column_array::<i64>("x").unwrap().to_vec(), xs);
    let Values::Var(got) = t.column("name").unwrap() else {
        panic!("a string column read as fixed")
    };
    let got: Vec<String> = got
        .into_iter()
        .map(|b| String::from_utf8(b).unwrap())
        .collect();
    assert_eq!(got, names);
}

/// The bound on the block indexes a state carries counts the files the state object holds,
/// not those manifests hold unchanged: a commit that loaded the manifests under a bound
/// they would exceed (here none at all) leaves their entries, and so the manifests, as
/// they are, while the state's own files' indexes go out to objects.
#[test]
fn manifest_held_block_indexes_take_none_of_the_states_room() {
    use blz::storage::object::StateFile;
    use blz::storage::Storage;
    let (store, mut want, all) = sealed_dataset();
    let with_blocks = |f: &StateFile| match f {
        StateFile::Object { front, .. } | StateFile::Extents { front, .. } => {
            front.as_ref().is_some_and(|fr| fr.blocks.is_some())
        }
        StateFile::Inline { .. } => false,
    };
    let held =
        |s: &State| -> Vec<String> { s.manifests.iter().flat_map(|m| m.paths.clone()).collect() };
    let indexed = held(&all)
        .iter()
        .filter(|p| with_blocks(&all.files[*p]))
        .count();
    assert!(
        indexed > 10,
        "{indexed} manifest-held files carry block indexes"
    );

    // A write to the second file through a handle with no room for indexes in the state.
    let h = handle(&store, SEAL);
    h.set_inline_block_indexes(0);
    let root = h.root().to_path_buf();
    let mut ds =
        Dataset::open_in(Arc::clone(&h) as Arc<dyn Storage>, &root, Mode::ReadWrite).unwrap();
    let at = (PER_FILE as usize) * CHUNK + 1;
    ds.write_slice(
        s![at..at + 3],
        &Array1::from(vec![-9i64; 3]).into_dyn().view(),
    )
    .unwrap();
    drop(ds);
    want[at..at + 3].fill(-9);
    let after = handle(&store, SEAL).state().unwrap().unwrap();
    // File names count from 1: chunk 4 is in the second file.
    let second = "data/__2__.bin";
    for m in &all.manifests {
        let kept = after.manifests.iter().any(|n| n.key == m.key);
        assert_eq!(
            kept,
            !m.paths.iter().any(|p| p == second),
            "manifest {} holding {:?}",
            m.key,
            m.paths
        );
    }
    let still: Vec<String> = held(&after);
    for p in after.files.keys().filter(|p| !still.contains(p)) {
        assert!(
            !with_blocks(&after.files[p]),
            "{p} keeps its index in the state: {:?}",
            after.files[p]
        );
    }
    assert_eq!(read(&store), want);
}
