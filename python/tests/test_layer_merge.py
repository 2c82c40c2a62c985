"""blz.merge_layers against dicts: random batches of (key, value) -> weight, built as layer
datasets and merged; equal paths add up, zero sums and emptied keys disappear."""

from collections import defaultdict

import hypothesis.strategies as st
import pytest
from hypothesis import given

import blz

batch = st.dictionaries(
    st.tuples(st.integers(-20, 20), st.text(alphabet="abc", max_size=2)),
    st.integers(-2, 2),
    max_size=60,
)


def build(path, d):
    recs = [(k, v, w) for (k, v), w in sorted(d.items(), key=lambda kv: (kv[0][0], kv[0][1].encode()))]
    return blz.build_layer(path, recs, columns=["k", "v"], dtypes=["int64", str], weight="w",
                           weight_dtype="int64")


@given(st.lists(batch, min_size=1, max_size=4))
def test_merge_is_the_sum_of_the_dicts(tmp_path_factory, batches):
    d = tmp_path_factory.mktemp("m")
    paths = []
    for i, b in enumerate(batches):
        build(d / f"in{i}.blz", b)
        paths.append(d / f"in{i}.blz")
    model = defaultdict(int)
    for b in batches:
        for p, w in b.items():
            model[p] += w
    want = sorted(((k, v, w) for (k, v), w in model.items() if w != 0),
                  key=lambda r: (r[0], r[1].encode()))
    out = blz.merge_layers(paths, d / "out.blz")
    assert list(out.paths()) == want
    assert list(out) == sorted({k for k, _, _ in want})
    for k in {k for b in batches for (k, _) in b}:
        assert out.contains(k) == any(r[0] == k for r in want)
    out.verify()


def test_merge_errors_leave_the_output_as_it_was(tmp_path):
    a = build(tmp_path / "a.blz", {(1, "x"): 2})
    blz.build_layer(tmp_path / "f.blz", [(1.5, 1)], columns=["k"], weight="w")
    with pytest.raises(blz.Error, match="cannot be merged"):
        blz.merge_layers([tmp_path / "a.blz", tmp_path / "f.blz"], tmp_path / "o.blz")
    assert not (tmp_path / "o.blz").exists()
    with pytest.raises(ValueError):
        blz.merge_layers([], tmp_path / "o.blz")
    # An existing output needs overwrite=True.
    with pytest.raises(blz.Error):
        blz.merge_layers([tmp_path / "a.blz"], tmp_path / "a.blz")
    assert list(a.paths()) == [(1, "x", 2)]
    out = blz.merge_layers([tmp_path / "a.blz", tmp_path / "a.blz"], tmp_path / "o.blz")
    assert list(out.paths()) == [(1, "x", 4)]
    out = blz.merge_layers([tmp_path / "a.blz"], tmp_path / "o.blz", overwrite=True)
    assert list(out.paths()) == [(1, "x", 2)]
