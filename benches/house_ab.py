#!/usr/bin/env python3
"""Two builds of blz side by side in one run: the same workloads through two Python
environments (each with its own blz wheel installed), alternating A, B, A, B ... so both see
the same machine load. Used to show that a change moving code (issue 48's house step) costs
no speed: compare the ratio B/A of each workload with the spread between rounds.

    python3 benches/house_ab.py --a VENV_A/bin/python --b VENV_B/bin/python [--rounds 3]
    bash tests/s3/run.sh python3 benches/house_ab.py --a ... --b ... --s3   # adds S3 on moto

Workloads (fixed seeds; each child process measures the best of --repeat runs):
  array write      2e7 float64 (random walk), chunks 1e6, lz4 clevel 5, shuffle, to disk
  array read       the whole array back, and 200 slices of 1e5 at random places
  small reads      3000 reads of 100 consecutive float64 at random places (a[i:i+100])
  table write/read a 2e6-row frame (int64, float64, a low-cardinality string, a date)
                   through blz.create and to_pandas
  sql              GROUP BY on the string with sum/avg, and a filtered count, via blz.sql
  s3 write/read    (--s3) 4e6 float64 to s3:// on the server tests/s3/run.sh starts, read back
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

N = 20_000_000
CHUNK = 1_000_000
ROWS = 2_000_000


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def child(work: str, tmp: str, repeat: int) -> dict[str, float]:
    import numpy as np

    import blz

    rng = np.random.default_rng(7)
    out: dict[str, float] = {}
    if work == "array":
        x = np.cumsum(rng.standard_normal(N))
        path = os.path.join(tmp, "a.blz")

        def write():
            blz.create(path, x, chunks=CHUNK, codec="lz4", clevel=5, filter="shuffle", overwrite=True).close()

        out["array write (s)"] = best(write, repeat)
        a = blz.open(path)
        out["array read whole (s)"] = best(lambda: a[:], repeat)
        starts = rng.integers(0, N - 100_000, 200)

        def slices():
            for s in starts:
                a[int(s) : int(s) + 100_000]

        out["array 200 slices of 1e5 (s)"] = best(slices, repeat)
        small = rng.integers(0, N - 100, 3000)
        a[0:100]

        def reads():
            for s in small:
                a[int(s) : int(s) + 100]

        out["small read (us)"] = best(reads, repeat) / len(small) * 1e6
    elif work == "table":
        import pandas as pd

        cities = np.array([f"city-{i:03d}" for i in range(200)], dtype=object)
        df = pd.DataFrame(
            {
                "id": np.arange(ROWS, dtype=np.int64),
                "value": rng.standard_normal(ROWS),
                "city": cities[rng.integers(0, len(cities), ROWS)],
                "day": np.datetime64("2020-01-01") + rng.integers(0, 2000, ROWS).astype("timedelta64[D]"),
            }
        )
        path = os.path.join(tmp, "t.blz")

        def write():
            blz.create(path, df, overwrite=True).close()

        out["table write (s)"] = best(write, repeat)
        t = blz.open(path)
        out["table to_pandas (s)"] = best(lambda: t.to_pandas(), repeat)
        q1 = "SELECT city, sum(value) AS s, avg(value) AS m FROM t GROUP BY city ORDER BY city"
        q2 = "SELECT count(*) FROM t WHERE value > 1.5 AND day >= DATE '2023-01-01'"
        out["sql group by (s)"] = best(lambda: blz.sql(q1, t=t), repeat)
        out["sql filtered count (s)"] = best(lambda: blz.sql(q2, t=t), repeat)
    elif work == "s3":
        x = np.cumsum(rng.standard_normal(4_000_000))
        bucket = os.environ["BLZ_S3_TEST_BUCKET"]
        url = f"s3://{bucket}/house-ab-{os.getpid()}"

        def write():
            blz.create(url, x, chunks=CHUNK, codec="lz4", clevel=5, filter="shuffle", overwrite=True).close()

        out["s3 write (s)"] = best(write, repeat)
        out["s3 read whole (s)"] = best(lambda: blz.open(url)[:], repeat)
    else:
        raise SystemExit(f"unknown workload {work!r}")
    return out


def run(python: str, work: str, repeat: int) -> dict[str, float]:
    tmp = tempfile.mkdtemp(prefix="house-ab-")
    try:
        res = subprocess.run(
            [python, os.path.abspath(__file__), "--child", work, "--tmp", tmp, "--repeat", str(repeat)],
            check=True,
            capture_output=True,
            text=True,
        )
        return json.loads(res.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", help="python of environment A (before)")
    ap.add_argument("--b", help="python of environment B (after)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--s3", action="store_true", help="add the S3 workload (run under tests/s3/run.sh)")
    ap.add_argument("--child")
    ap.add_argument("--tmp")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.tmp, args.repeat)))
        return
    if not (args.a and args.b):
        ap.error("--a and --b are required")
    works = ["array", "table"] + (["s3"] if args.s3 else [])
    results: dict[str, dict[str, list[float]]] = {"A": {}, "B": {}}
    for r in range(args.rounds):
        for work in works:
            for side, py in (("A", args.a), ("B", args.b)):
                for k, v in run(py, work, args.repeat).items():
                    results[side].setdefault(k, []).append(v)
        print(f"round {r + 1} done", file=sys.stderr)
    print(f"{'workload':32} {'A median':>10} {'B median':>10} {'B/A':>6}  (per-round B/A)")
    for k in results["A"]:
        a, b = results["A"][k], results["B"][k]
        ratios = [y / x for x, y in zip(a, b)]
        print(
            f"{k:32} {statistics.median(a):10.4g} {statistics.median(b):10.4g} "
            f"{statistics.median(ratios):6.2f}  ({', '.join(f'{q:.2f}' for q in ratios)})"
        )


if __name__ == "__main__":
    main()
