"""Real tables (the statsmodels CSV files under tests/fixtures/statsmodels): stored from
pandas and read back exactly, and SQL over them answering as duckdb does over the same
frames (missing values are nulls, not numbers)."""

from __future__ import annotations

import math
import pathlib

import numpy as np
import pandas as pd
import pytest

import blz

duckdb = pytest.importorskip("duckdb")

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "statsmodels"
FILES = {
    "co2.csv": {},
    "fertility.csv": {},
    "macrodata.csv": {},
    "modechoice.csv": {"sep": ";"},
}


def read(name: str) -> pd.DataFrame:
    return pd.read_csv(FIXTURES / name, **FILES[name])


@pytest.mark.parametrize("name", sorted(FILES))
def test_frames_from_real_csv_files_come_back_exactly(tmp_path, name):
    df = read(name)
    path = str(tmp_path / "t.blz")
    blz.create(path, df)
    back = blz.open(path).to_pandas()
    pd.testing.assert_frame_equal(back, df)


def rows_of(frame: pd.DataFrame) -> list[tuple]:
    out = []
    for row in frame.itertuples(index=False):
        out.append(tuple(None if (v is None or (isinstance(v, float) and math.isnan(v))) else v for v in row))
    return out


def same_rows(got: pd.DataFrame, want: pd.DataFrame) -> None:
    a, b = rows_of(got), rows_of(want)
    assert len(a) == len(b), (a, b)
    for ra, rb in zip(a, b):
        assert len(ra) == len(rb)
        for x, y in zip(ra, rb):
            if x is None or y is None:
                assert x is None and y is None, (ra, rb)
            elif isinstance(x, (float, np.floating)) or isinstance(y, (float, np.floating)):
                assert math.isclose(float(x), float(y), rel_tol=1e-9, abs_tol=1e-9), (ra, rb)
            else:
                assert x == y, (ra, rb)


CO2_QUERIES = [
    "SELECT count(*) AS n FROM t WHERE co2 > 350",
    "SELECT count(*) AS n FROM t WHERE co2 IS NULL",
    "SELECT count(*) AS n FROM t WHERE NOT (co2 > 350)",
    "SELECT count(co2) AS n, sum(co2) AS s, avg(co2) AS a, min(co2) AS lo, max(co2) AS hi FROM t",
    "SELECT CAST(date / 10000 AS BIGINT) AS y, count(co2) AS n, max(co2) AS hi, min(co2) AS lo "
    "FROM t GROUP BY y ORDER BY y",
    "SELECT a.date AS d, a.co2 AS x, b.co2 AS y FROM t a JOIN t b ON a.co2 = b.co2 AND a.date < b.date "
    "ORDER BY d, x, y LIMIT 50",
]

FERTILITY_QUERIES = [
    'SELECT count(*) AS n FROM t WHERE "2010" > 3',
    'SELECT count("1960") AS n, avg("1960") AS a, max("2013") AS hi FROM t',
    'SELECT "Country Code" AS c FROM t WHERE "2013" IS NULL ORDER BY c',
    'SELECT substr("Country Name", 1, 1) AS l, count("2000") AS n, max("2000") AS hi '
    "FROM t GROUP BY l ORDER BY l",
]


@pytest.mark.parametrize(
    "name,query",
    [("co2.csv", q) for q in CO2_QUERIES] + [("fertility.csv", q) for q in FERTILITY_QUERIES],
)
def test_sql_over_real_tables_answers_as_duckdb(tmp_path, name, query):
    df = read(name)
    t = blz.create(str(tmp_path / "t.blz"), df, chunks=128)
    got = blz.sql(query, t=t).to_pandas()
    con = duckdb.connect()
    con.execute("SET threads=2")
    con.register("t", df)
    want = con.execute(query).df()
    assert list(got.columns) == list(want.columns)
    same_rows(got, want)
