"""A basic read ``a[key]`` crosses from Python into blz's native module once: the key is
resolved, the numpy array allocated, the chunks decoded and numpy's result made in one call
(``RawArray.get``), and a read that meets a writer's commit is made again inside it. These
tests count every call into ``blz._blz`` a read makes: calls of its functions and of the
methods of its objects (``sys.setprofile`` sees each as a C call), and every attribute a
read fetches from the array's native handle (getters cross too, and the profiler does not
see them)."""

import sys

import numpy as np
import pytest

import blz
from blz import _blz


class CountingHandle:
    """The native handle of an array, counting every attribute Python fetches from it."""

    def __init__(self, raw):
        object.__setattr__(self, "_raw", raw)
        object.__setattr__(self, "fetched", [])

    def __getattr__(self, name):
        self.fetched.append(name)
        return getattr(self._raw, name)


def crossings(a, key):
    """``a[key]`` and the calls into ``blz._blz`` it made: ``(result, names)``."""
    handle = CountingHandle(a._raw)
    a._raw = handle
    calls = []

    def profile(frame, event, arg):
        if event != "c_call":
            return
        owner = getattr(arg, "__self__", None)
        module = getattr(arg, "__module__", None) or getattr(type(owner), "__module__", None)
        if module == "blz._blz" or owner is _blz:
            calls.append(arg.__name__)

    sys.setprofile(profile)
    try:
        out = a[key]
    finally:
        sys.setprofile(None)
        a._raw = handle._raw
    # A method fetched from the handle and called is one crossing, counted once.
    names = list(handle.fetched) + [c for c in calls if c not in handle.fetched]
    return out, names


KEYS = [
    slice(10, 110),
    slice(None),
    5,
    -1,
    (3, slice(2, 9)),
    (slice(None), 4),
    (slice(7, 1, -2), slice(None, None, -1)),
    (Ellipsis, 2),
    (None, slice(5, 8), None),
    (slice(40, 20, -1), None, Ellipsis),
    Ellipsis,
    (),
    (slice(100, 100),),
]


@pytest.mark.parametrize("key", KEYS, ids=repr)
@pytest.mark.parametrize("order", ["<", ">"])
def test_a_basic_read_is_one_call_into_blz(tmp_path, key, order):
    d = np.arange(200 * 12, dtype=f"{order}f8").reshape(200, 12)
    blz.create(tmp_path / "a.blz", d, chunks=(64, 5)).close()
    a = blz.open(tmp_path / "a.blz")
    out, names = crossings(a, key)
    assert names == ["get"], f"a[{key!r}] crossed into blz._blz as {names}"
    want = d[key]
    assert type(out) is type(want)
    assert np.shape(out) == np.shape(want)
    assert np.asarray(out).dtype == np.asarray(want).dtype
    np.testing.assert_array_equal(out, want)


def test_a_read_handle_sees_a_commit_in_the_same_one_call(tmp_path):
    d = np.arange(1000, dtype=np.int64)
    w = blz.create(tmp_path / "a.blz", d, chunks=100)
    r = blz.open(tmp_path / "a.blz")
    assert r.shape == (1000,)
    w.append(np.arange(1000, 1500, dtype=np.int64))
    w[0:10] = -1
    out, names = crossings(r, slice(990, 1010))
    assert names == ["get"]
    np.testing.assert_array_equal(out, np.arange(990, 1010))
    out, names = crossings(r, slice(0, 3))
    assert names == ["get"]
    np.testing.assert_array_equal(out, [-1, -1, -1])
    # What the read saw, the handle's description shows after it.
    assert r.shape == (1500,) and len(r) == 1500


def test_an_advanced_key_takes_its_own_path(tmp_path):
    d = np.arange(100, dtype=np.float32)
    blz.create(tmp_path / "a.blz", d, chunks=30).close()
    a = blz.open(tmp_path / "a.blz")
    for key in ([3, 1, 99], np.array([5, 5]), d > 90, (slice(None),), (np.int64(4),)):
        np.testing.assert_array_equal(a[key], d[key])
    with pytest.raises(IndexError):
        a[100]
    with pytest.raises(IndexError):  # as numpy: not an index
        a["x"]


ROW_KEYS = [slice(3, 40), slice(None), 7, -2, slice(50, 10, -3), slice(5, 6), slice(9, 9), Ellipsis, (slice(2, 8),)]


