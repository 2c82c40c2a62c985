"""blz.dask: arrays and tables as dask collections, computed on a small process cluster."""

import os

import numpy as np
import pandas as pd
import pytest

import blz

dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")
import blz.dask as bd  # noqa: E402
from helpers import die_once  # noqa: E402


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None
    ) as cluster, distributed.Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def walk(tmp_path_factory):
    """A 1-d array of 10 000 f64 in chunks of 500, 4 chunks (2000 rows) per file."""
    path = str(tmp_path_factory.mktemp("dask") / "walk.blz")
    data = np.cumsum(np.random.default_rng(7).standard_normal(10_000))
    blz.create(path, data, chunks=500, superchunksize=4)
    return path, data


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """A 2-d int32 array (301, 40) in chunks (50, 20): 2 chunks per chunk row."""
    path = str(tmp_path_factory.mktemp("dask") / "grid.blz")
    data = np.arange(301 * 40, dtype=np.int32).reshape(301, 40) % 977 - 300
    blz.create(path, data, chunks=(50, 20), superchunksize=4)
    return path, data


@pytest.fixture(scope="module")
def points(tmp_path_factory):
    """A table of 1000 rows (nested and variable-length columns), 200 rows per file."""
    path = str(tmp_path_factory.mktemp("dask") / "pts.blz")
    rng = np.random.default_rng(3)
    n = 1000
    cols = {
        "id": np.arange(n, dtype=np.int64),
        "g": rng.integers(0, 7, n).astype(np.int32),
        "city": [["Oslo", "Lima", "Pune"][i % 3] for i in range(n)],
        "pos": {"x": rng.standard_normal(n), "y": rng.integers(-50, 50, n).astype(np.int16)},
    }
    blz.create(path, cols, chunks=100, superchunksize=2)
    model = pd.DataFrame(
        {"id": cols["id"], "g": cols["g"], "city": cols["city"],
         "pos/x": cols["pos"]["x"], "pos/y": cols["pos"]["y"]}
    )
    return path, model


# -- graphs -------------------------------------------------------------------------------


def test_blocks_are_whole_superchunk_files(walk):
    path, data = walk
    x = bd.from_blz(path, locate=None)
    assert x.chunks == ((2000,) * 5,)
    assert x.dtype == data.dtype
    assert x.name.startswith("from-blz-")
    assert bd.from_blz(blz.open(path), locate=None).name == x.name  # same dataset, same graph
    np.testing.assert_array_equal(x.compute(scheduler="sync"), data)


def test_blocks_fall_back_to_chunks(grid, tmp_path):
    path, data = grid
    # 2 chunks per chunk row, 4 per file: a file is 100 whole rows.
    x = bd.from_blz(path, locate=None)
    assert x.chunks == ((100, 100, 100, 1), (40,))
    # 3 chunks per file: files split chunk rows, so tasks read one chunk each.
    other = str(tmp_path / "odd.blz")
    blz.create(other, data, chunks=(50, 20), superchunksize=3)
    y = bd.from_blz(other, locate=None)
    assert y.chunks == ((50,) * 6 + (1,), (20, 20))
    np.testing.assert_array_equal(y.compute(scheduler="sync"), data)
    # A cap on task size below a file gives whole chunk-rows of one file.
    z = bd.from_blz(path, locate=None, task_bytes=50 * 40 * 4)
    assert z.chunks == ((50,) * 6 + (1,), (40,))
    np.testing.assert_array_equal(z.compute(scheduler="sync"), data)


def test_small_files_on_the_same_hosts_are_grouped(tmp_path):
    path = str(tmp_path / "many.blz")
    data = np.arange(10_000.0)
    blz.create(path, data, chunks=10, superchunksize=2)  # 500 files of 20 rows
    x = bd.from_blz(path, locate=None)
    # 500 // MIN_TASKS = 31 files per task.
    assert x.chunks == ((620,) * 16 + (80,),)
    np.testing.assert_array_equal(x.compute(scheduler="sync"), data)
    # Files on alternating hosts stay one per task, each annotated with its own host.
    alternating = lambda root: {f"data/__{f}__.bin": [f"h{f % 2}"] for f in range(1, 501)}
    y = bd.from_blz(path, locate=alternating)
    assert y.chunks == ((20,) * 500,)
    assert y.dask.layers[y.name].annotations["workers"]((y.name, 3)) == ["h0"]


