//! Reads of many chunks from an object store (`spec/object-store.md` §4, "Reading a file"):
//! the chunks a selection needs from one file are fetched together, one ranged GET per run
//! of chunks lying close (`ReadTuning::coalesce`), a long run split into parts read at once
//! (`ReadTuning::part_size`), nothing asked for the bytes the state's front holds. The store
//! is the in-memory one behind a wrapper that records every GET and sends each answer in
//! small frames, as a server's answer streams in, so these run every time,
//! with no server; every read is compared with the same dataset on a local disk.

mod common;

use blz::storage::object::{collect_garbage, ExtentObject, ReadTuning, StateFile};
use blz::storage::{ObjectStorage, OpenMode, Storage};
use blz::{CreateOptions, DType, Dataset, Error, Mode, Selection};
use ndarray::ArrayD;
use object_store::path::Path as OPath;
use object_store::{ObjectStore, ObjectStoreExt};
use proptest::prelude::*;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

mod recording;

use recording::{both, data_files, read_sel, Recording, CHUNK, COLS, PER_FILE, ROWS};

/// A full read: after the state, one GET per file, each covering that file's chunks in one
/// run, none of the bytes the front holds; the values those of the local copy.
#[test]
fn a_full_read_is_one_get_per_file() {
    let (rec, _dir, local) = both();
    let s = rec.open();
    let files = data_files(&s, &rec.prefix);
    assert_eq!(files.len(), 7, "{files:?}");
    assert!(files.iter().all(|(_, _, fr)| !fr.is_empty()), "fronts kept");
    let ds =
        Dataset::open_in(Arc::clone(&s) as Arc<dyn Storage>, s.root(), Mode::ReadOnly).unwrap();
    assert_eq!(rec.take().len(), 1, "opening is the state's GET");
    let got = ds.read::<i64>().unwrap();
    let want = Dataset::open(&local).unwrap().read::<i64>().unwrap();
    assert_eq!(got, want);
    let gets = rec.take();
    assert_eq!(gets.len(), files.len(), "{gets:?}");
    for (_, key, front) in &files {
        let mine: Vec<_> = gets.iter().filter(|(k, _)| k == key).collect();
        assert_eq!(mine.len(), 1, "{key}: {gets:?}");
        let r = mine[0].1.clone().unwrap();
        for f in front {
            assert!(
                r.end <= f.start || f.end <= r.start,
                "{r:?} asks front bytes {f:?}"
            );
        }
    }
}

