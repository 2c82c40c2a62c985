//! Layer datasets against in-memory models (`BTreeMap<K, R>`, `BTreeMap<K1, BTreeMap<K2,
//! R>>`, and three levels): random data, chunk lengths and index fan-outs; every row group
//! walked forward, backward and by position; random seeks; child navigation; counts;
//! weights; the filter never says no for a present value, and exact membership matches.

mod common;

use blz::layer::LeafKind;
use blz::layer::{
    ColumnDef, Cursor, FilterSetting, Layer, LayerSchema, LayerWriter, Value, ValueType,
};
use blz::DType;
use proptest::prelude::*;
use std::collections::BTreeMap;

/// Sorted unique paths with their weights.
type Paths = Vec<(Vec<Value>, i64)>;

/// The rows of one row group of the model: its values and, per value, the child group id.
#[derive(Debug, Default)]
struct Model {
    /// Per column, its groups in order; each group is a list of values.
    groups: Vec<Vec<Vec<Value>>>,
    /// Weights of the last column, in row order.
    weights: Vec<i64>,
}

fn model(paths: &Paths, ncols: usize) -> Model {
    let mut m = Model {
        groups: vec![Vec::new(); ncols],
        weights: Vec::new(),
    };
    let mut prev: Option<&Vec<Value>> = None;
    for (p, w) in paths {
        let d = match prev {
            None => 0,
            Some(q) => q.iter().zip(p).position(|(a, b)| a != b).unwrap(),
        };
        for (i, key) in p.iter().enumerate().skip(d) {
            if i == 0 && m.groups[0].is_empty() || i > 0 && i > d {
                m.groups[i].push(Vec::new());
            }
            m.groups[i].last_mut().unwrap().push(key.clone());
        }
        m.weights.push(*w);
        prev = Some(p);
    }
    m
}

fn build(
    dir: &std::path::Path,
    kinds: &[ValueType],
    paths: &Paths,
    chunklen: u64,
    fanout: u64,
    filter: bool,
) -> Layer {
    let path = dir.join("l.blz");
    let cols = kinds
        .iter()
        .enumerate()
        .map(|(i, k)| {
            ColumnDef::new(&format!("c{i}"), k.clone())
                .with_chunklen(chunklen + i as u64)
                .with_fanout(fanout)
                .with_filter(if filter {
                    FilterSetting::BitsPerValue(12)
                } else {
                    FilterSetting::Off
                })
        })
        .collect();
    let mut schema = LayerSchema::new(cols).with_weight("w", DType::I64);
    schema.superchunksize = 3;
    let mut w = LayerWriter::create(&path, schema).unwrap();
    for (p, wt) in paths {
        w.push(p, Some(Value::Int(*wt))).unwrap();
    }
    w.finish().unwrap();
    Layer::open(&path).unwrap()
}

