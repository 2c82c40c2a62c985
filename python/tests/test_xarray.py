"""blz.xarray: blz groups opened with ``xr.open_dataset(path, engine="blz")`` and written by
``blz.xarray.to_blz`` (spec/xarray.md)."""

import json
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import blz

xr = pytest.importorskip("xarray")
dask = pytest.importorskip("dask")
import dask.array as da  # noqa: E402

import blz.xarray as bx  # noqa: E402


def sample() -> "xr.Dataset":
    """Coordinates (datetime64 included, one non-dimension coordinate), attributes on the
    dataset and variables, every numeric dtype, bool, 1-d to 3-d and a 0-d variable."""
    rng = np.random.default_rng(11)
    time = pd.date_range("2024-01-01", periods=6, freq="6h").values
    ds = xr.Dataset(
        {
            "temp": (("time", "y", "x"), rng.standard_normal((6, 5, 4)), {"units": "K", "scale": [1, 2]}),
            "flag": (("y", "x"), rng.integers(0, 2, (5, 4)).astype(bool)),
            "count": ("time", np.arange(6, dtype=np.uint16), {"long_name": "count"}),
            "offset": ((), np.float32(2.5), {"note": "a 0-d variable"}),
            "label": ("x", np.array(["a", "bb", "ccc", "d"])),
        },
        coords={
            "time": time,
            "y": np.linspace(50.0, 54.0, 5),
            "x": np.arange(4, dtype=np.int32),
            "station": ("x", np.array([10, 20, 30, 40], dtype=np.int64), {"kind": "id"}),
        },
        attrs={"title": "sample", "version": 3, "tags": ["a", "b"], "ratio": 0.5},
    )
    for i, dt in enumerate(["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f4", "f8", "c16"]):
        ds[f"v_{dt}"] = (("y", "x"), (rng.standard_normal((5, 4)) * 50).astype(dt), {"i": i})
    return ds


def backend(var):
    """The BlzBackendArray under xarray's wrappers (copy-on-write, memory cache, lazy)."""
    a = var._data
    while not isinstance(a, bx.BlzBackendArray):
        a = a.array
    return a


def write(ds, path, **kw):
    bx.to_blz(ds, path, **kw)
    return str(path)


def test_round_trip_identical(tmp_path):
    ds = sample()
    p = write(ds, tmp_path / "g")
    with xr.open_dataset(p, engine="blz") as got:
        xr.testing.assert_identical(got.load(), ds)
        assert got["time"].dtype == np.dtype("datetime64[ns]")
        assert got["offset"].ndim == 0
        assert "station" in got.coords and "station" not in got.data_vars
        assert got["temp"].encoding["chunks"] == blz.open(os.path.join(p, "temp")).chunks


def test_layout_on_disk(tmp_path):
    """The spec's layout: blz-group.json, an array per variable with _ARRAY_DIMENSIONS, CF
    encoded datetimes, NaN fill values as strings, a 0-d variable as shape (1,)."""
    p = write(sample(), tmp_path / "g")
    doc = json.load(open(os.path.join(p, "blz-group.json")))
    assert doc["blz_group"] == 1
    assert set(doc["variables"]) >= {"temp", "time", "x", "y", "station", "offset"}
    assert doc["attributes"]["title"] == "sample"
    t = blz.open(os.path.join(p, "time"))
    assert t.dtype == np.int64 and t.attrs["_ARRAY_DIMENSIONS"] == ["time"]
    assert "since" in t.attrs["units"]
    temp = blz.open(os.path.join(p, "temp"))
    assert temp.attrs["_ARRAY_DIMENSIONS"] == ["time", "y", "x"]
    assert temp.attrs["_FillValue"] == "NaN"
    assert blz.open(os.path.join(p, "label")).attrs["coordinates"] == "station"
    off = blz.open(os.path.join(p, "offset"))
    assert off.shape == (1,) and off.attrs["_ARRAY_DIMENSIONS"] == []
    assert not [n for n in os.listdir(tmp_path) if ".tmp-" in n]


