//! Model-based property tests: random sequences of append / shrink / grow / write-slice /
//! attribute / reopen on a dataset, checked after every step against a plain in-memory
//! ndarray.

mod common;

use blz::blosc::Codec;
use blz::meta::{Compression, FilterName};
use blz::storage::Storage as _;
use blz::{CreateOptions, DType, Dataset, Element, Endianness};
use ndarray::{ArrayD, Axis, Dimension, IxDyn, SliceInfoElem};
use num_complex::Complex64;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Append(usize, u64),
    Resize(usize),
    Write {
        sel: Vec<(usize, usize, isize)>,
        seed: u64,
    },
    Reopen,
    Compact,
}

fn op(ndim: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0usize..40, any::<u64>()).prop_map(|(n, s)| Op::Append(n, s)),
        1 => (0usize..90).prop_map(Op::Resize),
        3 => (proptest::collection::vec((0usize..100, 0usize..100, prop_oneof![Just(1isize), Just(2), Just(3), Just(-1), Just(-2)]), ndim), any::<u64>())
            .prop_map(|(sel, seed)| Op::Write { sel, seed }),
        1 => Just(Op::Reopen),
        1 => Just(Op::Compact),
    ]
}

trait Gen: Element + PartialEq + std::fmt::Debug {
    fn gen(seed: u64, i: usize) -> Self;
    /// The value as a fill value in `CreateOptions`.
    fn fill_json(&self) -> serde_json::Value;
}
/// Numbers and bools: the fill value is the value itself.
macro_rules! plain_fill {
    () => {
        fn fill_json(&self) -> serde_json::Value {
            serde_json::json!(self)
        }
    };
}
impl Gen for f64 {
    plain_fill!();
    fn gen(seed: u64, i: usize) -> Self {
        (seed % 1000) as f64 + i as f64 * 0.5
    }
}
impl Gen for i32 {
    plain_fill!();
    fn gen(seed: u64, i: usize) -> Self {
        (seed as i32).wrapping_add(i as i32 * 7)
    }
}
impl Gen for u8 {
    plain_fill!();
    fn gen(seed: u64, i: usize) -> Self {
        (seed as u8).wrapping_add(i as u8)
    }
}
impl Gen for bool {
    plain_fill!();
    fn gen(seed: u64, i: usize) -> Self {
        (seed as usize + i).is_multiple_of(3)
    }
}

// Complex numbers and byte strings: elements of two or more Blosc items (complex128 is
// shuffled as 8-byte floats, `S<n>` as bytes), so element and byte offsets differ.
impl Gen for Complex64 {
    fn gen(seed: u64, i: usize) -> Self {
        Complex64::new((seed % 1000) as f64 + i as f64, -(i as f64) * 0.25)
    }
    fn fill_json(&self) -> serde_json::Value {
        serde_json::json!([self.re, self.im])
    }
}
impl Gen for [u8; 5] {
    fn gen(seed: u64, i: usize) -> Self {
        let mut b = *b"s0000";
        for (k, c) in format!("{:04}", (seed as usize + i) % 10_000)
            .bytes()
            .enumerate()
        {
            b[k + 1] = c;
        }
        b
    }
    fn fill_json(&self) -> serde_json::Value {
        serde_json::json!(String::from_utf8_lossy(self))
    }
}

fn to_sel(sel: &[(usize, usize, isize)], shape: &[usize]) -> Vec<SliceInfoElem> {
    sel.iter()
        .zip(shape)
        .map(|(&(a, b, step), &n)| {
            let (a, b) = (a.min(n), b.min(n));
            let (a, b) = if a <= b { (a, b) } else { (b, a) };
            SliceInfoElem::Slice {
                start: a as isize,
                end: Some(b as isize),
                step,
            }
        })
        .collect()
}

fn run<T: Gen>(dtype: DType, inner: Vec<usize>, chunkshape: Vec<u64>, slack: u32, ops: Vec<Op>) {
    run_with(
        dtype,
        inner,
        chunkshape,
        slack,
        T::default(),
        Endianness::native(),
        ops,
    );
}

