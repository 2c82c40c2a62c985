//! Advanced selections (`blz::fancy`) of arrays and tables' rows, against an in-memory
//! ndarray model: random shapes, chunk shapes and selections (index lists, strided axes,
//! point groups in any order), reads and writes (one transaction each), edges and errors.

mod common;

use blz::fancy::{AxisIndex, Fancy, Group};
use blz::meta::{Compression, FilterName};
use blz::selection::AxisSel;
use blz::table::{ColumnOptions, Field, Table, TableOptions, Values};
use blz::{CreateOptions, DType, Dataset, Endianness, Error};
use ndarray::{ArrayD, Dimension, IxDyn};
use proptest::prelude::*;

/// A tiny deterministic generator (xorshift), seeded by proptest.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

/// A random advanced selection of `shape`: a point group over some axes (or none), the
/// other axes each a list or a strided selection, the groups in a random order.
fn random_fancy(rng: &mut Rng, shape: &[u64]) -> Fancy {
    let nd = shape.len();
    let in_points: Vec<bool> = (0..nd).map(|_| rng.below(3) == 0).collect();
    let mut groups = Vec::new();
    let pts: Vec<usize> = (0..nd).filter(|&a| in_points[a]).collect();
    if !pts.is_empty() {
        let n = rng.below(6);
        let coords = pts
            .iter()
            .map(|&a| (0..n).map(|_| rng.below(shape[a])).collect())
            .collect();
        groups.push(Group::Points { axes: pts, coords });
    }
    for a in (0..nd).filter(|&a| !in_points[a]) {
        let n = shape[a];
        let index = if rng.below(2) == 0 {
            AxisIndex::List((0..rng.below(7)).map(|_| rng.below(n)).collect())
        } else {
            let start = rng.below(n);
            let step = 1 + rng.below(3);
            let count = if rng.below(6) == 0 {
                1
            } else {
                rng.below((n - start - 1) / step + 2)
            };
            let keep = count != 1 || rng.below(2) == 0;
            AxisIndex::Strided(AxisSel {
                start,
                step,
                count,
                reversed: rng.below(2) == 0,
                keep,
            })
        };
        groups.push(Group::Axis { axis: a, index });
    }
    // Shuffle the groups.
    for i in (1..groups.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        groups.swap(i, j);
    }
    Fancy::new(groups)
}

/// The model: the dataset positions of every element of the result, in C order.
fn positions(sel: &Fancy, nd: usize) -> Vec<Vec<usize>> {
    let mut out = vec![vec![0usize; nd]];
    for g in sel.groups() {
        let per: Vec<Vec<(usize, usize)>> = match g {
            Group::Axis { axis, index } => match index {
                AxisIndex::List(v) => v.iter().map(|&p| vec![(*axis, p as usize)]).collect(),
                AxisIndex::Strided(s) => {
                    let mut v: Vec<Vec<(usize, usize)>> = (0..s.count)
                        .map(|k| vec![(*axis, (s.start + k * s.step) as usize)])
                        .collect();
                    if s.reversed {
                        v.reverse();
                    }
                    v
                }
            },
            Group::Points { axes, coords } => (0..coords[0].len())
                .map(|j| {
                    axes.iter()
                        .zip(coords)
                        .map(|(&a, c)| (a, c[j] as usize))
                        .collect()
                })
                .collect(),
        };
        out = out
            .iter()
            .flat_map(|base| {
                per.iter().map(move |set| {
                    let mut b = base.clone();
                    for &(a, p) in set {
                        b[a] = p;
                    }
                    b
                })
            })
            .collect();
    }
    out
}

fn create(dir: &common::Dir, dtype: DType, shape: &[u64], cs: &[u64], e: Endianness) -> Dataset {
    let opts = CreateOptions {
        chunkshape: Some(cs.to_vec()),
        superchunksize: Some(3),
        compression: Compression {
            filters: vec![FilterName::Shuffle],
            ..Default::default()
        },
        endianness: e,
        ..Default::default()
    };
    Dataset::create_with(dir.p("a.blz"), dtype, shape, &opts).unwrap()
}

