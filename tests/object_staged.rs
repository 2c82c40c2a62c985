//! Staged writes on an object store (`spec/object-store.md` §8): workers in other processes
//! put whole superchunk files into the session's shared prefix, and the dataset's writer
//! adopts them (no bytes copied) and commits once. Against the in-memory store: round trips
//! of appends and creates, readers that see nothing before the commit, retried and late
//! workers, every failure leaving the dataset as it was, and garbage collection of what a
//! failed write left.

use blz::array::staged::{self, StagedWrite};
use blz::storage::object::{collect_garbage, StateFile, STATE_KEY};
use blz::storage::{write_file_atomic, ObjectStorage, SharedDir, Storage};
use blz::{CreateOptions, DType, Dataset, Error, Mode};
use futures::TryStreamExt;
use ndarray::SliceInfoElem;
use object_store::memory::InMemory;
use object_store::{ObjectStore, ObjectStoreExt};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The dataset's prefix in `store`: one per store, so that tests running at once in this
/// process never share a dataset (nor its in-process writer lock).
fn prefix(store: &Arc<InMemory>) -> String {
    format!("runs/{:x}.blz", Arc::as_ptr(store) as usize)
}

fn opts(chunks: u64, superchunksize: u64) -> CreateOptions {
    CreateOptions {
        chunkshape: Some(vec![chunks]),
        superchunksize: Some(superchunksize),
        ..Default::default()
    }
}

/// `n` f64 values from `offset` as native-endian bytes.
fn values(offset: u64, n: u64) -> Vec<u8> {
    (offset..offset + n)
        .flat_map(|i| ((i as f64) * 0.5 - 3.0).to_ne_bytes())
        .collect()
}

/// A handle on the dataset, as a new process opens it.
fn handle(store: &Arc<InMemory>) -> Arc<ObjectStorage> {
    Arc::new(ObjectStorage::in_memory(store, &prefix(store)).unwrap())
}

fn root(store: &Arc<InMemory>) -> PathBuf {
    handle(store).root().to_path_buf()
}

fn open_rw(store: &Arc<InMemory>) -> Dataset {
    Dataset::open_in(handle(store), &root(store), Mode::ReadWrite).unwrap()
}

fn all_bytes(ds: &Dataset) -> Vec<u8> {
    let sel = ds.resolve(&[]).unwrap();
    ds.read_bytes(&sel).unwrap()
}

/// What a new reader sees.
fn reader_bytes(store: &Arc<InMemory>) -> Vec<u8> {
    let ds = Dataset::open_in(handle(store), &root(store), Mode::ReadOnly).unwrap();
    all_bytes(&ds)
}

/// Every object key below the dataset's prefix, relative to it.
fn keys(store: &Arc<InMemory>) -> Vec<String> {
    let prefix = prefix(store);
    let p = object_store::path::Path::from(prefix.as_str());
    let listed: Vec<object_store::ObjectMeta> =
        futures::executor::block_on(store.list(Some(&p)).try_collect()).unwrap();
    let mut k: Vec<String> = listed
        .iter()
        .map(|m| m.location.as_ref()[prefix.len() + 1..].to_string())
        .collect();
    k.sort();
    k
}

/// The shared directory of `s`, as a worker in another process reaches it.
fn worker_dir(store: &Arc<InMemory>, s: &StagedWrite) -> Arc<dyn SharedDir> {
    let dir = handle(store)
        .shared_dir(&root(store), s.id())
        .unwrap()
        .expect("an object store has shared directories");
    assert_eq!(dir.location(), s.dir());
    dir
}

/// Writes every worker region of `s` (last first) from `data`, all rows after the write.
fn write_regions(store: &Arc<InMemory>, s: &StagedWrite, data: &[u8], units: u64) {
    let dir = worker_dir(store, s);
    for (start, rows) in s.regions(units).into_iter().rev() {
        let (a, b) = (start as usize * 8, (start + rows) as usize * 8);
        staged::write_rows_shared(dir.as_ref(), start, &data[a..b]).unwrap();
    }
}

fn head<'a>(s: &StagedWrite, data: &'a [u8], old: u64) -> &'a [u8] {
    &data[old as usize * 8..(old + s.head_rows()) as usize * 8]
}

