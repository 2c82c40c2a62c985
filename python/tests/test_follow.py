"""Read handles follow the commits of a writer in another process: every call shows the
latest commit, whole (never a mix of two), while the writer appends and shrinks."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import blz

WRITER = textwrap.dedent(
    """
    import sys, time, numpy as np, blz
    kind, path, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rng = np.random.default_rng(11)
    h = blz.open(path, "r+")
    n = len(h)
    for _ in range(steps):
        if rng.random() < 0.3 and n > 0:
            n = int(rng.integers(0, n))              # shrink (rewrites the last chunk later)
            h.resize(n)
        else:
            k = int(rng.integers(1, 3000))
            v = np.arange(n, n + k)
            h.append(v if kind == "array" else {"i": v, "s": [str(x) for x in v]})
            n += k
        time.sleep(0.002)  # the reader gets to see many of the commits
    print(n)
    """
)


def start_writer(kind, path, steps):
    return subprocess.Popen([sys.executable, "-c", WRITER, kind, str(path), str(steps)],
                            stdout=subprocess.PIPE, text=True)


def test_array_read_handle_follows_a_writer_process(tmp_path):
    p = tmp_path / "a.blz"
    blz.create(p, np.arange(5000), chunks=700).close()
    a = blz.open(p)
    assert len(a) == 5000 and not a.refresh()
    w = start_writer("array", p, 300)
    seen = set()
    while w.poll() is None:
        n = len(a)
        whole = a[:]
        # One call, one commit: the rows are those of some commit, whole.
        assert np.array_equal(whole, np.arange(len(whole)))
        tail = a[-5:]
        assert np.array_equal(tail, np.arange(len(tail)) + (tail[0] if len(tail) else 0))
        seen.add(n)
    final = int(w.stdout.read())
    assert w.wait() == 0
    # The same handle, never reopened, shows the writer's last commit.
    assert len(a) == final and a.shape == (final,)
    assert np.array_equal(np.asarray(a), np.arange(final))
    assert not a.refresh()
    assert len(seen) > 1, seen


def test_table_read_handle_follows_a_writer_process(tmp_path):
    p = tmp_path / "t.blz"
    v = np.arange(3000)
    blz.create(p, {"i": v, "s": [str(x) for x in v]}, chunks=500).close()
    t = blz.open(p)
    w = start_writer("table", p, 150)
    while w.poll() is None:
        rows = t[:]
        assert np.array_equal(rows["i"], np.arange(len(rows)))
        assert list(rows["s"][-3:]) == [str(x) for x in range(len(rows))][-3:]
        col = t["i"][:]
        assert np.array_equal(col, np.arange(len(col)))
    final = int(w.stdout.read())
    assert w.wait() == 0
    assert len(t) == final
    assert np.array_equal(t["i"][:], np.arange(final))
    assert list(t.to_pandas()["s"]) == [str(x) for x in range(final)]


def test_refresh_is_explicit_too_and_writers_need_none(tmp_path):
    p = tmp_path / "r.blz"
    w = blz.create(p, np.zeros(10), chunks=4)
    r = blz.open(p)
    assert not r.refresh()
    w.append(np.ones(5))
    assert w.refresh() is False  # the writer is the only writer
    assert r.refresh() is True and r._shape == (15,)
    assert not r.refresh()
    w.resize(3)
    assert r.shape == (3,) and r[:].tolist() == [0, 0, 0]


@pytest.mark.parametrize("kind", ["array", "table"])
def test_a_replaced_dataset_is_followed(tmp_path, kind):
    p = tmp_path / "x.blz"
    blz.create(p, np.arange(10) if kind == "array" else {"i": np.arange(10)}).close()
    h = blz.open(p)
    h[:]
    # Same generation as the old one, another identity.
    blz.create(p, np.arange(20) * 2 if kind == "array" else {"i": np.arange(20) * 2}, overwrite=True).close()
    assert len(h) == 20
    got = h[:3] if kind == "array" else h["i"][:3]
    assert list(got) == [0, 2, 4]