/// A read of many files keeps as many GETs in flight as the handle's concurrency says
/// (`BLZ_S3_CONCURRENCY`), more or fewer than the CPU threads or any pool's size, never
/// more; the values are right either way.
#[test]
fn a_read_keeps_its_concurrency_in_flight() {
    let rec = Recording::new();
    let s = rec.open();
    let root = s.root().to_path_buf();
    let o = CreateOptions {
        chunkshape: Some(vec![1000]),
        superchunksize: Some(1),
        ..Default::default()
    };
    let n = 40_000usize;
    let data = ndarray::Array1::from_shape_fn(n, |i| (i as i64) * 3 - 7).into_dyn();
    let mut ds = Dataset::create_in(s, &root, DType::I64, &[0], &o).unwrap();
    ds.append(&data.view()).unwrap();
    drop(ds);
    *rec.delay.lock().unwrap() = Some(std::time::Duration::from_millis(150));
    for concurrency in [24, 5, 40] {
        let s = rec.open();
        s.set_read_tuning(ReadTuning {
            concurrency,
            ..ReadTuning::DEFAULT
        });
        let ds =
            Dataset::open_in(Arc::clone(&s) as Arc<dyn Storage>, s.root(), Mode::ReadOnly).unwrap();
        rec.take();
        rec.most_in_flight
            .store(0, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(ds.read::<i64>().unwrap(), data, "concurrency {concurrency}");
        assert_eq!(rec.take().len(), 40, "one GET per file");
        assert_eq!(
            rec.most_in_flight.load(std::sync::atomic::Ordering::SeqCst),
            concurrency,
            "GETs in flight at once, at concurrency {concurrency}"
        );
    }
}

/// Reads running on every thread of the global rayon pool at once (columns of a table read
/// side by side, a caller's own `par_iter`) all finish: none waits for a thread that
/// another one holds.
#[test]
fn reads_on_every_pool_thread_at_once_finish() {
    let (rec, _dir, local) = both();
    let want = Dataset::open(&local).unwrap().read::<i64>().unwrap();
    let s = rec.open();
    let ds = Arc::new(
        Dataset::open_in(Arc::clone(&s) as Arc<dyn Storage>, s.root(), Mode::ReadOnly).unwrap(),
    );
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = Arc::clone(&ds);
    std::thread::spawn(move || {
        let got: Vec<bool> =
            rayon::broadcast(|_| (0..3).all(|_| reader.read::<i64>().is_ok_and(|a| a == want)));
        let _ = tx.send(got);
    });
    let got = rx
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("reads on every pool thread at once did not finish in 120 s");
    assert!(got.iter().all(|&ok| ok), "{got:?}");
}

/// A read of ten elements after opening is still one GET of just its chunk.
#[test]
fn a_small_read_fetches_its_chunk_alone() {
    let (rec, _dir, local) = both();
    let s = rec.open();
    let ds =
        Dataset::open_in(Arc::clone(&s) as Arc<dyn Storage>, s.root(), Mode::ReadOnly).unwrap();
    let got = read_sel(&ds, "123,5:15");
    let want = read_sel(&Dataset::open(&local).unwrap(), "123,5:15");
    assert_eq!(got, want);
    let gets = rec.take();
    assert_eq!(gets.len(), 2, "the state and the chunk: {gets:?}");
    let r = gets[1].1.clone().unwrap();
    // One chunk of 50 x 20 i64 compresses to well under its 8000 bytes, and is all asked.
    assert!(r.end - r.start < 8000 + 64, "{r:?}");
}

/// The coalesce gap: two ranges of a file `g` bytes apart are one GET when the gap allowed
/// is at least `g`, two GETs below; part splitting makes several GETs of the same bytes.
#[test]
fn the_gap_merges_and_the_part_size_splits() {
    let (rec, _dir, _local) = both();
    let s = rec.open();
    let (path, key, _) = data_files(&s, &rec.prefix).remove(0);
    let f = s.open(&s.root().join(&path), OpenMode::Read).unwrap();
    let len = f.len().unwrap();
    let whole = futures::executor::block_on(async {
        rec.inner
            .get(&OPath::from(key.as_str()))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap()
    });
    assert_eq!(whole.len() as u64, len);
    // Two ranges `gap` bytes apart, past the front (which covers the file's start).
    let q = len / 8;
    assert!(q > 100, "a file of {len} bytes");
    let gap = q / 2;
    let (a, b) = (2 * q..3 * q, 3 * q + gap..4 * q);
    let check = |got: Vec<blz::storage::Bytes>| {
        assert_eq!(got[0], whole.slice(a.start as usize..a.end as usize));
        assert_eq!(got[1], whole.slice(b.start as usize..b.end as usize));
    };
    rec.take();
    for (allowed, gets) in [(gap - 1, 2), (gap, 1), (0, 2), (1 << 20, 1)] {
        s.set_read_tuning(ReadTuning {
            coalesce: allowed,
            ..ReadTuning::DEFAULT
        });
        check(f.read_ranges(&[a.clone(), b.clone()]).unwrap());
        let seen = rec.take();
        assert_eq!(seen.len(), gets, "gap {gap}, allowed {allowed}: {seen:?}");
        if gets == 1 {
            assert_eq!(seen[0].1, Some(a.start..b.end));
        }
    }
    // Adjacent ranges are one GET even with no gap allowed.
    s.set_read_tuning(ReadTuning {
        coalesce: 0,
        ..ReadTuning::DEFAULT
    });
    let got = f
        .read_ranges(&[a.start..a.start + 10, a.start + 10..a.end])
        .unwrap();
    assert_eq!(got[1], whole.slice(a.start as usize + 10..a.end as usize));
    assert_eq!(rec.take().len(), 1);
    // Parts of `p` bytes: the merged run a.start..b.end is several GETs, at most two at
    // once, joined into the same bytes.
    let p = q / 3 + 1;
    s.set_read_tuning(ReadTuning {
        part_size: p,
        concurrency: 2,
        ..ReadTuning::DEFAULT
    });
    check(f.read_ranges(&[a.clone(), b.clone()]).unwrap());
    let mut seen: Vec<_> = rec.take().into_iter().map(|(_, r)| r.unwrap()).collect();
    seen.sort_by_key(|r| r.start);
    let want: Vec<Range<u64>> = (a.start..b.end)
        .step_by(p as usize)
        .map(|x| x..(x + p).min(b.end))
        .collect();
    assert!(want.len() > 3);
    assert_eq!(seen, want);
    // A read of the whole file, in parts, gives its bytes.
    let all = f.read_ranges(std::slice::from_ref(&(0..len))).unwrap();
    assert_eq!(all[0], whole);
    assert_eq!(rec.take().len() as u64, len.div_ceil(p));
    // A read the front answers whole asks nothing.
    let front = f.read_ranges(&[0..16, 0..0]).unwrap();
    assert_eq!(&front[0][..], &whole[..16]);
    assert!(front[1].is_empty());
    assert!(rec.take().is_empty());
    // Past the end is an error, as read_at's.
    assert!(f
        .read_ranges(std::slice::from_ref(&(len - 1..len + 1)))
        .is_err());
}

/// The shared dataset on the recording store and its local copy (opened), for the
/// reduction tests: the store's handle and root, its superchunk files and chunks.
struct ScanCase {
    rec: Arc<Recording>,
    _dir: tempfile::TempDir,
    l: Dataset,
    s: Arc<ObjectStorage>,
    root: PathBuf,
    nfiles: usize,
    chunks: u64,
}

fn scan_case() -> ScanCase {
    let (rec, _dir, local) = both();
    let l = Dataset::open(&local).unwrap();
    let s = rec.open();
    let root = s.root().to_path_buf();
    let nfiles = data_files(&s, &rec.prefix).len();
    ScanCase {
        rec,
        _dir,
        l,
        s,
        root,
        nfiles,
        chunks: (ROWS / CHUNK[0]) * (COLS / CHUNK[1]),
    }
}

/// A scan (a reduction) fetches each run of chunks it decodes with one GET, many at once,
/// where it read chunk by chunk before; its results are those of the local copy, also when
/// the part size cuts every run into GETs of a few chunks.
#[test]
fn a_reduction_fetches_runs_of_chunks() {
    use blz::scan::{reduce, Reduction, ScanOptions};
    let c = scan_case();
    for part in [16u64 << 20, 2 * CHUNK[0] * CHUNK[1] * 8] {
        c.s.set_read_tuning(ReadTuning {
            part_size: part,
            ..ReadTuning::DEFAULT
        });
        let ds = Dataset::open_in(
            Arc::clone(&c.s) as Arc<dyn Storage>,
            &c.root,
            Mode::ReadOnly,
        )
        .unwrap();
        c.rec.take();
        for op in [
            Reduction::Sum,
            Reduction::Min,
            Reduction::Max,
            Reduction::Count,
        ] {
            let want = reduce(&c.l, &ScanOptions::default(), op).unwrap();
            let got = reduce(&ds, &ScanOptions::default(), op).unwrap();
            assert_eq!(got, want, "{op:?}, part {part}");
        }
        let gets = c.rec.take();
        let per_op = gets.len() / 4;
        if part == 16 << 20 {
            // Runs of whole units: a few GETs per file, not one per chunk.
            assert!(
                per_op <= 2 * c.nfiles,
                "{per_op} GETs for {} chunks",
                c.chunks
            );
        } else {
            // Runs of two chunks.
            assert!(per_op >= (c.chunks as usize) / 2, "{per_op} GETs");
            assert!(
                per_op < c.chunks as usize,
                "{per_op} GETs for {} chunks",
                c.chunks
            );
        }
    }
}

/// Reductions along axes (`var`, `std`, `argmax`, ...) fetch each unit's run of chunks
/// with one GET, where they read chunk by chunk, two at a time (on the CPU's threads); their
/// results are those of the local copy, along every axis and none.
#[test]
fn an_axis_reduction_fetches_runs_of_chunks() {
    use blz::scan::{reduce_axis, ReduceOutput, Reduction, ScanOptions};
    let c = scan_case();
    let ds = Dataset::open_in(
        Arc::clone(&c.s) as Arc<dyn Storage>,
        &c.root,
        Mode::ReadOnly,
    )
    .unwrap();
    let opts = ScanOptions {
        statistics: false,
        ..ScanOptions::default()
    };
    let close = |a: &ReduceOutput, b: &ReduceOutput| match (a, b) {
        (ReduceOutput::F64(a), ReduceOutput::F64(b)) => {
            a.shape() == b.shape()
                && a.iter()
                    .zip(b.iter())
                    .all(|(x, y)| (x - y).abs() <= 1e-9 * x.abs().max(1.0))
        }
        _ => a == b,
    };
    for axes in [None, Some(&[0usize][..]), Some(&[1usize][..])] {
        for op in [
            Reduction::Var,
            Reduction::Std,
            Reduction::ArgMax,
            Reduction::Min,
            Reduction::Sum,
        ] {
            c.rec.take();
            let got = reduce_axis(&ds, &opts, op, axes, 1.0).unwrap();
            let gets = c.rec.take().len();
            let want = reduce_axis(&c.l, &opts, op, axes, 1.0).unwrap();
            assert!(
                close(&got, &want),
                "{op:?} over {axes:?}: {got:?} != {want:?}"
            );
            if axes.is_none() {
                // Whole runs of a file: a GET or two per file, not one per chunk.
                assert!(
                    gets <= 2 * c.nfiles && gets < c.chunks as usize,
                    "{op:?}: {gets} GETs for {} chunks in {} files",
                    c.chunks,
                    c.nfiles
                );
            }
        }
    }
}

/// A failed GET of a data object fails the read with the I/O error naming the file, as a
/// chunk's read did before; a missing object is still told apart (the state names it).
#[test]
fn a_failed_part_names_the_file() {
    let (rec, _dir, _local) = both();
    let s = rec.open();
    s.set_read_tuning(ReadTuning {
        part_size: 1000,
        ..ReadTuning::DEFAULT
    });
    let ds =
        Dataset::open_in(Arc::clone(&s) as Arc<dyn Storage>, s.root(), Mode::ReadOnly).unwrap();
    let (path, key, _) = data_files(&s, &rec.prefix).remove(2);
    *rec.fail.lock().unwrap() = Some(key.rsplit('/').next().unwrap().to_string());
    let e = ds.read::<i64>().unwrap_err();
    match &e {
        Error::Io { path: p, .. } => assert!(p.ends_with(&path), "{e}"),
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("refused (test fault)"), "{e}");
    *rec.fail.lock().unwrap() = None;
    futures::executor::block_on(rec.inner.delete(&OPath::from(key.as_str()))).unwrap();
    let e = ds.read::<i64>().unwrap_err();
    assert!(e.to_string().contains("the dataset is damaged"), "{e}");
}

/// A flipped byte inside a chunk the read fetched whole (the chunk is checked and decoded
/// where it landed, not copied first) is refused with the digest's error naming the file
/// and the chunk, for a full read, a reduction and a read of a few elements alike.
#[test]
fn a_damaged_chunk_fetched_whole_is_refused() {
    use blz::scan::{reduce, Reduction, ScanOptions};
    use blz_format::blpk::SuperchunkReader;
    let (rec, _dir, _local) = both();
    let s = rec.open();
    let (path, key, _) = data_files(&s, &rec.prefix)
        .into_iter()
        .find(|(p, _, _)| p.ends_with("__3__.bin"))
        .unwrap();
    let file = s.open(&s.root().join(&path), OpenMode::Read).unwrap();
    let r = SuperchunkReader::open(file).unwrap();
    let at = r.chunk_read_range(2).unwrap();
    let k = OPath::from(key.as_str());
    let mut bytes = futures::executor::block_on(async {
        rec.inner.get(&k).await.unwrap().bytes().await.unwrap()
    })
    .to_vec();
    // Past the Blosc header: the chunk's data, which only its digest guards.
    bytes[(at.start + 40) as usize] ^= 0x5a;
    futures::executor::block_on(rec.inner.put(&k, bytes.into())).unwrap();
    let s = rec.open();
    let ds =
        Dataset::open_in(Arc::clone(&s) as Arc<dyn Storage>, s.root(), Mode::ReadOnly).unwrap();
    let named = |e: &Error| match e {
        Error::ChecksumMismatch { path: p, chunk, .. } => {
            assert!(p.ends_with(&path), "{e}");
            assert_eq!(*chunk, 2, "{e}");
        }
        other => panic!("{other:?}"),
    };
    named(&ds.read::<i64>().unwrap_err());
    named(&reduce(&ds, &ScanOptions::default(), Reduction::Sum).unwrap_err());
    // Files are numbered from 1: chunk 2 of the third file is the dataset's chunk
    // 2 * PER_FILE + 2, in row-major chunk order.
    let k = 2 * PER_FILE + 2;
    let per_row = COLS / CHUNK[1];
    let (r0, c0) = ((k / per_row) * CHUNK[0], (k % per_row) * CHUNK[1]);
    let sel = Selection::parse(&format!("{}:{},{}:{}", r0 + 3, r0 + 4, c0 + 1, c0 + 6)).unwrap();
    named(&ds.read_selection::<i64>(&sel).unwrap_err());
}

/// A new dataset on an object store aims for 16 MiB files where its creator names no
/// superchunk size (objects many of which move at once); on a filesystem, 64 MiB.
#[test]
fn an_object_store_dataset_aims_for_smaller_files() {
    let rec = Recording::new();
    let s = rec.open();
    // 1 MiB chunks.
    let o = CreateOptions {
        chunkshape: Some(vec![1 << 17]),
        ..Default::default()
    };
    let ds = Dataset::create_in(
        Arc::clone(&s) as Arc<dyn Storage>,
        s.root(),
        DType::I64,
        &[0],
        &o,
    )
    .unwrap();
    assert_eq!(ds.storage_meta().superchunksize, 16);
    let dir = tempfile::tempdir().unwrap();
    let l = Dataset::create_with(dir.path().join("l.blz"), DType::I64, &[0], &o).unwrap();
    assert_eq!(l.storage_meta().superchunksize, 64);
    // A size the creator names is kept.
    let rec = Recording::new();
    let s = rec.open();
    let named = CreateOptions {
        superchunksize: Some(64),
        ..o
    };
    let ds = Dataset::create_in(
        Arc::clone(&s) as Arc<dyn Storage>,
        s.root(),
        DType::I64,
        &[0],
        &named,
    )
    .unwrap();
    assert_eq!(ds.storage_meta().superchunksize, 64);
}

/// A selection as text, from proptest's numbers: `a:b:step` on each axis, or an index.
fn selection() -> impl Strategy<Value = String> {
    let axis = |n: u64| {
        prop_oneof![
            (0..n).prop_map(|i| i.to_string()),
            (0..n, 0..=n, 1u64..40).prop_map(|(a, b, st)| format!("{a}:{b}:{st}")),
        ]
    };
    (axis(ROWS), axis(COLS)).prop_map(|(r, c)| format!("{r},{c}"))
}

/// Past the state's budget of block indexes, a file's index is an object of its own: the
/// state names it, the first short read of the file fetches it whole and later ones do not;
/// an append writes the file's new index as a new object and retires the old one, which gc
/// then removes while it keeps the live ones.
#[test]
fn block_indexes_past_the_budget_are_objects_of_their_own() {
    let (rec, _dir, local) = walk_with(4, Some(0));
    let s = rec.open();
    assert_eq!(indexed(&s), 0, "the state carries no index");
    let objects = index_objects(&s);
    assert_eq!(objects.len(), 2, "{objects:?}");
    let stored = stored_keys(&rec);
    for (_, o) in &objects {
        assert!(o.key.ends_with(".blocks"), "{o:?}");
        assert!(stored.contains(&o.key), "{o:?} not in {stored:?}");
    }
    let l = Dataset::open(&local).unwrap();
    let ds =
        Dataset::open_in(Arc::clone(&s) as Arc<dyn Storage>, s.root(), Mode::ReadOnly).unwrap();
    rec.take();
    // The first short read of the first file: its index, then just the blocks.
    assert_eq!(
        read_f64(&ds, "300000:300010"),
        read_f64(&l, "300000:300010")
    );
    let gets = rec.take();
    assert_eq!(gets.len(), 2, "{gets:?}");
    let (file0, index0) = &objects[0];
    assert!(file0.ends_with("__1__.bin"), "{file0}");
    assert_eq!(
        gets[0],
        (
            format!("{}/{}", rec.prefix, index0.key),
            Some(0..index0.size)
        )
    );
    let r = gets[1].1.clone().unwrap();
    assert!(r.end - r.start <= 2 * (130 << 10), "{r:?}");
    // The next short reads of the file: the blocks alone.
    for sel in ["16380:16390", "786431"] {
        assert_eq!(read_f64(&ds, sel), read_f64(&l, sel), "{sel}");
        let gets = rec.take();
        assert_eq!(gets.len(), 1, "{sel}: {gets:?}");
        assert!(!gets[0].0.ends_with(".blocks"), "{sel}: {gets:?}");
    }
    // A whole read needs no index.
    assert_eq!(ds.read::<f64>().unwrap(), l.read::<f64>().unwrap());
    assert!(rec.take().iter().all(|(k, _)| !k.ends_with(".blocks")));
    drop(ds);

    // An append to the last file (which holds two chunks of four): it reads the file's
    // index (its chunks' headers are in it), and writes the new one as a new object.
    let s = rec.open();
    s.set_inline_block_indexes(0);
    let mut ds = Dataset::open_in(
        Arc::clone(&s) as Arc<dyn Storage>,
        s.root(),
        Mode::ReadWrite,
    )
    .unwrap();
    let mut lw = Dataset::open_rw(&local).unwrap();
    let more = ndarray::Array1::from_shape_fn(1 << 18, |i| (i as f64).cos() * 1e3 + 0.5).into_dyn();
    rec.take();
    ds.append(&more.view()).unwrap();
    lw.append(&more.view()).unwrap();
    let gets = rec.take();
    let (file1, index1) = &objects[1];
    assert_eq!(
        gets,
        vec![(
            format!("{}/{}", rec.prefix, index1.key),
            Some(0..index1.size)
        )],
        "the append read the last file's index"
    );
    drop(ds);
    let s = rec.open();
    let after = index_objects(&s);
    assert_eq!(after.len(), 2, "{after:?}");
    assert_eq!(after[0], objects[0], "the first file's index is kept");
    assert_eq!(&after[1].0, file1);
    assert_ne!(
        after[1].1, *index1,
        "the appended file has a new index object"
    );
    let state = s.state().unwrap().unwrap();
    assert!(
        state.retired.iter().any(|r| r.key == index1.key),
        "the old index is retired"
    );
    // Old and new chunks of the appended file read by block.
    let l = Dataset::open(&local).unwrap();
    let ds =
        Dataset::open_in(Arc::clone(&s) as Arc<dyn Storage>, s.root(), Mode::ReadOnly).unwrap();
    rec.take();
    for sel in ["1100000:1100004", "1400000:1400010", "1600000:1600010"] {
        assert_eq!(read_f64(&ds, sel), read_f64(&l, sel), "{sel}");
        let gets = rec.take();
        let data: Vec<_> = gets
            .iter()
            .filter(|(k, _)| !k.ends_with(".blocks"))
            .collect();
        assert_eq!(data.len(), 1, "{sel}: {gets:?}");
        let r = data[0].1.clone().unwrap();
        assert!(r.end - r.start <= 2 * (130 << 10), "{sel}: {r:?}");
    }
    drop(ds);
    // gc removes the retired index and keeps the live ones.
    collect_garbage(&rec.open(), std::time::Duration::ZERO).unwrap();
    let stored = stored_keys(&rec);
    assert!(!stored.contains(&index1.key), "{stored:?}");
    for (_, o) in &after {
        assert!(stored.contains(&o.key), "{o:?} collected: {stored:?}");
    }
    assert_eq!(
        Dataset::open_in(rec.open() as Arc<dyn Storage>, s.root(), Mode::ReadOnly)
            .unwrap()
            .read::<f64>()
            .unwrap(),
        l.read::<f64>().unwrap()
    );
}

/// An index object that is missing or damaged costs the short read its blocks, not its
/// values: the chunk is read whole, with its digest.
#[test]
fn a_short_read_without_its_index_object_reads_the_chunk() {
    let (rec, _dir, local) = walk_with(3, Some(0));
    let s = rec.open();
    let objects = index_objects(&s);
    let l = Dataset::open(&local).unwrap();
    let (_, gone) = &objects[0];
    let (_, bad) = &objects[1];
    futures::executor::block_on(async {
        let p = |k: &str| OPath::from(format!("{}/{k}", rec.prefix));
        rec.inner.delete(&p(&gone.key)).await.unwrap();
        rec.inner
            .put(&p(&bad.key), b"not a zlib stream".to_vec().into())
            .await
            .unwrap();
    });
    let ds =
        Dataset::open_in(Arc::clone(&s) as Arc<dyn Storage>, s.root(), Mode::ReadOnly).unwrap();
    rec.take();
    for sel in ["300000:300010", "900000:900004"] {
        assert_eq!(read_f64(&ds, sel), read_f64(&l, sel), "{sel}");
        let gets = rec.take();
        let r = gets.last().unwrap().1.clone().unwrap();
        assert!(
            r.end - r.start > 1 << 20,
            "{sel}: the chunk whole: {gets:?}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..common::config(24)
    })]

    /// Any selection, with any gap and part size, reads what the local copy reads; no
    /// request asks the bytes the state's front holds (they need none).
    #[test]
    fn any_selection_reads_as_the_local_copy(
        sels in proptest::collection::vec(selection(), 1..4),
        gap in prop_oneof![Just(0u64), 0u64..20_000, Just(1 << 20)],
        part in prop_oneof![Just(16u64 << 20), 200u64..10_000],
        concurrency in 1usize..40,
    ) {
        let (rec, _dir, local) = BOTH.with(|b| b.clone());
        let s = rec.open();
        s.set_read_tuning(ReadTuning { coalesce: gap, part_size: part, concurrency });
        let fronts: Vec<(String, Vec<Range<u64>>)> =
            data_files(&s, &rec.prefix).into_iter().map(|(_, k, f)| (k, f)).collect();
        let ds = Dataset::open_in(Arc::clone(&s) as Arc<dyn Storage>, s.root(), Mode::ReadOnly)
            .unwrap();
        let l = Dataset::open(&local).unwrap();
        rec.take();
        for sel in &sels {
            prop_assert_eq!(read_sel(&ds, sel), read_sel(&l, sel), "{}", sel);
        }
        for (key, r) in rec.take() {
            let r = r.unwrap();
            prop_assert!(r.end - r.start <= part, "{:?} over the part size {}", r, part);
            for (k, front) in &fronts {
                if *k == key {
                    for f in front {
                        prop_assert!(r.end <= f.start || f.end <= r.start);
                    }
                }
            }
        }
    }
}

