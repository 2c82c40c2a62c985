//! Reads from an object store when the process keeps no more superchunk readers: past its
//! budget of cached readers (a quarter of the descriptor limit, at most 512) every reader
//! serves one read and is dropped. What a read fetched is then still decoded through the
//! reader it was fetched with, so the read costs the requests it planned and no more. A
//! binary of its own: the budget is the process's, and this one spends it.

mod recording;

use blz::scan::{reduce, Reduction, ScanOptions};
use blz::storage::Storage;
use blz::{CreateOptions, DType, Dataset, Mode};
use ndarray::Array1;
use recording::{both, data_files, read_sel};
use std::sync::Arc;

/// A local dataset of `files` superchunk files, read whole and kept open: its readers take
/// the process's whole budget of cached readers.
fn spend_the_reader_budget(dir: &std::path::Path, files: usize) -> Dataset {
    let o = CreateOptions {
        chunkshape: Some(vec![4]),
        superchunksize: Some(1),
        ..Default::default()
    };
    let mut ds = Dataset::create_with(dir.join("many.blz"), DType::I64, &[0], &o).unwrap();
    let v = Array1::from_iter(0..(4 * files) as i64).into_dyn();
    ds.append(&v.view()).unwrap();
    let ds = Dataset::open(dir.join("many.blz")).unwrap();
    assert_eq!(ds.read::<i64>().unwrap(), v);
    ds
}

#[test]
fn reads_past_the_reader_budget_fetch_each_chunk_once() {
    let scratch = tempfile::tempdir().unwrap();
    let _held = spend_the_reader_budget(scratch.path(), 520);

    let (rec, _dir, local) = both();
    let s = rec.open();
    let files = data_files(&s, &rec.prefix);
    let ds =
        Dataset::open_in(Arc::clone(&s) as Arc<dyn Storage>, s.root(), Mode::ReadOnly).unwrap();
    let want_ds = Dataset::open(&local).unwrap();
    rec.take();

    // A whole read: one GET per file, as with readers cached.
    assert_eq!(ds.read::<i64>().unwrap(), want_ds.read::<i64>().unwrap());
    let gets = rec.take();
    assert_eq!(gets.len(), files.len(), "{gets:?}");

    // Slices over a few chunks of two files, and a short read: each chunk fetched once.
    for (sel, most) in [("40:160,:", 2), ("290:310,15:45", 2), ("123,5:15", 1)] {
        assert_eq!(read_sel(&ds, sel), read_sel(&want_ds, sel), "{sel}");
        let gets = rec.take();
        assert!(
            !gets.is_empty() && gets.len() <= most,
            "{sel}: {} GETs: {gets:?}",
            gets.len()
        );
    }

    // A reduction fetches runs of chunks and decodes them: no chunk fetched twice.
    let opts = ScanOptions::default();
    let want = reduce(&want_ds, &opts, Reduction::Sum).unwrap();
    assert_eq!(reduce(&ds, &opts, Reduction::Sum).unwrap(), want);
    let gets = rec.take();
    assert!(
        gets.len() <= 2 * files.len(),
        "{} GETs: {gets:?}",
        gets.len()
    );
}
