"""A process forked after blz has worked (``multiprocessing`` with the ``fork`` start
method, PyTorch's data loaders, ``os.fork``) reads, reduces and writes datasets there: the
child's copies of blz's thread pools have no threads, so blz starts its own in the child
rather than wait on them for ever."""

import multiprocessing
import os

import numpy as np
import pytest

import blz

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")

N = 1_000_000


def _work(args):
    path, i = args
    ds = blz.open(path)
    lo = i * (N // 8)
    part = ds[lo : lo + N // 8]
    return float(part.sum()), float(ds.std()), int(ds[[7, lo, N - 1]].sum())


def test_forked_workers_read_and_reduce(tmp_path):
    path = str(tmp_path / "a.blz")
    a = np.arange(N, dtype=np.float64)
    blz.create(path, a, chunks=(10_000,))
    ds = blz.open(path)
    # The parent's pools run (and its handle caches) before the fork.
    assert ds[:].sum() == a.sum() and ds.std() == pytest.approx(a.std())
    with multiprocessing.get_context("fork").Pool(2) as pool:
        got = pool.map_async(_work, [(path, i) for i in range(8)]).get(timeout=120)
    for i, (s, sd, picked) in enumerate(got):
        lo = i * (N // 8)
        assert s == a[lo : lo + N // 8].sum()
        assert sd == pytest.approx(a.std())
        assert picked == 7 + lo + N - 1
    # The parent goes on as before.
    assert ds[:].sum() == a.sum()


def _append_in_child(path):
    ds = blz.open(path, "r+")
    ds.append(np.full(50_000, 2.0))
    return ds.shape[0]


def test_a_forked_child_writes_and_the_parent_sees_it(tmp_path):
    path = str(tmp_path / "w.blz")
    blz.create(path, np.zeros(100_000), chunks=(10_000,))
    assert blz.open(path)[:].sum() == 0
    with multiprocessing.get_context("fork").Pool(1) as pool:
        n = pool.apply_async(_append_in_child, (path,)).get(timeout=120)
    assert n == 150_000
    ds = blz.open(path)
    assert ds.shape == (150_000,) and ds[:].sum() == 100_000.0


# Handles opened in the parent and used in forked children while a thread of the parent
# keeps reading through them. At the fork that thread holds the handle's lock (and its
# caches' locks); the child has no such thread, so a child using the parent's copy of the
# handle would wait for ever. A child opens each inherited handle again on first use.

_INHERITED = {}


def _read_inherited(i):
    a, t, layer = _INHERITED["array"], _INHERITED["table"], _INHERITED["layer"]
    lo = i * 1000
    return (
        float(a[:].sum()),
        float(a[lo : lo + 1000].sum()),
        int(t["x"][:].sum()),
        t["name"][i],
        7 in layer,
        layer.cursor().seek_ge(2 * i + 1),
    )


def _hammer(stop, handles):
    a, t, layer = handles
    while not stop.is_set():
        a[:]
        t["x"][:]
        2 in layer


def test_forked_children_use_handles_a_parent_thread_is_reading(tmp_path):
    import threading

    n = 400_000
    x = np.arange(n, dtype=np.float64)
    blz.create(str(tmp_path / "a.blz"), x, chunks=(10_000,))
    rows = np.zeros(2_000, dtype=[("x", "i8"), ("name", "U8")])
    rows["x"] = np.arange(2_000)
    rows["name"] = [f"r{i}" for i in range(2_000)]
    blz.create(str(tmp_path / "t.blz"), rows, chunks=(100,))
    blz.build_layer(tmp_path / "l.blz", [(i,) for i in range(0, 1000, 2)])
    _INHERITED.update(
        array=blz.open(str(tmp_path / "a.blz")),
        table=blz.open(str(tmp_path / "t.blz")),
        layer=blz.open(str(tmp_path / "l.blz")),
    )
    stop = threading.Event()
    reader = threading.Thread(
        target=_hammer,
        args=(stop, (_INHERITED["array"], _INHERITED["table"], _INHERITED["layer"])),
    )
    reader.start()
    try:
        # Several forks while the thread reads: each round forks two children, any of
        # which would hang on a lock the thread held.
        for _ in range(4):
            with multiprocessing.get_context("fork").Pool(2) as pool:
                got = pool.map_async(_read_inherited, range(4)).get(timeout=60)
            for i, (total, part, xs, name, has7, found) in enumerate(got):
                lo = i * 1000
                assert total == x.sum() and part == x[lo : lo + 1000].sum()
                assert xs == rows["x"].sum() and name == f"r{i}"
                assert not has7 and found
    finally:
        stop.set()
        reader.join()
        _INHERITED.clear()


def _append_through(_):
    try:
        _INHERITED["writer"].append(np.ones(5))
        return "appended"
    except blz.Error as e:
        return f"{type(e).__name__}: {e}"


def test_a_child_writing_through_the_parents_writer_is_refused_not_a_second_writer(tmp_path):
    # The writer lock is the parent's: a child that inherited the read-write handle opens
    # it again, and the lock tells it who holds it; once the parent closes the handle, the
    # child's copy reads only.
    path = str(tmp_path / "w.blz")
    blz.create(path, np.zeros(1_000), chunks=(100,))
    a = _INHERITED["writer"] = blz.open(path, "r+")
    a.append(np.ones(10))
    with multiprocessing.get_context("fork").Pool(1) as pool:
        said = pool.apply_async(_append_through, (0,)).get(timeout=60)
    assert said.startswith("LockedError") and f"process {os.getpid()}" in said, said
    assert blz.open(path).shape == (1_010,)
    a.append(np.ones(3))
    a.close()
    with multiprocessing.get_context("fork").Pool(1) as pool:
        said = pool.apply_async(_append_through, (0,)).get(timeout=60)
    _INHERITED.clear()
    assert said.startswith("ReadOnlyError"), said
    assert blz.open(path).shape == (1_013,) and blz.open(path)[:].sum() == 13


def _read_through_inherited_writers(_):
    # Reads through the parent's read-write handles: the child opens them read-only (the
    # parent holds the writer lock) and reads; only a write is refused, naming the parent.
    a, t, layer = _INHERITED["array"], _INHERITED["table"], _INHERITED["layer"]
    got = (
        len(t),
        [int(v) for v in t[0:2]["x"]],
        [int(i) for i in t.where_rows("x >= 1997")],
        [float(v) for v in a[:3]],
        float(a.sum()),
        7 in layer,
        8 in layer,
        a.mode,
    )
    refused = []
    for write in (lambda: a.append(np.ones(2)), lambda: t.append({"x": np.arange(2)})):
        try:
            write()
            refused.append("written")
        except blz.Error as e:
            refused.append(f"{type(e).__name__}: {e}")
    # Reads go on after a refused write.
    return got, refused, float(a[:].sum()), len(t)


def test_a_child_reads_through_the_parents_writable_handles(tmp_path):
    a = blz.create(str(tmp_path / "a.blz"), np.arange(1_000, dtype=np.float64), chunks=(100,))
    rows = np.zeros(2_000, dtype=[("x", "i8")])
    rows["x"] = np.arange(2_000)
    t = blz.create(str(tmp_path / "t.blz"), rows, chunks=(100,))
    assert a.mode == "r+" and t.mode == "r+"
    layer = blz.build_layer(tmp_path / "l.blz", [(i,) for i in range(0, 1000, 2)])
    _INHERITED.update(array=a, table=t, layer=layer)
    try:
        with multiprocessing.get_context("fork").Pool(2) as pool:
            results = pool.map_async(_read_through_inherited_writers, range(2)).get(timeout=60)
    finally:
        _INHERITED.clear()
    for got, refused, total, n in results:
        assert got == (2_000, [0, 1], [1997, 1998, 1999], [0.0, 1.0, 2.0], 499_500.0, False, True, "r+")
        for said in refused:
            assert said.startswith("LockedError") and f"process {os.getpid()}" in said, said
        assert total == 499_500.0 and n == 2_000
    # The parent still writes through its handles, and nothing the children did changed
    # the datasets.
    a.append(np.ones(2))
    t.append({"x": np.arange(2)})
    assert blz.open(str(tmp_path / "a.blz")).shape == (1_002,)
    assert len(blz.open(str(tmp_path / "t.blz"))) == 2_002