/// A dataset of `rows` rows on a new in-memory store.
fn made(rows: u64) -> Arc<InMemory> {
    let store = Arc::new(InMemory::new());
    let mut ds = Dataset::create_in(
        handle(&store),
        &root(&store),
        DType::F64,
        &[0],
        &opts(50, 2),
    )
    .unwrap();
    ds.append_bytes(&values(0, rows), rows).unwrap();
    store
}

#[test]
fn an_append_through_workers_commits_once_and_copies_nothing() {
    let store = made(130);
    let mut ds = open_rw(&store);
    let all = values(0, 3_130);
    let s = ds.begin_staged(3_000).unwrap();
    assert_eq!((s.head_rows(), s.worker_rows()), (70, (200, 3_130)));
    assert!(s
        .dir()
        .to_str()
        .unwrap()
        .starts_with(&format!("memory://{}/staged/", prefix(&store))));
    write_regions(&store, &s, &all, 3);
    // Before the commit a reader sees the dataset as it was: no state names the uploads.
    assert_eq!(reader_bytes(&store), values(0, 130));
    let (indexes, uploaded): (Vec<String>, Vec<String>) = keys(&store)
        .into_iter()
        .filter(|k| k.starts_with("staged/") && !k.ends_with("/session.json"))
        .partition(|k| k.ends_with(".blocks"));
    // Files 3 to 32 (chunks of 50 rows, two per file), each one object, and its block
    // index beside it.
    assert_eq!(uploaded.len(), 30, "{uploaded:?}");
    assert!(
        uploaded
            .iter()
            .all(|k| indexes.contains(&format!("{k}.blocks"))),
        "{indexes:?}"
    );
    let h = head(&s, &all, 130).to_vec();
    ds.commit_staged(s, &h).unwrap();
    assert_eq!(all_bytes(&ds), all);
    drop(ds);
    assert_eq!(reader_bytes(&store), all);
    // The state names the workers' objects where they lie, with their fronts: nothing was
    // copied, and opening and reading one chunk is two requests.
    let h = handle(&store);
    let state = h.state().unwrap().unwrap();
    for f in 3..=32 {
        match &state.files[&format!("data/__{f}__.bin")] {
            StateFile::Object { key, front, .. } => {
                assert!(uploaded.contains(key), "{key}");
                let front = front.as_ref().expect("a front");
                assert!(front.blocks.is_some(), "{key} has no block index");
            }
            other => panic!("{other:?}"),
        }
    }
    let ds = Dataset::open_in(
        Arc::clone(&h) as Arc<dyn Storage>,
        &root(&store),
        Mode::ReadOnly,
    )
    .unwrap();
    let sel = ds
        .resolve(&[SliceInfoElem::Slice {
            start: 2_000,
            end: Some(2_010),
            step: 1,
        }])
        .unwrap();
    assert_eq!(ds.read_bytes(&sel).unwrap(), values(2_000, 10));
    assert_eq!(h.requests(), 2);
    assert!(ds.verify(|_, _| {}).is_empty());
    // The session's document went with the commit; nothing else was left.
    let left: Vec<String> = keys(&store)
        .into_iter()
        .filter(|k| k.starts_with("staged/") && !uploaded.contains(k))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // Garbage collection keeps every object the state names.
    collect_garbage(&handle(&store), Duration::ZERO).unwrap();
    assert_eq!(reader_bytes(&store), all);
}

#[test]
fn a_staged_create_appears_only_at_its_commit() {
    let store = Arc::new(InMemory::new());
    let rows = 1_000;
    let all = values(0, rows);
    let c = Dataset::create_staged(
        handle(&store),
        &root(&store),
        DType::F64,
        &[],
        &opts(64, 2),
        rows,
    )
    .unwrap();
    let s = c.session().unwrap();
    assert_eq!(s.head_rows(), 0);
    write_regions(&store, s, &all, 2);
    assert!(!keys(&store).contains(&STATE_KEY.to_string()));
    assert!(Dataset::open_in(handle(&store), &root(&store), Mode::ReadOnly).is_err());
    let ds = c.commit().unwrap();
    assert_eq!(all_bytes(&ds), all);
    drop(ds);
    assert_eq!(reader_bytes(&store), all);
    // Nothing of the build (`.tmp-build`) ever reached the store.
    let listed: Vec<object_store::ObjectMeta> =
        futures::executor::block_on(store.list(None).try_collect()).unwrap();
    assert!(listed.iter().all(|m| m
        .location
        .as_ref()
        .starts_with(&format!("{}/", prefix(&store)))));
}

