"""Advanced indexing of arrays and tables (``blz::fancy`` through ``blz/_fancy.py``).

- numpy is the oracle: random shapes, chunk shapes and keys mixing integers, slices, ``...``,
  ``None``, integer arrays and lists (negative included, repeated), boolean arrays of any
  number of dimensions and boolean scalars, read and written (``a[key] = value`` with
  numpy's broadcasting); a key numpy refuses raises the same exception class here.
- zarr's ``oindex`` and ``vindex`` against models written from zarr's rules.
- The selection cases of zarr-python's ``tests/test_indexing.py`` (basic 1-d and 2-d,
  orthogonal and fancy fallbacks of ``__getitem__``/``__setitem__``, ``oindex``,
  ``vindex``, masks), ported with the store replaced by a blz array. Where zarr's
  ``z[...]`` departs from numpy (it refuses negative steps and lists in some places),
  ``a[...]`` here keeps numpy's behaviour, which the port checks instead.
- Tables: rows by integer array or mask, read and written.
"""

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
from helpers import same
from hypothesis import given
from numpy.testing import assert_array_equal

import blz

# -- numpy as the oracle ----------------------------------------------------------------


@st.composite
def index_items(draw, shape, bshape):
    """Items indexing the axes of ``shape`` in order (a boolean array may take several),
    advanced ones shaped to broadcast with ``bshape`` (mostly)."""
    items = []
    axis = 0
    while axis < len(shape):
        n = shape[axis]
        kind = draw(
            st.sampled_from(["int", "slice", "slice", "list", "array", "array", "bool", "bool"])
        )
        if kind == "int" and n:
            items.append(draw(st.integers(-n, n - 1)))
            axis += 1
        elif kind in ("list", "array"):
            cut = draw(st.integers(0, len(bshape)))
            s = tuple(1 if draw(st.integers(0, 3)) == 0 else d for d in bshape[cut:])
            lo, hi = (-n, n - 1) if n else (0, 0)
            if n == 0 or draw(st.integers(0, 15)) == 0:
                hi += 1  # sometimes out of bounds
            a = draw(hnp.arrays(np.int64, s, elements=st.integers(lo, hi)))
            if kind == "list":
                items.append(a.tolist() if a.ndim else [int(a)])
            else:
                dt = draw(st.sampled_from([np.int64, np.int32, np.intp]))
                items.append(a.astype(dt))
            axis += 1
        elif kind == "bool":
            k = draw(st.integers(1, len(shape) - axis))
            m = draw(hnp.arrays(np.bool_, shape[axis : axis + k]))
            if draw(st.integers(0, 20)) == 0:
                m = np.zeros(tuple(d + 1 for d in m.shape), bool)  # a wrong length
            items.append(m)
            axis += k
        else:
            a = st.one_of(st.none(), st.integers(-n - 2, n + 2))
            step = st.one_of(st.none(), st.integers(-3, 3).filter(bool))
            items.append(slice(draw(a), draw(a), draw(step)))
            axis += 1
        if draw(st.integers(0, 2)) == 0:
            break
    return items, axis


@st.composite
def numpy_keys(draw, shape):
    bshape = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
    lead, used = draw(index_items(shape, bshape))
    key = list(lead)
    if draw(st.booleans()) and used < len(shape):
        tail_from = draw(st.integers(used, len(shape)))
        tail, _ = draw(index_items(shape[tail_from:], bshape))
        key = key + [Ellipsis] + tail
    for _ in range(draw(st.integers(0, 2))):
        key.insert(draw(st.integers(0, len(key))), None)
    if draw(st.integers(0, 12)) == 0:
        key.insert(draw(st.integers(0, len(key))), np.bool_(draw(st.booleans())))
    if len(key) == 1 and draw(st.booleans()):
        return key[0]
    return tuple(key)


@st.composite
def arrays(draw):
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(0 if i == 0 else 1, 6)) for i in range(ndim))
    chunks = tuple(draw(st.integers(1, max(n, 1) + 1)) for n in shape)
    dtype = draw(st.sampled_from([np.dtype(">i4"), np.dtype("<f8"), np.dtype("u1")]))
    return draw(hnp.arrays(dtype, shape, elements=st.integers(0, 100))), chunks


def numpy_or_error(f):
    try:
        return f(), None
    except (IndexError, ValueError, TypeError) as e:
        return None, type(e)


@given(arrays(), st.data())
def test_reads_and_writes_as_numpy(tmp_path_factory, setup, data):
    model, chunks = setup
    a = blz.create(tmp_path_factory.mktemp("f") / "a.blz", model, chunks=chunks)
    for _ in range(5):
        key = data.draw(numpy_keys(model.shape))
        want, err = numpy_or_error(lambda: model[key])
        if err is not None:
            with pytest.raises(err):
                a[key]
            continue
        same(a[key], want)
        if data.draw(st.booleans()):
            v = data.draw(hnp.arrays(model.dtype, want.shape, elements=st.integers(0, 100)))
            if v.ndim and data.draw(st.booleans()):
                v = v[..., :1]  # broadcast along the last axis
        else:
            v = data.draw(st.integers(0, 100))
        _, err = numpy_or_error(lambda: model.__setitem__(key, v))
        if err is not None:
            with pytest.raises(err):
                a[key] = v
        else:
            a[key] = v
        same(a[...], model)


