//! The threads that decode what a read of an object store fetched: as many as the global
//! rayon pool's (the threads the process decodes and encodes with, `BLZ_NUM_THREADS`), even
//! when the first such read runs in a pool of another size. A binary of its own: the
//! decoding pool is made once per process, by its first read.

mod recording;

use blz::storage::Storage;
use blz::{Dataset, Mode};
use recording::{both, read_sel};
use std::sync::Arc;

/// The threads of this process whose name starts with `prefix`.
fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with(prefix))
        .count()
}

#[test]
fn decoding_threads_are_as_many_as_the_global_pools() {
    let (rec, _dir, local) = both();
    let want = Dataset::open(&local).unwrap().read::<i64>().unwrap();
    let s = rec.open();
    let ds =
        Dataset::open_in(Arc::clone(&s) as Arc<dyn Storage>, s.root(), Mode::ReadOnly).unwrap();
    let global = std::thread::spawn(rayon::current_num_threads)
        .join()
        .unwrap();
    // A pool of another size than the global one (whatever the machine's core count).
    let other = global + 5;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(other)
        .build()
        .unwrap();
    assert_eq!(threads_named("blz-decode"), 0, "no read yet");
    // Three chunks of one file: one request, fetched and handed to the decoding threads by
    // the reading thread itself, one of the other pool's.
    let rows = pool.install(|| read_sel(&ds, "0:50, :"));
    assert_eq!(rows, want.slice(ndarray::s![0..50, ..]).into_dyn());
    assert_eq!(
        threads_named("blz-decode"),
        global,
        "a pool of {other} read first"
    );
    assert_eq!(ds.read::<i64>().unwrap(), want);
    assert_eq!(threads_named("blz-decode"), global, "made once");
}
