"""Tuple columns and DBSP's named shapes from Python, against dicts: tuple keys go in and
come out as tuples, ordered as Python orders tuples; WSet, IndexedZSet and ValBatch build
from nested dicts and read back with to_dict(); merges of tuple layers add their weights."""

from collections import defaultdict

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given

import blz

key2 = st.tuples(st.integers(-2**40, 2**40), st.text(alphabet="abcé", max_size=3))


@given(st.dictionaries(key2, st.integers(-5, 5).filter(bool), max_size=80))
def test_tuple_keys_as_a_dict(tmp_path_factory, d):
    p = tmp_path_factory.mktemp("t") / "w.blz"
    recs = sorted(d.items())
    lay = blz.build_layer(p, recs, columns=["k"], dtypes=[(np.int64, str)], weight="w",
                          weight_dtype="int64")
    assert lay.columns == ["k"]
    assert list(lay.paths()) == [(k, w) for k, w in recs]
    assert list(lay) == [k for k, _ in recs]
    for probe in list(d)[:10] + [(0, ""), (-1, "zz"), (2**41, "a")]:
        assert lay.contains(probe) == (probe in d)
        c = lay.cursor()
        ge = [k for k in sorted(d) if k >= probe]
        assert c.seek_ge(probe) == bool(ge)
        if ge:
            assert c.value == ge[0]
            assert isinstance(c.value, tuple)
        le = [k for k in sorted(d) if k <= probe]
        assert c.seek_le(probe) == bool(le)
        if le:
            assert c.value == le[-1]
    lay.verify()
    info = lay.info()
    assert info["columns"][0]["dtype"] == "(int64,varstr)"


@given(st.dictionaries(st.tuples(st.integers(0, 3), st.tuples(st.integers(-2, 2), st.binary(max_size=2))),
                       st.integers(-3, 3), max_size=40))
def test_nested_tuples_from_unsorted_records(tmp_path_factory, d):
    p = tmp_path_factory.mktemp("n") / "n.blz"
    recs = list(d.items())
    lay = blz.build_layer(p, [(k, w) for k, w in reversed(recs)], columns=["k"], dtypes=[(np.uint8, (np.int16, bytes))],
                          weight="w", weight_dtype="int32", sort=True)
    assert lay.info()["columns"][0]["dtype"] == "(uint8,(int16,varbytes))"
    assert list(lay.paths()) == sorted((k, w) for k, w in d.items() if w != 0)


shape_dicts = {
    "wset": st.dictionaries(st.integers(0, 2**64 - 1), st.integers(-3, 3).filter(bool), max_size=40),
    "indexed_zset": st.dictionaries(
        st.tuples(st.integers(-3, 3), st.text(alphabet="xy", max_size=2)),
        st.dictionaries(st.floats(-4, 4, allow_nan=False), st.integers(-3, 3).filter(bool), min_size=1, max_size=4),
        max_size=15),
    "val_batch": st.dictionaries(
        st.text(alphabet="ab", max_size=2),
        st.dictionaries(st.integers(-2, 2), st.dictionaries(st.integers(0, 9), st.integers(-3, 3).filter(bool),
                                                            min_size=1, max_size=3), min_size=1, max_size=3),
        max_size=10),
}


@pytest.mark.parametrize("shape", list(shape_dicts))
def test_shapes_from_and_to_dicts(tmp_path_factory, shape):
    @given(shape_dicts[shape])
    def check(d):
        if not d:
            return
        p = tmp_path_factory.mktemp(shape) / "s.blz"
        dtypes = {"wset": ["uint64"], "indexed_zset": [(np.int64, str), np.float64],
                  "val_batch": [str, np.int64, np.uint32]}[shape]
        lay = blz.build_layer(p, d, shape=shape, dtypes=dtypes)
        assert lay.shape == shape
        assert lay.columns == list(blz._layer.SHAPES[shape])
        assert lay.weight[0] == "weight"
        assert lay.to_dict() == d
        assert blz.open(p).shape == shape
        lay.verify()

    check()


def test_shape_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown shape"):
        blz.build_layer(tmp_path / "x.blz", {1: 1}, shape="zset")
    with pytest.raises(ValueError, match="need shape"):
        blz.build_layer(tmp_path / "x.blz", {1: 1})
    with pytest.raises(ValueError, match="expected a dict"):
        blz.build_layer(tmp_path / "x.blz", {1: 1}, shape="indexed_zset")
    with pytest.raises(blz.Error, match="a wset has 1 column"):
        blz.build_layer(tmp_path / "x.blz", [(1, 2, 3)], columns=["a", "b"], shape="wset")
    with pytest.raises(TypeError):
        blz.build_layer(tmp_path / "x.blz", [((), 1)], weight="w")
    with pytest.raises((ValueError, blz.Error)):
        blz.build_layer(tmp_path / "x.blz", [((1, "a"), 1), ((1,), 2)], weight="w")
    assert not (tmp_path / "x.blz").exists()
    plain = blz.build_layer(tmp_path / "p.blz", [(1, "a")])
    assert plain.shape is None
    with pytest.raises(ValueError, match="needs a layer with weights"):
        plain.to_dict()


batch = st.dictionaries(st.tuples(st.integers(-3, 3), st.text(alphabet="ab", max_size=2)),
                        st.integers(-2, 2), max_size=30)


@given(st.lists(batch, min_size=1, max_size=3))
def test_merging_tuple_wsets_adds_weights(tmp_path_factory, batches):
    d = tmp_path_factory.mktemp("m")
    paths = []
    for i, b in enumerate(batches):
        blz.build_layer(d / f"{i}.blz", sorted(b.items()), shape="wset",
                        dtypes=[(np.int64, str)], weight_dtype="int64")
        paths.append(d / f"{i}.blz")
    model = defaultdict(int)
    for b in batches:
        for k, w in b.items():
            model[k] += w
    out = blz.merge_layers(paths, d / "out.blz")
    assert out.shape == "wset"
    assert out.to_dict() == {k: w for k, w in sorted(model.items()) if w != 0}
