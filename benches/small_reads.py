#!/usr/bin/env python3
"""Small random reads, blz against python-blosc2, in one process: --count reads of --width
consecutive float64 elements at random places (fixed seed) through one opened array, as a
user makes them (``a[i:i + 100]``), in microseconds per read; beside each, the compression
ratio the tool's files keep. Data: the random walk and the linspace of
benches/compare_python.py; settings as there (lz4, clevel 5, byte shuffle, chunks of 1e6
elements), each tool choosing its own block size. The tools alternate, --repeat rounds;
the table shows the median and the range.

    target/py-venv/bin/pip install blosc2
    target/py-venv/bin/python benches/small_reads.py            # 2e7 elements, 3000 reads
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_python import Blosc2, Blz, generate, tree_bytes  # noqa: E402


def reads(a, starts: np.ndarray, width: int) -> float:
    """Seconds per read of `width` elements at each start, through the opened array `a`."""
    a[0:width]  # opening costs (metadata, offsets) are not what this measures
    t0 = time.perf_counter()
    for s in starts:
        a[int(s) : int(s) + width]
    return (time.perf_counter() - t0) / len(starts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=float, default=2e7, help="elements (default 2e7)")
    ap.add_argument("--count", type=int, default=3000, help="reads per tool and round")
    ap.add_argument("--width", type=int, default=100, help="elements per read")
    ap.add_argument("--repeat", type=int, default=3, help="rounds, tools alternating")
    ap.add_argument("--dir", default=None, help="where to write (default: a temporary directory)")
    args = ap.parse_args()
    n = int(args.n)
    tools = [Blz()]
    try:
        tools.append(Blosc2())
    except ImportError as e:
        print(f"(python-blosc2 skipped: {e})", file=sys.stderr)
    root = tempfile.mkdtemp(prefix="blz-small-reads-", dir=args.dir)
    try:
        print(f"{args.count} random reads of {args.width} float64, {n:.0e} elements, lz4 clevel 5 "
              f"shuffle, chunks 1e6; microseconds per read, median [min-max] of {args.repeat}")
        print(f"{'data':<9} {'tool':<14} {'us/read':>8} {'range':>15} {'ratio':>6} {'x blz':>6}")
        for kind in ("walk", "linspace"):
            data = generate(kind, n)
            ratio = {}
            for t in tools:
                path = os.path.join(root, f"{t.name}-{kind}")
                t.write(path, data)
                ratio[t.name] = data.nbytes / tree_bytes(path)
                got = t.opened(path)[n // 3 : n // 3 + args.width]
                if not np.array_equal(got, data[n // 3 : n // 3 + args.width]):
                    raise SystemExit(f"{t.name} read back different data")
            del data
            starts = np.random.default_rng(7).integers(0, n - args.width, size=args.count)
            times: dict[str, list[float]] = {t.name: [] for t in tools}
            for _ in range(args.repeat):
                for t in tools:
                    a = t.opened(os.path.join(root, f"{t.name}-{kind}"))
                    times[t.name].append(reads(a, starts, args.width) * 1e6)
                    del a
            base = statistics.median(times["blz"])
            for t in tools:
                us = times[t.name]
                med = statistics.median(us)
                print(f"{kind:<9} {t.name:<14} {med:>8.1f} {f'[{min(us):.1f}-{max(us):.1f}]':>15} "
                      f"{ratio[t.name]:>6.2f} {med / base:>6.2f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