/// Checks one row group under cursor `c` against its expected values (and weights, for the
/// last column), starting at row `row_start` of its column.
fn check_group(
    c: &mut Cursor<'_>,
    expect: &[Value],
    weights: Option<&[i64]>,
    row_start: u64,
    probes: &[Value],
) {
    assert_eq!(c.count(), expect.len() as u64);
    assert_eq!(c.rows().start, row_start);
    // Forward.
    let mut got = Vec::new();
    if c.first() {
        loop {
            got.push(c.value().unwrap().unwrap());
            if !c.next() {
                break;
            }
        }
    }
    assert_eq!(got, expect);
    assert!(c.value().unwrap().is_none());
    // Backward.
    let mut back = Vec::new();
    if c.last() {
        loop {
            back.push(c.value().unwrap().unwrap());
            if !c.prev() {
                break;
            }
        }
    }
    back.reverse();
    assert_eq!(back, expect);
    assert_eq!(
        c.next(),
        !expect.is_empty(),
        "next from before the first row lands on it"
    );
    // Positions.
    for (i, v) in expect.iter().enumerate() {
        assert!(c.nth(i as u64));
        assert_eq!(c.value().unwrap().as_ref(), Some(v));
        assert_eq!(c.row(), Some(row_start + i as u64));
        assert_eq!(c.index(), Some(i as u64));
        if let Some(w) = weights {
            assert_eq!(c.weight().unwrap(), Some(Value::Int(w[i])));
        }
    }
    assert!(!c.nth(expect.len() as u64));
    // Seeks and membership.
    for v in probes.iter().chain(expect.iter()) {
        let ge = expect.iter().position(|x| x >= v);
        assert_eq!(
            c.seek_ge(v).unwrap(),
            ge.is_some(),
            "seek_ge {v} in {expect:?}"
        );
        assert_eq!(c.index(), ge.map(|i| i as u64));
        let le = expect.iter().rposition(|x| x <= v);
        assert_eq!(
            c.seek_le(v).unwrap(),
            le.is_some(),
            "seek_le {v} in {expect:?}"
        );
        assert_eq!(c.index(), le.map(|i| i as u64));
        let present = expect.contains(v);
        assert_eq!(
            c.contains(v).unwrap(),
            present,
            "contains {v} in {expect:?}"
        );
        if present {
            assert!(c.may_contain(v).unwrap(), "filter said no for present {v}");
        }
    }
}

fn check(
    kinds: &[ValueType],
    paths: &Paths,
    probes: &[Vec<Value>],
    chunklen: u64,
    fanout: u64,
    filter: bool,
) {
    let dir = tempfile::tempdir().unwrap();
    let layer = build(dir.path(), kinds, paths, chunklen, fanout, filter);
    assert!(layer.verify().is_empty(), "{:?}", layer.verify());
    let m = model(paths, kinds.len());
    for (i, g) in m.groups.iter().enumerate() {
        assert_eq!(layer.rows(i), g.iter().map(|x| x.len() as u64).sum::<u64>());
    }
    if paths.is_empty() {
        assert_eq!(layer.cursor().count(), 0);
        assert!(!layer.cursor().seek_ge(&probes[0][0]).unwrap());
        assert!(!layer.may_contain(&probes[0][0]).unwrap());
        return;
    }
    let mut next = vec![0usize; kinds.len()];
    next[0] = 1;
    let mut base = vec![0u64; kinds.len()];
    let mut c = layer.cursor();
    check_tree(&mut c, &m, 0, 0, &mut next, probes, &mut base);
    assert_eq!(
        next.iter().map(|&n| n as u64).collect::<Vec<_>>(),
        m.groups.iter().map(|g| g.len() as u64).collect::<Vec<_>>()
    );
    // Group cursors opened directly agree with child cursors.
    if kinds.len() > 1 {
        let g = layer.group(1, layer.rows(0) - 1).unwrap();
        assert_eq!(g.count(), m.groups[1].last().unwrap().len() as u64);
        assert!(layer.group(1, layer.rows(0)).is_err());
    }
}

/// Checks group `g` of column `col`, then every child group below it, in order.
fn check_tree(
    c: &mut Cursor<'_>,
    m: &Model,
    col: usize,
    g: usize,
    next: &mut [usize],
    probes: &[Vec<Value>],
    base: &mut [u64],
) {
    let expect = &m.groups[col][g];
    let last = col + 1 == m.groups.len();
    let weights = last.then(|| &m.weights[base[col] as usize..base[col] as usize + expect.len()]);
    check_group(c, expect, weights, base[col], &probes[col]);
    if !last {
        for i in 0..expect.len() {
            assert!(c.nth(i as u64));
            let mut child = c.child().unwrap().unwrap();
            let cg = next[col + 1];
            next[col + 1] += 1;
            check_tree(&mut child, m, col + 1, cg, next, probes, base);
        }
    } else {
        assert!(c.child().unwrap().is_none());
    }
    base[col] += expect.len() as u64;
}

fn leaves(kinds: &[LeafKind]) -> Vec<ValueType> {
    kinds.iter().map(|k| ValueType::Leaf(*k)).collect()
}

fn int_key() -> impl Strategy<Value = i64> {
    -40i64..40
}

