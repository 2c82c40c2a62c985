"""In-memory datasets: ``blz.array``, ``blz.create(None, ...)``, ``memory://`` URLs,
``save``, ``blz.open(..., in_memory=True)``, sizes, SQL, expressions, and what pickling
and dask do with a dataset that lives in one process."""

from __future__ import annotations

import gc
import pickle

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import blz

DTYPES = st.sampled_from(["<f8", "<i4", "<u2", "|b1", "<f4", "<i8", "<c16"])


@settings(max_examples=30, deadline=None)
@given(
    x=DTYPES.flatmap(
        lambda dt: hnp.arrays(dt, hnp.array_shapes(min_dims=1, max_dims=3, max_side=40))
    ),
    data=st.data(),
)
def test_round_trips_against_numpy(x, data):
    chunks = tuple(data.draw(st.integers(1, max(1, n))) for n in x.shape)
    a = blz.array(x, chunks=chunks)
    assert a.in_memory and a.path.startswith("memory://anon-")
    np.testing.assert_array_equal(a[...], x)
    # Basic and advanced indexing.
    key = tuple(slice(None, None, data.draw(st.integers(1, 3))) for _ in x.shape)
    np.testing.assert_array_equal(a[key], x[key])
    if x.shape[0]:
        idx = data.draw(st.lists(st.integers(0, x.shape[0] - 1), min_size=1, max_size=5))
        np.testing.assert_array_equal(a[idx], x[idx])
    # Appends, writes, resize.
    model = x.copy()
    a.append(x)
    model = np.concatenate([model, x])
    if model.size:
        a[0] = model[-1]
        model[0] = model[-1]
    a.resize(max(0, model.shape[0] - 1))
    model = model[: max(0, model.shape[0] - 1)]
    np.testing.assert_array_equal(a[...], model)
    assert a.shape == model.shape and a.nbytes == model.nbytes


def test_sizes_reductions_where_and_attributes():
    x = np.arange(1_000_000, dtype=np.float64)
    a = blz.array(x, chunks=100_000, codec="lz4")
    assert a.nbytes == x.nbytes
    assert 0 < a.cbytes < x.nbytes / 5
    # The memory held is the compressed chunks (plus small headers and meta files).
    held = blz._blz.memory_bytes(a.path)
    assert a.cbytes <= held < a.cbytes + 64 * 1024
    r = repr(a)
    assert "nbytes=7.6 MiB" in r and "cbytes=" in r and "memory://anon-" in r
    assert a.sum() == pytest.approx(x.sum(), rel=1e-12)
    assert np.mean(a) == pytest.approx(x.mean(), rel=1e-12)
    np.testing.assert_array_equal(a.where("x > 999990"), x[x > 999990])
    a.attrs["unit"] = "s"
    assert dict(a.attrs) == {"unit": "s"}


def test_an_anonymous_dataset_goes_with_its_last_handle():
    a = blz.array(np.arange(10))
    path = a.path
    b = blz.open(path)  # found by its name while a handle lives
    np.testing.assert_array_equal(b[...], np.arange(10))
    del a, b
    gc.collect()
    with pytest.raises(blz.NotFoundError, match="in this process"):
        blz.open(path)


def test_named_datasets_live_until_removed_and_save(tmp_path):
    t = blz.create("memory://tests/named", np.arange(100, dtype=np.int32), chunks=16)
    del t
    gc.collect()
    a = blz.open("memory://tests/named", "r+")
    a.append(np.arange(5, dtype=np.int32))
    saved = a.save(tmp_path / "a.blz")  # while open for writing
    assert not saved.in_memory
    np.testing.assert_array_equal(saved[...], np.r_[np.arange(100), np.arange(5)])
    # Saving over an existing dataset is an error and writes nothing.
    before = sorted(p.name for p in (tmp_path / "a.blz" / "data").iterdir())
    with pytest.raises(blz.InvalidArgumentError, match="already exists"):
        a.save(tmp_path / "a.blz")
    assert sorted(p.name for p in (tmp_path / "a.blz" / "data").iterdir()) == before
    assert not (tmp_path / "a.blz.tmp-build").exists()
    a.save(tmp_path / "a.blz", overwrite=True)
    # Loaded back into memory: a copy, writable, that changes nothing on disk.
    m = blz.open(tmp_path / "a.blz", "r+", in_memory=True)
    assert m.in_memory
    m[:3] = -1
    assert blz.open(tmp_path / "a.blz")[0] == 0 and m[0] == -1
    del a, m
    blz.remove("memory://tests/named")
    with pytest.raises(blz.NotFoundError):
        blz.open("memory://tests/named")
    with pytest.raises(ValueError, match="memory://"):
        blz.remove(tmp_path / "a.blz")