def test_name_follows_commits_and_a_stale_graph_refuses(tmp_path):
    path = str(tmp_path / "a.blz")
    a = blz.create(path, np.arange(100.0), chunks=10, superchunksize=2)
    x = bd.from_blz(path, locate=None)
    a.append(np.arange(5.0))
    y = bd.from_blz(path, locate=None)
    assert y.name != x.name
    assert y.shape == (105,)
    with pytest.raises(blz.ChangedError):
        x.compute(scheduler="sync")


def test_refuses_what_it_cannot_read(tmp_path, walk):
    with pytest.raises(blz.NotFoundError):
        bd.from_blz(str(tmp_path / "missing.blz"))
    with pytest.raises(blz.InvalidArgumentError):
        bd.from_blz(walk[0], columns=["a"])


# -- locality -----------------------------------------------------------------------------


def test_tasks_carry_their_files_hosts(walk, grid):
    path, _ = walk
    fake = {f"data/__{f}__.bin": [f"brick{f % 2}", f"10.0.0.{f % 2}"] for f in range(1, 6)}
    x = bd.from_blz(path, locate=lambda root: fake)
    layer = x.dask.layers[x.name]
    assert layer.annotations["allow_other_workers"] is True
    workers = layer.annotations["workers"]
    for i in range(5):
        assert workers((x.name, i)) == [f"brick{(i + 1) % 2}", f"10.0.0.{(i + 1) % 2}"]
    # Chunk-sized tasks name the file their chunk is in.
    gpath, _ = grid
    files = {f"data/__{f}__.bin": [f"h{f}"] for f in range(1, 9)}
    y = bd.from_blz(gpath, locate=lambda root: files, task_bytes=1)
    w = y.dask.layers[y.name].annotations["workers"]
    # Chunk (i, j) is chunk 2i+j in C order, in file (2i+j)//4.
    assert [w((y.name, i, j)) for i in range(7) for j in range(2)] == [
        [f"h{(2 * i + j) // 4 + 1}"] for i in range(7) for j in range(2)
    ]


def test_no_placement_no_annotations(walk):
    x = bd.from_blz(walk[0], locate=lambda root: {})
    assert not x.dask.layers[x.name].annotations


def test_file_hosts_of_a_local_dataset(walk):
    path, _ = walk
    hosts = bd.file_hosts(path)
    assert sorted(hosts) == [f"data/__{f}__.bin" for f in range(1, 6)]
    assert all(h and isinstance(h[0], str) for h in hosts.values())
    # The default placement annotates every task.
    x = bd.from_blz(path)
    w = x.dask.layers[x.name].annotations["workers"]
    assert all(w((x.name, i)) == hosts[f"data/__{i + 1}__.bin"] for i in range(5))


def test_scheduler_runs_reads_where_the_files_are(client, walk):
    path, data = walk
    target = sorted(client.scheduler_info()["workers"])[1]
    x = bd.from_blz(path, locate=lambda root: {f"data/__{f}__.bin": [target] for f in range(1, 6)})
    # dask's low-level fusion drops annotations: without it, the scheduler (which builds
    # the graph, here in this process) sees them.
    with dask.config.set({"optimization.fuse.active": False}):
        x = x.persist()
        distributed.wait(x)
    # The scheduler holds every read task to the file's host, as a preference
    # (allow_other_workers): work stealing may still move a task when its worker is slow,
    # as on a loaded machine, so where each one ran is not asserted, only what the scheduler
    # was told.
    name = x.name

    def restrictions(dask_scheduler):
        return {
            str(k): (sorted(ts.worker_restrictions or ()), ts.loose_restrictions)
            for k, ts in dask_scheduler.tasks.items()
            if isinstance(k, tuple) and k[0] == name
        }

    told = client.run_on_scheduler(restrictions)
    assert len(told) == 5 and all(v == ([target], True) for v in told.values()), told
    who = client.who_has(x)
    assert sum(list(v) == [target] for v in who.values()) >= 1, who
    np.testing.assert_array_equal(x.compute(), data)


# -- computing on the cluster ---------------------------------------------------------------


def test_reductions_equal_numpy(client, walk, grid):
    path, data = walk
    x = bd.from_blz(path)
    got = dask.compute(x.sum(), x.mean(), x.min(), x.max(), x.std())
    want = (data.sum(), data.mean(), data.min(), data.max(), data.std())
    np.testing.assert_allclose(got, want, rtol=1e-12)
    gpath, g = grid
    y = bd.from_blz(gpath)
    np.testing.assert_array_equal(y.sum(axis=0).compute(), g.sum(axis=0))
    np.testing.assert_array_equal(y.max(axis=1).compute(), g.max(axis=1))
    assert y.min().compute() == g.min()


