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
from helpers import die_once

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


def test_create_over_an_existing_dataset():
    # A create (without overwrite) does not wait for the dataset's state before it builds:
    # over an existing array or table it is refused at its commit, the data kept.
    u = url("e.blz")
    old = np.arange(300_000, dtype=np.int64)
    blz.create(u, old, chunks=(65536,), superchunksize=2)
    with pytest.raises(ValueError, match="already exists"):
        blz.create(u, np.zeros(500_000), chunks=(65536,), superchunksize=2)
    with pytest.raises(ValueError, match="already exists"):
        blz.create(u, {"x": np.arange(10)})
    np.testing.assert_array_equal(blz.open(u)[:], old)
    new = np.linspace(0, 1, 1000)
    blz.create(u, new, overwrite=True)
    np.testing.assert_array_equal(blz.open(u)[:], new)


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


def _grow_by_appends(u: str, seal: str, proxy, monkeypatch) -> tuple[np.ndarray, list[int]]:
    """A dataset of 2-chunk superchunk files grown by 24 appends of two chunks each, every
    process sealing at ``seal`` bytes (``BLZ_S3_MANIFEST_BYTES``); the bytes of each
    append's state PUT, counted where they arrive. No append GETs a manifest (none merges
    manifests here: four seals would be needed)."""
    monkeypatch.setenv("BLZ_S3_MANIFEST_BYTES", seal)
    data = np.random.default_rng(11).integers(0, 1000, 200 * 25)
    blz.create(u, data[:200], chunks=(100,), superchunksize=2)
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    states = []
    for i in range(1, 25):
        os.environ["AWS_ENDPOINT_URL"] = proxy.url
        try:
            blz.open(u, "r+").append(data[200 * i : 200 * (i + 1)])
        finally:
            os.environ["AWS_ENDPOINT_URL"] = endpoint
        sent = proxy.take_bodies()
        puts = [n for m, p, n in sent if m == "PUT" and p.endswith("/meta/state")]
        assert len(puts) == 1, puts
        assert not [p for m, p, _ in sent if m == "GET" and "/manifests/" in p], (i, sent)
        states.append(puts[0])
    monkeypatch.delenv("BLZ_S3_MANIFEST_BYTES")
    return data, states


def test_manifests_keep_the_state_of_many_files_small(monkeypatch):
    """Sealing at 4 KiB (``BLZ_S3_MANIFEST_BYTES``), the entries of the files an append
    leaves unchanged go into manifests: the state each append PUTs stops growing with the
    dataset, where with sealing off (``0``) it grows by every file. Appends GET no
    manifest. An open GETs the state alone, a read of the last file no manifest, a whole read every manifest once; gc keeps the manifests the state names; everything reads equal."""
    sys.path.insert(0, str(REPO / "tests" / "s3"))
    from counting_proxy import CountingProxy

    sealed, plain = url("m.blz"), url("p.blz")
    with CountingProxy(os.environ["AWS_ENDPOINT_URL"]) as proxy:
        data, with_manifests = _grow_by_appends(sealed, "4096", proxy, monkeypatch)
        _, without = _grow_by_appends(plain, "0", proxy, monkeypatch)
        assert without[-1] > 2 * without[4], without
        assert with_manifests[-1] * 2 < without[-1], (with_manifests, without)
        assert max(with_manifests) < 4096 + 6000, with_manifests
        manifests = [k for k in _keys(sealed) if k.startswith("manifests/")]
        assert manifests and not [k for k in _keys(plain) if k.startswith("manifests/")]
        endpoint = os.environ["AWS_ENDPOINT_URL"]
        os.environ["AWS_ENDPOINT_URL"] = proxy.url
        try:
            proxy.take()
            a = blz.open(sealed)
            opened = proxy.take()
            np.testing.assert_array_equal(a[-10:], data[-10:])
            tail = proxy.take()
            np.testing.assert_array_equal(a[:], data)
            whole = proxy.take()
        finally:
            os.environ["AWS_ENDPOINT_URL"] = endpoint
    # The open: the state alone. The last file appended is the state's own: its read needs
    # no manifest. A whole read needs them all, each fetched once.
    assert len(opened) == 1 and opened[0][1].endswith("/meta/state"), opened
    assert len(tail) == 1 and "/data/" in tail[0][1], tail
    named = sorted(p.rsplit("/manifests/", 1)[1] for _, p, _ in whole if "/manifests/" in p)
    assert named and len(set(named)) == len(named), whole
    assert set(named) <= {k.removeprefix("manifests/") for k in manifests}, (named, manifests)
    blz.gc(sealed, grace=0)
    left = [k for k in _keys(sealed) if k.startswith("manifests/")]
    assert sorted(k.removeprefix("manifests/") for k in left) == named, (left, named)
    np.testing.assert_array_equal(blz.open(sealed)[:], data)
    np.testing.assert_array_equal(blz.open(plain)[:], data)
    monkeypatch.setenv("BLZ_S3_MANIFEST_BYTES", "lots")
    with pytest.raises(ValueError, match="BLZ_S3_MANIFEST_BYTES"):
        blz.open(sealed)


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


