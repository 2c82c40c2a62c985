"""blz.sql's min and max over float columns, checked against duckdb on random tables with NaN.

duckdb orders every NaN above every number: ``max`` is NaN when a group holds a NaN, ``min``
is NaN only when all of the group is. DataFusion 55's own grouped float min/max answer by
the order of the rows (apache/datafusion#24432); blz registers its own (src/sql/minmax.rs).
The rows come in many orders (shuffled, NaN first, NaN last) and in small chunks, so that
groups span chunks and the engine's partitions.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import blz

duckdb = pytest.importorskip("duckdb")

SPECIAL = [np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf]


def answers(rows) -> dict:
    """{group: (min(x), max(x), min(y), max(y))} from rows in any order."""
    return {r[0]: tuple(r[1:]) for r in rows}


def same(a, b) -> bool:
    # duckdb keeps whichever of -0.0 and +0.0 it met first: zeros compare by value.
    if a is None or b is None:
        return a is None and b is None
    return (math.isnan(a) and math.isnan(b)) or a == b


def check(tmp_path, name: str, g: np.ndarray, x: np.ndarray, chunks: int) -> None:
    cols = {"g": g.astype(np.int64), "x": x.astype(np.float64), "y": x.astype(np.float32)}
    t = blz.create(str(tmp_path / f"{name}.blz"), cols, chunks=chunks, overwrite=True)
    q = "SELECT g, min(x), max(x), min(y), max(y) FROM t GROUP BY g"
    r = blz.sql(q, t=t).to_arrow()
    got = answers(zip(*[c.to_pylist() for c in r.columns]))
    frame = pa.table(cols)
    con = duckdb.connect()
    con.register("t", frame)
    want = answers(con.execute(q).fetchall())
    assert sorted(got) == sorted(want)
    for k, w in want.items():
        assert all(same(a, b) for a, b in zip(got[k], w)), (k, got[k], w)
    q1 = "SELECT min(x) AS lo, max(x) AS hi FROM t"
    got1 = blz.sql(q1, t=t).to_arrow().to_pylist()[0]
    want1 = con.execute(q1).fetchall()[0]
    assert same(got1["lo"], want1[0]) and same(got1["hi"], want1[1]), (got1, want1)


@settings(max_examples=40, derandomize=True, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 3_000),
    groups=st.integers(1, 30),
    nan_share=st.sampled_from([0.0, 0.01, 0.1, 0.5, 0.95, 1.0]),
    order=st.sampled_from(["shuffled", "nan_first", "nan_last"]),
    chunks=st.sampled_from([5, 64, 1_000]),
)
def test_grouped_min_max_with_nan_match_duckdb(tmp_path_factory, seed, n, groups, nan_share,
                                               order, chunks):
    rng = np.random.default_rng(seed)
    g = rng.integers(0, groups, size=n)
    x = np.round(rng.standard_normal(n) * 100, 2)
    special = rng.random(n) < 0.05
    x[special] = rng.choice(SPECIAL, size=int(special.sum()))
    x[rng.random(n) < nan_share] = np.nan
    with np.errstate(invalid="ignore"):
        negative_nan = np.array([np.inf]) - np.array([np.inf])  # sign bit set on x86
    x[rng.random(n) < nan_share / 2] = negative_nan[0]
    if order != "shuffled":
        nan = np.isnan(x)
        idx = np.concatenate([np.flatnonzero(nan), np.flatnonzero(~nan)])
        if order == "nan_last":
            idx = idx[::-1]
        g, x = g[idx], x[idx]
    check(tmp_path_factory.mktemp("minmax"), "t", g, x, chunks)


def test_the_reported_case_nan_before_the_maximum(tmp_path):
    # One group whose NaN comes first: the engine's own grouped max gave the number after it.
    g = np.zeros(6, dtype=np.int64)
    x = np.array([np.nan, 112.0, 747.0, 3.0, np.nan, -1.0])
    check(tmp_path, "reported", g, x, chunks=2)
    t = blz.open(str(tmp_path / "reported.blz"))
    r = blz.sql("SELECT g, max(x) AS m, min(x) AS lo FROM t GROUP BY g", t=t).to_arrow()
    assert math.isnan(r.column("m")[0].as_py())
    assert r.column("lo")[0].as_py() == -1.0