thread_local! {
    /// The datasets of the property, made once per thread.
    static BOTH: (Arc<Recording>, Arc<tempfile::TempDir>, PathBuf) = {
        let (rec, dir, local) = both();
        (rec, Arc::new(dir), local)
    };
}

/// A range is handed over as soon as the answer has streamed past it: the first half of
/// one GET's bytes reaches the caller while the server still holds back the second.
#[test]
fn a_range_is_handed_over_before_the_rest_of_its_answer() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let (rec, _dir, _local) = both();
    let s = rec.open();
    let (path, _, _) = data_files(&s, &rec.prefix).remove(0);
    let f = s.open(&s.root().join(&path), OpenMode::Read).unwrap();
    let len = f.len().unwrap();
    let (a, b) = (len / 2, len * 3 / 4);
    let opened = Arc::new(AtomicBool::new(false));
    *rec.hold.lock().unwrap() = Some(Arc::clone(&opened));
    rec.rest_sent.store(false, Ordering::SeqCst);
    rec.take();
    let seen = Mutex::new(Vec::new());
    f.read_ranges_each(&[a..b, b..len], &|i, bytes| {
        seen.lock()
            .unwrap()
            .push((i, bytes.len() as u64, rec.rest_sent.load(Ordering::SeqCst)));
        if i == 0 {
            opened.store(true, Ordering::SeqCst);
        }
    })
    .unwrap();
    *rec.hold.lock().unwrap() = None;
    // One GET for both ranges.
    assert_eq!(rec.take().len(), 1);
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen, vec![(0, b - a, false), (1, len - b, true)]);
    // And the same bytes as a plain read.
    let mut whole = vec![0u8; (len - a) as usize];
    f.read_at(a, &mut whole).unwrap();
    let got = f.read_ranges(&[a..b, b..len]).unwrap();
    assert_eq!([&got[0][..], &got[1][..]].concat(), whole);
}

