"""Reductions of blz arrays and columns (blz/_reduce.py, blz.scan.reduce_axis) against numpy
as the oracle: every function, every axis (none, one, several, negative), keepdims, every
numeric dtype with NaN and empty arrays; ``np.sum(a)`` dispatches through
``__array_function__`` without reading the array whole."""

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import blz

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float32", "float64", ">f8", ">i4"]
FUNCS = ["sum", "min", "max", "mean", "std", "var", "argmin", "argmax", "any", "all",
         "count_nonzero"]


def elements(dt):
    dt = np.dtype(dt)
    if dt.kind == "b":
        return st.booleans()
    if dt.kind == "f":
        return st.one_of(
            st.floats(-1e3, 1e3, width=dt.itemsize * 8),
            st.sampled_from([0.0, -0.0, np.nan]),
        )
    info = np.iinfo(dt)
    return st.integers(max(info.min, -300), min(info.max, 300))


@st.composite
def cases(draw):
    dt = draw(st.sampled_from(DTYPES))
    nd = draw(st.integers(1, 3))
    shape = (draw(st.integers(0, 7)),) + tuple(draw(st.integers(1, 6)) for _ in range(nd - 1))
    chunks = tuple(draw(st.integers(1, 4)) for _ in range(nd))
    data = draw(hnp.arrays(np.dtype(dt), shape, elements=elements(dt)))
    kind = draw(st.sampled_from(["none", "one", "neg", "tuple"]))
    if kind == "none":
        axis = None
    elif kind == "one":
        axis = draw(st.integers(0, nd - 1))
    elif kind == "neg":
        axis = draw(st.integers(-nd, -1))
    else:
        axis = tuple(draw(st.sets(st.integers(0, nd - 1))))
    keepdims = draw(st.booleans())
    ddof = draw(st.sampled_from([0, 1]))
    return data, chunks, axis, keepdims, ddof


def check(func, got, want, dt):
    got_a, want_a = np.asarray(got), np.asarray(want)
    assert got_a.shape == want_a.shape, (func, got_a.shape, want_a.shape)
    assert got_a.dtype == want_a.dtype, (func, got_a.dtype, want_a.dtype)
    assert type(got) is type(want) or isinstance(want, np.ndarray), (func, type(got), type(want))
    if want_a.dtype.kind == "f":
        rtol = 1e-5 if want_a.dtype == np.float32 or np.dtype(dt) == np.float32 else 1e-10
        np.testing.assert_allclose(got_a, want_a, rtol=rtol, atol=1e-9, equal_nan=True,
                                   err_msg=func)
    else:
        np.testing.assert_array_equal(got_a, want_a, err_msg=func)


