"""Errors as one exception hierarchy naming file and chunk; the GIL released while decoding;
bcolz carrays and ctables opened in place."""

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import same

import blz

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "bcolz"


def test_hierarchy():
    for cls in (blz.CorruptionError, blz.LockedError, blz.ReadOnlyError, blz.ChangedError,
                blz.NotFoundError, blz.OutOfBoundsError, blz.MismatchError,
                blz.InvalidArgumentError, blz.UnsupportedError):
        assert issubclass(cls, blz.Error)
    assert issubclass(blz.Error, OSError)
    assert issubclass(blz.NotFoundError, FileNotFoundError)


def _flip_a_chunk_byte(path: Path) -> None:
    f = path / "data" / "__1__.bin"
    b = bytearray(f.read_bytes())
    # Inside the last chunk: the metadata section (with the per-chunk statistics and sums
    # records, spec/dataset.md §14) can be half of a small file.
    b[len(b) - 2000] ^= 0xFF
    f.write_bytes(bytes(b))


def test_corruption_names_file_and_chunk(tmp_path):
    p = tmp_path / "c.blz"
    blz.create(p, np.random.default_rng(1).standard_normal(50_000), chunks=1000).close()
    _flip_a_chunk_byte(p)
    a = blz.open(p)
    with pytest.raises(blz.CorruptionError) as e:
        a[:]
    assert "__1__.bin" in str(e.value) and "chunk" in str(e.value)
    assert e.value.filename.endswith("__1__.bin") and isinstance(e.value.chunk, int)
    with pytest.raises(blz.CorruptionError) as e:
        a.verify()
    assert len(e.value.problems) >= 1
    # Chunks away from the flipped byte still read.
    a[:10]


def test_table_corruption(tmp_path):
    p = tmp_path / "t.blz"
    blz.create(p, {"x": np.random.default_rng(2).standard_normal(50_000), "y": np.arange(50_000)}, chunks=1000).close()
    files = sorted((p / "data" / "x").rglob("__1__.bin"))
    b = bytearray(files[0].read_bytes())
    b[len(b) - 2000] ^= 0xFF  # inside the last chunk (the metadata section is large)
    files[0].write_bytes(bytes(b))
    t = blz.open(p)
    same(t["y"][:], np.arange(50_000))  # the other column is untouched and never read
    with pytest.raises(blz.CorruptionError, match="__1__.bin"):
        t["x"][:]


def test_lock_readonly_missing_and_bounds(tmp_path):
    p = tmp_path / "l.blz"
    w = blz.create(p, np.zeros(10))
    # Another process is refused (a second handle of this one shares the writer:
    # test_handles.py).
    code = "import sys, blz\ntry:\n    blz.open(sys.argv[1], 'r+')\nexcept blz.LockedError as e:\n    print('locked', e)\n"
    out = subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, text=True)
    assert out.stdout.startswith("locked") and f"(process {os.getpid()})" in out.stdout, out
    r = blz.open(p)
    with pytest.raises(blz.ReadOnlyError):
        r[0] = 1
    with pytest.raises(blz.ReadOnlyError):
        r.append([1.0])
    w.close()
    with blz.open(p, "r+") as w2:
        w2[0] = 3
    assert blz.open(p)[0] == 3
    with pytest.raises(blz.NotFoundError):
        blz.open(tmp_path / "nothing.blz")
    with pytest.raises(blz.Error):
        blz.open(tmp_path)  # a directory that is not a dataset
    with pytest.raises(ValueError):
        blz.open(p, "w")
    with pytest.raises(ValueError):
        blz.open(p, "r+").append(np.zeros((2, 2)))


def test_metadata_corruption(tmp_path):
    p = tmp_path / "m.blz"
    blz.create(p, np.zeros(10)).close()
    (p / "meta" / "sizes").write_text("{not json")
    with pytest.raises(blz.CorruptionError, match="sizes"):
        blz.open(p)


