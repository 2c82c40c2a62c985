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
