//! The library's `.npy` I/O and ordered reads: files written by an independent writer
//! (ndarray-npy) become datasets, selections (reversed ones included) come back out in
//! numpy's order, and numpy records round-trip through tables.
#![cfg(feature = "npy")]

use blz::npy::{self, NpyReader, RecordReader};
use blz::ordered::{SelectionReader, TableRows};
use blz::table::{Field, Table, TableOptions, Values};
use blz::{CreateOptions, DType, Dataset, Selection};
use ndarray::{s, Array2, ArrayD, IxDyn};
use ndarray_npy::{read_npy, write_npy};

fn grid(rows: usize, cols: usize, base: f64) -> Array2<f64> {
    Array2::from_shape_fn((rows, cols), |(i, j)| base + (i * cols + j) as f64)
}

fn f64s(bytes: &[u8]) -> Vec<f64> {
    bytes
        .chunks_exact(8)
        .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn npy_round_trip_through_a_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("a.npy");
    let more = dir.path().join("b.npy");
    write_npy(&src, &grid(37, 4, 0.0)).unwrap();
    write_npy(&more, &grid(5, 4, 1000.0)).unwrap();
    let opts = CreateOptions {
        chunkshape: Some(vec![8, 4]),
        ..Default::default()
    };
    let root = dir.path().join("a.blz");
    let mut ds = npy::create_dataset(&src, &root, &opts).unwrap();
    assert_eq!(ds.shape(), [37, 4]);
    assert_eq!(npy::append_dataset(&mut ds, &more).unwrap(), 5);
    let mut want = grid(37, 4, 0.0);
    want.append(ndarray::Axis(0), grid(5, 4, 1000.0).view())
        .unwrap();
    assert_eq!(ds.read::<f64>().unwrap(), want.clone().into_dyn());

    // A reversed, stepped selection written out reads back as numpy would slice it.
    let out = dir.path().join("out.npy");
    let sel = Selection::parse("::-3, 3:0:-2")
        .unwrap()
        .to_slice_info(ds.shape())
        .unwrap();
    let shape = npy::write_dataset(&ds, &sel, &out).unwrap();
    let back: Array2<f64> = read_npy(&out).unwrap();
    // numpy's `3:0:-2` is 3, 1: ndarray's `1..4;-2`.
    let expect = want.slice(s![..;-3, 1..4;-2]).to_owned();
    assert_eq!(shape, [expect.nrows() as u64, expect.ncols() as u64]);
    assert_eq!(back, expect);

    // A file of another dtype or row shape is refused, naming the file.
    let bad = dir.path().join("bad.npy");
    write_npy(&bad, &Array2::<i32>::zeros((2, 4))).unwrap();
    let e = npy::append_dataset(&mut ds, &bad).unwrap_err();
    assert!(
        matches!(e, blz::Error::InvalidInput { ref path, .. } if path == &bad),
        "{e}"
    );
    write_npy(&bad, &grid(2, 3, 0.0)).unwrap();
    let e = npy::append_dataset(&mut ds, &bad).unwrap_err().to_string();
    assert!(e.contains("bad.npy") && e.contains("[n, 4]"), "{e}");
    assert_eq!(ds.shape(), [42, 4]);
}

#[test]
fn npy_reader_streams_rows_in_batches() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("a.npy");
    write_npy(&src, &grid(10, 3, 0.5)).unwrap();
    let mut r = NpyReader::open(&src).unwrap();
    assert_eq!((r.dtype(), r.shape()), (DType::F64, vec![10, 3]));
    let mut seen = Vec::new();
    let batches: Vec<Vec<u8>> = r
        .batches(4 * 24, |n| seen.push(n))
        .collect::<blz::Result<_>>()
        .unwrap();
    assert_eq!(seen, [4, 4, 2]);
    let all: Vec<f64> = batches.iter().flat_map(|b| f64s(b)).collect();
    assert_eq!(all, grid(10, 3, 0.5).into_raw_vec_and_offset().0);
    // Not a .npy file at all: an error naming it.
    std::fs::write(&src, b"hello").unwrap();
    let e = NpyReader::open(&src).unwrap_err();
    assert!(matches!(e, blz::Error::InvalidInput { .. }), "{e}");
    assert!(e.to_string().contains("a.npy"), "{e}");
}