def test_lazy_until_values(tmp_path, monkeypatch):
    p = write(sample(), tmp_path / "g")
    reads = []
    raw = bx.BlzBackendArray._raw_indexing_method
    monkeypatch.setattr(
        bx.BlzBackendArray, "_raw_indexing_method",
        lambda self, key: reads.append(os.path.basename(self.path)) or raw(self, key),
    )
    ds = xr.open_dataset(p, engine="blz")
    data_reads = [n for n in reads if n in ds.data_vars]
    assert data_reads == []  # only index coordinates were read (pandas indexes)
    assert isinstance(backend(ds["temp"].variable), bx.BlzBackendArray)
    sub = ds["temp"].isel(time=[0, 4], x=slice(1, 3))
    assert [n for n in reads if n == "temp"] == []
    want = sample()["temp"].isel(time=[0, 4], x=slice(1, 3))
    np.testing.assert_array_equal(sub.values, want.values)
    assert reads.count("temp") == 1


def test_outer_indexing(tmp_path):
    ds = sample()
    got = xr.open_dataset(write(ds, tmp_path / "g"), engine="blz")
    for key in [
        dict(time=[5, 0, 2], y=slice(None, None, -2), x=[3, 1]),
        dict(time=3, y=[4, 4, 0]),
        dict(y=slice(1, 4, 2), x=-1),
        dict(time=np.array([], dtype=int)),
    ]:
        np.testing.assert_array_equal(got["temp"].isel(key).values, ds["temp"].isel(key).values)
    pts = dict(y=xr.DataArray([0, 3, 4], dims="p"), x=xr.DataArray([1, 1, 3], dims="p"))
    np.testing.assert_array_equal(got["temp"].isel(pts).values, ds["temp"].isel(pts).values)


def test_chunks_follow_blz(tmp_path):
    ds = sample()
    p = write(ds, tmp_path / "g", encoding={"temp": {"chunks": (4, 2, 3)}})
    got = xr.open_dataset(p, engine="blz", chunks={})
    assert got["temp"].encoding["preferred_chunks"] == {"time": 4, "y": 2, "x": 3}
    assert got["temp"].chunks == ((4, 2), (2, 2, 1), (3, 1))
    xr.testing.assert_identical(got.compute(), ds)


def test_dask_chunks_become_blz_chunks(tmp_path):
    ds = sample().chunk({"time": 2, "y": 3})
    p = write(ds, tmp_path / "g")
    assert blz.open(os.path.join(p, "temp")).chunks == (2, 3, 4)
    with xr.open_dataset(p, engine="blz") as got:
        xr.testing.assert_identical(got.load(), ds.compute())


def test_distributed_computation(tmp_path):
    """A dask computation over engine="blz" data on a two-worker process cluster: the
    backend arrays travel pickled and reopen their arrays by path on the workers."""
    distributed = pytest.importorskip("distributed")
    rng = np.random.default_rng(5)
    ds = xr.Dataset({"v": (("t", "c"), rng.standard_normal((400, 30)))},
                    coords={"t": np.arange(400)})
    p = write(ds, tmp_path / "g", encoding={"v": {"chunks": (50, 30)}})
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=None) as cluster, distributed.Client(cluster):
        got = xr.open_dataset(p, engine="blz", chunks={})
        assert got["v"].chunks == ((50,) * 8, (30,))
        mean = got["v"].mean("t").compute()
        np.testing.assert_allclose(mean.values, ds["v"].mean("t").values)
        # and written back by the workers
        write(got.assign(w=got["v"] * 2), tmp_path / "h")
    with xr.open_dataset(tmp_path / "h", engine="blz") as back:
        np.testing.assert_array_equal(back["w"].values, ds["v"].values * 2)