fn check(shape: Vec<u64>, cs: Vec<u64>, seed: u64, big_endian: bool) {
    let dir = common::Dir::new();
    let e = if big_endian {
        Endianness::Big
    } else {
        Endianness::native()
    };
    let mut zero = shape.clone();
    zero[0] = 0;
    let mut ds = create(&dir, DType::F64, &zero, &cs, e);
    let dims: Vec<usize> = shape.iter().map(|&n| n as usize).collect();
    let mut model = ArrayD::from_shape_fn(IxDyn(&dims), |ix| {
        ix.slice().iter().fold(0.0, |a, &i| a * 100.0 + i as f64)
    });
    ds.append(&model.view()).unwrap();
    let mut rng = Rng(seed | 1);
    for round in 0..4 {
        let sel = random_fancy(&mut rng, &shape);
        let out_shape = ds.select_fancy(&sel).unwrap();
        let pos = positions(&sel, shape.len());
        let got = ds.read_fancy::<f64>(&sel).unwrap();
        let want_shape: Vec<usize> = out_shape.iter().map(|&n| n as usize).collect();
        assert_eq!(got.shape(), want_shape.as_slice(), "{sel:?}");
        let want: Vec<f64> = pos.iter().map(|p| model[IxDyn(p)]).collect();
        assert_eq!(got.iter().copied().collect::<Vec<_>>(), want, "{sel:?}");
        // Write new values; the later of two writes to one element wins.
        let values: Vec<f64> = (0..pos.len())
            .map(|i| -((round * 1000 + i) as f64) - 0.5)
            .collect();
        let data = ArrayD::from_shape_vec(IxDyn(&want_shape), values.clone()).unwrap();
        ds.write_fancy(&sel, &data.view()).unwrap();
        for (p, v) in pos.iter().zip(&values) {
            model[IxDyn(p)] = *v;
        }
        assert_eq!(ds.read::<f64>().unwrap(), model, "after writing {sel:?}");
        // The rewritten chunks' statistics are recorded with them, and bound their values
        // (the writes put values below any the chunks held before).
        assert!(ds.verify(|_, _| {}).is_empty(), "after writing {sel:?}");
        assert!(ds.chunk_stats().unwrap().iter().all(Option::is_some));
    }
    // A reopened handle sees the committed writes.
    drop(ds);
    assert_eq!(
        Dataset::open(dir.p("a.blz"))
            .unwrap()
            .read::<f64>()
            .unwrap(),
        model
    );
}

fn shape_and_chunks() -> impl Strategy<Value = (Vec<u64>, Vec<u64>)> {
    proptest::collection::vec((1u64..12, 1u64..6), 1..4)
        .prop_map(|v| v.into_iter().unzip::<u64, u64, Vec<u64>, Vec<u64>>())
}

proptest! {
    #![proptest_config(common::config(40))]

    #[test]
    fn gathers_and_scatters_like_the_model(
        (shape, cs) in shape_and_chunks(),
        seed in any::<u64>(),
        big in any::<bool>(),
    ) {
        check(shape, cs, seed, big);
    }
}

#[test]
fn big_chunks_use_block_reads() {
    // Chunks of 64 Ki elements and a few indices: read by Blosc block, not whole.
    let dir = common::Dir::new();
    let mut ds = create(&dir, DType::I64, &[0], &[1 << 16], Endianness::native());
    let n = 300_000i64;
    ds.append(&ndarray::Array1::from_iter(0..n).into_dyn().view())
        .unwrap();
    let idx: Vec<u64> = vec![299_999, 5, 70_000, 70_001, 70_002, 131_072, 5];
    let got = ds
        .read_fancy::<i64>(&Fancy::orthogonal(vec![AxisIndex::List(idx.clone())]))
        .unwrap();
    let want: Vec<i64> = idx.iter().map(|&i| i as i64).collect();
    assert_eq!(got.as_slice().unwrap(), want.as_slice());
    // Many indices in one chunk: the whole chunk is decoded.
    let idx: Vec<u64> = (0..5000).map(|i| (i * 37) % 300_000).collect();
    let got = ds
        .read_fancy::<i64>(&Fancy::points(vec![idx.clone()]))
        .unwrap();
    let want: Vec<i64> = idx.iter().map(|&i| i as i64).collect();
    assert_eq!(got.as_slice().unwrap(), want.as_slice());
}