def test_a_thread_keeps_running_while_another_reads(tmp_path):
    n = 4_000_000
    data = np.random.default_rng(3).standard_normal(n)
    a = blz.create(tmp_path / "g.blz", data, codec="zstd", clevel=9, chunks=100_000)
    a.close()
    a = blz.open(tmp_path / "g.blz")
    ticks = 0
    stop = threading.Event()

    def spin():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        time.sleep(0.05)
        best = 0
        for _ in range(3):
            before = ticks
            got = a[:]
            best = max(best, ticks - before)
        same(got, data)
    finally:
        stop.set()
        t.join()
    # With the GIL held through the read the spinning thread would stall for its whole
    # length; released, it keeps counting.
    assert best > 1000, best


def test_reads_from_many_threads(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    data = np.arange(1_000_000, dtype=np.int64)
    a = blz.create(tmp_path / "m.blz", data, chunks=10_000)
    with ThreadPoolExecutor(4) as ex:
        sums = list(ex.map(lambda i: int(a[i * 100_000:(i + 1) * 100_000].sum()), range(10)))
    assert sum(sums) == int(data.sum())


@pytest.mark.skipif(not FIXTURES.exists(), reason="bcolz fixtures not in this checkout")
def test_bcolz_carrays_open_in_place():
    manifest = json.loads((FIXTURES / "manifest.json").read_text())
    checked = 0
    for name in sorted(os.listdir(FIXTURES)):
        npy = FIXTURES / f"{name}.npy"
        if not (FIXTURES / name).is_dir() or not npy.exists():
            continue
        want = np.load(npy)
        a = blz.open(FIXTURES / name)
        assert isinstance(a, blz.BcolzArray) and a.shape == want.shape and a.dtype == want.dtype
        same(a[:], want)
        same(np.asarray(a), want)
        if len(want) > 3:
            same(a[1:-1:3], want[1:-1:3])
            same(a[::-2], want[::-2])
            same(a[-1], want[-1])
        checked += 1
    assert checked >= 10, manifest.keys()
    with pytest.raises(blz.ReadOnlyError):
        blz.open(FIXTURES / "int32_leftover", "r+")
    with pytest.raises(blz.UnsupportedError):
        blz.open(FIXTURES / "object_refused")


@pytest.mark.skipif(not FIXTURES.exists(), reason="bcolz fixtures not in this checkout")
def test_bcolz_ctable_opens_in_place():
    t = blz.open(FIXTURES / "ctable")
    assert isinstance(t, blz.BcolzTable)
    for col in t.columns:
        want = np.load(FIXTURES / f"ctable.{col}.npy")
        same(t[col][:], want)
        same(t[10:20][col], want[10:20])
    assert len(t) == len(np.load(FIXTURES / "ctable.id.npy"))


@pytest.mark.parametrize(
    "env, want",
    [
        ({"OMP_NUM_THREADS": "1"}, 1),  # as dask's worker processes run
        ({"OMP_NUM_THREADS": "1", "BLZ_NUM_THREADS": "3"}, 3),
        ({"OMP_NUM_THREADS": "1", "RAYON_NUM_THREADS": "2"}, 2),
        ({"BLZ_NUM_THREADS": "5"}, 5),
    ],
)
def test_thread_count_follows_the_environment(tmp_path, env, want):
    clean = {k: v for k, v in os.environ.items()
             if k not in ("OMP_NUM_THREADS", "BLZ_NUM_THREADS", "RAYON_NUM_THREADS")}
    code = (
        "import blz, numpy as np, sys\n"
        "a = blz.create(sys.argv[1], np.arange(3_000_000.0), chunks=100_000)\n"
        "assert (a[:] == np.arange(3_000_000.0)).all()\n"
        "print(blz.num_threads())\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "a.blz")],
                         env={**clean, **env}, check=True, capture_output=True, text=True)
    assert int(out.stdout.strip()) == want


def test_a_dataset_removed_under_a_handle_is_not_found(tmp_path):
    import shutil

    p = tmp_path / "gone.blz"
    blz.create(p, np.arange(1000), chunks=(100,), superchunksize=2).close()
    r = blz.open(p)
    shutil.rmtree(p)
    with pytest.raises(blz.NotFoundError):
        r[:]