#[test]
fn ordered_batches_of_a_reversed_selection() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("d.blz");
    let data = ArrayD::from_shape_fn(IxDyn(&[23, 5, 3]), |ix| {
        (ix[0] * 100 + ix[1] * 10 + ix[2]) as f64
    });
    let opts = CreateOptions {
        chunkshape: Some(vec![4, 2, 3]),
        ..Default::default()
    };
    let mut ds = Dataset::create_with(&root, DType::F64, &[0, 5, 3], &opts).unwrap();
    ds.append(&data.view()).unwrap();
    let text = "20:2:-3, ::-1, 1";
    let sel = SelectionReader::parse(&ds, text).unwrap();
    let want = ds
        .slice::<f64, _>(
            Selection::parse(text)
                .unwrap()
                .to_slice_info(ds.shape())
                .unwrap(),
        )
        .unwrap();
    assert_eq!(sel.shape(), [6, 5]);
    assert_eq!(
        f64s(&sel.read_all().unwrap()),
        want.iter().copied().collect::<Vec<_>>()
    );
    // Batches of two rows of the output (5 elements each), in order, positions counted.
    let mut starts = Vec::new();
    let mut got = Vec::new();
    for b in sel.batches(2 * 5 * 8) {
        let b = b.unwrap();
        starts.push((b.start, b.rows));
        got.extend(f64s(&b.data));
    }
    assert_eq!(starts, [(0, 2), (2, 2), (4, 2)]);
    assert_eq!(got, want.iter().copied().collect::<Vec<_>>());
    assert_eq!(got[0], 2041.0, "first row is 20, reversed axis starts at 4");
    // The edges of the reversed selection: two positions at each end of both axes.
    let e = sel.edges(2).unwrap();
    assert_eq!(e.shape, [4, 4]);
    assert_eq!(e.gaps, [Some(2), Some(2)]);
    let mut expect = Vec::new();
    for i in [0, 1, 4, 5] {
        for j in [0, 1, 3, 4] {
            expect.push(got[i * 5 + j]);
        }
    }
    assert_eq!(f64s(&e.data), expect);
}

#[test]
fn records_round_trip_through_a_table() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("t.blz");
    let fields = vec![
        Field::new("id", DType::I64),
        Field::structure(
            "pos",
            vec![Field::new("x", DType::F64), Field::new("y", DType::F32)],
        ),
        Field::new("tag", DType::Bytes(3)),
    ];
    let mut t = Table::create(&root, fields, &TableOptions::default()).unwrap();
    let ids: Vec<i64> = (0..10).collect();
    let xs: Vec<f64> = ids.iter().map(|&i| i as f64 / 2.0).collect();
    let ys: Vec<f32> = ids.iter().map(|&i| -(i as f32)).collect();
    let tags: Vec<u8> = ids
        .iter()
        .flat_map(|&i| [b'a' + i as u8, b'-', b'z'])
        .collect();
    t.append(&[
        ("id", Values::from_slice(&ids)),
        ("pos/x", Values::from_slice(&xs)),
        ("pos/y", Values::from_slice(&ys)),
        (
            "tag",
            Values::Fixed {
                dtype: DType::Bytes(3),
                data: tags,
            },
        ),
    ])
    .unwrap();
    let out = dir.path().join("t.npy");
    let cols = npy::write_table(&t, &out).unwrap();
    assert_eq!(cols, ["id", "pos/x", "pos/y", "tag"]);
    let rec = RecordReader::open(&out).unwrap().expect("records");
    assert_eq!(rec.rows(), 10);
    let copy =
        npy::create_table(&out, dir.path().join("copy.blz"), &TableOptions::default()).unwrap();
    for c in t.column_names() {
        assert_eq!(copy.column(c).unwrap(), t.column(c).unwrap(), "{c}");
    }
    // Appending the records to the table doubles it; a table of other columns refuses them.
    assert_eq!(npy::append_table(&mut t, &out).unwrap(), 10);
    assert_eq!(t.nrows(), 20);
    let mut other = Table::create(
        dir.path().join("o.blz"),
        vec![Field::new("id", DType::I32)],
        &TableOptions::default(),
    )
    .unwrap();
    let e = npy::append_table(&mut other, &out).unwrap_err().to_string();
    assert!(e.contains("are not the columns of"), "{e}");

    // Rows picked in reverse, one column per file.
    let rows = TableRows::parse("::-4", t.nrows()).unwrap();
    assert_eq!(rows, TableRows::Indices(vec![19, 15, 11, 7, 3]));
    let files =
        npy::write_columns(&t, &["pos/x"], &rows, &dir.path().join("cols"), 2, |_| {}).unwrap();
    let x: ndarray::Array1<f64> = read_npy(&files[0]).unwrap();
    assert!(files[0].ends_with("pos.x.npy"));
    assert_eq!(x.to_vec(), [4.5, 2.5, 0.5, 3.5, 1.5]);
}