#[test]
fn a_retried_worker_adds_objects_and_the_commit_takes_one_per_file() {
    let store = made(100);
    let mut ds = open_rw(&store);
    let all = values(0, 600);
    let s = ds.begin_staged(500).unwrap();
    write_regions(&store, &s, &all, 1);
    // The task for rows 200..300 (file 3) runs again.
    let dir = worker_dir(&store, &s);
    staged::write_rows_shared(dir.as_ref(), 200, &all[200 * 8..300 * 8]).unwrap();
    let twice = keys(&store)
        .into_iter()
        .filter(|k| k.contains("/__3__.bin.") && !k.ends_with(".blocks"))
        .count();
    assert_eq!(twice, 2);
    ds.commit_staged(s, &[]).unwrap();
    assert_eq!(reader_bytes(&store), all);
    // The copy the commit did not take is gone (and the block indexes, now in the state);
    // a late worker is refused.
    let once = keys(&store)
        .into_iter()
        .filter(|k| k.contains("/__3__.bin."))
        .count();
    assert_eq!(once, 1);
    let err = staged::write_rows_shared(dir.as_ref(), 200, &all[200 * 8..300 * 8]).unwrap_err();
    assert!(err.to_string().contains("committed or abandoned"), "{err}");
}

#[test]
fn every_failure_leaves_the_dataset_as_it_was_and_gc_removes_the_uploads() {
    let store = made(100);
    collect_garbage(&handle(&store), Duration::ZERO).unwrap();
    let before = keys(&store);
    let all = values(0, 600);

    // A worker that never finished: the commit names the missing file.
    let mut ds = open_rw(&store);
    let s = ds.begin_staged(500).unwrap();
    let dir = worker_dir(&store, &s);
    staged::write_rows_shared(dir.as_ref(), 100, &all[100 * 8..200 * 8]).unwrap();
    staged::write_rows_shared(dir.as_ref(), 300, &all[300 * 8..600 * 8]).unwrap();
    let err = ds.commit_staged(s, &[]).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(err.to_string().contains("__3__.bin"), "{err}");
    assert!(err.to_string().contains("did not finish"), "{err}");
    drop(ds);
    assert_eq!(reader_bytes(&store), values(0, 100));

    // A file that is not one of the write's.
    let mut ds = open_rw(&store);
    let s = ds.begin_staged(500).unwrap();
    write_regions(&store, &s, &all, 1);
    let dir = worker_dir(&store, &s);
    dir.put("__9__.bin.0123456789abcdef", vec![1u8; 10].into())
        .unwrap();
    let err = ds.commit_staged(s, &[]).unwrap_err();
    assert!(
        err.to_string().contains("not a file of this staged write"),
        "{err}"
    );
    drop(ds);

    // A file of another dataset in the place of one of this write's.
    let other = made(700);
    let mut ods = open_rw(&other);
    let os = ods.begin_staged(500).unwrap();
    write_regions(&other, &os, &values(0, 1_200), 1);
    let foreign = keys(&other)
        .into_iter()
        .find(|k| k.contains("/__8__.bin."))
        .unwrap();
    let bytes = futures::executor::block_on(async {
        other
            .get(&object_store::path::Path::from(format!(
                "{}/{foreign}",
                prefix(&other)
            )))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap()
    });
    drop(os);
    let mut ds = open_rw(&store);
    let s = ds.begin_staged(700).unwrap();
    let all7 = values(0, 800);
    let dir = worker_dir(&store, &s);
    for (start, rows) in s.regions(1) {
        if start == 700 {
            continue;
        }
        let (a, b) = (start as usize * 8, (start + rows) as usize * 8);
        staged::write_rows_shared(dir.as_ref(), start, &all7[a..b]).unwrap();
    }
    dir.put("__8__.bin.00000000000000ff", bytes).unwrap();
    let err = ds.commit_staged(s, &[]).unwrap_err();
    assert!(!matches!(err, Error::Conflict { .. }), "{err}");
    assert!(err.to_string().contains("__8__.bin"), "{err}");
    drop(ds);

    // Abandoned: dropped, or aborted.
    let mut ds = open_rw(&store);
    let s = ds.begin_staged(500).unwrap();
    write_regions(&store, &s, &all, 1);
    ds.abort_staged(s).unwrap();
    let s = ds.begin_staged(500).unwrap();
    write_regions(&store, &s, &all, 1);
    drop(s);
    drop(ds);

    // Nothing changed, and a write whose writer was killed (its session never removed)
    // is garbage to gc.
    assert_eq!(reader_bytes(&store), values(0, 100));
    let mut ds = open_rw(&store);
    let s = ds.begin_staged(500).unwrap();
    write_regions(&store, &s, &all, 1);
    std::mem::forget(s);
    drop(ds);
    assert_eq!(reader_bytes(&store), values(0, 100));
    assert!(keys(&store).len() > before.len());
    collect_garbage(&handle(&store), Duration::ZERO).unwrap();
    assert_eq!(keys(&store), before);
    assert_eq!(reader_bytes(&store), values(0, 100));

    // And the dataset takes the next staged write.
    let mut ds = open_rw(&store);
    let s = ds.begin_staged(500).unwrap();
    write_regions(&store, &s, &all, 2);
    ds.commit_staged(s, &[]).unwrap();
    assert_eq!(reader_bytes(&store), all);
}

