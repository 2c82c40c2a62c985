"""Low-cardinality string columns stored plain and dictionary-encoded, side by side: size
on disk and the time of a filter (=, IN, LIKE prefix) and a GROUP BY through `blz.sql`, and
the same queries by duckdb over the same frame in memory (2 threads); then the `=` filter as
a `where` query (`t.where_rows`). Medians of
`--repeat` runs, ratios printed.

    target/py-venv/bin/python benches/dict_query.py --rows 1e6 --repeat 5 [--chunks 65536]
"""

import argparse
import json
import os
import statistics
import tempfile
import time

import numpy as np
import pandas as pd

import blz

QUERIES = {
    "eq": "SELECT count(*), sum(x) FROM t WHERE s = 'city17'",
    "in": "SELECT count(*) FROM t WHERE s IN ('city3', 'city40', 'nowhere')",
    "like": "SELECT count(*) FROM t WHERE s LIKE 'city1%'",
    "group": "SELECT s, count(*), sum(x) FROM t GROUP BY s",
}


def timed(f, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def cbytes(path, col):
    sizes = json.load(open(os.path.join(path, "meta", "sizes")))["columns"]
    return sum(v["cbytes"] for k, v in sizes.items() if k == col or k.startswith(col + "/"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=float, default=1e6)
    ap.add_argument("--cities", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--chunks", type=int, default=None, help="rows per chunk (default: blz's)")
    a = ap.parse_args()
    n = int(a.rows)
    rng = np.random.default_rng(7)
    # Clustered by chunk, as real tables loaded in date order often are, plus noise.
    base = (np.arange(n) * a.cities // n + rng.integers(0, 3, n)) % a.cities
    s = np.array([f"city{i}" for i in range(a.cities)], dtype=object)[base]
    df = pd.DataFrame({"s": s, "x": rng.random(n)})
    import duckdb

    con = duckdb.connect()
    con.execute("SET threads TO 2")
    con.register("t", df)
    with tempfile.TemporaryDirectory() as d:
        plain = blz.create(os.path.join(d, "plain.blz"), df, dictionary=False, chunks=a.chunks)
        enc = blz.create(os.path.join(d, "dict.blz"), df, dictionary=True, chunks=a.chunks)
        print(f"{n} rows, {a.cities} distinct strings")
        print(f"column s on disk: plain {cbytes(plain.path, 's'):,} B, dictionary {cbytes(enc.path, 's'):,} B")
        print(f"{'query':8} {'plain ms':>9} {'dict ms':>9} {'duckdb ms':>9} {'dict speedup':>12} {'dict vs duckdb':>14}")
        for name, q in QUERIES.items():
            want = sorted(map(tuple, con.execute(q).fetchall()))
            for tb in (plain, enc):
                got = blz.sql(q, t=tb).to_pandas()
                got = sorted(tuple(r) for r in got.astype(object).itertuples(index=False))
                assert len(got) == len(want) and all(
                    g[0] == w[0] if isinstance(g[0], str) else True for g, w in zip(got, want)
                ), (name, got[:3], want[:3])
            tp = timed(lambda: blz.sql(q, t=plain).to_arrow(), a.repeat)
            td = timed(lambda: blz.sql(q, t=enc).to_arrow(), a.repeat)
            tq = timed(lambda: con.execute(q).fetchall(), a.repeat)
            print(f"{name:8} {tp * 1e3:9.1f} {td * 1e3:9.1f} {tq * 1e3:9.1f} {tp / td:11.2f}x {tq / td:13.2f}x")
        w = "s == 'city17'"
        assert np.array_equal(plain.where_rows(w), enc.where_rows(w))
        tp = timed(lambda: plain.where_rows(w), a.repeat)
        td = timed(lambda: enc.where_rows(w), a.repeat)
        tq = timed(lambda: np.flatnonzero(df["s"].to_numpy() == "city17"), a.repeat)
        print(f"{'where':8} {tp * 1e3:9.1f} {td * 1e3:9.1f} {tq * 1e3:9.1f} {tp / td:11.2f}x {tq / td:13.2f}x  (last column: numpy on the frame's object array)")


if __name__ == "__main__":
    main()