/// As `run`, with a fill value for padding and growth and a stored byte order.
fn run_with<T: Gen>(
    dtype: DType,
    inner: Vec<usize>,
    chunkshape: Vec<u64>,
    slack: u32,
    fill: T,
    endianness: Endianness,
    ops: Vec<Op>,
) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.blz");
    let opts = CreateOptions {
        chunkshape: Some(chunkshape),
        superchunksize: Some(3),
        slack,
        compression: Compression {
            codec: Codec::Zstd,
            clevel: 1,
            filters: vec![FilterName::Shuffle],
            ..Default::default()
        },
        fill: fill.fill_json(),
        endianness,
        ..Default::default()
    };
    let mut shape0 = vec![0usize];
    shape0.extend(&inner);
    let shape_u: Vec<u64> = shape0.iter().map(|&x| x as u64).collect();
    let mut ds = Dataset::create_with(&path, dtype, &shape_u, &opts).unwrap();
    let mut model: ArrayD<T> = ArrayD::from_elem(IxDyn(&shape0), fill);
    for o in ops {
        match o {
            Op::Append(n, seed) => {
                let mut s = vec![n];
                s.extend(&inner);
                let a =
                    ArrayD::from_shape_fn(IxDyn(&s), |ix| T::gen(seed, ix.slice().iter().sum()));
                ds.append(&a.view()).unwrap();
                model = ndarray::concatenate(Axis(0), &[model.view(), a.view()]).unwrap();
            }
            Op::Resize(n) => {
                ds.resize(n as u64).unwrap();
                let cur = model.shape()[0];
                if n <= cur {
                    model = model.slice_axis(Axis(0), (0..n).into()).to_owned();
                } else {
                    let mut s = vec![n - cur];
                    s.extend(&inner);
                    let pad = ArrayD::from_elem(IxDyn(&s), fill);
                    model = ndarray::concatenate(Axis(0), &[model.view(), pad.view()]).unwrap();
                }
            }
            Op::Write { sel, seed } => {
                let sl = to_sel(&sel, model.shape());
                let info: &[SliceInfoElem] = &sl;
                let target = model.slice_each_axis(|ad| {
                    let SliceInfoElem::Slice { start, end, step } = info[ad.axis.index()] else {
                        unreachable!()
                    };
                    ndarray::Slice::new(start, end, step)
                });
                let data = ArrayD::from_shape_fn(target.raw_dim(), |ix| {
                    T::gen(seed, ix.slice().iter().sum::<usize>() + 1)
                });
                ds.write_slice(&sl, &data.view()).unwrap();
                model
                    .slice_each_axis_mut(|ad| {
                        let SliceInfoElem::Slice { start, end, step } = info[ad.axis.index()]
                        else {
                            unreachable!()
                        };
                        ndarray::Slice::new(start, end, step)
                    })
                    .assign(&data);
                // Read the same selection back.
                let back = ds.slice::<T, _>(&sl).unwrap();
                assert_eq!(back, data);
            }
            Op::Reopen => {
                drop(ds);
                ds = Dataset::open_rw(&path).unwrap();
            }
            Op::Compact => {
                ds.compact().unwrap();
            }
        }
        let got = ds.read::<T>().unwrap();
        assert_eq!(got, model);
        assert_eq!(
            ds.sizes().nbytes,
            model.len() as u64 * dtype.itemsize() as u64
        );
    }
    drop(ds);
    let ds = Dataset::open(&path).unwrap();
    assert_eq!(ds.read::<T>().unwrap(), model);
    assert!(ds.verify(|_, _| {}).is_empty());
    // cbytes in meta/sizes is exact: the sum of stored chunk and digest bytes.
    let mut stored = 0u64;
    for f in 0..ds.nfiles() {
        let r = blz_format::blpk::SuperchunkReader::open(
            blz::storage::LocalStorage
                .open(&ds.superchunk_path(f), blz::storage::OpenMode::Read)
                .unwrap(),
        )
        .unwrap();
        for k in 0..r.nchunks() {
            stored += u64::from(r.chunk_info(k).unwrap().header.cbytes) + 4;
        }
    }
    assert_eq!(ds.sizes().cbytes, stored);
}

proptest! {
    #![proptest_config(common::config(24))]

    #[test]
    fn f64_1d(ops in proptest::collection::vec(op(1), 1..14), slack in prop_oneof![Just(0u32), Just(64)]) {
        run::<f64>(DType::F64, vec![], vec![7], slack, ops);
    }

    #[test]
    fn i32_2d(ops in proptest::collection::vec(op(2), 1..12), cs1 in 1u64..6) {
        run::<i32>(DType::I32, vec![5], vec![4, cs1], 0, ops);
    }

    #[test]
    fn u8_3d(ops in proptest::collection::vec(op(3), 1..10)) {
        run::<u8>(DType::U8, vec![3, 4], vec![2, 2, 3], 16, ops);
    }

    #[test]
    fn f64_2d_fill_big_endian(ops in proptest::collection::vec(op(2), 1..12), cs1 in 1u64..6) {
        let order = if cfg!(target_endian = "little") { Endianness::Big } else { Endianness::Little };
        run_with::<f64>(DType::F64, vec![5], vec![4, cs1], 0, 2.5, order, ops);
    }

    #[test]
    fn i32_2d_fill(ops in proptest::collection::vec(op(2), 1..12), cs1 in 1u64..6) {
        run_with::<i32>(DType::I32, vec![5], vec![3, cs1], 0, -7, Endianness::native(), ops);
    }

    #[test]
    fn complex128_1d(ops in proptest::collection::vec(op(1), 1..12)) {
        run_with::<Complex64>(DType::C128, vec![], vec![7], 0, Complex64::new(1.5, -2.0), Endianness::native(), ops);
    }

    #[test]
    fn complex128_2d(ops in proptest::collection::vec(op(2), 1..12), cs1 in 1u64..6) {
        run_with::<Complex64>(DType::C128, vec![5], vec![4, cs1], 0, Complex64::new(1.5, -2.0), Endianness::native(), ops);
    }

    #[test]
    fn bytes5_1d(ops in proptest::collection::vec(op(1), 1..12), slack in prop_oneof![Just(0u32), Just(64)]) {
        run_with::<[u8; 5]>(DType::Bytes(5), vec![], vec![6], slack, *b"fill_", Endianness::native(), ops);
    }

    #[test]
    fn bool_1d(ops in proptest::collection::vec(op(1), 1..10)) {
        run::<bool>(DType::Bool, vec![], vec![5], 0, ops);
    }
}