def numpy_result(func, data, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            return getattr(np, func)(data, **kw), None
        except Exception as e:  # noqa: BLE001 - the error type is compared
            return None, e


@given(cases())
def test_every_reduction_matches_numpy(tmp_path_factory, case):
    data, chunks, axis, keepdims, ddof = case
    path = tmp_path_factory.mktemp("r") / "a.blz"
    a = blz.create(path, data, chunks=chunks)
    for func in FUNCS:
        kw = {"axis": axis}
        if func in ("argmin", "argmax"):
            if isinstance(axis, tuple):
                continue
        if func != "count_nonzero" or True:
            kw["keepdims"] = keepdims
        if func in ("std", "var"):
            kw["ddof"] = ddof
        want, err = numpy_result(func, data, **kw)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            if err is not None:
                with pytest.raises(type(err) if isinstance(err, ValueError) else Exception):
                    getattr(np, func)(a, **kw)
                continue
            got = getattr(np, func)(a, **kw)
            method = getattr(a, func)(**kw)
        check(func, got, want, data.dtype)
        check(func, method, want, data.dtype)


def test_np_sum_does_not_read_the_array(tmp_path, monkeypatch):
    data = np.arange(12000, dtype=np.float64).reshape(120, 100)
    a = blz.create(tmp_path / "a.blz", data, chunks=(7, 30))

    def refuse(*args, **kwargs):
        raise AssertionError("__array__ was called")

    monkeypatch.setattr(blz.Array, "__array__", refuse)
    assert np.sum(a) == data.sum()
    assert isinstance(np.sum(a), np.float64)
    np.testing.assert_allclose(np.mean(a, axis=1), data.mean(axis=1))
    assert np.argmax(a) == data.argmax()
    assert np.count_nonzero(a) == np.count_nonzero(data)
    np.testing.assert_array_equal(np.max(a, axis=0, keepdims=True), data.max(0, keepdims=True))
    np.testing.assert_allclose(np.std(a, axis=(0, 1), ddof=1), data.std(ddof=1))
    # the fallback, which reads the array, is then refused too
    with pytest.raises(AssertionError):
        np.cumsum(a)


def test_unimplemented_functions_fall_back_to_numpy(tmp_path):
    data = np.arange(24, dtype=np.int32).reshape(4, 6)
    a = blz.create(tmp_path / "a.blz", data, chunks=(3, 4))
    np.testing.assert_array_equal(np.cumsum(a, axis=1), np.cumsum(data, axis=1))
    np.testing.assert_array_equal(np.concatenate([a, a]), np.concatenate([data, data]))
    assert np.sum(a, where=data > 5) == np.sum(data, where=data > 5)
    assert np.max(a, initial=100) == 100
    np.testing.assert_array_equal(np.asarray(a), data)
    np.testing.assert_array_equal(np.sum(a, axis=0, dtype=np.int8),
                                  np.sum(data, axis=0, dtype=np.int8))
    out = np.empty(6, dtype=np.int64)
    assert np.sum(a, axis=0, out=out) is out
    np.testing.assert_array_equal(out, data.sum(0))
    # float32 means and variances are float32, as numpy's
    f = blz.create(tmp_path / "f.blz", data.astype(np.float32), chunks=(3, 4))
    assert np.mean(f).dtype == np.float32 and np.var(f, axis=0).dtype == np.float32
    assert np.mean(f, dtype=np.float64).dtype == np.float64


def test_errors_are_numpys(tmp_path):
    a = blz.create(tmp_path / "a.blz", np.zeros((0, 3)), chunks=(2, 2))
    with pytest.raises(ValueError):
        a.min()
    with pytest.raises(ValueError):
        np.argmax(a, axis=0)
    assert a.min(axis=1).shape == (0,)
    assert a.sum() == 0.0
    with pytest.raises(np.exceptions.AxisError):
        a.sum(axis=2)
    with pytest.raises(ValueError):
        a.sum(axis=(0, 0))


def test_columns_reduce_in_rust(tmp_path):
    x = np.linspace(-3, 7, 1001)
    ids = np.arange(1001, dtype=np.int32)
    t = blz.create(tmp_path / "t.blz", {"x": x, "id": ids}, chunks=100)
    col = t["x"]
    assert np.argmax(col) == 1000
    np.testing.assert_allclose(col.mean(), x.mean(), rtol=1e-12)
    np.testing.assert_allclose(np.std(col, ddof=1), x.std(ddof=1), rtol=1e-12)
    assert np.sum(t["id"]) == ids.sum() and np.sum(t["id"]).dtype == np.int64
    assert t["id"].count_nonzero() == 1000


@st.composite
def edits(draw):
    dt = draw(st.sampled_from(["bool", "int32", "uint64", "float64", ">f8"]))
    data = draw(hnp.arrays(np.dtype(dt), (draw(st.integers(1, 20)),), elements=elements(dt)))
    steps = draw(st.lists(st.tuples(st.sampled_from(["append", "resize", "set"]),
                                    st.integers(0, 20), st.integers(0, 2**32)), max_size=5))
    return data, draw(st.integers(1, 6)), steps


@given(edits())
def test_whole_array_reductions_after_edits_match_numpy(tmp_path_factory, case):
    # Reductions with axis=None answer from the per-chunk statistics and sums where they are
    # current; appends, grows, shrinks that cut a chunk and writes must keep them right.
    data, chunk, steps = case
    path = tmp_path_factory.mktemp("e") / "a.blz"
    a = blz.create(path, data, chunks=(chunk,))
    model = data.copy()
    for kind, n, seed in steps:
        rng = np.random.default_rng(seed)
        if kind == "append":
            v = rng.integers(-3, 4, n).astype(model.dtype)
            a.append(v)
            model = np.concatenate([model, v])
        elif kind == "resize":
            a.resize(n)
            model = np.concatenate([model[:n], np.zeros(max(0, n - len(model)), model.dtype)])
        elif len(model):
            i = n % len(model)
            v = np.array([rng.integers(-3, 4)]).astype(model.dtype)[0]
            a[i] = v
            model[i] = v
    a = blz.open(path)
    for func in FUNCS:
        want, err = numpy_result(func, model)
        if err is not None:
            with pytest.raises(Exception):
                getattr(np, func)(a)
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            got = getattr(np, func)(a)
        check(func, got, want, model.dtype)