def oindex_model(a, key):
    """zarr's orthogonal selection on a numpy array (its ``oindex`` test helper)."""
    key = key if isinstance(key, tuple) else (key,)
    key = [np.asarray(k) if isinstance(k, list) else k for k in key]
    if any(k is Ellipsis for k in key):
        i = next(j for j, k in enumerate(key) if k is Ellipsis)
        key = key[:i] + [slice(None)] * (a.ndim - len(key) + 1) + key[i + 1 :]
    key += [slice(None)] * (a.ndim - len(key))
    drop = tuple(i for i, k in enumerate(key) if isinstance(k, (int, np.integer)))
    ix = []
    for k, n in zip(key, a.shape):
        if isinstance(k, (int, np.integer)):
            ix.append([k])
        elif isinstance(k, slice):
            ix.append(list(range(*k.indices(n))))
        elif k.dtype == bool:
            ix.append(np.flatnonzero(k))
        else:
            ix.append(k)
    return np.ix_(*ix), drop


@st.composite
def ortho_keys(draw, shape):
    key = []
    for n in shape:
        kind = draw(st.sampled_from(["int", "slice", "list", "array", "mask"]))
        if kind == "int" and n:
            key.append(draw(st.integers(-n, n - 1)))
        elif kind in ("list", "array") and n:
            v = draw(st.lists(st.integers(-n, n - 1), max_size=6))
            key.append(v if kind == "list" and v else np.array(v, dtype=np.int64))
        elif kind == "mask":
            key.append(draw(hnp.arrays(np.bool_, (n,))))
        else:
            b = st.one_of(st.none(), st.integers(-n - 2, n + 2))
            key.append(slice(draw(b), draw(b), draw(st.one_of(st.none(), st.integers(1, 3)))))
    if len(key) == 1 and draw(st.booleans()):
        return key[0]
    return tuple(key)


@given(arrays(), st.data())
def test_oindex_and_vindex_as_zarr(tmp_path_factory, setup, data):
    model, chunks = setup
    a = blz.create(tmp_path_factory.mktemp("o") / "a.blz", model, chunks=chunks)
    for _ in range(4):
        key = data.draw(ortho_keys(model.shape))
        ix, drop = oindex_model(model, key)
        want = model[ix].squeeze(axis=drop) if drop else model[ix]
        got = a.oindex[key]
        assert_array_equal(got, want)
        assert np.shape(got) == want.shape
        v = data.draw(hnp.arrays(model.dtype, want.shape, elements=st.integers(0, 100)))
        a.oindex[key] = v
        model[ix] = v.reshape(model[ix].shape)
        same(a[...], model)
    # vindex: one integer array per axis, broadcast together; or a mask of the whole shape.
    for _ in range(3):
        if all(model.shape) and data.draw(st.booleans()):
            npts = data.draw(st.integers(0, 6))
            key = tuple(
                np.array(
                    data.draw(st.lists(st.integers(-n, n - 1), min_size=npts, max_size=npts)),
                    dtype=np.int64,
                )
                for n in model.shape
            )
        else:
            key = data.draw(hnp.arrays(np.bool_, model.shape))
        want = model[key]
        same(a.vindex[key], want)
        v = data.draw(hnp.arrays(model.dtype, want.shape, elements=st.integers(0, 100)))
        a.vindex[key] = v
        model[key] = v
        same(a[...], model)


def test_result_layout_follows_numpy(tmp_path):
    model = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    a = blz.create(tmp_path / "a.blz", model, chunks=(1, 2, 3, 2))
    for key in [
        (0, slice(None), [1, 2]),  # advanced indices apart: broadcast axes first
        (slice(None), 0, [1, 2]),  # next to each other: in place
        ([0], None, [0]),
        ([0], Ellipsis, [0]),
        (slice(None), [0], Ellipsis, [0]),
        (Ellipsis, [0]),
        (slice(None), slice(None), slice(None), [3, 0], Ellipsis),
        (np.array([[0, 1], [1, 0]]), slice(None), np.array([0, 2])),
        (slice(1, None), np.array([[0], [2]]), np.array([1, 3]), slice(None, None, -2)),
        np.ones((2, 3), bool),
        (slice(None), np.array([[True, False, True, False]] * 3)),
        (True,),
        (False, 0),
        ([],),
        (np.array([], dtype=np.int64), [[]]),
        np.ix_([1, 0], [2, 2, 0], [3, 0]),  # each array on its own broadcast axis
        (np.array([[1], [0]]), slice(None), np.array([2, 2, 0])),
        (1, np.array([[2], [0]]), slice(1, 3), np.array([[4, 0, 1]])),
        (np.array([[[1]]]), 0, np.array([3])),
    ]:
        same(a[key], model[key])
        v = np.arange(np.prod(model[key].shape)).reshape(model[key].shape) + 1000
        a[key] = v
        model[key] = v
        same(a[...], model)


def test_duplicates_write_the_last_value(tmp_path):
    model = np.zeros((6, 4), np.int64)
    a = blz.create(tmp_path / "a.blz", model, chunks=(4, 3))
    for key, v in [
        ([1, 1, 4, 1], np.arange(16).reshape(4, 4)),
        ((slice(None), [0, 0, 3]), np.arange(18).reshape(6, 3)),
        (([5, 5], [2, 2]), [7, 8]),
    ]:
        a[key] = v
        model[key] = v
        same(a[...], model)