def test_strided_slices_equal_numpy(client, walk, grid):
    path, data = walk
    x = bd.from_blz(path)
    for key in [slice(None, None, 7), slice(3, 9001, 13), slice(9999, 10, -3), slice(1995, 2005)]:
        np.testing.assert_array_equal(x[key].compute(), data[key])
    gpath, g = grid
    y = bd.from_blz(gpath)
    for key in [(slice(None, None, 3), slice(5, None, 2)), (slice(99, 250, 7), 17), (300, slice(None))]:
        np.testing.assert_array_equal(y[key].compute(), g[key])


# -- tables -------------------------------------------------------------------------------


def test_table_partitions_and_columns(points):
    path, model = points
    df = bd.read_table(path)
    assert list(df.columns) == ["id", "g", "city", "pos/x", "pos/y"]
    assert df.npartitions == 5
    assert df.divisions == (0, 200, 400, 600, 800, 999)
    got = df.compute(scheduler="sync")
    pd.testing.assert_frame_equal(got, model, check_dtype=False)
    assert list(got["pos/y"].dtype.str for _ in [0]) == ["<i2"]
    sub = bd.from_blz(blz.open(path), columns=["pos/x", "id"])
    assert list(sub.columns) == ["pos/x", "id"]
    pd.testing.assert_frame_equal(sub.compute(scheduler="sync"), model[["pos/x", "id"]])
    with pytest.raises(blz.InvalidArgumentError, match="nope"):
        bd.read_table(path, columns=["nope"])


def test_empty_table(tmp_path):
    path = str(tmp_path / "e.blz")
    blz.create(path, dtype=np.dtype([("a", "f8"), ("b", "i4")]))
    df = bd.read_table(path)
    assert df.npartitions == 1
    assert len(df.compute(scheduler="sync")) == 0


def test_groupbys_equal_pandas(client, points):
    path, model = points
    df = bd.read_table(path)
    pd.testing.assert_frame_equal(
        df.groupby("g").agg({"pos/x": "sum", "pos/y": "mean", "id": "count"}).compute().sort_index(),
        model.groupby("g").agg({"pos/x": "sum", "pos/y": "mean", "id": "count"}),
        check_dtype=False,
    )
    got = df.groupby("city")["pos/x"].max().compute().sort_index()
    want = model.groupby("city")["pos/x"].max()
    pd.testing.assert_series_equal(got, want, check_dtype=False, check_index_type=False)
    assert df["id"].sum().compute() == model["id"].sum()


def test_tasks_reopen_by_path_in_other_processes(client, points):
    path, model = points
    df = bd.read_table(path, columns=["id"])
    pids = client.run(os.getpid)
    assert os.getpid() not in pids.values()
    assert df["id"].max().compute() == model["id"].max()


# -- writing ------------------------------------------------------------------------------


def test_to_blz_round_trips(client, tmp_path, grid):
    import dask.array as da

    data = np.arange(12_345, dtype=">f8") / 7  # a big-endian source is stored natively
    x = da.from_array(data, chunks=1000)
    a = bd.to_blz(x * 2, tmp_path / "twice.blz", chunks=500, attrs={"units": "m"})
    np.testing.assert_array_equal(a[:], data * 2)
    assert a.chunks == (500,) and a.attrs["units"] == "m"
    # Back through dask, a 2-d array whose blocks split both axes.
    gpath, g = grid
    y = bd.from_blz(gpath).rechunk((64, 16))
    b = bd.to_blz(y + 1, str(tmp_path / "g.blz"), chunks=(50, 20), superchunksize=4)
    np.testing.assert_array_equal(b[:], g + 1)
    assert b.dtype == g.dtype
    # An empty array makes an empty dataset.
    e = bd.to_blz(da.zeros((0, 3), chunks=(5, 3), dtype="i2"), tmp_path / "e.blz")
    assert e.shape == (0, 3) and e.dtype == np.dtype("i2")


def test_to_blz_failing_task_leaves_nothing(client, tmp_path):
    import dask.array as da

    def boom(b, block_info=None):
        if block_info[0]["chunk-location"][0] == 2:
            raise ValueError("boom in block 2")
        return b

    x = da.arange(1000, chunks=100).map_blocks(boom, dtype=np.int64)
    path = tmp_path / "fails.blz"
    with pytest.raises(ValueError, match="boom in block 2"):
        bd.to_blz(x, path, chunks=50)
    assert not path.exists()
    assert os.listdir(tmp_path) == []
    # Over an existing dataset, with overwrite: the old one stays as it was.
    blz.create(path, np.arange(5.0))
    with pytest.raises(ValueError, match="boom in block 2"):
        bd.to_blz(x, path, overwrite=True)
    np.testing.assert_array_equal(blz.open(path)[:], np.arange(5.0))
    assert os.listdir(tmp_path) == ["fails.blz"]