def test_backend_array_pickles(tmp_path):
    p = write(sample(), tmp_path / "g")
    ds = xr.open_dataset(p, engine="blz")
    arr = backend(ds["temp"].variable)
    state = pickle.dumps(arr)
    assert b"RawArray" not in state  # the path, not the open handle
    copy = pickle.loads(state)
    assert copy.shape == arr.shape and copy.dtype == arr.dtype
    key = xr.core.indexing.OuterIndexer((np.array([1, 3]), slice(0, 2), 2))
    np.testing.assert_array_equal(copy[key], sample()["temp"].values[[1, 3], 0:2, 2])
    # a whole lazily opened dataset pickles too
    xr.testing.assert_identical(pickle.loads(pickle.dumps(ds)).load(), sample())


def test_drop_variables(tmp_path, monkeypatch):
    p = write(sample(), tmp_path / "g")
    opened = []
    real = bx._open_array
    monkeypatch.setattr(bx, "_open_array", lambda path: opened.append(os.path.basename(path)) or real(path))
    got = xr.open_dataset(p, engine="blz", drop_variables=["temp", "v_i1"])
    assert "temp" not in got and "v_i1" not in got and "flag" in got
    assert "temp" not in opened and "v_i1" not in opened
    got1 = xr.open_dataset(p, engine="blz", drop_variables="flag")
    assert "flag" not in got1


def test_guess_can_open(tmp_path):
    p = write(sample(), tmp_path / "g")
    e = bx.BlzBackendEntrypoint()
    assert e.guess_can_open(p) and e.guess_can_open(tmp_path / "g")
    blz.create(tmp_path / "a.blz", np.arange(3))
    assert not e.guess_can_open(str(tmp_path / "a.blz"))
    assert not e.guess_can_open(str(tmp_path / "missing"))
    assert not e.guess_can_open(object())
    assert "blz" in xr.backends.list_engines()
    with xr.open_dataset(p) as got:  # found by guess_can_open, no engine named
        assert "temp" in got


def test_existing_path(tmp_path):
    ds = sample()
    p = write(ds, tmp_path / "g")
    with pytest.raises(FileExistsError):
        bx.to_blz(ds, p)
    other = ds[["count"]].assign_attrs(title="other")
    bx.to_blz(other, p, mode="w")
    with xr.open_dataset(p, engine="blz") as got:
        xr.testing.assert_identical(got.load(), other)
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "keep.txt").write_text("x")
    with pytest.raises(FileExistsError):
        bx.to_blz(ds, tmp_path / "plain", mode="w")
    assert (tmp_path / "plain" / "keep.txt").exists()
    assert sorted(os.listdir(tmp_path)) == ["g", "plain"]


def test_failure_mid_write_leaves_old_group(tmp_path, monkeypatch):
    ds = sample()
    calls = []
    real = bx._write_variable

    def failing(path, *a):
        calls.append(path)
        if len(calls) == 3:
            raise OSError("disk full (injected)")
        return real(path, *a)

    monkeypatch.setattr(bx, "_write_variable", failing)
    with pytest.raises(OSError, match="injected"):
        bx.to_blz(ds, tmp_path / "new")
    assert os.listdir(tmp_path) == []  # no group, no temporary directory
    monkeypatch.setattr(bx, "_write_variable", real)
    p = write(ds, tmp_path / "g")
    calls.clear()
    monkeypatch.setattr(bx, "_write_variable", failing)
    with pytest.raises(OSError, match="injected"):
        bx.to_blz(ds.assign_attrs(title="new"), p, mode="w")
    assert len(calls) == 3 and os.listdir(tmp_path) == ["g"]
    with xr.open_dataset(p, engine="blz") as got:
        xr.testing.assert_identical(got.load(), ds)


