"""numpy's basic indexing through the library's one selection type (``blz::Selection``):
random keys of ints, slices (negative, clamped, stepped either way, huge), ``...`` and
``None`` read and write arrays, tables and columns as numpy does; a key outside the dataset
is refused by the library, as a :class:`blz.OutOfBoundsError` (an ``IndexError``)."""

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
from helpers import same
from hypothesis import given

import blz

HUGE = [10**30, -(10**30), 2**63, -(2**63) - 1]


@st.composite
def items(draw, n):
    """One item for an axis of extent n: out-of-range bounds and steps included."""
    bound = st.one_of(st.none(), st.integers(-n - 3, n + 3), st.sampled_from(HUGE))
    step = st.one_of(st.none(), st.integers(-4, 4).filter(bool), st.sampled_from(HUGE))
    kind = draw(st.sampled_from(["int", "slice", "slice", "npint"]))
    if kind == "slice":
        return slice(draw(bound), draw(bound), draw(step))
    if n == 0:
        return slice(None)
    i = draw(st.integers(-n, n - 1))
    return np.int64(i) if kind == "npint" else i


@st.composite
def keys(draw, shape):
    """A key for `shape`: items for some leading axes, with `...` and `None` anywhere."""
    k = draw(st.integers(0, len(shape)))
    if draw(st.booleans()):
        # Items before the ellipsis index the leading axes, those after it the trailing ones.
        p = draw(st.integers(0, k))
        tail = shape[len(shape) - (k - p) :] if k > p else ()
        key = [draw(items(n)) for n in shape[:p]] + [Ellipsis] + [draw(items(n)) for n in tail]
    else:
        key = [draw(items(n)) for n in shape[:k]]
    for _ in range(draw(st.integers(0, 2))):
        key.insert(draw(st.integers(0, len(key))), None)
    if len(key) == 1 and draw(st.booleans()):
        return key[0]
    return tuple(key)


@st.composite
def arrays(draw):
    ndim = draw(st.integers(1, 3))
    shape = (draw(st.integers(0, 7)), *(draw(st.integers(1, 5)) for _ in range(ndim - 1)))
    chunks = tuple(draw(st.integers(1, max(n, 1) + 1)) for n in shape)
    return draw(hnp.arrays(np.dtype(">i4"), shape)), chunks


@given(arrays(), st.data())
def test_array_reads_and_writes_as_numpy(tmp_path_factory, setup, data):
    model, chunks = setup
    a = blz.create(tmp_path_factory.mktemp("s") / "a.blz", model, chunks=chunks)
    for _ in range(4):
        key = data.draw(keys(model.shape))
        same(a[key], model[key])
        assert type(a[key]) is type(model[key])
        if data.draw(st.booleans()):
            v = data.draw(hnp.arrays(model.dtype, np.shape(model[key])))
            a[key] = v
            model[key] = v
            same(a[...], model)
        else:
            a[key] = 7
            model[key] = 7
    same(a[...], model)


@given(st.integers(0, 12), st.data())
def test_table_and_column_reads_as_numpy(tmp_path_factory, n, data):
    dt = np.dtype([("id", "i4"), ("pos", [("x", "f8"), ("y", "u1")])])
    model = np.zeros(n, dt)
    model["id"] = np.arange(n)
    model["pos"]["x"] = np.arange(n) / 2
    model["pos"]["y"] = np.arange(n) % 5
    strs = [f"s{i}" for i in range(n)]
    src = {"id": model["id"], "pos": {"x": model["pos"]["x"], "y": model["pos"]["y"]}}
    if n:
        src["s"] = strs
    t = blz.create(tmp_path_factory.mktemp("t") / "t.blz", src, chunks=data.draw(st.integers(1, 5)))
    for _ in range(4):
        key = data.draw(keys((n,)))
        got = t[key]
        assert got.shape == model[key].shape
        for f in ("id", "pos"):
            assert got[f].tobytes() == model[f][key].tobytes()
        same(t["id"][key], model["id"][key])
        same(t["pos/x"][key], model["pos"]["x"][key])
        assert t["pos"][key].tobytes() == model["pos"][key].tobytes()
        if n:
            want = np.array(strs + [None], dtype=object)[:-1][key]
            assert np.asarray(t["s"][key]).tolist() == np.asarray(want).tolist()


@given(st.integers(1, 10), st.data())
def test_table_row_writes(tmp_path_factory, n, data):
    model = np.arange(n, dtype=np.int64)
    t = blz.create(tmp_path_factory.mktemp("w") / "w.blz", {"v": model.copy()})
    a = data.draw(st.one_of(st.none(), st.integers(-n - 2, n + 2)))
    b = data.draw(st.one_of(st.none(), st.integers(-n - 2, n + 2)))
    key = data.draw(st.sampled_from([slice(a, b), slice(a, b, 1)]))
    rows = np.arange(len(model[key])) + 100
    t[key] = {"v": rows}
    model[key] = rows
    same(t["v"][:], model)
    i = data.draw(st.integers(-n, n - 1))
    t[i] = {"v": np.array([-1])}
    model[i] = -1
    same(t["v"][:], model)


def test_out_of_bounds_comes_from_the_library(tmp_path):
    m = np.arange(24, dtype=np.int32).reshape(4, 6)
    a = blz.create(tmp_path / "a.blz", m)
    t = blz.create(tmp_path / "t.blz", {"v": np.arange(4)})
    for obj, key in [
        (a, 4), (a, -5), (a, (0, 6)), (a, (slice(None), -7)), (a, (0, 0, 0)),
        (a, (0, ..., 0, 0)), (a, 10**30), (a, (None, 0, None, 9)),
        (t, 4), (t, -5), (t, (0, 0)), (t["v"], 7),
    ]:
        with pytest.raises(blz.OutOfBoundsError) as e:
            obj[key]
        assert isinstance(e.value, IndexError)
        assert e.value.filename == (t.path if obj is not a else a.path)
    with pytest.raises(blz.OutOfBoundsError):
        a[4, 0] = 1
    with pytest.raises(blz.OutOfBoundsError):
        t[4] = {"v": np.array([1])}
    # Out-of-range slice bounds clamp, as in numpy.
    same(a[2:100, -100:3], m[2:100, -100:3])
    same(a[10**30 : -(10**30) : -(10**30)], m[10**30 : -(10**30) : -(10**30)])


def test_keys_numpy_would_refuse_or_blz_does_not_take(tmp_path):
    m = np.arange(24, dtype=np.int32).reshape(4, 6)
    a = blz.create(tmp_path / "a.blz", m)
    # Advanced keys index as numpy does (python/tests/test_fancy.py); the others numpy
    # refuses raise IndexError.
    for key in [[1, 2], np.array([1, 2]), np.array(1), True, np.True_, (0, [1])]:
        same(a[key], m[key])
    for key in [1.5, "x"]:
        with pytest.raises(IndexError):
            a[key]
    with pytest.raises(ValueError):  # numpy: "slice step cannot be zero"
        a[::0]
    with pytest.raises(TypeError):  # numpy: slice indices must be integers
        a[1.5:]
    assert a[np.int8(-1), np.uint64(5)] == m[-1, 5]
    assert a[()].shape == m.shape
    assert a[1, ...].shape == (6,) and a[1, 2, ...].shape == () and isinstance(a[1, 2, ...], np.ndarray)
    assert a[None].shape == (1, 4, 6) and a[..., None].shape == (4, 6, 1)
