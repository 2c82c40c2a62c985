"""blz ``Table.where`` against bcolz ``ctable.where`` on the same data.

1e7 rows x 4 columns (int64 sorted key ``k``, float64 ``x`` and ``y``, int64 group ``g``
in 0..99), written once by each library on disk (default compression of each: blz lz4 +
shuffle, bcolz blosclz + shuffle), then each query timed best of ``--rounds``:

- blz: ``t.where(expr)``, a numpy structured array of the matching rows (all 4 columns);
- bcolz (in the peers venv, ``~/.cache/blz-peers/bin/python``, bcolz 1.13): the rows of
  ``ctable.where(expr)`` gathered into a structured array (``np.fromiter``), and
  ``ct[expr]`` (bcolz's own path to a structured array).

    target/py-venv/bin/python benches/where.py [--rows 10000000] [--rounds 3]

Prints one line per query with both times and the ratio bcolz / blz (higher: blz faster).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import blz

PEER = os.path.expanduser("~/.cache/blz-peers/bin/python")
QUERIES = [
    "(g == 7) & (x > 0.5)",
    "(x > 0.99) | (y < -0.99)",
    "(k >= 2000000) & (k < 2100000)",
    "(k % 1000 == 3) & (g < 50)",
]

BCOLZ = r"""
import json, sys, time
import numpy as np, bcolz
d, rounds, queries = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
data = np.load(d + "/data.npy")
t0 = time.perf_counter()
ct = bcolz.ctable(data, rootdir=d + "/bcolz", mode="w")
ct.flush()
out = {"write": time.perf_counter() - t0}
del data
ct = bcolz.open(d + "/bcolz")
for q in queries:
    best_it = best_get = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        rows = np.fromiter((tuple(r) for r in ct.where(q)), dtype=ct.dtype)
        best_it = min(best_it, time.perf_counter() - t0)
        t0 = time.perf_counter()
        got = ct[q]
        best_get = min(best_get, time.perf_counter() - t0)
    out[q] = (best_it, best_get, len(rows), len(got))
print(json.dumps(out))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    n = args.rows
    rng = np.random.default_rng(42)
    data = np.empty(n, [("k", "i8"), ("x", "f8"), ("y", "f8"), ("g", "i8")])
    data["k"] = np.arange(n)
    data["x"] = rng.random(n)
    data["y"] = rng.standard_normal(n) / 3
    data["g"] = rng.integers(0, 100, n)
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as d:
        np.save(d + "/data.npy", data)
        peer = subprocess.run(
            [PEER, "-c", BCOLZ, d, str(args.rounds), json.dumps(QUERIES)],
            check=True,
            capture_output=True,
            text=True,
        )
        bc = json.loads(peer.stdout.strip().splitlines()[-1])
        os.remove(d + "/data.npy")
        t0 = time.perf_counter()
        t = blz.create(d + "/t.blz", data)
        write = time.perf_counter() - t0
        del t
        t = blz.open(d + "/t.blz")
        print(f"{n} rows x 4 columns, {os.cpu_count()} cpus; blz {blz.num_threads()} threads")
        print(f"write: blz {write:.2f} s, bcolz {bc['write']:.2f} s")
        print(f"{'query':34} {'matches':>8} {'blz':>9} {'bcolz where':>12} {'bcolz ct[q]':>12} {'ratio':>6} {'ratio[]':>7}")
        for q in QUERIES:
            best = float("inf")
            for _ in range(args.rounds):
                t0 = time.perf_counter()
                got = t.where(q)
                best = min(best, time.perf_counter() - t0)
            it, get, n_it, n_get = bc[q]
            assert len(got) == n_it == n_get, (q, len(got), n_it, n_get)
            print(
                f"{q:34} {len(got):8d} {best * 1e3:7.1f}ms {it * 1e3:10.1f}ms {get * 1e3:10.1f}ms"
                f" {it / best:6.1f}x {get / best:6.1f}x"
            )
            sys.stdout.flush()


if __name__ == "__main__":
    main()