fn str_key() -> impl Strategy<Value = String> {
    "[a-d]{0,3}"
}

fn int_probes() -> Vec<Value> {
    (-45..45).map(Value::Int).collect()
}

fn str_probes() -> Vec<Value> {
    ["", "a", "aa", "ab", "b", "bcd", "c", "d", "dd", "e", "zz"]
        .iter()
        .map(|s| Value::Str(s.to_string()))
        .collect()
}

proptest! {
    #![proptest_config(common::config(24))]

    #[test]
    fn one_layer_int(m in prop::collection::btree_map(int_key(), any::<i64>(), 0..60), cl in 1u64..6, fan in 2u64..4, filter in any::<bool>()) {
        let paths: Paths = m.iter().map(|(k, w)| (vec![Value::Int(*k)], *w)).collect();
        check(&leaves(&[LeafKind::Fixed(DType::I64)]), &paths, &[int_probes()], cl, fan, filter);
    }

    #[test]
    fn one_layer_str(m in prop::collection::btree_map(str_key(), any::<i64>(), 0..40), cl in 1u64..6, fan in 2u64..4) {
        let paths: Paths = m.iter().map(|(k, w)| (vec![Value::Str(k.clone())], *w)).collect();
        check(&leaves(&[LeafKind::VarStr]), &paths, &[str_probes()], cl, fan, true);
    }

    #[test]
    fn two_layers(m in prop::collection::btree_map(int_key(), prop::collection::btree_map(str_key(), any::<i64>(), 1..8), 0..25), cl in 1u64..6, fan in 2u64..4, filter in any::<bool>()) {
        let mut paths: Paths = Vec::new();
        for (k, inner) in &m {
            for (k2, w) in inner {
                paths.push((vec![Value::Int(*k), Value::Str(k2.clone())], *w));
            }
        }
        check(&leaves(&[LeafKind::Fixed(DType::I64), LeafKind::VarStr]), &paths, &[int_probes(), str_probes()], cl, fan, filter);
    }

    #[test]
    fn three_layers(m in prop::collection::btree_map(str_key(), prop::collection::btree_map(-5i64..5, prop::collection::btree_map(int_key(), any::<i64>(), 1..5), 1..4), 0..12), cl in 1u64..5, fan in 2u64..4) {
        let mut paths: Paths = Vec::new();
        for (k, a) in &m {
            for (k2, b) in a {
                for (k3, w) in b {
                    paths.push((vec![Value::Str(k.clone()), Value::Int(*k2), Value::Int(*k3)], *w));
                }
            }
        }
        let p2: Vec<Value> = (-6..6).map(Value::Int).collect();
        check(&leaves(&[LeafKind::VarStr, LeafKind::Fixed(DType::I32), LeafKind::Fixed(DType::I64)]), &paths, &[str_probes(), p2, int_probes()], cl, fan, true);
    }
}

#[test]
fn floats_and_bytes() {
    let paths: Paths = [-2.5f64, -0.0, 0.0, 1e-9, 3.0, f64::INFINITY]
        .iter()
        .enumerate()
        .flat_map(|(i, f)| {
            [b"".to_vec(), b"\x00".to_vec(), b"\xff\x01".to_vec()]
                .into_iter()
                .map(move |b| (vec![Value::Float(*f), Value::Bytes(b)], i as i64))
        })
        .collect();
    let probes = vec![
        [-3.0, -0.0, 0.5, 3.0, 9.0]
            .iter()
            .map(|f| Value::Float(*f))
            .collect(),
        vec![
            Value::Bytes(vec![]),
            Value::Bytes(vec![0, 0]),
            Value::Bytes(vec![255]),
        ],
    ];
    check(
        &leaves(&[LeafKind::Fixed(DType::F64), LeafKind::VarBytes]),
        &paths,
        &probes,
        2,
        2,
        true,
    );
}