#[test]
fn another_commit_between_begin_and_commit_is_a_conflict() {
    let store = made(100);
    let mut ds = open_rw(&store);
    let all = values(0, 600);
    let s = ds.begin_staged(500).unwrap();
    write_regions(&store, &s, &all, 1);
    // Another process commits meanwhile (its attributes: this process holds the lock).
    let other = handle(&store);
    let r = root(&store);
    write_file_atomic(
        other.as_ref(),
        &r.join("meta/attributes"),
        b"{\"by\": \"other\"}",
    )
    .unwrap();
    other.publish(&r).unwrap();
    let err = ds.commit_staged(s, &[]).unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err}");
    drop(ds);
    assert_eq!(reader_bytes(&store), values(0, 100));
}

#[test]
fn gc_removes_what_a_create_killed_before_its_commit_left() {
    let store = Arc::new(InMemory::new());
    let all = values(0, 1_000);
    let c = Dataset::create_staged(
        handle(&store),
        &root(&store),
        DType::F64,
        &[],
        &opts(64, 2),
        1_000,
    )
    .unwrap();
    write_regions(&store, c.session().unwrap(), &all, 1);
    // The writer killed: nothing runs its cleanup.
    std::mem::forget(c);
    assert!(keys(&store).iter().all(|k| k.starts_with("staged/")));
    assert!(!keys(&store).is_empty());
    let done = collect_garbage(&handle(&store), Duration::ZERO).unwrap();
    assert!(!done.deleted.is_empty());
    assert_eq!(keys(&store), Vec::<String>::new());
    // A prefix holding no dataset and nothing of blz's is not collected.
    futures::executor::block_on(store.put(
        &object_store::path::Path::from(format!("{}/notes.txt", prefix(&store))),
        vec![1u8, 2, 3].into(),
    ))
    .unwrap();
    let err = collect_garbage(&handle(&store), Duration::ZERO).unwrap_err();
    assert!(err.to_string().contains("no dataset there"), "{err}");
    assert_eq!(keys(&store), vec!["notes.txt".to_string()]);
}

/// Files over `MULTIPART_MIN` go up in parts (a worker's and a commit's alike) and read back
/// whole.
#[test]
fn large_files_upload_in_parts_and_read_back() {
    use blz::storage::object::MULTIPART_MIN;
    let store = Arc::new(InMemory::new());
    // Incompressible values: 3 chunks of 3 Mi elements per file, 72 MiB a file.
    let chunk = 3u64 << 20;
    let n = 6 * chunk;
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let all: Vec<u8> = (0..n)
        .flat_map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x.to_ne_bytes()
        })
        .collect();
    let c = Dataset::create_staged(
        handle(&store),
        &root(&store),
        DType::U64,
        &[],
        &opts(chunk, 3),
        n,
    )
    .unwrap();
    write_regions(&store, c.session().unwrap(), &all, 1);
    let mut ds = c.commit().unwrap();
    // A commit's own upload of a large file: a second dataset file rewritten whole.
    ds.append_bytes(&all[..(3 * chunk * 8) as usize], 3 * chunk)
        .unwrap();
    drop(ds);
    let h = handle(&store);
    let state = h.state().unwrap().unwrap();
    let big = state
        .files
        .values()
        .filter(|f| match f {
            StateFile::Object { len, .. } => *len > MULTIPART_MIN as u64,
            _ => false,
        })
        .count();
    assert_eq!(big, 3, "{:?}", state.files.keys().collect::<Vec<_>>());
    let mut want = all.clone();
    want.extend_from_slice(&all[..(3 * chunk * 8) as usize]);
    assert_eq!(reader_bytes(&store), want);
}

