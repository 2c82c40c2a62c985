"""blz.build_layer(..., sort=True) against dicts: records in any order, with repeated key
paths and weights that cancel, built with memory budgets small enough to force many sorted
runs; the dataset holds each path whose weights add up to something other than zero, once,
with that sum (without weights: each path once)."""

import os
from collections import defaultdict

import hypothesis.strategies as st
import pytest
from hypothesis import given

import blz

records = st.lists(
    st.tuples(st.integers(-15, 15), st.text(alphabet="abc", max_size=3), st.integers(-2, 2)),
    max_size=300,
)


def order(r):
    return (r[0], r[1].encode())


@given(records, st.integers(64, 4000))
def test_sorted_build_is_the_sum_of_the_records(tmp_path_factory, recs, memory):
    d = tmp_path_factory.mktemp("s")
    model = defaultdict(int)
    for k, v, w in recs:
        model[(k, v)] += w
    want = sorted(((k, v, w) for (k, v), w in model.items() if w != 0), key=order)
    out = blz.build_layer(d / "o.blz", recs, columns=["k", "v"], dtypes=["int64", str],
                          weight="w", weight_dtype="int64", sort=True, sort_memory=memory)
    assert list(out.paths()) == want
    assert list(out) == sorted({k for k, _, _ in want})
    out.verify()
    assert sorted(os.listdir(d)) == ["o.blz"]


@given(records)
def test_unweighted_sorted_build_is_the_set(tmp_path_factory, recs):
    d = tmp_path_factory.mktemp("u")
    pairs = [(k, v) for k, v, _ in recs]
    out = blz.build_layer(d / "o.blz", pairs, columns=["k", "v"], dtypes=["int64", str],
                          sort=True, sort_memory=200)
    assert list(out.paths()) == sorted(set(pairs), key=order)


def test_sort_arguments(tmp_path):
    with pytest.raises(ValueError):
        blz.build_layer(tmp_path / "a.blz", [(2,), (1,)], sort_memory=100)
    with pytest.raises(ValueError):
        blz.build_layer(tmp_path / "a.blz", [(2,), (1,)], sort=True, sort_memory=0)
    # Unsorted input without sort= is refused and leaves nothing.
    with pytest.raises(ValueError):
        blz.build_layer(tmp_path / "a.blz", [(2,), (1,)])
    assert os.listdir(tmp_path) == []
    out = blz.build_layer(tmp_path / "a.blz", [(2,), (1,), (2,)], sort=True)
    assert list(out) == [1, 2]
    empty = blz.build_layer(tmp_path / "e.blz", [], columns=["k"], dtypes=["int64"], sort=True)
    assert len(empty) == 0