#[test]
fn big_map_matches_btreemap() {
    // A larger two-layer map with several index levels.
    let mut m: BTreeMap<i64, BTreeMap<i64, i64>> = BTreeMap::new();
    for i in 0..3000i64 {
        let k = (i * 7919) % 10007;
        m.entry(k / 10).or_default().insert(k, i);
    }
    let mut paths: Paths = Vec::new();
    for (k, inner) in &m {
        for (k2, w) in inner {
            paths.push((vec![Value::Int(*k), Value::Int(*k2)], *w));
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let layer = build(
        dir.path(),
        &leaves(&[LeafKind::Fixed(DType::I64), LeafKind::Fixed(DType::I64)]),
        &paths,
        4,
        3,
        true,
    );
    assert!(layer.verify().is_empty());
    assert!(layer.index_levels(0) >= 3);
    let mut c = layer.cursor();
    for probe in (-5..1010).step_by(7) {
        let expect = m.range(probe..).next().map(|(k, _)| *k);
        assert_eq!(c.seek_ge(&Value::Int(probe)).unwrap(), expect.is_some());
        assert_eq!(c.value().unwrap(), expect.map(Value::Int));
        if let Some(k) = expect {
            let inner = &m[&k];
            let mut ch = c.child().unwrap().unwrap();
            assert_eq!(ch.count(), inner.len() as u64);
            let q = inner.keys().next().unwrap() + 1;
            let le = inner.range(..=q).next_back().map(|(k, _)| *k);
            assert_eq!(ch.seek_le(&Value::Int(q)).unwrap(), le.is_some());
            assert_eq!(ch.value().unwrap(), le.map(Value::Int));
        }
    }
}

// Tuple columns: the model's keys are Rust tuples, ordered by Rust's own `Ord`, so the
// layer's order is checked against Rust's, not against itself.

fn tuple_probes2() -> Vec<Value> {
    let mut out = Vec::new();
    for i in [-41i64, -3, 0, 2, 41] {
        for s in ["", "a", "ab", "c", "dd", "zz"] {
            out.push((i, s).into());
        }
    }
    out
}

proptest! {
    #![proptest_config(common::config(24))]

    /// WSet with a `(int64, varstr)` key.
    #[test]
    fn tuple_keys_order_as_rust_tuples(m in prop::collection::btree_map((int_key(), str_key()), any::<i64>(), 0..60), cl in 1u64..6, fan in 2u64..4, filter in any::<bool>()) {
        let paths: Paths = m.iter().map(|(k, w)| (vec![k.clone().into()], *w)).collect();
        let ty = ValueType::parse("(int64,varstr)").unwrap();
        check(&[ty], &paths, &[tuple_probes2()], cl, fan, filter);
    }

    /// IndexedZSet `(uint16, varbytes) -> (int8, (uint8, float64))`: nested tuples, and a
    /// fixed-size tuple in column 2.
    #[test]
    fn nested_tuples_in_two_columns(m in prop::collection::btree_map((0u16..6, prop::collection::vec(0u8..3, 0..3)), prop::collection::btree_map((-3i8..3, (0u8..3, -2i32..2)), any::<i64>(), 1..6), 0..15), cl in 1u64..6, fan in 2u64..4) {
        let mut paths: Paths = Vec::new();
        for ((a, b), inner) in &m {
            for ((c, (d, e)), w) in inner {
                let k: Value = (*a, b.clone()).into();
                let v: Value = (*c, (*d, f64::from(*e) / 2.0)).into();
                paths.push((vec![k, v], *w));
            }
        }
        let p1: Vec<Value> = (0u16..8).flat_map(|a| [vec![], vec![0u8], vec![1, 2], vec![3]].into_iter().map(move |b| (a, b).into())).collect();
        let p2: Vec<Value> = (-4i8..4).flat_map(|c| (0u8..4).map(move |d| (c, (d, 0.25f64)).into())).collect();
        let t1 = ValueType::parse("(uint16,varbytes)").unwrap();
        let t2 = ValueType::parse("(int8,(uint8,float64))").unwrap();
        check(&[t1, t2], &paths, &[p1, p2], cl, fan, true);
    }
}
