#!/usr/bin/env python3
"""Times blz's reductions (``np.sum(a)`` etc. on a blz array: decoded chunk by chunk in Rust,
in parallel) against numpy's on the same array already in memory, in one run, and prints
the ratios (numpy's time over blz's: > 1 means blz is faster).

    cd python && ../target/py-venv/bin/maturin develop --release && cd ..
    target/py-venv/bin/python benches/reduce.py --n 1e8 --repeat 5

Data: a random walk and a linspace of --n float64 values (800 MB at 1e8), as
benches/compare_python.py generates them, stored with blz's defaults (lz4, clevel 5, byte
shuffle, chunks of about 1 MiB). Each reduction runs --repeat times, numpy and blz in
alternation, and the table shows the median times. blz reads the compressed chunks from
the page cache (warm: the dataset was just written); numpy's input is already decoded in
memory, so numpy does no decompression at all. Results are checked to agree (rtol 1e-9).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from compare_python import generate  # noqa: E402

import blz  # noqa: E402

OPS = ["sum", "min", "max", "mean", "std", "var", "argmin", "argmax", "any", "all",
       "count_nonzero"]


def timed(f):
    t0 = time.perf_counter()
    r = f()
    return time.perf_counter() - t0, r


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=float, default=1e8)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--kinds", default="walk,linspace")
    ap.add_argument("--ops", default=",".join(OPS))
    args = ap.parse_args()
    n = int(args.n)
    print(f"n={n:,} float64 ({n * 8 / 1e9:.2f} GB), blz threads {blz.num_threads()}, "
          f"numpy {np.__version__}, {os.cpu_count()} cores")
    print(f"{'data':9} {'op':13} {'numpy s':>9} {'blz s':>9} {'blz GB/s':>9} {'numpy/blz':>10}")
    with tempfile.TemporaryDirectory(dir=os.environ.get("BLZ_BENCH_DIR")) as d:
        for kind in args.kinds.split(","):
            data = generate(kind, n)
            a = blz.create(os.path.join(d, f"{kind}.blz"), data)
            a = blz.open(os.path.join(d, f"{kind}.blz"))
            ratio = a.nbytes / a.cbytes
            for op in args.ops.split(","):
                f = getattr(np, op)
                tn, tb = [], []
                for _ in range(args.repeat):
                    t, want = timed(lambda: f(data))
                    tn.append(t)
                    t, got = timed(lambda: f(a))
                    tb.append(t)
                np.testing.assert_allclose(got, want, rtol=1e-9)
                mn, mb = statistics.median(tn), statistics.median(tb)
                print(f"{kind:9} {op:13} {mn:9.4f} {mb:9.4f} {n * 8 / mb / 1e9:9.2f} "
                      f"{mn / mb:10.2f}   (ratio {ratio:.1f}x)", flush=True)
            del data, a


if __name__ == "__main__":
    main()