def _files(path):
    """Every file under a dataset but its lock: relative path -> bytes."""
    out = {}
    for d, _, names in os.walk(path):
        for n in names:
            full = os.path.join(d, n)
            rel = os.path.relpath(full, path)
            if rel != os.path.join("meta", "lock"):
                with open(full, "rb") as f:
                    out[rel] = f.read()
    return out


def _idle(client):
    """Waits until no task runs on the cluster (stragglers of a failed graph included)."""
    import time

    for _ in range(200):
        if not any(client.processing().values()):
            return
        time.sleep(0.05)


def test_to_blz_writes_superchunk_files_on_the_workers(client, tmp_path):
    import dask.array as da

    x = da.arange(10_000, chunks=700, dtype="f8") * 0.25
    with distributed.get_task_stream(client) as ts:
        a = bd.to_blz(x, tmp_path / "w.blz", chunks=250, superchunksize=4)
    np.testing.assert_array_equal(a[:], np.arange(10_000) * 0.25)
    assert a._nfiles == 10
    writes = [t for t in ts.data if str(t["key"]).startswith("blz-write-")]
    # One task per superchunk file, run by the workers (not here), on both of them.
    assert len(writes) == 10, [t["key"] for t in ts.data]
    workers = set(client.scheduler_info()["workers"])
    assert {t["worker"] for t in writes} <= workers
    assert len({t["worker"] for t in writes}) == 2
    assert not os.path.exists(tmp_path / "w.blz" / "staged")
    a.verify()


@pytest.mark.parametrize(
    "dtype, shape, chunks",
    [("f8", (), 100), ("i2", (7,), (10, 3)), ("u1", (3, 4), (16, 3, 4)), ("c16", (2,), (25, 1))],
)
def test_append_to_partly_filled_files(client, tmp_path, dtype, shape, chunks):
    import dask.array as da

    rng = np.random.default_rng(11)
    old = (rng.standard_normal((150, *shape)) * 100).astype(dtype)
    new = (rng.standard_normal((2_345, *shape)) * 100).astype(dtype)
    path = tmp_path / "a.blz"
    blz.create(path, old, chunks=chunks, superchunksize=4)
    x = da.from_array(new, chunks=(333,) + shape)
    a = bd.append(x, path)
    assert a.shape == (2_495, *shape) and a.mode == "r+"
    a.close()
    np.testing.assert_array_equal(blz.open(path)[:], np.concatenate([old, new]))
    blz.open(path).verify()
    # Into an open handle (its writer lock serves), through to_blz(mode="a"), twice.
    h = blz.open(path, "r+")
    assert bd.append(x[:17], h) is h
    assert h.shape[0] == 2_512
    h.close()
    bd.to_blz(x[17:40], path, mode="a").close()
    np.testing.assert_array_equal(blz.open(path)[:], np.concatenate([old, new, new[:40]]))
    assert not os.path.exists(path / "staged")


def test_append_refuses_what_does_not_fit(tmp_path):
    import dask.array as da

    path = tmp_path / "a.blz"
    blz.create(path, np.zeros((4, 3)))
    with pytest.raises(ValueError, match="do not fit"):
        bd.append(da.zeros((5, 2), chunks=5), path)
    with pytest.raises(blz.InvalidArgumentError, match="reading only"):
        bd.append(da.zeros((5, 3), chunks=5), blz.open(path))


def _boom_at(block, block_info=None):
    if block_info[0]["chunk-location"][0] == 5:
        raise ValueError("boom in block 5")
    return block


def test_append_failing_task_leaves_the_dataset_as_it_was(client, tmp_path):
    import dask.array as da

    path = tmp_path / "a.blz"
    blz.create(path, np.arange(130.0), chunks=50, superchunksize=2)
    before = _files(path)
    x = da.arange(2_000, chunks=100, dtype="f8").map_blocks(_boom_at, dtype="f8")
    with pytest.raises(ValueError, match="boom in block 5"):
        bd.append(x, path)
    _idle(client)
    assert _files(path) == before
    np.testing.assert_array_equal(blz.open(path, "r+")[:], np.arange(130.0))
    assert not os.path.exists(path / "staged")
    # A failing create leaves nothing, beside the path either.
    with pytest.raises(ValueError, match="boom in block 5"):
        bd.to_blz(x, tmp_path / "new.blz", chunks=50, superchunksize=2)
    _idle(client)
    assert sorted(os.listdir(tmp_path)) == ["a.blz"]