/// Elements of a 1-D dataset of noisy float64 (a random walk: chunks of many Blosc blocks).
const WALK: usize = 6 << 18;
/// Its chunks: 2 MiB, of 16 blocks of 128 KiB.
const WALK_CHUNK: u64 = 1 << 18;

/// A random walk of `WALK` elements, in chunks of `WALK_CHUNK`, on the recording store and
/// on a local disk, with `per_file` chunks per file.
fn walk(per_file: u64) -> (Arc<Recording>, tempfile::TempDir, PathBuf) {
    walk_with(per_file, None)
}

/// [`walk`], its creator's commits putting at most `inline` bytes of block indexes in the
/// state when given.
fn walk_with(per_file: u64, inline: Option<u64>) -> (Arc<Recording>, tempfile::TempDir, PathBuf) {
    let rec = Recording::new();
    let s = rec.open();
    if let Some(n) = inline {
        s.set_inline_block_indexes(n);
    }
    let root = s.root().to_path_buf();
    let o = CreateOptions {
        chunkshape: Some(vec![WALK_CHUNK]),
        superchunksize: Some(per_file),
        ..Default::default()
    };
    let (mut x, mut seed) = (0f64, 11u64);
    let data = ndarray::Array1::from_shape_fn(WALK, |_| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        x += (seed >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
        x
    })
    .into_dyn();
    let mut ds = Dataset::create_in(s, &root, DType::F64, &[0], &o).unwrap();
    ds.append(&data.view()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("walk.blz");
    let mut l = Dataset::create_with(&local, DType::F64, &[0], &o).unwrap();
    l.append(&data.view()).unwrap();
    rec.take();
    (rec, dir, local)
}

/// The files of the state whose front carries a block index.
fn indexed(s: &ObjectStorage) -> usize {
    s.state()
        .unwrap()
        .unwrap()
        .files
        .values()
        .filter(|f| match f {
            blz::storage::object::StateFile::Object { front, .. }
            | blz::storage::object::StateFile::Extents { front, .. } => {
                front.as_ref().is_some_and(|fr| fr.blocks.is_some())
            }
            _ => false,
        })
        .count()
}

/// The objects of their own the state names for its files' block indexes, by file.
fn index_objects(s: &ObjectStorage) -> Vec<(String, ExtentObject)> {
    s.state()
        .unwrap()
        .unwrap()
        .files
        .iter()
        .filter_map(|(path, f)| match f {
            StateFile::Object { front, .. } | StateFile::Extents { front, .. } => front
                .as_ref()
                .and_then(|fr| fr.blocks_object.clone())
                .map(|o| (path.clone(), o)),
            _ => None,
        })
        .collect()
}

/// The keys below the recording store's dataset prefix.
fn stored_keys(rec: &Recording) -> Vec<String> {
    use futures::TryStreamExt;
    let prefix = OPath::from(rec.prefix.as_str());
    futures::executor::block_on(rec.inner.list(Some(&prefix)).try_collect::<Vec<_>>())
        .unwrap()
        .into_iter()
        .map(|m| m.location.to_string()[rec.prefix.len() + 1..].to_string())
        .collect()
}

fn read_f64(ds: &Dataset, sel: &str) -> ArrayD<f64> {
    ds.read_selection::<f64>(&Selection::parse(sel).unwrap())
        .unwrap()
}

/// A read of a few elements of a large chunk fetches, after the state, one GET of just the
/// Blosc blocks holding them (the state's block index says where they lie and their
/// CRC-32s), not the chunk; a read spanning most of a chunk still fetches it whole.
#[test]
fn a_small_read_fetches_only_its_blocks() {
    let (rec, _dir, local) = walk(3);
    let s = rec.open();
    assert_eq!(indexed(&s), 2, "both data files carry a block index");
    let ds =
        Dataset::open_in(Arc::clone(&s) as Arc<dyn Storage>, s.root(), Mode::ReadOnly).unwrap();
    let l = Dataset::open(&local).unwrap();
    rec.take();
    // Inside one block, then across two blocks' boundary (128 KiB = 16384 elements).
    for sel in ["300000:300010", "16380:16390", "786431"] {
        assert_eq!(read_f64(&ds, sel), read_f64(&l, sel), "{sel}");
        let gets = rec.take();
        assert_eq!(gets.len(), 1, "{sel}: {gets:?}");
        let r = gets[0].1.clone().unwrap();
        // Two blocks of noise at most, of a chunk of about 2 MiB compressed.
        assert!(r.end - r.start <= 2 * (130 << 10), "{sel}: {r:?}");
    }
    // A short read of several chunks: one GET, of the blocks of each.
    let pts = blz::fancy::Fancy::points(vec![vec![5, 262_150, 524_300, 524_301]]);
    let got = ds.read_fancy::<f64>(&pts).unwrap();
    assert_eq!(got, l.read_fancy::<f64>(&pts).unwrap());
    let gets = rec.take();
    let asked: u64 = gets
        .iter()
        .map(|(_, r)| r.clone().unwrap())
        .map(|r| r.end - r.start)
        .sum();
    assert!(!gets.is_empty() && asked <= 3 * (130 << 10), "{gets:?}");
    // Most of a chunk: the chunk whole.
    assert_eq!(read_f64(&ds, "1000:250000"), read_f64(&l, "1000:250000"));
    let gets = rec.take();
    assert_eq!(gets.len(), 1, "{gets:?}");
    let r = gets[0].1.clone().unwrap();
    assert!(r.end - r.start > 1 << 20, "{r:?}");
}

/// A flipped byte in a block a short read fetches is refused by the block's CRC-32, naming
/// the file and the chunk; a full read meets the chunk's digest.
#[test]
fn a_damaged_block_is_refused() {
    use blz_format::blpk::SuperchunkReader;
    let (rec, _dir, _local) = walk(3);
    let s = rec.open();
    let (path, key, _) = data_files(&s, &rec.prefix).remove(0);
    let file = s.open(&s.root().join(&path), OpenMode::Read).unwrap();
    let r = SuperchunkReader::open(file).unwrap();
    // Elements 300000.. are in chunk 1 of the first file, block 2 (300000 - 262144 = 37856).
    let blocks = r.block_read_range(1, 37_856 * 8, 80).unwrap().unwrap();
    let k = OPath::from(key.as_str());
    let mut bytes = futures::executor::block_on(async {
        rec.inner.get(&k).await.unwrap().bytes().await.unwrap()
    })
    .to_vec();
    bytes[((blocks.start + blocks.end) / 2) as usize] ^= 0x21;
    futures::executor::block_on(rec.inner.put(&k, bytes.into())).unwrap();
    let s = rec.open();
    let ds =
        Dataset::open_in(Arc::clone(&s) as Arc<dyn Storage>, s.root(), Mode::ReadOnly).unwrap();
    let e = ds
        .read_selection::<f64>(&Selection::parse("300000:300010").unwrap())
        .unwrap_err();
    match &e {
        Error::ChecksumMismatch {
            path: p,
            chunk,
            algorithm,
            ..
        } => {
            assert!(p.ends_with(&path), "{e}");
            assert_eq!((*chunk, *algorithm), (1, "crc32"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    // Elements of another block of the chunk read fine; the whole chunk does not.
    assert_eq!(read_f64(&ds, "262144:262150").len(), 6);
    assert!(matches!(
        ds.read::<f64>().unwrap_err(),
        Error::ChecksumMismatch { chunk: 1, .. }
    ));
}

/// An append keeps the index of the chunks it did not touch (no GET of them) and indexes
/// the chunks it wrote: every chunk, old and new, is then read by its blocks.
#[test]
fn an_append_keeps_and_extends_the_block_index() {
    let (rec, _dir, local) = walk(4);
    let s = rec.open();
    let mut ds = Dataset::open_in(
        Arc::clone(&s) as Arc<dyn Storage>,
        s.root(),
        Mode::ReadWrite,
    )
    .unwrap();
    let mut l = Dataset::open_rw(&local).unwrap();
    let more =
        ndarray::Array1::from_shape_fn(1 << 18, |i| (i as f64).sin() * 1e3 + 0.123).into_dyn();
    rec.take();
    ds.append(&more.view()).unwrap();
    l.append(&more.view()).unwrap();
    let gets = rec.take();
    assert!(gets.is_empty(), "the append read nothing: {gets:?}");
    let s = rec.open();
    let ds =
        Dataset::open_in(Arc::clone(&s) as Arc<dyn Storage>, s.root(), Mode::ReadOnly).unwrap();
    rec.take();
    for (chunk, sel) in ["20:30", "262200:262210", "600000:600004", "800000:800010"]
        .iter()
        .enumerate()
    {
        assert_eq!(read_f64(&ds, sel), read_f64(&l, sel), "{sel}");
        let gets = rec.take();
        assert_eq!(gets.len(), 1, "chunk {chunk}: {gets:?}");
        let r = gets[0].1.clone().unwrap();
        assert!(r.end - r.start <= 2 * (130 << 10), "chunk {chunk}: {r:?}");
    }
}

/// Incompressible data (Blosc stores its chunks as is): a short read still fetches only the
/// pieces of the chunk holding its elements, and an append reads no chunk header.
#[test]
fn a_short_read_of_incompressible_data_fetches_only_its_pieces() {
    let rec = Recording::new();
    let s = rec.open();
    let root = s.root().to_path_buf();
    let o = CreateOptions {
        chunkshape: Some(vec![WALK_CHUNK]),
        superchunksize: Some(3),
        ..Default::default()
    };
    let mut seed = 5u64;
    let mut noise = |n: usize| {
        ndarray::Array1::from_shape_fn(n, |_| {
            // splitmix64: every byte noise.
            seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = seed;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        })
        .into_dyn()
    };
    let data = noise(5 << 18);
    let mut ds = Dataset::create_in(s, &root, DType::U64, &[0], &o).unwrap();
    ds.append(&data.view()).unwrap();
    drop(ds);
    let s = rec.open();
    let ds = Dataset::open_in(
        Arc::clone(&s) as Arc<dyn Storage>,
        s.root(),
        Mode::ReadWrite,
    )
    .unwrap();
    rec.take();
    let read = |ds: &Dataset, a: usize, b: usize| {
        ds.read_selection::<u64>(&Selection::parse(&format!("{a}:{b}")).unwrap())
            .unwrap()
    };
    let short = |gets: &[(String, Option<Range<u64>>)]| {
        gets.len() == 1
            && gets[0]
                .1
                .as_ref()
                .is_some_and(|r| r.end - r.start <= 2 * (130 << 10))
    };
    for (a, b) in [
        (300_000, 300_010),
        (16_380, 16_390),
        ((5 << 18) - 1, 5 << 18),
    ] {
        assert_eq!(
            read(&ds, a, b),
            data.slice(ndarray::s![a..b]).into_dyn(),
            "{a}"
        );
        let gets = rec.take();
        assert!(short(&gets), "{a}: {gets:?}, of a 2 MiB chunk");
    }
    // An append to the last file (two chunks of three) reads nothing.
    let more = noise(1 << 18);
    let mut ds = ds;
    ds.append(&more.view()).unwrap();
    let gets = rec.take();
    assert!(gets.is_empty(), "the append read {gets:?}");
    let all = ndarray::concatenate(ndarray::Axis(0), &[data.view(), more.view()]).unwrap();
    let s = rec.open();
    let ds =
        Dataset::open_in(Arc::clone(&s) as Arc<dyn Storage>, s.root(), Mode::ReadOnly).unwrap();
    rec.take();
    let a = (5 << 18) + 1000;
    assert_eq!(
        read(&ds, a, a + 3),
        all.slice(ndarray::s![a..a + 3]).into_dyn()
    );
    let gets = rec.take();
    assert!(short(&gets), "{gets:?}");
    assert_eq!(ds.read::<u64>().unwrap(), all);
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..common::config(16)
    })]

    /// Any slice or point selection of the random walk, by blocks or by chunks, reads what
    /// the local copy reads.
    #[test]
    fn any_read_of_the_walk_reads_as_the_local_copy(
        a in 0..WALK as u64,
        n in prop_oneof![1u64..40, 1u64..300_000],
        step in prop_oneof![Just(1u64), 1u64..5000],
        points in proptest::collection::vec(0..WALK as u64, 1..12),
    ) {
        let (rec, _dir, local) = WALKED.with(|b| b.clone());
        let s = rec.open();
        let ds = Dataset::open_in(Arc::clone(&s) as Arc<dyn Storage>, s.root(), Mode::ReadOnly)
            .unwrap();
        let l = Dataset::open(&local).unwrap();
        let sel = format!("{a}:{}:{step}", (a + n).min(WALK as u64));
        prop_assert_eq!(read_f64(&ds, &sel), read_f64(&l, &sel), "{}", sel);
        let pts = blz::fancy::Fancy::points(vec![points]);
        prop_assert_eq!(ds.read_fancy::<f64>(&pts).unwrap(), l.read_fancy::<f64>(&pts).unwrap());
    }
}

thread_local! {
    /// The random walk of the property, made once per thread.
    static WALKED: (Arc<Recording>, Arc<tempfile::TempDir>, PathBuf) = {
        let (rec, dir, local) = walk(4);
        (rec, Arc::new(dir), local)
    };
}

/// Short reads stepping through one block (`a[i:i + 100]` in a loop) fetch it twice: the
/// first read its block, the second the same, which the block cache then keeps decoded
/// (the header it needs is the index's): every later read of it is answered with no request.
#[test]
fn short_reads_stepping_through_a_block_fetch_it_twice() {
    let (rec, _dir, local) = walk(4);
    let s = rec.open();
    let ds =
        Dataset::open_in(Arc::clone(&s) as Arc<dyn Storage>, s.root(), Mode::ReadOnly).unwrap();
    let l = Dataset::open(&local).unwrap();
    rec.take();
    // Block 2 of chunk 1: elements 294912..311296.
    for i in 0..40 {
        let sel = format!("{}:{}", 294_912 + 100 * i, 295_012 + 100 * i);
        assert_eq!(read_f64(&ds, &sel), read_f64(&l, &sel), "{sel}");
    }
    let gets = rec.take();
    assert_eq!(gets.len(), 2, "{gets:?}");
    // With the cache off, every read is a request.
    ds.set_block_cache_bytes(0);
    for i in 0..5 {
        let sel = format!("{}:{}", 294_912 + 100 * i, 295_012 + 100 * i);
        assert_eq!(read_f64(&ds, &sel), read_f64(&l, &sel), "{sel}");
    }
    assert_eq!(rec.take().len(), 5);
}