@pytest.mark.parametrize("key", ROW_KEYS, ids=repr)
def test_a_tables_rows_are_one_call_into_blz(tmp_path, key):
    pd = pytest.importorskip("pandas")
    n = 64
    rng = np.random.default_rng(4)
    df = pd.DataFrame(
        {
            "x": rng.random(n),
            "k": pd.array([None if i % 5 == 0 else i for i in range(n)], dtype="Int64"),
            "s": [None if i % 7 == 0 else f"s{i % 3}" for i in range(n)],
        }
    )
    t = blz.create(tmp_path / "t.blz", df, chunks=10)
    t.close()
    t = blz.open(tmp_path / "t.blz")
    whole = np.asarray(t)
    out, names = crossings(t, key)
    assert names == ["rows"], f"t[{key!r}] crossed into blz._blz as {names}"
    want = whole[key]
    assert type(out) is type(want) and out.dtype == want.dtype
    assert np.shape(out) == np.shape(want)
    assert np.atleast_1d(out).tolist() == np.atleast_1d(want).tolist()
    # The whole table against pandas: missing rows as numpy shows them.
    assert [r[2] for r in whole.tolist()] == [None if i % 7 == 0 else f"s{i % 3}" for i in range(n)]


def test_a_table_read_handle_sees_a_commit_in_the_same_one_call(tmp_path):
    t = blz.create(tmp_path / "t.blz", {"a": np.arange(30, dtype=np.int32)}, chunks=8)
    r = blz.open(tmp_path / "t.blz")
    assert len(r) == 30
    t.append({"a": np.arange(30, 40, dtype=np.int32)})
    out, names = crossings(r, slice(28, 33))
    # The read is one call; after a commit, what the handle keeps of the table's schema
    # and sizes in Python is read again (only then).
    assert names[0] == "rows" and set(names[1:]) <= {"schema", "leaves", "nrows", "column_info", "leaf_extras"}
    assert out["a"].tolist() == [28, 29, 30, 31, 32]
    out, names = crossings(r, slice(28, 33))
    assert names == ["rows"]
    assert len(r) == 40
    t.add_column("b", np.float64)
    out = r[38:]
    assert out.dtype.names == ("a", "b") and out["a"].tolist() == [38, 39]


@pytest.mark.parametrize("key", ROW_KEYS, ids=repr)
def test_a_columns_rows_are_one_call_into_blz(tmp_path, key):
    n = 50
    x = np.linspace(0, 1, n)
    t = blz.create(
        tmp_path / "t.blz",
        {"x": x, "pos": {"a": np.arange(n, dtype=np.int16), "b": np.arange(n) * 2.0}, "s": np.array([f"v{i}" for i in range(n)], dtype=object)},
        chunks=9,
    )
    t.close()
    t = blz.open(tmp_path / "t.blz")
    for name in ("x", "s", "pos", "pos/a"):
        c = t[name]
        whole = np.asarray(c)
        handle = CountingHandle(t._raw)
        t._raw = handle
        try:
            out = c[key]
        finally:
            t._raw = handle._raw
        assert handle.fetched == ["rows"], f"{name}[{key!r}] fetched {handle.fetched}"
        want = whole[key]
        assert type(out) is type(want) and np.shape(out) == np.shape(want)
        assert np.atleast_1d(out).tolist() == np.atleast_1d(want).tolist()


def test_an_advanced_read_is_one_call_and_its_decode(tmp_path):
    d = np.arange(120, dtype=np.int32).reshape(40, 3)
    blz.create(tmp_path / "a.blz", d, chunks=(7, 2)).close()
    a = blz.open(tmp_path / "a.blz")
    calls = []

    def profile(frame, event, arg):
        if event == "c_call" and type(getattr(arg, "__self__", None)).__module__ == "blz._blz":
            calls.append(arg.__name__)
        elif event == "c_call" and getattr(arg, "__module__", None) == "blz._blz":
            calls.append(arg.__name__)

    for key in ([3, 1, 39], (np.array([0, 0, 5]), slice(None, None, -1)), d[:, 0] % 3 == 0):
        calls.clear()
        sys.setprofile(profile)
        try:
            out = a[key]
        finally:
            sys.setprofile(None)
        assert calls == ["get", "fancy_read"], f"a[{key!r}] crossed as {calls}"
        np.testing.assert_array_equal(out, d[key])