def test_worker_killed_mid_write_is_retried(client, tmp_path):
    import dask.array as da

    path = tmp_path / "a.blz"
    blz.create(path, np.arange(130.0), chunks=50, superchunksize=2)
    x = da.arange(3_000, chunks=100, dtype="f8")
    y = x.map_blocks(die_once, marker=str(tmp_path / "died"), dtype="f8")
    bd.append(y, path)
    assert os.path.exists(tmp_path / "died")
    np.testing.assert_array_equal(blz.open(path)[:], np.concatenate([np.arange(130.0), np.arange(3_000.0)]))
    blz.open(path).verify()
    assert not os.path.exists(path / "staged")
    client.wait_for_workers(2)


def _always_die(block, block_info=None):
    import signal

    if block_info[0]["chunk-location"][0] == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return block


def test_worker_killed_for_good_leaves_the_dataset_as_it_was(tmp_path):
    import dask.array as da

    path = tmp_path / "a.blz"
    blz.create(path, np.arange(130.0), chunks=50, superchunksize=2)
    before = _files(path)
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0"
    ) as cluster, distributed.Client(cluster) as c:
        x = da.arange(3_000, chunks=100, dtype="f8").map_blocks(_always_die, dtype="f8")
        with pytest.raises(distributed.scheduler.KilledWorker):
            bd.append(x, path)
        _idle(c)
    assert _files(path) == before
    blz.open(path, "r+").close()
    assert not os.path.exists(path / "staged")
    assert _files(path) == before


def test_a_retried_write_gives_the_same_files(tmp_path):
    """The worker function run twice for one region (a task retried or duplicated)."""
    path = tmp_path / "a.blz"
    a = blz.create(path, np.arange(10.0), chunks=50, superchunksize=2)
    a.close()
    a = blz.open(path, "r+")
    staged = a._raw.begin_staged(1_000)
    head_rows, start, end, unit = staged.geometry()
    assert (head_rows, start, end, unit) == (90, 100, 1_010, 100)
    rows = np.arange(10.0, 1_010.0)
    for r in range(start, end, unit):
        block = rows[r - 10 : min(r + unit, end) - 10]
        bd._write_region(str(staged.dir), r, block, "<f8")
    first = open(os.path.join(staged.dir, "__3__.bin"), "rb").read()
    bd._write_region(str(staged.dir), 200, rows[190:290], "<f8")
    assert open(os.path.join(staged.dir, "__3__.bin"), "rb").read() == first
    staged.commit(rows[:head_rows])
    a._refresh()
    np.testing.assert_array_equal(a[:], np.arange(1_010.0))
    with pytest.raises(blz.InvalidArgumentError, match="committed or abandoned"):
        bd._write_region(str(staged.dir), 200, rows[190:290], "<f8")


# -- on the GlusterFS volume (tests/gluster/run.sh runs this file with its temporary
# directories on the mount and BLZ_GLUSTER_MOUNT set) ----------------------------------------


@pytest.mark.skipif(not os.environ.get("BLZ_GLUSTER_MOUNT"), reason="needs the GlusterFS volume")
def test_real_placement_on_glusterfs(client, walk):
    path, data = walk
    mount = os.path.realpath(os.environ["BLZ_GLUSTER_MOUNT"])
    assert os.path.realpath(path).startswith(mount + os.sep), "the dataset is not on the volume"
    # Every file is placed by the volume: its brick server, which resolves to a worker's
    # address here (all bricks and both workers are on this machine).
    hosts = bd.file_hosts(path)
    assert sorted(hosts) == [f"data/__{f}__.bin" for f in range(1, 6)]
    assert all(h for h in hosts.values()), hosts
    worker_hosts = {a.split("://")[1].rsplit(":", 1)[0] for a in client.scheduler_info()["workers"]}
    x = bd.from_blz(path)
    annotated = x.dask.layers[x.name].annotations["workers"]
    for i in range(5):
        assert set(annotated((x.name, i))) & worker_hosts, (annotated((x.name, i)), worker_hosts)
    with dask.config.set({"optimization.fuse.active": False}):
        x = x.persist()
        distributed.wait(x)
    np.testing.assert_array_equal(x.compute(), data)
    np.testing.assert_allclose(bd.from_blz(path).sum().compute(), data.sum())
