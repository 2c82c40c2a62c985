"""CSV files into tables through blz's own reader (``blz.from_csv``, the library's
``blz::csv``): every statsmodels file imports with its empty fields as nulls, values equal to
pandas' ``read_csv``; dates and timestamps recognised as pandas' ``parse_dates`` and duckdb's
``read_csv`` read them (or kept as strings on request); declared schemas."""

from __future__ import annotations

import pathlib

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import blz

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "statsmodels"
FILES = {"co2.csv": ",", "fertility.csv": ",", "macrodata.csv": ",", "modechoice.csv": ";"}


@pytest.mark.parametrize("name", sorted(FILES))
def test_statsmodels_files_import_as_pandas_reads_them(tmp_path, name):
    sep = FILES[name]
    t = blz.from_csv(FIXTURES / name, tmp_path / "t.blz", delimiter=sep)
    ref = pd.read_csv(FIXTURES / name, sep=sep)
    back = t.to_pandas()
    assert list(back.columns) == list(ref.columns)
    assert len(back) == len(ref)
    for c in ref.columns:
        want, got = ref[c], back[c]
        missing = want.isna().to_numpy()
        # Empty fields are nulls, exactly where pandas has NaN.
        np.testing.assert_array_equal(got.isna().to_numpy(), missing, err_msg=c)
        if t.info()["columns"][c]["dtype"] in ("varstr",):
            assert got[~missing].tolist() == want[~missing].tolist(), c
        else:
            np.testing.assert_array_equal(
                got[~missing].to_numpy(dtype=float), want[~missing].to_numpy(dtype=float), err_msg=c
            )
    # The nulls are nulls in SQL too: count(col) skips them as duckdb's does.
    duckdb = pytest.importorskip("duckdb")
    col = ref.columns[-1]
    q = f'SELECT count("{col}") FROM t'
    want = duckdb.sql(f"SELECT count(\"{col}\") FROM read_csv('{FIXTURES / name}', delim='{sep}')").fetchall()
    assert blz.sql(q, t=t).to_arrow().column(0).to_pylist() == [want[0][0]]


DATES = """\
id,day,when,stamp,ms,note
1,2020-01-31,2020-01-31 10:00:00,2020-01-31T10:00:00Z,2021-06-01T12:00:00.250,x
2,,,,,
3,1999-12-31,2000-02-29 23:59:59,2000-02-29T23:59:59+05:30,2021-06-01T12:00:00.125,y
4,1970-01-01,1970-01-01 00:00:00,1970-01-01T00:00:00-08:00,1970-01-01T00:00:00.001,
"""


def test_dates_and_timestamps_as_pandas_and_duckdb_read_them(tmp_path):
    duckdb = pytest.importorskip("duckdb")
    src = tmp_path / "d.csv"
    src.write_text(DATES)
    t = blz.from_csv(src, tmp_path / "d.blz")
    cols = t.info()["columns"]
    assert cols["day"]["dtype"] == "<M8[D]"
    assert cols["when"]["dtype"] == "<M8[s]"
    assert cols["stamp"]["dtype"] == "<M8[s]" and cols["stamp"]["timezone"] == "UTC"
    assert cols["ms"]["dtype"] == "<M8[ms]"
    back = t.to_pandas()
    ref = pd.read_csv(src, parse_dates=["day", "when", "ms"])
    ref["stamp"] = pd.to_datetime(pd.read_csv(src)["stamp"], utc=True, format="ISO8601")
    for c in ["day", "when", "ms", "stamp"]:
        got, want = back[c], ref[c]
        np.testing.assert_array_equal(got.isna().to_numpy(), want.isna().to_numpy())
        ok = ~want.isna().to_numpy()
        assert list(got[ok]) == list(want[ok]), c
    assert str(back["stamp"].dtype) == "datetime64[s, UTC]"
    # duckdb: the same instants, the same nulls (through Arrow: DATE, TIMESTAMP, TIMESTAMPTZ).
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    want = con.execute(
        f"SELECT day, \"when\", stamp, ms, note FROM read_csv('{src}') ORDER BY id"
    ).fetchall()
    got = blz.sql('SELECT day, "when", stamp, ms, note FROM t ORDER BY id', t=t).to_arrow().to_pylist()
    assert [tuple(r.values()) for r in got] == want
    # Turned off: strings, as duckdb's read_csv(..., auto_detect types without dates).
    off = blz.from_csv(src, tmp_path / "s.blz", dates=False)
    assert {c: v["dtype"] for c, v in off.info()["columns"].items()}["day"] == "varstr"
    day = off.to_pandas()["day"]
    assert day.isna().tolist() == [False, True, False, False]
    assert day[~day.isna()].tolist() == ["2020-01-31", "1999-12-31", "1970-01-01"]


def test_declared_schemas(tmp_path):
    src = tmp_path / "d.csv"
    src.write_text(DATES)
    with pytest.raises(blz.Error, match="line 3, column when"):
        blz.from_csv(src, tmp_path / "n.blz", schema="when:datetime64[s] not null")
    assert not (tmp_path / "n.blz").exists()
    t = blz.from_csv(src, tmp_path / "z.blz", schema="when:datetime64[ms, Europe/Paris], id:int8")
    assert t.info()["columns"]["when"]["timezone"] == "Europe/Paris"
    assert t.info()["columns"]["id"]["dtype"] == "|i1"
    assert pa.table(t).schema.field("when").type == pa.timestamp("ms", tz="Europe/Paris")
    with pytest.raises(ValueError, match="Mars"):
        blz.from_csv(src, tmp_path / "m.blz", schema="when:datetime64[ms, Mars/Base]")