def test_dask_reads():
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
    assert da is not None
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


# -- dask writes to s3:// (spec/object-store.md §8) ---------------------------------------------


def _boto(u: str, code: str, *args: str) -> str:
    """Runs ``code`` with ``s3`` (a boto3 client of the test server) and ``sys.argv[1:]``
    the dataset's bucket, its prefix and ``args``, in the server's venv (target/s3-venv,
    which tests/s3/run.sh makes); returns what it printed."""
    bucket, key = u.removeprefix("s3://").split("/", 1)
    py = REPO / "target" / "s3-venv" / "bin" / "python"
    head = "import boto3, os, sys\ns3 = boto3.client('s3', endpoint_url=os.environ['AWS_ENDPOINT_URL'])\n"
    out = subprocess.run([str(py), "-c", head + code, bucket, key, *args], capture_output=True, text=True, check=True)
    return out.stdout


def _keys(u: str) -> list[str]:
    """Every object below the dataset's prefix, relative to it."""
    code = (
        "for page in s3.get_paginator('list_objects_v2').paginate(Bucket=sys.argv[1], Prefix=sys.argv[2] + '/'):\n"
        "    for o in page.get('Contents', []):\n"
        "        print(o['Key'][len(sys.argv[2]) + 1:])\n"
    )
    return sorted(_boto(u, code).split())


def _copy_object(u: str, src: str, dst: str) -> None:
    """Puts the bytes of the object ``src`` below the dataset's prefix under ``dst`` (a
    damaged or hostile server answering one key with another object's bytes)."""
    code = (
        "b = s3.get_object(Bucket=sys.argv[1], Key=sys.argv[2] + '/' + sys.argv[3])['Body'].read()\n"
        "s3.put_object(Bucket=sys.argv[1], Key=sys.argv[2] + '/' + sys.argv[4], Body=b)\n"
    )
    _boto(u, code, src, dst)


def test_an_object_of_another_size_is_refused_not_read():
    # Two superchunk files of different sizes; the second file's object then holds the
    # first's bytes. Its chunks would decode (they are whole, valid chunks with valid
    # checksums): the size the server reports for the object gives it away.
    u = url("swapped.blz")
    a = np.arange(3000, dtype=np.int64)
    a[2000:] = np.random.default_rng(5).integers(0, 1 << 40, 1000)
    blz.create(u, a, chunks=(500,), superchunksize=2)
    data = sorted(k for k in _keys(u) if k.startswith("data/") and not k.endswith(".blocks"))
    assert len(data) == 3, data
    _copy_object(u, data[0], data[2])
    ds = blz.open(u)
    assert np.array_equal(ds[:2000], a[:2000])
    with pytest.raises(blz.CorruptionError, match="where the state says") as e:
        ds[2000:]
    assert data[2] in str(e.value)


def _staged(u: str) -> list[str]:
    return [k for k in _keys(u) if k.startswith("staged/")]


@pytest.fixture(scope="module")
def cluster_client():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as cluster, distributed.Client(cluster) as c:
        yield c


def test_dask_to_blz_and_append_to_s3(cluster_client):
    """Tasks on two worker processes upload their superchunk files; the client commits once.
    The state names the workers' objects where they lie; nothing of the sessions is left."""
    da = pytest.importorskip("dask.array")
    import blz.dask

    u = url("w.blz")
    x = da.arange(0, 250_000, chunks=30_000, dtype="f8") * 0.25
    a = blz.dask.to_blz(x, u, chunks=4_096, superchunksize=4, attrs={"by": "dask"})
    want = np.arange(0, 250_000, dtype="f8") * 0.25
    np.testing.assert_array_equal(a[:], want)
    r = blz.open(u)
    np.testing.assert_array_equal(r[:], want)
    assert r.attrs["by"] == "dask" and r.chunks == (4_096,)
    r.verify()
    files = _staged(u)
    assert files and all(".bin." in k for k in files), files
    # An append: the client fills the partly filled last file, the workers the rest.
    y = da.arange(250_000, 333_333, chunks=10_000, dtype="i4")
    blz.dask.append(y, u)
    want = np.r_[want, np.arange(250_000, 333_333, dtype="f8")]
    np.testing.assert_array_equal(blz.open(u)[:], want)
    assert not any(k.endswith("session.json") for k in _staged(u))
    # Nothing named by the state goes to gc; the reads stay whole.
    blz.gc(u, grace=0)
    np.testing.assert_array_equal(blz.open(u)[:], want)
    # mode="a" is the append.
    blz.dask.to_blz(da.ones(5_000, chunks=1_000), u, mode="a")
    assert blz.open(u).shape == (338_333,)