def test_crash_mid_write_leaves_old_group(tmp_path):
    """A writer killed (os._exit) after some variables: the old group is untouched and
    only the temporary directory is left beside it."""
    ds = sample()
    p = write(ds, tmp_path / "g")
    script = textwrap.dedent(f"""
        import os, numpy as np, xarray as xr, blz.xarray as bx
        real = bx._write_variable
        n = []
        def dying(*a):
            n.append(1)
            if len(n) == 3:
                os._exit(9)
            return real(*a)
        bx._write_variable = dying
        ds = xr.Dataset({{"a": ("x", np.arange(5)), "b": ("x", np.ones(5)), "c": ("x", np.zeros(5))}})
        bx.to_blz(ds, {p!r}, mode="w")
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert r.returncode == 9, r.stderr
    left = sorted(os.listdir(tmp_path))
    assert left[0] == "g" and len(left) == 2 and left[1].startswith("g.tmp-")
    with xr.open_dataset(p, engine="blz") as got:
        xr.testing.assert_identical(got.load(), ds)


def test_refusals(tmp_path):
    with pytest.raises(ValueError, match="NaN"):
        bx.to_blz(xr.Dataset(attrs={"bad": float("nan")}), tmp_path / "a")
    with pytest.raises(ValueError, match="directory name"):
        bx.to_blz(xr.Dataset({"a/b": ("x", [1])}), tmp_path / "b")
    with pytest.raises(ValueError, match="mode"):
        bx.to_blz(xr.Dataset(), tmp_path / "c", mode="a")
    with pytest.raises(blz.InvalidArgumentError, match="not a blz group"):
        xr.open_dataset(tmp_path, engine="blz")
    assert os.listdir(tmp_path) == []


def test_fill_values_mask(tmp_path):
    """An integer variable with a _FillValue comes back masked (CF decoding), and its
    encoding keeps the fill value; a float NaN fill round-trips."""
    ds = xr.Dataset({"i": ("x", np.array([1, -99, 3], dtype=np.int16), {}, {"_FillValue": -99}),
                     "f": ("x", np.array([1.0, np.nan, 3.0]))})
    p = write(ds, tmp_path / "g")
    got = xr.open_dataset(p, engine="blz")
    assert np.isnan(got["i"].values[1]) and got["i"].encoding["_FillValue"] == -99
    assert np.isnan(got["f"].encoding["_FillValue"])
    raw = xr.open_dataset(p, engine="blz", mask_and_scale=False)
    assert raw["i"].values.tolist() == [1, -99, 3]


@given(
    shape=st.lists(st.integers(1, 9), min_size=1, max_size=3),
    data=st.data(),
)
def test_random_shapes_and_chunks(tmp_path_factory, shape, data):
    chunks = tuple(data.draw(st.integers(1, n)) for n in shape)
    dtype = data.draw(st.sampled_from(["i1", "u4", "f4", "f8", "?"]))
    dims = tuple(f"d{i}" for i in range(len(shape)))
    vals = (np.arange(np.prod(shape)).reshape(shape) % 7).astype(dtype)
    ds = xr.Dataset({"v": (dims, vals)})
    p = str(tmp_path_factory.mktemp("h") / "g")
    bx.to_blz(ds, p, encoding={"v": {"chunks": chunks}})
    got = xr.open_dataset(p, engine="blz", chunks={})
    assert got["v"].data.chunksize == chunks
    xr.testing.assert_identical(got.compute(), ds)
    key = {d: data.draw(st.lists(st.integers(0, n - 1), max_size=4)) for d, n in zip(dims, shape)}
    np.testing.assert_array_equal(
        xr.open_dataset(p, engine="blz")["v"].isel(key).values, ds["v"].isel(key).values
    )


def test_replace_without_exchange(tmp_path, monkeypatch):
    """Where the filesystem cannot swap directories, the replacement renames the old group
    aside, the new one in, and removes the old one."""
    ds = sample()
    p = write(ds, tmp_path / "g")

    def unsupported(a, b):
        raise blz.UnsupportedError(f"{a}: cannot swap (injected)")

    monkeypatch.setattr(bx._blz, "exchange_paths", unsupported)
    new = ds.assign_attrs(title="replaced")
    bx.to_blz(new, p, mode="w")
    assert os.listdir(tmp_path) == ["g"]
    with xr.open_dataset(p, engine="blz") as got:
        xr.testing.assert_identical(got.load(), new)