def test_mask_along_rows_streams(tmp_path):
    # A mask along axis 0 of a 2-d array several chunks long: only the rows selected come
    # back, read chunk by chunk (no chunk without a selected row is decoded: a corrupt one
    # is never met).
    model = np.arange(200 * 7, dtype=np.float64).reshape(200, 7)
    a = blz.create(tmp_path / "a.blz", model, chunks=(16, 7), superchunksize=1)
    mask = np.zeros(200, bool)
    mask[[3, 5, 40, 41, 199]] = True
    same(a[mask], model[mask])
    # Damage a file holding only unselected rows (chunk 2, rows 32..47): the read does not
    # touch it.
    import os

    path = os.path.join(tmp_path, "a.blz", "data", "__2__.bin")
    with open(path, "r+b") as f:
        f.seek(64)
        f.write(b"\xff" * 64)
    same(a[mask], model[mask])
    a[mask] = -1.0
    model[mask] = -1.0
    same(a[mask], model[mask])
    with pytest.raises(blz.Error):
        a[...]


def test_errors_as_numpy(tmp_path):
    model = np.arange(30).reshape(6, 5)
    a = blz.create(tmp_path / "a.blz", model, chunks=(4, 2))
    for key in [
        [6],
        [-7],
        (slice(None), [5]),
        np.ones(5, bool),
        np.ones((6, 4), bool),
        ([0, 1], [0, 1, 2]),
        ([0.5],),
        np.array(["a"]),
        (0, 0, [0]),
        ([0], Ellipsis, Ellipsis),
        ([0], 1.5),
    ]:
        with pytest.raises(IndexError):
            model[key]
        with pytest.raises(IndexError):
            a[key]
        with pytest.raises(IndexError):
            a[key] = 1
    with pytest.raises(ValueError):
        model[[0, 1]] = np.zeros((3, 5))
    with pytest.raises(ValueError):
        a[[0, 1]] = np.zeros((3, 5))
    with pytest.raises(ValueError):
        a[[0, 1]] = "x"
    same(a[...], model)
    ro = blz.open(tmp_path / "a.blz")
    with pytest.raises(blz.ReadOnlyError):
        ro[[0]] = 1
    with pytest.raises(IndexError):
        a.oindex[[6]]
    with pytest.raises(IndexError):
        a.oindex[::-1]
    with pytest.raises(IndexError):
        a.oindex[np.ones(4, bool)]
    with pytest.raises(IndexError):
        a.vindex[[0, 1]]
    with pytest.raises(IndexError):
        a.vindex[[0], [5]]
    with pytest.raises(ValueError):
        a.vindex[[0, 1], [0, 1, 2]]


# -- tables ------------------------------------------------------------------------------


@given(st.integers(0, 14), st.data())
def test_table_rows_by_index_and_mask(tmp_path_factory, n, data):
    dt = np.dtype([("id", "i4"), ("pos", [("x", "f8"), ("y", "u1")])])
    model = np.zeros(n, dt)
    model["id"] = np.arange(n)
    model["pos"]["x"] = np.arange(n) / 2
    model["pos"]["y"] = np.arange(n) % 5
    strs = np.array([f"s{i}" for i in range(n)] + [None], dtype=object)[:-1]
    src = {"id": model["id"], "pos": {"x": model["pos"]["x"], "y": model["pos"]["y"]}}
    if n:
        src["s"] = list(strs)
    t = blz.create(tmp_path_factory.mktemp("t") / "t.blz", src, chunks=data.draw(st.integers(1, 5)))
    for _ in range(3):
        if n and data.draw(st.booleans()):
            key = data.draw(st.lists(st.integers(-n, n - 1), max_size=8))
            key = key if data.draw(st.booleans()) else np.array(key, dtype=np.int64)
        else:
            key = data.draw(hnp.arrays(np.bool_, (n,)))
        got = t[key]
        assert got.shape == model[key].shape
        for f in ("id", "pos"):
            assert got[f].tobytes() == model[f][key].tobytes()
        same(t["id"][key], model["id"][key])
        assert t["pos"][key].tobytes() == model["pos"][key].tobytes()
        if n:
            assert list(got["s"]) == list(strs[key])
            assert list(t["s"][key]) == list(strs[key])
        # Write records at those rows (the last of repeated rows wins, as in numpy).
        m = len(model[key])
        rows = {"id": np.arange(m, dtype="i4") + 100, "pos": {"x": np.full(m, -1.0), "y": np.arange(m, dtype="u1")}}
        if n:
            rows["s"] = [f"w{i}" for i in range(m)]
        t[key] = rows
        model["id"][key] = rows["id"]
        model["pos"]["x"][key] = rows["pos"]["x"]
        model["pos"]["y"][key] = rows["pos"]["y"]
        if n:
            strs[key] = rows["s"]
        assert t[:].tobytes() == model.tobytes() if not n else True
        same(t["id"][:], model["id"])
        same(t["pos/x"][:], model["pos"]["x"])
        if n:
            assert list(t["s"][:]) == list(strs)


