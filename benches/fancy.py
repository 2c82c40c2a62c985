#!/usr/bin/env python3
"""Times a random gather of --k indices from an --n element float64 array: blz's
``a[idx]`` (numpy's advanced indexing), ``a.oindex[idx]`` and ``a.vindex[idx]`` against
zarr-python's ``oindex`` and ``vindex`` on the same data, chunking and codec (lz4, clevel 5,
byte shuffle, chunks of --chunk elements), in one process.

    target/py-venv/bin/python benches/fancy.py               # blz alone
    ~/.cache/blz-peers/bin/python benches/fancy.py           # with zarr (blz installed there
                                                             # via PYTHONPATH, see below)

The peers' venv has zarr but not blz: run it with ``PYTHONPATH`` naming a directory holding
the built ``blz`` package (``maturin develop`` into target/py-venv, then
``PYTHONPATH=target/py-venv/lib/python3.*/site-packages``), the same CPython.

Data: a random walk (benches/compare_python.py's), which compresses about as real
measurements do. Each gather runs --repeat times with fresh random indices (the same for
every tool), tools in alternation; the median wall-clock time is printed, and each peer's
time over blz's (> 1: blz faster). The page cache is warm (the data was just written).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import blz  # noqa: E402
from compare_python import generate  # noqa: E402


def timed(f):
    t = time.perf_counter()
    r = f()
    return time.perf_counter() - t, r


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=float, default=1e8)
    p.add_argument("--k", type=int, default=1000)
    p.add_argument("--chunk", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--dir", default=None)
    args = p.parse_args()
    n = int(args.n)
    tmp = tempfile.mkdtemp(dir=args.dir, prefix="blz-fancy-")
    try:
        data = generate("walk", n)
        a = blz.create(os.path.join(tmp, "a.blz"), data, chunks=(args.chunk,), codec="lz4", clevel=5)
        tools = {
            "blz a[idx]": lambda idx: a[idx],
            "blz a.oindex[idx]": lambda idx: a.oindex[idx],
            "blz a.vindex[idx]": lambda idx: a.vindex[idx],
        }
        try:
            import zarr
            from zarr.codecs import BloscCodec

            z = zarr.create_array(
                os.path.join(tmp, "z.zarr"), shape=(n,), chunks=(args.chunk,), dtype="f8",
                compressors=BloscCodec(cname="lz4", clevel=5, shuffle="shuffle"),
            )
            z[:] = data
            tools["zarr z.oindex[idx]"] = lambda idx: z.oindex[idx]
            tools["zarr z.vindex[idx]"] = lambda idx: z.vindex[idx]
            zver = zarr.__version__
        except ImportError:
            zver = None
        del data
        rng = np.random.default_rng(42)
        times: dict[str, list[float]] = {t: [] for t in tools}
        for _ in range(args.repeat):
            idx = rng.integers(0, n, args.k)
            want = None
            for name, f in tools.items():
                dt, got = timed(lambda: f(idx))
                times[name].append(dt)
                if want is None:
                    want = np.asarray(got)
                elif not np.array_equal(np.asarray(got), want):
                    raise SystemExit(f"{name} disagrees")
        base = statistics.median(times["blz a[idx]"])
        print(
            f"random gather of {args.k} indices from {n:.0e} float64 (chunks of {args.chunk}, lz4 5 "
            f"shuffle), median of {args.repeat}; blz {blz.__version__}, zarr {zver}, "
            f"{os.cpu_count()} CPUs, blz threads {blz.num_threads()}"
        )
        for name, ts in times.items():
            m = statistics.median(ts)
            print(f"  {name:<22} {m * 1e3:9.2f} ms   x{m / base:6.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
