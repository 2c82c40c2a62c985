"""Datasets on an S3-compatible object store through ``s3://`` URLs. ``tests/s3/run.sh``
runs these against a local moto server (it sets ``AWS_ENDPOINT_URL`` and the test bucket);
without an endpoint they are skipped."""

import os
import pathlib
import subprocess
import sys
import uuid

import numpy as np
import pytest

import blz

pytestmark = pytest.mark.skipif(
    "AWS_ENDPOINT_URL" not in os.environ or "BLZ_S3_TEST_BUCKET" not in os.environ,
    reason="no S3 endpoint (AWS_ENDPOINT_URL): run through tests/s3/run.sh",
)


def url(name: str) -> str:
    return f"s3://{os.environ['BLZ_S3_TEST_BUCKET']}/py-{uuid.uuid4().hex}/{name}"


def test_array_round_trip():
    u = url("a.blz")
    data = np.arange(100_000, dtype=np.float64) * 0.5
    a = blz.create(u, data, chunks=(4096,), superchunksize=4)
    a.append(np.full(10, -1.0))
    a.attrs["units"] = "m"
    r = blz.open(u)
    assert isinstance(r, blz.Array)
    assert r.shape == (100_010,)
    np.testing.assert_array_equal(r[:100_000], data)
    np.testing.assert_array_equal(r[-10:], np.full(10, -1.0))
    assert r[12345] == data[12345]
    assert r.attrs["units"] == "m"


REPO = pathlib.Path(__file__).resolve().parents[2]


def test_open_and_ten_elements_cost_two_requests():
    """Opening a dataset and reading ten elements costs two requests, counted where they
    arrive (a proxy in front of the server, ``tests/s3/counting_proxy.py``): the state
    object, then one ranged GET of the chunk (the state holds the superchunk file's header,
    metadata and offsets). From Python, and from the ``blz`` command when it is built
    (``BLZ_BIN``, else ``target/debug/blz``)."""
    sys.path.insert(0, str(REPO / "tests" / "s3"))
    from counting_proxy import CountingProxy

    u = url("n.blz")
    data = np.random.default_rng(7).integers(-(2**62), 2**62, size=200_000, dtype=np.int64)
    blz.create(u, data, chunks=(10_000,), superchunksize=64)
    bucket, key = u.removeprefix("s3://").split("/", 1)
    clients = [
        ("python", [sys.executable, "-c", f"import blz; print(blz.open({u!r})[654:664].tolist())"])
    ]
    cli = os.environ.get("BLZ_BIN") or str(REPO / "target" / "debug" / "blz")
    if os.access(cli, os.X_OK):
        clients.append(("blz", [cli, "get", u, "654:664"]))
    with CountingProxy(os.environ["AWS_ENDPOINT_URL"]) as proxy:
        for name, cmd in clients:
            env = dict(os.environ, AWS_ENDPOINT_URL=proxy.url)
            env.pop("BLZ_S3_REQUEST_LOG", None)
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            assert str(data[663]) in out.stdout, (name, out.stdout)
            got = proxy.take()
            assert len(got) == 2, f"{name}: {got}"
            assert got[0] == ("GET", f"/{bucket}/{key}/meta/state", None), f"{name}: {got}"
            method, path, rng = got[1]
            assert method == "GET" and path.startswith(f"/{bucket}/{key}/data/"), f"{name}: {got}"
            assert rng.startswith("bytes=") and not rng.startswith("bytes=0-"), f"{name}: {got}"


def test_table_round_trip():
    u = url("t.blz")
    cols = {"id": np.arange(50, dtype=np.int64), "x": np.linspace(0, 1, 50)}
    t = blz.create(u, cols)
    t.append({"id": np.array([50], dtype=np.int64), "x": np.array([2.0])})
    r = blz.open(u)
    assert isinstance(r, blz.Table)
    assert len(r) == 51
    np.testing.assert_array_equal(r["id"][:], np.arange(51))


def test_missing_dataset_is_not_found():
    with pytest.raises(blz.NotFoundError):
        blz.open(url("nothing.blz"))


def test_a_stale_writer_gets_a_conflict():
    u = url("c.blz")
    blz.create(u, np.zeros(10, dtype=np.int64))
    w = blz.open(u, "r+")
    # Another process commits first.
    code = f"import blz, numpy as np; blz.open({u!r}, 'r+').append(np.ones(5, dtype=np.int64))"
    subprocess.run([sys.executable, "-c", code], check=True)
    with pytest.raises(blz.ConflictError) as e:
        w.append(np.full(3, 7, dtype=np.int64))
    assert u in str(e.value)
    r = blz.open(u)
    np.testing.assert_array_equal(r[:], np.r_[np.zeros(10), np.ones(5)].astype(np.int64))


def test_dask_reads_and_refuses_writes():
    da = pytest.importorskip("dask.array")
    import blz.dask

    u = url("d.blz")
    data = np.arange(50_000, dtype=np.int64)
    blz.create(u, data, chunks=(1024,), superchunksize=4)
    x = blz.dask.from_blz(u)
    assert int(x.sum().compute()) == int(data.sum())
    np.testing.assert_array_equal(x[7:40_000:13].compute(), data[7:40_000:13])
    t = url("t.blz")
    blz.create(t, {"k": data % 7, "v": data * 0.5})
    df = blz.dask.read_table(t, columns=["k", "v"]).groupby("k")["v"].sum().compute()
    import pandas as pd

    want = pd.DataFrame({"k": data % 7, "v": data * 0.5}).groupby("k")["v"].sum()
    pd.testing.assert_series_equal(df.sort_index(), want)
    with pytest.raises(blz.InvalidArgumentError, match="object store"):
        blz.dask.to_blz(da.zeros(10, chunks=5), url("w.blz"))
    with pytest.raises(blz.InvalidArgumentError, match="object store"):
        blz.dask.append(da.zeros(10, chunks=5, dtype=np.int64), u)
    with pytest.raises(blz.InvalidArgumentError, match="object-store"):
        blz.dask.file_hosts(u)


def test_dask_on_a_two_worker_cluster():
    distributed = pytest.importorskip("distributed")
    import blz.dask

    u = url("cluster.blz")
    data = np.arange(40_000, dtype=np.float64)
    blz.create(u, data, chunks=(1024,), superchunksize=4)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True) as cluster:
        with distributed.Client(cluster):
            x = blz.dask.from_blz(u)
            assert float(x.sum().compute()) == float(data.sum())
            np.testing.assert_array_equal(x[3::17].compute(), data[3::17])