def test_tables_from_dicts_records_and_frames_with_sql_against_duckdb():
    duckdb = pytest.importorskip("duckdb")
    rng = np.random.default_rng(5)
    cols = {
        "k": np.arange(20_000, dtype=np.int64),
        "g": rng.integers(0, 7, 20_000).astype(np.int64),
        "x": rng.random(20_000),
    }
    df = pd.DataFrame(cols)
    t = blz.array(cols, chunks=1_000)
    assert isinstance(t, blz.Table) and t.in_memory
    assert t.nbytes == sum(v.nbytes for v in cols.values()) and 0 < t.cbytes < t.nbytes
    assert "cbytes=" in repr(t)
    q = "SELECT g, count(*) AS n, sum(x) AS s FROM t WHERE k % 3 = 0 GROUP BY g ORDER BY g"
    got = blz.sql(q, t=t).to_pandas()
    want = duckdb.sql(q.replace("FROM t", "FROM df")).df()
    assert list(got["g"]) == list(want["g"]) and list(got["n"]) == list(want["n"])
    np.testing.assert_allclose(got["s"], want["s"], rtol=1e-12)
    # From a DataFrame and from records; appended to and read back.
    f = blz.array(df.head(10))
    np.testing.assert_array_equal(f["x"][:], cols["x"][:10])
    r = blz.array([{"a": 1, "b": "x"}, {"a": 2, "b": "yy"}])
    assert list(r["a"][:]) == [1, 2] and list(r["b"][:]) == ["x", "yy"]
    r.append({"a": [3], "b": ["zzz"]})
    assert len(r) == 3 and r["b"][2] == "zzz"


def test_expressions_over_and_into_memory():
    x = np.linspace(0, 1, 50_000)
    a, b = blz.array(x, chunks=7_000), blz.array(x[::-1].copy(), chunks=5_000)
    want = x * x[::-1] + np.sin(x)
    np.testing.assert_allclose(blz.evaluate("a * b + sin(a)", a=a, b=b), want)
    out = blz.evaluate("a * b + sin(a)", a=a, b=b, out="memory://tests/expr")
    assert out.in_memory
    np.testing.assert_allclose(out[...], want)
    np.testing.assert_allclose((a * b).sum(), (x * x[::-1]).sum())
    del out
    blz.remove("memory://tests/expr")


def test_in_memory_datasets_do_not_pickle_and_dask_reads_them_in_process(tmp_path):
    a = blz.array(np.arange(1000.0), chunks=100)
    with pytest.raises(TypeError, match="in-memory dataset"):
        pickle.dumps(a)
    t = blz.array({"x": np.arange(10)})
    with pytest.raises(TypeError, match="Save it first"):
        pickle.dumps(t)
    # A saved one pickles as any dataset on disk.
    s = a.save(tmp_path / "s.blz")
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(s))[...], np.arange(1000.0))
    dask = pytest.importorskip("dask")
    from blz.dask import from_blz

    d = from_blz(a)
    # The threaded scheduler runs the tasks in this process, where the dataset is.
    assert float(d.sum().compute(scheduler="threads")) == float(np.arange(1000.0).sum())
    # A process pool would have to pickle it: a clear error, not an empty dataset.
    with pytest.raises(Exception, match="in-memory dataset|in this process"):
        d.sum().compute(scheduler="processes")
    del dask


def test_a_layer_in_memory_saves_and_loads(tmp_path):
    records = [(k, f"v{k}") for k in range(0, 2000, 2)]
    lay = blz.build_layer("memory://tests/layer", records)
    assert lay.in_memory and lay.rows(0) == 1000
    assert lay.contains(1998) and not lay.contains(7)
    with pytest.raises(TypeError, match="in-memory dataset"):
        pickle.dumps(lay)
    saved = lay.save(tmp_path / "l.blz")
    assert saved.rows(0) == 1000 and saved.contains(1000)
    back = blz.open(tmp_path / "l.blz", in_memory=True)
    assert back.in_memory and back.contains(0) and not back.contains(1)
    del lay
    blz.remove("memory://tests/layer")
