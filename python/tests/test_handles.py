"""Writing handles of one process share one writer (issue 25): the issue's example, two
handles each seeing the other's writes, threads with handles of their own, and another
process refused with ``LockedError`` naming this process."""

import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from helpers import same

import blz

CHILD = """
import sys, numpy as np, blz
try:
    w = blz.open(sys.argv[1], mode="r+")
    w.append(np.array([42.0]))
    print("wrote")
except blz.LockedError as e:
    print("locked:", e)
"""


def other_process(p) -> str:
    out = subprocess.run([sys.executable, "-c", CHILD, str(p)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_issues_example(tmp_path):
    p = tmp_path / "x.blz"
    x = np.arange(10.0)
    a = blz.create(p, x)
    b = blz.open(p, mode="r+")  # a is alive: shares its writer
    b[0] = 100.0
    same(a[:3], [100.0, 1.0, 2.0])  # a sees b's write
    a.append([10.0, 11.0])
    assert len(b) == 12 and b.shape == (12,)
    same(b[-2:], [10.0, 11.0])
    b.resize(5)
    assert len(a) == 5
    a[1:3] = -1
    same(b[:], [100.0, -1.0, -1.0, 3.0, 4.0])
    t = blz.create(tmp_path / "t.blz", {"k": np.arange(3)})
    u = blz.open(tmp_path / "t.blz", mode="r+")
    u.append({"k": np.array([3])})
    assert len(t) == 4
    t.append({"k": np.array([4])})
    same(u["k"][:], np.arange(5))


def test_threads_with_separate_handles(tmp_path):
    p = tmp_path / "t.blz"
    first = blz.create(p, np.zeros(0, dtype=np.int64), chunks=16)
    errors = []

    def work(t: int) -> None:
        try:
            h = blz.open(p, mode="r+")
            for b in range(20):
                n = 1 + (t * 7 + b * 3) % 11
                h.append(t * 1_000_000 + b * 1000 + np.arange(n, dtype=np.int64))
                h[:1]  # a read between writes sees a consistent state
            h.close()
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    got = first[:]
    # Every batch once, whole, in order: cut the result at each batch's first value.
    seen = set()
    i = 0
    while i < len(got):
        start = int(got[i])
        assert start % 1000 == 0
        t, b = start // 1_000_000, (start // 1000) % 1000
        n = 1 + (t * 7 + b * 3) % 11
        same(got[i:i + n], start + np.arange(n))
        assert (t, b) not in seen
        seen.add((t, b))
        i += n
    assert len(seen) == 80
    first.verify()


def test_another_process_is_refused_naming_this_one(tmp_path):
    p = tmp_path / "l.blz"
    a = blz.create(p, np.zeros(3))
    b = blz.open(p, mode="r+")
    out = other_process(p)
    assert "locked:" in out and f"(process {os.getpid()})" in out, out
    a.close()
    out = other_process(p)
    assert "locked:" in out and f"(process {os.getpid()})" in out, out
    b.close()
    assert "wrote" in other_process(p)
    same(blz.open(p)[:], [0.0, 0.0, 0.0, 42.0])


def test_a_locked_error_names_the_holder(tmp_path):
    p = tmp_path / "h.blz"
    blz.create(p, np.zeros(3)).close()
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, blz; w = blz.open(sys.argv[1], mode='r+'); print('open', flush=True); "
         "sys.stdin.read()", str(p)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(blz.LockedError, match=f"process {holder.pid}"):
            blz.open(p, mode="r+")
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    blz.open(p, mode="r+").close()