def test_table_errors(tmp_path):
    t = blz.create(tmp_path / "t.blz", {"v": np.arange(5)})
    with pytest.raises(IndexError):
        t[[5]]
    with pytest.raises(IndexError):
        t[np.ones(4, bool)]
    with pytest.raises(IndexError):
        t[np.zeros((5, 1), np.int64)]
    with pytest.raises(ValueError):
        t[[0, 1]] = {"v": np.arange(3)}
    with pytest.raises(IndexError):
        t[[9]] = {"v": np.arange(1)}
    same(t["v"][:], np.arange(5))


# -- zarr-python's tests/test_indexing.py, ported -----------------------------------------


def zarr_array_from_numpy_array(tmp_path, a, chunk_shape=None):
    import uuid

    return blz.create(tmp_path / f"{uuid.uuid4()}.blz", a, chunks=chunk_shape or a.shape)


BASIC_1D = [5, -1, slice(3, 18), slice(0, 100), slice(-18, -3), slice(0, 0), slice(-1, 0),
            slice(None), Ellipsis, (), (Ellipsis, slice(None)), slice(None, None, 3), slice(3, 27, 5)]
BASIC_2D = [5, -1, (5, slice(None)), (slice(None), 3), (slice(None), -1), slice(None), slice(2, 9),
            slice(0, 0), (slice(2, 9), slice(1, 4)), (slice(0, 12, 3), slice(0, 5, 2)), Ellipsis, ()]


@pytest.mark.parametrize("sel", BASIC_1D)
def test_get_basic_selection_1d(tmp_path, sel):
    a = np.arange(30, dtype=int)
    z = zarr_array_from_numpy_array(tmp_path, a, chunk_shape=(7,))
    assert_array_equal(z[sel], a[sel])


@pytest.mark.parametrize("sel", BASIC_2D)
def test_get_basic_selection_2d(tmp_path, sel):
    a = np.arange(60, dtype=int).reshape(12, 5)
    z = zarr_array_from_numpy_array(tmp_path, a, chunk_shape=(5, 2))
    assert_array_equal(z[sel], a[sel])


@pytest.mark.parametrize("sel", [2.3, "foo", b"xxx", (0, 0), (slice(None), slice(None))])
def test_get_basic_selection_1d_raises(tmp_path, sel):
    # zarr also refuses a negative step and None; numpy takes them, and so does blz.
    a = np.arange(30, dtype=int)
    z = zarr_array_from_numpy_array(tmp_path, a, chunk_shape=(7,))
    with pytest.raises(IndexError):
        z[sel]


def test_basic_2d_fancy_fallback(tmp_path):
    a = np.arange(60, dtype=int).reshape(12, 5)
    z = zarr_array_from_numpy_array(tmp_path, a, chunk_shape=(5, 2))
    assert_array_equal(z[([0, 1], [0, 1])], a[([0, 1], [0, 1])])


