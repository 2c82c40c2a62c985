"""Layer datasets against sorted lists: every path, seeks, child cursors, membership."""

import bisect
import pickle

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

import blz

keys1 = st.integers(-1000, 1000)
keys2 = st.text(alphabet="abcdxyzé", max_size=5)
weights = st.integers(-(2**40), 2**40)


@given(st.lists(st.tuples(keys1, keys2), unique=True, min_size=1, max_size=300), st.data())
def test_two_columns_with_weights(tmp_path_factory, pairs, data):
    pairs.sort(key=lambda p: (p[0], p[1].encode()))
    recs = [(k, v, data.draw(weights)) for k, v in pairs]
    path = tmp_path_factory.mktemp("l") / "l.blz"
    layer = blz.build_layer(path, recs, columns=["k", "v"], weight="w")
    assert layer.columns == ["k", "v"] and layer.weight == ("w", "int64")
    assert list(layer.paths()) == recs
    firsts = sorted({k for k, _ in pairs})
    assert list(layer) == firsts and len(layer) == len(firsts)
    for probe in data.draw(st.lists(keys1, max_size=10)) + firsts[:3]:
        assert layer.contains(probe) == (probe in firsts)
        c = layer.cursor()
        i = bisect.bisect_left(firsts, probe)
        assert c.seek_ge(probe) == (i < len(firsts))
        assert c.value == (firsts[i] if i < len(firsts) else None)
        j = bisect.bisect_right(firsts, probe) - 1
        assert c.seek_le(probe) == (j >= 0)
        assert c.value == (firsts[j] if j >= 0 else None)
        if c.valid:
            group = [v for k, v in pairs if k == firsts[j]]
            child = c.child()
            assert list(child) == group and child.count == len(group)
            assert child.contains(group[0]) and not child.contains("zzzzzz")
            assert layer.contains(group[-1], within=child)
            assert child.last() and child.value == group[-1]
            assert child.weight == recs[pairs.index((firsts[j], group[-1]))][2]
            assert not child.next() and child.value is None
            assert child.prev() and child.value == group[-1]
            assert child.child() is None


def test_cursor_moves_and_errors(tmp_path):
    layer = blz.build_layer(tmp_path / "m.blz", [(i,) for i in range(0, 100, 2)])
    c = layer.cursor()
    assert c.value == 0 and c.index == 0 and c.row == 0
    assert not c.prev() and c.value is None and not c.valid
    assert c.next() and c.value == 0
    assert c.seek_ge(51) and c.value == 52 and c.index == 26
    assert c.seek_le(51) and c.value == 50
    assert not c.seek_ge(1000) and not c.valid
    assert c.prev() and c.value == 98
    assert 4 in layer and 5 not in layer
    with pytest.raises(blz.Error):
        blz.build_layer(tmp_path / "bad.blz", [(2,), (1,)])
    with pytest.raises(blz.NotFoundError):
        blz.open(tmp_path / "bad.blz")
    with pytest.raises(blz.Error):
        blz.build_layer(tmp_path / "m.blz", [(1,)])
    blz.build_layer(tmp_path / "m.blz", [(1,)], overwrite=True)
    assert list(blz.open(tmp_path / "m.blz")) == [1]
    with pytest.raises(blz.ReadOnlyError):
        blz.open(tmp_path / "m.blz", "r+")


def test_three_columns_bytes_floats_pickle_and_verify(tmp_path):
    recs = sorted({(b"k%d" % (i % 7), float(i % 5), i) for i in range(200)})
    layer = blz.build_layer(tmp_path / "t.blz", recs, columns=["a", "b", "c"])
    assert list(layer.paths()) == recs
    again = pickle.loads(pickle.dumps(layer))
    assert list(again.paths()) == recs
    layer.verify()
    info = layer.info()
    assert [c["name"] for c in info["columns"]] == ["a", "b", "c"]
    assert "blz.Layer" in repr(layer)


@settings(derandomize=True, max_examples=40, deadline=None)
@given(
    st.sampled_from(["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]),
    st.data(),
)
def test_exact_filters_answer_like_a_set(tmp_path_factory, dtype, data):
    import numpy as np

    info = np.iinfo(dtype)
    ints = st.integers(int(info.min), int(info.max))
    keys = data.draw(st.sets(ints, max_size=200) | st.just(set(range(max(int(info.min), -50), min(int(info.max), 300) + 1))))
    keys |= {int(info.min), int(info.max)}
    path = tmp_path_factory.mktemp("exact") / "l.blz"
    layer = blz.build_layer(path, [(k,) for k in sorted(keys)], dtypes=[dtype], filter="exact")
    f = layer.info()["columns"][0]["filter"]
    assert f["kind"] == "exact" and f["exact_chunks"] == f["chunks"] == 1
    probes = data.draw(st.lists(ints, max_size=100)) + [k + d for k in sorted(keys)[:50] for d in (-1, 1)]
    for p in probes:
        if info.min <= p <= info.max:
            assert (p in layer) == (p in keys), p


def test_filter_kinds_choice_and_refusal(tmp_path):
    dense = blz.build_layer(tmp_path / "d.blz", [(k,) for k in range(100_000)])
    f = dense.info()["columns"][0]["filter"]
    assert f["kind"] == "auto" and f["exact_chunks"] == f["chunks"] == 2
    bloom = blz.build_layer(tmp_path / "b.blz", [(k,) for k in range(100_000)], filter="bloom")
    fb = bloom.info()["columns"][0]["filter"]
    assert fb["kind"] == "bloom" and fb["exact_chunks"] == 0
    assert f["bytes"] * 1000 < fb["bytes"]
    assert 99_999 in dense and 100_000 not in dense and -1 not in dense
    sparse = sorted({(k * 0x9E3779B97F4A7C15) % 2**64 for k in range(100_000)})
    s = blz.build_layer(tmp_path / "s.blz", [(k,) for k in sparse], dtypes=["uint64"])
    assert s.info()["columns"][0]["filter"]["exact_chunks"] == 0
    assert blz.build_layer(tmp_path / "o.blz", [(1,)], filter="off").info()["columns"][0]["filter"] is None
    with pytest.raises(ValueError, match="exact filter needs an integer column"):
        blz.build_layer(tmp_path / "x.blz", [("a",)], filter="exact")
    assert not (tmp_path / "x.blz").exists()
    with pytest.raises(ValueError, match="unknown filter kind"):
        blz.build_layer(tmp_path / "y.blz", [(1,)], filter="exactly")


def test_a_weight_named_as_a_key_column_is_refused(tmp_path):
    with pytest.raises(ValueError, match='weight\'s name "k" is also a column'):
        blz.build_layer(tmp_path / "l.blz", [(1, 2, 3)], columns=["k", "v"], weight="k")
    assert not (tmp_path / "l.blz").exists()