def test_a_short_read_fetches_only_its_blocks(cluster_client):
    """A read of ten elements of a large chunk (2 MiB of a random walk: 16 Blosc blocks of
    128 KiB) fetches, after the state, one ranged GET of just the block holding them
    (the state's block index says where it lies), counted where the requests arrive; for
    a dataset made by ``blz.create`` and one made by ``blz.dask.to_blz`` on the cluster,
    whose workers put the indexes beside their files."""
    da = pytest.importorskip("dask.array")
    import blz.dask

    sys.path.insert(0, str(REPO / "tests" / "s3"))
    from counting_proxy import CountingProxy

    data = np.cumsum(np.random.default_rng(3).standard_normal(6 * 2**18))
    made = url("b.blz"), url("d.blz")
    blz.create(made[0], data, chunks=(2**18,), superchunksize=2)
    blz.dask.to_blz(da.from_array(data, chunks=2**19), made[1], chunks=2**18, superchunksize=2)
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    for u in made:
        with CountingProxy(endpoint) as proxy:
            os.environ["AWS_ENDPOINT_URL"] = proxy.url
            try:
                got = blz.open(u)[700_000:700_010]
            finally:
                os.environ["AWS_ENDPOINT_URL"] = endpoint
            np.testing.assert_array_equal(got, data[700_000:700_010])
            reqs = proxy.take()
        assert len(reqs) == 2 and reqs[0][1].endswith("/meta/state"), (u, reqs)
        a, b = reqs[1][2].removeprefix("bytes=").split("-")
        assert int(b) + 1 - int(a) < 140 << 10, (u, reqs)


def test_block_indexes_past_the_state_bound_are_objects(cluster_client, monkeypatch):
    """Past the state's bound of block indexes (``BLZ_S3_INLINE_INDEXES``, here 0), a
    commit puts each file's index in an object of its own, for ``blz.create`` and for
    ``blz.dask.to_blz`` alike (whose workers' indexes the client's commit takes): the first
    short read of a file is the state, the index object, then just the block; the next
    short read of that file in the same handle is the block alone."""
    da = pytest.importorskip("dask.array")
    import blz.dask

    sys.path.insert(0, str(REPO / "tests" / "s3"))
    from counting_proxy import CountingProxy

    data = np.cumsum(np.random.default_rng(5).standard_normal(6 * 2**18))
    made = url("bi.blz"), url("di.blz")
    monkeypatch.setenv("BLZ_S3_INLINE_INDEXES", "0")
    blz.create(made[0], data, chunks=(2**18,), superchunksize=2)
    blz.dask.to_blz(da.from_array(data, chunks=2**19), made[1], chunks=2**18, superchunksize=2)
    monkeypatch.delenv("BLZ_S3_INLINE_INDEXES")
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    for u in made:
        with CountingProxy(endpoint) as proxy:
            os.environ["AWS_ENDPOINT_URL"] = proxy.url
            try:
                a = blz.open(u)
                first = a[700_000:700_010]
                second = a[600_000:600_010]
            finally:
                os.environ["AWS_ENDPOINT_URL"] = endpoint
            np.testing.assert_array_equal(first, data[700_000:700_010])
            np.testing.assert_array_equal(second, data[600_000:600_010])
            reqs = proxy.take()
        assert len(reqs) == 4, (u, reqs)
        assert reqs[0][1].endswith("/meta/state"), (u, reqs)
        assert reqs[1][1].endswith(".blocks"), (u, reqs)
        for r in reqs[2:]:
            assert not r[1].endswith(".blocks"), (u, reqs)
            lo, hi = r[2].removeprefix("bytes=").split("-")
            assert int(hi) + 1 - int(lo) < 140 << 10, (u, reqs)