def test_fancy_indexing_fallback_on_get_setitem(tmp_path):
    z = zarr_array_from_numpy_array(tmp_path, np.zeros((20, 20)))
    z[[1, 2, 3], [1, 2, 3]] = 1
    assert_array_equal(z[:4, :4], [[0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])
    assert_array_equal(z[[1, 2, 3], [1, 2, 3]], 1)
    assert_array_equal(z[1, [1, 2, 3]], [1, 0, 0])
    z2 = zarr_array_from_numpy_array(tmp_path, np.zeros(5))
    z2[[1, 2, 3]] = 1
    assert_array_equal(z2[:], [0, 1, 1, 1, 0])


@pytest.mark.parametrize(
    ("index", "expected_result"),
    [
        ([0, 1], [[0, 1, 2], [3, 4, 5]]),
        (([0, 1], slice(None)), [[0, 1, 2], [3, 4, 5]]),
        (([0, 1], slice(1, None)), [[1, 2], [4, 5]]),
        ((slice(0, 2), [0, 2]), [[0, 2], [3, 5]]),
        ((slice(0, 2), slice(0, 2)), [[0, 1], [3, 4]]),
        (([1, 0, 1], slice(1, None)), [[4, 5], [1, 2], [4, 5]]),
        (([1, 0, 1]), [[3, 4, 5], [0, 1, 2], [3, 4, 5]]),
    ],
)
def test_orthogonal_indexing_fallback_on_getitem_2d(tmp_path, index, expected_result):
    a = np.arange(9).reshape(3, 3)
    z = zarr_array_from_numpy_array(tmp_path, a)
    assert_array_equal(z[index], a[index], err_msg="Indexing disagrees with numpy")
    assert_array_equal(z[index], expected_result)


@pytest.mark.parametrize(
    ("index", "expected_result"),
    [
        ([0, 1], [[[0, 1, 2], [3, 4, 5], [6, 7, 8]], [[9, 10, 11], [12, 13, 14], [15, 16, 17]]]),
        ((slice(0, 2), 1, 1), [4, 13]),
        ((slice(0, 2), 1, slice(0, 2)), [[3, 4], [12, 13]]),
        ((slice(0, 2), [1, 2], slice(0, 2)), [[[3, 4], [6, 7]], [[12, 13], [15, 16]]]),
    ],
)
def test_orthogonal_indexing_fallback_on_getitem_3d(tmp_path, index, expected_result):
    a = np.arange(27).reshape(3, 3, 3)
    z = zarr_array_from_numpy_array(tmp_path, a)
    assert_array_equal(z[index], a[index], err_msg="Indexing disagrees with numpy")
    assert_array_equal(z[index], expected_result)


@pytest.mark.parametrize(
    ("index", "expected_result"),
    [
        ([0, 1], [[1, 1, 1], [1, 1, 1], [0, 0, 0]]),
        (([0, 1], slice(1, 3)), [[0, 1, 1], [0, 1, 1], [0, 0, 0]]),
        (([0, 1, 1, 1, 1, 1, 1], slice(1, 3)), [[0, 1, 1], [0, 1, 1], [0, 0, 0]]),
        (([0, 2], slice(None, None, 2)), [[1, 0, 1], [0, 0, 0], [1, 0, 1]]),
    ],
)
def test_orthogonal_indexing_fallback_on_setitem_2d(tmp_path, index, expected_result):
    a = np.zeros((3, 3))
    z = zarr_array_from_numpy_array(tmp_path, a)
    z[index] = 1
    a[index] = 1
    assert_array_equal(z[:], expected_result)
    assert_array_equal(z[:], a, err_msg="Indexing disagrees with numpy")


def test_setitem_repeated_index(tmp_path):
    # Skipped in zarr's suite (it fails there); blz writes the last value, as numpy does.
    z = zarr_array_from_numpy_array(tmp_path, np.zeros(4), chunk_shape=(1,))
    z.oindex[(np.array([-1, -1, 0, 0]),)] = [0, 1, 2, 3]
    assert_array_equal(z[:], np.array([3, 0, 0, 1]))
    z.oindex[(np.array([-1, 0, 0, -1]),)] = [0, 1, 2, 3]
    assert_array_equal(z[:], np.array([2, 0, 0, 3]))


def test_fancy_indexing_with_implicit_slicing(tmp_path):
    # zarr refuses these (its fancy indexing needs every axis); numpy takes them.
    a = np.zeros((5, 5, 5))
    z2 = zarr_array_from_numpy_array(tmp_path, a)
    z2[[1, 2, 3], [1, 2, 3]] = 2
    a[[1, 2, 3], [1, 2, 3]] = 2
    assert_array_equal(z2[[1, 2, 3], [1, 2, 3]], a[[1, 2, 3], [1, 2, 3]])
    z2[..., [1, 2, 3]] = 3
    a[..., [1, 2, 3]] = 3
    assert_array_equal(z2[..., [1, 2, 3]], a[..., [1, 2, 3]])
    assert_array_equal(z2[:], a)


ORTHO_1D_BOOL = [
    np.zeros(30, dtype=bool),
    np.ones(30, dtype=bool),
    np.arange(30) % 2 == 0,
    np.arange(30) == 7,
    np.isin(np.arange(30), [0, 1, 8, 15, 29]),
]
ORTHO_1D_INT = [[0, 8, 15, 29], [3, 29, 1, 16], [2, 2, 8, 8], [0, 3, 10, -23, -12, -1], [15]]


def _test_get_orthogonal_selection(a, z, selection):
    ix, drop = oindex_model(a, selection)
    expect = a[ix].squeeze(axis=drop) if drop else a[ix]
    assert_array_equal(expect, z.oindex[selection])


@pytest.mark.parametrize("sel", ORTHO_1D_BOOL + ORTHO_1D_INT)
def test_get_orthogonal_selection_1d(tmp_path, sel):
    a = np.arange(30, dtype=int)
    z = zarr_array_from_numpy_array(tmp_path, a, chunk_shape=(7,))
    _test_get_orthogonal_selection(a, z, sel)


@pytest.mark.parametrize(
    ("sel", "msg"),
    [
        (np.zeros(5, dtype=bool), "wrong length for dimension; expected 30, got 5"),
        (np.zeros(50, dtype=bool), "wrong length for dimension; expected 30, got 50"),
        ([[True, False], [False, True]], "must be 1-dimensional only"),
        ([31], "index out of bounds for dimension with length 30"),
        ([-31], "index out of bounds for dimension with length 30"),
        ([[2, 4], [6, 8]], "integer arrays in an orthogonal selection must be 1-dimensional only"),
    ],
)
def test_get_orthogonal_selection_1d_raises(tmp_path, sel, msg):
    a = np.arange(30, dtype=int)
    z = zarr_array_from_numpy_array(tmp_path, a, chunk_shape=(7,))
    with pytest.raises(IndexError, match=msg):
        z.oindex[sel]


IX0_BOOL = np.isin(np.arange(12), [0, 5, 11])
IX1_BOOL = np.array([True, False, True, False, True])
IX0_INT = np.array([0, 5, 11])
IX1_INT = np.array([0, 2, 4])
ORTHO_2D = [
    (IX0_BOOL, IX1_BOOL), (IX0_BOOL, slice(1, 4)), (IX0_BOOL, slice(0, 5, 2)),
    (slice(2, 9), IX1_BOOL), (slice(0, 12, 4), IX1_BOOL), (IX0_BOOL, 3), (7, IX1_BOOL),
    (IX0_INT, IX1_INT), (IX0_INT, IX1_BOOL), (IX0_BOOL, IX1_INT), 7, (slice(None), 3),
    (slice(None), slice(None)), slice(2, 9),
]


@pytest.mark.parametrize("sel", ORTHO_2D)
def test_get_orthogonal_selection_2d(tmp_path, sel):
    a = np.arange(60, dtype=int).reshape(12, 5)
    z = zarr_array_from_numpy_array(tmp_path, a, chunk_shape=(5, 2))
    _test_get_orthogonal_selection(a, z, sel)


@pytest.mark.parametrize(
    ("sel", "msg"),
    [
        (2.3, "unsupported selection item for orthogonal indexing"),
        ("foo", None),
        (None, "unsupported selection item for orthogonal indexing"),
        (slice(None, None, -1), "only slices with step >= 1 are supported"),
        ((0, 0, 0), "too many indices for array"),
    ],
)
def test_get_orthogonal_selection_2d_raises(tmp_path, sel, msg):
    a = np.arange(60, dtype=int).reshape(12, 5)
    z = zarr_array_from_numpy_array(tmp_path, a, chunk_shape=(5, 2))
    with pytest.raises(IndexError, match=msg):
        z.oindex[sel]


B0 = np.isin(np.arange(7), [0, 3, 6])
B1 = np.isin(np.arange(6), [0, 2, 5])
B2 = np.isin(np.arange(10), [0, 4, 9])
I0, I1, I2 = np.array([0, 3, 6]), np.array([0, 2, 5]), np.array([0, 4, 9])
ORTHO_3D = [
    (5, 3, 8), (-1, -1, -1), (B0, B1, B2), (I0, I1, I2), (B0, slice(1, 5), slice(2, 9)),
    (slice(1, 6), B1, slice(2, 9)), (slice(1, 6), slice(1, 5), B2),
    (B0, slice(0, 6, 2), slice(0, 10, 3)), (slice(0, 7, 2), B1, slice(0, 10, 3)),
    (slice(0, 7, 2), slice(0, 6, 2), B2), (B0, 3, 8), (5, B1, 8), (5, 3, B2),
    (B0, slice(1, 5), 8), (5, B1, slice(2, 9)), (slice(1, 6), 3, B2), (B0, B1, slice(2, 9)),
    (slice(1, 6), B1, B2), (B0, slice(1, 5), B2), (B0, B1, 8), (5, B1, B2), (B0, 3, B2),
]


@pytest.mark.parametrize("sel", ORTHO_3D)
def test_get_orthogonal_selection_3d(tmp_path, sel):
    a = np.arange(420, dtype=int).reshape(7, 6, 10)
    z = zarr_array_from_numpy_array(tmp_path, a, chunk_shape=(3, 2, 4))
    _test_get_orthogonal_selection(a, z, sel)


def test_orthogonal_indexing_edge_cases(tmp_path):
    a = np.arange(6).reshape(1, 2, 3)
    z = zarr_array_from_numpy_array(tmp_path, a, chunk_shape=(1, 2, 3))
    _test_get_orthogonal_selection(a, z, (0, slice(None), [0, 1, 2]))
    _test_get_orthogonal_selection(a, z, (0, slice(None), [True, True, True]))


def _test_set_orthogonal_selection(v, a, z, selection):
    ix, drop = oindex_model(v, selection)
    sub = v[ix].squeeze(axis=drop) if drop else v[ix]
    for value in 42, sub, sub.tolist():
        if isinstance(value, list) and value == []:
            continue
        a[:] = 0
        a[ix] = np.broadcast_to(np.asarray(value).reshape(np.shape(value)), sub.shape).reshape(a[ix].shape)
        z[:] = 0
        z.oindex[selection] = value
        assert_array_equal(a, z[:])


@pytest.mark.parametrize("sel", ORTHO_1D_BOOL + ORTHO_1D_INT)
def test_set_orthogonal_selection_1d(tmp_path, sel):
    v = np.arange(30, dtype=int)
    a = np.empty_like(v)
    z = zarr_array_from_numpy_array(tmp_path, a, chunk_shape=(7,))
    _test_set_orthogonal_selection(v, a, z, sel)


@pytest.mark.parametrize("sel", ORTHO_2D)
def test_set_orthogonal_selection_2d(tmp_path, sel):
    v = np.arange(60, dtype=int).reshape(12, 5)
    a = np.empty_like(v)
    z = zarr_array_from_numpy_array(tmp_path, a, chunk_shape=(5, 2))
    _test_set_orthogonal_selection(v, a, z, sel)


@pytest.mark.parametrize("sel", ORTHO_3D)
def test_set_orthogonal_selection_3d(tmp_path, sel):
    v = np.arange(420, dtype=int).reshape(7, 6, 10)
    a = np.empty_like(v)
    z = zarr_array_from_numpy_array(tmp_path, a, chunk_shape=(3, 2, 4))
    _test_set_orthogonal_selection(v, a, z, sel)


def test_set_item_1d_last_two_chunks(tmp_path):
    z = blz.create(tmp_path / "bar.blz", shape=(10,), chunks=(3,), dtype=int)
    data = np.array([7, 8, 9])
    z[slice(7, 10)] = data
    assert_array_equal(z[slice(7, 10)], data)
    z.oindex[[7, 8, 9]] = data[::-1]
    assert_array_equal(z[7:10], data[::-1])


COORD_1D = [5, -1, [0, 3, 10, -23, -12, -1], [3, 25, 8, 17], [1, 8, 15, 29], [29, 15, 8, 1],
            np.array([29, 15, 8, 1], dtype=np.uint32), [2, 2, 8, 8], np.array([[2, 4], [6, 8]]),
            [0, 6, 7, 13, 14, 28, 29], [0, 1, 2, 8, 9, 10, 21, 22, 23], [1, 2, 3, 4, 5, 6],
            list(range(30)), [0, 0, 7, 7, 7, 29]]


def _test_get_coordinate_selection(a, z, selection):
    assert_array_equal(a[selection], z.vindex[selection])


@pytest.mark.parametrize("sel", COORD_1D)
def test_get_coordinate_selection_1d(tmp_path, sel):
    a = np.arange(30, dtype=int)
    z = zarr_array_from_numpy_array(tmp_path, a, chunk_shape=(7,))
    _test_get_coordinate_selection(a, z, sel)


@pytest.mark.parametrize(
    "sel",
    [slice(5, 15), slice(None), Ellipsis, 2.3, "foo", b"xxx", None, (0, 0),
     (slice(None), slice(None)), [31], [-31]],
)
def test_get_coordinate_selection_1d_raises(tmp_path, sel):
    a = np.arange(30, dtype=int)
    z = zarr_array_from_numpy_array(tmp_path, a, chunk_shape=(7,))
    with pytest.raises(IndexError):
        z.vindex[sel]


C0 = np.array([0, 5, 11, 2, 8])
C1 = np.array([1, 3, 4, 0, 2])
COORD_2D = [(5, 4), (-1, -1), (C0, C1), (np.array([0, 5, 11]), 4), (7, np.array([0, 2, 4])),
            ([3, 3, 4, 2, 5], [1, 3, 4, 0, 2]), ([1, 1, 2, 2, 5], [1, 3, 2, 1, 0]),
            (np.array([[1, 1, 2], [2, 2, 5]]), np.array([[1, 3, 2], [1, 0, 0]]))]


@pytest.mark.parametrize("sel", COORD_2D)
def test_get_coordinate_selection_2d(tmp_path, sel):
    a = np.arange(60, dtype=int).reshape(12, 5)
    z = zarr_array_from_numpy_array(tmp_path, a, chunk_shape=(5, 2))
    _test_get_coordinate_selection(a, z, sel)


@pytest.mark.parametrize(
    "sel",
    [(slice(5, 15), [1, 2, 3]), ([1, 2, 3], slice(5, 15)), (Ellipsis, [1, 2, 3]), Ellipsis,
     (np.array([12]), np.array([0])), (np.array([0]), np.array([5]))],
)
def test_get_coordinate_selection_2d_raises(tmp_path, sel):
    a = np.arange(60, dtype=int).reshape(12, 5)
    z = zarr_array_from_numpy_array(tmp_path, a, chunk_shape=(5, 2))
    with pytest.raises(IndexError):
        z.vindex[sel]


def _test_set_coordinate_selection(v, a, z, selection):
    for value in 42, v[selection], v[selection].tolist():
        a[:] = 0
        a[selection] = value
        z[:] = 0
        z.vindex[selection] = value
        assert_array_equal(a, z[:])


@pytest.mark.parametrize("sel", COORD_1D)
def test_set_coordinate_selection_1d(tmp_path, sel):
    v = np.arange(30, dtype=int)
    a = np.empty_like(v)
    z = zarr_array_from_numpy_array(tmp_path, a, chunk_shape=(7,))
    _test_set_coordinate_selection(v, a, z, sel)


@pytest.mark.parametrize("sel", COORD_2D)
def test_set_coordinate_selection_2d(tmp_path, sel):
    v = np.arange(60, dtype=int).reshape(12, 5)
    a = np.empty_like(v)
    z = zarr_array_from_numpy_array(tmp_path, a, chunk_shape=(5, 2))
    _test_set_coordinate_selection(v, a, z, sel)


MASK_1D = [np.zeros(30, dtype=bool), np.ones(30, dtype=bool), np.arange(30) % 2 == 0,
           np.isin(np.arange(30), [0, 7, 14, 29])]
SPARSE_2D = np.zeros((12, 5), dtype=bool)
SPARSE_2D[[0, 5, 11, 2], [0, 2, 4, 3]] = True
MASK_2D = [np.zeros((12, 5), dtype=bool), np.ones((12, 5), dtype=bool),
           (np.add.outer(np.arange(12), np.arange(5)) % 2).astype(bool), SPARSE_2D]


def _test_get_mask_selection(a, z, selection):
    expect = a[selection]
    assert_array_equal(expect, z.vindex[selection])
    assert_array_equal(expect, z[selection])


@pytest.mark.parametrize("sel", MASK_1D)
def test_get_mask_selection_1d(tmp_path, sel):
    a = np.arange(30, dtype=int)
    z = zarr_array_from_numpy_array(tmp_path, a, chunk_shape=(7,))
    _test_get_mask_selection(a, z, sel)


@pytest.mark.parametrize(
    "sel",
    [slice(5, 15), slice(None), Ellipsis, 2.3, "foo", b"xxx", None, (0, 0),
     (slice(None), slice(None)), np.zeros(5, dtype=bool), np.zeros(50, dtype=bool),
     [[True, False], [False, True]]],
)
def test_get_mask_selection_1d_raises(tmp_path, sel):
    a = np.arange(30, dtype=int)
    z = zarr_array_from_numpy_array(tmp_path, a, chunk_shape=(7,))
    with pytest.raises(IndexError):
        z.vindex[sel]
    with pytest.raises(IndexError):
        z.vindex[sel] = 42


@pytest.mark.parametrize("sel", MASK_2D)
def test_get_mask_selection_2d(tmp_path, sel):
    a = np.arange(60, dtype=int).reshape(12, 5)
    z = zarr_array_from_numpy_array(tmp_path, a, chunk_shape=(5, 2))
    _test_get_mask_selection(a, z, sel)


@pytest.mark.parametrize(
    "sel", [np.zeros((12, 3), dtype=bool), np.zeros((20, 5), dtype=bool), [True, False]]
)
def test_get_mask_selection_2d_raises(tmp_path, sel):
    a = np.arange(60, dtype=int).reshape(12, 5)
    z = zarr_array_from_numpy_array(tmp_path, a, chunk_shape=(5, 2))
    with pytest.raises(IndexError):
        z.vindex[sel]


def _test_set_mask_selection(v, a, z, selection):
    a[:] = 0
    z[:] = 0
    a[selection] = v[selection]
    z.vindex[selection] = v[selection]
    assert_array_equal(a, z[:])
    z[:] = 0
    z[selection] = v[selection]
    assert_array_equal(a, z[:])


@pytest.mark.parametrize("sel", MASK_1D)
def test_set_mask_selection_1d(tmp_path, sel):
    v = np.arange(30, dtype=int)
    a = np.empty_like(v)
    z = zarr_array_from_numpy_array(tmp_path, a, chunk_shape=(7,))
    _test_set_mask_selection(v, a, z, sel)


@pytest.mark.parametrize("sel", MASK_2D)
def test_set_mask_selection_2d(tmp_path, sel):
    v = np.arange(60, dtype=int).reshape(12, 5)
    a = np.empty_like(v)
    z = zarr_array_from_numpy_array(tmp_path, a, chunk_shape=(5, 2))
    _test_set_mask_selection(v, a, z, sel)


@pytest.mark.parametrize(
    "selection",
    [
        [...], [1, ...], [slice(None)], [1, 3], [[1, 2, 3], 4], [np.arange(12)], [slice(2, 9)],
        [slice(1, 3), 3], [[1, 3]], [np.tile([True, False, True, False, True], (12, 1))],
        [np.full((12, 5), False)], [[1, 2, 3, 4], [0, 1, 2, 3]], [[10, 11, 5], [4, 0, 2]],
    ],
)
def test_indexing_equals_numpy(tmp_path, selection):
    a = np.arange(60, dtype=int).reshape(12, 5)
    z = zarr_array_from_numpy_array(tmp_path, a, chunk_shape=(5, 2))
    assert_array_equal(a[tuple(selection)], z[tuple(selection)], err_msg=f"selection: {selection}")


@pytest.mark.parametrize(
    "selection",
    [
        [np.tile([True, False], 6), np.tile([True, False, True, False, True], 1)],
        [np.full(12, False), np.array([True, False, True, False, True])],
        [np.full(12, True), np.full(5, True)],
        [np.full(12, True), [True, False, True, False, True]],
    ],
)
def test_orthogonal_bool_indexing_like_numpy_ix(tmp_path, selection):
    # zarr's z[...] treats two masks orthogonally; numpy (and blz's a[...]) pairs them,
    # so the np.ix_ result is what oindex gives.
    a = np.arange(60, dtype=int).reshape(12, 5)
    z = zarr_array_from_numpy_array(tmp_path, a, chunk_shape=(5, 2))
    expected = a[np.ix_(*selection)]
    assert_array_equal(expected, z.oindex[tuple(selection)], err_msg=f"{selection=}")


@pytest.mark.parametrize("shape", [(0, 2, 3), (0,)])  # blz: only axis 0 may be empty
def test_zero_sized(tmp_path, shape):
    chunks = tuple(max(1, s) for s in shape)
    z = blz.create(tmp_path / "z.blz", shape=shape, chunks=chunks, dtype="f8")
    z[...] = 42
    assert_array_equal(z[...], np.zeros(shape, dtype="f8"))
    ix = tuple(np.zeros(0, np.int64) for _ in shape)
    assert z[ix].shape == np.zeros(shape)[ix].shape
    z[ix] = 1
    assert z.oindex[ix].shape == (0,) * len(shape)


def test_vectorized_indexing_incompatible_shape(tmp_path):
    arr = blz.create(tmp_path / "a.blz", shape=(4, 4), chunks=(2, 2), dtype=np.int16, fill=32767)
    with pytest.raises(ValueError):
        arr[np.array([1, 2]), np.array([1, 2])] = np.array([[-1, -2], [-3, -4]])
    with pytest.raises(ValueError):
        arr.vindex[np.array([1, 2]), np.array([1, 2])] = np.array([[-1, -2], [-3, -4]])
