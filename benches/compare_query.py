"""Queries over a table: blz's SQL (DataFusion) against duckdb over parquet, in one run.

The data is issue 23's: N rows (default 1e7) x 4 columns: ``k`` int64 sorted, ``x`` and ``y``
float64, ``g`` int64 in 0..99; the same rows written as a blz table (default options) and as
a parquet file by pyarrow with lz4 (default row groups). duckdb runs with 2 threads.

Queries:
- selective: ``SELECT sum(x) FROM t WHERE k BETWEEN a AND a + 10000`` (a random each round);
- group by: ``SELECT g, avg(x) FROM t GROUP BY g``;
- full sum: ``SELECT sum(x) FROM t``.

Each round runs every engine once, alternating, and the medians are compared: the ratio is
duckdb's time over blz's (above 1: blz is faster). Each blz query opens the table, plans and
runs, as ``blz.sql(query, t=path)`` does; each duckdb one reads the parquet file by name.

    target/py-venv/bin/python benches/compare_query.py [--n 1e7] [--rounds 15] [--dir DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np


def make_data(n: int, seed: int = 7) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    k = np.cumsum(rng.integers(1, 4, size=n, dtype=np.int64))
    return {
        "k": k,
        "x": rng.random(n),
        "y": rng.standard_normal(n),
        "g": rng.integers(0, 100, size=n, dtype=np.int64),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=float, default=1e7)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    n = int(args.n)

    import blz
    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    work = args.dir or tempfile.mkdtemp(prefix="blz-query-")
    cols = make_data(n)
    tpath = os.path.join(work, "t.blz")
    ppath = os.path.join(work, "t.parquet")
    t0 = time.perf_counter()
    blz.create(tpath, cols, overwrite=True)
    t1 = time.perf_counter()
    pq.write_table(pa.table(cols), ppath, compression="lz4")
    t2 = time.perf_counter()
    print(f"{n} rows; blz table written in {t1 - t0:.2f} s, parquet (lz4) in {t2 - t1:.2f} s")

    con = duckdb.connect()
    con.execute("SET threads = 2")
    rng = np.random.default_rng(11)
    kmax = int(cols["k"][-1])

    def blz_q(q: str) -> float:
        return blz.sql(q, t=tpath).to_arrow().column(0)[0].as_py()

    def duck_q(q: str) -> float:
        return con.execute(q.replace("FROM t", f"FROM read_parquet('{ppath}')")).fetchall()[0][0]

    queries = {
        "selective": lambda a: f"SELECT sum(x) FROM t WHERE k BETWEEN {a} AND {a + 10000}",
        "group by": lambda a: "SELECT g, avg(x) FROM t GROUP BY g",
        "full sum": lambda a: "SELECT sum(x) FROM t",
    }
    # Warm both (page cache, first planning).
    for make in queries.values():
        blz_q(make(0))
        duck_q(make(0))

    print(f"{'query':<10} {'blz ms':>8} {'duckdb ms':>10} {'duckdb/blz':>11}")
    for name, make in queries.items():
        times: dict[str, list[float]] = {"blz": [], "duckdb": []}
        for _ in range(args.rounds):
            a = int(rng.integers(0, max(1, kmax - 10000)))
            q = make(a)
            for engine, run in (("blz", blz_q), ("duckdb", duck_q)):
                s = time.perf_counter()
                got = run(q)
                times[engine].append(time.perf_counter() - s)
                if engine == "blz":
                    want = got
                elif name != "group by":
                    assert abs(got - want) <= 1e-6 * max(1.0, abs(want)), (q, got, want)
        b = statistics.median(times["blz"]) * 1e3
        d = statistics.median(times["duckdb"]) * 1e3
        print(f"{name:<10} {b:8.1f} {d:10.1f} {d / b:10.2f}x")


if __name__ == "__main__":
    main()