def test_dask_worker_killed_mid_write_to_s3_is_retried(cluster_client, tmp_path):
    da = pytest.importorskip("dask.array")
    import blz.dask

    u = url("k.blz")
    blz.create(u, np.arange(130.0), chunks=50, superchunksize=2)
    x = da.arange(3_000, chunks=100, dtype="f8").map_blocks(
        die_once, marker=str(tmp_path / "died"), dtype="f8"
    )
    blz.dask.append(x, u)
    assert (tmp_path / "died").exists()
    np.testing.assert_array_equal(blz.open(u)[:], np.r_[np.arange(130.0), np.arange(3_000.0)])
    cluster_client.wait_for_workers(2)


CLIENT = """
import os, sys, time
import numpy as np
import dask, dask.array as da, distributed
import blz, blz.dask

url, marker, mode = sys.argv[1:4]

def hang(block, block_info=None):
    # Block 5 waits (its region never uploads) once the others have been computed.
    if block_info[0]["chunk-location"][0] == 5:
        open(marker, "w").close()
        time.sleep(600)
    return block

if __name__ == "__main__":
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster):
        x = da.arange(20_000, chunks=1_000, dtype="f8").map_blocks(hang, dtype="f8")
        if mode == "create":
            blz.dask.to_blz(x, url, chunks=500, superchunksize=2)
        else:
            blz.dask.append(x, url)
"""


@pytest.mark.parametrize("mode", ["create", "append"])
def test_dask_client_killed_before_its_commit_leaves_s3_as_it_was(tmp_path, mode):
    """The client process (and its cluster) killed while the workers upload: the dataset is
    as it was (absent, for a create), and gc removes every upload."""
    import signal
    import time

    pytest.importorskip("distributed")
    u = url(f"c-{mode}.blz")
    before = None
    if mode == "append":
        blz.create(u, np.arange(70.0), chunks=500, superchunksize=2)
        before = _keys(u)
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    marker = tmp_path / "hanging"
    proc = subprocess.Popen(
        [sys.executable, str(script), u, str(marker), mode],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        # Wait until the hanging task runs and other tasks' files are on the store.
        while time.monotonic() < deadline:
            if marker.exists() and sum(".bin." in k for k in _staged(u)) >= 4:
                break
            assert proc.poll() is None, "the client ended before it was killed"
            time.sleep(0.2)
        else:
            pytest.fail("the workers uploaded nothing in 120 s")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    time.sleep(1)
    if mode == "create":
        with pytest.raises(blz.NotFoundError):
            blz.open(u)
    else:
        np.testing.assert_array_equal(blz.open(u)[:], np.arange(70.0))
    assert _staged(u), "the uploads are left for gc"
    blz.gc(u, grace=0)
    assert _staged(u) == []
    if mode == "append":
        # Only what the dataset names is left, and the next write works.
        assert _keys(u) == before
        blz.open(u, "r+").append(np.ones(3))
        assert blz.open(u).shape == (73,)


def _read_in_child(u):
    ds = blz.open(u)
    return float(ds[:].sum()), float(ds.std())


def test_a_forked_child_reads_s3():
    # The parent's object-store runtime (and its threads) were made before the fork; the
    # child makes its own rather than wait on threads it does not have.
    import multiprocessing

    u = url("forked.blz")
    a = np.arange(200_000, dtype=np.float64)
    blz.create(u, a, chunks=(20_000,))
    assert blz.open(u).std() == pytest.approx(a.std())
    with multiprocessing.get_context("fork").Pool(1) as pool:
        s, sd = pool.apply_async(_read_in_child, (u,)).get(timeout=120)
    assert s == a.sum() and sd == pytest.approx(a.std())


_INHERITED = {}


def _read_inherited(i):
    ds = _INHERITED["ds"]
    return float(ds[:].sum()), float(ds[i * 1000 : i * 1000 + 10].sum())


def test_forked_children_read_through_an_s3_handle_a_parent_thread_is_reading():
    # At the fork a thread of the parent is inside a read through the handle (its locks
    # held, its requests on the parent's connections): each child opens the dataset again
    # on first use, on a runtime and connections of its own.
    import multiprocessing
    import threading

    u = url("forked-inherited.blz")
    a = np.arange(400_000, dtype=np.float64)
    blz.create(u, a, chunks=(20_000,))
    ds = _INHERITED["ds"] = blz.open(u)
    stop = threading.Event()

    def hammer():
        while not stop.is_set():
            ds[:]

    reader = threading.Thread(target=hammer)
    reader.start()
    try:
        for _ in range(3):
            with multiprocessing.get_context("fork").Pool(2) as pool:
                got = pool.map_async(_read_inherited, range(4)).get(timeout=60)
            for i, (total, part) in enumerate(got):
                assert total == a.sum() and part == a[i * 1000 : i * 1000 + 10].sum()
    finally:
        stop.set()
        reader.join()
        _INHERITED.clear()
