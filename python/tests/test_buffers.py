"""The pool of memory that large reads return in (``blz.buffer_pool``): reused memory is
never shared by two live results, views keep theirs, limits and decay hold."""

import gc
import threading
import time

import numpy as np
import pytest

import blz

N = 600_000  # 4.8 MB of float64: above the 1 MiB below which reads allocate through numpy


@pytest.fixture
def pool():
    before = blz.buffer_pool()
    blz.buffer_pool(max_bytes=1 << 30, keep_seconds=5.0)
    yield
    blz.buffer_pool(max_bytes=before["max_bytes"], keep_seconds=before["keep_seconds"])


@pytest.fixture
def arr(tmp_path):
    data = np.cumsum(np.random.default_rng(5).standard_normal(N))
    a = blz.create(tmp_path / "a.blz", data, chunks=100_000)
    return a, data


def test_results_reuse_freed_memory_and_never_share_it(pool, arr):
    a, data = arr
    r1 = a[:]
    r2 = a[:]
    assert not np.shares_memory(r1, r2)
    r1[:] = -1.0
    np.testing.assert_array_equal(r2, data)
    hits = blz.buffer_pool()["hits"]
    address = r1.__array_interface__["data"][0]
    del r1
    gc.collect()
    assert blz.buffer_pool()["held_bytes"] >= N * 8
    r3 = a[:]
    assert blz.buffer_pool()["hits"] == hits + 1
    assert r3.__array_interface__["data"][0] == address  # the memory r1 held
    np.testing.assert_array_equal(r3, data)  # every byte rewritten, none left from r1
    assert r3.flags.writeable and r3.flags.c_contiguous
    np.testing.assert_array_equal(r2, data)


def test_a_view_keeps_its_memory(pool, arr):
    a, data = arr
    view = a[:][1000:2000]  # the whole result is gone, its view is not
    gc.collect()
    for _ in range(3):
        other = a[:]
        other[:] = 7.0
        del other
    np.testing.assert_array_equal(view, data[1000:2000])


def test_limits_and_decay(pool, arr):
    a, data = arr
    r = a[:]
    del r
    assert blz.buffer_pool()["held_bytes"] > 0
    blz.buffer_pool(keep_seconds=0.1)
    deadline = time.monotonic() + 5
    while blz.buffer_pool()["held_bytes"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert blz.buffer_pool()["held_bytes"] == 0  # given back to the system
    blz.buffer_pool(max_bytes=0, keep_seconds=5.0)
    r = a[:]
    del r
    assert blz.buffer_pool()["held_bytes"] == 0  # pooling off
    np.testing.assert_array_equal(a[:], data)
    blz.buffer_pool(max_bytes=N * 8 + (8 << 20))  # room for one result only
    rs = [a[:] for _ in range(3)]
    del rs
    assert blz.buffer_pool()["held_bytes"] <= N * 8 + (8 << 20)
    with pytest.raises(ValueError):
        blz.buffer_pool(keep_seconds=-1.0)


def test_tables_and_other_shapes(pool, tmp_path):
    rng = np.random.default_rng(9)
    rows = np.zeros(400_000, dtype=[("x", "f8"), ("pos", [("a", "i4"), ("b", "c8")])])
    rows["x"] = rng.standard_normal(len(rows))
    rows["pos"]["a"] = rng.integers(0, 1000, len(rows))
    rows["pos"]["b"] = rng.standard_normal(len(rows))
    t = blz.create(tmp_path / "t.blz", rows)
    for _ in range(3):
        np.testing.assert_array_equal(t[:], rows)
        np.testing.assert_array_equal(t["pos/b"][:], rows["pos"]["b"])
    m = np.arange(3 * 500_000, dtype=">i4").reshape(3, 500_000)
    a = blz.create(tmp_path / "m.blz", m, chunks=(1, 100_000))
    for _ in range(3):
        got = a[:, ::-1]
        assert got.dtype == m.dtype
        np.testing.assert_array_equal(got, m[:, ::-1])


def test_threads_read_while_results_come_and_go(pool, arr):
    a, data = arr
    errors = []

    def reader(seed):
        rng = np.random.default_rng(seed)
        for _ in range(20):
            start = int(rng.integers(0, N // 2))
            got = a[start : start + N // 2]
            if not np.array_equal(got, data[start : start + N // 2]):
                errors.append(seed)

    threads = [threading.Thread(target=reader, args=(s,)) for s in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
