//! Appends of many batches in one transaction (`Dataset::append_batches`,
//! `Table::append_batches`): the result equals one big append whatever the batch sizes, and a
//! batch that fails (a bad input row, a wrong size) leaves the dataset exactly as it was.

mod common;

use blz::table::{ColumnOptions, Field, Table, Values};
use blz::{CreateOptions, DType, Dataset};
use ndarray::{Array2, ArrayD};
use proptest::prelude::*;

fn bytes_of(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

proptest! {
    #![proptest_config(common::config(24))]

    /// A 2-d dataset (chunks of 5 rows, 3 chunks per superchunk file) that already holds
    /// `start` rows takes batches of random sizes: the result is the rows in order, and the
    /// files hold what one append of them would.
    #[test]
    fn batches_equal_one_append(
        start in 0usize..23,
        sizes in proptest::collection::vec(0usize..17, 0..8),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let opts = CreateOptions {
            chunkshape: Some(vec![5, 2]),
            superchunksize: Some(3),
            ..Default::default()
        };
        let total: usize = start + sizes.iter().sum::<usize>();
        let all: Vec<i32> = (0..total as i32 * 3).collect();
        let mut ds = Dataset::create_with(dir.path().join("a"), DType::I32, &[0, 3], &opts).unwrap();
        ds.append_bytes(&bytes_of(&all[..start * 3]), start as u64).unwrap();
        let mut at = start * 3;
        let batches: Vec<blz::Result<Vec<u8>>> = sizes
            .iter()
            .map(|&n| {
                let b = bytes_of(&all[at..at + n * 3]);
                at += n * 3;
                Ok(b)
            })
            .collect();
        let appended = ds.append_batches(batches).unwrap();
        prop_assert_eq!(appended as usize, total - start);
        let want = Array2::from_shape_vec((total, 3), all.clone()).unwrap().into_dyn();
        prop_assert_eq!(ds.read::<i32>().unwrap(), want.clone());
        let reopened = Dataset::open(dir.path().join("a")).unwrap();
        prop_assert_eq!(reopened.read::<i32>().unwrap(), want);
        let errors = reopened.verify(|_, _| {});
        prop_assert!(errors.is_empty(), "{:?}", errors);

        // One append of the same rows gives the same stored bytes.
        let mut one = Dataset::create_with(dir.path().join("b"), DType::I32, &[0, 3], &opts).unwrap();
        one.append_bytes(&bytes_of(&all[..start * 3]), start as u64).unwrap();
        one.append_bytes(&bytes_of(&all[start * 3..]), (total - start) as u64).unwrap();
        let bytes_of_sizes = |s: &blz::meta::Sizes| (s.shape.clone(), s.nbytes, s.cbytes);
        prop_assert_eq!(bytes_of_sizes(one.sizes()), bytes_of_sizes(reopened.sizes()));
    }
}

#[test]
fn a_failing_batch_leaves_the_dataset_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a");
    let opts = CreateOptions {
        chunkshape: Some(vec![4]),
        superchunksize: Some(2),
        ..Default::default()
    };
    let mut ds = Dataset::create_with(&p, DType::I32, &[0], &opts).unwrap();
    ds.append_bytes(&bytes_of(&[1, 2, 3, 4, 5, 6]), 6).unwrap();
    let before = common::tree(&blz::storage::LocalStorage, &p);
    let batches: Vec<blz::Result<Vec<u8>>> = vec![
        Ok(bytes_of(&(0..40).collect::<Vec<_>>())),
        Err(blz::Error::InvalidArgument("row 41: not a number".into())),
    ];
    let err = ds.append_batches(batches).unwrap_err();
    assert!(err.to_string().contains("row 41"), "{err}");
    // A batch that is not whole rows is refused the same way.
    let err = ds.append_batches([Ok(vec![0u8; 6])]).unwrap_err();
    assert!(matches!(err, blz::Error::Mismatch { .. }), "{err}");
    assert_eq!(ds.shape(), &[6]);
    drop(ds);
    // What a writer's next open cleans up (files past the committed size) aside, the
    // dataset is as it was.
    let ds = Dataset::open_rw(&p).unwrap();
    assert_eq!(
        ds.read::<i32>().unwrap(),
        ArrayD::from_shape_vec(vec![6], vec![1, 2, 3, 4, 5, 6]).unwrap()
    );
    drop(ds);
    assert_eq!(common::tree(&blz::storage::LocalStorage, &p), before);
}

fn chunks(chunklen: u64) -> ColumnOptions {
    ColumnOptions {
        chunklen: Some(chunklen),
        superchunksize: Some(2),
        ..Default::default()
    }
}

#[test]
fn table_batches_commit_once() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t");
    let mut t = Table::create(
        &p,
        vec![
            Field::new("id", DType::I64).with_options(chunks(4)),
            Field::varstr("name").with_options(chunks(3)),
        ],
        &Default::default(),
    )
    .unwrap();
    let batch = |from: i64, n: i64| -> blz::Result<Vec<(String, Values)>> {
        let ids: Vec<i64> = (from..from + n).collect();
        let names: Vec<String> = ids.iter().map(|i| format!("n{i}")).collect();
        Ok(vec![
            ("id".to_string(), Values::from_slice(&ids)),
            ("name".to_string(), Values::strings(&names)),
        ])
    };
    t.append(&[
        ("id", Values::from_slice(&[0i64, 1])),
        ("name", Values::strings(&["n0", "n1"])),
    ])
    .unwrap();
    let n = t
        .append_batches(vec![batch(2, 5), batch(7, 1), batch(8, 0), batch(8, 9)])
        .unwrap();
    assert_eq!(n, 15);
    let check = |t: &Table| {
        assert_eq!(t.nrows(), 17);
        assert_eq!(
            t.column("id").unwrap(),
            Values::from_slice(&(0..17i64).collect::<Vec<_>>())
        );
        let names: Vec<String> = (0..17).map(|i| format!("n{i}")).collect();
        assert_eq!(t.column("name").unwrap(), Values::strings(&names));
        assert!(t.verify(|_, _| {}).is_empty());
    };
    check(&t);
    // A failing batch keeps nothing of the others.
    let err = t
        .append_batches(vec![
            batch(17, 30),
            Err(blz::Error::InvalidArgument("bad row".into())),
        ])
        .unwrap_err();
    assert!(err.to_string().contains("bad row"));
    check(&t);
    drop(t);
    check(&Table::open(&p).unwrap());
}