#[test]
fn errors_are_typed_and_leave_the_dataset() {
    let dir = common::Dir::new();
    let mut ds = create(&dir, DType::I32, &[0, 4], &[3, 2], Endianness::native());
    let a = ndarray::Array2::from_shape_fn((7, 4), |(i, j)| (i * 4 + j) as i32).into_dyn();
    ds.append(&a.view()).unwrap();
    let oob = Fancy::orthogonal(vec![
        AxisIndex::List(vec![0, 7]),
        AxisIndex::Strided(AxisSel::full(4)),
    ]);
    assert!(matches!(
        ds.read_fancy::<i32>(&oob),
        Err(Error::OutOfBounds { .. })
    ));
    let data = ndarray::Array2::<i32>::zeros((2, 4)).into_dyn();
    assert!(matches!(
        ds.write_fancy(&oob, &data.view()),
        Err(Error::OutOfBounds { .. })
    ));
    let pts = Fancy::points(vec![vec![1, 2], vec![3, 4]]);
    assert!(matches!(
        ds.read_fancy::<i32>(&pts),
        Err(Error::OutOfBounds { .. })
    ));
    // Wrong buffer sizes and shapes, wrong types.
    let ok = Fancy::points(vec![vec![1, 2], vec![3, 0]]);
    assert!(matches!(
        ds.read_fancy_into(&ok, &mut [0u8; 7]),
        Err(Error::Mismatch { .. })
    ));
    assert!(matches!(
        ds.write_fancy_bytes(&ok, &[0u8; 12]),
        Err(Error::Mismatch { .. })
    ));
    assert!(matches!(
        ds.read_fancy::<f64>(&ok),
        Err(Error::Mismatch { .. })
    ));
    let bad = ndarray::Array1::<i32>::zeros(3).into_dyn();
    assert!(matches!(
        ds.write_fancy(&ok, &bad.view()),
        Err(Error::Mismatch { .. })
    ));
    assert!(matches!(
        ds.read_fancy::<i32>(&Fancy::points(vec![vec![1]])),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(ds.read::<i32>().unwrap(), a);
    // Empty selections read and write nothing.
    let empty = Fancy::points(vec![vec![], vec![]]);
    assert_eq!(ds.read_fancy::<i32>(&empty).unwrap().shape(), [0]);
    let gen = ds.sizes().generation;
    ds.write_fancy_bytes(&empty, &[]).unwrap();
    assert_eq!(ds.sizes().generation, gen);
    // One write is one commit.
    ds.write_fancy(&ok, &ndarray::arr1(&[-1, -2]).into_dyn().view())
        .unwrap();
    assert_eq!(ds.sizes().generation, gen + 1);
    assert_eq!(ds.get::<i32>(&[1, 3]).unwrap(), -1);
    assert_eq!(ds.get::<i32>(&[2, 0]).unwrap(), -2);
    // A read-only handle refuses.
    drop(ds);
    let mut ro = Dataset::open(dir.p("a.blz")).unwrap();
    assert!(matches!(
        ro.write_fancy_bytes(&ok, &[0u8; 8]),
        Err(Error::ReadOnly { .. })
    ));
}

#[test]
fn table_rows_by_index() {
    let dir = common::Dir::new();
    let fields = vec![
        Field::new("x", DType::I64),
        Field::varstr("s"),
        Field::new("f", DType::F32),
    ];
    let opts = TableOptions {
        defaults: ColumnOptions {
            chunklen: Some(4),
            ..Default::default()
        },
        ..Default::default()
    };
    let mut t = Table::create(dir.p("t.blz"), fields, &opts).unwrap();
    let n = 23usize;
    let xs: Vec<i64> = (0..n as i64).collect();
    let ss: Vec<String> = (0..n).map(|i| format!("s{i}")).collect();
    let fs: Vec<f32> = (0..n).map(|i| i as f32 / 2.0).collect();
    t.append(&[
        ("x", Values::from_slice(&xs)),
        ("s", Values::strings(&ss)),
        ("f", Values::from_slice(&fs)),
    ])
    .unwrap();
    let idx = [22u64, 0, 5, 5, 13, 4];
    let got = t.take(&idx, None).unwrap();
    assert_eq!(
        got[0].1.to_vec::<i64>().unwrap(),
        idx.iter().map(|&i| i as i64).collect::<Vec<_>>()
    );
    assert_eq!(
        got[1].1.to_strings().unwrap(),
        idx.iter().map(|&i| format!("s{i}")).collect::<Vec<_>>()
    );
    // Scatter: two columns of three, one commit; a repeated row takes the last value.
    let gen = t.sizes().generation;
    let put = [7u64, 22, 1, 7];
    t.put(
        &put,
        &[
            ("x", Values::from_slice(&[-1i64, -2, -3, -4])),
            ("s", Values::strings(&["a", "bb", "ccc", "dddd"])),
        ],
    )
    .unwrap();
    assert_eq!(t.sizes().generation, gen + 1);
    let mut xs2 = xs.clone();
    let mut ss2 = ss.clone();
    for (&r, (x, s)) in put
        .iter()
        .zip([(-1, "a"), (-2, "bb"), (-3, "ccc"), (-4, "dddd")])
    {
        xs2[r as usize] = x;
        ss2[r as usize] = s.to_string();
    }
    assert_eq!(t.column("x").unwrap().to_vec::<i64>().unwrap(), xs2);
    assert_eq!(t.column("s").unwrap().to_strings().unwrap(), ss2);
    assert_eq!(t.column("f").unwrap().to_vec::<f32>().unwrap(), fs);
    // Errors: out of bounds, wrong lengths; the table is unchanged.
    assert!(matches!(
        t.put(&[23], &[("x", Values::from_slice(&[0i64]))]),
        Err(Error::OutOfBounds { .. })
    ));
    assert!(matches!(
        t.put(&[1, 2], &[("x", Values::from_slice(&[0i64]))]),
        Err(Error::Mismatch { .. })
    ));
    assert!(matches!(
        t.take(&[23], None),
        Err(Error::OutOfBounds { .. })
    ));
    assert_eq!(t.column("x").unwrap().to_vec::<i64>().unwrap(), xs2);
    // Reopened, the rows are there.
    drop(t);
    let t = Table::open(dir.p("t.blz")).unwrap();
    assert_eq!(t.column("s").unwrap().to_strings().unwrap(), ss2);
}