/// The block indexes workers put beside their files go into the state with them, so that a
/// short read of a file a worker wrote fetches just its blocks; an index that does not fit
/// its file (here another file's) is left out, and that file's short reads fetch whole
/// chunks; the values are right either way.
#[test]
fn a_staged_write_keeps_its_workers_block_indexes() {
    use blz::storage::OpenMode;
    use blz_format::blpk::SuperchunkReader;
    let store = Arc::new(InMemory::new());
    // Chunks of 2^17 float64 noise (1 MiB: 8 blocks of 128 KiB), two to a file.
    let chunk = 1u64 << 17;
    let mut ds = Dataset::create_in(
        handle(&store),
        &root(&store),
        DType::F64,
        &[0],
        &opts(chunk, 2),
    )
    .unwrap();
    let n = 8 * chunk;
    let mut seed = 5u64;
    let all: Vec<u8> = (0..n)
        .flat_map(|_| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            ((seed >> 11) as f64 / (1u64 << 53) as f64).to_ne_bytes()
        })
        .collect();
    let s = ds.begin_staged(n).unwrap();
    write_regions(&store, &s, &all, 1);
    // File 2's index replaced by file 1's: its offsets are the same, its chunks' sizes not.
    let sidecar = |f: u64| {
        keys(&store)
            .into_iter()
            .find(|k| k.contains(&format!("/__{f}__.bin.")) && k.ends_with(".blocks"))
            .unwrap()
    };
    let at = |k: &str| object_store::path::Path::from(format!("{}/{k}", prefix(&store)));
    let (one, two) = (at(&sidecar(1)), at(&sidecar(2)));
    let one = futures::executor::block_on(async {
        store.get(&one).await.unwrap().bytes().await.unwrap()
    });
    futures::executor::block_on(store.put(&two, one.into())).unwrap();
    let h = head(&s, &all, 0).to_vec();
    ds.commit_staged(s, &h).unwrap();
    drop(ds);
    assert_eq!(reader_bytes(&store), all);
    let h = handle(&store);
    let state = h.state().unwrap().unwrap();
    let has_index = |f: u64| match &state.files[&format!("data/__{f}__.bin")] {
        StateFile::Object { front, .. } => front.as_ref().is_some_and(|fr| fr.blocks.is_some()),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        (1..=4).map(has_index).collect::<Vec<_>>(),
        [true, false, true, true]
    );
    for (f, indexed) in [(1, true), (2, false), (3, true)] {
        let file = h
            .open(
                &root(&store).join(format!("data/__{f}__.bin")),
                OpenMode::Read,
            )
            .unwrap();
        let r = SuperchunkReader::open(file).unwrap();
        let blocks = r.block_read_range(1, 1000 * 8, 80).unwrap();
        assert_eq!(blocks.is_some(), indexed, "file {f}: {blocks:?}");
    }
    let ds = Dataset::open_in(h, &root(&store), Mode::ReadOnly).unwrap();
    for start in [1000, 3 * chunk + 77, 5 * chunk + 9] {
        let sel = ds
            .resolve(&[SliceInfoElem::Slice {
                start: start as isize,
                end: Some(start as isize + 10),
                step: 1,
            }])
            .unwrap();
        let (a, b) = (start as usize * 8, (start as usize + 10) * 8);
        assert_eq!(ds.read_bytes(&sel).unwrap(), all[a..b], "{start}");
    }
    // The indexes went with the session.
    assert!(!keys(&store).iter().any(|k| k.ends_with(".blocks")));
}
